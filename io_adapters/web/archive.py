"""What the page can fetch from before it opened: the display rows' history, and the recordings.

* **History** (``[web] history_s``, default 120 s; 0: none): the workspace
  process keeps the last ``history_s`` seconds of run time of its display
  rows (one every ``every`` ticks, every column of the state ring: the
  outputs and the inputs) in preallocated arrays, also while no page is
  open, so a page opened late, or one that held less, loads them:
  ``GET /api/history?seconds=N&signals=a,b&every=K`` answers the rows of
  the last ``N`` seconds of run time since the last reset (the ticks
  ascend), of the named signals, those whose tick is a multiple of ``K``
  (the page's own rows/s; default: every display row), as
  ``{"tick": [...], "t": [...], "values": {name: [...]}, "held_s": S}`` (S:
  the seconds it keeps; its arrays take at most :data:`MAX_HISTORY_BYTES`,
  so a long ``history_s`` at a high ``display_hz`` keeps fewer) with the ring's
  float64 values (non-finite as ``null``), so they equal the ZeroMQ state
  stream bit for bit.  At most :data:`MAX_HISTORY_VALUES` values an answer
  (413 beyond: ask for fewer seconds or signals).
* **Recordings** (the I/O config's ``[recording] folder``): ``GET
  /api/recordings`` lists the ``*.mf4`` files directly in that folder
  (name, bytes, modification time; newest first, at most
  :data:`MAX_LISTED`) and ``GET /api/recordings/NAME`` downloads one.  A
  name is a file name of letters, digits, ``_``, ``-`` and ``.`` ending in
  ``.mf4``, no folder; a file that resolves outside the folder (a link) is
  treated as absent (404); a file larger than ``max_download_bytes``
  (default 1 GiB) is refused (413).  The chunk a recording is writing is
  listed too; its download is the file as it is at that moment.

Both routes sit behind the server's checks (Host, token, Origin;
:mod:`io_adapters.web.server`).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
from aiohttp import web

MAX_HISTORY_VALUES = 2_000_000  # rows x signals in one history answer
MAX_HISTORY_S = 3600.0
MAX_HISTORY_BYTES = 256 << 20  # the history's arrays at most; a longer history_s keeps fewer seconds (held_s says)
MAX_LISTED = 1000
RECORDING = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,200}\.mf4")


class History:
    """The last ``seconds`` of run time of the display rows: ticks and every float column, in a ring of rows."""

    def __init__(self, seconds: float, row_period_s: float, n_floats: int, t_col: int):
        rows = int(math.ceil(seconds / row_period_s)) + 1 if seconds > 0 else 0
        self.capacity = min(rows, MAX_HISTORY_BYTES // (8 * (n_floats + 1)))
        self.seconds = min(seconds, max(0, self.capacity - 1) * row_period_s)  # what it can hold
        self.ticks = np.zeros(self.capacity, np.int64)
        self.floats = np.zeros((self.capacity, n_floats), np.float64)
        self.t_col = t_col
        self.written = 0  # rows added so far; row k is at k % capacity

    def add(self, ticks: np.ndarray, floats: np.ndarray) -> None:
        """Append display rows (a copy into the preallocated arrays; the oldest are overwritten)."""
        n, cap = len(ticks), self.capacity
        if not cap or not n:
            return
        if n > cap:
            ticks, floats, self.written = ticks[-cap:], floats[-cap:], self.written + n - cap
            n = cap
        at = self.written % cap
        first = min(n, cap - at)
        self.ticks[at:at + first] = ticks[:first]
        self.floats[at:at + first] = floats[:first]
        if first < n:
            self.ticks[:n - first] = ticks[first:]
            self.floats[:n - first] = floats[first:]
        self.written += n

    def last(self, seconds: float, cols: list[int], every: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ticks, t, values[rows, len(cols)]) of the last ``seconds`` since the last reset, oldest first."""
        n = min(self.written, self.capacity)
        order = (np.arange(self.written - n, self.written) % self.capacity) if n else np.zeros(0, np.int64)
        ticks, t = self.ticks[order], self.floats[order, self.t_col]
        back = np.flatnonzero(np.diff(ticks) <= 0)  # a reset (or a restart of the run) starts the ticks again
        start = int(back[-1]) + 1 if len(back) else 0
        if n:
            start = max(start, int(np.searchsorted(t[start:], t[-1] - seconds, side="left")) + start)
        keep = order[start:]
        if every > 1:
            keep = keep[self.ticks[keep] % every == 0]
        return self.ticks[keep], self.floats[keep, self.t_col], self.floats[np.ix_(keep, cols)]


