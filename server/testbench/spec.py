"""Test files: a plant, a mode, a stimulus, a fault schedule, an optional controller, and expectations.

The format (``docs/testing.md`` has the whole reference and a worked example)::

    name = "1 -> 3 swap"
    plant = "powershift"              # a config name or a path (relative to this file)
    mode = "offline"                  # "offline" | "lockstep" | "realtime"
    scenario = "powershift_single_swap"   # or an inline [stimulus] table (the scenario format)
    duration_s = 1.2                  # optional: the scenario's by default

    [controller]                      # optional: a process that drives the server (lockstep/realtime)
    command = ["{python}", "../../examples/closed_loop_swap.py", "--control", "{control}", "--lockstep"]
    # or a controller class run in process (offline/lockstep): controller = "file.py:Class", or
    # [controller] class = "file.py:Class", params = {...}

    [[faults]]                        # the fault API's dicts plus `at` (and `until`), s
    at = 0.45
    target = "clutch"
    clutch = 2
    kind = "stuck_closed"

    [[adapter_set]]                   # values a server's adapter offers (lockstep/realtime), `at` in s
    at = 0.4
    adapter = "j1939"
    requested_gear = 3                # e.g. the gear the J1939 vehicle ECU's TC1 requests

    [[expect]]
    name = "gear 3 within 0.5 s of the shift"
    expr = "gear"
    eq = 3
    within_s = 0.5
    after = 0.5                       # a time, or { when = "condition" }, or { command = "input" }

Every problem is reported as ``file: key: problem`` (a :class:`ConfigError`)
when the file is read, before anything runs: expressions and their signals,
times, the stimulus against the plant, and each fault through the fault
API's own check (:func:`server.realtime.faults.parse_fault`); offline mode takes
signal and clutch faults (a transport fault needs a server); each
``[[adapter_set]]`` against the I/O config's adapter of that name and its
own check of the values (:meth:`io_adapters.base.Adapter.check_values`), in
time order (an adapter set needs a server: offline refuses it).  An
``io`` whose ``device`` adapter has a TCU on its pins (``tcu``) is the
run's closed loop instead of a stimulus (no scenario, no controller), and
its pin faults (target ``device``) are scheduled offline too
(:mod:`server.testbench.device_bench`).
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plant_models.config import ConfigError, ConfigReader, find_config, load_toml
from plant_models.plant import Plant

from server.offline.scenario import Scenario, parse_scenario
from .expr import Expr, ExprError

MODES = ("offline", "lockstep", "realtime")
KINDS = ("at", "during", "always", "eventually", "never", "within")
FAULT_TIME_KEYS = ("at", "until")
MAX_FAULTS = 256
MAX_EXPECTATIONS = 1000
WATCHDOG = "watchdog"  # a signal of every run besides the plant's: 1 while the command watchdog is tripped


@dataclass(frozen=True)
class Trigger:
    """What starts the clock of a ``within_s`` expectation: a time, a condition becoming true, or a command."""

    time_s: float | None = None
    when: Expr | None = None
    command: str | None = None

    def describe(self) -> str:
        if self.time_s is not None:
            return f"t = {self.time_s:g} s"
        if self.when is not None:
            return f"`{self.when.text}` first true"
        return f"the first change of input {self.command}"


@dataclass(frozen=True)
class Expectation:
    """One expectation: an expression, its bounds, and when they must hold.

    ``kind`` is one of :data:`KINDS`; ``window`` is (start, end) in s
    (``end`` None: the end of the run).  The bounds: ``eq`` with tolerances
    ``tol`` (absolute) and ``rel_tol`` (relative to ``eq``), ``min`` and
    ``max`` widened by ``tol``; no bounds: the expression is a condition
    (true where non-zero).
    """

    name: str
    key: str  # where it is in the file, e.g. expect[2]
    expr: Expr
    kind: str
    at_s: float | None = None
    window: tuple[float, float | None] = (0.0, None)
    within_s: float | None = None
    after: Trigger | None = None
    eq: float | None = None
    lo: float | None = None
    hi: float | None = None
    tol: float = 0.0
    rel_tol: float = 0.0

    def bounds_text(self) -> str:
        """The bound in words, e.g. ``gear == 3 (tol 0)`` or ``2 <= w_out <= 5``."""
        e = self.expr.text
        if self.eq is not None:
            tol = max(self.tol, self.rel_tol * abs(self.eq))
            return f"{e} == {self.eq:g}" + (f" +- {tol:g}" if tol else "")
        if self.lo is not None and self.hi is not None:
            return f"{self.lo:g} <= {e} <= {self.hi:g}" + (f" (tol {self.tol:g})" if self.tol else "")
        if self.lo is not None:
            return f"{e} >= {self.lo:g}" + (f" (tol {self.tol:g})" if self.tol else "")
        if self.hi is not None:
            return f"{e} <= {self.hi:g}" + (f" (tol {self.tol:g})" if self.tol else "")
        return e


@dataclass(frozen=True)
class ScheduledFault:
    """A fault of the schedule: the fault API's dict, switched on at ``at`` and off at ``until`` (s)."""

    key: str
    at: float
    until: float | None
    fault: dict


