"""ISO-TP (ISO 15765-2) on a python-can bus, timed by a clock the owner gives: the plant's in lockstep.

``can-isotp``'s transport layer times its flow-control, consecutive-frame
and STmin timers with the wall clock.  A UDS server inside a TCU emulator
stepped in lockstep, and the bench's tester beside it, must count those
times in plant time, or a run would depend on how fast the machine is.
:class:`ClockedIsoTp` is that transport layer with every timer read from
``clock_ns`` (ns) and no thread: its owner hands it the frames of its
addresses (:meth:`feed`, into a bounded inbox: a flood is counted and
dropped, never queued without bound) and calls :meth:`step` once per task,
which does the bounded work of those frames and returns the complete
payloads received.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from typing import Callable

import can
import isotp
from isotp.tools import Timer

INBOX_FRAMES = 64  # frames one task takes at most; more in one task are dropped and counted
MAX_PAYLOAD = 4095  # bytes: the classic ISO-TP limit (12-bit length); a longer first frame is refused by the stack
# can-isotp logs a warning per bad frame: a flood of them would be a flood of lines, so its logger here says errors
# only, and every bad frame is counted by kind (ClockedIsoTp.errors, in the UDS server's status)
LOGGER = "gearbox_hil.isotp"
logging.getLogger(LOGGER).setLevel(logging.ERROR)


class ClockTimer(Timer):
    """can-isotp's timer on a given clock (ns) instead of ``time.perf_counter_ns``."""

    def __init__(self, timeout: float, clock_ns: Callable[[], int]):
        self._clock_ns = clock_ns
        super().__init__(timeout)

    def start(self, timeout: float | None = None) -> None:
        if timeout is not None:
            self.set_timeout(timeout)
        self.start_time = self._clock_ns()

    def elapsed(self) -> float:
        return self.elapsed_ns() / 1e9

    def elapsed_ns(self) -> int:
        return 0 if self.start_time is None else self._clock_ns() - self.start_time


@dataclass(frozen=True)
class IsoTpTiming:
    """The transport's settings: STmin (ms) and block size this side asks of a sender, the N_Bs/N_Cr timeouts
    (ms), the padding byte of short frames (None: no padding)."""

    stmin_ms: int = 0
    block_size: int = 0
    flow_control_timeout_ms: int = 1000
    consecutive_frame_timeout_ms: int = 1000
    padding: int | None = 0xCC


class ClockedIsoTp(isotp.TransportLayerLogic):
    """A normal-addressed (11 or 29 bit) ISO-TP endpoint on ``bus`` timed by ``clock_ns``; see the module.

    ``fixed``: normal fixed addressing (ISO 15765-2, 29-bit, can-isotp's ``NormalFixed_29bits``: the J1939 PGNs
    0xDA00 physical / 0xDB00 functional), the addresses taken from the IDs: ``txid`` = 0x18DA<TA><SA> of this
    side's frames, ``rxid`` the other way round.

    ``errors`` counts the transport's errors by name (unexpected frames, wrong sequence numbers, timeouts,
    overflows); ``frames_in`` the frames fed, ``inbox_dropped`` those dropped because the inbox was full.
    """

    def __init__(self, bus: can.BusABC, txid: int, rxid: int, clock_ns: Callable[[], int],
                 timing: IsoTpTiming = IsoTpTiming(), extended_id: bool = False, fixed: bool = False):
        self._clock_ns = clock_ns
        self._bus = bus
        self._inbox: deque = deque()
        self.errors: dict[str, int] = {}
        self.frames_in = self.frames_out = self.inbox_dropped = 0
        if fixed:  # the physical ID's bits 28..16 (priority and PGN), the target and the source address
            address = isotp.Address(isotp.AddressingMode.NormalFixed_29bits, physical_id=txid & 0x1FFF0000,
                                    target_address=(txid >> 8) & 0xFF, source_address=txid & 0xFF)
        else:
            mode = isotp.AddressingMode.Normal_29bits if extended_id else isotp.AddressingMode.Normal_11bits
            address = isotp.Address(mode, txid=txid, rxid=rxid)
        params = {"stmin": int(timing.stmin_ms), "blocksize": int(timing.block_size),
                  "rx_flowcontrol_timeout": int(timing.flow_control_timeout_ms),
                  "rx_consecutive_frame_timeout": int(timing.consecutive_frame_timeout_ms),
                  "tx_padding": timing.padding, "tx_data_min_length": 8 if timing.padding is not None else None,
                  "max_frame_size": MAX_PAYLOAD, "wftmax": 0, "blocking_send": False, "logger_name": LOGGER}
        super().__init__(rxfn=self._next_frame, txfn=self._send_frame, address=address,
                         error_handler=self._error, params=params)
        self.timer_tx_stmin = ClockTimer(0, clock_ns)

    # can-isotp makes its receive timers anew in these three; the clock's timers instead
    def load_params(self) -> None:
        super().load_params()
        self.timer_rx_fc = ClockTimer(self.params.rx_flowcontrol_timeout / 1000, self._clock_ns)
        self.timer_rx_cf = ClockTimer(self.params.rx_consecutive_frame_timeout / 1000, self._clock_ns)

    def _start_rx_fc_timer(self) -> None:
        self.timer_rx_fc = ClockTimer(self.params.rx_flowcontrol_timeout / 1000, self._clock_ns)
        self.timer_rx_fc.start()

    def _start_rx_cf_timer(self) -> None:
        self.timer_rx_cf = ClockTimer(self.params.rx_consecutive_frame_timeout / 1000, self._clock_ns)
        self.timer_rx_cf.start()

    def _error(self, exc: Exception) -> None:
        name = type(exc).__name__
        self.errors[name] = self.errors.get(name, 0) + 1

    def _next_frame(self, timeout: float = 0.0):
        return self._inbox.popleft() if self._inbox else None

    def _send_frame(self, msg: isotp.CanMessage) -> None:
        self._bus.send(can.Message(arbitration_id=msg.arbitration_id, data=bytes(msg.data),
                                   is_extended_id=msg.is_extended_id, is_fd=msg.is_fd,
                                   bitrate_switch=msg.bitrate_switch))
        self.frames_out += 1

    def feed(self, m: can.Message) -> None:
        """A received frame of this endpoint's receive ID (the owner routes by ID); dropped when the inbox is full."""
        self.frames_in += 1
        if len(self._inbox) >= INBOX_FRAMES:
            self.inbox_dropped += 1
            return
        self._inbox.append(isotp.CanMessage(arbitration_id=m.arbitration_id, dlc=can.util.len2dlc(len(m.data)),
                                            data=bytes(m.data), extended_id=m.is_extended_id, is_fd=m.is_fd,
                                            bitrate_switch=m.bitrate_switch))

    def step(self) -> list[bytes]:
        """The frames fed since the last step through the transport (flow control and consecutive frames sent as
        the timers allow); the complete payloads received."""
        self.process()
        out = []
        while self.available():
            out.append(bytes(self.recv()))
        return out

    def error_count(self) -> int:
        return sum(self.errors.values())


__all__ = ["ClockTimer", "ClockedIsoTp", "IsoTpTiming", "INBOX_FRAMES", "MAX_PAYLOAD"]
