"""The CAN adapter's transport faults: a message dropped, delayed, frozen, corrupted, cut short, out of range, ignored.

The kinds and their keys are declared in :mod:`io_adapters.can.declaration`
(``docs/faults.md``); this module checks a fault against the running message
set and switches it, between ticks:

* the transmit kinds (``drop``, ``delay``, ``freeze_alive``, ``corrupt_crc``,
  ``out_of_range``) set a message's row of the codec's fault table
  (``codec.tx_faults``, columns ``frames.TF_*``), which the compiled pack
  reads from the next tick on;
* ``wrong_dlc`` swaps the message's python-can frame (and its payload view)
  for one a byte shorter or longer; clearing puts the DBC's one back;
* ``ignore_rx`` marks a command message whose frames the receive thread then
  drops as if they never arrived (:attr:`CanTransportFaults.rx_ignore`, the
  list the adapter's receive thread reads).

:class:`CanTransportFaults` holds the adapter's frame lists by reference (the
adapter's send path uses the same list objects), so a swap is seen by the
next send without another look-up.
"""

from __future__ import annotations

from plant_models.errors import FaultError

from . import frames, layouts
from .declaration import CanFault

TX_FAULTS = {"drop": frames.TF_DROP, "delay": frames.TF_DELAY, "freeze_alive": frames.TF_FREEZE,
             "corrupt_crc": frames.TF_BAD_CRC}  # the kinds that are one flag of the codec's fault table
FD_LENGTHS = (8, 12, 16, 20, 24, 32, 48)  # CAN FD payload lengths below 64 bytes (a wrong_dlc FD frame's length)


def check_target(adapter_name: str, spec: CanFault, faults: "CanTransportFaults | None") -> "CanTransportFaults":
    """The adapter's fault hooks for a fault aimed at CAN; FaultError when it aims elsewhere or no message set runs."""
    if spec.target != "can":
        raise FaultError(f"fault: the CAN adapter {adapter_name!r} injects no {spec.target} faults")
    if faults is None:
        raise FaultError(f"fault: the CAN adapter {adapter_name!r} is not running a message set")
    return faults


