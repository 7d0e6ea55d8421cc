"""Signal recording to MF4: the ``[recording]`` table of an I/O config and the recorder the server runs.

::

    [recording]
    folder = "recordings"        # every file goes here (relative to the I/O config's folder)
    signals = ["w_*", "gear"]    # outputs and inputs, by name or glob; default every output
    every = 1                    # decimation: every N-th tick
    chunk_s = 10.0               # simulated seconds per file (a kill -9 loses at most the last one)
    name = "rec"                 # file names: rec_0001.mf4, ... and rec.json (status)
    autostart = false            # record from the first tick
    bus_frames = true            # the CAN adapters' frames in the same files (ASAM MDF bus logging, DBC attached)

With a ``[recording]`` table the server keeps its state ring in shared
memory and runs the writer (:mod:`server.recording.writer`) as a separate
process that reads it, so recording never adds work, waits or interpreter
lock hand-overs to the tick.  The control requests ``record_start``
(optional ``signals``, ``every``, ``name``) and ``record_stop`` start and
stop it; ``status`` shows it under ``recording``.  Every CAN adapter spools
its frames while a recording runs (:mod:`io_adapters.can.bus_spool`) and the
writer puts them beside the signals through the module the adapter names
(:mod:`io_adapters.can.bus_mdf`); nothing here knows the transport.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import re
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from plant_models.config import ConfigError, ConfigReader, repo_root

log = logging.getLogger("gearbox_hil.recording")

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MAX_SIGNALS = 4096
STOP_TIMEOUT_S = 60.0


class RecordingError(ValueError):
    """A recording request or setting that cannot be honoured (a bad name, a glob that matches nothing, ...)."""


@dataclass(frozen=True)
class RecordingConfig:
    folder: Path
    signals: tuple[str, ...] = ()
    every: int = 1
    chunk_s: float = 10.0
    name: str = "rec"
    autostart: bool = False
    bus_frames: bool = True


def read_recording_config(cfg: ConfigReader, base: Path) -> RecordingConfig | None:
    """The ``[recording]`` table (None without one); ``base`` is the folder ``folder`` is relative to."""
    if not cfg.has("recording"):
        return None
    r = cfg.sub("recording")
    folder = base / r.string("folder", "recordings")
    signals = r.raw("signals", [])
    if not isinstance(signals, list) or not all(isinstance(s, str) and s for s in signals) \
            or len(signals) > MAX_SIGNALS:
        raise r.error("signals", f"must be a list of signal names or globs (at most {MAX_SIGNALS})")
    every = r.integer("every", 1, lo=1, hi=1_000_000)
    chunk_s = r.number("chunk_s", 10.0, positive=True, hi=3600.0)
    name = r.string("name", "rec")
    if not NAME_RE.match(name):
        raise r.error("name", "must be 1-64 letters, digits, '_', '-' or '.', starting with a letter or digit")
    autostart = r.boolean("autostart", False)
    bus_frames = r.boolean("bus_frames", True)
    r.reject_unknown()
    import importlib.util

    if importlib.util.find_spec("asammdf") is None:
        raise ConfigError(cfg.source, "[recording]", "recording to MF4 needs asammdf, which is not installed "
                          "(pip install 'gearbox-hil[record]')")
    return RecordingConfig(folder, tuple(signals), every, chunk_s, name, autostart, bus_frames)


def select_signals(patterns, outputs: list[str], inputs: list[str]) -> list[tuple[str, str]]:
    """(kind, name) of every output/input matched by a name or glob, in declared order; each pattern must match."""
    if not patterns:
        return [("y", n) for n in outputs]
    chosen: list[tuple[str, str]] = []
    for p in patterns:
        hits = [("y", n) for n in outputs if fnmatch.fnmatchcase(n, p)]
        hits += [("u", n) for n in inputs if fnmatch.fnmatchcase(n, p) and n not in outputs]
        if not hits:
            raise RecordingError(f"signal {p!r} matches no output or input")
        chosen += [h for h in hits if h not in chosen]
    return chosen


class Recorder:
    """Starts and stops the writer process for one server (made by :func:`server.realtime.runtime.assemble`).

    Parameters
    ----------
    cfg
        The ``[recording]`` settings (defaults of a request).
    ring
        The server's state ring; it must be in shared memory.
    plant
        The plant (signal names and units).
    period_s
        The loop's period, s (for ``chunk_s`` -> rows).
    adapters
        The server's adapters: those with ``start_bus_log`` (CAN) spool their frames while recording.
    """

    def __init__(self, cfg: RecordingConfig, ring, plant, period_s: float, adapters=()):
        if ring.shm_name is None:
            raise ValueError("recording needs the state ring in shared memory")
        self.cfg = cfg
        self.ring = ring
        self.plant = plant
        self.period_s = float(period_s)
        self.proc: subprocess.Popen | None = None
        self.job: dict | None = None
        self.last: dict | None = None
        self.started = 0
        self._stopping: subprocess.Popen | None = None
        self.exit_code: int | None = None  # the last writer's
        self.adapters = [a for a in adapters if callable(getattr(a, "start_bus_log", None))]
        self.bus_spools: dict = {}  # adapter -> its spool's counts at the last stop

    def start(self, signals=None, every: int | None = None, name: str | None = None) -> dict:
        """Start a recording from the next tick (the settings default to the config's); returns its job."""
        if self.active or self.stopping:
            raise RecordingError(f"a recording is running ({self.job['name']}); send record_stop first")
        cfg = replace(self.cfg, **{k: v for k, v in (("signals", signals), ("every", every), ("name", name))
                                   if v is not None})
        if not isinstance(cfg.every, int) or isinstance(cfg.every, bool) or not 1 <= cfg.every <= 1_000_000:
            raise RecordingError(f"every must be an integer in 1..1000000, got {cfg.every!r}")
        if not isinstance(cfg.name, str) or not NAME_RE.match(cfg.name):
            raise RecordingError(f"name {cfg.name!r}: 1-64 letters, digits, '_', '-' or '.', starting with a "
                                 "letter or digit (files stay in the configured folder)")
        if not isinstance(cfg.signals, (list, tuple)) or not all(isinstance(s, str) for s in cfg.signals):
            raise RecordingError("signals must be a list of names or globs")
        outs = [s.name for s in self.plant.outputs]
        ins = [s.name for s in self.plant.inputs]
        chosen = select_signals(list(cfg.signals), outs, ins)
        cols, units = [], []
        for kind, n in chosen:
            if kind == "y":
                cols.append(self.ring.f_y + outs.index(n))
                units.append(self.plant.outputs[outs.index(n)].unit)
            else:
                cols.append(self.ring.f_u + ins.index(n))
                units.append(self.plant.inputs[ins.index(n)].unit)
        cfg.folder.mkdir(parents=True, exist_ok=True)
        for old in [*cfg.folder.glob(f"{cfg.name}_[0-9][0-9][0-9][0-9].mf4"), cfg.folder / f".{cfg.name}.stop"]:
            if old.exists():
                old.unlink()  # a new recording of the same name replaces the old one's files
        chunk_rows = max(1, int(round(cfg.chunk_s / (self.period_s * cfg.every))))
        bus = []
        if cfg.bus_frames:  # before the writer starts: every frame from the next tick on is in a spool
            for old in cfg.folder.glob(f".{cfg.name}.*.frames"):
                old.unlink()
            for a in self.adapters:
                info = a.start_bus_log(cfg.folder.resolve() / f".{cfg.name}.{a.name}.frames")
                if info is not None:
                    bus.append(info)
        self.job = {"shm": self.ring.shm_name, "folder": str(cfg.folder.resolve()), "name": cfg.name,
                    "signals": [n for _, n in chosen], "units": units, "cols": cols, "every": cfg.every,
                    "chunk_rows": chunk_rows, "start_seq": self.ring.written + 1, "parent_pid": os.getpid(),
                    "comment": f"gearbox-hil {self.plant.kind} plant, period {self.period_s:g} s",
                    "bus": bus, "period_s": self.period_s}
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(repo_root()), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
        # its own session: a Ctrl-C in the terminal reaches the server, which stops the writer after its last tick
        self.proc = subprocess.Popen([sys.executable, "-m", "server.recording.writer", json.dumps(self.job)],
                                     env=env, start_new_session=True, stdin=subprocess.DEVNULL)
        self.started += 1
        log.info("recording %d signals every %d tick(s) to %s/%s_*.mf4", len(chosen), cfg.every, cfg.folder, cfg.name)
        return {"name": cfg.name, "folder": str(cfg.folder), "signals": self.job["signals"], "every": cfg.every,
                "chunk_rows": chunk_rows, "start_seq": self.job["start_seq"], "bus": [b["adapter"] for b in bus]}

    @property
    def active(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:  # the writer ended by itself: it failed
            self.exit_code = self.proc.returncode
            log.error("the recording writer ended on its own (exit code %s)", self.exit_code)
            self.proc = None
            self.last = self._read_status()
        return self.proc is not None

    @property
    def stopping(self) -> bool:
        """A stopped writer that is still writing its last file."""
        p = self._stopping
        if p is not None and p.poll() is not None:
            self.exit_code = p.returncode
            self.exit_code = p.returncode
            self._stopping = None
            self.last = self._read_status()
            return False
        return p is not None

    def stop(self, wait: bool = True, timeout_s: float = STOP_TIMEOUT_S) -> dict:
        """Stop the writer: it reads the rest of the ring, writes the last file and exits.

        ``wait`` (the server's own shutdown): until it has exited; returns
        its final status.  Without (a ``record_stop`` request while the loop
        runs): returns at once, and ``status()`` shows it closing, then closed.
        """
        if not self.active:
            raise RecordingError("no recording is running")
        self.exit_code = None
        self._stop_bus_logs()
        # the rows written up to now, not those of the next ticks; a file, not a signal, so that a writer
        # still starting up sees it too
        Path(self.job["folder"], f".{self.job['name']}.stop").write_text(str(self.ring.written))
        if not wait:
            self._stopping = self.proc
            self.proc = None
            return {"stopping": True, "name": self.job["name"]}
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            log.error("the recording writer did not stop within %g s; killed (its last chunk is lost)", timeout_s)
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.exit_code = self.proc.returncode
        self.proc = None
        self.last = self._read_status()
        if self.exit_code:
            why = (self.last or {}).get("error") or "its last chunk may be lost"
            log.error("the recording writer failed (exit code %s): %s", self.exit_code, why)
        if self.last and self.last.get("lost"):
            log.warning("recording %s: %d rows lost (the writer fell a ring's length behind)", self.last["name"],
                        self.last["lost"])
        return self.last or {}

    def _stop_bus_logs(self) -> None:
        """Close the adapters' spools (their last frames and end records) before the writer is told to stop."""
        for a in self.adapters:
            st = a.stop_bus_log()
            if st is not None:
                self.bus_spools[a.name] = st
                if st.get("dropped") or st.get("errors"):
                    log.warning("recording: CAN %s lost %d bus frames (%d ring overflows, %d write errors)", a.name,
                                st["dropped"] + st["errors"], st["dropped"], st["errors"])

    def _read_status(self) -> dict | None:
        if self.job is None:
            return None
        p = Path(self.job["folder"]) / f"{self.job['name']}.json"
        try:
            return json.loads(p.read_text())
        except (OSError, ValueError):
            return None

    def status(self) -> dict:
        """For the status object: active, the job, and the writer's last report (files, rows, lost)."""
        stopping = self.stopping
        st = self._read_status() if (self.active or stopping) else self.last
        return {"active": self.active, "stopping": stopping, "started": self.started, "folder": str(self.cfg.folder),
                "name": self.job["name"] if self.job else None, "signals": len(self.job["signals"]) if self.job else 0,
                "every": self.job["every"] if self.job else None,
                "files": len(st["files"]) if st else 0, "rows": st["rows"] if st else 0,
                "lost": st["lost"] if st else 0, "writer_state": _writer_state(st, self.exit_code),
                "bus_frames": (st or {}).get("bus_frames", {}), "bus_spools": dict(self.bus_spools),
                "writer_exit_code": self.exit_code, **({"error": st["error"]} if st and st.get("error") else {})}

    def close(self) -> None:
        """Stop a running writer and wait for one that is stopping (at the server's end)."""
        if self.active:
            self.stop(wait=True)
        p = self._stopping
        if p is not None:
            try:
                p.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                p.kill()
            self.exit_code = p.returncode
            self._stopping = None
            self.last = self._read_status()


def _writer_state(st: dict | None, exit_code: int | None) -> str | None:
    """The writer's state; never "recording" once it exited with an error (its last status may not say so:
    a full disk may refuse that file too)."""
    state = st["state"] if st else None
    if exit_code and state in ("recording", None):
        return "failed"
    return state


def recording_files(folder: str | Path, name: str = "rec") -> list[Path]:
    """The complete files of a recording, in order."""
    return sorted(Path(folder).glob(f"{name}_[0-9][0-9][0-9][0-9].mf4"))


def read_recording(folder: str | Path, name: str = "rec") -> dict:
    """A recording's files read back with asammdf and joined: ``{"t": array, signal: array, ...}``."""
    import numpy as np
    from asammdf import MDF

    parts: dict[str, list] = {}
    for f in recording_files(folder, name):
        with MDF(f) as mdf:
            names = [ch.name for grp in mdf.groups for ch in grp.channels]
            for nm in names:
                if nm == "time" or nm.startswith("$") or nm.startswith("CAN_"):  # bus logging: extract_bus_logging
                    continue
                sig = mdf.get(nm)
                parts.setdefault(nm, []).append(sig.samples)
                if nm == "tick":
                    parts.setdefault("t", []).append(sig.timestamps)
    return {k: np.concatenate(v) for k, v in parts.items()}


__all__ = ["RecordingConfig", "recording_files", "read_recording", "Recorder", "RecordingError",
           "read_recording_config", "select_signals",
           "ConfigError"]
