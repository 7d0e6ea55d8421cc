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
answers requests for the PGNs it sends (:mod:`io_adapters.can.j1939`), runs
the transport protocol both ways (:mod:`io_adapters.can.j1939_tp`; over
1785 bytes the extended one, :mod:`io_adapters.can.j1939_etp`), keeps
its DTCs (DM1, DM2, DM3, DM11), obeys DM13 and a commanded address and
answers identification requests (:mod:`io_adapters.can.j1939_dm`); DTCs and
lamps are set at run time (:mod:`io_adapters.can.restbus_diag`).  The
vehicle ECU also sends EBC1 (brake pedal ``brake_pedal_pct``) and DM1.  TSC1
may come from several nodes: the engine obeys the highest override priority
(:meth:`J1939Adapter._arbitrate`).  What
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

from ..base import Adapter, AdapterError, CommandCounts, LoopContext
from . import j1939 as j
from . import j1939_dm as dm
from .declaration import resolve_channel
from .j1939_declaration import DECLARATION, MESSAGE_KINDS, J1939Fault
from .message_set import load_dbc
from .restbus_diag import NodeDiagnostics

RPM = 60.0 / (2.0 * 3.141592653589793)  # rpm per rad/s
TCU_PGNS = {j.PGN_ETC1: "ETC1", j.PGN_ETC2: "ETC2", j.PGN_TSC1: "TSC1"}
PGN_EBC1 = 0xF001  # 61441
ADDR_NONE = 255  # EEC1's SPN 1483 when no TSC1 is obeyed (J1939-71: not available)
MAX_TSC1_SENDERS = 8  # senders whose TSC1 commands are kept for the arbitration
DECODE_REASONS = ("dlc", "malformed")  # a TCU frame shorter than its message / one cantools cannot decode
TSC1_REASONS = ("dlc", "not_available", "error_indicator", "out_of_range")  # why a TSC1 is refused (docs/can.md)
DEFAULT_NAMES = {"engine": j.name_pack(1, 0x2A, function=0, industry_group=2),  # agricultural, engine
                 "vehicle": j.name_pack(2, 0x2A, function=0x86, industry_group=2)}  # agricultural, vehicle ECU


