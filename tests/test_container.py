"""The container image (docker/): built, started warm, driven from the host, health-checked, stopped, recording.

Builds the image with ``docker/build.sh`` (the debootstrap base where no
registry is reachable, made once per machine; the build's layers are cached,
so a second run rebuilds nothing) and runs it with the engine
``docker/engine.sh`` chooses.  Where neither podman nor docker can run a
container, the whole module is skipped with one line saying why.

What is checked:

* the image carries its build's warm-up report (a cold compile) and a health check;
* the server starts on the image's defaults without compiling anything, and
  its time to ready (host ``run`` to the first ``ping`` answered through the
  published port) stays below three times a cached warm-up's in the same
  image just before it (the warm-up itself must say everything was cached);
* the health check passes, fails while the server process is stopped
  (SIGSTOP from the host) and passes again when it continues;
* ``stop`` (SIGTERM) ends it with exit code 0 and the timing summary in its log;
* a controller on the host (``examples/closed_loop_swap.py``) closes the
  demo's gear 1 -> 3 shift over ZeroMQ with CURVE through the published
  ports while the server records to MF4 on a mounted volume; the files read
  back on the host hold the shift, tick by tick, equal to what the state
  stream delivered;
* the shipped campaign on a Dask scheduler and two workers, three
  containers of the image on the host's loopback (``--network host``, every
  socket bound to 127.0.0.1), driven from the host with ``--scheduler``,
  gives the embedded cluster's table bit for bit.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
ENGINE_SH = ROOT / "docker" / "engine.sh"
IMAGE = os.environ.get("GEARBOX_HIL_IMAGE", "gearbox-hil:latest")
BUILD_TIMEOUT_S = 3600.0
READY_TIMEOUT_S = 180.0
READY_FACTOR = 3.0  # the container's time to ready, at most this many times a cached warm-up's in the same image

pytestmark = [pytest.mark.container, pytest.mark.slow]


def _engine() -> tuple[str | None, str]:
    try:
        r = subprocess.run([str(ENGINE_SH), "name"], capture_output=True, text=True, timeout=180)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"docker/engine.sh failed ({exc})"
    return (r.stdout.strip(), "") if r.returncode == 0 else (None, r.stderr.strip() or "no container engine")


ENGINE, WHY_NOT = _engine()
if ENGINE is None:
    pytest.skip(f"container tests: {WHY_NOT}", allow_module_level=True)


def _flags(kind: str) -> list[str]:
    return subprocess.run([str(ENGINE_SH), kind], capture_output=True, text=True, check=True).stdout.split()


GLOBAL, RUN_FLAGS = _flags("global"), _flags("run-flags")


def engine(*args: str, timeout: float = 120.0, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([ENGINE, *GLOBAL, *args], capture_output=True, text=True, timeout=timeout)
    if check and r.returncode:
        raise AssertionError(f"{ENGINE} {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


def container_log(name: str) -> str:
    r = engine("logs", name, check=False)
    return r.stdout + r.stderr


def inspect(name: str, fmt: str) -> str:
    return engine("inspect", "--format", fmt, name).stdout.strip()


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> str:
    log = tmp_path_factory.mktemp("build") / "build.log"
    with open(log, "w") as fh:
        r = subprocess.run([str(ROOT / "docker" / "build.sh"), "--tag", IMAGE], stdout=fh, stderr=subprocess.STDOUT,
                           timeout=BUILD_TIMEOUT_S, cwd=ROOT)
    text = log.read_text()
    print("\n".join(line for line in text.splitlines() if line.startswith("build.sh:")))
    assert r.returncode == 0, f"docker/build.sh failed ({r.returncode}); its last lines:\n" + "\n".join(
        text.splitlines()[-40:])
    return IMAGE


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> Path:
    """The server's CURVE pair and the health check's and the controller's, both allowed (docker/README.md)."""
    folder = tmp_path_factory.mktemp("keys")
    subprocess.run([sys.executable, "-m", "server.cli", "keys", "server", "health", "controller", "--allow",
                    "--dir", str(folder)], check=True, cwd=ROOT, capture_output=True)
    return folder


