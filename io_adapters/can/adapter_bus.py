"""The python-can side of the CAN adapter: opening a bus, and the frame class it sends.

Imported when an adapter opens (python-can is imported there, not before).
"""

from __future__ import annotations

VBUS_INTERFACE = "vbus"  # the local virtual bus between processes (io_adapters/vbus)


def tx_message_class():
    """A can.Message whose deep copy is cheap (python-can's virtual bus deep-copies every frame it sends).

    ``Message.__deepcopy__`` rebuilds the message through its keyword
    constructor and deep-copies channel and data, about 4x the cost of
    filling the slots directly.  Receivers get plain ``can.Message`` objects.
    """
    import can

    class TxMessage(can.Message):
        __slots__ = ()

        def __deepcopy__(self, memo):
            m = can.Message.__new__(can.Message)
            m.timestamp = self.timestamp
            m.arbitration_id = self.arbitration_id
            m.is_extended_id = self.is_extended_id
            m.is_remote_frame = self.is_remote_frame
            m.is_error_frame = self.is_error_frame
            m.channel = self.channel
            m.dlc = self.dlc
            m.data = bytearray(self.data)
            m.is_fd = self.is_fd
            m.is_rx = self.is_rx
            m.bitrate_switch = self.bitrate_switch
            m.error_state_indicator = self.error_state_indicator
            return m

    return TxMessage


def open_bus(kwargs: dict):
    """The python-can bus (the local virtual bus also from a checkout whose entry point is not installed)."""
    import can

    if kwargs["interface"] == VBUS_INTERFACE:
        from ..vbus import register

        register()
    return can.Bus(**kwargs)


__all__ = ["VBUS_INTERFACE", "open_bus", "tx_message_class"]
