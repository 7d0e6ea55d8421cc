"""Figures of a transmission described as data (``plant = "transmission"``).

Whatever the description, a shift is read off four figures in the style of
Morselli, Zanasi & Ferracin, "Modeling and simulation of static and
Coulomb friction in a class of automotive systems" (figs. 5-10):

* the input and output speeds with the engaged gear, and the speeds of the
  other members;
* the overall ratio against the ratios of the shift table;
* each shift element's friction torque (solid) against its bounds +-K
  (dashed), with its slip;
* the torques the teeth of each planetary set put on its sun, ring and
  carrier (when the description has planetary sets).

Reads only the trace and the plant's description; matplotlib is loaded only
when a figure is drawn.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .figures import COLORS, mark_events
from .figures import figure as _figure
from .figures import legend as _legend
from .figures import save as _save
from .papers import PS_PAPER, _friction_panel, _gear_twin


def plot(plant, trace, out: Path, title: str) -> list[Path]:
    d, red = plant.params.description, plant.params.reduction
    t = trace.time
    files = []
    members = [m.name for m in d.members]
    shown = {m: m.replace("_", " ") for m in members}  # labels show names, not signal-like identifiers
    inp, outp = members[d.input_member], members[d.output_member]

    fig, axes = _figure(2, 2.6)
    axes[0].plot(t, trace.column(f"w_{inp}"), color="k", label=f"input member {shown[inp]}")
    axes[0].plot(t, trace.column("w_out"), color="tab:blue", label=f"output member {shown[outp]} (forward)")
    axes[0].set_ylabel("speed [rad/s]")
    _legend(axes[0], _gear_twin(axes[0], t, trace.column("gear")))
    others = [m for m in members if m not in (inp, outp)]
    for k, m in enumerate(others):
        axes[1].plot(t, trace.column(f"w_{m}"), color=COLORS[k % len(COLORS)], linewidth=1.0,
                     linestyle=("-", "--", ":")[(k // len(COLORS)) % 3], label=f"member {shown[m]}")
    axes[1].set_ylabel("member speed [rad/s]")
    if others:
        _legend(axes[1], ncol=min(len(others), 6))
    files.append(_save(fig, out / "speeds.png", f"{title}\ninput, output and member speeds, engaged gear "
                                                 f"(as {PS_PAPER}, fig. 5)"))

    fig, (ax,) = _figure(1, 3.2)
    ratio = trace.column("ratio")
    ax.plot(t, np.where(ratio != 0.0, ratio, np.nan), color="tab:blue",
            label="overall ratio $\\omega_{in}/\\omega_{out}$")
    for k, g in enumerate(red.gears):
        ax.axhline(float(g.ratio), color="0.6", linewidth=0.6, linestyle=":",
                   label="ratios of the shift table" if k == 0 else None)
        ax.annotate(g.name, (t[-1], float(g.ratio)), fontsize=7, color="0.35", xytext=(2, 0),
                    textcoords="offset points", va="center")
    ax.set_ylabel("overall ratio $\\omega_{in}/\\omega_{out}$ [-]")
    _legend(ax, _gear_twin(ax, t, trace.column("gear")))
    files.append(_save(fig, out / "ratio.png", f"{title}\noverall ratio against the shift table's ratios "
                                                f"(dotted), engaged gear (as {PS_PAPER}, fig. 7)"))

    elements = [e.name for e in d.elements]
    if elements:
        fig, axes = _figure(len(elements), 1.9)
        for k, (ax, e) in enumerate(zip(axes, elements)):
            mark_events(ax, t, trace.column(f"stuck_{e}"), label="stuck")
            _friction_panel(ax, t, trace.column(f"torque_{e}"), trace.column(f"capacity_{e}"), f"element {e}".replace("_", " "),
                            "N m", COLORS[k % len(COLORS)])
        files.append(_save(fig, out / "elements.png", f"{title}\nshift element torque (solid), $\\pm K$ "
                                                       f"(dashed), stuck shaded (as {PS_PAPER}, figs. 8-10)"))
        fig, axes = _figure(len(elements), 1.5)
        for k, (ax, e) in enumerate(zip(axes, elements)):
            ax.plot(t, trace.column(f"slip_{e}"), color=COLORS[k % len(COLORS)], linewidth=1.0)
            ax.set_ylabel(f"{e} slip [rad/s]".replace("_", " "), fontsize=8)
            mark_events(ax, t, trace.column(f"stuck_{e}"))
        files.append(_save(fig, out / "slips.png", f"{title}\nshift element slip (stuck shaded: exactly 0.0)"))

    sets = [r for r in d.relations if r.kind == "planetary" and f"torque_{r.name}_sun" in trace.names]
    if sets:
        fig, axes = _figure(len(sets), 1.9)
        for ax, r in zip(axes, sets):
            for k, role in enumerate(("sun", "ring", "carrier")):
                ax.plot(t, trace.column(f"torque_{r.name}_{role}"), color=COLORS[k], linewidth=1.0,
                        label=f"on the {role}")
            ax.set_ylabel(f"set {r.name} [N m]".replace("_", " "), fontsize=8)
            _legend(ax, ncol=3)
        files.append(_save(fig, out / "planetary_torques.png",
                           f"{title}\ntorques the teeth of each planetary set put on its members"))
    return files
