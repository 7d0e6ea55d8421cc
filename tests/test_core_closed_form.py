"""Closed-form cases of the friction core (Morselli, Zanasi & Ferracin, section 1; Biagiotti & Zanasi, section 3.1).

Sign convention of the core: ``M dw/dt = tau + R^T mu``, so for a chain row
``[1, -1]`` the row force ``mu`` acts as ``+mu`` on shaft a and ``-mu`` on
shaft b.  The paper writes ``J1 w1' = tau1 - lambda``, ``J2 w2' = lambda - tau2``
with ``tau2`` a load, i.e. ``mu = -lambda`` and ``tau2 = -t2``; its stuck
torque ``lambda = (J2 tau1 + J1 tau2) / (J1 + J2)`` is therefore
``mu = -(J2 t1 - J1 t2) / (J1 + J2)`` here.
"""

from __future__ import annotations

import math

import pytest

from plant_models.core import layout as L


def paper_stuck_force(J1, J2, t1, t2):
    """Row force of two stuck inertias, from the paper's lambda (Morselli, Zanasi & Ferracin, eq. after (2))."""
    tau1, tau2 = t1, -t2  # the paper's tau2 is a load torque
    lam = (J2 * tau1 + J1 * tau2) / (J1 + J2)
    return -lam


@pytest.mark.parametrize("J1,J2,t1,t2", [(2.0, 3.0, 10.0, -4.0), (0.25, 330.0, 300.0, -500.0),
                                         (1.5, 1.5, -7.0, 7.0), (9.0, 5.0, 0.0, 12.5)])
def test_stuck_torque_of_two_inertias(two_shafts, J1, J2, t1, t2):
    c = two_shafts(J1=J1, J2=J2, K=1e6, w0=(3.0, 3.0), torque=(t1, t2), engaged=True)
    expect = paper_stuck_force(J1, J2, t1, t2)
    assert c.mode[0] == L.MODE_STUCK
    assert c.mu[0] == pytest.approx(expect, rel=1e-14, abs=1e-12)
    for _ in range(50):
        assert c.step(1e-3) == L.ST_OK
        assert c.mode[0] == L.MODE_STUCK
        assert c.delta[0] == 0.0
        assert c.mu[0] == pytest.approx(expect, rel=1e-14, abs=1e-12)
    # both shafts accelerate together under the total torque
    a = (t1 + t2) / (J1 + J2)
    assert c.accel == pytest.approx([a, a], rel=1e-13, abs=1e-12)
    assert c.omega == pytest.approx([3.0 + a * 0.05] * 2, rel=1e-13)


@pytest.mark.parametrize("side", [+1.0, -1.0])
def test_breakaway_exactly_at_the_bound_with_constant_torque(two_shafts, side):
    J1, J2, K = 2.0, 3.0, 40.0
    # torque that needs |mu| = K * (1 -/+ 1e-9)
    t1 = side * K * (J1 + J2) / J2
    for factor, holds in ((1.0 - 1e-9, True), (1.0 + 1e-9, False)):
        c = two_shafts(J1=J1, J2=J2, K=K, w0=(1.0, 1.0), torque=(t1 * factor, 0.0), engaged=True)
        for _ in range(200):
            c.step(1e-3)
        if holds:
            assert c.mode[0] == L.MODE_STUCK and c.delta[0] == 0.0
            assert abs(c.mu[0]) == pytest.approx(K * factor, rel=1e-13)
            assert c.new_events() == []
        else:
            assert c.mode[0] == L.MODE_SLIP
            assert c.delta[0] * side > 0.0  # shaft a runs ahead in the torque's direction
            assert abs(c.mu[0]) == K  # Coulomb amplitude k = K here
            ev = c.new_events()
            assert [(t, kind) for t, _, kind in ev] == [(0.0, L.EV_BREAKAWAY)]


