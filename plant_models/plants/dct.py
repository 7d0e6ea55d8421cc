"""Dual-clutch transmission (DCT) driveline.

After sections 3-4 of Biagiotti & Zanasi, "Efficient simulation of static
and dynamic friction for automotive applications".

Mechanical scheme (five shafts, four friction rows, one spring)::

                 C1                S_odd (gear 1/3/5/7)
    engine (0) ====== odd input (1) -------+
        |                                   \\
        |        C2                S_even    +== output (3) ~~driveshaft~~ vehicle (4)
        +========== even input (2) --------+   (wheel speed)    k, c         J_v, b_v
                           (gear 2/4/6)

* Shaft 0, ``engine``: crankshaft, flywheel and clutch drum.  Engine torque acts here.
* Shafts 1 and 2, ``odd``/``even``: the two concentric input shafts with their clutch
  hubs and fixed gears.
* Shaft 3, ``output``: the layshafts, final drive and differential, reflected to
  wheel speed.
* Shaft 4, ``vehicle``: the vehicle mass on the wheels, ``m r_w^2`` plus the wheels;
  vehicle drag ``b_v`` (Biagiotti & Zanasi) and the road load act here.

Rows of R (all in torque units: coefficients 1 and a ratio, forces in N m):

* ``C1`` [engine, odd] = (1, -1) and ``C2`` [engine, even] = (1, -1): the wet
  clutches, pressure -> capacity exactly as in the Powershift (Morselli,
  Zanasi & Ferracin, section 5) with gear radius 1.
* ``S_odd`` [odd, output] = (1, -i_gear i_final) and ``S_even`` likewise: the
  synchronizer and dog clutch of the gear preselected on that shaft.  While
  the row slips its capacity is the cone synchronizer's (referred to the input
  shaft: cone torque / i_gear); once it sticks the dog teeth hold it
  (``dog_capacity_N_m``, far above any driveline torque); in neutral it is 0.
  Selecting another gear rewrites the row's coefficient inside the compiled
  step and flags it to the core, which releases the row if its relative speed
  is no longer zero.

Spring ``driveshaft`` [output, vehicle]: half-shaft torsional stiffness and
damping at the wheel.

With a ``[hydraulics]`` table the clutches' pressure commands reach their
pistons through the clutch hydraulics of
:mod:`plant_models.powertrain.hydraulics` (dead time, valve, fill phase to
the kiss point, return spring; ``fill_c1`` / ``fill_c2`` outputs after the
status word) instead of the first-order lag alone.

Biagiotti & Zanasi put a compliance on each branch (k1, b1 / k3, b3) and models the
gear ratios as fixed gains R1, R3.  This plant uses the layout of real DCTs
instead: both input shafts drive one output through the preselected gears
(synchronizers with their own friction), and the compliance sits once, in the
half-shafts, where the dominant driveline ("shuffle") mode comes from.

Sign conventions (stated in the signal docs too): speeds positive forward.
``slip_c1 = w_engine - w_odd`` (positive when the engine drives);
``torque_c1`` is the torque the clutch passes from the engine to its input
shaft (positive in traction), bounded by ``+-capacity_c1``; the clutch
energies count dissipated work (>= 0).  ``road_load`` positive resists
forward motion; ``driveshaft_torque`` positive drives the vehicle forward.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from ..clutch import BAR, WetClutch
from ..core.api import JIT, L, CoreSpec, Row, Settings, Spring, y_act, y_omega, y_row_work
from ..friction_plant import CORE_STATUS, FrictionPlant, friction_kernels
from ..plant import Ports, Signal
from ..powertrain.hydraulics import Hydraulics, hydraulics_after, hydraulics_before, param_block, write_fill_outputs
from ..powertrain.hydraulics import describe as hydraulics_description
from ..powertrain.hydraulics_plant import HydraulicsPlant
from .ratio import RATIO_LIMIT, RATIO_MIN_OUTPUT_SPEED
from . import friction_step

# -- state layout ------------------------------------------------------------
# Every slot number below comes from its table's order (a table's entry: name, doc; a block's: name, width, doc),
# so a new slot is one line of a table.
SHAFTS = (  # the core's shafts, rad/s
    ("engine", "engine"),
    ("odd", "odd input shaft"),
    ("even", "even input shaft"),
    ("out", "transmission output at wheel speed"),
    ("veh", "vehicle (wheels)"),
)
SH_ENGINE, SH_ODD, SH_EVEN, SH_OUT, SH_VEH = range(len(SHAFTS))
N_SHAFTS = len(SHAFTS)
ROWS = (  # the core's friction rows, N m
    ("c1", "clutch 1 [engine, odd]"),
    ("c2", "clutch 2 [engine, even]"),
    ("s_odd", "synchronizer/dog of the odd shaft [odd, output], N m at the input shaft"),
    ("s_even", "synchronizer/dog of the even shaft [even, output], N m at the input shaft"),
)
ROW_C1, ROW_C2, ROW_S_ODD, ROW_S_EVEN = range(len(ROWS))
N_ROWS = len(ROWS)
MAX_GEARS = 9  # a size: the gears a DCT may have, not a slot

PLANT_FLOATS = (  # the plant's float parameters: offsets inside the MF_PLANT block
    ("ratio", MAX_GEARS + 1, "ratio of gear 0..MAX_GEARS (index 0 unused), w_in / w_layshaft"),
    ("final", 1, "final drive ratio"),
    ("wheel_radius", 1, "dynamic wheel radius, m"),
    ("sync_cap", MAX_GEARS + 1, "synchronizer capacity per gear, N m at the input shaft"),
    ("dog_cap", 1, "dog clutch capacity, N m at the input shaft"),
    ("n_gears", 1, "number of forward gears"),
)
PF_RATIO, PF_FINAL, PF_WHEEL_RADIUS, PF_SYNC_CAP, PF_DOG_CAP, PF_N_GEARS, PF_LEN = \
    itertools.accumulate((width for _, width, _ in PLANT_FLOATS), initial=0)
PF_HYD = PF_LEN  # the clutch hydraulics' parameter block (powertrain/hydraulics.py) follows, with hydraulics
PLANT_INTS = (  # the plant's int parameters (MI_PLANT block)
    ("hyd_d", "offset in the plant data block of the hydraulics' data, -1: no hydraulics"),
)
PI_HYD_D, = range(len(PLANT_INTS))
PI_LEN = len(PLANT_INTS)
PLANT_INT_DATA = (  # the plant's int data (DI_PLANT block)
    ("sel_odd", "gear in effect on the odd shaft (0 = neutral)"),
    ("sel_even", "gear in effect on the even shaft"),
)
PD_SEL_ODD, PD_SEL_EVEN = range(len(PLANT_INT_DATA))
PD_LEN = len(PLANT_INT_DATA)


# the status bits of a DCT step: the core's, and one of its own (allocated: 256)
STATUS = CORE_STATUS.extend("the dct plant")
ST_GEAR_REJECTED = STATUS.allocate("gear_command_rejected",
                                   "a gear command was not valid for its shaft: the previous selection was kept")


@dataclass(frozen=True)
class DctParams:
    """Validated DCT parameters (see configs/dct.toml for their meaning and sources)."""

    engine_inertia: float  # kg m^2
    engine_drag: float  # N m s/rad
    odd_inertia: float  # kg m^2
    even_inertia: float  # kg m^2
    input_drag: float  # N m s/rad, each input shaft
    gear_ratios: tuple[float, ...]  # gear 1..N, w_input / w_layshaft
    final_drive: float  # w_layshaft / w_wheel
    output_inertia: float  # kg m^2 at wheel speed
    output_drag: float  # N m s/rad at wheel speed
    vehicle_mass: float  # kg
    wheel_radius: float  # m
    wheel_inertia: float  # kg m^2, all wheels
    vehicle_drag: float  # N m s/rad at the wheels
    driveshaft_stiffness: float  # N m/rad at the wheel
    driveshaft_damping: float  # N m s/rad at the wheel
    clutches: tuple[WetClutch, WetClutch]
    cone_torque: tuple[float, ...]  # synchronizer torque of gear 1..N at the layshaft, N m
    cone_kinetic_ratio: float  # Coulomb / static friction of the cone
    dog_capacity: float  # N m at the input shaft
    vehicle_speed0_km_h: float
    engine_speed0: float  # rad/s
    clutch_engaged0: str  # "c1", "c2" or "none"
    settings: Settings
    hydraulics: Hydraulics | None = None  # clutch fill, dead time, valve (docs/powertrain.md), rows C1, C2

    @property
    def vehicle_inertia(self) -> float:
        """Vehicle mass reflected to the wheels plus the wheels, kg m^2."""
        return self.vehicle_mass * self.wheel_radius ** 2 + self.wheel_inertia


def _odd_gears(p: DctParams) -> tuple[float, ...]:
    """Values the odd shaft's gear command may take: neutral and the odd gears."""
    return tuple(float(g) for g in range(0, len(p.gear_ratios) + 1) if g == 0 or g % 2 == 1)


