"""Figures of a campaign table: which parameters matter, metric maps over them, and the tie-up / flare regions.

* ``sensitivity.png``: for every metric, the share of its variance that
  each parameter explains alone (first-order index, estimated by binning
  the runs on the parameter: Var(E[y | x]) / Var(y));
* ``<metric>.png`` for ``shift_time`` and ``flare`` (when computed): every
  run as a dot over the metric's two most important parameters, coloured
  by the metric;
* ``regions.png`` (with ``flare``, ``tie_up_energy`` and
  ``clutch_energy``): every run over the two parameters that matter most
  for flare and tie-up together, marked as a clean shift, a tie-up (the
  on-coming clutch burns more than ``tie_up_share`` of the swap's energy
  while the off-going one still holds) or a flare (the engine rises more
  than ``flare_limit`` above the off-going gear's speed).

* ``failing_region.png`` (a campaign over a test file): every run over two
  parameters (those that decide failure most, chosen by
  :mod:`server.campaign.summary`), a run that met every expectation in
  green, one that did not in the colour of its first failing expectation.

Drawn from the table alone (matplotlib's object API, Agg canvas, as
:mod:`.figures`); runs that failed or whose metric is NaN are left out and
counted in the title.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from .figures import COLORS, DPI, save

METRIC_LABELS = {
    "shift_time": "shift time [s]", "final_gear": "final gear [-]", "flare": "engine flare [rad/s]",
    "peak_reaction_torque": "peak reaction torque [N m]", "rms_reaction_torque": "RMS reaction torque [N m]",
    "clutch_energy": "clutch energy [J]", "tie_up_energy": "tie-up energy [J]", "max_slip": "max. slip [rad/s]",
}
_UNITS = (("_rad_s", "rad/s"), ("_N_m", "N m"), ("_kg_m2", "kg m²"), ("_bar", "bar"), ("_s", "s"), ("_J", "J"))


def label(name: str) -> str:
    """A column name as an axis label: ``engine_torque_N_m`` -> ``engine torque [N m]``."""
    if name in METRIC_LABELS:
        return METRIC_LABELS[name]
    for suffix, unit in _UNITS:
        if name.endswith(suffix):
            return f"{name[:-len(suffix)].replace('_', ' ')} [{unit}]"
    return re.sub("_", " ", name)


def first_order(x: np.ndarray, y: np.ndarray, bins: int = 10) -> float:
    """Share of Var(y) explained by x alone: Var over x-quantile bins of the bin means of y, over Var(y)."""
    ok = np.isfinite(y) & np.isfinite(x)
    x, y = x[ok], y[ok]
    if y.size < 2 * bins or np.var(y) == 0.0 or np.unique(x).size < 2:
        return 0.0
    edges = np.quantile(x, np.linspace(0.0, 1.0, bins + 1))
    idx = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, bins - 1)
    means = np.array([y[idx == b].mean() for b in range(bins) if np.any(idx == b)])
    counts = np.array([np.sum(idx == b) for b in range(bins) if np.any(idx == b)])
    return float(np.sum(counts * (means - y.mean()) ** 2) / counts.sum() / np.var(y))


def _figure(width=7.5, height=4.6):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _columns(table) -> dict[str, np.ndarray]:
    return {name: table.column(name).to_numpy(zero_copy_only=False) for name in table.column_names}


def plot_campaign(table, params: list[str], metrics: list[str], out: Path, title: str = "",
                  flare_limit: float = 10.0, tie_up_share: float = 0.5) -> list[Path]:
    """Write the campaign's figures into ``out``; ``table`` is the campaign's pyarrow table."""
    cols = _columns(table)
    ok = cols["status"] == "ok"
    numeric = [p for p in params if cols[p].dtype.kind in "fi"]
    metrics = [m for m in metrics if cols[m].dtype.kind == "f" and np.isfinite(cols[m][ok]).sum() > 1
               and np.nanvar(cols[m][ok]) > 0.0]
    s1 = {m: {p: first_order(cols[p][ok].astype(float), cols[m][ok]) for p in numeric} for m in metrics}
    files = [_sensitivity(s1, numeric, metrics, out, title, int(ok.sum()))]
    for m in ("shift_time", "flare"):
        if m in s1 and len(numeric) >= 2:
            files.append(_map(cols, ok, m, sorted(numeric, key=lambda p: -s1[m][p])[:2], s1[m], out, title))
    if all(m in cols for m in ("flare", "tie_up_energy", "clutch_energy")) and len(numeric) >= 2:
        score = {p: s1.get("flare", {}).get(p, 0.0) + s1.get("tie_up_energy", {}).get(p, 0.0) for p in numeric}
        files.append(_regions(cols, ok, sorted(numeric, key=lambda p: -score[p])[:2], out, title, flare_limit,
                              tie_up_share))
    return files


def _sensitivity(s1, params, metrics, out: Path, title: str, n_ok: int) -> Path:
    fig = _figure(7.5, 1.9 + 0.45 * len(metrics) * max(2, len(params)) / 2)
    ax = fig.add_subplot(1, 1, 1)
    h = 0.8 / max(1, len(params))
    y = np.arange(len(metrics))
    for k, p in enumerate(params):
        ax.barh(y + (k - (len(params) - 1) / 2) * h, [s1[m][p] for m in metrics], height=h,
                color=COLORS[k % len(COLORS)], label=label(p))
    ax.set_yticks(y, [label(m) for m in metrics])
    ax.invert_yaxis()
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel("first-order index: share of the metric's variance the parameter explains alone")
    ax.grid(True, axis="x", linewidth=0.4, alpha=0.6)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=min(4, len(params)), fontsize=8)
    return save(fig, out / "sensitivity.png", f"{title}\nwhich parameters matter ({n_ok} runs)")


def _map(cols, ok, metric, pair, s1, out: Path, title: str) -> Path:
    px, py = pair
    y = cols[metric]
    good = ok & np.isfinite(y)
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    art = ax.scatter(cols[px][good], cols[py][good], c=y[good], s=9, cmap="viridis", linewidths=0)
    bad = ok & ~np.isfinite(y)
    if bad.any():
        ax.scatter(cols[px][bad], cols[py][bad], s=12, marker="x", color="tab:red",
                   label=f"{label(metric).split(' [')[0]} undefined ({int(bad.sum())} runs)")
        ax.legend(loc="upper right", fontsize=8, framealpha=0.9)
    fig.colorbar(art, ax=ax, label=label(metric))
    ax.set_xlabel(f"{label(px)}  (first-order index {s1[px]:.2f})")
    ax.set_ylabel(f"{label(py)}  (first-order index {s1[py]:.2f})")
    ax.grid(True, linewidth=0.4, alpha=0.6)
    return save(fig, out / f"{metric}.png", f"{title}\n{label(metric)} over its two most important parameters "
                                             f"({int(good.sum())} runs)")


def _regions(cols, ok, pair, out: Path, title: str, flare_limit: float, tie_up_share: float) -> Path:
    px, py = pair
    flare = cols["flare"]
    share = cols["tie_up_energy"] / np.where(cols["clutch_energy"] > 0.0, cols["clutch_energy"], np.nan)
    classes = (("tie-up: on-coming clutch burns > {:.0%} of the swap energy while the off-going holds"
                .format(tie_up_share), ok & (share > tie_up_share), "tab:red"),
               (f"flare: engine > {flare_limit:g} rad/s above the off-going gear's speed",
                ok & (flare > flare_limit), "tab:orange"))
    clean = ok & ~(classes[0][1] | classes[1][1])
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    ax.scatter(cols[px][clean], cols[py][clean], s=9, color="tab:green", linewidths=0,
               label=f"clean shift ({int(clean.sum())} runs)")
    for text, mask, color in classes:
        ax.scatter(cols[px][mask], cols[py][mask], s=9, color=color, linewidths=0,
                   label=f"{text} ({int(mask.sum())} runs)")
    ax.set_xlabel(label(px))
    ax.set_ylabel(label(py))
    ax.grid(True, linewidth=0.4, alpha=0.6)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), fontsize=8, framealpha=0.9)
    return save(fig, out / "regions.png", f"{title}\ntie-up and flare regions")


def plot_failing_region(table, pair: list[str], index: dict[str, float], names: list[str], out: Path,
                        title: str = "") -> Path:
    """``failing_region.png``: pass / first failing expectation over two parameters (see the module's docstring).

    ``names``: the expectations' names, in the order of their ``expect[k]`` columns; ``index``: the
    parameters' first-order indices of failure (shown on the axes).
    """
    cols = _columns(table)
    px, py = pair
    verdicts = np.array([cols[f"expect[{k}].verdict"] for k in range(len(names))]).reshape(len(names), -1)
    passed = cols["verdict"] == "pass"
    first = np.where(passed, -1, np.argmax(verdicts != "pass", axis=0))
    error = cols["verdict"] == "error"
    fig = _figure(7.5, 5.2)
    ax = fig.add_subplot(1, 1, 1)
    ax.scatter(cols[px][passed], cols[py][passed], s=9, color="tab:green", linewidths=0,
               label=f"met every expectation ({int(passed.sum())} runs)")
    shown = 0
    for k, name in enumerate(names):
        mask = (first == k) & ~passed & ~error
        if mask.any():
            color = _FAIL_COLORS[shown % len(_FAIL_COLORS)]
            ax.scatter(cols[px][mask], cols[py][mask], s=11, linewidths=0, color=color,
                       label=f"fails first: {name} ({int(mask.sum())} runs)")
            shown += 1
    if error.any():
        ax.scatter(cols[px][error], cols[py][error], s=14, marker="x", color="black",
                   label=f"error ({int(error.sum())} runs)")
    ax.set_xlabel(f"{label(px)}  (first-order index of failure {index.get(px, 0.0):.2f})")
    ax.set_ylabel(f"{label(py)}  (first-order index of failure {index.get(py, 0.0):.2f})")
    ax.grid(True, linewidth=0.4, alpha=0.6)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), fontsize=8, framealpha=0.9)
    rate = passed.mean() if passed.size else float("nan")
    return save(fig, out / "failing_region.png", f"{title}\nwhere the runs fail: pass rate {rate:.1%} of "
                                                  f"{passed.size} runs")


_FAIL_COLORS = ("tab:red", "tab:orange", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan", "tab:blue")

__all__ = ["first_order", "label", "plot_campaign", "plot_failing_region"]