def free_ports(count: int) -> int:
    """A first port of ``count`` consecutive free TCP ports on the loopback."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            first = s.getsockname()[1]
        if first + count > 65535:
            continue
        socks = []
        try:
            for p in range(first, first + count):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return first
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no {count} consecutive free ports on 127.0.0.1")


class Container:
    """A detached container of the image, removed at the end; ``name`` is unique to this test run."""

    def __init__(self, image: str, keys: Path | None, suffix: str, options: list[str], command: list[str]):
        self.name = f"gearbox-hil-test-{os.getpid()}-{suffix}"
        engine("rm", "-f", self.name, check=False)
        mount = ["-v", f"{keys}:/opt/gearbox-hil/keys:ro"] if keys is not None else []
        self.t_run = time.perf_counter()
        engine("run", "-d", "--name", self.name, *RUN_FLAGS, "--cap-add", "SYS_NICE", "--cap-add", "IPC_LOCK",
               *mount, *options, image, *command)

    def running(self) -> bool:
        return inspect(self.name, "{{.State.Running}}") == "true"

    def host_pid(self) -> int:
        return int(inspect(self.name, "{{.State.Pid}}"))

    def exit_code(self) -> int:
        return int(inspect(self.name, "{{.State.ExitCode}}"))

    def wait_exit(self, timeout_s: float) -> int:
        t_end = time.monotonic() + timeout_s
        while self.running():
            assert time.monotonic() < t_end, f"{self.name} still running after {timeout_s:g} s"
            time.sleep(0.2)
        return self.exit_code()

    def remove(self) -> None:
        engine("rm", "-f", "-t", "2", self.name, check=False)


def wait_ready(box: Container, control: str, keys: Path, timeout_s: float = READY_TIMEOUT_S) -> float:
    """Seconds from ``run`` to the first ``ping`` the server answers through ``control`` (CURVE, health key)."""
    from io_adapters.zmq.client import HilClient

    t_end = time.monotonic() + timeout_s
    while time.monotonic() < t_end:
        try:
            with HilClient(control, timeout_s=0.5, client_key=str(keys / "health.key_secret"),
                           server_key=str(keys / "server.key")) as hil:
                hil.ping()
                return time.perf_counter() - box.t_run
        except TimeoutError:
            pass
        if not box.running():
            raise AssertionError(f"the container exited ({box.exit_code()}):\n{container_log(box.name)}")
    raise AssertionError(f"no answer on {control} within {timeout_s:g} s:\n{container_log(box.name)}")


def health(box: Container) -> bool:
    """The image's HEALTHCHECK run once now: podman runs it itself; for docker its command is executed."""
    if ENGINE == "podman":
        return engine("healthcheck", "run", box.name, check=False, timeout=60).returncode == 0
    test = engine("image", "inspect", "--format", "{{json .Config.Healthcheck.Test}}", IMAGE).stdout
    import json

    kind, *cmd = json.loads(test)
    argv = ["sh", "-c", cmd[0]] if kind == "CMD-SHELL" else cmd
    return engine("exec", box.name, *argv, check=False, timeout=60).returncode == 0


WARMUP_REPORT = re.compile(r"warmup: ready in ([0-9.]+) s \(([^;]+);")


def test_image_builds_with_its_cold_warm_up_report_and_a_health_check(image):
    r = engine("run", "--rm", *RUN_FLAGS, "--entrypoint", "cat", image, "warmup-build.log")
    report = WARMUP_REPORT.search(r.stdout)
    assert report, f"no warm-up report in the image:\n{r.stdout[-2000:]}"
    assert report[2] == "compiled" and "error" not in r.stdout, r.stdout[-2000:]
    assert "io_adapters.zmq.client ping" in engine("image", "inspect", image).stdout  # podman and docker keep it
    # under different keys of the inspect document
    size_mb = int(inspect(image, "{{.Size}}")) / 1e6
    print(f"image {image}: {size_mb:.0f} MB; build warm-up: {report[0]}")


def test_the_server_starts_warm_on_the_image_defaults(image, keys):
    # the baseline: a cached warm-up of the server's code in a container of the same image, timed the same way
    t0 = time.perf_counter()
    base = engine("run", "--rm", *RUN_FLAGS, "--entrypoint", "python", image, "-m", "server.cli.warmup",
                  "--serve-only", "configs/powershift.toml", timeout=READY_TIMEOUT_S)
    cached_s = time.perf_counter() - t0
    report = WARMUP_REPORT.search(base.stdout)
    assert report and report[2] == "everything was cached already", base.stdout
    port = free_ports(1)
    box = Container(image, keys, "warm", ["-p", f"127.0.0.1:{port}:5555"], [])
    try:
        ready_s = wait_ready(box, f"tcp://127.0.0.1:{port}", keys)
        log = container_log(box.name)
    finally:
        box.remove()
    print(f"container start to ready {ready_s:.2f} s; a cached warm-up in the image {cached_s:.2f} s "
          f"(its own report: {report[1]} s)")
    assert "gearbox-hil serve: powershift plant" in log, log
    # CompileProgress writes this line (and a "gearbox-hil: compiled N ..." line) whenever numba compiles anything;
    # the loop's "tick: compiled (...)" line names the tick's path, not a compile
    assert "compiling (cached for later starts)" not in log and not re.search(r"gearbox-hil: compiled \d", log), log
    assert ready_s < READY_FACTOR * cached_s, (ready_s, cached_s, log)


