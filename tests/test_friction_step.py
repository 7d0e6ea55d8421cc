"""The one step and refresh of every friction plant (plant_models/plants/friction_step.py).

Every plant on the friction core steps through the one sequence, compiled as
its module's own functions: the code is the sequence's, the file numba caches
it beside is the plant's, an edit of the sequence recompiles every plant (the
cache rule of ``core/cache.py`` follows the import) and an edit of one plant
that plant only.  The golden traces (tests/test_golden_traces.py) hold the
results bit for bit.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from plant_models.core.cache import module_dependencies
from plant_models.friction_plant import FrictionPlant
from plant_models.plants import friction_step
from plant_models.registry import BUILTIN, load_plant, plant_class

ROOT = Path(__file__).resolve().parents[1]
FRICTION = sorted(kind for kind in BUILTIN if issubclass(plant_class(kind)[0], FrictionPlant))
STAGES = {"transmission": {"_before_inputs", "_before_core", "_after_core"},
          "powershift": {"_before_core", "_after_core"}, "dct": {"_before_core", "_after_core"}}


def _kernel_module(kind: str):
    """The module of a plant kind's kernels (its ``*_kernel`` module if it has one)."""
    module = importlib.import_module(plant_class(kind)[0].__module__)
    return importlib.import_module(module.__name__ + "_kernel") if importlib.util.find_spec(
        module.__name__ + "_kernel") else module


def test_the_friction_plants_are_the_six_and_each_steps_through_the_one_sequence():
    assert FRICTION == ["chain", "damper", "dct", "kinematic", "powershift", "transmission"]
    for kind in FRICTION + ["two_shafts"]:
        module = importlib.import_module("plant_models.plants.two_shafts") if kind == "two_shafts" \
            else _kernel_module(kind)
        cls = module.TwoShaftsPlant if kind == "two_shafts" else plant_class(kind)[0]
        kernels = {k.name: k.function for k in cls.kernels}
        for name, template in (("step", friction_step._step), ("refresh", friction_step._refresh)):
            fn = kernels[name].py_func
            assert fn.__code__.co_code == template.__code__.co_code, (kind, name)
            assert fn.__code__.co_filename == module.__file__ and fn.__module__ == module.__name__, (kind, name)
            assert fn.__name__ == f"{kind}_{name}" and getattr(module, fn.__name__) is kernels[name]
            own = {s for s in friction_step.FRICTION_STAGES if fn.__globals__[s] is not friction_step.no_stage}
            assert own == {"_inputs", "_outputs"} | STAGES.get(kind, set()), kind
            assert all(fn.__globals__[s] is getattr(module, s) for s in own), kind


def test_no_plant_module_writes_the_sequence_again():
    """Only friction_step.py calls the core's step; a plant module supplies its stages and one line."""
    for path in sorted((ROOT / "plant_models" / "plants").glob("*.py")):
        if path.name != "friction_step.py":
            assert "core_step(" not in path.read_text(encoding="utf-8"), path.name


def test_an_edit_of_the_sequence_recompiles_every_friction_plant_and_of_one_plant_that_plant():
    deps = module_dependencies(ROOT / "plant_models")
    seq = ROOT / "plant_models" / "plants" / "friction_step.py"
    for kind in FRICTION + ["two_shafts"]:
        name = "two_shafts" if kind == "two_shafts" else _kernel_module(kind).__name__.rsplit(".", 1)[1]
        assert seq in deps[("plants", name)], name
    assert not any(ROOT / "plant_models" / "plants" / "dct.py" in d for (pkg, n), d in deps.items() if n != "dct")


def test_a_plant_without_its_inputs_stage_is_refused_when_its_module_loads():
    with pytest.raises(TypeError, match="defines no _inputs"):
        friction_step.plant_kernels({"__name__": "my_plant", "__file__": __file__, "_outputs": None}, "my")


PROBE = """
from plant_models.registry import load_plant
from plant_models.plants import chain
load_plant("chain")
print(dict(chain.chain_step.stats.cache_hits), dict(chain.chain_step.stats.cache_misses))
"""


def test_the_sequence_is_cached_beside_the_plant_module_and_loads_from_there():
    load_plant("chain")  # compiled (or loaded) once here
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT, check=True)
    line = out.stdout.strip().splitlines()[-1]
    assert line.startswith("{'int64(") and line.endswith(": 1} {}"), line  # a hit, no miss: a new process loads it
    from plant_models.plants import chain

    index = Path(chain.chain_step.stats.cache_path)
    assert any(p.name.startswith("chain.chain_step-") and p.suffix == ".nbi" for p in index.iterdir())


def test_the_hydraulics_stages_are_written_once_and_compiled_as_each_plants_own():
    """The Powershift's and the DCT's ``_before_core`` / ``_after_core`` are the one pair of
    ``friction_step.hydraulics_stages``: the same code, each plant's file (so numba caches them beside the plant),
    each with its own hydraulics slots."""
    for kind in ("powershift", "dct"):
        module = _kernel_module(kind)
        for name, template in zip(("_before_core", "_after_core"), friction_step.HYDRAULICS_TEMPLATES):
            fn = getattr(module, name).py_func
            assert fn.__code__.co_code == template.__code__.co_code, (kind, name)
            assert fn.__code__.co_filename == module.__file__ and fn.__module__ == module.__name__, (kind, name)
            assert (fn.__globals__["PI_HYD_D"], fn.__globals__["PF_HYD"]) == (module.PI_HYD_D, module.PF_HYD)
            assert f"def {name}(" not in Path(module.__file__).read_text(encoding="utf-8"), (kind, name)
    assert friction_step.HYDRAULICS_TEMPLATES[0].__code__.co_filename == friction_step.__file__


@pytest.mark.parametrize("kind, tables", [
    ("dct", {"SH": "SHAFTS", "ROW": "ROWS", "PF": "PLANT_FLOATS", "PI": "PLANT_INTS", "PD": "PLANT_INT_DATA"}),
    ("powershift", {"PF": "PLANT_FLOATS", "PI": "PLANT_INTS"}),
])
def test_the_slot_numbers_of_a_plant_module_are_its_tables_in_order(kind, tables):
    """Each slot constant is its table entry's place (a block's: the widths before it summed), the block's
    length the widths summed: a new slot is one line of a table and no number is written by hand."""
    module = _kernel_module(kind)
    for prefix, table_name in tables.items():
        offset = 0
        for entry in getattr(module, table_name):
            width = entry[1] if len(entry) == 3 else 1
            assert getattr(module, f"{prefix}_{entry[0].upper()}") == offset, (prefix, entry[0])
            offset += width
        length = getattr(module, f"{prefix}_LEN", None) or getattr(module, f"N_{table_name}", None)
        assert length == offset, (prefix, table_name)
