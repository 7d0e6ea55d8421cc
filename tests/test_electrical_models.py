"""The electrical models against their closed forms (plant_models/electrical, docs/electrical.md).

Tooth wheels: edge times under constant angular acceleration against an
independent root finder to 1e-9 s over many ticks (no edge dropped or repeated
at a tick boundary), a shaft reversing inside a tick, a 60-tooth wheel from 25
to 10 000 rpm measured from edge periods on a 25 ns timer within 0.1 %, a
missing tooth removes exactly its edges.  Solenoids: the mean-current model
against a PWM-resolved simulation of the switched R-L circuit within 1 %, the
ripple formula against the simulated ripple.  NTC: the exact inverse of
Steinhart-Hart from 47 ohm to 100 kohm; range codes as the table says.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq

from plant_models.electrical.ntc import (beta_from_points, beta_resistance_ohm, divider_voltage_V,
                                         steinhart_hart_fit, steinhart_hart_resistance_ohm,
                                         steinhart_hart_temperature_C)
from plant_models.electrical.range_selector import INVALID, RangeTable, code_at, decode
from plant_models.electrical.solenoid import (coil_resistance_ohm, current_step, duty_for_current,
                                             pwm_current_step, ripple_pp_A)
from plant_models.electrical.tooth_wheel import TWO_PI, advance_angle, wheel_edges, wheel_teeth

RPM = TWO_PI / 60.0


def run_wheel(omega_of_t, t_end, dt, teeth, present=None, phase=0.0, lost_from=None):
    """Edges over a run of ticks: (absolute times, teeth, directions); the wheel's angle carried tick to tick."""
    present = wheel_teeth(teeth) if present is None else present
    cap = 4096
    times, teeth_out, dirs = np.empty(cap), np.empty(cap, np.int64), np.empty(cap, np.int64)
    all_t, all_k, all_d = [], [], []
    theta = 0.0
    n_ticks = int(round(t_end / dt))
    for i in range(n_ticks):
        w0, w1 = omega_of_t(i * dt), omega_of_t((i + 1) * dt)
        lost = lost_from is not None and i * dt >= lost_from
        n = wheel_edges(theta, w0, w1, dt, teeth, phase, present, lost, times, teeth_out, dirs)
        assert n >= 0, "edge buffer overflow"
        all_t.extend(i * dt + times[:n])
        all_k.extend(teeth_out[:n])
        all_d.extend(dirs[:n])
        theta = advance_angle(theta, w0, w1, dt)
    return np.array(all_t), np.array(all_k), np.array(all_d)


def reference_edges(theta_of_t, t_end, teeth, phase=0.0):
    """Every time theta(t) crosses a tooth level in [0, t_end), by bracketing and brentq (monotonic theta)."""
    pitch = TWO_PI / teeth
    k0 = math.ceil((theta_of_t(0.0) - phase) / pitch)
    k1 = math.floor((theta_of_t(t_end) - phase) / pitch)
    out = []
    for k in range(k0, k1 + 1):
        level = phase + k * pitch
        if theta_of_t(t_end) == level:
            continue  # at t_end exactly: the next run's edge
        out.append(brentq(lambda t: theta_of_t(t) - level, 0.0, t_end, xtol=1e-15, rtol=4 * np.finfo(float).eps))
    return np.array(out)


def test_edge_times_under_constant_acceleration_equal_the_closed_form():
    w0, alpha = 50.0, 300.0  # rad/s, rad/s^2: ~480 rpm to ~3300 rpm in a second
    dt, t_end, teeth = 1e-3, 1.0, 60
    times, k, d = run_wheel(lambda t: w0 + alpha * t, t_end, dt, teeth)
    ref = reference_edges(lambda t: w0 * t + 0.5 * alpha * t * t, t_end, teeth)
    assert len(times) == len(ref)  # no edge dropped or repeated at a tick boundary
    assert np.max(np.abs(times - ref)) < 1e-9
    assert np.all(d == 1) and np.all(np.diff(times) > 0)
    assert times[0] == 0.0 and np.array_equal(k, np.arange(len(ref)) % teeth)  # tooth 0 sits at the sensor at t = 0


def test_a_shaft_reversing_inside_a_tick_passes_a_tooth_twice_with_both_directions():
    teeth = 60
    pitch = TWO_PI / teeth
    theta0 = 0.6 * pitch  # between tooth 0 and tooth 1
    dt = 1e-3
    w0 = 2.0 * pitch / dt  # turns back at mid-tick, half a pitch on (past tooth 1), and comes back
    w1 = -w0
    times, tooth, direction = np.empty(8), np.empty(8, np.int64), np.empty(8, np.int64)
    n = wheel_edges(theta0, w0, w1, dt, teeth, 0.0, wheel_teeth(teeth), False, times, tooth, direction)
    alpha = (w1 - w0) / dt
    # tooth 1 at angle pitch: theta0 + w0 t + alpha t^2/2 = pitch
    a, b, c = 0.5 * alpha, w0, theta0 - pitch
    disc = math.sqrt(b * b - 4 * a * c)
    expected = sorted([(-b + disc) / (2 * a), (-b - disc) / (2 * a)])
    assert n == 2 and list(tooth[:2]) == [1, 1] and list(direction[:2]) == [1, -1]
    assert np.allclose(times[:2], expected, rtol=0, atol=1e-15)


