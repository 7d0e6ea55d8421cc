"""Diagnostics of the rest-bus nodes set at run time: DTCs and lamps by the control channel, test files and faults.

A part of :class:`io_adapters.can.restbus.J1939Adapter` (a mixin, its own
file because it is one job: what the bench tells the nodes' DTC memory).

* ``adapter_set`` values (docs/protocol.md; checked whole, between ticks):
  ``<node>_dtc_spn`` (0..524287), ``<node>_dtc_fmi`` (0..31) and
  ``<node>_dtc_active`` (1: active, 0: no longer active, so previously
  active) together set one DTC of ``engine`` or ``vehicle``;
  ``<node>_amber_lamp``, ``_red_lamp``, ``_mil``, ``_protect_lamp`` (0..3,
  J1939-73: 0 off, 1 on) set a lamp, which then no longer follows the DTCs
  (until then the amber lamp is on while any DTC is active).
* The fault kind ``dtc`` (``node``, ``spn``, ``fmi``): the DTC is active
  while the fault is set (a DM11 clear does not clear it: its cause is still
  there), previously active when it is cleared.
* Each node answers software, component and ECU identification requests
  (:mod:`io_adapters.can.j1939_dm`); the engine also engine hours.
"""

from __future__ import annotations

from . import j1939_dm as dm

NODES = ("engine", "vehicle")
DTC_KEYS = ("dtc_spn", "dtc_fmi", "dtc_active")
LAMP_RANGE = (0, 3)


class NodeDiagnostics:
    """DTCs, lamps and identification of the adapter's ``engine`` and ``vehicle`` nodes (module docstring)."""

    def _diag_init(self) -> None:
        self._lamps_explicit = {n: False for n in NODES}
        self._fault_dtcs: dict[str, set[tuple[int, int]]] = {n: set() for n in NODES}
        self.dtc_list_full = 0

    def _diag_node(self, label: str):
        return self.engine if label == "engine" else self.vehicle

    def diag_settable(self) -> dict[str, tuple[int, int]]:
        out = {}
        for n in NODES:
            out.update({f"{n}_dtc_spn": (0, (1 << 19) - 1), f"{n}_dtc_fmi": (0, 31), f"{n}_dtc_active": (0, 1)})
            out.update({f"{n}_{lamp}": LAMP_RANGE for lamp in dm.LAMPS})
        return out

    def diag_check(self, values: dict[str, int]) -> None:
        """A DTC's three values come together (``ValueError`` otherwise)."""
        for n in NODES:
            given = [k for k in DTC_KEYS if f"{n}_{k}" in values]
            if given and len(given) != len(DTC_KEYS):
                raise ValueError(f"{n}_dtc_spn, {n}_dtc_fmi and {n}_dtc_active go together; missing "
                                 + ", ".join(f"{n}_{k}" for k in DTC_KEYS if k not in given))

    def diag_set(self, values: dict[str, int]) -> None:
        for n in NODES:
            node = self._diag_node(n)
            if f"{n}_dtc_spn" in values:
                self.set_dtc(n, values[f"{n}_dtc_spn"], values[f"{n}_dtc_fmi"], bool(values[f"{n}_dtc_active"]))
            for lamp in dm.LAMPS:
                if f"{n}_{lamp}" in values:
                    setattr(node.dm1, lamp, values[f"{n}_{lamp}"])
                    self._lamps_explicit[n] = True

    def set_dtc(self, label: str, spn: int, fmi: int, active: bool) -> None:
        """DTC ``(spn, fmi)`` of node ``label`` active, or no longer active (then previously active)."""
        node = self._diag_node(label)
        if active:
            if not node.dm1.activate(spn, fmi):
                self.dtc_list_full += 1
        else:
            node.dm1.deactivate(spn, fmi)
        self._follow_lamps(label)

    def _follow_lamps(self, label: str) -> None:
        if not self._lamps_explicit[label]:
            node = self._diag_node(label)
            node.dm1.amber_lamp = 1 if node.dm1.dtcs else 0

    def _dtcs_cleared(self, label: str) -> None:
        """After a DM11: the DTCs of faults still set are active again, the lamps follow."""
        for spn, fmi in sorted(self._fault_dtcs[label]):
            self._diag_node(label).dm1.activate(spn, fmi)
        self._follow_lamps(label)

    def dtc_fault(self, label: str, spn: int, fmi: int, on: bool) -> None:
        """The fault kind ``dtc`` set (``on``) or cleared."""
        (self._fault_dtcs[label].add if on else self._fault_dtcs[label].discard)((spn, fmi))
        self.set_dtc(label, spn, fmi, on)

    def identification(self, label: str, identity: int) -> dict:
        """PGN -> payload function of the identification messages node ``label`` answers requests for."""
        serial = f"{identity:07d}"
        soft = dm.software_id(f"gearbox-hil {label} ECU emulation 1.0")
        comp = dm.fields("gearbox-hil", f"{label} ECU", serial, "1")
        ecu = dm.fields(f"GH-{label.upper()}-1", serial, "bench", label, "gearbox-hil")
        return {dm.PGN_SOFTWARE_ID: lambda: (6, soft), dm.PGN_COMPONENT_ID: lambda: (6, comp),
                dm.PGN_ECU_ID: lambda: (6, ecu)}

    def diag_status(self, node) -> dict:
        return {"active_dtcs": [list(d) for d in node.dm1.dtcs], "previous_dtcs": [list(d) for d in node.dm1.previous],
                "lamps": {lamp: getattr(node.dm1, lamp) for lamp in dm.LAMPS}}
