"""Powershift plant (Morselli, Zanasi & Ferracin, section 5): gears, capacities, the paper's swap demonstration."""

from __future__ import annotations

import copy
from fractions import Fraction

import numpy as np
import pytest

from plant_models.core import layout as L
from plant_models.config import ConfigError, ConfigReader, load_toml, repo_root
from plant_models.clutch import BAR
from plant_models.plants.powershift import PowershiftPlant, gear_table
from plant_models.readers.powershift import read_powershift
from plant_models.registry import load_plant
from server.offline.scenario import load_scenario
from server.offline.run import run_offline

BASE = load_toml(repo_root() / "configs" / "powershift.toml")


def make(data) -> PowershiftPlant:
    return PowershiftPlant(read_powershift(ConfigReader(data, "ps-test")))


@pytest.fixture(scope="module")
def swaps():
    plant = load_plant("configs/powershift.toml")
    return plant, run_offline(plant, load_scenario("scenarios/powershift_swaps.toml").compile(plant))


def test_gear_table_is_the_papers_18_ratios():
    table = gear_table()
    assert len(table) == 18
    ratios = [r for _, r in table]  # w_1 / w_out: integers, exactly
    assert all(Fraction(r) == int(r) for r in ratios)
    assert ratios[0] == 48.0 and ratios[-1] == 4.0
    assert ratios == sorted(ratios, reverse=True)
    # one clutch per stage in every gear
    for trip, _ in table:
        assert trip[0] in (0, 1) and trip[1] in (2, 3, 4) and trip[2] in (5, 6, 7)


