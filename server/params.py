"""Parameters that may be tuned while the server runs (``get_params`` / ``set_params``).

Only parameters the compiled step reads afresh at every step are offered,
so a change takes effect at the next tick and never leaves a cache stale:

* ``shaft.<name>.drag`` -- viscous drag of a shaft to ground (N m s/rad for
  rotating shafts, N s/m for translating bodies);
* ``row.<name>.gain_static`` / ``row.<name>.gain_kinetic`` -- static capacity
  and Coulomb amplitude of a friction row per unit normal force (for a
  clutch: mu * surfaces * mean radius / gear radius); kinetic <= static;
* ``row.<name>.viscous`` -- viscous drag across a row (force per row speed);
* ``row.<name>.act_lag_s`` -- first-order lag of the row's actuator, s;
* ``watchdog.timeout_s`` / ``watchdog.hold_s`` / ``watchdog.ramp_s`` /
  ``watchdog.enabled`` -- the command watchdog.

Inertias are not offered: changing an inertia of a moving shaft changes its
momentum and invalidates the core's constrained-inertia cache.

A ``set_params`` request is atomic: every value is validated (finite, in
range, and kinetic <= static against the values the request leaves in
place) before any is written.  Plants may add their own parameters by
providing ``tunable_parameters() -> list[Param]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from plant_models.core import layout as L
from plant_models.errors import ParamError
from plant_models.plant import Plant


@dataclass(frozen=True)
class Param:
    """One tunable parameter: how to read and write it, its unit and range."""

    name: str
    unit: str
    lo: float
    hi: float
    doc: str
    get: Callable[[], float]
    set: Callable[[float], None]
    kind: str = "float"  # "float" or "bool"


class ParamTable:
    """The tunable parameters of one running plant and loop."""

    def __init__(self, plant: Plant, extra: list[Param] = ()):
        self.plant = plant
        self._params: dict[str, Param] = {}
        core = plant.core
        mf, mi, df = core.mf, core.mi, core.df
        n, g = core.sizes.n, core.sizes.g

        def slot_param(name, unit, lo, hi, doc, slot, idx, after_set=None):
            off = int(mi[slot]) + idx

            def get(off=off):
                return float(mf[off])

            def set_(v, off=off):
                mf[off] = v
                if after_set is not None:
                    after_set()

            return Param(name, unit, lo, hi, doc, get, set_)

        def lag_changed():
            # the lag factors are cached per sub-step length; NaN never equals h, so they are recomputed
            df[int(mi[L.DF_EXP_H])] = math.nan

        for j, sname in enumerate(core.spec.shaft_names):
            self._add(slot_param(f"shaft.{sname}.drag", "N m s/rad", 0.0, 1e9,
                                 f"viscous drag of shaft {sname} to ground", L.MF_DRAG, j))
        for i, row in enumerate(core.spec.rows):
            r = row.name
            self._add(slot_param(f"row.{r}.gain_static", "1", 0.0, 1e9,
                                 f"static capacity of {r} per unit normal force", L.MF_GAIN_STATIC, i))
            self._add(slot_param(f"row.{r}.gain_kinetic", "1", 0.0, 1e9,
                                 f"Coulomb amplitude of {r} per unit normal force (<= gain_static)",
                                 L.MF_GAIN_KINETIC, i))
            self._add(slot_param(f"row.{r}.viscous", "force/(row speed)", 0.0, 1e9,
                                 f"viscous drag across {r}", L.MF_ROW_VISC, i))
            self._add(slot_param(f"row.{r}.act_lag_s", "s", 0.0, 10.0,
                                 f"first-order lag of the actuator of {r}", L.MF_ACT_LAG, i, lag_changed))
        del n, g
        plant_params = getattr(plant, "tunable_parameters", None)
        if callable(plant_params):
            for p in plant_params():
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
            p = self._lookup(name)
            if p.kind == "bool":
                if not isinstance(value, bool):
                    raise ParamError(f"{name}: expected true or false, got {type(value).__name__}")
                new[name] = 1.0 if value else 0.0
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ParamError(f"{name}: expected a number, got {type(value).__name__}")
            try:
                v = float(value)
            except OverflowError:
                raise ParamError(f"{name}: {value} outside [{p.lo:g}, {p.hi:g}] {p.unit}") from None
            if not math.isfinite(v):
                raise ParamError(f"{name}: not finite ({value})")
            if v < p.lo or v > p.hi:
                raise ParamError(f"{name}: {value} outside [{p.lo:g}, {p.hi:g}] {p.unit}")
            new[name] = v
        # cross-checks against the values the request leaves in place
        for name in new:
            if name.startswith("row.") and (name.endswith(".gain_static") or name.endswith(".gain_kinetic")):
                base = name.rsplit(".", 1)[0]
                ks = new.get(base + ".gain_static", self._params[base + ".gain_static"].get())
                kk = new.get(base + ".gain_kinetic", self._params[base + ".gain_kinetic"].get())
                if kk > ks:
                    raise ParamError(f"{base}: gain_kinetic {kk:g} must not exceed gain_static {ks:g}")
        for name, v in new.items():
            self._params[name].set(v)
        return new