def _even_gears(p: DctParams) -> tuple[float, ...]:
    """Values the even shaft's gear command may take: neutral and the even gears."""
    return tuple(float(g) for g in range(0, len(p.gear_ratios) + 1) if g % 2 == 0)


def _torque_hi(p: DctParams) -> float:
    """Range of the clutch torque and capacity outputs, N m: twice the larger clutch's capacity at 25 bar."""
    return max(1.0e4, 2.0 * max(c.max_capacity(25.0) for c in p.clutches))


def _minus_torque_hi(p: DctParams) -> float:
    return -_torque_hi(p)


# -- ports ----------------------------------------------------------------------------------------
INPUTS = Ports()
IN_P_C1 = INPUTS.add("p_c1", "bar", 0.0, 25.0, 0.0, "clutch 1 (odd gears) pressure command")
IN_P_C2 = INPUTS.add("p_c2", "bar", 0.0, 25.0, 0.0, "clutch 2 (even gears) pressure command")
IN_ENGINE = INPUTS.add("engine_torque", "N m", -300.0, 1000.0, 0.0,
                       "engine torque on the engine shaft (net of engine friction)")
IN_GEAR_ODD = INPUTS.add_block([  # then gear_even: the kernel adds the side 0 (odd) or 1 (even)
    Signal("gear_odd", "-", 0, lambda p: max(_odd_gears(p)), 0, "gear selected on the odd shaft (0 = neutral)",
           integer=True, allowed=_odd_gears),
    Signal("gear_even", "-", 0, lambda p: max(_even_gears(p)), 0, "gear selected on the even shaft (0 = neutral)",
           integer=True, allowed=_even_gears)])
