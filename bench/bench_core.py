"""Speed and accuracy of the friction core, against NumPy and scipy alternatives in the same run.

Sections of the report (``bench/results/core.md``):

1. Per-step cost inside a compiled loop, timed per step with the CPU's
   time-stamp counter (``llvm.readcyclecounter``, calibrated against
   ``time.perf_counter_ns``): the bare ``core_step`` on a Powershift in gear
   (3 stuck + 5 open rows, inputs held), and the plants' compiled steps
   (inputs mapped, core step with its events, outputs written) through their
   shift scenarios.  Median, p90, p99, p99.9, max.
2. Real-time factor: 10 s of the Powershift swaps scenario at 1 kHz in one
   compiled loop (Biagiotti & Zanasi reports 10 s of its DCT in 0.98 s in Simulink).
3. Per call from Python: ``plant.step(dt)`` and ``core_step(...)`` timed
   call by call with ``perf_counter_ns`` (the timer's own cost subtracted).
4. Alternatives on the Powershift single swap of ``tests/test_core_accuracy.py``
   (case c, 1 s): the compiled core, the same method in plain NumPy
   (``bench/core_numpy.py``), and what a Python user would otherwise write,
   scipy's ``solve_ivp`` with tanh-regularised friction.  Each with its
   wall time per simulated step and its error against the exact
   event-driven reference (``tests/reference_solutions.py``).
5. Accuracy of the core against the reference for the three scenarios of
   ``tests/test_core_accuracy.py`` at dt = 4, 2, 1, 0.5 ms, with the observed
   order and the event-time errors (the numbers quoted in docs/method.md).

Run: ``.venv/bin/python bench/bench_core.py [--repeat N] [--write]``
(``--write`` replaces bench/results/core.md).  Absolute times depend on the
machine and its load; compare the ratios measured in the same run.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic
from scipy.integrate import solve_ivp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from plant_models.core import entry as fc  # noqa: E402
from plant_models.core import layout as L  # noqa: E402
from _host import host_line  # noqa: E402  (bench/ is first on the path)

BAR = 1.0e5  # Pa per bar

# The other imports are made where they are used, so that --core-only also runs
# against an older checkout of plant_models (put first on PYTHONPATH).


# ----------------------------------------------------------------------------
# a cycle counter inside compiled code
# ----------------------------------------------------------------------------
@intrinsic
def _cycles(typingctx):
    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.IntType(64), [])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.readcyclecounter")
        return builder.call(fn, [])
    return types.int64(), codegen


@njit
def _read_cycles():
    return _cycles()


@njit
def _time_core_steps(mf, mi, df, di, dt, cycles):
    st = 0
    for k in range(cycles.shape[0]):
        c0 = _cycles()
        st |= fc.step_arrays(mf, mi, df, di, dt)
        cycles[k] = _cycles() - c0
    return st


@njit
def _time_plant_steps(step, mf, mi, df, di, U, R, dt, off, n_in, cycles):
    """Write step k's inputs (values and rates) into the plant block, then time the plant step."""
    st = 0
    for k in range(U.shape[0]):
        for j in range(n_in):
            df[off + j] = U[k, j]
            df[off + n_in + j] = R[k, j]
        c0 = _cycles()
        st |= step(mf, mi, df, di, dt)
        cycles[k] = _cycles() - c0
    return st


def ns_per_cycle() -> float:
    _read_cycles()
    best = []
    for _ in range(3):
        t0, c0 = time.perf_counter_ns(), _read_cycles()
        time.sleep(0.2)
        t1, c1 = time.perf_counter_ns(), _read_cycles()
        best.append((t1 - t0) / (c1 - c0))
    return float(np.median(best))


def stats(us: np.ndarray) -> dict:
    return {"p10": float(np.percentile(us, 10)), "median": float(np.median(us)), "p90": float(np.percentile(us, 90)),
            "p99": float(np.percentile(us, 99)), "p99.9": float(np.percentile(us, 99.9)), "max": float(us.max())}


