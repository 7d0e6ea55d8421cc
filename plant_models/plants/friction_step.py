"""The one step and refresh of every plant on the friction core, compiled as each plant module's own.

A friction plant's step is always the same sequence around its own two
compiled functions (``docs/plants.md``, "The plant contract"): its inputs to
the core (``_inputs``), the core's step, the core's state to its outputs
(``_outputs``), with a refused step reporting only that; its refresh maps
the inputs and writes the outputs without stepping.  Some plants add a stage:
the transmission's powertrain samples its driver before the inputs
(``_before_inputs``), the clutch hydraulics of the Powershift, the DCT and
the transmission run their command path before the core's step and their
piston after an accepted one (``_before_core``, ``_after_core``).  The
sequence is written once, here (:func:`_step`, :func:`_refresh`), and a
stage a plant does not define is :func:`no_stage`, which compiles to nothing.
The hydraulics' two stages are written once too
(:func:`hydraulics_stages`: the Powershift and the DCT take them; the
transmission finds its hydraulics' parameters through its own table and
keeps its own).

Why it is compiled *as the plant module's own*: numba keeps a compiled
function's cache beside the source file of its code and checks the cache
against that file only.  One shared function compiled for seven plants would
keep one cache for seven different contents (each links its plant's
``_inputs`` and ``_outputs``), and a closure over a plant's functions is
keyed by what pickling them gives, which differs in every process: neither
would load from the cache.  So :func:`plant_kernels` makes, for each
plant module, a function from this module's code whose file is the plant's
module and whose globals are this module's with the plant's stages: numba
caches it beside the plant's module, under the plant's name
(``dct.dct_step-<line>``), and an edit of the plant recompiles it, as it
would the plant's own function.  An edit of this module recompiles every
plant's: the plant modules import this module whole
(``from . import friction_step``), which ``core/cache.py`` counts as taking
its compiled content.
"""

from __future__ import annotations

import sys
import types

from numba import njit

from ..core.api import JIT, JIT_STAGE, L, core_step, raw_f, raw_i


@njit(**JIT_STAGE)
def no_stage(mf, mi, df, dt):
    """A stage the plant does without (inlined: nothing).  Called in the real-time loop."""


# The sequence.  Its names _inputs, _outputs and the three optional stages are not this module's: each plant's
# copy of the function reads them from the globals plant_kernels gives it.
def _step(mf, mi, df, di, dt):
    """Inputs -> core step -> outputs.  Called in the real-time loop."""
    rmf, rmi, rdf, rdi = raw_f(mf), raw_i(mi), raw_f(df), raw_i(di)
    _before_inputs(rmf, rmi, rdf, dt)
    pst = _inputs(rmf, rmi, rdf, rdi)
    _before_core(rmf, rmi, rdf, dt)
    st = core_step(rmf, rmi, rdf, rdi, dt)
    if st != L.ST_BAD_INPUT:  # a refused step reports only that
        st |= pst
        _after_core(rmf, rmi, rdf, dt)
    _outputs(rmf, rmi, rdf, rdi, st, dt)
    return st


def _refresh(mf, mi, df, di, st):
    """Inputs -> outputs without stepping (at the start)."""
    rmf, rmi, rdf, rdi = raw_f(mf), raw_i(mi), raw_f(df), raw_i(di)
    pst = _inputs(rmf, rmi, rdf, rdi)
    _before_core(rmf, rmi, rdf, 0.0)
    _outputs(rmf, rmi, rdf, rdi, st | pst, 0.0)
    return pst


# The clutch hydraulics' two stages, the same for every plant whose hydraulics' blocks sit at its own PF_HYD (float
# parameters, after the plant's) and at the data offset its int parameter PI_HYD_D holds (-1: no hydraulics).  The
# names PI_HYD_D, PF_HYD, hydraulics_before and hydraulics_after are the plant's: hydraulics_stages gives them.
def _hydraulics_before_core(mf, mi, df, dt):
    """Stage before the core's step: the clutch hydraulics, if the plant has them, take the command through dead
    time and valve and stroke the piston for this step.  Called in the real-time loop."""
    ohd = mi[mi[L.MI_PLANT] + PI_HYD_D]
    if ohd >= 0:
        hydraulics_before(mf, mi, df, mi[L.MF_PLANT] + PF_HYD, mi[L.DF_PLANT] + ohd, dt)


