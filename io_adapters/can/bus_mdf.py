"""Bus frames in the recording's MF4 files: ASAM MDF bus logging (``CAN_DataFrame``) beside the signals.

The recording writer (:mod:`server.recording.writer`, which knows no
transport: the adapter's ``start_bus_log`` names this module) reads the
spool file each CAN adapter writes while the server records
(:mod:`io_adapters.can.bus_spool`) and puts the frames of a file's ticks into
that file, one channel group per bus, as ASAM MDF 4 bus logging: the
composed channel ``CAN_DataFrame`` (``BusChannel``, ``ID``, ``IDE``, ``DLC``,
``DataLength``, ``DataBytes``, ``Dir`` 0 = Rx / 1 = Tx, ``EDL``, ``BRS``,
``ESI``) in a group whose source is a CAN bus, with the bus's DBC attached
(embedded).  CANape and asammdf read it; ``MDF.extract_bus_logging`` with
that DBC gives the signals' physical values.

Times are the simulated times of the rows the frames belong to: a frame of
tick *k* gets the time of the row of tick *k* (between decimated rows, the
row before plus the ticks since times the period), so a sent frame's
values sit at the row whose outputs they carry and a received frame's at
the first row whose inputs show it.  A frame whose row went into an earlier
file (its adapter's spool thread was late) goes into the next file with its
own time; none is dropped.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import numpy as np

from .bus_spool import F_BRS, F_EXTENDED, F_FD, F_RX, RECORD, read_records

DATA_FRAME = np.dtype([("CAN_DataFrame.BusChannel", "<u1"), ("CAN_DataFrame.ID", "<u4"), ("CAN_DataFrame.IDE", "<u1"),
                       ("CAN_DataFrame.DLC", "<u1"), ("CAN_DataFrame.DataLength", "<u1"),
                       ("CAN_DataFrame.DataBytes", "(64,)u1"), ("CAN_DataFrame.Dir", "<u1"),
                       ("CAN_DataFrame.EDL", "<u1"), ("CAN_DataFrame.BRS", "<u1"), ("CAN_DataFrame.ESI", "<u1")])
_FD_DLC = {n: d for d, n in enumerate((0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64))}
END_WAIT_S = 10.0  # how long the last file waits for an adapter's end record (it is written before the stop)


class BusFrames:
    """The frames of the recording's buses, read from their spool files and handed out file by file.

    Parameters
    ----------
    buses
        One dict per CAN adapter: ``adapter`` (name), ``spool`` (file), ``dbc`` (path).
    period_s
        The loop's period (ticks between decimated rows).
    """

    def __init__(self, buses: list[dict], period_s: float):
        self.period_s = float(period_s)
        self.buses = []
        for k, b in enumerate(buses):
            data = Path(b["dbc"]).read_bytes()
            self.buses.append({"adapter": b["adapter"], "spool": b["spool"], "channel": k + 1, "offset": 0,
                               "ended": False, "pending": [], "written": 0,
                               "attachment": (data, Path(b["dbc"]).name, hashlib.md5(data).digest())})

    def poll(self) -> int:
        """Read what the spools hold now; the number of new frames."""
        n = 0
        for b in self.buses:
            recs, b["offset"], ended = read_records(b["spool"], b["offset"])
            b["ended"] = b["ended"] or ended
            if len(recs):
                b["pending"].append(recs)
                n += len(recs)
        return n

    def wait_end(self, timeout_s: float = END_WAIT_S, alive=lambda: True) -> bool:
        """Read until every spool's end record is in (the server writes them before it stops the recording).

        Gives up after ``timeout_s`` or when ``alive()`` turns False (the
        server was killed: its spool has no end record); True if all ended.
        """
        end = time.monotonic() + timeout_s
        while True:
            self.poll()
            if all(b["ended"] for b in self.buses):
                return True
            if time.monotonic() > end or not alive():
                return False
            time.sleep(0.01)

    @property
    def pending(self) -> int:
        return sum(len(r) for b in self.buses for r in b["pending"])

    def take(self, last_tick: int | None) -> list[np.ndarray]:
        """Per bus, the waiting frames of ticks up to ``last_tick`` (None: all); the others stay for the next file."""
        out = []
        for b in self.buses:
            recs = np.concatenate(b["pending"]) if b["pending"] else np.zeros(0, dtype=RECORD)
            if last_tick is None:
                mine, rest = recs, recs[:0]
            else:
                mine, rest = recs[recs["tick"] <= last_tick], recs[recs["tick"] > last_tick]
            b["pending"] = [rest] if len(rest) else []
            out.append(mine)
        return out

    def chunk(self, final: bool, ticks: np.ndarray, times: np.ndarray) -> list[tuple]:
        """``(Signal, comment)`` per bus with frames: the ``CAN_DataFrame`` groups of one file.

        ``ticks`` and ``times`` are the file's rows (ascending ticks), or one
        ``(tick, time)`` pair to count from when the file has no rows; the
        frames of ticks up to the last row go in (``final``: every frame
        still waiting).
        """
        return self.signals(self.take(None if final else int(ticks[-1])), ticks, times)

    def signals(self, taken: list[np.ndarray], ticks: np.ndarray, times: np.ndarray) -> list[tuple]:
        """``(Signal, comment)`` per bus of the frames ``taken`` (:meth:`take`), on the rows' time axis."""
        from asammdf import Signal
        from asammdf.blocks.v4_blocks import SourceInformation
        from asammdf.blocks.v4_constants import BUS_TYPE_CAN, SOURCE_BUS

        out = []
        for b, recs in zip(self.buses, taken):
            if not len(recs):
                continue
            t = frame_times(recs["tick"], ticks, times, self.period_s)
            order = np.argsort(t, kind="stable")
            recs, t = recs[order], t[order]
            out.append((Signal(data_frames(recs, b["channel"]), t, name="CAN_DataFrame", attachment=b["attachment"],
                               source=SourceInformation(source_type=SOURCE_BUS, bus_type=BUS_TYPE_CAN)),
                        f"CAN bus {b['channel']}: adapter {b['adapter']}, frames both ways (Dir 0 = Rx, 1 = Tx)"))
            b["written"] += len(recs)
        return out

    def status(self) -> dict:
        return {b["adapter"]: {"frames": b["written"], "ended": b["ended"]} for b in self.buses}

    def remove_spools(self) -> None:
        for b in self.buses:
            Path(b["spool"]).unlink(missing_ok=True)


