"""The oil-temperature sensor: an NTC thermistor read by the TCU through a pull-up divider.

A TCU reads its oil temperature as the voltage of an NTC to a pull-up
(about 3500 ohm at 25 C and 250 ohm at 110 C for a transmission sensor).  The
bench's resistance channel must present the NTC's resistance at the plant's
oil temperature.  Two closed forms, both standard:

* the beta model: ``R(T) = R_25 * exp(beta * (1/T - 1/T_25))`` (T in kelvin);
* Steinhart-Hart: ``1/T = A + B ln R + C (ln R)^3``, whose inverse ``R(T)``
  is a root of a depressed cubic in ``ln R``: Cardano's formula where it has
  one real root (B, C > 0, the usual case), the trigonometric form where a
  fit gave C < 0 (the root nearest the linear solution), then one Newton
  step.

:func:`steinhart_hart_fit` gives A, B, C through three (T, R) points, as a
sensor's data sheet lists them.  The divider: ``V = V_ref * R / (R + R_pullup)``.

Called in the real-time loop: the kernels allocate nothing.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..core.api import JIT

ZERO_C_K = 273.15  # 0 C in kelvin


@njit(**JIT)
def beta_resistance_ohm(temperature_C, r25_ohm, beta_K):
    """NTC resistance by the beta model, ohm."""
    t = temperature_C + ZERO_C_K
    return r25_ohm * math.exp(beta_K * (1.0 / t - 1.0 / (25.0 + ZERO_C_K)))


@njit(**JIT)
def steinhart_hart_resistance_ohm(temperature_C, a, b, c):
    """NTC resistance whose Steinhart-Hart temperature is ``temperature_C``, ohm (exact inverse)."""
    t = temperature_C + ZERO_C_K
    if c == 0.0:
        return math.exp((1.0 / t - a) / b)
    # c y^3 + b y + (a - 1/t) = 0 with y = ln R: y^3 + p y + q = 0
    p = b / c
    q = (a - 1.0 / t) / c
    half_q = 0.5 * q
    disc = half_q * half_q + p * p * p / 27.0
    if disc >= 0.0:  # one real root: Cardano
        root = math.sqrt(disc)
        u = -half_q + root
        v = -half_q - root
        y = math.copysign(abs(u) ** (1.0 / 3.0), u) + math.copysign(abs(v) ** (1.0 / 3.0), v)
    else:  # three real roots (c < 0): the trigonometric form, the root nearest the linear solution
        guess = (1.0 / t - a) / b
        m = 2.0 * math.sqrt(-p / 3.0)
        angle = math.acos(max(-1.0, min(1.0, 3.0 * q / (p * m))))
        y = m * math.cos(angle / 3.0)
        for k in range(1, 3):
            other = m * math.cos(angle / 3.0 - 2.0 * math.pi * k / 3.0)
            if abs(other - guess) < abs(y - guess):
                y = other
    # one Newton step on the cubic removes the rounding Cardano's cube roots leave
    f = a + b * y + c * y * y * y - 1.0 / t
    y -= f / (b + 3.0 * c * y * y)
    return math.exp(y)


def steinhart_hart_temperature_C(resistance_ohm: float, a: float, b: float, c: float) -> float:
    """The Steinhart-Hart temperature of a resistance, C (the forward form, for checks and for a TCU)."""
    y = math.log(resistance_ohm)
    return 1.0 / (a + b * y + c * y ** 3) - ZERO_C_K


def steinhart_hart_fit(points_C_ohm: list[tuple[float, float]]) -> tuple[float, float, float]:
    """A, B, C of the Steinhart-Hart equation through three (temperature C, resistance ohm) points."""
    if len(points_C_ohm) != 3:
        raise ValueError("Steinhart-Hart needs exactly three (temperature, resistance) points")
    rows = [[1.0, math.log(r), math.log(r) ** 3] for _, r in points_C_ohm]
    rhs = [1.0 / (t + ZERO_C_K) for t, _ in points_C_ohm]
    a, b, c = np.linalg.solve(np.array(rows), np.array(rhs))
    return float(a), float(b), float(c)


def beta_from_points(t1_C: float, r1_ohm: float, t2_C: float, r2_ohm: float) -> float:
    """The beta constant through two points, K."""
    return math.log(r1_ohm / r2_ohm) / (1.0 / (t1_C + ZERO_C_K) - 1.0 / (t2_C + ZERO_C_K))


@njit(**JIT)
def divider_voltage_V(resistance_ohm, pullup_ohm, reference_V):
    """The voltage the TCU reads across the NTC with a pull-up to ``reference_V``."""
    return reference_V * resistance_ohm / (resistance_ohm + pullup_ohm)


__all__ = ["beta_resistance_ohm", "steinhart_hart_resistance_ohm", "steinhart_hart_temperature_C",
           "steinhart_hart_fit", "beta_from_points", "divider_voltage_V", "ZERO_C_K"]
