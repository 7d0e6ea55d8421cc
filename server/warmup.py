"""Compile and cache the JIT code of every plant and of the loop, so later starts take about a second.

``python -m server.warmup`` loads every plant config in ``configs/`` (files
with a ``plant = ...`` key), resets the plant and takes a few steps, and
imports the loop's compiled kernels and those of the ZeroMQ and CAN codecs.  numba writes its cache next to the
sources (``__pycache__``) or to ``NUMBA_CACHE_DIR``; the container image runs
this at build time.  The cache is specific to the CPU model it was built on:
on a different CPU numba compiles again at the first start.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from plant_models.config import ConfigError, load_toml, repo_root
from plant_models.registry import load_plant


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


def main(argv: list[str] | None = None) -> int:
    t0 = time.perf_counter()
    from . import telemetry, watchdog  # noqa: F401  (their kernels compile or load at import)

    failed = 0
    for cfg in plant_configs():
        t = time.perf_counter()
        try:
            plant = load_plant(cfg)
            plant.reset()
            for _ in range(10):
                plant.step(1e-3)
        except Exception as exc:  # report every config, then fail
            failed += 1
            print(f"warmup: {cfg.name}: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        print(f"warmup: {cfg.name} ({plant.kind}) ready in {time.perf_counter() - t:.1f} s")
    t = time.perf_counter()
    from io_adapters.can import layouts as can_layout
    from io_adapters.zmq import codec  # noqa: F401  (the CAN and ZeroMQ codecs' kernels)

    can_layout.warm_up()
    print(f"warmup: CAN codec kernels ready in {time.perf_counter() - t:.1f} s")
    print(f"warmup: done in {time.perf_counter() - t0:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
