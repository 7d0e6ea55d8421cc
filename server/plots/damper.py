"""Figures of a damper-clutch run, plus the frictions and the damper.

In the style of Zanasi, Sandoni & Morselli, "Simulation of variable dynamic
dimension systems: the clutch example" (figs. 11-12).

``plot(plant, trace, out_dir, title)`` takes the offline simulator's trace
(``time``, ``column(name)``) and writes PNGs with matplotlib's object API on
the Agg canvas (no display, no global pyplot state).  Not used by the
real-time loop.
"""

from __future__ import annotations

from pathlib import Path

from .figures import COLORS, figure, legend, mark_events, save


def plot(plant, trace, out_dir, title: str = "") -> list[Path]:
    out = Path(out_dir)
    t = trace.time
    c = trace.column
    files = []

    # the paper's fig. 11 (inputs) and fig. 12 (speeds)
    fig, (a1, a2) = figure(2, 2.6)
    a1.plot(t, c("clutch_capacity_applied"), color=COLORS[0], label="clutch capacity $k_{12}$")
    a1.plot(t, c("engine_torque_applied"), color=COLORS[1], label="engine torque $C_1$")
    a1.set_ylabel("torque [N m]")
    legend(a1)
    for k, (nm, lab) in enumerate((("w_engine", "engine $\\omega_1$"), ("w_disk", "clutch disk $\\omega_2$"),
                                   ("w_transmission", "transmission $\\omega_3$"))):
        a2.plot(t, c(nm), color=COLORS[k], label=lab, linewidth=1.2)
    mark_events(a2, t, c("synchronised"), label="all synchronised")
    a2.set_ylabel("speed [rad/s]")
    legend(a2)
    files.append(save(fig, out / "damper_speeds.png",
                      f"{title}\ninputs and angular velocities (Zanasi, Sandoni & Morselli, figs. 11-12)"))

    # frictions against their bounds, the damper spring
    fig, (b1, b2, b3) = figure(3, 1.8)
    k12 = c("clutch_capacity_static")
    b1.plot(t, c("clutch_torque"), color=COLORS[0], label="clutch friction $\\tau_{12}$")
    b1.plot(t, k12, color=COLORS[0], linestyle="--", linewidth=0.9, label="$\\pm K_{12}$ (static bound)")
    b1.plot(t, -k12, color=COLORS[0], linestyle="--", linewidth=0.9)
    mark_events(b1, t, c("clutch_stuck"), label="clutch stuck")
    b1.set_ylabel("clutch [N m]")
    legend(b1)
    k23 = float(plant.params.damper_friction_N_m * plant.params.damper_static_to_kinetic)
    b2.plot(t, c("damper_friction_torque"), color=COLORS[1], label="damper friction $\\tau_{23}$")
    b2.axhline(k23, color=COLORS[1], linestyle="--", linewidth=0.9, label="$\\pm K_{23}$ (static bound)")
    b2.axhline(-k23, color=COLORS[1], linestyle="--", linewidth=0.9)
    mark_events(b2, t, c("damper_friction_stuck"), label="damper friction stuck")
    b2.set_ylabel("damper friction [N m]")
    b2.set_ylim(-1.3 * k23 if k23 > 0 else -1, 1.3 * k23 if k23 > 0 else 1)
    legend(b2)
    b3.plot(t, c("damper_torque"), color=COLORS[2], label="spring torque $\\phi$")
    b3.set_ylabel("spring [N m]")
    tw = b3.twinx()
    tw.plot(t, c("damper_twist"), color=COLORS[3], linewidth=0.9, linestyle="--", label="damper twist $\\theta_d$")
    tw.set_ylabel("twist [deg]", color=COLORS[3])
    legend(b3, tw)
    files.append(save(fig, out / "damper_torques.png",
                      f"{title}\nfriction torques (solid) with their static bounds (dashed); damper spring"))
    return files
