"""``gearbox-hil warmup [CONFIG ...]``: compile and cache the compiled code once, with progress shown.

Compiles the friction core, the kernels of the given plant configs (all
plant configs in ``configs/`` when none is given), the loop's telemetry and
watchdog kernels, the CAN codec's kernels and the compiled offline run
(:mod:`plant_models.offline`), so that later starts take
about a second (``--serve-only``: not the offline run, which the
real-time server never calls; ``./demo.sh`` uses it).  A line per compiled function shows what is happening;
with everything cached already, warm-up loads the code in a few seconds
and says so.  ``./demo.sh`` and ``./test.sh`` run it once after set-up;
the container image runs it at build time.

numba writes its cache next to the sources (``__pycache__``) or to
``NUMBA_CACHE_DIR``.  The cache is specific to the CPU model it was built
on: on a different CPU numba compiles again at the first start.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from plant_models.config import ConfigError, load_toml, repo_root


def plant_configs(folder: Path | None = None) -> list[Path]:
    """The plant configs in ``configs/`` (I/O configs and message sets have no ``plant`` key)."""
    folder = folder or repo_root() / "configs"
    out = []
    for p in sorted(folder.glob("*.toml")):
        try:
            data = load_toml(p)
            if "plant" in data or "extends" in data:
                out.append(p)
        except ConfigError:
            continue
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("configs", nargs="*", metavar="CONFIG",
                   help="plant configs to compile (default: every plant config in configs/)")
    p.add_argument("--quiet", action="store_true", help="print only errors")
    p.add_argument("--serve-only", action="store_true",
                   help="compile only what `gearbox-hil serve` runs: not the compiled offline run of "
                        "simulate, test and campaign (it compiles at their first use)")


def _say(line: str) -> None:
    print(f"warmup: {line}", flush=True)



def warm(configs: list[str | Path], say=_say, serve_only: bool = False) -> int:
    """Compile (or load) everything a server of these plant configs runs; returns the number of failures.

    With ``serve_only`` the compiled offline run (which the real-time
    server never calls) is left to its first use.
    """
    say("loading the compiler (numba) and the plant code")  # a second or two before numba says anything
    from plant_models.compiling import CompileProgress  # loads numba: not for --help

    began = time.perf_counter()
    cpu0 = time.process_time()
    failed = 0
    with CompileProgress(say) as progress:
        from plant_models.registry import load_plant

        for cfg in configs:
            try:
                plant = load_plant(cfg)
                for _ in range(3):
                    plant.step(1e-3)
            except ConfigError as exc:
                failed += 1
                print(f"warmup: error: {exc}", file=sys.stderr)
                continue
            say(f"{Path(str(cfg)).stem}: {plant.kind} plant ready ({time.perf_counter() - began:.1f} s elapsed)")
        from io_adapters.can.layouts import warm_up as warm_up_can_codec
        from plant_models.offline import warm_up as warm_up_offline_run
        from server.realtime import telemetry, watchdog  # noqa: F401  (their kernels compile or load at import)

        from server.realtime.faults import warm_up as warm_up_faults

        warm_up_can_codec()
        if not serve_only:
            warm_up_offline_run()
        warm_up_faults()
        how = "compiled" if progress.compiled else "everything was cached already"
    # CPU time beside the wall time: on a shared machine the wall time also says how busy the others are
    say(f"ready in {time.perf_counter() - began:.1f} s ({how}; {time.process_time() - cpu0:.1f} s of CPU)")
    return failed


def run(args: argparse.Namespace) -> int:
    from plant_models.compiling import silent

    configs = args.configs or plant_configs()
    return 1 if warm(configs, silent if args.quiet else _say, serve_only=args.serve_only) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m server.cli.warmup", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except ConfigError as exc:
        print(f"warmup: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
