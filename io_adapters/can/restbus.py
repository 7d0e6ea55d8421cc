"""The J1939 rest-bus of the tractor: the engine ECU and the vehicle ECU around a transmission controller.

Adapter type ``j1939`` (``[[adapters]] type = "j1939"``), next to a ``can``
adapter that carries the TCU's valve commands and the plant's sensor frames
(configs/io_j1939_powershift.toml).  The nodes it plays (configs/powershift_j1939.dbc):

* engine ECU (source address 0x00): EEC1 every 10 ms with the plant's engine
  speed and the applied torque in percent of the reference torque, EEC2 every
  50 ms (pedal), DM1 every second (by BAM for more than one active DTC; the
  DTCs from the option ``engine_dtcs`` or :meth:`J1939Adapter.set_dtcs`);
  it obeys TSC1 from the TCU: override mode 2 (torque control) sets the
  engine torque, mode 3 (speed/torque limit) limits the demand to the
  requested torque; the plant's engine torque input gets the result in the
  tick after the TSC1 frame arrived; a stale TSC1 releases the override.  On a
  plant with the powertrain's engine (an input ``torque_limit``) TSC1 modes 2
  and 3 set that torque intervention input instead (released: its default,
  the largest full-load torque) and EEC1 reports the engine's torque output;
* vehicle ECU (source address 0x21): CCVS1 every 100 ms with the wheel-based
  speed from the plant's output shaft, TC1 every 50 ms to the TCU with the
  requested gear (option ``requested_gear``; then the control request ``adapter_set``
  ``{"adapter": "j1939", "set": {"requested_gear": 3}}`` or :meth:`J1939Adapter.request_gear`).

Each node claims its address with its NAME at start-up (J1939-81) and
answers requests for the PGNs it sends (:mod:`io_adapters.can.j1939`).  What
the TCU sends (ETC1, ETC2, TSC1) is decoded into ``tcu_signals`` and the
status; a TCU message without a frame for 3 of its cycles is stale and counted
(``timeouts``), like the E2E rejections of the classic sets.

All protocol work runs in :meth:`pump`, between ticks; the tick's ``read``
writes one precomputed value (the engine torque) into the plant inputs.
"""

from __future__ import annotations

import time
from pathlib import Path

import can

from plant_models.config import ConfigReader, resolve_config
from plant_models.plant import Plant

from ..base import Adapter, AdapterError, LoopContext
from . import j1939 as j
from .j1939_declaration import DECLARATION, MESSAGE_KINDS, J1939Fault
from .message_set import load_dbc

RPM = 60.0 / (2.0 * 3.141592653589793)  # rpm per rad/s
TCU_PGNS = {j.PGN_ETC1: "ETC1", j.PGN_ETC2: "ETC2", j.PGN_TSC1: "TSC1"}
DEFAULT_NAMES = {"engine": j.name_pack(1, 0x2A, function=0, industry_group=2),  # agricultural, engine
                 "vehicle": j.name_pack(2, 0x2A, function=0x86, industry_group=2)}  # agricultural, vehicle ECU


