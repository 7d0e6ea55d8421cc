"""The synthetic address space an XCP master sees: the plant's signals, its tunable parameters, the EPK.

Nothing here is real memory.  Addresses (address extension 0, byte
granularity, Intel byte order) name values the server already holds:

==================  ======================================================================
``0x0001_0000``     measurements, read-only: one float64 per column of a state-ring row --
                    ``time_s`` (the plant time after the tick, s), then the outputs ``y.*``
                    and the inputs ``u.*`` in the plant's declared order; address
                    ``0x0001_0000 + 8 * column``.  Read from the newest ring row.
``0x0002_0000``     the EPK (ASCII, read-only): names the plant kind and a hash of this map.
``0x8000_0000``     calibration segment 0: one float64 per tunable parameter, in the order
                    of ``plant.tunable_parameters()``; page 0 = working (what the plant
                    runs on), page 1 = reference (the values when the adapter opened).
``0xF000_0000``+    texts the slave points the MTA at (GET_ID, GET_DAQ_EVENT_INFO): read-only,
                    not in the A2L.
==================  ======================================================================

A :class:`AddressMap` is built once (at ``open``, or by ``gearbox-hil
xcp-a2l``) from the plant's declared ports and parameters and the loop's
period; the A2L (:mod:`.a2l`) and the slave (:mod:`.slave`) read the same
object, so the file and the server can never disagree.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import Sequence

from . import codes as C

MEAS_BASE = 0x0001_0000
EPK_BASE = 0x0002_0000
CAL_BASE = 0x8000_0000
TEXT_BASE = 0xF000_0000
TEXT_STRIDE = 0x0100_0000  # one text area per GET_ID type / event name
VALUE_BYTES = 8  # every value is a float64
CAL_SEGMENT = 0

# the events every server offers: (name, short name, period in s; None = every tick)
EVENT_PERIODS_S: tuple[tuple[str, str, float | None], ...] = (
    ("tick", "tick", None), ("10ms", "10ms", 0.01), ("100ms", "100ms", 0.1))

_A2L_NAME = re.compile(r"[^A-Za-z0-9_.]")


def a2l_name(text: str) -> str:
    """``text`` as an A2L identifier (letters, digits, ``_`` and ``.``; not starting with a digit)."""
    out = _A2L_NAME.sub("_", text)
    return out if out and not out[0].isdigit() else "_" + out


@dataclass(frozen=True)
class Value:
    """One measurement or calibration value: its A2L name, unit, range, text and address."""

    name: str
    unit: str
    lo: float
    hi: float
    doc: str
    address: int
    kind: str = "float"  # "float", or "bool" (a parameter written as 0.0 / 1.0)


@dataclass(frozen=True)
class Event:
    """One DAQ event channel: fires on ticks that are multiples of ``every`` (ticks)."""

    number: int
    name: str
    short: str
    every: int
    cycle: int  # EVENT_CHANNEL_TIME_CYCLE in units of ``unit``
    unit: int  # EVENT_CHANNEL_TIME_UNIT (10 ** unit ns)


def _finite(v: float, default: float) -> float:
    return float(v) if v is not None and math.isfinite(v) else default


def _cycle(period_ns: int) -> tuple[int, int]:
    """(cycle, unit) with cycle * 10**unit ns ~ ``period_ns``: the finest unit in which the cycle fits a byte."""
    for unit, ns in C.TIME_UNITS_NS.items():
        if period_ns / ns <= 255:
            return max(1, round(period_ns / ns)), unit
    return 255, 9


def events_for(period_s: float) -> tuple[Event, ...]:
    """The event channels of a loop of step ``period_s``: the tick, and decimations of about 10 ms and 100 ms."""
    out = []
    for i, (name, short, p) in enumerate(EVENT_PERIODS_S):
        every = 1 if p is None else max(1, round(p / period_s))
        cycle, unit = _cycle(int(round(every * period_s * 1e9)))
        out.append(Event(i, name, short, every, cycle, unit))
    return tuple(out)


class AddressMap:
    """The address space of one plant (see the module docstring).

    Parameters
    ----------
    kind
        The plant kind (for the EPK and the A2L's module name).
    outputs, inputs
        The plant's declared signals (``name``, ``unit``, ``lo``, ``hi``, ``doc``).
    params
        The tunable parameters (:class:`plant_models.contract.ports.Param`).
    period_s
        The loop's step, s (the events and the DAQ timestamps).
    """

    def __init__(self, kind: str, outputs: Sequence, inputs: Sequence, params: Sequence, period_s: float):
        self.kind = kind
        self.period_s = float(period_s)
        meas = [Value("time_s", "s", 0.0, 1e9, "plant time after the tick", MEAS_BASE)]
        for prefix, sigs in (("y.", outputs), ("u.", inputs)):
            for s in sigs:
                meas.append(Value(a2l_name(prefix + s.name), s.unit, _finite(s.lo, -1e12), _finite(s.hi, 1e12),
                                  s.doc, MEAS_BASE + VALUE_BYTES * len(meas)))
        self.measurements: tuple[Value, ...] = tuple(meas)
        self.meas_size = VALUE_BYTES * len(meas)
        self.params = tuple(params)
        self.calibrations: tuple[Value, ...] = tuple(
            Value(a2l_name(p.name), p.unit, _finite(p.lo, -1e12), _finite(p.hi, 1e12), p.doc,
                  CAL_BASE + VALUE_BYTES * i, p.kind) for i, p in enumerate(self.params))
        self.cal_size = VALUE_BYTES * len(self.params)
        self.events = events_for(self.period_s)
        self.timestamp_us = int(round(self.period_s * 1e6))  # DAQ timestamp per tick, in the 1 us unit
        digest = hashlib.sha1(repr((kind, [(v.name, v.unit, v.address) for v in (*meas, *self.calibrations)],
                                    self.timestamp_us)).encode()).hexdigest()[:12]
        self.epk = f"gearbox-hil {kind} {digest}"
        self.epk_bytes = self.epk.encode("ascii")

    def by_name(self, name: str) -> Value:
        """The measurement or calibration value named ``name`` (KeyError if none)."""
        for v in (*self.measurements, *self.calibrations):
            if v.name == name:
                return v
        raise KeyError(name)


__all__ = ["AddressMap", "Value", "Event", "events_for", "a2l_name", "MEAS_BASE", "EPK_BASE", "CAL_BASE",
           "TEXT_BASE", "TEXT_STRIDE", "VALUE_BYTES", "CAL_SEGMENT", "EVENT_PERIODS_S"]
