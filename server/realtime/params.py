"""The table of parameters a running server may tune (``get_params`` / ``set_params``).

The parameters themselves are declared below, where they live
(:class:`plant_models.plant.Param`): the plant offers its own through
``plant.tunable_parameters()`` (a friction plant: drag of each shaft, the
static and Coulomb gains, viscous drag and actuator lag of each row; a plant
may add its own), and the loop adds ``watchdog.timeout_s`` /
``watchdog.hold_s`` / ``watchdog.ramp_s`` / ``watchdog.enabled``.  Only
values the compiled step reads afresh at every step are offered, so a change
takes effect at the next tick and never leaves a cache stale.

A ``set_params`` request is atomic: every value is validated (finite, in
range, and each parameter's ``at_most`` bound, e.g. kinetic <= static,
against the values the request leaves in place) before any is written.
"""

from __future__ import annotations

from typing import Any

from plant_models.errors import ParamError
from plant_models.plant import Param, Plant

__all__ = ["Param", "ParamTable"]


class ParamTable:
    """The tunable parameters of one running plant and loop."""

    def __init__(self, plant: Plant, extra: list[Param] = ()):
        self.plant = plant
        self._params: dict[str, Param] = {}
        for p in plant.tunable_parameters():
            self._add(p)
        for p in extra:
            self._add(p)

    def _add(self, p: Param) -> None:
        if p.name in self._params:
            raise ValueError(f"duplicate parameter {p.name}")
        self._params[p.name] = p

    def names(self) -> list[str]:
        return list(self._params)

    def describe(self, names: list[str] | None = None) -> dict[str, dict]:
        """``{name: {value, unit, min, max, doc}}`` for the given (or all) parameters."""
        if names is None:
            names = list(self._params)
        out = {}
        for nm in names:
            p = self._lookup(nm)
            v = p.get()
            out[nm] = {"value": bool(v) if p.kind == "bool" else v, "unit": p.unit, "min": p.lo, "max": p.hi,
                       "doc": p.doc, "type": p.kind}
        return out

    def _lookup(self, name: Any) -> Param:
        if not isinstance(name, str):
            raise ParamError(f"parameter names must be strings, got {type(name).__name__}")
        try:
            return self._params[name]
        except KeyError:
            raise ParamError(f"no parameter {name!r}; get_params lists them") from None

    def set_many(self, values: Any) -> dict[str, float]:
        """Validate all, then apply all; raises ParamError (nothing changed) on any problem."""
        if not isinstance(values, dict) or not values:
            raise ParamError("'params' must be a non-empty map of parameter name to value")
        new: dict[str, float] = {}
        for name, value in values.items():
            new[name] = self._lookup(name).validate(value)
        # cross-checks against the values the request leaves in place
        for name in new:
            for low, high in self._bounds_touching(name):
                lv = new.get(low, self._params[low].get())
                hv = new.get(high, self._params[high].get())
                if lv > hv:
                    base, leaf = low.rsplit(".", 1)
                    raise ParamError(f"{base}: {leaf} {lv:g} must not exceed {high.rsplit('.', 1)[1]} {hv:g}")
        for name, v in new.items():
            self._params[name].set(v)
        return new

    def _bounds_touching(self, name: str) -> list[tuple[str, str]]:
        """The (parameter, its ``at_most`` bound) pairs in which ``name`` takes part."""
        p = self._params[name]
        pairs = [(name, p.at_most)] if p.at_most else []
        return pairs + [(other.name, name) for other in self._params.values() if other.at_most == name]
