"""The exact static/Coulomb friction core (Morselli, Zanasi & Ferracin, eq. 13).

Python users build a :class:`CoreSpec` and get a :class:`Core` handle with
named views into the flat buffers; plant kernels reach the compiled step
through :mod:`plant_models.core.api` only.

The package's modules, in the order of the method: :mod:`.layout` (the flat
buffers), :mod:`.spec` (the network), :mod:`.rowforces` and
:mod:`.dynamics` (the derivative at a fixed friction mode; forces along
further entries and of driven rows), :mod:`.kinematic` (the kinematic
clutch rows' phases), :mod:`.linalg`, :mod:`.tree`, :mod:`.stuckset` and
:mod:`.modes` (which rows stay stuck, the stuck set's caches and the order
that rebuilds their speeds exactly), :mod:`.integrate` (RK4 sub-steps
through events), :mod:`.step` (the step, its start and its roll-back),
:mod:`.entry` (the compiled C entry points), :mod:`.handle`
(:class:`Core`), :mod:`.api` (the door), :mod:`.jit` and :mod:`.cache`
(compile options and numba's cache; every compiled module imports
:mod:`.jit` first, which drops stale caches before any kernel loads).

``Core`` and the spec types are loaded on first use, from the door, so that
importing the layout (for its slot names) loads neither numba nor any
compiled code.
"""

_LAZY = {name: ".api" for name in ("Core", "CoreSpec", "Row", "Settings", "SpecError", "Spring")}  # the door


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Core", "CoreSpec", "Row", "Settings", "SpecError", "Spring"]
