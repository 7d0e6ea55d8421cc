"""Column tables (plant_models/contract/columns.py): the slot numbers of the converted modules come from them.

For each converted module: every :class:`Columns` table it declares has its constants in the module's
globals as plain ints equal to the table's (numba compiles them in); the named slots of a table are
unique and laid out without overlap from its start; its count is the sum of the widths; and no slot
or column number is written by hand any more (``NAME = <int>`` lines are only the real constants
listed here: sizes, bit masks, kinds).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from plant_models.contract.columns import Columns

ROOT = Path(__file__).resolve().parents[1]

# module -> the ``NAME = <int>`` lines left, each a real constant, not a slot or column number
CONVERTED = {
    "io_adapters.can.frames": {"MAX_PAYLOAD", "SOURCE_PLANT", "SOURCE_AUX", "DELAY_MAX"},
    "plant_models.plants.transmission_kernel": set(),
    "plant_models.plants.servo_kernel": {"EVENT_CAPACITY", "MPA"},  # MPA = 1.0e6, Pa per MPa
    "plant_models.run.ring": {"N_AUX"},
    "plant_models.run.fault_tables": {"MAX_FAULTS", "K_FORCE", "K_HOLD", "K_OFFSET", "K_GAIN", "K_NOISE",
                                      "K_CLAMP"},
    "plant_models.contract.vocabulary": {"ST_OK", "ST_NONFINITE", "ST_BAD_INPUT", "SOLVER_BITS_BELOW", "PLANT_BITS_BELOW",
                                         "EV_STICK", "EV_BREAKAWAY", "EV_REVERSAL", "PLANT_EVENTS_FROM"},
    # carry bits and sizes
    "plant_models.run.compiled": {"FED", "CHANGED", "READS", "MAX_STAGES", "WARM_ARRAY_MAX_BYTES", "WARM_CODE_BYTES",
                                  "PAGE_BYTES"},
    "server.realtime.telemetry": {"N_BINS"},  # the histogram's bins: a size
    "server.realtime.watchdog": {"OK", "HOLD", "RAMP", "SAFE"},  # the phases, a kind
    "io_adapters.zmq.codec": set(),
    "io_adapters.handover": set(),
    "plant_models.plants.chain": {"MAX_BODIES"},  # a size
    "plant_models.input_table": {"TAB_CONST", "TAB_LINEAR", "TAB_STEPS", "TAB_SINE"},  # the table kinds
    "plant_models.run.offline_compiled": set(),
    "server.realtime.scenario_player": set(),
    "plant_models.plants.damper": set(),
    "plant_models.plants.viscous_coupling": set(),
}
HAND_NUMBERED = re.compile(r"^([A-Z][A-Z0-9_]*) = [0-9]+", re.M)


def tables(module) -> list[Columns]:
    return [v for v in vars(module).values() if isinstance(v, Columns)]


@pytest.mark.parametrize("name", sorted(CONVERTED))
def test_module_constants_are_the_tables(name):
    module = importlib.import_module(name)
    found = tables(module)
    assert found, f"{name} declares no column table"
    for table in found:
        assert table.check(vars(module)) == [], table.title
        rows = [r for r in table.rows() if r[0] is not None]
        names = [r[0] for r in rows]
        assert len(names) == len(set(names)), table.title
        # laid out in order without gaps or overlap: each entry starts where the previous one ended
        off = table.start
        for _name, start, width, doc in table.rows():
            assert start == off and width >= 0 and doc, (table.title, _name)
            off += width
        if table.count is not None:
            assert getattr(module, table.count) == off == table.size()
        for n in names:
            assert type(getattr(module, n)) is int  # a plain int: numba folds it into the kernels


@pytest.mark.parametrize("name", sorted(CONVERTED))
def test_no_slot_number_left_by_hand(name):
    path = ROOT / (name.replace(".", "/") + ".py")
    left = set(HAND_NUMBERED.findall(path.read_text(encoding="utf-8")))
    assert left == CONVERTED[name]


def test_every_table_name_is_used_once_across_a_module():
    """Two tables of one module never make the same constant (the second would overwrite the first)."""
    for name in CONVERTED:
        seen: dict[str, str] = {}
        for table in tables(importlib.import_module(name)):
            for const in table.constants():
                assert const not in seen, (name, const, seen.get(const), table.title)
                seen[const] = table.title


def test_offsets_widths_reserved_and_count():
    t = Columns("t", (("A_X", "x"), ("A_BLOCK", "block", 4), (None, "spare", 2), ("A_Y", "y")), count="A_COLS")
    assert t.constants() == {"A_X": 0, "A_BLOCK": 1, "A_Y": 7, "A_COLS": 8}
    assert Columns("s", (("B_X", "x"),), count="B_END", start=5).constants() == {"B_X": 5, "B_END": 6}
    assert Columns("u", (("C_X", "x"), ("C_TAIL", "sized at run time", 0))).constants() == {"C_X": 0, "C_TAIL": 1}


def test_shifted_rebases_a_nested_table():
    inner = Columns("inner", (("TI_A", "a"), ("TI_B", "b")), count="TI_N")
    assert inner.shifted(3, "TI_", "I_") == {"I_A": 3, "I_B": 4}
    with pytest.raises(ValueError, match="does not start"):
        inner.shifted(0, "X_", "I_")


@pytest.mark.parametrize("entries, count, message", [
    ((("A", "a"), ("A", "again")), None, "repeats"),
    ((("a_low", "a"),), None, "upper-case"),
    ((("A", "a", -1),), None, "width"),
    ((("A", "a", 1.5),), None, "width"),
    ((("A",),), None, "entry"),
    ((("A", "a"),), "A", "count"),
])
def test_bad_tables_are_refused(entries, count, message):
    with pytest.raises(ValueError, match=message):
        Columns("bad", entries, count=count)


def test_check_reports_a_differing_module_constant():
    t = Columns("t", (("A_X", "x"), ("A_Y", "y")), count="A_N")
    assert t.check({"A_X": 0, "A_Y": 1, "A_N": 2}) == []
    assert len(t.check({"A_X": 0, "A_Y": 2, "A_N": 2})) == 1
    assert len(t.check({"A_X": 0, "A_Y": 1.0, "A_N": 2})) == 1  # a float would not index a buffer
    assert len(t.check({"A_X": 0, "A_Y": 1})) == 1


def test_describe_lists_every_slot_and_the_count():
    from io_adapters.can.frames import CI_SLOTS
    lines = CI_SLOTS.describe()
    assert len(lines) == len(CI_SLOTS.entries) + 1
    assert "CI_RX_M" in lines[6] and lines[6].split()[0] == "10"
    assert "(reserved)" in lines[5] and lines[5].split()[0] == "5..9"
    assert lines[-1].split()[:3] == ["CI_HEADER", "=", "40,"]
