"""I/O configs compose with the defaults: every table a file leaves out, the adapters included, keeps the default.

The shipped configs say "every key not given here keeps the default of
io_default.toml", and docs/testing.md shows a config holding only a
``[recording]`` table; such a file must serve on the default adapters.  The
docs' example I/O configs are read here as files.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from plant_models.config import ConfigError
from server.runtime import apply_adapter_options, load_io_config

ROOT = Path(__file__).resolve().parent.parent


def toml_blocks(doc: str) -> list[str]:
    return re.findall(r"```toml\n(.*?)```", (ROOT / "docs" / doc).read_text(), re.S)


def recording_example() -> str:
    """The ``[recording]`` example of docs/testing.md, as the guide shows it."""
    return next(b for b in toml_blocks("testing.md") if b.startswith("[recording]"))


def _adapters(io) -> list[tuple[str, str, dict]]:
    return [(a.type, a.name, a.options) for a in io.adapters]


DEFAULT = _adapters(load_io_config(None))


def test_the_default_has_a_zmq_and_a_can_adapter():
    assert [(t, n) for t, n, _ in DEFAULT] == [("zmq", "zmq"), ("can", "can")]
    assert DEFAULT[0][2]["control_endpoint"] == "tcp://127.0.0.1:5555"


def test_a_file_with_only_the_docs_recording_table_keeps_the_default_adapters(tmp_path):
    p = tmp_path / "rec.toml"
    p.write_text(recording_example())
    io = load_io_config(p)
    assert _adapters(io) == DEFAULT
    assert io.recording is not None and io.recording.folder == tmp_path / "recordings"
    assert io.recording.every == 1 and io.recording.name == "rec"
    # the command of the issue: `serve ... --io rec.toml --zmq-port 0` ("has no enabled zmq adapter" before)
    moved = apply_adapter_options(io, {"zmq": {"--zmq-port": 0}})
    assert next(a for a in moved.adapters if a.type == "zmq").options["control_endpoint"] == "tcp://127.0.0.1:0"


def test_a_file_with_only_a_watchdog_table_keeps_the_default_adapters(tmp_path):
    p = tmp_path / "wd.toml"
    p.write_text("[watchdog]\nenabled = false\n")
    io = load_io_config(p)
    assert _adapters(io) == DEFAULT and io.watchdog.enabled is False


def test_adapters_of_a_file_replace_the_default_ones_and_an_empty_list_means_none(tmp_path):
    p = tmp_path / "zmq_only.toml"
    p.write_text('[[adapters]]\ntype = "zmq"\ncontrol_endpoint = "tcp://127.0.0.1:7000"\n')
    assert [(t, n) for t, n, _ in _adapters(load_io_config(p))] == [("zmq", "zmq")]
    p.write_text('adapters = []\n[loop]\nmode = "lockstep"\n')
    assert load_io_config(p).adapters == ()
    with pytest.raises(ConfigError) as ei:
        apply_adapter_options(load_io_config(p), {"zmq": {"--zmq-port": 0}})
    assert "has no enabled zmq adapter" in str(ei.value)


def test_the_shipped_io_configs_load_with_the_adapters_they_name():
    assert [t for t, _, _ in _adapters(load_io_config("io_10khz"))] == ["zmq"]
    assert [t for t, _, _ in _adapters(load_io_config("io_can"))] == ["zmq", "can"]


@pytest.mark.parametrize("doc", ["server.md", "testing.md"])
def test_the_docs_example_io_configs_load_as_files(doc, tmp_path):
    """Each ```toml block of the guide that is an I/O config loads as a file of its own, adapters kept."""
    blocks = [b for b in toml_blocks(doc) if re.match(r"\[(loop|recording|watchdog)\]", b)]
    assert blocks, doc
    for k, block in enumerate(blocks):
        p = tmp_path / f"example_{k}.toml"
        p.write_text(block)
        io = load_io_config(p)
        if "[[adapters]]" not in block:
            assert _adapters(io) == DEFAULT, block
