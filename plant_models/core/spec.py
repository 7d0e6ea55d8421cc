"""The specification of a mechanical network for the friction core: shafts, friction rows, springs, settings.

A :class:`CoreSpec` is frozen and validated once (:meth:`CoreSpec.validate`
raises :class:`SpecError` naming the row or spring and the problem); the
:class:`Core` handle packs it into the flat buffers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import SpecError


@dataclass(frozen=True)
class Row:
    """One gear/clutch row of R: couples shaft ``shaft_a`` and ``shaft_b``.

    ``delta = coef_a * w_a + coef_b * w_b`` is the row's relative speed
    (coefficients are gear radii in m, giving speeds in m/s and forces in N,
    or dimensionless ratios, giving rad/s and N m).  The actuator maps a
    command ``u`` (e.g. clutch pressure in Pa) through an optional first-order
    lag ``act_lag_s`` to a state ``x``; the normal force is
    ``F_N = max(0, act_gain * x - act_preload)``; the static capacity is
    ``K = gain_static * F_N`` and the Coulomb amplitude ``k = gain_kinetic * F_N``.
    A row driven directly by capacity uses ``act_gain = 1`` and
    ``gain_static = 1``: then ``u`` is K itself.

    A *kinematic* row (the kinematic-clutch article), ``kinematic_shift_time > 0``, is driven by an
    engage command instead: ``u >= kinematic_threshold`` engages it.  Engaging
    prescribes its relative speed to fall linearly to zero over the shift
    time, with whatever force that takes; engaged, it holds zero relative
    speed up to ``kinematic_capacity`` (row force units); disengaging ramps
    the force it can hold from the force held at the command to zero over the
    shift time.  Its actuator, friction-gain and Stribeck fields are ignored.
    """

    name: str
    shaft_a: int
    shaft_b: int
    coef_a: float = 1.0
    coef_b: float = -1.0
    act_lag_s: float = 0.0
    act_gain: float = 1.0
    act_preload: float = 0.0
    gain_static: float = 1.0
    gain_kinetic: float = 1.0
    stribeck_velocity: float = 0.0  # row speed units; 0 disables the Stribeck law
    stribeck_exponent: float = 2.0
    viscous: float = 0.0  # force per unit row speed
    kinematic_shift_time: float = 0.0  # s; > 0 makes the row a kinematic clutch
    kinematic_capacity: float = 1.0e9  # row force units: the most an engaged kinematic row holds
    kinematic_threshold: float = 0.5  # command units: a kinematic row is engaged while u >= this

    @property
    def kinematic(self) -> bool:
        return self.kinematic_shift_time > 0.0


@dataclass(frozen=True)
class Spring:
    """A spring-damper: twist rate ``factor_a * w_a + factor_b * w_b``.

    Torque ``phi_e(twist) + damping * rate`` acts as ``-factor_a * T`` on shaft
    a and ``-factor_b * T`` on shaft b.  ``phi_e`` is ``stiffness * twist`` or,
    when ``table`` is given, the piecewise-linear characteristic through the
    ``(twist rad, torque N m)`` points, extended linearly beyond its ends.
    """

    name: str
    shaft_a: int
    shaft_b: int
    factor_a: float = 1.0
    factor_b: float = -1.0
    stiffness: float = 0.0
    damping: float = 0.0
    table: tuple[tuple[float, float], ...] = ()


@dataclass(frozen=True)
class Settings:
    """Numerical settings of the core (defaults suit dt from 1 ms to 50 us)."""

    event_tol: float = 1e-10  # event-time tolerance, fraction of the sub-step
    rank_tol: float = 1e-10  # relative pivot below which a stuck row is redundant
    regularisation: float = 1e-9  # relative, for the minimum-norm split of redundant rows
    cycle_tol: float = 1e-9  # relative ratio mismatch that makes a cycle lock its shafts
    solver_tol: float = 1e-13  # relative sign tolerance of the friction solve
    break_margin: float = 1e-10  # relative excess over K that marks an in-step breakaway
    max_event_substeps: int = 0  # 0: 2 g + 4
    max_solver_iter: int = 0  # 0: 4 g + 8
    max_locate_iter: int = 60
    event_capacity: int = 1024
    reuse_end_evaluation: bool = True  # start a step from the last one's end evaluation when nothing changed


@dataclass(frozen=True)
class CoreSpec:
    """The mechanical network: inertias and drag per shaft, rows, springs."""

    shaft_names: tuple[str, ...]
    inertia: tuple[float, ...]
    drag: tuple[float, ...]
    rows: tuple[Row, ...]
    springs: tuple[Spring, ...] = ()
    settings: Settings = field(default_factory=Settings)

    def validate(self) -> None:
        n = len(self.inertia)
        if n < 1:
            raise SpecError("at least one shaft is needed")
        if len(self.drag) != n or len(self.shaft_names) != n:
            raise SpecError(f"inertia, drag and shaft_names must have the same length ({n})")
        for j, (J, b) in enumerate(zip(self.inertia, self.drag)):
            if not (math.isfinite(J) and J > 0):
                raise SpecError(f"shaft {self.shaft_names[j]!r}: inertia must be > 0, got {J}")
            if not (math.isfinite(b) and b >= 0):
                raise SpecError(f"shaft {self.shaft_names[j]!r}: drag must be >= 0, got {b}")
        for r in self.rows:
            where = f"row {r.name!r}"
            if not (0 <= r.shaft_a < n and 0 <= r.shaft_b < n) or r.shaft_a == r.shaft_b:
                raise SpecError(f"{where}: shafts must be two different indices in 0..{n - 1}")
            for nm in ("coef_a", "coef_b"):
                v = getattr(r, nm)
                if not math.isfinite(v) or v == 0.0:
                    raise SpecError(f"{where}: {nm} must be finite and non-zero, got {v}")
            for nm in ("act_lag_s", "act_gain", "act_preload", "gain_static", "gain_kinetic",
                       "stribeck_velocity", "viscous"):
                v = getattr(r, nm)
                if not (math.isfinite(v) and v >= 0):
                    raise SpecError(f"{where}: {nm} must be finite and >= 0, got {v}")
            if r.gain_kinetic > r.gain_static:
                raise SpecError(f"{where}: Coulomb amplitude k must not exceed static capacity K "
                                f"(gain_kinetic {r.gain_kinetic} > gain_static {r.gain_static})")
            if r.stribeck_velocity > 0 and not (r.stribeck_exponent > 0):
                raise SpecError(f"{where}: stribeck_exponent must be > 0")
            for nm in ("kinematic_shift_time", "kinematic_capacity", "kinematic_threshold"):
                v = getattr(r, nm)
                if not (math.isfinite(v) and v >= 0):
                    raise SpecError(f"{where}: {nm} must be finite and >= 0, got {v}")
            if r.kinematic and not r.kinematic_capacity > 0:
                raise SpecError(f"{where}: a kinematic row needs kinematic_capacity > 0")
        for sp in self.springs:
            where = f"spring {sp.name!r}"
            if not (0 <= sp.shaft_a < n and 0 <= sp.shaft_b < n) or sp.shaft_a == sp.shaft_b:
                raise SpecError(f"{where}: shafts must be two different indices in 0..{n - 1}")
            if not (sp.stiffness >= 0 and sp.damping >= 0):
                raise SpecError(f"{where}: stiffness and damping must be >= 0")
            xs = [p[0] for p in sp.table]
            if sp.table and (len(sp.table) < 2 or any(b <= a for a, b in zip(xs, xs[1:]))):
                raise SpecError(f"{where}: table needs >= 2 points with strictly increasing twist")
