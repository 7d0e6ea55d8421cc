"""The recording process: rows of the shared state ring -> MF4 files (asammdf), a chunk per file.

Started by :class:`server.recording.Recorder` as ``python -m
server.recording.writer JOB_JSON``; it attaches to the server's state ring in
shared memory and reads it through its own cursor (decimation ``every``), so
the real-time loop neither waits for it nor shares its interpreter lock.
With ``bus`` in the job (the server's CAN adapters, ``bus_frames`` of
``[recording]``), each file also holds the frames of its ticks as ASAM MDF
bus logging with the DBC attached (by the module each adapter names, e.g.
:mod:`io_adapters.can.bus_mdf`); at the stop it waits for every adapter's
end record before the last file.

Every ``chunk_rows`` rows it writes one complete MF4 file
(``NAME_0001.mf4``, ...: written under a hidden name and renamed), so a ``kill -9``
of this process or of the server loses at most the rows of the chunk being
filled.  Each file holds the chosen signals with the simulation time as the
master channel, plus ``tick`` (plant steps since the last reset); a reset of
the plant (time going back) closes the current file and starts the next.

It stops when the server writes ``.NAME.stop`` (``record_stop``, or the
server's end) with the number of the last row to record, on SIGTERM (a
user's ``kill``) and when the server process is gone: it then reads what is
left in the ring up to that row, writes the last chunk and a final status.  SIGINT is ignored (a Ctrl-C in the server's
terminal reaches the server, which then stops this process after its last
tick).  Rows overwritten in the ring before they were read are counted as
``lost`` in the status file ``NAME.json`` (updated after every file) and
logged, never silent.

A file that cannot be written (a full disk) is removed, its rows and every
row after it are counted as ``lost`` until the recording is stopped, the
status reads ``"failed"`` with the ``error``, one error line says why, and
the writer exits with :data:`EXIT_WRITE_FAILED`.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np

POLL_S = 0.02  # the ring holds seconds of rows; reading it 50 times a second keeps far ahead of it
EXIT_WRITE_FAILED = 3  # a file could not be written (a full disk): the recording stopped, its state "failed"


def _write_json(path: Path, obj: dict) -> bool:
    """Write the status file whole (a temporary, then a rename); False, leaving nothing, when the disk refuses."""
    tmp = path.with_suffix(".json.part")
    try:
        tmp.write_text(json.dumps(obj, indent=1))
        os.replace(tmp, path)
        return True
    except OSError:
        tmp.unlink(missing_ok=True)
        return False


class ChunkWriter:
    """Buffers selected columns and writes a chunk as one MF4 file.

    Parameters
    ----------
    folder, name
        Files are ``folder/name_0001.mf4``, ...
    names, units
        The recorded signals (columns of ``cols`` in a ring row's floats).
    cols
        Float column of each signal in a ring row.
    chunk_rows
        Rows per file.
    """

    def __init__(self, folder: Path, name: str, names: list[str], units: list[str], cols: list[int],
                 chunk_rows: int, comment: str = "", bus=None):
        self.folder, self.name = folder, name
        self.names, self.units = names, units
        self.cols = np.asarray(cols, dtype=np.int64)
        self.chunk = int(chunk_rows)
        self.t = np.empty(self.chunk)
        self.tick = np.empty(self.chunk, dtype=np.int64)
        self.vals = np.empty((self.chunk, len(cols)))
        self.fill = 0
        self.files: list[str] = []
        self.rows_written = 0
        self.comment = comment
        self.lost_rows = 0  # rows not in any file because a write failed: its chunk's and every one after
        self.failed: str | None = None  # why the last write failed (then the writer only counts rows)
        self.bus = list(bus or [])  # the adapters' bus-frame sources (``poll``, ``pending``, ``chunk``); [] signals only
        self._last_row = (np.zeros(1, dtype=np.int64), np.zeros(1))  # (tick, time) of the last row written

    def add(self, ints: np.ndarray, floats: np.ndarray, n: int, tick_col: int, time_col: int) -> None:
        """Append ``n`` ring rows; a full chunk, or time going back (a reset), writes a file.

        After a failed write every row is counted in :attr:`lost_rows`.
        """
        j = 0
        while j < n:
            if self.failed is not None:
                self.lost_rows += n - j
                return
            if self.fill and floats[j, time_col] < self.t[self.fill - 1]:
                self.flush()
            k = min(n - j, self.chunk - self.fill)
            # stop at a reset inside this block, so one file never holds time going back
            tt = floats[j:j + k, time_col]
            back = np.flatnonzero(np.diff(tt) < 0)
            if back.size:
                k = int(back[0]) + 1
            f = self.fill
            self.t[f:f + k] = floats[j:j + k, time_col]
            self.tick[f:f + k] = ints[j:j + k, tick_col]
            self.vals[f:f + k] = floats[j:j + k][:, self.cols]
            self.fill += k
            j += k
            if self.fill == self.chunk:
                self.flush()

    def flush(self, final: bool = False) -> None:
        """Write the buffered rows, and the bus frames of their ticks, as the next file (nothing if empty).

        ``final``: every bus frame still waiting goes in (a file of bus frames only if no row is left).
        """
        bus = self.bus if self.failed is None else []
        for b in bus:
            b.poll()
        if not self.fill and not (final and any(b.pending for b in bus)):
            return
        from asammdf import MDF, Signal

        n = self.fill
        t = self.t[:n].copy()
        mdf = MDF(version="4.10")
        if n:
            sigs = [Signal(self.tick[:n].copy(), t, name="tick", unit="", comment="plant steps since the last reset")]
            sigs += [Signal(self.vals[:n, i].copy(), t, name=nm, unit=u) for i, (nm, u) in
                     enumerate(zip(self.names, self.units))]
            mdf.append(sigs, comment=self.comment or "gearbox-hil recording")
            self._last_row = (self.tick[n - 1:n].copy(), t[n - 1:])
        rows = (self.tick[:n].copy(), t) if n else self._last_row
        for b in bus:
            for sig, comment in b.chunk(final, *rows):
                mdf.append(sig, comment=comment)
        path = self.folder / f"{self.name}_{len(self.files) + 1:04d}.mf4"
        part = path.with_name("." + path.name)  # hidden until whole (asammdf keeps the .mf4 suffix)
        try:
            mdf.save(part, overwrite=True)
            os.replace(part, path)
        except OSError as exc:  # a full disk (ENOSPC), a quota, a folder gone: no partial file stays behind
            part.unlink(missing_ok=True)
            self.failed = f"writing {path.name} failed: {exc.strerror or exc}" + (
                f" (errno {exc.errno})" if exc.errno else "")
            self.lost_rows += n
            self.fill = 0
            return
        finally:
            mdf.close()
        self.files.append(path.name)
        self.rows_written += n
        self.fill = 0


def _bus_sources(job: dict) -> list:
    """The bus-frame sources of the job: one per module the adapters name (they know their transport)."""
    import importlib

    modules = sorted({b["module"] for b in job.get("bus", [])})
    return [importlib.import_module(m).BusFrames([b for b in job["bus"] if b["module"] == m], float(job["period_s"]))
            for m in modules]


def _status(state: str, job: dict, w: ChunkWriter, cur, started: float) -> dict:
    """The status file's content."""
    d = {"state": state, "name": job["name"], "signals": job["signals"], "every": int(job["every"]),
         "files": list(w.files), "rows": w.rows_written + w.fill, "rows_in_files": w.rows_written,
         "lost": cur.lost + w.lost_rows, "chunk_rows": w.chunk, "started_unix_s": started, "pid": os.getpid()}
    if w.failed is not None:
        d["error"] = w.failed
    if w.bus:
        d["bus_frames"] = {k: v for b in w.bus for k, v in b.status().items()}
    return d


def main(argv: list[str] | None = None) -> int:
    from plant_models.run.ring import C_NEXT, F_TIME, I_SEQ, I_TICK, Cursor, StateRing

    job = json.loads((argv or sys.argv[1:])[0])
    folder = Path(job["folder"])
    status_path = folder / f"{job['name']}.json"
    stop = {"now": False}
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__("now", True))
    parent = int(job["parent_pid"])
    ring = StateRing.attach(job["shm"])
    cur = Cursor(ring, every=int(job["every"]), batch=4096, from_now=False)
    cur.state[C_NEXT] = max(int(job["start_seq"]), 1)
    bus = _bus_sources(job)
    w = ChunkWriter(folder, job["name"], job["signals"], job["units"], job["cols"], int(job["chunk_rows"]),
                    job.get("comment", ""), bus=bus)
    started = time.time()
    reported_lost = 0

    def status(state: str) -> dict:
        return _status(state, job, w, cur, started)

    _write_json(status_path, status("recording"))

    def failed() -> None:
        """Say once why the recording stopped; from here its rows are counted as lost until it is stopped."""
        _write_json(status_path, status("failed"))
        print(f"gearbox-hil recording: error: {w.failed}; the recording stopped with {w.rows_written} rows in "
              f"{len(w.files)} files in {folder}; the rows from here to its stop are counted as lost (free space "
              "and start a new recording)", file=sys.stderr, flush=True)

    stop_file = folder / f".{job['name']}.stop"
    last_seq = None  # the last row to record, once a stop names it

    def take() -> int:
        nonlocal reported_lost
        n = cur.take()
        if n and last_seq is not None:
            n = int(np.searchsorted(cur.ints[:n, I_SEQ], last_seq, side="right"))  # rows are in seq order
        if n:
            nfiles, ok = len(w.files), w.failed is None
            w.add(cur.ints, cur.floats, n, I_TICK, F_TIME)
            if ok and w.failed is not None:
                failed()
            elif len(w.files) != nfiles:
                _write_json(status_path, status("recording"))
        if cur.lost != reported_lost:
            print(f"gearbox-hil recording: warning: {cur.lost - reported_lost} rows were overwritten in the state "
                  f"ring before the recording read them ({cur.lost} lost so far)", file=sys.stderr, flush=True)
            reported_lost = cur.lost
        return n

    while not (stop["now"] or os.getppid() != parent or stop_file.exists()):
        if not take():
            time.sleep(POLL_S)
    try:  # the server's stop names the last row written before it; a kill of either process names none (all rows)
        last_seq = int(stop_file.read_text())
        stop_file.unlink()
    except (OSError, ValueError):
        pass
    while take():  # what the server wrote up to now (all of it once it has stopped ticking)
        pass
    for b in bus:  # the server closed its spools before the stop; a killed server's hold what they hold
        b.wait_end(alive=lambda: os.getppid() == parent)
    ok = w.failed is None
    w.flush(final=True)
    if ok and w.failed is not None:
        failed()
    final = status("closed" if w.failed is None else "failed")
    _write_json(status_path, final)
    for b in bus if w.failed is None else []:  # a failed recording keeps its spools (the frames not in a file)
        b.remove_spools()
    if os.getppid() != parent:  # the server is gone (killed): the shared block would otherwise stay behind
        try:
            ring.close(unlink=True)
        except Exception:
            pass
    print(f"gearbox-hil recording: {final['rows']} rows in {len(final['files'])} files in {folder}, "
          f"{final['lost']} lost" + (" (a write failed, see above)" if w.failed else ""), file=sys.stderr, flush=True)
    return 0 if w.failed is None else EXIT_WRITE_FAILED


if __name__ == "__main__":
    sys.exit(main())
