"""The built-in defaults enable CAN for every plant: a plant without a message set runs with CAN idle."""

from __future__ import annotations

import pytest

from can_support import Harness, peer_bus, bus_options

from io_adapters.base import LoopContext, create_adapter, new_tick_info
from plant_models.config import ConfigError
from plant_models.registry import load_plant


def test_plant_without_message_set_leaves_can_idle_and_says_why():
    with Harness("chain") as h:
        st = h.adapter.status()
        assert st["open"] is False
        assert "no CAN message set for the chain plant" in st["idle"]
        with peer_bus(h.options) as peer:
            h.run(20)
            # nothing is sent, nothing feeds the watchdog, and the plant runs on as without CAN
            assert peer.recv(timeout=0.05) is None
        assert h.feeds == []
        assert h.plant.time == pytest.approx(20 * h.period_s)


def test_explicit_message_set_that_is_missing_is_an_error():
    plant = load_plant("chain")
    ctx = LoopContext(period_s=0.001, feed_watchdog=lambda now: None, status=lambda: {},
                      tick_info=new_tick_info())
    adapter = create_adapter("can", "can", dict(bus_options("virtual"), message_set="io_can_chain.toml"))
    with pytest.raises(ConfigError, match="io_can_chain.toml: file not found"):
        adapter.open(plant, ctx)
    adapter.close()
