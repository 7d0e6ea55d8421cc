"""What the J1939 rest-bus adapter declares to the server: its fault kinds (no command-line options).

Imports no python-can; see :mod:`io_adapters.declaration`.  The faults are
checked against the running adapter's nodes and messages by
:meth:`io_adapters.can.restbus.J1939Adapter.check_fault`.

* ``drop`` / ``wrong_dlc`` (``message``: EEC1, EEC2, CCVS1 or TC1): the
  emulated node's cyclic message is not sent / is sent one byte short;
* ``lost_address_claim`` (``node``: engine or vehicle): the node behaves as
  if a node with a lower NAME had claimed its address: it sends *cannot
  claim* from address 254 and falls silent; cleared, it claims again;
* ``missing_dm1`` (``node``): no DM1 (neither cyclic nor requested).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..declaration import AdapterDeclaration, TransportFault, fault_error, fault_keys

FAULT_KINDS = ("drop", "wrong_dlc", "lost_address_claim", "missing_dm1")
MESSAGE_KINDS = ("drop", "wrong_dlc")


@dataclass(frozen=True)
class J1939Fault(TransportFault):
    """A fault of one cyclic message or one emulated node (``what``)."""


class J1939Declaration(AdapterDeclaration):
    type_name = "j1939"
    fault_kinds = FAULT_KINDS

    def parse_fault(self, d: dict, where: str) -> J1939Fault:
        kind = d["kind"]
        key = "message" if kind in MESSAGE_KINDS else "node"
        fault_keys(d, (key,), where)
        what = d.get(key)
        if not isinstance(what, str) or not what:
            raise fault_error(where, f"a j1939 {kind} fault needs {key!r}")
        return J1939Fault("j1939", kind, what)


DECLARATION = J1939Declaration()

__all__ = ["DECLARATION", "J1939Declaration", "J1939Fault", "FAULT_KINDS"]
