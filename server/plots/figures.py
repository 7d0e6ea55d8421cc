"""Figure building blocks shared by the figures of every plant kind.

matplotlib's object API on the Agg canvas (no display, no global pyplot
state); imported lazily, so nothing here loads matplotlib unless a figure is
drawn.  Not used by the real-time loop.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

DPI = 100
COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive")


def figure(rows: int, height_per_row: float = 1.9, width: float = 8.0):
    """A constrained-layout figure with ``rows`` stacked axes sharing the time axis."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, max(2.6, 0.9 + height_per_row * rows)), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = [fig.add_subplot(rows, 1, k + 1) for k in range(rows)]
    for ax in axes[1:]:
        ax.sharex(axes[0])
    for ax in axes:
        ax.grid(True, linewidth=0.4, alpha=0.6)
    for ax in axes[:-1]:
        ax.tick_params(labelbottom=False)
    axes[-1].set_xlabel("time [s]")
    return fig, axes


def legend(ax, *twins, ncol: int | None = None, fontsize: float = 7.5):
    """One legend for ``ax`` and its twin axes, in rows above the axes, so that it never covers the data.

    Every labelled line and span of the axes is in it; a figure's axes give
    each of their series a label (a lone series may be named by the axis
    label alone).  Constrained layout makes room for it between the panels.
    """
    handles, labels = [], []
    for a in (ax, *twins):
        h, lab = a.get_legend_handles_labels()
        handles += h
        labels += lab
    if not handles:
        return None
    return ax.legend(handles, labels, loc="lower left", bbox_to_anchor=(0.0, 1.0), borderaxespad=0.2,
                     ncol=ncol or min(len(handles), 4), fontsize=fontsize, frameon=False, handlelength=1.8,
                     columnspacing=1.2)


def save(fig, path: Path, title: str) -> Path:
    """Write the figure with its title wrapped to the figure's width."""
    if title:
        width = int(fig.get_figwidth() * 13)  # characters that fit at 10 pt
        fig.suptitle("\n".join(textwrap.fill(line, width) for line in title.splitlines()), fontsize=10)
    fig.savefig(path)
    return path


def mark_events(ax, t, flag, color="0.5", label=None):
    """Shade the intervals where an integer flag is 1."""
    import numpy as np

    on = np.asarray(flag) > 0.5
    if not on.any():
        return
    edges = np.flatnonzero(np.diff(on.astype(int)))
    starts = [0] if on[0] else []
    starts += [e + 1 for e in edges if not on[e]]
    ends = [e + 1 for e in edges if on[e]] + ([len(t) - 1] if on[-1] else [])
    for k, (a, b) in enumerate(zip(starts, ends)):
        ax.axvspan(t[a], t[b], color=color, alpha=0.12, linewidth=0, label=label if k == 0 else None)
