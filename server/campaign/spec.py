"""Campaign files: what to vary, how to sample it, what to measure; read once, checked once.

A campaign file (TOML; the format is documented in ``docs/campaigns.md``)
names a base plant config and scenario, or a test file whose plant,
stimulus and expectations are the base (:mod:`.testbase`), the parameters to vary (each
addressed by a path, see :mod:`.paths`), a design that samples them (a
full grid, a list, seeded random or Latin-hypercube), the metrics to
compute per run (:mod:`.metrics`) and whether to keep traces.  Everything
is read and checked here, before any run: a mistake is one line naming the
file, the key and the problem.  The base config and scenario are read into
the :class:`CampaignSpec` as data, so workers on other machines need no
files, and the spec's :attr:`~CampaignSpec.digest` identifies the
campaign's results (resuming checks it).
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import pickle
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from plant_models.config import ConfigError, ConfigReader, find_config, load_plant_toml, load_toml, resolve_config
from plant_models.registry import build_plant, read_config_data

from . import paths as P

DESIGNS = ("grid", "list", "random", "lhs")
MODES = ("set", "scale", "shift")
KEEP = ("none", "all")
RESERVED = ("run", "status", "error", "status_bits", "events", "verdict")  # columns of campaign tables
MAX_RUNS = 10_000_000


@dataclass(frozen=True)
class Parameter:
    """One varied quantity: its column name, where it applies, how, and its values or range."""

    name: str
    paths: tuple[str, ...]
    mode: str  # "set": the value replaces; "scale": multiplies; "shift": moves an input history in time (s)
    values: tuple = ()  # the values to take (grid, list) or choose from (random, lhs)
    lo: float = math.nan  # or a range [lo, hi] (random, lhs; grid with `points`)
    hi: float = math.nan
    integer: bool = False  # values of a range rounded to whole numbers

    @property
    def dtype(self) -> str:
        """Column type: ``int64``, ``float64`` or ``string``."""
        if self.values and all(isinstance(v, str) for v in self.values):
            return "string"
        if self.integer or (self.values and all(isinstance(v, int) and not isinstance(v, bool) for v in self.values)):
            return "int64"
        return "float64"


@dataclass(frozen=True)
class ShiftWindow:
    """What the built-in metrics look at: when the shift starts, which clutches swap, which signals."""

    start_s: float = 0.0
    window_s: float = math.inf  # metrics over [start_s, start_s + window_s]
    off_going: str = ""  # clutch (row) names as in events.json, e.g. "C1"; signals end in _c1
    on_coming: str = ""
    engine_speed: str = ""
    output_speed: str = ""
    reaction_torque: str = ""


@dataclass(frozen=True)
class CampaignSpec:
    """A campaign file, read and checked; the base config and scenario included as data."""

    source: str
    description: str
    config_source: str
    config_data: dict
    scenario_source: str
    scenario_data: dict
    dt: float | None
    parameters: tuple[Parameter, ...]
    design: str
    runs: int
    seed: int
    shift: ShiftWindow
    builtin: tuple[str, ...]
    expressions: tuple[tuple[str, str], ...]
    keep_traces: str | tuple[int, ...] = "none"
    trace_every: int = 1
    integer_inputs: tuple[str, ...] = ()  # the plant's whole-number inputs (a shift cuts their histories as steps)
    test_source: str = ""  # a test file as the base (.testbase): its path,
    test_data: dict | None = None  # its content as read (what the expectations depend on),
    test_name: str = ""
    expectations: tuple = ()  # and its expectations (server.testbench.spec.Expectation), judged in every run
    duration_s: float | None = None  # a test's run without a scenario (a controller drives it): its length, s
    digest: str = field(default="", compare=False)

    @property
    def judged(self) -> bool:
        """Whether the runs are judged by a test file's expectations (the table has verdict columns)."""
        return bool(self.expectations)

    @property
    def metric_names(self) -> list[str]:
        return list(self.builtin) + [name for name, _ in self.expressions]

    def keeps_trace(self, run: int) -> bool:
        if self.keep_traces == "all":
            return True
        return isinstance(self.keep_traces, tuple) and run in self.keep_traces


# -- reading ---------------------------------------------------------------------------------------------
def _resolve(reader: ConfigReader, key: str, folder: str) -> Path:
    """A file named in the campaign: relative to the campaign file, else a name in the project's folder."""
    name = reader.string(key)
    here = Path(reader.source).parent / name
    for cand in (here, here.with_suffix(".toml") if not here.suffix else here):
        if cand.is_file():
            return cand
    p = resolve_config(name, folder=folder)
    if not p.is_file():
        raise reader.error(key, f"no such file {name!r} (next to the campaign file or in {folder}/)")
    return p


