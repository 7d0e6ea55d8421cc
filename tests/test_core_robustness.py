"""Robustness: bad inputs, roll-back, budgets, state save/restore, inputs that jump between steps."""

from __future__ import annotations

import math

import numpy as np
import pytest

from plant_models.core import layout as L
from plant_models.core import Core, CoreSpec, Row, Settings, Spring
from plant_models.registry import load_plant


SHIFT = {"p_c1": [(0.0, 16.0), (0.05, 16.0), (0.25, 0.0)], "p_c2": [(0.0, 0.0), (0.05, 0.0), (0.3, 16.0)]}


def advance(plant, steps, dt=1e-3):
    """Step a Powershift plant through the single swap SHIFT (first-order hold on the pressures)."""
    for _ in range(steps):
        t0 = plant.time
        for name, pts in SHIFT.items():
            ts, vs = zip(*pts)
            a, b = float(np.interp(t0, ts, vs)), float(np.interp(t0 + dt, ts, vs))
            k = plant.input_index(name)
            plant.u[k] = a
            plant.u_rate[k] = (b - a) / dt
        plant.step(dt)


def shifting_powershift():
    """A Powershift plant 0.15 s into a single swap (clutch 1 draining, clutch 2 filling)."""
    plant = load_plant("powershift")
    plant.reset({"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0, "engine_torque": 150.0, "load_torque": 300.0})
    advance(plant, 150)
    assert plant.core.new_events() == []
    return plant


def data_except_inputs(core):
    """Copies of df and di without the input fields and the status flag (what a rejected step must
    leave untouched)."""
    sz = core.sizes
    df = core.df.copy()
    for slot, size in ((L.DF_U_TAU, sz.n), (L.DF_U_TAU_RATE, sz.n), (L.DF_U_ACT, sz.g), (L.DF_U_ACT_RATE, sz.g),
                       (L.DF_PLANT, sz.plant_ndf)):
        off = int(core.mi[slot])
        df[off:off + size] = 0.0
    di = core.di.copy()
    di[int(core.mi[L.DI_FLAGS]) + L.FLAG_STATUS] = 0
    return df, di


@pytest.mark.parametrize("what", ["torque_nan", "torque_inf", "torque_rate_nan", "command_nan", "command_rate_inf",
                                  "dt_zero", "dt_negative", "dt_nan", "dt_inf"])
def test_bad_input_is_rejected_and_leaves_the_state_untouched(what):
    plant = shifting_powershift()
    c = plant.core
    from plant_models.core.entry import step_arrays as core_step

    before = data_except_inputs(c)
    saved = c.get_state()
    inputs = [a.copy() for a in (c.u_torque, c.u_torque_rate, c.u_act, c.u_act_rate)]
    dt = 1e-3
    if what == "torque_nan":
        c.u_torque[0] = math.nan
    elif what == "torque_inf":
        c.u_torque[3] = math.inf
    elif what == "torque_rate_nan":
        c.u_torque_rate[0] = math.nan
    elif what == "command_nan":
        c.u_act[1] = math.nan
    elif what == "command_rate_inf":
        c.u_act_rate[0] = -math.inf
    else:
        dt = {"dt_zero": 0.0, "dt_negative": -1e-3, "dt_nan": math.nan, "dt_inf": math.inf}[what]
    st = core_step(c.mf, c.mi, c.df, c.di, dt)
    assert st == L.ST_BAD_INPUT
    assert c.status == L.ST_BAD_INPUT
    after = data_except_inputs(c)
    assert np.array_equal(before[0], after[0]) and np.array_equal(before[1], after[1])
    # with good inputs again it continues exactly as if the bad call had never happened
    for view, good in zip((c.u_torque, c.u_torque_rate, c.u_act, c.u_act_rate), inputs):
        view[:] = good
    assert core_step(c.mf, c.mi, c.df, c.di, 1e-3) & (L.ST_BAD_INPUT | L.ST_NONFINITE) == 0
    got = c.get_state()
    c.set_state(saved)
    core_step(c.mf, c.mi, c.df, c.di, 1e-3)
    expect = c.get_state()
    assert np.array_equal(expect[0], got[0]) and np.array_equal(expect[1], got[1])


def test_bad_plant_input_is_rejected_by_the_step():
    plant = shifting_powershift()
    c = plant.core
    y_before = c.y.copy()
    plant.u[plant.input_index("engine_torque")] = math.nan
    assert plant.step(1e-3) == L.ST_BAD_INPUT
    assert np.array_equal(c.y, y_before)
    assert plant.y[plant.output_index("status")] == L.ST_BAD_INPUT


def test_get_state_set_state_resumes_bit_exactly():
    plant = shifting_powershift()
    c = plant.core
    saved = plant.get_state()
    trace = []
    for _ in range(300):  # through the rest of the shift: breakaway, sync, stick
        advance(plant, 1)
        trace.append(plant.y.copy())
    events = c.new_events()
    assert sorted(k for _, _, k in events) == [L.EV_STICK, L.EV_BREAKAWAY]
    end = plant.get_state()
    plant.set_state(saved)
    for k in range(300):
        advance(plant, 1)
        assert np.array_equal(plant.y, trace[k])
    again = plant.get_state()
    assert np.array_equal(end[0], again[0]) and np.array_equal(end[1], again[1])
    # events after the restored point are reported again, in the same order
    assert c.new_events() == events


def test_set_state_rejects_a_state_of_another_core(two_shafts):
    a = two_shafts()
    b = Core(CoreSpec(("x", "y", "z"), (1.0, 1.0, 1.0), (0.0, 0.0, 0.0), (Row("r", 0, 1),)))
    with pytest.raises(ValueError):
        a.set_state(b.get_state())


def test_non_finite_step_is_rolled_back(two_shafts):
    """A torque that overflows the state: the step is undone, reported, and counted."""
    c = two_shafts(K=10.0, w0=(1.0, 1.0), torque=(1.0, 0.0), engaged=True)
    c.step(1e-3)
    y = c.y.copy()
    t = c.time[0]
    c.u_torque[0] = 1e308
    c.u_torque_rate[0] = 1e308
    st = c.step(1e-3)
    assert st == L.ST_NONFINITE
    assert np.array_equal(c.y, y) and c.time[0] == t
    assert c.counters[L.CNT_ROLLBACKS] == 1
    assert np.all(np.isfinite(c.mu)) and np.all(np.isfinite(c.delta))
    c.u_torque[0] = 1.0
    c.u_torque_rate[0] = 0.0
    assert c.step(1e-3) == L.ST_OK


def test_input_jump_beyond_capacity_between_steps_breaks_away_at_the_step_start(two_shafts):
    """Regression: a torque that jumps between two steps (a new CAN value) so that a stuck row needs
    more than its capacity must break the row away at the start of that step, not leave it stuck
    with a force above K."""
    c = two_shafts(J1=1.0, J2=1.0, K=10.0, k=8.0, w0=(2.0, 2.0), torque=(5.0, 0.0), engaged=True)
    for _ in range(10):
        c.step(1e-3)
    assert c.mode[0] == L.MODE_STUCK
    c.u_torque[0] = 30.0  # needs 15 > 10
    c.step(1e-3)
    assert c.mode[0] == L.MODE_SLIP
    ev = c.new_events()
    assert [(k) for _, _, k in ev] == [L.EV_BREAKAWAY]
    assert ev[0][0] == pytest.approx(0.010, abs=1e-15)
    assert abs(c.mu[0]) == 8.0


def test_event_budget_is_reported_and_the_step_still_completes():
    """Many rows synchronising in one step with a budget of one event sub-step."""
    n = 6
    rows = tuple(Row(f"r{i}", i, i + 1) for i in range(n - 1))
    spec = CoreSpec(tuple(f"s{i}" for i in range(n)), (1.0,) * n, (0.0,) * n, rows,
                    settings=Settings(max_event_substeps=1))
    c = Core(spec)
    c.u_act[:] = c.act[:] = 1.0
    c.omega[:] = [1e-3 * (n - i) for i in range(n)]  # every row slips 1e-3: all stick within the step
    c.start([])
    st = c.step(5e-3)
    assert st & L.ST_EVENT_BUDGET
    assert c.counters[L.CNT_BUDGET_HITS] == 1
    assert np.all(np.isfinite(c.omega))
    # later steps catch up
    for _ in range(5):
        c.step(5e-3)
    assert np.all(c.mode == L.MODE_STUCK)
    assert np.all(c.delta == 0.0)


def test_solver_iteration_cap_is_reported_and_the_mode_settles():
    """The default cap (4 g + 8 active-set iterations) is ample for a 4-row chain where three
    rows break at once.  Capped at 1 iteration, a solve that needs more stops early and says so
    (ST_SOLVER_LIMIT); the next sub-steps find the mode misfit and solve again from the bound
    states reached, so the mode settles within a couple of steps, with every stuck force within
    its capacity and every slipping force dissipative."""
    n = 5
    rows = tuple(Row(f"r{i}", i, i + 1) for i in range(n - 1))

    def make(cap):
        spec = CoreSpec(tuple(f"s{i}" for i in range(n)), (1.0, 2.0, 3.0, 4.0, 5.0), (0.0,) * n, rows,
                        settings=Settings(max_solver_iter=cap))
        c = Core(spec)
        c.u_act[:] = c.act[:] = (3.0, 1.0, 4.0, 1.5)
        c.u_torque[:] = (30.0, -20.0, 10.0, -15.0, 5.0)
        return c, c.start(list(range(n - 1)))

    c, st = make(0)
    assert st & L.ST_SOLVER_LIMIT == 0
    assert 1 <= c.counters[L.CNT_SOLVER_ITER_MAX] <= 4 * 4 + 8
    reference_modes = c.mode.copy()
    c, st = make(1)
    assert st & L.ST_SOLVER_LIMIT
    for _ in range(2):
        c.step(1e-3)
    for _ in range(5):
        assert c.step(1e-3) & L.ST_SOLVER_LIMIT == 0
        stuck = c.mode == L.MODE_STUCK
        assert np.all(np.abs(c.mu[stuck]) <= c.cap_static[stuck] * (1 + 1e-12))
        assert np.all(c.mu * c.delta <= 0.0)
        assert np.all(np.isfinite(c.mu))
    assert np.all(reference_modes == L.MODE_SLIP) == np.all(c.mode == L.MODE_SLIP)


def test_supported_step_sizes_keep_stuck_rows_exact():
    """dt from 1 ms to 50 us on the damper-clutch network (springs, drag, a lagged clutch)."""
    rows = (Row("clutch", 0, 1, act_lag_s=0.01), Row("friction", 1, 2))
    springs = (Spring("damper", 1, 2, stiffness=500.0, damping=1.5),)
    spec = CoreSpec(("e", "d", "t"), (9.0, 5.0, 13.0), (12.0, 1.0, 7.0), rows, springs)
    finals = []
    for dt in (1e-3, 5e-4, 2e-4, 1e-4, 5e-5):
        c = Core(spec)
        c.u_act[:] = (400.0, 50.0)
        c.act[1] = 50.0
        c.u_torque[:] = (300.0, 0.0, 0.0)
        c.start([])
        st = c.run(dt, int(round(1.0 / dt)))
        assert st & ~(L.ST_OVERCONSTRAINED | L.ST_LOCKED) == 0
        stuck = c.mode == L.MODE_STUCK
        assert np.all(c.delta[stuck] == 0.0)
        finals.append(c.omega.copy())
    finals = np.array(finals)
    assert np.abs(finals - finals[-1]).max() < 1e-6