class J1939Adapter(NodeDiagnostics, Adapter):
    """Engine and vehicle ECU of a J1939 network, emulated around the TCU (module docstring)."""

    type_name = "j1939"
    declaration = DECLARATION  # its fault kinds

    def __init__(self, name: str, options: dict):
        super().__init__(name, options)
        cfg = ConfigReader(dict(options), f"adapter {name!r}")
        self.interface = cfg.string("interface", "virtual")
        self.channel_option = cfg.raw("channel", "gearbox-hil")  # vbus "*": the server's fresh channel (open)
        self.channel = self.channel_option
        self.bitrate = cfg.integer("bitrate", 250000, lo=10000, hi=1000000)
        self.dbc_name = cfg.string("dbc", "powershift_j1939.dbc")
        self._bus_log = None  # the recording's bus frames, while the server records
        self._tick = 0  # of the last read
        self.torque_input = cfg.string("engine_torque_input", "")  # "": torque_limit with an engine, else engine_torque
        self.speed_output = cfg.string("engine_speed_output", "w_1")
        self.wheel_output = cfg.string("wheel_speed_output", "w_out")
        self.kmh_per_rad_s = cfg.number("wheel_speed_kmh_per_rad_s", 0.144, positive=True)
        self.reference_Nm = cfg.number("reference_torque_Nm", 1000.0, positive=True)
        self.demand_Nm = cfg.number("engine_demand_Nm", 200.0)
        self.requested_gear = cfg.integer("requested_gear", 1, lo=-125, hi=125)
        self.names = {k: cfg.integer(f"{k}_name", v, lo=0, hi=(1 << 64) - 1) for k, v in DEFAULT_NAMES.items()}
        self.tcu_address = cfg.integer("tcu_address", 0x03, lo=0, hi=253)
        self.node_dtcs = {}
        for node in ("engine", "vehicle"):
            dtcs = cfg.raw(f"{node}_dtcs", [])
            if not isinstance(dtcs, list) or len(dtcs) > dm.MAX_DTCS or not all(
                    isinstance(d, list) and len(d) == 3
                    and all(isinstance(x, int) and not isinstance(x, bool) for x in d)
                    and 0 <= d[0] < 1 << 19 and 0 <= d[1] < 32 and 0 <= d[2] < 128 for d in dtcs):
                raise cfg.error(f"{node}_dtcs", f"must be a list of at most {dm.MAX_DTCS} [SPN (0..524287), "
                                "FMI (0..31), occurrences (0..127)]")
            self.node_dtcs[node] = [tuple(d) for d in dtcs]
        self.engine_dtcs = self.node_dtcs["engine"]
        self.engine_hours_h = cfg.number("engine_hours_h", 0.0, lo=0.0)
        self.speed_gain = cfg.number("speed_control_Nm_per_rpm", 2.0, positive=True)
        self.brake_pedal_pct = 0
        cfg.reject_unknown()
        self._diag_init()
        self.engine_revolutions = 0.0
        self._tsc1_senders: dict[int, list] = {}  # source -> [mode, priority, torque N m, speed rpm, time ms]
        self.tsc1_source = ADDR_NONE  # the sender whose TSC1 the engine obeys (EEC1's SPN 1483)
        self.bus = None
        self.torque_Nm = self.demand_Nm  # the engine torque the next tick applies
        self.tcu_signals: dict[str, dict] = {}
        self.counts = {"rx_frames": 0, "tx_frames": 0, "tx_errors": 0, "timeouts": 0, "tsc1_applied": 0,
                       "tsc1_senders_full": 0, "decode_errors": 0}
        self.decode_errors = {r: 0 for r in DECODE_REASONS}
        self.tsc1_rejected = {r: 0 for r in TSC1_REASONS}
        self.per_pgn_timeouts = {n: 0 for n in TCU_PGNS.values()}
        self._last_ms = {n: None for n in TCU_PGNS.values()}
        self._stale = {n: True for n in TCU_PGNS.values()}
        self._now_ms = 0.0
        self._rev_ms = 0.0
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
        self.m = {n: msg(n) for n in ("EEC1", "EEC2", "CCVS1", "TC1", "EBC1", "ETC1", "ETC2", "TSC1", "DM1")}
        self.engine = j.Node("engine", self.names["engine"], 0x00, {
            j.PGN_EEC1: lambda: (3, self._eec1()), j.PGN_EEC2: lambda: (3, self._eec2()),
            dm.PGN_ENGINE_HOURS: lambda: (6, dm.engine_hours(self.engine_hours_h + self._now_ms / 3.6e6,
                                                             self.engine_revolutions)),
            **self.identification("engine", self.names["engine"] & 0x1FFFFF)}, dm1=j.Dm1())
        self.vehicle = j.Node("vehicle", self.names["vehicle"], 0x21, {
            j.PGN_CCVS1: lambda: (6, self._ccvs1()), j.PGN_TC1: lambda: (3, self._tc1()),
            PGN_EBC1: lambda: (6, self._ebc1()),
            **self.identification("vehicle", self.names["vehicle"] & 0x1FFFFF)}, dm1=j.Dm1())
        self.nodes = (self.engine, self.vehicle)
        for node in self.nodes:
            for spn, fmi, oc in self.node_dtcs[node.label]:
                node.dm1.dtcs.append((spn, fmi, oc))
            self._follow_lamps(node.label)
            node.on_dtcs_cleared = lambda label=node.label: self._dtcs_cleared(label)
        self._unused = {n: _unused_bits(self.m[n]) for n in ("EEC1", "EEC2", "CCVS1", "TC1", "EBC1")}
        # cyclic messages: [node, frame ID, payload function, period ms, next due ms, fault kind or ""]
        self._cyclic = {"EEC1": [self.engine, self.m["EEC1"].frame_id, self._eec1, 10.0, 0.0, ""],
                        "EEC2": [self.engine, self.m["EEC2"].frame_id, self._eec2, 50.0, 0.0, ""],
                        "CCVS1": [self.vehicle, self.m["CCVS1"].frame_id, self._ccvs1, 100.0, 0.0, ""],
                        "TC1": [self.vehicle, self.m["TC1"].frame_id, self._tc1, 50.0, 0.0, ""],
                        "EBC1": [self.vehicle, self.m["EBC1"].frame_id, self._ebc1, 100.0, 0.0, ""]}
        self.dropped_by_fault = 0
        self._timeout_ms = {n: 3.0 * (self.m[n].cycle_time or 100) for n in TCU_PGNS.values()}
        # the vbus's "*": the channel every adapter of this server given "*" opens (the CAN adapter too)
        self.channel = resolve_channel(self.interface, self.channel_option, ctx.fresh_channels)
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
        self._tick = tick
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
            if self._bus_log is not None:  # the next read applies what it brings: the row after that tick's step
                self._bus_log.put_rx(self._tick + 2, msg)
            if msg.is_extended_id and not msg.is_error_frame and not msg.is_remote_frame:
                self._on_frame(msg, now)
        for node in self.nodes:
            self._send_all(node.poll(now))
        for c in self._cyclic.values():
            if now >= c[4]:
                c[4] = max(c[4] + c[3], now)  # on the cycle's grid
                if c[0].broadcasting(now):  # claimed, and no DM13 stop holds
                    if c[5] == "drop":
                        self.dropped_by_fault += 1
                    else:
                        data = c[2]()
                        fid = c[1] & ~0xFF | c[0].address  # the node's address (a commanded one, too)
                        self._send(fid, data[:-1] if c[5] == "wrong_dlc" else data)
        self._check_timeouts(now)
        self._arbitrate(now)
        w = float(self.plant.y[self._w_eng])
        self.engine_revolutions += max(w, 0.0) * (now - self._rev_ms) / 1e3 / (2.0 * 3.141592653589793)
        self._rev_ms = now
        if until_ns and time.monotonic_ns() > until_ns:
            return

    def _on_frame(self, msg, now: float) -> None:
        self.counts["rx_frames"] += 1
        data = bytes(msg.data)
        for node in self.nodes:
            self._send_all(node.on_frame(msg.arbitration_id, data, now))
        _, pgn, da, sa = j.parse_id(msg.arbitration_id)
        name = TCU_PGNS.get(pgn)
        if name is None or sa in (self.engine.address, self.vehicle.address):
            return
        if (name == "TSC1" and da != self.engine.address) or (name != "TSC1" and sa != self.tcu_address):
            return  # TSC1 from any node to the engine; ETC1 and ETC2 of the TCU
        reason = "dlc" if len(data) < self.m[name].length else ""
        if not reason:
            try:
                values = self.m[name].decode(data, decode_choices=False)
            except Exception:  # cantools' DecodeError and the like: counted, never applied
                reason = "malformed"
        if reason:
            self.counts["decode_errors"] += 1
            self.decode_errors[reason] += 1
            if name == "TSC1":
                self.tsc1_rejected[reason] += 1
            return
        if name == "TSC1":
            reason = _tsc1_refusal(data)
            if reason:  # refused like a classic frame out of its range: the last valid TSC1 stands
                self.tsc1_rejected[reason] += 1
                return
            self._take_tsc1(sa, values, now)
            if sa != self.tcu_address:
                return
        self.tcu_signals[name] = values
        self._last_ms[name] = now
        self._stale[name] = False

    def _take_tsc1(self, sa: int, v: dict, now: float) -> None:
        """A valid TSC1 from ``sa``: its command stands for 3 of its cycles; the engine obeys the winner."""
        if sa not in self._tsc1_senders and len(self._tsc1_senders) >= MAX_TSC1_SENDERS:
            self.counts["tsc1_senders_full"] += 1
            return
        self._tsc1_senders[sa] = [int(v["EngOverrideCtrlMode"]), int(v["OverrideCtrlModePriority"]),
                                  float(v["EngRqedTorque_TorqueLimit"]) * self.reference_Nm / 100.0,
                                  float(v["EngRqedSpeed_SpeedLimit"]), now]
        self.counts["tsc1_applied"] += 1
        self._arbitrate(now)

    def _arbitrate(self, now: float) -> None:
        """The engine torque from the TSC1 commands that stand (J1939-71 override control modes).

        The highest override priority wins (0 highest, 3 lowest); among
        equal ones, limits (mode 3) combine to the lowest torque, otherwise
        the newest command wins.  Mode 1 (speed control) and a speed limit in
        mode 3 act as a proportional governor of ``speed_control_Nm_per_rpm``
        around the demand, re-evaluated at every pump from the plant's speed.
        """
        timeout = self._timeout_ms["TSC1"]
        live = {sa: c for sa, c in self._tsc1_senders.items() if now - c[4] <= timeout}
        if len(live) != len(self._tsc1_senders):
            self._tsc1_senders = live
        active = [(sa, c) for sa, c in live.items() if c[0] != 0]
        if not active:
            self.torque_Nm, self.tsc1_source = self.demand_Nm, ADDR_NONE
            return
        best = min(c[1] for _, c in active)
        active = [(sa, c) for sa, c in active if c[1] == best]
        sa, (mode, _, torque, speed, _) = max(active, key=lambda e: e[1][4])
        rpm = float(self.plant.y[self._w_eng]) * RPM
        governed = self.demand_Nm + self.speed_gain * (speed - rpm)
        if mode == 1:  # speed control: the governor drives the engine to the requested speed
            self.torque_Nm = governed
        elif mode == 2:  # torque control: the requested torque
            self.torque_Nm = torque
        else:  # 3: the demand (or the engine's own torque: its cap), limited by every limit of this priority
            limits = [c for _, c in active if c[0] == 3]
            low = min(limits, key=lambda c: c[2])
            sa = next(a for a, c in active if c is low)
            cap = low[2] if self.intervention else min(self.demand_Nm, low[2])
            over = [self.demand_Nm + self.speed_gain * (c[3] - rpm) for c in limits if c[3] < rpm]
            self.torque_Nm = min([cap, *over])
        self.tsc1_source = sa

    def _check_timeouts(self, now: float) -> None:
        for name, last in self._last_ms.items():
            if last is not None and not self._stale[name] and now - last > self._timeout_ms[name]:
                self._stale[name] = True
                self.per_pgn_timeouts[name] += 1
                self.counts["timeouts"] += 1

    def _encode(self, name: str, values: dict) -> bytes:
        """Message ``name`` with ``values``, its undefined bits set to 1 (J1939-71), as the emulated nodes send it."""
        data = self.m[name].encode(values, strict=False)
        return bytes(a | b for a, b in zip(data, self._unused[name]))

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
            return
        if self._bus_log is not None:  # sent after the tick's step: the row of that step carries its values
            from .bus_spool import F_EXTENDED

            self._bus_log.put_frame(self._tick + 1, fid, F_EXTENDED, data)

    # -- the recording's bus frames (server/recording; io_adapters/can/bus_spool.py) -----------------------
    def start_bus_log(self, path) -> dict | None:
        """Spool every frame sent and received from now to ``path`` with its tick (between ticks)."""
        if self.bus is None:
            return None
        from .bus_spool import BusSpool

        self.stop_bus_log()
        self._bus_log = BusSpool(path, [], [], [])
        return {"adapter": self.name, "spool": str(path), "dbc": str(resolve_config(self.dbc_name)), "fd": False,
                "module": "io_adapters.can.bus_mdf"}

    def stop_bus_log(self) -> dict | None:
        """Write the spool's last frames and its end record; its counts (None if none ran)."""
        spool, self._bus_log = self._bus_log, None
        return spool.close() if spool is not None else None

    # -- payloads of the emulated nodes ----------------------------------------------------------------
    def _eec1(self) -> bytes:
        actual = float(self.plant.y[self._y_torque]) if self.intervention else self.torque_Nm
        pct = max(-125.0, min(125.0, 100.0 * actual / self.reference_Nm))
        rpm = max(0.0, min(8031.875, float(self.plant.y[self._w_eng]) * RPM))
        dem = max(-125.0, min(125.0, 100.0 * self.demand_Nm / self.reference_Nm))
        return self._encode("EEC1", {"EngTorqueMode": 0, "DriversDemandEngPercentTorque": round(dem),
                                     "ActualEngPercentTorque": round(pct), "EngSpeed": rpm,
                                     "SrcAddrssOfCntrllngDvcForEngCtrl": self.tsc1_source, "EngStarterMode": 15,
                                     "EngDemandPercentTorque": round(pct)})

    def _eec2(self) -> bytes:
        return self._encode("EEC2", {"AccelPedalPos1": 50.0, "EngPercentLoadAtCurrentSpeed": 0})

    def _ccvs1(self) -> bytes:
        kmh = max(0.0, min(250.996, abs(float(self.plant.y[self._w_out])) * self.kmh_per_rad_s))
        return self._encode("CCVS1", {"WheelBasedVehicleSpeed": kmh})

    def _tc1(self) -> bytes:
        return self._encode("TC1", {"TransGearShiftInhibitRequest": 0, "TransTrqConverterLockupDisableRq": 3,
                                    "DisengageDrivelineRequest": 0, "RequestedPercentClutchSlip": 0,
                                    "TransRequestedGear": self.requested_gear})

    def _ebc1(self) -> bytes:
        pedal = self.brake_pedal_pct
        return self._encode("EBC1", {"ASREngCtrlActive": 0, "ASRBrakeCtrlActive": 0, "AntiLockBrakingActive": 0,
                                     "EBSBrakeSwitch": 1 if pedal > 0 else 0, "BrakePedalPos": pedal,
                                     "ABSFullyOperational": 1, "SrcAddrssOfCntrllngDvcForBrkCntrl": ADDR_NONE})

    # -- what the bench drives and reads ---------------------------------------------------------------
    def request_gear(self, gear: int) -> None:
        """The operator's gear request that TC1 carries from now on (between ticks)."""
        self.requested_gear = int(gear)

    def settable(self) -> dict[str, tuple[int, int]]:
        # TC1's SPN 525 range (125: park, 126: use current gear); EBC1's brake pedal (SPN 521); DTCs and lamps
        return {"requested_gear": (-125, 125), "brake_pedal_pct": (0, 100), **self.diag_settable()}

    def check_values(self, values) -> dict[str, int]:
        out = super().check_values(values)
        self.diag_check(out)
        return out

    def set_values(self, values: dict[str, int]) -> None:
        if "requested_gear" in values:
            self.request_gear(values["requested_gear"])
        if "brake_pedal_pct" in values:
            self.brake_pedal_pct = values["brake_pedal_pct"]
        self.diag_set(values)

    def set_dtcs(self, dtcs: list[tuple[int, int, int]]) -> None:
        """The engine's active DTCs ``(SPN, FMI, occurrences)`` for DM1; those no longer in it become previous."""
        for spn, fmi, _ in list(self.engine.dm1.dtcs):
            if not any(d[:2] == (spn, fmi) for d in dtcs):
                self.engine.dm1.deactivate(spn, fmi)
        self.engine.dm1.dtcs = list(dtcs)
        self._follow_lamps("engine")

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
        elif spec.kind == "dtc":
            self.dtc_fault(node.label, spec.spn, spec.fmi, True)
        else:
            node.held_lost = True
            if node.state != "lost":
                self._send_all(node.lose_claim())

    def clear_fault(self, spec: J1939Fault) -> None:
        if spec.kind in MESSAGE_KINDS:
            self._cyclic[spec.what][5] = ""
            return
        node = {n.label: n for n in self.nodes}[spec.what]
        if spec.kind == "missing_dm1":
            node.dm1_suppressed = False
        elif spec.kind == "dtc":
            self.dtc_fault(node.label, spec.spn, spec.fmi, False)
        else:
            node.held_lost = False
            if node.state == "lost":
                self._send_all(node.start(self._now_ms))

    def command_counts(self) -> CommandCounts | None:
        """TSC1 frames obeyed, and refused by reason (``TSC1_REASONS``); None before :meth:`open`."""
        if not hasattr(self, "engine"):
            return None
        return CommandCounts(self.counts["tsc1_applied"], dict(self.tsc1_rejected))

    def close(self) -> None:
        self.stop_bus_log()
        if self.bus is not None:
            self.bus.shutdown()
            self.bus = None

    def _status_internal(self) -> dict:
        return {"type": "j1939", **self.counts, "decode_errors_by_reason": dict(self.decode_errors),
                "dtc_list_full": self.dtc_list_full, "tsc1_source": self.tsc1_source,
                "tsc1_senders": {str(sa): {"mode": c[0], "priority": c[1]} for sa, c in self._tsc1_senders.items()},
                "dropped_by_fault": self.dropped_by_fault, "timeouts_by_pgn": dict(self.per_pgn_timeouts),
                "engine_torque_Nm": self.torque_Nm,
                "nodes": {n.label: {"address": n.address, "state": n.state, **n.counts, "tp": n.tp.status(),
                                    "etp": n.etp.status(), **self.diag_status(n),
                                    "received": {str(pgn): _shown(d) for pgn, d in n.received.items()}}
                          for n in self.nodes},
                "tcu": {k: dict(v) for k, v in self.tcu_signals.items()}}


