"""The congruence transform of a friction chain (Zanasi, Sandoni & Morselli, section 3, Biagiotti & Zanasi, section 3.3): a reference.

A chain of n bodies (masses m_i, or inertias), body i touching body i+1
through a dry friction contact, external forces F_i::

    M v' = F - D^T tau,      D = [[1, -1, 0, ...], [0, 1, -1, ...], ...]   (Zanasi, Sandoni & Morselli, eq. 4)

with tau_i = k_i sgn(v_i - v_{i+1}) while the contact slips and the
constraint force that keeps v_i = v_{i+1} (at most K_i) while it sticks.
The congruence transform ``v = T z`` (Zanasi, Sandoni & Morselli, Biagiotti & Zanasi, eq. 16 ff.) with

    z = [sum(m_i v_i) / m_tot,  v_1 - v_2,  ...,  v_{n-1} - v_n]

makes ``M_T = T^T M T`` block diagonal: the *main dynamics*
``m_tot z_1' = sum(F_i)`` (eq. 16) does not see the friction, and the
*relative dynamics* ``z_R' = J_R^-1 (F_R - tau)`` (eq. 17) see only it,
with ``F_R`` the last n-1 entries of ``T^T F``.  ``J_R^-1`` is the
tridiagonal matrix of Zanasi, Sandoni & Morselli, eq. (7); it equals ``D M^-1 D^T``.

At zero relative velocity the frictions of the contacts in the set xi are
the equivalent controls that keep ``z_R,xi' = 0`` (eq. 19)::

    tau_xi = F_R,xi + ((J_R^-1)_xi,xi)^-1 (J_R^-1)_xi,xibar (F_R,xibar - tau_xibar)

and are kept if ``|tau_i| <= K_i`` (eqs. 20-21), else saturated at
``K_i sign(tau_i)`` (eq. 22).  Seed 000 notes that (22) is "not exact" when
several relative dynamics saturate at once: the other stuck contacts keep
forces computed with the unsaturated value.  :func:`friction_published`
implements the published rule as written; :func:`friction_exact` solves the
same step exactly by trying every stick / slip(+) / slip(-) combination of
the contacts at zero relative velocity (3^|xi| cases) and keeping the one
consistent combination.  The friction core solves the identical problem as
a box-constrained QP whose matrix ``R M^-1 R^T`` is, for a chain, exactly
``J_R^-1``.

This module is a pure-numpy reference for tests and documentation; nothing
here runs in the real-time loop.
"""

from __future__ import annotations

import itertools

import numpy as np


def transform(masses) -> tuple[np.ndarray, np.ndarray]:
    """The congruence matrix T (v = T z) and its inverse, for bodies of the given masses (Biagiotti & Zanasi, sec. 3.3).

    Column 0 of T is all ones (the main dynamics); column j >= 1 carries
    z_j = v_{j-1} - v_j (0-based bodies): rows above the contact get
    (sum of the masses after it) / m_tot, rows below get -(sum of the masses
    up to it) / m_tot.
    """
    m = np.asarray(masses, dtype=float)
    n = len(m)
    tot = m.sum()
    T = np.empty((n, n))
    T[:, 0] = 1.0
    for j in range(1, n):
        after = m[j:].sum()
        before = m[:j].sum()
        for i in range(n):
            T[i, j] = after / tot if i < j else -before / tot
    Tinv = np.zeros((n, n))
    Tinv[0] = m / tot
    for j in range(1, n):
        Tinv[j, j - 1] = 1.0
        Tinv[j, j] = -1.0
    return T, Tinv


def relative_inverse_inertia(masses) -> np.ndarray:
    """J_R^-1, the inverse inertia of the relative dynamics (Zanasi, Sandoni & Morselli, eq. 7): tridiagonal, = D M^-1 D^T."""
    m = np.asarray(masses, dtype=float)
    n = len(m)
    W = np.zeros((n - 1, n - 1))
    for i in range(n - 1):
        W[i, i] = 1.0 / m[i] + 1.0 / m[i + 1]
        if i + 1 < n - 1:
            W[i, i + 1] = W[i + 1, i] = -1.0 / m[i + 1]
    return W


