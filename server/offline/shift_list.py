"""The shifts of a run, one row each, from its trace: what ``simulate`` writes beside it as ``shifts.csv``.

A shift is a change of the plant's ``gear`` output.  It ends at the first
row in the new gear (rows where the gear reads 0, between two gears, belong
to the shift) and starts where the on-coming elements began to carry
torque (a ``capacity_<name>`` above 0) and slip (their energy rising)
without a pause before the old gear's last row: the torque phase, while
the off-going elements still hold, is part of it (a clutch dragging open,
with no capacity, does not start it; without such a phase the shift starts
at the old gear's last row; never before the previous shift's end).  For
each:

* ``start_s``, ``end_s``, ``from_gear``, ``to_gear``;
* ``off_going`` and ``on_coming``: the elements stuck at the start and not
  at the end, and the other way round (``+`` between several; empty when
  the trace has no ``stuck_<name>`` outputs for them);
* ``clutch_energy_J``: the friction energy those elements dissipate over
  the shift (:func:`server.offline.shift_metrics.clutch_energy`);
* ``flare_rad_s``: how far the input speed rises above the old gear's
  synchronous speed (:func:`server.offline.shift_metrics.flare`);
* ``tie_up_J``: the on-coming elements' friction energy while an off-going
  one is still stuck (:func:`server.offline.shift_metrics.tie_up_energy`).

A value that cannot be computed (no input speed output, a zero speed at
the start for the flare) is empty in the CSV, not a number, and its reason
is in ``note``.  The resolution is the trace's: with ``--every N`` the
start and end are known to N steps.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from . import shift_metrics as M

COLUMNS = ("start_s", "end_s", "from_gear", "to_gear", "off_going", "on_coming", "clutch_energy_J", "flare_rad_s",
           "tie_up_J", "note")
INPUT_SPEEDS = ("w_engine", "w_input", "w_in", "w_1")  # the transmission's input speed, in this order of preference
OUTPUT_SPEEDS = ("w_out", "w_output")


def gear_changes(gear: np.ndarray) -> list[tuple[int, int, int, int]]:
    """``(k_start, k_end, from, to)`` per change of the gear signal; rows reading 0 belong to the change."""
    out, last, k_last = [], None, 0
    for k, g in enumerate(np.asarray(gear)):
        if g == 0.0 or not math.isfinite(g):
            continue
        if last is not None and g != last:
            out.append((k_last, k, int(last), int(g)))
        last, k_last = g, k
    return out


def shift_list(names: list[str], time_s: np.ndarray, values: np.ndarray) -> list[dict]:
    """The shifts of a trace (see the module's docstring); [] when the plant has no ``gear`` output."""
    if "gear" not in names or len(time_s) < 2:
        return []
    col = {n: values[:, i] for i, n in enumerate(names)}
    elements = [n[len("stuck_"):] for n in names if n.startswith("stuck_") and f"energy_{n[len('stuck_'):]}" in col]
    w_in = next((n for n in INPUT_SPEEDS if n in col), None)
    w_out = next((n for n in OUTPUT_SPEEDS if n in col), None)
    rows, previous_end = [], 0
    for k_old, k1, g0, g1 in gear_changes(col["gear"]):
        off = [e for e in elements if col[f"stuck_{e}"][k_old] == 1.0 and col[f"stuck_{e}"][k1] != 1.0]
        on = [e for e in elements if col[f"stuck_{e}"][k1] == 1.0 and col[f"stuck_{e}"][k_old] != 1.0]
        zero = np.zeros(len(time_s))
        e_off = sum((col[f"energy_{e}"] for e in off), zero)
        e_on = sum((col[f"energy_{e}"] for e in on), zero)
        cap_on = sum((np.abs(col[f"capacity_{e}"]) for e in on if f"capacity_{e}" in col), zero)
        k0 = k_old
        while k0 > previous_end and cap_on[k0 - 1] > 0.0 and e_on[k0] > e_on[k0 - 1]:  # back through the
            k0 -= 1  # torque phase: the on-coming elements pressed (a capacity) and slipping
        win, previous_end = slice(k0, k1 + 1), k1
        notes = []
        if w_in is None or w_out is None:
            flare, _ = math.nan, notes.append("no input or output speed in the trace: no flare")
        else:
            flare = M.flare(col[w_in], col[w_out], win, k0)
            if math.isnan(flare):
                notes.append(f"{w_in} or {w_out} is 0 at the start: no flare")
        tie_up = sum(M.tie_up_energy(col[f"stuck_{o}"], e_on, win) for o in off) if off and on else 0.0
        rows.append({"start_s": float(time_s[k0]), "end_s": float(time_s[k1]), "from_gear": g0, "to_gear": g1,
                     "off_going": "+".join(off), "on_coming": "+".join(on),
                     "clutch_energy_J": M.clutch_energy(e_off, e_on, win, k0), "flare_rad_s": flare,
                     "tie_up_J": tie_up, "note": "; ".join(notes)})
    return rows


def write_csv(rows: list[dict], path: str | Path) -> None:
    """The shifts as CSV, a header and a row each; a value that could not be computed is empty."""
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(COLUMNS)
        for r in rows:
            w.writerow(["" if isinstance(r[c], float) and math.isnan(r[c]) else
                        (f"{r[c]:.6g}" if isinstance(r[c], float) else r[c]) for c in COLUMNS])


def table(rows: list[dict], limit: int = 12) -> list[str]:
    """The shifts as lines of a fixed-width table for a terminal (the first ``limit``, then how many more)."""
    head = f"{'start s':>9} {'end s':>9}  gear   {'energy J':>9} {'flare rad/s':>11} {'tie-up J':>9}  elements"
    out = [head]
    for r in rows[:limit]:
        flare = "-" if math.isnan(r["flare_rad_s"]) else f"{r['flare_rad_s']:.1f}"
        out.append(f"{r['start_s']:9.3f} {r['end_s']:9.3f}  {r['from_gear']:>2}->{r['to_gear']:<2} "
                   f"{r['clutch_energy_J']:9.1f} {flare:>11} {r['tie_up_J']:9.1f}  "
                   f"{r['off_going'] or '?'} -> {r['on_coming'] or '?'}")
    if len(rows) > limit:
        out.append(f"... and {len(rows) - limit} more")
    return out


__all__ = ["COLUMNS", "gear_changes", "shift_list", "table", "write_csv"]
