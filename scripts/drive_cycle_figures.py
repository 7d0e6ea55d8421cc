"""The drive cycles' figures and numbers for docs/drive_cycles.md, made from runs (so they stay current).

* ``docs/figures/wltc_8hp_speed.png``: the 8HP car through the WLTC class 3b with the reference TCU: speed against
  target with the +-2 km/h band's error, gear over time, engine speed with lock-up;
* ``docs/figures/wltc_8hp_shifts.png``: clutch friction energy and duration of every shift, and the engine work;
* ``docs/figures/tractor_field.png``: the tractor's field cycle: speed, drawbar pull, gear, engine speed.

Prints the numbers the doc quotes.  Run: ``PYTHONPATH=. python scripts/drive_cycle_figures.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
import drive_cycle_results as dc  # noqa: E402

from server.plots.figures import COLORS, figure, legend, save  # noqa: E402

OUT = ROOT / "docs" / "figures"
RPM = 30.0 / np.pi


def _target(run):
    return np.interp(run.res.time, run.tcu.cycle[0], run.tcu.cycle[1]) * 3.6


def _held_gear(g: np.ndarray) -> np.ndarray:
    """The gear output with its 0 (no gear while the elements change over) replaced by the gear before."""
    out = g.copy()
    for k in range(1, len(out)):
        if out[k] == 0.0:
            out[k] = out[k - 1]
    return out


def car_figures(run) -> None:
    t = run.res.time
    fig, ax = figure(4, height_per_row=1.8, width=10.0)
    ax[0].plot(t, _target(run), color="0.4", linewidth=1.6, label="WLTC class 3b target")
    ax[0].plot(t, run.col("vehicle_speed") * 3.6, color=COLORS[0], linewidth=0.8, label="vehicle speed")
    ax[0].set_ylabel("speed [km/h]")
    legend(ax[0])
    err = dc.speed_error_km_h(run)
    ax[1].plot(t, err, color=COLORS[3], linewidth=0.7, label="speed - target")
    ax[1].axhline(2.0, color="0.3", linestyle="--", linewidth=0.8, label="+-2 km/h (regulation's band)")
    ax[1].axhline(-2.0, color="0.3", linestyle="--", linewidth=0.8)
    ax[1].set_ylabel("error [km/h]")
    legend(ax[1])
    ax[2].step(t, _held_gear(run.col("gear")), where="post", color=COLORS[2], linewidth=0.8, label="gear")
    ax[2].set_ylabel("gear")
    ax[2].set_yticks(range(1, 9))
    ax[3].plot(t, run.col("w_engine") * RPM, color=COLORS[1], linewidth=0.7, label="engine speed")
    ax[3].plot(t, run.col("w_input") * RPM, color=COLORS[4], linewidth=0.5, alpha=0.8, label="turbine speed")
    ax[3].set_ylabel("speed [rpm]")
    ax[3].set_xlabel("time [s]")
    legend(ax[3])
    save(fig, OUT / "wltc_8hp_speed.png", "8HP car with the reference TCU through the WLTC class 3b (offline, "
         "dt = 1 ms, TCU task 10 ms)")
    sh = dc.shifts(run)
    fig, ax = figure(2, height_per_row=2.2, width=10.0)
    ts = np.array([s["start_s"] for s in sh])
    up = np.array([s["to"] > s["from"] for s in sh])
    en = np.array([s["energy_J"] for s in sh]) / 1e3
    du = np.array([s["duration_s"] for s in sh])
    ax[0].plot(ts[up], en[up], "^", color=COLORS[0], markersize=3.5, label="upshift")
    ax[0].plot(ts[~up], en[~up], "v", color=COLORS[3], markersize=3.5, label="downshift")
    ax[0].set_ylabel("clutch energy [kJ]")
    legend(ax[0])
    eng = np.cumsum(np.maximum(run.col("engine_torque") * run.col("w_engine"), 0.0)) * (t[1] - t[0]) / 1e6
    ax[1].plot(t, eng, color=COLORS[1], linewidth=1.0, label="engine work (positive power)")
    ax[1].set_ylabel("engine work [MJ]")
    ax[1].set_xlabel("time [s]")
    legend(ax[1])
    save(fig, OUT / "wltc_8hp_shifts.png", f"WLTC class 3b: friction energy of the shift elements in each of the "
         f"{len(sh)} shifts, and the engine's work")
    print(f"car: {run.res.steps} steps, closed-loop wall {run.res.wall_time_s:.2f} s; max |speed error| "
          f"{np.abs(err).max():.2f} km/h; shifts {len(sh)} ({int(up.sum())} up, {int((~up).sum())} down); "
          f"per gear reached {dict(sorted((k, int(np.sum([s['to'] == k for s in sh]))) for k in range(1, 9)))}")
    print(f"  clutch energy per shift: median {np.median(en) * 1e3:.0f} J (up {np.median(en[up]) * 1e3:.0f}, down "
          f"{np.median(en[~up]) * 1e3:.0f}), max {en.max() * 1e3:.0f} J; gear-change time median "
          f"{np.median(du):.2f} s (rows every {run.res.every} ms)")


def tractor_figure(run) -> None:
    t = run.res.time
    fig, ax = figure(4, height_per_row=1.7, width=9.0)
    ax[0].plot(t, _target(run), color="0.4", linewidth=1.6, label="target")
    ax[0].plot(t, run.col("vehicle_speed") * 3.6, color=COLORS[0], linewidth=0.9, label="ground speed")
    ax[0].set_ylabel("speed [km/h]")
    legend(ax[0])
    ax[1].plot(t, run.inp("drawbar_force") / 1e3, color=COLORS[3], linewidth=1.0, label="drawbar pull")
    ax[1].set_ylabel("pull [kN]")
    ax[2].step(t, _held_gear(run.col("gear")), where="post", color=COLORS[2], linewidth=0.9, label="gear")
    ax[2].set_ylabel("gear")
    ax[3].plot(t, run.col("w_1") * RPM, color=COLORS[1], linewidth=0.9, label="engine speed")
    ax[3].plot(t, run.col("engine_torque"), color=COLORS[4], linewidth=0.7, label="engine torque [N m]")
    ax[3].set_ylabel("rpm / N m")
    ax[3].set_xlabel("time [s]")
    legend(ax[3])
    save(fig, OUT / "tractor_field.png", "Powershift tractor with the reference TCU through the field cycle "
         "(drawbar pull steps)")
    sh = dc.shifts(run)
    err = dc.speed_error_km_h(run, 12.0)
    print(f"tractor: shifts {len(sh)}: " + ", ".join(f"{s['from']}->{s['to']} at {s['start_s']:.1f} s "
                                                       f"({s['energy_J']:.0f} J)" for s in sh))
    print(f"  min engine speed {run.col('w_1').min() * RPM:.0f} rpm; max |speed error| after 12 s "
          f"{np.abs(err).max():.2f} km/h")


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    car = dc.run_cycle("car", every=100)
    car_figures(car)
    eb = dc.energy_balance(car)
    print("  energy (kJ): " + ", ".join(f"{k} {v / 1e3:.1f}" for k, v in eb.items() if k != "residual")
          + f"; residual {eb['residual'] / eb['engine']:.2e} of the engine work")
    tr = dc.run_cycle("tractor", every=10)
    tractor_figure(tr)
    eb = dc.energy_balance(tr)
    print("  energy (kJ): " + ", ".join(f"{k} {v / 1e3:.1f}" for k, v in eb.items() if k != "residual")
          + f"; residual {eb['residual'] / eb['engine']:.2e} of the engine work")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
