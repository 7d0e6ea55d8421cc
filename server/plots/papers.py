"""PNG figures of an offline run of the transmission plants, in the style of the papers.

* Powershift (Morselli, Zanasi & Ferracin, "Modeling and simulation of
  static and Coulomb friction in a class of automotive systems", figs.
  5-10): axle speeds; the speed ratio of each stage and the overall ratio
  (output over input, reverse sign, as the paper plots them, computed from
  the axle speeds: the plant's ``ratio`` output is input over output speed;
  with the engaged gear); each
  clutch's friction torque (solid) against its bounds +-K (dashed).
* DCT (Biagiotti & Zanasi, "Efficient simulation of static and dynamic
  friction for automotive applications", figs. 10-11): the speeds of the
  shafts at the double clutch and the clutch slips; the clutch torques
  against +-capacity; the overall ratio and engaged gear, the half-shaft
  torque and vehicle speed.
* Chain (Zanasi, Sandoni & Morselli, "Simulation of variable dynamic
  dimension systems: the clutch example", figs. 5-7): velocities, relative
  velocities, and the friction forces against +-K.

Any other plant gets its speed-like outputs, its friction signals against
their bounds where they are named alike (``torque_X`` / ``capacity_X``,
``X_torque`` / ``X_capacity_static``), and a grid of all its outputs, each
named by its signal's description and unit.  Every series is in a legend
above its panel (never over the data; a panel's lone series is named by its
axis label).  Figures are drawn with matplotlib's object API on the Agg
canvas (no display, no global pyplot state).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from .figures import COLORS, DPI  # noqa: F401  (re-exported for plot modules)
from .figures import figure as _figure
from .figures import legend as _legend
from .figures import save as _save

# the papers the figures follow, for the figure titles
PS_PAPER = "Morselli, Zanasi & Ferracin"
DCT_PAPER = "Biagiotti & Zanasi"
CHAIN_PAPER = "Zanasi, Sandoni & Morselli"


def _ratio(num: np.ndarray, den: np.ndarray, min_den: float = 1e-3) -> np.ndarray:
    """num / den, NaN where |den| is too small to give a meaningful ratio."""
    out = np.full(num.shape, np.nan)
    ok = np.abs(den) > min_den
    out[ok] = num[ok] / den[ok]
    return out


def _friction_panel(ax, t, force, bound, label: str, unit: str, color: str = "tab:blue") -> None:
    """Friction (solid) against its static bounds +-K (dashed), as Morselli, Zanasi & Ferracin's figs. 8-10."""
    ax.plot(t, force, color=color, linewidth=1.2, label=f"{label}: friction")
    ax.plot(t, bound, color=color, linestyle="--", linewidth=0.9, alpha=0.8, label="$\\pm K$ (static bound)")
    ax.plot(t, -bound, color=color, linestyle="--", linewidth=0.9, alpha=0.8)
    ax.set_ylabel(f"{label} [{unit}]")
    fmax = float(np.nanmax(np.abs(force))) if force.size else 0.0
    kmax = float(np.nanmax(bound)) if bound.size else 0.0
    # show the bounds, but keep the friction readable when K is far above it
    lim = max(fmax, min(kmax, 4.0 * fmax), 1e-9)
    ax.set_ylim(-1.15 * lim, 1.15 * lim)
    _legend(ax)


def _gear_twin(ax, t, gear, label="engaged gear"):
    """The engaged gear on a right-hand axis of ``ax`` (returned, for the legend)."""
    tw = ax.twinx()
    tw.step(t, gear, where="post", color="0.45", linewidth=0.9, label=label)
    tw.set_ylabel(f"{label} [-]", color="0.35")
    top = max(1.0, float(np.nanmax(gear)) if gear.size else 1.0)
    tw.set_ylim(-0.3, top + 0.6)
    tw.yaxis.get_major_locator().set_params(integer=True)
    return tw


