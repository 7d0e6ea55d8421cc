"""A virtual CAN bus between the processes of one machine, as a python-can interface.

python-can's ``virtual`` interface joins buses of one process only, and
SocketCAN's vcan needs a kernel module that many CI machines and containers
lack.  This package's :class:`~io_adapters.vbus.bus.LocalBus` joins any
python-can program of the machine to a named channel over Unix-domain
datagram sockets, with no relay in between::

    bus = can.Bus(interface="vbus", channel="gearbox-hil")

The interface name is registered through python-can's plugin entry point
group ``can.interface`` (pyproject.toml), so any program in an environment
where the project is installed can open it by name.  A source checkout
that is not installed has no entry point; :func:`register` adds the name to
this process's python-can table instead.  Modules: ``wire`` (one frame in
one fixed-size packet), ``bus`` (the python-can bus).
"""

from __future__ import annotations

from .bus import INTERFACE_NAME, LocalBus, bus_directory, channel_folder_name


def register() -> bool:
    """Make ``can.Bus(interface="vbus")`` work in this process; True if the entry point was missing.

    python-can reads its interface table from the installed entry points
    once, at import; a checkout that is not installed (or installed before
    the entry point existed) lacks it, so the name is added to the table
    (``can.interfaces.BACKENDS``) and to the names ``can.util`` checks.
    """
    import can.interfaces
    import can.util

    if INTERFACE_NAME in can.interfaces.BACKENDS:
        return False
    can.interfaces.BACKENDS[INTERFACE_NAME] = (LocalBus.__module__, LocalBus.__name__)
    can.util.VALID_INTERFACES = frozenset(can.util.VALID_INTERFACES | {INTERFACE_NAME})
    return True


__all__ = ["INTERFACE_NAME", "LocalBus", "bus_directory", "channel_folder_name", "register"]
