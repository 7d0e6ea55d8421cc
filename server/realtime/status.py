"""What the server says about itself: the status object, the live status line and the shutdown summary.

:class:`StatusReport` reads the loop, its watchdog, its scenario player and
its adapters, and assembles

* the status object of the ``status`` request and of the ``status``
  messages (keys in docs/protocol.md, section 6);
* the one-line live status of the terminal, once per status window (the
  loop calls :meth:`StatusReport.status_window` between ticks), not
  repeated while nothing changes (an idle lockstep server);
* the timing summary printed at shutdown, and the check of a real-time
  run's actual rate and missed ticks against a tolerance
  (:meth:`StatusReport.timing_check`).

The loop does not import this module: :mod:`server.realtime.runtime` attaches a
report to the loop as its :class:`server.realtime.loop.Reporter`.
"""

from __future__ import annotations

import sys
from typing import Callable, Sequence

from io_adapters.base import Adapter

from server.realtime.loop import RUNNING, Loop
from server.realtime.telemetry import C_OVERRUNS, format_summary


def timing_problems(timing: dict, tolerance_pct: float) -> list[str]:
    """What in a real-time run's timing summary falls outside the tolerance, one sentence each.

    The ticks missed during the start-up grace period (``startup_grace_s``,
    caches warming up; already apart for the overrun policy) are left out:
    every realtime deadline is either ticked or missed, so the run had
    ``ticks + missed_ticks`` deadlines, and the check is

    * the actual rate with the grace period's missed ticks counted as
      ticked, ``(ticks + missed_ticks_in_grace) / run_time_s``, at most
      ``tolerance_pct`` % below the target;
    * the ticks missed after the grace period, at most ``tolerance_pct`` %
      of all deadlines.

    Parameters
    ----------
    timing
        The run's timing summary (``status()["timing"]``).
    tolerance_pct
        The tolerance, %.
    """
    out = []
    ticks, missed = int(timing.get("ticks") or 0), int(timing.get("missed_ticks") or 0)
    in_grace = int(timing.get("missed_ticks_in_grace") or 0)
    target, run_s = timing.get("rate_hz_target"), timing.get("run_time_s")
    if not ticks or not target or not run_s:
        return out
    rate = (ticks + in_grace) / run_s
    if rate < target * (1.0 - tolerance_pct / 100.0):
        out.append(f"actual rate {rate:.1f} Hz (after the start-up grace) is {100.0 * (1.0 - rate / target):.1f} % "
                   f"below the target {target:g} Hz")
    share = 100.0 * (missed - in_grace) / (ticks + missed)
    if share > tolerance_pct:
        out.append(f"{share:.1f} % of the ticks were missed after the start-up grace ({missed - in_grace} of "
                   f"{ticks + missed})")
    return out