@dataclass(frozen=True)
class ScheduledSet:
    """An ``[[adapter_set]]`` entry: the ``adapter_set`` control request for adapter ``adapter`` at ``at`` (s)."""

    key: str
    at: float
    adapter: str
    values: dict  # name -> integer, checked by the adapter's check_values


@dataclass(frozen=True)
class ControllerSpec:
    """An external process started once the server is ready.

    ``command`` is a list of arguments with ``{python}`` (this Python),
    ``{control}`` (the server's control endpoint), ``{here}`` (the test
    file's folder) and ``{endpoint:NAME}`` (an endpoint the server printed,
    e.g. ``{endpoint:can.share}``, the share URL of its CAN bus) replaced; it runs in ``cwd`` (default the test file's
    folder) for at most ``timeout_s`` and must exit with ``exit_code``.
    """

    command: tuple[str, ...]
    cwd: Path
    timeout_s: float = 60.0
    exit_code: int = 0


@dataclass(frozen=True)
class InProcessController:
    """A controller class run in the test's own process (offline and lockstep; :mod:`server.offline.controller`).

    ``target`` is ``"file.py:ClassName"`` (a file relative to the test
    file's folder ``here``, else to the repository) or ``"module:ClassName"``;
    ``params`` the keyword arguments it is made with.  :meth:`build` makes a
    fresh one (a campaign varies ``params`` through ``overrides``).
    """

    target: str
    here: Path
    params: dict = field(default_factory=dict)

    def build(self, **overrides):
        from server.offline.controller import load_controller

        return load_controller(self.target, self.here, {**self.params, **overrides})


@dataclass(frozen=True)
class TestSpec:
    """A whole test file, validated against its plant."""

    source: str
    name: str
    description: str
    plant_config: Path
    mode: str
    scenario: Scenario | None
    scenario_data: dict | None  # the scenario as a map (what load_scenario sends)
    duration_s: float
    dt_s: float | None
    controller: ControllerSpec | None
    faults: tuple[ScheduledFault, ...]
    expectations: tuple[Expectation, ...]
    io_config: Path | None = None
    settle_s: float = 0.3
    extra: dict = field(default_factory=dict)
    controller_class: InProcessController | None = None  # a controller in process, instead of a process
    adapter_sets: tuple[ScheduledSet, ...] = ()  # in time order
    uds: Any = None  # the [uds] table: a server.testbench.uds.UdsTesterConfig (None: no tester)
    uds_probes: tuple = ()  # what the tester reads for the dtc / did expectations (server.testbench.uds.Probe)
    devices: bool = False  # the I/O config has a device with a TCU on its pins: it drives the run (device_bench)


def _path(cfg: ConfigReader, name: str, here: Path, folder: str) -> Path:
    """A file named relative to the test file, else a name in the project's ``folder``."""
    val = cfg.string(name)
    p = here / val
    if p.is_file():
        return p
    try:
        return find_config(val, folder=folder)
    except ConfigError as exc:
        raise cfg.error(name, exc.problem) from None