def _parameter(params: ConfigReader, name: str, design: str) -> Parameter:
    if name in RESERVED or name.startswith("expect["):
        raise params.error(name, "is the name of a column of campaign tables; choose another name")
    tab = params.sub(name)
    if tab.has("path") == tab.has("paths"):
        raise tab.error("path", "give either path (one) or paths (a list)")
    if tab.has("path"):
        where = (tab.string("path"),)
    else:
        raw = tab.raw("paths")
        if not isinstance(raw, list) or not raw or not all(isinstance(x, str) for x in raw):
            raise tab.error("paths", "must be a non-empty list of paths")
        where = tuple(raw)
    mode = tab.string("mode", "set", choices=MODES)
    for j, path in enumerate(where):
        key = "path" if tab.has("path") else f"paths[{j}]"
        try:
            P.check(path, mode)
        except ValueError as exc:
            raise tab.error(key, str(exc)) from None
    values: tuple = ()
    lo = hi = math.nan
    if tab.has("values"):
        raw = tab.raw("values")
        if not isinstance(raw, list) or not raw:
            raise tab.error("values", "must be a non-empty list")
        for j, v in enumerate(raw):
            ok = isinstance(v, str) if mode == "set" else False
            ok = ok or (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v))
            if not ok:
                raise tab.error(f"values[{j}]", f"must be a finite number{' or a string' if mode == 'set' else ''}, "
                                f"got {v!r}")
        values = tuple(raw)
    if tab.has("range"):
        rng = tab.numbers("range", 2)
        lo, hi = rng
        if not lo <= hi:
            raise tab.error("range", f"must be [low, high] with low <= high, got {rng}")
    integer = tab.boolean("integer", False)
    points = tab.integer("points", 0, lo=2) if tab.has("points") else 0
    if points and design != "grid":
        raise tab.error("points", f"is for the grid design, not {design}")
    if design == "grid" and points:
        if not tab.has("range"):
            raise tab.error("points", "needs a range")
        grid = np.linspace(lo, hi, points)
        values = tuple(int(round(x)) for x in grid) if integer else tuple(float(x) for x in grid)
    if design in ("grid", "list") and not values:
        raise tab.error("values", f"is required by the {design} design (or, for a grid, range and points)")
    if design in ("random", "lhs") and not values and math.isnan(lo):
        raise tab.error("range", f"is required by the {design} design (or values to choose from)")
    if tab.has("values") and tab.has("range"):
        raise tab.error("range", "give values or a range, not both")
    tab.reject_unknown()
    return Parameter(name, where, mode, values, lo, hi, integer)


def _shift(cfg: ConfigReader) -> ShiftWindow:
    tab = cfg.sub("shift", required=False)
    w = ShiftWindow(start_s=tab.number("start_s", 0.0, nonnegative=True),
                    window_s=tab.number("window_s", math.inf, positive=True) if tab.has("window_s") else math.inf,
                    off_going=tab.string("off_going", ""), on_coming=tab.string("on_coming", ""),
                    engine_speed=tab.string("engine_speed", ""), output_speed=tab.string("output_speed", ""),
                    reaction_torque=tab.string("reaction_torque", ""))
    tab.reject_unknown()
    return w


def _traces(cfg: ConfigReader) -> tuple[str | tuple[int, ...], int]:
    tab = cfg.sub("traces", required=False)
    keep = tab.raw("keep", "none")
    if isinstance(keep, list):
        if not all(isinstance(k, int) and not isinstance(k, bool) and k >= 0 for k in keep):
            raise tab.error("keep", "must be \"none\", \"all\" or a list of run numbers")
        keep = tuple(sorted(set(keep)))
    elif keep not in KEEP:
        raise tab.error("keep", f"must be \"none\", \"all\" or a list of run numbers, got {keep!r}")
    every = tab.integer("every", 1, lo=1)
    tab.reject_unknown()
    return keep, every


