"""Where the 8HP car's step spends its time: force-law evaluations per step, the law's cost per call, the step
with and without the law, same run.

* evaluations per step: the car's law replaced by a counting copy (the same law, plus one increment of a counter
  through a pointer; not cached) cruising locked up in 4th, standing on the brake with the engine idling, through
  ``zf8hp_car_drive``, and through the WLTC's first ``--cycle`` seconds closed by the reference TCU; the core's
  own counters give the events;
* the standing car's step (the WLTC's stops);
* the law's cost per call: the compiled law called through its address (as the core calls it) at the cruising
  state, 10^6 calls, cycle counter around the loop;
* the cruising car's step with its law, with a law that adds nothing (the call and the staging of the law's
  states, without its arithmetic) and without a law (address 0): the network's own cost.

Run: ``PYTHONPATH=. python bench/bench_car_breakdown.py [--repeat N] [--cycle S]``.  Figures depend on the
machine and its load: compare within one run.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
from llvmlite import ir
from numba import cfunc, njit, types
from numba.extending import intrinsic

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

from bench_core import _cycles, _time_plant_steps, ns_per_cycle, scenario_tables, stats  # noqa: E402

from plant_models.core import layout as L  # noqa: E402
from plant_models.core.entry import LAW_SIGNATURE  # noqa: E402
from plant_models.core.jit import call_law_at, raw_f, raw_i  # noqa: E402
from plant_models.powertrain.law import powertrain_forces  # noqa: E402
from plant_models.registry import load_plant  # noqa: E402
from _host import host_line  # noqa: E402  (bench/ is first on the path)

_COUNT = np.zeros(1, dtype=np.int64)  # law evaluations, written by the counting law


@intrinsic
def _int_ptr(typingctx, address):
    sig = types.CPointer(types.int64)(address)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], ir.IntType(64).as_pointer())
    return sig, codegen


_ADDR = int(_COUNT.ctypes.data)


@cfunc(LAW_SIGNATURE, error_model="numpy")
def _counting_law(mf, mi, df, di, s, oy, of):
    p = _int_ptr(_ADDR)
    p[0] += 1
    return powertrain_forces(mf, mi, df, di, s, oy, of)


@cfunc(LAW_SIGNATURE, error_model="numpy")
def _null_law(mf, mi, df, di, s, oy, of):
    return 0.0


@njit
def _time_law(address, mf, mi, df, di, calls):
    rmf, rmi, rdf, rdi = raw_f(mf), raw_i(mi), raw_f(df), raw_i(di)
    oy = mi[L.DF_Y]
    of = mi[L.DF_F]
    acc = 0.0
    c0 = _cycles()
    for k in range(calls):
        acc += call_law_at(address, rmf, rmi, rdf, rdi, 1e-3 * (k & 3) * 0.25, oy, of)
    return _cycles() - c0, acc


def cruising_plant():
    """The car in 4th, locked up, 30 % pedal at 16 m/s (as bench_powertrain.time_car_cruising)."""
    plant = load_plant("zf8hp_car")
    inputs = {f"p_{e}": (12.0 if e in "BDE" else 0.0) for e in "ABCDE"}
    inputs.update(p_lockup=8.0, pedal=0.3)
    plant.reset(inputs)
    plant.start_in_gear("4", 16.0 / 0.33 * 3.15 * plant.gear_ratio("4"))
    c = plant.core
    coords = plant.params.reduction.coordinates
    d = plant.params.description
    c.omega[coords.index(d.member_index("engine"))] = plant.member_speeds()[d.member_index("input")]
    plant.start()
    return plant


def standing_plant():
    """The car standing on the brake in 1st, the engine idling against the stalled converter (the WLTC's
    stops: the reference TCU's initial inputs)."""
    from reference_tcu import ZF8HP_CAR, ReferenceTcu

    plant = load_plant("zf8hp_car")
    plant.reset(ReferenceTcu(ZF8HP_CAR).initial_inputs())
    plant.start()
    return plant


def run_cruise(address: int | None, steps: int, npc: float, standing: bool = False):
    from plant_models.plants.transmission import transmission_step

    plant = standing_plant() if standing else cruising_plant()
    c = plant.core
    if address is not None:
        c.mi[L.H_FN_LAW] = address
    U = np.tile(plant.u.copy(), (steps, 1))
    R = np.zeros_like(U)
    cyc = np.empty(steps, dtype=np.int64)
    _COUNT[0] = 0
    _time_plant_steps(transmission_step, c.mf, c.mi, c.df, c.di, U, R, 1e-3, int(c.mi[L.DF_PLANT]), plant.n_in, cyc)
    return cyc * npc / 1000.0, int(_COUNT[0]) / steps, plant


def counts_drive(steps: int = 16000):
    from plant_models.plants.transmission import transmission_step

    plant = load_plant("zf8hp_car")
    comp, U, R = scenario_tables(plant, "zf8hp_car_drive", steps)
    plant.reset(comp.initial_inputs())
    c = plant.core
    c.mi[L.H_FN_LAW] = _counting_law.address
    cyc = np.empty(steps, dtype=np.int64)
    _COUNT[0] = 0
    _time_plant_steps(transmission_step, c.mf, c.mi, c.df, c.di, U, R, comp.dt, int(c.mi[L.DF_PLANT]), plant.n_in,
                      cyc)
    return int(_COUNT[0]) / steps, int(c.counters[L.CNT_EVENTS])


def counts_cycle(duration: float):
    from reference_tcu import ZF8HP_CAR, ReferenceTcu

    from server.offline.controller import closed_loop

    plant = load_plant("zf8hp_car")
    plant.core.mi[L.H_FN_LAW] = _counting_law.address
    tcu = ReferenceTcu(ZF8HP_CAR)
    _COUNT[0] = 0
    closed_loop(plant, None, tcu, every=1000, duration_s=duration, dt=1e-3)
    n = int(round(duration / 1e-3))
    return int(_COUNT[0]) / n, int(plant.core.counters[L.CNT_EVENTS])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cycle", type=float, default=300.0, help="seconds of the WLTC for the counts (default 300)")
    a = ap.parse_args(argv)
    npc = ns_per_cycle()
    _, per_step, _ = run_cruise(_counting_law.address, 5000, npc)
    print(f"law evaluations per step: cruising locked up {per_step:.3f}", end="")
    _, per_stand, _ = run_cruise(_counting_law.address, 5000, npc, standing=True)
    print(f"; standing on the brake {per_stand:.3f}", end="")
    e_drive, ev_drive = counts_drive()
    print(f"; zf8hp_car_drive {e_drive:.3f} ({ev_drive} events in 16000 steps)", end="")
    e_cyc, ev_cyc = counts_cycle(a.cycle)
    print(f"; WLTC first {a.cycle:.0f} s closed loop {e_cyc:.3f} ({ev_cyc} events)")
    plant = cruising_plant()
    c = plant.core
    addr = int(c.mi[L.H_FN_LAW])
    _time_law(addr, c.mf, c.mi, c.df, c.di, 1000)
    per_call = []
    for _ in range(a.repeat):
        cyc, _ = _time_law(addr, c.mf, c.mi, c.df, c.di, 1_000_000)
        per_call.append(cyc * npc / 1e6)
    print(f"law per call at the cruising state: median {np.median(per_call):.1f} ns "
          f"(min {min(per_call):.1f}, max {max(per_call):.1f}) over {a.repeat} x 10^6 calls")
    rows = {"with its law": [], "law adding nothing (call only)": [], "without a law (address 0)": []}
    for _ in range(a.repeat):  # taken in turn, so that all three see the same load
        rows["with its law"].append(run_cruise(None, 5000, npc)[0])
        rows["law adding nothing (call only)"].append(run_cruise(_null_law.address, 5000, npc)[0])
        rows["without a law (address 0)"].append(run_cruise(0, 5000, npc)[0])
    stand = [run_cruise(None, 5000, npc, standing=True)[0] for _ in range(a.repeat)]
    s = stats(np.concatenate(stand))
    print(f"car standing on the brake, idling: median {s['median']:.3f} us, p90 {s['p90']:.3f}")
    base = float(np.median(np.concatenate(rows["with its law"])))
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")
    print("| car cruising locked up in 4th | median [us] | p90 | / with law |")
    print("|---|---|---|---|")
    for name, v in rows.items():
        s = stats(np.concatenate(v))
        print(f"| {name} | {s['median']:.3f} | {s['p90']:.3f} | {s['median'] / base:.2f} |")
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    raise SystemExit(main())
