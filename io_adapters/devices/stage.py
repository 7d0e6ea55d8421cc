"""The device adapter's compiled tick: the electrical models between the plant's ports and a device's pins.

Two kernels, each one call a tick with the arena's buffer (:mod:`.arena`)
and the plant's data buffer ``df``:

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
are the ``I_*`` and ``X_*`` slots of its first two members.  A tick number
below the last one seen (a reset to t = 0) starts the models afresh: wheel
angles at 0, coil currents at the plant's inputs.  Allocates nothing, looks
nothing up.
"""

from __future__ import annotations

from numba import njit

from plant_models.electrical.ntc import beta_resistance_ohm
from plant_models.electrical.range_selector import code_at
from plant_models.electrical.solenoid import coil_resistance_ohm, current_step
from plant_models.electrical.tooth_wheel import advance_angle, wheel_edges

from .arena import f64, i8, i32, i64, u8
from .channels import PIN_OK, PIN_OPEN, PULSE_EDGES
from .sim import F_PWM, _apply_targets_kernel, _input_faults_kernel

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
 I_TEMP_OUT, I_RANGE_POS, I_RANGE_TARGET, I_LAST_TICK, I_FUSED, N_INTS) = range(17)
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


@njit(cache=True)
def _oil_temperature_C(ints, misc, df):
    k = ints[I_TEMP_OUT]
    return df[ints[I_OUT_OFF] + k] if k >= 0 else misc[X_OIL_C]


@njit(cache=True)
def _wheels(buf, off, df, restart):
    ints, misc = i64(buf, off, S_INTS), f64(buf, off, S_MISC)
    n_pulse, width = ints[I_N_PULSE], ints[I_WIDTH]
    wi = i64(buf, off, S_WHEEL_I).reshape((n_pulse, N_WHEEL_I))
    wf = f64(buf, off, S_WHEEL_F).reshape((n_pulse, N_WHEEL_F))
    present = i64(buf, off, S_PRESENT).reshape((n_pulse, ints[I_MAX_TEETH]))
    et, etooth, edir = f64(buf, off, S_EDGE_T), i64(buf, off, S_EDGE_TOOTH), i64(buf, off, S_EDGE_DIR)
    mode, count = u8(buf, off, T_MODE), i32(buf, off, T_COUNT)
    edges = i64(buf, off, T_EDGES).reshape((n_pulse, width))
    cnt = i64(buf, off, S_COUNT)
    dt = misc[X_DT]
    out_off = ints[I_OUT_OFF]
    for w in range(n_pulse):
        omega1 = df[out_off + wi[w, W_SHAFT]] * wf[w, W_SCALE]
        if restart:
            wf[w, W_THETA] = 0.0
            wf[w, W_OMEGA] = omega1
        omega0 = wf[w, W_OMEGA]
        teeth = wi[w, W_TEETH]
        n = wheel_edges(wf[w, W_THETA], omega0, omega1, dt, teeth, wf[w, W_PHASE], present[w, :teeth],
                        wi[w, W_LOST] != 0, et, etooth, edir)
        if n < 0:
            n = -1 - n
            cnt[C_EDGE_OVERFLOW] += 1
        if n > width:
            cnt[C_EDGE_OVERFLOW] += n - width
            n = width
        for j in range(n):
            edges[w, j] = int(round(et[j] * 1e9))
        count[w] = n
        mode[w] = PULSE_EDGES
        wf[w, W_THETA] = advance_angle(wf[w, W_THETA], omega0, omega1, dt)
        wf[w, W_OMEGA] = omega1


@njit(cache=True)
def _levels(buf, off, df):
    """NTC, range code, supply into the targets."""
    ints, misc = i64(buf, off, S_INTS), f64(buf, off, S_MISC)
    if ints[I_HAS_NTC]:
        f64(buf, off, T_OHM)[0] = beta_resistance_ohm(_oil_temperature_C(ints, misc, df), misc[X_R25], misc[X_BETA])
    n_bits = ints[I_N_BITS]
    if n_bits:
        pos, target = ints[I_RANGE_POS], ints[I_RANGE_TARGET]
        if target != pos:  # the lever travels; it reads the transition code inside the window
            misc[X_TRAVEL] += misc[X_DT] * misc[X_TRAVEL_PER_S]
            if misc[X_TRAVEL] >= 1.0:
                ints[I_RANGE_POS] = target
                pos = target
                misc[X_TRAVEL] = 0.0
        code = code_at(pos, target, misc[X_TRAVEL], i64(buf, off, S_CODES), i64(buf, off, S_TRANS),
                       f64(buf, off, S_WINDOW))
        dig = u8(buf, off, T_DIG)
        for k in range(n_bits):
            dig[k] = (code >> k) & 1
    if ints[I_HAS_SUPPLY]:
        f64(buf, off, T_VOLT)[0] = misc[X_SUPPLY_V]