class CongruenceChain:
    """The chain in transformed coordinates: z from v, forces F_T = T^T F, the two dynamics.

    ``cap_static`` K_i and ``cap_kinetic`` k_i of each contact (N).
    """

    def __init__(self, masses, cap_static, cap_kinetic=None):
        self.m = np.asarray(masses, dtype=float)
        self.n = len(self.m)
        self.K = np.asarray(cap_static, dtype=float)
        self.k = self.K.copy() if cap_kinetic is None else np.asarray(cap_kinetic, dtype=float)
        self.T, self.Tinv = transform(self.m)
        self.M_T = self.T.T @ np.diag(self.m) @ self.T
        self.Winv = relative_inverse_inertia(self.m)  # J_R^-1
        self.m_tot = float(self.m.sum())

    def to_z(self, v) -> np.ndarray:
        return self.Tinv @ np.asarray(v, dtype=float)

    def to_v(self, z) -> np.ndarray:
        return self.T @ np.asarray(z, dtype=float)

    def forces(self, F) -> tuple[float, np.ndarray]:
        """(F_T1, F_R): the main dynamics' force and the relative dynamics' forces."""
        FT = self.T.T @ np.asarray(F, dtype=float)
        return float(FT[0]), FT[1:]

    def derivative(self, F, z, mode) -> tuple[np.ndarray, np.ndarray]:
        """(z', tau) in a fixed friction mode.

        ``mode[i]`` is 0 for a stuck contact (its tau from eq. 19, z_R,i' = 0),
        +1 / -1 for a contact slipping in that direction (tau = k_i * mode[i]).
        """
        FT1, FR = self.forces(F)
        mode = np.asarray(mode)
        xi = np.flatnonzero(mode == 0)
        xb = np.flatnonzero(mode != 0)
        tau = np.zeros(self.n - 1)
        tau[xb] = self.k[xb] * mode[xb]
        if xi.size:
            W = self.Winv
            rhs = W[np.ix_(xi, xb)] @ (FR[xb] - tau[xb])
            tau[xi] = FR[xi] + np.linalg.solve(W[np.ix_(xi, xi)], rhs)  # eq. (19)
        zd = np.empty(self.n)
        zd[0] = FT1 / self.m_tot  # eq. (16)
        zd[1:] = self.Winv @ (FR - tau)  # eq. (17)
        zd[1:][xi] = 0.0  # exactly zero (eq. 21); the solve above makes it zero up to rounding
        return zd, tau


def friction_published(chain: CongruenceChain, F, z, zero_tol=0.0) -> tuple[np.ndarray, np.ndarray]:
    """The friction step as published (Biagiotti & Zanasi, eqs. 18-22, Fig. 6): returns (z', tau).

    Slipping contacts: tau = k sgn(z_R).  Contacts at zero relative velocity:
    tau from eq. (19) with all of them stuck; those within K keep z' = 0
    (eq. 21), the others are saturated at K sign(tau) (eq. 22) and their z'
    follows from eq. (17) -- without recomputing the kept ones.
    """
    zR = np.asarray(z, dtype=float)[1:]
    mode = np.where(np.abs(zR) <= zero_tol, 0, np.sign(zR)).astype(int)
    _, tau = chain.derivative(F, z, mode)
    FT1, FR = chain.forces(F)
    xi = np.flatnonzero(mode == 0)
    over = [i for i in xi if abs(tau[i]) > chain.K[i]]
    for i in over:
        tau[i] = chain.K[i] * np.sign(tau[i])
    zd = np.empty(chain.n)
    zd[0] = FT1 / chain.m_tot
    zd[1:] = chain.Winv @ (FR - tau)
    for i in xi:
        if i not in over:
            zd[1 + i] = 0.0
    return zd, tau


def friction_exact(chain: CongruenceChain, F, z, zero_tol=0.0, broken=None):
    """The exact friction step at (F, z): returns (mode, z', tau).

    Contacts with z_R != 0 slip in the direction of z_R.  For the contacts at
    zero relative velocity every stick / slip(+1) / slip(-1) combination is
    tried; a combination is consistent when its stuck contacts need at most
    their static capacity and its slipping ones accelerate in their own
    direction.  ``broken`` maps contacts whose stuck force has just reached
    the capacity to the slip direction that continues it (at that instant
    both modes pass the test; the slipping one is the one that continues).
    With k = K the consistent combination is unique; ValueError otherwise.
    """
    broken = broken or {}
    zR = np.asarray(z, dtype=float)[1:]
    choices = []
    for i in range(chain.n - 1):
        if i in broken:
            choices.append((broken[i],))
        elif chain.K[i] <= 0.0 and chain.k[i] <= 0.0:
            choices.append((1 if zR[i] >= 0 else -1,))  # no friction at all
        elif abs(zR[i]) > zero_tol:
            choices.append((1 if zR[i] > 0 else -1,))
        else:
            choices.append((0, 1, -1))
    good = []
    for mode in itertools.product(*choices):
        zd, tau = chain.derivative(F, z, mode)
        ok = True
        for i in range(chain.n - 1):
            if i in broken or abs(zR[i]) > zero_tol or (chain.K[i] <= 0.0 and chain.k[i] <= 0.0):
                continue
            if mode[i] == 0:
                ok = ok and abs(tau[i]) <= chain.K[i] * (1.0 + 1e-12)
            else:
                ok = ok and mode[i] * zd[1 + i] > 0.0
        if ok:
            good.append((mode, zd, tau))
    if len(good) != 1:
        raise ValueError(f"{len(good)} consistent friction modes (expected exactly one): "
                         f"{[g[0] for g in good]}")
    mode, zd, tau = good[0]
    return np.asarray(mode), zd, tau
