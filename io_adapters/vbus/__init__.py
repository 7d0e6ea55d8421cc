"""A virtual CAN bus between the processes of one machine, as a python-can interface.

python-can's ``virtual`` interface joins buses of one process only, and
SocketCAN's vcan needs a kernel module that many CI machines and containers
lack.  This package's :class:`~io_adapters.vbus.bus.LocalBus` joins any
python-can program of the machine to a named channel over Unix-domain
datagram sockets, with no relay in between::

    bus = can.Bus(interface="vbus", channel="gearbox-hil")

The interface name is registered through python-can's plugin entry point
group ``can.interface`` (pyproject.toml), so any program in an environment
where the project is installed can open it by name.  Modules: ``wire``
(one frame in one fixed-size datagram), ``bus`` (the python-can bus).
"""

from __future__ import annotations

from .bus import INTERFACE_NAME, LocalBus, bus_directory, channel_folder_name

__all__ = ["INTERFACE_NAME", "LocalBus", "bus_directory", "channel_folder_name"]
