"""``simulate``'s per-run shift list (server/offline/shift_list.py): shifts.csv beside the trace.

Checked against what the run says by other means: the on-coming clutch's
stick events (located inside the step by the core), the scenario's swaps,
and the friction energy the clutches dissipate over the whole run.
"""

from __future__ import annotations

import csv
import json
import math

import numpy as np

from plant_models.config import repo_root
from plant_models.registry import load_plant
from server.cli import main
from server.offline import shift_list
from server.offline.run import run_offline
from server.offline.scenario import load_scenario

ROOT = repo_root()


def test_gear_changes_take_the_rows_between_two_gears_into_the_shift():
    gear = np.array([1, 1, 0, 0, 3, 3, 5, 5, 0, 3])
    assert shift_list.gear_changes(gear) == [(1, 4, 1, 3), (5, 6, 3, 5), (7, 9, 5, 3)]
    assert shift_list.gear_changes(np.array([2, 2, 2])) == []


def _powershift_swaps():
    plant = load_plant("powershift")
    trace = run_offline(plant, load_scenario(ROOT / "scenarios" / "powershift_swaps.toml").compile(plant))
    return trace, shift_list.shift_list(trace.names, trace.time, trace.values)


def test_the_powershift_swaps_are_listed_with_their_clutches_energies_and_ends_at_the_stick_events():
    trace, rows = _powershift_swaps()
    assert [(r["from_gear"], r["to_gear"], r["off_going"], r["on_coming"]) for r in rows] == [
        (1, 3, "c1", "c2"), (3, 5, "c2+c3", "c1+c5"), (5, 12, "c1+c5+c6", "c2+c4+c7")]  # the scenario's swaps
    dt = trace.time[1] - trace.time[0]
    for r in rows:
        # the end: the first row in the new gear, within a step after the last on-coming clutch sticks
        on_coming = r["on_coming"].upper().split("+")  # the events name the clutches C1..C8
        sticks = [e["time"] for e in trace.events
                  if e["type"] == "stick" and e["clutch"] in on_coming and r["start_s"] <= e["time"] <= r["end_s"]]
        assert sticks and 0.0 <= r["end_s"] - max(sticks) <= dt + 1e-12, (r, sticks)
        # the start: the on-coming clutches are pressed (the scenario fills them at 0.5, 1.7 and 2.5 s)
        assert r["start_s"] in (0.525, 1.719, 2.525) or r["start_s"] > r["end_s"] - 0.5, r
        assert 0.0 <= r["tie_up_J"] <= r["clutch_energy_J"], r
        assert r["flare_rad_s"] >= 0.0 and r["note"] == ""
    # energy: the shifts' clutch energies are part of what all clutches dissipate over the run
    total = sum(trace.column(f"energy_c{i}")[-1] - trace.column(f"energy_c{i}")[0] for i in range(1, 9))
    assert 0 < sum(r["clutch_energy_J"] for r in rows) <= total


def test_a_plant_without_a_gear_output_has_no_shift_list_and_a_missing_speed_is_a_note_not_a_number():
    assert shift_list.shift_list(["w_1", "stuck_c1"], np.arange(3.0), np.zeros((3, 2))) == []
    names = ["gear", "stuck_a", "energy_a", "stuck_b", "energy_b"]
    values = np.array([[1, 1, 0, 0, 0], [1, 1, 0, 0, 1], [2, 0, 5, 1, 2]], dtype=float)
    (row,) = shift_list.shift_list(names, np.array([0.0, 0.1, 0.2]), values)
    assert (row["off_going"], row["on_coming"]) == ("a", "b") and math.isnan(row["flare_rad_s"])
    # from the old gear's last row (no capacity output: no torque phase to go back through): 5 J + 1 J
    assert "no flare" in row["note"] and row["clutch_energy_J"] == 6.0


def test_simulate_writes_the_shift_list_beside_the_trace(tmp_path, capsys):
    assert main(["simulate", "powershift", "--scenario", str(ROOT / "scenarios" / "powershift_swaps.toml"),
                 "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    with open(tmp_path / "shifts.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == list(shift_list.COLUMNS) and len(rows) == 3
    assert [(r["from_gear"], r["to_gear"]) for r in rows] == [("1", "3"), ("3", "5"), ("5", "12")]
    assert json.loads((tmp_path / "events.json").read_text())["trace_file"] == "trace.csv"  # beside it
    assert "3 shifts (shifts.csv):" in out and " 1->3 " in out and "c1+c5+c6 -> c2+c4+c7" in out