@pytest.mark.parametrize("dt", [1e-3, 2.5e-4, 5e-5])
def test_breakaway_in_the_step_where_it_happens(two_shafts, foh, dt):
    """A torque ramp reaches the static capacity inside a step: the event is located there."""
    J1, J2, K, rate = 2.0, 3.0, 40.0, 170.0  # N m/s on shaft a
    c = two_shafts(J1=J1, J2=J2, K=K, k=30.0, w0=(5.0, 5.0), engaged=True)
    t_star = K * (J1 + J2) / (J2 * rate)  # |mu(t)| = J2 rate t / (J1 + J2) reaches K
    k_star = int(t_star / dt)  # the step that contains it
    assert k_star * dt < t_star < (k_star + 1) * dt
    modes = []
    foh(c, dt, k_star + 3, torque=lambda t: (rate * t, 0.0), record=lambda core, k: modes.append(int(core.mode[0])))
    assert modes[:k_star] == [L.MODE_STUCK] * k_star
    assert modes[k_star:] == [L.MODE_SLIP] * 3
    ev = c.new_events()
    assert len(ev) == 1 and ev[0][2] == L.EV_BREAKAWAY
    # located to the event tolerance; the located point is past K by the break margin
    assert ev[0][0] == pytest.approx(t_star, abs=1e-9 * t_star + 1e-12)
    # after the breakaway the row transmits the Coulomb amplitude, opposing the slip
    assert c.mu[0] == pytest.approx(-30.0)
    assert c.delta[0] > 0.0


def test_breakaway_when_capacity_ramps_down(two_shafts, foh):
    J1, J2, t1 = 2.0, 3.0, 50.0
    dt = 1e-3
    need = J2 * t1 / (J1 + J2)  # 30 N m
    c = two_shafts(J1=J1, J2=J2, K=60.0, w0=(0.0, 0.0), torque=(t1, 0.0), engaged=True)
    K0, slope = 60.0, -50.0  # capacity falls 50 N m/s
    t_star = (need - K0) / slope  # 0.6 s
    foh(c, dt, 700, command=lambda t: [K0 + slope * t])
    ev = c.new_events()
    assert [e[2] for e in ev] == [L.EV_BREAKAWAY]
    assert ev[0][0] == pytest.approx(t_star, abs=1e-10)


@pytest.mark.parametrize("J1,J2,w0,k,t1,t2", [
    (2.1, 3.0, (50.0, 10.3), 20.0, 0.0, 0.0),
    (0.7, 4.2, (-30.0, 12.0), 15.0, 5.0, -3.0),
    (1.0, 1.0, (10.0, -10.0), 8.0, -2.0, 1.0),
])
def test_two_spinning_inertias_synchronise_at_the_analytic_time(two_shafts, J1, J2, w0, k, t1, t2):
    d0 = w0[0] - w0[1]
    s = math.copysign(1.0, d0)
    # relative acceleration while slipping: (t1 - k s)/J1 - (t2 + k s)/J2
    ddot = (t1 - k * s) / J1 - (t2 + k * s) / J2
    assert ddot * s < 0
    t_sync = -d0 / ddot
    c = two_shafts(J1=J1, J2=J2, K=k, w0=w0, torque=(t1, t2))
    dt = 1e-3
    steps = int(t_sync / dt) + 50
    for _ in range(steps):
        c.step(dt)
    ev = c.new_events()
    assert [e[2] for e in ev] == [L.EV_STICK]
    assert abs(ev[0][0] - t_sync) < 1e-12
    # after the sync: stuck, exactly zero slip, the closed-form force, and the momentum balance
    assert c.mode[0] == L.MODE_STUCK and c.delta[0] == 0.0
    assert c.mu[0] == pytest.approx(paper_stuck_force(J1, J2, t1, t2), rel=1e-12, abs=1e-12)
    t = steps * dt
    w_common = (J1 * w0[0] + J2 * w0[1] + (t1 + t2) * t) / (J1 + J2)
    assert c.omega == pytest.approx([w_common, w_common], rel=1e-12, abs=1e-12)
    # the friction dissipated exactly the relative kinetic energy (plus the work of the torques)
    ke0 = 0.5 * (J1 * w0[0] ** 2 + J2 * w0[1] ** 2)
    work = c.work
    assert c.kinetic_energy() - ke0 == pytest.approx(
        work[L.W_INPUT] + work[L.W_IMPULSE] + work[L.W_ROW0], rel=1e-11, abs=1e-9)


def test_sync_with_unequal_static_and_coulomb_amplitude(two_shafts):
    """k < K: the row sticks at the sync if the closed-form force is within K, although above k."""
    J1, J2 = 1.0, 2.0
    t1 = 36.0  # stuck force 24 N m: above k = 20 but within K = 25
    c = two_shafts(J1=J1, J2=J2, K=25.0, k=20.0, w0=(0.0, 30.0), torque=(t1, 0.0))
    for _ in range(3000):
        c.step(1e-3)
    assert c.mode[0] == L.MODE_STUCK
    assert abs(c.mu[0]) == pytest.approx(24.0, rel=1e-13)
    assert [e[2] for e in c.new_events()] == [L.EV_STICK]
