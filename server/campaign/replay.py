"""``gearbox-hil campaign FILE --out DIR --replay RUN``: one run of a campaign over a test file, as a test file.

The run's parameter values are applied to the base (:func:`.spec.apply_all`)
and written out as an ordinary test file with its own plant config
(``DIR/replay/run_NNNNNN/test.toml`` and ``plant.toml``): the test's
expectations as they are, its stimulus inline (``[stimulus]``), its fault
schedule and its controller's table with the run's changes, mode
``offline``.  That file is then run by the test bench
(:func:`server.testbench.runner.run_test`, what ``gearbox-hil test`` does)
and its verdicts printed; when the campaign's table holds the run, every
expectation's verdict, failing time and failing value are compared with
its row, bit for bit.  The file stays, to be run again, edited, or run in
lockstep mode against a server (``mode = "lockstep"``: the same results).

The TOML writer here writes what the readers gave (tables, arrays of
tables, strings, numbers, booleans, lists): each float as its shortest
``repr``, which reads back to the same bits.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from plant_models.config import ConfigError

from .spec import CampaignSpec, apply_all, case_values
from .testbase import PARTS, VERDICT, column, device_io

REPLAY = "replay"
_BARE = re.compile(r"[A-Za-z0-9_-]+$")


# -- TOML ---------------------------------------------------------------------------------------------------
def _key(k: str) -> str:
    return k if _BARE.match(k) else json.dumps(k)


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))
    if isinstance(v, str):
        return json.dumps(v)  # JSON's escapes are TOML's basic-string escapes
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def _is_table_array(v) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def dumps(data: dict) -> str:
    """TOML text of parsed TOML data (what :func:`plant_models.config.load_toml` gives back)."""
    lines: list[str] = []

    def table(path: list[str], d: dict) -> None:
        for k, v in d.items():
            if not isinstance(v, dict) and not _is_table_array(v):
                lines.append(f"{_key(k)} = {_value(v)}")
        for k, v in d.items():
            name = ".".join(_key(p) for p in path + [k])
            if isinstance(v, dict):
                lines.extend(["", f"[{name}]"])
                table(path + [k], v)
            elif _is_table_array(v):
                for item in v:
                    lines.extend(["", f"[[{name}]]"])
                    table(path + [k], item)

    table([], data)
    return "\n".join(lines).lstrip("\n") + "\n"


# -- the replay -----------------------------------------------------------------------------------------------
def write_replay(spec: CampaignSpec, run: int, out: Path) -> Path:
    """Write run ``run`` of the campaign as a test file with its plant config; returns the test file's path."""
    if not spec.judged:
        raise ConfigError(spec.source, "--replay", "replays runs of a campaign over a test file (test = FILE)")
    if not 0 <= run < spec.runs:
        raise ConfigError(spec.source, "--replay", f"run {run} is not a run of this campaign (0 .. {spec.runs - 1})")
    values = case_values(spec, [run])[0]
    case = apply_all(spec, values)
    folder = out / REPLAY / f"run_{run:06d}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "plant.toml").write_text(f"# {spec.config_source} with run {run} of {spec.source} applied\n"
                                       + dumps(case.config))
    test = {k: v for k, v in spec.test_data.items()
            if k not in ("plant", "mode", "scenario", "stimulus", "duration_s", "dt_s", "io", "name", "faults",
                         "controller")}
    setting = ", ".join(f"{p.name} = {v!r}" for p, v in zip(spec.parameters, values))
    head = {"name": f"{spec.test_name} (run {run} of campaign {Path(spec.source).stem})", "plant": "plant.toml",
            "mode": "offline"}
    body = {**head, **test}
    if case.scenario is not None:
        body["stimulus"] = case.scenario
    else:
        body["duration_s"] = spec.duration_s
        body["dt_s"] = spec.dt
    if case.faults:
        body["faults"] = case.faults
    io = device_io(spec)
    if io is not None:  # the device TCU of the test's I/O config drives the run (named from the replay's folder on)
        body["io"] = str(io.resolve())
    if case.controller is not None:  # its file named from the replay's folder on
        body["controller"] = {**case.controller, "class": _target(case.controller.get("class"), spec)}
    path = folder / "test.toml"
    path.write_text(f"# Run {run} of the campaign {spec.source} over the test {spec.test_source}:\n# {setting}\n"
                    + dumps(body))
    return path


def _target(target, spec: CampaignSpec):
    """A controller class ``file.py:Class`` relative to the test file's folder, as an absolute path (others as
    they are: a module, or a file the loader finds from the repository)."""
    if not isinstance(target, str) or target.count(":") != 1:
        return target
    where, cls = target.split(":")
    here = Path(spec.test_source).resolve().parent / where
    return f"{here.resolve()}:{cls}" if where.endswith(".py") and here.is_file() else target


def table_row(out: Path, spec: CampaignSpec, run: int) -> dict | None:
    """The run's row of ``OUT/campaign.parquet`` (column -> value), or None when the table has no such run."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from .engine import TABLE

    path = out / TABLE
    if not path.is_file():
        return None
    t = pq.read_table(path)
    if t.schema.metadata.get(b"digest", b"").decode() != spec.digest:
        return None
    rows = t.filter(pc.equal(t["run"], run)).to_pylist()
    return rows[0] if rows else None


def compare(row: dict, result) -> list[str]:
    """Differences between a table row and a test bench result (empty: the same verdicts, times, values, bits)."""
    import struct

    def same(a, b) -> bool:
        a = math.nan if a is None else a
        b = math.nan if b is None else b
        return struct.pack("<d", a) == struct.pack("<d", b) or (math.isnan(a) and math.isnan(b))

    diffs = []
    verdicts = [v for v in result.verdicts if v.key.startswith("expect[")]
    for k, v in enumerate(verdicts):
        label = "pass" if v.passed else ("error" if v.error else "fail")
        t = math.nan if v.passed or v.t is None else v.t
        value = math.nan if v.passed or v.value is None else v.value
        want = [row[column(k, p)] for p in PARTS]
        if want[0] != label or not same(want[1], t) or not same(want[2], value):
            diffs.append(f"expect[{k}] ({v.name}): the table has {want[0]} at {want[1]!r} s, value {want[2]!r}; "
                         f"the replay {label} at {t!r} s, value {value!r}")
    if len(verdicts) != len(result.verdicts):
        diffs.append("the replay had errors of the run itself: " + "; ".join(
            v.message for v in result.verdicts if not v.key.startswith("expect[")))
    return diffs


def replay(spec: CampaignSpec, run: int, out: Path) -> int:
    """Write and run the replay of a run, print its verdicts and whether they are the table's; the exit code."""
    from server.testbench.report import print_result
    from server.testbench.runner import run_test
    from server.testbench.spec import load_test

    path = write_replay(spec, run, out)
    print(f"replay of run {run}: {path}", flush=True)
    result = run_test(load_test(path))
    print_result(result)
    row = table_row(out, spec, run)
    if row is None:
        print(f"the campaign's table in {out} has no run {run} to compare with")
    else:
        diffs = compare(row, result)
        if diffs:
            for d in diffs:
                print(f"  DIFFERS {d}")
            print(f"replay of run {run}: the verdicts differ from the campaign table's row")
            return 3
        print(f"replay of run {run}: the same verdicts, failing times and values as the campaign table "
              f"(run verdict: {row[VERDICT]})")
    return 0 if result.passed else 1


__all__ = ["REPLAY", "compare", "dumps", "replay", "table_row", "write_replay"]
