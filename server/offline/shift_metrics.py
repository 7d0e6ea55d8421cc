"""Shift metrics over a recorded run: shift time, flare, reaction torque, clutch and tie-up energy, slip.

Plain functions of numpy arrays (the sample times and the signals a metric
reads), on the bottom floor of the server so that the campaigns
(:mod:`server.campaign.metrics`, which names clutches and signals through its
``[shift]`` table) and the test bench's expressions
(:mod:`server.testbench.expr`, which passes the signals themselves) compute
them with the same code.  A window is a ``slice`` of sample indices;
:func:`window` makes it from times the way campaigns always have.
"""

from __future__ import annotations

import math

import numpy as np


def window(t: np.ndarray, start_s: float, window_s: float = math.inf) -> tuple[slice, int]:
    """The samples of [start_s, start_s + window_s] (to the end for an infinite window) and the first one's index.

    Each end is rounded to the nearest sample (half a step either side), so
    ``start_s = k * dt`` picks sample k whatever the rounding of ``k * dt``.
    """
    dt = t[1] - t[0] if t.size > 1 else 0.0
    i0 = min(int(np.searchsorted(t, start_s - 0.5 * dt)), t.size - 1)
    i1 = int(np.searchsorted(t, start_s + window_s + 0.5 * dt)) if math.isfinite(window_s) else t.size
    return slice(i0, max(i1, i0 + 1)), i0


def shift_time_from_events(events: list[dict], on_coming: str, start_s: float) -> float:
    """From ``start_s`` to the on-coming clutch's last stick event, when that is its last event (s); NaN otherwise."""
    evs = [e for e in events if e["clutch"] == on_coming]
    if evs and evs[-1]["type"] == "stick" and evs[-1]["time"] >= start_s:
        return evs[-1]["time"] - start_s
    return math.nan


def shift_time(t: np.ndarray, stuck_on: np.ndarray, start_s: float, end_s: float = math.inf) -> float:
    """From ``start_s`` to the sample where the on-coming clutch last became stuck and stayed so up to ``end_s`` (s).

    ``stuck_on`` is the clutch's stuck flag per sample (1 stuck); the window
    is [start_s, end_s] (no end: the run's end), its ends rounded to the
    nearest sample as :func:`window` does.  A clutch that sticks inside the
    window and releases after it has shifted inside the window.  NaN (see
    :func:`shift_time_undefined` for the reason) when it is not stuck at the
    window's end, or stuck throughout the window.  From samples it ends at
    the first sample that shows the clutch stuck, up to a step after the
    stick event located inside the step (:func:`shift_time_from_events`).
    """
    s = np.asarray(stuck_on) == 1.0
    if s.size == 0:
        return math.nan
    win, i0 = window(np.asarray(t, dtype=float), start_s, end_s - start_s)
    sw = s[win]
    if not sw[-1]:
        return math.nan
    released = np.flatnonzero(~sw)
    if released.size == 0:
        return math.nan  # stuck throughout the window: no shift onto it there
    return float(t[i0 + int(released[-1]) + 1] - start_s)


def shift_time_undefined(t: np.ndarray, stuck_on: np.ndarray, start_s: float, end_s: float = math.inf) -> str:
    """Why :func:`shift_time` over the same window is NaN, in words ("" when it is not)."""
    s = np.asarray(stuck_on) == 1.0
    if s.size == 0:
        return "the run recorded no samples"
    win, _ = window(np.asarray(t, dtype=float), start_s, end_s - start_s)
    sw, tw = s[win], np.asarray(t)[win]
    if not sw[-1]:
        return f"the clutch is not stuck at the window's end (t = {tw[-1]:.6g} s): it did not finish a shift there"
    if not (~sw).any():
        return f"the clutch is stuck throughout [{tw[0]:.6g}, {tw[-1]:.6g}] s: no shift onto it there"
    return ""


def flare(w_engine: np.ndarray, w_output: np.ndarray, win: slice, i0: int) -> float:
    """The most the engine speed rises above the off-going gear's synchronous speed in the window (rad/s).

    max(w_engine - w_output / r0) with r0 = w_output / w_engine at sample
    ``i0``; 0 when it never rises, NaN when either speed is 0 at ``i0``.
    """
    we, wo = w_engine[i0], w_output[i0]
    if we == 0.0 or wo == 0.0:
        return math.nan
    r0 = wo / we
    return max(0.0, float(np.max(w_engine[win] - w_output[win] / r0)))


def peak_abs(x: np.ndarray, win: slice) -> float:
    """max |x| in the window (the peak reaction torque, N m, of the reaction torque signal)."""
    return float(np.max(np.abs(x[win])))


def rms(x: np.ndarray, win: slice) -> float:
    """Root mean square of x in the window (the rms reaction torque, N m)."""
    v = x[win]
    return float(np.sqrt(np.mean(v * v)))


def clutch_energy(energy_off: np.ndarray, energy_on: np.ndarray, win: slice, i0: int) -> float:
    """Friction energy the off-going and on-coming clutches dissipate in the window (J)."""
    e = energy_off + energy_on
    return float(e[win][-1] - e[i0])


def tie_up_energy(stuck_off: np.ndarray, energy_on: np.ndarray, win: slice) -> float:
    """Friction energy the on-coming clutch dissipates in the window while the off-going one is still stuck (J).

    The sum of the on-coming clutch's energy increments over the steps that
    began with the off-going clutch stuck: both transmit torque and the
    gearbox brakes itself (the tie-up of a swap with too much overlap).
    """
    de = np.diff(energy_on[win])
    return float(np.sum(de[stuck_off[win][:-1] == 1.0]))


def max_abs(x: np.ndarray, win: slice) -> float:
    """max |x| in the window (the on-coming clutch's max slip, rad/s)."""
    return float(np.max(np.abs(x[win])))


__all__ = ["clutch_energy", "flare", "max_abs", "peak_abs", "rms", "shift_time", "shift_time_from_events",
           "shift_time_undefined", "tie_up_energy", "window"]
