"""Accuracy against an independent high-accuracy solution of the same equations.

The reference (``reference_solutions.py``) integrates each friction mode with
scipy's DOP853 at rtol 1e-13, stops at every event (zero crossing, capacity
exceeded, kiss point, input kink) and picks the next mode by brute-force
enumeration of the partition problem.  The core runs at fixed steps with
first-order-hold inputs; trajectories are compared at every step end, and
event times one by one.

Scenarios
    (a) two-inertia clutch engagement: pressure ramp through a first-order
        lag (with a kiss point), viscous drag, synchronisation, and a
        breakaway when the pressure falls again;
    (b) the 4-mass chain of Zanasi, Sandoni & Morselli, section 4, with its sinusoidal forces;
    (c) a Powershift single-swap shift (clutch 1 out, clutch 2 in).

The measured numbers quoted in docs/method.md come from these scenarios
(``bench/bench_core.py`` prints them).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from references.reference_solutions import (CHAIN4_K, CHAIN4_MASS, CHAIN4_V0, RefNetwork, RefRow, ReferenceSolver,
                                 chain4_force, chain4_network, network_from_spec, piecewise_linear)

from plant_models.core import layout as L
from plant_models.core import Core, CoreSpec, Row
from plant_models.clutch import BAR
from plant_models.registry import load_plant

KIND = {"stick": L.EV_STICK, "breakaway": L.EV_BREAKAWAY, "reversal": L.EV_REVERSAL}


# ----------------------------------------------------------------------------
# scenarios: (a) two-inertia engagement
# ----------------------------------------------------------------------------
A_POINTS = [(0.0, 0.0), (0.1, 0.0), (0.4, 10 * BAR), (0.8, 10 * BAR), (1.0, 0.0)]  # pressure, Pa
A_TORQUE = np.array([80.0, -30.0])  # engine drive, load on the output, N m
A_W0 = (150.0, 0.0)
A_T = 1.5


def engagement_spec():
    row = Row("clutch", 0, 1, 1.0, -1.0, act_lag_s=0.03, act_gain=0.01, act_preload=500.0,
              gain_static=0.13 * 8 * 0.075, gain_kinetic=0.11 * 8 * 0.075, viscous=0.02)
    return CoreSpec(("engine", "output"), (0.5, 2.0), (0.05, 0.2), (row,))


def engagement_reference():
    cmd = piecewise_linear(A_POINTS)
    net = network_from_spec(engagement_spec(), lambda t: A_TORQUE, [cmd], [p[0] for p in A_POINTS])
    return ReferenceSolver(net, rtol=1e-13, atol=1e-12).simulate(A_T, A_W0)


def run_engagement(dt, T=A_T):
    cmd = piecewise_linear(A_POINTS)
    c = Core(engagement_spec())
    c.omega[:] = A_W0
    c.u_torque[:] = A_TORQUE
    c.start([])
    n = int(round(T / dt))
    W = np.empty((n + 1, 2))
    W[0] = c.omega
    for k in range(n):
        a, b = cmd(k * dt), cmd((k + 1) * dt)
        c.u_act[0] = a
        c.u_act_rate[0] = (b - a) / dt
        assert c.step(dt) == L.ST_OK
        W[k + 1] = c.omega
    return W, c.new_events()


# ----------------------------------------------------------------------------
# (b) the 4-mass chain of Zanasi, Sandoni & Morselli
# ----------------------------------------------------------------------------
B_T = 10.0


def chain4_spec():
    rows = tuple(Row(f"k{i + 1}{i + 2}", i, i + 1, 1.0, -1.0) for i in range(3))
    return CoreSpec(tuple(f"m{i + 1}" for i in range(4)), CHAIN4_MASS, (0.0,) * 4, rows)


def run_chain4(dt, T=B_T, force=chain4_force):
    c = Core(chain4_spec())
    c.omega[:] = CHAIN4_V0
    c.u_act[:] = CHAIN4_K
    c.act[:] = CHAIN4_K
    c.start([])
    n = int(round(T / dt))
    W = np.empty((n + 1, 4))
    W[0] = c.omega
    f_next = force(0.0)
    for k in range(n):
        f0 = f_next
        f_next = force((k + 1) * dt)
        c.u_torque[:] = f0
        c.u_torque_rate[:] = (f_next - f0) / dt
        assert c.step(dt) == L.ST_OK
        W[k + 1] = c.omega
    return W, c.new_events()


# ----------------------------------------------------------------------------
# (c) Powershift single swap
# ----------------------------------------------------------------------------
C_PROFILES = {0: [(0.0, 16.0), (0.3, 16.0), (0.5, 0.0)], 1: [(0.0, 0.0), (0.3, 0.0), (0.55, 16.0)],
              2: [(0.0, 16.0)], 5: [(0.0, 16.0)]}  # bar, clutches 1, 2, 3, 6
C_ENGINE, C_LOAD = 150.0, 300.0
C_T = 1.0


def _c_commands():
    return [piecewise_linear([(t, v * BAR) for t, v in C_PROFILES.get(i, [(0.0, 0.0)])]) for i in range(8)]


def _c_plant():
    plant = load_plant("powershift")
    cmds = _c_commands()
    u = {f"p_c{i + 1}": cmds[i](0.0) / BAR for i in range(8)}
    u.update(engine_torque=C_ENGINE, load_torque=C_LOAD)
    assert plant.reset(u) == L.ST_OK
    return plant


def shift_reference():
    plant = _c_plant()
    tq = np.array([C_ENGINE, 0.0, 0.0, C_LOAD])  # the plant's load sign is +1 on axle 4
    bps = sorted({t for pts in C_PROFILES.values() for t, _ in pts})
    net = network_from_spec(plant.core.spec, lambda t: tq, _c_commands(), bps)
    engaged = tuple(i for i in range(8) if plant.core.mode[i] == L.MODE_STUCK)
    return ReferenceSolver(net, rtol=1e-13, atol=1e-12).simulate(C_T, plant.core.omega.copy(), engaged=engaged)


def run_shift(dt, T=C_T):
    plant = _c_plant()
    cmds = _c_commands()
    n = int(round(T / dt))
    W = np.empty((n + 1, 4))
    W[0] = plant.core.omega
    for k in range(n):
        for i in range(8):
            a, b = cmds[i](k * dt) / BAR, cmds[i]((k + 1) * dt) / BAR
            plant.u[i] = a
            plant.u_rate[i] = (b - a) / dt
        assert plant.step(dt) == L.ST_OK
        W[k + 1] = plant.core.omega
    return W, plant.core.new_events()


# ----------------------------------------------------------------------------
# measurement helpers
# ----------------------------------------------------------------------------
def trajectory_error(W, dt, sol):
    t = np.arange(W.shape[0]) * dt
    return float(np.abs(W - sol.w(t)).max())


def event_errors(events, sol):
    """Time differences of matched events; the sequences (row, kind) must agree."""
    assert [(r, k) for _, r, k in events] == [(r, KIND[k]) for _, r, k in sol.events]
    return [abs(te - tr) for (te, _, _), (tr, _, _) in zip(events, sol.events)]


def orders(errors):
    return [math.log2(a / b) for a, b in zip(errors, errors[1:])]


@pytest.fixture(scope="module")
def engagement_ref():
    return engagement_reference()


@pytest.fixture(scope="module")
def chain4_ref():
    return ReferenceSolver(chain4_network(), rtol=1e-13, atol=1e-12).simulate(B_T, CHAIN4_V0)


@pytest.fixture(scope="module")
def shift_ref():
    return shift_reference()


# ----------------------------------------------------------------------------
# (a)
# ----------------------------------------------------------------------------
def test_engagement_reference_has_the_expected_events(engagement_ref):
    assert [(r, k) for _, r, k in engagement_ref.events] == [(0, "stick"), (0, "breakaway")]


def test_engagement_converges_fourth_order(engagement_ref):
    errs = []
    for dt in (4e-3, 2e-3, 1e-3):
        W, ev = run_engagement(dt)
        errs.append(trajectory_error(W, dt, engagement_ref))
        assert max(event_errors(ev, engagement_ref)) < 1e-9
    # RK4 between events, kiss points and events located: 4th order
    assert all(p > 3.5 for p in orders(errs)), (errs, orders(errs))
    assert errs[2] < 5e-9  # rad/s at dt = 1 ms; speeds ~ 150 rad/s


def test_engagement_over_the_supported_step_range(engagement_ref):
    """dt from 1 ms down to 50 us: same events, error shrinking to the reference's level."""
    for dt, bound in ((1e-3, 5e-9), (2e-4, 1e-10), (5e-5, 1e-10)):
        W, ev = run_engagement(dt)
        assert trajectory_error(W, dt, engagement_ref) < bound
        assert max(event_errors(ev, engagement_ref)) < 1e-10


