"""The experiment of the article "Clutch Modeling - Part II: Kinematic Clutches".

The same engagement time with the applied torque 50 % higher and the
driving inertia 25 % lower; prints both engagement times and peak reaction
torques and draws the article's comparison (speeds, reaction torques).

    python examples/kinematic_experiment.py [OUT.png]
"""

from __future__ import annotations

import sys

import numpy as np

from plant_models.config import repo_root
from server.plots.kinematic import plot_experiment
from plant_models.registry import load_plant
from server.offline.scenario import load_scenario
from server.offline.run import run_offline

CASES = (("baseline", "kinematic.toml", "kinematic_engagement.toml"),
         ("modified (torque +50 %, J1 -25 %)", "kinematic_modified.toml", "kinematic_engagement_modified.toml"))


def main(argv: list[str]) -> int:
    root = repo_root()
    out = argv[0] if argv else "kinematic_experiment.png"
    runs = []
    for label, config, scenario in CASES:
        plant = load_plant(root / "configs" / config)
        tr = run_offline(plant, load_scenario(root / "scenarios" / scenario).compile(plant))
        stick = [e["time"] for e in tr.events if e["type"] == "stick"]
        peak = float(np.max(np.abs(tr.column("clutch_torque"))))
        print(f"{label}: engaged at {stick[0]:.9f} s, peak reaction torque {peak:.3f} N m")
        runs.append((label, tr.time, tr.column("w_input"), tr.column("w_output"), tr.column("clutch_torque")))
    path = plot_experiment(runs, out, "kinematic clutch: engagement in 0.8 s in both systems")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