def frame_times(frame_ticks: np.ndarray, ticks: np.ndarray, times: np.ndarray, period_s: float) -> np.ndarray:
    """The time of each frame's tick: its row's time, or the row before plus the ticks since times the period."""
    idx = np.searchsorted(ticks, frame_ticks, side="right") - 1
    base = np.clip(idx, 0, len(ticks) - 1)
    return times[base] + (frame_ticks - ticks[base]) * period_s


def data_frames(recs: np.ndarray, channel: int) -> np.ndarray:
    """Spool records as ``CAN_DataFrame`` samples."""
    out = np.zeros(len(recs), dtype=DATA_FRAME)
    fd = (recs["flags"] & F_FD) != 0
    out["CAN_DataFrame.BusChannel"] = channel
    out["CAN_DataFrame.ID"] = recs["frame_id"]
    out["CAN_DataFrame.IDE"] = (recs["flags"] & F_EXTENDED) != 0
    out["CAN_DataFrame.DataLength"] = recs["length"]
    out["CAN_DataFrame.DLC"] = np.where(fd, [_FD_DLC.get(int(n), 15) for n in recs["length"]], recs["length"])
    out["CAN_DataFrame.DataBytes"] = recs["data"]
    out["CAN_DataFrame.Dir"] = np.where((recs["flags"] & F_RX) != 0, 0, 1)
    out["CAN_DataFrame.EDL"] = fd
    out["CAN_DataFrame.BRS"] = (recs["flags"] & F_BRS) != 0
    return out


__all__ = ["BusFrames", "DATA_FRAME", "frame_times", "data_frames"]
