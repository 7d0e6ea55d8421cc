"""UDS on a J1939 network: ISO-TP with normal fixed addressing (ISO 15765-2, 29-bit), as J1939 ECUs carry it.

A request to the ECU at source address TA from a tester at SA goes out on
0x18DA<TA><SA> (priority 6, PGN 0xDA00, destination specific), the answer
on 0x18DA<SA><TA>, and a functional request on 0xDB00 to the global address
(0x18DBFF<SA>).  can-isotp calls this ``NormalFixed_29bits``; the UDS server
(:class:`~io_adapters.can.uds_server.UdsServer` with
:func:`j1939_addressing`) and the tester (:class:`~io_adapters.can.uds_tester.UdsLink`
with :func:`~io_adapters.can.uds_tester.normal_fixed_ids`, ``[uds] addressing =
"normal_fixed"`` in a test file, the same in the ``uds`` adapter's table) run
it on the same transport (:class:`~io_adapters.can.isotp_clock.ClockedIsoTp`).

The PGNs 0xDA00 and 0xDB00 are not J1939-21 transport or request PGNs: a J1939
node passes their frames to its UDS server before its own handling
(``examples/ecu_emulator_j1939.py``, the J1939 TCU at 0x03); the rest-bus's
nodes (:mod:`io_adapters.can.restbus`) answer neither.
"""

from __future__ import annotations

from .uds_server import UdsAddressing
from .uds_tester import normal_fixed_ids

PGN_UDS_PHYSICAL = 0xDA00  # ISO 15765-2 normal fixed addressing, physical (destination specific)
PGN_UDS_FUNCTIONAL = 0xDB00  # functional
TESTER_ADDRESS = 0xF1  # the off-board diagnostic tool's source address (J1939 preferred address range 0xF1..0xF9)


def j1939_addressing(ecu: int, tester: int = TESTER_ADDRESS) -> UdsAddressing:
    """The UDS server's addressing of the ECU at source address ``ecu`` for the tester at ``tester``."""
    ids = normal_fixed_ids(ecu, tester)
    return UdsAddressing(ids["request_id"], ids["response_id"], ids["functional_id"], extended_id=True, fixed=True)


__all__ = ["PGN_UDS_FUNCTIONAL", "PGN_UDS_PHYSICAL", "TESTER_ADDRESS", "j1939_addressing"]
