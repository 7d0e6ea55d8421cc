"""Powershift tractor gearbox: 4 axles, 8 wet clutches, 18 forward gears.

Section 5 of Morselli, Zanasi & Ferracin, "Modeling and simulation of
static and Coulomb friction in a class of automotive systems".  Axle 1
carries the engine, axle 4 the output.  Each clutch i locks a gear pair
between two axles; row i of R holds the pitch radii of that pair
(``r_a w_a + r_b w_b = 0`` when engaged), so the friction force of a row is
the tangential force at the mesh, in N.  The paper's R (radii 1..4 in units
of ``radius_unit_m``) gives integer stage ratios; forward gears engage one
clutch of each stage: {1, 2} x {3, 4, 5} x {6, 7, 8} = 18 gears.

Clutch capacity from pressure (section 5): F_N = A p - F_spring (zero below
the kiss point p = F_spring / A), K = F_N eta_s n_c r_m / r_c,
k = F_N eta_c n_c r_m / r_c, with r_c the radius of the gear the clutch
locks.  Commanded pressure reaches the clutch through a first-order lag, or,
with a ``[hydraulics]`` table, through the clutch hydraulics of
:mod:`plant_models.powertrain.hydraulics` (dead time, valve, fill phase to the
kiss point, return spring; ``fill_c<i>`` outputs after the status word).

Signs: with three direct gears, w_4 turns opposite to w_1 in every forward
gear; ``w_out = -w_4`` is the output speed in the forward sense and
``ratio = w_1 / w_out = -w_1 / w_4`` the overall ratio, input speed over
output speed like every plant's (48 in gear 1; the paper's fig. 7 plots its
inverse, ``-w_4 / w_1``, which :mod:`server.plots.papers` computes from the
axle speeds).  A positive ``load_torque`` resists forward motion.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from numba import njit

from ..clutch import BAR, WetClutch
from ..core.api import JIT, L, CoreSpec, Settings, y_act, y_omega, y_row_work
from ..friction_plant import FrictionPlant, friction_kernels
from ..plant import Ports, Signal
from ..powertrain.hydraulics import Hydraulics, hydraulics_after, hydraulics_before, param_block, write_fill_outputs
from ..powertrain.hydraulics import describe as hydraulics_description
from ..powertrain.hydraulics_plant import HydraulicsPlant
from .ratio import RATIO_LIMIT, RATIO_MIN_OUTPUT_SPEED
from . import friction_step

N_AXLES = 4  # sizes (the paper's gearbox), not slots
N_CLUTCH = 8
STAGES = ((0, 1), (2, 3, 4), (5, 6, 7))  # clutch indices of the three stages
PAPER_R = ((1, 3, 0, 0), (1, 2, 0, 0), (0, 1, 4, 0), (0, 1, 3, 0), (0, 1, 2, 0), (0, 0, 1, 4), (0, 0, 1, 2),
           (0, 0, 1, 1))
N_GEARS = 18

# The slot numbers below come from their table's order (an entry: name, width, doc), so a new slot is one line.
PLANT_FLOATS = (  # the plant's float parameters: offsets inside the MF_PLANT block
    ("rc", N_CLUTCH, "radius of the gear each clutch locks, m"),
    ("load_sign", 1, "torque on axle 4 per unit load torque (+1: resists forward motion)"),
    ("gear_ratio", N_GEARS, "nominal overall ratio w_1 / w_out of each gear"),
)
PF_RC, PF_LOAD_SIGN, PF_GEAR_RATIO, PF_LEN = itertools.accumulate((w for _, w, _ in PLANT_FLOATS), initial=0)
PF_HYD = PF_LEN  # the clutch hydraulics' parameter block (powertrain/hydraulics.py) follows, with hydraulics
PLANT_INTS = (  # the plant's int parameters (MI_PLANT block)
    ("gears", N_GEARS * 3, "clutch indices of each gear"),
    ("hyd_d", 1, "offset in the plant data block of the hydraulics' data, -1: no hydraulics"),
)
PI_GEARS, PI_HYD_D, PI_LEN = itertools.accumulate((w for _, w, _ in PLANT_INTS), initial=0)


@dataclass(frozen=True)
class PowershiftParams:
    """Validated Powershift parameters (see configs/powershift.toml for their meaning and sources)."""

    inertia: tuple[float, ...]  # kg m^2, per axle
    drag: tuple[float, ...]  # N m s/rad, per axle
    R: tuple[tuple[float, ...], ...]  # gear radii, m
    clutches: tuple[WetClutch, ...]
    sides: tuple[str, ...]  # "a" or "b": which shaft of each row carries the clutch
    engine_speed0: float  # rad/s
    engaged0: tuple[int, ...]  # 0-based clutch indices engaged at t = 0
    settings: Settings
    hydraulics: Hydraulics | None = None  # clutch fill, dead time, valve (docs/powertrain.md), rows 0..7


def gear_table() -> list[tuple[tuple[int, int, int], float]]:
    """The 18 forward gears: (clutch indices, ratio w_1 / w_out), lowest gear (largest ratio, 48) first.

    Every stage ratio of the paper's R is an integer, so each gear's ratio is exact.  Ties in ratio (the
    paper's R has some) are ordered by clutch indices.
    """
    gears = []
    for trip in itertools.product(*STAGES):
        ratio = 1.0
        for i in trip:
            a, b = [v for v in PAPER_R[i] if v != 0]
            ratio *= b / a
        gears.append((trip, ratio))
    gears.sort(key=lambda g: (-g[1], g[0]))
    return gears


def _capacity_hi(p: PowershiftParams) -> float:
    """Upper end of the capacity outputs, N m: 1e5, or the largest kinematic clutch's capacity."""
    return max([1.0e5] + [c.max_capacity(0.0) for c in p.clutches if c.model == "kinematic"])


# -- ports ----------------------------------------------------------------------------------------
INPUTS = Ports()
IN_P0 = INPUTS.add_block(Signal(f"p_c{i + 1}", "bar", 0.0, 40.0, 0.0, f"clutch {i + 1} pressure command")
                         for i in range(N_CLUTCH))
IN_ENGINE = INPUTS.add("engine_torque", "N m", -1000.0, 5000.0, 0.0, "engine torque on axle 1")
IN_LOAD = INPUTS.add("load_torque", "N m", -1.0e5, 1.0e5, 0.0, "load torque on axle 4; positive resists forward motion")
N_IN = len(INPUTS)

CLUTCH = Ports()  # the outputs of one clutch ({c}: its number), repeated for every clutch
CL_SLIP = CLUTCH.add("slip_c{c}", "rad/s", -2000.0, 2000.0, 0.0, "clutch {c} slip speed across its plates")
CL_TORQUE = CLUTCH.add("torque_c{c}", "N m", -1.0e5, 1.0e5, 0.0, "clutch {c} friction torque")
CL_STUCK = CLUTCH.add("stuck_c{c}", "-", 0, 1, 0, "clutch {c} stuck (1) or slipping/open (0)", integer=True)
CL_CAPACITY = CLUTCH.add("capacity_c{c}", "N m", 0.0, _capacity_hi, 0.0, "clutch {c} static torque capacity")
CL_PRESSURE = CLUTCH.add("pressure_c{c}", "bar", -10.0, 50.0, 0.0, "clutch {c} actual pressure (after the lag)")
CL_ENERGY = CLUTCH.add("energy_c{c}", "J", 0.0, 1.0e9, 0.0, "friction energy dissipated in clutch {c} since reset")
CL_LEN = len(CLUTCH)

OUTPUTS = Ports()
OUT_W0 = OUTPUTS.add_block(Signal(f"w_{j + 1}", "rad/s", -1000.0, 1000.0, 0.0, f"speed of axle {j + 1}")
                           for j in range(N_AXLES))
OUT_WOUT = OUTPUTS.add("w_out", "rad/s", -1000.0, 1000.0, 0.0, "output speed, forward positive (-w_4)")
OUT_GEAR = OUTPUTS.add("gear", "-", 0, 18, 0, "engaged forward gear 1..18 (all three clutches stuck), 0 = none",
                       integer=True)
OUT_RATIO = OUTPUTS.add("ratio", "-", -RATIO_LIMIT, RATIO_LIMIT, 0.0,
                        "overall ratio w_1 / w_out = -w_1/w_4 (48 in gear 1); 0 below 1 rad/s output speed, "
                        "limited to +-100")
OUT_CL = OUTPUTS.add_block(s for c in range(1, N_CLUTCH + 1) for s in CLUTCH.formatted(c=c))
OUT_STATUS = OUTPUTS.add("status", "-", 0, 2 ** 16, 0, "core status bits (see docs/method.md)", integer=True)
OUT_FILL = len(OUTPUTS)  # with hydraulics: fill_c<i> of each element with hydraulics (hydraulics_plant.py)
CLUTCH_NAMES = [f"c{i + 1}" for i in range(N_CLUTCH)]  # the clutches' names in the config and the ports


def _clutch_radius(p: PowershiftParams, i: int) -> float:
    """Radius of the gear clutch i locks (on the axle its ``side`` names), m."""
    a, b = [k for k, v in enumerate(p.R[i]) if v != 0]
    return abs(p.R[i][b] if p.sides[i] == "b" else p.R[i][a])


# -- compiled step ----------------------------------------------------------------------------------
@njit(**JIT)
def _inputs(mf, mi, df, di):
    """Pressures (bar -> Pa) and torques to the core; no plant status bits.  Called in the real-time loop."""
    op = mi[L.DF_PLANT]
    opf = mi[L.MF_PLANT]
    oua = mi[L.DF_U_ACT]
    ouar = mi[L.DF_U_ACT_RATE]
    out = mi[L.DF_U_TAU]
    outr = mi[L.DF_U_TAU_RATE]
    for i in range(N_CLUTCH):
        df[oua + i] = df[op + IN_P0 + i] * BAR
        df[ouar + i] = df[op + N_IN + IN_P0 + i] * BAR
    df[out] = df[op + IN_ENGINE]
    df[outr] = df[op + N_IN + IN_ENGINE]
    ls = mf[opf + PF_LOAD_SIGN]
    df[out + 3] = ls * df[op + IN_LOAD]
    df[outr + 3] = ls * df[op + N_IN + IN_LOAD]
    return 0


@njit(**JIT)
def _outputs(mf, mi, df, di, st, h):
    """Write the plant outputs from the core state (none at a step whose outputs a compiled offline run will
    not read: L.RUN_OUTPUTS_UNREAD in the run hints).  Called in the real-time loop."""
    if di[mi[L.DI_FLAGS] + L.FLAG_RUN_HINTS] & L.RUN_OUTPUTS_UNREAD:
        return
    oy = mi[L.DF_PLANT] + 2 * N_IN
    opf = mi[L.MF_PLANT]
    opi = mi[L.MI_PLANT]
    ow = y_omega(mi)
    for j in range(N_AXLES):
        df[oy + OUT_W0 + j] = df[ow + j]
    df[oy + OUT_WOUT] = -df[ow + 3]
    w4 = df[ow + 3]
    ratio = -df[ow] / w4 if abs(w4) > RATIO_MIN_OUTPUT_SPEED else 0.0
    df[oy + OUT_RATIO] = min(max(ratio, -RATIO_LIMIT), RATIO_LIMIT)
    omode = mi[L.DI_MODE]
    gear = 0
    for k in range(N_GEARS):
        ok = True
        for q in range(3):
            if di[omode + mi[opi + PI_GEARS + 3 * k + q]] != L.MODE_STUCK:
                ok = False
        if ok:
            gear = k + 1 if gear == 0 else -1
    df[oy + OUT_GEAR] = float(gear) if gear > 0 else 0.0
    odelta = mi[L.DF_DELTA]
    omu = mi[L.DF_MU]
    ocap = mi[L.DF_CAP_S]
    oact = y_act(mi)
    owork = y_row_work(mi)
    for i in range(N_CLUTCH):
        rc = mf[opf + PF_RC + i]
        base = oy + OUT_CL + CL_LEN * i
        df[base + CL_SLIP] = df[odelta + i] / rc
        df[base + CL_TORQUE] = df[omu + i] * rc
        df[base + CL_STUCK] = 1.0 if di[omode + i] == L.MODE_STUCK else 0.0
        df[base + CL_CAPACITY] = df[ocap + i] * rc
        # a kinematic clutch has no pressure state: report its command
        df[base + CL_PRESSURE] = (df[oact + i] if mf[mi[L.MF_KIN_SHIFT] + i] <= 0.0 else df[mi[L.DF_U_ACT] + i]) / BAR
        df[base + CL_ENERGY] = 0.0 - df[owork + i]  # dissipated energy >= 0 (the work of friction is <= 0)
    df[oy + OUT_STATUS] = float(st)
    if mi[opi + PI_HYD_D] >= 0:
        write_fill_outputs(mf, df, opf + PF_HYD, mi[L.DF_PLANT] + mi[opi + PI_HYD_D], oy + OUT_FILL)


# the clutch hydraulics' stages around the core's step (plants/friction_step.py), each acting only with hydraulics
_before_core, _after_core = friction_step.hydraulics_stages(globals(), hydraulics_before, hydraulics_after)


# the step (inputs -> core step -> outputs) and the refresh: the one sequence of plants/friction_step.py
powershift_step, powershift_refresh = friction_step.plant_kernels(globals(), "powershift")


class PowershiftPlant(HydraulicsPlant, FrictionPlant):
    """The Powershift gearbox of Morselli, Zanasi & Ferracin: 4 axles, 8 clutches, 18 forward gears."""

    kind = "powershift"
    skips_unread_outputs = True
    hydraulics_param_slot, hydraulics_data_slot, first_command_input = PF_HYD, PI_HYD_D, IN_P0
    description = "Powershift tractor gearbox, 4 axles and 8 wet clutches (Morselli, Zanasi & Ferracin)"
    params_type = PowershiftParams
    input_ports = INPUTS
    output_ports = OUTPUTS
    kernels = friction_kernels(powershift_step, powershift_refresh)
    plant_nf = PF_LEN
    plant_ni = PI_LEN

    @classmethod
    def signals(cls, params: PowershiftParams):
        """The ports; with hydraulics the fill outputs (and with a valve map the currents ``i_c<i>``)."""
        return cls.fixed_hydraulic_signals(params, *super().signals(params), CLUTCH_NAMES)

    @classmethod
    def build_spec(cls, p: PowershiftParams) -> CoreSpec:
        rows = []
        for i, (r, c) in enumerate(zip(p.R, p.clutches)):
            a, b = [k for k, v in enumerate(r) if v != 0]
            rows.append(c.row(f"C{i + 1}", a, b, r[a], r[b], force_radius_m=_clutch_radius(p, i)))
        return CoreSpec(shaft_names=tuple(f"axle{j + 1}" for j in range(N_AXLES)), inertia=p.inertia, drag=p.drag,
                        rows=tuple(rows), settings=p.settings)

    def _fill_model(self) -> None:
        self.gears = gear_table()
        pf = self.core.plant_f
        pf[PF_RC:PF_RC + N_CLUTCH] = [_clutch_radius(self.params, i) for i in range(N_CLUTCH)]
        pf[PF_LOAD_SIGN] = 1.0
        pf[PF_GEAR_RATIO:PF_GEAR_RATIO + N_GEARS] = [r for _, r in self.gears]
        pi = self.core.plant_i
        for k, (trip, _) in enumerate(self.gears):
            pi[PI_GEARS + 3 * k:PI_GEARS + 3 * k + 3] = trip
        hyd = self.params.hydraulics
        pi[PI_HYD_D] = -1 if hyd is None else 2 * self.n_in + self.n_out  # the data follow the ports
        if hyd is not None:
            pf[PF_HYD:] = param_block(hyd, self.n_in, [IN_P0 + k for k in hyd.elements])

    def _initial_state(self) -> None:
        c = self.core
        c.omega[:] = 0.0
        c.omega[0] = self.params.engine_speed0
        # actuators settled at the commanded pressures (hydraulics: ring full, pistons stroked to balance)
        c.act[:] = [self.command_pressure(i) * BAR for i in range(N_CLUTCH)]
        c.u_act[:] = c.act
        self._settle_hydraulics()

    def _engaged_at_start(self) -> list[int]:
        return list(self.params.engaged0)

    @classmethod
    def description_of(cls, params: PowershiftParams, source: str = "") -> dict:
        """The signals and the 18 forward gears: engaged clutches and ratio w_1 / w_out (input over output)."""
        out = super().description_of(params, source)
        out["gears"] = [dict(name=str(g), number=g, engaged=[f"C{i + 1}" for i in trip], ratio=r)
                        for g, (trip, r) in enumerate(gear_table(), start=1)]
        if params.hydraulics is not None:
            out["components"] = {"hydraulics": hydraulics_description(params.hydraulics, CLUTCH_NAMES)}
        return out

    def gear_ratio(self, gear: int) -> float:
        """Nominal overall ratio w_1 / w_out of forward gear 1..18 (48 in gear 1)."""
        return self.gears[gear - 1][1]

    def gear_clutches(self, gear: int) -> tuple[int, int, int]:
        """Clutch numbers (1-based) of forward gear 1..18."""
        return tuple(i + 1 for i in self.gears[gear - 1][0])
