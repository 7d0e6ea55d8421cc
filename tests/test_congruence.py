"""The congruence-transform formulation (Biagiotti & Zanasi; Zanasi, Sandoni & Morselli) against the friction core on chains.

The reference integrates the chain in transformed coordinates z = T^-1 v:
main dynamics (Biagiotti & Zanasi, eq. 16) and relative dynamics (eq. 17) with the
frictions of stuck contacts from eq. (19), exactly resolved at every event
(references.congruence.friction_exact), with scipy's DOP853 between events
located by solve_ivp.  The core integrates the original coordinates with
the general R formulation and its box-QP partition solve.  Same equations,
different formulation and numerics: the trajectories and events must agree.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from plant_models.core import layout as L
from references.congruence import (CongruenceChain, friction_exact, friction_published, relative_inverse_inertia,
                                     transform)
from plant_models.core import Core, CoreSpec, Row

MASSES = (10.0, 10.0, 10.0, 10.0)  # Zanasi, Sandoni & Morselli, section 4
CAPS = (12.0, 10.0, 13.0)
V0 = (2.0, -1.0, 1.0, 2.0)
AMP = np.array([11.0, 11.0, -8.0, 8.0])
FREQ = np.array([0.45, 1.15, 0.85, 1.5])
T_END = 4.0
KINDS = {"stick": L.EV_STICK, "breakaway": L.EV_BREAKAWAY, "reversal": L.EV_REVERSAL}


def sine_forces(t):
    return AMP * np.sin(2.0 * np.pi * FREQ * t)


def difference_matrix(n):
    D = np.zeros((n - 1, n))
    for i in range(n - 1):
        D[i, i], D[i, i + 1] = 1.0, -1.0
    return D


# --------------------------------------------------------------------------
# the transformed-coordinates simulation (reference)
# --------------------------------------------------------------------------
def simulate_transformed(chain: CongruenceChain, forces, v0, t_end, breakpoints=()):
    """Event-driven solution in z coordinates.  Returns (dense segments, events [(t, contact, kind)])."""
    nc = chain.n - 1
    t = 0.0
    z = chain.to_z(v0)
    mode, _, _ = friction_exact(chain, forces(0.0), z)
    segments, events = [], []
    stops = sorted(b for b in breakpoints if 0.0 < b < t_end) + [t_end]
    while t < t_end - 1e-12:
        t_stop = next(b for b in stops if b > t + 1e-12)
        md = tuple(int(x) for x in mode)
        evs = []
        for i in range(nc):
            if md[i] == 0:  # stuck: its eq. (19) force reaches the capacity
                def g(tt, zz, i=i):
                    return chain.K[i] - abs(chain.derivative(forces(tt), zz, md)[1][i])
                g.direction = -1
            else:  # slipping: its relative velocity reaches zero
                def g(tt, zz, i=i):
                    return zz[1 + i]
                g.direction = -md[i]
            g.terminal = True
            evs.append(g)
        sol = solve_ivp(lambda tt, zz: chain.derivative(forces(tt), zz, md)[0], (t, t_stop), z, method="DOP853",
                        rtol=1e-12, atol=1e-12, events=evs, dense_output=True)
        assert sol.status >= 0
        segments.append((t, sol.t[-1], sol.sol))
        t = sol.t[-1]
        z = sol.y[:, -1].copy()
        hit = [i for i in range(nc) if sol.t_events[i].size]
        tau = chain.derivative(forces(t), z, md)[1]
        broken = {i: (1 if tau[i] > 0 else -1) for i in hit if md[i] == 0}
        for i in hit:
            if md[i] != 0:
                z[1 + i] = 0.0  # the relative dynamics is removed: exactly zero from here
        new, _, _ = friction_exact(chain, forces(t), z, broken=broken)
        for i in range(nc):
            if new[i] == 0 and md[i] != 0:
                events.append((t, i, "stick"))
            elif md[i] == 0 and new[i] != 0:
                events.append((t, i, "breakaway"))
            elif md[i] != 0 and new[i] == -md[i] and i in hit:
                events.append((t, i, "reversal"))
        mode = new
    return segments, events


def sample_velocities(chain, segments, times):
    out = np.empty((len(times), chain.n))
    for k, tk in enumerate(times):
        for a, b, fn in segments:
            if a - 1e-15 <= tk <= b + 1e-15:
                out[k] = chain.to_v(fn(tk))
                break
    return out


def core_chain(masses=MASSES, caps=CAPS, v0=V0) -> Core:
    n = len(masses)
    spec = CoreSpec(tuple(f"m{j + 1}" for j in range(n)), tuple(masses), (0.0,) * n,
                    tuple(Row(f"c{i + 1}{i + 2}", i, i + 1, 1.0, -1.0) for i in range(n - 1)))
    core = Core(spec)
    core.omega[:] = v0
    core.u_act[:] = caps
    core.act[:] = caps
    return core


def run_core(forces, dt, t_end=T_END):
    """The core on the chain with the forces passed as a first-order hold on the step grid."""
    core = core_chain()
    core.u_torque[:] = forces(0.0)
    assert core.start([]) == 0
    n = int(round(t_end / dt))
    v = np.empty((n + 1, len(MASSES)))
    v[0] = core.omega
    for k in range(n):
        a, b = forces(k * dt), forces((k + 1) * dt)
        core.u_torque[:] = a
        core.u_torque_rate[:] = (b - a) / dt
        assert core.step(dt) == 0
        v[k + 1] = core.omega
    return np.arange(n + 1) * dt, v, core.new_events()


# --------------------------------------------------------------------------
# the transform itself
# --------------------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 3, 4, 6])
def test_transform_decouples_main_and_relative_dynamics(n):
    rng = np.random.default_rng(n)
    m = rng.uniform(0.5, 20.0, n)
    T, Tinv = transform(m)
    assert np.allclose(T @ Tinv, np.eye(n), atol=1e-13)
    v = rng.normal(size=n)
    z = Tinv @ v
    assert z[0] == pytest.approx(m @ v / m.sum(), rel=1e-13)  # the mass-weighted mean velocity
    assert np.allclose(z[1:], v[:-1] - v[1:], atol=1e-14)  # the relative velocities
    MT = T.T @ np.diag(m) @ T
    assert MT[0, 0] == pytest.approx(m.sum(), rel=1e-13)
    assert np.allclose(MT[0, 1:], 0.0, atol=1e-12) and np.allclose(MT[1:, 0], 0.0, atol=1e-12)
    D = difference_matrix(n)
    assert np.allclose(D @ T, np.hstack([np.zeros((n - 1, 1)), np.eye(n - 1)]), atol=1e-13)  # D T = [0 | I]
    W = relative_inverse_inertia(m)
    assert np.allclose(W, D @ np.diag(1.0 / m) @ D.T, rtol=1e-13)  # the core's Delassus matrix R M^-1 R^T
    assert np.allclose(np.linalg.inv(MT[1:, 1:]), W, rtol=1e-10)


def test_transform_matches_the_papers_matrices():
    m1, m2, m3, m4 = 1.0, 2.0, 3.0, 4.0
    d = m1 + m2 + m3 + m4
    T, _ = transform([m1, m2, m3, m4])
    zanasi_sandoni_morselli_T = np.array([[1, (m2 + m3 + m4) / d, (m3 + m4) / d, m4 / d],
                        [1, -m1 / d, (m3 + m4) / d, m4 / d],
                        [1, -m1 / d, -(m1 + m2) / d, m4 / d],
                        [1, -m1 / d, -(m1 + m2) / d, -(m1 + m2 + m3) / d]])
    assert np.allclose(T, zanasi_sandoni_morselli_T, rtol=1e-15)
    J1, J2, J3 = 2.0, 3.0, 5.0
    ch = CongruenceChain([J1, J2, J3], [1.0, 1.0])
    jt = J1 + J2 + J3
    biagiotti_zanasi_JT = np.array([[jt, 0, 0], [0, J1 * (J2 + J3) / jt, J1 * J3 / jt], [0, J1 * J3 / jt, (J1 + J2) * J3 / jt]])
    assert np.allclose(ch.M_T, biagiotti_zanasi_JT, rtol=1e-13, atol=1e-14)
    F = np.array([1.0, -2.0, 4.0])
    FT1, FR = ch.forces(F)
    assert FT1 == pytest.approx(F.sum())
    assert FR == pytest.approx([(-J1 * (F[1] + F[2]) + (J2 + J3) * F[0]) / jt,
                                (J3 * (F[0] + F[1]) - (J1 + J2) * F[2]) / jt], rel=1e-13)


# --------------------------------------------------------------------------
# one friction step: transform formulation vs the core's partition solve
# --------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(12))
def test_friction_step_equals_the_core_partition_solve(seed):
    """Random chains with several contacts at zero relative velocity: same forces, same accelerations."""
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(3, 7))
    m = rng.uniform(1.0, 10.0, n)
    K = rng.uniform(1.0, 20.0, n - 1)
    v = rng.normal(size=n)
    for i in range(n - 1):  # about half the contacts start at zero relative velocity
        if rng.random() < 0.6:
            v[i + 1] = v[i]
    F = rng.normal(scale=15.0, size=n)
    chain = CongruenceChain(m, K)
    mode, zd, tau = friction_exact(chain, F, chain.to_z(v))
    core = core_chain(m, K, v)
    core.u_torque[:] = F
    core.start([])
    assert np.allclose(core.accel, chain.to_v(zd), rtol=1e-9, atol=1e-10)
    assert np.allclose(-core.mu, tau, rtol=1e-9, atol=1e-9)  # tau_i,i+1 = -mu (force on body i is -tau)
    assert list(core.stuck) == [bool(x == 0) for x in mode]


def test_published_saturation_rule_is_not_exact_when_two_contacts_saturate_at_once():
    """Seed 000 eq. (22): saturating two stuck contacts at once keeps the third contact's force from the
    unsaturated solve (eq. 19) and forces its z' to zero anyway; the result violates the equations of
    motion.  The exact step (and the core) recompute it."""
    chain = CongruenceChain(MASSES, CAPS)
    v = np.full(4, 1.0)
    # stuck, the contacts would carry 20, 0 and 20 N: 1-2 and 3-4 exceed their capacities at once;
    # with them slipping, 2-3 must carry -7.5 N, not the 0 N eq. (19) gave with all stuck
    F = np.array([20.0, -20.0, 20.0, -20.0])
    z = chain.to_z(v)
    _, tau_all = chain.derivative(F, z, (0, 0, 0))
    assert abs(tau_all[0]) > CAPS[0] and abs(tau_all[2]) > CAPS[2] and abs(tau_all[1]) < CAPS[1]
    zd_pub, tau_pub = friction_published(chain, F, z)
    mode, zd_ex, tau_ex = friction_exact(chain, F, z)
    assert list(mode) == [1, 0, 1]
    assert tau_ex[1] == pytest.approx(-7.5, rel=1e-12) and tau_pub[1] == pytest.approx(0.0, abs=1e-12)
    M, D = np.diag(MASSES), difference_matrix(4)

    def residual(zd, tau):
        return np.abs(M @ chain.to_v(zd) - (F - D.T @ tau)).max()

    assert residual(zd_ex, tau_ex) < 1e-12
    assert residual(zd_pub, tau_pub) > 1.0  # N: a force mismatch, not rounding
    core = core_chain(v0=v)
    core.u_torque[:] = F
    core.start([])
    assert np.allclose(core.accel, chain.to_v(zd_ex), atol=1e-12)


def test_published_rule_is_exact_for_a_single_contact_at_its_threshold():
    """At a located breakaway exactly one contact is at |tau| = K: then eq. (22) changes nothing."""
    chain = CongruenceChain(MASSES, CAPS)
    z = chain.to_z(np.full(4, 0.5))
    base = np.array([1.0, -2.0, 0.5, 0.5])
    _, tau = chain.derivative(base, z, (0, 0, 0))
    # scale a force pattern that loads contact 2-3 only until it reaches its capacity exactly
    push = np.array([1.0, 1.0, -1.0, -1.0])
    _, t_push = chain.derivative(push, z, (0, 0, 0))
    s = (CAPS[1] - tau[1]) / t_push[1]
    F = base + s * push
    zd_pub, tau_pub = friction_published(chain, F, z)
    _, zd_ex, tau_ex = friction_exact(chain, F, z)
    assert np.allclose(zd_pub, zd_ex, atol=1e-12) and np.allclose(tau_pub, tau_ex, atol=1e-9)


# --------------------------------------------------------------------------
# the 4-mass benchmark (Zanasi, Sandoni & Morselli, section 4): trajectories and events
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pwl_forces():
    """The benchmark's sine forces as a piecewise-linear profile with 10 ms breakpoints.

    A first-order hold passes such a profile exactly, so both formulations see the same forces.
    """
    bt = np.arange(0.0, T_END + 1e-9, 0.01)
    Fb = np.array([sine_forces(x) for x in bt])

    def forces(t):
        return np.array([np.interp(t, bt, Fb[:, j]) for j in range(4)])
    return forces, bt


def test_4mass_benchmark_same_trajectories_and_events(pwl_forces):
    forces, breaks = pwl_forces
    chain = CongruenceChain(MASSES, CAPS)
    segs, ref_events = simulate_transformed(chain, forces, V0, T_END, breakpoints=breaks)
    t, v, core_events = run_core(forces, 1e-3)
    exact = sample_velocities(chain, segs, t)
    assert np.abs(v - exact).max() < 1e-10
    assert [(r, k) for _, r, k in core_events] == [(r, KINDS[k]) for _, r, k in ref_events]
    assert max(abs(a[0] - b[0]) for a, b in zip(core_events, ref_events)) < 1e-9
    # the story of the run: contacts stick, break away and stick again until the four masses move as one
    assert len(ref_events) >= 6
    assert {k for _, _, k in ref_events} >= {"stick", "breakaway"}
    last = {}
    for _, i, k in ref_events:
        last[i] = k
    assert last == {0: "stick", 1: "stick", 2: "stick"}
    assert np.ptp(v[-1]) == 0.0  # exactly one velocity at the end (A_i < k_i, as the paper notes)


def test_4mass_benchmark_with_sine_forces_converges_to_the_transformed_solution():
    """With the exact sine forces in the reference, the core's first-order hold costs O(dt^2)."""
    chain = CongruenceChain(MASSES, CAPS)
    segs, ref_events = simulate_transformed(chain, sine_forces, V0, T_END)
    errs = []
    for dt in (1e-3, 2.5e-4):
        t, v, core_events = run_core(sine_forces, dt)
        errs.append(np.abs(v - sample_velocities(chain, segs, t)).max())
        assert [(r, k) for _, r, k in core_events] == [(r, KINDS[k]) for _, r, k in ref_events]
        assert max(abs(a[0] - b[0]) for a, b in zip(core_events, ref_events)) < 10.0 * errs[-1] + 1e-9
    assert errs[0] < 3e-6
    assert errs[0] / errs[1] > 12.0  # second order: 16 for a 4x smaller step


def test_chain_plant_runs_the_benchmark_scenario_like_the_reference():
    """The product path (configs/chain.toml + scenarios/chain_4mass.toml) gives the same run."""
    from plant_models.registry import load_plant
    from server.offline.scenario import load_scenario

    plant = load_plant("chain")
    sc = load_scenario("chain_4mass").compile(plant, 1e-3)
    plant.reset(sc.initial_inputs())
    vi = [plant.output_index(f"v_{j + 1}") for j in range(4)]
    n = sc.n_steps
    v = np.empty((n + 1, 4))
    v[0] = plant.y[vi]
    for k in range(n):
        sc.apply(plant, k)
        assert plant.step(sc.dt) == 0
        v[k + 1] = plant.y[vi]
    chain = CongruenceChain(MASSES, CAPS)
    segs, ref_events = simulate_transformed(chain, sine_forces, V0, sc.n_steps * sc.dt)
    t = np.arange(n + 1) * sc.dt
    assert np.abs(v - sample_velocities(chain, segs, t)).max() < 3e-6
    events = plant.new_events()
    assert [(e["row"], e["type"]) for e in events] == [(r, k) for _, r, k in ref_events]