def scenario_tables(plant, name: str, steps: int):
    """Inputs (values, rates) of every step of a scenario, run past its end if steps asks for more."""
    from server.offline.scenario import load_scenario

    comp = load_scenario(ROOT / "scenarios" / f"{name}.toml").compile(plant)
    U = np.empty((steps, plant.n_in))
    R = np.empty((steps, plant.n_in))
    for k in range(steps):
        u, r = comp.inputs_at(k)
        U[k], R[k] = u, r
    return comp, U, R


# ----------------------------------------------------------------------------
# 1-3: speed
# ----------------------------------------------------------------------------
def powershift_in_gear():
    from plant_models.registry import load_plant

    plant = load_plant("powershift")
    u = {f"p_c{i + 1}": (16.0 if i in (0, 2, 5) else 0.0) for i in range(8)}
    u.update(engine_torque=100.0, load_torque=500.0)
    plant.reset(u)
    assert list(plant.core.mode == L.MODE_STUCK) == [True, False, True, False, False, True, False, False]
    return plant


def powershift_core_in_gear():
    """The Powershift network as a bare core (no plant layer), clutches 1, 3, 6 engaged at 16 bar.

    Built from ``CoreSpec``/``Core`` only, so the same measurement runs against
    older versions of the core (``--core-only`` with another checkout first on
    PYTHONPATH) for before/after comparisons.
    """
    from plant_models.config import ConfigReader, load_toml, resolve_config
    from plant_models.core import Core
    from plant_models.plants.powershift import PowershiftPlant
    from plant_models.readers.powershift import read_powershift

    path = resolve_config("powershift")
    spec = PowershiftPlant.build_spec(read_powershift(ConfigReader(load_toml(path), str(path))))
    c = Core(spec)
    c.omega[0] = 80.0
    c.u_act[:] = np.array([16, 0, 16, 0, 0, 16, 0, 0]) * BAR
    c.act[:] = c.u_act
    c.u_torque[:] = [100.0, 0.0, 0.0, 500.0]
    c.start([0, 2, 5])
    return c


def core_in_gear(repeat: int, npc: float) -> tuple[str, dict, str]:
    """core_step on the bare Powershift core in gear, inputs held, per step."""
    c = powershift_core_in_gear()
    cyc = np.empty(20000, dtype=np.int64)
    _time_core_steps(c.mf, c.mi, c.df, c.di, 1e-3, cyc[:100])
    samples = []
    for _ in range(repeat):
        c = powershift_core_in_gear()
        _time_core_steps(c.mf, c.mi, c.df, c.di, 1e-3, cyc)
        samples.append(cyc * npc / 1000.0)
    return ("core_step, Powershift in gear (3 stuck + 5 open rows), inputs held", stats(np.concatenate(samples)),
            f"{repeat} x 20000 steps")


def compiled_loop(repeat: int, npc: float) -> list[tuple[str, dict, str]]:
    from plant_models.plants.chain import chain_step
    from plant_models.plants.dct import dct_step
    from plant_models.plants.powershift import powershift_step
    from plant_models.plants.transmission_kernel import transmission_step
    from plant_models.registry import load_plant

    rows = [core_in_gear(repeat, npc)]
    # plant steps through scenarios (a config of a plant kind that has one here as well: the label names it)
    for kind, scen, step_fn, steps in (("powershift", "powershift_swaps", powershift_step, 3500),
                                       ("dct", "dct_upshift", dct_step, 4000),
                                       ("zf8hp", "zf8hp_shifts", transmission_step, 15000),
                                       ("zf8hp_car_hydraulics", "zf8hp_car_drive", transmission_step, 10000),
                                       ("chain", "chain_4mass", chain_step, 4000)):
        samples = []
        events = 0
        for _ in range(repeat):
            plant = load_plant(kind)
            comp, U, R = scenario_tables(plant, scen, steps)
            plant.reset(comp.initial_inputs())
            c = plant.core
            off = int(c.mi[L.DF_PLANT])
            cyc = np.empty(steps, dtype=np.int64)
            st = _time_plant_steps(step_fn, c.mf, c.mi, c.df, c.di, U, R, comp.dt, off, plant.n_in, cyc)
            assert st & (L.ST_BAD_INPUT | L.ST_NONFINITE) == 0
            events = int(c.counters[L.CNT_EVENTS])
            samples.append(cyc * npc / 1000.0)
        label = step_fn.__name__ if kind in ("powershift", "dct") else f"{step_fn.__name__} {kind}"
        rows.append((f"{label}, {scen} scenario (inputs, core, outputs)", stats(np.concatenate(samples)),
                     f"{repeat} x {steps} steps, {events} events"))
    return rows