class CanTransportFaults:
    """The fault hooks of one CAN adapter's message set (module docstring).

    ``tx_msgs`` and ``tx_views``: the adapter's python-can frame and payload
    view per transmit message, changed in place by ``wrong_dlc``;
    ``tx_message``: the frame class to build a wrong-length frame with.
    """

    def __init__(self, adapter_name: str, ms, codec, tx_msgs: list, tx_views: list, tx_message: type):
        self.adapter_name = adapter_name
        self.ms = ms
        self.codec = codec
        self.tx_msgs = tx_msgs
        self.tx_views = tx_views
        self.tx_msgs_ok = list(tx_msgs)  # the frames as the DBC has them (a wrong-DLC fault swaps its own in)
        self.tx_views_ok = list(tx_views)
        self.tx_message = tx_message
        self.rx_ignore = [False] * ms.rx.n_msg  # injected: the receive thread drops this message's frames

    def message(self, spec) -> tuple[str, int]:
        """("rx" or "tx", message index) of a fault, or FaultError saying why it does not fit."""
        side = self.ms.rx if spec.kind == "ignore_rx" else self.ms.tx
        names = [m.name for m in side.messages]
        what = "receive (command)" if spec.kind == "ignore_rx" else "transmit (sensor)"
        if spec.message not in names:
            raise FaultError(f"fault: {spec.kind}: no {what} message {spec.message!r}; they are {', '.join(names)}")
        k = names.index(spec.message)
        lay = side.messages[k]
        if spec.kind == "freeze_alive" and lay.counter_signal < 0:
            raise FaultError(f"fault: {spec.message} has no alive counter")
        if spec.kind == "corrupt_crc" and lay.crc_signal < 0:
            raise FaultError(f"fault: {spec.message} has no checksum")
        if spec.kind == "delay" and not 1 <= spec.cycles <= frames.DELAY_MAX:
            raise FaultError(f"fault: delay: 'cycles' must be 1..{frames.DELAY_MAX}, got {spec.cycles}")
        return ("rx" if spec.kind == "ignore_rx" else "tx"), k

    def out_of_range_raw(self, spec, k: int) -> tuple[int, int]:
        """(signal row, raw value outside the DBC range) of an out_of_range fault."""
        lay = self.ms.tx.messages[k]
        names = [sg.name for sg in lay.signals]
        if spec.signal not in names:
            raise FaultError(f"fault: out_of_range: {spec.message} has no signal {spec.signal!r}; it has "
                             f"{', '.join(names)}")
        j = names.index(spec.signal)
        sg = lay.signals[j]
        lo, hi = layouts.raw_bounds(sg.length, sg.signed)
        if spec.value is not None:
            raw = int(round((spec.value - sg.offset) / sg.scale))
            if not lo <= raw <= hi:
                raise FaultError(f"fault: out_of_range: {spec.value} does not fit the {sg.length} bits of "
                                 f"{spec.signal}")
        elif sg.raw_hi < hi:
            raw = sg.raw_hi + 1
        elif sg.raw_lo > lo:
            raw = sg.raw_lo - 1
        else:
            raise FaultError(f"fault: out_of_range: the DBC range of {spec.signal} covers all its raw values")
        if sg.raw_lo <= raw <= sg.raw_hi:
            raise FaultError(f"fault: out_of_range: {spec.value} is inside the DBC range of {spec.signal}")
        return int(self.codec.tx.M[k, frames.M_SIG0]) + j, raw

    def check(self, spec: CanFault) -> None:
        """A CAN fault must name a message of this message set (and a signal, counter or CRC it has)."""
        side, k = self.message(spec)
        if spec.kind == "out_of_range":
            self.out_of_range_raw(spec, k)

    def set(self, spec: CanFault) -> None:
        """Switch the fault on (from the next tick on); the spec is checked first."""
        self.check(spec)
        side, k = self.message(spec)
        tf = self.codec.tx_faults
        if spec.kind == "ignore_rx":
            self.rx_ignore[k] = True
        elif spec.kind == "wrong_dlc":
            m = self.ms.tx.messages[k]
            n = m.length - 1 if m.length > 1 else m.length + 1
            if m.fd and m.length > 8:  # the next shorter length a CAN FD frame can have
                n = max(x for x in FD_LENGTHS if x < m.length)
            self.tx_msgs[k] = self.tx_message(arbitration_id=m.frame_id, is_extended_id=m.extended, is_fd=m.fd,
                                              bitrate_switch=m.fd, data=bytearray(n), is_rx=False)
            self.tx_views[k] = memoryview(self.codec.tx_buf[k, :n])
        elif spec.kind == "out_of_range":
            tf[k, frames.TF_OOR_SIG], tf[k, frames.TF_OOR_RAW] = self.out_of_range_raw(spec, k)
        elif spec.kind == "delay":
            tf[k, frames.TF_WRITTEN] = 0
            tf[k, frames.TF_DELAY] = spec.cycles
        else:
            tf[k, TX_FAULTS[spec.kind]] = 1

    def clear(self, spec: CanFault) -> None:
        """Switch the fault off; a spec that names nothing of this message set is ignored."""
        try:
            side, k = self.message(spec)
        except Exception:
            return
        tf = self.codec.tx_faults
        if spec.kind == "ignore_rx":
            self.rx_ignore[k] = False
        elif spec.kind == "wrong_dlc":
            self.tx_msgs[k] = self.tx_msgs_ok[k]
            self.tx_views[k] = self.tx_views_ok[k]
        elif spec.kind == "out_of_range":
            tf[k, frames.TF_OOR_SIG] = -1
        else:
            tf[k, TX_FAULTS[spec.kind]] = 0


__all__ = ["CanTransportFaults", "FD_LENGTHS", "TX_FAULTS", "check_target"]
