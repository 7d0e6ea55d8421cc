"""docs/drive_cycles.md's numbers about the WLTC shifts, checked against the run they describe.

The doc once called the largest shift energy "an upshift under full pedal";
the run's largest is a downshift.  This test runs the 8HP car through the
whole WLTC class 3b with the reference TCU (offline, rows every 0.1 s, as
scripts/drive_cycle_figures.py does) and reads the doc's sentences.
"""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest

from server_support import ROOT

sys.path.insert(0, str(ROOT / "examples"))
import drive_cycle_results as dc  # noqa: E402

pytestmark = pytest.mark.slow  # a full 1800 s cycle: about 10 s of CPU


@pytest.fixture(scope="module")
def shifts():
    return dc.shifts(dc.run_cycle("car", every=100))


def _doc() -> str:
    return " ".join((ROOT / "docs" / "drive_cycles.md").read_text().split())


def test_the_docs_shift_count_and_energies_are_the_runs(shifts):
    doc = _doc()
    en = np.array([s["energy_J"] for s in shifts]) / 1e3
    up = np.array([s["to"] > s["from"] for s in shifts])
    m = re.search(r"\*\*Shifts: (\d+)\*\* \((\d+) up, (\d+) down\)", doc)
    assert m and [int(x) for x in m.groups()] == [len(shifts), int(up.sum()), int((~up).sum())]
    m = re.search(r"median ([\d.]+) kJ \(upshifts ([\d.]+) kJ, downshifts ([\d.]+) kJ\)", doc)
    assert m and [float(x) for x in m.groups()] == [round(float(np.median(v)), 1)
                                                    for v in (en, en[up], en[~up])]


def test_the_docs_largest_shift_energy_names_the_shift_it_is(shifts):
    doc = _doc()
    big = max(shifts, key=lambda s: s["energy_J"])
    m = re.search(r"largest ([\d.]+) kJ \(the (\d) -> (\d) (up|down)shift at ([\d.]+) s", doc)
    assert m, "the doc does not name the largest shift as 'largest X kJ (the A -> B downshift at T s'"
    kj, a, b, kind, at = m.groups()
    assert float(kj) == round(big["energy_J"] / 1e3, 1)
    assert (int(a), int(b)) == (big["from"], big["to"])
    assert kind == ("up" if big["to"] > big["from"] else "down")
    assert float(at) == pytest.approx(big["start_s"], abs=0.05)
