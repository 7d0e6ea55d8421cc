"""Where a campaign parameter applies: a path into the base config's or scenario's TOML data.

A path is ``config.`` or ``scenario.`` followed by TOML keys separated by
dots, each key optionally followed by list indices::

    config.clutch.friction_kinetic        [clutch] friction_kinetic of the plant config
    config.clutch.c2.pressure_lag_s       [clutch.c2] pressure_lag_s (the table is created if missing)
    config.axles.inertia_kg_m2[0]         the first entry of a list
    scenario.duration_s                   a scenario value
    scenario.inputs.engine_torque         an input history (a constant here)
    scenario.inputs.p_c2[3][1]            the value of the fourth [time, value] point of p_c2

and, for a campaign whose base is a test file (:mod:`.testbase`), its fault
schedule and its controller's parameters::

    faults[0].at                          when the first scheduled fault switches on (s)
    faults[1].value                       a value of the second fault (e.g. an offset's size)
    controller.params.sync_rate_bar_s     a parameter of the test file's [controller] table

and an FMU's start value (a parameter, tunable or fixed, or an input before the
run starts; docs/fmi.md) by the name of its ``[[fmu]]`` table::

    fmu.engine.tau                        start = { tau = ... } of the [[fmu]] table named engine

and a mode:

* ``set``: the parameter's value replaces the value at the path (a
  missing last key, or missing tables on the way, are created; the plant's
  config reader then rejects a key it does not know);
* ``scale``: the value at the path is multiplied by the parameter's value:
  a number, every number of a list, or, for a whole input history
  (``scenario.inputs.NAME``), its values (a constant, the values of its
  points, a sine's amplitude and offset);
* ``shift``: a whole input history moves later in time by the parameter's
  value in s (earlier when negative): u_new(t) = u(t - shift).  Before its
  first point a history holds its first value, so a later start needs
  nothing more; an earlier one cuts the history at t = 0 and starts it
  with its value there.  A sine's phase moves; a constant stays.

The configs are changed as data before they are read, so a path reaches
every parameter a config file can set, and a wrong value gets the
config reader's own error message.
"""

from __future__ import annotations

import math
import re

PREFIXES = ("config", "scenario", "faults", "controller", "fmu")
_KEY = re.compile(r"([A-Za-z0-9_-]+)((?:\[\d+\])*)$")


def parse(path: str) -> tuple[str, list[str | int]]:
    """``"config.axles.inertia_kg_m2[0]"`` -> ``("config", ["axles", "inertia_kg_m2", 0])``; ValueError if malformed.

    ``"faults[1].at"`` -> ``("faults", [1, "at"])``: the schedule is a list, so its root takes an index.
    """
    if not isinstance(path, str) or "." not in path:
        raise ValueError(f"{path!r} is not a path: config.KEY..., scenario.KEY..., faults[N].KEY, "
                         "controller.KEY... or fmu.NAME.VARIABLE")
    head, _, rest = path.partition(".")
    m = _KEY.match(head)
    root = m.group(1) if m else head
    if m is None or root not in PREFIXES or (m.group(2) != "") != (root == "faults"):
        raise ValueError(f"{path!r}: a path starts with config., scenario., faults[N]., controller. or fmu.")
    steps: list[str | int] = [int(x) for x in re.findall(r"\[(\d+)\]", m.group(2))]
    for part in rest.split("."):
        m = _KEY.match(part)
        if not m:
            raise ValueError(f"{path!r}: {part!r} is not a key (letters, digits, _ and -, then optional [index])")
        steps.append(m.group(1))
        steps += [int(x) for x in re.findall(r"\[(\d+)\]", m.group(2))]
    if root == "fmu" and (len(steps) != 2 or not all(isinstance(x, str) for x in steps)):
        raise ValueError(f"{path!r}: an FMU's start value is fmu.NAME.VARIABLE (NAME: its [[fmu]] table's name)")
    return root, steps


def _fmu_start(config: dict, steps: list, path: str) -> dict:
    """The ``start`` table of the config's ``[[fmu]]`` table named ``steps[0]`` (created if missing)."""
    tables = config.get("fmu")
    table = next((t for t in tables if isinstance(t, dict) and t.get("name") == steps[0]), None) \
        if isinstance(tables, list) else None
    if table is None:
        raise ValueError(f"{path}: the config has no [[fmu]] table named {steps[0]!r}")
    start = table.setdefault("start", {})
    if not isinstance(start, dict):
        raise ValueError(f"{path}: the [[fmu]] table's start is not a table")
    return start


def input_name(root: str, steps: list) -> str | None:
    """The input a path names as a whole history (``scenario.inputs.NAME``), else None."""
    if root == "scenario" and len(steps) == 2 and steps[0] == "inputs" and isinstance(steps[1], str):
        return steps[1]
    return None


def check(path: str, mode: str) -> None:
    """ValueError when the path is malformed or the mode cannot apply to it (checked when the file is read)."""
    root, steps = parse(path)
    if mode == "shift" and input_name(root, steps) is None:
        raise ValueError(f"{path!r}: a shift moves an input history in time; its path is scenario.inputs.NAME")


