"""A reference transmission control unit (TCU) with its driver: drives the 8HP car through the WLTC, the tractor
through a field-work cycle.

It implements the controller interface (``server/offline/controller.py``): the same object runs offline (in one
compiled loop: its logic is the numba ``kernel``), in lockstep and against the realtime server.  Its task period is
10 ms (``period_ticks`` = 10 at dt = 1 ms), as a TCU's shift task.

What it does every period (``kernel``):

* **Driver** (the cycle's target speed ``v_t(t)``, linear between the table's points): feed-forward of the road load
  and the target acceleration over the wheel force of full pedal in the present gear, plus PI on the speed error;
  ``u > 0`` is pedal, ``u < 0`` brake; a target of standstill holds the brake.
* **Shift schedule** over pedal and speed: the input (turbine) speed the present gear would have at the vehicle
  speed, ``w_g = v i_g i_fd / r``, against an upshift line ``w_up(p) = w_up0 + (w_up1 - w_up0) p`` and a downshift
  line ``w_dn(p)`` below it by more than the gear step (hysteresis), one gear at a time, and not within
  ``guard_s`` after the last shift.
* **Clutch-to-clutch shift** (off-going = elements of the old gear not in the new one, on-coming = the reverse):
  fill (on-coming at the fill pressure), torque phase (on-coming ramps to its holding pressure, off-going to 0),
  inertia phase (on-coming holds; on an upshift the engine torque is cut to ``reduction`` of its value through the
  engine's ``torque_limit`` input, the torque intervention) until every on-coming element is stuck, then closing
  (on-coming to full pressure, the limit ramped back).  A downshift takes the inertia phase first: the off-going
  element is released to its kiss point so the engine speeds up under the pedal, and the torque phase follows the
  synchronisation.
* **Converter lock-up** (plants with ``p_lockup``): applied above an input speed from a gear on, ramped in, opened
  below a lower engine speed.

Run: ``python examples/drive_cycle_results.py [car|tractor]`` (a whole cycle offline and its results); the figures:
``scripts/drive_cycle_figures.py``; docs/drive_cycles.md.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from drive_cycles import tractor_field, wltc_class3b  # noqa: E402

from server.offline.controller import Controller  # noqa: E402

# The kernel's functions are compiled per process, not cached: a test file loads this module under a module
# name of its own (server/offline/controller.py, load_controller), which a numba cache entry would pin.
RPM = np.pi / 30.0
MAX_EL = 8

# params: scalars
(P_NG, P_NE, P_NT, P_IY_V, P_IY_WIN, P_IY_WENG, P_IY_TE, P_IU_LU, P_IU_BRAKE, P_IU_PEDAL, P_IU_LIMIT, P_IU_DRAWBAR,
 P_MASS, P_FROLL, P_AERO, P_R_OVER_I, P_TMAX, P_KP, P_KI, P_BRAKE_BAR, P_FULL, P_FILL, P_ON0, P_ON1, P_T_FILL,
 P_T_TP, P_T_INERTIA, P_T_CLOSE, P_REDUCTION, P_WUP0, P_WUP1, P_WDN0, P_WDN1, P_GUARD, P_LU_ON, P_LU_OFF, P_LU_GEAR,
 P_LU_FULL, P_LU_RATE, P_KISS, P_LOOKAHEAD, P_OFF_RATIO, P_OFF_MASK, P_OFF_TT, P_OFF_TV, P_OFF_TF,
 P_BRAKE_N_PER_BAR) = range(47)
P_IY_STUCK0 = 47  # MAX_EL slots: the elements' stuck outputs
P_IU_P0 = P_IY_STUCK0 + MAX_EL  # MAX_EL slots: their pressure inputs
P_LEN = P_IU_P0 + MAX_EL

# state
(S_GEAR, S_TARGET, S_PHASE, S_T0, S_INT, S_LU, S_PLU, S_T_END, S_TE0, S_PEDAL, S_NSHIFT, S_LIMIT, S_UP, S_LIMIT0,
 S_BRAKE, S_TLAST) = range(16)
S_LEN = 16
PH_NONE, PH_FILL, PH_TORQUE, PH_INERTIA, PH_CLOSE = 0.0, 1.0, 2.0, 3.0, 4.0


@njit
def _interp(t, p, off_t, off_v, n):
    """The table's value at t (linear between points, held beyond the ends)."""
    if t <= p[off_t]:
        return p[off_v]
    if t >= p[off_t + n - 1]:
        return p[off_v + n - 1]
    lo, hi = 0, n - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if p[off_t + mid] <= t:
            lo = mid
        else:
            hi = mid
    a = (t - p[off_t + lo]) / (p[off_t + hi] - p[off_t + lo])
    return p[off_v + lo] + a * (p[off_v + hi] - p[off_v + lo])