def test_health_check_follows_the_server_and_sigterm_stops_it_cleanly(image, keys):
    port = free_ports(1)
    box = Container(image, keys, "health", ["-p", f"127.0.0.1:{port}:5555"], [])
    try:
        wait_ready(box, f"tcp://127.0.0.1:{port}", keys)
        assert health(box), container_log(box.name)
        pid = box.host_pid()  # the server is the container's first process: stopped from the host
        os.kill(pid, signal.SIGSTOP)
        try:
            assert not health(box), "the health check passed with the server stopped"
        finally:
            os.kill(pid, signal.SIGCONT)
        assert health(box), container_log(box.name)
        t0 = time.perf_counter()
        engine("stop", "-t", "30", box.name, timeout=60)
        stop_s = time.perf_counter() - t0
        code = box.wait_exit(10.0)
        log = container_log(box.name)
        assert not health(box), "the health check passed with the container stopped"
    finally:
        box.remove()
    print(f"stop (SIGTERM) to exit: {stop_s:.2f} s")
    assert code == 0, log  # 137 would be the engine's SIGKILL after the grace period
    assert "timing summary (realtime mode)" in log and "stopped: SIGTERM" in log, log


def test_host_controller_shifts_over_zmq_while_mf4_lands_on_a_volume(image, keys, tmp_path):
    from io_adapters.zmq.client import HilClient
    from server.recording import read_recording, recording_files

    port = free_ports(3)
    rec_dir = tmp_path / "recordings"
    rec_dir.mkdir()
    box = Container(image, keys, "shift", ["-p", f"127.0.0.1:{port}-{port + 2}:{port}-{port + 2}",
                                           "-v", f"{rec_dir}:/opt/gearbox-hil/recordings"],
                    ["serve", "powershift", "--io", "configs/io_docker.toml", "--zmq-port", str(port)])
    control = f"tcp://127.0.0.1:{port}"
    try:
        wait_ready(box, control, keys)
        with HilClient(control, timeout_s=10.0, client_key=str(keys / "health.key_secret"),
                       server_key=str(keys / "server.key")) as hil:
            hil.request("record_start", signals=["w_*", "gear", "p_c1", "p_c2"], name="shift")
        csv = tmp_path / "trace.csv"
        demo = subprocess.run([sys.executable, "examples/closed_loop_swap.py", "--control", control, "--shutdown",
                               "--csv", str(csv), "--client-key", str(keys / "controller.key_secret"),
                               "--server-key", str(keys / "server.key")], capture_output=True, text=True,
                              cwd=ROOT, timeout=120)
        code = box.wait_exit(60.0)
        log = container_log(box.name)
    finally:
        box.remove()
    assert demo.returncode == 0 and "shift gear 1 -> gear 3: done" in demo.stdout, demo.stdout + demo.stderr + log
    assert code == 0 and "stopped: shutdown requested by a client" in log, log
    files = recording_files(rec_dir, "shift")
    assert files, f"no MF4 file in the mounted folder {rec_dir}: {sorted(rec_dir.iterdir())}\n{log}"
    rec = read_recording(rec_dir, "shift")
    t, tick = rec["t"], rec["tick"]
    after_reset = int(np.flatnonzero(np.diff(t) < 0)[-1]) + 1 if np.any(np.diff(t) < 0) else 0
    assert np.all(np.diff(tick[after_reset:]) == 1), "ticks missing in the recording"
    gear = rec["gear"][after_reset:]
    assert gear[0] == 1 and gear[-1] == 3, np.unique(gear)
    # the stream the controller received and the file written beside it: the same numbers at the same times
    import csv as csv_module

    with open(csv) as fh:
        rows = list(csv_module.DictReader(fh))
    recorded = dict(zip(np.round(t[after_reset:], 6), rec["w_1"][after_reset:]))
    common = [(float(r["w_1"]), recorded[round(float(r["t"]), 6)]) for r in rows
              if round(float(r["t"]), 6) in recorded]
    assert len(common) > 0.5 * len(rows), (len(common), len(rows))
    assert all(a == b for a, b in common)


SHIPPED_CAMPAIGN = ROOT / "campaigns" / "powershift_swap_1_2.toml"


