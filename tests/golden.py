"""Golden traces: fingerprints of every shipped scenario's offline run, fixed before the renovation.

``python tests/golden.py --write`` recomputes ``tests/data/golden_traces.json``
(only when a change of the numbers is intended and explained).  A fingerprint
is the SHA-256 of the trace's float64 bytes (time column then every output,
row by row, little-endian) and of the events as ``repr(time) clutch type``
lines, so it pins every bit without storing megabytes.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

GOLDEN_FILE = Path(__file__).parent / "data" / "golden_traces.json"

# (plant config, scenario, dt override or None): every scenario with the config it is written for,
# the variant configs that ship with a scenario of their own, and two finer steps
CASES = [
    ("powershift.toml", "powershift_single_swap.toml", None),
    ("powershift.toml", "powershift_double_swap.toml", None),
    ("powershift.toml", "powershift_triple_swap.toml", None),
    ("powershift.toml", "powershift_swaps.toml", None),
    ("powershift.toml", "powershift_swaps.toml", 5e-5),
    ("powershift_kinematic.toml", "powershift_kinematic_swap.toml", None),
    ("dct.toml", "dct_upshift.toml", None),
    ("dct.toml", "dct_upshift.toml", 1e-4),
    ("dct_kinematic.toml", "dct_kinematic_upshift.toml", None),
    ("chain.toml", "chain_4mass.toml", None),
    ("damper.toml", "damper_clutch_engagement.toml", None),
    ("damper_two_stage.toml", "damper_clutch_engagement.toml", None),
    ("kinematic.toml", "kinematic_engagement.toml", None),
    ("kinematic_modified.toml", "kinematic_engagement_modified.toml", None),
    ("servo.toml", "servo_deploy_pressure_drop.toml", None),
    ("servo.toml", "servo_hard_stops.toml", None),
    ("servo.toml", "servo_load_step_ramp.toml", None),
    ("servo.toml", "servo_ramp_tracking.toml", None),
    ("servo.toml", "servo_retract_4deg_pressure_drop.toml", None),
    ("servo.toml", "servo_retract_pressure_drop.toml", None),
    ("servo.toml", "servo_slow_ramp_stick_slip.toml", None),
    ("servo_irreversible.toml", "servo_retract_pressure_drop.toml", None),
]


def case_id(config: str, scenario: str, dt: float | None) -> str:
    return f"{Path(config).stem}/{Path(scenario).stem}" + (f"@{dt:g}" if dt else "")


def run_case(config: str, scenario: str, dt: float | None):
    """Run one case offline: (the table of time and every output as little-endian float64, the trace)."""
    from plant_models.config import repo_root
    from plant_models.registry import load_plant
    from server.offline.scenario import load_scenario
    from server.offline.run import run_offline

    root = repo_root()
    plant = load_plant(root / "configs" / config)
    compiled = load_scenario(root / "scenarios" / scenario).compile(plant, dt)
    trace = run_offline(plant, compiled)
    return np.column_stack([trace.time, trace.values]).astype("<f8"), trace


def table_sha256(table: np.ndarray) -> str:
    """The fingerprint of a table: SHA-256 of its float64 bytes, row by row, little-endian."""
    return hashlib.sha256(np.ascontiguousarray(table, dtype="<f8").tobytes()).hexdigest()


def fingerprint(config: str, scenario: str, dt: float | None) -> dict:
    """Run one case offline and fingerprint its trace and events."""
    table, trace = run_case(config, scenario, dt)
    events = "".join(f"{e['time']!r} {e['clutch']} {e['type']}\n" for e in trace.events)
    return {
        "rows": int(table.shape[0]),
        "columns": ",".join(["t"] + list(trace.names)),
        "trace_sha256": table_sha256(table),
        "events": len(trace.events),
        "events_sha256": hashlib.sha256(events.encode()).hexdigest(),
        "status_or": int(trace.status_or),
        "last_row": [repr(float(v)) for v in table[-1]],
    }


def main(argv: list[str]) -> int:
    if argv != ["--write"]:
        print("usage: python tests/golden.py --write", file=sys.stderr)
        return 2
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's packages first
    out = {case_id(*c): fingerprint(*c) for c in CASES}
    GOLDEN_FILE.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN_FILE.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {len(out)} fingerprints to {GOLDEN_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
