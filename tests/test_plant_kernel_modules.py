"""The transmission and servo plants keep every kernel, and what it calls, in one module of their own.

The compile caches (``plant_models/core/cache.py``) stamp a plant module's kernels with the core's and the
components' sources, and numba checks a kernel against its own file only: a kernel that called a compiled
function of another plant module would keep running that module's old code after an edit of it.  So the
split of ``transmission`` and ``servo`` (issue 35) puts all of their compiled code in ``transmission_kernel``
and ``servo_kernel``; the modules with the plant classes compile nothing.  This checks both halves: no
kernel is defined in the class modules, and every compiled function a kernel calls by name is of its own
module, of the core or of a component (whose caches ``cache.py`` stamps).
"""

from __future__ import annotations

import importlib

import pytest
from numba.core.registry import CPUDispatcher

STAMPED = ("plant_models.core.", "plant_models.powertrain.")
PAIRS = [("plant_models.plants.transmission", "plant_models.plants.transmission_kernel"),
         ("plant_models.plants.servo", "plant_models.plants.servo_kernel")]


def _kernels_defined_in(module) -> dict[str, CPUDispatcher]:
    return {name: obj for name, obj in vars(module).items()
            if isinstance(obj, CPUDispatcher) and obj.py_func.__module__ == module.__name__}


@pytest.mark.parametrize("plant, kernel", PAIRS)
def test_the_class_module_compiles_nothing_and_the_kernel_module_everything(plant, kernel):
    p, k = importlib.import_module(plant), importlib.import_module(kernel)
    assert _kernels_defined_in(p) == {}
    kernels = _kernels_defined_in(k)
    assert kernels and all(getattr(p, name, None) is None or getattr(p, name) is fn for name, fn in kernels.items())
    step = "transmission_step" if "transmission" in kernel else "servo_step"
    assert getattr(p, step) is kernels[step]  # the class module runs the kernel module's step


@pytest.mark.parametrize("plant, kernel", PAIRS)
def test_every_compiled_call_of_a_kernel_stays_where_the_caches_are_stamped(plant, kernel):
    k = importlib.import_module(kernel)
    for name, fn in _kernels_defined_in(k).items():
        for callee in fn.py_func.__code__.co_names:
            obj = fn.py_func.__globals__.get(callee)
            if isinstance(obj, CPUDispatcher):
                where = obj.py_func.__module__
                assert where == kernel or where.startswith(STAMPED), f"{name} calls {callee} of {where}"
