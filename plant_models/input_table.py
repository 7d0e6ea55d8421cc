"""The input histories of an offline run as tables its compiled loops evaluate, with the scenarios' sampling rule.

:class:`InputTable` holds one row per plant input (constant, piecewise
linear, piecewise constant, sine); :func:`write_inputs` evaluates the
inputs of step k into the plant's input ports inside a compiled loop (the
``inputs`` stage of the compiled offline run,
:mod:`plant_models.offline_stages`), with the sampling rule of
:mod:`server.offline.scenario` (the value just after t_k, and with a
first-order hold the rate (u(t_k+1 -) - u(t_k +)) / dt);
:func:`fill_inputs` is the same evaluation into a block of rows, which the
server's scenario playback steps through one tick at a time, so a lockstep
run and a compiled run write the same inputs bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .core.api import JIT, raw_f, raw_i
from .contract.columns import Columns

# -- input tables -------------------------------------------------------------------------------------
TAB_CONST = 0  # one value
TAB_LINEAR = 1  # piecewise linear through [time, value] points, last value held after the last point
TAB_STEPS = 2  # piecewise constant: a point holds until the next (integer inputs)
TAB_SINE = 3  # offset + amplitude sin(omega t + phase)
# columns of the int table, one row per plant input
INPUT_COLUMNS = Columns("an input's row of the kind table (int64)", (
    ("TI_KIND", "TAB_*"),
    ("TI_FIRST", "first entry of this input in the float tables"),
    ("TI_COUNT", "number of points (TAB_LINEAR / TAB_STEPS)"),
    ("TI_RATE", "1: the step's rate is the first-order hold's slope; 0: rate 0 (hold, constants, integers)"),
), count="TI_LEN")
globals().update(INPUT_COLUMNS.constants())  # TI_KIND .. TI_RATE; TI_LEN
# a sine's four numbers in the value table, from TI_FIRST
SINE_OFFSET, SINE_AMPLITUDE, SINE_OMEGA, SINE_PHASE = 0, 1, 2, 3


class InputTable:
    """The input histories of one run, one row per plant input, as arrays the compiled loop evaluates.

    ``kind`` [n_in, TI_LEN] int64 (see ``TI_*``); ``times`` / ``values``
    float64: the points of each input from its ``TI_FIRST`` (times in s,
    values in the input's unit); a constant is one value, a sine four
    (offset, amplitude, angular frequency rad/s, phase rad).  Every input
    starts as a constant at 0; the ``set_*`` methods replace one.
    """

    def __init__(self, n_in: int):
        self.n_in = n_in
        self._rows: list[tuple[int, list[float], list[float], int]] = [(TAB_CONST, [0.0], [0.0], 0)] * n_in

    def set_const(self, i: int, value: float) -> None:
        self._rows[i] = (TAB_CONST, [0.0], [float(value)], 0)

    def set_points(self, i: int, times, values, integer: bool, first_order_hold: bool) -> None:
        """Input ``i`` through [time, value] points: linear between them, or held (``integer``)."""
        kind = TAB_STEPS if integer else TAB_LINEAR
        rate = 1 if (first_order_hold and not integer) else 0
        self._rows[i] = (kind, [float(t) for t in times], [float(v) for v in values], rate)

    def set_sine(self, i: int, offset: float, amplitude: float, frequency_hz: float, phase_rad: float,
                 first_order_hold: bool) -> None:
        omega = 2.0 * math.pi * frequency_hz  # the same rounding as 2.0 * math.pi * f in Python
        self._rows[i] = (TAB_SINE, [0.0] * 4, [float(offset), float(amplitude), omega, float(phase_rad)],
                         1 if first_order_hold else 0)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(kind, times, values)`` for :func:`fill_inputs` and the compiled run's inputs stage."""
        kind = np.zeros((self.n_in, TI_LEN), dtype=np.int64)  # noqa: F821
        times: list[float] = []
        values: list[float] = []
        for i, (k, ts, vs, rate) in enumerate(self._rows):
            kind[i] = (k, len(values), len(vs), rate)
            times += ts
            values += vs
        return kind, np.array(times + [0.0]), np.array(values + [0.0])


# The evaluation below works on raw pointers (plant_models.core.api.raw_f/raw_i): called once per input and
# step from the compiled loops, array arguments cost reference counting at every call (a profile of the WLTC's
# closed loop: 4 % of its time in NRT_incref/NRT_decref).  ``kind`` is the int table row-major, TI_LEN a row.
@njit(**JIT)
def _search(times, first, count, t, right):
    """numpy's searchsorted over ``times[first:first + count]``: the first index whose time is > t
    (``right``) or >= t (not ``right``), counted from ``first``."""
    lo = 0
    hi = count
    while lo < hi:
        mid = (lo + hi) >> 1
        tm = times[first + mid]
        if tm < t or (right and tm == t):
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(**JIT)
def input_value(kind, times, values, i, t, right):
    """Input i at time t: u(t+) when ``right``, else u(t-).  Called in the compiled run."""
    k = kind[i * TI_LEN + TI_KIND]  # noqa: F821
    first = kind[i * TI_LEN + TI_FIRST]  # noqa: F821
    if k == TAB_CONST:
        return values[first]
    if k == TAB_SINE:
        return values[first + SINE_OFFSET] + values[first + SINE_AMPLITUDE] * math.sin(
            values[first + SINE_OMEGA] * t + values[first + SINE_PHASE])
    return _point_value(kind, times, values, i, t, _search(times, first, kind[i * TI_LEN + TI_COUNT], t, right))  # noqa: F821


@njit(**JIT)
def _point_value(kind, times, values, i, t, j):
    """Input i (a table of points) at time t, ``j`` the index :func:`_search` gave for t (the same rule for u(t+)
    and u(t-): only ``j`` differs)."""
    k = kind[i * TI_LEN + TI_KIND]  # noqa: F821
    first = kind[i * TI_LEN + TI_FIRST]  # noqa: F821
    n = kind[i * TI_LEN + TI_COUNT]  # noqa: F821
    if k == TAB_STEPS:  # the last point at or before t (strictly before for u(t-))
        j -= 1
        if j < 0:
            j = 0
        return values[first + j]
    if j == 0:
        return values[first]
    if j >= n:
        return values[first + n - 1]
    t0 = times[first + j - 1]
    t1 = times[first + j]
    v0 = values[first + j - 1]
    w = (t - t0) / (t1 - t0)
    return v0 + w * (values[first + j] - v0)


@njit(**JIT)
def write_inputs(kind, n_in, times, values, dt, k, df, at):
    """The inputs of step k into ``df[at:]`` (values, then the rates), all arguments raw pointers but the sizes.

    Returns whether any value or rate differs from what ``df`` held (bit for
    bit: a NaN always differs).  Called in the compiled run.
    """
    t0 = float(k) * dt
    t1 = (float(k) + 1.0) * dt
    changed = False
    for i in range(n_in):
        rate = kind[i * TI_LEN + TI_RATE] != 0  # noqa: F821
        if kind[i * TI_LEN + TI_KIND] == TAB_CONST:  # noqa: F821 what input_value gives, without the call
            v0 = values[kind[i * TI_LEN + TI_FIRST]]  # noqa: F821
            r = (v0 - v0) / dt if rate else 0.0
        else:
            v0 = input_value(kind, times, values, i, t0, True)
            r = (input_value(kind, times, values, i, t1, False) - v0) / dt if rate else 0.0
        changed = changed or not (df[at + i] == v0 and df[at + n_in + i] == r)
        df[at + i] = v0
        df[at + n_in + i] = r
    return changed


@njit(**JIT)
def _kept_start(kind, times, values, i, t):
    """Input i's u(t+), and whether it is a table of points with no point after t (then u is that value from t
    on, from either side)."""
    if kind[i * TI_LEN + TI_KIND] == TAB_SINE:  # noqa: F821
        return input_value(kind, times, values, i, t, True), False
    first = kind[i * TI_LEN + TI_FIRST]  # noqa: F821
    n = kind[i * TI_LEN + TI_COUNT]  # noqa: F821
    j = _search(times, first, n, t, True)  # the first point after t
    return _point_value(kind, times, values, i, t, j), j >= n


@njit(**JIT)
def _kept_end(kind, times, values, i, t):
    """Input i's u(t-); whether u(t+) is the same number (a sine: always; points: when no point lies at t, where
    u(t-) and u(t+) take the same segment); whether it is a table of points with every point before t (then u
    is that value from t on, from either side)."""
    if kind[i * TI_LEN + TI_KIND] == TAB_SINE:  # noqa: F821
        return input_value(kind, times, values, i, t, False), True, False
    first = kind[i * TI_LEN + TI_FIRST]  # noqa: F821
    n = kind[i * TI_LEN + TI_COUNT]  # noqa: F821
    j = _search(times, first, n, t, False)  # the first point at or after t
    return _point_value(kind, times, values, i, t, j), j >= n or times[first + j] != t, j >= n


@njit(**JIT)
def write_inputs_kept(kind, n_in, times, values, dt, k, df, at, kept, kept_k):
    """:func:`write_inputs`, with values kept from one step for the next ones.

    A first-order-hold input is evaluated at t_k (from the right) and at
    t_k+1 (from the left); step k + 1 evaluates it at t_k+1 from the right
    again: the same number unless a point of the table lies at t_k+1
    (:func:`_kept_end`; ``float(k) + 1.0 == float(k + 1)``, so the times are
    the same number), so it is kept for step k + 1.  A table of points past
    its last point holds its last value from both sides: it is kept for
    every step from there on, and not evaluated again.  ``kept[i]``,
    ``kept_k[i]`` (raw pointers, n_in each): the value kept, and the step it
    is for (>= 0), or -2 - s: every step from s on, or -1: none.  A value is
    a function of the table and the step alone, so any step may use one kept
    for it, in any call (the table's arrays never change under a stage).
    The same values, rates and return as :func:`write_inputs` bit for bit
    (tests/test_offline_fused.py).  Called in the compiled run.
    """
    t0 = float(k) * dt
    t1 = (float(k) + 1.0) * dt
    changed = False
    for i in range(n_in):
        rate = kind[i * TI_LEN + TI_RATE] != 0  # noqa: F821
        held = kept_k[i]
        if kind[i * TI_LEN + TI_KIND] == TAB_CONST:  # noqa: F821 what input_value gives, without the call
            v0 = values[kind[i * TI_LEN + TI_FIRST]]  # noqa: F821
            r = (v0 - v0) / dt if rate else 0.0
        elif held <= -2 and k >= -2 - held:  # past the last point: u(t_k+) = u(t_k+1 -) = the last value
            v0 = kept[i]
            r = (v0 - v0) / dt if rate else 0.0
        else:
            if held == k:
                v0 = kept[i]
            else:
                v0, past = _kept_start(kind, times, values, i, t0)
                if past:
                    kept[i], kept_k[i] = v0, -2 - k
            r = 0.0
            if rate:
                v1, same, past = _kept_end(kind, times, values, i, t1)
                r = (v1 - v0) / dt
                if past:
                    kept[i], kept_k[i] = v1, -2 - (k + 1)
                elif same:
                    kept[i], kept_k[i] = v1, k + 1
        changed = changed or not (df[at + i] == v0 and df[at + n_in + i] == r)
        df[at + i] = v0
        df[at + n_in + i] = r
    return changed


@njit(**JIT)
def fill_inputs(kind, times, values, dt, k0, U, R):
    """Rows ``k0 .. k0 + len(U) - 1`` of the input values ``U`` and rates ``R`` [steps, n_in].

    The evaluation of the compiled run's inputs stage, for the server's scenario playback,
    which applies a row per tick.
    """
    n_in = kind.shape[0]
    row = np.empty(2 * n_in)
    pk, pt, pv, prow = raw_i(kind), raw_f(times), raw_f(values), raw_f(row)
    for j in range(U.shape[0]):
        write_inputs(pk, n_in, pt, pv, dt, k0 + j, prow, 0)
        for i in range(n_in):
            U[j, i] = row[i]
            R[j, i] = row[n_in + i]


__all__ = ["InputTable", "fill_inputs", "input_value", "write_inputs", "write_inputs_kept"]
