"""The device adapter's compiled tick: the electrical models between the plant's ports and a device's pins.

Two kernels, each one call a tick with the arena's buffer (:mod:`.arena`),
its members' byte offsets (one past the last member too) and the plant's
data buffer ``df``:

* :func:`write_stage`, after the plant's step: each tooth wheel's edges over
  the tick just simulated (its speed at the tick's start and end, constant
  acceleration between, the wheel's angle carried on), the NTC's resistance
  at the oil temperature, the range code of the lever (its transition code
  while it moves) and the supply voltage, into the targets; with an
  in-process ``sim`` device, also the pins the TCU sees, pin faults applied
  (:func:`io_adapters.devices.sim._apply_targets_kernel`);
* :func:`read_stage`, before the plant's step: with a ``sim`` device, what
  the TCU drives seen through the pin faults; then each solenoid's coil
  current from the measured PWM duty (the mean-voltage R-L model at the
  supply voltage and the coil's temperature, its mean over the tick) or the
  measured mean current, clipped to the input's range (the valve map's
  currents), into the plant's input.

The arena's member order is :data:`MEMBERS`; the integer and float settings
are the ``I_*`` and ``X_*`` slots of its first two members.  The kernels see
the buffer through five typed raw pointers made once a call (float64,
int64, int32, uint8, int8; the core's ``raw_f``, as its kernels do) and
address each member by its offset: a view a member would cost about 25 ns
each (the arrays' reference counts), several microseconds a tick in all,
and a pointer's index has no negative-index fix-up.  Array slices are made
only for the models that take arrays (a wheel's teeth and edge scratch, the
range table).  The sim device's pin table (the module docstring of
:mod:`io_adapters.devices.sim`) is applied here as its own kernels apply
it; ``tests/test_device_adapter.py`` checks the two agree bit for bit.  A
tick number below the last one seen (a reset to t = 0) starts the models
afresh: wheel angles at 0, coil currents at the plant's inputs.  Allocates nothing, looks
nothing up.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from plant_models.core.api import raw_f
from plant_models.electrical.ntc import beta_resistance_ohm
from plant_models.electrical.range_selector import code_at
from plant_models.electrical.solenoid import coil_resistance_ohm, current_step
from plant_models.electrical.tooth_wheel import advance_angle, wheel_edges

from .channels import PIN_OK, PIN_OPEN, PIN_SHORT_BAT, PIN_SHORT_GND, PULSE_EDGES
from .sim import F_ANALOG_IN, F_ANALOG_OUT, F_DIGITAL_IN, F_DIGITAL_OUT, F_PULSE, F_PWM, F_RESISTANCE

MEMBERS = (
    # the adapter's settings and model state
    "ints", "misc", "wheel_i", "wheel_f", "present", "sol_i", "sol_f", "edge_t", "edge_tooth", "edge_dir", "codes",
    "transitions", "window", "count",
    # the targets the stage writes (what the device puts out next tick)
    "t_mode", "t_edges", "t_count", "t_freq", "t_phase", "t_ohm", "t_dig", "t_volt", "t_fault",
    # the measurements the stage reads (the sim device's own, or a copy of another device's)
    "m_duty", "m_current", "m_edges_out", "m_dig", "m_volt",
    # the sim device's pins and what the TCU drives (unused with another device)
    "p_mode", "p_edges", "p_count", "p_freq", "p_phase", "p_ohm", "p_dig", "p_volt", "p_fault", "p_level",
    "p_switch", "p_row", "p_slot", "p_clipped", "d_duty", "d_current", "d_edges_out", "d_dig", "d_volt",
)
(S_INTS, S_MISC, S_WHEEL_I, S_WHEEL_F, S_PRESENT, S_SOL_I, S_SOL_F, S_EDGE_T, S_EDGE_TOOTH, S_EDGE_DIR, S_CODES,
 S_TRANS, S_WINDOW, S_COUNT, T_MODE, T_EDGES, T_COUNT, T_FREQ, T_PHASE, T_OHM, T_DIG, T_VOLT, T_FAULT, M_DUTY,
 M_CURRENT, M_EDGES_OUT, M_DIG, M_VOLT, P_MODE, P_EDGES, P_COUNT, P_FREQ, P_PHASE, P_OHM, P_DIG, P_VOLT, P_FAULT,
 P_LEVEL, P_SWITCH, P_ROW, P_SLOT, P_CLIPPED, D_DUTY, D_CURRENT, D_EDGES_OUT, D_DIG, D_VOLT) = range(len(MEMBERS))

# ints: counts, dimensions, plant offsets and indices
(I_N_PULSE, I_N_SOL, I_HAS_NTC, I_N_BITS, I_HAS_SUPPLY, I_WIDTH, I_MAX_TEETH, I_FAULT_W, I_IN_OFF, I_OUT_OFF, I_N_IN,
 I_TEMP_OUT, I_RANGE_POS, I_RANGE_TARGET, I_LAST_TICK, I_FUSED, I_N_SWITCH, I_N_DIN, I_N_AIN, N_INTS) = range(20)
# misc floats
X_DT, X_SUPPLY_V, X_OIL_C, X_R25, X_BETA, X_TRAVEL, X_TRAVEL_PER_S, N_MISC = range(8)
# columns of wheel_i, wheel_f, sol_i, sol_f
W_SHAFT, W_TEETH, W_LOST, N_WHEEL_I = range(4)
W_SCALE, W_PHASE, W_THETA, W_OMEGA, N_WHEEL_F = range(5)
SI_INPUT, SI_MEASURE, N_SOL_I = range(3)
SF_R20, SF_L, SF_I, SF_LO, SF_HI, N_SOL_F = range(6)
# count: ticks written, edges the model found beyond a channel's max_edges, reads
C_WRITES, C_EDGE_OVERFLOW, C_READS, N_COUNT = range(4)
N_FAULT_ROWS = 7  # rows of the sim device's PinView.fault



_ptr = raw_f  # the core's typed data pointer of a contiguous array; generic over the dtype, so every view takes it


@njit(cache=True, inline="always")
def _at(off, k, itemsize):
    """Member ``k``'s first element in a view of ``itemsize`` bytes."""
    return off[k] // itemsize


