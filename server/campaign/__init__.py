"""``gearbox-hil campaign``: many offline runs over varied parameters, on the cores of one machine or a Dask cluster.

::

    gearbox-hil campaign FILE --out DIR [--workers N | --scheduler ADDRESS] [--batch N] [--restart] [--plot]
    gearbox-hil campaign FILE --out DIR --replay RUN

runs every case of a campaign file (:mod:`.spec`; format and worked
example in ``docs/campaigns.md``) and writes ``DIR/campaign.parquet`` (one
row per run: its number, parameter values, status, error, status bits,
event count and metrics), ``DIR/campaign.json`` (what ran, where, how
fast), when the file keeps them, ``DIR/traces/run_NNNNNN.parquet``, and
with ``--plot`` the figures of :mod:`server.plots.campaign`.  A campaign
over a test file (:mod:`.testbase`) also prints and writes
``DIR/summary.json``: pass rates, the parameters that decide failure, the
worst runs and the command that replays one (:mod:`.summary`);
``--replay RUN`` writes that run as a test file and runs it with the test
bench, comparing its verdicts with the table (:mod:`.replay`).
Started again with the same file and ``--out``, it runs only what is
missing (:mod:`.engine`).  The parts:

* :mod:`.spec` -- reading the file, the designs (grid, list, random, Latin hypercube);
* :mod:`.paths` -- where a parameter applies in the base config or scenario;
* :mod:`.metrics` -- built-in shift metrics and expressions;
* :mod:`.runner` -- one run and a batch of runs (what a worker executes);
* :mod:`.engine` -- Dask: the cluster, the batches, the parts, the table;
* :mod:`.testbase` -- a test file as the base: its expectations judged in every run;
* :mod:`.summary` -- pass rates, influence, the worst runs;
* :mod:`.replay` -- one run as a test file.

This module holds only the command line, so that ``gearbox-hil --help``
loads neither Dask nor compiled code.
"""

from __future__ import annotations

import argparse
import sys
import time

from plant_models.config import ConfigError

from server.offline.args import positive_int


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="campaign file (or the name of one in campaigns/)")
    p.add_argument("--out", required=True, help="output directory (created if missing; resumed if it holds this "
                   "campaign's results)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--workers", type=positive_int, default=None, metavar="N",
                       help="worker processes of the embedded local cluster (default: one per core)")
    where.add_argument("--scheduler", default=None, metavar="ADDRESS",
                       help="run on an existing Dask cluster, e.g. tcp://10.0.0.5:8786 (its workers need "
                            "gearbox-hil installed)")
    p.add_argument("--batch", type=positive_int, default=None, metavar="N",
                   help="runs per task (default: about eight tasks per worker, at most 200 runs)")
    p.add_argument("--restart", action="store_true", help="forget the results in --out and run everything again")
    p.add_argument("--plot", action="store_true", help="also write PNG figures of the table (needs matplotlib)")
    p.add_argument("--replay", type=int, default=None, metavar="RUN",
                   help="write run RUN of a campaign over a test file as a test file (DIR/replay/) and run it with "
                        "the test bench; its verdicts are compared with the table's row")
    p.add_argument("--quiet", action="store_true", help="print nothing on success")


def run(args: argparse.Namespace) -> int:
    began = time.perf_counter()
    try:
        import distributed  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        raise ConfigError("campaign", "", "needs pyarrow and dask distributed "
                          "(pip install 'gearbox-hil[campaign]')") from None
    from pathlib import Path

    from server.offline.progress_bars import count_bar

    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ConfigError("--plot", "", "needs matplotlib (pip install 'gearbox-hil[plot]')") from None

    from .engine import execute, finished_runs, prepare
    from .spec import load_campaign

    spec = load_campaign(args.file)
    out = Path(args.out)
    if args.replay is not None:
        from .replay import replay

        return replay(spec, args.replay, out)
    prepare(out, spec, args.restart)
    before = len(finished_runs(out, spec))
    try:
        with count_bar("campaign", spec.runs, before, enabled=not args.quiet) as progress:
            outcome = execute(spec, out, workers=args.workers, scheduler=args.scheduler, batch=args.batch,
                              progress=progress)
    except KeyboardInterrupt:
        done = len(finished_runs(out, spec))
        print(f"gearbox-hil: campaign interrupted: {done} of {spec.runs} runs are in {out}; the same command "
              "resumes it", file=sys.stderr)
        return 130
    figures = []
    title = spec.description or Path(spec.source).stem
    summary = None
    if spec.judged or args.plot:
        import pyarrow.parquet as pq

        table = pq.read_table(outcome.table)
    if spec.judged:
        from .summary import summarize, write_summary

        summary = summarize(table, spec, out)
        figures.append(write_summary(summary, out))
    if args.plot:
        from server.plots.campaign import plot_campaign, plot_failing_region

        figures += plot_campaign(table, [p.name for p in spec.parameters], spec.metric_names, out, title)
        if summary is not None and len(summary.region) == 2:
            figures.append(plot_failing_region(table, summary.region, summary.influence,
                                               [e.name for e in spec.expectations], out, title))
    if not args.quiet:
        o = outcome
        rate = f" ({o.ran / o.tasks_s:.0f} runs/s on {o.workers} worker{'s' * (o.workers != 1)})" if o.tasks_s else ""
        skipped = f"; {o.done_before} were done before" if o.done_before else ""
        print(f"campaign {Path(spec.source).stem}: {o.ran} runs, {o.ok} ok, {o.failed} failed{rate}{skipped}")
        print(f"wrote {o.table} ({spec.runs} rows), {out / 'campaign.json'}" + "".join(f", {f}" for f in figures)
              + f"; {time.perf_counter() - began:.1f} s wall in all")
        if summary is not None:
            from .summary import print_summary

            print_summary(summary)
    return 0
