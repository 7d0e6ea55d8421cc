"""The specification of a mechanical network for the friction core: shafts, friction rows, springs, settings.

A :class:`CoreSpec` is frozen and validated once (:meth:`CoreSpec.validate`
raises :class:`SpecError` naming the row or spring and the problem); the
:class:`Core` handle packs it into the flat buffers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import SpecError

GROUND = -1  # ``shaft_b`` of a row to the housing (a brake): the row has the one entry on shaft a


@dataclass(frozen=True)
class Row:
    """One gear/clutch row of R: a sparse list of (shaft, coefficient) entries.

    ``delta = coef_a * w_a + coef_b * w_b + sum(c * w for (shaft, c) in more)``
    is the row's relative speed (coefficients are gear radii in m, giving
    speeds in m/s and forces in N, or dimensionless ratios, giving rad/s and
    N m).  Most rows couple two shafts; a row to the housing (a brake) has
    ``shaft_b = GROUND`` and the one entry on shaft a; a row of a reduced
    planetary transmission (independent speeds of Biagiotti & Zanasi's
    congruence transform) may have three or more entries, the further ones
    in ``more``.  ``one_way`` makes the row a freewheel: it can only hold
    ``delta`` from going negative (its force ``0 <= mu <= K``) and has no
    friction while it overruns (``delta > 0``).  The actuator maps a
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
    more: tuple[tuple[int, float], ...] = ()  # further (shaft, coefficient) entries
    one_way: bool = False  # a freewheel: holds delta >= 0 only, no friction while overrunning

    @property
    def kinematic(self) -> bool:
        return self.kinematic_shift_time > 0.0

    @property
    def grounded(self) -> bool:
        """A row to the housing: its one entry is on shaft a."""
        return self.shaft_b == GROUND

    def entries(self) -> list[tuple[int, float]]:
        """The row's (shaft, coefficient) entries in the core's order: a, b (unless grounded), then ``more``."""
        first = [(self.shaft_a, self.coef_a)] + ([] if self.grounded else [(self.shaft_b, self.coef_b)])
        return first + [(int(j), float(c)) for j, c in self.more]


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
    """The mechanical network: inertias and drag per shaft, rows, springs.

    The inertia is diagonal (``inertia``, one per shaft) unless
    ``inertia_matrix`` is given: then the "shafts" are independent speeds
    of a reduced system (rigidly geared members eliminated by a congruence
    transform ``w_members = T q``, so ``M = T^T diag(J) T``, Biagiotti &
    Zanasi), ``inertia`` must be its diagonal, and ``drag_matrix`` (the
    reduced drag ``T^T diag(b) T``, symmetric, positive semi-definite)
    replaces the per-shaft ``drag``.
    """

    shaft_names: tuple[str, ...]
    inertia: tuple[float, ...]
    drag: tuple[float, ...]
    rows: tuple[Row, ...]
    springs: tuple[Spring, ...] = ()
    settings: Settings = field(default_factory=Settings)
    inertia_matrix: tuple[tuple[float, ...], ...] | None = None  # n x n, symmetric positive definite
    drag_matrix: tuple[tuple[float, ...], ...] | None = None  # n x n, symmetric positive semi-definite

    @property
    def dense(self) -> bool:
        """Whether the inertia is a full matrix (a reduced system) rather than one inertia per shaft."""
        return self.inertia_matrix is not None

    def mass_matrix(self) -> np.ndarray:
        """M as an n x n array."""
        if self.dense:
            return np.array(self.inertia_matrix, dtype=float)
        return np.diag(np.asarray(self.inertia, dtype=float))

    def damping_matrix(self) -> np.ndarray:
        """The drag to ground as an n x n array."""
        if self.drag_matrix is not None:
            return np.array(self.drag_matrix, dtype=float)
        return np.diag(np.asarray(self.drag, dtype=float))

    def R(self) -> np.ndarray:
        """The rows as a dense g x n matrix (initial coefficients)."""
        out = np.zeros((len(self.rows), len(self.inertia)))
        for i, r in enumerate(self.rows):
            for j, c in r.entries():
                out[i, j] += c
        return out

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
        self._validate_matrices(n)
        if self.drag_matrix is not None and not self.dense:
            raise SpecError("drag_matrix needs inertia_matrix (a reduced system)")
        for r in self.rows:
            where = f"row {r.name!r}"
            shafts = [j for j, _ in r.entries()]
            if not all(isinstance(j, (int, np.integer)) and 0 <= j < n for j in shafts):
                raise SpecError(f"{where}: shafts must be indices in 0..{n - 1} (shaft_b may be GROUND), got {shafts}")
            if len(set(shafts)) != len(shafts):
                raise SpecError(f"{where}: a shaft appears twice in the row ({shafts})")
            for k, (j, v) in enumerate(r.entries()):
                if not math.isfinite(v) or v == 0.0:
                    raise SpecError(f"{where}: the coefficient on shaft {j} must be finite and non-zero, got {v}")
            if r.one_way and r.kinematic:
                raise SpecError(f"{where}: a freewheel (one_way) cannot be a kinematic row")
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

    def _validate_matrices(self, n: int) -> None:
        for name in ("inertia_matrix", "drag_matrix"):
            m = getattr(self, name)
            if m is None:
                continue
            a = np.array(m, dtype=float)
            if a.shape != (n, n) or not np.all(np.isfinite(a)):
                raise SpecError(f"{name} must be a finite {n} x {n} matrix")
            if not np.array_equal(a, a.T):
                raise SpecError(f"{name} must be symmetric")
            if name == "inertia_matrix":
                if not np.array_equal(np.diag(a), np.asarray(self.inertia, dtype=float)):
                    raise SpecError("inertia must be the diagonal of inertia_matrix")
                try:
                    np.linalg.cholesky(a)
                except np.linalg.LinAlgError:
                    raise SpecError("inertia_matrix must be positive definite") from None
            elif np.linalg.eigvalsh(a).min() < -1e-12 * max(1.0, np.abs(a).max()):
                raise SpecError("drag_matrix must be positive semi-definite")