@njit(cache=True)
def _oil_temperature_C(I, F, off, df):
    ints = _at(off, S_INTS, 8)
    k = I[ints + I_TEMP_OUT]
    return df[I[ints + I_OUT_OFF] + k] if k >= 0 else F[_at(off, S_MISC, 8) + X_OIL_C]


@njit(cache=True)
def _start_wheels(I, F, off, df):
    """Wheels at angle 0 at the shafts' speeds now (before the first step)."""
    ints, wi, wf = _at(off, S_INTS, 8), _at(off, S_WHEEL_I, 8), _at(off, S_WHEEL_F, 8)
    for w in range(I[ints + I_N_PULSE]):
        F[wf + w * N_WHEEL_F + W_THETA] = 0.0
        F[wf + w * N_WHEEL_F + W_OMEGA] = (df[I[ints + I_OUT_OFF] + I[wi + w * N_WHEEL_I + W_SHAFT]]
                                           * F[wf + w * N_WHEEL_F + W_SCALE])


@njit(cache=True)
def _wheels(I, F, W, U, Fa, Ia, off, df):
    ints, misc = _at(off, S_INTS, 8), _at(off, S_MISC, 8)
    n_pulse, width, max_teeth = I[ints + I_N_PULSE], I[ints + I_WIDTH], I[ints + I_MAX_TEETH]
    wi, wf, present = _at(off, S_WHEEL_I, 8), _at(off, S_WHEEL_F, 8), _at(off, S_PRESENT, 8)
    n_scratch = (off[S_EDGE_T + 1] - off[S_EDGE_T]) // 8  # the member after it starts where it ends
    et = Fa[_at(off, S_EDGE_T, 8):_at(off, S_EDGE_T, 8) + n_scratch]
    etooth = Ia[_at(off, S_EDGE_TOOTH, 8):_at(off, S_EDGE_TOOTH, 8) + n_scratch]
    edir = Ia[_at(off, S_EDGE_DIR, 8):_at(off, S_EDGE_DIR, 8) + n_scratch]
    edges, count, mode = _at(off, T_EDGES, 8), _at(off, T_COUNT, 4), _at(off, T_MODE, 1)
    cnt = _at(off, S_COUNT, 8)
    dt = F[misc + X_DT]
    out_off = I[ints + I_OUT_OFF]
    for w in range(n_pulse):
        a, b = wi + w * N_WHEEL_I, wf + w * N_WHEEL_F
        omega1 = df[out_off + I[a + W_SHAFT]] * F[b + W_SCALE]
        omega0 = F[b + W_OMEGA]
        teeth = I[a + W_TEETH]
        row = present + w * max_teeth
        n = wheel_edges(F[b + W_THETA], omega0, omega1, dt, teeth, F[b + W_PHASE], Ia[row:row + teeth],
                        I[a + W_LOST] != 0, et, etooth, edir)
        if n < 0:
            n = -1 - n
            I[cnt + C_EDGE_OVERFLOW] += 1
        if n > width:
            I[cnt + C_EDGE_OVERFLOW] += n - width
            n = width
        for j in range(n):
            I[edges + w * width + j] = int(round(et[j] * 1e9))
        W[count + w] = n
        U[mode + w] = PULSE_EDGES
        F[b + W_THETA] = advance_angle(F[b + W_THETA], omega0, omega1, dt)
        F[b + W_OMEGA] = omega1


