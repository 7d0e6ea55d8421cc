"""Tooth wheels on shafts: the exact edge times of a speed sensor's pulse train within one tick.

A production TCU reads its input, intermediate and output speeds from pulse
trains (60, 36 or 18 teeth a turn) and measures the time between edges.  The
edges must come from a hardware timer (FPGA, microcontroller, DAQ counter):
at 10 000 rpm a 60-tooth wheel has a 100 us tooth period, and resolving 1 rpm
at 3000 rpm needs edges placed to about 0.1 us.  So the plant computes, each
tick, *when* each edge happens during the tick and hands those times (or the
frequency and phase they imply) to the hardware, which applies them without a
phase jump.

The motion inside a tick is the plant's own: the shaft speed goes from
``omega0`` at the tick's start to ``omega1`` at its end, at constant angular
acceleration (the same first-order hold the plant's inputs use), so

    theta(t) = theta0 + omega0 * t + alpha * t**2 / 2,   alpha = (omega1 - omega0) / dt,

and tooth ``k`` (of ``teeth``; ``phase_rad`` the angle of tooth 0) passes the
sensor where ``theta(t) = phase_rad + 2 * pi * k / teeth``: a quadratic with a
closed-form root, solved in its numerically stable form.  A shaft that
reverses inside the tick passes a tooth twice; both edges are reported, each
with its direction (for directional sensors).  Edges at ``t = 0`` belong to
this tick, edges at ``t = dt`` to the next one, so a tick boundary neither
drops nor repeats an edge.

Faults: a tooth marked absent in ``present`` (a missing tooth, or the gap of a
60-2 wheel) gives no edge; ``lost`` silences the whole wheel (signal loss).
An inductive (VR) sensor's amplitude grows with speed and shrinks with the air
gap: :func:`vr_amplitude_V`.

Called in the real-time loop: the kernels allocate nothing.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..core.api import JIT

TWO_PI = 2.0 * math.pi


@njit(**JIT)
def _roots_in_tick(a, b, c, dt):
    """The roots of ``a t^2 + b t + c = 0`` in ``[0, dt)``, ascending: ``(count, first, second)``.

    The stable form: ``q = -(b + sign(b) sqrt(b^2 - 4ac)) / 2``, roots ``q / a`` and ``c / q``, so that no
    root is the small difference of two large numbers.
    """
    if a == 0.0:
        if b != 0.0:
            t = -c / b
            if 0.0 <= t < dt:
                return 1, t, 0.0
        return 0, 0.0, 0.0
    disc = b * b - 4.0 * a * c
    if disc < 0.0:
        return 0, 0.0, 0.0
    sq = math.sqrt(disc)
    q = -0.5 * (b + sq) if b >= 0.0 else -0.5 * (b - sq)
    if q == 0.0:  # b == 0 and c == 0: a double root at t = 0
        return (1, 0.0, 0.0) if 0.0 < dt else (0, 0.0, 0.0)
    t1 = q / a
    t2 = c / q
    if t1 > t2:
        t1, t2 = t2, t1
    in1 = 0.0 <= t1 < dt
    in2 = 0.0 <= t2 < dt and t2 != t1
    if in1 and in2:
        return 2, t1, t2
    if in1:
        return 1, t1, 0.0
    if in2:
        return 1, t2, 0.0
    return 0, 0.0, 0.0


@njit(**JIT)
def wheel_edges(theta0_rad, omega0_rad_s, omega1_rad_s, dt_s, teeth, phase_rad, present, lost,
                edge_time_s, edge_tooth, edge_direction):
    """The edges a tooth wheel's sensor sees during one tick, in time order.

    Parameters
    ----------
    theta0_rad : float
        The shaft's angle at the tick's start, rad (any multiple of 2 pi).
    omega0_rad_s, omega1_rad_s : float
        Its speed at the tick's start and end, rad/s (constant acceleration between them).
    dt_s : float
        The tick, s.
    teeth : int
        Teeth a turn (the pitch is 2 pi / teeth).
    phase_rad : float
        The angle at which tooth 0 passes the sensor, rad.
    present : int64[teeth]
        1 for a tooth that is there, 0 for a gap or a missing-tooth fault.
    lost : bool
        Signal loss: no edge at all.
    edge_time_s, edge_tooth, edge_direction : arrays
        Filled with each edge's time from the tick's start (s), its tooth (0 .. teeth - 1) and the
        direction of rotation at that instant (+1 / -1); their length bounds the edges reported.

    Returns
    -------
    int
        The number of edges written; more than fit are not written, and ``-1 - written`` says so.
    """
    if lost or dt_s <= 0.0 or teeth <= 0:
        return 0
    alpha = (omega1_rad_s - omega0_rad_s) / dt_s
    a = 0.5 * alpha
    b = omega0_rad_s
    pitch = TWO_PI / teeth
    # the angles the shaft covers during [0, dt): its ends and, if it reverses inside, the turning point
    theta1 = theta0_rad + omega0_rad_s * dt_s + a * dt_s * dt_s
    lo = min(theta0_rad, theta1)
    hi = max(theta0_rad, theta1)
    if alpha != 0.0:
        t_turn = -omega0_rad_s / alpha
        if 0.0 < t_turn < dt_s:
            theta_turn = theta0_rad + omega0_rad_s * t_turn + a * t_turn * t_turn
            lo = min(lo, theta_turn)
            hi = max(hi, theta_turn)
    k_first = math.ceil((lo - phase_rad) / pitch)
    k_last = math.floor((hi - phase_rad) / pitch)
    capacity = edge_time_s.shape[0]
    n = 0
    overflow = False
    k = k_first
    while k <= k_last:
        tooth = k % teeth
        if present[tooth] != 0:
            level = phase_rad + k * pitch
            found, first, second = _roots_in_tick(a, b, theta0_rad - level, dt_s)
            for r in range(found):
                if n >= capacity:
                    overflow = True
                    break
                t = first if r == 0 else second
                edge_time_s[n] = t
                edge_tooth[n] = tooth
                edge_direction[n] = 1 if omega0_rad_s + alpha * t >= 0.0 else -1
                n += 1
        k += 1
    _sort_edges_by_time(edge_time_s, edge_tooth, edge_direction, n)
    return -1 - n if overflow else n


@njit(**JIT)
def _sort_edges_by_time(edge_time_s, edge_tooth, edge_direction, n):
    """The first ``n`` edges put in time order, in place: an insertion sort, as a tick holds a few edges and a
    reversing shaft interleaves two runs.  Called in the real-time loop."""
    for i in range(1, n):
        t = edge_time_s[i]
        tooth = edge_tooth[i]
        d = edge_direction[i]
        j = i - 1
        while j >= 0 and edge_time_s[j] > t:
            edge_time_s[j + 1] = edge_time_s[j]
            edge_tooth[j + 1] = edge_tooth[j]
            edge_direction[j + 1] = edge_direction[j]
            j -= 1
        edge_time_s[j + 1] = t
        edge_tooth[j + 1] = tooth
        edge_direction[j + 1] = d


@njit(**JIT)
def advance_angle(theta0_rad, omega0_rad_s, omega1_rad_s, dt_s):
    """The shaft's angle at the tick's end under the same constant acceleration, wrapped to [0, 2 pi)
    so that the wheel's angle keeps its resolution over hours of running."""
    theta1 = theta0_rad + 0.5 * (omega0_rad_s + omega1_rad_s) * dt_s
    return theta1 - TWO_PI * math.floor(theta1 / TWO_PI)


@njit(**JIT)
def vr_amplitude_V(omega_rad_s, volts_per_rad_s, air_gap_mm, nominal_gap_mm, decay_per_mm):
    """Peak voltage of an inductive (VR) sensor: proportional to speed, falling exponentially with the air
    gap beyond its nominal value (``exp(-decay_per_mm * (gap - nominal))``)."""
    return abs(omega_rad_s) * volts_per_rad_s * math.exp(-decay_per_mm * (air_gap_mm - nominal_gap_mm))


def wheel_teeth(teeth: int, gap: int = 0) -> np.ndarray:
    """The ``present`` array of a wheel: ``teeth`` positions, the last ``gap`` of them absent (a 60-2 wheel
    is ``wheel_teeth(60, 2)``)."""
    if teeth <= 0 or not 0 <= gap < teeth:
        raise ValueError(f"a tooth wheel needs teeth > 0 and 0 <= gap < teeth (got teeth={teeth}, gap={gap})")
    present = np.ones(teeth, dtype=np.int64)
    if gap:
        present[teeth - gap:] = 0
    return present


__all__ = ["wheel_edges", "advance_angle", "vr_amplitude_V", "wheel_teeth", "TWO_PI"]
