"""The idle governor started settled: its integral at reset solved so that an engine starting at its idle speed
holds it (docs/powertrain.md, section 2).

The governor's torque is ``kp (idle - w) + ki g`` (``g``: its integral,
rad), clipped to the span between the drag and the full-load curves.  At
reset the engine stands at its idle speed against a load the governor must
carry: the stalled converter's impeller torque ``(w / K(0))^2``, the
engine's own drag curve, a PTO, the creep of a car without a converter.
Started with ``g = 0`` the engine dipped until the integral had built up
(the 8HP car standing in 1st: 700 -> 596 rpm in the first 0.1 s).  Here the reset solves
``g`` so that the engine's acceleration in the state the core starts from
is zero: that acceleration is affine in ``g`` for a fixed set of stuck
rows (slope ``ki`` over the inertia the engine drives), so a secant step
from two trial starts finds it and one or two more correct it should a row
slip or stick between them.  It runs at reset only (each trial is a start
of the core, a few hundred microseconds), never in the step.

Only an engine that starts within :data:`IDLE_BAND` of its idle speed is
settled: started above it (a run begun at speed) the governor has no
settled state (its integral winds down), and the integral starts at zero
as before.  Saturated (the load more than the governor's span, or less than
nothing), the integral is left at the limit it reaches.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .engine import Engine

IDLE_BAND = 0.01  # the engine starts within 1 % of its idle speed: the governor can be settled there
NEWTON_STEPS = 4  # secant steps after the first two trials (each a start of the core)
SETTLED_ACCEL = 1e-9  # rad/s^2 of the engine's member: settled


def governor_range(e: Engine, speed: float, pedal: float) -> tuple[float, float] | None:
    """The integral's values (rad) that keep the governor's torque within [0, span - pedal span] at ``speed``
    (rad/s); None: the governor cannot be settled there (no integral gain, or not at idle)."""
    if e.governor_ki <= 0.0 or abs(speed - e.idle_speed) > IDLE_BAND * e.idle_speed:
        return None
    full = float(np.interp(speed, *zip(*e.full_load)))
    drag = float(np.interp(speed, *zip(*e.drag)))
    room = (1.0 - pedal) * (full - drag)  # what the governor can add before the full-load curve caps it
    p = e.governor_kp * (e.idle_speed - speed)
    if room <= 0.0:
        return None
    return -p / e.governor_ki, (room - p) / e.governor_ki


def settled_integral(e: Engine, speed: float, pedal: float, accel_at: Callable[[float], float]) -> float | None:
    """The governor's integral (rad) at which the engine's acceleration ``accel_at(g)`` (rad/s^2, the core
    started with that integral) is zero, clipped to :func:`governor_range`; None: not settled (leave it 0)."""
    bounds = governor_range(e, speed, pedal)
    if bounds is None:
        return None
    lo, hi = bounds
    g0, g1 = lo + 0.25 * (hi - lo), lo + 0.75 * (hi - lo)  # inside the range: the governor not clipped
    a0, a1 = accel_at(g0), accel_at(g1)
    for _ in range(NEWTON_STEPS):
        if a1 == a0:
            break
        g0, a0, g1 = g1, a1, min(max(g1 - a1 * (g1 - g0) / (a1 - a0), lo), hi)
        a1 = accel_at(g1)
        if abs(a1) <= SETTLED_ACCEL or g1 in (lo, hi):
            break
    return g1


__all__ = ["IDLE_BAND", "governor_range", "settled_integral"]
