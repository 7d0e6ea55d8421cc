"""Over-constrained and locked stuck sets (Morselli, Zanasi & Ferracin, section 4, cases 2 and 3; section 5).

* Redundant stuck rows (R_nu not of full row rank): the motion is unique; the
  forces are split by minimum norm within the capacities; ST_OVERCONSTRAINED.
* Locked groups (stuck rows whose ratios close an inconsistent cycle, or a
  full-rank square R_nu): the group's shafts are held at exactly 0.0;
  ST_LOCKED.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from references.reference_solutions import ReferenceSolver, network_from_spec

from plant_models.core import layout as L
from plant_models.config import ConfigReader, load_toml, resolve_config
from plant_models.core import Core, CoreSpec, Row
from plant_models.clutch import BAR
from plant_models.plants.powershift import PowershiftPlant
from plant_models.readers.powershift import read_powershift


def powershift(engaged, pressures_bar, engine=0.0, load=0.0, engine_speed=None):
    path = resolve_config("powershift")
    params = read_powershift(ConfigReader(load_toml(path), str(path)))
    params = dataclasses.replace(params, engaged0=tuple(engaged))
    if engine_speed is not None:
        params = dataclasses.replace(params, engine_speed0=engine_speed)
    plant = PowershiftPlant(params)
    u = {f"p_c{i + 1}": p for i, p in enumerate(pressures_bar)}
    u.update(engine_torque=engine, load_torque=load)
    st = plant.reset(u)
    return plant, st


def row_matrix(core, rows):
    R = np.zeros((len(rows), core.sizes.n))
    for q, i in enumerate(rows):
        r = core.spec.rows[i]
        R[q, r.shaft_a] += core.coef_a[i]
        R[q, r.shaft_b] += core.coef_b[i]
    return R


def test_clutches_6_7_8_together_lock_axles_3_and_4_with_minimum_norm_forces():
    """Paper's case 3: nu = {6, 7, 8}.  Three rows on two axles (rank 2) with different ratios:
    axles 3 and 4 can only turn at zero speed; which of the infinitely many force splits acts
    is the minimum-norm one; axles 1 and 2 run on, unaffected by the split."""
    pressures = [0, 0, 0, 0, 0, 16, 16, 16]
    plant, st = powershift((5, 6, 7), pressures, engine=60.0, load=300.0, engine_speed=80.0)
    c = plant.core
    assert st & L.ST_OVERCONSTRAINED and st & L.ST_LOCKED
    assert list(c.mode[5:]) == [L.MODE_STUCK] * 3
    rows = [5, 6, 7]
    R = row_matrix(c, rows)
    ref_net = network_from_spec(c.spec, lambda t: np.array([60.0, 0.0, 0.0, 300.0]),
                                [lambda t, p=p: p * BAR for p in pressures])
    sol = ReferenceSolver(ref_net).simulate(0.2, c.omega.copy(), engaged=(5, 6, 7))
    for k in range(200):
        st = plant.step(1e-3)
        assert st & L.ST_OVERCONSTRAINED and st & L.ST_LOCKED
        assert st & ~(L.ST_OVERCONSTRAINED | L.ST_LOCKED) == 0
        assert c.omega[2] == 0.0 and c.omega[3] == 0.0
        assert np.all(c.delta[rows] == 0.0)
    # the force that holds axles 3 and 4: R_nu^T lambda = -(external + open-clutch forces) there
    f = np.array([60.0, 0.0, 0.0, 300.0]) - np.asarray(c.spec.drag) * c.omega
    open_rows = [i for i in range(8) if i not in rows]
    f += row_matrix(c, open_rows).T @ c.mu[open_rows]
    lam_min_norm = np.linalg.pinv(R[:, 2:4].T) @ (-f[2:4])
    assert c.mu[rows] == pytest.approx(lam_min_norm, rel=1e-10, abs=1e-8)
    assert np.all(np.abs(c.mu[rows]) <= c.cap_static[rows])
    # motion unique: the free axles follow the independent (pseudo-inverse) reference
    assert c.omega == pytest.approx(sol.w(0.2)[0], rel=1e-9, abs=1e-9)
    assert c.new_events() == []


def test_parallel_clutches_share_the_torque_by_minimum_norm():
    """Two clutches in parallel between the same shafts (a multi-plate pack split in two): R_nu
    has rank 1.  The pair turns as one and the torque is split equally (the minimum-norm split),
    exactly: the shares add up to the closed-form total."""
    rows = (Row("c1", 0, 1), Row("c2", 0, 1))
    J1, J2, t1 = 2.0, 6.0, 40.0
    c = Core(CoreSpec(("a", "b"), (J1, J2), (0.0, 0.0), rows))
    c.u_act[:] = c.act[:] = (50.0, 50.0)
    c.u_torque[:] = (t1, 0.0)
    c.omega[:] = (5.0, 5.0)
    assert c.start([0, 1]) == L.ST_OVERCONSTRAINED
    total = J2 * t1 / (J1 + J2)  # 30: the force that drags shaft b along
    for _ in range(100):
        assert c.step(1e-3) == L.ST_OVERCONSTRAINED
        assert list(c.mode) == [L.MODE_STUCK, L.MODE_STUCK]
        assert np.all(c.delta == 0.0)
        assert -c.mu == pytest.approx([total / 2, total / 2], rel=1e-14)
    w = 5.0 + t1 / (J1 + J2) * 0.1
    assert c.omega == pytest.approx([w, w], rel=1e-13)
    assert c.new_events() == []


def test_parallel_clutch_whose_share_exceeds_its_capacity():
    """Documented behaviour: when the equal split would overload the weaker clutch (capacity 10
    of the 30 needed), the partition problem puts it at its bound, so it is reported slipping at
    zero slip speed with its Coulomb force, and the stronger one holds the pair with the rest."""
    rows = (Row("c1", 0, 1), Row("c2", 0, 1))
    J1, J2, t1 = 2.0, 6.0, 40.0
    c = Core(CoreSpec(("a", "b"), (J1, J2), (0.0, 0.0), rows))
    c.u_act[:] = c.act[:] = (10.0, 30.0)
    c.u_torque[:] = (t1, 0.0)
    c.omega[:] = (5.0, 5.0)
    c.start([0, 1])
    for _ in range(100):
        # each step solves the redundant pair again (the weak row at zero speed is a candidate)
        assert c.step(1e-3) & ~L.ST_OVERCONSTRAINED == 0
        assert list(c.mode) == [L.MODE_SLIP, L.MODE_STUCK]
        assert np.all(c.delta == 0.0)
        assert -c.mu == pytest.approx([10.0, 20.0], rel=1e-13)
    assert [(r, k) for _, r, k in c.new_events()] == [(0, L.EV_BREAKAWAY)]
    w = 5.0 + t1 / (J1 + J2) * 0.1
    assert c.omega == pytest.approx([w, w], rel=1e-13)
    # beyond the sum of the capacities both slip
    c = Core(CoreSpec(("a", "b"), (J1, J2), (0.0, 0.0), rows))
    c.u_act[:] = c.act[:] = (10.0, 15.0)
    c.u_torque[:] = (40.0, 0.0)
    c.omega[:] = (5.0, 5.0)
    c.start([0, 1])
    assert list(c.mode) == [L.MODE_SLIP, L.MODE_SLIP]
    assert c.mu == pytest.approx([-10.0, -15.0])


def test_fully_locked_gearbox_holds_every_axle_at_exactly_zero():
    """Paper's case 2: nu = {1, 2, 4, 8} is a full-rank 4 x 4 R_nu: no degree of freedom left.
    The forces are unique: lambda = -R_nu^-T f; ST_LOCKED (not over-constrained)."""
    pressures = [16, 16, 0, 16, 0, 0, 0, 16]
    plant, st = powershift((0, 1, 3, 7), pressures, engine=50.0, load=200.0, engine_speed=0.0)
    c = plant.core
    rows = [0, 1, 3, 7]
    assert st == L.ST_LOCKED
    for _ in range(100):
        assert plant.step(1e-3) == L.ST_LOCKED
        assert np.all(c.omega == 0.0)
        assert not np.any(np.signbit(c.delta[rows]))
    R = row_matrix(c, rows)
    f = np.array([50.0, 0.0, 0.0, 200.0])
    open_rows = [i for i in range(8) if i not in rows]
    f += row_matrix(c, open_rows).T @ c.mu[open_rows]
    assert c.mu[rows] == pytest.approx(np.linalg.solve(R.T, -f), rel=1e-12)
    assert np.all(c.accel == 0.0)


def test_locked_gearbox_breaks_free_when_a_torque_exceeds_a_capacity():
    pressures = [16, 16, 0, 16, 0, 0, 0, 16]
    plant, st = powershift((0, 1, 3, 7), pressures, engine=50.0, load=0.0, engine_speed=0.0)
    c = plant.core
    assert st == L.ST_LOCKED
    plant.u[plant.input_index("engine_torque")] = 3000.0  # far beyond clutch 1's or 2's capacity
    st = plant.step(1e-3)
    # the status word ORs what held during the step: locked at its start, not at its end
    assert st & L.ST_LOCKED
    assert c.flags[L.FLAG_LOCKED] == 0
    assert not plant.step(1e-3) & L.ST_LOCKED
    assert c.omega[0] > 0.0
    kinds = [k for _, _, k in c.new_events()]
    assert L.EV_BREAKAWAY in kinds
    # whatever slips now dissipates
    assert np.all(c.mu * c.delta <= 0.0)


def test_locking_cycle_of_two_gears_between_two_shafts():
    """Two different ratios between the same two shafts (gears 1 and 2 of one stage engaged):
    an inconsistent cycle.  Engaged at speed, the group is locked at zero (the start keeps
    nothing of the speed), and reports ST_LOCKED without ST_OVERCONSTRAINED (rank 2 = n)."""
    rows = (Row("g1", 0, 1, 1.0, 3.0), Row("g2", 0, 1, 1.0, 2.0))
    c = Core(CoreSpec(("a", "b"), (1.0, 1.0), (0.0, 0.0), rows))
    c.u_act[:] = c.act[:] = 1e4
    c.omega[:] = (10.0, 0.0)
    c.u_torque[:] = (5.0, -2.0)
    st = c.start([0, 1])
    assert st == L.ST_LOCKED
    c.run(1e-3, 10)
    assert np.all(c.omega == 0.0)
    A = np.array([[1.0, 1.0], [3.0, 2.0]])  # columns: rows' coefficients on shafts a, b
    assert c.mu == pytest.approx(np.linalg.solve(A, -np.array([5.0, -2.0])), rel=1e-12)
