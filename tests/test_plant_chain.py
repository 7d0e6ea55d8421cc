"""Chain of n bodies: the 4-mass benchmark of Zanasi, Sandoni & Morselli and closed forms."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from plant_models.plants.chain import ChainPlant
from plant_models.readers.chain import read_chain
from plant_models.config import ConfigError, ConfigReader, load_toml, repo_root
from plant_models.registry import load_plant
from references.reference_solutions import CHAIN4_V0, ReferenceSolver, chain4_network
from server.offline.scenario import load_scenario, parse_scenario
from server.offline.run import run_offline

BASE = load_toml(repo_root() / "configs" / "chain.toml")


def make_chain(**changes) -> ChainPlant:
    data = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        table, key = dotted.split("__") if "__" in dotted else (None, dotted)
        (data[table] if table else data)[key] = value
    cfg = ConfigReader(data, "chain-test")
    plant = ChainPlant(read_chain(cfg), source=cfg.source)
    return plant


@pytest.fixture(scope="module")
def reference():
    """The 4-mass benchmark solved independently (event-driven, scipy DOP853, brute-force modes)."""
    return ReferenceSolver(chain4_network()).simulate(3.0, CHAIN4_V0)


def benchmark(dt: float, duration: float = 3.0):
    plant = load_plant("configs/chain.toml")
    compiled = load_scenario("scenarios/chain_4mass.toml").compile(plant, dt)
    compiled.n_steps = int(round(duration / dt))
    return plant, run_offline(plant, compiled)


def test_default_config_is_the_four_mass_benchmark():
    plant = load_plant("configs/chain.toml")
    assert plant.core.spec.inertia == (10.0, 10.0, 10.0, 10.0)
    assert [plant.input_signal(f"capacity_{c}").default for c in ("1_2", "2_3", "3_4")] == [12.0, 10.0, 13.0]
    y = plant.output_dict()
    assert [y[f"v_{j}"] for j in (1, 2, 3, 4)] == [2.0, -1.0, 1.0, 2.0]
    # all contacts slip at t = 0 with tau = k sgn(v_i - v_j) (Zanasi, Sandoni & Morselli, eq. 2)
    assert [y["friction_1_2"], y["friction_2_3"], y["friction_3_4"]] == [12.0, -10.0, -13.0]
    assert plant.output_signal("v_1").unit == "m/s" and plant.output_signal("friction_1_2").unit == "N"


def test_benchmark_matches_the_independent_reference(reference):
    """Within the input sampling error: the scenario holds each sine force as a ramp over the step
    (first-order hold), which costs O(dt^2), ~1e-6 m/s at 1 ms."""
    plant, tr = benchmark(1e-3)
    t_check = np.arange(0.25, 3.0, 0.25)
    k = np.round(t_check / 1e-3).astype(int)
    v = np.column_stack([tr.column(f"v_{j}") for j in (1, 2, 3, 4)])[k]
    np.testing.assert_allclose(v, reference.w(t_check), atol=3e-6)
    ours = [(e["time"], e["row"], e["type"]) for e in tr.events]
    ref = [(t, row, kind) for t, row, kind in reference.events]
    assert [(r, k) for _, r, k in ours] == [(r, k) for _, r, k in ref]
    np.testing.assert_allclose([t for t, _, _ in ours], [t for t, _, _ in ref], atol=1e-5)


def test_benchmark_shows_the_papers_events(reference):
    """Seed 004 section 4: contact 2-3 sticks near 0.8-1 s and slips again about 1 s; in finite time
    the four masses move as one.

    (The paper also mentions v2 = v3 near 0.4 s; with its stated parameters v2 only reaches v3 at
    0.93 s, which the independent reference confirms.)
    """
    plant, tr = benchmark(1e-3)
    ev = [(round(e["time"], 3), e["clutch"], e["type"]) for e in tr.events]
    assert ev[:4] == [(0.795, "contact_3_4", "stick"), (0.928, "contact_2_3", "stick"),
                      (0.974, "contact_2_3", "breakaway"), (1.183, "contact_1_2", "stick")]
    t = tr.time
    all_stuck = (tr.column("stuck_1_2") == 1) & (tr.column("stuck_2_3") == 1) & (tr.column("stuck_3_4") == 1)
    first = t[np.argmax(all_stuck)]
    assert 1.3 < first < 1.45
    # when all are stuck, the four velocities are equal exactly
    v = np.column_stack([tr.column(f"v_{j}") for j in (1, 2, 3, 4)])
    assert np.all(v[all_stuck] == v[all_stuck][:, :1])
    # a stuck contact's force stays within +-K; a slipping one is +-k = +-K
    for c, K in (("1_2", 12.0), ("2_3", 10.0), ("3_4", 13.0)):
        f, stuck, slip = tr.column(f"friction_{c}"), tr.column(f"stuck_{c}"), tr.column(f"slip_{c}")
        assert np.all(np.abs(f[stuck == 1]) <= K * (1 + 1e-9))
        moving = slip != 0.0
        np.testing.assert_array_equal(f[moving], K * np.sign(slip[moving]))


def test_error_falls_at_second_order_as_the_step_shrinks(reference):
    """Events are located inside the step and RK4 integrates between them; what is left is the
    first-order hold of the sine inputs, so the error falls 4x per halving of dt."""
    errors = []
    for dt in (4e-3, 2e-3, 1e-3, 5e-4):
        _, tr = benchmark(dt, duration=2.0)
        k = int(round(2.0 / dt))
        v = np.array([tr.column(f"v_{j}")[k] for j in (1, 2, 3, 4)])
        errors.append(np.max(np.abs(v - reference.w(2.0)[0])))
    ratios = [a / b for a, b in zip(errors, errors[1:])]
    assert all(3.5 < r < 4.5 for r in ratios), ratios
    assert errors[-1] < 2e-7


def test_two_stuck_bodies_share_the_force_as_the_closed_form():
    """Seed 004 eq. 2: a stuck contact carries (F1 m2 - F2 m1) / (m1 + m2)."""
    plant = make_chain(bodies__inertia=[3.0, 7.0], bodies__drag=[0.0, 0.0], contacts__static_capacity=50.0,
                       initial__velocity=[1.0, 1.0], initial__position=[0.0, 0.0])
    plant.reset({"force_1": 20.0, "force_2": -5.0})
    plant.step(1e-3)
    y = plant.output_dict()
    assert y["stuck_1_2"] == 1 and y["slip_1_2"] == 0.0
    assert y["friction_1_2"] == pytest.approx((20.0 * 7.0 - (-5.0) * 3.0) / 10.0, rel=1e-12)
    assert y["v_1"] == pytest.approx(1.0 + 15.0 / 10.0 * 1e-3, rel=1e-12)
    # slip starts exactly at the static limit: capacity just below the needed force
    plant.reset({"force_1": 20.0, "force_2": -5.0, "capacity_1_2": 15.4})
    plant.step(1e-3)
    assert plant.output_dict()["stuck_1_2"] == 0
    plant.reset({"force_1": 20.0, "force_2": -5.0, "capacity_1_2": 15.6})
    plant.step(1e-3)
    assert plant.output_dict()["stuck_1_2"] == 1


def test_capacity_inputs_set_the_friction():
    plant = load_plant("configs/chain.toml")
    scen = load_scenario("scenarios/chain_4mass.toml")
    data = {"duration_s": 2.0, "dt_s": 1e-3,
            "inputs": {**{f"force_{j}": {"sine": {"amplitude": a, "frequency_hz": f}} for j, a, f in
                          ((1, 11.0, 0.45), (2, 11.0, 1.15), (3, -8.0, 0.85), (4, 8.0, 1.5))},
                       "capacity_2_3": 0.0}}
    tr = run_offline(plant, parse_scenario(data, "no-2-3").compile(plant))
    assert scen.profiles.keys() == {"force_1", "force_2", "force_3", "force_4"}
    assert np.all(tr.column("friction_2_3") == 0.0) and np.all(tr.column("stuck_2_3") == 0)
    assert np.all(tr.column("static_limit_2_3") == 0.0)
    assert all(e["clutch"] != "contact_2_3" for e in tr.events)
    # without the middle contact, bodies 1-2 and 3-4 are two separate systems: momentum of each pair
    # changes only by its external forces
    t = tr.time
    f12 = 11.0 * np.sin(2 * math.pi * 0.45 * t) + 11.0 * np.sin(2 * math.pi * 1.15 * t)
    p12 = 10.0 * (tr.column("v_1") + tr.column("v_2"))
    impulse = np.concatenate([[0.0], np.cumsum(0.5 * (f12[1:] + f12[:-1]) * np.diff(t))])
    np.testing.assert_allclose(p12 - p12[0], impulse, atol=1e-5)


def test_rotational_chain_uses_rotational_units():
    plant = make_chain(motion="rotational")
    assert plant.output_signal("v_1").unit == "rad/s" and plant.output_signal("x_1").unit == "rad"
    assert plant.input_signal("force_1").unit == "N m"


def test_bad_chain_configs_name_the_key():
    with pytest.raises(ConfigError, match=r"chain-test: bodies.inertia: needs 2 to 64 bodies, got 1"):
        make_chain(bodies__inertia=[1.0])
    with pytest.raises(ConfigError, match=r"chain-test: contacts.static_capacity: must have 3 entries, got 2"):
        make_chain(contacts__static_capacity=[1.0, 2.0])
    with pytest.raises(ConfigError, match=r"contacts.kinetic_to_static: must be <= 1"):
        make_chain(contacts__kinetic_to_static=1.5)
    with pytest.raises(ConfigError, match=r"initial.velocity: must have 4 entries, got 3"):
        make_chain(initial__velocity=[1.0, 2.0, 3.0])
