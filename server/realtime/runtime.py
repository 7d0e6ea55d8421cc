"""Wiring: a plant config plus an I/O config become a running server: plant, adapters, loop and the parts around it.

The I/O config (``configs/io_default.toml``, format in docs/server.md) has
the tables ``[loop]``, ``[realtime]``, ``[watchdog]`` (with optional
``[watchdog.inputs.<name>]``), ``[initial_inputs]`` and any number of
``[[adapters]]``, each chosen by ``type`` from the adapter table
(``io_adapters.base.ADAPTERS``) and given the rest of its table as options.
What a file leaves out keeps the default of ``io_default.toml``; its
``[[adapters]]``, if it has any, replace the default's as a whole.
Every mistake in the file is reported as ``file: key: problem``, and every
bad command-line override as ``--option: problem``.

:func:`assemble` puts the parts together, each built once, here:

* the command watchdog (:mod:`server.realtime.watchdog`) and the scenario player
  (:mod:`server.realtime.scenario_player`), which the loop uses in its tick;
* the loop (:mod:`server.realtime.loop`), which does only the tick and its clock;
* the parameter table (:mod:`server.realtime.params`), the status report
  (:mod:`server.realtime.status`) and the control handler (:mod:`server.realtime.control`);
* the state ring (:mod:`plant_models.run.ring`), which the tick writes and the
  adapters (and any later consumer) read between ticks;
* the context the loop shares with its adapters (``tick_info``, the state
  ring, the watchdog feed, status and control callbacks).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from io_adapters.base import (TI_WATCHDOG, Adapter, AdapterError, LoopContext, UnknownAdapterType, create_adapter,
                              new_tick_info)
from io_adapters.declaration import declaration, declarations
from plant_models.run.ring import StateRing
from plant_models.config import ConfigError, ConfigReader, did_you_mean, find_config, load_toml, repo_root
from plant_models.errors import InputError
from plant_models.plant import Plant
from plant_models.registry import load_plant

from server.realtime.control import ControlHandler
from server.realtime.loop import Loop
from server.realtime.loop_config import MODES, LoopConfig, SettingError
from server.realtime.params import ParamTable
from server.recording import Recorder, RecordingConfig, read_recording_config
from server.realtime.rtsetup import RealtimeConfig
from server.offline.scenario import ScenarioFolders
from server.realtime.scenario_player import ScenarioPlayer
from server.realtime.status import StatusReport
from server.realtime.watchdog import CommandWatchdog, InputPolicy, WatchdogConfig

DEFAULT_IO = "io_default"

log = logging.getLogger("gearbox_hil.runtime")


@dataclass(frozen=True)
class AdapterSpec:
    """One ``[[adapters]]`` entry: its type, name and options."""

    type: str
    name: str
    options: dict
    key: str  # "adapters[i]", for error messages


@dataclass(frozen=True)
class IoConfig:
    source: str
    loop: LoopConfig
    watchdog: WatchdogConfig
    initial_inputs: dict
    adapters: tuple[AdapterSpec, ...]
    scenarios: ScenarioFolders | None = None
    recording: RecordingConfig | None = None


def _loop_config(cfg: ConfigReader) -> LoopConfig:
    """``[loop]`` and ``[realtime]``: the reader checks types and keys, :class:`LoopConfig` the rules."""
    lp = cfg.sub("loop", required=False)
    d = LoopConfig()
    outputs = lp.raw("status_outputs", [])
    if not isinstance(outputs, list) or not all(isinstance(x, str) for x in outputs):
        raise lp.error("status_outputs", "must be a list of output signal names")
    try:
        out = LoopConfig(
            mode=lp.string("mode", d.mode), rate_hz=lp.number("rate_hz", d.rate_hz), wait=lp.string("wait", d.wait),
            spin_margin_us=lp.number("spin_margin_us", d.spin_margin_us, lo=0.0, hi=10_000.0),
            spin_margin_adapt=lp.boolean("spin_margin_adapt", d.spin_margin_adapt),
            autostart=lp.boolean("autostart", d.autostart),
            overrun_policy=lp.string("overrun_policy", d.overrun_policy),
            max_overruns=lp.integer("max_overruns", d.max_overruns, lo=1),
            startup_grace_s=lp.number("startup_grace_s", d.startup_grace_s, nonnegative=True),
            duration_s=lp.number("duration_s", d.duration_s),
            status_interval_s=lp.number("status_interval_s", d.status_interval_s, nonnegative=True),
            status_line=lp.boolean("status_line", d.status_line),
            status_outputs=tuple(outputs),
            service_budget_us=lp.number("service_budget_us", d.service_budget_us, lo=0.0, hi=100_000.0),
            gc_interval_s=lp.number("gc_interval_s", d.gc_interval_s, nonnegative=True),
            max_step_request=lp.integer("max_step_request", d.max_step_request, lo=1),
            sample_capacity=lp.integer("sample_capacity", d.sample_capacity, lo=0, hi=100_000_000),
            ring_rows=lp.integer("ring_rows", d.ring_rows),
            snapshot_dir=_snapshot_dir(lp, cfg.source),
            snapshot_max_bytes=lp.integer("snapshot_max_bytes", d.snapshot_max_bytes),
            realtime=_realtime_config(cfg),
        )
    except SettingError as exc:
        raise ConfigError(cfg.source, _config_key(exc.settings[0]), exc.problem) from None
    lp.reject_unknown()
    return out


def _snapshot_dir(lp: ConfigReader, source: str) -> str:
    """``snapshot_dir``, relative to the I/O config's folder (a built-in config: the working directory)."""
    d = lp.string("snapshot_dir", "")
    if not d:
        return ""
    p = Path(d)
    if not p.is_absolute() and source and Path(source).is_file():
        p = Path(source).resolve().parent / p
    return str(p)