@njit(cache=True)
def _levels(I, F, U, Fa, Ia, off, df):
    """NTC, range code, supply into the targets."""
    ints, misc = _at(off, S_INTS, 8), _at(off, S_MISC, 8)
    if I[ints + I_HAS_NTC]:
        F[_at(off, T_OHM, 8)] = beta_resistance_ohm(_oil_temperature_C(I, F, off, df), F[misc + X_R25],
                                                    F[misc + X_BETA])
    n_bits = I[ints + I_N_BITS]
    if n_bits:
        pos, target = I[ints + I_RANGE_POS], I[ints + I_RANGE_TARGET]
        if target != pos:  # the lever travels; it reads the transition code inside the window
            F[misc + X_TRAVEL] += F[misc + X_DT] * F[misc + X_TRAVEL_PER_S]
            if F[misc + X_TRAVEL] >= 1.0:
                I[ints + I_RANGE_POS] = target
                pos = target
                F[misc + X_TRAVEL] = 0.0
        c, t, w = _at(off, S_CODES, 8), _at(off, S_TRANS, 8), _at(off, S_WINDOW, 8)
        n_codes = (off[S_CODES + 1] - off[S_CODES]) // 8
        code = code_at(pos, target, F[misc + X_TRAVEL], Ia[c:c + n_codes], Ia[t:t + n_codes - 1], Fa[w:w + 2])
        dig = _at(off, T_DIG, 1)
        for k in range(n_bits):
            U[dig + k] = (code >> k) & 1
    if I[ints + I_HAS_SUPPLY]:
        F[_at(off, T_VOLT, 8)] = F[misc + X_SUPPLY_V]


@njit(cache=True)
def _fault_table(I, U, off):
    """The sim device's pin states per channel (PinView.fault) from the fault switches as they are set now."""
    ints = _at(off, S_INTS, 8)
    fw = I[ints + I_FAULT_W]
    table, switch = _at(off, P_FAULT, 1), _at(off, T_FAULT, 1)
    row, slot = _at(off, P_ROW, 8), _at(off, P_SLOT, 8)
    for j in range(7 * fw):
        U[table + j] = PIN_OK
    for j in range(I[ints + I_N_SWITCH]):
        U[table + I[row + j] * fw + I[slot + j]] = U[switch + j]
        U[_at(off, P_SWITCH, 1) + j] = U[switch + j]


