"""The core's force-law seam: a compiled law evaluated at every stage point, in the mode decisions and
in its own work account (plant_models.core.entry.ForceLaw, docs/method.md section 1)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from plant_models.core import Core, CoreSpec, Row, Settings
from plant_models.core import layout as L
from plant_models.core.api import LawBlocks

from force_laws import CLOCK_AND_WORK, GROUND_SPRINGS, TORQUE_INPUTS


def _core(law=None, J=(2.0, 3.0), drag=(0.0, 0.0), K=100.0, k=None, w0=(0.0, 0.0), engaged=False, **settings):
    k_ratio = 1.0 if k is None else k / K
    row = Row("row", 0, 1, 1.0, -1.0, gain_static=1.0, gain_kinetic=k_ratio)
    spec = CoreSpec(("a", "b"), tuple(J), tuple(drag), (row,), settings=Settings(**settings))
    c = Core(spec, law=law)
    c.omega[:] = w0
    c.u_act[0] = c.act[0] = K
    return c


def _energy_residual(c):
    """(work of every account) - (kinetic energy) and the scale to compare it with."""
    total = float(np.sum(c.work) + np.sum(c.law_work))
    return total - c.kinetic_energy(), max(abs(total), c.kinetic_energy(), 1.0)


def test_no_law_keeps_the_layout():
    c = _core()
    assert c.mi[L.H_FN_LAW] == 0
    assert c.sizes.ny == L.y_offsets(2, 1, 0)["ny"] == 2 * 2 + 1 + 4 + 1
    assert c.law_work.size == 0 and c.law_z.size == 0


def test_constant_law_torque_reproduces_the_constant_input():
    """The same torques from a law as from the inputs give the same trajectory, to round-off, with a
    slipping clutch and a stick event in between."""
    tq = (-10.0, 4.0)  # the clutch slips, closes and sticks (stuck force 7.6 N m < K = 8 N m)
    ref = _core(K=8.0, k=6.0, w0=(20.0, 0.0), drag=(0.01, 0.02))
    ref.u_torque[:] = tq
    ref.start([])
    law = _core(LawBlocks(TORQUE_INPUTS, ndf=4), K=8.0, k=6.0, w0=(20.0, 0.0), drag=(0.01, 0.02))
    law.law_df[:] = [tq[0], 0.0, tq[1], 0.0]
    law.start([])
    ev_ref, ev_law = [], []
    for _ in range(3000):
        ref.step(1e-3)
        law.step(1e-3)
        ev_ref += ref.new_events()
        ev_law += law.new_events()
        assert law.omega == pytest.approx(ref.omega, rel=1e-12, abs=1e-12)
        assert law.mode[0] == ref.mode[0]
    assert [k for _, _, k in ev_ref] == [k for _, _, k in ev_law] == [L.EV_STICK]
    assert ev_law[0][0] == pytest.approx(ev_ref[0][0], abs=1e-12)
    # the work of the torques is booked in the law's account instead of the input account
    assert law.law_work[0] == pytest.approx(ref.work[L.W_INPUT], rel=1e-11)
    assert law.work[L.W_INPUT] == 0.0


@pytest.mark.parametrize("dt", [1e-3, 5e-4])
def test_ground_spring_law_matches_the_closed_form_oscillation(dt):
    """J theta'' = -k theta: theta = theta0 cos(w t) + w0/w sin(w t), at 4th order in dt.  The law reads
    the angles, which the core stages at RK4's stage points only when a law is installed."""
    J, k, th0, v0 = 2.0, 800.0, 0.1, 3.0
    c = _core(LawBlocks(GROUND_SPRINGS, nf=2), J=(J, J), K=0.0, w0=(v0, 0.0))
    c.law_f[:] = [k, 0.0]
    c.theta[0] = th0
    c.start([])
    wn = math.sqrt(k / J)
    steps = int(round(1.0 / dt))
    c.run(dt, steps)
    t = steps * dt
    th = th0 * math.cos(wn * t) + v0 / wn * math.sin(wn * t)
    w = -th0 * wn * math.sin(wn * t) + v0 * math.cos(wn * t)
    # RK4's global error ~ (wn dt)^4 / 120 per radian
    tol = 0.05 * (wn * dt) ** 4 * wn * t
    assert abs(c.theta[0] - th) <= tol * abs(th0 + v0 / wn)
    assert abs(c.omega[0] - w) <= tol * abs(th0 * wn + v0)
    # energy: kinetic + elastic constant; the law's work is minus the change of the elastic energy
    elastic = 0.5 * k * c.theta[0] ** 2
    assert c.law_work[0] == pytest.approx(0.5 * k * th0 ** 2 - elastic, rel=1e-6)


