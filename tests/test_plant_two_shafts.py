"""The example plant of docs/plants.md ("Adding a plant"): registered, loaded from a config, reset, stepped.

Two shafts slipping against each other through a clutch of constant
capacity K lock when their speeds meet, at
``t* = (w1 - w2) / (K (1/J1 + 1/J2))`` (constant friction torque, no other
torque), and turn on together at the speed that keeps their momentum,
``(J1 w1 + J2 w2) / (J1 + J2)``.
"""

from __future__ import annotations

import pytest

from plant_models import registry
from plant_models.config import ConfigError
from plant_models.plants.two_shafts import TwoShaftsParams, TwoShaftsPlant

CONFIG = """plant = "two_shafts"
inertia_kg_m2 = [1.5, 0.5]
speeds_rad_s = [12.0, -4.0]
"""


@pytest.fixture
def registered(monkeypatch):
    """The example plant registered under ``plant = "two_shafts"`` for this test only."""
    monkeypatch.setattr(registry, "_REGISTERED", dict(registry._REGISTERED))
    registry.register("two_shafts", TwoShaftsPlant)


def test_registered_plant_loads_from_its_config(registered, tmp_path):
    path = tmp_path / "two_shafts.toml"
    path.write_text(CONFIG)
    plant = registry.load_plant(path)
    assert isinstance(plant, TwoShaftsPlant)
    assert plant.params == TwoShaftsParams(inertia_kg_m2=(1.5, 0.5), speeds_rad_s=(12.0, -4.0))
    assert registry.describe_config(path)["clutches"] == ["clutch"]
    path.write_text(CONFIG + "kinetic_to_static = 1.5\n")
    with pytest.raises(ConfigError, match="two_shafts.toml: kinetic_to_static: must be <= 1.0"):
        registry.load_plant(path)


def test_slipping_shafts_lock_when_their_speeds_meet_and_keep_their_momentum():
    J1, J2, w1, w2, K, dt = 1.5, 0.5, 12.0, -4.0, 8.0, 1e-3
    plant = TwoShaftsPlant(TwoShaftsParams(inertia_kg_m2=(J1, J2), speeds_rad_s=(w1, w2)))
    assert plant.reset({"clutch_capacity": K}) == 0
    y = plant.output_dict()
    assert y["stuck"] == 0.0 and y["clutch_torque"] == K  # slipping: the Coulomb torque passes to shaft 2
    t_lock = (w1 - w2) / (K * (1.0 / J1 + 1.0 / J2))  # constant torque K decelerates the relative speed
    assert t_lock < 2.0
    for _ in range(int(2.0 / dt)):
        assert plant.step(dt) == 0
    assert [(e["clutch"], e["type"]) for e in plant.new_events()] == [("clutch", "stick")]
    y = plant.output_dict()
    assert y["stuck"] == 1.0 and y["w_1"] == y["w_2"]  # a stuck clutch has exactly zero slip
    assert y["w_1"] == pytest.approx((J1 * w1 + J2 * w2) / (J1 + J2), rel=1e-12)
    assert y["clutch_torque"] == 0.0  # no torque to pass once they turn together


def test_the_lock_is_located_inside_the_step():
    J1, J2, w1, w2, K, dt = 1.5, 0.5, 12.0, -4.0, 8.0, 1e-3
    plant = TwoShaftsPlant(TwoShaftsParams(inertia_kg_m2=(J1, J2), speeds_rad_s=(w1, w2)))
    plant.reset({"clutch_capacity": K})
    while plant.time < 2.0:
        plant.step(dt)
    (stick,) = plant.new_events()
    assert stick["time"] == pytest.approx((w1 - w2) / (K * (1.0 / J1 + 1.0 / J2)), abs=1e-9)


def test_the_docs_show_the_module_as_it_is():
    """docs/plants.md lists the example whole; the listing is the module the tests run."""
    from plant_models.config import repo_root

    root = repo_root()
    doc = (root / "docs" / "plants.md").read_text()
    listing = doc.split("## Adding a plant", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    source = (root / "plant_models" / "plants" / "two_shafts.py").read_text()
    assert listing == source and source.count("\n") < 80
