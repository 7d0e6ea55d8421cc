"""The plant contract's vocabulary (plant_models/contract/vocabulary.py): status bits, event kinds, counters.

Every plant names its status bits through one object; the live status, the
offline run's events.json and the plant itself name a word the same way.
"""

from __future__ import annotations

import numpy as np
import pytest

from plant_models.contract import vocabulary as V
from plant_models.core import layout as L
from plant_models.friction_plant import CORE_STATUS
from plant_models.registry import load_plant
from server.realtime.loop_config import LoopConfig
from server.realtime.runtime import assemble
from server.offline.run import status_bit_names


def test_the_live_status_of_a_dct_server_names_the_rejected_gear_command():
    plant = load_plant("dct")
    srv = assemble(plant, [], LoopConfig(mode="lockstep"))
    srv.loop.start()
    srv.loop.step(5)
    assert srv.report.status()["plant"]["status_names"] == []
    k = plant.input_index("gear_odd")
    # a command that slipped past the transports' checks: 2 is an even gear; the step keeps the selection
    srv.loop.apply_inputs(np.array([k]), np.array([2.0]), 1)
    srv.loop.step(1)
    st = srv.report.status()["plant"]
    assert st["status_word"] & 256
    assert "gear_command_rejected" in st["status_names"]
    assert st["status_names"] == status_bit_names(plant, st["status_word"]) == plant.status_names(st["status_word"])


def test_the_plants_command_rejected_bits_are_allocated_at_256():
    from plant_models.plants import dct, transmission

    assert dct.ST_GEAR_REJECTED == 256 and transmission.ST_GEAR_REJECTED == 256
    assert dct.STATUS.names()[256] == "gear_command_rejected"
    assert transmission.STATUS.names()[256] == "selector_command_rejected"
    assert 256 not in CORE_STATUS.names()  # each plant allocated in its own copy of the core's bits


def test_the_servo_allocates_its_hard_stop_events_after_the_shared_friction_events():
    from plant_models.plants import servo_kernel as servo  # the servo's kernels and the events they log

    assert (servo.EV_STOP_HIT, servo.EV_STOP_RELEASE) == (4, 5)
    assert servo.EVENTS.names() == {1: "stick", 2: "breakaway", 3: "reversal", 4: "stop_hit", 5: "stop_release"}


def test_the_allocator_hands_out_each_bit_once_and_refuses_clashes():
    bits = CORE_STATUS.extend("a test plant")
    a = bits.allocate("first")
    b = bits.allocate("second")
    assert (a, b) == (256, 512)
    with pytest.raises(ValueError, match="already"):
        bits.allocate("first")
    with pytest.raises(ValueError, match="already 'locked'"):
        bits.declare(L.ST_LOCKED, "my_locked")
    with pytest.raises(ValueError, match="power of two below 256"):
        bits.declare(3, "two_bits")
    with pytest.raises(ValueError, match="power of two below 256"):
        bits.declare(1024, "a_plant_bit_by_hand")
    for k in range(6):  # 1024 .. 32768: the high byte is full
        bits.allocate(f"more_{k}")
    with pytest.raises(ValueError, match="no status bit left"):
        bits.allocate("one_too_many")
    assert bits.names_of(a | L.ST_BAD_INPUT | 1) == ["overconstrained", "bad_input", "first"]


def test_the_core_reports_in_the_contracts_vocabulary():
    """The core's compiled constants are the contract's numbers, and its bits keep their names."""
    assert (L.ST_OK, L.ST_NONFINITE, L.ST_BAD_INPUT) == (V.ST_OK, V.ST_NONFINITE, V.ST_BAD_INPUT)
    assert L.EVENT_NAMES == {V.EV_STICK: "stick", V.EV_BREAKAWAY: "breakaway", V.EV_REVERSAL: "reversal"}
    assert CORE_STATUS.names() == dict(sorted(L.STATUS_NAMES.items()))
    cnt = [getattr(L, "CNT_" + n.upper()) for n in V.COUNTER_NAMES]
    assert cnt == list(range(V.N_COUNTERS)) == [getattr(V, "CNT_" + n.upper()) for n in V.COUNTER_NAMES]
