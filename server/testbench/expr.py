"""Signal expressions of test files: arithmetic over whole signal arrays, parsed once, no ``eval`` of names.

An expression is Python syntax restricted to numbers, signal names, ``t``
(time, s), ``+ - * / ** %``, comparisons (``<``, ``<=``, ``==``, ...),
``and``/``or``/``not`` and a few functions (``abs``, ``sqrt``, ``min``,
``max``, ``sign``) and the shift metrics of :data:`METRICS` (a number over
a time window, the same functions the campaigns compute:
:mod:`server.offline.shift_metrics`).  It is checked against that list when the test file is
read, so a typo or an unknown signal is a one-line error before anything
runs; it is evaluated on numpy arrays (one value per sample), so a
comparison gives a boolean array.
"""

from __future__ import annotations

import ast
import math
from typing import Iterable, Mapping

import numpy as np

FUNCTIONS = {"abs": np.abs, "sqrt": np.sqrt, "min": np.minimum, "max": np.maximum, "sign": np.sign}
_BINOPS = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply, ast.Div: np.divide, ast.Pow: np.power,
           ast.Mod: np.mod}
_CMPOPS = {ast.Lt: np.less, ast.LtE: np.less_equal, ast.Gt: np.greater, ast.GtE: np.greater_equal,
           ast.Eq: np.equal, ast.NotEq: np.not_equal}
# shift metrics: name -> (signals it takes, what they are); then the window's start (and end) in s, numbers
METRICS = {
    "shift_time": (1, "the on-coming clutch's stuck flag"),
    "flare": (2, "the engine speed and the output speed"),
    "peak_reaction_torque": (1, "the reaction torque"),
    "rms_reaction_torque": (1, "the reaction torque"),
    "clutch_energy": (2, "the off-going and the on-coming clutch's energy"),
    "tie_up_energy": (2, "the off-going clutch's stuck flag and the on-coming clutch's energy"),
    "max_slip": (1, "the on-coming clutch's slip"),
}
MAX_LENGTH = 500  # characters; an expression is a line of a test file, not a program


class ExprError(ValueError):
    """An expression that is not in the allowed subset, or names an unknown signal."""


class MetricUndefined(ValueError):
    """A shift metric that cannot be computed on this run (its message says why); the verdict is an ERROR."""


class Expr:
    """One parsed expression.

    Parameters
    ----------
    text
        The expression, e.g. ``"abs(w_out * ratio - w_1)"`` or ``"gear == 3"``.
    known
        The signal names it may use (``t`` is always allowed).
    """

    def __init__(self, text: str, known: Iterable[str]):
        if not isinstance(text, str) or not text.strip():
            raise ExprError("must be a non-empty string")
        if len(text) > MAX_LENGTH:
            raise ExprError(f"is longer than {MAX_LENGTH} characters")
        self.text = text
        try:
            self.tree = ast.parse(text.strip(), mode="eval").body
        except SyntaxError as exc:
            raise ExprError(f"{text!r} is not a valid expression ({exc.msg})") from None
        known = set(known) | {"t"}
        self.names: set[str] = set()
        self._check(self.tree, known)
        self.boolean = isinstance(self.tree, (ast.Compare, ast.BoolOp)) or (
            isinstance(self.tree, ast.UnaryOp) and isinstance(self.tree.op, ast.Not))

    def _check(self, node: ast.AST, known: set[str]) -> None:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise ExprError(f"{self.text!r}: only numbers are allowed as constants, got {node.value!r}")
        elif isinstance(node, ast.Name):
            if node.id not in known:
                from plant_models.config import did_you_mean

                raise ExprError(f"{self.text!r}: unknown signal {node.id!r}" + did_you_mean(node.id, sorted(known)))
            self.names.add(node.id)
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            self._check(node.left, known)
            self._check(node.right, known)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)):
            self._check(node.operand, known)
        elif isinstance(node, ast.Compare) and all(type(op) in _CMPOPS for op in node.ops):
            for sub in (node.left, *node.comparators):
                self._check(sub, known)
        elif isinstance(node, ast.BoolOp):
            for sub in node.values:
                self._check(sub, known)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in METRICS:
            self._check_metric(node, known)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS
              and not node.keywords and 1 <= len(node.args) <= 2):
            for sub in node.args:
                self._check(sub, known)
        else:
            raise ExprError(f"{self.text!r}: {type(node).__name__} is not allowed (numbers, signal names, t, "
                            "+ - * / ** %, comparisons, and/or/not, abs/sqrt/min/max/sign, "
                            f"the shift metrics {'/'.join(METRICS)})")

    def _check_metric(self, node: ast.Call, known: set[str]) -> None:
        """``metric(signal, ..., start_s[, end_s])``: signal names, then one or two times as numbers."""
        fn = node.func.id
        n_sig, what = METRICS[fn]
        usage = (f"{self.text!r}: {fn}() takes {what} (signal name{'s' if n_sig > 1 else ''}), then the window's "
                 f"start and optionally its end in s (numbers)")
        if node.keywords or not n_sig + 1 <= len(node.args) <= n_sig + 2:
            raise ExprError(usage)
        for sub in node.args[:n_sig]:
            if not isinstance(sub, ast.Name):
                raise ExprError(usage)
            self._check(sub, known)
        for sub in node.args[n_sig:]:
            if _number(sub) is None:
                raise ExprError(usage)
        times = [_number(sub) for sub in node.args[n_sig:]]
        if len(times) == 2 and times[1] < times[0]:
            raise ExprError(f"{self.text!r}: {fn}()'s window [{times[0]:g}, {times[1]:g}] s ends before it starts")

    def evaluate(self, signals: Mapping[str, np.ndarray]) -> np.ndarray:
        """The expression on every sample: a float (or, for a condition, bool) array like the signals'."""
        n = len(signals["t"])
        with np.errstate(all="ignore"):  # a division by zero is a NaN sample, which fails any bound
            out = self._eval(self.tree, signals)
        return np.broadcast_to(np.asarray(out), (n,))

    def _eval(self, node, s):
        if isinstance(node, ast.Constant):
            return float(node.value)
        if isinstance(node, ast.Name):
            return s[node.id]
        if isinstance(node, ast.BinOp):
            return _BINOPS[type(node.op)](self._eval(node.left, s), self._eval(node.right, s))
        if isinstance(node, ast.UnaryOp):
            v = self._eval(node.operand, s)
            if isinstance(node.op, ast.Not):
                return np.logical_not(v)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.Compare):
            left = self._eval(node.left, s)
            out = None
            for op, comp in zip(node.ops, node.comparators):
                right = self._eval(comp, s)
                r = _CMPOPS[type(op)](left, right)
                out = r if out is None else np.logical_and(out, r)
                left = right
            return out
        if isinstance(node, ast.BoolOp):
            f = np.logical_and if isinstance(node.op, ast.And) else np.logical_or
            out = self._eval(node.values[0], s)
            for sub in node.values[1:]:
                out = f(out, self._eval(sub, s))
            return out
        if node.func.id in METRICS:
            return _metric(node, s)
        return FUNCTIONS[node.func.id](*(self._eval(a, s) for a in node.args))

    def __repr__(self) -> str:
        return f"Expr({self.text!r})"


