"""The adapter interface: the explicit type table, the per-tick template, the shared status keys."""

from __future__ import annotations

import numpy as np
import pytest

from io_adapters import base
from io_adapters.base import (ADAPTERS, TI_SCENARIO, Adapter, AdapterError, CommandCounts, LoopContext,
                              UnknownAdapterType, adapter_types, create_adapter, new_tick_info, register_adapter)
from plant_models.config import ConfigError


class Scripted(Adapter):
    """A transport whose reads apply a scripted number of commands (the plant is not touched)."""

    type_name = "scripted"

    def __init__(self, name: str = "scripted", options: dict | None = None):
        super().__init__(name, options or {})
        self.script: list[int] = []
        self.seen_drive: list[bool] = []
        self.applied = 0
        self.rejected = {"bad": 0}

    def _read_internal(self, tick, now_ns, drive):
        self.seen_drive.append(drive)
        n = self.script.pop(0) if self.script else 0
        if not drive:
            self.rejected["bad"] += n
            return 0
        self.applied += n
        return n

    def write(self, tick, now_ns):
        pass

    def close(self):
        pass

    def command_counts(self):
        return CommandCounts(self.applied, dict(self.rejected))

    def _status_internal(self):
        return {"type": self.type_name, "open": True}


def _opened(adapter: Adapter) -> tuple[Adapter, list[int], np.ndarray]:
    feeds: list[int] = []
    ctx = LoopContext(period_s=0.001, feed_watchdog=feeds.append, status=dict)
    adapter.open(None, ctx)
    return adapter, feeds, ctx.tick_info


def test_the_table_names_every_built_in_type_and_an_unknown_type_lists_them_all():
    assert ADAPTERS == {"zmq": ("io_adapters.zmq.adapter", "ZmqAdapter"),
                        "can": ("io_adapters.can.adapter", "CanAdapter"),
                        "j1939": ("io_adapters.can.restbus", "J1939Adapter"),
                        "web": ("io_adapters.web.adapter", "WebAdapter"),
                        "xcp": ("io_adapters.xcp.adapter", "XcpAdapter"),
                        "device": ("io_adapters.devices.adapter", "DeviceAdapter"),
                        "uds": ("io_adapters.can.uds_adapter", "UdsAdapter")}
    with pytest.raises(UnknownAdapterType) as ei:
        create_adapter("serial", "x", {})
    assert str(ei.value) == "unknown adapter type 'serial'; known types: can, device, j1939, uds, web, xcp, zmq"
    assert isinstance(ei.value, AdapterError) and ei.value.known == ["can", "device", "j1939", "uds", "web", "xcp",
                                                                     "zmq"]


def test_a_built_in_type_is_imported_when_asked_for():
    a = create_adapter("zmq", "zmq", {"publish_every": 2})
    assert type(a).__name__ == "ZmqAdapter" and a.publish_every == 2
    with pytest.raises(ConfigError, match="publish_every"):
        create_adapter("zmq", "zmq", {"publish_every": 0})


def test_a_type_from_outside_is_registered_and_cannot_shadow_a_built_in(monkeypatch):
    monkeypatch.setattr(base, "_REGISTERED", {})
    register_adapter("scripted", Scripted)
    assert adapter_types() == ["can", "device", "j1939", "scripted", "uds", "web", "xcp", "zmq"]
    assert isinstance(create_adapter("scripted", "s1", {}), Scripted)
    with pytest.raises(ValueError, match="'can' is built in"):
        register_adapter("can", Scripted)


def test_read_feeds_the_watchdog_only_when_valid_commands_drive_the_plant():
    a, feeds, tick_info = _opened(Scripted())
    a.script = [0, 2, 1]
    for tick in range(3):
        a.read(tick, 1000 * tick)
    assert feeds == [1000, 2000]  # tick 0 applied nothing
    assert a.seen_drive == [True, True, True]


def test_read_while_a_scenario_drives_the_inputs_takes_commands_but_does_not_apply_or_feed():
    a, feeds, tick_info = _opened(Scripted())
    tick_info[TI_SCENARIO] = 1
    a.script = [3]
    a.read(0, 0)
    assert a.seen_drive == [False] and feeds == [] and a.applied == 0 and a.rejected == {"bad": 3}
    tick_info[TI_SCENARIO] = 0
    a.script = [1]
    a.read(1, 500)
    assert a.seen_drive == [False, True] and feeds == [500]


def test_status_adds_the_shared_keys_from_the_command_counts():
    a, _, _ = _opened(Scripted())
    a.script = [4]
    a.read(0, 0)
    a.rejected["bad"] = 2
    assert a.status() == {"type": "scripted", "open": True, "applied": 4,
                          "rejected": {"total": 2, "by_reason": {"bad": 2}}}
    assert a.command_counts().rejected_total == 2
    counts = CommandCounts(1, {"x": 0, "y": 1}, recent=("y: why",))
    assert counts.as_status() == {"applied": 1, "rejected": {"total": 1, "by_reason": {"x": 0, "y": 1},
                                                             "last": ["y: why"]}}


def test_an_adapter_without_a_read_says_so():
    class NoRead(Scripted):
        _read_internal = Adapter._read_internal

    a, _, _ = _opened(NoRead())
    with pytest.raises(NotImplementedError, match="NoRead implements neither read nor _read_internal"):
        a.read(0, 0)


def test_the_loop_context_holds_a_typed_tick_info():
    ctx = LoopContext(period_s=0.001, feed_watchdog=lambda ns: None, status=dict)
    assert ctx.tick_info.dtype == np.int64 and ctx.tick_info.shape == (5,) and ctx.mode == "realtime"
    assert ctx.control is None and ctx.log.name == "gearbox_hil.io"
    for bad in (np.zeros(5), np.zeros(4, dtype=np.int64), [0, 0, 0, 0, 0]):
        with pytest.raises(TypeError, match="tick_info must be an int64 array of 5 slots"):
            LoopContext(period_s=0.001, feed_watchdog=lambda ns: None, status=dict, tick_info=bad)
    assert new_tick_info().tolist() == [0, 0, 0, 0, 0]
