"""What the J1939 rest-bus adapter declares to the server: its fault kinds, and that ``--can-channel`` (the CAN
adapter's option) moves it too.

Imports no python-can; see :mod:`io_adapters.declaration`.  The faults are
checked against the running adapter's nodes and messages by
:meth:`io_adapters.can.restbus.J1939Adapter.check_fault`.

* ``drop`` / ``wrong_dlc`` (``message``: EEC1, EEC2, CCVS1, TC1 or EBC1): the
  emulated node's cyclic message is not sent / is sent one byte short;
* ``lost_address_claim`` (``node``: engine or vehicle): the node behaves as
  if a node with a lower NAME had claimed its address: it sends *cannot
  claim* from address 254 and falls silent; cleared, it claims again;
* ``missing_dm1`` (``node``): no DM1 (neither cyclic nor requested);
* ``dtc`` (``node``, ``spn`` 0..524287, ``fmi`` 0..31): the node's DTC is
  active while the fault is set (a DM11 does not clear it), previously
  active once the fault is cleared.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..declaration import AdapterDeclaration, TransportFault, fault_error, fault_integer, fault_keys

FAULT_KINDS = ("drop", "wrong_dlc", "lost_address_claim", "missing_dm1", "dtc")
MESSAGE_KINDS = ("drop", "wrong_dlc")


@dataclass(frozen=True)
class J1939Fault(TransportFault):
    """A fault of one cyclic message or one emulated node (``what``); a ``dtc`` fault's SPN and FMI."""

    spn: int = 0
    fmi: int = 0


class J1939Declaration(AdapterDeclaration):
    type_name = "j1939"
    fault_kinds = FAULT_KINDS
    follows_cli = ("--can-channel",)  # the rest-bus is on the CAN adapter's bus

    def apply_cli(self, options: dict, given: dict, source: str, key: str) -> dict:
        """``--can-channel``: the rest-bus's channel, the CAN adapter's."""
        return dict(options, channel=given["--can-channel"]) if "--can-channel" in given else options

    def parse_fault(self, d: dict, where: str) -> J1939Fault:
        kind = d["kind"]
        key = "message" if kind in MESSAGE_KINDS else "node"
        fault_keys(d, (key, "spn", "fmi") if kind == "dtc" else (key,), where)
        what = d.get(key)
        if not isinstance(what, str) or not what:
            raise fault_error(where, f"a j1939 {kind} fault needs {key!r}")
        if kind != "dtc":
            return J1939Fault("j1939", kind, what)
        if "spn" not in d or "fmi" not in d:
            raise fault_error(where, "a j1939 dtc fault needs 'spn' and 'fmi'")
        return J1939Fault("j1939", kind, what, fault_integer(d, "spn", where, 0, 0, (1 << 19) - 1),
                          fault_integer(d, "fmi", where, 0, 0, 31))


DECLARATION = J1939Declaration()

__all__ = ["DECLARATION", "J1939Declaration", "J1939Fault", "FAULT_KINDS"]
