"""AUTOSAR CAN network management (CanNm) of the rest-bus: when its NM PDU goes, and when the rest-bus falls silent.

A message set may name one of its transmitted messages as the rest-bus's NM
PDU (``[nm] pdu = "NM_HIL"``, docs/can.md "Network management").  The state
machine follows the AUTOSAR CanNm states, on the plant's clock (the tick's
time), so a lockstep run is deterministic:

* **bus sleep**: nothing is sent.  The network is requested
  (``request``), or any frame is received (a wake-up): repeat message.
* **repeat message**: every message goes, the NM PDU included, for
  ``repeat_message_ms``; then normal operation while the network is
  requested, else ready sleep.
* **normal operation**: every message goes; released: ready sleep; an NM
  PDU of another node with its repeat-message bit (control bit vector, byte
  2 bit 0): repeat message.
* **ready sleep**: the application messages go, the NM PDU not; each NM
  PDU of another node (a standard frame ID in ``rx_ids``) restarts the NM
  timeout, which ends it after ``timeout_ms``: prepare bus sleep.  Requested
  again: normal operation; a repeat-message bit: repeat message.
* **prepare bus sleep**: nothing is sent; after ``wait_bus_sleep_ms`` bus
  sleep; the network requested or an NM PDU received: repeat message.

In repeat message and normal operation the NM timeout runs as well (restarted
by every NM PDU sent or received): an expiry there is counted
(``timeouts``) and restarts it, as AUTOSAR has it.  The receive thread only
counts what it hears (:meth:`CanNm.heard`); :meth:`CanNm.step`, called by
the tick before it packs its frames, moves the state and sets
:attr:`CanNm.allow`, one flag per transmitted message.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BUS_SLEEP, PREPARE_BUS_SLEEP, REPEAT_MESSAGE, NORMAL_OPERATION, READY_SLEEP = range(5)
STATE_NAMES = ("bus_sleep", "prepare_bus_sleep", "repeat_message", "normal_operation", "ready_sleep")
NETWORK_MODE = (REPEAT_MESSAGE, NORMAL_OPERATION, READY_SLEEP)
CBV_REPEAT_MESSAGE = 0x01  # control bit vector (byte 2 of an NM PDU): repeat message request


@dataclass(frozen=True)
class NmConfig:
    """The ``[nm]`` table of a message set, resolved (times in ms of plant time)."""

    pdu: int  # the transmit row of the rest-bus's NM PDU
    pdu_name: str
    rx_lo: int  # standard frame IDs of other nodes' NM PDUs: rx_lo .. rx_hi
    rx_hi: int
    repeat_message_ms: float
    timeout_ms: float
    wait_bus_sleep_ms: float
    request: bool  # the rest-bus requests the network from the start


def parse_nm(nm, tx_names: list[str]) -> NmConfig | None:
    """The ``[nm]`` table (a ConfigReader) against the transmitted messages; None when absent."""
    if not nm.data:
        return None
    pdu = nm.string("pdu")
    if pdu not in tx_names:
        raise nm.error("pdu", f"{pdu!r} is not a transmitted message of this set ({', '.join(tx_names)})")
    ids = nm.raw("rx_ids", [0x500, 0x5FF])
    if (not isinstance(ids, list) or len(ids) != 2 or not all(isinstance(i, int) and not isinstance(i, bool)
                                                              and 0 <= i <= 0x7FF for i in ids) or ids[0] > ids[1]):
        raise nm.error("rx_ids", "must be [lowest, highest] standard frame IDs (0 .. 0x7FF) of NM PDUs")
    times = [nm.number(k, 1500.0 if k != "timeout_ms" else 2000.0, positive=True)
             for k in ("repeat_message_ms", "timeout_ms", "wait_bus_sleep_ms")]
    out = NmConfig(tx_names.index(pdu), pdu, ids[0], ids[1], *times, nm.boolean("request", True))
    nm.reject_unknown()
    return out


class CanNm:
    """The rest-bus's CanNm state machine (module docstring); ``n_tx`` transmitted messages."""

    def __init__(self, cfg: NmConfig, n_tx: int, own_id: int):
        self.cfg = cfg
        self.own_id = own_id  # the rest-bus's own NM PDU, never counted as another node's
        self.allow = np.zeros(max(n_tx, 1), dtype=np.bool_)  # per transmitted message: may it go now
        self.requested = cfg.request
        self.state = BUS_SLEEP
        self.since_ms = 0.0  # when the state was entered
        self.timeout_at_ms = 0.0  # the NM timeout's expiry (network mode)
        self.rx_nm = 0  # NM PDUs of other nodes heard (receive thread)
        self.rx_repeat = 0  # of them with the repeat-message bit
        self.rx_any = 0  # frames heard at all (the adapter counts them)
        self._seen_nm = self._seen_rep = self._seen_any = self._seen_sent = 0
        self.entered = dict.fromkeys(STATE_NAMES, 0)
        self.timeouts = 0
        self.held = 0  # frames not sent because of the state
        self.sent = 0  # own NM PDUs sent (the sending side: :meth:`pdu_sent`)
        self.sent_ms = 0.0  # the plant time of the last one
        self.now_ms = 0.0  # of the last step
        self._started = False

    # -- receive thread ------------------------------------------------------------------------------
    def heard(self, frame_id: int, extended: bool, data) -> bool:
        """One received frame that is no message of the set: True if it is another node's NM PDU (counted)."""
        if extended or not self.cfg.rx_lo <= frame_id <= self.cfg.rx_hi or frame_id == self.own_id:
            return False
        if data is not None and len(data) >= 2 and data[1] & CBV_REPEAT_MESSAGE:
            self.rx_repeat += 1
        self.rx_nm += 1
        return True

    # -- the tick --------------------------------------------------------------------------------------
    def _enter(self, state: int, now_ms: float) -> None:
        if state in NETWORK_MODE and self.state not in NETWORK_MODE:  # network mode begins: the NM timeout runs
            self.timeout_at_ms = now_ms + self.cfg.timeout_ms
        self.state = state
        self.since_ms = now_ms
        self.entered[STATE_NAMES[state]] += 1
        self.allow[:] = state in (REPEAT_MESSAGE, NORMAL_OPERATION, READY_SLEEP)
        self.allow[self.cfg.pdu] = state in (REPEAT_MESSAGE, NORMAL_OPERATION)

    def step(self, now_ms: float) -> None:
        """Move the state machine to ``now_ms`` (plant time) with what was heard since the last step."""
        self.now_ms = now_ms
        # what came since the last step (no container built: this runs in the tick)
        new_nm, new_rep = self.rx_nm != self._seen_nm, self.rx_repeat != self._seen_rep
        new_any, new_sent = self.rx_any != self._seen_any, self.sent != self._seen_sent
        self._seen_nm = self.rx_nm
        self._seen_rep = self.rx_repeat
        self._seen_any = self.rx_any
        self._seen_sent = self.sent
        s = self.state
        if not self._started:
            self._started = True
            self._enter(REPEAT_MESSAGE if self.requested else BUS_SLEEP, now_ms)
            return
        if s == BUS_SLEEP:
            if self.requested or new_any:
                self._enter(REPEAT_MESSAGE, now_ms)
            return
        if s == PREPARE_BUS_SLEEP:
            if self.requested or new_nm:
                self._enter(REPEAT_MESSAGE, now_ms)
            elif now_ms - self.since_ms >= self.cfg.wait_bus_sleep_ms:
                self._enter(BUS_SLEEP, now_ms)
            return
        if new_sent:  # restarted by every NM PDU sent (from the tick it went) ...
            self.timeout_at_ms = self.sent_ms + self.cfg.timeout_ms
        if new_nm:  # ... or heard (from the tick that sees it)
            self.timeout_at_ms = now_ms + self.cfg.timeout_ms
        if s == REPEAT_MESSAGE:
            if now_ms - self.since_ms >= self.cfg.repeat_message_ms:
                self._enter(NORMAL_OPERATION if self.requested else READY_SLEEP, now_ms)
        elif new_rep:
            self._enter(REPEAT_MESSAGE, now_ms)
        elif s == NORMAL_OPERATION and not self.requested:
            self._enter(READY_SLEEP, now_ms)
        elif s == READY_SLEEP and self.requested:
            self._enter(NORMAL_OPERATION, now_ms)
        elif s == READY_SLEEP and now_ms >= self.timeout_at_ms:
            self._enter(PREPARE_BUS_SLEEP, now_ms)
        if (self.state == REPEAT_MESSAGE or self.state == NORMAL_OPERATION) and now_ms >= self.timeout_at_ms:
            self.timeouts += 1
            self.timeout_at_ms = now_ms + self.cfg.timeout_ms

    def pdu_sent(self) -> None:
        """The rest-bus's own NM PDU went out (at the time of the last step)."""
        self.sent += 1
        self.sent_ms = self.now_ms

    def request(self, on: bool) -> None:
        """The network requested (True) or released, from the next tick on (between ticks)."""
        self.requested = bool(on)

    def status(self) -> dict:
        return {"state": STATE_NAMES[self.state], "requested": self.requested, "since_ms": self.since_ms,
                "entered": dict(self.entered), "nm_pdus_heard": self.rx_nm, "repeat_requests_heard": self.rx_repeat,
                "timeouts": self.timeouts, "frames_held": self.held, "pdu": self.cfg.pdu_name}
