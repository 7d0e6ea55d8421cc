"""Wiring: a plant config plus an I/O config become a plant, its adapters and the loop.

The I/O config (``configs/io_default.toml``, format in docs/server.md) has
the tables ``[loop]``, ``[realtime]``, ``[watchdog]`` (with optional
``[watchdog.inputs.<name>]``), ``[initial_inputs]`` and any number of
``[[adapters]]``, each chosen by ``type`` from the adapter table
(``io_adapters.base.ADAPTERS``, whose modules are imported when a config asks
for their type) and given the rest of its table as options.  Every mistake
in the file is reported as ``file: key: problem``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from io_adapters.base import Adapter, AdapterError, UnknownAdapterType, create_adapter
from plant_models.config import ConfigError, ConfigReader, load_toml, resolve_config
from plant_models.errors import InputError
from plant_models.plant import Plant
from plant_models.registry import load_plant

from .loop import MODES, OVERRUN_POLICIES, WAITS, Loop, LoopConfig
from .rtsetup import RealtimeConfig, check_combination
from .watchdog import InputPolicy, WatchdogConfig

DEFAULT_IO = "io_default"


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


def _loop_config(cfg: ConfigReader) -> LoopConfig:
    lp = cfg.sub("loop", required=False)
    d = LoopConfig()
    mode = lp.string("mode", d.mode, choices=MODES)
    rate = lp.number("rate_hz", d.rate_hz, lo=100.0, hi=10_000.0)
    wait = lp.string("wait", d.wait, choices=WAITS)
    outputs = lp.raw("status_outputs", [])
    if not isinstance(outputs, list) or not all(isinstance(x, str) for x in outputs):
        raise lp.error("status_outputs", "must be a list of output signal names")
    out = LoopConfig(
        mode=mode, rate_hz=rate, wait=wait,
        spin_margin_us=lp.number("spin_margin_us", d.spin_margin_us, lo=0.0, hi=10_000.0),
        spin_margin_adapt=lp.boolean("spin_margin_adapt", d.spin_margin_adapt),
        autostart=lp.boolean("autostart", d.autostart),
        overrun_policy=lp.string("overrun_policy", d.overrun_policy, choices=OVERRUN_POLICIES),
        max_overruns=lp.integer("max_overruns", d.max_overruns, lo=1),
        startup_grace_s=lp.number("startup_grace_s", d.startup_grace_s, nonnegative=True),
        duration_s=lp.number("duration_s", d.duration_s, nonnegative=True),
        status_interval_s=lp.number("status_interval_s", d.status_interval_s, nonnegative=True),
        status_line=lp.boolean("status_line", d.status_line),
        status_outputs=tuple(outputs),
        service_budget_us=lp.number("service_budget_us", d.service_budget_us, lo=0.0, hi=100_000.0),
        gc_interval_s=lp.number("gc_interval_s", d.gc_interval_s, nonnegative=True),
        max_step_request=lp.integer("max_step_request", d.max_step_request, lo=1),
        sample_capacity=lp.integer("sample_capacity", d.sample_capacity, lo=0, hi=100_000_000),
        realtime=_realtime_config(cfg),
    )
    lp.reject_unknown()
    return out


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


def load_io_config(path_or_name: str | Path | None = None) -> IoConfig:
    """Read an I/O config (a path or a name in configs/; None: the built-in ``io_default``)."""
    path = resolve_config(path_or_name or DEFAULT_IO)
    data = load_toml(path)
    cfg = ConfigReader(data, str(path))
    loop = _loop_config(cfg)
    problem = check_combination(loop.realtime, loop.wait)
    if problem:
        raise ConfigError(str(path), "realtime.sched_fifo_priority", problem)
    watchdog = _watchdog_config(cfg)
    ini = cfg.sub("initial_inputs", required=False)
    initial = {}
    for name in ini.data:
        v = ini.raw(name)
        initial[name] = v
    adapters = _adapter_specs(cfg)
    cfg.reject_unknown()
    return IoConfig(str(path), loop, watchdog, initial, adapters)


def _check_against_plant(io: IoConfig, plant: Plant) -> None:
    """Names in the I/O config that only the plant can check: initial inputs, watchdog inputs, status outputs."""
    names = {s.name for s in plant.inputs}
    for name, value in io.initial_inputs.items():
        if name not in names:
            raise ConfigError(io.source, f"initial_inputs.{name}", f"not an input of the {plant.kind} plant; its "
                              f"inputs are {', '.join(names)}")
        try:
            plant.input_signal(name).validate(value)
        except InputError as exc:
            raise ConfigError(io.source, f"initial_inputs.{name}", exc.message) from None
    for name, pol in io.watchdog.inputs:
        if name not in names:
            raise ConfigError(io.source, f"watchdog.inputs.{name}", f"not an input of the {plant.kind} plant")
        if pol.safe_value == pol.safe_value:  # given (not NaN)
            try:
                plant.input_signal(name).validate(pol.safe_value)
            except InputError as exc:
                raise ConfigError(io.source, f"watchdog.inputs.{name}.safe_value", exc.message) from None
    for name in io.loop.status_outputs:
        if name not in {s.name for s in plant.outputs}:
            raise ConfigError(io.source, "loop.status_outputs", f"{name!r} is not an output of the {plant.kind} "
                              "plant")


def _resolve_watchdog(io: IoConfig, plant: Plant) -> WatchdogConfig:
    """Fill unset safe values with the inputs' declared defaults."""
    from dataclasses import replace

    inputs = []
    for name, pol in io.watchdog.inputs:
        sv = pol.safe_value if pol.safe_value == pol.safe_value else plant.input_signal(name).default
        inputs.append((name, InputPolicy(sv, pol.ramp_s, pol.supervised)))
    return replace(io.watchdog, inputs=tuple(inputs))