@njit
def _driver(t, h, y, u, s, p, gear):
    """Pedal and brake from the target speed: feed-forward + PI (the integral stops while saturated)."""
    n, ot, ov = int(p[P_NT]), int(p[P_OFF_TT]), int(p[P_OFF_TV])
    la = p[P_LOOKAHEAD]
    vt = _interp(t + la, p, ot, ov, n)
    at = (_interp(t + la + 0.5, p, ot, ov, n) - _interp(t + la - 0.5, p, ot, ov, n))
    v = y[int(p[P_IY_V])]
    e = vt - v
    f_draw = 0.0
    if p[P_IU_DRAWBAR] >= 0:
        f_draw = _interp(t, p, ot, int(p[P_OFF_TF]), n)
        u[int(p[P_IU_DRAWBAR])] = f_draw
    f_req = p[P_MASS] * at + p[P_AERO] * vt * abs(vt) + f_draw + (p[P_FROLL] if vt > 0.0 else 0.0)
    if f_req >= 0.0:  # over the wheel force of full pedal in the present gear
        ff = f_req / (p[P_TMAX] * p[int(p[P_OFF_RATIO]) + gear] / p[P_R_OVER_I])
    else:  # over the wheel force of the full brake command
        ff = f_req / (p[P_BRAKE_BAR] * p[P_BRAKE_N_PER_BAR])
    cmd = ff + p[P_KP] * e + p[P_KI] * s[S_INT]
    if not ((cmd >= 1.0 and e > 0.0) or (cmd <= -1.0 and e < 0.0)):
        s[S_INT] += e * h
    if vt <= 0.0 and at <= 0.0 and v < 1.0:
        cmd = -1.0
    pedal = min(max(cmd, 0.0), 1.0)
    s[S_PEDAL] = pedal
    s[S_BRAKE] = p[P_BRAKE_BAR] * min(max(-cmd, 0.0), 1.0)
    u[int(p[P_IU_PEDAL])] = pedal
    u[int(p[P_IU_BRAKE])] = s[S_BRAKE]
    return v, pedal


@njit
def _schedule(t, v, pedal, s, p):
    """The gear the schedule asks for (one step from the present one), or the present one."""
    g, ng = int(s[S_GEAR]), int(p[P_NG])
    if t - s[S_T_END] < p[P_GUARD]:
        return g
    w_g = v * p[int(p[P_OFF_RATIO]) + g] / p[P_R_OVER_I]
    w_up = p[P_WUP0] + (p[P_WUP1] - p[P_WUP0]) * pedal
    w_dn = p[P_WDN0] + (p[P_WDN1] - p[P_WDN0]) * pedal
    if g < ng - 1 and w_g > w_up:
        return g + 1
    if g > 0 and w_g < w_dn:
        return g - 1
    return g


@njit
def _pressures(t, y, u, s, p):
    """The elements' pressures for the present shift phase; advances the phase."""
    ne, om = int(p[P_NE]), int(p[P_OFF_MASK])
    g0, g1 = int(s[S_GEAR]), int(s[S_TARGET])
    ph, dt_ph = s[S_PHASE], t - s[S_T0]
    up = s[S_UP] > 0.5
    full, fill, kiss = p[P_FULL], p[P_FILL], p[P_KISS]
    p_on = p[P_ON0] + (p[P_ON1] - p[P_ON0]) * min(max(s[S_TE0] / p[P_TMAX], 0.0), 1.0)
    synced = True
    for e in range(ne):
        if p[om + g1 * ne + e] > 0.5 and p[om + g0 * ne + e] < 0.5 and y[int(p[P_IY_STUCK0 + e])] < 0.5:
            synced = False
    if ph == PH_FILL and dt_ph >= p[P_T_FILL]:
        ph, s[S_T0], dt_ph = (PH_TORQUE if up else PH_INERTIA), t, 0.0
    elif ph == PH_TORQUE and dt_ph >= p[P_T_TP]:
        ph, s[S_T0], dt_ph = (PH_INERTIA if up else PH_CLOSE), t, 0.0
    elif ph == PH_INERTIA and (synced or dt_ph >= p[P_T_INERTIA]):
        ph, s[S_T0], dt_ph = (PH_CLOSE if up else PH_TORQUE), t, 0.0
    elif ph == PH_CLOSE and dt_ph >= p[P_T_CLOSE]:
        ph = PH_NONE
        s[S_GEAR] = g1
        g0 = g1
        s[S_T_END] = t
    s[S_PHASE] = ph
    a = min(dt_ph / p[P_T_TP], 1.0)
    for e in range(ne):
        old, new = p[om + g0 * ne + e] > 0.5, p[om + g1 * ne + e] > 0.5
        val = full if old else 0.0
        if ph != PH_NONE and old != new:
            if new:  # on-coming
                if ph == PH_FILL or (ph == PH_INERTIA and not up):
                    val = fill
                elif ph == PH_TORQUE:
                    val = fill + a * ((p_on if up else full) - fill)
                elif ph == PH_INERTIA:
                    val = p_on
                else:
                    val = p_on + min(dt_ph / p[P_T_CLOSE], 1.0) * (full - p_on) if up else full
            else:  # off-going
                if ph == PH_FILL:
                    val = full
                elif ph == PH_TORQUE:
                    val = (1.0 - a) * full if up else kiss * (1.0 - a)
                elif ph == PH_INERTIA:
                    val = 0.0 if up else kiss + 0.5
                else:
                    val = 0.0
        u[int(p[P_IU_P0 + e])] = val