IN_ROAD = INPUTS.add("road_load", "N m", -2.0e4, 2.0e4, 0.0,
                     "road load torque at the wheels (rolling resistance, grade); positive resists forward motion")
N_IN = len(INPUTS)

OUTPUTS = Ports()
OUT_W_ENGINE = OUTPUTS.add("w_engine", "rad/s", -200.0, 1200.0, 0.0, "engine speed")
OUT_W_ODD = OUTPUTS.add("w_odd", "rad/s", -1500.0, 1500.0, 0.0, "odd input shaft speed")
OUT_W_EVEN = OUTPUTS.add("w_even", "rad/s", -1500.0, 1500.0, 0.0, "even input shaft speed")
OUT_W_OUT = OUTPUTS.add("w_out", "rad/s", -500.0, 500.0, 0.0,
                        "transmission output speed at wheel speed (before the half-shafts)")
OUT_W_WHEEL = OUTPUTS.add("w_wheel", "rad/s", -500.0, 500.0, 0.0, "wheel speed")
OUT_VSPEED = OUTPUTS.add("vehicle_speed", "km/h", -500.0, 500.0, 0.0, "vehicle speed, w_wheel * wheel radius")
# pairs: the clutch 2 (even shaft) port follows the clutch 1 (odd shaft) one, the kernels add the side 0 or 1
OUT_SLIP_C1 = OUTPUTS.add_block([
    Signal("slip_c1", "rad/s", -1500.0, 1500.0, 0.0, "clutch 1 slip w_engine - w_odd"),
    Signal("slip_c2", "rad/s", -1500.0, 1500.0, 0.0, "clutch 2 slip w_engine - w_even")])
