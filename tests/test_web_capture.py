"""The workspace's trigger and capture (io_adapters.web.capture) on a local state ring: exact ticks, exact values.

Rows are pushed with a known signal ``a`` (output 0) per tick; the captures
must hold exactly ticks ``T - pre .. T + post`` around the first tick ``T``
meeting the condition, with the pushed float64 values.
"""

from __future__ import annotations

import numpy as np
import pytest

from io_adapters.base import new_tick_info
from plant_models.run.ring import StateRing
from io_adapters.web.capture import Trigger, TriggerError

Y_OFF, U_OFF = 7, 2


def _ring():
    ring = StateRing(3, 2, Y_OFF, U_OFF, 4096, ("a", "b", "c"), ("u0", "u1"))
    by_name = {"a": ring.f_y, "b": ring.f_y + 1, "u0": ring.f_u}
    return ring, by_name


def _push(ring, tick: int, a: float) -> None:
    df = np.zeros(10)
    df[Y_OFF], df[Y_OFF + 1], df[U_OFF] = a, a / 3.0, -a
    ring.push(new_tick_info(), df, tick, 0, 1e-3 * tick)


def _wave(tick: int) -> float:
    return float(np.sin(2 * np.pi * tick / 100.0))  # 100-tick period: rises through 0.5 at ticks 9, 109, ...


def test_a_rising_trigger_cuts_exactly_pre_and_post_ticks_with_the_pushed_values():
    ring, by_name = _ring()
    trig = Trigger(ring, by_name, 1e-3, {"signal": "a", "condition": "rising", "level": 0.5, "pre_s": 0.005,
                                         "post_s": 0.01, "signals": ["b", "u0"]})
    caps = []
    for tick in range(1, 60):
        _push(ring, tick, _wave(tick))
        if tick % 7 == 0:  # read in pieces, as the flushes do
            caps += trig.feed()
    caps += trig.feed()
    assert len(caps) == 1 and trig.done
    c = caps[0]
    crossing = next(t for t in range(2, 60) if _wave(t - 1) < 0.5 <= _wave(t))
    assert c.at == crossing and list(c.ticks) == list(range(crossing - 5, crossing + 11))
    assert c.names == ["a", "b", "u0"]
    for j, tick in enumerate(c.ticks):
        assert list(c.values[j]) == [_wave(tick), _wave(tick) / 3.0, -_wave(tick)]
    lines = c.csv().splitlines()
    assert lines[0] == "tick,t,a,b,u0" and len(lines) == 17
    assert [float(v) for v in lines[1].split(",")[2:]] == list(c.values[0])  # the text reads back bit for bit


def test_continuous_falling_captures_every_crossing_and_a_reset_starts_over():
    ring, by_name = _ring()
    trig = Trigger(ring, by_name, 1e-3, {"signal": "a", "condition": "falling", "level": 0.0, "pre_s": 0.002,
                                         "post_s": 0.002, "mode": "continuous"})
    caps = []
    for tick in range(1, 260):
        _push(ring, tick, _wave(tick) + 1e-9)
        caps += trig.feed()
    falls = [t for t in range(2, 258) if _wave(t - 1) + 1e-9 > 0 >= _wave(t) + 1e-9]
    assert [c.at for c in caps] == falls and len(falls) == 3
    for tick in range(1, 60):  # a reset: the tick goes back; nothing of before belongs to what follows
        _push(ring, tick, -1.0 if tick < 50 else 1.0)
    caps = trig.feed()
    assert caps == []
    trig2 = Trigger(ring, by_name, 1e-3, {"signal": "a", "condition": "above", "level": 0.9, "pre_s": 0.0,
                                          "post_s": 0.0})
    _push(ring, 60, 0.95)
    assert [c.at for c in trig2.feed()] == [60]


@pytest.mark.parametrize("spec, message", [
    ({"signal": "nope"}, "unknown signal"),
    ({"signal": "a", "condition": "sideways", "level": 1}, "condition is one of"),
    ({"signal": "a", "level": float("nan")}, "level must be a finite number"),
    ({"signal": "a", "level": 1, "pre_s": -1}, "pre_s must be"),
    ({"signal": "a", "level": 1, "pre_s": 100.0}, "more than"),
    ({"signal": "a", "level": 1, "signals": ["a", "zz"]}, "unknown signal"),
    ("a", "is an object"),
])
def test_a_bad_trigger_is_refused_with_its_reason(spec, message):
    ring, by_name = _ring()
    with pytest.raises(TriggerError, match=message):
        Trigger(ring, by_name, 1e-3, spec)