def test_law_states_are_integrated_and_the_balance_closes():
    c = _core(LawBlocks(CLOCK_AND_WORK, nf=1, nz=2), K=40.0, k=30.0, w0=(0.0, 0.0), drag=(0.05, 0.0))
    c.law_f[0] = 70.0  # more than the clutch holds: it slips, then sticks when the drag balances
    c.start([0])
    c.run(1e-3, 2000)
    assert c.law_z[0] == pytest.approx(2.0, rel=1e-13)  # z' = 1
    assert c.law_z[1] == pytest.approx(c.law_work[0], rel=1e-12)  # its own copy of the law's work
    res, scale = _energy_residual(c)
    assert abs(res) <= 1e-9 * scale


@pytest.mark.parametrize("side", [+1.0, -1.0])
def test_stuck_clutch_under_a_law_torque_below_capacity_stays_stuck(side):
    J1, J2, K = 2.0, 3.0, 40.0
    tq = side * 0.999 * K * (J1 + J2) / J2  # needs |mu| = 0.999 K
    c = _core(LawBlocks(TORQUE_INPUTS, ndf=4), J=(J1, J2), K=K, w0=(5.0, 5.0))
    c.law_df[0] = tq
    c.start([0])
    assert c.mode[0] == L.MODE_STUCK
    for _ in range(500):
        c.step(1e-3)
        assert c.mode[0] == L.MODE_STUCK and c.delta[0] == 0.0
        assert abs(c.mu[0]) == pytest.approx(0.999 * K, rel=1e-13)
    assert c.new_events() == []


@pytest.mark.parametrize("dt", [1e-3, 2.5e-4])
def test_law_torque_ramp_breaks_the_clutch_away_in_the_step_where_it_exceeds_the_bound(dt):
    """A law torque ramp reaches the static capacity inside a step: the breakaway is located there,
    at the time the closed form gives, exactly as for the same ramp on the inputs."""
    J1, J2, K, rate = 2.0, 3.0, 40.0, 170.0
    c = _core(LawBlocks(TORQUE_INPUTS, ndf=4), J=(J1, J2), K=K, k=30.0, w0=(5.0, 5.0))
    c.start([0])
    t_star = K * (J1 + J2) / (J2 * rate)
    k_star = int(t_star / dt)
    assert k_star * dt < t_star < (k_star + 1) * dt
    modes = []
    for k in range(k_star + 3):
        c.law_df[0], c.law_df[1] = rate * k * dt, rate
        c.step(dt)
        modes.append(int(c.mode[0]))
    assert modes[:k_star] == [L.MODE_STUCK] * k_star
    assert modes[k_star:] == [L.MODE_SLIP] * 3
    ev = c.new_events()
    assert len(ev) == 1 and ev[0][2] == L.EV_BREAKAWAY
    # located to the event tolerance, past K by the break margin (1e-10 relative)
    assert ev[0][0] == pytest.approx(t_star * (1.0 + 1e-10), abs=1e-10 * dt + 1e-12)
    assert c.mu[0] == pytest.approx(-30.0)  # then the Coulomb amplitude, opposing the slip
    assert c.delta[0] > 0.0


def test_law_state_is_in_the_snapshot():
    c = _core(LawBlocks(CLOCK_AND_WORK, nf=1, nz=2), K=0.0, w0=(1.0, 0.0))
    c.law_f[0] = 3.0
    c.start([])
    c.run(1e-3, 100)
    snap = c.get_state()
    c.run(1e-3, 100)
    after = c.y.copy()
    c.set_state(snap)
    assert c.law_z[0] == pytest.approx(0.1, rel=1e-13)
    c.run(1e-3, 100)
    assert np.array_equal(c.y, after)