OUT_TQ_C1 = OUTPUTS.add_block([
    Signal("torque_c1", "N m", _minus_torque_hi, _torque_hi, 0.0,
           "torque clutch 1 passes from the engine to the odd shaft"),
    Signal("torque_c2", "N m", _minus_torque_hi, _torque_hi, 0.0,
           "torque clutch 2 passes from the engine to the even shaft")])
OUT_STUCK_C1 = OUTPUTS.add_block([
    Signal("stuck_c1", "-", 0, 1, 0, "clutch 1 stuck (1) or slipping/open (0)", integer=True),
    Signal("stuck_c2", "-", 0, 1, 0, "clutch 2 stuck (1) or slipping/open (0)", integer=True)])
OUT_CAP_C1 = OUTPUTS.add_block([
    Signal("capacity_c1", "N m", 0.0, _torque_hi, 0.0, "clutch 1 static torque capacity"),
    Signal("capacity_c2", "N m", 0.0, _torque_hi, 0.0, "clutch 2 static torque capacity")])
OUT_P_C1 = OUTPUTS.add_block([
    Signal("pressure_c1", "bar", 0.0, 30.0, 0.0, "clutch 1 actual pressure (after the valve lag)"),
    Signal("pressure_c2", "bar", 0.0, 30.0, 0.0, "clutch 2 actual pressure (after the valve lag)")])
OUT_E_C1 = OUTPUTS.add_block([
    Signal("energy_c1", "J", 0.0, 1.0e9, 0.0, "friction energy dissipated in clutch 1 since reset"),
    Signal("energy_c2", "J", 0.0, 1.0e9, 0.0, "friction energy dissipated in clutch 2 since reset")])
OUT_SYNC_ODD = OUTPUTS.add_block([
    Signal("sync_odd_locked", "-", 0, 1, 0, "odd shaft gear engaged: synchronizer stuck, dog teeth in", integer=True),
    Signal("sync_even_locked", "-", 0, 1, 0, "even shaft gear engaged: synchronizer stuck, dog teeth in",
           integer=True)])
OUT_GEAR = OUTPUTS.add("gear", "-", 0, lambda p: len(p.gear_ratios), 0,
                       "engaged gear: its clutch and synchronizer both stuck (0 = none or both)", integer=True)
OUT_RATIO = OUTPUTS.add("ratio", "-", -RATIO_LIMIT, RATIO_LIMIT, 0.0,
                        "overall ratio w_engine / w_wheel; 0 below 1 rad/s wheel speed, limited to +-100")
OUT_DRIVESHAFT = OUTPUTS.add("driveshaft_torque", "N m", -5.0e4, 5.0e4, 0.0,
                             "half-shaft torque at the wheels; positive drives")
OUT_SEL_ODD = OUTPUTS.add_block([
    Signal("selected_odd", "-", 0, lambda p: max(_odd_gears(p)), 0,
           "gear in effect on the odd shaft (after command checks)", integer=True),
    Signal("selected_even", "-", 0, lambda p: max(_even_gears(p)), 0,
           "gear in effect on the even shaft (after command checks)", integer=True)])
OUT_STATUS = OUTPUTS.add("status", "-", 0, 2 ** 16, 0,
                         f"core status bits, plus {ST_GEAR_REJECTED} = gear command rejected",
                         integer=True)
OUT_FILL = len(OUTPUTS)  # with hydraulics: fill_c1 / fill_c2 of the clutches with hydraulics (hydraulics_plant.py)
CLUTCH_NAMES = ["c1", "c2"]  # the clutches' names in the config and the ports (rows C1, C2)


# -- compiled step ----------------------------------------------------------------
@njit(**JIT)
def _gear_command(mf, mi, df, di, side):
    """The gear to apply on one shaft (0 odd, 1 even) this step and whether the command was rejected.

    A command that is not a whole number of the shaft's parity within the
    gearbox keeps the previous selection.  Called in the real-time loop.
    """
    op = mi[L.DF_PLANT]
    opf = mi[L.MF_PLANT]
    prev = di[mi[L.DI_PLANT] + PD_SEL_ODD + side]
    u = df[op + IN_GEAR_ODD + side]
    n_gears = mf[opf + PF_N_GEARS]
    if not (u >= 0.0 and u <= n_gears and u == math.floor(u)):
        return prev, True
    g = int(u)
    if g != 0 and g % 2 != 1 - side:
        return prev, True
    return g, False


