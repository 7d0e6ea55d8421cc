"""Snapshots of the whole simulation: assembled from its parts, kept in memory by name or written to files.

:func:`take` asks each part of a running loop for its own state
(``snapshot_state()``): the plant (kind, ports, model floats, data), the
loop's clock (tick, step, queued inputs), the scenario player (which
scenario, whether it still drives), the fault set (faults, tables, tuned
floats of faulted clutches) and the command watchdog (its times relative to
the loop's clock); a dict of plain values and numpy arrays, ``format`` 1.
:func:`restore` has every part check its own state (``check_state()``)
before any part changes, then restores them in order
(``restore_state()``); the run then continues bit-exactly.
:meth:`server.loop.Loop.snapshot` and :meth:`~server.loop.Loop.restore`
call these two.  :class:`SnapshotStore` is what the ``snapshot_save`` and
``snapshot_restore`` control requests use:

* by ``name``: kept in the server's memory (at most :data:`MAX_KEPT`, the
  oldest dropped first), gone at shutdown;
* by ``path``: a ``.npz`` file (numpy's zip of arrays, read back without
  pickle) inside the folder ``[loop] snapshot_dir`` of the I/O config names,
  and nowhere else: a path that leaves the folder, a missing folder setting
  or a file larger than ``snapshot_max_bytes`` is refused with a one-line
  error.  A file is written to a temporary name and renamed, so a crash
  leaves the old file or the new one, never half of one.

File layout: every array of the snapshot is an entry of the archive under
its path in the dict (``plant/df``, ...); the rest of the dict, with each
array replaced by ``{"__array__": path}``, is the JSON text of the entry
``meta``.
"""

from __future__ import annotations

import io
import json
import os
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from plant_models.errors import FaultError, SnapshotError

FORMAT = 1  # the layout of a snapshot (the parts' keys); a file of another format is refused with its number
MAX_KEPT = 16  # snapshots kept in memory by name
SUFFIX = ".npz"


def _check_format(snap: Any, source: str = "", parts: tuple[str, ...] = ()) -> None:
    """A dict of :data:`FORMAT` with the maps ``parts``; else ``SnapshotError`` naming the format found."""
    where = f"{source}: " if source else ""
    if not isinstance(snap, dict) or "format" not in snap or not all(isinstance(snap.get(p), dict) for p in parts):
        raise SnapshotError(f"{where}not a snapshot of this server (format {FORMAT})")
    if snap["format"] != FORMAT:
        raise SnapshotError(f"{where}a snapshot of format {snap['format']!r}; this server reads format {FORMAT}")


def take(loop) -> dict:
    """The whole simulation state of ``loop`` (a :class:`server.loop.Loop`), between ticks.

    Not in it: the state ring, the adapters' link state (CAN alive counters,
    sequence numbers) and the timing telemetry; they describe the link and
    the run, not the simulation.
    """
    return {"format": FORMAT, "plant": loop.plant.snapshot_state(), "loop": loop.snapshot_state(),
            "scenario": loop.player.snapshot_state(), "faults": loop.faults.snapshot_state(),
            "watchdog": loop.watchdog.snapshot_state(loop.clock_ns())}