def realtime_factor(repeat: int) -> dict:
    """10 s of the Powershift swaps scenario (held after its 3.5 s) at 1 kHz in one compiled loop."""
    from plant_models.plants.powershift import powershift_step
    from plant_models.registry import load_plant

    steps = 10000
    walls = []
    for _ in range(repeat):
        plant = load_plant("powershift")
        comp, U, R = scenario_tables(plant, "powershift_swaps", steps)
        plant.reset(comp.initial_inputs())
        c = plant.core
        cyc = np.empty(steps, dtype=np.int64)
        off = int(c.mi[L.DF_PLANT])
        t0 = time.perf_counter()
        _time_plant_steps(powershift_step, c.mf, c.mi, c.df, c.di, U, R, comp.dt, off, plant.n_in, cyc)
        walls.append(time.perf_counter() - t0)
    wall = float(np.median(walls))
    return {"wall_ms": wall * 1e3, "factor": 10.0 / wall, "events": int(c.counters[L.CNT_EVENTS])}


def python_calls(repeat: int) -> list[tuple[str, dict, str]]:
    rows = []
    n = 20000
    pc = time.perf_counter_ns
    empty = np.empty(n, dtype=np.int64)
    for k in range(n):
        t0 = pc()
        empty[k] = pc() - t0
    overhead = float(np.median(empty))
    for label in ("plant.step(dt), Powershift in gear", "core_step(mf, mi, df, di, dt), same state"):
        samples = []
        for _ in range(repeat):
            plant = powershift_in_gear()
            c = plant.core
            ns = np.empty(n, dtype=np.int64)
            if label.startswith("plant"):
                step = plant.step
                for k in range(n):
                    t0 = pc()
                    step(1e-3)
                    ns[k] = pc() - t0
            else:
                step = fc.step_arrays
                mf, mi, df, di = c.mf, c.mi, c.df, c.di
                for k in range(n):
                    t0 = pc()
                    step(mf, mi, df, di, 1e-3)
                    ns[k] = pc() - t0
            samples.append((ns - overhead) / 1000.0)
        rows.append((label, stats(np.concatenate(samples)), f"{repeat} x {n} calls, timer cost {overhead:.0f} ns "
                     "subtracted"))
    return rows


# ----------------------------------------------------------------------------
# 4: alternatives on the Powershift single swap
# ----------------------------------------------------------------------------
def run_numpy_core(dt: float, T: float):
    from core_numpy import NumpyCore
    from test_core_accuracy import C_ENGINE, C_LOAD, _c_commands, _c_plant

    plant = _c_plant()
    nc = NumpyCore(plant.core.spec)
    nc.w[:] = plant.core.omega
    nc.x[:] = plant.core.act
    nc.stuck[:] = plant.core.mode == L.MODE_STUCK
    cmds = _c_commands()
    tq = np.array([C_ENGINE, 0.0, 0.0, C_LOAD])
    n = int(round(T / dt))
    W = np.empty((n + 1, 4))
    W[0] = nc.w
    U = np.array([[cmd(k * dt) for cmd in cmds] for k in range(n + 1)])
    t0 = time.perf_counter()
    for k in range(n):
        nc.set_inputs(tq, np.zeros(4), U[k], (U[k + 1] - U[k]) / dt)
        nc.step(dt)
        W[k + 1] = nc.w
    return W, time.perf_counter() - t0, nc.events