def _config_key(setting: str) -> str:
    """The I/O config key of a :class:`LoopConfig` field (``realtime.*`` fields are in ``[realtime]``)."""
    return setting if setting.startswith("realtime.") else f"loop.{setting}"


def _realtime_config(cfg: ConfigReader) -> RealtimeConfig:
    rt = cfg.sub("realtime", required=False)
    d = RealtimeConfig()
    aff = rt.raw("cpu_affinity", [])
    if not isinstance(aff, list) or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in aff):
        raise rt.error("cpu_affinity", "must be a list of CPU numbers (>= 0)")
    out = RealtimeConfig(
        sched_fifo_priority=rt.integer("sched_fifo_priority", d.sched_fifo_priority, lo=0, hi=99),
        cpu_affinity=tuple(aff),
        lock_memory=rt.boolean("lock_memory", d.lock_memory),
        timer_slack_ns=rt.integer("timer_slack_ns", d.timer_slack_ns, lo=0, hi=10_000_000),
        allow_fifo_with_spin=rt.boolean("allow_fifo_with_spin", d.allow_fifo_with_spin),
    )
    rt.reject_unknown()
    return out


def _watchdog_config(cfg: ConfigReader) -> WatchdogConfig:
    wd = cfg.sub("watchdog", required=False)
    d = WatchdogConfig()
    modes = wd.raw("modes", list(d.modes))
    if not isinstance(modes, list) or not all(isinstance(m, str) and m in MODES for m in modes):
        raise wd.error("modes", f"must be a list of loop modes ({', '.join(MODES)})")
    inputs = []
    per = wd.sub("inputs", required=False)
    for name in per.data:
        t = per.sub(name)
        inputs.append((name, InputPolicy(
            safe_value=t.number("safe_value", float("nan")) if t.has("safe_value") else float("nan"),
            ramp_s=t.number("ramp_ms", wd.number("ramp_ms", d.ramp_s * 1e3, nonnegative=True),
                            nonnegative=True) / 1e3,
            supervised=t.boolean("supervised", True))))
        t.reject_unknown()
    out = WatchdogConfig(
        enabled=wd.boolean("enabled", d.enabled),
        timeout_s=wd.number("timeout_ms", d.timeout_s * 1e3, lo=0.1, hi=3.6e6) / 1e3,
        hold_s=wd.number("hold_ms", d.hold_s * 1e3, nonnegative=True) / 1e3,
        ramp_s=wd.number("ramp_ms", d.ramp_s * 1e3, nonnegative=True) / 1e3,
        modes=tuple(modes),
        recovery=wd.string("recovery", d.recovery, choices=("auto", "manual")),
        inputs=tuple(inputs),
    )
    wd.reject_unknown()
    return out


