"""Events inside a step: double zero crossings, kiss points, near-simultaneous events, cascades, the log."""

from __future__ import annotations

import math

import numpy as np
import pytest
from references.reference_solutions import RefNetwork, RefRow, ReferenceSolver

from plant_models.core import layout as L
from plant_models.core import Core, CoreSpec, Row, Settings


def test_zero_crossing_and_back_inside_one_step_is_detected(two_shafts, foh):
    """delta(t) = 1e-4 - t + 2000 t^2 dips through zero at 0.138 ms and is positive again at the
    step end (1.1e-3 at 1 ms).  The row must stick at the first crossing (the force it needs there,
    0.22 N m, is far below K), not slip through."""
    J, k = 1.0, 1e-3
    c = two_shafts(J1=J, J2=J, K=100.0, k=k, w0=(1e-4, 0.0))
    rate = 4000.0  # torque on shaft a: -1 + 4000 t (+2k compensates the Coulomb force while slipping)

    def torque(t):
        return (-1.0 + 2 * k + rate * t, 0.0)

    foh(c, 1e-3, 1, torque=torque)
    t_cross = (1.0 - math.sqrt(1.0 - 8000.0 * 1e-4)) / 4000.0
    ev = c.new_events()
    assert [e[2] for e in ev] == [L.EV_STICK]
    assert ev[0][0] == pytest.approx(t_cross, abs=1e-12)
    assert c.mode[0] == L.MODE_STUCK and c.delta[0] == 0.0
    # the stuck force is the closed form at the step end: -(J2 t1 - J1 t2)/(J1 + J2)
    assert c.mu[0] == pytest.approx(-torque(1e-3)[0] / 2.0, rel=1e-12)


def test_free_row_at_zero_speed_engages_at_the_kiss_point_inside_the_step(foh):
    """Two equal shafts turning together with no capacity (free row at zero slip).  The clutch
    pressure crosses the kiss point 0.4 ms into a step: the row must stick there, not one step later."""
    row = Row("c", 0, 1, act_gain=0.01, act_preload=500.0, gain_static=0.1, gain_kinetic=0.1)
    c = Core(CoreSpec(("a", "b"), (1.0, 1.0), (0.0, 0.0), (row,)))
    c.omega[:] = (20.0, 20.0)
    c.u_torque[:] = (3.0, 3.0)
    c.start([])
    assert c.mode[0] == L.MODE_FREE
    p_kiss = 500.0 / 0.01
    dt = 1e-3
    t_kiss = 0.0104  # in the 11th step
    slope = 1e7  # Pa/s
    foh(c, dt, 12, command=lambda t: [p_kiss + slope * (t - t_kiss)] if t > 0 else [0.0])
    ev = c.new_events()
    assert [e[2] for e in ev] == [L.EV_STICK]
    assert ev[0][0] == pytest.approx(t_kiss, abs=1e-12)
    assert c.mode[0] == L.MODE_STUCK and c.delta[0] == 0.0


def test_kiss_point_of_a_lagged_actuator_keeps_fourth_order():
    """A slipping clutch whose pressure rises through a first-order lag: the Coulomb force starts
    at the kiss point, a kink in time.  Stepping across it would cost RK4 two orders; located in
    closed form, the error against the reference falls ~16x per halving of the step."""
    row = Row("c", 0, 1, act_lag_s=0.02, act_gain=0.01, act_preload=500.0, gain_static=0.1, gain_kinetic=0.08)
    spec = CoreSpec(("a", "b"), (0.3, 1.0), (0.01, 0.05), (row,))
    p_cmd = 3e5  # step command at t = 0; kiss (5e4 Pa) reached after T ln(6/5) = 3.65 ms
    net = RefNetwork(spec.inertia, spec.drag, [RefRow(0, 1, 1.0, -1.0, lambda t: p_cmd, lag=0.02, gain=0.01,
                                                      preload=500.0, gain_static=0.1, gain_kinetic=0.08)],
                     lambda t: np.zeros(2))
    T = 0.05
    sol = ReferenceSolver(net, rtol=1e-13, atol=1e-13).simulate(T, (100.0, 0.0), x0=[0.0])
    errs = []
    for dt in (2e-3, 1e-3, 5e-4):
        c = Core(spec)
        c.omega[:] = (100.0, 0.0)
        c.u_act[0] = p_cmd
        c.start([])
        c.run(dt, int(round(T / dt)))
        assert c.mode[0] == L.MODE_SLIP
        errs.append(np.abs(c.omega - sol.w(T)[0]).max())
    assert errs[0] / errs[1] > 10.0 and errs[1] / errs[2] > 10.0, errs


