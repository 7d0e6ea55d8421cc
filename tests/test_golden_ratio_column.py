"""The Powershift's ``ratio`` became input speed over output speed: only that column of its golden traces moved.

Until issue 35 the Powershift's ``ratio`` output was ``-w_4 / w_1`` (output over input, as the paper's fig. 7
plots it), while every other plant's ``ratio`` was input over output.  It is now ``w_1 / w_out = -w_1 / w_4``
(0 below ``RATIO_MIN_OUTPUT_SPEED``, limited to +-``RATIO_LIMIT``), and ``tests/data/golden_traces.json`` was
regenerated for it.  ``tests/data/golden_traces_before_ratio.json`` is the golden file as it was just before
(``git show`` of it at the commit before the change), kept so this check needs no repository history.

A golden fingerprint hashes the whole table, so the check rebuilds the old table from a fresh run: the
run's ``ratio`` column replaced by the old definition must hash to the old fingerprint (every other column,
and the old ratio, bit for bit), and the run itself to the new fingerprint.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from golden import CASES, GOLDEN_FILE, case_id, run_case, table_sha256

from plant_models.plants.powershift import RATIO_LIMIT, RATIO_MIN_OUTPUT_SPEED

BEFORE_FILE = Path(__file__).parent / "data" / "golden_traces_before_ratio.json"
NEW = json.loads(GOLDEN_FILE.read_text())
OLD = json.loads(BEFORE_FILE.read_text())
POWERSHIFT = [c for c in CASES if c[0].startswith("powershift")]


def test_the_powershift_cases_are_the_only_fingerprints_that_changed():
    assert sorted(NEW) == sorted(OLD)
    changed = sorted(k for k in NEW if NEW[k] != OLD[k])
    assert changed == sorted(case_id(*c) for c in POWERSHIFT)
    for k in changed:  # the same run: rows, columns, events and status; the table's hash and last row moved
        same = {f for f in NEW[k] if NEW[k][f] == OLD[k][f]}
        assert same == {"rows", "columns", "events", "events_sha256", "status_or"}
        cols = NEW[k]["columns"].split(",")
        differ = [c for c, a, b in zip(cols, NEW[k]["last_row"], OLD[k]["last_row"]) if a != b]
        assert differ == ["ratio"]


@pytest.mark.parametrize("case", POWERSHIFT, ids=[case_id(*c) for c in POWERSHIFT])
def test_every_other_column_is_bit_identical_and_the_ratio_is_the_inverse(case):
    table, trace = run_case(*case)
    key = case_id(*case)
    assert table_sha256(table) == NEW[key]["trace_sha256"]
    names = ["t"] + list(trace.names)
    w1, w4 = table[:, names.index("w_1")], table[:, names.index("w_4")]
    k = names.index("ratio")
    new = table[:, k].copy()

    # the old column, computed as the old compiled step did (-w_4 / w_1, 0 for |w_1| <= 1e-9)
    with np.errstate(divide="ignore", invalid="ignore"):
        old = np.where(np.abs(w1) > 1e-9, -w4 / w1, 0.0)
    table[:, k] = old
    assert table_sha256(table) == OLD[key]["trace_sha256"]  # every other column bit for bit, and the old ratio

    # the new column: -w_1 / w_4 where the output turns, limited; exactly what the step computes
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.clip(np.where(np.abs(w4) > RATIO_MIN_OUTPUT_SPEED, -w1 / w4, 0.0), -RATIO_LIMIT, RATIO_LIMIT)
    assert np.array_equal(new, want)
    # ...the inverse of the old one, sign kept, wherever both are defined (and within the limit)
    defined = (np.abs(w4) > RATIO_MIN_OUTPUT_SPEED) & (np.abs(w1) > 1e-9) & (np.abs(new) < RATIO_LIMIT)
    assert defined.mean() > 0.99  # the output turns through these scenarios
    np.testing.assert_allclose(new[defined] * old[defined], 1.0, rtol=0, atol=4e-16)
    assert np.all(np.sign(new[defined]) == np.sign(old[defined]))
