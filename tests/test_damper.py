"""Clutch with torsional damper-spring (Zanasi, Sandoni & Morselli, section 5) against an exact solution.

The reference below is independent of the friction core: it integrates the
paper's three equations with scipy's DOP853 at tight tolerances, between
events located by solve_ivp (a slipping friction reaching zero relative
speed, a stuck friction's torque reaching its capacity) and between the
kinks of the input profiles, and at every event it finds the new friction
mode by brute force: every stick/slip(+)/slip(-) combination of the frictions
at zero relative speed is tried, and the one consistent combination (stuck
torques within capacity, slipping ones accelerating in their own direction)
is taken.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from plant_models.core import layout as L
from plant_models.config import ConfigError, ConfigReader
from plant_models.plants.damper import DEG, DamperClutchPlant, DamperParams
from plant_models.readers.damper import read_damper
from plant_models.registry import load_plant
from server.offline.scenario import load_scenario

ROWS = ((0, 1), (1, 2))  # clutch, damper friction
SCENARIO = "damper_clutch_engagement"


def run_scenario(plant, scenario=SCENARIO, dt=1e-3):
    sc = load_scenario(scenario).compile(plant, dt)
    plant.reset(sc.initial_inputs())
    t = np.arange(sc.n_steps + 1) * sc.dt
    y = np.empty((sc.n_steps + 1, plant.n_out))
    y[0] = plant.y
    status = 0
    for k in range(sc.n_steps):
        sc.apply(plant, k)
        status |= plant.step(sc.dt)
        y[k + 1] = plant.y
    assert status == 0, L.status_names(status)
    return t, y, plant.new_events()


def col(plant, y, name):
    return y[:, plant.output_index(name)]


# --------------------------------------------------------------------------
# the independent reference
# --------------------------------------------------------------------------
class Reference:
    """Exact (event-driven, tight-tolerance) solution of the equations of Zanasi, Sandoni & Morselli, section 5."""

    def __init__(self, p: DamperParams, engine_torque, clutch_capacity, breakpoints, load=0.0):
        self.J = np.array(p.inertia)
        self.b = np.array(p.drag)
        self.k23 = p.damper_friction_N_m
        self.kd = p.damper_stiffness_N_m_per_rad
        self.cd = p.damper_damping_N_m_s_per_rad
        self.table = p.damper_characteristic
        self.C1 = engine_torque
        self.k12 = clutch_capacity
        self.load = load
        self.breakpoints = breakpoints
        assert p.clutch_static_to_kinetic == 1.0 and p.damper_static_to_kinetic == 1.0

    def phi_e(self, th):
        if not self.table:
            return self.kd * th
        xs = [q[0] for q in self.table]
        ys = [q[1] for q in self.table]
        k = 1 if th <= xs[0] else (len(xs) - 1 if th >= xs[-1] else next(i for i in range(1, len(xs)) if th <= xs[i]))
        return ys[k - 1] + (ys[k] - ys[k - 1]) / (xs[k] - xs[k - 1]) * (th - xs[k - 1])

    def caps(self, t):
        return np.array([self.k12(t), self.k23])

    def free_force(self, t, y, mode):
        """Torques on the shafts without the stuck frictions' constraint torques."""
        w, th = y[:3], y[3]
        phi = self.phi_e(th) + self.cd * (w[1] - w[2])
        f = np.array([self.C1(t) - self.b[0] * w[0], -self.b[1] * w[1] - phi, -self.load - self.b[2] * w[2] + phi])
        caps = self.caps(t)
        for i, (a, c) in enumerate(ROWS):
            if mode[i] != 0:  # slipping in direction mode[i]: friction torque k*dir from a to c
                f[a] -= caps[i] * mode[i]
                f[c] += caps[i] * mode[i]
        return f

    def accel(self, t, y, mode):
        """(accelerations, constraint torques of the stuck rows): M w' = f + R_s^T lam, R_s w' = 0."""
        f = self.free_force(t, y, mode)
        stuck = [i for i in range(2) if mode[i] == 0]
        lam = np.zeros(2)
        if stuck:
            R = np.zeros((len(stuck), 3))
            for r, i in enumerate(stuck):
                R[r, ROWS[i][0]], R[r, ROWS[i][1]] = 1.0, -1.0
            Minv = np.diag(1.0 / self.J)
            W = R @ Minv @ R.T
            ls = -np.linalg.solve(W, R @ Minv @ f)
            f = f + R.T @ ls
            lam[stuck] = ls
        return f / self.J, lam

    def rhs(self, mode):
        def fn(t, y):
            acc, _ = self.accel(t, y, mode)
            return np.array([acc[0], acc[1], acc[2], y[1] - y[2]])
        return fn

    def solve_mode(self, t, y, broken=None):
        """The consistent friction mode at (t, y) by brute force over the rows at zero relative speed.

        ``broken`` maps rows whose stuck torque just reached the capacity to the slip direction that
        continues their torque (at that instant the stuck and the slipping torque are equal, so
        both modes pass the test; the one that continues past the instant is the slipping one).
        """
        broken = broken or {}
        caps = self.caps(t)
        delta = [y[a] - y[c] for a, c in ROWS]
        choices = []
        for i in range(2):
            if i in broken:
                choices.append((broken[i],))
            elif caps[i] <= 0.0:
                choices.append((1 if delta[i] >= 0 else -1,))  # no friction: 'slipping' with zero torque
            elif abs(delta[i]) > 1e-9:
                choices.append((1 if delta[i] > 0 else -1,))
            else:
                choices.append((0, 1, -1))
        good = []
        for mode in itertools.product(*choices):
            acc, lam = self.accel(t, y, mode)
            ok = True
            for i, (a, c) in enumerate(ROWS):
                if caps[i] <= 0.0 or abs(delta[i]) > 1e-9 or i in broken:
                    continue
                if mode[i] == 0:
                    ok &= abs(lam[i]) <= caps[i] * (1 + 1e-12)
                else:
                    ok &= mode[i] * (acc[a] - acc[c]) > 0.0
            if ok:
                good.append(mode)
        assert len(good) == 1, (t, good)
        return good[0]

    def events_for(self, mode, skip_kink=-1):
        """Mode-change events of the rows, then one event per kink of the damper characteristic
        (so no integration step straddles a kink; the kink just left is skipped)."""
        evs = []
        for i in range(2):
            if mode[i] == 0:
                def g(t, y, i=i, mode=mode):
                    _, lam = self.accel(t, y, mode)
                    return self.caps(t)[i] - abs(lam[i])
                g.direction = -1
            else:
                a, c = ROWS[i]

                def g(t, y, a=a, c=c, i=i):
                    if self.caps(t)[i] <= 0.0:
                        return 1.0
                    return y[a] - y[c]
                g.direction = -mode[i]
            g.terminal = True
            evs.append(g)
        for j, (x, _) in enumerate(self.table):
            def kink(t, y, x=x, j=j):
                return 1.0 if j == skip_kink else y[3] - x
            kink.terminal = True
            evs.append(kink)
        return evs

    def project(self, y, mode):
        """Inelastic sticking: speeds projected onto the stuck constraints keeping the momentum."""
        stuck = [i for i in range(2) if mode[i] == 0]
        if not stuck:
            return y
        R = np.zeros((len(stuck), 3))
        for r, i in enumerate(stuck):
            R[r, ROWS[i][0]], R[r, ROWS[i][1]] = 1.0, -1.0
        Minv = np.diag(1.0 / self.J)
        w = y[:3]
        w = w - Minv @ R.T @ np.linalg.solve(R @ Minv @ R.T, R @ w)
        return np.concatenate([w, y[3:]])

    def solve(self, t_end, y0, rtol=1e-12, atol=1e-12):
        """Returns (list of dense segments, events [(t, row, kind)])."""
        t = 0.0
        y = np.array(y0, dtype=float)
        mode = self.solve_mode(t, y)
        segments, events = [], []
        stops = [b for b in self.breakpoints if 0.0 < b < t_end] + [t_end]
        kink = -1
        while t < t_end - 1e-12:
            t_stop = next(b for b in stops if b > t + 1e-12)
            sol = solve_ivp(self.rhs(mode), (t, t_stop), y, method="DOP853", rtol=rtol, atol=atol,
                            events=self.events_for(mode, kink), dense_output=True)
            assert sol.status >= 0
            segments.append((t, sol.t[-1], sol.sol))
            t = sol.t[-1]
            y = sol.y[:, -1].copy()
            hit = [i for i in range(2) if sol.t_events[i].size]
            kinks = [j for j in range(len(self.table)) if sol.t_events[2 + j].size]
            kink = kinks[0] if kinks else -1
            _, lam = self.accel(t, y, mode)
            broken = {i: (-1 if lam[i] > 0 else 1) for i in hit if mode[i] == 0}
            for i in hit:  # a slipping row reached zero: exactly zero from here
                if mode[i] != 0:
                    trial = list(mode)
                    trial[i] = 0
                    y = self.project(y, trial)
            new = self.solve_mode(t, y, broken)
            y = self.project(y, new)
            for i in range(2):
                if new[i] == 0 and mode[i] != 0:
                    events.append((t, i, "stick"))
                elif mode[i] == 0 and new[i] != 0:
                    events.append((t, i, "breakaway"))
                elif mode[i] != 0 and new[i] == -mode[i] and self.caps(t)[i] > 0 and i in hit:
                    events.append((t, i, "reversal"))
            mode = new
        return segments, events

    @staticmethod
    def sample(segments, times):
        out = np.empty((len(times), 4))
        for k, tk in enumerate(times):
            for a, b, fn in segments:
                if a - 1e-15 <= tk <= b + 1e-15:
                    out[k] = fn(tk)
                    break
        return out