@njit
def tcu_kernel(t_s, y, u, s, p):
    """One 10 ms task of the TCU: driver, schedule, shift phases, torque intervention, lock-up."""
    h = t_s - s[S_TLAST]  # the task's period, s
    s[S_TLAST] = t_s
    gear = int(s[S_GEAR])
    v, pedal = _driver(t_s, h, y, u, s, p, gear)
    if s[S_PHASE] == PH_NONE:
        g1 = _schedule(t_s, v, pedal, s, p)
        if g1 != gear:
            s[S_TARGET], s[S_PHASE], s[S_T0], s[S_UP] = g1, PH_FILL, t_s, 1.0 if g1 > gear else 0.0
            s[S_TE0] = max(y[int(p[P_IY_TE])], 0.0)
            s[S_NSHIFT] += 1.0
    _pressures(t_s, y, u, s, p)
    # torque intervention: cut in an upshift's inertia phase, ramped back while the on-coming element closes
    lim = p[P_TMAX]
    if s[S_UP] > 0.5 and s[S_PHASE] == PH_INERTIA:
        lim = p[P_REDUCTION] * s[S_TE0]
        s[S_LIMIT0] = lim
    elif s[S_UP] > 0.5 and s[S_PHASE] == PH_CLOSE:
        lim = s[S_LIMIT0] + min((t_s - s[S_T0]) / p[P_T_CLOSE], 1.0) * (p[P_TMAX] - s[S_LIMIT0])
    s[S_LIMIT] = lim
    u[int(p[P_IU_LIMIT])] = lim
    # lock-up
    if p[P_IU_LU] >= 0:
        w_in, w_e = y[int(p[P_IY_WIN])], y[int(p[P_IY_WENG])]
        if s[S_LU] < 0.5 and s[S_GEAR] >= p[P_LU_GEAR] and w_in > p[P_LU_ON]:
            s[S_LU] = 1.0
        elif s[S_LU] > 0.5 and (w_e < p[P_LU_OFF] or s[S_GEAR] < p[P_LU_GEAR] - 1):
            s[S_LU] = 0.0
        if s[S_LU] > 0.5:
            s[S_PLU] = min(s[S_PLU] + p[P_LU_RATE] * h, p[P_LU_FULL])
        else:
            s[S_PLU] = 0.0
        u[int(p[P_IU_LU])] = s[S_PLU]


@dataclass
class TcuCalibration:
    """A TCU's data set: the vehicle, the gears it uses, the schedule and the shift pressures (bar, s, rpm)."""

    elements: tuple[str, ...]
    gears: tuple[tuple[str, ...], ...]  # the schedule's gears in order, each its engaged elements
    ratios: tuple[float, ...]  # input / output speed of each
    mass_kg: float
    wheel_radius_m: float
    final_drive: float
    rolling_N: float
    aero_N_s2_per_m2: float
    engine_max_N_m: float
    speed_out: str = "vehicle_speed"
    input_speed: str = "w_input"
    engine_speed: str = "w_engine"
    kp: float = 0.6
    ki: float = 0.15
    brake_bar: float = 120.0  # the brake command of the driver's full brake
    brake_N_per_bar: float = 60.0 / 0.33  # wheel force per bar of brake pressure
    full_bar: float = 12.0
    fill_bar: float = 2.0
    kiss_bar: float = 1.5
    on_bar: tuple[float, float] = (4.0, 10.0)  # holding pressure of the on-coming element at no and full torque
    fill_s: float = 0.08
    torque_phase_s: float = 0.15
    inertia_max_s: float = 0.8
    close_s: float = 0.1
    reduction: float = 0.4
    up_rpm: tuple[float, float] = (1500.0, 5000.0)
    down_rpm: tuple[float, float] = (900.0, 2600.0)
    guard_s: float = 1.0
    lockup_on_rpm: float = 1300.0
    lockup_off_rpm: float = 1000.0
    lockup_gear: int = 2  # index in gears
    lockup_bar: float = 8.0
    lockup_rate_bar_s: float = 8.0
    lookahead_s: float = 0.1
    drawbar: bool = False