# -- Powershift ---------------------------------------------------------------------
def powershift(plant, trace, out: Path, title: str) -> list[Path]:
    t = trace.time
    files = []
    fig, (ax,) = _figure(1, 3.2)
    for j in range(4):
        ax.plot(t, trace.column(f"w_{j + 1}"), color=COLORS[j], label=f"axle {j + 1} $\\omega_{j + 1}$"
                + (" (engine)" if j == 0 else " (output)" if j == 3 else ""))
    ax.set_ylabel("axle speed [rad/s]")
    _legend(ax)
    files.append(_save(fig, out / "speeds.png", f"{title}\naxle speeds ({PS_PAPER}, fig. 5)"))

    fig, axes = _figure(3)
    for k, ax in enumerate(axes):
        r = _ratio(-trace.column(f"w_{k + 2}"), trace.column(f"w_{k + 1}"))
        ax.plot(t, r, color=COLORS[k])
        ax.set_ylabel(f"stage {k + 1} ratio\n$-\\omega_{k + 2}/\\omega_{k + 1}$ [-]")
    files.append(_save(fig, out / "stage_ratios.png", f"{title}\nspeed ratios, reverse sign ({PS_PAPER}, fig. 6)"))

    fig, (ax,) = _figure(1, 3.2)
    # the paper's fig. 7 plots output over input speed, the inverse of the plant's `ratio` output
    overall = _ratio(-trace.column("w_4"), trace.column("w_1"))
    ax.plot(t, overall, color="tab:blue", label="overall ratio $-\\omega_4/\\omega_1$")
    ax.set_ylabel("overall ratio $-\\omega_4/\\omega_1$ [-]")
    _legend(ax, _gear_twin(ax, t, trace.column("gear")))
    files.append(_save(fig, out / "overall_ratio.png", f"{title}\noverall ratio, reverse sign ({PS_PAPER}, fig. 7)"))

    for name, group, fig_no in (("friction_c1_c2", (1, 2), 8), ("friction_c3_c5", (3, 4, 5), 9),
                                ("friction_c6_c8", (6, 7, 8), 10)):
        fig, axes = _figure(len(group))
        for ax, c in zip(axes, group):
            _friction_panel(ax, t, trace.column(f"torque_c{c}"), trace.column(f"capacity_c{c}"), f"clutch {c}",
                            "N m", COLORS[(c - 1) % len(COLORS)])
        files.append(_save(fig, out / f"{name}.png",
                           f"{title}\nfriction torque (solid) and $\\pm K$ (dashed), {PS_PAPER}, fig. {fig_no}"))
    return files


# -- DCT -----------------------------------------------------------------------------------
def dct(plant, trace, out: Path, title: str) -> list[Path]:
    t = trace.time
    files = []
    fig, axes = _figure(2, 2.4)
    for nm, lab, col in (("w_engine", "engine", "k"), ("w_odd", "odd shaft (C1)", "tab:blue"),
                         ("w_even", "even shaft (C2)", "tab:orange")):
        axes[0].plot(t, trace.column(nm), color=col, label=lab)
    axes[0].set_ylabel("speed [rad/s]")
    _legend(axes[0])
    axes[1].plot(t, trace.column("slip_c1"), color="tab:blue", label="C1: $\\omega_e-\\omega_{odd}$")
    axes[1].plot(t, trace.column("slip_c2"), color="tab:orange", label="C2: $\\omega_e-\\omega_{even}$")
    axes[1].set_ylabel("clutch slip [rad/s]")
    _legend(axes[1])
    files.append(_save(fig, out / "speeds.png", f"{title}\nshafts at the double clutch and clutch slips "
                                                 f"({DCT_PAPER}, fig. 10)"))

    fig, axes = _figure(2, 2.4)
    for ax, c, col in zip(axes, (1, 2), ("tab:blue", "tab:orange")):
        _friction_panel(ax, t, trace.column(f"torque_c{c}"), trace.column(f"capacity_c{c}"), f"C{c} torque",
                        "N m", col)
    files.append(_save(fig, out / "clutch_friction.png", f"{title}\nclutch torque (solid) and $\\pm K$ (dashed), "
                                                          f"{DCT_PAPER}, fig. 11"))

    fig, axes = _figure(3, 2.0)
    # the ratio is only meaningful once the wheels turn (a launch slips through huge values)
    axes[0].plot(t, _ratio(trace.column("w_engine"), trace.column("w_wheel"), 2.0), color="tab:blue",
                 label="overall ratio $\\omega_e/\\omega_{wheel}$")
    axes[0].set_ylabel("$\\omega_e/\\omega_{wheel}$ [-]")
    _legend(axes[0], _gear_twin(axes[0], t, trace.column("gear")))
    axes[1].plot(t, trace.column("driveshaft_torque"), color="tab:red")
    axes[1].set_ylabel("half-shaft torque [N m]")
    axes[2].plot(t, trace.column("vehicle_speed"), color="tab:green")
    axes[2].set_ylabel("vehicle speed [km/h]")
    files.append(_save(fig, out / "ratio.png", f"{title}\noverall ratio, engaged gear and output"))
    return files