def test_reset_in_gear_1_gives_the_ratio_exactly():
    plant = load_plant("configs/powershift.toml")
    plant.reset({"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0})
    y = plant.output_dict()
    assert y["gear"] == 1 and plant.gear_clutches(1) == (1, 3, 6)
    assert y["w_1"] == 80.0
    assert y["w_2"] == pytest.approx(-80.0 / 3.0, rel=1e-15) and y["w_3"] == pytest.approx(80.0 / 12.0, rel=1e-15)
    assert y["ratio"] == pytest.approx(48.0, rel=1e-14)  # input over output speed
    assert -y["w_4"] / y["w_1"] == pytest.approx(1.0 / 48.0, rel=1e-14)  # the paper's fig. 7 plots its inverse
    assert y["slip_c1"] == 0.0 and y["slip_c3"] == 0.0 and y["slip_c6"] == 0.0


def test_clutch_capacity_follows_pressure_through_the_piston():
    """K = mu_s n_c r_m (A p - F_spring) at the clutch; zero below the 1.5 bar kiss point."""
    plant = load_plant("configs/powershift.toml")
    for p, expected in ((1.0, 0.0), (1.5, 0.0), (10.0, 0.13 * 8 * 0.075 * (0.012 * 10 * BAR - 1800.0))):
        plant.reset({"p_c2": p})
        assert plant.output_dict()["capacity_c2"] == pytest.approx(expected, abs=1e-9)
    plant.reset({"p_c7": 16.0})
    assert plant.output_dict()["capacity_c7"] == pytest.approx(0.13 * 16 * 0.10 * (0.025 * 16 * BAR - 3750.0))


def test_single_swap_keeps_clutches_3_and_6_engaged(swaps):
    """Seed 003: around 0.5 s clutch 1 is released and 2 engaged; both slip in between; 3 and 6 stay
    engaged although their forces change."""
    plant, tr = swaps
    t = tr.time
    window = (t >= 0.0) & (t <= 1.1)
    assert np.all(tr.column("stuck_c3")[window] == 1) and np.all(tr.column("stuck_c6")[window] == 1)
    ev = [(e["clutch"], e["type"]) for e in tr.events if e["time"] < 1.1]
    assert ev == [("C1", "breakaway"), ("C2", "stick")]
    t_release, t_lock = tr.events[0]["time"], tr.events[1]["time"]
    assert 0.5 < t_release < t_lock < 0.75
    both_slip = (t > t_release + 1e-3) & (t < t_lock - 1e-3)
    assert np.all(tr.column("stuck_c1")[both_slip] == 0) and np.all(tr.column("stuck_c2")[both_slip] == 0)
    # the stage-1 ratio is not an integer while both slip, exactly 1/2 after
    r21 = -tr.column("w_2") / tr.column("w_1")
    assert np.all((r21[both_slip] > 1 / 3 + 1e-6) & (r21[both_slip] < 1 / 2 - 1e-6))
    after = (t > t_lock + 1e-3) & (t < 1.7)
    np.testing.assert_allclose(r21[after], 0.5, rtol=1e-14)
    # clutch 6's torque changes during the swap but stays within its capacity
    tq6 = tr.column("torque_c6")
    assert np.ptp(tq6[window]) > 500.0
    assert np.all(np.abs(tq6[window]) <= tr.column("capacity_c6")[window])


def test_clutch_8_slips_with_its_coulomb_force_from_1_1_s(swaps):
    plant, tr = swaps
    t = tr.time
    on = t > 1.25
    assert np.all(tr.column("stuck_c8")[on] == 0)
    # slipping at the Coulomb amplitude k = (eta_c / eta_s) K, plus the oil drag across the plates
    k8 = tr.column("capacity_c8")[on] * 0.11 / 0.13
    rc8 = 0.03  # m: clutch 8 sits on the 1-unit gear of axle 3
    drag = 2.0 * tr.column("slip_c8")[on] * rc8 * rc8
    np.testing.assert_allclose(np.abs(tr.column("torque_c8")[on]), k8 + np.abs(drag), rtol=1e-9)
    assert tr.column("capacity_c8")[on].min() > 700.0


def test_double_swap_completes_into_gear_5(swaps):
    """Around 1.7 s the pairs 1-2 and 3-5 are swapped: from clutches 2, 3, 6 to 1, 5, 6."""
    plant, tr = swaps
    t = tr.time
    ev = [(e["clutch"], e["type"]) for e in tr.events if 1.6 < e["time"] < 2.4]
    assert set(ev) == {("C2", "breakaway"), ("C3", "breakaway"), ("C1", "stick"), ("C5", "stick")}
    assert plant.gear_clutches(5) == (1, 5, 6)
    settled = (t > 2.0) & (t < 2.5)
    assert np.all(tr.column("gear")[settled] == 5)
    np.testing.assert_allclose(tr.column("ratio")[settled], 24.0, rtol=1e-13)


def test_triple_swap_reaches_gear_12_with_a_non_monotonic_ratio(swaps):
    """Around 2.5 s the pairs 1-2, 4-5 and 6-7 are swapped (ratio 24 -> 12).  As in the paper the shift
    is "not optimal": the overall ratio first rises, then falls (the paper's inverse, -w_4/w_1 in its
    fig. 7, first falls, then rises)."""
    plant, tr = swaps
    t = tr.time
    assert plant.gear_clutches(12) == (2, 4, 7)
    assert tr.column("gear")[-1] == 12
    np.testing.assert_allclose(tr.column("ratio")[t > 3.0], 12.0, rtol=1e-13)
    shift = (t > 2.5) & (t < 3.0)
    ratio = tr.column("ratio")[shift]
    assert ratio.max() > 24.0 / 0.95  # rises above the old ratio first
    assert np.any(np.diff(ratio) < -1e-6) and np.any(np.diff(ratio) > 1e-6)


def test_energy_balance_over_the_demonstration(swaps):
    plant, tr = swaps
    c = plant.core
    e_now = c.kinetic_energy()
    plant2 = load_plant("configs/powershift.toml")
    plant2.reset(load_scenario("scenarios/powershift_swaps.toml").compile(plant2).initial_inputs())
    e0 = plant2.core.kinetic_energy()
    w = c.work
    assert abs(e_now - e0 - float(np.sum(w))) < 1e-9 * float(np.sum(np.abs(w)))
    energies = [tr.column(f"energy_c{i}")[-1] for i in range(1, 9)]
    assert all(e >= 0.0 for e in energies)
    np.testing.assert_allclose(energies, -w[L.W_ROW0:L.W_ROW0 + 8], rtol=1e-12)


def test_per_clutch_overrides():
    data = copy.deepcopy(BASE)
    plant = make(data)
    assert plant.params.clutches[5].surfaces == 16 and plant.params.clutches[0].surfaces == 8
    data["clutch"]["c2"] = {"surfaces": 4}
    assert make(data).params.clutches[1].surfaces == 4
    data["clutch"]["c2"] = {"surfaces": 0}
    with pytest.raises(ConfigError, match=r"ps-test: clutch.c2.surfaces: must be >= 1, got 0"):
        make(data)
    data["clutch"]["c2"] = {"friction_kinetic": 0.5}
    with pytest.raises(ConfigError, match=r"clutch.c2.friction_kinetic: must not exceed friction_static"):
        make(data)
    data["clutch"]["c2"] = {"surfce": 4}
    with pytest.raises(ConfigError, match=r"clutch.c2.surfce: unknown key"):
        make(data)
    data["clutch"].pop("c2")
    data["clutches"] = [{}] * 8
    with pytest.raises(ConfigError, match=r"ps-test: clutch.c3: give per-clutch overrides either"):
        make(data)
