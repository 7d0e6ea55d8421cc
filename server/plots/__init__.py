"""PNG figures of an offline run, each plant kind with its own figures in the style of its paper.

The table :data:`FIGURES` chooses a plant's figures by its kind; a kind
without an entry gets the generic figures (speeds, friction against its
bounds, every output).  The plants know nothing of figures: plotting lives
here, on the server's floor, and reads only the trace and the plant's
parameters and signals.  matplotlib is imported only when a figure is drawn.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from . import damper, kinematic, papers, servo, transmission

# kind -> draw(plant, trace, out_dir, title) -> written PNG paths
FIGURES: dict[str, Callable[..., list[Path]]] = {
    "powershift": papers.powershift,
    "dct": papers.dct,
    "chain": papers.chain,
    "damper": damper.plot,
    "servo": servo.plot,
    "kinematic": kinematic.plot,
    "transmission": transmission.plot,
}


def plot_trace(plant, trace, out_dir: str | Path, title: str = "") -> list[Path]:
    """Write the figures for this plant's trace into ``out_dir``; returns the PNG paths."""
    draw = FIGURES.get(plant.kind, papers.generic)
    return draw(plant, trace, Path(out_dir), title)


__all__ = ["FIGURES", "plot_trace"]