@njit(cache=True)
def write_stage(buf, off, df, tick):
    """The targets of the tick just stepped (``tick`` is the plant's tick count after it); with the sim
    device, the pins too.  Called in the real-time loop."""
    ints = i64(buf, off, S_INTS)
    restart = tick <= ints[I_LAST_TICK] or ints[I_LAST_TICK] < 0  # a reset not seen by read_stage
    ints[I_LAST_TICK] = tick
    _wheels(buf, off, df, restart)
    _levels(buf, off, df)
    i64(buf, off, S_COUNT)[C_WRITES] += 1
    if ints[I_FUSED]:
        width, fw = ints[I_WIDTH], ints[I_FAULT_W]
        n_pulse = ints[I_N_PULSE]
        _apply_targets_kernel(
            u8(buf, off, T_MODE), i64(buf, off, T_EDGES).reshape((n_pulse, width)), i32(buf, off, T_COUNT),
            f64(buf, off, T_FREQ), f64(buf, off, T_PHASE), f64(buf, off, T_OHM), u8(buf, off, T_DIG),
            f64(buf, off, T_VOLT), u8(buf, off, T_FAULT), u8(buf, off, P_MODE),
            i64(buf, off, P_EDGES).reshape((n_pulse, width)), i32(buf, off, P_COUNT), f64(buf, off, P_FREQ),
            f64(buf, off, P_PHASE), f64(buf, off, P_OHM), u8(buf, off, P_DIG), f64(buf, off, P_VOLT),
            u8(buf, off, P_SWITCH), i8(buf, off, P_LEVEL), u8(buf, off, P_FAULT).reshape((N_FAULT_ROWS, fw)),
            i64(buf, off, P_ROW), i64(buf, off, P_SLOT), f64(buf, off, S_MISC)[X_SUPPLY_V],
            i64(buf, off, P_CLIPPED))


@njit(cache=True)
def read_stage(buf, off, df, tick, drive, safe):
    """The solenoid inputs of tick ``tick`` from the measurements (with the sim device, first the TCU's
    outputs through the pin faults); written to the plant only if ``drive``.  Returns 1 when they drive
    the plant (a device not in its safe state), else 0.  Called in the real-time loop."""
    ints, misc = i64(buf, off, S_INTS), f64(buf, off, S_MISC)
    if ints[I_FUSED]:
        n_pulse, fw = ints[I_N_PULSE], ints[I_FAULT_W]
        # the fault switches as set now (a fault set between ticks acts on this tick's inputs already)
        fault = u8(buf, off, P_FAULT).reshape((N_FAULT_ROWS, fw))
        switch, row, slot = u8(buf, off, T_FAULT), i64(buf, off, P_ROW), i64(buf, off, P_SLOT)
        fault[:, :] = PIN_OK
        for j in range(row.shape[0]):
            fault[row[j], slot[j]] = switch[j]
        _input_faults_kernel(f64(buf, off, D_DUTY), f64(buf, off, D_CURRENT), u8(buf, off, D_DIG),
                             f64(buf, off, D_VOLT), f64(buf, off, M_DUTY), f64(buf, off, M_CURRENT),
                             u8(buf, off, M_DIG), f64(buf, off, M_VOLT),
                             u8(buf, off, P_FAULT).reshape((N_FAULT_ROWS, fw)), misc[X_SUPPLY_V],
                             u8(buf, off, P_MODE), i32(buf, off, P_COUNT), i64(buf, off, M_EDGES_OUT))
    n_sol = ints[I_N_SOL]
    si = i64(buf, off, S_SOL_I).reshape((n_sol, N_SOL_I))
    sf = f64(buf, off, S_SOL_F).reshape((n_sol, N_SOL_F))
    duty, current = f64(buf, off, M_DUTY), f64(buf, off, M_CURRENT)
    in_off, n_in = ints[I_IN_OFF], ints[I_N_IN]
    restart = tick == 0 or ints[I_LAST_TICK] < 0
    temp_C = _oil_temperature_C(ints, misc, df)
    i64(buf, off, S_COUNT)[C_READS] += 1
    if restart:  # the wheels start at angle 0 at the shafts' speeds before the first step
        n_pulse = ints[I_N_PULSE]
        wi = i64(buf, off, S_WHEEL_I).reshape((n_pulse, N_WHEEL_I))
        wf = f64(buf, off, S_WHEEL_F).reshape((n_pulse, N_WHEEL_F))
        for w in range(n_pulse):
            wf[w, W_THETA] = 0.0
            wf[w, W_OMEGA] = df[ints[I_OUT_OFF] + wi[w, W_SHAFT]] * wf[w, W_SCALE]
        ints[I_LAST_TICK] = 0
    fused = ints[I_FUSED] != 0
    pin = u8(buf, off, P_FAULT).reshape((N_FAULT_ROWS, ints[I_FAULT_W]))
    for s in range(n_sol):
        k = in_off + si[s, SI_INPUT]
        if restart:  # the coil starts where the plant's input starts (its initial value)
            sf[s, SF_I] = df[k]
        if fused and pin[F_PWM, s] == PIN_OPEN:  # no circuit: no current, whatever the duty
            sf[s, SF_I] = 0.0
            value = 0.0
        elif si[s, SI_MEASURE] == 0:
            r = coil_resistance_ohm(sf[s, SF_R20], temp_C)
            end, mean = current_step(sf[s, SF_I], duty[s], misc[X_SUPPLY_V], r, sf[s, SF_L], misc[X_DT])
            sf[s, SF_I] = end
            value = mean
        else:
            value = current[s]
        value = min(max(value, sf[s, SF_LO]), sf[s, SF_HI])
        if drive and not safe:
            df[k] = value
            df[k + n_in] = 0.0
    return 1 if drive and not safe and n_sol > 0 else 0


__all__ = ["MEMBERS", "write_stage", "read_stage"]