def scenario_reference(p: DamperParams) -> Reference:
    k12 = lambda t: float(np.interp(t, [0.0, 1.0, 1.3, 2.5, 2.8], [0.0, 0.0, 400.0, 400.0, 0.0]))  # noqa: E731
    c1 = lambda t: 300.0 if t >= 0.5 else 0.0  # noqa: E731
    return Reference(p, c1, k12, breakpoints=[0.5, 1.0, 1.3, 2.5, 2.8])


# --------------------------------------------------------------------------
# tests
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def linear_run():
    plant = load_plant("damper")
    t, y, ev = run_scenario(plant)
    ref = scenario_reference(plant.params)
    segs, rev = ref.solve(3.5, [0.0, 0.0, 0.0, 0.0])
    return plant, t, y, ev, ref, segs, rev


def test_config_holds_the_papers_parameters():
    p = load_plant("damper").params
    assert p.inertia == (9.0, 5.0, 13.0) and p.drag == (12.0, 1.0, 7.0) and p.damper_friction_N_m == 50.0


def test_trajectories_match_the_exact_solution(linear_run):
    plant, t, y, ev, ref, segs, _ = linear_run
    exact = Reference.sample(segs, t)
    w = np.column_stack([col(plant, y, n) for n in ("w_engine", "w_disk", "w_transmission")])
    err_w = np.abs(w - exact[:, :3]).max()
    err_twist = np.abs(col(plant, y, "damper_twist") * DEG - exact[:, 3]).max()
    assert err_w < 1e-8, err_w  # rad/s, on speeds up to 20 rad/s
    assert err_twist < 1e-9, err_twist


