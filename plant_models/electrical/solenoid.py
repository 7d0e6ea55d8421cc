"""Pressure-control solenoids as a TCU drives them: PWM voltage on an R-L coil, current into the valve map.

A production TCU drives each clutch's pressure-control solenoid with PWM
(about 5 ohm, near 1 kHz, 0-1.1 A) and measures the current itself.  The
valve then sets a pressure from the *current* (the valve map the plant's
hydraulics already hold: the ``i_<clutch>`` inputs).  The electrical side is
an R-L circuit driven by the supply voltage at the PWM duty ``D``:

    L di/dt = D(t) * V_supply - R(T_coil) * i,     R(T) = R_20 * (1 + alpha_cu * (T - 20 C)).

With the PWM known (frequency, duty, and where the period starts) the
current is exact in closed form, one exponential per on or off phase:
:func:`pwm_current_step` follows the phases through the tick and carries the
PWM's phase from tick to tick (edge-aligned: on at the period's start;
center-aligned: the on-phase in the middle of the period, as many TCUs drive
their solenoids).  Where only the mean voltage ``D * V`` is known (a device
that measures duty or mean current, not the edges) the mean current obeys
the same equation with that voltage, exact at a held duty:

    i(t) = i_inf + (i_0 - i_inf) * exp(-t / tau),   i_inf = D * V / R,   tau = L / R,

its mean over the tick ``i_inf + (i_0 - i_inf) * tau / dt * (1 - exp(-dt / tau))`` (what the TCU's own
current measurement averages); for center-aligned PWM it differs from the exact tick mean by a fraction
of a percent of the current at ``f_pwm * tau >= 5`` (tests/test_electrical_models.py).  The PWM ripple
around the mean at steady state (peak to peak)

    di_pp = V / R * (1 - e^{-D T / tau}) * (1 - e^{-(1 - D) T / tau}) / (1 - e^{-T / tau}),   T = 1 / f_pwm.

Called in the real-time loop: the kernels allocate nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from numba import njit

from ..core.api import JIT

ALPHA_COPPER_PER_K = 0.00393  # temperature coefficient of copper's resistance at 20 C, 1/K


@dataclass(frozen=True)
class Solenoid:
    """A pressure-control solenoid's coil (frozen parameters)."""

    resistance_20C_ohm: float = 5.0  # coil resistance at 20 C
    inductance_H: float = 0.01  # coil inductance
    pwm_frequency_Hz: float = 1000.0  # the TCU's PWM frequency (for the ripple)
    max_current_A: float = 1.1  # the valve map's range ends here

    def __post_init__(self):
        for name in ("resistance_20C_ohm", "inductance_H", "pwm_frequency_Hz", "max_current_A"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0.0):
                raise ValueError(f"solenoid: {name} must be a positive finite number (got {value!r})")


@njit(**JIT)
def coil_resistance_ohm(resistance_20C_ohm, coil_temperature_C):
    """The coil's resistance at its temperature (copper), ohm."""
    return resistance_20C_ohm * (1.0 + ALPHA_COPPER_PER_K * (coil_temperature_C - 20.0))


@njit(**JIT)
def current_step(current_A, duty, supply_V, resistance_ohm, inductance_H, dt_s):
    """The coil's mean current at the end of a tick at a held duty, and its mean over the tick: ``(end, mean)``.

    Exact for the mean-voltage R-L equation (module docstring); ``duty`` is clipped to [0, 1].
    """
    d = min(max(duty, 0.0), 1.0)
    i_inf = d * supply_V / resistance_ohm
    tau = inductance_H / resistance_ohm
    x = dt_s / tau
    decay = math.exp(-x)
    end = i_inf + (current_A - i_inf) * decay
    # (1 - e^-x) / x, with its series where x is small (no cancellation)
    frac = -math.expm1(-x) / x if x > 1e-8 else 1.0 - 0.5 * x
    mean = i_inf + (current_A - i_inf) * frac
    return end, mean


@njit(**JIT)
def _phase(current_A, volts, resistance_ohm, tau_s, length_s):
    """One PWM phase at a constant voltage: the current at its end and the integral of the current over it."""
    i_inf = volts / resistance_ohm
    decay = -math.expm1(-length_s / tau_s)  # 1 - exp(-length / tau), without cancellation
    integral = i_inf * length_s + (current_A - i_inf) * tau_s * decay
    return i_inf + (current_A - i_inf) * (1.0 - decay), integral


@njit(**JIT)
def pwm_current_step(current_A, pwm_phase_s, duty, supply_V, resistance_ohm, inductance_H, pwm_frequency_Hz,
                     center_aligned, dt_s):
    """The coil current through a tick of PWM at a held duty, exact: ``(end current, mean current, phase)``.

    ``pwm_phase_s`` is how far into its period the PWM is at the tick's start (0 .. 1/f), and the returned
    phase the same at the tick's end.  Edge-aligned PWM is on from the period's start for ``duty / f``;
    center-aligned PWM is on in the middle of the period.  ``duty`` is clipped to [0, 1].
    """
    d = min(max(duty, 0.0), 1.0)
    period = 1.0 / pwm_frequency_Hz
    tau = inductance_H / resistance_ohm
    on_start = 0.5 * (1.0 - d) * period if center_aligned else 0.0
    on_end = on_start + d * period
    t = 0.0
    phase = pwm_phase_s
    i = current_A
    integral = 0.0
    while t < dt_s:
        if phase >= period:
            phase -= period
        # the next switching instant within the period (always after ``phase``), and the voltage until then
        if phase < on_start:
            until, volts = on_start, 0.0
        elif phase < on_end:
            until, volts = on_end, supply_V
        else:
            until, volts = period, 0.0
        length = min(until - phase, dt_s - t)
        i, part = _phase(i, volts, resistance_ohm, tau, length)
        integral += part
        t += length
        phase += length
    if phase >= period:
        phase -= period
    return i, integral / dt_s, phase


@njit(**JIT)
def ripple_pp_A(duty, supply_V, resistance_ohm, inductance_H, pwm_frequency_Hz):
    """Peak-to-peak PWM ripple of the coil current at steady state, A (module docstring)."""
    d = min(max(duty, 0.0), 1.0)
    if d == 0.0 or d == 1.0:
        return 0.0
    tau = inductance_H / resistance_ohm
    period = 1.0 / pwm_frequency_Hz
    on = -math.expm1(-d * period / tau)
    off = -math.expm1(-(1.0 - d) * period / tau)
    return supply_V / resistance_ohm * on * off / (-math.expm1(-period / tau))


@njit(**JIT)
def duty_for_current(current_A, supply_V, resistance_ohm):
    """The duty whose steady current is ``current_A`` (what a TCU's current controller converges to)."""
    if supply_V <= 0.0:
        return 0.0
    return min(max(current_A * resistance_ohm / supply_V, 0.0), 1.0)


__all__ = ["Solenoid", "coil_resistance_ohm", "current_step", "pwm_current_step", "ripple_pp_A", "duty_for_current",
           "ALPHA_COPPER_PER_K"]
