"""A plant declares the fault kinds of its own physics (plant_models/contract/faults.py), as an adapter type
declares its transport's: the server's fault set only dispatches by what is declared.

The kinds a plant declares are what ``describe`` reports and the only ones a fault map may name; the server's
fault module names none of them; a new declaration on a plant class reaches the fault map and the plant with no
edit of ``server/``.  And the constants this wave gave one home are defined once.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from plant_models.contract.clutch_faults import CLUTCH_FAULTS
from plant_models.contract.faults import (PlantFault, PlantFaults, clutch_fault_row, fault_number,
                                          plant_fault_declarations, plant_fault_kinds)
from plant_models.errors import FaultError
from plant_models.powertrain.hydraulics_plant import HYDRAULIC_FAULTS
from plant_models.registry import BUILTIN, describe_config, load_plant, plant_class
from server.realtime.faults import SIGNAL_KINDS, FaultSet, fault_catalogue, parse_fault
from server.realtime.loop_config import LoopConfig
from server.realtime.runtime import assemble

ROOT = Path(__file__).resolve().parents[1]


def _describe(plant) -> dict:
    srv = assemble(plant, [], LoopConfig(mode="lockstep"))
    rep = srv.control.handle({"cmd": "describe"})
    assert rep["ok"], rep
    return rep["plant"]


def test_each_plant_kind_declares_its_clutch_kinds_and_the_catalogue_lists_exactly_those():
    both = CLUTCH_FAULTS.kinds + HYDRAULIC_FAULTS.kinds  # a plant whose clutches may carry hydraulics
    expect = {"powershift": both, "dct": both, "transmission": both, "chain": CLUTCH_FAULTS.kinds,
              "damper": CLUTCH_FAULTS.kinds, "kinematic": CLUTCH_FAULTS.kinds, "servo": None}
    assert set(expect) == set(BUILTIN)
    for kind, kinds in expect.items():
        cls, _ = plant_class(kind)
        cat = fault_catalogue(cls)
        assert list(cat)[0] == "signal" and cat["signal"] == list(SIGNAL_KINDS), kind
        if kinds is None:  # the servo has no friction rows: no clutch target at all
            assert plant_fault_kinds(cls) == {} and "clutch" not in cat, kind
        else:
            assert plant_fault_kinds(cls) == {"clutch": list(kinds)} and cat["clutch"] == list(kinds), kind


@pytest.mark.parametrize("config", ["powershift", "chain"])
def test_describe_reports_the_kinds_the_plant_declares_and_the_fault_map_takes_only_those(config):
    plant = load_plant(config)
    d = _describe(plant)
    declared = plant_fault_kinds(plant)
    assert d["fault_kinds"] == fault_catalogue(plant)
    assert d["fault_kinds"]["clutch"] == declared["clutch"]
    # every declared kind reaches its declaration; a kind of another plant's declaration is refused by name
    for kind in declared["clutch"]:
        try:
            spec = parse_fault({"target": "clutch", "clutch": 1, "kind": kind, "value": 0.5}, plant)
        except FaultError as e:  # a check of the declaration (a value out of range, a clutch without hydraulics)
            assert "must be one of" not in str(e), (kind, e)
        else:
            assert spec.plant is not None and spec.plant.kind == kind
    others = [k for k in HYDRAULIC_FAULTS.kinds if k not in declared["clutch"]]
    for kind in others:
        with pytest.raises(FaultError, match=f"'kind' of a clutch fault must be one of "
                                             f"{', '.join(declared['clutch'])}, got '{kind}'"):
            parse_fault({"target": "clutch", "clutch": 1, "kind": kind}, plant)
    assert (config == "chain") == bool(others)


def _string_constants(path: Path) -> set[str]:
    """The string literals of a module's code (its docstrings and comments left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return {n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings}


def test_the_server_fault_modules_name_no_plant_fault_kind_or_target():
    kinds = {k for kind in BUILTIN for d in plant_fault_declarations(plant_class(kind)[0]) for k in d.kinds}
    assert {"stuck_closed", "worn", "slow_fill", "valve_stuck"} <= kinds
    for rel in ("server/realtime/faults.py", "server/realtime/fault_schedule.py"):
        named = _string_constants(ROOT / rel)
        assert not named & (kinds | {"clutch"}), (rel, sorted(named & (kinds | {"clutch"})))
        assert "NEUTRAL_OVERLAY" not in (ROOT / rel).read_text(encoding="utf-8"), rel


