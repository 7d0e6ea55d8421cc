"""Per-run metrics of a campaign: built-in shift metrics and user expressions over the output signals.

Built-ins look at the shift window [``start_s``, ``start_s + window_s``]
of the campaign's ``[shift]`` table (to the end of the run without
``window_s``); clutches are named as in ``events.json`` (``"C2"``), their
signals end in the lower-case name (``slip_c2``, ``energy_c2``):

============================  ==========================================================================
``shift_time`` (s)            from ``start_s`` to the on-coming clutch's last stick event, when that is
                              its last event (it stays stuck); NaN when it does not end the run stuck
``final_gear`` (-)            the ``gear`` output at the end of the run
``flare`` (rad/s)             the most the engine speed rises above the off-going gear's synchronous
                              speed in the window: max(w_engine - w_output / r0), r0 = w_output / w_engine
                              at ``start_s`` (0 when it never rises; a late on-coming clutch flares)
``peak_reaction_torque``      max |T| of the ``reaction_torque`` signal in the window (N m)
``rms_reaction_torque``       root mean square of the ``reaction_torque`` signal in the window (N m)
``clutch_energy`` (J)         friction energy the off-going and on-coming clutches dissipate in the window
``tie_up_energy`` (J)         friction energy the on-coming clutch dissipates in the window while the
                              off-going clutch is still stuck: both transmit torque and the gearbox
                              brakes itself (the tie-up of a swap with too much overlap)
``max_slip`` (rad/s)          max |slip| of the on-coming clutch in the window
============================  ==========================================================================

An expression is arithmetic (``+ - * / **``, parentheses, numbers) over
names -- output signals (series over the whole run), ``t`` (the time
series), the run's parameters, ``start_s``, the built-ins and the
expressions listed before it -- and these functions: ``max min mean rms
std ptp final initial integral time_of_max time_of_min`` (series ->
number), ``at(x, time)`` (the value at the first sample at or after the
time), ``window(x, t0, t1)`` (the part of a series in [t0, t1]), ``abs
sqrt exp log`` (element-wise).  It must give a number, e.g.
``max(abs(window(torque_c6, start_s, 0.9))) / abs(at(torque_c6, start_s))``.
Expressions are parsed once and evaluated by walking the syntax tree (no
``eval``): nothing else can run.
"""

from __future__ import annotations

import ast
import math

import numpy as np

from plant_models.config import ConfigError, ConfigReader
from plant_models.registry import config_signals

from server.offline import shift_metrics
# the shift metric functions live a floor below (shared with the test bench); re-exported here
from server.offline.shift_metrics import (clutch_energy, flare, shift_time, shift_time_from_events,
                                          tie_up_energy)

BUILTINS = ("shift_time", "final_gear", "flare", "peak_reaction_torque", "rms_reaction_torque", "clutch_energy",
            "tie_up_energy", "max_slip")
# what each built-in needs from the [shift] table
NEEDS = {"shift_time": ("on_coming",), "final_gear": (), "flare": ("engine_speed", "output_speed"),
         "peak_reaction_torque": ("reaction_torque",), "rms_reaction_torque": ("reaction_torque",),
         "clutch_energy": ("off_going", "on_coming"), "tie_up_energy": ("off_going", "on_coming"),
         "max_slip": ("on_coming",)}
REDUCE = ("max", "min", "mean", "rms", "std", "ptp", "final", "initial", "integral", "time_of_max", "time_of_min")
ELEMENTWISE = ("abs", "sqrt", "exp", "log")
FUNCTIONS = REDUCE + ELEMENTWISE + ("at", "window")
CONSTANTS = {"pi": math.pi}
_OPS = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply, ast.Div: np.divide, ast.Pow: np.power}