def _window(cfg: ConfigReader, name: str) -> tuple[float, float | None]:
    w = cfg.numbers(name, 2, nonnegative=True)
    if w[1] < w[0]:
        raise cfg.error(name, f"the window ends before it starts: [{w[0]:g}, {w[1]:g}]")
    return float(w[0]), float(w[1])


def _expr(cfg: ConfigReader, name: str, known: list[str]) -> Expr:
    try:
        return Expr(cfg.raw(name), known)
    except ExprError as exc:
        raise cfg.error(name, str(exc)) from None


def _trigger(cfg: ConfigReader, known: list[str], inputs: list[str], faults: list | tuple = ()) -> Trigger:
    val = cfg.raw("after")
    if isinstance(val, (int, float)) and not isinstance(val, bool):
        return Trigger(time_s=cfg.number("after", nonnegative=True))
    if not isinstance(val, dict) or len(val) != 1 or next(iter(val)) not in ("when", "command", "fault"):
        raise cfg.error("after", "must be a time in s, { when = \"condition\" }, { command = \"input\" } or "
                        "{ fault = k } (the time faults[k] is switched on)")
    sub = cfg.sub("after")
    if "fault" in val:
        k = sub.integer("fault", lo=0)
        if k >= len(faults):
            raise sub.error("fault", f"there is no faults[{k}] (the file has {len(faults)} [[faults]])")
        return Trigger(time_s=faults[k].at)
    if "when" in val:
        return Trigger(when=_expr(sub, "when", known))
    name = sub.string("command", choices=inputs)
    return Trigger(command=name)


def _expectation(cfg: ConfigReader, k: int, known: list[str], inputs: list[str], faults: list | tuple = (),
                 uds=None, probes: list | None = None) -> Expectation:
    key = f"expect[{k}]"
    if cfg.has("dtc") or cfg.has("did"):  # what the UDS tester reads from the ECU, as a signal of the run
        from .uds import uds_expectation

        probe, text, cfg = uds_expectation(cfg, uds, k)
        if probes is not None and probe not in probes:
            probes.append(probe)
        expr = Expr(text, [*known, probe.name])
    else:
        expr = _expr(cfg, "expr", known)
    name = cfg.string("name", f"{key}: {expr.text}")
    bounds: dict[str, Any] = {}
    if cfg.has("eq"):
        bounds["eq"] = cfg.number("eq")
    if cfg.has("min"):
        bounds["lo"] = cfg.number("min")
    if cfg.has("max"):
        bounds["hi"] = cfg.number("max")
    if "eq" in bounds and ("lo" in bounds or "hi" in bounds):
        raise cfg.error("eq", "give either eq (with tol/rel_tol) or min/max, not both")
    if bounds.get("lo") is not None and bounds.get("hi") is not None and bounds["lo"] > bounds["hi"]:
        raise cfg.error("min", f"is above max ({bounds['lo']:g} > {bounds['hi']:g})")
    tol = cfg.number("tol", 0.0, nonnegative=True)
    rel_tol = cfg.number("rel_tol", 0.0, nonnegative=True)
    if not bounds and (cfg.has("tol") or cfg.has("rel_tol")):
        raise cfg.error("tol", "a tolerance needs a bound (eq, min or max)")
    if not bounds and not expr.boolean:
        raise cfg.error("expr", f"{expr.text!r} has no bound: give eq, min or max, or write a condition "
                        "(e.g. `gear == 3`)")
    chosen = [kd for kd in ("at", "during", "always", "eventually", "never", "within_s") if cfg.has(kd)]
    if len(chosen) != 1:
        raise cfg.error("expr", "needs exactly one of at, during, always, eventually, never, within_s"
                        + (f" (got {', '.join(chosen)})" if chosen else ""))
    kind = chosen[0]
    args: dict[str, Any] = {}
    if kind == "at":
        args["at_s"] = cfg.number("at", nonnegative=True)
    elif kind == "during":
        args["window"] = _window(cfg, "during")
    elif kind in ("always", "eventually", "never"):
        if not cfg.boolean(kind):
            raise cfg.error(kind, "must be true (leave the key out otherwise)")
        if cfg.has("window"):
            args["window"] = _window(cfg, "window")
    else:
        kind = "within"
        args["within_s"] = cfg.number("within_s", nonnegative=True)
        args["after"] = _trigger(cfg, known, inputs, faults)
    if kind != "within" and cfg.has("after"):
        raise cfg.error("after", "only with within_s")
    cfg.reject_unknown()
    return Expectation(name=name, key=key, expr=expr, kind=kind, tol=tol, rel_tol=rel_tol, **bounds, **args)