class J1939Adapter(Adapter):
    """Engine and vehicle ECU of a J1939 network, emulated around the TCU (module docstring)."""

    type_name = "j1939"
    declaration = DECLARATION  # its fault kinds

    def __init__(self, name: str, options: dict):
        super().__init__(name, options)
        cfg = ConfigReader(dict(options), f"adapter {name!r}")
        self.interface = cfg.string("interface", "virtual")
        self.channel = cfg.raw("channel", "gearbox-hil")
        self.bitrate = cfg.integer("bitrate", 250000, lo=10000, hi=1000000)
        self.dbc_name = cfg.string("dbc", "powershift_j1939.dbc")
        self.torque_input = cfg.string("engine_torque_input", "")  # "": torque_limit with an engine, else engine_torque
        self.speed_output = cfg.string("engine_speed_output", "w_1")
        self.wheel_output = cfg.string("wheel_speed_output", "w_out")
        self.kmh_per_rad_s = cfg.number("wheel_speed_kmh_per_rad_s", 0.144, positive=True)
        self.reference_Nm = cfg.number("reference_torque_Nm", 1000.0, positive=True)
        self.demand_Nm = cfg.number("engine_demand_Nm", 200.0)
        self.requested_gear = cfg.integer("requested_gear", 1, lo=-125, hi=125)
        self.names = {k: cfg.integer(f"{k}_name", v, lo=0, hi=(1 << 64) - 1) for k, v in DEFAULT_NAMES.items()}
        self.tcu_address = cfg.integer("tcu_address", 0x03, lo=0, hi=253)
        dtcs = cfg.raw("engine_dtcs", [])
        if not isinstance(dtcs, list) or not all(
                isinstance(d, list) and len(d) == 3 and all(isinstance(x, int) and not isinstance(x, bool) for x in d)
                and 0 <= d[0] < 1 << 19 and 0 <= d[1] < 32 and 0 <= d[2] < 128 for d in dtcs):
            raise cfg.error("engine_dtcs", "must be a list of [SPN (0..524287), FMI (0..31), occurrences (0..127)]")
        self.engine_dtcs = [tuple(d) for d in dtcs]
        cfg.reject_unknown()
        self.bus = None
        self.torque_Nm = self.demand_Nm  # the engine torque the next tick applies
        self.tcu_signals: dict[str, dict] = {}
        self.counts = {"rx_frames": 0, "tx_frames": 0, "tx_errors": 0, "timeouts": 0, "tsc1_applied": 0,
                       "foreign": 0, "decode_errors": 0}
        self.per_pgn_timeouts = {n: 0 for n in TCU_PGNS.values()}
        self._last_ms = {n: None for n in TCU_PGNS.values()}
        self._stale = {n: True for n in TCU_PGNS.values()}
        self._now_ms = 0.0
        self._started = False

    # -- set-up ---------------------------------------------------------------------------------------
    def open(self, plant: Plant, ctx: LoopContext) -> None:
        super().open(plant, ctx)
        path = resolve_config(self.dbc_name)
        self.db = load_dbc(Path(path), f"adapter {self.name!r}", "dbc")
        names = {s.name for s in plant.inputs}
        if not self.torque_input:
            self.torque_input = "torque_limit" if "torque_limit" in names else "engine_torque"
        # with the powertrain's engine TSC1 acts on its torque intervention input (a cap on the torque the engine
        # makes from its pedal and governor), and EEC1 reports the engine's torque output
        self.intervention = self.torque_input == "torque_limit"
        try:
            self._u = plant.input_index(self.torque_input)
            if self.intervention:
                self.demand_Nm = plant.inputs[self._u].default  # the released limit: no intervention
                self.torque_Nm = self.demand_Nm
            self._y_torque = plant.output_index("engine_torque") if self.intervention else -1
            self._u_lo, self._u_hi = plant.inputs[self._u].lo, plant.inputs[self._u].hi
            self._w_eng = plant.output_index(self.speed_output)
            self._w_out = plant.output_index(self.wheel_output)
        except KeyError as exc:
            raise AdapterError(f"{self.name}: {exc.args[0]}") from None
        msg = self.db.get_message_by_name
        self.m = {n: msg(n) for n in ("EEC1", "EEC2", "CCVS1", "TC1", "ETC1", "ETC2", "TSC1", "DM1")}
        self.engine = j.Node("engine", self.names["engine"], 0x00, {
            j.PGN_EEC1: lambda: (3, self._eec1()), j.PGN_EEC2: lambda: (3, self._eec2())}, dm1=j.Dm1())
        self.set_dtcs(self.engine_dtcs)
        self.vehicle = j.Node("vehicle", self.names["vehicle"], 0x21, {
            j.PGN_CCVS1: lambda: (6, self._ccvs1()), j.PGN_TC1: lambda: (3, self._tc1())})
        self.nodes = (self.engine, self.vehicle)
        # cyclic messages: [node, frame ID, payload function, period ms, next due ms, fault kind or ""]
        self._cyclic = {"EEC1": [self.engine, self.m["EEC1"].frame_id, self._eec1, 10.0, 0.0, ""],
                        "EEC2": [self.engine, self.m["EEC2"].frame_id, self._eec2, 50.0, 0.0, ""],
                        "CCVS1": [self.vehicle, self.m["CCVS1"].frame_id, self._ccvs1, 100.0, 0.0, ""],
                        "TC1": [self.vehicle, self.m["TC1"].frame_id, self._tc1, 50.0, 0.0, ""]}
        self.dropped_by_fault = 0
        self._timeout_ms = {n: 3.0 * (self.m[n].cycle_time or 100) for n in TCU_PGNS.values()}
        try:
            if self.interface == "vbus":  # the local virtual bus, also from a checkout not installed
                from ..vbus import register

                register()
            self.bus = can.Bus(interface=self.interface, channel=self.channel, bitrate=self.bitrate)
        except Exception as exc:  # python-can raises many types for a missing interface
            raise AdapterError(f"{self.name}: cannot open {self.interface} {self.channel}: {exc}") from None
        self._msg = can.Message(is_extended_id=True, data=bytearray(8))

    # -- the tick --------------------------------------------------------------------------------------
    def _read_internal(self, tick: int, now_ns: int, drive: bool) -> int:
        self._now_ms = round(tick * self.ctx.period_s * 1e3, 6)  # whole ms stay whole (cycles exact)
        if drive:
            self.plant.u[self._u] = min(max(self.torque_Nm, self._u_lo), self._u_hi)  # inside the input's range
        return 0  # the TCU's own command frames (the can adapter) feed the watchdog

    # -- between ticks ---------------------------------------------------------------------------------
    def pump(self, until_ns: int = 0) -> None:
        if self.bus is None:
            return
        now = self._now_ms
        if not self._started:
            self._started = True
            for node in self.nodes:
                self._send_all(node.start(now))
        while (msg := self.bus.recv(0.0)) is not None:
            if msg.is_extended_id and not msg.is_error_frame and not msg.is_remote_frame:
                self._on_frame(msg, now)
        for node in self.nodes:
            self._send_all(node.poll(now))
        for c in self._cyclic.values():
            if now >= c[4]:
                c[4] = max(c[4] + c[3], now)  # on the cycle's grid
                if c[0].can_send:
                    if c[5] == "drop":
                        self.dropped_by_fault += 1
                    else:
                        data = c[2]()
                        self._send(c[1], data[:-1] if c[5] == "wrong_dlc" else data)
        self._check_timeouts(now)
        if until_ns and time.monotonic_ns() > until_ns:
            return

    def _on_frame(self, msg, now: float) -> None:
        self.counts["rx_frames"] += 1
        data = bytes(msg.data)
        for node in self.nodes:
            self._send_all(node.on_frame(msg.arbitration_id, data, now))
        _, pgn, da, sa = j.parse_id(msg.arbitration_id)
        name = TCU_PGNS.get(pgn)
        if name is None or sa != self.tcu_address or (name == "TSC1" and da != self.engine.address):
            return
        try:
            values = self.m[name].decode(data, decode_choices=False)
        except Exception:  # a short or malformed frame: counted, never applied
            self.counts["decode_errors"] += 1
            return
        self.tcu_signals[name] = values
        self._last_ms[name] = now
        self._stale[name] = False
        if name == "TSC1":
            self._apply_tsc1(values)

    def _apply_tsc1(self, v: dict) -> None:
        mode = int(v["EngOverrideCtrlMode"])
        limit = float(v["EngRqedTorque_TorqueLimit"]) * self.reference_Nm / 100.0
        if self.intervention and mode in (2, 3):  # the engine's cap (it cannot be driven above its pedal's torque)
            self.torque_Nm = limit
        elif mode == 2:  # torque control: the requested torque
            self.torque_Nm = limit
        elif mode == 3:  # speed/torque limit control: the demand, limited
            self.torque_Nm = min(self.demand_Nm, limit)
        else:  # 0: override disabled; 1 (speed control) is not emulated: the demand
            self.torque_Nm = self.demand_Nm
        self.counts["tsc1_applied"] += 1

    def _check_timeouts(self, now: float) -> None:
        for name, last in self._last_ms.items():
            if last is not None and not self._stale[name] and now - last > self._timeout_ms[name]:
                self._stale[name] = True
                self.per_pgn_timeouts[name] += 1
                self.counts["timeouts"] += 1
                if name == "TSC1":
                    self.torque_Nm = self.demand_Nm  # a stale override is released

    def _send_all(self, frames: list) -> None:
        for fid, data in frames:
            self._send(fid, data)

    def _send(self, fid: int, data: bytes) -> None:
        m = self._msg
        m.arbitration_id = fid
        m.data = bytearray(data)
        m.dlc = len(data)
        try:
            self.bus.send(m, timeout=0)
            self.counts["tx_frames"] += 1
        except can.CanError:
            self.counts["tx_errors"] += 1

    # -- payloads of the emulated nodes ----------------------------------------------------------------
    def _eec1(self) -> bytes:
        actual = float(self.plant.y[self._y_torque]) if self.intervention else self.torque_Nm
        pct = max(-125.0, min(125.0, 100.0 * actual / self.reference_Nm))
        rpm = max(0.0, min(8031.875, float(self.plant.y[self._w_eng]) * RPM))
        dem = max(-125.0, min(125.0, 100.0 * self.demand_Nm / self.reference_Nm))
        return self.m["EEC1"].encode({"EngTorqueMode": 0, "DriversDemandEngPercentTorque": round(dem),
                                      "ActualEngPercentTorque": round(pct), "EngSpeed": rpm,
                                      "SrcAddrssOfCntrllngDvcForEngCtrl": 0, "EngStarterMode": 15,
                                      "EngDemandPercentTorque": round(pct)}, strict=False)

    def _eec2(self) -> bytes:
        return self.m["EEC2"].encode({"AccelPedalPos1": 50.0, "EngPercentLoadAtCurrentSpeed": 0}, strict=False)

    def _ccvs1(self) -> bytes:
        kmh = max(0.0, min(250.996, abs(float(self.plant.y[self._w_out])) * self.kmh_per_rad_s))
        return self.m["CCVS1"].encode({"WheelBasedVehicleSpeed": kmh}, strict=False)

    def _tc1(self) -> bytes:
        return self.m["TC1"].encode({"TransGearShiftInhibitRequest": 0, "TransTrqConverterLockupDisableRq": 3,
                                     "DisengageDrivelineRequest": 0, "RequestedPercentClutchSlip": 0,
                                     "TransRequestedGear": self.requested_gear}, strict=False)

    # -- what the bench drives and reads ---------------------------------------------------------------
    def request_gear(self, gear: int) -> None:
        """The operator's gear request that TC1 carries from now on (between ticks)."""
        self.requested_gear = int(gear)

    def settable(self) -> dict[str, tuple[int, int]]:
        return {"requested_gear": (-125, 125)}  # TC1's SPN 525 range (125: park, 126: use current gear)

    def set_values(self, values: dict[str, int]) -> None:
        self.request_gear(values["requested_gear"])

    def set_dtcs(self, dtcs: list[tuple[int, int, int]]) -> None:
        """The engine's active DTCs ``(SPN, FMI, occurrences)`` for DM1 (more than one go by BAM)."""
        self.engine.dm1.dtcs = list(dtcs)
        self.engine.dm1.amber_lamp = 1 if dtcs else 0

    # -- injected faults (kinds: j1939_declaration.py), between ticks ------------------------------------
    def check_fault(self, spec: J1939Fault) -> None:
        from plant_models.errors import FaultError

        if spec.kind in MESSAGE_KINDS and spec.what not in self._cyclic:
            raise FaultError(f"fault: j1939 has no cyclic message {spec.what!r}; its messages are "
                             + ", ".join(self._cyclic))
        nodes = {n.label: n for n in self.nodes}
        if spec.kind not in MESSAGE_KINDS and spec.what not in nodes:
            raise FaultError(f"fault: j1939 has no node {spec.what!r}; its nodes are {', '.join(nodes)}")
        if spec.kind == "missing_dm1" and nodes[spec.what].dm1 is None:
            raise FaultError(f"fault: the j1939 {spec.what} node sends no DM1")

    def set_fault(self, spec: J1939Fault) -> None:
        self.check_fault(spec)
        if spec.kind in MESSAGE_KINDS:
            self._cyclic[spec.what][5] = spec.kind
            return
        node = {n.label: n for n in self.nodes}[spec.what]
        if spec.kind == "missing_dm1":
            node.dm1_suppressed = True
        elif node.state != "lost":
            self._send_all(node.lose_claim())

    def clear_fault(self, spec: J1939Fault) -> None:
        if spec.kind in MESSAGE_KINDS:
            self._cyclic[spec.what][5] = ""
            return
        node = {n.label: n for n in self.nodes}[spec.what]
        if spec.kind == "missing_dm1":
            node.dm1_suppressed = False
        elif node.state == "lost":
            self._send_all(node.start(self._now_ms))

    def close(self) -> None:
        if self.bus is not None:
            self.bus.shutdown()
            self.bus = None

    def _status_internal(self) -> dict:
        return {"type": "j1939", **self.counts, "dropped_by_fault": self.dropped_by_fault, "timeouts_by_pgn": dict(self.per_pgn_timeouts),
                "engine_torque_Nm": self.torque_Nm,
                "nodes": {n.label: {"address": n.address, "state": n.state, **n.counts} for n in self.nodes},
                "tcu": {k: dict(v) for k, v in self.tcu_signals.items()}}
