"""What a failing test leaves to look at: the trace around the failure, a plot of it, the verdicts.

When an expectation of a test file fails, :func:`keep_failure` writes into
the test's artifact folder

* ``trace.csv``: every recorded signal (outputs, inputs where known, ``t``
  first) from :data:`MARGIN_S` before the first failing time to
  :data:`MARGIN_S` after the last one (the whole run when a failure has no
  time, e.g. a trigger that never happened);
* ``failure.png``: a panel per failing expectation over the same span: the
  expression's value, its bounds and the failing time;
* ``verdicts.txt``: the file's verdicts as the terminal shows them.

The verdicts that failed name the folder, so the report leads to it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .spec import TestSpec
from .verdict import Recording, Verdict

MARGIN_S = 0.5  # s of trace kept either side of the failures


def span(rec: Recording, failed: list[Verdict]) -> tuple[int, int]:
    """The samples [i0, i1) around the failures' times (all of them when one has no time)."""
    times = [v.t for v in failed]
    if not times or any(t is None for t in times):
        return 0, len(rec.t)
    eps = 0.5 * rec.dt  # the ends to the nearest sample, whatever the rounding of k * dt
    i0 = int(np.searchsorted(rec.t, min(times) - MARGIN_S - eps, side="left"))
    i1 = int(np.searchsorted(rec.t, max(times) + MARGIN_S + eps, side="right"))
    return i0, max(i1, i0 + 1)


def keep_failure(spec: TestSpec, rec: Recording, verdicts: list[Verdict], folder: Path) -> Path | None:
    """Write the artifacts of the failed expectations into ``folder`` (None when none failed)."""
    failed = [v for v in verdicts if not v.passed]
    if not failed or len(rec.t) == 0:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    i0, i1 = span(rec, failed)
    names = ["t"] + sorted(n for n in rec.signals if n != "t")
    table = np.column_stack([np.asarray(rec.signals[n], dtype=float)[i0:i1] for n in names])
    np.savetxt(folder / "trace.csv", table, delimiter=",", header=",".join(names), comments="", fmt="%.17g")
    (folder / "verdicts.txt").write_text(
        f"{spec.source}: {spec.name} ({spec.mode})\n"
        + "".join(f"{v.label:<5} {v.name}: {v.message}\n" for v in verdicts), encoding="utf-8")
    try:
        _plot(spec, rec, failed, i0, i1, folder / "failure.png")
    except ImportError:  # matplotlib is the `plot` extra: the trace is kept without the figure
        (folder / "failure.png.txt").write_text("no plot: matplotlib is not installed (pip install "
                                                "'gearbox-hil[plot]')\n")
    return folder


def _plot(spec: TestSpec, rec: Recording, failed: list[Verdict], i0: int, i1: int, path: Path) -> Path:
    from server.plots.figures import figure, legend, save

    by_key = {e.key: e for e in spec.expectations}
    panels = [(v, by_key.get(v.key)) for v in failed]
    fig, axes = figure(len(panels))
    t = rec.t[i0:i1]
    for ax, (v, exp) in zip(axes, panels):
        if exp is not None and v.error:  # a metric that cannot be computed: its reason, no curve
            ax.text(0.01, 0.5, v.message, transform=ax.transAxes, fontsize=8, wrap=True)
        elif exp is not None:
            y = np.asarray(exp.expr.evaluate(rec.signals), dtype=float)[i0:i1]
            ax.plot(t, y, color="tab:blue", linewidth=1.0, label=exp.expr.text)
            for b, lab in ((exp.eq, "expected"), (exp.lo, "min"), (exp.hi, "max")):
                if b is not None:
                    ax.axhline(b, color="tab:green", linestyle="--", linewidth=0.9, label=f"{lab} {b:g}")
        if v.t is not None:
            ax.axvline(v.t, color="tab:red", linewidth=0.9, label=f"fails at t = {v.t:.6g} s")
        ax.set_title(f"{v.label}: {v.name}", fontsize=8.5, loc="left", pad=16)  # above the legend
        legend(ax)
    return save(fig, path, f"{spec.name} ({spec.mode})")


def note(verdicts: list[Verdict], folder: Path) -> None:
    """Name the folder in every failed verdict's message (the terminal, the JUnit report)."""
    for v in verdicts:
        if not v.passed:
            v.message += f" [trace and plot: {folder}]"