def _hydraulics_after_core(mf, mi, df, dt):
    """Stage after an accepted core step: the clutch hydraulics' piston, if any.  Called in the real-time loop."""
    ohd = mi[mi[L.MI_PLANT] + PI_HYD_D]
    if ohd >= 0:
        hydraulics_after(mf, mi, df, mi[L.MF_PLANT] + PF_HYD, mi[L.DF_PLANT] + ohd, dt)


HYDRAULICS_TEMPLATES = (_hydraulics_before_core, _hydraulics_after_core)  # compiled once per plant module


# the stages a plant module defines by these names (the first two it must); the others default to no_stage
FRICTION_STAGES = ("_inputs", "_outputs", "_before_inputs", "_before_core", "_after_core")
TEMPLATES = (_step, _refresh)  # the sequence: compiled once per plant module, never on its own


def _as_plant_function(template, plant_globals: dict, name: str, line: int):
    """``template``'s code as a function of the plant module: its file and name, this module's globals with the
    plant's stages (numba reads the globals when it compiles, at the plant's first reset)."""
    namespace = dict(globals())
    for stage in FRICTION_STAGES:
        if stage in plant_globals:
            namespace[stage] = plant_globals[stage]
        elif stage in ("_inputs", "_outputs"):
            raise TypeError(f"{plant_globals['__name__']} defines no {stage}: a friction plant needs both")
        else:
            namespace[stage] = no_stage
    namespace["__name__"] = plant_globals["__name__"]  # the function's __module__: the plant's module
    code = template.__code__.replace(co_filename=plant_globals["__file__"], co_name=name, co_qualname=name,
                                     co_firstlineno=line)
    function = types.FunctionType(code, namespace, name)
    function.__doc__ = template.__doc__
    return function


def plant_kernels(plant_globals: dict, prefix: str):
    """The step and refresh of the plant module whose ``globals()`` these are: ``<prefix>_step`` and
    ``<prefix>_refresh``, numba dispatchers (``@njit(**JIT)``, compiled at the plant's first reset) cached beside
    the plant's module.  Call it at the module's top level, after its stages."""
    line = sys._getframe(1).f_lineno  # where the plant module makes them: their line in numba's cache names
    return tuple(njit(**JIT)(_as_plant_function(t, plant_globals, f"{prefix}{t.__name__}", line)) for t in TEMPLATES)


def hydraulics_stages(plant_globals: dict, hydraulics_before, hydraulics_after):
    """The clutch hydraulics' ``_before_core`` and ``_after_core`` of the plant module whose ``globals()`` these
    are, as its own functions (``@njit(**JIT_STAGE)``, cached beside the plant's module, as the step is): they read
    the plant's ``PI_HYD_D`` and ``PF_HYD`` and call the compiled ``hydraulics_before`` / ``hydraulics_after`` of
    ``powertrain/hydraulics.py``, which the plant passes (this module imports no component, so a plant without
    hydraulics links none).  Call it at the module's top level, after those constants, before
    :func:`plant_kernels`."""
    line = sys._getframe(1).f_lineno
    namespace = dict(globals(), PI_HYD_D=plant_globals["PI_HYD_D"], PF_HYD=plant_globals["PF_HYD"],
                     hydraulics_before=hydraulics_before, hydraulics_after=hydraulics_after,
                     __name__=plant_globals["__name__"])
    stages = []
    for template, name in zip(HYDRAULICS_TEMPLATES, ("_before_core", "_after_core")):
        code = template.__code__.replace(co_filename=plant_globals["__file__"], co_name=name, co_qualname=name,
                                         co_firstlineno=line)
        function = types.FunctionType(code, namespace, name)
        function.__doc__ = template.__doc__
        stages.append(njit(**JIT_STAGE)(function))
    return tuple(stages)


__all__ = ["FRICTION_STAGES", "plant_kernels", "hydraulics_stages", "no_stage"]
