"""Kinematic (functional) clutch between two shafts (seed 001).

The article's sample system: a driving shaft J1 with an applied torque, a
kinematic clutch, and a driven shaft J2 with viscous drag and a load::

    J1 w1' = T_in  - b1 w1 + mu
    J2 w2' = -T_load - b2 w2 - mu          (mu: the clutch force on J1)

The clutch takes a Boolean engage command and a shift time, and goes
through the article's four modes:

* **Disengaged**: no torque.
* **Engaging**: the relative speed w1 - w2 falls linearly to zero over the
  shift time (``a_close = -(w1 - w2)/shift_time``, taken when the command
  rises); the torque is whatever that takes, a constraint force computed at
  every evaluation of the step (``mu`` above).  The end of the engagement,
  zero relative speed, is a stick event located inside the step.
* **Engaged**: the relative speed is held at exactly zero (a stuck row)
  with at most ``capacity_N_m``.
* **Disengaging**: the torque the clutch can hold ramps from the torque held
  when the command fell to zero over the shift time.  While the slip keeps
  one direction, as in the article, this is its prescribed torque
  ``tau_hold (1 - (t - t0)/shift_time)``; unlike the article's formula, a
  held torque never pushes the plates apart (the clutch slips the way the
  net torque drives it, and the torque opposes that slip).

The clutch is a kinematic row of the friction core (see
:class:`plant_models.core.Row`), so the same clutch replaces a friction
clutch in the Powershift and DCT configs (``model = "kinematic"``).
"""

from __future__ import annotations

from dataclasses import dataclass

from numba import njit

from ..core import layout as L
from ..config import ConfigReader
from ..core import CoreSpec, Row, Settings
from ..core.api import BUFS, JIT, core_step as _step, raw_f as _raw_f, raw_i as _raw_i
from ..plant import Plant, Signal
from .powershift import settings_from_config

# inputs
IN_ENGAGE = 0  # engage command, 0 / 1
IN_DRIVE = 1  # torque on the driving shaft J1, N m
IN_LOAD = 2  # load on the driven shaft J2, N m (positive resists)
N_IN = 3
# outputs
OUT_W_IN = 0  # w1, rad/s
OUT_W_OUT = 1  # w2, rad/s
OUT_SLIP = 2  # w1 - w2, rad/s
OUT_TORQUE = 3  # clutch torque on the driven shaft, N m
OUT_PHASE = 4  # 0 disengaged, 1 engaging, 2 engaged, 3 disengaging
OUT_STUCK = 5
OUT_CAPACITY = 6  # torque the clutch can hold in its phase, N m
OUT_ENERGY = 7  # work of the clutch torque, J (negative: dissipated)
OUT_STATUS = 8
N_OUT = 9


@dataclass(frozen=True)
class KinematicParams:
    """Validated parameters (SI units)."""

    inertia: tuple[float, float] = (1.0, 2.0)
    drag: tuple[float, float] = (0.0, 0.5)
    shift_time_s: float = 0.8
    capacity_N_m: float = 1.0e4
    initial_speeds: tuple[float, float] = (0.0, 0.0)
    engaged0: bool = False
    settings: Settings = Settings()

    @staticmethod
    def from_config(cfg: ConfigReader) -> "KinematicParams":
        sh = cfg.sub("shafts")
        inertia = tuple(sh.numbers("inertia_kg_m2", 2, positive=True))
        drag = tuple(sh.numbers("drag_N_m_s_per_rad", 2, [0.0, 0.0], nonnegative=True))
        sh.reject_unknown()
        cl = cfg.sub("clutch")
        shift = cl.number("shift_time_s", positive=True)
        cap = cl.number("capacity_N_m", 1.0e4, positive=True)
        cl.reject_unknown()
        ini = cfg.sub("initial", required=False)
        w0 = tuple(ini.numbers("speeds_rad_s", 2, [0.0, 0.0]))
        engaged = ini.boolean("engaged", False)
        ini.reject_unknown()
        if engaged and w0[0] != w0[1]:
            raise ini.error("engaged", f"an engaged clutch needs equal initial speeds, got {list(w0)}")
        return KinematicParams(inertia, drag, shift, cap, w0, engaged, settings_from_config(cfg))


def build_spec(p: KinematicParams) -> CoreSpec:
    row = Row("clutch", 0, 1, 1.0, -1.0, kinematic_shift_time=p.shift_time_s, kinematic_capacity=p.capacity_N_m)
    return CoreSpec(shaft_names=("input", "output"), inertia=p.inertia, drag=p.drag, rows=(row,),
                    settings=p.settings)