def test_events_match_the_exact_solution(linear_run):
    plant, t, y, ev, ref, segs, ref_events = linear_run
    core_events = [(e["time"], e["row"], e["type"]) for e in ev]
    assert [(r, k) for _, r, k in core_events] == [(r, k) for _, r, k in ref_events]
    assert max(abs(a[0] - b[0]) for a, b in zip(core_events, ref_events)) < 1e-9
    assert len(core_events) >= 6


def test_the_papers_sequence_of_events(linear_run):
    """C1 drives the engine alone from 0.5 s; from 1 s the clutch pulls the disk and shaft up and the engine
    down; the clutch locks, the damper's friction locks later: all three turn together (paper: about 1.6 s);
    when k12 falls back to zero the engine runs away again."""
    plant, t, y, ev, *_ = linear_run
    we, wd, wt = (col(plant, y, n) for n in ("w_engine", "w_disk", "w_transmission"))
    idle = (t > 0.5) & (t < 1.0)
    assert np.all(we[idle] > 0) and np.all(wd[idle] == 0) and np.all(wt[idle] == 0)
    # the engine follows C1/b1 (1 - exp(-b1 (t - 0.5) / J1)) exactly until the clutch acts
    k = np.argmin(np.abs(t - 1.0))
    assert we[k] == pytest.approx(25.0 * (1 - math.exp(-12.0 * 0.5 / 9.0)), rel=1e-10)
    assert we[np.argmin(np.abs(t - 1.3))] < we[k]  # the clutch brakes the engine
    sync = col(plant, y, "synchronised")
    t_sync = t[np.argmax(sync == 1)]
    assert 1.55 < t_sync < 1.7
    clutch_lock = next(e["time"] for e in ev if e["clutch"] == "clutch" and e["type"] == "stick")
    assert clutch_lock < t_sync
    locked = (t > t_sync) & (t < 2.6)
    assert np.all(we[locked] == wd[locked]) and np.all(wd[locked] == wt[locked])  # exactly, not 1e-16
    assert np.ptp(col(plant, y, "damper_twist")[locked]) == 0.0
    assert we[-1] > 2 * wt[-1]  # clutch open again: the engine runs away


