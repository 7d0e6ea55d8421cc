"""What the CAN adapter tells about itself: why a command frame was rejected, and its status counters.

Read from the codec's counter tables (``codec.counts``, columns
``frames.RX_*``; ``codec.adapter``, slots ``frames.A_*``) between ticks or in
the receive thread after a rejection; nothing here runs in the tick.  The
status keys are those of docs/can.md ("Status").
"""

from __future__ import annotations

import logging

from . import frames


class RateLimitedLog:
    """Logs the first few occurrences of each kind of problem, then every 1000th."""

    def __init__(self, log: logging.Logger, first: int = 5, every: int = 1000):
        self.log = log
        self.first = first
        self.every = every
        self.seen: dict = {}

    def __call__(self, key, text: str) -> None:
        n = self.seen.get(key, 0) + 1
        self.seen[key] = n
        if n <= self.first or n % self.every == 0:
            self.log.warning("%s%s", text, f" ({n} so far)" if n > self.first else "")


def explain_reject(ms, codec, plant_inputs, m: int, verdict: int) -> str:
    """The log line of a rejected command frame of receive message ``m`` (``codec.detail`` holds the values)."""
    lay = ms.rx.messages[m]
    d0, d1 = int(codec.detail[0]), int(codec.detail[1])
    head = f"{lay.name} (0x{lay.frame_id:X})"
    if verdict == frames.RX_DLC:
        return f"{head}: {d1} data bytes, the DBC says {d0}"
    if verdict == frames.RX_CRC:
        return f"{head}: wrong checksum 0x{d1:02X}, expected 0x{d0:02X}"
    if verdict == frames.RX_COUNTER_FROZEN:
        return f"{head}: alive counter frozen at {d1}"
    if verdict == frames.RX_COUNTER_JUMP:
        return f"{head}: alive counter jumped to {d1}, expected {d0}"
    if verdict == frames.RX_RANGE:
        s = int(codec.detail[2])
        sig = lay.signals[s - int(ms.rx.M[m, frames.M_SIG0])]
        phys = d1 * sig.scale + sig.offset
        lo = sig.raw_lo * sig.scale + sig.offset
        hi = sig.raw_hi * sig.scale + sig.offset
        port = plant_inputs[sig.target].name
        what = f"not an allowed value of {port}" if sig.allowed_raw and sig.raw_lo <= d1 <= sig.raw_hi \
            else f"outside [{min(lo, hi):g}, {max(lo, hi):g}]"
        return f"{head}: {sig.name} = {phys:g} is {what}"
    if verdict == frames.RX_MUX:
        sig = lay.signals[int(codec.detail[2]) - int(ms.rx.M[m, frames.M_SIG0])]
        return f"{head}: multiplexer {sig.name} = {d1}, the DBC defines {list(sig.mux_values)}"
    return f"{head}: rejected ({frames.RX_REASONS[verdict]})"


def rejected_by_reason(codec, n_rx: int) -> dict[str, int]:
    """Rejected command frames by reason (the status keys of docs/can.md)."""
    c = codec.counts
    return {"crc": int(c[:n_rx, frames.RX_CRC].sum()), "counter_frozen": int(c[:n_rx, frames.RX_COUNTER_FROZEN].sum()),
            "counter_jump": int(c[:n_rx, frames.RX_COUNTER_JUMP].sum()), "dlc": int(c[:n_rx, frames.RX_DLC].sum()),
            "unknown_id": int(codec.adapter[frames.A_UNKNOWN]), "out_of_range": int(c[:n_rx, frames.RX_RANGE].sum()),
            "unknown_mux": int(c[:n_rx, frames.RX_MUX].sum())}


def rx_messages(ms, codec) -> dict[str, dict]:
    """Per command message: accepted, rejected by reason, lost, timeouts, stale, required."""
    c = codec.counts
    out = {}
    for k, m in enumerate(ms.rx.messages):
        out[m.name] = {"accepted": int(c[k, frames.RX_OK]), "crc": int(c[k, frames.RX_CRC]),
                       "counter_frozen": int(c[k, frames.RX_COUNTER_FROZEN]),
                       "counter_jump": int(c[k, frames.RX_COUNTER_JUMP]), "dlc": int(c[k, frames.RX_DLC]),
                       "out_of_range": int(c[k, frames.RX_RANGE]), "lost": int(c[k, frames.RX_LOST]),
                       "unknown_mux": int(c[k, frames.RX_MUX]),
                       "timeouts": int(codec.timeouts[k]), "stale": bool(codec.stale[k]),
                       "required": m.required}
    return out


def tx_messages(ms, codec, tx_sent) -> dict[str, dict]:
    """Per sensor message: frames sent, values saturated, frames dropped by a fault."""
    return {m.name: {"sent": int(tx_sent[k]), "saturated": int(codec.saturated[k]),
                     "dropped_by_fault": int(codec.tx_faults[k, frames.TF_DROPPED])}
            for k, m in enumerate(ms.tx.messages)}


def rx_status(ms, codec, *, frames_seen: int, error_frames: int, bus_errors: int, ignored_by_fault: int,
              last_reject: str) -> dict:
    """The status's ``rx`` table: frames received, accepted, rejected by reason, lost, ..., and per message."""
    c, n = codec.counts, ms.rx.n_msg
    rejected = rejected_by_reason(codec, n)
    return {"frames": int(frames_seen), "accepted": int(c[:n, frames.RX_OK].sum()), "rejected": rejected,
            "rejected_total": sum(rejected.values()), "lost": int(c[:n, frames.RX_LOST].sum()),
            "timeouts": int(codec.timeouts[:n].sum()), "error_frames": int(error_frames),
            "bus_errors": int(bus_errors), "mailbox_busy": int(codec.adapter[frames.A_BUSY]),
            "ignored_scenario_active": int(codec.adapter[frames.A_IGNORED]),
            "ignored_by_fault": int(ignored_by_fault),
            "last_reject": last_reject, "messages": rx_messages(ms, codec)}


def tx_status(ms, codec, tx_sent, txq_state, *, depth_max: int, wait_max_ns: int, wait_us: dict) -> dict:
    """The status's ``tx`` table: frames sent, refused, saturated, the send queue (``txq_state``: ``frames.Q_*``)."""
    return {"frames": int(tx_sent.sum()), "errors": int(codec.adapter[frames.A_TX_ERRORS]),
            "saturated": int(codec.saturated.sum()),
            "queued": int(txq_state[frames.Q_HEAD] - txq_state[frames.Q_TAIL]),
            "queue_dropped": int(txq_state[frames.Q_DROPPED]), "queue_max": int(depth_max),
            "queue_wait_max_us": round(wait_max_ns / 1000.0, 1),
            "queue_wait_us": wait_us, "messages": tx_messages(ms, codec, tx_sent)}


__all__ = ["RateLimitedLog", "explain_reject", "rejected_by_reason", "rx_messages", "rx_status", "tx_messages",
           "tx_status"]