def assert_same_bits(a, b):
    """Two campaign tables hold the same runs, values and metrics, bit for bit (as tests/test_campaign_dask.py)."""
    assert a.schema.equals(b.schema, check_metadata=True)
    for name in a.column_names:
        x, y = a.column(name).to_numpy(zero_copy_only=False), b.column(name).to_numpy(zero_copy_only=False)
        if x.dtype.kind == "f":
            assert np.array_equal(x.view(np.int64), y.view(np.int64)), name  # NaN payloads and signs too
        else:
            assert list(x) == list(y), name


def start_cluster(image: str) -> tuple[str, list[Container]]:
    """A Dask scheduler and two workers, three containers on the host's network bound to its loopback only."""
    from distributed import Client

    port = free_ports(1)
    scheduler = f"tcp://127.0.0.1:{port}"
    on_host_loopback = ["--network", "host", "--entrypoint", "dask"]
    boxes = [Container(image, None, "scheduler", on_host_loopback,
                       ["scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"])]
    for k in (1, 2):
        boxes.append(Container(image, None, f"worker{k}", on_host_loopback,
                               ["worker", scheduler, "--host", "127.0.0.1", "--nthreads", "1", "--no-dashboard"]))
    with Client(scheduler, timeout=READY_TIMEOUT_S) as client:
        client.wait_for_workers(2, timeout=READY_TIMEOUT_S)
        versions = client.get_versions(check=False)
    # the same libraries as this client's (the compiled code is the same code); Python may differ in its patch
    # level only (Debian's 3.11 in the image), which Dask's version check reports as a warning
    here = versions["client"]["packages"]
    for where in [versions["scheduler"], *versions["workers"].values()]:
        for lib in ("dask", "distributed", "numba", "numpy", "pyarrow", "msgpack"):
            assert where["packages"].get(lib) == here.get(lib), (lib, where["packages"].get(lib), here.get(lib))
        assert where["packages"]["python"].split(".")[:2] == here["python"].split(".")[:2]
    return scheduler, boxes


@pytest.mark.filterwarnings("ignore::distributed.versions.VersionMismatchWarning")  # Python's patch level only
def test_the_shipped_campaign_on_a_cluster_of_containers_equals_the_embedded_run(image, tmp_path):
    import json
    import threading

    import pyarrow.parquet as pq

    from server.campaign.engine import PARTS, TABLE
    from server.cli import main

    boxes = []
    try:
        scheduler, boxes = start_cluster(image)
        t0 = time.perf_counter()
        assert main(["campaign", str(SHIPPED_CAMPAIGN), "--out", str(tmp_path / "containers"), "--scheduler",
                     scheduler, "--quiet"]) == 0, "\n".join(container_log(b.name)[-3000:] for b in boxes)
        remote_s = time.perf_counter() - t0
        # again, and one worker container killed once the first runs are in: Dask gives its tasks to the other
        killed_out = tmp_path / "one_killed"
        codes = []
        run = threading.Thread(target=lambda: codes.append(main(
            ["campaign", str(SHIPPED_CAMPAIGN), "--out", str(killed_out), "--scheduler", scheduler, "--batch",
             "10", "--quiet"])))
        run.start()
        t_end = time.monotonic() + 300.0
        while not list((killed_out / PARTS).glob("*.parquet")) and run.is_alive() and time.monotonic() < t_end:
            time.sleep(0.02)
        assert run.is_alive(), "the campaign ended before a worker could be killed in it"
        engine("kill", "--signal", "KILL", boxes[2].name)
        run.join(600.0)
        assert codes == [0]
        assert not boxes[2].running() and boxes[1].running()
    finally:
        for b in boxes:
            b.remove()
    t0 = time.perf_counter()
    assert main(["campaign", str(SHIPPED_CAMPAIGN), "--out", str(tmp_path / "embedded"), "--workers", "2",
                 "--quiet"]) == 0
    embedded_s = time.perf_counter() - t0
    doc = json.loads((tmp_path / "containers" / "campaign.json").read_text())["last_execution"]
    assert doc["workers"] == 2 and doc["scheduler"] == scheduler
    embedded = pq.read_table(tmp_path / "embedded" / TABLE)
    for folder in ("containers", "one_killed"):
        remote = pq.read_table(tmp_path / folder / TABLE)
        assert remote.num_rows == 1200 and set(remote.column("status").to_pylist()) == {"ok"}, folder
        assert_same_bits(remote, embedded)
    print(f"shipped campaign, 1200 runs: {remote_s:.1f} s on the containers' cluster, {embedded_s:.1f} s embedded")