class Archive:
    """The history and the recordings' routes of one workspace process."""

    def __init__(self, history: History, by_name: dict[str, int], recordings: str | None, max_download_bytes: int,
                 column, dumps):
        self.history = history
        self.by_name = by_name
        self.folder = Path(recordings).resolve() if recordings else None
        self.max_download_bytes = max_download_bytes
        self.column, self.dumps = column, dumps  # the server's float64 column and JSON writers

    def add_routes(self, router) -> None:
        router.add_get("/api/history", self._history)
        router.add_get("/api/recordings", self._list)
        router.add_get("/api/recordings/{name}", self._get)

    @staticmethod
    def _refuse(status: int, code: str, message: str) -> web.Response:
        return web.json_response({"ok": False, "error": {"code": code, "message": message}}, status=status)

    async def _history(self, request: web.Request) -> web.Response:
        h, q = self.history, request.query
        if not h.capacity:
            return self._refuse(404, "history", "no history kept: set history_s in the [web] table")
        try:
            seconds = float(q.get("seconds", h.seconds or 1.0))
            every = int(q.get("every", "1"))
        except ValueError:
            return self._refuse(400, "history", "seconds is a number and every a whole number")
        if not (0.0 < seconds <= MAX_HISTORY_S) or not 1 <= every <= 1_000_000:
            return self._refuse(400, "history", f"seconds is 0..{MAX_HISTORY_S:g} and every 1..1000000")
        names = [n for n in q.get("signals", "").split(",") if n]
        unknown = [n for n in names if n not in self.by_name]
        if not names or unknown:
            return self._refuse(400, "history", "name the signals (signals=a,b)" + (
                "; unknown: " + ", ".join(unknown[:8]) if unknown else ""))
        ticks, t, values = h.last(seconds, [self.by_name[n] for n in names], every)
        if values.size > MAX_HISTORY_VALUES:
            return self._refuse(413, "history", f"{len(ticks)} rows of {len(names)} signals is more than "
                                f"{MAX_HISTORY_VALUES} values: ask for fewer seconds or signals, or a larger every")
        body = {"ok": True, "tick": ticks.tolist(), "t": self.column(t), "held_s": h.seconds,
                "values": {n: self.column(values[:, k]) for k, n in enumerate(names)}}
        return web.Response(text=self.dumps(body), content_type="application/json")

    def _files(self) -> list[Path]:
        if self.folder is None or not self.folder.is_dir():
            return []
        out = []
        for p in self.folder.iterdir():
            if RECORDING.fullmatch(p.name) and self._inside(p):
                out.append(p)
        return out

    def _inside(self, p: Path) -> bool:
        """A regular file whose real path is directly in the folder (a link out of it is not)."""
        try:
            real = p.resolve(strict=True)
        except OSError:
            return False
        return real.parent == self.folder and real.is_file()

    async def _list(self, request: web.Request) -> web.Response:
        if self.folder is None:
            return web.json_response({"ok": True, "folder": False, "recordings": []})
        listed = []
        for p in self._files():
            try:
                st = p.stat()
            except OSError:  # removed meanwhile
                continue
            listed.append({"name": p.name, "bytes": st.st_size, "mtime": st.st_mtime})
        listed.sort(key=lambda r: (-r["mtime"], r["name"]))
        return web.json_response({"ok": True, "folder": True, "recordings": listed[:MAX_LISTED],
                                  "truncated": len(listed) > MAX_LISTED, "max_bytes": self.max_download_bytes})

    async def _get(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        if self.folder is None:
            return self._refuse(404, "recording", "no recording folder: set [recording] folder in the I/O config")
        if not RECORDING.fullmatch(name):
            return self._refuse(400, "recording", "a recording is NAME.mf4 (letters, digits, _, -, .), no folder")
        path = self.folder / name
        if not self._inside(path):
            return self._refuse(404, "recording", f"no recording {name} in the recording folder")
        size = path.stat().st_size
        if size > self.max_download_bytes:
            return self._refuse(413, "recording", f"{name} has {size} bytes, more than max_download_bytes "
                                f"({self.max_download_bytes})")
        return web.FileResponse(path, headers={"Content-Type": "application/octet-stream",
                                               "Content-Disposition": f'attachment; filename="{name}"'})


__all__ = ["Archive", "History", "MAX_HISTORY_VALUES"]
