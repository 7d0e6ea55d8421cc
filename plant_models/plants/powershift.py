"""Powershift tractor gearbox (seed 003, section 5): 4 axles, 8 wet clutches, 18 forward gears.

Axle 1 carries the engine, axle 4 the output.  Each clutch i locks a gear
pair between two axles; row i of R holds the pitch radii of that pair
(``r_a w_a + r_b w_b = 0`` when engaged), so the friction force of a row is
the tangential force at the mesh, in N.  The paper's R (radii 1..4 in units
of ``radius_unit_m``) gives integer stage ratios; forward gears engage one
clutch of each stage: {1, 2} x {3, 4, 5} x {6, 7, 8} = 18 gears.

Clutch capacity from pressure (section 5): F_N = A p - F_spring (zero below
the kiss point p = F_spring / A), K = F_N eta_s n_c r_m / r_c,
k = F_N eta_c n_c r_m / r_c, with r_c the radius of the gear the clutch
locks.  Commanded pressure reaches the clutch through a first-order lag.

Signs: with three direct gears, w_4 turns opposite to w_1 in every forward
gear; ``w_out = -w_4`` is the output speed in the forward sense and
``ratio = -w_4 / w_1`` the overall ratio as the paper plots it.  A positive
``load_torque`` resists forward motion.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from numba import njit

from ..core import layout as L
from .clutch import WetClutch, read_wet_clutch
from ..config import ConfigReader
from ..core import CoreSpec, Settings
from ..core.api import BUFS, JIT, core_step as _step, raw_f as _raw_f, raw_i as _raw_i
from ..plant import BAR, Plant, Signal

N_AXLES = 4
N_CLUTCH = 8
STAGES = ((0, 1), (2, 3, 4), (5, 6, 7))  # clutch indices of the three stages
PAPER_R = ((1, 3, 0, 0), (1, 2, 0, 0), (0, 1, 4, 0), (0, 1, 3, 0), (0, 1, 2, 0), (0, 0, 1, 4), (0, 0, 1, 2),
           (0, 0, 1, 1))

# plant float parameters (offsets inside the MF_PLANT block)
PF_RC = 0  # [8] radius of the gear each clutch locks, m
PF_LOAD_SIGN = 8  # torque on axle 4 per unit load torque (+1: resists forward motion)
PF_GEAR_RATIO = 9  # [18] nominal overall ratio |w4/w1| of each gear
PF_LEN = 27
# plant int parameters (MI_PLANT block)
PI_GEARS = 0  # [18*3] clutch indices of each gear
PI_LEN = 54

# inputs
IN_P0 = 0  # [8] clutch pressure commands, bar
IN_ENGINE = 8
IN_LOAD = 9
N_IN = 10
# outputs
OUT_W0 = 0  # [4] axle speeds
OUT_WOUT = 4
OUT_GEAR = 5
OUT_RATIO = 6
OUT_CL = 7  # then per clutch: slip, torque, stuck, capacity, pressure, energy
CL_FIELDS = ("slip", "torque", "stuck", "capacity", "pressure", "energy")
OUT_STATUS = OUT_CL + N_CLUTCH * len(CL_FIELDS)
N_OUT = OUT_STATUS + 1


def gear_table() -> list[tuple[tuple[int, int, int], float]]:
    """The 18 forward gears: (clutch indices, |w4/w1|), lowest gear (largest reduction) first.

    Ties in ratio (the paper's R has some) are ordered by clutch indices.
    """
    gears = []
    for trip in itertools.product(*STAGES):
        ratio = 1.0
        for i in trip:
            a, b = [v for v in PAPER_R[i] if v != 0]
            ratio *= a / b
        gears.append((trip, ratio))
    gears.sort(key=lambda g: (g[1], g[0]))
    return gears


@dataclass(frozen=True)
class PowershiftParams:
    inertia: tuple[float, ...]
    drag: tuple[float, ...]
    R: tuple[tuple[float, ...], ...]  # gear radii, m
    clutches: tuple[WetClutch, ...]
    sides: tuple[str, ...]  # "a" or "b": which shaft of each row carries the clutch
    engine_speed0: float
    engaged0: tuple[int, ...]  # 0-based clutch indices engaged at t = 0
    settings: Settings

    @staticmethod
    def from_config(cfg: ConfigReader) -> "PowershiftParams":
        ax = cfg.sub("axles")
        inertia = tuple(ax.numbers("inertia_kg_m2", N_AXLES, positive=True))
        drag = tuple(ax.numbers("drag_N_m_s_per_rad", N_AXLES, nonnegative=True))
        ax.reject_unknown()
        gr = cfg.sub("gears")
        unit = gr.number("radius_unit_m", positive=True)
        rows = gr.raw("R")
        if not isinstance(rows, list) or len(rows) != N_CLUTCH:
            raise gr.error("R", f"must be a list of {N_CLUTCH} rows of {N_AXLES} numbers")
        R = []
        for i, row in enumerate(rows):
            if not isinstance(row, list) or len(row) != N_AXLES or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) for v in row):
                raise gr.error(f"R[{i}]", f"must be a list of {N_AXLES} numbers")
            nz = [k for k, v in enumerate(row) if v != 0]
            if len(nz) != 2:
                raise gr.error(f"R[{i}]", f"each row couples exactly two axles (two non-zero radii), got {row}")
            R.append(tuple(float(v) * unit for v in row))
        gr.reject_unknown()
        base = cfg.sub("clutch")
        per = cfg.raw("clutches", [])
        if not isinstance(per, list) or (per and len(per) != N_CLUTCH):
            raise cfg.error("clutches", f"optional per-clutch overrides: a list of {N_CLUTCH} tables")
        clutches = []
        sides = []
        for i in range(N_CLUTCH):
            # overrides of single values for clutch i: a [clutch.cN] sub-table, or entry i of the list
            over = None
            if base.has(f"c{i + 1}"):
                if per:
                    raise base.error(f"c{i + 1}", "give per-clutch overrides either as [clutch.cN] tables "
                                     "or as the clutches list, not both")
                over = base.sub(f"c{i + 1}")
            elif per:
                over = ConfigReader(per[i], cfg.source, f"clutches[{i}]")

            c = read_wet_clutch(base, over, speed_unit="m_s", viscous_unit="N_s_per_m")
            side_src = over if over is not None and over.has("side") else base
            sides.append(side_src.string("side", "b", choices=("a", "b")))
            if over is not None:
                over.reject_unknown()
            clutches.append(c)
        base.reject_unknown()
        ini = cfg.sub("initial")
        w0 = ini.number("engine_speed_rad_s")
        eng = ini.raw("engaged", [])
        if not isinstance(eng, list) or not all(isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= N_CLUTCH
                                                for v in eng):
            raise ini.error("engaged", f"must be a list of clutch numbers 1..{N_CLUTCH}, got {eng!r}")
        ini.reject_unknown()
        settings = settings_from_config(cfg)
        return PowershiftParams(inertia, drag, tuple(R), tuple(clutches), tuple(sides), w0, tuple(v - 1 for v in eng), settings)


def settings_from_config(cfg: ConfigReader) -> Settings:
    """The optional [solver] table (numerical settings of the core)."""
    if not cfg.has("solver"):
        return Settings()
    sv = cfg.sub("solver")
    d = Settings()
    s = Settings(
        event_tol=sv.number("event_tol", d.event_tol, positive=True),
        max_event_substeps=sv.integer("max_event_substeps", d.max_event_substeps, lo=0),
        max_solver_iter=sv.integer("max_solver_iter", d.max_solver_iter, lo=0),
        max_locate_iter=sv.integer("max_locate_iter", d.max_locate_iter, lo=1),
    )
    sv.reject_unknown()
    return s


def _build_spec(p: PowershiftParams) -> tuple[CoreSpec, list[float]]:
    rows = []
    rcs = []
    for i, (r, c, side) in enumerate(zip(p.R, p.clutches, p.sides)):
        a, b = [k for k, v in enumerate(r) if v != 0]
        rc = abs(r[b] if side == "b" else r[a])  # radius of the gear the clutch locks
        rows.append(c.row(f"C{i + 1}", a, b, r[a], r[b], force_radius_m=rc))
        rcs.append(rc)
    spec = CoreSpec(shaft_names=tuple(f"axle{j + 1}" for j in range(N_AXLES)), inertia=p.inertia, drag=p.drag,
                    rows=tuple(rows), settings=p.settings)
    return spec, rcs


def _signals(capacity_hi_N_m: float = 1.0e5):
    inputs = [Signal(f"p_c{i + 1}", "bar", 0.0, 40.0, 0.0, f"clutch {i + 1} pressure command") for i in range(N_CLUTCH)]
    inputs += [Signal("engine_torque", "N m", -1000.0, 5000.0, 0.0, "engine torque on axle 1"),
               Signal("load_torque", "N m", -1.0e5, 1.0e5, 0.0,
                      "load torque on axle 4; positive resists forward motion")]
    outputs = [Signal(f"w_{j + 1}", "rad/s", -1000.0, 1000.0, 0.0, f"speed of axle {j + 1}") for j in range(N_AXLES)]
    outputs += [Signal("w_out", "rad/s", -1000.0, 1000.0, 0.0, "output speed, forward positive (-w_4)"),
                Signal("gear", "-", 0, 18, 0, "engaged forward gear 1..18 (all three clutches stuck), 0 = none",
                       integer=True),
                Signal("ratio", "-", -10.0, 10.0, 0.0, "overall speed ratio -w_4/w_1 as the paper plots it")]
    for i in range(N_CLUTCH):
        c = i + 1
        outputs += [Signal(f"slip_c{c}", "rad/s", -2000.0, 2000.0, 0.0, f"clutch {c} slip speed across its plates"),
                    Signal(f"torque_c{c}", "N m", -1.0e5, 1.0e5, 0.0, f"clutch {c} friction torque"),
                    Signal(f"stuck_c{c}", "-", 0, 1, 0, f"clutch {c} stuck (1) or slipping/open (0)", integer=True),
                    Signal(f"capacity_c{c}", "N m", 0.0, capacity_hi_N_m, 0.0, f"clutch {c} static torque capacity"),
                    Signal(f"pressure_c{c}", "bar", -10.0, 50.0, 0.0, f"clutch {c} actual pressure (after the lag)"),
                    Signal(f"energy_c{c}", "J", 0.0, 1.0e9, 0.0,
                           f"friction energy dissipated in clutch {c} since reset")]
    outputs.append(Signal("status", "-", 0, 2 ** 16, 0, "core status bits (see docs/method.md)", integer=True))
    return tuple(inputs), tuple(outputs)


@njit(**JIT)
def _ps_outputs(mf, mi, df, di, st):
    """Write the plant outputs from the core state.  Called in the real-time loop."""
    n = mi[L.H_N]
    g = mi[L.H_G]
    s = mi[L.H_S]
    op = mi[L.DF_PLANT]
    oy = op + 2 * N_IN
    opf = mi[L.MF_PLANT]
    opi = mi[L.MI_PLANT]
    ow = mi[L.DF_Y]
    for j in range(N_AXLES):
        df[oy + OUT_W0 + j] = df[ow + j]
    df[oy + OUT_WOUT] = -df[ow + 3]
    w1 = df[ow]
    df[oy + OUT_RATIO] = -df[ow + 3] / w1 if abs(w1) > 1e-9 else 0.0
    omode = mi[L.DI_MODE]
    gear = 0
    for k in range(18):
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
    oact = ow + 2 * n + s
    owork = ow + 2 * n + s + g + L.W_ROW0
    for i in range(N_CLUTCH):
        rc = mf[opf + PF_RC + i]
        base = oy + OUT_CL + len(CL_FIELDS) * i
        df[base] = df[odelta + i] / rc
        df[base + 1] = df[omu + i] * rc
        df[base + 2] = 1.0 if di[omode + i] == L.MODE_STUCK else 0.0
        df[base + 3] = df[ocap + i] * rc
        # a kinematic clutch (seed 001) has no pressure state: report its command
        df[base + 4] = (df[oact + i] if mf[mi[L.MF_KIN_SHIFT] + i] <= 0.0 else df[mi[L.DF_U_ACT] + i]) / BAR
        df[base + 5] = 0.0 - df[owork + i]  # dissipated energy >= 0 (the work of friction is <= 0)
    df[oy + OUT_STATUS] = float(st)


@njit(**JIT)
def _ps_inputs(mf, mi, df, di):
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


@njit("int64(" + BUFS + ", float64)", **JIT)
def powershift_step(mf, mi, df, di, dt):
    """Map the inputs to the core, take one step, write the outputs.  Called in the real-time loop."""
    rmf, rmi, rdf, rdi = _raw_f(mf), _raw_i(mi), _raw_f(df), _raw_i(di)
    _ps_inputs(rmf, rmi, rdf, rdi)
    st = _step(rmf, rmi, rdf, rdi, dt)
    _ps_outputs(rmf, rmi, rdf, rdi, st)
    return st


@njit("int64(" + BUFS + ", int64)", **JIT)
def powershift_refresh(mf, mi, df, di, st):
    """Map inputs and recompute outputs without stepping (after a reset)."""
    rmf, rmi, rdf, rdi = _raw_f(mf), _raw_i(mi), _raw_f(df), _raw_i(di)
    _ps_inputs(rmf, rmi, rdf, rdi)
    _ps_outputs(rmf, rmi, rdf, rdi, st)
    return 0


class PowershiftPlant(Plant):
    """The Powershift gearbox of seed 003: 4 axles, 8 clutches, 18 forward gears."""

    kind = "powershift"
    description = "Powershift tractor gearbox, 4 axles and 8 wet clutches (Morselli, Zanasi & Ferracin)"

    def __init__(self, params: PowershiftParams, source: str = ""):
        self.params = params
        spec, rcs = _build_spec(params)
        inputs, outputs = _signals(max([1.0e5] + [c.max_capacity(0.0) for c in params.clutches if c.model == "kinematic"]))
        super().__init__(spec, inputs, outputs, powershift_step, plant_nf=PF_LEN, plant_ni=PI_LEN, source=source)
        self.gears = gear_table()
        pf = self.core.plant_f
        pf[PF_RC:PF_RC + N_CLUTCH] = rcs
        pf[PF_LOAD_SIGN] = 1.0
        pf[PF_GEAR_RATIO:PF_GEAR_RATIO + 18] = [r for _, r in self.gears]
        pi = self.core.plant_i
        for k, (trip, _) in enumerate(self.gears):
            pi[PI_GEARS + 3 * k:PI_GEARS + 3 * k + 3] = trip
        self.reset()

    @classmethod
    def from_config(cls, cfg: ConfigReader) -> "PowershiftPlant":
        return cls(PowershiftParams.from_config(cfg), source=cfg.source)

    def _initial_state(self) -> None:
        c = self.core
        c.omega[:] = 0.0
        c.omega[0] = self.params.engine_speed0
        # actuators settled at the commanded pressures
        c.act[:] = self.u[IN_P0:IN_P0 + N_CLUTCH] * BAR
        c.u_act[:] = c.act

    def _start_fn(self) -> int:
        powershift_refresh(self.mf, self.mi, self.df, self.di, 0)
        st = self.core.start(self.params.engaged0)
        powershift_refresh(self.mf, self.mi, self.df, self.di, st)
        return st

    def gear_ratio(self, gear: int) -> float:
        """Nominal overall ratio |w_4 / w_1| of forward gear 1..18."""
        return self.gears[gear - 1][1]

    def gear_clutches(self, gear: int) -> tuple[int, int, int]:
        """Clutch numbers (1-based) of forward gear 1..18."""
        return tuple(i + 1 for i in self.gears[gear - 1][0])