# -- chain ---------------------------------------------------------------------------------
def chain(plant, trace, out: Path, title: str) -> list[Path]:
    t = trace.time
    n = sum(1 for nm in trace.names if nm.startswith("v_"))
    contacts = [nm[len("friction_"):] for nm in trace.names if nm.startswith("friction_")]
    vunit = plant.output_signal("v_1").unit
    funit = plant.output_signal(f"friction_{contacts[0]}").unit if contacts else ""
    files = []
    fig, (ax,) = _figure(1, 3.2)
    for j in range(n):
        ax.plot(t, trace.column(f"v_{j + 1}"), color=COLORS[j % len(COLORS)], label=f"body {j + 1} $v_{{{j + 1}}}$")
    ax.set_ylabel(f"velocity [{vunit}]")
    _legend(ax, ncol=min(n, 6))
    files.append(_save(fig, out / "velocities.png", f"{title}\nvelocities ({CHAIN_PAPER}, fig. 5)"))

    fig, axes = _figure(len(contacts), 1.5)
    for k, (ax, c) in enumerate(zip(axes, contacts)):
        a, b = c.split("_")
        ax.plot(t, trace.column(f"slip_{c}"), color=COLORS[k % len(COLORS)])
        ax.set_ylabel(f"$v_{{{a}}}-v_{{{b}}}$ [{vunit}]")
    files.append(_save(fig, out / "relative_velocities.png", f"{title}\nrelative velocities ({CHAIN_PAPER}, fig. 6)"))

    fig, axes = _figure(len(contacts), 1.6)
    for k, (ax, c) in enumerate(zip(axes, contacts)):
        a, b = c.split("_")
        _friction_panel(ax, t, trace.column(f"friction_{c}"), trace.column(f"static_limit_{c}"),
                        f"$\\tau_{{{a}{b}}}$", funit, COLORS[k % len(COLORS)])
    files.append(_save(fig, out / "friction.png",
                       f"{title}\nfriction (solid) and $\\pm K$ (dashed), {CHAIN_PAPER}, fig. 7"))
    return files


# -- anything else ---------------------------------------------------------------------------
def _bound_of(name: str, names: list[str]) -> str | None:
    """The capacity signal that bounds a friction signal, by the naming conventions of the plants."""
    candidates = []
    if name.startswith("torque_"):
        candidates.append("capacity_" + name[len("torque_"):])
    if name.endswith("_torque"):
        stem = name[: -len("_torque")]
        candidates += [f"{stem}_capacity_static", f"{stem}_capacity"]
    return next((c for c in candidates if c in names), None)


def _physical_name(plant, name: str, width: int = 40) -> str:
    """A signal's description (what it is physically), shortened to ``width`` characters; else its name."""
    try:
        doc = plant.output_signal(name).doc
    except (KeyError, AttributeError):
        doc = ""
    doc = (doc or name).split(";")[0].split(" (")[0]
    doc = doc if len(doc) <= width else doc[: width - 3].rstrip() + "..."
    # symbols in a description (v_1, w_out) are set as maths: v_1 -> $v_{1}$
    return re.sub(r"\b([A-Za-z]+)_([A-Za-z0-9]+)\b", r"$\1_{\2}$", doc)


def generic(plant, trace, out: Path, title: str) -> list[Path]:
    """Speeds, friction against its bounds (where a plant names them alike), and every output."""
    t = trace.time
    files = []
    unit = dict(zip(trace.names, trace.units))
    speeds = [nm for nm in trace.names if unit[nm] in ("rad/s", "m/s", "deg/s")][:8]
    if speeds:
        fig, (ax,) = _figure(1, 3.2)
        for k, nm in enumerate(speeds):
            ax.plot(t, trace.column(nm), color=COLORS[k % len(COLORS)], label=_physical_name(plant, nm))
        units = sorted({unit[nm] for nm in speeds})
        ax.set_ylabel(f"speed [{', '.join(units)}]")
        _legend(ax, ncol=2)
        files.append(_save(fig, out / "speeds.png", f"{title}\nspeeds"))
    pairs = [(nm, b) for nm in trace.names if (b := _bound_of(nm, trace.names))][:8]
    if pairs:
        fig, axes = _figure(len(pairs), 1.6)
        for k, (ax, (nm, b)) in enumerate(zip(axes, pairs)):
            _friction_panel(ax, t, trace.column(nm), trace.column(b), _physical_name(plant, nm, 28), unit[nm],
                            COLORS[k % len(COLORS)])
        files.append(_save(fig, out / "friction.png", f"{title}\nfriction (solid) and $\\pm K$ (dashed)"))
    # trace columns are the plant's outputs in declaration order
    shown = [(nm, unit[nm], sig.integer) for nm, sig in zip(trace.names, plant.outputs) if nm != "status"][:24]
    if shown:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        rows = (len(shown) + 1) // 2
        fig = Figure(figsize=(10.0, 0.9 + 1.45 * rows), dpi=DPI, layout="constrained")
        FigureCanvasAgg(fig)
        for k, (nm, un, integer) in enumerate(shown):
            ax = fig.add_subplot(rows, 2, k + 1)
            col = trace.column(nm)
            if integer:
                ax.step(t, col, where="post", color=COLORS[k % len(COLORS)], linewidth=1.0)
            else:
                ax.plot(t, col, color=COLORS[k % len(COLORS)], linewidth=1.0)
            ax.set_title(f"{_physical_name(plant, nm)} [{un}]", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(True, linewidth=0.4, alpha=0.6)
        files.append(_save(fig, out / "outputs.png", f"{title}\nall outputs"))
    return files