def test_transmission_shaft_is_smoother_than_the_disk(linear_run):
    """Paper: 'w3 is smoother than w2 due to the presence of the torsional damper-spring'."""
    plant, t, y, *_ = linear_run
    win = (t > 1.0) & (t < 1.7)
    acc_d = np.diff(col(plant, y, "w_disk")[win])
    acc_t = np.diff(col(plant, y, "w_transmission")[win])
    assert np.abs(np.diff(acc_t)).max() < 0.5 * np.abs(np.diff(acc_d)).max()


def test_locked_clutch_torque_closed_form(linear_run):
    """While everything turns together, tau_12 balances the engine shaft: C1 - b1 w - J1 w' (static friction)."""
    plant, t, y, *_ = linear_run
    k = np.argmin(np.abs(t - 2.0))
    w = col(plant, y, "w_engine")
    # common acceleration of the locked driveline: (C1 - (b1 + b2 + b3) w) / (J1 + J2 + J3)
    acc = (300.0 - 20.0 * w[k]) / 27.0
    assert col(plant, y, "clutch_torque")[k] == pytest.approx(300.0 - 12.0 * w[k] - 9.0 * acc, rel=1e-10)
    assert abs(col(plant, y, "damper_friction_torque")[k]) < 50.0


def test_energy_balance_closes():
    plant = load_plant("damper")
    run_scenario(plant)
    c = plant.core
    stored = c.kinetic_energy() + c.spring_energy()
    assert stored == pytest.approx(float(np.sum(c.work)), rel=1e-9, abs=1e-6)
    assert c.work[L.W_ROW0] < 0 and c.work[L.W_ROW0 + 1] < 0  # both frictions dissipate


@pytest.fixture(scope="module")
def two_stage_reference():
    plant = load_plant("damper_two_stage")
    ref = scenario_reference(plant.params)
    segs, events = ref.solve(3.5, [0.0, 0.0, 0.0, 0.0])
    return plant, ref, segs, events


