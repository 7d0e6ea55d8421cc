"""The friction core's step written in plain NumPy (a benchmark baseline, not used by the server).

Same model and the same method as ``plant_models/friction_core.py``: RK4
between events with the stuck rows enforced through the constrained
inverse inertia ``P``; slipping rows reaching zero speed and stuck rows
exceeding their capacity located inside the step by regula falsi (Illinois)
on RK4 trials; kiss points located on the actuator's closed form; the stuck
set chosen by the same primal active-set solve of the box-constrained
partition problem, with the k < K cascade.  What it leaves out: springs,
the Stribeck law, redundant or locked stuck sets, the dense-output check for
double crossings, the exact-zero tree reconstruction (stuck speeds are
projected, so a stuck row's slip is ~1e-16, not 0.0) and the bounded-cost
caps beyond a simple event limit.  It is what a careful Python programmer
would write with NumPy arrays; its purpose is to show what the compiled
flat-buffer core buys.
"""

from __future__ import annotations

import math

import numpy as np


class NumpyCore:
    """A network of shafts and friction rows (no springs), stepped in NumPy."""

    def __init__(self, spec):
        if spec.springs:
            raise ValueError("the NumPy core has no springs")
        rows = spec.rows
        if any(r.stribeck_velocity > 0 for r in rows):
            raise ValueError("the NumPy core has no Stribeck law")
        self.n = len(spec.inertia)
        self.g = len(rows)
        self.J = np.asarray(spec.inertia, dtype=float)
        self.Minv = 1.0 / self.J
        self.drag = np.asarray(spec.drag, dtype=float)
        self.R = np.zeros((self.g, self.n))
        for i, r in enumerate(rows):
            self.R[i, r.shaft_a] += r.coef_a
            self.R[i, r.shaft_b] += r.coef_b
        self.lag = np.array([r.act_lag_s for r in rows])
        self.gain = np.array([r.act_gain for r in rows])
        self.pre = np.array([r.act_preload for r in rows])
        self.gs = np.array([r.gain_static for r in rows])
        self.gk = np.array([r.gain_kinetic for r in rows])
        self.visc = np.array([r.viscous for r in rows])
        self.event_tol = spec.settings.event_tol
        self.w = np.zeros(self.n)
        self.x = np.zeros(self.g)
        self.stuck = np.zeros(self.g, dtype=bool)
        self.dir = np.zeros(self.g)
        self.t = 0.0
        self.events = []
        self._cache_key = None

    # -- inputs over the step (first-order hold) --------------------------------
    def set_inputs(self, tau, tau_rate, u, u_rate):
        self.tau0, self.tau_r = np.asarray(tau, float), np.asarray(tau_rate, float)
        self.u0, self.u_r = np.asarray(u, float), np.asarray(u_rate, float)

    def actuator(self, x0, s0, tau):
        """Actuator states tau after a sub-step start s0 (closed form of the lag)."""
        v = self.u0 + self.u_r * s0
        out = v + self.u_r * tau
        lagged = self.lag > 0
        T = np.where(lagged, self.lag, 1.0)
        xl = v + self.u_r * tau - self.u_r * T + (x0 - v + self.u_r * T) * np.exp(-tau / T)
        return np.where(lagged, xl, out)

    def caps(self, x):
        fn = np.maximum(self.gain * x - self.pre, 0.0)
        return self.gs * fn, self.gk * fn

    # -- stuck-set matrices --------------------------------------------------------
    def matrices(self):
        key = self.stuck.tobytes()
        if key != self._cache_key:
            idx = np.flatnonzero(self.stuck)
            if idx.size:
                A = self.R[idx]
                AM = A * self.Minv
                W = AM @ A.T
                Winv_AM = np.linalg.solve(W, AM)
                self.P = np.diag(self.Minv) - AM.T @ Winv_AM
                self.L = -Winv_AM
            else:
                self.P = np.diag(self.Minv)
                self.L = np.zeros((0, self.n))
            self.idx = idx
            self._cache_key = key
        return self.P, self.L, self.idx

    def free_force(self, w, t_abs, x):
        K, k = self.caps(x)
        f = self.tau0 + self.tau_r * t_abs - self.drag * w
        d = self.R @ w
        mu = np.where(self.stuck, 0.0, -k * self.dir - self.visc * d)
        return f + self.R.T @ mu, mu, d, K

    def deriv(self, w, s, x):
        P, _, _ = self.matrices()
        f, _, _, _ = self.free_force(w, s, x)
        return P @ f

    def rk4(self, w0, x0, s0, h):
        xh = self.actuator(x0, s0, 0.5 * h)
        x1 = self.actuator(x0, s0, h)
        k1 = self.deriv(w0, s0, x0)
        k2 = self.deriv(w0 + 0.5 * h * k1, s0 + 0.5 * h, xh)
        k3 = self.deriv(w0 + 0.5 * h * k2, s0 + 0.5 * h, xh)
        k4 = self.deriv(w0 + h * k3, s0 + h, x1)
        w = w0 + h / 6.0 * (k1 + 2.0 * (k2 + k3) + k4)
        P, _, idx = self.matrices()
        if idx.size:  # back onto the constraints (a projection, not an exact rebuild)
            w = P @ (self.J * w)
        return w, x1

    def event_values(self, w, s, x):
        """Positive before an event, <= 0 after: slipping rows dir*delta, stuck rows K - |lambda|."""
        P, L, idx = self.matrices()
        f, _, d, K = self.free_force(w, s, x)
        _, k = self.caps(x)
        g = np.where(~self.stuck & (self.dir != 0) & ((K > 0) | (k > 0)), self.dir * d, np.inf)
        if idx.size:
            lam = L @ f
            g[idx] = K[idx] * 1.0000000001 - np.abs(lam)
        return g

    # -- mode solve: the box-constrained partition problem ---------------------------
    @staticmethod
    def box_qp(W, b, K, bnd, max_iter=50):
        lam = np.where(bnd == 0, 0.0, bnd * K)
        for _ in range(max_iter):
            free = np.flatnonzero(bnd == 0)
            if free.size:
                bound = np.flatnonzero(bnd != 0)
                rhs = -(b[free] + W[np.ix_(free, bound)] @ lam[bound])
                x = np.linalg.solve(W[np.ix_(free, free)], rhs)
                step = x - lam[free]
                alpha, block, side = 1.0, -1, 0
                for q, kq in enumerate(free):
                    if x[q] > K[kq] and step[q] > 0:
                        a = (K[kq] - lam[kq]) / step[q]
                        if a < alpha:
                            alpha, block, side = a, kq, 1
                    elif x[q] < -K[kq] and step[q] < 0:
                        a = (-K[kq] - lam[kq]) / step[q]
                        if a < alpha:
                            alpha, block, side = a, kq, -1
                lam[free] += max(alpha, 0.0) * step
                if block >= 0:
                    bnd[block] = side
                    lam[block] = side * K[block]
                    continue
            grad = W @ lam + b
            thr = 1e-13 * (np.abs(b) + np.diag(W) * K) + 1e-300
            viol = np.where((bnd == 1) & (grad > thr), grad, 0.0) + np.where((bnd == -1) & (grad < -thr), -grad, 0.0)
            if viol.max(initial=0.0) <= 0.0:
                return lam, grad, bnd
            bnd[int(np.argmax(viol))] = 0
        return lam, W @ lam + b, bnd

    def mode_solve(self, w, s, x):
        K, k = self.caps(x)
        d = self.R @ w
        for i in range(self.g):
            if not self.stuck[i] and d[i] != 0.0:
                self.dir[i] = math.copysign(1.0, d[i])
        cand = [i for i in range(self.g) if K[i] > 0 and (self.stuck[i] or abs(d[i]) <= 1e-13 * (np.abs(w).max()))]
        was = self.stuck.copy()
        self.stuck[:] = False
        self.stuck[cand] = True
        for _ in range(self.g + 1):
            idx = np.flatnonzero(self.stuck)
            if not idx.size:
                break
            f, _, _, _ = self.free_force(w, s, x)
            A = self.R[idx]
            W = (A * self.Minv) @ A.T
            b = (A * self.Minv) @ f
            lam, grad, bnd = self.box_qp(W, b, K[idx], np.zeros(idx.size, dtype=int))
            leave = [(i, grad[q]) for q, i in enumerate(idx)
                     if bnd[q] != 0 and abs(grad[q]) > 1e-13 * (abs(b[q]) + W[q, q] * K[i])]
            for i, gq in leave:
                self.stuck[i] = False
                self.dir[i] = 1.0 if gq > 0 else -1.0
            if not leave or not any(k[i] < K[i] for i, _ in leave):
                break
        self._cache_key = None
        for i in range(self.g):
            if self.stuck[i] != was[i]:
                self.events.append((self.t + s, i, "stick" if self.stuck[i] else "breakaway"))
        P, _, idx = self.matrices()
        if idx.size:
            w = P @ (self.J * w)
        return w

    # -- one step --------------------------------------------------------------------
    def kiss_time(self, x0, s0, h):
        fn0 = self.gain * x0 - self.pre
        fn1 = self.gain * self.actuator(x0, s0, h) - self.pre
        best = h
        for i in np.flatnonzero((np.sign(fn0) * np.sign(fn1) < 0) & (np.abs(fn0) > 1e-9 * np.abs(self.pre))):
            lo, hi = 0.0, h
            while hi - lo > self.event_tol * h:
                c = 0.5 * (lo + hi)
                fc = self.gain[i] * self.actuator(x0, s0, c)[i] - self.pre[i]
                if np.sign(fc) == np.sign(fn0[i]):
                    lo = c
                else:
                    hi = c
            best = min(best, hi)
        return best

    def step(self, dt):
        s = 0.0
        w, x = self.w, self.x
        g0 = self.event_values(w, s, x)
        if np.any(g0 < 0) or self._needs_mode(w, s, x):
            w = self.mode_solve(w, s, x)
        for _ in range(2 * self.g + 4):
            h = dt - s
            if h <= 1e-12 * dt:
                break
            hk = self.kiss_time(x, s, h)
            g0 = self.event_values(w, s, x)
            w1, x1 = self.rk4(w, x, s, hk)
            g1 = self.event_values(w1, s + hk, x1)
            crossed = (g1 <= 0) & (g0 >= 0) & (g1 < g0)
            if not crossed.any():
                w, x, s = w1, x1, s + hk
                if hk < h:
                    w = self.mode_solve(w, s, x)
                continue
            with np.errstate(invalid="ignore", divide="ignore"):
                row = int(np.argmin(np.where(crossed, g0 / (g0 - g1), np.inf)))
            lo, hi, flo, fhi, side = 0.0, hk, g0[row], g1[row], 0
            for _ in range(60):
                if hi - lo <= self.event_tol * h:
                    break
                c = (lo * fhi - hi * flo) / (fhi - flo) if flo > 0 else 0.5 * (lo + hi)
                if not lo < c < hi:
                    c = 0.5 * (lo + hi)
                wc, xc = self.rk4(w, x, s, c)
                fc = self.event_values(wc, s + c, xc)[row]
                if fc > 0:
                    lo, flo = c, fc
                    if side == -1:
                        fhi *= 0.5
                    side = -1
                else:
                    hi, fhi = c, fc
                    if side == 1:
                        flo *= 0.5
                    side = 1
            w, x = self.rk4(w, x, s, hi)
            s += hi
            w = self.mode_solve(w, s, x)
        self.w, self.x = w, x
        self.t += dt

    def _needs_mode(self, w, s, x):
        K, _ = self.caps(x)
        d = self.R @ w
        zero = np.abs(d) <= 1e-13 * (np.abs(w).max() + 1e-300)
        return bool(np.any(~self.stuck & zero & (K > 0)) or np.any(self.stuck & (K <= 0)))