def restore(loop, snap: dict) -> None:
    """Continue ``loop`` from :func:`take`'s ``snap`` (of this plant and config), between ticks.

    Every part checks its own state first; ``SnapshotError`` (one line,
    nothing changed) for a snapshot that does not fit.
    """
    _check_format(snap, parts=("plant", "loop"))
    loop.plant.check_state(snap["plant"])
    try:
        loop.check_state(snap["loop"])
        loop.watchdog.check_state(snap["watchdog"])
        loop.faults.check_state(snap["faults"])
        loop.player.check_state(snap["scenario"])
    except SnapshotError:
        raise
    except FaultError as exc:
        raise SnapshotError(f"a fault of the snapshot does not fit: {exc}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SnapshotError(f"a damaged snapshot ({type(exc).__name__}: {exc})") from None
    loop.faults.clear_for_restore()
    loop.plant.restore_state(snap["plant"])
    loop.restore_state(snap["loop"])
    loop.player.restore_state(snap["scenario"], loop.tick)
    loop.watchdog.restore_state(snap["watchdog"], loop.clock_ns())  # its times on the restored clock
    loop.faults.restore_state(snap["faults"])


def _flatten(obj: Any, path: str, arrays: dict[str, np.ndarray]) -> Any:
    if isinstance(obj, np.ndarray):
        arrays[path] = obj
        return {"__array__": path}
    if isinstance(obj, dict):
        return {str(k): _flatten(v, f"{path}/{k}" if path else str(k), arrays) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_flatten(v, f"{path}/{j}", arrays) for j, v in enumerate(obj)]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def _unflatten(obj: Any, arrays) -> Any:
    if isinstance(obj, dict):
        if set(obj) == {"__array__"}:
            return arrays[obj["__array__"]]
        return {k: _unflatten(v, arrays) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_unflatten(v, arrays) for v in obj]
    return obj


def to_bytes(snap: dict) -> bytes:
    """A snapshot as the bytes of its ``.npz`` file."""
    arrays: dict[str, np.ndarray] = {}
    meta = _flatten(snap, "", arrays)
    buf = io.BytesIO()
    np.savez(buf, meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **arrays)
    return buf.getvalue()


def from_bytes(data: bytes, source: str = "snapshot") -> dict:
    """A snapshot from the bytes of its ``.npz`` file; ``SnapshotError`` (one line) for anything else."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(arrays.pop("meta").tobytes().decode())
        snap = _unflatten(meta, arrays)
    except Exception as exc:  # a damaged or foreign file: one line, never a crash
        raise SnapshotError(f"{source}: not a readable snapshot file ({type(exc).__name__}: {exc})") from None
    _check_format(snap, source)
    # JSON turns the fault rows' integer keys into strings, and lists of arrays stay lists: what restore expects
    return snap


class SnapshotStore:
    """Snapshots by name in memory and as files in one folder.

    Parameters
    ----------
    folder
        The only folder snapshot files are read from and written to ("" :
        files refused).
    max_bytes
        The largest snapshot file written or read, bytes.
    """

    def __init__(self, folder: str | os.PathLike = "", max_bytes: int = 64 * 2 ** 20):
        self.folder = Path(folder).resolve() if folder else None
        self.max_bytes = int(max_bytes)
        self._kept: OrderedDict[str, dict] = OrderedDict()

    # ------------------------------------------------------------------ memory
    def keep(self, name: str, snap: dict) -> None:
        """Keep ``snap`` under ``name`` (replacing one of that name; the oldest goes beyond :data:`MAX_KEPT`)."""
        self._kept.pop(name, None)
        self._kept[name] = snap
        while len(self._kept) > MAX_KEPT:
            self._kept.popitem(last=False)

    def get(self, name: str) -> dict:
        try:
            return self._kept[name]
        except KeyError:
            raise SnapshotError(f"no snapshot named {name!r}; kept: {', '.join(self._kept) or 'none'}") from None

    def names(self) -> list[str]:
        return list(self._kept)

    # ------------------------------------------------------------------ files
    def resolve(self, path: str) -> Path:
        """``path`` inside the folder (``.npz`` added if missing), or ``SnapshotError``."""
        if self.folder is None:
            raise SnapshotError("snapshot files are off: set [loop] snapshot_dir in the I/O config")
        if not path or "\x00" in path or len(path) > 255:
            raise SnapshotError(f"bad snapshot file name {path!r}")
        p = Path(path)
        if p.is_absolute():
            raise SnapshotError(f"{path}: give a path relative to the snapshot folder")
        if p.suffix != SUFFIX:
            p = p.with_name(p.name + SUFFIX)
        full = (self.folder / p).resolve()
        if self.folder != full and self.folder not in full.parents:
            raise SnapshotError(f"{path}: outside the snapshot folder")
        return full

    def save_file(self, snap: dict, path: str) -> int:
        """Write ``snap`` to ``path`` in the folder; returns its size in bytes."""
        full = self.resolve(path)
        data = to_bytes(snap)
        if len(data) > self.max_bytes:
            raise SnapshotError(f"{path}: the snapshot has {len(data)} bytes, more than snapshot_max_bytes = "
                            f"{self.max_bytes}")
        try:
            full.parent.mkdir(parents=True, exist_ok=True)
            if self.folder not in full.parent.resolve().parents and full.parent.resolve() != self.folder:
                raise SnapshotError(f"{path}: outside the snapshot folder")
            tmp = full.with_name(full.name + ".tmp")
            tmp.write_bytes(data)
            os.replace(tmp, full)
        except OSError as exc:
            raise SnapshotError(f"{path}: cannot write the snapshot ({exc.strerror or exc})") from None
        return len(data)

    def load_file(self, path: str) -> dict:
        """Read the snapshot file ``path`` of the folder."""
        full = self.resolve(path)
        try:
            size = full.stat().st_size
            if size > self.max_bytes:
                raise SnapshotError(f"{path}: {size} bytes, more than snapshot_max_bytes = {self.max_bytes}")
            data = full.read_bytes()
        except OSError as exc:
            raise SnapshotError(f"{path}: cannot read the snapshot ({exc.strerror or exc})") from None
        return from_bytes(data, path)


__all__ = ["SnapshotStore", "take", "restore", "to_bytes", "from_bytes", "MAX_KEPT", "FORMAT"]