def _adapter_specs(cfg: ConfigReader) -> tuple[AdapterSpec, ...]:
    raw = cfg.raw("adapters", [])
    if not isinstance(raw, list):
        raise cfg.error("adapters", "must be an array of tables ([[adapters]])")
    specs = []
    names = set()
    for i, entry in enumerate(raw):
        key = f"adapters[{i}]"
        t = ConfigReader(entry, cfg.source, key)
        typ = t.string("type")
        name = t.string("name", typ)
        enabled = t.boolean("enabled", True)
        if name in names:
            raise t.error("name", f"adapter name {name!r} is used twice; give each [[adapters]] its own name")
        names.add(name)
        if not enabled:
            continue
        options = {k: v for k, v in entry.items() if k not in ("type", "name", "enabled")}
        specs.append(AdapterSpec(typ, name, options, key))
    return tuple(specs)


def _adapter_tables(cfg: ConfigReader, specs: tuple[AdapterSpec, ...]) -> tuple[AdapterSpec, ...]:
    """The adapters of top-level tables named after a type whose declaration allows it (``[web]``)."""
    out = []
    for decl in declarations():
        typ = decl.type_name
        if not decl.config_table or typ not in cfg.data:
            continue
        table = cfg.raw(typ)
        if not isinstance(table, dict):
            raise cfg.error(typ, f"must be a table ([{typ}])")
        if any(a.name == typ for a in specs):
            raise cfg.error(typ, f"an adapter is named {typ!r} already; configure it in one place")
        if table.get("enabled", True) is not False:
            out.append(AdapterSpec(typ, typ, {k: v for k, v in table.items() if k != "enabled"}, typ))
    return tuple(out)


def _adapter_paths(specs: tuple[AdapterSpec, ...], path: Path) -> tuple[AdapterSpec, ...]:
    """The adapters with their path options (:attr:`AdapterDeclaration.path_options`) from the config's folder."""
    base = path.resolve().parent
    out = []
    for spec in specs:
        names = [k for k in declaration(spec.type).path_options if isinstance(spec.options.get(k), str)
                 and spec.options[k] and not Path(spec.options[k]).expanduser().is_absolute()]
        if names:
            spec = replace(spec, options=dict(spec.options, **{k: str(base / spec.options[k]) for k in names}))
        out.append(spec)
    return tuple(out)


def _default_adapters() -> tuple[AdapterSpec, ...]:
    """The ``[[adapters]]`` of ``io_default.toml``: those of a file that names none."""
    path = find_config(DEFAULT_IO)
    return _adapter_specs(ConfigReader(load_toml(path), str(path)))


def load_io_config(path_or_name: str | Path | None = None) -> IoConfig:
    """Read an I/O config (a path or a name in configs/; None: the built-in ``io_default``).

    Every table and key the file leaves out keeps its default, the adapters
    included: a file without any ``[[adapters]]`` gets those of
    ``io_default.toml``; a file that has some gets only its own (``adapters =
    []``: none).
    """
    path = find_config(path_or_name or DEFAULT_IO)
    data = load_toml(path)
    cfg = ConfigReader(data, str(path))
    loop = _loop_config(cfg)
    watchdog = _watchdog_config(cfg)
    ini = cfg.sub("initial_inputs", required=False)
    initial = {}
    for name in ini.data:
        v = ini.raw(name)
        initial[name] = v
    adapters = _adapter_specs(cfg) if "adapters" in data else _default_adapters()
    adapters += _adapter_tables(cfg, adapters)
    adapters = _adapter_paths(adapters, Path(path))
    scenarios = _scenario_folders(cfg, path)
    recording = read_recording_config(cfg, Path(path).resolve().parent)
    cfg.reject_unknown()
    return IoConfig(str(path), loop, watchdog, initial, adapters, scenarios=scenarios, recording=recording)


