"""No chattering: a long stuck phase keeps its relative speeds at exactly 0.0 and a smooth force.

A sign-function friction model (or a Karnopp band) makes a stuck clutch's
force flip between +k and -k every step; the exact core holds the stuck rows
by constraint forces, which must equal the closed form
``lambda = -(R_S M^-1 R_S^T)^-1 R_S M^-1 f`` at every step.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from plant_models.core import layout as L
from plant_models.registry import load_plant

N_STEPS = 100_000


def test_powershift_gear_stays_stuck_for_1e5_steps_with_torque_ripple():
    plant = load_plant("powershift")
    trip = (0, 2, 5)  # gear 1: stage ratios 1/3, 1/4, 1/4
    inputs = {f"p_c{i + 1}": (16.0 if i in trip else 0.0) for i in range(8)}
    inputs.update(engine_torque=40.0, load_torque=1000.0)
    plant.reset(inputs)
    c = plant.core
    i_eng = plant.input_index("engine_torque")
    dt = 1e-3
    f_ripple = 25.0  # Hz, firing-frequency ripple on the engine torque

    def engine(t):
        return 40.0 + 10.0 * math.sin(2 * math.pi * f_ripple * t)

    mu_all = np.empty((N_STEPS, 8))
    delta = np.empty((N_STEPS, 3))
    omega = np.empty((N_STEPS, 4))
    tau = np.empty(N_STEPS)
    u, ur = plant.u, plant.u_rate
    status = 0
    idx = list(trip)
    for k in range(N_STEPS):
        a = engine(k * dt)
        u[i_eng] = a
        ur[i_eng] = (engine((k + 1) * dt) - a) / dt
        status |= plant.step(dt)
        mu_all[k] = c.mu
        delta[k] = c.delta[idx]
        omega[k] = c.omega
        tau[k] = engine((k + 1) * dt)
    assert status == L.ST_OK
    assert c.new_events() == []
    mu = mu_all[:, idx]
    open_rows = [i for i in range(8) if i not in trip]
    # exactly zero relative speed, every step, every stuck row (positive zero, bit for bit)
    assert np.all(delta == 0.0)
    assert not np.any(np.signbit(delta))
    # the speeds follow the gear ratios exactly
    assert np.allclose(omega[:, 1] / omega[:, 0], -1.0 / 3.0, rtol=4e-16, atol=0)
    # no sign flipping of any stuck force
    assert np.all(np.sign(mu) == np.sign(mu[0]))
    # the force is the closed-form constraint force at every step
    spec = c.spec
    Minv = np.diag(1.0 / np.asarray(spec.inertia))
    R = np.zeros((3, 4))
    for q, i in enumerate(idx):
        r = spec.rows[i]
        R[q, r.shaft_a] += c.coef_a[i]
        R[q, r.shaft_b] += c.coef_b[i]
    Lmap = -np.linalg.solve(R @ Minv @ R.T, R @ Minv)
    f = -omega * np.asarray(spec.drag)
    f[:, 0] += tau
    f[:, 3] += 1000.0  # the plant's forward sense is -w_4: a positive load is +torque on axle 4
    # the open clutches drag (oil shear, mu = -c delta): their forces act through their rows
    R_open = np.zeros((len(open_rows), 4))
    for q, i in enumerate(open_rows):
        r = spec.rows[i]
        R_open[q, r.shaft_a] += c.coef_a[i]
        R_open[q, r.shaft_b] += c.coef_b[i]
    f += mu_all[:, open_rows] @ R_open
    expect = f @ Lmap.T
    scale = np.abs(expect).max()
    assert np.abs(mu - expect).max() < 1e-9 * scale
    # smooth: the force follows the 25 Hz ripple, its step-to-step change is bounded by the
    # ripple's (no +-k jumps)
    jump = np.abs(np.diff(mu, axis=0)).max(axis=0)
    ripple_step = 10.0 * 2 * math.pi * f_ripple * dt  # max engine-torque change per step
    gain = np.abs(Lmap[:, 0])
    assert np.all(jump <= gain * ripple_step * 1.01 + 1e-9 * scale)


@pytest.mark.parametrize("ca,cb", [(0.03, 0.11), (1.0, -2.7)])
def test_gear_row_stuck_1e5_steps_bitwise_zero(two_shafts, ca, cb):
    """A single gear row (external and internal mesh) held 1e5 steps with constant torques and drag."""
    c = two_shafts(J1=0.4, J2=2.5, coef_a=ca, coef_b=cb, K=1e5, k=8e4, drag=(0.01, 0.3), w0=(200.0, 0.0),
                   torque=(50.0, -30.0), engaged=True)
    mu0 = c.mu[0]
    assert c.run(1e-3, N_STEPS) == L.ST_OK
    assert c.delta[0] == 0.0 and not np.signbit(c.delta[0])
    assert c.omega[1] / c.omega[0] == pytest.approx(-ca / cb, rel=4e-16)
    assert np.sign(c.mu[0]) == np.sign(mu0)
    assert c.new_events() == []
    assert c.counters[L.CNT_STEPS] == N_STEPS