@njit(**JIT)
def _inputs(mf, mi, df, di):
    """Map the plant inputs to the core: pressures, torques, gear selection, synchronizer capacity.

    Returns plant status bits.  Called in the real-time loop.
    """
    op = mi[L.DF_PLANT]
    opf = mi[L.MF_PLANT]
    opd = mi[L.DI_PLANT]
    oua = mi[L.DF_U_ACT]
    ouar = mi[L.DF_U_ACT_RATE]
    out = mi[L.DF_U_TAU]
    outr = mi[L.DF_U_TAU_RATE]
    ocb = mi[L.DF_COEF_B]
    omode = mi[L.DI_MODE]
    df[oua + ROW_C1] = df[op + IN_P_C1] * BAR
    df[ouar + ROW_C1] = df[op + N_IN + IN_P_C1] * BAR
    df[oua + ROW_C2] = df[op + IN_P_C2] * BAR
    df[ouar + ROW_C2] = df[op + N_IN + IN_P_C2] * BAR
    df[out + SH_ENGINE] = df[op + IN_ENGINE]
    df[outr + SH_ENGINE] = df[op + N_IN + IN_ENGINE]
    df[out + SH_VEH] = -df[op + IN_ROAD]
    df[outr + SH_VEH] = -df[op + N_IN + IN_ROAD]
    for k in (IN_P_C1, IN_P_C2, IN_ENGINE, IN_ROAD):
        if not (math.isfinite(df[op + k]) and math.isfinite(df[op + N_IN + k])):
            # the core rejects the step (ST_BAD_INPUT); leave the gear selection untouched too
            return 0
    st = 0
    final = mf[opf + PF_FINAL]
    for side in range(2):
        row = ROW_S_ODD + side
        g, rejected = _gear_command(mf, mi, df, di, side)
        if rejected:
            st |= ST_GEAR_REJECTED
        changed = g != di[opd + PD_SEL_ODD + side]
        di[opd + PD_SEL_ODD + side] = g
        if changed and g != 0:
            coef = -mf[opf + PF_RATIO + g] * final
            if df[ocb + row] != coef:
                df[ocb + row] = coef
                di[mi[L.DI_FLAGS] + L.FLAG_COEF_DIRTY] = 1
        # neutral: no capacity; a gear whose row is stuck and unchanged: dog teeth in;
        # otherwise the cone synchronizes (a freshly selected gear always starts on the cone)
        if g == 0:
            cap = 0.0
        elif di[omode + row] == L.MODE_STUCK and not changed:
            cap = mf[opf + PF_DOG_CAP]
        else:
            cap = mf[opf + PF_SYNC_CAP + g]
        df[oua + row] = cap
        df[ouar + row] = 0.0
    return st


