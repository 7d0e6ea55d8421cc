"""One campaign run, and a batch of them: what a worker executes.

A run applies its parameter values to the base config and scenario
(:func:`.spec.apply_all`), builds the plant (or reuses the worker's last
plant of the same config), runs the scenario in compiled code at full rate
(:func:`server.offline.run.run_offline`; with a test file's fault schedule
applied around each step as the real-time tick applies it), computes the metrics
(:mod:`.metrics`), judges the test file's expectations when a test file is
the base (:mod:`.testbase`) and, when the campaign keeps its trace, encodes it as
Parquet (decimated by ``[traces] every``) for the client to write.  Any
error ends that run only: it is recorded with its message (a config value
out of range, a metric that cannot be computed) and the batch goes on.

Results depend only on the campaign and the run's number, not on the
worker, the batch or the runs before it on that worker: the plant is reset
by every run, and a plant is reused only for the same config data.
"""

from __future__ import annotations

import io
import json
import math
import time
from dataclasses import dataclass

from plant_models.config import ConfigError
from plant_models.registry import build_plant, read_config_data

from .metrics import compute
from .spec import CampaignSpec, apply_all, apply_case
from .testbase import failed_row, judge, run_test_case

_PLANTS: dict[str, object] = {}  # config data (as JSON) -> plant: this process's last few plants
_PLANTS_KEPT = 4


@dataclass
class RunResult:
    """One row of the campaign table (without the parameter values), its trace and its time."""

    run: int
    status: str  # "ok" or "failed"
    error: str
    status_bits: int
    events: int
    metrics: dict
    wall_s: float
    trace: bytes | None = None
    verdict: str = ""  # with a test file as the base: pass, fail or error (.testbase.judge),
    verdicts: tuple = ()  # and (verdict, failing time s, failing value) per expectation


def _plant(config: dict, source: str):
    key = json.dumps(config, sort_keys=True)
    plant = _PLANTS.get(key)
    if plant is None:
        plant = build_plant(read_config_data(config, source))  # with its FMUs, if the config has any
        if len(_PLANTS) >= _PLANTS_KEPT:
            _PLANTS.pop(next(iter(_PLANTS)))
        _PLANTS[key] = plant
    return plant


def run_case(spec: CampaignSpec, run: int, values: tuple) -> RunResult:
    """Run number ``run`` with its parameter values; never raises for a problem of the run itself."""
    from server.offline.scenario import parse_scenario
    from server.offline.run import run_offline

    began = time.perf_counter()
    where = f" (run {run})"
    try:
        case = apply_all(spec, values)
        plant = _plant(case.config, spec.config_source + where)
        params = {p.name: v for p, v in zip(spec.parameters, values)}
        verdict, verdicts = "", ()
        if spec.judged:
            trace, rec = run_test_case(spec, case, plant, where)
            verdict, verdicts = judge(spec.expectations, rec)
        else:
            compiled = parse_scenario(case.scenario, spec.scenario_source + where).compile(plant, spec.dt)
            trace = run_offline(plant, compiled)
        metrics = compute(spec, trace, params)
        data = _trace_bytes(trace, spec, run) if spec.keeps_trace(run) else None
        return RunResult(run, "ok", "", int(trace.status_or), len(trace.events), metrics,
                         time.perf_counter() - began, data, verdict, verdicts)
    except ConfigError as exc:
        error = str(exc)
    except Exception as exc:  # a run's own failure (a metric, the plant) must not end the campaign
        error = f"{type(exc).__name__}: {exc}"
    _PLANTS.clear()  # a run that stopped half-way may leave a plant with a fault's overlay: build afresh
    return failed_result(spec, run, error.splitlines()[0] if error else "failed", time.perf_counter() - began)


def failed_result(spec: CampaignSpec, run: int, error: str, wall_s: float = 0.0) -> RunResult:
    """The row of a run that did not complete: its error, NaN metrics, every expectation in error."""
    verdict, verdicts = failed_row(len(spec.expectations)) if spec.judged else ("", ())
    return RunResult(run, "failed", error, 0, 0, {m: math.nan for m in spec.metric_names}, wall_s, None, verdict,
                     verdicts)


def run_batch(spec: CampaignSpec, runs: list[int], values: list[tuple]) -> list[RunResult]:
    """A task: several runs in a row, so that the scheduling cost is shared by all of them."""
    return [run_case(spec, r, v) for r, v in zip(runs, values)]


def _trace_bytes(trace, spec: CampaignSpec, run: int) -> bytes:
    every = spec.trace_every
    if every > 1:
        n = len(trace.time) - 1
        rows = sorted(set(range(0, n + 1, every)) | {n})
        trace.time, trace.values = trace.time[rows], trace.values[rows]
    buf = io.BytesIO()
    trace.write_parquet(buf, {"run": str(run), "every": str(every), "campaign": spec.source})
    return buf.getvalue()


def warm(spec: CampaignSpec) -> float:
    """Make this process ready for the campaign's runs; returns the seconds it took.

    Loads (or compiles) the plant's and the offline run's code, then makes the first run once and
    discards it: a process's first run also builds the plant's handle to the compiled code and imports
    what the scenario, the metrics and the trace writer use (pyarrow, and pandas through it), about
    0.3-0.4 s that would otherwise land in the first task of every worker (BENCHMARKS.md, "Campaigns").
    """
    from dataclasses import replace

    from plant_models import offline

    began = time.perf_counter()
    values = _first_values(spec)
    c = read_config_data(apply_case(spec, values)[0], spec.config_source)
    c.plant_class.compile_kernels()
    offline.warm_up()
    keeps_any = spec.keep_traces == "all" or (isinstance(spec.keep_traces, tuple) and len(spec.keep_traces) > 0)
    run_case(replace(spec, keep_traces="all") if keeps_any else spec, 0, values)
    return time.perf_counter() - began


def _first_values(spec: CampaignSpec) -> tuple:
    from .spec import case_values
    return case_values(spec, [0])[0]


__all__ = ["RunResult", "failed_result", "run_batch", "run_case", "warm"]
