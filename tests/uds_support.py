"""What the UDS tests share: a lockstep bench's periods with frames sent before each, the rows a run is compared by."""

from __future__ import annotations

from typing import Callable

import can


def run_periods(bench, ctl, periods: int, before: Callable[[int, can.BusABC], None]) -> list[tuple]:
    """``periods`` ECU periods of a :class:`server.testbench.uds_bench.UdsBench` whose ECU is ``ctl.tcu``;
    ``before(k, bus)`` first sends what period ``k`` gets (on a bus member of its own, drained after each period).

    Returns per period the plant's outputs and inputs after it: two runs equal row for row had the same plant run.
    Each period waits for the CAN adapter to take the ECU's commands, so a loaded machine cannot delay one a tick.
    """
    bus = can.Bus(interface="virtual", channel=bench.channel, receive_own_messages=False)
    rows = []
    try:
        for k in range(periods):
            before(k, bus)
            bench.advance()
            assert bench.wait_commands(ctl.tcu.result.commands_sent)
            while bus.recv(0.0) is not None:
                pass
            rows.append((tuple(bench.last.y.values()), tuple(sorted(bench.hil.get()["u"].items()))))
    finally:
        bus.shutdown()
    return rows


def single_frame(data: bytes) -> bool:
    """Whether ``data`` is a valid ISO-TP single frame (what a functional request must be)."""
    n = data[0] & 0x0F if data else 0
    return bool(data) and data[0] >> 4 == 0 and 0 < n <= len(data) - 1


__all__ = ["run_periods", "single_frame"]
