"""Two shafts and one friction clutch: the smallest plant on the friction core, the example of docs/plants.md."""
from dataclasses import dataclass, field

from numba import njit

from ..core.api import JIT, L, CoreSpec, Row, y_omega
from ..friction_plant import FrictionPlant, Ports, friction_kernels
from . import friction_step


@dataclass(frozen=True)
class TwoShaftsParams:
    inertia_kg_m2: tuple[float, float] = field(default=(1.0, 2.0), metadata=dict(positive=True))
    kinetic_to_static: float = field(default=1.0, metadata=dict(lo=0.0, hi=1.0))
    speeds_rad_s: tuple[float, float] = (0.0, 0.0)  # at reset; equal speeds start stuck if K holds


INPUTS, OUTPUTS = Ports(), Ports()
IN_DRIVE = INPUTS.add("drive_torque", "N m", -1e4, 1e4, 0.0, "torque on shaft 1")
IN_LOAD = INPUTS.add("load_torque", "N m", -1e4, 1e4, 0.0, "load on shaft 2; positive resists")
IN_CAPACITY = INPUTS.add("clutch_capacity", "N m", 0.0, 1e4, 0.0, "static capacity K (slipping: kinetic_to_static K)")
N_IN = len(INPUTS)
OUT_W1 = OUTPUTS.add("w_1", "rad/s", -1e4, 1e4, 0.0, "speed of shaft 1")
OUT_W2 = OUTPUTS.add("w_2", "rad/s", -1e4, 1e4, 0.0, "speed of shaft 2")
OUT_TORQUE = OUTPUTS.add("clutch_torque", "N m", -1e4, 1e4, 0.0, "torque passed from shaft 1 to 2 (-mu)")
OUT_STUCK = OUTPUTS.add("stuck", "-", 0, 1, 0, "clutch stuck (1) or slipping (0)", integer=True)
OUT_STATUS = OUTPUTS.add("status", "-", 0, 2 ** 16, 0, "core status bits", integer=True)


@njit(**JIT)
def _inputs(mf, mi, df, di):
    """Input ports (values, then their rates) -> the core's inputs.  Called in the real-time loop."""
    u, tau, tau_rate = mi[L.DF_PLANT], mi[L.DF_U_TAU], mi[L.DF_U_TAU_RATE]
    df[tau], df[tau_rate] = df[u + IN_DRIVE], df[u + N_IN + IN_DRIVE]
    df[tau + 1], df[tau_rate + 1] = -df[u + IN_LOAD], -df[u + N_IN + IN_LOAD]
    df[mi[L.DF_U_ACT]], df[mi[L.DF_U_ACT_RATE]] = df[u + IN_CAPACITY], df[u + N_IN + IN_CAPACITY]
    return 0


@njit(**JIT)
def _outputs(mf, mi, df, di, st, h):
    """The core's state -> output ports.  Called in the real-time loop."""
    y, w = mi[L.DF_PLANT] + 2 * N_IN, y_omega(mi)
    df[y + OUT_W1], df[y + OUT_W2], df[y + OUT_STATUS] = df[w], df[w + 1], float(st)
    df[y + OUT_TORQUE], df[y + OUT_STUCK] = 0.0 - df[mi[L.DF_MU]], (1.0 if di[mi[L.DI_MODE]] == L.MODE_STUCK else 0.0)


# the step (inputs -> core step -> outputs) and the refresh: the one sequence of plants/friction_step.py
two_shafts_step, two_shafts_refresh = friction_step.plant_kernels(globals(), "two_shafts")


class TwoShaftsPlant(FrictionPlant):
    kind, description = "two_shafts", "Two shafts and one friction clutch (the example of adding a plant)"
    params_type, input_ports, output_ports = TwoShaftsParams, INPUTS, OUTPUTS
    kernels = friction_kernels(two_shafts_step, two_shafts_refresh)

    @classmethod
    def build_spec(cls, p: TwoShaftsParams) -> CoreSpec:
        clutch = Row("clutch", 0, 1, 1.0, -1.0, gain_static=1.0, gain_kinetic=p.kinetic_to_static)
        return CoreSpec(("shaft_1", "shaft_2"), p.inertia_kg_m2, (0.0, 0.0), (clutch,))

    def _initial_state(self) -> None:
        self.core.omega[:] = self.params.speeds_rad_s
