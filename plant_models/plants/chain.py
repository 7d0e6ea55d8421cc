"""A chain of n bodies with static/Coulomb friction between neighbours.

Biagiotti & Zanasi, "Efficient simulation of static and dynamic friction
for automotive applications", section 3.3 ("a stack of n frictional
bodies"), and Zanasi, Sandoni & Morselli, "Simulation of variable dynamic
dimension systems: the clutch example", section 3: bodies 1..n (masses in
kg, or inertias in kg m^2) in a row; body i and body i+1 touch through a
friction contact.  Each body takes an external force (or torque) and an
optional viscous drag to ground::

    F_1        F_2        F_3                F_n
     |          |          |                  |
    [m_1]=k12=[m_2]=k23=[m_3]= ... =k(n-1)n=[m_n]

Rows of R: contact i-j is ``[1, -1]`` on bodies (i, j): relative velocity
``v_i - v_j``.  Its static capacity K is the ``capacity_i_j`` input (its
default comes from the config, so a constant capacity needs no scenario
entry), its Coulomb amplitude k = ``kinetic_to_static * K``.

Sign convention: ``friction_i_j`` is Zanasi, Sandoni & Morselli's
tau_{i,i+1}: the force the contact applies to body i is ``-friction_i_j``
and to body j ``+friction_i_j`` (m_i dv_i/dt = F_i + tau_{i-1,i} -
tau_{i,i+1}, eq. 1), so a slipping contact reads ``k sgn(v_i - v_j)`` and a
stuck one the constraint force that keeps ``v_i = v_j``, within
``+-static_limit_i_j``.

The number of ports depends on n, so the ports are declared per parameter
set (:func:`chain_ports`) and the offsets of their blocks go to the
compiled step in the plant's int parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

from numba import njit

from ..core.api import JIT, L, CoreSpec, Row, Settings, y_omega, y_theta
from ..contract.columns import Columns
from ..friction_plant import FrictionPlant, friction_kernels
from ..plant import Ports, Signal
from . import friction_step

MAX_BODIES = 64

# plant int parameters (MI_PLANT block): where the port blocks start
PLANT_INTS = Columns("the chain's int parameters (MI_PLANT block)", (
    ("PI_N_IN", "number of inputs (the rates follow the inputs)"),
    ("PI_IN_CAPACITY", "input index of capacity_1_2"),
    ("PI_OUT_V", "output index of v_1"),
    ("PI_OUT_X", "output index of x_1"),
    ("PI_OUT_CONTACTS", "output index of the first contact's block"),
    ("PI_OUT_STATUS", "output index of status"),
), count="PI_LEN")
globals().update(PLANT_INTS.constants())  # PI_N_IN .. PI_OUT_STATUS; PI_LEN

CONTACT = Ports()  # the outputs of contact {a}-{b} ({v}, {f}: velocity and force units), one block per contact
CT_SLIP = CONTACT.add("slip_{c}", "{v}", -2.0e4, 2.0e4, 0.0, "relative velocity v_{a} - v_{b}")
CT_FRICTION = CONTACT.add("friction_{c}", "{f}", -1.0e6, 1.0e6, 0.0,
                          "friction tau_{a}{b}: acts as -tau on body {a}, +tau on body {b}")
CT_STUCK = CONTACT.add("stuck_{c}", "-", 0, 1, 0, "contact {a}-{b} stuck (1) or slipping/free (0)", integer=True)
CT_LIMIT = CONTACT.add("static_limit_{c}", "{f}", 0.0, 1.0e6, 0.0, "static capacity K of contact {a}-{b} in effect")
CT_LEN = len(CONTACT)


@dataclass(frozen=True)
class ChainParams:
    """Validated chain parameters (see configs/chain.toml)."""

    rotational: bool  # inertias/torques/rad instead of masses/forces/m
    inertia: tuple[float, ...]  # kg (or kg m^2)
    drag: tuple[float, ...]  # N s/m (or N m s/rad)
    static_capacity: tuple[float, ...]  # default K of each contact, N (or N m)
    kinetic_to_static: tuple[float, ...]  # k / K of each contact
    viscous: tuple[float, ...]  # viscous drag across each contact, N s/m (or N m s/rad)
    stribeck_velocity: tuple[float, ...]  # m/s (or rad/s); 0 = no Stribeck law
    stribeck_exponent: tuple[float, ...]
    velocity0: tuple[float, ...]  # m/s (or rad/s)
    position0: tuple[float, ...]  # m (or rad)
    settings: Settings

    @property
    def n(self) -> int:
        return len(self.inertia)


def _units(rotational: bool) -> dict[str, str]:
    if rotational:
        return dict(v="rad/s", x="rad", f="N m", body="inertia")
    return dict(v="m/s", x="m", f="N", body="mass")


def contact_name(i: int) -> str:
    """Suffix of contact i (0-based) in signal names: ``"1_2"`` for the first one."""
    return f"{i + 1}_{i + 2}"


def chain_ports(p: ChainParams) -> tuple[Ports, Ports, dict[int, int]]:
    """Inputs, outputs, and the start of each block as the plant's int parameters ``{PI_*: index}``."""
    u = _units(p.rotational)
    n = p.n
    inputs = Ports()
    inputs.add_block(Signal(f"force_{j + 1}", u["f"], -1.0e6, 1.0e6, 0.0, f"external force on {u['body']} {j + 1}")
                     for j in range(n))
    capacity = inputs.add_block(
        Signal(f"capacity_{contact_name(i)}", u["f"], 0.0, 1.0e6, p.static_capacity[i],
               f"static friction capacity K of contact {contact_name(i).replace('_', '-')} "
               f"(Coulomb amplitude k = {p.kinetic_to_static[i]:g} K)") for i in range(n - 1))
    outputs = Ports()
    v = outputs.add_block(Signal(f"v_{j + 1}", u["v"], -1.0e4, 1.0e4, 0.0, f"velocity of {u['body']} {j + 1}")
                          for j in range(n))
    x = outputs.add_block(Signal(f"x_{j + 1}", u["x"], -1.0e9, 1.0e9, 0.0, f"position of {u['body']} {j + 1}")
                          for j in range(n))
    contacts = outputs.add_block(s for i in range(n - 1)
                                 for s in CONTACT.formatted(c=contact_name(i), a=i + 1, b=i + 2, v=u["v"], f=u["f"]))
    status = outputs.add("status", "-", 0, 2 ** 16, 0, "core status bits", integer=True)
    blocks = {PI_N_IN: len(inputs), PI_IN_CAPACITY: capacity, PI_OUT_V: v, PI_OUT_X: x, PI_OUT_CONTACTS: contacts,  # noqa: F821
              PI_OUT_STATUS: status}  # noqa: F821
    return inputs, outputs, blocks