def _signals():
    inputs = (
        Signal("engage", "-", 0, 1, 0, "engage command: 1 engages the clutch, 0 disengages it", integer=True),
        Signal("drive_torque", "N m", -1.0e4, 1.0e4, 0.0, "torque applied to the driving shaft J1"),
        Signal("load_torque", "N m", -1.0e4, 1.0e4, 0.0, "load on the driven shaft J2; positive resists"),
    )
    outputs = (
        Signal("w_input", "rad/s", -1.0e4, 1.0e4, 0.0, "driving shaft speed w1"),
        Signal("w_output", "rad/s", -1.0e4, 1.0e4, 0.0, "driven shaft speed w2"),
        Signal("slip", "rad/s", -2.0e4, 2.0e4, 0.0, "relative speed w1 - w2"),
        Signal("clutch_torque", "N m", -1.0e5, 1.0e5, 0.0,
               "reaction torque of the clutch on the driven shaft (the driving shaft gets its negative)"),
        Signal("phase", "-", 0, 3, 0, "0 disengaged, 1 engaging, 2 engaged, 3 disengaging", integer=True),
        Signal("stuck", "-", 0, 1, 0, "relative speed held at zero (1)", integer=True),
        Signal("capacity", "N m", 0.0, 1.0e9, 0.0, "torque the clutch can hold in its phase"),
        Signal("clutch_energy", "J", -1.0e9, 1.0e9, 0.0,
               "work of the clutch torque on the two shafts (negative: dissipated)"),
        Signal("status", "-", 0, 2 ** 16, 0, "core status bits (see docs/method.md)", integer=True),
    )
    return inputs, outputs


@njit(**JIT)
def _kc_inputs(mi, df):
    """Inputs to the core.  Called in the real-time loop."""
    op = mi[L.DF_PLANT]
    out = mi[L.DF_U_TAU]
    outr = mi[L.DF_U_TAU_RATE]
    df[mi[L.DF_U_ACT]] = df[op + IN_ENGAGE]
    df[mi[L.DF_U_ACT_RATE]] = 0.0
    df[out] = df[op + IN_DRIVE]
    df[outr] = df[op + N_IN + IN_DRIVE]
    df[out + 1] = -df[op + IN_LOAD]
    df[outr + 1] = -df[op + N_IN + IN_LOAD]


@njit(**JIT)
def _kc_outputs(mi, df, di, st):
    """Plant outputs from the core state.  Called in the real-time loop."""
    oy = mi[L.DF_PLANT] + 2 * N_IN
    ow = mi[L.DF_Y]
    n = mi[L.H_N]
    g = mi[L.H_G]
    s = mi[L.H_S]
    df[oy + OUT_W_IN] = df[ow]
    df[oy + OUT_W_OUT] = df[ow + 1]
    df[oy + OUT_SLIP] = df[mi[L.DF_DELTA]]
    df[oy + OUT_TORQUE] = 0.0 - df[mi[L.DF_MU]]
    df[oy + OUT_PHASE] = float(di[mi[L.DI_KIN_PHASE]])
    df[oy + OUT_STUCK] = 1.0 if di[mi[L.DI_MODE]] == L.MODE_STUCK else 0.0
    df[oy + OUT_CAPACITY] = df[mi[L.DF_CAP_S]]
    df[oy + OUT_ENERGY] = df[ow + 2 * n + s + g + L.W_ROW0]
    df[oy + OUT_STATUS] = float(st)


@njit("int64(" + BUFS + ", float64)", **JIT)
def kinematic_step(mf, mi, df, di, dt):
    """Map the inputs to the core, take one step, write the outputs.  Called in the real-time loop."""
    rmf, rmi, rdf, rdi = _raw_f(mf), _raw_i(mi), _raw_f(df), _raw_i(di)
    _kc_inputs(rmi, rdf)
    st = _step(rmf, rmi, rdf, rdi, dt)
    _kc_outputs(rmi, rdf, rdi, st)
    return st


@njit("int64(" + BUFS + ", int64)", **JIT)
def kinematic_refresh(mf, mi, df, di, st):
    """Map inputs and recompute outputs without stepping (after a reset)."""
    rmi, rdf, rdi = _raw_i(mi), _raw_f(df), _raw_i(di)
    _kc_inputs(rmi, rdf)
    _kc_outputs(rmi, rdf, rdi, st)
    return 0


class KinematicClutchPlant(Plant):
    """Two shafts and a kinematic clutch (seed 001): engagement in a prescribed shift time."""

    kind = "kinematic"
    description = "Kinematic (functional) clutch between a driving and a driven shaft ('Clutch Modeling - Part II', seed 001)"

    def __init__(self, params: KinematicParams | None = None, source: str = ""):
        self.params = params = params or KinematicParams()
        inputs, outputs = _signals()
        super().__init__(build_spec(params), inputs, outputs, kinematic_step, source=source)
        self.reset()

    @classmethod
    def from_config(cls, cfg: ConfigReader) -> "KinematicClutchPlant":
        return cls(KinematicParams.from_config(cfg), source=cfg.source)

    def _initial_state(self) -> None:
        self.core.omega[:] = self.params.initial_speeds

    def _start_fn(self) -> int:
        kinematic_refresh(self.mf, self.mi, self.df, self.di, 0)
        st = self.core.start([0] if self.params.engaged0 else [])
        kinematic_refresh(self.mf, self.mi, self.df, self.di, st)
        return st

    def plot_figures(self, trace, out_dir, title: str = "") -> list:
        """Speeds, reaction torque and phase of an offline run (the article's figures 3-5)."""
        from server.plots.kinematic import plot

        return plot(self, trace, out_dir, title)
