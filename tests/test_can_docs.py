"""docs/can.md shows the message sets as they are: its tables equal the ones generated from the files."""

from __future__ import annotations

from can_support import ROOT
from io_adapters.can.message_set import message_table_markdown


def test_message_set_tables_in_the_docs_are_current():
    doc = (ROOT / "docs" / "can.md").read_text()
    for name in ("io_can_powershift", "io_can_dct", "io_can_zf8hp", "io_can_powershift_mux"):
        table = message_table_markdown(name)
        assert table in doc, f"docs/can.md is out of date for {name}: python -m io_adapters.can.message_set {name}"


def test_docs_give_the_vcan_setup():
    doc = (ROOT / "docs" / "can.md").read_text()
    assert "ip link add dev vcan0 type vcan" in doc and "ip link set up vcan0" in doc


def test_fd_and_j1939_tables_in_the_docs_are_current():
    from io_adapters.can.j1939 import dbc_table_markdown

    doc = (ROOT / "docs" / "can.md").read_text()
    for name in ("io_can_dct_fd", "io_can_zf8hp_fd"):
        assert message_table_markdown(name) in doc, \
            f"docs/can.md is out of date for {name}: python -m io_adapters.can.message_set {name}"
    assert dbc_table_markdown("powershift_j1939.dbc") in doc, \
        "docs/can.md is out of date for the J1939 set: python -m io_adapters.can.j1939 powershift_j1939.dbc"