def create_adapters(io: IoConfig) -> list[Adapter]:
    """Instantiate the configured adapters (they are opened by the loop).

    Errors become ``ConfigError`` by type: an unknown type points at the
    entry's ``type`` key, an adapter's own option error at its key, any
    other adapter error at the entry.
    """
    out = []
    for spec in io.adapters:
        try:
            out.append(create_adapter(spec.type, spec.name, dict(spec.options)))
        except ConfigError as exc:
            raise ConfigError(io.source, f"{spec.key}.{exc.key}" if exc.key else spec.key, exc.problem) from None
        except UnknownAdapterType as exc:
            raise ConfigError(io.source, f"{spec.key}.type", str(exc)) from None
        except AdapterError as exc:
            raise ConfigError(io.source, spec.key, str(exc)) from None
        except (ValueError, TypeError) as exc:
            raise ConfigError(io.source, spec.key, str(exc)) from None
    return out


def build(plant_config: str | Path, io_config: str | Path | None = None, **loop_overrides: Any) -> Loop:
    """Plant + adapters + loop from the two config files; ``loop_overrides`` replace [loop] settings (CLI)."""
    from dataclasses import replace

    io = load_io_config(io_config)
    loop_cfg = replace(io.loop, **{k: v for k, v in loop_overrides.items() if v is not None})
    if loop_cfg.rate_hz < 100.0 or loop_cfg.rate_hz > 10_000.0:
        raise ConfigError("--rate", "", f"must be between 100 and 10000 Hz, got {loop_cfg.rate_hz:g}")
    problem = check_combination(loop_cfg.realtime, loop_cfg.wait)
    if problem:
        raise ConfigError("--wait", "", problem)
    plant = load_plant(plant_config)
    _check_against_plant(io, plant)
    adapters = create_adapters(io)
    return Loop(plant, adapters, loop_cfg, _resolve_watchdog(io, plant),
                initial_inputs={k: float(v) for k, v in io.initial_inputs.items()})
