"""The compile caches follow what a kernel contains (plant_models/core/cache.py).

A fake ``plant_models`` tree with numba-style cache files stands in for the
real one, so the rules are checked without compiling anything: a comment
added to a component drops the components' caches and those of the plants
that import a component (directly or through another module), and keeps the
core's and the other plants'; a change in the core drops everything above it;
a change in one plant module drops the caches of the modules that import it
(numba's own check covers the module's own file), and so does a change in a
top-level module whose constants a plant folds in; the ``fmi`` folder's
compiled assembly follows the FMI modules whose compiled functions and
constants it links (an intrinsic made by a call counts).  ``bench/bench_cache_edit.py`` measures the same on
the real tree.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from plant_models.core.cache import drop_stale_caches, links_components, module_dependencies

SOURCES = {
    "core/__init__.py": "",
    "core/step.py": "def step():\n    return 1\n",
    "powertrain/__init__.py": "",
    "powertrain/law.py": "from ..core.api import L\n",
    "plants/__init__.py": "",
    "plants/chain.py": "from ..core.api import core_step\n",
    "plants/dct.py": "from ..powertrain import law\n\n\n@njit\ndef helper():\n    return 1\n",
    "plants/geared.py": "from .dct import helper\n",  # a component through another plant module
    "plants/late.py": "def f():\n    from plant_models.powertrain.law import g\n",  # inside a function
    "plants/pressure.py": "from ..clutch import BAR\n",  # folds in a top-level module's constant
    "plants/ported.py": "from ..plant import Plant\n",  # a class only: links nothing
    "plant.py": "class Plant:\n    pass\n",
    "__init__.py": "",
    "clutch.py": "BAR = 1e5\n",
    "offline.py": "from .core.api import call_step_at\n",
    "fmi/__init__.py": "",
    "fmi/cabi.py": "from numba.extending import intrinsic\n\nptr_f64 = intrinsic(_pointer_from(float))\n",
    "fmi/model_exchange.py": "EVENT_TIME_TOL_S = 1e-12\n",
    "fmi/me_compiled.py": "from .model_exchange import EVENT_TIME_TOL_S\n\n\n@njit\ndef me_advance():\n    return 1\n",
    "fmi/assembly.py": "class FmuAssembly:\n    pass\n",
    "fmi/compiled.py": ("from ..core.api import L\nfrom .assembly import FmuAssembly\nfrom .cabi import ptr_f64\n"
                        "from .me_compiled import me_advance\n"),
}
KERNELS = {
    "core": ["step.step-1"],
    "powertrain": ["law.law-1"],
    "plants": ["chain._step-1", "dct._step-1", "geared._step-1", "late.f-1", "pressure._step-1",
               "ported._step-1"],
    "": ["offline.run_steps-1"],
    "fmi": ["compiled.assembly_step-1"],
}


def make_tree(root: Path) -> Path:
    models = root / "plant_models"
    for name, text in SOURCES.items():
        (models / name).parent.mkdir(parents=True, exist_ok=True)
        (models / name).write_text(text)
    return models


def fill_caches(models: Path) -> None:
    for package, kernels in KERNELS.items():
        folder = (models / package / "__pycache__") if package else models / "__pycache__"
        folder.mkdir(parents=True, exist_ok=True)
        for kernel in kernels:
            (folder / f"{kernel}.py311.nbi").write_bytes(b"index")
            (folder / f"{kernel}.py311.1.nbc").write_bytes(b"code")


def cached(models: Path) -> set[str]:
    return {p.name.split(".py311")[0] for p in models.rglob("*.nbi")}


ALL = {k for kernels in KERNELS.values() for k in kernels}


@pytest.fixture()
def models(tmp_path):
    models = make_tree(tmp_path)
    fill_caches(models)
    drop_stale_caches(models)  # first call: no stamps yet, so every stamped cache goes; stamps written
    fill_caches(models)
    drop_stale_caches(models)
    assert cached(models) == ALL  # stamps current: nothing dropped
    return models


def test_which_modules_link_a_component(tmp_path):
    links = links_components(make_tree(tmp_path))
    assert links[("plants", "dct")] and links[("plants", "geared")] and links[("plants", "late")]
    assert not links[("plants", "chain")] and not links[("", "offline")]


def test_a_comment_in_a_component_keeps_the_core_and_the_plants_without_components(models):
    law = models / "powertrain/law.py"
    law.write_text(law.read_text() + "# a comment\n")
    drop_stale_caches(models)
    assert cached(models) == {"step.step-1", "chain._step-1", "pressure._step-1", "ported._step-1",
                              "offline.run_steps-1", "compiled.assembly_step-1"}
    fill_caches(models)
    drop_stale_caches(models)  # the new stamps hold: nothing goes a second time
    assert cached(models) == ALL


def test_a_change_in_the_core_drops_every_stamped_cache(models):
    step = models / "core/step.py"
    step.write_text(step.read_text() + "# a comment\n")
    drop_stale_caches(models)
    assert cached(models) == set()


def test_a_change_in_a_plant_module_drops_the_modules_that_import_it(models):
    """numba checks a kernel against its own file; ``geared`` inlines ``dct``'s code, so it goes too."""
    dct = models / "plants/dct.py"
    dct.write_text(dct.read_text() + "# a comment\n")
    drop_stale_caches(models)
    assert cached(models) == ALL - {"geared._step-1"}  # dct's own cache is numba's to check
    fill_caches(models)
    drop_stale_caches(models)
    assert cached(models) == ALL


