"""``describe`` shows every gear with its engaged elements and its ratio, input speed over output speed, for
every plant with gears, and says where its units hold (ZeroMQ: as listed; CAN: the DBC's rpm).

The ratio is one quantity everywhere, input speed over output speed: the Powershift's gear 1 is 48 in the
table and in its ``ratio`` output alike.  The table is checked against the running plant: in a locked gear
the input speed over the output speed, and the ``ratio`` output, are the table's ratio.
"""

from __future__ import annotations

import pytest

from plant_models.registry import describe_config, load_plant
from server.cli import main
from server.offline.scenario import load_scenario
from server.offline.run import run_offline


def _end_ratio(config: str, scenario: str, w_in: str, w_out: str) -> tuple[int, float, float]:
    """(gear, w_in / w_out, the plant's `ratio` output) at the end of the scenario."""
    plant = load_plant(config)
    tr = run_offline(plant, load_scenario(scenario).compile(plant, warn=False))
    return int(tr.column("gear")[-1]), tr.column(w_in)[-1] / tr.column(w_out)[-1], tr.column("ratio")[-1]


def test_the_powershift_gears_are_its_clutch_triples_with_the_reduction():
    d = describe_config("powershift")
    plant = load_plant("powershift")
    assert [g["number"] for g in d["gears"]] == list(range(1, 19))
    for g in d["gears"]:
        assert g["engaged"] == [f"C{c}" for c in plant.gear_clutches(g["number"])]
        assert g["ratio"] == plant.gear_ratio(g["number"])
    assert d["gears"][0]["ratio"] == pytest.approx(48.0, rel=1e-12) and d["gears"][0]["engaged"] == ["C1", "C3", "C6"]
    # the same numbers as the Powershift described as data
    described = describe_config("powershift_described")["gears"]
    assert [g["ratio"] for g in described] == pytest.approx([g["ratio"] for g in d["gears"]], rel=1e-12)
    assert [[e.upper() for e in g["engaged"]] for g in described] == [g["engaged"] for g in d["gears"]]


def test_the_powershift_table_is_what_the_plant_does_in_gear_3():
    gear, ratio, output = _end_ratio("powershift", "powershift_single_swap", "w_1", "w_out")
    table = describe_config("powershift")["gears"][gear - 1]["ratio"]
    assert gear == 3 and table == pytest.approx(32.0, rel=1e-12)
    assert ratio == pytest.approx(table, rel=1e-9)
    assert output == pytest.approx(table, rel=1e-9)  # the `ratio` output: input over output, like the table


def test_the_dct_gears_are_clutch_and_synchronizer_with_gear_times_final_drive():
    d = describe_config("dct")
    assert [g["engaged"] for g in d["gears"][:2]] == [["C1", "S_odd:1"], ["C2", "S_even:2"]]
    gear, ratio, out = _end_ratio("dct", "dct_upshift", "w_engine", "w_out")
    assert gear >= 2
    assert ratio == pytest.approx(d["gears"][gear - 1]["ratio"], rel=1e-9)


@pytest.mark.parametrize("config, can", [("powershift", True), ("dct", True), ("chain", False)])
def test_describe_prints_the_gear_table_and_where_the_units_hold(config, can, capsys):
    assert main(["describe", config]) == 0
    out = capsys.readouterr().out
    units = next(ln for ln in out.splitlines() if ln.startswith("units: "))
    assert units.startswith("units: as listed over ZeroMQ, in scenarios, traces and recordings (speeds in rad/s)")
    assert ("over CAN as the DBC states them, converted by the adapter (speeds in rpm, "
            f"configs/io_can_{config}.toml)" in units) is can
    if config == "powershift":
        assert "gears (engaged elements; ratio = input speed / output speed)" in out
        assert "  1    C1, C3, C6               48.0000" in out.splitlines()
    elif config == "chain":
        assert "gears" not in out
