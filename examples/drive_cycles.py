"""Drive cycles as data: the WLTC class 3b speed trace and a tractor field-work cycle.

``scenarios/cycles/wltc_class3b.csv`` is the regulation's table (UNECE GTR
No. 15, Annex 1: 1801 speeds at 1 Hz, km/h); ``tractor_field.csv`` a
field-work cycle of target ground speed and drawbar pull steps.  Both are
read into arrays (time s, speed m/s, drawbar N) for a controller's
parameters.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

CYCLES = Path(__file__).resolve().parent.parent / "scenarios" / "cycles"


def _read(path: Path) -> np.ndarray:
    rows = [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]
    return np.array([[float(x) for x in ln.split(",")] for ln in rows[1:]])  # rows[0]: the header


def wltc_class3b() -> tuple[np.ndarray, np.ndarray]:
    """(time s, target speed m/s) of the WLTC class 3b, 0 .. 1800 s at 1 Hz."""
    t = _read(CYCLES / "wltc_class3b.csv")
    return t[:, 0], t[:, 1] / 3.6


def tractor_field() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(time s, target speed m/s, drawbar pull N) of the field-work cycle, breakpoints (linear between)."""
    t = _read(CYCLES / "tractor_field.csv")
    return t[:, 0], t[:, 1] / 3.6, t[:, 2]
