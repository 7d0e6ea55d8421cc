"""Energy: friction never produces power and the energy accounts close (Morselli, Zanasi & Ferracin, section 4).

``Core.work`` integrates, along with the state, the work of the external
torques, of the viscous drag, of the spring dampers, of every friction row,
and the kinetic energy removed by the inelastic projections at sticking
events.  Their sum must equal the change of kinetic plus spring energy, up
to the integration error, and the friction and impulse accounts can only
decrease.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from plant_models.core import layout as L
from plant_models.core import Core, CoreSpec, Row, Spring
from plant_models.clutch import BAR
from plant_models.registry import load_plant


def damper_clutch(stiffness=500.0):
    """Seed 004, section 5: engine J1, damper disk J2, transmission J3; clutch 1-2 modulated,
    Coulomb friction 2-3 of 50 N m in parallel with the torsional damper spring."""
    rows = (Row("clutch", 0, 1), Row("damper_friction", 1, 2))
    springs = (Spring("damper", 1, 2, 1.0, -1.0, stiffness=stiffness, damping=1.5),)
    spec = CoreSpec(("engine", "disk", "shaft"), (9.0, 5.0, 13.0), (12.0, 1.0, 7.0), rows, springs)
    return spec


def clutch_capacity(t):
    """k12(t): zero until 1 s, up to 400 N m at 1.3 s, held, released from 2.2 s to 2.5 s."""
    if t < 1.0:
        return 0.0
    if t < 1.3:
        return 400.0 * (t - 1.0) / 0.3
    if t < 2.2:
        return 400.0
    if t < 2.5:
        return 400.0 * (2.5 - t) / 0.3
    return 0.0


def engine_torque(t):
    return np.array([300.0 if t >= 0.5 else 0.0, 0.0, 0.0])


def run_damper_clutch(dt, T=3.0, check=None):
    c = Core(damper_clutch())
    c.u_act[1] = 50.0
    c.act[1] = 50.0
    c.start([])
    n = int(round(T / dt))
    for k in range(n):
        t0, t1 = k * dt, (k + 1) * dt
        c.u_torque[:] = engine_torque(t0)
        c.u_act[0] = clutch_capacity(t0)
        c.u_act_rate[0] = (clutch_capacity(t1) - clutch_capacity(t0)) / dt
        st = c.step(dt)
        assert st & (L.ST_NONFINITE | L.ST_BAD_INPUT | L.ST_EVENT_BUDGET | L.ST_SOLVER_LIMIT) == 0
        if check is not None:
            check(c, k)
    return c


def balance_residual(c, e0):
    """(E_kin + E_spring) - E0 - sum of all work accounts, and a scale for it."""
    e = c.kinetic_energy() + c.spring_energy()
    w = c.work
    return e - e0 - float(np.sum(w)), e0 + e + float(np.sum(np.abs(w)))


def test_friction_never_produces_power_and_accounts_only_decrease():
    prev = {}

    def check(c, k):
        p = c.mu * c.delta
        assert np.all(p <= 0.0), (k, c.mu, c.delta)
        w = c.work
        assert w[L.W_IMPULSE] <= 0.0
        assert np.all(w[L.W_ROW0:] <= 0.0)
        assert w[L.W_DRAG] <= 0.0 and w[L.W_DAMP] <= 0.0
        if prev:
            # each account is monotone (dissipation only)
            assert np.all(w[L.W_ROW0:] <= prev["rows"] + 1e-12)
            assert w[L.W_IMPULSE] <= prev["imp"]
        prev["rows"] = w[L.W_ROW0:].copy()
        prev["imp"] = w[L.W_IMPULSE]

    c = run_damper_clutch(1e-3, check=check)
    events = c.new_events()
    kinds = {e[2] for e in events}
    # the scenario exercises sticking and breaking away of both rows
    assert L.EV_STICK in kinds and L.EV_BREAKAWAY in kinds
    assert {e[1] for e in events} == {0, 1}
    assert c.work[L.W_ROW0] < -100.0  # the clutch dissipated a real amount of energy


def test_energy_balance_closes_and_converges():
    res = []
    for dt in (2e-3, 1e-3, 5e-4):
        c = run_damper_clutch(dt)
        r, scale = balance_residual(c, 0.0)
        res.append(abs(r))
        assert abs(r) < 1e-7 * scale, (dt, r, scale)
    # the residual is integration error: it shrinks with the step
    assert res[2] < res[0]


def test_energy_balance_at_every_step_of_a_powershift_shift():
    plant = load_plant("powershift")
    prof = {"p_c1": [(0.0, 16.0), (0.3, 16.0), (0.5, 0.0)], "p_c2": [(0.0, 0.0), (0.3, 0.0), (0.55, 16.0)]}
    u = {"p_c1": 16.0, "p_c2": 0.0, "p_c3": 16.0, "p_c6": 16.0, "engine_torque": 150.0, "load_torque": 300.0}
    plant.reset(u)
    c = plant.core
    e0 = c.kinetic_energy() + c.spring_energy()
    dt = 1e-3
    idx = {k: plant.input_index(k) for k in prof}

    def pwl(points, t):
        ts, vs = zip(*points)
        return float(np.interp(t, ts, vs))

    worst = 0.0
    for k in range(1000):
        t0, t1 = k * dt, (k + 1) * dt
        for name, pts in prof.items():
            a, b = pwl(pts, t0), pwl(pts, t1)
            plant.u[idx[name]] = a
            plant.u_rate[idx[name]] = (b - a) / dt
        plant.step(dt)
        r, scale = balance_residual(c, e0)
        worst = max(worst, abs(r) / scale)
        assert np.all(c.mu * c.delta <= 0.0)
    kinds = [e[2] for e in c.new_events()]
    assert L.EV_BREAKAWAY in kinds and L.EV_STICK in kinds
    assert worst < 1e-9
    assert np.all(c.work[L.W_ROW0:] <= 0.0) and c.work[L.W_IMPULSE] <= 0.0


def test_impulse_work_books_the_projection_at_a_stick():
    """The kinetic energy lost when two inertias lock equals the impulse account's change at that
    instant in the limit of exact event location: here the event is located to 1e-13 s, so the
    impulse account is tiny and the friction account carries the relative energy."""
    J1, J2 = 2.0, 3.0
    spec = CoreSpec(("a", "b"), (J1, J2), (0.0, 0.0), (Row("r", 0, 1),))
    c = Core(spec)
    c.omega[:] = (40.0, 0.0)
    c.u_act[0] = c.act[0] = 25.0
    c.start([])
    for _ in range(2500):  # sync at 40 / (25 (1/2 + 1/3)) = 1.92 s
        c.step(1e-3)
    assert c.mode[0] == L.MODE_STUCK
    rel_ke = 0.5 * J1 * J2 / (J1 + J2) * 40.0 ** 2  # relative kinetic energy, Biagiotti & Zanasi, eq. (9)
    w = c.work
    assert -(w[L.W_ROW0] + w[L.W_IMPULSE]) == pytest.approx(rel_ke, rel=1e-12)
    assert abs(w[L.W_IMPULSE]) < 1e-9 * rel_ke
    assert math.isclose(c.kinetic_energy(), 0.5 * (J1 + J2) * (J1 * 40.0 / (J1 + J2)) ** 2, rel_tol=1e-12)


def test_powershift_pressure_units():
    # guards the test above: the plant's pressures are in bar and reach the core in Pa
    plant = load_plant("powershift")
    plant.reset({"p_c1": 16.0})
    assert plant.core.u_act[0] == 16.0 * BAR
