"""Figures of a kinematic-clutch run (speeds, reaction torque, phase).

In the style of the article "Clutch Modeling - Part II: Kinematic Clutches".

``plot(plant, trace, out_dir, title)`` takes the offline simulator's trace
and writes PNGs with matplotlib's object API on the Agg canvas.
``plot_experiment`` draws the article's comparison of two runs (figures 4
and 5).  Not used by the real-time loop.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .figures import COLORS, figure, legend, mark_events, save


def plot(plant, trace, out_dir, title: str = "") -> list[Path]:
    out = Path(out_dir)
    t = trace.time
    c = trace.column
    fig, (a1, a2, a3) = figure(3, 2.0)
    a1.plot(t, c("w_input"), color=COLORS[0], label="driving shaft $\\omega_1$")
    a1.plot(t, c("w_output"), color=COLORS[1], label="driven shaft $\\omega_2$")
    mark_events(a1, t, c("stuck"), label="engaged")
    a1.set_ylabel("speed [rad/s]")
    legend(a1)
    a2.plot(t, c("clutch_torque"), color=COLORS[2], label="reaction torque")
    cap = c("capacity")
    lim = max(1.0, 1.3 * float(abs(c("clutch_torque")).max()))
    a2.plot(t, np.where(cap <= lim, cap, np.nan), color=COLORS[2], linestyle="--", linewidth=0.9,
            label="capacity (where in range)")
    a2.set_ylabel("torque [N m]")
    a2.set_ylim(-lim, lim)
    legend(a2)
    a3.step(t, c("phase"), where="post", color=COLORS[3])
    a3.set_yticks([0, 1, 2, 3])
    a3.set_yticklabels(["disengaged", "engaging", "engaged", "disengaging"], fontsize=7)
    a3.set_ylabel("clutch phase")
    return [save(fig, out / "kinematic_clutch.png",
                 f"{title}\nkinematic clutch: speeds, reaction torque, phase")]


def plot_experiment(runs, path, title: str) -> Path:
    """The article's experiment: ``runs`` is a list of (label, t, w_input, w_output, clutch_torque)."""
    fig, (a1, a2) = figure(2, 2.6)
    for k, (label, t, w1, w2, tq) in enumerate(runs):
        a1.plot(t, w1, color=COLORS[2 * k], label=f"driving $\\omega_1$, {label}")
        a1.plot(t, w2, color=COLORS[2 * k + 1], label=f"driven $\\omega_2$, {label}")
        a2.plot(t, tq, color=COLORS[2 * k], label=label)
    a1.set_ylabel("speed [rad/s]")
    legend(a1, ncol=2)
    a2.set_ylabel("reaction torque [N m]")
    legend(a2)
    return save(fig, Path(path), title)
