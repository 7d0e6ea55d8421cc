"""The 8-speed planetary automatic (configs/zf8hp.toml): ratios, power, shifts under load.

Physical facts checked:

* the nine ratios of the 8HP70 gear set, exactly from Willis' equations of
  its four sets (108/23, 72/23, ...) and, in simulation, within 1e-4 of the
  published values;
* power balance in a gear held at constant speed: input power = output
  power + drag, to 1e-9 relative; and at every step input power = load
  power + drag + rate of kinetic energy;
* a planetary set's tooth torques are in the ratio of its teeth
  (sun : ring : carrier = z_S : z_R : -(z_S + z_R)) and sum to zero;
* the scenario that shifts 1 -> 8 and back with single-element swaps under
  load: each shift is one breakaway of the off-going element and one stick
  of the on-coming one (no chattering), stuck elements read exactly 0.0
  slip and hold forces within their capacities, the energy accounts close;
* every gear's stuck set is reached by the core's substitution order (its
  stuck rows read exactly zero by construction, no projection needed) and
  no gear reports a locked shaft.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from plant_models.core import Core, CoreSpec, Row
from plant_models.core import layout as L
from plant_models.core.spec import GROUND
from plant_models.registry import load_plant, read_config
from server.offline.scenario import load_scenario
from server.offline.run import run_offline

PUBLISHED = {"R": -3.2968, "1": 4.6957, "2": 3.1304, "3": 2.1039, "4": 1.6667, "5": 1.2845, "6": 1.0000,
             "7": 0.8392, "8": 0.6667}
EXACT = {"R": Fraction(-1744, 529), "1": Fraction(108, 23), "2": Fraction(72, 23), "3": Fraction(162, 77),
         "4": Fraction(5, 3), "5": Fraction(8826, 6871), "6": Fraction(1), "7": Fraction(120, 143), "8": Fraction(2, 3)}
ELEMENTS = "ABCDE"


@pytest.fixture(scope="module")
def zf8hp():
    return load_plant("configs/zf8hp.toml")


def engage(plant, gear: str, w_input: float, torque_in: float = 0.0, load: float = 0.0):
    """The plant in a gear at an input speed: its three elements at 12 bar, the others open."""
    d = plant.params.description
    els = {d.elements[e].name for e in next(g for g in plant.params.reduction.gears if g.name == gear).elements}
    inputs = {f"p_{e}": (12.0 if e in els else 0.0) for e in ELEMENTS}
    inputs.update(input_torque=torque_in, load_torque=load)
    plant.reset(inputs)
    st = plant.start_in_gear(gear, w_input)
    assert st & (L.ST_LOCKED | L.ST_NONFINITE) == 0
    return plant


def test_the_nine_ratios_are_the_published_ones_exactly_from_willis_equations():
    red = read_config("configs/zf8hp.toml").params.reduction
    got = {g.name: g.ratio for g in red.gears}
    assert got == EXACT
    for name, value in PUBLISHED.items():
        assert abs(float(got[name]) - value) <= 1e-4
    assert [g.number for g in red.gears] == [-1, 1, 2, 3, 4, 5, 6, 7, 8]


@pytest.mark.parametrize("gear", list(PUBLISHED))
def test_each_gear_runs_at_its_published_ratio(zf8hp, gear):
    p = engage(zf8hp, gear, 120.0, torque_in=150.0, load=40.0)
    for _ in range(200):
        st = p.step(1e-3)
        assert st & (L.ST_LOCKED | L.ST_NONFINITE | L.ST_BAD_INPUT) == 0
    y = p.output_dict()
    assert y["gear"] == (-1 if gear == "R" else int(gear))
    assert abs(y["w_input"] / y["w_out"] - PUBLISHED[gear]) <= 1e-4
    assert abs(y["ratio"] - float(EXACT[gear])) <= 1e-12 * abs(float(EXACT[gear]))
    # the engaged elements read exactly zero slip; their stuck rows need no projection
    for e in ELEMENTS:
        if y[f"stuck_{e}"]:
            assert y[f"slip_{e}"] == 0.0
    assert sum(y[f"stuck_{e}"] for e in ELEMENTS) == 3
    assert p.core.flags[L.FLAG_TREE_PARTIAL] == 0


def _member_power(p):
    """(input power, load power, drag power, d(kinetic energy)/dt) at the end of the last step, W.

    Drag: the members' drag to the housing and the oil shear of the open elements (their viscous
    drag across the slip), -sum torque * slip.
    """
    d, red = p.params.description, p.params.reduction
    T = np.asarray(red.T)
    w = T @ p.core.omega
    a = T @ p.core.accel
    J = np.array([m.inertia for m in d.members])
    b = np.array([m.drag for m in d.members])
    y = p.output_dict()
    p_in = p.u[p.input_index("input_torque")] * w[d.input_member]
    p_load = p.u[p.input_index("load_torque")] * w[d.output_member]
    p_shear = -sum(y[f"torque_{e}"] * y[f"slip_{e}"] for e in ELEMENTS)
    return p_in, p_load, float(b @ (w * w)) + p_shear, float(J @ (w * a))


@pytest.mark.parametrize("gear", list(PUBLISHED))
def test_power_balance_in_a_gear_at_constant_speed(zf8hp, gear):
    """Input power = output power + drag, to 1e-9 relative, with the load that holds the speed."""
    t_in = 200.0
    # the load at which nothing accelerates at this speed (the accelerations are linear in it)
    acc = []
    for load in (0.0, 1000.0):
        p = engage(zf8hp, gear, 150.0, torque_in=t_in, load=load)
        acc.append(float(p.core.accel[0]))
    load = 1000.0 * acc[0] / (acc[0] - acc[1])
    p = engage(zf8hp, gear, 150.0, torque_in=t_in, load=load)
    w0 = p.member_speeds().copy()
    for _ in range(500):
        p.step(1e-3)
        p_in, p_load, p_drag, p_kin = _member_power(p)
        assert abs(p_in - p_load - p_drag) <= 1e-9 * abs(p_in)
    assert np.abs(p.member_speeds() - w0).max() <= 1e-9 * np.abs(w0).max()


@pytest.mark.parametrize("gear", ["1", "5", "R"])
def test_power_balance_while_accelerating(zf8hp, gear):
    p = engage(zf8hp, gear, 100.0, torque_in=300.0, load=50.0)
    for _ in range(300):
        p.step(1e-3)
        p_in, p_load, p_drag, p_kin = _member_power(p)
        assert abs(p_in - p_load - p_drag - p_kin) <= 1e-9 * abs(p_in)


def unreduced(p):
    """The same transmission over its eight members, each planetary set a row that never slips
    (Willis' equation as a stuck row of three entries, capacity far above any torque)."""
    d = p.params.description
    rows = []
    for e in d.elements:
        (a, ca), *rest = [(m, float(c)) for m, c in e.coefs]
        b, cb = rest[0] if rest else (GROUND, 1.0)
        rows.append(e.clutch.row(e.name, a, b, ca, cb))
    for r in d.relations:
        (a, ca), (b, cb), *more = [(m, float(c)) for m, c in r.coefs]
        rows.append(Row(r.name, a, b, ca, cb, more=tuple(more)))
    spec = CoreSpec(tuple(m.name for m in d.members), tuple(m.inertia for m in d.members),
                    tuple(m.drag for m in d.members), tuple(rows))
    return Core(spec)


def test_planetary_tooth_torques_are_the_constraint_forces_of_the_unreduced_transmission(zf8hp):
    """The tooth torques the plant rebuilds from its reduced state equal the forces the core computes
    when the members stay separate shafts and each planetary set is a stuck row; they are in the ratio
    of the set's teeth and sum to zero."""
    p = engage(zf8hp, "5", 150.0, torque_in=300.0, load=100.0)
    d = p.params.description
    full = unreduced(p)
    nel = len(d.elements)
    full.omega[:] = p.member_speeds()
    full.u_act[:nel] = p.core.u_act[:nel]
    full.u_act[nel:] = 1e12
    full.act[:] = full.u_act
    full.u_torque[d.input_member] = 300.0
    full.u_torque[d.output_member] = -100.0
    engaged = [i for i in range(nel) if p.core.mode[i] == L.MODE_STUCK] + list(range(nel, nel + 4))
    full.start(engaged)
    for _ in range(50):
        p.step(1e-3)
        full.step(1e-3)
    assert np.abs(p.member_speeds() - full.omega).max() <= 1e-9 * np.abs(full.omega).max()
    y = p.output_dict()
    for k, (name, (zs, zr)) in enumerate({"ps1": (48, 96), "ps2": (48, 96), "ps3": (69, 111),
                                         "ps4": (23, 85)}.items()):
        s, r, c = (y[f"torque_{name}_{m}"] for m in ("sun", "ring", "carrier"))
        mu = full.mu[nel + k]  # the Willis row [z_S, z_R, -(z_S + z_R)] acts with z mu on each member
        assert s == pytest.approx(zs * mu, rel=1e-7) and r == pytest.approx(zr * mu, rel=1e-7)
        assert c == pytest.approx(-(zs + zr) * mu, rel=1e-7)
        assert abs(s + r + c) <= 1e-9 * (abs(s) + abs(r) + abs(c))


@pytest.fixture(scope="module")
def shifts():
    p = load_plant("configs/zf8hp.toml")
    sc = load_scenario("scenarios/zf8hp_shifts.toml").compile(p)
    e0 = p.core.kinetic_energy()
    return p, run_offline(p, sc), e0


def test_the_shift_sequence_goes_up_to_8th_and_back_to_1st(shifts):
    p, tr, _ = shifts
    gears = [int(g) for g in tr.column("gear")]
    engaged = [g for k, g in enumerate(gears) if g != 0 and (k == 0 or g != gears[k - 1])]
    seq = [g for k, g in enumerate(engaged) if k == 0 or g != engaged[k - 1]]
    assert seq == [1, 2, 3, 4, 5, 6, 7, 8, 7, 6, 5, 4, 3, 2, 1]


def test_every_shift_is_one_breakaway_and_one_stick_without_chattering(shifts):
    p, tr, _ = shifts
    ev = [(e["time"], e["clutch"], e["type"]) for e in tr.events]
    assert len(ev) == 28  # 14 single-element swaps
    for k in range(0, 28, 2):
        (t0, off, k0), (t1, on, k1) = ev[k], ev[k + 1]
        assert k0 == "breakaway" and k1 == "stick" and off != on
        assert 0.0 < t1 - t0 < 0.4
    # no element sticks or breaks away twice within 50 ms
    for e in ELEMENTS:
        times = [t for t, c, _ in ev if c == e]
        assert all(b - a > 0.05 for a, b in zip(times, times[1:]))


def test_stuck_elements_read_exactly_zero_and_hold_within_their_capacity(shifts):
    p, tr, _ = shifts
    for e in ELEMENTS:
        stuck = tr.column(f"stuck_{e}") == 1.0
        assert stuck.any()
        assert np.all(tr.column(f"slip_{e}")[stuck] == 0.0)
        cap = tr.column(f"capacity_{e}")
        tq = tr.column(f"torque_{e}")
        assert np.all(np.abs(tq[stuck]) <= cap[stuck] * (1 + 1e-9))
        # slipping elements dissipate: torque against slip
        slipping = ~stuck & (cap > 0)
        assert np.all(tq[slipping] * tr.column(f"slip_{e}")[slipping] <= 1e-9)
        assert np.all(np.diff(tr.column(f"energy_{e}")) >= -1e-9)


def test_the_energy_accounts_close_over_the_shift_sequence(shifts):
    p, tr, e0 = shifts
    w = p.core.work
    gain = p.core.kinetic_energy() - e0
    assert np.all(w[L.W_ROW0:] <= 0.0) and w[L.W_IMPULSE] <= 0.0
    assert abs(gain - w.sum()) <= 1e-9 * (abs(gain) + np.abs(w).sum())
    # the friction energy of the shifts is what the element outputs report
    assert np.allclose([tr.column(f"energy_{e}")[-1] for e in ELEMENTS], -w[L.W_ROW0:L.W_ROW0 + 5], rtol=0,
                       atol=1e-9)
