#!/usr/bin/env python3
"""Same-run comparison of two versions of the server: a benchmark run alternately on a base commit and this tree.

Exports ``--base`` (a commit) into a temporary directory (``git archive``;
no work tree or branch is touched), gives it its own numba cache and warms
it, then runs the benchmark script ``--script`` (its version of each tree)
alternately in the base and in this tree, ``--rounds`` times, with the same
arguments (everything after ``--``), so both versions see the same machine
load.  Each run writes its JSON; the summary table lists TET, lateness and
missed ticks of every plain run with the load average, side by side.

    python bench/bench_ab.py --base 887d220 --rounds 2 -- --duration 20 --rate 1000

``--work`` reuses the work directory of an earlier run (its export and warm
caches: a second comparison starts in seconds, not after a cold compile).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from _host import host_line  # noqa: E402  (bench/ is first on the path)

ROOT = Path(__file__).resolve().parent.parent


def export(commit: str, where: Path) -> None:
    where.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)


def run(tree: Path, cache: Path, script: str, args: list[str], out: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree), NUMBA_CACHE_DIR=str(cache))
    subprocess.run([sys.executable, str(tree / script), *args, "--json", str(out)], cwd=tree, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the commit to compare against")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--script", default="bench/bench_tick_stages.py")
    ap.add_argument("--out", type=Path, default=None, help="directory for the JSON of every run")
    ap.add_argument("--work", type=Path, default=None,
                    help="work directory of an earlier run to reuse (its export of --base and its warm numba caches)")
    ap.add_argument("rest", nargs=argparse.REMAINDER, help="-- then the benchmark's arguments")
    args = ap.parse_args()
    bench_args = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    tmp = args.work or Path(tempfile.mkdtemp(prefix="gearbox-hil-ab-"))
    out = args.out or tmp / "results"
    out.mkdir(parents=True, exist_ok=True)
    base_tree = tmp / "base"
    marker = tmp / "base_commit"
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", args.base], check=True, capture_output=True,
                            text=True).stdout.strip()
    if not base_tree.is_dir() or (marker.exists() and marker.read_text().strip() != commit):
        if base_tree.is_dir():
            raise SystemExit(f"{tmp} holds an export of {marker.read_text().strip()}, not of {commit}")
        export(args.base, base_tree)
    marker.write_text(commit)
    caches = {"base": tmp / "numba-base", "this": Path(os.environ.get("NUMBA_CACHE_DIR", tmp / "numba-this"))}
    trees = {"base": base_tree, "this": ROOT}
    for name, tree in trees.items():
        print(f"warming up {name} ({tree}) ...", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "server.cli.warmup"], cwd=tree, check=True, stdout=subprocess.DEVNULL,
                       env=dict(os.environ, PYTHONPATH=str(tree), NUMBA_CACHE_DIR=str(caches[name])))
    results = []
    for rnd in range(args.rounds):
        for name in ("base", "this"):
            print(f"round {rnd + 1}: {name} ...", file=sys.stderr, flush=True)
            res = run(trees[name], caches[name], args.script, bench_args, out / f"{name}_{rnd + 1}.json")
            results.append((rnd + 1, name, res))
    print(f"base {args.base}, this tree; benchmark {args.script} {' '.join(bench_args)}; JSON in {out}\n")
    print("| round | version | rate | clients | load | TET p50 | p99 | p99.9 | lateness p99 | missed % | states lost |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for rnd, name, res in results:
        for r in _plain_runs(res):
            c = r.get("client")
            lost = "-" if not c else f"{c['lost']} of {c['states'] + c['lost']}"
            t, lt = r["tet_us"], r["lateness_us"]
            print(f"| {rnd} | {name} | {r['rate']:g} | {r['clients']} | {r['load_avg'][0]:.2f} | {t['p50']:.1f} | "
                  f"{t['p99']:.1f} | {t['p999']:.1f} | {lt['p99']:.1f} | {r['missed_pct']:.3f} | {lost} |")
    return 0


def _plain_runs(res: dict) -> list[dict]:
    """The uninstrumented runs of a result: ``runs`` of bench_tick_stages, or the one ``loop`` of bench_loop."""
    if "loop" in res:  # bench_loop.py: one run, its arguments and loads beside it
        r, a = res["loop"], res["args"]
        return [dict(r, rate=a["rate"], clients=a["clients"], load_avg=res["load_avg_before"])]
    return [r for r in res.get("runs", []) if not r.get("instrumented")]


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
