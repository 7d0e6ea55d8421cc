"""Where a cold compile goes: per function (wall and CPU), per group, per specialisation.

Runs what the first ``./demo.sh`` compiles (``warm([plant], serve_only=True,
jobs=1)``: everything in this process) with numba's compile events
recorded: for every compiled specialisation its group (core, plant, server
loop, codecs, numba's own helpers), its argument types, and its wall and
CPU time inclusive of the functions compiled inside it and exclusive of
them.  Use a fresh cache, or nothing is compiled:

    NUMBA_CACHE_DIR=$(mktemp -d) .venv/bin/python bench/bench_compile_profile.py powershift

Results go to stdout as Markdown tables; ``--json PATH`` keeps every event.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from _host import host_line, with_host  # noqa: E402  (bench/ is first on the path)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _recorder():
    """A numba compile-event listener: one record per compiled specialisation, nesting resolved."""
    from numba.core import event

    class Recorder(event.Listener):
        def __init__(self):
            self.records: list[dict] = []
            self._stack: list[dict] = []

        def on_start(self, ev):
            func = getattr(ev.data.get("dispatcher"), "py_func", None)
            self._stack.append(dict(name=getattr(func, "__qualname__", "?"),
                                    module=getattr(func, "__module__", "") or "", args=str(ev.data.get("args")),
                                    depth=len(self._stack), t0=time.perf_counter(), c0=time.thread_time(),
                                    child_wall=0.0, child_cpu=0.0))

        def on_end(self, ev):
            rec = self._stack.pop()
            rec["wall"] = time.perf_counter() - rec.pop("t0")
            rec["cpu"] = time.thread_time() - rec.pop("c0")
            rec["self_wall"] = rec["wall"] - rec.pop("child_wall")
            rec["self_cpu"] = rec["cpu"] - rec.pop("child_cpu")
            if self._stack:
                self._stack[-1]["child_wall"] += rec["wall"]
                self._stack[-1]["child_cpu"] += rec["cpu"]
            self.records.append(rec)
    return Recorder()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("plants", nargs="*", default=["powershift"])
    ap.add_argument("--json")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args(argv)

    from numba.core import event

    from plant_models.compiling import _group
    from server.cli.warmup import warm

    rec = _recorder()
    event.register("numba:compile", rec)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    lines: list[tuple[float, str]] = []
    warm(args.plants, say=lambda line: lines.append((time.perf_counter() - wall0, line)), serve_only=True,
         jobs=1)
    warm_wall, warm_cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    event.unregister("numba:compile", rec)

    for r in rec.records:
        r["group"] = _group(r["module"])
    top = [r for r in rec.records if r["depth"] == 0]
    print(f"warm-up {args.plants}: {warm_wall:.1f} s wall, {warm_cpu:.1f} s CPU; "
          f"{len(rec.records)} specialisations compiled, {len(top)} at top level\n")
    print("| top-level function | group | wall s | CPU s | functions inside |")
    print("| --- | --- | --- | --- | --- |")
    pending = 0  # records end in post-order: a top-level record closes the ones compiled inside it
    for r in rec.records:
        if r["depth"] == 0:
            r["inside"] = pending
            pending = 0
        else:
            pending += 1
    for r in sorted(top, key=lambda r: -r["wall"])[: args.top]:
        print(f"| `{r['module']}.{r['name']}` | {r['group']} | {r['wall']:.2f} | {r['cpu']:.2f} | {r['inside']} |")
    print("\n| group | specialisations | self wall s | self CPU s |")
    print("| --- | --- | --- | --- |")
    by_group = defaultdict(lambda: [0, 0.0, 0.0])
    for r in rec.records:
        g = by_group[r["group"]]
        g[0] += 1
        g[1] += r["self_wall"]
        g[2] += r["self_cpu"]
    for g, (n, w, c) in sorted(by_group.items(), key=lambda kv: -kv[1][1]):
        print(f"| {g} | {n} | {w:.2f} | {c:.2f} |")
    print("\n| function compiled more than once | specialisations (argument types) | self wall s |")
    print("| --- | --- | --- |")
    specs = defaultdict(list)
    for r in rec.records:
        specs[(r["module"], r["name"])].append(r)
    for (mod, name), rs in sorted(specs.items(), key=lambda kv: -len(kv[1])):
        if len(rs) < 2 or _group(mod) == "numba":
            continue
        print(f"| `{mod}.{name}` | {len(rs)}: " + "; ".join(f"`{r['args']}`" for r in rs)
              + f" | {sum(r['self_wall'] for r in rs):.2f} |")
    gaps = [b[0] - a[0] for a, b in zip(lines, lines[1:])]
    print(f"\nlines of progress: {len(lines)}; largest gap {max(gaps or [0]):.2f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(with_host(dict(records=rec.records, lines=lines, wall=warm_wall, cpu=warm_cpu)),
                                              indent=1))
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
