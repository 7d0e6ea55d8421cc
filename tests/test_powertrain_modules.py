"""The powertrain's components as modules (docs/powertrain.md, section 7): the assembly is generated from the
component table, every slot comes from a module's table, and the work accounts are outputs from which the
energy balance of the 8HP car closes alone (docs/powertrain.md, section 5)."""

from __future__ import annotations

import ast
import inspect

import numpy as np
import pytest

from plant_models.powertrain import hydraulics, law
from plant_models.powertrain.table import ASSEMBLY, COMPONENTS, assembly_source
from plant_models.registry import load_plant
from server.offline.run import run_offline
from server.offline.scenario import load_scenario


def test_the_assembly_is_the_one_the_table_generates():
    assert ASSEMBLY.read_text(encoding="utf-8") == assembly_source(), \
        "run: python -m plant_models.powertrain.table --write"


@pytest.mark.parametrize("module", (law, hydraulics) + COMPONENTS, ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_no_slot_is_numbered_by_hand(module):
    """No module-level int constant written as a literal: every slot comes from a Slots table."""
    tree = ast.parse(inspect.getsource(module))
    literal = [t.id for node in tree.body if isinstance(node, ast.Assign)
               for t in node.targets if isinstance(t, ast.Name) and t.id.isupper()
               and isinstance(node.value, ast.Constant) and type(node.value.value) is int]
    assert literal == []


@pytest.mark.parametrize("module", COMPONENTS, ids=lambda m: m.KIND)
def test_each_components_constants_are_its_tables_positions(module):
    s = module.SLOTS
    for prefix, group in (("I", s.ints), ("F", s.floats), ("Z", s.states), ("D", s.data)):
        assert [getattr(module, f"{prefix}_{e[0].upper()}") for e in group] == list(range(len(group)))
        assert getattr(module, f"N_{prefix}") == len(group)


@pytest.fixture(scope="module")
def drive():
    plant = load_plant("zf8hp_car")
    sc = load_scenario("zf8hp_car_drive").compile(plant)
    plant.reset(sc.start_inputs())
    return plant, run_offline(plant, sc)


def _balance(names: list[str], values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sources, residual) per row from the outputs alone: the work of the engine, the torque inputs and the
    motor's supply against every element's dissipated energy, the converter's, the drags', the impulses', the
    road's and the PTO's work and the change of kinetic energy."""
    col = {n: values[:, k] for k, n in enumerate(names)}
    zero = np.zeros(len(values))
    sources = col["work_engine"] + col["work_input"] + col.get("work_motor_electrical", zero)
    motor_loss = col.get("work_motor_electrical", zero) - col.get("work_motor", zero)
    dissipated = sum(col[n] for n in names if n.startswith("energy_"))
    sinks = (dissipated + motor_loss - col.get("work_converter", zero) - col["work_drag"] - col["work_impulse"]
             - col["work_aero"] - col["work_grade"] - col["work_drawbar"] - col.get("work_pto", zero)
             + col["kinetic_energy"] - col["kinetic_energy"][0])
    return sources, sources - sinks


def test_the_energy_balance_of_the_8hp_car_closes_from_its_outputs_alone(drive):
    """Over the launch (to the 1-2 shift at 2.5 s) and the whole drive, every row: to 1e-9 of the engine work."""
    plant, res = drive
    names = list(res.names)
    sources, residual = _balance(names, res.values)
    launch = res.time <= 2.5
    assert sources[launch][-1] > 5e4  # the launch did work (J)
    assert np.abs(residual[launch]).max() <= 1e-9 * sources[launch][-1]
    assert np.abs(residual).max() <= 1e-9 * np.abs(sources).max()


def test_the_work_outputs_are_the_laws_accounts(drive):
    from plant_models.powertrain.components import work_accounts

    plant, res = drive
    last = dict(zip(res.names, res.values[-1]))
    for name, value in work_accounts(plant.params.powertrain, plant.core.law_z).items():
        if name in last:
            assert last[name] == value
    assert last["kinetic_energy"] == pytest.approx(plant.core.kinetic_energy(), rel=1e-12)
    assert last["work_engine"] > 0.0 > last["work_converter"]