@njit(**JIT)
def _outputs(mf, mi, df, di, st, h):
    """Write the plant outputs from the core state (none at a step whose outputs a compiled offline run will
    not read: L.RUN_OUTPUTS_UNREAD in the run hints).  Called in the real-time loop."""
    if di[mi[L.DI_FLAGS] + L.FLAG_RUN_HINTS] & L.RUN_OUTPUTS_UNREAD:
        return
    oy = mi[L.DF_PLANT] + 2 * N_IN
    opf = mi[L.MF_PLANT]
    opd = mi[L.DI_PLANT]
    ow = y_omega(mi)
    omode = mi[L.DI_MODE]
    omu = mi[L.DF_MU]
    ocap = mi[L.DF_CAP_S]
    oact = y_act(mi)
    owork = y_row_work(mi)
    w_e = df[ow + SH_ENGINE]
    w_v = df[ow + SH_VEH]
    df[oy + OUT_W_ENGINE] = w_e
    df[oy + OUT_W_ODD] = df[ow + SH_ODD]
    df[oy + OUT_W_EVEN] = df[ow + SH_EVEN]
    df[oy + OUT_W_OUT] = df[ow + SH_OUT]
    df[oy + OUT_W_WHEEL] = w_v
    df[oy + OUT_VSPEED] = w_v * mf[opf + PF_WHEEL_RADIUS] * 3.6
    for c in range(2):
        row = ROW_C1 + c
        df[oy + OUT_SLIP_C1 + c] = w_e - df[ow + SH_ODD + c]
        df[oy + OUT_TQ_C1 + c] = -df[omu + row]  # the row force acts as -mu on the driven shaft side
        df[oy + OUT_STUCK_C1 + c] = 1.0 if di[omode + row] == L.MODE_STUCK else 0.0
        df[oy + OUT_CAP_C1 + c] = df[ocap + row]
        # a kinematic clutch has no pressure state: report its command
        df[oy + OUT_P_C1 + c] = (df[oact + row] if mf[mi[L.MF_KIN_SHIFT] + row] <= 0.0
                                 else df[mi[L.DF_U_ACT] + row]) / BAR
        df[oy + OUT_E_C1 + c] = 0.0 - df[owork + row]  # work is <= 0; 0.0 - avoids -0.0
    gear = 0
    for side in range(2):
        sel = di[opd + PD_SEL_ODD + side]
        locked = sel != 0 and di[omode + ROW_S_ODD + side] == L.MODE_STUCK
        df[oy + OUT_SYNC_ODD + side] = 1.0 if locked else 0.0
        df[oy + OUT_SEL_ODD + side] = float(sel)
        if locked and di[omode + ROW_C1 + side] == L.MODE_STUCK:
            gear = sel if gear == 0 else -1
    df[oy + OUT_GEAR] = float(gear) if gear > 0 else 0.0
    ratio = w_e / w_v if abs(w_v) > RATIO_MIN_OUTPUT_SPEED else 0.0  # the wheels: 1 rad/s is about 1.1 km/h
    df[oy + OUT_RATIO] = min(max(ratio, -RATIO_LIMIT), RATIO_LIMIT)
    df[oy + OUT_DRIVESHAFT] = df[mi[L.DF_SPRING_TQ]]
    df[oy + OUT_STATUS] = float(st)
    ohd = mi[mi[L.MI_PLANT] + PI_HYD_D]
    if ohd >= 0:
        write_fill_outputs(mf, df, opf + PF_HYD, mi[L.DF_PLANT] + ohd, oy + OUT_FILL)


# the clutch hydraulics' stages around the core's step (plants/friction_step.py), each acting only with hydraulics
_before_core, _after_core = friction_step.hydraulics_stages(globals(), hydraulics_before, hydraulics_after)


# the step (inputs -> core step -> outputs) and the refresh: the one sequence of plants/friction_step.py
dct_step, dct_refresh = friction_step.plant_kernels(globals(), "dct")