def _scenario_folders(cfg: ConfigReader, path: Path) -> ScenarioFolders:
    """``[scenarios]``: the folders ``load_scenario`` may read, the cap.

    Relative folders are from the I/O config's folder, as ``[recording]
    folder`` and ``snapshot_dir`` are; without ``folders`` the project's
    ``scenarios/``.
    """
    sc = cfg.sub("scenarios", required=False)
    default = ScenarioFolders.default()
    folders = sc.raw("folders", None)
    if folders is None:
        out = default.folders
    else:
        if not isinstance(folders, list) or not folders or not all(isinstance(f, str) and f for f in folders):
            raise sc.error("folders", "must be a non-empty array of folder names")
        base = Path(path).resolve().parent
        out = tuple(Path(f) if Path(f).is_absolute() else base / f for f in folders)
        for f, given in zip(out, folders):
            if not f.is_dir():
                hint = ""
                if not Path(given).is_absolute() and (repo_root() / given).is_dir():
                    hint = f"; the project's {given!r} is {os.path.relpath(repo_root() / given, base)!r} from here"
                raise sc.error("folders", f"{given!r} is not a folder ({f}; relative to the I/O config's folder, "
                               f"as [recording] folder is){hint}")
    max_bytes = sc.integer("max_bytes", default.max_bytes, lo=1024, hi=1 << 28)
    sc.reject_unknown()
    return ScenarioFolders(out, max_bytes)


def _only_adapter(specs: list[AdapterSpec], typ: str, source: str, option: str) -> int:
    """The index of the one adapter of type ``typ`` a command-line option applies to."""
    found = [k for k, a in enumerate(specs) if a.type == typ]
    if not found:
        raise ConfigError(option, "", f"the I/O config {source} has no enabled {typ} adapter")
    if len(found) > 1:
        raise ConfigError(option, "", f"the I/O config {source} has {len(found)} {typ} adapters ("
                          + ", ".join(specs[k].name for k in found) + "); set their endpoints in the file")
    return found[0]


def apply_adapter_options(io: IoConfig, given: dict[str, dict[str, Any]]) -> IoConfig:
    """The I/O config with the command line's adapter options applied.

    ``given``: adapter type -> {option flag: value} (e.g. ``{"zmq":
    {"--zmq-port": 6000}}``), the options each type declares
    (:mod:`io_adapters.declaration`); each type's options apply to the one
    enabled adapter of that type, through its declaration's ``apply_cli``;
    a type whose declaration says ``cli_adds_adapter`` gets an adapter
    (named after the type) if the file has none.
    """
    specs = list(io.adapters)
    for typ, flags in given.items():
        if not flags:
            continue
        if declaration(typ).cli_adds_adapter and not any(a.type == typ for a in specs):
            specs.append(AdapterSpec(typ, typ, {}, next(iter(flags))))
        k = _only_adapter(specs, typ, io.source, next(iter(flags)))
        options = declaration(typ).apply_cli(dict(specs[k].options), flags, io.source, specs[k].key)
        specs[k] = replace(specs[k], options=options)
    for decl in declarations():  # options of another type that this type follows (AdapterDeclaration.follows_cli)
        shared = {f: v for flags in given.values() for f, v in flags.items() if f in decl.follows_cli}
        for k, spec in enumerate(specs):
            if shared and spec.type == decl.type_name:
                specs[k] = replace(spec, options=decl.apply_cli(dict(spec.options), shared, io.source, spec.key))
    return replace(io, adapters=tuple(specs))


def _check_against_plant(io: IoConfig, plant: Plant) -> None:
    """Names in the I/O config that only the plant can check: initial inputs, watchdog inputs, status outputs."""
    names = [s.name for s in plant.inputs]
    for name, value in io.initial_inputs.items():
        if name not in names:
            raise ConfigError(io.source, f"initial_inputs.{name}", f"not an input of the {plant.kind} plant; its "
                              f"inputs are {', '.join(names)}{did_you_mean(name, names)}")
        try:
            plant.input_signal(name).validate(value)
        except InputError as exc:
            raise ConfigError(io.source, f"initial_inputs.{name}", exc.message) from None
    for name, pol in io.watchdog.inputs:
        if name not in names:
            raise ConfigError(io.source, f"watchdog.inputs.{name}", f"not an input of the {plant.kind} plant"
                              + did_you_mean(name, names))
        if pol.safe_value == pol.safe_value:  # given (not NaN)
            try:
                plant.input_signal(name).validate(pol.safe_value)
            except InputError as exc:
                raise ConfigError(io.source, f"watchdog.inputs.{name}.safe_value", exc.message) from None
    outputs = [s.name for s in plant.outputs]
    for name in io.loop.status_outputs:
        if name not in outputs:
            raise ConfigError(io.source, "loop.status_outputs", f"{name!r} is not an output of the {plant.kind} "
                              "plant" + did_you_mean(name, outputs))