def run_tanh_ivp(v_eps: float, T: float, dt: float, rtol: float):
    """What a Python user would write: scipy solve_ivp with tanh-regularised friction.

    Coulomb force -k tanh(delta / v_eps) with the clutch's kinetic amplitude
    (a smooth law cannot hold a static capacity K > k), the pressure lag as
    ODE states, LSODA (the law is stiff for small v_eps).
    """
    from test_core_accuracy import C_ENGINE, C_LOAD, _c_commands, _c_plant

    plant = _c_plant()
    spec = plant.core.spec
    n, g = len(spec.inertia), len(spec.rows)
    R = np.zeros((g, n))
    for i, r in enumerate(spec.rows):
        R[i, r.shaft_a] += r.coef_a
        R[i, r.shaft_b] += r.coef_b
    Minv = 1.0 / np.asarray(spec.inertia)
    drag = np.asarray(spec.drag)
    lag = np.array([r.act_lag_s for r in spec.rows])
    gain = np.array([r.act_gain for r in spec.rows])
    pre = np.array([r.act_preload for r in spec.rows])
    gk = np.array([r.gain_kinetic for r in spec.rows])
    visc = np.array([r.viscous for r in spec.rows])
    cmds = _c_commands()
    tq = np.array([C_ENGINE, 0.0, 0.0, C_LOAD])

    def rhs(t, y):
        w, x = y[:n], y[n:]
        k = gk * np.maximum(gain * x - pre, 0.0)
        d = R @ w
        mu = -k * np.tanh(d / v_eps) - visc * d
        dw = Minv * (tq - drag * w + R.T @ mu)
        u = np.array([cmd(t) for cmd in cmds])
        return np.concatenate([dw, (u - x) / lag])

    y0 = np.concatenate([plant.core.omega, plant.core.act])
    t_eval = np.arange(int(round(T / dt)) + 1) * dt
    t0 = time.perf_counter()
    sol = solve_ivp(rhs, (0.0, T), y0, method="LSODA", rtol=rtol, atol=1e-9, t_eval=t_eval)
    wall = time.perf_counter() - t0
    return sol.y[:n].T, wall, sol.nfev


def shift_inputs(plant, dt: float, n: int):
    """Plant input tables (values, rates per step) of the single swap, case c."""
    from test_core_accuracy import C_ENGINE, C_LOAD, _c_commands

    cmds = _c_commands()
    P = np.array([[cmd(k * dt) / BAR for cmd in cmds] for k in range(n + 1)])
    U = np.zeros((n, plant.n_in))
    R = np.zeros((n, plant.n_in))
    for i in range(8):
        U[:, plant.input_index(f"p_c{i + 1}")] = P[:-1, i]
        R[:, plant.input_index(f"p_c{i + 1}")] = (P[1:, i] - P[:-1, i]) / dt
    U[:, plant.input_index("engine_torque")] = C_ENGINE
    U[:, plant.input_index("load_torque")] = C_LOAD
    return U, R