class _Brake(PlantFaults):
    """A declaration from outside the project: a ``brake`` target whose ``fade`` scales a row's capacity."""

    target = "brake"
    kinds = ("fade",)

    def __init__(self):
        self.applied: list[tuple[list[tuple[int, float]], frozenset]] = []

    def parse_fault(self, d, plant, where):
        row = clutch_fault_row({k: v for k, v in d.items() if k != "brake"} | {"clutch": d.get("brake")}, plant, where)
        return PlantFault("brake", d["kind"], plant.row_names()[row], value=fault_number(d, "value", where, lo=0.0,
                                                                                          hi=1.0), row=row)

    def apply(self, plant, faults, touched):
        self.applied.append(([(f.row, f.value) for f in faults], touched))
        rows = {f.row: f.value for f in faults}
        for r in sorted(set(touched) | set(rows)):
            plant.set_clutch_overlay(r, capacity=rows.get(r, 1.0))
        return frozenset(rows)


def test_a_new_declaration_on_a_plant_class_reaches_the_fault_map_and_the_plant_without_an_edit_of_server():
    plant = load_plant("chain")
    brake = _Brake()
    # the class of this one plant gains a declaration (as a plant module would declare it)
    plant.__class__ = type("BrakedChain", (type(plant),), {"fault_declarations": (brake,)})
    assert plant_fault_declarations(plant) == (CLUTCH_FAULTS, brake)
    assert list(fault_catalogue(plant))[:3] == ["signal", "clutch", "brake"]
    faults = FaultSet(plant)
    mf0 = plant.mf.copy()
    with pytest.raises(FaultError, match="'kind' of a brake fault must be one of fade, got 'worn'"):
        faults.set({"target": "brake", "brake": 1, "kind": "worn", "value": 0.5})
    spec = faults.set({"target": "brake", "brake": 1, "kind": "fade", "value": 0.25})
    assert spec.name == f"brake:{plant.row_names()[0]}:fade" and brake.applied[-1] == ([(0, 0.25)], frozenset())
    assert plant.clutch_overlay(0) == (0.25, 1.0, 1.0, 0.0) and not np.array_equal(plant.mf, mf0)
    assert faults.snapshot_state()["rows"] == {}  # this declaration keeps no tuned floats of its own
    faults.clear()
    assert brake.applied[-1] == ([], frozenset({0}))
    assert plant.clutch_overlay(0) == (1.0, 1.0, 1.0, 0.0) and np.array_equal(plant.mf, mf0)


def _assignments(name: str) -> list[str]:
    """The modules of the three floors that assign ``name`` at their top level."""
    out = []
    for pkg in ("plant_models", "io_adapters", "server"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                    if isinstance(node, ast.AnnAssign) else []
                if any(isinstance(leaf, ast.Name) and leaf.id == name for t in targets for leaf in ast.walk(t)):
                    out.append(str(path.relative_to(ROOT)))
    return out


@pytest.mark.parametrize("name,home", [
    ("NEUTRAL_OVERLAY", "plant_models/contract/clutch_faults.py"),
    ("STUCK_STATIC_FACTOR", "plant_models/contract/clutch_faults.py"),
    ("RATIO_LIMIT", "plant_models/plants/ratio.py"),
    ("RATIO_MIN_OUTPUT_SPEED", "plant_models/plants/ratio.py"),
])
def test_a_shared_constant_is_defined_once(name, home):
    assert _assignments(name) == [home]


def test_the_three_plants_with_gears_read_the_ratio_constants_from_their_one_home():
    from plant_models.plants import dct, powershift, ratio, transmission, transmission_kernel

    for mod in (dct, powershift, transmission_kernel):
        assert mod.RATIO_LIMIT is ratio.RATIO_LIMIT and mod.RATIO_MIN_OUTPUT_SPEED is ratio.RATIO_MIN_OUTPUT_SPEED
    assert not hasattr(dct, "RATIO_MIN_WHEEL_SPEED") and transmission.RATIO_LIMIT is ratio.RATIO_LIMIT
    for config in ("dct", "powershift", "zf8hp"):  # the declared range of the ratio output is the limit
        out = {s["name"]: s for s in describe_config(config)["outputs"]}["ratio"]
        assert (out["min"], out["max"]) == (-ratio.RATIO_LIMIT, ratio.RATIO_LIMIT), config