def test_piecewise_linear_damper_converges_to_the_exact_solution(two_stage_reference):
    """The core does not stop at the characteristic's kinks: a step that straddles one loses RK4's order
    locally, so the error depends on where the kink falls in the step; it still shrinks fast with dt."""
    plant, ref, segs, ref_events = two_stage_reference
    assert plant.params.damper_characteristic
    errs = []
    for dt in (1e-3, 1.25e-4):
        t, y, ev = run_scenario(plant, dt=dt)
        exact = Reference.sample(segs, t)
        w = np.column_stack([col(plant, y, n) for n in ("w_engine", "w_disk", "w_transmission")])
        errs.append(np.abs(w - exact[:, :3]).max())
        assert [(e["row"], e["type"]) for e in ev] == [(r, k) for _, r, k in ref_events]
        assert max(abs(e["time"] - r[0]) for e, r in zip(ev, ref_events)) < 1e-6
    assert errs[0] < 1e-5 and errs[1] < errs[0] / 20.0, errs
    # the twist goes past the first stage: the characteristic is exercised
    assert np.abs(col(plant, y, "damper_twist")).max() > 3.0


def test_static_to_kinetic_ratio_delays_the_breakaway():
    """A clutch with static limit 1.3 k12 stays locked longer when k12 is ramped down."""
    base = load_plant("damper")
    sticky = DamperClutchPlant(dataclasses.replace(base.params, clutch_static_to_kinetic=1.3))
    times = []
    for plant in (base, sticky):
        _, _, ev = run_scenario(plant)
        times.append(next(e["time"] for e in ev if e["clutch"] == "clutch" and e["type"] == "breakaway"))
    assert times[1] > times[0] + 0.01


@pytest.mark.parametrize("section,key,value,message", [
    ("shafts", "inertia_kg_m2", [9.0, 5.0], "must have 3 entries"),
    ("shafts", "drag_N_m_s_per_rad", [12.0, -1.0, 7.0], "must be >= 0"),
    ("damper", "friction_torque_N_m", -5.0, "must be >= 0"),
    ("damper", "characteristic_deg_N_m", [[0.0, 0.0], [1.0, 10.0]], "give exactly one of"),
    ("clutch", "static_to_kinetic_ratio", 0.5, "must be >= 1.0"),
])
def test_config_errors_name_file_key_and_problem(section, key, value, message):
    from plant_models.config import load_toml, resolve_config

    data = load_toml(resolve_config("damper"))
    data[section][key] = value
    with pytest.raises(ConfigError) as exc:
        read_damper(ConfigReader(data, "damper.toml"))
    assert str(exc.value).startswith("damper.toml: ") and message in str(exc.value)


@pytest.mark.parametrize("points,message", [
    ([[0.0, 0.0], [0.0, 10.0]], "twist must increase strictly"),
    ([[0.0, 0.0], [1.0, -10.0]], "torque must not decrease"),
    ([[0.0, 0.0]], "at least two"),
    ([[0.0, "x"], [1.0, 1.0]], "pair of finite numbers"),
])
def test_characteristic_errors(points, message):
    from plant_models.config import load_toml, resolve_config

    data = load_toml(resolve_config("damper_two_stage"))
    data["damper"]["characteristic_deg_N_m"] = points
    with pytest.raises(ConfigError, match="damper.characteristic_deg_N_m") as exc:
        read_damper(ConfigReader(data, "damper_two_stage.toml"))
    assert message in str(exc.value)


def test_offline_run_and_figures(tmp_path):
    from server.plots import plot_trace
    from server.offline.run import run_offline

    plant = load_plant("damper")
    sc = load_scenario(SCENARIO)
    trace = run_offline(plant, sc.compile(plant))
    assert trace.column("engine_torque_applied")[-1] == 300.0 and trace.column("clutch_capacity_applied")[-1] == 0.0
    files = plot_trace(plant, trace, tmp_path, sc.description)  # the figures chosen for its kind
    assert [f.name for f in files] == ["damper_speeds.png", "damper_torques.png"]
    assert all(f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f.stat().st_size > 20000 for f in files)
