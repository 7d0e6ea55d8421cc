"""What the CAN adapter declares to the server: ``--can-channel``, ``--can-share`` and its fault kinds.

Imports no python-can (``serve --help`` and fault checks stay cheap); see
:mod:`io_adapters.declaration`.  The faults are checked against a running
adapter's message set by :meth:`io_adapters.can.adapter.CanAdapter.check_fault`.
"""

from __future__ import annotations

import argparse
import os
import secrets
from dataclasses import dataclass
from typing import Any

from ..declaration import (AdapterDeclaration, CliOption, TransportFault, fault_error, fault_integer, fault_keys,
                           fault_number)

FAULT_KINDS = ("drop", "delay", "freeze_alive", "corrupt_crc", "wrong_dlc", "out_of_range", "ignore_rx")


def _share_arg(text: str) -> tuple[str, int]:
    """``ws://HOST:PORT/``, ``HOST:PORT`` or ``PORT`` (host 127.0.0.1) -> (host, port)."""
    rest = text[len("ws://"):] if text.startswith("ws://") else text
    rest = rest.rstrip("/")
    host, sep, port = rest.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", rest
    try:
        v = int(port)
    except ValueError:
        v = -1
    if not host or not 0 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"must be ws://HOST:PORT/, HOST:PORT or PORT (0: a free port), got {text!r}")
    return host.strip("[]"), v


CHANNEL_MAX_CHARS = 200  # longer than any interface's channel name (a vbus channel: 64 characters, else hashed)
FRESH = "*"  # a channel on the command line or in an I/O config: a vbus channel no other server uses


def fresh_channel() -> str:
    """A vbus channel name of this process that no other server uses (as port 0 is a free port)."""
    return f"hil-{os.getpid()}-{secrets.token_hex(3)}"


def resolve_channel(interface: str, channel, fresh: dict[str, str]):
    """The channel an adapter opens: a config's ``"*"`` on the vbus becomes a fresh channel, the same one for every
    adapter of one server (``fresh``: the server's :attr:`~io_adapters.base.LoopContext.fresh_channels`); any
    other channel as it is.  ``--can-channel '*'`` is resolved once already, by :func:`_channel_arg`."""
    if interface != "vbus" or channel != FRESH:
        return channel
    if interface not in fresh:
        fresh[interface] = fresh_channel()
    return fresh[interface]


def _channel_arg(text: str) -> str:
    """A bus channel name from the command line: printable, without spaces, at most CHANNEL_MAX_CHARS characters.

    ``*`` becomes a fresh vbus channel name here, once, so that every adapter given the channel (the CAN
    adapter and a J1939 rest-bus) is on the same one.
    """
    if not text or len(text) > CHANNEL_MAX_CHARS or not text.isprintable() or any(c.isspace() for c in text):
        raise argparse.ArgumentTypeError(f"must be a channel name of 1..{CHANNEL_MAX_CHARS} printable characters "
                                         f"without spaces (vcan0, can0, PCAN_USBBUS1, a vbus channel, *), got "
                                         f"{text[:CHANNEL_MAX_CHARS]!r}")
    return fresh_channel() if text == FRESH else text


@dataclass(frozen=True)
class CanFault(TransportFault):
    """A fault of one message (``what``): ``cycles`` of a ``delay``, ``signal`` and ``value`` of an ``out_of_range``
    (None: the first raw value outside the DBC range)."""

    cycles: int = 1
    signal: str = ""
    value: float | None = None

    @property
    def message(self) -> str:
        """The message's name in the DBC."""
        return self.what


class CanDeclaration(AdapterDeclaration):
    type_name = "can"
    cli_options = (
        CliOption("--can-channel", "NAME", "the CAN adapter's bus channel instead of the I/O config's, and a J1939 "
                  "rest-bus's (vbus: a channel name, '*' a fresh one; socketcan: vcan0, can0; pcan: PCAN_USBBUS1, ...)",
                  _channel_arg),
        CliOption("--can-share", "URL", "share the CAN adapter's virtual bus with other processes at "
                  "ws://HOST:PORT/ (or HOST:PORT, or PORT on 127.0.0.1; 0: a free port)", _share_arg),
    )
    fault_kinds = FAULT_KINDS

    def apply_cli(self, options: dict, given: dict[str, Any], source: str, key: str) -> dict:
        """``--can-channel``: the bus channel; ``--can-share``: a loopback share of the virtual bus (added if the
        table has none)."""
        from plant_models.config import ConfigError

        options = dict(options)
        if "--can-channel" in given:
            options["channel"] = given["--can-channel"]
        if "--can-share" not in given:
            return options
        host, port = given["--can-share"]
        if options.get("interface", "virtual") not in ("virtual", "vbus"):
            raise ConfigError("--can-share", "", f"the can adapter of {source} uses interface "
                              f"{options['interface']!r}; only a virtual bus (virtual, vbus) is shared")
        share = options.get("share", {})
        if not isinstance(share, dict):
            raise ConfigError(source, f"{key}.share", "must be a table")
        options["share"] = dict(share, host=host, port=port)
        return options

    def parse_fault(self, d: dict, where: str) -> CanFault:
        kind = d["kind"]
        fault_keys(d, ("message", "cycles", "signal", "value"), where)
        msg = d.get("message")
        if not isinstance(msg, str) or not msg:
            raise fault_error(where, "a can fault needs 'message' (a message name of the DBC)")
        cycles = fault_integer(d, "cycles", where, 1, 1, 1000)
        for k, only in (("cycles", "delay"), ("signal", "out_of_range"), ("value", "out_of_range")):
            if k in d and kind != only:
                raise fault_error(where, f"{k!r} is for {only} faults")
        sig = d.get("signal", "")
        if kind == "out_of_range" and (not isinstance(sig, str) or not sig):
            raise fault_error(where, "an out_of_range fault needs 'signal' (a signal of the message)")
        return CanFault("can", kind, msg, cycles=cycles, signal=sig if isinstance(sig, str) else "",
                        value=fault_number(d, "value", where) if "value" in d else None)


DECLARATION = CanDeclaration()

__all__ = ["DECLARATION", "FRESH", "CanDeclaration", "CanFault", "FAULT_KINDS", "fresh_channel", "resolve_channel"]
