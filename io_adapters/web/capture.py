"""Triggered captures of the workspace: every tick around a level or edge of one signal, downloadable as CSV.

A page arms a trigger (WebSocket ``{"op": "arm", "trigger": {...}}``); the
workspace process then reads the state ring at every tick (a cursor of the
trigger's own, not the display's decimated one), keeps the pre-trigger rows,
finds the first row that meets the condition and, once the post-trigger rows
are there, cuts the capture: ticks ``T - pre .. T + post`` around the
trigger tick ``T``, with the ring's float64 values, so a capture equals the
ZeroMQ state stream of the same ticks bit for bit.  Its CSV writes each
value with Python's ``repr`` (the shortest text that reads back as the same
float64).

Conditions on the signal ``x`` and ``level``: ``rising`` (the previous tick
below ``level``, this one at or above), ``falling`` (above, then at or
below), ``above`` (at or above) and ``below`` (at or below); ``single``
captures once, ``continuous`` arms again after each capture.  A reset (the
tick goes back) or rows lost to a ring overrun start the search over.
"""

from __future__ import annotations

import io
import itertools
import math

import numpy as np

from plant_models.run.ring import F_TIME, I_TICK, Cursor

CONDITIONS = ("rising", "falling", "above", "below")
MAX_ROWS = 60_000  # rows of one capture at most (pre + 1 + post)
MAX_SIGNALS = 64  # signals of one capture at most
MAX_KEPT = 8  # captures kept for download (the oldest is forgotten)
_ids = itertools.count(1)


class TriggerError(ValueError):
    """An arm request the workspace refuses (one line)."""


class Capture:
    """The rows of one capture: ``ticks``, ``t`` and one float64 column per signal."""

    def __init__(self, names: list[str], ticks: np.ndarray, t: np.ndarray, values: np.ndarray, at: int,
                 trigger: dict):
        self.id = next(_ids)
        self.names, self.ticks, self.t, self.values, self.at, self.trigger = names, ticks, t, values, at, trigger

    def summary(self, url: str) -> dict:
        k = int(np.searchsorted(self.ticks, self.at))
        return {"id": self.id, "tick": self.at, "t": float(self.t[k]), "rows": len(self.ticks),
                "first_tick": int(self.ticks[0]), "last_tick": int(self.ticks[-1]), "signals": self.names,
                "trigger": self.trigger, "url": url}

    def csv(self) -> str:
        out = io.StringIO()
        out.write(",".join(["tick", "t", *self.names]) + "\n")
        for j in range(len(self.ticks)):
            out.write(f"{int(self.ticks[j])},{float(self.t[j])!r}," + ",".join(repr(float(v)) for v in self.values[j])
                      + "\n")
        return out.getvalue()