ZF8HP_CAR = TcuCalibration(
    elements=("A", "B", "C", "D", "E"),
    gears=(("A", "B", "C"), ("A", "B", "E"), ("B", "C", "E"), ("B", "D", "E"), ("B", "C", "D"), ("C", "D", "E"),
           ("A", "C", "D"), ("A", "D", "E")),
    ratios=(4.696, 3.130, 2.104, 1.667, 1.285, 1.000, 0.839, 0.667),
    mass_kg=1800.0 + 4.0 / 0.33 ** 2, wheel_radius_m=0.33, final_drive=3.15, rolling_N=0.010 * 1800.0 * 9.80665,
    aero_N_s2_per_m2=0.5 * 1.2 * 0.70, engine_max_N_m=400.0)

# the tractor's gears of distinct ratios (gears 1, 2, 3, 4, 7, 8, 10, 13, 14, 16, 18 of configs/powershift_tractor.toml)
POWERSHIFT_TRACTOR = TcuCalibration(
    elements=("c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8"),
    gears=(("c1", "c3", "c6"), ("c1", "c4", "c6"), ("c2", "c3", "c6"), ("c1", "c3", "c7"), ("c1", "c4", "c7"),
           ("c2", "c3", "c7"), ("c1", "c3", "c8"), ("c1", "c4", "c8"), ("c2", "c3", "c8"), ("c1", "c5", "c8"),
           ("c2", "c5", "c8")),
    ratios=(48.0, 36.0, 32.0, 24.0, 18.0, 16.0, 12.0, 9.0, 8.0, 6.0, 4.0),
    mass_kg=6000.0, wheel_radius_m=0.85, final_drive=5.6, rolling_N=0.04 * 6000.0 * 9.80665, aero_N_s2_per_m2=0.0,
    engine_max_N_m=600.0, input_speed="w_1", engine_speed="w_1", kp=1.5, ki=0.5, on_bar=(5.0, 12.0),
    full_bar=16.0, brake_N_per_bar=100.0 / 0.85, up_rpm=(1700.0, 2150.0), down_rpm=(1100.0, 1500.0), guard_s=1.5,
    reduction=0.5, drawbar=True)

CALIBRATIONS = {"zf8hp_car": ZF8HP_CAR, "powershift_tractor": POWERSHIFT_TRACTOR}


