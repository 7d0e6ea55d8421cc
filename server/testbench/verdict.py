"""Verdicts: an expectation of a test file checked against a recorded run.

A run is a :class:`Recording`: sample times and one array per signal
(outputs always; inputs when a stimulus set them).  Each expectation gives a
:class:`Verdict` with, on a failure, the first failing time and the value
there (and the values of the signals the expression uses).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .expr import MetricUndefined
from .spec import Expectation


@dataclass
class Recording:
    """A run as samples: ``t`` (s) and ``signals`` (name -> array of the same length, ``t`` included)."""

    t: np.ndarray
    signals: dict[str, np.ndarray]
    dt: float
    notes: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.signals.setdefault("t", self.t)


@dataclass
class Verdict:
    """The outcome of one expectation (or an error of the whole run: ``error`` set, ``key`` the run's part)."""

    name: str
    key: str
    passed: bool
    message: str
    t: float | None = None
    value: float | None = None
    error: bool = False

    @property
    def label(self) -> str:
        return "PASS" if self.passed else ("ERROR" if self.error else "FAIL")


def satisfied(exp: Expectation, v: np.ndarray) -> np.ndarray:
    """Where the bounds hold, per sample (a NaN never satisfies a bound)."""
    if exp.eq is None and exp.lo is None and exp.hi is None:
        return np.asarray(v, dtype=bool) if v.dtype == bool else np.nan_to_num(v, nan=0.0) != 0
    v = np.asarray(v, dtype=float)
    ok = np.isfinite(v)
    if exp.eq is not None:
        ok &= np.abs(v - exp.eq) <= max(exp.tol, exp.rel_tol * abs(exp.eq))
    if exp.lo is not None:
        ok &= v >= exp.lo - exp.tol
    if exp.hi is not None:
        ok &= v <= exp.hi + exp.tol
    return ok


def _fmt(x) -> str:
    if isinstance(x, (bool, np.bool_)):
        return "true" if x else "false"
    return f"{float(x):.6g}"


def _detail(exp: Expectation, rec: Recording, v: np.ndarray, i: int) -> str:
    """``value 1 (gear = 1, w_out = 3.2)`` at sample i."""
    parts = [f"{nm} = {_fmt(rec.signals[nm][i])}" for nm in sorted(exp.expr.names)[:6] if nm != "t"]
    val = f"value {_fmt(v[i])}"
    if len(parts) == 1 and parts[0].split(" = ")[0] == exp.expr.text.strip():
        return val
    return val + (f" ({', '.join(parts)})" if parts else "")


def _first(mask: np.ndarray) -> int | None:
    idx = np.flatnonzero(mask)
    return int(idx[0]) if idx.size else None


def evaluate(exp: Expectation, rec: Recording) -> Verdict:
    """Check one expectation on a recording (a shift metric that cannot be computed: an ERROR with the reason)."""
    try:
        return _evaluate(exp, rec)
    except MetricUndefined as exc:  # never a NaN compared against a bound
        return Verdict(exp.name, exp.key, False, str(exc), error=True)


def _evaluate(exp: Expectation, rec: Recording) -> Verdict:
    t = rec.t
    eps = 0.5 * rec.dt
    if len(t) == 0:
        return Verdict(exp.name, exp.key, False, "the run recorded no samples", error=True)
    v = exp.expr.evaluate(rec.signals)
    ok = satisfied(exp, v)
    want = exp.bounds_text()

    def verdict(passed: bool, message: str, i: int | None = None) -> Verdict:
        if i is None:
            return Verdict(exp.name, exp.key, passed, message)
        val = v[i]
        return Verdict(exp.name, exp.key, passed, message, float(t[i]),
                       float(val) if not isinstance(val, (bool, np.bool_)) else float(bool(val)))

    if exp.kind == "at":
        i = _first(t >= exp.at_s - eps)
        if i is None or t[i] > exp.at_s + max(eps, 0.05):
            return Verdict(exp.name, exp.key, False, f"no sample at t = {exp.at_s:g} s", error=True)
        if ok[i]:
            return verdict(True, f"{want} at t = {t[i]:.6g} s: {_detail(exp, rec, v, i)}", i)
        return verdict(False, f"at t = {t[i]:.6g} s: {_detail(exp, rec, v, i)}; expected {want}", i)

    if exp.kind == "within":
        trig = exp.after
        if trig.time_s is not None:
            t0 = trig.time_s
        else:
            mask = (satisfied_cond(trig.when.evaluate(rec.signals)) if trig.when is not None
                    else rec.signals[trig.command] != rec.signals[trig.command][0])
            j = _first(mask)
            if j is None:
                return Verdict(exp.name, exp.key, False, f"the trigger ({trig.describe()}) never happened")
            t0 = float(t[j])
        a, b = t0, t0 + exp.within_s
    else:
        a, b = exp.window
        b = np.inf if b is None else b
    tiny = 1e-6 * rec.dt  # window ends are inclusive, up to rounding of k * dt
    sel = (t >= a - tiny) & (t <= b + tiny)
    if not sel.any():
        return Verdict(exp.name, exp.key, False, f"no sample in [{a:g}, {b:g}] s", error=True)
    span = f"in [{a:.6g}, {min(b, float(t[-1])):.6g}] s"
    if exp.kind in ("during", "always"):
        i = _first(sel & ~ok)
        if i is None:
            return verdict(True, f"{want} throughout {span}")
        return verdict(False, f"first outside at t = {t[i]:.6g} s: {_detail(exp, rec, v, i)}; expected {want} "
                       f"throughout {span}", i)
    if exp.kind == "never":
        i = _first(sel & ok)
        if i is None:
            return verdict(True, f"never {want} {span}")
        return verdict(False, f"happened at t = {t[i]:.6g} s: {_detail(exp, rec, v, i)}; expected never {want} "
                       f"{span}", i)
    i = _first(sel & ok)
    if i is not None:
        return verdict(True, f"{want} reached at t = {t[i]:.6g} s" + (
            f" ({t[i] - a:.6g} s after {exp.after.describe()})" if exp.kind == "within" else ""), i)
    last = int(np.flatnonzero(sel)[-1])
    if exp.kind == "within":
        return verdict(False, f"not reached within {exp.within_s:g} s of {exp.after.describe()} (t = {a:.6g} s): "
                       f"at t = {t[last]:.6g} s {_detail(exp, rec, v, last)}; expected {want}", last)
    return verdict(False, f"never reached {span}: at t = {t[last]:.6g} s {_detail(exp, rec, v, last)}; "
                   f"expected {want}", last)


def satisfied_cond(v: np.ndarray) -> np.ndarray:
    """A condition's truth per sample (non-zero, NaN false)."""
    v = np.asarray(v)
    return v.astype(bool) if v.dtype == bool else np.nan_to_num(v.astype(float), nan=0.0) != 0