def _shown(data: bytes) -> str:
    """A received message in the status: its bytes in hex up to TP's 1785; a longer one (ETP) by size and digest."""
    if len(data) <= 1785:
        return data.hex()
    import hashlib

    return f"{len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}"


def _unused_bits(message) -> bytes:
    """One byte per payload byte with a 1 for each bit no signal of ``message`` covers (J1939-71 sends them 1)."""
    used = bytearray(message.length)
    for sig in message.signals:
        raw = {x.name: 0 for x in message.signals}
        raw[sig.name] = -1 if sig.is_signed else (1 << sig.length) - 1
        for k, b in enumerate(message.encode(raw, scaling=False, strict=False)):
            used[k] |= b
    return bytes(~b & 0xFF for b in used)


def j1939_raw_refusal(raw: int, bits: int) -> str:
    """Why a raw J1939-71 value of ``bits`` (8 or 16) is no value: "" when it is in the valid range.

    8 bits: 0..250 valid, 251..253 reserved, 254 error indicator, 255 not available;
    16 bits: 0..64255 valid, 64256..65023 reserved, 65024..65279 error indicator, 65280.. not available.
    """
    na, err, top = (255, 254, 250) if bits == 8 else (65280, 65024, 64255)
    if raw >= na:
        return "not_available"
    if raw >= err:
        return "error_indicator"
    return "out_of_range" if raw > top else ""


def _tsc1_refusal(data: bytes) -> str:
    """Why a TSC1 (J1939-71, PGN 0) cannot be obeyed: "" if it can.

    Mode 1 (speed control) needs a requested speed, modes 2 and 3 a torque;
    mode 3's speed limit may be *not available* (then no speed limit), not
    an error or out of range.
    """
    mode, speed = data[0] & 3, data[1] | data[2] << 8
    if mode == 1:
        return j1939_raw_refusal(speed, 16)
    if mode in (2, 3):
        why = j1939_raw_refusal(speed, 16) if mode == 3 else ""
        return j1939_raw_refusal(data[3], 8) or (why if why != "not_available" else "")
    return ""
