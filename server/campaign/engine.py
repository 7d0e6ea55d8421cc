"""Running a campaign on Dask: an embedded local cluster by default or an existing one; batched, resumable.

The engine is Dask's distributed scheduler, not a home-made pool: with no
``--scheduler`` an embedded ``LocalCluster`` starts one worker process per
core (one thread each: the runs hold the GIL only between compiled calls,
and processes keep the workers' compiled code and plants apart), listening
on 127.0.0.1 only; with ``--scheduler ADDRESS``
the same tasks go to an existing cluster (its workers need gearbox-hil
installed; the base config and scenario travel with the tasks as data).
A worker plugin loads the compiled code once per worker before any task
(:func:`.runner.warm`), also on workers that join later.

Runs go out in batches (:func:`.runner.run_batch`), large first and small
last (:func:`batch_sizes`), so the scheduling cost (about a millisecond a
task) is shared by many runs and the workers finish together.  The client
writes the runs finished since its last part to ``OUT/parts/`` about once
a second, and at the end or an interruption (a temporary name, then an
atomic rename), so an interruption loses at most the batches in flight;
started again with the same file and ``--out``, a campaign skips every run
already in a part.  A failed run is a row with its error; a batch whose
worker died is recorded as failed runs too, and the campaign goes on.  At
the end the parts become one table, ``OUT/campaign.parquet``, sorted by
run: the same for any number of workers, batch size or interruption.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from plant_models.config import ConfigError

from .runner import RunResult, failed_result, run_batch, warm
from .spec import CampaignSpec, case_values
from .testbase import PARTS as VERDICT_PARTS, VERDICT, column, verdict_columns

TABLE = "campaign.parquet"
MANIFEST = "campaign.json"
PARTS = "parts"
TRACES = "traces"
MANIFEST_FORMAT = 1
MIN_BATCH, MAX_BATCH = 16, 200  # runs per task of the guided sizes (batch_sizes)
# The local cluster's housekeeping, which takes the GIL (and, with a worker per core, the CPU) from the runs:
# the statistical profiler samples the task's stack every 10 ms, the memory monitor reads the process's memory
# every 100 ms, every event loop (scheduler, nannies, workers) checks its own health every 20 ms and reads the
# system's counters every 500 ms.  Runs are short and small, and no dashboard shows these; slower checks gave
# 2 workers 8 % more throughput (BENCHMARKS.md, "Campaigns").  A cluster given by --scheduler keeps its own.
QUIET_LOCAL_CLUSTER = {"distributed.worker.profile.enabled": False, "distributed.worker.memory.monitor-interval": "1s",
                       "distributed.admin.tick.interval": "1s", "distributed.admin.tick.cycle": "5s",
                       "distributed.admin.system-monitor.interval": "2s"}
SAVE_EVERY_S = 1.0  # the client writes the runs finished since its last part at most this often (and at the end)


@dataclass
class Outcome:
    """What a campaign execution did, for the summary line and ``campaign.json``."""

    runs: int
    done_before: int
    ran: int
    ok: int
    failed: int
    workers: int
    wall_s: float  # the whole execution, cluster start and table writing included
    tasks_s: float  # from the first task submitted to the last result
    run_s: float  # the runs' own time on the workers, summed
    batch: int  # runs in the first (largest) task
    scheduler: str
    table: Path


# -- the table --------------------------------------------------------------------------------------------
def table_schema(spec: CampaignSpec):
    """Columns: run, the parameters, status, error, status_bits, events, the verdicts (.testbase), the metrics."""
    import pyarrow as pa

    types = {"int64": pa.int64(), "float64": pa.float64(), "string": pa.string()}
    fields = [pa.field("run", pa.int64())]
    fields += [pa.field(p.name, types[p.dtype]) for p in spec.parameters]
    fields += [pa.field("status", pa.string()), pa.field("error", pa.string()), pa.field("status_bits", pa.int64()),
               pa.field("events", pa.int64())]
    fields += [pa.field(name, types[kind]) for name, kind in verdict_columns(len(spec.expectations))
               if spec.judged]
    fields += [pa.field(m, pa.float64()) for m in spec.metric_names]
    meta = {"campaign": spec.source, "digest": spec.digest}
    if spec.judged:  # what expect[k] is: the test file and its expectations' names
        meta["test"] = spec.test_source
        meta["expectations"] = json.dumps([e.name for e in spec.expectations])
    return pa.schema(fields, metadata=meta)


def batch_table(spec: CampaignSpec, results: list[RunResult], values: dict[int, tuple]):
    import pyarrow as pa

    schema = table_schema(spec)
    cols = {"run": [r.run for r in results]}
    for j, p in enumerate(spec.parameters):
        cols[p.name] = [values[r.run][j] for r in results]
    cols.update(status=[r.status for r in results], error=[r.error for r in results],
                status_bits=[r.status_bits for r in results], events=[r.events for r in results])
    if spec.judged:
        cols[VERDICT] = [r.verdict for r in results]
        for k in range(len(spec.expectations)):
            for j, part in enumerate(VERDICT_PARTS):
                cols[column(k, part)] = [r.verdicts[k][j] for r in results]
    for m in spec.metric_names:
        cols[m] = [r.metrics.get(m, math.nan) for r in results]
    return pa.Table.from_pydict(cols, schema=schema)


def _write_atomic(table, path: Path) -> None:
    import pyarrow.parquet as pq

    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)


def finished_runs(out: Path, spec: CampaignSpec) -> set[int]:
    """Run numbers already in ``OUT/parts`` (unreadable or temporary files are removed)."""
    import pyarrow.parquet as pq

    done: set[int] = set()
    folder = out / PARTS
    if not folder.is_dir():
        return done
    for f in sorted(folder.iterdir()):
        if f.suffix != ".parquet":
            f.unlink()  # a part interrupted while it was written
            continue
        try:
            runs = pq.read_table(f, columns=["run"]).column("run").to_pylist()
        except Exception:
            f.unlink()
            continue
        done.update(r for r in runs if 0 <= r < spec.runs)
    return done


def assemble(out: Path, spec: CampaignSpec) -> Path:
    """Every part into one table sorted by run: ``OUT/campaign.parquet``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    parts = [pq.read_table(f, schema=table_schema(spec)) for f in sorted((out / PARTS).glob("*.parquet"))]
    table = pa.concat_tables(parts) if parts else table_schema(spec).empty_table()
    table = table.sort_by("run")
    runs = table.column("run").to_pylist()
    table = table.take([i for i in range(len(runs)) if i == 0 or runs[i] != runs[i - 1]]).combine_chunks()
    path = out / TABLE
    _write_atomic(table, path)
    return path


