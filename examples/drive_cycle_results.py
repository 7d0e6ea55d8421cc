"""A drive cycle closed by the reference TCU, offline, and the results a TCU engineer reads.

``run_cycle("car")`` drives the 8HP car (configs/zf8hp_car.toml) through the WLTC class 3b,
``run_cycle("tractor")`` the Powershift tractor (configs/powershift_tractor.toml) through the field cycle, each
with :class:`reference_tcu.ReferenceTcu` in the compiled closed loop (``server.offline.controller.closed_loop``).
:func:`results` gives the speed error against the target, the shifts (times, from -> to, duration, the friction
energy of the elements in each), the engine's work and the energy balance of the whole run.

Run: ``python examples/drive_cycle_results.py [car|tractor] [duration_s]`` prints them.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference_tcu import POWERSHIFT_TRACTOR, ZF8HP_CAR, ReferenceTcu  # noqa: E402

from plant_models.core import layout as L  # noqa: E402
from plant_models.powertrain.components import work_accounts  # noqa: E402
from plant_models.registry import load_plant  # noqa: E402
from server.offline.controller import closed_loop  # noqa: E402

CONFIGS = {"car": ("zf8hp_car", ZF8HP_CAR, 1800.0), "tractor": ("powershift_tractor", POWERSHIFT_TRACTOR, 100.0)}


@dataclass
class CycleRun:
    plant: object
    tcu: ReferenceTcu
    res: object  # ClosedLoopResult
    ke0: float  # kinetic energy after the reset, J

    def col(self, name: str) -> np.ndarray:
        return self.res.outputs[:, self.res.output_names.index(name)]

    def inp(self, name: str) -> np.ndarray:
        return self.res.inputs[:, self.res.input_names.index(name)]


def run_cycle(which: str = "car", duration_s: float | None = None, dt: float = 1e-3, every: int = 50,
              use_kernel: bool = True) -> CycleRun:
    """The cycle (or its first ``duration_s``) closed by the reference TCU; rows every ``every`` steps."""
    config, cal, full = CONFIGS[which]
    plant = load_plant(config)
    tcu = ReferenceTcu(cal)
    res = closed_loop(plant, None, tcu, every=every, duration_s=full if duration_s is None else duration_s, dt=dt,
                      use_kernel=use_kernel)
    probe = load_plant(config)  # the kinetic energy of the same reset
    probe.reset(tcu.initial_inputs())
    return CycleRun(plant, tcu, res, float(probe.core.kinetic_energy()))


def energy_balance(run: CycleRun) -> dict[str, float]:
    """Engine work and where it went (J): friction in clutches, lock-up, brake, rolling; converter; drags;
    aerodynamic drag; drawbar; potential and kinetic energy; ``residual`` = engine work - the rest."""
    c, plant = run.plant.core, run.plant
    names = [e.name for e in plant.params.description.elements]
    rows = c.work[L.W_ROW0:]
    z = work_accounts(plant.params.powertrain, c.law_z)
    parts = {
        "clutches": -sum(rows[i] for i, nm in enumerate(names) if nm not in ("brake", "rolling", "lockup")),
        "lockup": -sum(rows[i] for i, nm in enumerate(names) if nm == "lockup"),
        "brake": -rows[names.index("brake")],
        "rolling": -rows[names.index("rolling")],
        "converter": -z["work_converter"],
        "drags": -(c.work[L.W_DRAG] + c.work[L.W_DAMP]),
        "impulse": -c.work[L.W_IMPULSE],
        "aero": -z["work_aero"],
        "drawbar": -z["work_drawbar"],
        "potential": -z["work_grade"],
        "kinetic": c.kinetic_energy() - run.ke0,
    }
    out = {"engine": float(z["work_engine"]), "input": float(c.work[L.W_INPUT])}
    out.update({k: float(v) for k, v in parts.items()})
    out["residual"] = out["engine"] - sum(parts.values())
    return out


def shifts(run: CycleRun) -> list[dict]:
    """Each shift from the plant's gear output: start (the last row in the old gear), end (the first row in the
    new one), from, to, and the friction energy of the transmission's elements over it (J)."""
    t, g = run.res.time, run.col("gear")
    elements = [f"energy_{e}" for e in run.tcu.cal.elements]
    energy = sum(run.col(nm) for nm in elements)
    out, last, k_last = [], g[0], 0
    for k in range(1, len(g)):
        if g[k] == 0.0:
            continue
        if g[k] != last:
            out.append({"start_s": float(t[k_last]), "end_s": float(t[k]), "from": int(last), "to": int(g[k]),
                        "duration_s": float(t[k] - t[k_last]), "energy_J": float(energy[k] - energy[k_last])})
            last = g[k]
        k_last = k
    return out


def speed_error_km_h(run: CycleRun, from_s: float = 0.0) -> np.ndarray:
    """Vehicle speed minus the target at each row (km/h), from ``from_s`` on."""
    tt, vv = run.tcu.cycle[0], run.tcu.cycle[1]
    t = run.res.time
    err = (run.col("vehicle_speed") - np.interp(t, tt, vv)) * 3.6
    return err[t >= from_s]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    which = argv[0] if argv else "car"
    dur = float(argv[1]) if len(argv) > 1 else None
    run = run_cycle(which, dur)
    err = speed_error_km_h(run, 2.0 if which == "tractor" else 0.0)
    sh = shifts(run)
    eb = energy_balance(run)
    print(f"{which}: {run.res.steps} steps in {run.res.wall_time_s:.2f} s "
          f"({run.res.steps * 1e-3 / run.res.wall_time_s:.0f}x real time)")
    print(f"speed error: max |e| {np.abs(err).max():.2f} km/h; TCU shift commands {run.tcu.shifts}, "
          f"gear changes seen {len(sh)} ({sum(s['to'] > s['from'] for s in sh)} up)")
    print(f"clutch energy per shift: median {np.median([s['energy_J'] for s in sh]):.0f} J, "
          f"max {max(s['energy_J'] for s in sh):.0f} J; shift time median "
          f"{np.median([s['duration_s'] for s in sh]):.2f} s")
    print("energy (kJ): " + ", ".join(f"{k} {v / 1e3:.3f}" for k, v in eb.items() if k != "residual"))
    print(f"balance: residual {eb['residual']:.3e} J = {eb['residual'] / eb['engine']:.2e} of the engine work")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
