"""What the UDS tester adapter declares to the server: that ``--can-channel`` (the CAN adapter's option) moves it too.

Imports no python-can; see :mod:`io_adapters.declaration` and :mod:`io_adapters.can.uds_adapter`.  It injects
no faults (a fault of the ECU's answers is the ECU's, a fault of the bus the CAN adapter's).
"""

from __future__ import annotations

from ..declaration import AdapterDeclaration


class UdsDeclaration(AdapterDeclaration):
    type_name = "uds"
    follows_cli = ("--can-channel",)  # the tester talks to the TCU on the CAN adapter's bus

    def apply_cli(self, options: dict, given: dict, source: str, key: str) -> dict:
        """``--can-channel``: the tester's channel, the CAN adapter's."""
        return dict(options, channel=given["--can-channel"]) if "--can-channel" in given else options


DECLARATION = UdsDeclaration()

__all__ = ["DECLARATION", "UdsDeclaration"]
