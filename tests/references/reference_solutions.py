"""Independent reference solutions of the friction-core equations, for the tests.

Nothing here uses the compiled core or its algorithms.  The same model
(eq. 13 of Morselli, Zanasi & Ferracin) is solved the slow, obvious way:

* between events, scipy's ``solve_ivp`` (DOP853, rtol ~1e-12) integrates
  ``M dw/dt = f + R_S^T lambda`` with the stuck rows ``S`` enforced through
  the Moore-Penrose pseudo-inverse (``lambda = -pinv(W) R_S M^-1 f``,
  ``W = R_S M^-1 R_S^T``), so redundant rows get the minimum-norm split;
* events (a slipping row reaching zero relative speed, a stuck row's force
  reaching its static capacity, an actuator crossing its kiss point, a kink
  of an input) stop the integration and the mode is chosen again;
* the mode is chosen by brute force: every one of the 3^m bound states of
  the m candidate rows (free, at +K, at -K) is tried, and the one that
  satisfies the optimality conditions of the partition problem (eq. 18 of
  Morselli, Zanasi & Ferracin) is taken.  Rows that leave at their static bound start slipping
  with their Coulomb force; if that is smaller than the static one, the
  remaining candidates are solved again (a cascade in the same instant).

The network description is plain data (:class:`RefNetwork`) so it can be
built from a :class:`plant_models.core.CoreSpec` (parameters only) or by hand.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
from scipy.integrate import solve_ivp

MODE_STUCK = "stuck"


@dataclass
class RefRow:
    """One friction row: ``delta = ca * w[a] + cb * w[b]``.

    Capacity from the actuator: ``x`` follows the command ``u(t)`` through
    ``x' = (u - x) / lag`` (or ``x = u`` when ``lag == 0``); normal force
    ``F_N = max(0, gain * x - preload)``; ``K = gain_static F_N``,
    ``k = gain_kinetic F_N``.  ``viscous`` is a drag across the row.
    """

    a: int
    b: int | None  # None: a row to the housing, the one entry on a
    ca: float
    cb: float
    command: Callable[[float], float]
    lag: float = 0.0
    gain: float = 1.0
    preload: float = 0.0
    gain_static: float = 1.0
    gain_kinetic: float = 1.0
    viscous: float = 0.0
    more: tuple = ()  # further (shaft, coefficient) entries


@dataclass
class RefSpring:
    """A linear spring-damper with twist rate ``fa * w[a] + fb * w[b]``."""

    a: int
    b: int
    fa: float
    fb: float
    stiffness: float
    damping: float


@dataclass
class RefNetwork:
    inertia: Sequence[float]
    drag: Sequence[float]
    rows: Sequence[RefRow]
    torque: Callable[[float], np.ndarray]
    springs: Sequence[RefSpring] = ()
    breakpoints: Sequence[float] = ()  # times where an input has a kink or a jump
    mass_matrix: np.ndarray | None = None  # a full inertia matrix (a reduced system) instead of diag(inertia)
    drag_matrix: np.ndarray | None = None  # with it: the drag to ground as a matrix


@dataclass
class RefSolution:
    """Piecewise dense solution: ``w(t)``, the events and the mode segments."""

    n: int
    segments: list = field(default_factory=list)  # (t0, t1, dense, stuck set)
    events: list = field(default_factory=list)  # (t, row, kind) with kind "stick"/"breakaway"/"reversal"

    def state(self, t: float) -> np.ndarray:
        for t0, t1, dense, _ in self.segments:
            if t0 <= t <= t1:
                return dense(t)
        raise ValueError(f"t = {t} outside the solution")

    def w(self, t) -> np.ndarray:
        t = np.atleast_1d(np.asarray(t, dtype=float))
        out = np.empty((t.size, self.n))
        k = 0
        for q, tq in enumerate(t):
            # the segments are ordered: walk forward for sorted queries
            while k < len(self.segments) - 1 and tq > self.segments[k][1]:
                k += 1
            while k > 0 and tq < self.segments[k][0]:
                k -= 1
            out[q] = self.segments[k][2](tq)[: self.n]
        return out

    def stuck_at(self, t: float) -> frozenset:
        for t0, t1, _, stuck in self.segments:
            if t0 <= t < t1:
                return stuck
        return self.segments[-1][3]


def _const_dense(y):
    y = np.array(y, dtype=float)
    return lambda t: y.copy()


class ReferenceSolver:
    """Event-driven reference solution of a :class:`RefNetwork`."""

    def __init__(self, net: RefNetwork, rtol: float = 1e-12, atol: float = 1e-12, zero_tol: float = 1e-9):
        self.net = net
        self.n = len(net.inertia)
        self.g = len(net.rows)
        self.s = len(net.springs)
        if net.mass_matrix is not None:
            self.M = np.array(net.mass_matrix, dtype=float)
        else:
            self.M = np.diag(np.asarray(net.inertia, dtype=float))
        self.Minv = np.linalg.inv(self.M)
        ev, V = np.linalg.eigh(self.Minv)
        self.Minv_half = (V * np.sqrt(ev)) @ V.T  # symmetric square root
        self.D = (np.array(net.drag_matrix, dtype=float) if net.drag_matrix is not None
                  else np.diag(np.asarray(net.drag, dtype=float)))
        self.R = np.zeros((self.g, self.n))
        for i, r in enumerate(net.rows):
            self.R[i, r.a] += r.ca
            if r.b is not None:
                self.R[i, r.b] += r.cb
            for j, c in r.more:
                self.R[i, j] += c
        self.rtol = rtol
        self.atol = atol
        self.zero_tol = zero_tol
        self._mode_cache: dict = {}

    # -- model pieces ---------------------------------------------------------
    def actuator(self, t: float, y: np.ndarray) -> np.ndarray:
        x = np.empty(self.g)
        ox = self.n + self.s
        for i, r in enumerate(self.net.rows):
            x[i] = y[ox + i] if r.lag > 0 else r.command(t)
        return x

    def normal_force(self, t, y) -> np.ndarray:
        x = self.actuator(t, y)
        return np.array([r.gain * x[i] - r.preload for i, r in enumerate(self.net.rows)])

    def capacities(self, t, y):
        fn = np.maximum(self.normal_force(t, y), 0.0)
        K = np.array([r.gain_static for r in self.net.rows]) * fn
        k = np.array([r.gain_kinetic for r in self.net.rows]) * fn
        return K, k

    def free_force(self, t, y, slip_dir: dict) -> np.ndarray:
        """Generalised force without the stuck rows' constraint forces.

        ``slip_dir`` maps every non-stuck row to its slip direction (+1, -1,
        or 0 for a row that exerts no Coulomb force).
        """
        n = self.n
        w = y[:n]
        f = np.asarray(self.net.torque(t), dtype=float) - self.D @ w
        for j, sp in enumerate(self.net.springs):
            rate = sp.fa * w[sp.a] + sp.fb * w[sp.b]
            tq = sp.stiffness * y[n + j] + sp.damping * rate
            f[sp.a] -= sp.fa * tq
            f[sp.b] -= sp.fb * tq
        K, k = self.capacities(t, y)
        for i, d in slip_dir.items():
            delta = self.R[i] @ w
            mu = -k[i] * d - self.net.rows[i].viscous * delta
            f += self.R[i] * mu
        return f

    def mode_matrices(self, stuck: frozenset):
        """P (constrained inverse inertia) and Lmap (lambda = Lmap f) by pseudo-inverse."""
        if stuck in self._mode_cache:
            return self._mode_cache[stuck]
        idx = sorted(stuck)
        if not idx:
            out = (self.Minv.copy(), np.zeros((0, self.n)), idx)
        else:
            A = self.R[idx]
            sq = self.Minv_half
            B = A @ sq  # A M^-1/2
            Bp = np.linalg.pinv(B, rcond=1e-10)
            P = sq @ (np.eye(self.n) - Bp @ B) @ sq
            W = A @ self.Minv @ A.T
            L = -np.linalg.pinv(W, rcond=1e-10, hermitian=True) @ A @ self.Minv
            out = (P, L, idx)
        self._mode_cache[stuck] = out
        return out

    def rhs(self, t, y, stuck, slip_dir):
        n, s = self.n, self.s
        P, _, _ = self.mode_matrices(stuck)
        f = self.free_force(t, y, slip_dir)
        dy = np.zeros_like(y)
        dy[:n] = P @ f
        w = y[:n]
        for j, sp in enumerate(self.net.springs):
            dy[n + j] = sp.fa * w[sp.a] + sp.fb * w[sp.b]
        x = y[n + s:]
        for i, r in enumerate(self.net.rows):
            if r.lag > 0:
                dy[n + s + i] = (r.command(t) - x[i]) / r.lag
        return dy

    def stuck_forces(self, t, y, stuck, slip_dir) -> dict:
        _, L, idx = self.mode_matrices(stuck)
        lam = L @ self.free_force(t, y, slip_dir)
        return dict(zip(idx, lam))

    # -- the partition problem by enumeration --------------------------------
    @staticmethod
    def enumerate_box(W, b, K, tol=1e-9):
        """All bound states (-1, 0, +1 per row) that satisfy the optimality conditions of
        ``min 1/2 l^T W l + b^T l, -K <= l <= K``.  Returns a list of (state, l, grad)."""
        m = len(b)
        sols = []
        scale = np.abs(b).max(initial=0.0) + np.abs(W).max(initial=0.0) * np.abs(K).max(initial=0.0) + 1e-300
        for state in itertools.product((0, 1, -1), repeat=m):
            st = np.array(state)
            fr = np.flatnonzero(st == 0)
            bd = np.flatnonzero(st != 0)
            lam = np.zeros(m)
            lam[bd] = st[bd] * K[bd]
            if fr.size:
                rhs = -(b[fr] + W[np.ix_(fr, bd)] @ lam[bd])
                Wf = W[np.ix_(fr, fr)]
                # least squares: the minimum-norm solution when redundant rows make Wf singular
                lam[fr] = np.linalg.lstsq(Wf, rhs, rcond=1e-12)[0]
                if np.abs(Wf @ lam[fr] - rhs).max(initial=0.0) > tol * scale:
                    continue
                wmax = np.abs(W).max(initial=0.0) + 1e-300
                if np.any(np.abs(lam[fr]) > K[fr] * (1 + tol) + 1e-14 * scale / wmax):
                    continue
            grad = W @ lam + b
            ok = True
            for q in bd:
                if st[q] == 1 and grad[q] > tol * scale:
                    ok = False
                if st[q] == -1 and grad[q] < -tol * scale:
                    ok = False
            if ok:
                sols.append((st, lam, grad))
        return sols

    def solve_mode(self, t, y, candidates, slip_dir, forced=None):
        """Choose which candidate rows stick; the others slip in the direction they accelerate.

        ``slip_dir`` holds the directions of the non-candidate rows.  ``forced``
        maps rows that must slip (just broke away) to their direction.
        Returns (stuck frozenset, slip_dir dict for every non-stuck row).
        """
        slip_dir = dict(slip_dir)
        if forced:
            slip_dir.update(forced)
        cand = [i for i in sorted(candidates) if i not in slip_dir]
        K, k = self.capacities(t, y)
        for _ in range(self.g + 1):
            if not cand:
                break
            f = self.free_force(t, y, slip_dir)
            A = self.R[cand]
            W = A @ self.Minv @ A.T
            b = A @ self.Minv @ f
            sols = self.enumerate_box(W, b, K[cand])
            if not sols:
                raise RuntimeError(f"t={t}: no solution of the partition problem")
            lams = np.array([s[1] for s in sols])
            if np.abs(lams - lams[0]).max() > 1e-7 * (np.abs(K[cand]).max() + 1e-300):
                if np.linalg.matrix_rank(W, tol=1e-10 * np.abs(W).max()) == len(cand):
                    raise RuntimeError(f"t={t}: partition problem has no unique force solution")
            # redundant rows: several splits have the same effect; take the smallest
            st, lam, grad = min(sols, key=lambda sol: float(sol[1] @ sol[1]))
            scale = np.abs(b).max() + np.abs(W).max() * np.abs(K[cand]).max() + 1e-300
            leave = {}
            for q, i in enumerate(cand):
                if st[q] != 0 and abs(grad[q]) > 1e-9 * scale:
                    leave[i] = 1.0 if grad[q] > 0 else -1.0
            if not leave:
                break
            slip_dir.update(leave)
            cand = [i for i in cand if i not in leave]
            if not any(k[i] < K[i] for i in leave):
                break
        stuck = frozenset(cand)
        return stuck, slip_dir

    # -- events ----------------------------------------------------------------
    def _events(self, stuck, slip_dir, kiss_dir):
        evs = []
        n = self.n
        for i, d in slip_dir.items():
            if d == 0:
                continue

            def ev(t, y, *_, i=i, d=d):
                return d * (self.R[i] @ y[:n])

            ev.terminal = True
            ev.direction = -1
            ev.info = ("zero", i)
            evs.append(ev)
        for i in stuck:
            for sgn in (1.0, -1.0):
                def ev(t, y, *_, i=i, sgn=sgn):
                    K, _ = self.capacities(t, y)
                    lam = self.stuck_forces(t, y, stuck, slip_dir)[i]
                    return K[i] - sgn * lam

                ev.terminal = True
                ev.direction = -1
                ev.info = ("break", i, sgn)
                evs.append(ev)
        for i, d in kiss_dir.items():
            def ev(t, y, *_, i=i):
                return self.normal_force(t, y)[i]

            ev.terminal = True
            ev.direction = d
            ev.info = ("kiss", i)
            evs.append(ev)
        return evs

    def _kiss_dirs(self, t, y, just_crossed=None):
        """Direction of the next kiss-point crossing of each lagged actuator (the force kinks there)."""
        out = {}
        fn = self.normal_force(t, y)
        for i, r in enumerate(self.net.rows):
            if r.lag <= 0 or (r.gain_static == 0 and r.gain_kinetic == 0):
                continue
            scale = abs(r.gain * y[self.n + self.s + i]) + abs(r.preload) + 1e-300
            if just_crossed is not None and i == just_crossed[0]:
                out[i] = -just_crossed[1]  # it cannot cross back the same way at once
            elif abs(fn[i]) <= 1e-9 * scale:
                rate = r.command(t) - y[self.n + self.s + i]
                if rate == 0.0:
                    continue
                out[i] = 1 if rate > 0 else -1
            else:
                out[i] = 1 if fn[i] < 0 else -1
        return out

    def _project(self, y, stuck):
        """Momentum-consistent projection of the speeds onto the stuck constraints."""
        P, _, _ = self.mode_matrices(stuck)
        y = y.copy()
        y[: self.n] = P @ (self.M @ y[: self.n])
        return y

    def _dirs(self, t, y, stuck, keep):
        """Slip directions of the non-stuck rows from the sign of their relative speed."""
        w = y[: self.n]
        out = {}
        for i in range(self.g):
            if i in stuck:
                continue
            d = self.R[i] @ w
            scale = np.abs(self.R[i]).max() * (np.abs(w).max() + 1e-300)
            if abs(d) <= self.zero_tol * scale:
                out[i] = keep.get(i, 0.0)
            else:
                out[i] = 1.0 if d > 0 else -1.0
        return out

    def _zero_candidates(self, t, y, stuck):
        K, _ = self.capacities(t, y)
        w = y[: self.n]
        scale = np.abs(w).max() + 1e-300
        return {i for i in range(self.g) if i not in stuck and K[i] > 0
                and abs(self.R[i] @ w) <= self.zero_tol * np.abs(self.R[i]).max() * scale}

    def _resolve(self, t, y, stuck, slip_dir, extra=(), forced=None, log=None):
        """Mode solve at an event: candidates = stuck + zero-speed rows with capacity."""
        old_stuck = stuck
        cand = set(stuck) | self._zero_candidates(t, y, stuck) | set(extra)
        if forced:
            cand -= set(forced)
        K, _ = self.capacities(t, y)
        cand = {i for i in cand if K[i] > 0}
        if cand:
            # the candidates are at zero speed to rounding; put them there exactly
            y = self._project(y, frozenset(cand))
        base = {i: d for i, d in self._dirs(t, y, frozenset(cand), slip_dir).items() if i not in cand}
        prev = dict(slip_dir)
        stuck, slip_dir = self.solve_mode(t, y, cand, base, forced)
        y = self._project(y, stuck) if stuck else y
        if log is not None:
            for i in sorted(set(stuck) - set(old_stuck)):
                log.append((t, i, "stick"))
            for i in sorted(set(old_stuck) - set(stuck)):
                log.append((t, i, "breakaway"))
            for i in cand:
                if i not in old_stuck and i not in stuck and prev.get(i, 0) != 0 and slip_dir.get(i) == -prev[i]:
                    log.append((t, i, "reversal"))
        return y, stuck, slip_dir

    # -- driver ------------------------------------------------------------------
    def simulate(self, t_end: float, w0, engaged=(), x0=None, twist0=None, t0: float = 0.0,
                 max_events: int = 10000) -> RefSolution:
        n, s, g = self.n, self.s, self.g
        y = np.zeros(n + s + g)
        y[:n] = w0
        if twist0 is not None:
            y[n:n + s] = twist0
        if x0 is not None:
            y[n + s:] = x0
        else:
            for i, r in enumerate(self.net.rows):
                y[n + s + i] = r.command(t0)
        sol = RefSolution(n=n)
        stuck = frozenset(engaged)
        if stuck:
            # start engaged: keep the lowest shaft of each group, like a start with rows engaged
            y = self._project_keep_root(y, stuck)
        y, stuck, slip_dir = self._resolve(t0, y, stuck, {}, log=None)
        bps = sorted(b for b in self.net.breakpoints if t0 < b < t_end) + [t_end]
        t = t0
        nev = 0
        just_crossed = None
        while t < t_end and nev < max_events:
            t_stop = next(b for b in bps if b > t)
            evs = self._events(stuck, slip_dir, self._kiss_dirs(t, y, just_crossed))
            just_crossed = None
            r = solve_ivp(self.rhs, (t, t_stop), y, method="DOP853", rtol=self.rtol, atol=self.atol,
                          events=evs, dense_output=True, args=(stuck, slip_dir))
            if not r.success:
                raise RuntimeError(r.message)
            t_reached = r.t[-1]
            sol.segments.append((t, t_reached, r.sol if r.sol is not None else _const_dense(y), stuck))
            y = r.y[:, -1].copy()
            if r.status == 1:
                nev += 1
                # the earliest event (several may fire at once)
                fired = [(te[0], q) for q, te in enumerate(r.t_events) if len(te)]
                te, q = min(fired)
                info = evs[q].info
                t = te
                if info[0] == "zero":
                    i = info[1]
                    before = slip_dir[i]
                    y, stuck, slip_dir = self._resolve(t, y, stuck, slip_dir, extra=(i,), log=sol.events)
                    if i not in stuck and self.capacities(t, y)[0][i] <= 0.0:
                        # no capacity: nothing holds the row, it moves on through zero
                        slip_dir[i] = -before
                elif info[0] == "break":
                    i, sgn = info[1], info[2]
                    # force reached +K (sgn=+1): the row slips in the negative direction
                    y, stuck, slip_dir = self._resolve(t, y, stuck - {i}, slip_dir, forced={i: -sgn},
                                                       log=None)
                    sol.events.append((t, i, "breakaway"))
                else:
                    just_crossed = (info[1], evs[q].direction)
                    y, stuck, slip_dir = self._resolve(t, y, stuck, slip_dir, log=sol.events)
            else:
                t = t_stop
                if t < t_end:
                    y, stuck, slip_dir = self._resolve(t, y, stuck, slip_dir, log=sol.events)
        return sol

    def _project_keep_root(self, y, stuck):
        """Engage rows at the start: speeds rebuilt from the lowest shaft of each group.

        (Rows of other than two entries: the momentum-consistent projection; give such a start
        consistent speeds when the two must agree.)
        """
        if any(self.net.rows[i].b is None or self.net.rows[i].more for i in stuck):
            return self._project(y, stuck)
        y = y.copy()
        w = y[: self.n]
        fixed = set()
        idx = sorted(stuck)
        # breadth-first from the lowest index of each group
        adj = {i: (self.net.rows[i].a, self.net.rows[i].b) for i in idx}
        for root in range(self.n):
            if root in fixed:
                continue
            fixed.add(root)
            queue = [root]
            while queue:
                v = queue.pop(0)
                for i, (a, b) in adj.items():
                    r = self.net.rows[i]
                    if a == v and b not in fixed:
                        w[b] = -r.ca * w[a] / r.cb
                        fixed.add(b)
                        queue.append(b)
                    elif b == v and a not in fixed:
                        w[a] = -r.cb * w[b] / r.ca
                        fixed.add(a)
                        queue.append(a)
        y[: self.n] = w
        return y


# ------------------------------------------------------------------------------
# builders
# ------------------------------------------------------------------------------
def network_from_spec(spec, torque: Callable[[float], np.ndarray], commands: Sequence[Callable[[float], float]],
                      breakpoints: Sequence[float] = ()) -> RefNetwork:
    """A reference network with the parameters of a :class:`plant_models.core.CoreSpec` (linear springs only)."""
    rows = []
    for r, cmd in zip(spec.rows, commands):
        if r.stribeck_velocity > 0:
            raise ValueError("the reference solver has no Stribeck law")
        if r.one_way:
            raise ValueError("the reference solver has no freewheels")
        rows.append(RefRow(r.shaft_a, None if r.grounded else r.shaft_b, r.coef_a, r.coef_b, cmd, lag=r.act_lag_s,
                           gain=r.act_gain, preload=r.act_preload, gain_static=r.gain_static,
                           gain_kinetic=r.gain_kinetic, viscous=r.viscous, more=tuple(r.more)))
    springs = []
    for sp in spec.springs:
        if sp.table:
            raise ValueError("the reference solver has linear springs only")
        springs.append(RefSpring(sp.shaft_a, sp.shaft_b, sp.factor_a, sp.factor_b, sp.stiffness, sp.damping))
    return RefNetwork(spec.inertia, spec.drag, rows, torque, springs, breakpoints,
                      mass_matrix=spec.mass_matrix() if spec.dense else None,
                      drag_matrix=spec.damping_matrix() if spec.dense else None)


def piecewise_linear(points: Sequence[tuple[float, float]]) -> Callable[[float], float]:
    """u(t) through (t, value) points, held constant outside (a jump: two points at one time, right value wins)."""
    ts = [p[0] for p in points]
    vs = [p[1] for p in points]

    def u(t: float) -> float:
        if t <= ts[0]:
            return vs[0]
        for q in range(len(ts) - 1, 0, -1):
            if t >= ts[q]:
                return vs[q]
            if t > ts[q - 1]:
                t0, t1 = ts[q - 1], ts[q]
                return vs[q - 1] + (vs[q] - vs[q - 1]) * (t - t0) / (t1 - t0)
        return vs[-1]

    return u


# ------------------------------------------------------------------------------
# the benchmark of Zanasi, Sandoni & Morselli: four masses in a chain
# ------------------------------------------------------------------------------
CHAIN4_MASS = (10.0, 10.0, 10.0, 10.0)  # kg
CHAIN4_K = (12.0, 10.0, 13.0)  # N, static = Coulomb
CHAIN4_V0 = (2.0, -1.0, 1.0, 2.0)  # m/s
CHAIN4_AMP = np.array([11.0, 11.0, -8.0, 8.0])  # N
CHAIN4_FREQ = np.array([0.45, 1.15, 0.85, 1.5])  # Hz


def chain4_force(t: float) -> np.ndarray:
    return CHAIN4_AMP * np.sin(2.0 * math.pi * CHAIN4_FREQ * t)


def chain4_network() -> RefNetwork:
    rows = [RefRow(i, i + 1, 1.0, -1.0, (lambda t, K=K: K)) for i, K in enumerate(CHAIN4_K)]
    return RefNetwork(CHAIN4_MASS, (0.0,) * 4, rows, chain4_force)


__all__ = [
    "RefRow", "RefSpring", "RefNetwork", "RefSolution", "ReferenceSolver", "network_from_spec",
    "piecewise_linear", "chain4_network", "chain4_force", "CHAIN4_MASS", "CHAIN4_K", "CHAIN4_V0",
]