@njit(cache=True)
def _pins(I, F, W, U, S, off):
    """The sim device's pins: the targets with the pin faults applied (its ``apply_targets``)."""
    ints, misc = _at(off, S_INTS, 8), _at(off, S_MISC, 8)
    fw, width, supply = I[ints + I_FAULT_W], I[ints + I_WIDTH], F[misc + X_SUPPLY_V]
    table = _at(off, P_FAULT, 1)
    _fault_table(I, U, off)
    t_edges, p_edges = _at(off, T_EDGES, 8), _at(off, P_EDGES, 8)
    for w in range(I[ints + I_N_PULSE]):
        n = W[_at(off, T_COUNT, 4) + w]
        if n > width:
            I[_at(off, P_CLIPPED, 8)] += n - width
            n = width
        n = max(n, 0)
        for j in range(n):
            I[p_edges + w * width + j] = I[t_edges + w * width + j]
        U[_at(off, P_MODE, 1) + w] = U[_at(off, T_MODE, 1) + w]
        F[_at(off, P_PHASE, 8) + w] = F[_at(off, T_PHASE, 8) + w]
        f = U[table + F_PULSE * fw + w]
        level = -1
        freq = F[_at(off, T_FREQ, 8) + w]
        if f != PIN_OK:
            n, freq = 0, 0.0
            level = 1 if f == PIN_SHORT_BAT else 0
        W[_at(off, P_COUNT, 4) + w] = n
        F[_at(off, P_FREQ, 8) + w] = freq
        S[_at(off, P_LEVEL, 1) + w] = level
    for i in range(I[ints + I_N_BITS]):
        f = U[table + F_DIGITAL_OUT * fw + i]
        v = U[_at(off, T_DIG, 1) + i]
        U[_at(off, P_DIG, 1) + i] = v if f == PIN_OK else (1 if f == PIN_SHORT_BAT else 0)
    if I[ints + I_HAS_NTC]:
        f = U[table + F_RESISTANCE * fw]
        r = F[_at(off, T_OHM, 8)]
        F[_at(off, P_OHM, 8)] = r if f == PIN_OK else (0.0 if f == PIN_SHORT_GND else np.inf)
    if I[ints + I_HAS_SUPPLY]:
        f = U[table + F_ANALOG_OUT * fw]
        v = F[_at(off, T_VOLT, 8)]
        F[_at(off, P_VOLT, 8)] = v if f == PIN_OK else (supply if f == PIN_SHORT_BAT else 0.0)


@njit(cache=True)
def _measured(I, F, W, U, off):
    """What the device measures of the TCU's outputs, through the pin faults (the sim's ``apply_input_faults``)."""
    ints, misc = _at(off, S_INTS, 8), _at(off, S_MISC, 8)
    fw, supply = I[ints + I_FAULT_W], F[misc + X_SUPPLY_V]
    # the switches as the last write set them: like a real device's, they change when the targets reach it
    table = _at(off, P_FAULT, 1)
    for s in range(I[ints + I_N_SOL]):
        duty, cur = F[_at(off, D_DUTY, 8) + s], F[_at(off, D_CURRENT, 8) + s]
        f = U[table + F_PWM * fw + s]
        if f == PIN_OPEN:
            cur = 0.0
        elif f == PIN_SHORT_GND:
            duty, cur = 0.0, 0.0
        elif f == PIN_SHORT_BAT:
            duty = 1.0
        F[_at(off, M_DUTY, 8) + s] = duty
        F[_at(off, M_CURRENT, 8) + s] = cur
    for i in range(I[ints + I_N_DIN]):
        f = U[table + F_DIGITAL_IN * fw + i]
        v = U[_at(off, D_DIG, 1) + i]
        U[_at(off, M_DIG, 1) + i] = v if f == PIN_OK else (1 if f == PIN_SHORT_BAT else 0)
    for i in range(I[ints + I_N_AIN]):
        f = U[table + F_ANALOG_IN * fw + i]
        v = F[_at(off, D_VOLT, 8) + i]
        F[_at(off, M_VOLT, 8) + i] = v if f == PIN_OK else (supply if f == PIN_SHORT_BAT else 0.0)
    for w in range(I[ints + I_N_PULSE]):
        edges = W[_at(off, P_COUNT, 4) + w] if U[_at(off, P_MODE, 1) + w] == PULSE_EDGES else 0
        I[_at(off, M_EDGES_OUT, 8) + w] = edges


