"""``gearbox-hil test``: test files with expectations, run against the plant offline or a server.

::

    gearbox-hil test FILE... [--junit report.xml] [--keep DIR] [--artifacts DIR]

reads every file first (a mistake in any of them: one line ``file: key:
problem``, exit 2, nothing runs), then runs them one after the other,
saying which one runs as it starts (``[k/n] running FILE ...``), and
prints a verdict per expectation, with the first failing time and value.
A file with a failed expectation leaves the trace around the failure and a
plot in ``DIR/NN_name/`` (default ``test-artifacts``), which the failed
verdicts name.  Exit code 0 when every expectation passed, 1 otherwise.  The format:
:mod:`server.testbench.spec` and ``docs/testing.md``.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help="test files (TOML)")
    p.add_argument("--junit", metavar="PATH", help="write a JUnit XML report here (one test case per expectation)")
    p.add_argument("--keep", metavar="DIR", help="keep each run's server and controller logs under DIR")
    p.add_argument("--artifacts", metavar="DIR", default="test-artifacts",
                   help="where a failing file leaves its trace around the failure and a plot, in DIR/NN_name/ "
                   "(default: test-artifacts)")


def run(args: argparse.Namespace) -> int:
    from .report import print_result, summary_line, write_junit
    from .runner import run_test
    from .spec import load_test

    specs = [load_test(f) for f in args.files]  # every file checked before any runs
    results = []
    for k, spec in enumerate(specs):
        workdir = Path(args.keep) / f"{k:02d}_{Path(spec.source).stem}" if args.keep else None
        # a server run takes seconds to start: say what runs before it does, not only when it is done
        print(f"[{k + 1}/{len(specs)}] running {spec.source} ({spec.mode}, {spec.duration_s:g} s simulated) ...",
              flush=True)
        res = run_test(spec, workdir, Path(args.artifacts) / f"{k:02d}_{Path(spec.source).stem}")
        print_result(res)
        results.append(res)
    print(summary_line(results))
    if args.junit:
        write_junit(results, args.junit)
    return 0 if all(r.passed for r in results) else 1