def alternatives(repeat: int) -> list[dict]:
    from plant_models.plants.powershift import powershift_step
    from test_core_accuracy import _c_plant, event_errors, run_shift, shift_reference, trajectory_error

    ref = shift_reference()
    dt, T = 1e-3, 1.0
    n = int(round(T / dt))
    out = []
    # the compiled core: the whole run in one compiled loop (inputs precomputed, as for the others)
    walls = []
    for _ in range(repeat):
        plant = _c_plant()
        U, R = shift_inputs(plant, dt, n)
        c = plant.core
        cyc = np.empty(n, dtype=np.int64)
        t0 = time.perf_counter()
        _time_plant_steps(powershift_step, c.mf, c.mi, c.df, c.di, U, R, dt, int(c.mi[L.DF_PLANT]), plant.n_in, cyc)
        walls.append(time.perf_counter() - t0)
    W, ev = run_shift(dt, T)  # the same numerics, stepped from Python to record the trajectory
    out.append(dict(name="compiled core (powershift_step in a compiled loop)", wall=float(np.median(walls)),
                    err=trajectory_error(W, dt, ref), ev=max(event_errors(ev, ref)),
                    note="exact stick/slip, events located"))
    walls = []
    for _ in range(max(1, repeat // 2)):
        W, wall, events = run_numpy_core(dt, T)
        walls.append(wall)
    same = [(r, k) for _, r, k in events] == [(r, k) for _, r, k in ref.events]
    ev_err = max(abs(a[0] - b[0]) for a, b in zip(events, ref.events)) if same else math.nan
    out.append(dict(name="the same method in plain NumPy (bench/core_numpy.py)", wall=float(np.median(walls)),
                    err=trajectory_error(W, dt, ref), ev=ev_err, note="same algorithm, interpreted"))
    for v_eps in (1e-2, 1e-4):
        W, wall, nfev = run_tanh_ivp(v_eps, T, dt, 1e-6)
        out.append(dict(name=f"scipy solve_ivp (LSODA, rtol 1e-6), tanh friction, v_eps = {v_eps:g} m/s",
                        wall=wall, err=trajectory_error(W, dt, ref), ev=None,
                        note=f"{nfev} right-hand-side calls; no static friction (K = k); stuck clutches creep"))
    return out


# ----------------------------------------------------------------------------
# 5: accuracy against the reference
# ----------------------------------------------------------------------------
def accuracy() -> list[dict]:
    from references.reference_solutions import CHAIN4_V0, ReferenceSolver, chain4_network
    from test_core_accuracy import (engagement_reference, event_errors, orders, run_chain4, run_engagement,
                                    run_shift, shift_reference, trajectory_error)

    rows = []
    refs = {"a": engagement_reference(),
            "b": ReferenceSolver(chain4_network(), rtol=1e-13, atol=1e-12).simulate(10.0, CHAIN4_V0),
            "c": shift_reference()}
    runs = {"a": run_engagement, "b": run_chain4, "c": run_shift}
    names = {"a": "(a) two-inertia engagement, pressure ramp through a lag, 1.5 s",
             "b": "(b) Zanasi, Sandoni & Morselli 4-mass chain, sinusoidal forces (first-order hold), 10 s",
             "c": "(c) Powershift single swap 1 -> 2, 1 s"}
    for key in ("a", "b", "c"):
        errs, evs = [], []
        for dt in (4e-3, 2e-3, 1e-3, 5e-4):
            W, ev = runs[key](dt)
            errs.append(trajectory_error(W, dt, refs[key]))
            evs.append(max(event_errors(ev, refs[key])))
        rows.append(dict(name=names[key], errs=errs, orders=orders(errs), evs=evs, n_events=len(refs[key].events)))
    return rows


# ----------------------------------------------------------------------------
# report
# ----------------------------------------------------------------------------
def report(repeat: int) -> str:
    npc = ns_per_cycle()
    lines = []
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines.append(f"# {platform.machine()}, {platform.processor() or 'cpu'}, Python {platform.python_version()}, "
                 f"numpy {np.__version__}; load average {load:.1f} at the start; {npc:.3f} ns per counter tick")
    lines.append("")
    lines.append("## 1. Per step inside a compiled loop (time-stamp counter per step)")
    lines.append("")
    lines.append("| what | p10 us | median us | p90 | p99 | p99.9 | max | samples |")
    lines.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, s, note in compiled_loop(repeat, npc):
        lines.append(f"| {name} | {s['p10']:.3f} | {s['median']:.3f} | {s['p90']:.3f} | {s['p99']:.3f} | "
                     f"{s['p99.9']:.2f} | {s['max']:.1f} | {note} |")
    lines.append("")
    rt = realtime_factor(repeat)
    lines.append("## 2. Real-time factor")
    lines.append("")
    lines.append(f"10 s of `powershift_swaps` (3.5 s of swaps, then held) at dt = 1 ms, {rt['events']} events, in one "
                 f"compiled loop: **{rt['wall_ms']:.1f} ms wall, {rt['factor']:.0f}x faster than real time** "
                 "(Biagiotti & Zanasi: 10 s of its DCT in 0.98 s in Simulink, about 10x).")
    lines.append("")
    lines.append("## 3. Per call from Python")
    lines.append("")
    lines.append("| call | p10 us | median us | p90 | p99 | p99.9 | max | samples |")
    lines.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, s, note in python_calls(repeat):
        lines.append(f"| {name} | {s['p10']:.3f} | {s['median']:.3f} | {s['p90']:.3f} | {s['p99']:.3f} | "
                     f"{s['p99.9']:.2f} | {s['max']:.1f} | {note} |")
    lines.append("")
    lines.append("## 4. Alternatives on the Powershift single swap (case c, 1 s, dt = 1 ms)")
    lines.append("")
    lines.append("Error: max |w - w_ref| over all axles and all 1000 step ends, rad/s (axle 1 runs at ~100 rad/s); "
                 "event error: max |t - t_ref| over the breakaway of clutch 1 and the stick of clutch 2.")
    lines.append("")
    lines.append("| implementation | wall for 1 s | per step us | vs compiled loop | max speed error rad/s | "
                 "event error s | note |")
    lines.append("| --- | --- | --- | --- | --- | --- | --- |")
    alts = alternatives(repeat)
    base = alts[0]["wall"]
    for a in alts:
        ev = "-" if a["ev"] is None else f"{a['ev']:.1e}"
        lines.append(f"| {a['name']} | {a['wall'] * 1e3:.1f} ms | {a['wall'] * 1e3:.2f} | {a['wall'] / base:.0f}x | "
                     f"{a['err']:.1e} | {ev} | {a['note']} |")
    lines.append("")
    lines.append("## 5. Accuracy against the event-driven reference")
    lines.append("")
    lines.append("Max speed error over all step ends (rad/s, m/s for the chain) and max event-time error (s), "
                 "with the observed order log2(e(2 dt) / e(dt)).")
    lines.append("")
    lines.append("| scenario | events | dt = 4 ms | 2 ms | 1 ms | 0.5 ms | orders | event error at 4 / 2 / 1 / 0.5 ms |")
    lines.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in accuracy():
        e = " | ".join(f"{x:.2e}" for x in r["errs"])
        o = ", ".join(f"{x:.2f}" for x in r["orders"])
        ev = " / ".join(f"{x:.1e}" for x in r["evs"])
        lines.append(f"| {r['name']} | {r['n_events']} | {e} | {o} | {ev} |")
    lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs per measurement (default 5)")
    ap.add_argument("--write", action="store_true", help="write bench/results/core.md")
    ap.add_argument("--core-only", action="store_true",
                    help="only the bare core step in gear (runs against older cores too)")
    args = ap.parse_args(argv)
    if args.core_only:
        name, s, note = core_in_gear(args.repeat, ns_per_cycle())
        print(f"{name}: p10 {s['p10']:.3f} us, median {s['median']:.3f}, p90 {s['p90']:.3f}, p99 {s['p99']:.3f}, "
              f"max {s['max']:.1f} ({note})")
        return 0
    text = report(args.repeat)
    print(text)
    if args.write:
        out = ROOT / "bench" / "results" / "core.md"
        header = out.read_text().split("<!-- results -->")[0] if out.exists() else ""
        out.write_text(header + "<!-- results -->\n\n" + text + "\n")
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