class Trigger:
    """One page's armed trigger; :meth:`feed` reads the ring and returns the captures completed."""

    def __init__(self, ring, by_name: dict[str, int], period_s: float, spec):
        if not isinstance(spec, dict):
            raise TriggerError("arm: 'trigger' is an object: signal, condition, level, pre_s, post_s, mode")
        sig, cond, mode = spec.get("signal"), spec.get("condition", "rising"), spec.get("mode", "single")
        if sig not in by_name:
            raise TriggerError(f"arm: unknown signal {str(sig)[:80]!r}")
        if cond not in CONDITIONS:
            raise TriggerError(f"arm: condition is one of {', '.join(CONDITIONS)}, got {str(cond)[:40]!r}")
        if mode not in ("single", "continuous"):
            raise TriggerError("arm: mode is single or continuous")
        level, pre_s, post_s = (spec.get(k, d) for k, d in (("level", None), ("pre_s", 0.1), ("post_s", 0.1)))
        for k, v in (("level", level), ("pre_s", pre_s), ("post_s", post_s)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or (k != "level" and v < 0):
                raise TriggerError(f"arm: {k} must be a finite number" + (" >= 0" if k != "level" else ""))
        self.pre, self.post = int(round(pre_s / period_s)), int(round(post_s / period_s))
        if self.pre + self.post + 1 > MAX_ROWS:
            raise TriggerError(f"arm: pre_s + post_s hold more than {MAX_ROWS} ticks")
        names = spec.get("signals") or [sig]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or len(names) > MAX_SIGNALS:
            raise TriggerError(f"arm: signals is a list of at most {MAX_SIGNALS} names")
        unknown = [n for n in names if n not in by_name]
        if unknown:
            raise TriggerError(f"arm: unknown signal(s) {', '.join(unknown[:5])}")
        self.names = list(dict.fromkeys([sig, *names]))
        self.cols = [by_name[n] for n in self.names]
        self.level, self.cond, self.continuous = float(level), cond, mode == "continuous"
        self.spec = {"signal": sig, "condition": cond, "level": self.level, "pre_s": pre_s, "post_s": post_s,
                     "mode": mode}
        self.cursor = Cursor(ring, every=1, batch=1024)
        self._lost = 0
        self.ticks = np.zeros(0, np.int64)
        self.t = np.zeros(0)
        self.values = np.zeros((0, len(self.cols)))
        self.searched = 0  # rows before this index were searched (and did not trigger)
        self.fired: int | None = None  # index of the trigger row
        self.done = False

    def _restart(self, keep_from: int, searched: int = 0) -> None:
        self.ticks, self.t, self.values = self.ticks[keep_from:], self.t[keep_from:], self.values[keep_from:]
        self.searched, self.fired = searched, None

    def feed(self) -> list[Capture]:
        """Read what the ring holds now; the captures completed (several in continuous mode)."""
        chunks = []
        while not self.done:
            n = self.cursor.take()
            if not n:
                break
            chunks.append((self.cursor.ints[:n, I_TICK].copy(), self.cursor.floats[:n, F_TIME].copy(),
                           self.cursor.floats[:n][:, self.cols]))
        if self.cursor.lost != self._lost:  # the ring overran this cursor: the rows are not consecutive
            self._lost = self.cursor.lost
            self.ticks, self.t, self.values = self.ticks[:0], self.t[:0], self.values[:0]
            self._restart(0)
        if not chunks:
            return []
        self.ticks = np.concatenate([self.ticks, *(c[0] for c in chunks)])
        self.t = np.concatenate([self.t, *(c[1] for c in chunks)])
        self.values = np.concatenate([self.values, *(c[2] for c in chunks)])
        gaps = np.nonzero(np.diff(self.ticks) != 1)[0]
        if len(gaps):  # a reset or a jump: only the rows after the last one belong together
            self._restart(int(gaps[-1]) + 1)
        out = []
        while not self.done:
            if self.fired is None:
                self._search()
            if self.fired is None or len(self.ticks) - self.fired - 1 < self.post:
                break
            lo, hi = max(0, self.fired - self.pre), self.fired + self.post + 1
            out.append(Capture(self.names, self.ticks[lo:hi].copy(), self.t[lo:hi].copy(), self.values[lo:hi].copy(),
                               int(self.ticks[self.fired]), self.spec))
            if self.continuous:
                self._restart(hi - 1, 1)  # the next trigger after this capture's last row
            else:
                self.done = True
        if self.fired is None:  # keep the pre-trigger rows and the row an edge compares with
            keep = max(0, len(self.ticks) - self.pre - 1)
            if keep:
                self.ticks, self.t, self.values = self.ticks[keep:], self.t[keep:], self.values[keep:]
                self.searched = max(1, self.searched - keep)
        return out

    def _search(self) -> None:
        x = self.values[:, 0]
        start = max(self.searched, 1 if self.cond in ("rising", "falling") else 0)
        cur = x[start:]
        if self.cond == "rising":
            hit = (x[start - 1:-1] < self.level) & (cur >= self.level)
        elif self.cond == "falling":
            hit = (x[start - 1:-1] > self.level) & (cur <= self.level)
        elif self.cond == "above":
            hit = cur >= self.level
        else:
            hit = cur <= self.level
        idx = np.flatnonzero(hit)
        if len(idx):
            self.fired = start + int(idx[0])
        self.searched = len(x)


__all__ = ["Capture", "Trigger", "TriggerError", "CONDITIONS", "MAX_KEPT"]
