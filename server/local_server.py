"""``gearbox-hil serve`` in a subprocess on free loopback ports: the one I/O template and start/stop of it.

The test bench (:mod:`server.testbench.runner`), the tests
(``tests/server_support.py``) and the benchmarks (``bench/_support.py``)
start servers this way: ZeroMQ on ``tcp://127.0.0.1:*`` (the kernel picks
free ports, so runs never collide), the bound endpoints read from the
server's ready file, and a shutdown request to stop it (a kill if it does
not answer).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from plant_models.config import repo_root

FREE_ENDPOINTS = {
    "state_endpoint": "tcp://127.0.0.1:*",
    "command_endpoint": "tcp://127.0.0.1:*",
    "control_endpoint": "tcp://127.0.0.1:*",
}
"""ZeroMQ adapter options on free loopback ports (for an adapter made in-process)."""

FREE_PORTS = '\n[[adapters]]\ntype = "zmq"\nname = "zmq"\n' + "".join(
    f'{k} = "{v}"\n' for k, v in FREE_ENDPOINTS.items())
"""The same as an ``[[adapters]]`` table of an I/O config (more options of that adapter may follow it)."""


def write_io(path: Path, loop: str = "", extra: str = "", adapters: str = FREE_PORTS) -> Path:
    """An I/O config with the given ``[loop]`` body and extra tables, ZeroMQ on free loopback ports."""
    path.write_text("[loop]\nstatus_line = false\n" + loop + "\n" + extra + "\n" + adapters)
    return path


class LocalServer:
    """``gearbox-hil serve PLANT --io IO`` in a subprocess, ready when constructed; a context manager.

    Parameters
    ----------
    workdir
        Folder of the ready file, the log and the summary (``NAME_<mode>.*``).
    plant, io, mode, args
        What to serve, the I/O config file, the loop mode, more arguments
        of ``gearbox-hil serve``.
    ready_timeout_s
        Longest wait for the ready file (the first start compiles).

    Attributes
    ----------
    proc, info, endpoints, control
        The process, the ready file's content, its endpoints, the
        (first) ZeroMQ control endpoint.
    """

    def __init__(self, workdir: Path, plant: str | Path, io: str | Path, mode: str = "realtime",
                 args: tuple[str, ...] = (), ready_timeout_s: float = 300.0):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.ready = self.workdir / f"ready_{mode}.json"
        self.summary = self.workdir / f"summary_{mode}.json"
        self.log = self.workdir / f"server_{mode}.log"
        for p in (self.ready, self.summary):
            if p.exists():
                p.unlink()
        cmd = [sys.executable, "-m", "server.cli", "serve", str(plant), "--io", str(io), "--mode", mode,
               "--ready-file", str(self.ready), "--summary-json", str(self.summary), "--quiet", *args]
        env = {**os.environ, "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": os.pathsep.join([str(repo_root()), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
        self._logfh = open(self.log, "w")
        self.proc = subprocess.Popen(cmd, cwd=repo_root(), stdout=self._logfh, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + ready_timeout_s
        while not self.ready.exists():
            if self.proc.poll() is not None:
                self._logfh.close()
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.output()}")
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"server not ready in {ready_timeout_s} s:\n{self.output()}")
            time.sleep(0.05)
        time.sleep(0.05)  # the ready file is written whole, but give the writer a moment to close it
        self.info = json.loads(self.ready.read_text())
        self.endpoints: dict[str, str] = dict(self.info["endpoints"])
        controls = [v for k, v in self.endpoints.items() if k.endswith(".control")]
        self.control = controls[0] if controls else None

    def client(self, timeout_s: float = 30.0):
        """A connected :class:`~io_adapters.zmq.client.HilClient`."""
        from io_adapters.zmq.client import HilClient

        return HilClient(self.control, timeout_s=timeout_s).connect()

    def output(self) -> str:
        """What the server printed so far."""
        if not self._logfh.closed:
            self._logfh.flush()
        return self.log.read_text() if self.log.exists() else ""

    def shutdown(self, timeout_s: float = 60.0) -> dict:
        """Ask the server to shut down (kill it if it does not answer); returns its final status (summary file)."""
        if self.proc.poll() is None:
            try:
                with self.client(timeout_s=min(timeout_s, 10.0)) as c:
                    c.shutdown()
                self.proc.wait(timeout=timeout_s)
            except Exception:
                self.kill()
        if not self._logfh.closed:
            self._logfh.close()
        return json.loads(self.summary.read_text()) if self.summary.exists() else {}

    def kill(self) -> None:
        """Kill the server at once (idempotent)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        if not self._logfh.closed:
            self._logfh.close()

    def __enter__(self) -> "LocalServer":
        return self

    def __exit__(self, *exc) -> None:
        self.kill()


__all__ = ["FREE_ENDPOINTS", "FREE_PORTS", "write_io", "LocalServer"]
