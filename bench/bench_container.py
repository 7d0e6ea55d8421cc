"""The server in its container against the same server on the host, in one run, taken in turn.

Each round starts ``gearbox-hil serve powershift --duration D`` once on the
host and once in a container of the image, in turn, both on the image's I/O
config (``configs/io_docker.toml``: SCHED_FIFO 80 and mlockall requested,
CURVE with keys made for the run, the ``[recording]`` table; on the host its
sockets on the loopback instead of all interfaces), and reads each one's
``--summary-json``:

* **start to first tick**: from the launch (``subprocess`` spawn on the host;
  the engine's ``run`` for the container, whose creation is included) to the
  loop's first tick, both on the host's ``CLOCK_MONOTONIC`` (the summary's
  ``first_tick_monotonic_ns``: a container shares the host's clock);
  beside it the server's own process start to first tick;
* **the 1 kHz loop**: TET p50 / p99, wake-up lateness p99, missed ticks, and
  whether SCHED_FIFO was granted (``--cap-add SYS_NICE`` for the container).

Also the image's size.  ``--rt-runtime-us`` gives the container a real-time
budget (cgroup v1 hosts, docker/README.md), without which SCHED_FIFO is refused there.  The container runs with the flags of
``docker/engine.sh`` (``global``, ``run-flags``).  Build the image first
(``docker/build.sh``).

Run: ``python bench/bench_container.py [--rounds N] [--duration S] [--image TAG]``
Results: a Markdown table on stdout (medians over the rounds, every round listed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _host import host_line  # noqa: E402  (bench/ is first on the path)

ROOT = Path(__file__).resolve().parents[1]
ENGINE_SH = ROOT / "docker" / "engine.sh"


def _sh(*args: str) -> str:
    return subprocess.run([str(ENGINE_SH), *args], capture_output=True, text=True, check=True).stdout


def _summary(path: Path, t_launch_ns: int) -> dict:
    s = json.loads(path.read_text())
    tm, st, rt = s["timing"], s["startup"], s.get("realtime") or {}
    return {"launch_to_first_tick_s": (st["first_tick_monotonic_ns"] - t_launch_ns) / 1e9,
            "process_to_first_tick_s": st["process_start_to_first_tick_s"],
            "tet_p50_us": tm["tet_us"]["p50"], "tet_p99_us": tm["tet_us"]["p99"],
            "lateness_p99_us": tm["lateness_us"]["p99"], "ticks": tm["ticks"], "missed": tm["missed_ticks"],
            "fifo": "sched_fifo_priority" in (rt.get("applied") or {})}


def host_io_config(out: Path, keys: Path) -> Path:
    """configs/io_docker.toml with its sockets on the loopback and its files in ``out`` (keys, recordings)."""
    text = (ROOT / "configs" / "io_docker.toml").read_text().replace("0.0.0.0", "127.0.0.1")
    text = text.replace('"keys/', f'"{keys}/').replace('"../recordings"', f'"{out / "recordings"}"')
    path = out / "io_host.toml"
    path.write_text(text)
    return path


def host_round(duration_s: float, out: Path, io_config: Path) -> dict:
    summary = out / "host.json"
    t0 = time.monotonic_ns()
    subprocess.run([sys.executable, "-m", "server.cli", "serve", "powershift", "--io", str(io_config),
                    "--duration", str(duration_s), "--quiet", "--zmq-port", "0", "--summary-json", str(summary)],
                   cwd=ROOT, check=True, capture_output=True)
    return _summary(summary, t0)


def container_round(engine: list[str], image: str, duration_s: float, out: Path, keys: Path,
                    rt_runtime_us: int | None) -> dict:
    rt = ["--cpu-rt-runtime", str(rt_runtime_us)] if rt_runtime_us else []
    t0 = time.monotonic_ns()
    subprocess.run([*engine, "run", "--rm", *_sh("run-flags").split(), *rt, "--cap-add", "SYS_NICE", "--cap-add",
                    "IPC_LOCK", "-v", f"{keys}:/opt/gearbox-hil/keys:ro", "-v", f"{out}:/out", image, "serve",
                    "powershift", "--io", "configs/io_docker.toml", "--duration", str(duration_s), "--quiet",
                    "--summary-json", "/out/container.json"], check=True, capture_output=True)
    return _summary(out / "container.json", t0)


def _row(name: str, rs: list[dict]) -> str:
    def med(k):
        v = [r[k] for r in rs if r[k] is not None]
        return statistics.median(v) if v else float("nan")

    return (f"| {name} | {med('launch_to_first_tick_s'):.2f} | {med('process_to_first_tick_s'):.2f} | "
            f"{med('tet_p50_us'):.1f} | {med('tet_p99_us'):.1f} | {med('lateness_p99_us'):.1f} | "
            f"{sum(r['missed'] for r in rs)} of {sum(r['ticks'] for r in rs)} | "
            f"{'yes' if all(r['fifo'] for r in rs) else 'no'} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=10.0, help="seconds each server runs")
    ap.add_argument("--image", default="gearbox-hil:latest")
    ap.add_argument("--rt-runtime-us", type=int, default=None, help="the container's real-time budget per second "
                    "(--cpu-rt-runtime; cgroup v1 hosts with RT group scheduling: docker/README.md)")
    args = ap.parse_args()
    engine = [_sh("name").strip(), *_sh("global").split()]
    size = int(subprocess.run([*engine, "image", "inspect", "--format", "{{.Size}}", args.image],
                              capture_output=True, text=True, check=True).stdout)
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    print(f"image {args.image}: {size / 1e6:.0f} MB; CPU {cpu}, {os.cpu_count()} cores; "
          f"load {os.getloadavg()[0]:.1f} at the start")
    host, box = [], []
    with tempfile.TemporaryDirectory() as tmp:
        out, keys = Path(tmp), Path(tmp) / "keys"
        subprocess.run([sys.executable, "-m", "server.cli", "keys", "server", "health", "--allow", "--dir",
                        str(keys)], cwd=ROOT, check=True, capture_output=True)
        io_config = host_io_config(out, keys)
        for k in range(args.rounds):
            host.append(host_round(args.duration, out, io_config))
            box.append(container_round(engine, args.image, args.duration, out, keys, args.rt_runtime_us))
            print(f"round {k + 1}: host {json.dumps(host[-1])}\n         container {json.dumps(box[-1])}", flush=True)
    print(f"load {os.getloadavg()[0]:.1f} at the end\n")
    print("| server | launch to first tick, s | process start to first tick, s | TET p50, us | TET p99, us | "
          "lateness p99, us | missed ticks | SCHED_FIFO |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    print(_row("host", host))
    print(_row("container", box))
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