def _fault(cfg: ConfigReader, k: int, plant: Plant) -> ScheduledFault:
    """A schedule entry: ``at``/``until`` checked here, the rest as the fault API checks it against the plant.

    The fault API's own check (:func:`server.realtime.faults.parse_fault`: target,
    kind, clutch, signal, values) runs here, when the file is read, so a
    mistake is one line before anything runs; CAN message names are
    checked by the server against its message set.
    """
    from plant_models.errors import FaultError

    from server.realtime.faults import parse_fault

    at = cfg.number("at", nonnegative=True)
    until = cfg.number("until", None, nonnegative=True) if cfg.has("until") else None
    if until is not None and until <= at:
        raise cfg.error("until", f"must be after at ({until:g} <= {at:g})")
    fault = {key: v for key, v in cfg.data.items() if key not in FAULT_TIME_KEYS}
    if not isinstance(fault.get("target"), str):
        raise cfg.error("target", "is required: the fault's target (e.g. \"signal\", \"clutch\", \"can\")")
    if not isinstance(fault.get("kind"), str):
        raise cfg.error("kind", "is required: the kind of fault (e.g. \"offset\", \"stuck_closed\", \"drop\")")
    for key, v in fault.items():
        if not isinstance(v, (str, int, float, bool)) or (isinstance(v, float) and not math.isfinite(v)):
            raise cfg.error(key, "must be a string, a finite number or a boolean")
    try:
        parse_fault(fault, plant, where="fault")
    except FaultError as exc:
        raise ConfigError(cfg.source, f"faults[{k}]", str(exc).removeprefix("fault: ")) from None
    return ScheduledFault(key=f"faults[{k}]", at=at, until=until, fault=fault)


def _adapter_sets(cfg: ConfigReader, mode: str, io_config: Path | None, duration: float) -> tuple[ScheduledSet, ...]:
    """The ``[[adapter_set]]`` schedule, each entry checked against its adapter (made from the I/O config, not
    opened) so that a mistake is one line before anything runs."""
    raw = cfg.raw("adapter_set", [])
    if not isinstance(raw, list) or len(raw) > MAX_FAULTS or not all(isinstance(e, dict) for e in raw):
        raise cfg.error("adapter_set", f"must be an array of tables ([[adapter_set]]), at most {MAX_FAULTS}")
    if not raw:
        return ()
    if mode == "offline":
        raise cfg.error("adapter_set", "sets a value of a server's adapter (e.g. a gear request on its bus): it "
                        "needs a server (mode \"lockstep\" or \"realtime\"); an offline run has no bus")
    if io_config is None:
        raise cfg.error("adapter_set", "names an adapter of the server's I/O config: give io = \"...\"")
    from server.realtime.runtime import create_adapters, load_io_config

    adapters = {a.name: a for a in create_adapters(load_io_config(io_config))}
    out: list[ScheduledSet] = []
    for k, entry in enumerate(raw):
        e = ConfigReader(entry, cfg.source, f"adapter_set[{k}]")
        at = e.number("at", nonnegative=True)
        if at > duration:
            raise e.error("at", f"{at:g} s is after the end of the run ({duration:g} s)")
        if out and at < out[-1].at:
            raise e.error("at", f"{at:g} s is before the previous entry's {out[-1].at:g} s: give the entries in "
                          "time order")
        name = e.string("adapter")
        if name not in adapters:
            raise e.error("adapter", f"no adapter {name!r} in {io_config.name}; its adapters are "
                          + ", ".join(adapters))
        values = {key: v for key, v in entry.items() if key not in ("at", "adapter")}
        try:
            values = adapters[name].check_values(values)
        except ValueError as exc:
            raise ConfigError(cfg.source, f"adapter_set[{k}]", str(exc).replace("'set'", "the entry")) from None
        out.append(ScheduledSet(f"adapter_set[{k}]", at, name, values))
    return tuple(out)