def apply(config: dict, scenario: dict, path: str, mode: str, value, integer_inputs=(), faults: list | None = None,
          controller: dict | None = None) -> None:
    """Apply one parameter value at ``path`` in place (``config`` / ``scenario`` / ``faults`` / ``controller``
    are TOML data: the plant config, the scenario, the test file's [[faults]] and [controller])."""
    root, steps = parse(path)
    if root == "fmu":  # set or scale a start value; the FMU checks it against its range when the plant is built
        start = _fmu_start(config, steps, path)
        if mode == "set":
            start[steps[1]] = value
        elif steps[1] not in start:
            raise ValueError(f"{path}: scale needs a start value for {steps[1]!r} in the [[fmu]] table (the FMU's "
                             f"declared start is not read here); give one, or use set")
        else:
            start[steps[1]] = _scaled(start[steps[1]], value, path)
        return
    data = {"config": config, "scenario": scenario, "faults": faults, "controller": controller}[root]
    if data is None:
        raise ValueError(f"{path}: the campaign's base has no {root}")
    name = input_name(root, steps)
    if mode == "shift":
        inputs = scenario.get("inputs", {})
        if name in inputs:
            inputs[name] = shift_history(inputs[name], float(value), name in integer_inputs)
        return
    parent, last = _walk(data, steps, path, create=(mode == "set"))
    if mode == "set":
        parent[last] = value
        return
    current = parent[last]
    parent[last] = scale_history(current, value, path) if name is not None else _scaled(current, value, path)


def _walk(data, steps, path, create):
    """The container holding the last step of the path, and that step."""
    node = data
    for j, step in enumerate(steps[:-1]):
        nxt = steps[j + 1]
        if isinstance(step, int):
            if not isinstance(node, list) or step >= len(node):
                raise ValueError(f"{path}: index [{step}] is outside the list")
            node = node[step]
            continue
        if not isinstance(node, dict):
            raise ValueError(f"{path}: {step!r} is inside a value that is not a table")
        if step not in node:
            if not create or isinstance(nxt, int):
                raise ValueError(f"{path}: no key {step!r} in the base file")
            node[step] = {}
        node = node[step]
    last = steps[-1]
    if isinstance(last, int):
        if not isinstance(node, list) or last >= len(node):
            raise ValueError(f"{path}: index [{last}] is outside the list")
    elif not isinstance(node, dict):
        raise ValueError(f"{path}: {last!r} is inside a value that is not a table")
    elif last not in node and not create:
        raise ValueError(f"{path}: no key {last!r} in the base file")
    return node, last


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _scaled(current, factor, path):
    if _number(current):
        return current * factor
    if isinstance(current, list) and current and all(_number(x) for x in current):
        return [x * factor for x in current]
    raise ValueError(f"{path}: scale needs a number or a list of numbers there")


def scale_history(history, factor: float, path: str = ""):
    """An input history (TOML data: a number, [time, value] points or a sine table) with its values scaled."""
    if _number(history):
        return history * factor
    if isinstance(history, list):
        return [[pt[0], pt[1] * factor] if isinstance(pt, list) and len(pt) == 2 else pt for pt in history]
    if isinstance(history, dict) and isinstance(history.get("sine"), dict):
        sine = dict(history["sine"])
        for key in ("amplitude", "offset"):
            if _number(sine.get(key)):
                sine[key] = sine[key] * factor
        return {**history, "sine": sine}
    raise ValueError(f"{path}: not an input history (a number, [time, value] points or a sine table)")


def shift_history(history, shift: float, integer: bool = False):
    """u_new(t) = u(t - shift) for an input history given as TOML data (see the module's docstring)."""
    if _number(history) or not shift:
        return history
    if isinstance(history, dict) and isinstance(history.get("sine"), dict):
        sine = dict(history["sine"])
        f = sine.get("frequency_hz", 0.0)
        if _number(f):
            sine["phase_rad"] = sine.get("phase_rad", 0.0) - 2.0 * math.pi * f * shift
        return {**history, "sine": sine}
    if not isinstance(history, list) or not all(isinstance(p, list) and len(p) == 2 and all(map(_number, p))
                                                for p in history):
        return history  # not a history of points: the scenario reader reports it
    pts = [[t + shift, v] for t, v in history]
    if shift > 0:
        return pts
    kept = [p for p in pts if p[0] >= 0.0]
    if not kept:
        return [[0.0, pts[-1][1]]]
    if kept[0][0] > 0.0 and len(kept) < len(pts):
        (ta, va), (tb, vb) = pts[len(pts) - len(kept) - 1], kept[0]
        v0 = va if integer else va + (0.0 - ta) / (tb - ta) * (vb - va)
        kept.insert(0, [0.0, v0])
    return kept


__all__ = ["apply", "check", "parse", "scale_history", "shift_history"]
