"""Figures of a servo-actuator run.

In the style of Borello & Dalla Vedova, "A dry friction model and robust
computational algorithm for reversible or irreversible motion
transmissions" (figs. 6-17).

``plot(plant, trace, out_dir, title)`` writes two PNGs: the servomechanism
(command and position, rate, supply and load pressure, torques) and a
detail of the friction (position error, friction torque against its static
and dynamic limits, rest and hard-stop intervals).  Not used by the
real-time loop.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .figures import COLORS, figure, legend, mark_events, save


def friction_limits(params, load: np.ndarray, direction: float) -> tuple[np.ndarray, np.ndarray]:
    """Dynamic friction FDO and FDA (eqs. 3-4) for the load history, signed for a motion in ``direction``."""
    a = np.abs(load)
    fdo = params.friction_load_independent_N_m + (1.0 / params.efficiency_opposing - 1.0) * a
    fda = params.friction_load_independent_N_m + (1.0 - params.efficiency_aiding) * a
    opposing = direction * load >= 0.0
    return np.where(opposing, fdo, fda), np.where(opposing, fda, fdo)


def plot(plant, trace, out_dir, title: str = "") -> list[Path]:
    out = Path(out_dir)
    t = trace.time
    c = trace.column
    p = plant.params
    files = []

    fig, (a1, a2, a3, a4) = figure(4, 1.7)
    a1.plot(t, c("position_command_applied"), color="0.3", linestyle="--", linewidth=1.0, label="command Com")
    a1.plot(t, c("position"), color=COLORS[0], linewidth=1.2, label="position XJ")
    a1.set_ylabel("position [deg]")
    legend(a1)
    a2.plot(t, c("rate"), color=COLORS[1], linewidth=1.0, label="rate DXJ")
    mark_events(a2, t, c("stuck"), label="at rest")
    a2.set_ylabel("rate [deg/s]")
    legend(a2)
    a3.plot(t, c("supply_pressure_applied"), color=COLORS[2], label="supply pressure PSR")
    a3.plot(t, c("load_pressure"), color=COLORS[3], linewidth=1.0, label="load pressure P12")
    a3.set_ylabel("pressure [MPa]")
    legend(a3)
    a4.plot(t, c("motor_torque") / 1e3, color=COLORS[0], linewidth=1.0, label="motor $T_M$")
    a4.plot(t, c("load_torque_applied") / 1e3, color=COLORS[3], linewidth=1.0, label="load $T_{LD}$")
    a4.plot(t, c("friction_torque") / 1e3, color=COLORS[4], linewidth=1.0, label="friction $T_{FR}$")
    if np.any(c("stop_torque") != 0.0):
        a4.plot(t, c("stop_torque") / 1e3, color="0.3", linewidth=1.0, label="hard stop")
    a4.set_ylabel("torque [kN m]")
    legend(a4)
    kind = "reversible" if p.reversible else "irreversible"
    files.append(save(fig, out / "servo.png", f"{title}\n{kind} transmission (EtO {p.efficiency_opposing:g}, "
                      f"EtA {p.efficiency_aiding:g}, FSD {p.static_to_dynamic:g})"))

    fig, (b1, b2) = figure(2, 2.4)
    b1.plot(t, c("position_error"), color=COLORS[0], linewidth=1.0, label="position error Com - XJ")
    mark_events(b1, t, c("stuck"), label="at rest")
    b1.set_ylabel("error [deg]")
    legend(b1)
    load = c("load_torque_applied")
    dyn, _ = friction_limits(p, load, 1.0)
    dyn_neg, _ = friction_limits(p, load, -1.0)
    b2.plot(t, c("friction_torque") / 1e3, color=COLORS[4], linewidth=1.0, label="friction $T_{FR}$")
    b2.plot(t, dyn / 1e3, color=COLORS[4], linestyle=":", linewidth=0.9, label="dynamic limits (eqs. 3-4)")
    b2.plot(t, -dyn_neg / 1e3, color=COLORS[4], linestyle=":", linewidth=0.9)
    b2.plot(t, p.static_to_dynamic * dyn / 1e3, color=COLORS[4], linestyle="--", linewidth=0.9,
            label="static limits (FSD x dynamic)")
    b2.plot(t, -p.static_to_dynamic * dyn_neg / 1e3, color=COLORS[4], linestyle="--", linewidth=0.9)
    at_stop = np.abs(c("at_stop"))
    mark_events(b2, t, at_stop, color="tab:red", label="on a hard stop")
    b2.set_ylabel("friction [kN m]")
    legend(b2, ncol=2)
    files.append(save(fig, out / "servo_friction.png",
                      f"{title}\nposition error and friction torque against its limits (eqs. 3-4, FSD)"))
    return files