class ReferenceTcu(Controller):
    """The reference TCU and its driver on a cycle; ``kernel`` is its logic (see the module's docstring).

    ``cal``: a :class:`TcuCalibration` or the name of one in :data:`CALIBRATIONS` (``"zf8hp_car"``,
    ``"powershift_tractor"``: what a test file's ``[controller] params`` gives); ``cycle``: (time s, target
    speed m/s[, drawbar N]) arrays (default: the WLTC class 3b, or the field cycle for a calibration with a
    drawbar).  ``period_ticks`` 10: a 10 ms task at dt = 1 ms.
    """

    kernel = staticmethod(tcu_kernel)

    def __init__(self, cal: TcuCalibration | str = ZF8HP_CAR, cycle=None, period_ticks: int = 10):
        if isinstance(cal, str):
            if cal not in CALIBRATIONS:
                raise ValueError(f"no TCU calibration {cal!r}; there are {', '.join(CALIBRATIONS)}")
            cal = CALIBRATIONS[cal]
        self.cal, self.period_ticks = cal, int(period_ticks)
        if cycle is None:
            cycle = tractor_field() if cal.drawbar else wltc_class3b()
        self.cycle = tuple(np.asarray(c, dtype=float) for c in cycle)
        lu = () if cal.drawbar else ("p_lockup",)
        draw = ("drawbar_force",) if cal.drawbar else ()
        self.owned_inputs = tuple(f"p_{e}" for e in cal.elements) + lu + ("p_brake", "pedal", "torque_limit") + draw
        self.kernel_state = np.zeros(S_LEN)
        self.kernel_params = np.zeros(P_LEN)

    def bind(self, output_names, input_names) -> None:
        """Resolve the ports into the kernel's parameters; a run starts here (state cleared, 1st gear)."""
        super().bind(output_names, input_names)
        c, oi, ii = self.cal, self.output_index, self.input_index
        ng, ne = len(c.gears), len(c.elements)
        t, v = self.cycle[0], self.cycle[1]
        f = self.cycle[2] if len(self.cycle) > 2 else np.zeros_like(t)
        nt = len(t)
        mask = np.array([[1.0 if e in g else 0.0 for e in c.elements] for g in c.gears]).ravel()
        p = np.zeros(P_LEN + ng + ng * ne + 3 * nt)
        o_ratio, o_mask = P_LEN, P_LEN + ng
        o_tt = o_mask + ng * ne
        p[o_ratio:o_ratio + ng], p[o_mask:o_tt] = c.ratios, mask
        p[o_tt:o_tt + nt], p[o_tt + nt:o_tt + 2 * nt], p[o_tt + 2 * nt:o_tt + 3 * nt] = t, v, f
        vals = {P_NG: ng, P_NE: ne, P_NT: nt, P_IY_V: oi[c.speed_out], P_IY_WIN: oi[c.input_speed],
                P_IY_WENG: oi[c.engine_speed], P_IY_TE: oi["engine_torque"],
                P_IU_LU: ii.get("p_lockup", -1) if not c.drawbar else -1, P_IU_BRAKE: ii["p_brake"],
                P_IU_PEDAL: ii["pedal"], P_IU_LIMIT: ii["torque_limit"], P_IU_DRAWBAR: ii.get("drawbar_force", -1),
                P_MASS: c.mass_kg, P_FROLL: c.rolling_N, P_AERO: c.aero_N_s2_per_m2,
                P_R_OVER_I: c.wheel_radius_m / c.final_drive, P_TMAX: c.engine_max_N_m, P_KP: c.kp, P_KI: c.ki,
                P_BRAKE_BAR: c.brake_bar, P_BRAKE_N_PER_BAR: c.brake_N_per_bar, P_FULL: c.full_bar,
                P_FILL: c.fill_bar, P_ON0: c.on_bar[0],
                P_ON1: c.on_bar[1], P_T_FILL: c.fill_s, P_T_TP: c.torque_phase_s, P_T_INERTIA: c.inertia_max_s,
                P_T_CLOSE: c.close_s, P_REDUCTION: c.reduction, P_WUP0: c.up_rpm[0] * RPM,
                P_WUP1: c.up_rpm[1] * RPM, P_WDN0: c.down_rpm[0] * RPM, P_WDN1: c.down_rpm[1] * RPM,
                P_GUARD: c.guard_s, P_LU_ON: c.lockup_on_rpm * RPM, P_LU_OFF: c.lockup_off_rpm * RPM,
                P_LU_GEAR: c.lockup_gear, P_LU_FULL: c.lockup_bar, P_LU_RATE: c.lockup_rate_bar_s,
                P_KISS: c.kiss_bar, P_LOOKAHEAD: c.lookahead_s, P_OFF_RATIO: o_ratio, P_OFF_MASK: o_mask,
                P_OFF_TT: o_tt, P_OFF_TV: o_tt + nt, P_OFF_TF: o_tt + 2 * nt}
        for k, val in vals.items():
            p[k] = val
        for e, nm in enumerate(c.elements):
            p[P_IY_STUCK0 + e] = oi[f"stuck_{nm}"]
            p[P_IU_P0 + e] = ii[f"p_{nm}"]
        self.kernel_params = p
        self.kernel_state = np.zeros(S_LEN)
        self.kernel_state[S_T_END] = -1.0e9
        self.kernel_state[S_LIMIT] = c.engine_max_N_m

    def initial_inputs(self) -> dict[str, float]:
        c = self.cal
        u = {f"p_{e}": (c.full_bar if e in c.gears[0] else 0.0) for e in c.elements}
        u.update(p_brake=c.brake_bar, pedal=0.0, torque_limit=c.engine_max_N_m)
        if not c.drawbar:
            u["p_lockup"] = 0.0
        return u

    def update(self, t_s: float, y, u) -> None:
        tcu_kernel(t_s, y, u, self.kernel_state, self.kernel_params)

    @property
    def shifts(self) -> int:
        return int(self.kernel_state[S_NSHIFT])
