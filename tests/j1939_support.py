"""What the J1939 transport tests share: a node that records what it reassembles, frame helpers, the fuzz run.

Used by test_can_j1939_tp.py (TP: RTS/CTS and BAM), test_can_j1939_etp.py (ETP) and
test_j1939_independent.py (against the can-j1939 stack and fuzzed transport frames).
"""

from __future__ import annotations

import random
from contextlib import contextmanager
from typing import Callable

import can
import numpy as np

from can_support import Rest
from io_adapters.can import j1939 as j

ENG_NAME = j.name_pack(1001, 0x123, function=0, industry_group=2)
TCU = 0x03
PROP_A = 0xEF00  # proprietary A (PDU1): a message of any length to one address


def pgn3(pgn: int) -> bytes:
    """A PGN as the three bytes (low first) that end a TP.CM / ETP.CM frame."""
    return bytes((pgn & 0xFF, pgn >> 8 & 0xFF, pgn >> 16))


class Engine(j.Node):
    """The engine node (0x00 unless ``address``); it records every whole message handed to it and, with a
    ``payload``, owns PGN 0xEF00 and sends it on request.  ``kw``: the node's other options (``dm1``, ...)."""

    def __init__(self, payload: bytes = b"", name: int = ENG_NAME, address: int = 0x00, **kw):
        super().__init__("engine", name, address, {PROP_A: lambda: (6, self.payload)} if payload else {}, **kw)
        self.payload = payload
        self.messages = []

    def on_message(self, pgn, data, source, destination, now_ms):
        self.messages.append((pgn, data, source, destination))
        return []


def claimed(**kw) -> Engine:
    """An :class:`Engine` whose address claim stands (plant time 250 ms)."""
    eng = Engine(**kw)
    eng.start(0.0)
    eng.poll(250.0)
    return eng


def feed(eng: j.Node, frame: tuple[int, bytes], now: float) -> list:
    """The node's answers to one (frame ID, data) frame at plant time ``now`` (ms)."""
    return eng.on_frame(frame[0], frame[1], now)


def interleave(session: Callable[[random.Random], list], rng: random.Random, n: int, senders: int) -> list:
    """``n`` frames of sessions made by ``session(rng)``, ``senders`` of them running at once, interleaved frame
    by frame with each session's frames in their order."""
    out: list[tuple[int, bytes]] = []
    running: list[list[tuple[int, bytes]]] = []
    while len(out) < n:
        while len(running) < senders:
            running.append(session(rng))
        k = rng.randrange(len(running))
        out.append(running[k].pop(0))
        if not running[k]:
            running.pop(k)
    return out


@contextmanager
def fuzzed_run(frames: list[tuple[int, bytes]], **options):
    """Send ``frames`` (20 every 4 ticks, after 300 ticks) to a rest-bus (``options``) while its plant runs, then
    3000 ticks more (every session times out); yields (the rest-bus, the frames it sent back).

    Asserts first that the plant's state is bit for bit that of a twin run without the frames."""
    fuzzed, twin = Rest(**options), Rest(**options)
    bus = can.Bus(interface="virtual", channel=fuzzed.channel)
    sent_back = []
    try:
        fuzzed.run(300), twin.run(300)
        for k in range(0, len(frames), 20):
            for fid, data in frames[k:k + 20]:
                bus.send(can.Message(arbitration_id=fid, is_extended_id=True, data=data))
            fuzzed.run(4), twin.run(4)
            while (m := bus.recv(0.0)) is not None:
                sent_back.append((m.arbitration_id, bytes(m.data)))
        fuzzed.run(3000), twin.run(3000)
        while (m := bus.recv(0.0)) is not None:
            sent_back.append((m.arbitration_id, bytes(m.data)))
        assert np.array_equal(fuzzed.plant.y, twin.plant.y) and np.array_equal(fuzzed.plant.u, twin.plant.u)
        assert fuzzed.j.status()["engine_torque_Nm"] == twin.j.status()["engine_torque_Nm"]
        yield fuzzed, sent_back
    finally:
        bus.shutdown()
        fuzzed.j.close()
        twin.j.close()