def test_two_events_in_one_step_are_located_in_the_right_order(foh):
    """Two independent pairs of unit masses.  Pair A's slip is 1 - 2500 t + 1e6 t^2 (it reaches zero
    at 0.5 ms), pair B's 0.6 - 1000 t (zero at 0.6 ms).  From the step's end values alone A looks
    later (0.67 ms); both must still stick at their exact times, A first."""
    rows = (Row("A", 0, 1, gain_kinetic=1.0 / 2000.0), Row("B", 2, 3, gain_kinetic=1.0 / 2000.0))
    c = Core(CoreSpec(("a0", "a1", "b0", "b1"), (1.0,) * 4, (0.0,) * 4, rows))
    c.u_act[:] = (2000.0, 2000.0)  # K = 2000 N, k = 1 N
    c.act[:] = c.u_act
    c.omega[:] = (1.0, 0.0, 0.6, 0.0)
    c.start([])
    # slip acceleration = torque on the first mass - 2 k: -2500 + 2e6 t for A, -1000 for B
    foh(c, 1e-3, 1, torque=lambda t: (-2498.0 + 2e6 * t, 0.0, -998.0, 0.0))
    ev = c.new_events()
    assert [(r, k) for _, r, k in ev] == [(0, L.EV_STICK), (1, L.EV_STICK)]
    assert ev[0][0] == pytest.approx(5e-4, abs=1e-13)
    assert ev[1][0] == pytest.approx(6e-4, abs=1e-13)
    assert list(c.mode) == [L.MODE_STUCK, L.MODE_STUCK]
    # sticking at the exact zero needs no impulse
    assert abs(c.work[L.W_IMPULSE]) < 1e-18


def test_cascade_when_the_coulomb_force_is_below_the_static_one():
    """Torque on the middle of three unit masses: both rows need 10 N.  Row 1-2 can hold 8: it
    breaks and drops to k = 2, so the group 2-3 accelerates faster and row 2-3, which would hold
    11 < 12 against the static bound, needs 14 > 12 and breaks in the same instant."""
    rows = (Row("r12", 0, 1, gain_kinetic=0.25), Row("r23", 1, 2, gain_kinetic=10.0 / 12.0))
    c = Core(CoreSpec(("m1", "m2", "m3"), (1.0, 1.0, 1.0), (0.0, 0.0, 0.0), rows))
    c.u_act[:] = (8.0, 12.0)
    c.act[:] = (8.0, 12.0)
    c.u_torque[:] = (0.0, 30.0, 0.0)
    c.omega[:] = (1.0, 1.0, 1.0)
    c.start([0, 1])
    assert list(c.mode) == [L.MODE_SLIP, L.MODE_SLIP]
    ev = c.new_events()
    assert sorted((r, k) for _, r, k in ev) == [(0, L.EV_BREAKAWAY), (1, L.EV_BREAKAWAY)]
    # the independent enumeration agrees
    net = RefNetwork((1.0, 1.0, 1.0), (0.0, 0.0, 0.0),
                     [RefRow(0, 1, 1.0, -1.0, lambda t: 8.0, gain_kinetic=0.25),
                      RefRow(1, 2, 1.0, -1.0, lambda t: 12.0, gain_kinetic=10.0 / 12.0)],
                     lambda t: np.array([0.0, 30.0, 0.0]))
    ref = ReferenceSolver(net)
    stuck, dirs = ref.solve_mode(0.0, np.array([1.0, 1.0, 1.0, 8.0, 12.0]), {0, 1}, {})
    assert stuck == frozenset()
    assert dirs == {0: -1.0, 1: 1.0}
    assert c.mu == pytest.approx([2.0, -10.0])
    # without the drop (k = K) row 2-3 holds
    rows = (Row("r12", 0, 1), Row("r23", 1, 2))
    c = Core(CoreSpec(("m1", "m2", "m3"), (1.0, 1.0, 1.0), (0.0, 0.0, 0.0), rows))
    c.u_act[:] = (8.0, 12.0)
    c.act[:] = (8.0, 12.0)
    c.u_torque[:] = (0.0, 30.0, 0.0)
    c.omega[:] = (1.0, 1.0, 1.0)
    c.start([0, 1])
    assert list(c.mode) == [L.MODE_SLIP, L.MODE_STUCK]
    assert c.mu[1] == pytest.approx(-11.0, rel=1e-13)


def test_event_log_overflow_is_counted(two_shafts):
    """A log of 4 entries and a row that sticks and breaks away every 50 ms: what is overwritten
    before it is read is counted in events_lost, the rest comes back in order."""
    row = Row("r", 0, 1)
    c = Core(CoreSpec(("a", "b"), (1.0, 1.0), (0.0, 0.0), (row,), settings=Settings(event_capacity=4)))
    c.u_act[0] = c.act[0] = 1.0
    c.start([])
    dt = 1e-3
    for k in range(1000):
        t = k * dt
        c.u_torque[0] = 3.0 * math.sin(2 * math.pi * 10.0 * t)
        c.u_torque_rate[0] = (3.0 * math.sin(2 * math.pi * 10.0 * (t + dt)) - c.u_torque[0]) / dt
        c.step(dt)
    total = int(c.counters[L.CNT_EVENTS])
    assert total > 10
    ev = c.new_events()
    assert len(ev) == 4
    assert c.events_lost == total - 4
    assert [e[0] for e in ev] == sorted(e[0] for e in ev)
    # reading regularly loses nothing more
    c.u_torque_rate[0] = 0.0
    for k in range(1000, 1100):
        c.step(dt)
        c.new_events()
    assert c.events_lost == total - 4