class DctPlant(HydraulicsPlant, FrictionPlant):
    """Dual-clutch transmission in a simplified vehicle driveline (Biagiotti & Zanasi, section 4)."""

    kind = "dct"
    skips_unread_outputs = True
    hydraulics_param_slot, hydraulics_data_slot, first_command_input = PF_HYD, PI_HYD_D, IN_P_C1
    description = "Dual-clutch transmission: engine, two wet clutches, odd/even input shafts with synchronizers, " \
                  "half-shaft compliance and vehicle (Biagiotti & Zanasi)"
    status_bits = STATUS
    params_type = DctParams
    input_ports = INPUTS
    output_ports = OUTPUTS
    kernels = friction_kernels(dct_step, dct_refresh)
    plant_nf = PF_LEN
    plant_ni = PI_LEN
    plant_ndi = PD_LEN

    @classmethod
    def signals(cls, params: DctParams):
        """The ports; with hydraulics the fill outputs (and with a valve map the currents ``i_c1``, ``i_c2``)."""
        return cls.fixed_hydraulic_signals(params, *super().signals(params), CLUTCH_NAMES)

    @classmethod
    def description_of(cls, params: DctParams, source: str = "") -> dict:
        """The signals and every gear: its clutch and synchronizer, ratio w_engine / w_wheel (input over output)."""
        out = super().description_of(params, source)
        out["gears"] = [dict(name=str(g), number=g, engaged=[f"C{2 - g % 2}", f"S_{'odd' if g % 2 else 'even'}:{g}"],
                             ratio=r * params.final_drive) for g, r in enumerate(params.gear_ratios, start=1)]
        if params.hydraulics is not None:
            out["components"] = {"hydraulics": hydraulics_description(params.hydraulics, CLUTCH_NAMES)}
        return out

    @classmethod
    def build_spec(cls, p: DctParams) -> CoreSpec:
        rows = []
        for name, shaft, c in (("C1", SH_ODD, p.clutches[0]), ("C2", SH_EVEN, p.clutches[1])):
            rows.append(c.row(name, SH_ENGINE, shaft, 1.0, -1.0))  # torque units: force radius 1
        # synchronizer rows are driven in capacity units (N m at the input shaft) by the plant step;
        # their initial coefficients are gears 1 and 2, replaced as soon as a gear is selected
        for name, shaft, gear in (("S_odd", SH_ODD, 1), ("S_even", SH_EVEN, 2)):
            rows.append(Row(name, shaft, SH_OUT, 1.0, -p.gear_ratios[gear - 1] * p.final_drive, act_gain=1.0,
                            gain_static=1.0, gain_kinetic=p.cone_kinetic_ratio))
        spring = Spring("driveshaft", SH_OUT, SH_VEH, 1.0, -1.0, stiffness=p.driveshaft_stiffness,
                        damping=p.driveshaft_damping)
        return CoreSpec(shaft_names=("engine", "odd", "even", "output", "vehicle"),
                        inertia=(p.engine_inertia, p.odd_inertia, p.even_inertia, p.output_inertia,
                                 p.vehicle_inertia),
                        drag=(p.engine_drag, p.input_drag, p.input_drag, p.output_drag, p.vehicle_drag),
                        rows=tuple(rows), springs=(spring,), settings=p.settings)

    def _fill_model(self) -> None:
        p = self.params
        pf = self.core.plant_f
        pf[PF_FINAL] = p.final_drive
        pf[PF_WHEEL_RADIUS] = p.wheel_radius
        pf[PF_DOG_CAP] = p.dog_capacity
        pf[PF_N_GEARS] = len(p.gear_ratios)
        for k, (ratio, cone) in enumerate(zip(p.gear_ratios, p.cone_torque)):
            pf[PF_RATIO + k + 1] = ratio
            # cone torque acts at the idler (layshaft side), which turns at w_input / ratio
            pf[PF_SYNC_CAP + k + 1] = cone / ratio
        hyd = p.hydraulics
        self.core.plant_i[PI_HYD_D] = -1 if hyd is None else 2 * self.n_in + self.n_out  # the data follow the ports
        if hyd is not None:
            pf[PF_HYD:] = param_block(hyd, self.n_in, [IN_P_C1 + k for k in hyd.elements])

    # -- helpers for tests, docs and scenario design -----------------------------
    def total_ratio(self, gear: int) -> float:
        """w_input / w_wheel of forward gear 1..N (gear ratio times final drive)."""
        return self.params.gear_ratios[gear - 1] * self.params.final_drive

    def sync_capacity(self, gear: int) -> float:
        """Synchronizer capacity of a gear, N m at the input shaft."""
        return self.params.cone_torque[gear - 1] / self.params.gear_ratios[gear - 1]

    def clutch_capacity(self, clutch: int, pressure_bar: float) -> float:
        """Static capacity of clutch 1 or 2 at a settled pressure, N m."""
        return self.params.clutches[clutch - 1].capacity_at(pressure_bar)

    # -- life cycle ----------------------------------------------------------------
    def _initial_state(self) -> None:
        p = self.params
        c = self.core
        sel = (int(self.u[IN_GEAR_ODD]), int(self.u[IN_GEAR_ODD + 1]))
        c.plant_di[PD_SEL_ODD] = sel[0]
        c.plant_di[PD_SEL_EVEN] = sel[1]
        w_wheel = p.vehicle_speed0_km_h / 3.6 / p.wheel_radius
        w_in = [None, None]
        for side in range(2):
            if sel[side]:
                c.coef_b[ROW_S_ODD + side] = -self.total_ratio(sel[side])
                w_in[side] = self.total_ratio(sel[side]) * w_wheel
        w_engine = p.engine_speed0
        if p.clutch_engaged0 != "none":
            side = 0 if p.clutch_engaged0 == "c1" else 1
            if sel[side]:
                w_engine = w_in[side]
        # a shaft in neutral turns with the engine (its open wet clutch drags it along)
        w_in = [w_engine if w is None else w for w in w_in]
        c.omega[:] = (w_engine, w_in[0], w_in[1], w_wheel, w_wheel)
        c.act[ROW_C1] = self.command_pressure(ROW_C1) * BAR
        c.act[ROW_C2] = self.command_pressure(ROW_C2) * BAR
        c.u_act[:2] = c.act[:2]
        self._settle_hydraulics()  # with hydraulics: ring full, valve settled, pistons stroked to balance
        # gears selected at reset start engaged: dog teeth in
        for side in range(2):
            row = ROW_S_ODD + side
            cap = p.dog_capacity if sel[side] else 0.0
            c.act[row] = cap
            c.u_act[row] = cap
        c.twist[0] = self._quasi_steady_driveshaft_torque(sel, w_wheel) / p.driveshaft_stiffness

    def _quasi_steady_driveshaft_torque(self, sel, w_wheel: float) -> float:
        """Half-shaft torque at which the output side and the vehicle accelerate alike, N m.

        At reset the shafts geared to the output (engaged synchronizers, and
        the engine through an engaged clutch) and the vehicle start with the
        same acceleration, so the driveline starts without a shuffle
        transient: with J_G, F_G the inertia and torque of the output group
        at wheel speed and J_v, F_v those of the vehicle,
        T = (J_v F_G - J_G F_v) / (J_G + J_v).
        """
        p = self.params
        c = self.core
        w = c.omega
        # speed factor r_j = w_j / w_wheel of each shaft geared to the output
        r = {SH_OUT: 1.0}
        for side in range(2):
            if sel[side]:
                r[SH_ODD + side] = self.total_ratio(sel[side])
        if p.clutch_engaged0 != "none" and sel[0 if p.clutch_engaged0 == "c1" else 1]:
            r[SH_ENGINE] = r[SH_ODD if p.clutch_engaged0 == "c1" else SH_EVEN]
        # generalised forces: inputs, drags, and the friction of the rows that slip at reset
        f = np.zeros(N_SHAFTS)
        f[SH_ENGINE] = float(self.u[IN_ENGINE])
        f[SH_VEH] = -float(self.u[IN_ROAD])
        f -= np.asarray(c.spec.drag) * w
        engaged = set(self._engaged_at_start())
        for i, row in enumerate(c.spec.rows):
            if i in engaged:
                continue
            delta = c.coef_a[i] * w[row.shaft_a] + c.coef_b[i] * w[row.shaft_b]
            fn = max(0.0, row.act_gain * c.act[i] - row.act_preload)
            kin = row.gain_kinetic * fn
            if row.stribeck_velocity > 0.0:
                kin += (row.gain_static - row.gain_kinetic) * fn * np.exp(
                    -abs(delta / row.stribeck_velocity) ** row.stribeck_exponent)
            mu = -kin * np.sign(delta) - row.viscous * delta
            f[row.shaft_a] += c.coef_a[i] * mu
            f[row.shaft_b] += c.coef_b[i] * mu
        J = c.spec.inertia
        J_g = sum(J[j] * rj * rj for j, rj in r.items())
        F_g = sum(f[j] * rj for j, rj in r.items())
        J_v = J[SH_VEH]
        return (J_v * F_g - J_g * f[SH_VEH]) / (J_g + J_v)

    def _engaged_at_start(self) -> list[int]:
        """The synchronizers of the gears selected at reset (dog teeth in) and the clutch named in [initial]."""
        p = self.params
        rows = [ROW_S_ODD + side for side in range(2) if self.core.plant_di[PD_SEL_ODD + side]]
        if p.clutch_engaged0 == "c1":
            rows.append(ROW_C1)
        elif p.clutch_engaged0 == "c2":
            rows.append(ROW_C2)
        return rows
