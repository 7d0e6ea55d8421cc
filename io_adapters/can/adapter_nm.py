"""How the CAN adapter runs the rest-bus's network management (:mod:`io_adapters.can.nm`, the state machine).

A message set with an ``[nm]`` table (docs/can.md, "Network management")
gets one :class:`~io_adapters.can.nm.CanNm`; the adapter touches it at four
places, each a function here:

* the tick, before it packs its frames: :func:`step` moves the state on the
  plant's clock (so a lockstep run is deterministic);
* sending (the tick in lockstep and afap, the pump between ticks in
  realtime): :func:`may_send` holds what the state does not let go and
  notes the rest-bus's own NM PDU;
* the receive thread: :func:`heard` counts every frame (a wake-up from bus
  sleep) and takes another node's NM PDU, which is no message of the set;
* the settable values: ``nm_request`` (1 requests the network, 0 releases it).

The step is Python, so an adapter with NM has no compiled write stage.
"""

from __future__ import annotations

from dataclasses import replace

from .nm import CanNm

NM_REQUEST = "nm_request"  # the settable value that requests (1) or releases (0) the network


def nm_of(ms) -> CanNm | None:
    """The rest-bus's CanNm state machine of message set ``ms``, or None if it has no ``[nm]``."""
    if ms.nm is None:
        return None
    tx = ms.tx
    k = [m.name for m in tx.messages].index(ms.nm.pdu_name)
    return CanNm(replace(ms.nm, pdu=k), tx.n_msg, tx.messages[k].frame_id)


def step(nm: CanNm, tick: int, period_s: float) -> None:
    """On the plant's clock: which messages may go from tick ``tick`` on."""
    nm.step(tick * period_s * 1e3)


def may_send(nm: CanNm, k: int) -> bool:
    """May transmit message ``k`` go now?  Ready sleep holds the NM PDU, (prepare) bus sleep every frame."""
    if not nm.allow[k]:
        nm.held += 1
        return False
    if k == nm.cfg.pdu:
        nm.pdu_sent()
    return True


def heard(nm: CanNm, msg, m: int) -> bool:
    """Count received frame ``msg`` (message ``m`` of the set, -1: none); True if it was another node's NM PDU."""
    nm.rx_any += 1  # any frame wakes the network from bus sleep
    return m < 0 and nm.heard(msg.arbitration_id, bool(msg.is_extended_id), msg.data)


def settable(nm: CanNm | None) -> dict[str, tuple[int, int]]:
    """``nm_request`` and its range when there is a CanNm; nothing else."""
    return {NM_REQUEST: (0, 1)} if nm is not None else {}


def set_values(nm: CanNm | None, values: dict[str, int]) -> None:
    """Apply ``nm_request`` (between ticks; from the next tick on)."""
    if NM_REQUEST in values and nm is not None:
        nm.request(bool(values[NM_REQUEST]))


__all__ = ["NM_REQUEST", "heard", "may_send", "nm_of", "set_values", "settable", "step"]
