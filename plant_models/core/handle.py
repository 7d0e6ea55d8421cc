"""Python side of the friction core: a handle with named views into the packed buffers.

:class:`Core` packs a :class:`CoreSpec` once into the flat buffers of
:mod:`.layout` and exposes numpy *views* into them with names and units, so
Python code reads and writes the same memory the compiled step works on.
Nothing here runs inside the real-time tick except :meth:`Core.step`, which
is one call into compiled code.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from . import layout as L
from . import entry
from .spec import CoreSpec, Row, Settings, SpecError, Spring  # noqa: F401  (handed on by the package)


@dataclass(frozen=True)
class LawBlocks:
    """A force law and the sizes of its blocks: parameters (``MF_LAW`` [nf], ``MI_LAW`` [ni]),
    data (``DF_LAW`` [ndf]) and states integrated with the core's (``nz``).

    ``checks_reuse``: the plant clears ``FLAG_REUSE`` before a step whenever
    an input the law reads (beyond the state and its parameters) differs
    from the value the previous step's end evaluation used; only then may a
    step start from that evaluation (``Settings.reuse_end_evaluation``).
    Otherwise the core evaluates every step afresh.
    """

    law: entry.ForceLaw
    nf: int = 0
    ni: int = 0
    ndf: int = 0
    nz: int = 0
    checks_reuse: bool = False


class Core:
    """A packed friction core with named views into its buffers.

    Views (numpy arrays sharing the buffers; write inputs, read outputs):

    ``omega`` [n] shaft speeds, ``theta`` [n] angles, ``twist`` [s] spring
    twists, ``act`` [g] actuator states, ``work`` [4+g] energy accounts
    (see :func:`layout.y_offsets`), ``u_torque`` / ``u_torque_rate`` [n],
    ``u_act`` / ``u_act_rate`` [g], ``delta`` [g] relative speeds, ``mu`` [g]
    friction forces, ``cap_static`` / ``cap_kinetic`` [g], ``accel`` [n],
    ``spring_torque`` [s], ``mode`` [g] (``layout.MODE_*``), ``coef_a`` /
    ``coef_b`` [g] and ``coef_x`` [x] (the further entries of rows with more
    than two; writable: call :meth:`mark_coefficients_changed`).
    """

    def __init__(self, spec: CoreSpec, plant_nf: int = 0, plant_ni: int = 0,
                 plant_ndf: int = 0, plant_ndi: int = 0, law: LawBlocks | None = None, act_hold: bool = False):
        spec.validate()
        self.spec = spec
        n, g, s = len(spec.inertia), len(spec.rows), len(spec.springs)
        P = max([len(sp.table) for sp in spec.springs] + [1])
        st = spec.settings
        x = sum(len(r.more) for r in spec.rows)
        self.sizes = L.Sizes(n=n, g=g, s=s, P=P, E=st.event_capacity, plant_nf=plant_nf,
                             plant_ni=plant_ni, plant_ndf=plant_ndf, plant_ndi=plant_ndi, x=x,
                             d=n if spec.dense else 0)
        if act_hold:  # the plant may hold rows' actuators on a ramp before their lag (DF_ACT_HOLD, a clutch fill)
            self.sizes = replace(self.sizes, hold=1)
        if law is not None:
            self.sizes = replace(self.sizes, law=1, law_nf=law.nf, law_ni=law.ni, law_ndf=law.ndf, law_nz=law.nz)
        self.mf, self.mi, self.df, self.di = L.allocate(self.sizes)
        mi = self.mi
        mi[L.H_MAX_EVENTS] = st.max_event_substeps or (2 * g + 4)
        mi[L.H_MAX_ITER] = st.max_solver_iter or (4 * g + 8)
        mi[L.H_MAX_LOCATE] = st.max_locate_iter
        mi[L.H_REUSE] = 1 if st.reuse_end_evaluation else 0
        # the compiled core (compiled or loaded from the cache the first time a Core is built)
        mi[L.H_FN_STEP], mi[L.H_FN_START], mi[L.H_FN_SOLVE] = entry.entry_addresses()
        if law is not None:
            mi[L.H_FN_LAW] = law.law.address
            if not law.checks_reuse:
                # the law's inputs are not among what the end-evaluation reuse compares: evaluate afresh
                mi[L.H_REUSE] = 0
        self._fill_model()
        self.reset()

    # -- packing -----------------------------------------------------------
    def _mfv(self, slot, size):
        return L.view(self.mf, self.mi, slot, size)

    def _miv(self, slot, size):
        return L.view(self.mi, self.mi, slot, size)

    def _dfv(self, slot, size):
        return L.view(self.df, self.mi, slot, size)

    def _div(self, slot, size):
        return L.view(self.di, self.mi, slot, size)

    def _fill_model(self):
        sp, sz = self.spec, self.sizes
        n, g, s, P = sz.n, sz.g, sz.s, sz.P
        self._mfv(L.MF_INERTIA, n)[:] = sp.inertia
        self._mfv(L.MF_INV_INERTIA, n)[:] = 1.0 / np.asarray(sp.inertia)
        self._mfv(L.MF_DRAG, n)[:] = sp.drag
        rows = sp.rows
        for slot, attr in ((L.MF_COEF_A, "coef_a"), (L.MF_COEF_B, "coef_b"), (L.MF_ACT_LAG, "act_lag_s"),
                           (L.MF_ACT_GAIN, "act_gain"), (L.MF_ACT_PRELOAD, "act_preload"),
                           (L.MF_GAIN_STATIC, "gain_static"), (L.MF_GAIN_KINETIC, "gain_kinetic"),
                           (L.MF_STRIBECK_VS, "stribeck_velocity"), (L.MF_STRIBECK_ALPHA, "stribeck_exponent"),
                           (L.MF_ROW_VISC, "viscous"), (L.MF_KIN_SHIFT, "kinematic_shift_time"),
                           (L.MF_KIN_CAP, "kinematic_capacity"), (L.MF_KIN_THRESH, "kinematic_threshold")):
            self._mfv(slot, g)[:] = [getattr(r, attr) for r in rows]
        # a kinematic row's capacity is set by its phase: u is K itself, K = k, no lag, no Stribeck
        for i, r in enumerate(rows):
            if r.kinematic:
                for slot, v in ((L.MF_ACT_LAG, 0.0), (L.MF_ACT_GAIN, 1.0), (L.MF_ACT_PRELOAD, 0.0),
                                (L.MF_GAIN_STATIC, 1.0), (L.MF_GAIN_KINETIC, 1.0), (L.MF_STRIBECK_VS, 0.0)):
                    self._mfv(slot, g)[i] = v
        self.mi[L.H_NKIN] = sum(1 for r in rows if r.kinematic)
        self._fill_rows_entries()
        if sp.dense:
            M = sp.mass_matrix()
            self._mfv(L.MF_MASS, n * n)[:] = M.ravel()
            self._mfv(L.MF_MINV, n * n)[:] = np.linalg.inv(M).ravel()
            self._mfv(L.MF_DRAGM, n * n)[:] = sp.damping_matrix().ravel()
        sps = sp.springs
        self._miv(L.MI_SPRING_A, s)[:] = [x.shaft_a for x in sps]
        self._miv(L.MI_SPRING_B, s)[:] = [x.shaft_b for x in sps]
        self._miv(L.MI_SPRING_NPTS, s)[:] = [len(x.table) for x in sps]
        self._mfv(L.MF_SPRING_CA, s)[:] = [x.factor_a for x in sps]
        self._mfv(L.MF_SPRING_CB, s)[:] = [x.factor_b for x in sps]
        self._mfv(L.MF_SPRING_K, s)[:] = [x.stiffness for x in sps]
        self._mfv(L.MF_SPRING_C, s)[:] = [x.damping for x in sps]
        tx = self._mfv(L.MF_SPRING_TX, s * P)
        ty = self._mfv(L.MF_SPRING_TY, s * P)
        for j, x in enumerate(sps):
            for q, (a, b) in enumerate(x.table):
                tx[j * P + q] = a
                ty[j * P + q] = b
        st = sp.settings
        sets = self._mfv(L.MF_SETTINGS, L.N_SETTINGS)
        sets[L.SET_EVENT_TOL] = st.event_tol
        sets[L.SET_RANK_TOL] = st.rank_tol
        sets[L.SET_REG] = st.regularisation
        sets[L.SET_CYCLE_TOL] = st.cycle_tol
        sets[L.SET_SOLVER_TOL] = st.solver_tol
        sets[L.SET_BREAK_MARGIN] = st.break_margin

    def _fill_rows_entries(self):
        """Row entries: a and b in their slots, further entries in the *_X fields; rows to the housing
        repeat a as b with coefficient 0; freewheels have no friction while they overrun."""
        rows, g = self.spec.rows, self.sizes.g
        ra, rb, cb = self._miv(L.MI_ROW_A, g), self._miv(L.MI_ROW_B, g), self._mfv(L.MF_COEF_B, g)
        nxv, xoff = self._miv(L.MI_ROW_NX, g), self._miv(L.MI_ROW_XOFF, g)
        xs, xc = self._miv(L.MI_ROW_XSHAFT, self.sizes.x), self._mfv(L.MF_COEF_X, self.sizes.x)
        oneway = self._miv(L.MI_ONEWAY, g)
        q = 0
        for i, r in enumerate(rows):
            ra[i] = r.shaft_a
            if r.grounded:
                rb[i], cb[i], nxv[i] = r.shaft_a, 0.0, -1
            else:
                rb[i], nxv[i] = r.shaft_b, len(r.more)
            xoff[i] = q
            for j, c in r.more:
                xs[q], xc[q] = j, c
                q += 1
            if r.one_way:
                oneway[i] = 1
                self._mfv(L.MF_GAIN_KINETIC, g)[i] = 0.0
                self._mfv(L.MF_STRIBECK_VS, g)[i] = 0.0
        self.mi[L.H_HYPER] = sum(1 for i in range(g) if nxv[i] != 0)
        self.mi[L.H_ONEWAY] = sum(1 for r in rows if r.one_way)

    def _make_views(self):
        sz = self.sizes
        n, g, s = sz.n, sz.g, sz.s
        yo = L.y_offsets(n, g, s, sz.law, sz.law_nz)
        y = self._dfv(L.DF_Y, sz.ny)
        self.y = y
        self.omega = y[yo["omega"]:yo["omega"] + n]
        self.theta = y[yo["theta"]:yo["theta"] + n]
        self.twist = y[yo["twist"]:yo["twist"] + s]
        self.act = y[yo["act"]:yo["act"] + g]
        self.work = y[yo["work"]:yo["work"] + 4 + g]
        # with a force law: its work account (J, W_ROW0 + g in the work block), its states, its blocks
        self.law_work = y[yo["work"] + 4 + g:yo["z"]]
        self.law_z = y[yo["z"]:yo["z"] + sz.law_nz]
        self.law_f = self._mfv(L.MF_LAW, sz.law_nf)
        self.law_i = self._miv(L.MI_LAW, sz.law_ni)
        self.law_df = self._dfv(L.DF_LAW, sz.law_ndf)
        self.time = self._dfv(L.DF_TIME, 1)
        self.u_torque = self._dfv(L.DF_U_TAU, n)
        self.u_torque_rate = self._dfv(L.DF_U_TAU_RATE, n)
        self.u_act = self._dfv(L.DF_U_ACT, g)
        self.u_act_rate = self._dfv(L.DF_U_ACT_RATE, g)
        self.act_hold = self._dfv(L.DF_ACT_HOLD, g * sz.hold)  # s into the step (empty without act_hold)
        self.act_ramp = self._dfv(L.DF_ACT_RAMP, g * sz.hold)
        self.delta = self._dfv(L.DF_DELTA, g)
        self.mu = self._dfv(L.DF_MU, g)
        self.cap_static = self._dfv(L.DF_CAP_S, g)
        self.cap_kinetic = self._dfv(L.DF_CAP_K, g)
        self.accel = self._dfv(L.DF_ACCEL, n)
        self.spring_torque = self._dfv(L.DF_SPRING_TQ, s)
        self.coef_a = self._dfv(L.DF_COEF_A, g)
        self.coef_b = self._dfv(L.DF_COEF_B, g)
        self.coef_x = self._dfv(L.DF_COEF_X, sz.x)
        self.mode = self._div(L.DI_MODE, g)
        self.kinematic_phase = self._div(L.DI_KIN_PHASE, g)
        self.drive = self._div(L.DI_DRIVE, g)
        self.drive_accel = self._dfv(L.DF_DRIVE_ACC, g)
        self.counters = self._div(L.DI_COUNTERS, 8)
        self.flags = self._div(L.DI_FLAGS, L.N_FLAGS)
        self.plant_f = self._mfv(L.MF_PLANT, sz.plant_nf)
        self.plant_i = self._miv(L.MI_PLANT, sz.plant_ni)
        self.plant_df = self._dfv(L.DF_PLANT, sz.plant_ndf)
        self.plant_di = self._div(L.DI_PLANT, sz.plant_ndi)

    # -- life cycle ----------------------------------------------------------
    def reset(self) -> None:
        """Zero the data buffers: t = 0, all shafts at rest, all rows free, inputs zero."""
        self.df[:] = 0.0
        self.di[:] = 0
        self._make_views()
        self.coef_a[:] = self._mfv(L.MF_COEF_A, self.sizes.g)
        self.coef_b[:] = self._mfv(L.MF_COEF_B, self.sizes.g)
        self.coef_x[:] = self._mfv(L.MF_COEF_X, self.sizes.x)
        self._events_read = 0
        self._events_lost = 0

    def start(self, engaged: list[int] | tuple[int, ...] = ()) -> int:
        """Engage the given rows at the current state and compute consistent outputs.

        Set ``omega`` (the root shaft of each engaged group, i.e. its lowest
        index, is kept; the others are derived from it), ``act`` and the inputs
        first.  Returns the status word.
        """
        self.mode[:] = L.MODE_FREE
        for i in engaged:
            self.mode[i] = L.MODE_STUCK
        return int(entry.core_start(self.mf, self.mi, self.df, self.di))

    def step(self, dt: float) -> int:
        """One fixed step of dt seconds.  Returns the status word.  Called in the real-time loop."""
        return entry.step_arrays(self.mf, self.mi, self.df, self.di, dt)

    def run(self, dt: float, steps: int) -> int:
        """``steps`` steps with the inputs held, in one compiled call."""
        return int(entry.core_run(self.mf, self.mi, self.df, self.di, np.full(steps, dt)))

    def mark_coefficients_changed(self) -> None:
        """Tell the core that ``coef_a`` / ``coef_b`` were changed (e.g. a new gear)."""
        self.flags[L.FLAG_COEF_DIRTY] = 1

    # -- state ---------------------------------------------------------------
    def get_state(self) -> tuple[np.ndarray, np.ndarray]:
        """A copy of the complete data (state, caches, counters); restoring it resumes bit-exactly."""
        return self.df.copy(), self.di.copy()

    def set_state(self, state: tuple[np.ndarray, np.ndarray]) -> None:
        df, di = state
        if df.shape != self.df.shape or di.shape != self.di.shape:
            raise ValueError("state does not belong to this core")
        self.df[:] = df
        self.di[:] = di
        # events logged before the restored point count as read; later ones are reported again
        self._events_read = int(self.counters[L.CNT_EVENTS])

    @property
    def stuck(self) -> np.ndarray:
        return self.mode == L.MODE_STUCK

    @property
    def status(self) -> int:
        return int(self.flags[L.FLAG_STATUS])

    def kinetic_energy(self) -> float:
        if self.spec.dense:
            return float(0.5 * self.omega @ self.spec.mass_matrix() @ self.omega)
        return float(0.5 * np.dot(self.spec.inertia, self.omega ** 2))

    def row_matrix(self) -> np.ndarray:
        """The rows with their current coefficients as a dense g x n matrix R."""
        R = np.zeros((self.sizes.g, self.sizes.n))
        for i, r in enumerate(self.spec.rows):
            R[i, r.shaft_a] += self.coef_a[i]
            if not r.grounded:
                R[i, r.shaft_b] += self.coef_b[i]
            q0 = int(self._miv(L.MI_ROW_XOFF, self.sizes.g)[i])
            for q, (j, _) in enumerate(r.more):
                R[i, j] += self.coef_x[q0 + q]
        return R

    def spring_energy(self) -> float:
        """Elastic energy stored in the springs, J."""
        e = 0.0
        for j, sp in enumerate(self.spec.springs):
            phi = float(self.twist[j])
            if not sp.table:
                e += 0.5 * sp.stiffness * phi * phi
            else:
                e += _pwl_integral(sp.table, phi)
        return e

    def new_events(self) -> list[tuple[float, int, int]]:
        """Events logged since the last call, as (time s, row, kind)."""
        E = self.sizes.E
        total = int(self.counters[L.CNT_EVENTS])
        first = max(self._events_read, total - E)
        times = self._dfv(L.DF_EV_TIME, E)
        rows = self._div(L.DI_EV_ROW, E)
        kinds = self._div(L.DI_EV_KIND, E)
        out = [(float(times[q % E]), int(rows[q % E]), int(kinds[q % E])) for q in range(first, total)]
        self._events_lost += first - self._events_read
        self._events_read = total
        return out

    def mark_events_read(self) -> None:
        """Count every event logged so far as read (a compiled reader, :mod:`plant_models.offline`, took them)."""
        self._events_read = int(self.counters[L.CNT_EVENTS])

    @property
    def events_lost(self) -> int:
        """Events overwritten in the ring log (capacity ``Settings.event_capacity``) before
        :meth:`new_events` read them, counted since the last :meth:`reset`."""
        return self._events_lost


def _pwl_integral(table, phi: float) -> float:
    """Integral from 0 to phi of a piecewise-linear characteristic (linear extension at the ends)."""
    xs = [p[0] for p in table]
    ys = [p[1] for p in table]

    def f(x):
        if x <= xs[0]:
            k = 1
        elif x >= xs[-1]:
            k = len(xs) - 1
        else:
            k = next(i for i in range(1, len(xs)) if x <= xs[i])
        x0, x1, y0, y1 = xs[k - 1], xs[k], ys[k - 1], ys[k]
        return y0 + (y1 - y0) / (x1 - x0) * (x - x0)

    pts = sorted({0.0, phi, *[x for x in xs if min(0.0, phi) < x < max(0.0, phi)]})
    total = 0.0
    for a, b in zip(pts, pts[1:]):
        total += 0.5 * (f(a) + f(b)) * (b - a)
    return total if phi >= 0 else -total