class StatusReport:
    """Status, status line and shutdown summary of one loop.

    Parameters
    ----------
    loop
        The loop reported on (with its plant, watchdog, scenario player and adapters).
    out
        Where status lines go when stdout is not a terminal (default: print).
    """

    def __init__(self, loop: Loop, out: Callable[[str], None] | None = None):
        self.loop = loop
        self._out = out
        # `serve` sets a ConsoleWriter here: status lines then go through its thread, never blocking the loop
        self.console = None
        self._tty = sys.stdout.isatty()
        self._line_broken = False  # stdout went away: stop printing, keep running
        self._last_line = ""  # the line shown last: an unchanged line is not shown again
        self._line_outputs = _status_outputs(loop, loop.cfg.status_outputs)
        self.extra: dict = {}  # name -> callable: more parts of the status object (e.g. "recording")

    # ------------------------------------------------------------------ the status object
    def status(self) -> dict:
        """The status channel's content: state, timing, watchdog, scenario, adapters."""
        lp = self.loop
        plant = lp.plant
        info = lp.player.info
        rt = lp.realtime_settings
        return {
            "state": lp.state,
            "mode": lp.mode,
            "period_s": lp.dt,
            "tick": lp.tick,
            "sim_time_s": plant.time,
            "plant": {"kind": plant.kind, "status_word": lp.status_word,
                      "status_names": plant.status_names(lp.status_word), "events_total": lp.events_total},
            "timing": lp.telemetry.summary(),
            "tick_path": lp.tick_path,
            "tick_path_reason": lp.tick_path_reason,
            "python_ticks": lp.python_ticks,
            "timing_histograms": lp.telemetry.histograms(),
            "window": lp.telemetry.last_window,
            "watchdog": lp.watchdog.status(lp.clock_ns(), lp.watchdog_active),
            "scenario": dict(info) if info else None,
            "faults": lp.faults.listing(),
            "realtime": (dict(rt.as_dict(), spin_margin_us=round(lp.spin_margin_us, 1)) if rt is not None else None),
            "adapters": {a.name: adapter_status(a) for a in lp.adapters},
            "startup_s": round((lp.first_tick_ns - lp.started_ns) / 1e9, 6) if lp.first_tick_ns else None,
            **{name: part() for name, part in self.extra.items()},
        }

    # ------------------------------------------------------------------ the live status line
    def status_line(self) -> str:
        """One line: mode, state, time, rate, TET, lateness, overruns, chosen outputs.  Closes the status window."""
        lp = self.loop
        w = lp.telemetry.window()
        lat = w["lateness_us"]["p99"]
        tet = w["tet_us"]["p99"]
        rate = w["rate_hz"]
        y = lp.plant.y
        of = lp.cfg.duration_s
        parts = [f"[{lp.mode} {lp.state}] t={lp.plant.time:9.3f} s" + (f" of {of:g} s" if of > 0 else ""),
                 f"rate {rate:8.1f} Hz" if rate else "rate      -- Hz",
                 f"TET p99 {tet:7.1f} us" if tet is not None else "TET p99    -- us"]
        if lp.mode == "realtime":
            parts.append(f"late p99 {lat:7.1f} us" if lat is not None else "late p99    -- us")
            parts.append(f"overruns {int(lp.telemetry.counters[C_OVERRUNS])}")
        for name, k, unit in self._line_outputs:
            v = float(y[k])
            parts.append(f"{name} {v:.0f}" if unit in ("-", "") else f"{name} {v:7.1f} {unit}")
        if lp.watchdog.tripped:
            parts.append("WATCHDOG")
        if lp.player.active is not None:
            parts.append("scenario")
        if lp.faults.active:
            parts.append(f"FAULTS {len(lp.faults.active)}")
        return "  ".join(parts)

    def status_window(self) -> None:
        """A status window ended: close it and show the line (in place on a terminal).  Between ticks."""
        if self.loop.state != RUNNING:
            return
        line = self.status_line()  # also closes the status window
        if not self.loop.cfg.status_line or self._line_broken or line == self._last_line:
            return
        self._last_line = line
        if self._out is not None:
            self._out(line)
        else:
            self._show("\r" + line[:200] + "\x1b[K" if self._tty else line + "\n")

    def _show(self, text: str) -> None:
        """Text on stdout: through the console writer when there is one, else written here."""
        if self.console is not None:
            self.console.write(text)
            return
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except (OSError, ValueError):  # stdout closed (a pipe whose reader went away): keep running
            self._line_broken = True

    def end_status_line(self) -> None:
        """End the in-place status line on a terminal (before the summary is printed)."""
        cfg = self.loop.cfg
        if self._tty and cfg.status_interval_s > 0 and cfg.status_line and self._out is None:
            self._show("\n")

    def warm_up(self) -> None:
        """Build the status and the status line once before the first deadline (pays their first-call costs)."""
        self.status()
        self.status_line()

    # ------------------------------------------------------------------ at shutdown
    def timing_check(self, tolerance_pct: float) -> dict | None:
        """A real-time run's actual rate and missed ticks against ``tolerance_pct`` (%); None in other modes.

        Returns ``{"tolerance_pct", "problems"}``, ``problems`` the
        sentences of :func:`timing_problems` (empty: within the tolerance).
        """
        if self.loop.mode != "realtime":
            return None
        return {"tolerance_pct": tolerance_pct, "problems": timing_problems(self.loop.telemetry.summary(),
                                                                            tolerance_pct)}

    def summary_text(self) -> str:
        """The timing summary, the watchdog's trips and each adapter's applied and rejected commands."""
        lp = self.loop
        grace_s = lp.cfg.startup_grace_s if lp.mode == "realtime" else None
        text = format_summary(lp.telemetry.summary(), lp.mode, grace_s)
        wd = lp.watchdog
        text += f"\n  watchdog         {wd.trips} trips, {wd.recoveries} recoveries"
        for a in lp.adapters:
            st = adapter_status(a)
            rej = st.get("rejected") if isinstance(st, dict) else None
            if isinstance(rej, dict):
                by = {k: v for k, v in rej.get("by_reason", {}).items() if v}
                text += f"\n  {a.name:<16} {st.get('applied', 0)} commands applied, {rej.get('total', 0)} rejected"
                if by:
                    text += " " + ", ".join(f"{k} {v}" for k, v in by.items())
        if lp.stop_reason:
            text += f"\n  stopped: {lp.stop_reason}"
        return text


def adapter_status(a: Adapter) -> dict:
    """``a.status()``, or the error it raised: a broken adapter must not break the status channel."""
    try:
        return a.status()
    except Exception as exc:
        return {"error": f"status failed: {exc}"}


def _status_outputs(loop: Loop, names: Sequence[str]) -> list[tuple[str, int, str]]:
    """(name, output index, unit) of the outputs on the status line: the named ones, else speeds and gear."""
    plant = loop.plant
    outs = plant.outputs
    if names:
        return [(n, plant.output_index(n), plant.output_signal(n).unit) for n in names]
    picked = [k for k, s in enumerate(outs) if s.unit == "rad/s"][:1]
    for k, s in enumerate(outs):
        if s.name in ("w_out", "gear") and k not in picked:
            picked.append(k)
    if len(picked) < 2:
        picked += [k for k, s in enumerate(outs) if s.unit == "rad/s" and k not in picked][:2 - len(picked)]
    return [(outs[k].name, k, outs[k].unit) for k in picked]


__all__ = ["StatusReport", "adapter_status", "timing_problems"]