def _number(node: ast.AST) -> float | None:
    """A number constant (with a sign) as a float; None for anything else."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _number(node.operand)
        return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    return None


def _metric(node: ast.Call, s: Mapping[str, np.ndarray]) -> float:
    """A shift metric over [start, end] (end: the run's end) of the recorded signals: one number.

    Raises :class:`MetricUndefined` with the reason when the metric cannot
    be computed (the window outside the run, a NaN in a signal it reads, a
    clutch that never finished a shift there), so no NaN is ever compared
    against a bound.
    """
    from server.offline import shift_metrics as sm

    fn = node.func.id
    n_sig = METRICS[fn][0]
    names = [a.id for a in node.args[:n_sig]]
    x = [np.asarray(s[nm], dtype=float) for nm in names]
    times = [_number(a) for a in node.args[n_sig:]]
    t = np.asarray(s["t"], dtype=float)
    start = times[0]
    end = times[1] if len(times) > 1 else np.inf
    call = f"{fn}({', '.join(names)}, {', '.join(f'{v:g}' for v in times)})"

    def undefined(reason: str) -> MetricUndefined:
        return MetricUndefined(f"{call} cannot be computed: {reason}")

    if t.size == 0:
        raise undefined("the run recorded no samples")
    half = 0.5 * (t[1] - t[0]) if t.size > 1 else 0.0
    if start > t[-1] + half:
        raise undefined(f"the window starts at {start:g} s, after the run's end ({t[-1]:.6g} s)")
    win, i0 = sm.window(t, start, end - start)
    for nm, xi in zip(names, x):
        bad = np.flatnonzero(~np.isfinite(xi[win]))
        if bad.size:
            raise undefined(f"{nm} is {xi[win][bad[0]]} at t = {t[win][bad[0]]:.6g} s")
    value = _metric_value(fn, t, x, start, end, win, i0)
    if not math.isfinite(value):
        if fn == "shift_time":
            raise undefined(f"{names[0]}: " + sm.shift_time_undefined(t, x[0], start, end))
        if fn == "flare":
            raise undefined(f"{names[0]} = {x[0][i0]:g} or {names[1]} = {x[1][i0]:g} is 0 at the window's start "
                            f"(t = {t[i0]:.6g} s): no gear ratio to compare against")
        raise undefined(f"the value is {value}")
    return value


def _metric_value(fn: str, t: np.ndarray, x: list[np.ndarray], start: float, end: float, win: slice,
                  i0: int) -> float:
    from server.offline import shift_metrics as sm

    if fn == "shift_time":
        return sm.shift_time(t, x[0], start, end)
    if fn == "flare":
        return sm.flare(x[0], x[1], win, i0)
    if fn == "peak_reaction_torque":
        return sm.peak_abs(x[0], win)
    if fn == "rms_reaction_torque":
        return sm.rms(x[0], win)
    if fn == "clutch_energy":
        return sm.clutch_energy(x[0], x[1], win, i0)
    if fn == "tie_up_energy":
        return sm.tie_up_energy(x[0], x[1], win)
    return sm.max_abs(x[0], win)