def _open_row_and_a_stick(dt):
    """Shaft a turns faster than b through an open clutch (no capacity) and slows at 10 rad/s^2
    relative to b: that slip crosses zero at 49.2 ms.  b and c slip through a clutch of Coulomb
    force 5 N m, slip 0.497 rad/s falling at 10 rad/s^2: it sticks at 49.7 ms, in the same step
    as the crossing at dt = 1 and 2 ms."""
    rows = (Row("open", 0, 1, gain_static=1.0, gain_kinetic=1.0), Row("s", 1, 2, gain_static=1.2, gain_kinetic=1.0))
    c = Core(CoreSpec(("a", "b", "c"), (1.0, 1.0, 1.0), (0.0, 0.0, 0.0), rows))
    c.omega[:] = (1.492, 1.0, 0.503)
    c.u_act[:] = (0.0, 5.0)
    c.act[:] = (0.0, 5.0)
    c.u_torque[:] = (-15.0, 0.0, 0.0)
    c.start([])
    c.run(dt, int(round(0.06 / dt)))
    return c


@pytest.mark.parametrize("dt", [1e-3, 1e-4, 2e-3])
def test_an_open_clutch_whose_slip_crosses_zero_logs_no_event(dt):
    c = _open_row_and_a_stick(dt)
    assert c.new_events() == [(pytest.approx(0.0497, abs=1e-12), 1, L.EV_STICK)]
    assert c.delta[0] < 0.0 and c.mode[0] == L.MODE_SLIP  # the open clutch did cross zero
    assert c.mu[0] == 0.0


@pytest.mark.parametrize("dt", [1e-3, 1e-4, 2e-3])
def test_a_slipping_clutch_logs_its_reversal_at_the_crossing(two_shafts, dt):
    """Slip 0.5 rad/s falling at 12 rad/s^2 (torque -10 N m on a, Coulomb force 1 N m, J = 1): it
    reaches zero at 0.5/12 s, where sticking would need 5 N m > K = 1 N m, so it reverses there."""
    c = two_shafts(J1=1.0, J2=1.0, K=1.0, w0=(0.5, 0.0), torque=(-10.0, 0.0))
    c.run(dt, int(round(0.06 / dt)))
    assert c.new_events() == [(pytest.approx(0.5 / 12.0, abs=1e-12), 0, L.EV_REVERSAL)]
    assert c.mode[0] == L.MODE_SLIP and c.delta[0] < 0.0


def test_an_open_row_that_crosses_zero_before_its_kiss_point_in_the_same_step_slips_on(foh):
    """An open clutch's slip falls through zero at 10.3 ms (no friction: nothing happens there), its kiss point
    follows at 10.6 ms inside the same step.  There it slips at -0.3 mrad/s in the other direction: the
    Coulomb force, growing as 1e4 s N m after the kiss, brings it to zero s = (1 + sqrt(13)) / 2e4 later,
    where it sticks (holding 0.5 N m against 2.3 N m).  Snapping the slip to zero at the kiss point would be
    a jump of relative speed the forces cannot make."""
    row = Row("c", 0, 1, act_gain=0.01, act_preload=500.0, gain_static=0.1, gain_kinetic=0.1)
    c = Core(CoreSpec(("a", "b"), (1.0, 1.0), (0.0, 0.0), (row,)))
    t_cross, t_kiss = 0.0103, 0.0106
    c.omega[:] = (20.0 + t_cross, 20.0)  # delta = t_cross - t with -1 N m on shaft a
    c.u_torque[:] = (-1.0, 0.0)
    c.start([])
    assert c.mode[0] == L.MODE_SLIP
    p_kiss, slope = 500.0 / 0.01, 1e7  # normal force 1e5 s N after the kiss, kinetic capacity 1e4 s N m
    foh(c, 1e-3, 12, torque=lambda t: (-1.0, 0.0), command=lambda t: [p_kiss + slope * (t - t_kiss)])
    ev = c.new_events()
    t_stick = t_kiss + (1.0 + math.sqrt(13.0)) / 2e4
    assert [e[2] for e in ev] == [L.EV_STICK], ev
    assert ev[0][0] == pytest.approx(t_stick, abs=1e-10)
    assert c.mode[0] == L.MODE_STUCK and c.delta[0] == 0.0
    # the momentum: the Coulomb impulse from the kiss to the stick, integral of 1e4 s ds, on each shaft
    impulse = 1e4 * (t_stick - t_kiss) ** 2 / 2.0
    assert c.omega[0] == pytest.approx(20.0 + t_cross - t_stick + impulse - 0.5 * (0.012 - t_stick), abs=1e-9)