def _resolve_watchdog(io: IoConfig, plant: Plant) -> WatchdogConfig:
    """Fill unset safe values with the inputs' declared defaults."""
    inputs = []
    for name, pol in io.watchdog.inputs:
        sv = pol.safe_value if pol.safe_value == pol.safe_value else plant.input_signal(name).default
        inputs.append((name, InputPolicy(sv, pol.ramp_s, pol.supervised)))
    return replace(io.watchdog, inputs=tuple(inputs))


def create_adapters(io: IoConfig) -> list[Adapter]:
    """Instantiate the configured adapters (they are opened by the loop)."""
    out = []
    for spec in io.adapters:
        try:
            out.append(create_adapter(spec.type, spec.name, dict(spec.options)))
        except UnknownAdapterType as exc:
            raise ConfigError(io.source, f"{spec.key}.type", str(exc) + did_you_mean(spec.type, exc.known)) from None
        except ConfigError as exc:
            raise ConfigError(io.source, f"{spec.key}.{exc.key}" if exc.key else spec.key, exc.problem) from None
        except AdapterError as exc:
            raise ConfigError(io.source, spec.key, str(exc)) from None
        except (ValueError, TypeError) as exc:
            raise ConfigError(io.source, spec.key, str(exc)) from None
    return out


@dataclass
class Server:
    """One plant server, assembled: the loop and the parts around it (what :func:`build` returns).

    ``open()`` binds the adapters' sockets and buses, ``run()`` runs the loop
    until shutdown and returns the exit code, ``close()`` releases the
    adapters.  Control requests go to ``control.handle(request)``, the
    status object comes from ``report.status()``.
    """

    plant: Plant
    loop: Loop
    watchdog: CommandWatchdog
    player: ScenarioPlayer
    params: ParamTable
    report: StatusReport
    control: ControlHandler
    context: LoopContext
    io_source: str = ""  # the I/O config it was built from (for messages)
    recorder: Recorder | None = None  # with a [recording] table
    own_ring: bool = False  # the ring was made by assemble (a shared one is removed by close)

    def open(self) -> None:
        self.loop.open()
        if self.recorder is not None and self.recorder.cfg.autostart:
            self.recorder.start()

    def run(self) -> int:
        code = self.loop.run()
        if self.recorder is not None:  # the last ticks are in the ring: the writer reads them, then closes
            self.recorder.close()
        return code

    def close(self) -> None:
        try:
            if self.recorder is not None:
                self.recorder.close()
        finally:
            self.loop.close()
            self.control.close()
            if self.own_ring and self.loop.ring.shm_name is not None:
                self.loop.ring.close(unlink=True)


