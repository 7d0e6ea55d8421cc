"""What an adapter type declares to the server without opening anything: its command-line options and fault kinds.

A python-can backend is one module plus its entry in the backend table, and
nothing else in the library names it; for us an adapter type is its module,
its entry in :data:`io_adapters.base.ADAPTERS` and a small
:class:`AdapterDeclaration` (its entry in :data:`DECLARATIONS`), which the
adapter class carries as ``declaration``.  The server asks the declarations

* for the options ``gearbox-hil serve`` offers (:class:`CliOption`; e.g. the
  ZeroMQ adapter's ``--zmq-port``, the CAN adapter's ``--can-share``) and how
  given values change the adapter's ``[[adapters]]`` table
  (:meth:`AdapterDeclaration.apply_cli`);
* for the fault kinds of the transport (the fault target is the type name,
  ``{"target": "can", ...}``) and how a fault map of that target is checked
  (:meth:`AdapterDeclaration.parse_fault`, returning a
  :class:`TransportFault` that the running adapter then checks against its
  message set and injects).

A declaration module imports no transport library, so ``serve --help`` and
a fault map's check stay cheap; the adapter's own module is imported only
when a config asks for the type.  The idle loop's wait is the third thing an
adapter declares, but at run time (:meth:`io_adapters.base.Adapter.wake_fds`,
:meth:`~io_adapters.base.Adapter.idle_fds`).
"""

from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass
from typing import Any, Callable

# the key checks of a fault map, shared with the plants' own fault declarations (which live on their floor)
from plant_models.contract.faults import fault_error, fault_integer, fault_keys, fault_number


@dataclass(frozen=True)
class CliOption:
    """One option of ``gearbox-hil serve`` that an adapter type adds.

    ``parse`` is the argparse ``type``: it returns the value or raises
    ``argparse.ArgumentTypeError`` with a one-line message.  The value
    reaches :meth:`AdapterDeclaration.apply_cli` under ``flag``.  With
    ``optional_value`` the value may be left out (``--web`` as well as
    ``--web 9000``); ``const`` is the value then.
    """

    flag: str
    metavar: str
    help: str
    parse: Callable[[str], Any]
    optional_value: bool = False
    const: Any = None

    @property
    def dest(self) -> str:
        """The argparse attribute name (``--zmq-port`` -> ``zmq_port``)."""
        return self.flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class TransportFault:
    """A fault of one transport, checked against the map's keys (not yet against a running adapter).

    ``target`` is the adapter type, ``what`` what the fault acts on (a
    message name, ``commands``): the default fault name is
    ``target:what:kind``.  A transport subclasses it with its own fields.
    """

    target: str
    kind: str
    what: str


class AdapterDeclaration:
    """The command-line options and fault kinds of an adapter type (none by default).

    A transport subclasses it in a module that imports no transport library
    and lists the module in :data:`DECLARATIONS`.
    """

    type_name: str = ""
    cli_options: tuple[CliOption, ...] = ()
    fault_kinds: tuple[str, ...] = ()
    # its command-line options add an adapter of the type (named after it) to an I/O config that has none
    cli_adds_adapter: bool = False
    # options another type declares that also apply to every adapter of this type (to none if it has none):
    # ``--can-channel`` moves the J1939 rest-bus with the CAN adapter, as both must be on one bus
    follows_cli: tuple[str, ...] = ()
    # a top-level table named after the type (``[web]``) is a shorthand for one ``[[adapters]]`` table of the type
    config_table: bool = False
    # options that name a file or a folder: a relative one is from the I/O config's folder (as [recording] folder
    # and [loop] snapshot_dir are), not from the working directory the server was started in
    path_options: tuple[str, ...] = ()

    def apply_cli(self, options: dict, given: dict[str, Any], source: str, key: str) -> dict:
        """The ``[[adapters]]`` options with the command line's values applied (``given``: flag -> value).

        ``source`` and ``key`` name the I/O config and the table (for
        messages); raises ``plant_models.config.ConfigError`` naming the
        option or the key.
        """
        return options

    def parse_fault(self, d: dict, where: str) -> TransportFault:
        """A fault map of this transport's target with a valid ``kind``, checked key by key; raises ``FaultError``."""
        raise fault_error(where, f"the {self.type_name} adapter injects no faults")


# -- the declarations of the built-in types --------------------------------------------------------------
DECLARATIONS: dict[str, str] = {
    "zmq": "io_adapters.zmq.declaration",
    "can": "io_adapters.can.declaration",
    "j1939": "io_adapters.can.j1939_declaration",
    "web": "io_adapters.web.declaration",
    "xcp": "io_adapters.xcp.declaration",
    "device": "io_adapters.devices.declaration",
    "uds": "io_adapters.can.uds_declaration",
}
"""Adapter type -> the module whose ``DECLARATION`` declares it (in the order ``serve --help`` lists options)."""

_REGISTERED: dict[str, AdapterDeclaration] = {}


def port_arg(text: str) -> int:
    """A ``--...-port`` option's value: 0 (a free port) or 1..65535; anything else is argparse's usage error."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0 (a free port) or a port 1..65535, got {text}")
    return v


def register_declaration(type_name: str, declaration: AdapterDeclaration) -> None:
    """The declaration of an adapter type from outside the project (see :func:`io_adapters.base.register_adapter`)."""
    _REGISTERED[type_name] = declaration


def declaration(type_name: str) -> AdapterDeclaration:
    """The declaration of adapter type ``type_name`` (an empty one for a type that declares nothing)."""
    if type_name in _REGISTERED:
        return _REGISTERED[type_name]
    if type_name in DECLARATIONS:
        return importlib.import_module(DECLARATIONS[type_name]).DECLARATION
    out = AdapterDeclaration()
    out.type_name = type_name
    return out


def declarations() -> list[AdapterDeclaration]:
    """Every known adapter type's declaration, built-in types first."""
    return [declaration(t) for t in (*DECLARATIONS, *(t for t in _REGISTERED if t not in DECLARATIONS))]


def fault_targets() -> tuple[str, ...]:
    """The adapter types that take faults (their type name is the fault target)."""
    return tuple(d.type_name for d in declarations() if d.fault_kinds)


__all__ = ["port_arg", "CliOption", "TransportFault", "AdapterDeclaration", "DECLARATIONS", "register_declaration",
           "declaration", "declarations", "fault_targets", "fault_error", "fault_number", "fault_integer",
           "fault_keys"]
