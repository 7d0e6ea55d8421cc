"""Kinematic (functional) clutch between two shafts.

After the article "Clutch Modeling - Part II: Kinematic Clutches".

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

from ..core.api import JIT, L, CoreSpec, Row, Settings, y_omega, y_row_work
from ..friction_plant import FrictionPlant, friction_kernels
from ..plant import Ports
from . import friction_step


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


# -- ports ---------------------------------------------------------------------------------------
INPUTS = Ports()
IN_ENGAGE = INPUTS.add("engage", "-", 0, 1, 0, "engage command: 1 engages the clutch, 0 disengages it", integer=True)
IN_DRIVE = INPUTS.add("drive_torque", "N m", -1.0e4, 1.0e4, 0.0, "torque applied to the driving shaft J1")
IN_LOAD = INPUTS.add("load_torque", "N m", -1.0e4, 1.0e4, 0.0, "load on the driven shaft J2; positive resists")
N_IN = len(INPUTS)

OUTPUTS = Ports()
OUT_W_IN = OUTPUTS.add("w_input", "rad/s", -1.0e4, 1.0e4, 0.0, "driving shaft speed w1")
OUT_W_OUT = OUTPUTS.add("w_output", "rad/s", -1.0e4, 1.0e4, 0.0, "driven shaft speed w2")
OUT_SLIP = OUTPUTS.add("slip", "rad/s", -2.0e4, 2.0e4, 0.0, "relative speed w1 - w2")
OUT_TORQUE = OUTPUTS.add("clutch_torque", "N m", -1.0e5, 1.0e5, 0.0,
                         "reaction torque of the clutch on the driven shaft (the driving shaft gets its negative)")
OUT_PHASE = OUTPUTS.add("phase", "-", 0, 3, 0, "0 disengaged, 1 engaging, 2 engaged, 3 disengaging", integer=True)
OUT_STUCK = OUTPUTS.add("stuck", "-", 0, 1, 0, "relative speed held at zero (1)", integer=True)
OUT_CAPACITY = OUTPUTS.add("capacity", "N m", 0.0, 1.0e9, 0.0, "torque the clutch can hold in its phase")
OUT_ENERGY = OUTPUTS.add("clutch_energy", "J", -1.0e9, 1.0e9, 0.0,
                         "work of the clutch torque on the two shafts (negative: dissipated)")
OUT_STATUS = OUTPUTS.add("status", "-", 0, 2 ** 16, 0, "core status bits (see docs/method.md)", integer=True)


@njit(**JIT)
def _inputs(mf, mi, df, di):
    """Inputs to the core; no plant status bits.  Called in the real-time loop."""
    op = mi[L.DF_PLANT]
    out = mi[L.DF_U_TAU]
    outr = mi[L.DF_U_TAU_RATE]
    df[mi[L.DF_U_ACT]] = df[op + IN_ENGAGE]
    df[mi[L.DF_U_ACT_RATE]] = 0.0
    df[out] = df[op + IN_DRIVE]
    df[outr] = df[op + N_IN + IN_DRIVE]
    df[out + 1] = -df[op + IN_LOAD]
    df[outr + 1] = -df[op + N_IN + IN_LOAD]
    return 0


@njit(**JIT)
def _outputs(mf, mi, df, di, st, h):
    """Plant outputs from the core state.  Called in the real-time loop."""
    oy = mi[L.DF_PLANT] + 2 * N_IN
    ow = y_omega(mi)
    df[oy + OUT_W_IN] = df[ow]
    df[oy + OUT_W_OUT] = df[ow + 1]
    df[oy + OUT_SLIP] = df[mi[L.DF_DELTA]]
    df[oy + OUT_TORQUE] = 0.0 - df[mi[L.DF_MU]]
    df[oy + OUT_PHASE] = float(di[mi[L.DI_KIN_PHASE]])
    df[oy + OUT_STUCK] = 1.0 if di[mi[L.DI_MODE]] == L.MODE_STUCK else 0.0
    df[oy + OUT_CAPACITY] = df[mi[L.DF_CAP_S]]
    df[oy + OUT_ENERGY] = df[y_row_work(mi)]
    df[oy + OUT_STATUS] = float(st)


# the step (inputs -> core step -> outputs) and the refresh: the one sequence of plants/friction_step.py
kinematic_step, kinematic_refresh = friction_step.plant_kernels(globals(), "kinematic")


class KinematicClutchPlant(FrictionPlant):
    """Two shafts and a kinematic clutch: engagement in a prescribed shift time."""

    kind = "kinematic"
    description = ("Kinematic (functional) clutch between a driving and a driven shaft "
                   "('Clutch Modeling - Part II: Kinematic Clutches')")
    params_type = KinematicParams
    input_ports = INPUTS
    output_ports = OUTPUTS
    kernels = friction_kernels(kinematic_step, kinematic_refresh)

    def __init__(self, params: KinematicParams | None = None, source: str = ""):
        super().__init__(params or KinematicParams(), source)

    @classmethod
    def build_spec(cls, p: KinematicParams) -> CoreSpec:
        row = Row("clutch", 0, 1, 1.0, -1.0, kinematic_shift_time=p.shift_time_s, kinematic_capacity=p.capacity_N_m)
        return CoreSpec(shaft_names=("input", "output"), inertia=p.inertia, drag=p.drag, rows=(row,),
                        settings=p.settings)

    def _initial_state(self) -> None:
        self.core.omega[:] = self.params.initial_speeds

    def _engaged_at_start(self) -> list[int]:
        return [0] if self.params.engaged0 else []