def parse_campaign(data: dict, source: str) -> CampaignSpec:
    """Check a parsed campaign file and read its base config and scenario (ConfigError on any mistake)."""
    from .metrics import check_metrics

    cfg = ConfigReader(data, source)
    description = cfg.string("description", "")
    base = _base(cfg)
    dt = cfg.number("dt_s", positive=True) if cfg.has("dt_s") else base.pop("dt", None)
    design_tab = cfg.sub("design")
    design = design_tab.string("method", choices=DESIGNS)
    runs = 0
    if design in ("random", "lhs"):
        if not design_tab.has("runs"):
            raise design_tab.error("runs", f"is required by the {design} design")
        runs = design_tab.integer("runs", lo=1, hi=MAX_RUNS)
    seed = design_tab.integer("seed", 0, lo=0) if design in ("random", "lhs") else 0
    design_tab.reject_unknown()
    params_tab = cfg.sub("parameters")
    if not params_tab.data:
        raise ConfigError(source, "[parameters]", "needs at least one parameter")
    parameters = tuple(_parameter(params_tab, name, design) for name in params_tab.data)
    if design == "list":
        lengths = {len(p.values) for p in parameters}
        if len(lengths) > 1:
            counts = ", ".join(f"{p.name}: {len(p.values)}" for p in parameters)
            raise params_tab.error(parameters[0].name, "the list design needs the same number of values for "
                                   f"every parameter, got {counts}")
        runs = lengths.pop()
    elif design == "grid":
        runs = math.prod(len(p.values) for p in parameters)
        if runs > MAX_RUNS:
            raise ConfigError(source, "[parameters]", f"the grid has {runs} runs, more than {MAX_RUNS}")
    shift = _shift(cfg)
    metrics_tab = cfg.sub("metrics", required=False)
    builtin, expressions = check_metrics(metrics_tab, [p.name for p in parameters],
                                         required=not base.get("expectations"))
    keep, every = _traces(cfg)
    cfg.reject_unknown()
    config_path = Path(base["config_source"])
    config = read_config_data(copy.deepcopy(base["config_data"]), str(config_path))
    integer_inputs = tuple(s.name for s in config.plant_class.signals(config.params)[0] if s.integer)
    spec = CampaignSpec(source=source, description=description, dt=dt, parameters=parameters, design=design,
                        runs=runs, seed=seed, shift=shift, builtin=builtin, expressions=expressions,
                        keep_traces=keep, trace_every=every, integer_inputs=integer_inputs, **base)
    spec = _with_digest(spec)
    _dry_run(spec)
    return spec


def _base(cfg: ConfigReader) -> dict:
    """The base of the runs, as CampaignSpec fields: a plant config and a scenario, or a test file."""
    if cfg.has("test"):
        for key in ("config", "scenario", "dt_s"):
            if cfg.has(key):
                raise cfg.error(key, "comes from the test file with a test as the base (give test, or config "
                                "and scenario)")
        from .testbase import read_test_base, test_step

        test, raw = read_test_base(cfg)
        return dict(config_source=str(test.plant_config), config_data=load_plant_toml(test.plant_config),
                    scenario_source=test.scenario.source if test.scenario is not None else "",
                    scenario_data=test.scenario_data, dt=test_step(test), duration_s=test.duration_s,
                    test_source=test.source, test_data=raw, test_name=test.name, expectations=test.expectations)
    config_path = _resolve(cfg, "config", "configs")
    scenario_path = _resolve(cfg, "scenario", "scenarios")
    return dict(config_source=str(config_path), config_data=load_plant_toml(config_path),
                scenario_source=str(scenario_path), scenario_data=load_toml(scenario_path))


def _with_digest(spec: CampaignSpec) -> CampaignSpec:
    """The spec with a digest of everything its results depend on (the file, the base config and scenario)."""
    # nothing in the table depends on them (the expectations are in test_data, as the test file has them)
    skip = ("digest", "source", "description", "keep_traces", "trace_every", "expectations", "test_name")
    if not spec.judged:  # without a test file, the digest of the fields before there were test files (resumable)
        skip += ("test_source", "test_data", "duration_s")
    doc = {k: v for k, v in spec.__dict__.items() if k not in skip}
    text = json.dumps(doc, sort_keys=True, default=lambda o: o.__dict__ if hasattr(o, "__dict__") else repr(o))
    return CampaignSpec(**{**spec.__dict__, "digest": hashlib.sha256(text.encode()).hexdigest()})