# -- the output folder ------------------------------------------------------------------------------------
def prepare(out: Path, spec: CampaignSpec, restart: bool) -> None:
    """Create ``out`` or check that it holds this campaign's results; ``restart`` forgets earlier results."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(str(out), "--out", f"cannot create the output directory ({exc.strerror})") from None
    if not out.is_dir() or not os.access(out, os.W_OK | os.X_OK):
        raise ConfigError(str(out), "--out", "is not a writable directory")
    manifest = out / MANIFEST
    if manifest.exists() and not restart:
        try:
            digest = json.loads(manifest.read_text()).get("digest")
        except (OSError, ValueError):
            digest = None
        if digest != spec.digest:
            raise ConfigError(str(out), "--out", "holds the results of another campaign (or this file, its config "
                              "or its scenario changed since); use a new --out, or --restart to replace them")
    if restart:
        for name in (PARTS, TRACES):
            shutil.rmtree(out / name, ignore_errors=True)
        for name in (TABLE, MANIFEST):
            (out / name).unlink(missing_ok=True)
    (out / PARTS).mkdir(exist_ok=True)
    if not manifest.exists():
        _write_manifest(out, spec, None)


def _write_manifest(out: Path, spec: CampaignSpec, outcome: Outcome | None) -> None:
    doc = {"format": MANIFEST_FORMAT, "campaign": spec.source, "description": spec.description,
           "digest": spec.digest, "config": spec.config_source, "scenario": spec.scenario_source,
           "design": spec.design, "runs": spec.runs, "seed": spec.seed,
           "parameters": [p.name for p in spec.parameters], "metrics": spec.metric_names}
    if spec.judged:
        doc["test"] = spec.test_source
        doc["expectations"] = [{"column": f"expect[{k}]", "name": e.name, "expects": e.bounds_text()}
                               for k, e in enumerate(spec.expectations)]
    if outcome is not None:
        doc["last_execution"] = {
            "workers": outcome.workers, "scheduler": outcome.scheduler, "batch": outcome.batch,
            "runs_done_before": outcome.done_before, "runs_ran": outcome.ran, "ok": outcome.ok,
            "failed": outcome.failed, "wall_s": round(outcome.wall_s, 3), "tasks_s": round(outcome.tasks_s, 3),
            "run_s_summed": round(outcome.run_s, 3),
            "runs_per_s": round(outcome.ran / outcome.tasks_s, 1) if outcome.tasks_s > 0 else None}
    tmp = out / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, out / MANIFEST)


# -- execution ----------------------------------------------------------------------------------------------
def batch_sizes(todo: int, workers: int, fixed: int | None = None) -> list[int]:
    """Runs per task, in the order the tasks are submitted (and run: Dask starts them in that order).

    ``fixed`` (``--batch N``): every task N runs.  By default the sizes are
    guided: each task takes a quarter per worker of the runs not yet handed
    out, at most 200 and at least 16.  The first tasks are large, so Dask's
    cost per task (about 4 ms of the client's and the scheduler's CPU here,
    against about 3 ms a run) is shared by many runs; the last are small,
    so the workers finish together instead of one idling while another runs
    a long last task.
    """
    if fixed:
        return [min(fixed, todo - a) for a in range(0, todo, fixed)]
    sizes, left = [], todo
    while left > 0:
        n = min(left, max(MIN_BATCH, min(MAX_BATCH, math.ceil(left / (4 * max(1, workers))))))
        sizes.append(n)
        left -= n
    return sizes


def _warm_plugin(spec: CampaignSpec):
    from distributed.diagnostics.plugin import WorkerPlugin

    class WarmPlugin(WorkerPlugin):
        """Every worker, also one that joins later, loads the compiled code once before any task."""

        name = "gearbox-hil-warm"

        def __init__(self, spec):
            self.spec = spec

        def setup(self, worker=None):
            warm(self.spec)

    return WarmPlugin(spec)


def start_client(workers: int | None, scheduler: str | None):
    """``(client, cluster)``: a client of the cluster at ``scheduler``, or of a new loopback-only local cluster."""
    from distributed import Client, LocalCluster

    logging.getLogger("distributed").setLevel(logging.ERROR)
    if scheduler:
        if not re.fullmatch(r"([a-z]+://)?[^\s:/]+:\d+", scheduler):
            raise ConfigError("--scheduler", "", f"{scheduler!r} is not an address like tcp://10.0.0.5:8786")
        try:
            return Client(scheduler, timeout="20s"), None
        except (OSError, TimeoutError, ValueError) as exc:
            raise ConfigError("--scheduler", "", f"cannot connect to {scheduler} ({exc})") from None
    import dask

    n = workers or os.cpu_count() or 1
    # Dask starts its workers with MALLOC_TRIM_THRESHOLD_ set, which turns off glibc's adaptive mmap
    # threshold: every run's output buffers (over 128 kB) then come fresh from the kernel, about 0.4 ms
    # a run here (BENCHMARKS.md, "Campaigns").  A run's memory is small; the default suits it.
    environ = {k: v for k, v in dask.config.get("distributed.nanny.pre-spawn-environ", {}).items()
               if k != "MALLOC_TRIM_THRESHOLD_"}
    with dask.config.set({"distributed.nanny.pre-spawn-environ": environ, **QUIET_LOCAL_CLUSTER}):
        # everything on 127.0.0.1; the scheduler's HTTP endpoint (no dashboard without bokeh) on any free port
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                               scheduler_port=0, dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
    return Client(cluster), cluster


def execute(spec: CampaignSpec, out: Path, *, workers: int | None = None, scheduler: str | None = None,
            batch: int | None = None, restart: bool = False,
            progress: Callable[[int, str], None] | None = None) -> Outcome:
    """Run every run of the campaign not finished yet, then write the table (see the module's docstring)."""
    began = time.perf_counter()
    prepare(out, spec, restart)
    done = finished_runs(out, spec)
    todo = [r for r in range(spec.runs) if r not in done]
    ok = failed = 0
    run_s = tasks_s = 0.0
    n_workers, size, where = 0, 0, scheduler or "local"
    if todo:
        client, cluster = start_client(workers, scheduler)
        try:
            n_workers = len(client.scheduler_info().get("workers", {})) or (workers or 1)
            sizes = batch_sizes(len(todo), n_workers, batch)
            size = sizes[0]
            values = dict(zip(todo, case_values(spec, todo)))
            client.register_plugin(_warm_plugin(spec))
            (remote_spec,) = client.scatter([spec], broadcast=True)
            # The first table built imports pyarrow and pandas (0.4 s of CPU): now, not while the workers run.
            batch_table(spec, [], values)
            t0 = time.perf_counter()
            futures = {}
            a = 0
            for n in sizes:
                ids = todo[a:a + n]
                a += n
                fut = client.submit(run_batch, remote_spec, ids, [values[r] for r in ids], pure=False)
                futures[fut] = ids
            from distributed import as_completed

            finished = len(done)
            unsaved: list[RunResult] = []  # finished runs not yet in a part
            saved_at = time.perf_counter()
            try:
                for fut in as_completed(list(futures)):
                    ids = futures.pop(fut)
                    try:
                        results = fut.result()
                    except Exception as exc:  # the worker died or the task could not run: these runs failed
                        results = [failed_result(spec, r, f"{type(exc).__name__}: {exc}".splitlines()[0])
                                   for r in ids]
                    unsaved += results
                    ok += sum(r.status == "ok" for r in results)
                    failed += sum(r.status != "ok" for r in results)
                    run_s += sum(r.wall_s for r in results)
                    finished += len(results)
                    tasks_s = time.perf_counter() - t0  # to the last result (the final part is written after it)
                    if time.perf_counter() - saved_at >= SAVE_EVERY_S:
                        _store(out, spec, unsaved, values)
                        unsaved, saved_at = [], time.perf_counter()
                    if progress is not None:
                        progress(finished, f"{failed} failed" if failed else "")
            finally:  # also on Ctrl-C: every finished run is kept
                if unsaved:
                    _store(out, spec, unsaved, values)
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
    table = assemble(out, spec)
    outcome = Outcome(spec.runs, len(done), len(todo), ok, failed, n_workers, time.perf_counter() - began, tasks_s,
                      run_s, size, where, table)
    _write_manifest(out, spec, outcome)
    return outcome


def _store(out: Path, spec: CampaignSpec, results: list[RunResult], values: dict[int, tuple]) -> None:
    """Finished runs: their traces, then their part (the part marks the runs done)."""
    kept = [r for r in results if r.trace is not None]
    if kept:
        (out / TRACES).mkdir(exist_ok=True)
        for r in kept:
            path = out / TRACES / f"run_{r.run:06d}.parquet"
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_bytes(r.trace)
            os.replace(tmp, path)
    first = min(r.run for r in results)  # a run is in one part only: its first run names the part
    _write_atomic(batch_table(spec, results, values), out / PARTS / f"runs_{first:07d}_{len(results)}.parquet")


def run_bare(spec: CampaignSpec, runs: list[int]) -> list[RunResult]:
    """The same runs in this process without Dask (the baseline of the campaign benchmark, and for tests)."""
    warm(spec)
    return run_batch(spec, runs, case_values(spec, runs))


__all__ = ["Outcome", "assemble", "batch_sizes", "execute", "finished_runs", "prepare", "run_bare", "start_client",
           "table_schema"]
