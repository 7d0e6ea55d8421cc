"""A step rolled back for a non-finite result leaves a kinematic clutch's phase as it was before the step.

The kinematic rows ("Clutch Modeling - Part II: Kinematic Clutches") change phase at a step's start
(an engage command starts an engagement: phase, its start time, the prescribed relative acceleration).
A step whose result is not finite is rolled back to its start; the phase change belongs to that step
and must go with it, so that the core continues exactly as if the step had never been taken.
"""

from __future__ import annotations

import numpy as np

from plant_models.core import Core, CoreSpec, Row
from plant_models.core import layout as L


def _core() -> Core:
    core = Core(CoreSpec(("drive", "driven"), (1.0, 2.0), (0.0, 0.5),
                         (Row("k", 0, 1, 1.0, -1.0, kinematic_shift_time=0.8),)))
    core.start([])
    core.u_torque[:] = [100.0, 0.0]
    for _ in range(200):  # the driving shaft runs up: the clutch slips when it is commanded
        assert core.step(1e-3) == 0
    return core


def _snapshot(core: Core):
    return (core.df.copy(), core.di.copy())


def test_a_rolled_back_step_undoes_the_phase_change_made_at_its_start():
    ref, bad = _core(), _core()
    assert np.array_equal(ref.df, bad.df) and ref.kinematic_phase[0] == L.KIN_DISENGAGED
    before = (int(bad.kinematic_phase[0]), int(bad.drive[0]), float(bad.drive_accel[0]))
    y0 = bad.y.copy()
    # the engage command and a torque whose result overflows, in one step
    bad.u_act[0] = 1.0
    bad.u_torque[0] = 1.7e308
    st = bad.step(1e-3)
    assert st & L.ST_NONFINITE
    assert np.array_equal(bad.y, y0) and bad.time[0] == ref.time[0]
    assert (int(bad.kinematic_phase[0]), int(bad.drive[0]), float(bad.drive_accel[0])) == before
    # the command withdrawn and the torque corrected: the core goes on exactly as the one without the bad step
    bad.u_act[0] = 0.0
    bad.u_torque[0] = 100.0
    for _ in range(300):
        assert ref.step(1e-3) == bad.step(1e-3) == 0
        assert np.array_equal(ref.y, bad.y)
    assert ref.kinematic_phase[0] == bad.kinematic_phase[0] == L.KIN_DISENGAGED
    assert bad.counters[L.CNT_ROLLBACKS] == 1


def test_after_a_roll_back_the_engagement_starts_again_with_the_next_step():
    ref, bad = _core(), _core()
    bad.u_act[0] = 1.0
    bad.u_torque[0] = 1.7e308
    assert bad.step(1e-3) & L.ST_NONFINITE
    bad.u_torque[0] = 100.0
    ref.u_act[0] = 1.0
    for _ in range(1200):  # the engagement (0.8 s) and beyond, identical to the core that never saw the bad step
        assert ref.step(1e-3) == bad.step(1e-3)
        assert np.array_equal(ref.y, bad.y)
        assert ref.kinematic_phase[0] == bad.kinematic_phase[0]
    assert bad.kinematic_phase[0] == L.KIN_ENGAGED
