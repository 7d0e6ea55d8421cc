"""A chain of n bodies with static/Coulomb friction between neighbours.

Seed 000 section 3.3 ("a stack of n frictional bodies") and seed 004
section 3: bodies 1..n (masses in kg, or inertias in kg m^2) in a row; body
i and body i+1 touch through a friction contact.  Each body takes an
external force (or torque) and an optional viscous drag to ground::

    F_1        F_2        F_3                F_n
     |          |          |                  |
    [m_1]=k12=[m_2]=k23=[m_3]= ... =k(n-1)n=[m_n]

Rows of R: contact i-j is ``[1, -1]`` on bodies (i, j): relative velocity
``v_i - v_j``.  Its static capacity K is the ``capacity_i_j`` input (its
default comes from the config, so a constant capacity needs no scenario
entry), its Coulomb amplitude k = ``kinetic_to_static * K``.

Sign convention: ``friction_i_j`` is seed 004's tau_{i,i+1}: the force the
contact applies to body i is ``-friction_i_j`` and to body j
``+friction_i_j`` (m_i dv_i/dt = F_i + tau_{i-1,i} - tau_{i,i+1}, eq. 1), so
a slipping contact reads ``k sgn(v_i - v_j)`` and a stuck one the
constraint force that keeps ``v_i = v_j``, within ``+-static_limit_i_j``.
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

MAX_BODIES = 64


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

    @staticmethod
    def from_config(cfg: ConfigReader) -> "ChainParams":
        motion = cfg.string("motion", "translational", choices=("translational", "rotational"))
        bo = cfg.sub("bodies")
        inertia = bo.numbers("inertia", positive=True)
        n = len(inertia)
        if not 2 <= n <= MAX_BODIES:
            raise bo.error("inertia", f"needs 2 to {MAX_BODIES} bodies, got {n}")
        drag = bo.numbers("drag", n, [0.0] * n, nonnegative=True)
        bo.reject_unknown()
        co = cfg.sub("contacts")

        def per_contact(name, default=None, **kw):
            """One number for every contact, or a list with one per contact (required if no default)."""
            raw = co.raw(name) if default is None else co.raw(name, default)
            if isinstance(raw, list):
                return co.numbers(name, n - 1, **kw)
            return [co.number(name, raw, **kw)] * (n - 1)

        cap = per_contact("static_capacity", nonnegative=True)
        ratio = per_contact("kinetic_to_static", 1.0, nonnegative=True)
        for i, r in enumerate(ratio):
            if r > 1.0:
                raise co.error("kinetic_to_static", f"must be <= 1 (Coulomb amplitude k <= static capacity K), "
                               f"got {r} for contact {i + 1}-{i + 2}")
        visc = per_contact("viscous", 0.0, nonnegative=True)
        vs = per_contact("stribeck_velocity", 0.0, nonnegative=True)
        alpha = per_contact("stribeck_exponent", 2.0, positive=True)
        co.reject_unknown()
        ini = cfg.sub("initial", required=False)
        v0 = ini.numbers("velocity", n, [0.0] * n)
        x0 = ini.numbers("position", n, [0.0] * n)
        ini.reject_unknown()
        return ChainParams(motion == "rotational", tuple(inertia), tuple(drag), tuple(cap), tuple(ratio),
                           tuple(visc), tuple(vs), tuple(alpha), tuple(v0), tuple(x0), settings_from_config(cfg))


def _units(rotational: bool) -> dict[str, str]:
    if rotational:
        return dict(v="rad/s", x="rad", f="N m", body="inertia")
    return dict(v="m/s", x="m", f="N", body="mass")


def contact_name(i: int) -> str:
    """Suffix of contact i (0-based) in signal names: ``"1_2"`` for the first one."""
    return f"{i + 1}_{i + 2}"


def _signals(p: ChainParams):
    u = _units(p.rotational)
    n = p.n
    inputs = [Signal(f"force_{j + 1}", u["f"], -1.0e6, 1.0e6, 0.0, f"external force on {u['body']} {j + 1}")
              for j in range(n)]
    inputs += [Signal(f"capacity_{contact_name(i)}", u["f"], 0.0, 1.0e6, p.static_capacity[i],
                      f"static friction capacity K of contact {contact_name(i).replace('_', '-')} "
                      f"(Coulomb amplitude k = {p.kinetic_to_static[i]:g} K)") for i in range(n - 1)]
    outputs = [Signal(f"v_{j + 1}", u["v"], -1.0e4, 1.0e4, 0.0, f"velocity of {u['body']} {j + 1}") for j in range(n)]
    outputs += [Signal(f"x_{j + 1}", u["x"], -1.0e9, 1.0e9, 0.0, f"position of {u['body']} {j + 1}") for j in range(n)]
    for i in range(n - 1):
        c = contact_name(i)
        a, b = c.split("_")
        outputs += [
            Signal(f"slip_{c}", u["v"], -2.0e4, 2.0e4, 0.0, f"relative velocity v_{a} - v_{b}"),
            Signal(f"friction_{c}", u["f"], -1.0e6, 1.0e6, 0.0,
                   f"friction tau_{a}{b}: acts as -tau on body {a}, +tau on body {b}"),
            Signal(f"stuck_{c}", "-", 0, 1, 0, f"contact {a}-{b} stuck (1) or slipping/free (0)", integer=True),
            Signal(f"static_limit_{c}", u["f"], 0.0, 1.0e6, 0.0, f"static capacity K of contact {a}-{b} in effect"),
        ]
    outputs.append(Signal("status", "-", 0, 2 ** 16, 0, "core status bits", integer=True))
    return tuple(inputs), tuple(outputs)


# output block layout: v [n] | x [n] | per contact (slip, friction, stuck, limit) | status
@njit(**JIT)
def _chain_inputs(mi, df):
    """Forces and capacities to the core.  Called in the real-time loop."""
    n = mi[L.H_N]
    g = mi[L.H_G]
    op = mi[L.DF_PLANT]
    n_in = n + g
    out = mi[L.DF_U_TAU]
    outr = mi[L.DF_U_TAU_RATE]
    oua = mi[L.DF_U_ACT]
    ouar = mi[L.DF_U_ACT_RATE]
    for j in range(n):
        df[out + j] = df[op + j]
        df[outr + j] = df[op + n_in + j]
    for i in range(g):
        df[oua + i] = df[op + n + i]
        df[ouar + i] = df[op + n_in + n + i]


@njit(**JIT)
def _chain_outputs(mi, df, di, st):
    """Write the plant outputs from the core state.  Called in the real-time loop."""
    n = mi[L.H_N]
    g = mi[L.H_G]
    op = mi[L.DF_PLANT]
    oy = op + 2 * (n + g)
    ow = mi[L.DF_Y]
    for j in range(n):
        df[oy + j] = df[ow + j]
        df[oy + n + j] = df[ow + n + j]
    odelta = mi[L.DF_DELTA]
    omu = mi[L.DF_MU]
    ocap = mi[L.DF_CAP_S]
    omode = mi[L.DI_MODE]
    oc = oy + 2 * n
    for i in range(g):
        df[oc + 4 * i] = df[odelta + i]
        df[oc + 4 * i + 1] = 0.0 - df[omu + i]  # core row force acts +mu on body i; tau = -mu
        df[oc + 4 * i + 2] = 1.0 if di[omode + i] == L.MODE_STUCK else 0.0
        df[oc + 4 * i + 3] = df[ocap + i]
    df[oc + 4 * g] = float(st)


@njit("int64(" + BUFS + ", float64)", **JIT)
def chain_step(mf, mi, df, di, dt):
    """Map the inputs to the core, take one step, write the outputs.  Called in the real-time loop."""
    rmf, rmi, rdf, rdi = _raw_f(mf), _raw_i(mi), _raw_f(df), _raw_i(di)
    _chain_inputs(rmi, rdf)
    st = _step(rmf, rmi, rdf, rdi, dt)
    _chain_outputs(rmi, rdf, rdi, st)
    return st


@njit("int64(" + BUFS + ", int64)", **JIT)
def chain_refresh(mf, mi, df, di, st):
    """Map inputs and recompute outputs without stepping (after a reset)."""
    rmi, rdf, rdi = _raw_i(mi), _raw_f(df), _raw_i(di)
    _chain_inputs(rmi, rdf)
    _chain_outputs(rmi, rdf, rdi, st)
    return 0


class ChainPlant(Plant):
    """n bodies in a row with friction contacts between neighbours (seeds 000 and 004)."""

    kind = "chain"
    description = "Chain of n bodies with static/Coulomb friction between neighbours " \
                  "(Zanasi, Sandoni & Morselli; Biagiotti & Zanasi)"

    def __init__(self, params: ChainParams, source: str = ""):
        self.params = params
        n = params.n
        rows = tuple(Row(f"contact_{contact_name(i)}", i, i + 1, 1.0, -1.0, act_gain=1.0, gain_static=1.0,
                         gain_kinetic=params.kinetic_to_static[i], stribeck_velocity=params.stribeck_velocity[i],
                         stribeck_exponent=params.stribeck_exponent[i], viscous=params.viscous[i])
                     for i in range(n - 1))
        spec = CoreSpec(shaft_names=tuple(f"body_{j + 1}" for j in range(n)), inertia=params.inertia,
                        drag=params.drag, rows=rows, settings=params.settings)
        inputs, outputs = _signals(params)
        super().__init__(spec, inputs, outputs, chain_step, source=source)
        self.reset()

    @classmethod
    def from_config(cls, cfg: ConfigReader) -> "ChainPlant":
        return cls(ChainParams.from_config(cfg), source=cfg.source)

    def _initial_state(self) -> None:
        c = self.core
        n = self.params.n
        c.omega[:] = self.params.velocity0
        c.theta[:] = self.params.position0
        c.act[:] = self.u[n:]
        c.u_act[:] = c.act

    def _start_fn(self) -> int:
        chain_refresh(self.mf, self.mi, self.df, self.di, 0)
        # contacts whose bodies start at equal velocity start stuck (if their capacity holds)
        v = self.params.velocity0
        engaged = [i for i in range(self.params.n - 1) if v[i] == v[i + 1]]
        st = self.core.start(engaged)
        chain_refresh(self.mf, self.mi, self.df, self.di, st)
        return st