@pytest.mark.parametrize("rpm", [25.0, 100.0, 800.0, 3000.0, 6000.0, 10000.0])
def test_a_60_tooth_wheel_measured_from_edge_periods_within_0_1_percent(rpm):
    """A TCU's measurement: edges time-stamped on a 25 ns timer, speed from the span of the edges of the
    last 10 ms (or, below one edge per 10 ms, from the last edge period)."""
    teeth, dt = 60, 1e-3
    omega = rpm * RPM
    tooth_period = TWO_PI / teeth / omega
    t_end = max(0.05, 3.0 * tooth_period)
    times, _, _ = run_wheel(lambda t: omega, t_end, dt, teeth)
    stamped = np.round(times / 25e-9) * 25e-9
    window = stamped[stamped >= stamped[-1] - 0.01]
    if len(window) < 2:
        window = stamped[-2:]
    measured = (len(window) - 1) * (TWO_PI / teeth) / (window[-1] - window[0])
    assert abs(measured / omega - 1.0) < 1e-3


def test_a_missing_tooth_removes_exactly_its_edges_and_signal_loss_removes_all():
    teeth, dt = 36, 1e-3
    omega = 2000 * RPM
    full_t, full_k, _ = run_wheel(lambda t: omega, 0.05, dt, teeth)
    present = wheel_teeth(teeth)
    present[7] = 0
    cut_t, cut_k, _ = run_wheel(lambda t: omega, 0.05, dt, teeth, present=present)
    assert np.array_equal(cut_t, full_t[full_k != 7]) and np.array_equal(cut_k, full_k[full_k != 7])
    assert np.sum(full_k == 7) > 0
    lost_t, _, _ = run_wheel(lambda t: omega, 0.05, dt, teeth, lost_from=0.02)
    assert np.array_equal(lost_t, full_t[full_t < 0.02])


def test_a_60_minus_2_wheel_has_its_gap_and_a_full_buffer_says_so():
    present = wheel_teeth(60, 2)
    assert present.sum() == 58 and present[-2:].sum() == 0
    times, tooth, direction = np.empty(3), np.empty(3, np.int64), np.empty(3, np.int64)
    n = wheel_edges(0.0, 6000 * RPM, 6000 * RPM, 1e-3, 60, 0.0, wheel_teeth(60), False, times, tooth, direction)
    assert n == -1 - 3  # 6 edges in the tick, 3 fit
    with pytest.raises(ValueError, match="gap < teeth"):
        wheel_teeth(60, 60)


def pwm_simulation(duty, v, r, l_h, f_pwm, i0, t_end, center=False):
    """The switched R-L circuit written out phase by phase (piecewise exponentials), PWM periods starting at
    t = 0: the current at every period's start and its mean over each period."""
    tau = l_h / r
    period = 1.0 / f_pwm
    on = duty * period
    off_before = 0.5 * (period - on) if center else 0.0
    phases = ((off_before, 0.0), (on, v), (period - on - off_before, 0.0))
    i = i0
    starts, means = [], []
    for _ in range(int(round(t_end * f_pwm))):
        starts.append(i)
        total = 0.0
        for phase_len, volts in phases:
            inf = volts / r
            total += inf * phase_len + (i - inf) * tau * (1 - math.exp(-phase_len / tau))
            i = inf + (i - inf) * math.exp(-phase_len / tau)
        means.append(total / period)
    return np.array(starts), np.array(means), i


@pytest.mark.parametrize("center", [False, True])
def test_pwm_current_over_a_duty_step_equals_the_switched_rl_circuit(center):
    r, l_h, v, f, dt = 5.0, 0.025, 13.5, 1000.0, 1e-3
    duty = 0.3
    i, phase, ends, means = 0.0, 0.0, [], []
    for _ in range(60):
        i, mean, phase = pwm_current_step(i, phase, duty, v, r, l_h, f, center, dt)
        ends.append(i)
        means.append(mean)
    starts, sim_means, last = pwm_simulation(duty, v, r, l_h, f, 0.0, 0.06, center=center)
    assert np.allclose(ends[:-1], starts[1:], rtol=1e-12, atol=0) and ends[-1] == pytest.approx(last, rel=1e-12)
    assert np.allclose(means, sim_means, rtol=1e-12, atol=0)
    # a tick of 0.5 ms at 1 kHz: the PWM's phase carries over the tick boundary
    i2, phase2, halves = 0.0, 0.0, []
    for _ in range(120):
        i2, mean, phase2 = pwm_current_step(i2, phase2, duty, v, r, l_h, f, center, 0.5e-3)
        halves.append(mean)
    assert np.allclose(0.5 * (np.array(halves[0::2]) + np.array(halves[1::2])), sim_means, rtol=1e-12, atol=1e-15)