def assemble(plant: Plant, adapters: list[Adapter], cfg: LoopConfig, watchdog_cfg: WatchdogConfig | None = None,
             initial_inputs: dict[str, float] | None = None, out: Callable[[str], None] | None = None,
             ring: StateRing | None = None, scenarios: ScenarioFolders | None = None,
             recording: RecordingConfig | None = None) -> Server:
    """Build every part of a server around ``plant`` and ``adapters`` and connect them.

    ``watchdog_cfg`` names only inputs of the plant and ``initial_inputs``
    are valid values (:func:`build` checks both against the plant); ``out``
    receives the status lines when stdout is not a terminal; ``ring`` is the
    state ring to use (default: ``cfg.ring_rows`` rows in private memory;
    e.g. one in shared memory for a consumer in another process);
    ``scenarios`` the folders ``load_scenario`` reads (default: the
    project's ``scenarios/``); with ``recording`` the ring is in shared
    memory and a :class:`Recorder` serves ``record_start``/``record_stop``.
    """
    tick_info = new_tick_info()
    watchdog = CommandWatchdog(plant, watchdog_cfg or WatchdogConfig(),
                               tripped_flag=tick_info[TI_WATCHDOG:TI_WATCHDOG + 1])
    player = ScenarioPlayer(plant, watchdog, tick_info)
    own_ring = ring is None
    if ring is None:  # in shared memory when a process of its own reads it (the recording writer, the workspace)
        ring = StateRing.for_plant(plant, cfg.ring_rows,
                                   shared=recording is not None or any(a.shares_ring for a in adapters))
    loop = Loop(plant, adapters, cfg, watchdog, player, tick_info, initial_inputs, ring)
    params = ParamTable(plant, extra=watchdog.tunable_parameters())
    report = StatusReport(loop, out)
    control = ControlHandler(loop, player, params, report, scenarios)
    context = LoopContext(period_s=loop.dt, mode=loop.mode, feed_watchdog=watchdog.feed, status=report.status,
                          control=control.handle, log=logging.getLogger("gearbox_hil.io"), tick_info=tick_info,
                          ring=ring, loop_cpus=tuple(cfg.realtime.cpu_affinity),
                          recording_folder=str(recording.folder) if recording is not None else None)
    loop.attach(context, report)
    if hasattr(plant, "fmu_status"):  # FMUs in the loop (docs/fmi.md): where each runs, its faults
        report.extra["fmus"] = plant.fmu_status
    recorder = None
    if recording is not None:
        recorder = Recorder(recording, ring, plant, loop.dt, adapters)
        control.recorder = recorder
        report.extra["recording"] = recorder.status
    return Server(plant, loop, watchdog, player, params, report, control, context, recorder=recorder,
                  own_ring=own_ring)


def check_reachable(server: Server) -> None:
    """Refuse a server nobody can reach: no adapter, and a run that does not end by itself.

    Without adapters no command, no control request and no ``shutdown``
    arrives; only a signal stops it.  That is a mistake in the I/O config
    (``file: adapters: ...``), unless ``duration_s`` ends a realtime or afap
    run (a timing run without I/O), which is only logged as a warning.
    """
    if server.loop.adapters:
        return
    cfg = server.loop.cfg
    source = server.io_source or "the I/O config"
    if cfg.duration_s > 0 and cfg.mode != "lockstep":
        log.warning("%s: no adapter configured: nothing can reach this server; it runs %g s in %s mode and stops",
                    source, cfg.duration_s, cfg.mode)
        return
    raise ConfigError(source, "adapters", "no adapter configured, so no client could reach the server (add an "
                      "[[adapters]] table, as in configs/io_default.toml; a timed run without I/O needs --duration "
                      "and --mode realtime or afap)")


# LoopConfig fields the command line of `gearbox-hil serve` overrides, and their options
CLI_OPTIONS = {"mode": "--mode", "rate_hz": "--rate", "wait": "--wait", "duration_s": "--duration",
               "status_line": "--quiet"}


def build(plant_config: str | Path, io_config: str | Path | None = None,
          adapter_options: dict[str, dict[str, Any]] | None = None, **loop_overrides: Any) -> Server:
    """A server from the two config files; ``loop_overrides`` (command-line options) replace [loop] settings.

    Overrides of None are ignored.  Every override is checked here, once,
    with the file's settings (:class:`LoopConfig`); a bad one is reported
    against its command-line option.  ``adapter_options`` are the command
    line's options of the adapter types (:func:`apply_adapter_options`; e.g.
    the sockets moved by ``--zmq-port``).
    """
    io = load_io_config(io_config)
    if adapter_options:
        io = apply_adapter_options(io, adapter_options)
    given = {k: v for k, v in loop_overrides.items() if v is not None}
    try:
        loop_cfg = replace(io.loop, **given)
    except SettingError as exc:
        cli = [s for s in exc.settings if s in given]
        if cli:
            raise ConfigError(CLI_OPTIONS.get(cli[0], cli[0]), "", exc.problem) from None
        raise ConfigError(io.source, _config_key(exc.settings[0]), exc.problem) from None
    plant = load_plant(plant_config)
    _check_against_plant(io, plant)
    adapters = create_adapters(io)
    server = assemble(plant, adapters, loop_cfg, _resolve_watchdog(io, plant),
                      initial_inputs={k: float(v) for k, v in io.initial_inputs.items()}, scenarios=io.scenarios,
                      recording=io.recording)
    server.io_source = io.source
    return server
