"""CAN bus logs (BLF, ASC) as recordings: python-can's log readers, each frame decoded through a DBC (cantools).

A channel is a DBC signal, named ``Signal`` when one message of the DBC has
it, else ``Message.Signal``; its samples are the frames of its message in
the log, its values in the DBC's physical unit (factor and offset applied,
no value tables), its unit the DBC's.  Time 0 is the log's first frame (of
any message); times are rounded to 1 us, which keeps a log with absolute
time stamps (a BLF's epoch seconds) on the step grid it was sent on.
Frames of other messages, error and remote frames, and frames that do not
decode (a shorter payload than the DBC's) are not samples; E2E counters and
checksums are not checked (a replay feeds the plant, not the gateway).

Reading a log file is not a transport: nothing here opens a bus.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from plant_models.config import ConfigError, did_you_mean

SUFFIXES = (".blf", ".asc")
TIME_RESOLUTION_S = 1e-6  # a bus log's time stamps are no finer than a bit at 1 Mbit/s


def _signals(db) -> dict[str, tuple]:
    """Channel name -> (message, signal) for every ``Message.Signal`` and every signal name one message holds."""
    out, bare = {}, {}
    for msg in db.messages:
        for sig in msg.signals:
            out[f"{msg.name}.{sig.name}"] = (msg, sig)
            bare.setdefault(sig.name, []).append((msg, sig))
    for name, owners in bare.items():
        if len(owners) == 1:
            out[name] = owners[0]
    return out


def ambiguous(db, name: str) -> list[str]:
    """The ``Message.Signal`` names of a signal name several messages hold (empty otherwise)."""
    return sorted(f"{m.name}.{s.name}" for m in db.messages for s in m.signals if s.name == name)


def read_bus_log(path: Path, dbc_path: Path, channels: list[str], source: str) -> dict[str, tuple]:
    """channel -> (times s, values, unit) decoded from a BLF or ASC log through the DBC."""
    try:
        import can
        import cantools
    except ImportError:
        raise ConfigError(source, "replay.file", "reading a bus log needs python-can and cantools "
                          "(they are dependencies of gearbox-hil: reinstall it)") from None
    try:
        db = cantools.database.load_file(str(dbc_path), database_format="dbc", strict=False)
    except Exception as exc:  # cantools raises its own parse errors with the line
        raise ConfigError(source, "replay.dbc", f"{dbc_path.name}: not a DBC this reads ({exc})") from None
    known = _signals(db)
    wanted = {}
    for ch in channels:
        if ch not in known:
            several = ambiguous(db, ch)
            hint = (f"; several messages have it, name one: {', '.join(several)}" if len(several) > 1
                    else did_you_mean(ch, sorted(known)))
            raise ConfigError(source, "replay.channels", f"{ch!r} is not a signal of {dbc_path.name}{hint}")
        wanted[ch] = known[ch]
    by_id = {(m.frame_id, bool(m.is_extended_frame)): m for m, _ in wanted.values()}
    samples = {m.name: ([], []) for m in by_id.values()}  # message -> (times, decoded dicts)
    reader = can.BLFReader if path.suffix.lower() == ".blf" else can.ASCReader
    t_first = None
    try:
        for frame in reader(str(path)):
            if frame.is_error_frame or frame.is_remote_frame:
                continue
            if t_first is None:
                t_first = frame.timestamp
            msg = by_id.get((frame.arbitration_id, bool(frame.is_extended_id)))
            if msg is None:
                continue
            try:
                decoded = msg.decode(bytes(frame.data), decode_choices=False, scaling=True)
            except Exception:  # a frame shorter than its DBC message, or a multiplexer value it does not know
                continue
            ts, vals = samples[msg.name]
            ts.append(frame.timestamp - t_first)
            vals.append(decoded)
    except (OSError, ValueError, EOFError) as exc:
        raise ConfigError(source, "replay.file", f"{path.name}: not a readable bus log ({exc})") from None
    out = {}
    for ch, (msg, sig) in wanted.items():
        ts, vals = samples[msg.name]
        t = np.round(np.asarray(ts, float) / TIME_RESOLUTION_S) * TIME_RESOLUTION_S
        out[ch] = (t, np.array([float(v[sig.name]) for v in vals]), sig.unit or "")
    return out


__all__ = ["SUFFIXES", "read_bus_log"]