@njit(**JIT)
def _inputs(mf, mi, df, di):
    """Forces and capacities to the core; no plant status bits.  Called in the real-time loop."""
    n = mi[L.H_N]
    g = mi[L.H_G]
    op = mi[L.DF_PLANT]
    opi = mi[L.MI_PLANT]
    n_in = mi[opi + PI_N_IN]  # noqa: F821
    ocap = mi[opi + PI_IN_CAPACITY]  # noqa: F821
    out = mi[L.DF_U_TAU]
    outr = mi[L.DF_U_TAU_RATE]
    oua = mi[L.DF_U_ACT]
    ouar = mi[L.DF_U_ACT_RATE]
    for j in range(n):
        df[out + j] = df[op + j]
        df[outr + j] = df[op + n_in + j]
    for i in range(g):
        df[oua + i] = df[op + ocap + i]
        df[ouar + i] = df[op + n_in + ocap + i]
    return 0


@njit(**JIT)
def _outputs(mf, mi, df, di, st, h):
    """Write the plant outputs from the core state.  Called in the real-time loop."""
    n = mi[L.H_N]
    g = mi[L.H_G]
    opi = mi[L.MI_PLANT]
    oy = mi[L.DF_PLANT] + 2 * mi[opi + PI_N_IN]  # noqa: F821
    ow = y_omega(mi)
    ox = y_theta(mi)
    for j in range(n):
        df[oy + mi[opi + PI_OUT_V] + j] = df[ow + j]  # noqa: F821
        df[oy + mi[opi + PI_OUT_X] + j] = df[ox + j]  # noqa: F821
    odelta = mi[L.DF_DELTA]
    omu = mi[L.DF_MU]
    ocap = mi[L.DF_CAP_S]
    omode = mi[L.DI_MODE]
    oc = oy + mi[opi + PI_OUT_CONTACTS]  # noqa: F821
    for i in range(g):
        df[oc + CT_LEN * i + CT_SLIP] = df[odelta + i]
        df[oc + CT_LEN * i + CT_FRICTION] = 0.0 - df[omu + i]  # core row force acts +mu on body i; tau = -mu
        df[oc + CT_LEN * i + CT_STUCK] = 1.0 if di[omode + i] == L.MODE_STUCK else 0.0
        df[oc + CT_LEN * i + CT_LIMIT] = df[ocap + i]
    df[oy + mi[opi + PI_OUT_STATUS]] = float(st)  # noqa: F821


# the step (inputs -> core step -> outputs) and the refresh: the one sequence of plants/friction_step.py
chain_step, chain_refresh = friction_step.plant_kernels(globals(), "chain")


class ChainPlant(FrictionPlant):
    """n bodies in a row with friction contacts between neighbours (Biagiotti & Zanasi; Zanasi, Sandoni & Morselli)."""

    kind = "chain"
    description = "Chain of n bodies with static/Coulomb friction between neighbours " \
                  "(Zanasi, Sandoni & Morselli; Biagiotti & Zanasi)"
    params_type = ChainParams
    kernels = friction_kernels(chain_step, chain_refresh)
    plant_ni = PI_LEN  # noqa: F821

    @classmethod
    def signals(cls, params: ChainParams):
        inputs, outputs, _ = chain_ports(params)
        return inputs.signals(params), outputs.signals(params)

    @classmethod
    def build_spec(cls, p: ChainParams) -> CoreSpec:
        rows = tuple(Row(f"contact_{contact_name(i)}", i, i + 1, 1.0, -1.0, act_gain=1.0, gain_static=1.0,
                         gain_kinetic=p.kinetic_to_static[i], stribeck_velocity=p.stribeck_velocity[i],
                         stribeck_exponent=p.stribeck_exponent[i], viscous=p.viscous[i])
                     for i in range(p.n - 1))
        return CoreSpec(shaft_names=tuple(f"body_{j + 1}" for j in range(p.n)), inertia=p.inertia, drag=p.drag,
                        rows=rows, settings=p.settings)

    def _fill_model(self) -> None:
        for slot, index in chain_ports(self.params)[2].items():
            self.core.plant_i[slot] = index

    def _initial_state(self) -> None:
        c = self.core
        c.omega[:] = self.params.velocity0
        c.theta[:] = self.params.position0
        c.act[:] = self.u[self.params.n:]
        c.u_act[:] = c.act

    def _engaged_at_start(self) -> list[int]:
        """Contacts whose bodies start at equal velocity (they stay stuck if their capacity holds)."""
        v = self.params.velocity0
        return [i for i in range(self.params.n - 1) if v[i] == v[i + 1]]