# ----------------------------------------------------------------------------
# (b)
# ----------------------------------------------------------------------------
def test_chain4_events_and_second_order_convergence(chain4_ref):
    """With sinusoidal forces passed as a first-order hold (value + rate per step), the input
    itself carries an O(dt^2) error; the core converges at exactly that order."""
    assert len(chain4_ref.events) >= 20
    errs, ev_errs = [], []
    for dt in (4e-3, 2e-3, 1e-3, 5e-4):
        W, ev = run_chain4(dt)
        errs.append(trajectory_error(W, dt, chain4_ref))
        ev_errs.append(max(event_errors(ev, chain4_ref)))
    p = orders(errs)
    assert all(1.9 < q < 2.1 for q in p), (errs, p)
    assert errs[2] < 2e-6  # m/s at dt = 1 ms
    assert ev_errs[2] < 1e-5  # s at dt = 1 ms
    assert all(1.5 < q for q in orders(ev_errs)), ev_errs


def test_chain4_is_exact_for_the_inputs_it_receives():
    """Against a reference driven by the same piecewise-linear forces the core receives, the
    only error left is event location and rounding: the mode-wise dynamics are integrated exactly
    (accelerations are linear in time within a step, RK4 integrates them without error)."""
    dt, T = 5e-3, 3.0
    n = int(round(T / dt))
    grid = np.arange(n + 1) * dt
    samples = np.array([chain4_force(t) for t in grid])

    def foh_force(t):
        k = min(int(t / dt), n - 1)
        if t < grid[k]:
            k -= 1
        return samples[k] + (samples[k + 1] - samples[k]) * (t - grid[k]) / dt

    rows = [RefRow(i, i + 1, 1.0, -1.0, (lambda t, K=K: K)) for i, K in enumerate(CHAIN4_K)]
    net = RefNetwork(CHAIN4_MASS, (0.0,) * 4, rows, foh_force, breakpoints=list(grid[1:-1]))
    sol = ReferenceSolver(net, rtol=1e-13, atol=1e-13).simulate(T, CHAIN4_V0)
    W, ev = run_chain4(dt, T)
    assert trajectory_error(W, dt, sol) < 1e-10
    assert max(event_errors(ev, sol)) < 1e-10


# ----------------------------------------------------------------------------
# (c)
# ----------------------------------------------------------------------------
def test_powershift_shift_matches_the_reference(shift_ref):
    assert [(r, k) for _, r, k in shift_ref.events] == [(0, "breakaway"), (1, "stick")]
    errs = []
    for dt in (2e-3, 1e-3):
        W, ev = run_shift(dt)
        errs.append(trajectory_error(W, dt, shift_ref))
        assert max(event_errors(ev, shift_ref)) < 1e-10
    assert errs[1] < 2e-9  # rad/s at dt = 1 ms, engine speed ~ 100 rad/s
    assert errs[0] / errs[1] > 6.0  # well above second order between 2 ms and 1 ms