def _in_process(cfg: ConfigReader, here: Path, plant: Plant, mode: str) -> InProcessController:
    """``controller = "file.py:Class"`` or ``[controller]`` with ``class`` (and ``params``): made and bound to the
    plant now, so that a mistake is one line before anything runs."""
    from server.offline.controller import ControllerError, bind_controller

    if isinstance(cfg.data.get("controller"), str):
        target, params, key = cfg.data["controller"], {}, "controller"
    else:
        sub = cfg.sub("controller")
        target, key = sub.string("class"), "controller.class"
        params = sub.raw("params", {})
        if not isinstance(params, dict):
            raise sub.error("params", "must be a table of the controller's keyword arguments")
        sub.reject_unknown()
    cfg.raw("controller")
    if mode == "realtime":
        raise cfg.error("controller", "a controller class runs in process in offline and lockstep modes; in realtime "
                        "mode give [controller] a command (a process on the server's state stream)")
    spec = InProcessController(target, here, dict(params))
    try:
        bind_controller(spec.build(), [s.name for s in plant.outputs], [s.name for s in plant.inputs])
    except ControllerError as exc:
        raise ConfigError(cfg.source, key, str(exc)) from None
    except Exception as exc:  # the controller's own code failed while it was made or bound
        raise ConfigError(cfg.source, key, f"{target}: {type(exc).__name__}: {exc}") from None
    return spec


def _controller(cfg: ConfigReader, here: Path) -> ControllerSpec:
    cmd = cfg.raw("command")
    if not isinstance(cmd, list) or not cmd or not all(isinstance(c, str) for c in cmd):
        raise cfg.error("command", "must be a non-empty list of strings (the program and its arguments)")
    cwd = here / cfg.string("cwd", ".")
    if not cwd.is_dir():
        raise cfg.error("cwd", f"{cwd} is not a folder")
    timeout = cfg.number("timeout_s", 60.0, positive=True)
    code = cfg.integer("exit_code", 0)
    cfg.reject_unknown()
    return ControllerSpec(tuple(cmd), cwd, timeout, code)


ENDPOINT_FIELD = re.compile(r"\{endpoint:([^{}]+)\}")


def substitute(arg: str, control: str, here: Path, endpoints: dict[str, str] | None = None) -> str:
    """A controller argument with ``{python}``, ``{control}``, ``{here}`` and ``{endpoint:NAME}`` replaced.

    Raises KeyError naming the endpoint when the server has none of that name.
    """
    out = arg.replace("{python}", sys.executable).replace("{control}", control).replace("{here}", str(here))
    known = endpoints or {}

    def endpoint(m: re.Match) -> str:
        if m.group(1) not in known:
            raise KeyError(f"the server has no endpoint {m.group(1)!r}; it has: {', '.join(sorted(known)) or 'none'}")
        return known[m.group(1)]

    return ENDPOINT_FIELD.sub(endpoint, out)