def _dry_run(spec: CampaignSpec) -> None:
    """Apply the first run's values to the base files and read them: a wrong path fails here, not in every run."""
    from server.offline.scenario import parse_scenario

    first = case_values(spec, [0])[0]
    try:
        case = apply_all(spec, first)
    except ValueError as exc:
        raise ConfigError(spec.source, "parameters", str(exc)) from None
    where = " (with run 0's parameters)"
    plant_config = read_config_data(case.config, spec.config_source + where)
    scenario = parse_scenario(case.scenario, spec.scenario_source + where) if case.scenario is not None else None
    from .metrics import check_signals
    check_signals(spec, plant_config)
    if case.faults or case.controller is not None:  # checked against the plant as a run checks them
        from plant_models.errors import FaultError

        from server.offline.controller import ControllerError, bind_controller

        from .testbase import build_controller, check_faults

        plant = build_plant(plant_config)
        dt = scenario.compile(plant, spec.dt, warn=False).dt if scenario is not None else spec.dt
        try:
            check_faults(spec, case.faults, plant, dt)
        except (FaultError, ValueError) as exc:
            raise ConfigError(spec.test_source + where, "faults", str(exc)) from None
        if case.controller is not None:
            try:
                bind_controller(build_controller(spec, case.controller), [s.name for s in plant.outputs],
                                [s.name for s in plant.inputs])
            except ControllerError as exc:
                raise ConfigError(spec.test_source + where, "controller", str(exc)) from None
            except Exception as exc:  # the controller's own code failed while it was made or bound
                raise ConfigError(spec.test_source + where, "controller", f"{type(exc).__name__}: {exc}") from None


def load_campaign(path: str | Path) -> CampaignSpec:
    """Read a campaign file (a path, or the name of a file in campaigns/)."""
    p = find_config(path, folder="campaigns")
    return parse_campaign(load_toml(p), str(p))


# -- the design ------------------------------------------------------------------------------------------
def case_values(spec: CampaignSpec, runs) -> list[tuple]:
    """The parameter values of the given runs (run numbers 0 .. spec.runs - 1), in parameter order.

    Deterministic: the same file gives the same values for every run,
    whichever runs are asked for and in whatever order.
    """
    columns = design_columns(spec)
    return [tuple(col[r] for col in columns) for r in runs]


def design_columns(spec: CampaignSpec) -> list[list]:
    """One list of values per parameter, ``spec.runs`` long: the whole design."""
    ps = spec.parameters
    n = spec.runs
    if spec.design == "list":
        return [list(p.values) for p in ps]
    if spec.design == "grid":
        rows = list(itertools.product(*[p.values for p in ps]))  # the first parameter varies slowest
        return [[row[j] for row in rows] for j in range(len(ps))]
    rng = np.random.default_rng(spec.seed)
    out = []
    for p in ps:
        if spec.design == "random":
            u = rng.random(n)
        else:  # Latin hypercube: one sample in each of n equal strata, the strata in random order
            u = (rng.permutation(n) + rng.random(n)) / n
        if p.values:
            idx = np.minimum((u * len(p.values)).astype(np.int64), len(p.values) - 1)
            out.append([p.values[i] for i in idx])
        else:
            x = p.lo + u * (p.hi - p.lo)
            out.append([int(v) for v in np.round(x)] if p.integer else [float(v) for v in x])
    return out


@dataclass(frozen=True)
class Case:
    """One run's base data with its parameter values applied (copies): what a run is made of."""

    config: dict  # the plant config
    scenario: dict | None  # the scenario (a test file's stimulus; None: a controller drives a test without one)
    faults: list | None = None  # a test file's [[faults]] (fault maps with at/until, s); None without a test base
    controller: dict | None = None  # a test file's [controller] table


def _copy(data):
    # a copy through pickle: the same as copy.deepcopy for TOML data, and several times faster
    return pickle.loads(pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL))


def apply_all(spec: CampaignSpec, values: tuple) -> Case:
    """The base data with one run's parameter values applied (copies; the base stays as read)."""
    test = spec.test_data or {}
    config = _copy(spec.config_data)
    scenario = _copy(spec.scenario_data) if spec.scenario_data is not None else None
    faults = _copy(test.get("faults", [])) if spec.judged else None
    controller = None
    if spec.judged and "controller" in test:  # a class named alone is a [controller] table without params
        ctl = test["controller"]
        controller = {"class": ctl, "params": {}} if isinstance(ctl, str) else _copy(ctl)
    for p, v in zip(spec.parameters, values):
        for path in p.paths:
            P.apply(config, scenario, path, p.mode, v, spec.integer_inputs, faults=faults, controller=controller)
    return Case(config, scenario, faults, controller)


def apply_case(spec: CampaignSpec, values: tuple) -> tuple[dict, dict]:
    """The base config and scenario data with one run's parameter values applied (copies)."""
    case = apply_all(spec, values)
    return case.config, case.scenario


__all__ = ["CampaignSpec", "Case", "Parameter", "ShiftWindow", "apply_all", "apply_case", "case_values",
           "design_columns", "load_campaign", "parse_campaign"]