def test_a_constant_of_a_top_level_module_drops_the_plants_that_fold_it_in(models):
    clutch = models / "clutch.py"
    clutch.write_text("BAR = 100000.0\n")
    drop_stale_caches(models)
    assert cached(models) == ALL - {"pressure._step-1"}


def test_each_module_depends_on_what_it_imports_through_others(tmp_path):
    deps = module_dependencies(make_tree(tmp_path))
    names = {key: sorted(p.name for p in paths) for key, paths in deps.items()}
    assert names[("plants", "geared")] == ["dct.py"]  # core/ and powertrain/ have stamps of their own
    assert names[("plants", "pressure")] == ["clutch.py"]
    assert names[("plants", "chain")] == [] and names[("", "offline")] == []
    assert names[("plants", "ported")] == []  # classes are not in a kernel


def test_an_edit_of_a_module_of_classes_recompiles_nothing(models):
    plant = models / "plant.py"
    plant.write_text(plant.read_text() + "# a comment\n")
    drop_stale_caches(models)
    assert cached(models) == ALL


@pytest.mark.parametrize("edited", ["fmi/cabi.py", "fmi/model_exchange.py", "fmi/me_compiled.py"])
def test_an_fmi_module_the_compiled_assembly_links_drops_its_cache_alone(models, edited):
    """``cabi.py``'s pointer intrinsic is made by a call (``ptr_f64 = intrinsic(...)``), not a decorator;
    ``model_exchange.py``'s constant reaches the assembly through ``me_compiled.py``."""
    path = models / edited
    path.write_text(path.read_text() + "# a comment\n")
    drop_stale_caches(models)
    assert cached(models) == ALL - {"compiled.assembly_step-1"}
    fill_caches(models)
    drop_stale_caches(models)
    assert cached(models) == ALL


def test_the_fmi_modules_dependencies(tmp_path):
    deps = module_dependencies(make_tree(tmp_path))
    names = {key: sorted(p.name for p in paths) for key, paths in deps.items()}
    assert names[("fmi", "compiled")] == ["cabi.py", "me_compiled.py", "model_exchange.py"]  # not assembly.py


def test_an_edit_of_the_fmi_assembly_class_recompiles_nothing(models):
    assembly = models / "fmi/assembly.py"
    assembly.write_text(assembly.read_text() + "# a comment\n")
    drop_stale_caches(models)
    assert cached(models) == ALL


def test_a_copy_of_the_tree_elsewhere_keeps_its_caches(models, tmp_path):
    """The stamps name files relative to ``plant_models``: a second clone or a container image with the same
    sources (its caches copied along) compiles nothing again, and an edit there still drops what it touches."""
    copy = tmp_path / "elsewhere" / "clone" / "plant_models"
    shutil.copytree(models, copy)
    drop_stale_caches(copy)
    assert cached(copy) == ALL
    dct = copy / "plants/dct.py"
    dct.write_text(dct.read_text() + "# a comment\n")
    drop_stale_caches(copy)
    assert cached(copy) == ALL - {"geared._step-1"}
    assert cached(models) == ALL  # the original tree is its own


def test_a_copy_with_different_sources_drops_what_differs(models, tmp_path):
    """Equal names are not enough: the contents decide (a copy whose ``clutch.py`` differs drops the plant that
    folds its constant in, as an edit in place would)."""
    copy = tmp_path / "other" / "plant_models"
    shutil.copytree(models, copy)
    (copy / "clutch.py").write_text("BAR = 100000.0\n")
    drop_stale_caches(copy)
    assert cached(copy) == ALL - {"pressure._step-1"}