def load_test(path: str | Path) -> TestSpec:
    """Read and check a test file (against its plant, which is loaded here); raises ConfigError."""
    from plant_models.registry import load_plant

    p = Path(path)
    if not p.is_file():
        raise ConfigError(str(p), "", "no such test file")
    source, here = str(p), p.resolve().parent
    cfg = ConfigReader(load_toml(p), source)
    name = cfg.string("name", p.stem)
    desc = cfg.string("description", "")
    plant_path = _path(cfg, "plant", here, "configs")
    mode = cfg.string("mode", "offline", choices=MODES)
    io_config = _path(cfg, "io", here, "configs") if cfg.has("io") else None
    devices = device_tcu(cfg, io_config, mode)
    plant: Plant = load_plant(plant_path)
    inputs = [s.name for s in plant.inputs]
    known = [s.name for s in plant.outputs] + [nm for nm in inputs if nm not in {s.name for s in plant.outputs}]
    if WATCHDOG not in known:
        known.append(WATCHDOG)
    if cfg.has("scenario") and cfg.has("stimulus"):
        raise cfg.error("stimulus", "give either scenario (a file) or [stimulus] (inline), not both")
    scenario = data = None
    if cfg.has("scenario"):
        sp = _path(cfg, "scenario", here, "scenarios")
        data = load_toml(sp)
        scenario = parse_scenario(data, str(sp))
    elif cfg.has("stimulus"):
        data = cfg.sub("stimulus").data
        if "duration_s" not in data and cfg.has("duration_s"):
            data = {**data, "duration_s": cfg.data["duration_s"]}
        scenario = parse_scenario(data, f"{source}: [stimulus]")
    if scenario is not None:
        for nm in scenario.profiles:
            if nm not in inputs:
                raise ConfigError(scenario.source, f"inputs.{nm}", "not an input of plant "
                                  f"{plant.kind} (inputs: {', '.join(inputs)})")
    controller = in_process = None
    if cfg.has("controller"):
        ctl = cfg.data["controller"]
        if isinstance(ctl, str) or (isinstance(ctl, dict) and "class" in ctl):
            in_process = _in_process(cfg, here, plant, mode)
        else:
            controller = _controller(cfg.sub("controller"), here)
    if controller is not None and mode == "offline":
        raise cfg.error("controller", "a controller process needs a server: mode \"lockstep\" or \"realtime\" "
                        "(or name a controller class, which runs in process: controller = \"file.py:Class\")")
    if devices and (scenario is not None or controller is not None or in_process is not None):
        raise cfg.error("io", "names a device with a TCU on its pins, which drives the plant: give no scenario, "
                        "[stimulus] or [controller] (the start is the I/O config's [initial_inputs])")
    if scenario is None and controller is None and in_process is None and not devices:
        raise cfg.error("scenario", "is required without a [controller] (or give an inline [stimulus], or io = an "
                        "I/O config whose device has a tcu)")
    if cfg.has("duration_s"):
        duration = cfg.number("duration_s", positive=True)
    elif scenario is not None:
        duration = scenario.duration
    else:
        raise cfg.error("duration_s", "is required with a controller (or a device's TCU) and no scenario")
    dt = cfg.number("dt_s", positive=True) if cfg.has("dt_s") else None
    if scenario is not None and (duration != scenario.duration or dt is not None):
        data = {**data, "duration_s": duration, **({"dt_s": dt} if dt is not None else {})}
        scenario = parse_scenario(data, scenario.source)
    if scenario is not None:
        scenario.compile(plant, None, warn=False)  # every input name, range and value checked now
    settle = cfg.number("settle_s", 0.3, nonnegative=True)
    faults = _faults(cfg, plant, mode, devices, duration)
    sets = _adapter_sets(cfg, mode, io_config, duration)
    uds = _uds(cfg, mode, io_config, in_process) if cfg.has("uds") else None
    exps, probes = _expectations(cfg, plant, known, inputs, controller is None or scenario is not None, faults, uds,
                                 duration)
    cfg.reject_unknown()
    return TestSpec(source=source, name=name, description=desc, plant_config=plant_path, mode=mode,
                    scenario=scenario, scenario_data=data, duration_s=duration, dt_s=dt, controller=controller,
                    faults=tuple(faults), expectations=tuple(exps), io_config=io_config, settle_s=settle,
                    controller_class=in_process, adapter_sets=sets, uds=uds, uds_probes=tuple(probes), devices=devices)


def _faults(cfg: ConfigReader, plant: Plant, mode: str, devices: bool, duration: float) -> list[ScheduledFault]:
    """The ``[[faults]]`` schedule, each checked by the fault API and against the mode and the run's end."""
    raw_faults, source = cfg.raw("faults", []), cfg.source
    if not isinstance(raw_faults, list) or len(raw_faults) > MAX_FAULTS:
        raise cfg.error("faults", f"must be an array of tables ([[faults]]), at most {MAX_FAULTS}")
    faults = []
    for k, f in enumerate(raw_faults):
        sched = _fault(ConfigReader(f, source, f"faults[{k}]"), k, plant)
        if mode == "offline" and sched.fault["target"] not in ("signal", "clutch") + (("device",) if devices else ()):
            raise ConfigError(source, f"faults[{k}].target", f"a {sched.fault['target']} fault acts on a "
                              "transport: it needs a server (mode \"lockstep\" or \"realtime\"); offline runs take "
                              "signal and clutch faults")
        if sched.at > duration:
            raise ConfigError(source, f"faults[{k}].at", f"{sched.at:g} s is after the end of the run "
                              f"({duration:g} s)")
        faults.append(sched)
    return faults


