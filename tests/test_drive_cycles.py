"""The drive cycles' data (examples/drive_cycles.py): the WLTC class 3b's published facts."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from drive_cycles import tractor_field, wltc_class3b  # noqa: E402


def test_wltc_class3b_has_the_regulations_duration_top_speed_and_distances():
    t, v = wltc_class3b()
    assert t[0] == 0.0 and t[-1] == 1800.0 and np.all(np.diff(t) == 1.0)
    assert round(v.max() * 3.6, 1) == 131.3 and t[np.argmax(v)] == 1724.0
    assert v[0] == 0.0 and v[-1] == 0.0
    dist_km = np.trapezoid(v, t) / 1000.0
    assert abs(dist_km - 23.27) <= 0.005 * 23.27  # GTR 15: 23 266 m
    # the phases' distances (GTR 15, Annex 1: 3095, 4756, 7162, 8254 m)
    for (a, b), d in zip([(0, 589), (589, 1022), (1022, 1477), (1477, 1800)], [3095, 4756, 7162, 8254]):
        assert abs(np.trapezoid(v[a:b + 1], t[a:b + 1]) - d) < 1.0


def test_tractor_field_cycle_steps_the_drawbar_pull():
    t, v, f = tractor_field()
    assert np.all(np.diff(t) > 0) and t[-1] == 100.0
    assert f.max() == 28000.0 and f[0] == 0.0 and v.max() * 3.6 == 9.0