@njit(cache=True)
def write_stage(buf, off, df, tick):
    """The targets of the tick just stepped (``tick`` is the plant's tick count after it); with the sim
    device, the pins too.  Called in the real-time loop."""
    Fa, Ia = buf.view(np.float64), buf.view(np.int64)  # for the slices the models take
    F, I, W, U, S = _ptr(Fa), _ptr(Ia), _ptr(buf.view(np.int32)), _ptr(buf), \
        _ptr(buf.view(np.int8))
    dfp = _ptr(df)
    ints = _at(off, S_INTS, 8)
    if tick <= I[ints + I_LAST_TICK] or I[ints + I_LAST_TICK] < 0:  # a reset not seen by read_stage
        _start_wheels(I, F, off, dfp)
    I[ints + I_LAST_TICK] = tick
    _wheels(I, F, W, U, Fa, Ia, off, dfp)
    _levels(I, F, U, Fa, Ia, off, dfp)
    I[_at(off, S_COUNT, 8) + C_WRITES] += 1
    if I[ints + I_FUSED]:
        _pins(I, F, W, U, S, off)


READ_DRIVE = 1  # read_stage's flags: commands drive the plant (no scenario does)
READ_SAFE = 2  # the device is in its safe state


@njit(cache=True)
def read_stage(buf, off, df, tick, flags):
    """The solenoid inputs of tick ``tick`` from the measurements (with the sim device, first the TCU's
    outputs through the pin faults); written to the plant only with ``READ_DRIVE`` in ``flags`` and not
    ``READ_SAFE`` (one integer: each argument of a compiled call costs its type check).  Returns 1 when
    they drive the plant, else 0.  Called in the real-time loop."""
    drive, safe = (flags & READ_DRIVE) != 0, (flags & READ_SAFE) != 0
    F, I, W, U = _ptr(buf.view(np.float64)), _ptr(buf.view(np.int64)), _ptr(buf.view(np.int32)), \
        _ptr(buf)
    df_array = df
    df = _ptr(df_array)
    ints, misc = _at(off, S_INTS, 8), _at(off, S_MISC, 8)
    fused = I[ints + I_FUSED] != 0
    if fused:
        _measured(I, F, W, U, off)
    restart = tick == 0 or I[ints + I_LAST_TICK] < 0
    if restart:
        _start_wheels(I, F, off, df)
        I[ints + I_LAST_TICK] = 0
    temp_C = _oil_temperature_C(I, F, off, df)
    I[_at(off, S_COUNT, 8) + C_READS] += 1
    si, sf = _at(off, S_SOL_I, 8), _at(off, S_SOL_F, 8)
    duty, current = _at(off, M_DUTY, 8), _at(off, M_CURRENT, 8)
    table, fw = _at(off, P_FAULT, 1), I[ints + I_FAULT_W]
    in_off, n_in, n_sol = I[ints + I_IN_OFF], I[ints + I_N_IN], I[ints + I_N_SOL]
    supply, dt = F[misc + X_SUPPLY_V], F[misc + X_DT]
    for s in range(n_sol):
        a, b = si + s * N_SOL_I, sf + s * N_SOL_F
        k = in_off + I[a + SI_INPUT]
        if restart:  # the coil starts where the plant's input starts (its initial value)
            F[b + SF_I] = df[k]
        if fused and U[table + F_PWM * fw + s] == PIN_OPEN:  # no circuit: no current, whatever the duty
            F[b + SF_I] = 0.0
            value = 0.0
        elif I[a + SI_MEASURE] == 0:
            r = coil_resistance_ohm(F[b + SF_R20], temp_C)
            end, mean = current_step(F[b + SF_I], F[duty + s], supply, r, F[b + SF_L], dt)
            F[b + SF_I] = end
            value = mean
        else:
            value = F[current + s]
        value = min(max(value, F[b + SF_LO]), F[b + SF_HI])
        if drive and not safe:
            df[k] = value
            df[k + n_in] = 0.0
    return 1 if drive and not safe and n_sol > 0 else 0


__all__ = ["MEMBERS", "write_stage", "read_stage", "READ_DRIVE", "READ_SAFE"]