def _expectations(cfg: ConfigReader, plant: Plant, known: list[str], inputs: list[str], inputs_known: bool,
                  faults: list, uds: Any, duration: float) -> tuple[list[Expectation], list]:
    """The ``[[expect]]`` tables and the DTC bits and DIDs they read; ``inputs_known``: a stimulus sets the inputs
    (a controller does not record them: an expectation may not read them then)."""
    raw_exp, source, probes = cfg.raw("expect"), cfg.source, []
    if not isinstance(raw_exp, list) or not raw_exp or len(raw_exp) > MAX_EXPECTATIONS:
        raise cfg.error("expect", f"must be an array of 1..{MAX_EXPECTATIONS} tables ([[expect]])")
    exps = []
    for k, e in enumerate(raw_exp):
        exp = _expectation(ConfigReader(e, source, f"expect[{k}]"), k, known, inputs, faults, uds, probes)
        _check_times(exp, duration, source)
        if not inputs_known:
            used_inputs = exp.expr.names & set(inputs) - {s.name for s in plant.outputs}
            if used_inputs or (exp.after is not None and exp.after.command):
                raise ConfigError(source, f"{exp.key}", "inputs are known only from a stimulus, not from a "
                                  f"controller: {', '.join(sorted(used_inputs)) or exp.after.command}")
        exps.append(exp)
    if probes:
        from .uds import MAX_PROBES
        if len(probes) > MAX_PROBES:
            raise cfg.error("expect", f"the dtc and did expectations read {len(probes)} DTC bits and DIDs; a UDS "
                            f"tester reads at most {MAX_PROBES}")
    return exps, probes


def device_tcu(cfg: ConfigReader, io_config: Path | None, mode: str) -> bool:
    """Whether the I/O config has a device with a TCU on its pins (the run is then that closed loop, offline or in
    lockstep: server.testbench.device_bench)."""
    if io_config is None:
        return False
    from server.realtime.runtime import load_io_config

    tcu = any(a.type == "device" and a.options.get("tcu") for a in load_io_config(io_config).adapters)
    if tcu and mode == "realtime":
        raise cfg.error("mode", "a device's TCU drives the run offline or in lockstep (the realtime server closes "
                        "the same loop: gearbox-hil serve)")
    return tcu


def _uds(cfg: ConfigReader, mode: str, io_config: Path | None, in_process) -> Any:
    """The ``[uds]`` table: the tester runs beside an ECU controller class on a lockstep server's virtual bus."""
    from .uds import parse_uds

    if mode != "lockstep" or in_process is None or io_config is None:
        raise cfg.error("uds", "the UDS tester joins the server's virtual bus in this process: it needs mode = "
                        "\"lockstep\", io = \"...\" (a can adapter on a virtual bus) and a controller class (the ECU)")
    out = parse_uds(cfg.sub("uds"))
    if out.channel is None:
        from .uds_bench import bus_channel

        try:
            bus_channel(io_config)
        except ValueError as exc:
            raise cfg.error("uds", str(exc)) from None
    return out


def _check_times(exp: Expectation, duration: float, source: str) -> None:
    times = {"at": exp.at_s, "window": exp.window[1] if exp.kind != "at" else None,
             "after": exp.after.time_s if exp.after is not None else None}
    for k, v in times.items():
        if v is not None and v > duration + 1e-9:
            key = "during" if (k == "window" and exp.kind == "during") else k
            raise ConfigError(source, f"{exp.key}.{key}", f"{v:g} s is after the end of the run ({duration:g} s)")