# -- reading ---------------------------------------------------------------------------------------------
def check_metrics(tab: ConfigReader, param_names: list[str],
                  required: bool = True) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The ``[metrics]`` table: built-in names and (name, expression) pairs, syntax checked.

    ``required``: at least one metric (a campaign judged by a test file's expectations needs none).
    """
    raw = tab.raw("builtin", [])
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise tab.error("builtin", "must be a list of built-in metric names")
    for j, name in enumerate(raw):
        if name not in BUILTINS:
            raise tab.error(f"builtin[{j}]", f"unknown metric {name!r}; built-ins: {', '.join(BUILTINS)}")
    builtin = tuple(dict.fromkeys(raw))
    exprs = tab.sub("expressions", required=False)
    taken = set(builtin) | set(param_names) | {"run", "status", "error", "status_bits", "events", "verdict"}
    expressions = []
    for name in exprs.data:
        text = exprs.string(name)
        if name in taken or name.startswith("expect["):
            raise exprs.error(name, "this name is already a parameter, a built-in metric or a table column")
        try:
            tree = ast.parse(text, mode="eval")
        except SyntaxError as exc:
            raise exprs.error(name, f"not an expression ({exc.msg})") from None
        problem = _syntax_problem(tree)
        if problem:
            raise exprs.error(name, problem)
        taken.add(name)
        expressions.append((name, text))
    tab.reject_unknown()
    if required and not builtin and not expressions:
        raise ConfigError(tab.source, "[metrics]", "no metrics: list built-ins and/or expressions")
    return builtin, tuple(expressions)


def _syntax_problem(tree: ast.AST) -> str | None:
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Call, ast.Name, ast.Load, ast.Constant, ast.USub,
               ast.UAdd) + tuple(_OPS)
    for node in ast.walk(tree):
        if not isinstance(node, allowed):
            return (f"{type(node).__name__.lower()} is not allowed; use numbers, names, + - * / ** and the "
                    f"functions {', '.join(FUNCTIONS)}")
        if isinstance(node, ast.Constant) and (isinstance(node.value, bool)
                                               or not isinstance(node.value, (int, float))):
            return f"{node.value!r} is not a number"
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
                fn = node.func.id if isinstance(node.func, ast.Name) else "?"
                return f"unknown function {fn!r}; functions: {', '.join(FUNCTIONS)}"
            if node.keywords:
                return f"{node.func.id}() takes no keyword arguments"
            want = {"at": 2, "window": 3}.get(node.func.id, 1)
            if len(node.args) != want:
                return f"{node.func.id}() takes {want} argument{'s' if want > 1 else ''}, got {len(node.args)}"
    return None


def check_signals(spec, plant_config) -> None:
    """Every signal the metrics name is an output of the plant (ConfigError naming the key otherwise)."""
    inputs, outputs = config_signals(plant_config)  # an FMU's outputs too
    names = {s.name for s in outputs}
    w = spec.shift
    for metric in spec.builtin:
        for key in NEEDS[metric]:
            if not getattr(w, key):
                raise ConfigError(spec.source, f"shift.{key}", f"is required by the metric {metric}")
        for sig in _builtin_signals(metric, w):
            if sig not in names:
                raise ConfigError(spec.source, "metrics.builtin", f"{metric} needs the output {sig!r}, which the "
                                  f"{plant_config.plant_class.kind} plant does not have")
    known = names | {"t", "start_s"} | set(CONSTANTS) | {p.name for p in spec.parameters} | set(spec.builtin)
    for name, text in spec.expressions:
        for node in ast.walk(ast.parse(text, mode="eval")):
            if isinstance(node, ast.Name) and node.id not in FUNCTIONS and node.id not in known:
                raise ConfigError(spec.source, f"metrics.expressions.{name}", f"unknown name {node.id!r}: not an "
                                  "output, a parameter, t, start_s or a metric defined before it")
        known.add(name)


def _builtin_signals(metric: str, w) -> list[str]:
    on, off = w.on_coming.lower(), w.off_going.lower()
    return {"shift_time": [], "final_gear": ["gear"], "flare": [w.engine_speed, w.output_speed],
            "peak_reaction_torque": [w.reaction_torque], "rms_reaction_torque": [w.reaction_torque],
            "clutch_energy": [f"energy_{off}", f"energy_{on}"], "tie_up_energy": [f"stuck_{off}", f"energy_{on}"],
            "max_slip": [f"slip_{on}"]}[metric]


# -- computing --------------------------------------------------------------------------------------------
class Series:
    """A signal over time, for expressions: arithmetic element-wise, reductions to numbers."""

    def __init__(self, t: np.ndarray, v: np.ndarray):
        self.t, self.v = t, v


def _unwrap(a, b):
    if isinstance(a, Series) and isinstance(b, Series):
        if a.t is not b.t and not (a.t.shape == b.t.shape and np.array_equal(a.t, b.t)):
            raise ValueError("series over different times cannot be combined (window both the same way)")
        return a.t, a.v, b.v
    if isinstance(a, Series):
        return a.t, a.v, b
    if isinstance(b, Series):
        return b.t, a, b.v
    return None, a, b


def _reduce(fn: str, x) -> float:
    if not isinstance(x, Series):
        raise ValueError(f"{fn}() needs a series")
    v, t = x.v, x.t
    if v.size == 0:
        return math.nan
    if fn == "integral":
        return float(np.sum(0.5 * (v[1:] + v[:-1]) * np.diff(t))) if v.size > 1 else 0.0
    if fn in ("time_of_max", "time_of_min"):
        return float(t[np.argmax(v) if fn == "time_of_max" else np.argmin(v)])
    return float({"max": np.max, "min": np.min, "mean": np.mean, "std": np.std, "ptp": np.ptp,
                  "rms": lambda a: np.sqrt(np.mean(a * a)), "final": lambda a: a[-1],
                  "initial": lambda a: a[0]}[fn](v))


def _call(fn: str, args):
    if fn in REDUCE:
        return _reduce(fn, args[0])
    if fn in ELEMENTWISE:
        f = {"abs": np.abs, "sqrt": np.sqrt, "exp": np.exp, "log": np.log}[fn]
        x = args[0]
        return Series(x.t, f(x.v)) if isinstance(x, Series) else float(f(x))
    x = args[0]
    if not isinstance(x, Series) or any(isinstance(a, Series) for a in args[1:]):
        raise ValueError(f"{fn}() needs a series, then times in s")
    if fn == "at":
        i = int(np.searchsorted(x.t, args[1], side="left"))
        return float(x.v[i]) if i < x.v.size else math.nan
    mask = (x.t >= args[1]) & (x.t <= args[2])
    return Series(x.t[mask], x.v[mask])


def evaluate(text: str, names: dict):
    """The value of an expression (checked by :func:`check_metrics`) with ``names`` bound."""
    def walk(node):
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant):
            return float(node.value)
        if isinstance(node, ast.Name):
            return names[node.id] if node.id in names else CONSTANTS[node.id]
        if isinstance(node, ast.UnaryOp):
            x = walk(node.operand)
            if isinstance(node.op, ast.UAdd):
                return x
            return Series(x.t, -x.v) if isinstance(x, Series) else -x
        if isinstance(node, ast.BinOp):
            t, a, b = _unwrap(walk(node.left), walk(node.right))
            r = _OPS[type(node.op)](a, b)
            return Series(t, r) if t is not None else float(r)
        return _call(node.func.id, [walk(a) for a in node.args])

    with np.errstate(all="ignore"):
        return walk(ast.parse(text, mode="eval"))


def compute(spec, trace, params: dict) -> dict[str, float]:
    """Every metric of one run from its full-rate trace and events."""
    w = spec.shift
    t = trace.time
    win, i0 = shift_metrics.window(t, w.start_s, w.window_s)
    out: dict[str, float] = {}
    col = trace.column
    with np.errstate(all="ignore"):
        for m in spec.builtin:
            out[m] = float(_builtin(m, w, trace, col, win, i0))
        names = {"t": Series(t, t), "start_s": w.start_s, **params, **out}
        names.update({n: Series(t, trace.values[:, j]) for j, n in enumerate(trace.names) if n not in names})
        for name, text in spec.expressions:
            v = evaluate(text, names)
            if isinstance(v, Series):
                raise ValueError(f"metric {name} gives a series; reduce it with max(), min(), mean(), rms(), "
                                 "final(), at() or integral()")
            out[name] = names[name] = float(v)
    return out


def _builtin(m: str, w, trace, col, win: slice, i0: int) -> float:
    """One built-in (the functions live in :mod:`server.offline.shift_metrics`, shared with the test bench)."""
    on, off = w.on_coming.lower(), w.off_going.lower()
    if m == "shift_time":
        return shift_metrics.shift_time_from_events(trace.events, w.on_coming, w.start_s)
    if m == "final_gear":
        return col("gear")[-1]
    if m == "flare":
        return shift_metrics.flare(col(w.engine_speed), col(w.output_speed), win, i0)
    if m == "peak_reaction_torque":
        return shift_metrics.peak_abs(col(w.reaction_torque), win)
    if m == "rms_reaction_torque":
        return shift_metrics.rms(col(w.reaction_torque), win)
    if m == "clutch_energy":
        return shift_metrics.clutch_energy(col(f"energy_{off}"), col(f"energy_{on}"), win, i0)
    if m == "tie_up_energy":
        return shift_metrics.tie_up_energy(col(f"stuck_{off}"), col(f"energy_{on}"), win)
    if m == "max_slip":
        return shift_metrics.max_abs(col(f"slip_{on}"), win)
    raise ValueError(f"unknown metric {m}")


__all__ = ["BUILTINS", "FUNCTIONS", "Series", "check_metrics", "check_signals", "clutch_energy", "compute", "evaluate",
           "flare", "shift_time", "shift_time_from_events", "tie_up_energy"]
