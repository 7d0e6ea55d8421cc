"""Random networks and random partition problems (hypothesis).

* The box-constrained QP solver (the partition problem, eq. 18 of Morselli, Zanasi & Ferracin)
  against brute-force enumeration of all 3^m bound states.
* Random networks of 2-6 shafts with random rows (any pair, coefficients of
  either sign), inertias, capacities (k <= K), torques and speeds: stuck
  forces within their bounds, slipping friction dissipative, stuck slip
  exactly zero, no NaN, no energy created.
* Complementarity at the start of a random network: a row is stuck exactly
  when the independent enumeration says its required force is within K.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from references.reference_solutions import RefNetwork, RefRow, ReferenceSolver

from plant_models.core import linalg
from plant_models.core import layout as L
from plant_models.core import Core, CoreSpec, Row

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

finite = dict(allow_nan=False, allow_infinity=False)


# ----------------------------------------------------------------------------
# the QP itself
# ----------------------------------------------------------------------------
@st.composite
def box_problems(draw):
    m = draw(st.integers(1, 5))
    B = np.array(draw(st.lists(st.floats(-3.0, 3.0, **finite), min_size=m * (m + 1), max_size=m * (m + 1))))
    B = B.reshape(m, m + 1)
    W = B @ B.T + 0.05 * np.eye(m)
    b = np.array(draw(st.lists(st.floats(-20.0, 20.0, **finite), min_size=m, max_size=m)))
    K = np.array(draw(st.lists(st.one_of(st.just(0.0), st.floats(0.0, 10.0, **finite)), min_size=m, max_size=m)))
    warm = np.array(draw(st.lists(st.sampled_from([-1, 0, 1]), min_size=m, max_size=m)), dtype=np.int64)
    return W, b, K, warm


def run_box_qp(W, b, K, warm, max_iter=100):
    m = len(b)
    oW, ob, olo, ohi, olam, oLc, ox, ograd = (0, m * m, m * m + m, m * m + 2 * m, m * m + 3 * m, m * m + 4 * m,
                                              2 * m * m + 4 * m, 2 * m * m + 5 * m)
    df = np.zeros(2 * m * m + 6 * m)
    di = np.zeros(2 * m, dtype=np.int64)
    df[oW:oW + m * m] = W.ravel()
    df[ob:ob + m] = b
    df[olo:olo + m] = -K
    df[ohi:ohi + m] = K
    di[:m] = warm
    it = linalg._box_qp(df, di, oW, ob, olo, ohi, m, olam, 0, max_iter, 1e-13, oLc, m, ox, ograd)
    return it, df[olam:olam + m].copy(), di[:m].copy(), df[ograd:ograd + m].copy()


@FAST
@given(box_problems())
def test_box_qp_matches_enumeration_of_all_bound_states(problem):
    W, b, K, warm = problem
    sols = ReferenceSolver.enumerate_box(W, b, K)
    assert sols, "the enumeration always finds the optimum of a strictly convex QP"
    lam_ref = sols[0][1]
    it, lam, bnd, grad = run_box_qp(W, b, K, warm)
    assert it > 0
    scale = np.abs(b).max() + np.abs(W).max() * K.max() + 1e-12
    assert np.allclose(lam, lam_ref, rtol=1e-9, atol=1e-9 * scale / np.abs(W).max())
    assert np.all(np.abs(lam) <= K * (1 + 1e-15))
    # complementarity: free rows have zero relative acceleration; rows at a bound slip against it
    for q in range(len(b)):
        if bnd[q] == 0:
            assert abs(grad[q]) <= 1e-9 * scale
        elif bnd[q] == 1:
            assert lam[q] == K[q] and grad[q] <= 1e-9 * scale
        else:
            assert lam[q] == -K[q] and grad[q] >= -1e-9 * scale


# ----------------------------------------------------------------------------
# random networks
# ----------------------------------------------------------------------------
@st.composite
def networks(draw, forest=False):
    n = draw(st.integers(2, 6))
    g = draw(st.integers(1, n - 1 if forest else 6))
    comp = list(range(n))

    def find(v):
        while comp[v] != v:
            v = comp[v]
        return v

    rows = []
    for i in range(g):
        a = draw(st.integers(0, n - 1))
        b = draw(st.integers(0, n - 1).filter(lambda x, a=a: x != a))
        if forest:
            if find(a) == find(b):
                continue
            comp[find(a)] = find(b)
        ca = draw(st.floats(0.2, 5.0, **finite)) * draw(st.sampled_from([-1.0, 1.0]))
        cb = draw(st.floats(0.2, 5.0, **finite)) * draw(st.sampled_from([-1.0, 1.0]))
        K = draw(st.one_of(st.just(0.0), st.floats(0.5, 50.0, **finite)))
        frac = draw(st.one_of(st.just(1.0), st.floats(0.0, 1.0, **finite)))
        visc = draw(st.one_of(st.just(0.0), st.floats(0.0, 0.5, **finite)))
        rows.append((a, b, ca, cb, K, frac, visc))
    assume(rows)
    J = draw(st.lists(st.floats(0.1, 10.0, **finite), min_size=n, max_size=n))
    drag = draw(st.lists(st.one_of(st.just(0.0), st.floats(0.0, 1.0, **finite)), min_size=n, max_size=n))
    tau = draw(st.lists(st.floats(-50.0, 50.0, **finite), min_size=n, max_size=n))
    rate = draw(st.lists(st.floats(-500.0, 500.0, **finite), min_size=n, max_size=n))
    w0 = draw(st.lists(st.floats(-10.0, 10.0, **finite), min_size=n, max_size=n))
    engaged = draw(st.lists(st.booleans(), min_size=len(rows), max_size=len(rows)))
    return dict(J=J, drag=drag, rows=rows, tau=tau, rate=rate, w0=w0, engaged=engaged)


def build(net):
    rows = tuple(Row(f"r{i}", a, b, ca, cb, gain_kinetic=frac, viscous=visc)
                 for i, (a, b, ca, cb, K, frac, visc) in enumerate(net["rows"]))
    n = len(net["J"])
    c = Core(CoreSpec(tuple(f"s{j}" for j in range(n)), tuple(net["J"]), tuple(net["drag"]), rows))
    c.u_act[:] = [r[4] for r in net["rows"]]
    c.act[:] = c.u_act
    c.omega[:] = net["w0"]
    c.u_torque[:] = net["tau"]
    return c


@FAST
@given(networks(), st.sampled_from([1e-3, 2.5e-4, 5e-5]))
# A stiff viscous row that locks in the third step: the balance residual is 2.3e-7 of the
# energies at 1 ms and falls 16x per halving of dt (4th order), i.e. 0.076 (dt * rate)^4.
@example({"J": [1.0, 0.125], "drag": [0.0, 0.0], "rows": [(0, 1, -1.0, -3.0, 1.0, 1.0, 0.5)],
          "tau": [0.0, 0.0], "rate": [0.0, 0.0], "w0": [0.0, 0.0625], "engaged": [False]}, 1e-3)
# A viscous row under a steep torque ramp: its dissipation c delta^2 is a quartic in time between
# restarts, which RK4 integrates with an error of 4th order in dt (16x smaller per halving of dt:
# 2.2e-7, 1.4e-8, 8.5e-10 of the energies at 1, 0.5, 0.25 ms); 1.3 dt^5 c q^2 over 60 steps.
@example({"J": [1.0, 1.0], "drag": [0.0, 0.0], "rows": [(0, 1, -1.0, -1.0, 0.0, 1.0, 0.5)],
          "tau": [0.0, -4.0], "rate": [0.0, 354.0], "w0": [0.0, 0.0], "engaged": [False]}, 1e-3)
# A row with k = 0 < K (row 3) reaches zero slip next to a stuck row (row 2) that it loads: at K
# it would break row 2 away, but it reverses and pulls with k = 0, so row 2 must stay stuck (before
# the one-at-a-time cascade, row 2 broke away in the same pass and slipped with its friction driving it).
@example({"J": [1.0, 1.0, 2.0, 0.5], "drag": [0.0, 0.0, 0.0, 0.0],
          "rows": [(0, 3, -1.0, -4.0, 9.0, 1.0, 0.0), (0, 1, -1.0, -1.0, 0.0, 1.0, 0.0),
                   (2, 3, -2.5, -0.75, 13.0, 1.0, 0.0), (0, 2, -1.0, 1.5, 1.0, 0.0, 0.0)],
          "tau": [0.0, 0.0, 0.0, 0.0], "rate": [0.0, 0.0, 0.0, 0.0], "w0": [1.0, 0.0, 1.0, 0.0],
          "engaged": [False, False, True, False]}, 1e-3)
@example({"J": [3.0, 1.0, 1.0, 0.5], "drag": [0.0, 0.0, 0.0, 0.0],
          "rows": [(2, 3, -2.0, 4.0, 17.0, 1.0, 0.0), (0, 1, -1.0, -1.0, 0.0, 1.0, 0.0),
                   (2, 3, -2.5, -0.75, 15.0, 1.0, 0.0), (0, 2, -1.0, -4.0, 15.0, 0.5, 0.0)],
          "tau": [0.0, 0.0, 4.0, 0.0], "rate": [0.0, 0.0, 1.0, 0.0], "w0": [0.0, 0.0, 1.0, 0.0],
          "engaged": [False, False, True, False]}, 1e-3)
def test_random_networks_keep_the_friction_laws_and_create_no_energy(net, dt):
    c = build(net)
    st0 = c.start([i for i, e in enumerate(net["engaged"]) if e])
    assert st0 & (L.ST_NONFINITE | L.ST_BAD_INPUT) == 0
    e0 = c.kinetic_energy()
    c.u_torque_rate[:] = net["rate"]
    K = c.cap_static.copy()
    for k in range(60):
        if k % 20 == 0:  # a torque ramp that restarts: inputs that jump between steps too
            c.u_torque[:] = net["tau"]
        else:
            c.u_torque[:] = c.u_torque + c.u_torque_rate * dt
        st_ = c.step(dt)
        assert st_ & (L.ST_NONFINITE | L.ST_BAD_INPUT) == 0
        assert np.all(np.isfinite(c.y)) and np.all(np.isfinite(c.mu))
        stuck = c.mode == L.MODE_STUCK
        # stuck rows: exactly zero slip, force within the static capacity
        assert np.all(c.delta[stuck] == 0.0)
        assert np.all(np.abs(c.mu[stuck]) <= K[stuck] * (1 + 1e-9) + 1e-9)
        # slipping rows never produce power
        scale = np.abs(c.mu).max() * np.abs(c.delta).max() + 1e-300
        assert np.all(c.mu * c.delta <= 1e-12 * scale)
    w = c.work
    assert np.all(w[L.W_ROW0:] <= 1e-12) and w[L.W_IMPULSE] <= 0.0
    # no energy created: what the friction and the impulses took out is <= 0, and the balance
    # closes to the integration error of RK4, 4th order in (dt * fastest viscous rate); the
    # constant observed over these networks is below 0.1
    J = np.asarray(net["J"])
    rate_max = max([visc * (ca * ca / J[a] + cb * cb / J[b]) for a, b, ca, cb, _, _, visc in net["rows"]]
                   + list(np.asarray(net["drag"]) / J))
    tol = 1e-7 + 0.25 * (dt * rate_max) ** 4
    # and, under torque ramps, to the quadrature error of the viscous rows' dissipation c delta^2:
    # delta'' = q (the ramps' rates through the row), so the integrand is quartic between restarts
    # and Simpson-type quadrature over 60 steps errs by dt^5 c q^2 / 8; with the speeds' own RK4
    # error the observed constant is 1.3 (the second example above)
    rate_in = np.abs(np.asarray(net["rate"])) / J
    ramp = max(visc * (abs(ca) * rate_in[a] + abs(cb) * rate_in[b]) ** 2 for a, b, ca, cb, _, _, visc in net["rows"])
    gain = c.kinetic_energy() - e0
    residual = gain - w.sum()
    assert abs(residual) <= tol * (e0 + abs(gain) + np.abs(w).sum()) + 4.0 * dt ** 5 * ramp + 1e-12


@FAST
@given(networks(forest=True))
def test_start_mode_matches_the_enumeration(net):
    """Complementarity: the core's stuck rows at the start are exactly those the independent
    brute-force enumeration (with the k < K cascade) keeps stuck, with the same forces."""
    net["engaged"] = [True] * len(net["rows"])
    c = build(net)
    c.start(list(range(len(net["rows"]))))
    rows = [RefRow(a, b, ca, cb, (lambda t, K=K: K), gain_kinetic=frac, viscous=visc)
            for (a, b, ca, cb, K, frac, visc) in net["rows"]]
    taus = np.array(net["tau"])
    ref = ReferenceSolver(RefNetwork(net["J"], net["drag"], rows, lambda t: taus))
    y = np.concatenate([c.omega, [r[4] for r in net["rows"]]])
    cand = {i for i, r in enumerate(net["rows"]) if r[4] > 0}
    # skip ties (a force within 1e-7 of its bound): either answer is right to rounding
    f = ref.free_force(0.0, y, {i: 0.0 for i in range(len(rows)) if i not in cand})
    idx = sorted(cand)
    if idx:
        A = ref.R[idx]
        sols = ref.enumerate_box(A @ ref.Minv @ A.T, A @ ref.Minv @ f, np.array([rows[i].command(0) for i in idx]))
        lam, grad = sols[0][1], sols[0][2]
        Ks = np.array([rows[i].command(0) for i in idx])
        gap = np.minimum(np.abs(np.abs(lam) - Ks) / (Ks + 1e-300), 1.0)
        assume(np.all((gap > 1e-7) | (np.abs(grad) > 1e-7 * (np.abs(grad).max() + 1e-300))))
    stuck_ref, dirs = ref.solve_mode(0.0, y, cand, {i: 0.0 for i in range(len(rows)) if i not in cand})
    stuck_core = {i for i in range(len(rows)) if c.mode[i] == L.MODE_STUCK}
    assert stuck_core == set(stuck_ref)
    lam_ref = ref.stuck_forces(0.0, y, stuck_ref, dirs)
    for i, lam in lam_ref.items():
        assert c.mu[i] == np.float64(lam) or abs(c.mu[i] - lam) <= 1e-9 * (abs(lam) + rows[i].command(0))
    for i, d in dirs.items():
        if i in cand and d != 0.0:
            assert c.mode[i] == L.MODE_SLIP
            # Coulomb force opposing the chosen direction (plus the row's viscous drag at zero slip)
            assert c.mu[i] == pytest.approx(-rows[i].gain_kinetic * rows[i].command(0) * d, abs=1e-12)