def test_the_mean_current_model_follows_a_duty_step_within_1_percent():
    """The R-L closed form at the mean voltage against the exact center-aligned PWM current, tick by tick,
    over a duty step 0 -> 0.3 -> 0.8 (a coil of 5 ohm, 25 mH at 1 kHz)."""
    r, l_h, v, f, dt = 5.0, 0.025, 13.5, 1000.0, 1e-3
    i_avg, i_pwm, phase = 0.0, 0.0, 0.0
    worst = 0.0
    for k in range(150):
        duty = 0.3 if k < 75 else 0.8
        i_avg, mean_avg = current_step(i_avg, duty, v, r, l_h, dt)
        i_pwm, mean_pwm, phase = pwm_current_step(i_pwm, phase, duty, v, r, l_h, f, True, dt)
        worst = max(worst, abs(mean_avg - mean_pwm))
    final = 0.8 * v / r
    assert worst < 0.01 * final
    assert mean_avg == pytest.approx(final, rel=1e-6) and mean_pwm == pytest.approx(final, rel=1e-6)
    tau = l_h / r
    end, _ = current_step(0.0, 0.3, v, r, l_h, 5e-3)  # the closed form itself
    assert end == pytest.approx(0.3 * v / r * (1 - math.exp(-5e-3 / tau)), rel=1e-12)


def test_pwm_ripple_equals_the_simulated_steady_state_ripple():
    r, l_h, v, f, duty = 5.0, 0.01, 13.5, 1000.0, 0.45
    starts, _, _ = pwm_simulation(duty, v, r, l_h, f, duty * v / r, 0.2)
    i_low = starts[-1]  # at steady state an edge-aligned period starts at the minimum
    tau = l_h / r
    i_high = v / r + (i_low - v / r) * math.exp(-duty / f / tau)
    assert ripple_pp_A(duty, v, r, l_h, f) == pytest.approx(i_high - i_low, rel=1e-6)
    assert ripple_pp_A(0.0, v, r, l_h, f) == 0.0


def test_coil_resistance_and_duty_for_a_current():
    assert coil_resistance_ohm(5.0, 20.0) == 5.0
    assert coil_resistance_ohm(5.0, 120.0) == pytest.approx(5.0 * 1.393)
    assert duty_for_current(1.0, 13.5, 5.0) == pytest.approx(5.0 / 13.5)
    assert duty_for_current(5.0, 13.5, 5.0) == 1.0


def test_ntc_inverse_of_steinhart_hart_from_47_ohm_to_100_kohm():
    # a transmission oil sensor: about 3500 ohm at 25 C and 250 ohm at 110 C
    a, b, c = steinhart_hart_fit([(-40.0, 100_000.0), (25.0, 3500.0), (110.0, 250.0)])
    for r in np.geomspace(47.0, 100_000.0, 60):
        t = steinhart_hart_temperature_C(r, a, b, c)
        assert steinhart_hart_resistance_ohm(t, a, b, c) == pytest.approx(r, rel=1e-9)
    assert steinhart_hart_resistance_ohm(25.0, a, b, c) == pytest.approx(3500.0, rel=1e-9)
    beta = beta_from_points(25.0, 3500.0, 110.0, 250.0)
    assert beta_resistance_ohm(110.0, 3500.0, beta) == pytest.approx(250.0, rel=1e-12)
    assert beta_resistance_ohm(25.0, 3500.0, beta) == pytest.approx(3500.0, rel=1e-15)
    assert divider_voltage_V(1000.0, 1000.0, 5.0) == 2.5


def test_range_codes_and_transitions_as_the_table_says():
    table = RangeTable()
    codes, transitions, window = table.arrays()
    decode_table = table.decode_table()
    p, r, n = table.index("P"), table.index("R"), table.index("N")
    assert code_at(p, p, 0.0, codes, transitions, window) == 0b1100
    assert code_at(p, r, 0.2, codes, transitions, window) == 0b1100
    assert code_at(p, r, 0.5, codes, transitions, window) == 0b0100
    assert code_at(r, p, 0.5, codes, transitions, window) == 0b0100  # the same contacts either way
    assert code_at(r, n, 0.9, codes, transitions, window) == 0b0011
    assert decode(0b0100, decode_table) == -2 - p and decode(0b0011, decode_table) == n
    # a single broken contact never reads as another position
    for k, code in enumerate(table.codes):
        for bit in range(4):
            got = decode(code ^ (1 << bit), decode_table)
            assert got < 0 or got == k
    assert decode(0b0111, decode_table) == INVALID
    with pytest.raises(ValueError, match="must differ"):
        RangeTable(codes=(1, 1, 2, 3, 4, 5, 6))
    with pytest.raises(ValueError, match="no position 'X'"):
        table.index("X")
