"""A transmission described as data; its reduction to independent speeds is :mod:`plant_models.reduction`.

A transmission is a set of *members* (rigid bodies: a shaft with every gear
and drum fixed to it) with an inertia and a drag to the housing, tied by

* rigid kinematic relations: fixed gear meshes (``z_a w_a + z_b w_b = 0``
  for an external pair, ``z_a w_a - z_b w_b = 0`` for a pinion in a ring
  gear) and planetary sets (Willis: ``z_S w_S + z_R w_R = (z_S + z_R) w_C``
  for a simple set, ``z_S w_S - z_R w_R = (z_S - z_R) w_C`` for a
  double-pinion set), and
* shift elements: clutches between two members, brakes from a member to
  the housing, freewheels, and the gears a synchronizer selects
  (:class:`Selector`).

The rigid relations are removed once, when the description is loaded: the
members' speeds are written as ``w = T q`` over a set of independent
speeds ``q`` (members themselves, chosen by :func:`~plant_models.reduction.reduce`), which is the
congruence transform of Biagiotti & Zanasi ("Efficient simulation of
static and dynamic friction for automotive applications") applied to a
gear train: the inertia becomes ``T^T diag(J) T``, the drag ``T^T diag(b)
T``, torques on members ``T^T tau``, and every shift element a row ``c^T T``
of R over q (Morselli, Zanasi & Ferracin, "Modeling and simulation of
static and Coulomb friction in a class of automotive systems", eq. 13),
which may have one entry (a brake on an independent speed), two, or more.
The friction core handles all of them exactly.

Everything is computed in exact rational arithmetic (tooth counts are
integers), so ratios such as the 8HP70's 108/23 come out exact and a row
entry that vanishes is exactly zero.  Descriptions that contradict
themselves (rigid relations that leave some member only standing still),
leave a member without inertia and connection, or list a gear that does
not fix the output to the input get a :class:`DrivetrainError` naming the
key and the problem.  Nothing here is compiled; the plant
(:mod:`plant_models.plants.transmission`) packs the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .errors import GearboxHilError
from .clutch import WetClutch

Exact = Fraction


class DrivetrainError(GearboxHilError, ValueError):
    """A transmission description is inconsistent; ``key`` names the part of the file."""

    def __init__(self, key: str, problem: str):
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem


# ----------------------------------------------------------------------------------------------
# the description
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Member:
    """A rigid body: a shaft with everything fixed to it."""

    name: str
    inertia: float  # kg m^2 (0 for a member geared to others that carries no inertia of its own)
    drag: float  # N m s/rad to the housing


@dataclass(frozen=True)
class Relation:
    """A rigid kinematic relation ``sum c_m w_m = 0`` (a mesh or a planetary set's Willis equation)."""

    name: str
    key: str  # where it was described (for messages)
    kind: str  # "mesh" or "planetary"
    coefs: tuple[tuple[int, Exact], ...]  # (member, coefficient)
    roles: tuple[str, ...]  # what each member is to the relation ("sun", "ring", "carrier"; "a", "b")
    held: tuple[str, ...] = ()  # roles held to the housing (at rest, so not in coefs): a planetary set's "sun"


@dataclass(frozen=True)
class Element:
    """A shift element: a row ``sum c_m w_m`` over members that it holds at zero when stuck.

    A clutch between members a and b is ``w_a - w_b``; a brake ``w_m``; a
    clutch that locks a gear pair (the Powershift's) ``r_a w_a + r_b w_b``
    with the pitch radii, its torque and slip scaled by the radius
    ``force_radius`` of the gear it sits on.  ``clutch`` is the wet clutch
    that gives its capacity from a pressure (None for a freewheel, whose
    capacity is ``holding_N_m``).
    """

    name: str
    key: str
    kind: str  # "clutch", "brake", "freewheel", "rolling" (a vehicle's rolling resistance, capacity holding_N_m)
    coefs: tuple[tuple[int, Exact], ...]
    force_radius: float = 1.0
    clutch: WetClutch | None = None
    pressure_max_bar: float = 40.0
    holding_N_m: float = 0.0  # a freewheel's (or the rolling resistance's) capacity, N m


@dataclass(frozen=True)
class Position:
    """One gear a selector can engage: ``w_member = ratio * w_to`` (ratio includes a final drive)."""

    value: int  # the selector command that selects it
    label: str
    ratio: float
    sync_capacity: float  # N m at the selector's member while it synchronizes


@dataclass(frozen=True)
class Selector:
    """Synchronizers and dog clutches on one shaft: at most one of its gears engaged at a time.

    One row ``w_member - ratio w_to`` whose ratio the plant writes when the
    command selects another position (the dual-clutch transmission's layout:
    Biagiotti & Zanasi, section 4).  While the row slips its capacity is the
    cone synchronizer's; stuck, the dog teeth hold up to ``dog_capacity``.
    """

    name: str
    key: str
    member: int
    to: int
    input: str  # the command signal
    positions: tuple[Position, ...]
    kinetic_to_static: float
    dog_capacity: float  # N m at the member


@dataclass(frozen=True)
class SpringDef:
    """A torsional spring-damper between two members (twist rate ``w_a - w_b``)."""

    name: str
    key: str
    members: tuple[int, int]
    stiffness: float  # N m/rad
    damping: float  # N m s/rad
    table: tuple[tuple[float, float], ...] = ()


@dataclass(frozen=True)
class TorqueInput:
    """A torque input port acting on a member: ``sign`` +1 drives in the positive sense, -1 resists."""

    name: str
    member: int
    sign: float
    lo: float
    hi: float
    doc: str


@dataclass(frozen=True)
class Gear:
    """A named gear: the shift elements (and selector positions) it engages, and its exact ratio."""

    name: str
    number: int  # the value of the ``gear`` output while it is engaged
    elements: tuple[int, ...]
    positions: tuple[tuple[int, int], ...]  # (selector, command value)
    ratio: Exact  # w_input / w_output


@dataclass(frozen=True)
class Description:
    """A transmission, validated structurally (names resolved); see :func:`reduce` for the physics checks."""

    name: str
    members: tuple[Member, ...]
    relations: tuple[Relation, ...]
    elements: tuple[Element, ...]
    selectors: tuple[Selector, ...]
    springs: tuple[SpringDef, ...]
    torques: tuple[TorqueInput, ...]
    input_member: int
    output_member: int
    output_sign: float  # w_out = output_sign * w_output_member (forward positive)
    gears: tuple[tuple[str, tuple[int, ...], tuple[tuple[int, int], ...], str], ...]  # name, elements, positions, key
    independent: tuple[int, ...] = ()  # members chosen as independent speeds by the description, or ()
    initial_speeds: tuple[tuple[int, float], ...] = ()  # (member, rad/s)
    initial_engaged: tuple[int, ...] = ()  # elements engaged at the start
    initial_positions: tuple[tuple[int, int], ...] = ()  # (selector, position value) at the start (0 = neutral)
    quasi_steady_springs: bool = False

    def member_index(self, name: str) -> int:
        return [m.name for m in self.members].index(name)


@dataclass(frozen=True)
class Reduction:
    """The description over its independent speeds ``q``: ``w_members = T q``."""

    coordinates: tuple[int, ...]  # member index of each independent speed
    T: tuple[tuple[float, ...], ...]  # members x coordinates
    T_exact: tuple[tuple[Exact, ...], ...]
    mass: tuple[tuple[float, ...], ...]  # T^T diag(J) T
    drag: tuple[tuple[float, ...], ...]  # T^T diag(b) T
    dense: bool  # False when the members are the independent speeds (no rigid relation): diagonal inertia
    rows: tuple[tuple[tuple[int, float], ...], ...]  # each element's row over q: (coordinate, coefficient)
    gears: tuple[Gear, ...]
    relation_map: tuple[tuple[float, ...], ...]  # Lambda = (G G^T)^-1 G: relation forces from member torques
    relation_rows: tuple[tuple[float, ...], ...]  # G, one row per independent relation (members)
    relation_names: tuple[int, ...]  # which relation each row of G is
    initial_q: tuple[float, ...]

    def members_of(self, q) -> np.ndarray:
        return np.asarray(self.T) @ np.asarray(q, dtype=float)


def ratio_text(r: Exact) -> str:
    return f"{float(r):.4f}"


__all__ = ["Description", "DrivetrainError", "Element", "Gear", "Member", "Position", "Reduction", "Relation",
           "Selector", "SpringDef", "TorqueInput"]
