"""Rows of other than two entries, full inertia matrices and freewheels in the friction core.

A planetary gear set ties three shafts rigidly (Willis: ``z_S w_S + z_R w_R
= (z_S + z_R) w_C``); reducing the rigid constraints to independent speeds
(the congruence transform of Biagiotti & Zanasi) gives a full inertia
matrix ``T^T diag(J) T`` and clutch rows over three or more of the
independent speeds, and a brake is a row to the housing.  These tests check
the core on such systems with the same physical facts as the two-entry
tests: stuck rows read exactly 0.0 and hold forces within their
capacities, slipping friction dissipates, the energy balance closes, and
the result equals an independent solution:

* the reduced system equals the unreduced one (its Willis relation a stuck
  row of three entries) step for step, to rounding: RK4 is covariant under
  the linear map ``w = T q``;
* both agree with the event-driven reference solution
  (``tests/references/reference_solutions.py``, DOP853 and brute-force
  modes) with a full inertia matrix;
* random reduced networks (hypothesis): the friction laws and the energy
  balance;
* stuck sets the substitution order cannot reach (each shaft shared by two
  stuck rows) are held by projection, without drift; sets that can only
  stand still are locked at exactly 0.0;
* a freewheel overruns without friction, locks where its relative speed
  reaches zero and releases where its force falls to zero.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from references.reference_solutions import ReferenceSolver, network_from_spec

from plant_models.core import Core, CoreSpec, Row
from plant_models.core import layout as L
from plant_models.core.spec import GROUND

FAST = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
finite = dict(allow_nan=False, allow_infinity=False)

# one simple planetary set (teeth of the 8HP70's sets 1 and 2) driving an output shaft through a clutch
ZS, ZR = 48.0, 96.0
J_MEMBERS = np.array([0.02, 0.10, 0.30, 1.5])  # sun, ring, carrier, output, kg m^2
B_MEMBERS = np.array([0.001, 0.002, 0.01, 0.05])  # N m s/rad
# independent speeds q = (sun, ring, output): carrier = (z_S sun + z_R ring) / (z_S + z_R)
T = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [ZS / (ZS + ZR), ZR / (ZS + ZR), 0.0], [0.0, 0.0, 1.0]])


def _clutch(name, entries, kinetic=0.8):
    (a, ca), *rest = entries
    if not rest:
        return Row(name, a, GROUND, ca, gain_kinetic=kinetic)
    (b, cb), *more = rest
    return Row(name, a, b, ca, cb, gain_kinetic=kinetic, more=tuple(more))


def reduced_spec():
    """Brake on the ring, clutch carrier-output: over (sun, ring, output) the clutch has three entries."""
    M = T.T @ np.diag(J_MEMBERS) @ T
    D = T.T @ np.diag(B_MEMBERS) @ T
    rows = (_clutch("brake_ring", [(1, 1.0)]),
            _clutch("carrier_output", [(0, T[2, 0]), (1, T[2, 1]), (2, -1.0)]),
            _clutch("lock_sun_ring", [(0, 1.0), (1, -1.0)]))
    return CoreSpec(("sun", "ring", "output"), tuple(np.diag(M)), (0.0,) * 3, rows,
                    inertia_matrix=tuple(map(tuple, M)), drag_matrix=tuple(map(tuple, D)))


def unreduced_spec():
    """The same transmission over its four members, the Willis relation a row that never slips."""
    rows = (_clutch("brake_ring", [(1, 1.0)]),
            _clutch("carrier_output", [(2, 1.0), (3, -1.0)]),
            _clutch("lock_sun_ring", [(0, 1.0), (1, -1.0)]),
            Row("willis", 0, 1, ZS, ZR, more=((2, -(ZS + ZR)),)))
    return CoreSpec(("sun", "ring", "carrier", "output"), tuple(J_MEMBERS), tuple(B_MEMBERS), rows)


def _drive(core, q_or_w_map, t):
    """Input torque on the sun (60 N m rising at 40 N m/s for 0.2 s, a first-order hold over the
    step), 20 N m load on the output; member torques mapped through ``q_or_w_map`` (T^T or I)."""
    core.u_torque[:] = q_or_w_map @ np.array([60.0 + 40.0 * min(t, 0.2), 0.0, 0.0, -20.0])
    core.u_torque_rate[:] = q_or_w_map @ np.array([40.0 if t < 0.2 - 1e-12 else 0.0, 0.0, 0.0, 0.0])


def _run_shift(core, to_core, steps=600, dt=1e-3):
    """Brake applied, clutch slipping then sticking (launch), then a swap: brake off, sun-ring lock on."""
    out = []
    for k in range(steps):
        t = k * dt
        if k == 300:
            core.u_act[:3] = [0.0, 800.0, 120.0]
        _drive(core, to_core, t)
        st = core.step(dt)
        assert st & (L.ST_NONFINITE | L.ST_BAD_INPUT) == 0
        out.append(core.omega.copy())
    return np.array(out)


def test_reduced_planetary_equals_its_members_with_the_willis_relation_as_a_stuck_row():
    red = Core(reduced_spec())
    full = Core(unreduced_spec())
    w0 = np.array([150.0, 0.0, 20.0])
    red.omega[:] = w0
    full.omega[:] = T @ w0
    red.u_act[:] = [400.0, 150.0, 0.0]
    full.u_act[:] = [400.0, 150.0, 0.0, 1e12]  # the mesh never slips
    red.act[:] = red.u_act
    full.act[:] = full.u_act
    red.start([0])
    full.start([0, 3])
    q = _run_shift(red, T.T)
    w = _run_shift(full, np.eye(4))
    members = q @ T.T
    assert np.abs(members - w).max() <= 1e-9 * np.abs(w).max()
    ev_red = [(round(t, 9), r, k) for t, r, k in red.new_events()]
    ev_full = [(round(t, 9), r, k) for t, r, k in full.new_events()]
    assert ev_red == ev_full and len(ev_red) >= 3  # stick, breakaway, stick: the same rows at the same times
    # the stuck mesh row of the unreduced system reads exactly zero, and so does every stuck row
    assert full.delta[3] == 0.0 and full.mode[3] == L.MODE_STUCK
    assert np.all(red.delta[red.stuck] == 0.0)


def test_reduced_planetary_agrees_with_the_event_driven_reference():
    spec = reduced_spec()
    caps = ([400.0, 400.0, 0.0, 0.0], [150.0, 150.0, 800.0, 800.0], [0.0, 0.0, 120.0, 120.0])
    pts = (0.0, 0.3, 0.3, 0.6)

    def cmd(values):
        from references.reference_solutions import piecewise_linear
        return piecewise_linear(list(zip(pts, values)))

    def torque(t):
        return T.T @ np.array([60.0 + 40.0 * min(t, 0.2), 0.0, 0.0, -20.0])

    net = network_from_spec(spec, torque, [cmd(c) for c in caps], breakpoints=(0.2, 0.3))
    ref = ReferenceSolver(net).simulate(0.6, [150.0, 0.0, 20.0], engaged=(0,))
    core = Core(spec)
    core.omega[:] = [150.0, 0.0, 20.0]
    core.u_act[:] = [400.0, 150.0, 0.0]
    core.act[:] = core.u_act
    core.start([0])
    q = _run_shift(core, T.T)
    t = np.arange(1, 601) * 1e-3
    assert np.abs(q - ref.w(t)).max() <= 1e-8 * np.abs(q).max()
    ref_ev = [(r, k) for _, r, k in ref.events]
    core_ev = [(r, L.EVENT_NAMES[k]) for _, r, k in core.new_events()]
    assert core_ev == ref_ev


@st.composite
def reduced_networks(draw):
    n = draw(st.integers(2, 5))
    B = np.array(draw(st.lists(st.floats(-1.0, 1.0, **finite), min_size=n * n, max_size=n * n))).reshape(n, n)
    M = B @ B.T + draw(st.floats(0.05, 2.0, **finite)) * np.eye(n)
    M = 0.5 * (M + M.T)
    C = np.array(draw(st.lists(st.floats(-0.3, 0.3, **finite), min_size=n * n, max_size=n * n))).reshape(n, n)
    D = C @ C.T
    D = 0.5 * (D + D.T)
    g = draw(st.integers(1, 5))
    rows = []
    for _ in range(g):
        k = draw(st.integers(1, min(4, n)))
        shafts = draw(st.permutations(range(n)))[:k]
        coefs = [draw(st.floats(0.2, 5.0, **finite)) * draw(st.sampled_from([-1.0, 1.0])) for _ in shafts]
        K = draw(st.one_of(st.just(0.0), st.floats(0.5, 50.0, **finite)))
        frac = draw(st.one_of(st.just(1.0), st.floats(0.0, 1.0, **finite)))
        rows.append((list(zip(shafts, coefs)), K, frac))
    tau = draw(st.lists(st.floats(-50.0, 50.0, **finite), min_size=n, max_size=n))
    w0 = draw(st.lists(st.floats(-10.0, 10.0, **finite), min_size=n, max_size=n))
    engaged = draw(st.lists(st.booleans(), min_size=g, max_size=g))
    return dict(M=M, D=D, rows=rows, tau=tau, w0=w0, engaged=engaged)


def build_reduced(net):
    n = len(net["tau"])
    rows = tuple(_clutch(f"r{i}", e, kinetic=frac) for i, (e, K, frac) in enumerate(net["rows"]))
    spec = CoreSpec(tuple(f"q{j}" for j in range(n)), tuple(np.diag(net["M"])), (0.0,) * n, rows,
                    inertia_matrix=tuple(map(tuple, net["M"])), drag_matrix=tuple(map(tuple, net["D"])))
    c = Core(spec)
    c.u_act[:] = [r[1] for r in net["rows"]]
    c.act[:] = c.u_act
    c.omega[:] = net["w0"]
    c.u_torque[:] = net["tau"]
    return c


@FAST
@given(reduced_networks(), st.sampled_from([1e-3, 2.5e-4]))
def test_random_reduced_networks_keep_the_friction_laws_and_create_no_energy(net, dt):
    c = build_reduced(net)
    st0 = c.start([i for i, e in enumerate(net["engaged"]) if e])
    assert st0 & (L.ST_NONFINITE | L.ST_BAD_INPUT) == 0
    e0 = c.kinetic_energy()
    K = c.cap_static.copy()
    for k in range(60):
        if k == 30:
            c.u_torque[:] = -np.asarray(net["tau"])  # a jump between steps
        st_ = c.step(dt)
        assert st_ & (L.ST_NONFINITE | L.ST_BAD_INPUT) == 0
        assert np.all(np.isfinite(c.y)) and np.all(np.isfinite(c.mu))
        stuck = c.mode == L.MODE_STUCK
        assert np.all(c.delta[stuck] == 0.0)
        assert np.all(np.abs(c.mu[stuck]) <= K[stuck] * (1 + 1e-9) + 1e-9)
        R = c.row_matrix()
        # the stuck rows hold: their relative speed, evaluated plainly, is rounding
        assert np.all(np.abs(R[stuck] @ c.omega) <= 1e-11 * (np.abs(R[stuck]) @ np.abs(c.omega) + 1e-300))
        scale = np.abs(c.mu).max() * np.abs(c.delta).max() + 1e-300
        assert np.all(c.mu * c.delta <= 1e-12 * scale)
    w = c.work
    assert np.all(w[L.W_ROW0:] <= 1e-12) and w[L.W_IMPULSE] <= 0.0
    rate = float(np.abs(np.linalg.eigvals(np.linalg.solve(net["M"], net["D"]))).max())
    gain = c.kinetic_energy() - e0
    tol = 1e-7 + 0.25 * (dt * rate) ** 4
    assert abs(gain - w.sum()) <= tol * (e0 + abs(gain) + np.abs(w).sum()) + 1e-12


def _spec(M, rows):
    n = len(M)
    return CoreSpec(tuple(f"q{j}" for j in range(n)), tuple(np.diag(M)), (0.0,) * n, rows,
                    inertia_matrix=tuple(map(tuple, M)))


def test_stuck_rows_beyond_the_substitution_order_are_held_without_drift():
    """Two stuck rows over the same three shafts (each shaft in both): no row can be substituted
    first, so the speeds are projected onto both; their relative speeds stay at rounding level."""
    M = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, 0.2], [0.1, 0.2, 1.5]])
    rows = (_clutch("r0", [(0, 1.0), (1, 1.0), (2, 1.0)]), _clutch("r1", [(0, 1.0), (1, 2.0), (2, 3.0)]))
    c = Core(_spec(M, rows))
    c.omega[:] = [1.0, -2.0, 1.0]  # on both rows
    c.u_act[:] = [1e6, 1e6]
    c.act[:] = c.u_act
    c.u_torque[:] = [3.0, -1.0, 0.5]
    c.start([0, 1])
    assert c.flags[L.FLAG_TREE_PARTIAL] == 1
    e0 = c.kinetic_energy()
    R = c.row_matrix()
    for _ in range(20000):
        c.step(1e-3)
        assert np.all(c.delta == 0.0)
    drift = np.abs(R @ c.omega) / (np.abs(R) @ np.abs(c.omega))
    assert drift.max() <= 1e-14  # rounding, not an accumulated integration error
    # the motion is along the one free direction, and the work balance closes
    assert abs(c.kinetic_energy() - e0 - c.work.sum()) <= 1e-9 * (e0 + np.abs(c.work).sum())


def test_a_set_that_can_only_stand_still_is_locked_at_exactly_zero():
    M = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, 0.2], [0.1, 0.2, 1.5]])
    rows = (_clutch("r0", [(0, 1.0), (1, -1.0)]), _clutch("r1", [(1, 1.0), (2, -2.0)]),
            _clutch("r2", [(0, 1.0), (1, 1.0), (2, -1.0)]))
    c = Core(_spec(M, rows))
    c.u_act[:] = [1e6] * 3
    c.act[:] = c.u_act
    c.omega[:] = [0.0, 0.0, 0.0]
    c.u_torque[:] = [3.0, -1.0, 0.5]
    st0 = c.start([0, 1, 2])
    assert st0 & L.ST_LOCKED
    for _ in range(100):
        assert c.step(1e-3) & L.ST_LOCKED
    assert np.all(c.omega == 0.0) and np.all(c.delta == 0.0)
    # the forces hold the torques: R^T mu + tau = 0
    assert np.allclose(c.row_matrix().T @ c.mu + c.u_torque, 0.0, atol=1e-12)


def test_a_brake_holds_its_shaft_at_exactly_zero_and_breaks_away_at_its_capacity():
    """A row to the housing over one shaft of a reduced system: stuck at 0.0, breakaway when the
    torque it must hold reaches its capacity (a torque ramp: closed-form time)."""
    M = np.array([[1.0, 0.25], [0.25, 0.5]])
    rows = (_clutch("brake", [(1, 1.0)], kinetic=0.5),)
    c = Core(_spec(M, rows))
    c.u_act[0] = 30.0
    c.act[0] = 30.0
    c.omega[:] = [10.0, 0.0]
    c.start([0])
    # torque on shaft 1 ramps at 100 N m/s: the brake holds tau_1 + M10/M00 (..) -- solve it:
    # with w_1 = 0, shaft 0 accelerates alone: a_0 = tau_0 / M00, and the brake force is
    # mu = -(tau_1 - M10 a_0) = -(tau_1 - M10 tau_0 / M00)
    c.u_torque[:] = [4.0, 0.0]
    c.u_torque_rate[:] = [0.0, 100.0]
    t_break = (30.0 + 0.25 * 4.0 / 1.0) / 100.0
    dt = 1e-3
    for k in range(int(t_break / dt) + 5):
        c.u_torque[:] = [4.0, 100.0 * k * dt]
        c.step(dt)
        if c.mode[0] == L.MODE_STUCK:
            assert c.omega[1] == 0.0 and c.delta[0] == 0.0
    (t, row, kind), = c.new_events()
    assert kind == L.EV_BREAKAWAY and abs(t - t_break) <= 1e-9


def test_a_freewheel_overruns_locks_and_releases():
    """Shaft 0 (engine) drives shaft 1 (load) through a freewheel, row ``w1 - w0 >= 0``: it overruns
    without friction while the load is faster, locks where the engine catches up, carries a force
    in [0, K], and releases in the step where that force would turn negative."""
    J0, J1 = 0.5, 2.0
    rows = (Row("freewheel", 1, 0, 1.0, -1.0, gain_kinetic=1.0, one_way=True),)
    c = Core(CoreSpec(("engine", "load"), (J0, J1), (0.0, 0.0), rows))
    c.u_act[0] = 1e4
    c.act[0] = 1e4
    c.omega[:] = [0.0, 10.0]
    c.u_torque[:] = [20.0, -5.0]
    c.start()
    assert c.mode[0] == L.MODE_SLIP
    # overrunning: no friction, both accelerate on their own until w0 = w1 at t = 10 / (40 + 2.5)
    t_lock = 10.0 / (20.0 / J0 + 5.0 / J1)
    dt = 1e-3
    for _ in range(1000):
        if c.mode[0] == L.MODE_STUCK:
            break
        assert c.mu[0] == 0.0 and c.delta[0] > 0.0
        c.step(dt)
    (t, row, kind), = c.new_events()
    assert kind == L.EV_STICK and abs(t - t_lock) <= 1e-9
    # locked: the force that makes both accelerate alike, (J1 tau0 - J0 tau1) / (J0 + J1) on the load side
    lam = (J1 * 20.0 - J0 * -5.0) / (J0 + J1)
    assert c.mu[0] == pytest.approx(lam, rel=1e-12) and c.mu[0] >= 0.0 and c.delta[0] == 0.0
    # the engine torque falls linearly: the freewheel releases where its force reaches zero,
    # at tau0 = J0 tau1 / J1 = -1.25 N m
    c.u_torque_rate[:] = [-100.0, 0.0]
    t0 = c.time[0]
    for k in range(400):
        c.u_torque[:] = [20.0 - 100.0 * k * dt, -5.0]
        c.step(dt)
        if c.mode[0] == L.MODE_STUCK:
            assert 0.0 <= c.mu[0] <= 1e4
    (t, row, kind), = c.new_events()
    # located where the force is past zero by the break margin, 1e-10 K (the force falls at
    # J1 / (J0 + J1) * 100 N m/s = 80 N m/s), as a breakaway is located past K
    t_release = t0 + (20.0 + 1.25) / 100.0 + 1e-10 * 1e4 / 80.0
    assert kind == L.EV_BREAKAWAY and abs(t - t_release) <= 1e-10
    assert c.mode[0] == L.MODE_SLIP and c.delta[0] > 0.0 and c.mu[0] == 0.0
