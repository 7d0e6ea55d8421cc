"""The device adapter: the plant's electrical channels through an I/O device, chosen in the I/O config like any adapter.

::

    [[adapters]]
    type = "device"
    name = "device"
    backend = "sim"                          # sim | mcu | visa | gpiod (io_adapters.devices.base.DEVICES)
    channels = "io_device_powershift.toml"   # default: io_device_<plant kind>.toml
    fuse = true                              # sim: its pin logic inside the stage's compiled call
    tcu = "examples/electrical_tcu.py:ElectricalTcu"   # sim: a TCU emulator on the pins (.tcu), optional
    [adapters.tcu_params]                    # its class's arguments
    [adapters.backend_options]               # the backend's own options (mcu: port, baud, ...; sim: none)

On the tick (read -> step -> write, :mod:`io_adapters.base`): ``read``
takes what the device measured from the TCU and sets the solenoid inputs
(:func:`io_adapters.devices.stage.read_stage`); ``write`` computes the
targets of the tick just stepped (edges, NTC, range code, supply) and hands
them to the device (:func:`~io_adapters.devices.stage.write_stage`).  Every
array either stage touches lives in one :class:`~io_adapters.devices.arena.Arena`,
so each is one compiled call; with the in-process ``sim`` backend the
device's own pin and fault logic runs inside the same call.  A real backend
(``mcu``, ``visa``, ``gpiod``) gets the targets through its
:meth:`~io_adapters.devices.base.Device.write_targets`, which hands them to
its own thread or non-blocking writes.

Pin faults are the ``device`` fault target (:mod:`.declaration`): set
between ticks into the targets' fault switches (``open``, ``short_gnd``,
``short_bat``) or the wheel model (``signal_loss``, ``missing_tooth``).
Settable between ticks (``adapter_set``): ``range_position`` (the lever moves
there through its transition code), ``oil_temperature_C``, ``supply_mV``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from plant_models.config import ConfigReader, resolve_config
from plant_models.errors import ConfigError, FaultError
from plant_models.plant import Plant

from ..base import TI_SCENARIO, Adapter, AdapterError, CommandCounts, LoopContext
from .arena import Arena
from .base import DEVICES, create_device
from .channel_map import ChannelMap, load_channel_map
from .channels import PIN_OK, PIN_STATES, Measurements, Targets
from .declaration import DECLARATION, PIN_KINDS, DeviceFault
from .stage import (C_EDGE_OVERFLOW, C_READS, C_WRITES, I_FAULT_W, I_FUSED, I_HAS_NTC, I_HAS_SUPPLY, I_IN_OFF,
                    I_LAST_TICK, I_MAX_TEETH, I_N_AIN, I_N_BITS, I_N_DIN, I_N_IN, I_N_PULSE, I_N_SOL, I_N_SWITCH,
                    I_OUT_OFF, I_RANGE_POS,
                    I_RANGE_TARGET, I_TEMP_OUT, I_WIDTH, MEMBERS, N_COUNT, N_INTS, N_MISC, N_SOL_F, N_SOL_I,
                    N_WHEEL_F, N_WHEEL_I, READ_DRIVE, READ_SAFE, SF_HI, SF_L, SF_LO, SF_R20, SI_INPUT, SI_MEASURE, W_LOST, W_PHASE,
                    W_SCALE, W_SHAFT, W_TEETH, X_BETA, X_DT, X_OIL_C, X_R25, X_SUPPLY_V, X_TRAVEL_PER_S,
                    read_stage, write_stage)

RANGE_TRAVEL_S = 0.3  # how long the lever takes between two adjacent positions


class _State:
    """The stage's own arrays (members ``ints`` .. ``count`` of :data:`~io_adapters.devices.stage.MEMBERS`)."""

    def __init__(self, cmap: ChannelMap, plant: Plant, dt_s: float, width: int):
        n_pulse, n_sol = len(cmap.pulses), len(cmap.solenoids)
        max_teeth = max([p.teeth for p in cmap.pulses] + [1])
        self.ints = np.zeros(N_INTS, dtype=np.int64)
        self.misc = np.zeros(N_MISC)
        self.wheel_i = np.zeros((max(n_pulse, 1), N_WHEEL_I), dtype=np.int64)
        self.wheel_f = np.zeros((max(n_pulse, 1), N_WHEEL_F))
        self.present = np.zeros((max(n_pulse, 1), max_teeth), dtype=np.int64)
        self.sol_i = np.zeros((max(n_sol, 1), N_SOL_I), dtype=np.int64)
        self.sol_f = np.zeros((max(n_sol, 1), N_SOL_F))
        self.edge_t = np.zeros(4 * width + 4)  # the model may find more edges than a channel carries: counted
        self.edge_tooth = np.zeros(4 * width + 4, dtype=np.int64)
        self.edge_dir = np.zeros(4 * width + 4, dtype=np.int64)
        codes, transitions, window = cmap.range_table.arrays()
        self.codes, self.transitions, self.window = codes, transitions, window
        self.count = np.zeros(N_COUNT, dtype=np.int64)
        ints, misc = self.ints, self.misc
        ints[[I_N_PULSE, I_N_SOL, I_N_BITS, I_WIDTH, I_MAX_TEETH]] = (n_pulse, n_sol, len(cmap.range_bits), width,
                                                                     max_teeth)
        ints[[I_HAS_NTC, I_HAS_SUPPLY]] = (cmap.ntc is not None, bool(cmap.supply_name))
        ints[[I_IN_OFF, I_OUT_OFF, I_N_IN]] = (plant.input_offset, plant.output_offset, plant.n_in)
        ints[I_LAST_TICK] = -1
        ints[I_TEMP_OUT] = -1
        layout = cmap.layout()
        ints[[I_N_SWITCH, I_N_DIN, I_N_AIN]] = (layout.count("fault_switch"), layout.count("digital_in"),
                                                layout.count("analog_in"))
        misc[[X_DT, X_SUPPLY_V]] = (dt_s, cmap.supply_V)
        misc[X_TRAVEL_PER_S] = 1.0 / RANGE_TRAVEL_S
        if cmap.ntc is not None:
            misc[[X_OIL_C, X_R25, X_BETA]] = (cmap.ntc.temperature_C, cmap.ntc.r25_ohm, cmap.ntc.beta_K)
            if cmap.ntc.temperature_output:
                ints[I_TEMP_OUT] = plant.output_index(cmap.ntc.temperature_output)
        else:
            misc[X_OIL_C] = 80.0
        if cmap.range_bits:
            pos = cmap.range_table.index(cmap.range_position)
            ints[[I_RANGE_POS, I_RANGE_TARGET]] = (pos, pos)
        for w, p in enumerate(cmap.pulses):
            self.wheel_i[w, [W_SHAFT, W_TEETH]] = (plant.output_index(p.shaft), p.teeth)
            self.wheel_f[w, [W_SCALE, W_PHASE]] = (p.scale, math.radians(p.phase_deg))
            self.present[w, :p.teeth] = 1
            if p.gap:
                self.present[w, p.teeth - p.gap:p.teeth] = 0
        for s, sol in enumerate(cmap.solenoids):
            k = plant.input_index(sol.input)
            sig = plant.inputs[k]
            self.sol_i[s, [SI_INPUT, SI_MEASURE]] = (k, 0 if sol.measure == "duty" else 1)
            self.sol_f[s, [SF_R20, SF_L, SF_LO, SF_HI]] = (sol.resistance_20C_ohm, sol.inductance_H, sig.lo, sig.hi)


class DeviceAdapter(Adapter):
    """The plant's electrical channels through a device backend (module docstring)."""

    type_name = "device"
    declaration = DECLARATION  # the pin faults

    def __init__(self, name: str, options: dict):
        super().__init__(name, options)
        opts = {k: v for k, v in options.items() if k not in ("type", "name", "enabled")}
        cfg = ConfigReader(opts, f"adapter {name!r}")
        self.backend = cfg.string("backend", "sim", sorted(DEVICES))
        self.channels_name = cfg.string("channels", "") or None
        # sim only: its pin logic inside the stage's compiled call (false: through its write_targets and
        # read_measurements, as a real backend is driven; the same pins bit for bit, slower)
        self.fuse = cfg.boolean("fuse", True)
        self.backend_options = cfg.raw("backend_options", {})
        if not isinstance(self.backend_options, dict):
            raise cfg.error("backend_options", "must be a table of the backend's options")
        # a TCU emulator on the sim device's pins (io_adapters/devices/tcu.py): "file.py:Class" and its arguments
        self.tcu_target = cfg.string("tcu", "")
        self.tcu_params = cfg.raw("tcu_params", {})
        if not isinstance(self.tcu_params, dict):
            raise cfg.error("tcu_params", "must be a table of the TCU class's arguments")
        if self.tcu_target and self.backend != "sim":
            raise cfg.error("tcu", f"a TCU emulator sits on the sim device's pins; the {self.backend} backend's "
                            "TCU is the real one on its pins")
        if self.tcu_target:
            from .tcu import tcu_file

            tcu_file(self.tcu_target, f"adapter {name!r}")  # a wrong path fails when the config is read
        cfg.reject_unknown()
        self.tcu = None
        self.device = None
        self.cmap: ChannelMap | None = None
        self._opened = False
        self._read_tick = -1  # the tick last read: a tick not after it is the loop's reset

    # -- opening (name look-ups happen here, once) --------------------------------------------------------
    def open(self, plant: Plant, ctx: LoopContext) -> None:
        super().open(plant, ctx)
        name = self.channels_name or f"io_device_{plant.kind}.toml"
        if self.channels_name is None and not resolve_config(name).exists():
            raise AdapterError(f"{self.name}: no channel map for the {plant.kind} plant (configs/{name}); "
                               "give one with channels = \"...\"")
        self.cmap = cmap = load_channel_map(name)
        ins, outs = cmap.ports()
        known_in, known_out = {s.name for s in plant.inputs}, {s.name for s in plant.outputs}
        for port in sorted(ins - known_in):
            raise ConfigError(cmap.source, port, f"the {plant.kind} plant has no input {port!r} (a solenoid's "
                              "current needs a valve map in the plant's [hydraulics]: valve_current_A)")
        for port in sorted(outs - known_out):
            raise ConfigError(cmap.source, port, f"the {plant.kind} plant has no output {port!r}")
        self.layout = layout = cmap.layout()
        options = dict(self.backend_options)
        if self.backend == "sim":
            options.setdefault("supply_V", cmap.supply_V)
        if self.backend == "visa":  # a generator's frequency from edge periods across ticks needs the tick's length
            options.setdefault("tick_s", ctx.period_s)
        # the device follows the loop's tick length unless its options fix one (visa's tick_s)
        self._device_follows = "tick_s" not in self.backend_options
        self._period_s = ctx.period_s
        self.device = create_device(self.backend, self.name, layout, options)
        self._fused = self.backend == "sim" and self.fuse
        self._build_arena(plant, ctx.period_s)
        self.device.open()
        self._opened = True
        scratch = self._buf.copy()  # compiled (or loaded from the cache) before tick 0, changing nothing
        read_stage(scratch, self._off, plant.df.copy(), 0, 0)
        write_stage(scratch, self._off, plant.df.copy(), 1)
        self.ctx.log.info("device %s: %s backend, %d channels from %s", self.name, self.backend,
                          len(cmap.pins()), name)
        if self.tcu_target:
            from .tcu import load_tcu

            self.tcu = load_tcu(self.tcu_target, dict(self.tcu_params), f"adapter {self.name!r}")
            self.tcu.attach(self)  # resolves its channels, sets the device's tcu hook

    def _build_arena(self, plant: Plant, dt_s: float) -> None:
        cmap, layout = self.cmap, self.layout
        st = self.state = _State(cmap, plant, dt_s, layout.max_edges)
        self.targets = Targets(layout)
        self.measured = Measurements(layout)  # a copy of another backend's measurements (the sim's own when fused)
        arena = Arena()
        for member in MEMBERS[:MEMBERS.index("t_mode")]:
            arena.adopt(st, member)
        for name, label in (("pulse_mode", "t_mode"), ("edge_ns", "t_edges"), ("edge_count", "t_count"),
                            ("frequency_Hz", "t_freq"), ("phase_turn", "t_phase"), ("resistance_ohm", "t_ohm"),
                            ("digital", "t_dig"), ("analog_V", "t_volt"), ("pin_fault", "t_fault")):
            arena.adopt(self.targets, name, label)
        if self._fused:
            self.device.adopt_into(arena)
        else:  # the pins and the TCU's side belong to the device; slots of a scratch sim keep the order
            from .sim import SimDevice

            scratch = SimDevice("scratch", layout)
            scratch.measurements = self.measured
            scratch.adopt_into(arena)
        arena.build(MEMBERS)
        self.arena = arena
        st.ints[I_FUSED] = self._fused
        pins = self.device.pins if self._fused else scratch.pins
        st.ints[I_FAULT_W] = pins.fault.shape[1]
        self._buf = arena.buffer
        starts = arena.offsets[[arena.slot[m] for m in MEMBERS], 0]
        # each member's first byte, and where the last one ends (a member's length is the next start minus its own)
        self._off = np.ascontiguousarray(np.append(starts, arena.offsets[arena.slot[MEMBERS[-1]], 1]))
        if np.any(np.diff(self._off) < 0):
            raise AssertionError("device arena: members out of order")
        self._df = plant.df

    # -- the tick ------------------------------------------------------------------------------------------
    def read(self, tick: int, now_ns: int) -> None:
        """The base's template in one call less (the gate, the stage, the watchdog's feed).  Called in the
        real-time loop."""
        if tick <= self._read_tick and self.tcu is not None:
            # the loop's reset (a tick not after the last): the I/O config's TCU starts afresh before the reset's
            # first tick reads what it drives (else that tick reads the duties it drove last, before the reset)
            self.tcu.attach(self)
        self._read_tick = tick
        if self.ctx.period_s != self._period_s:  # a lockstep scenario's own dt_s changed the step between ticks
            self._follow_step()
        if self._fused:  # the common case in one Python call: the stage straight away
            if read_stage(self._buf, self._off, self._df, tick, 0 if self._tick_slots[TI_SCENARIO] else READ_DRIVE):
                self._feed_watchdog(now_ns)
        elif self._read_internal(tick, now_ns, not self._tick_slots[TI_SCENARIO]):
            self._feed_watchdog(now_ns)

    def _read_internal(self, tick: int, now_ns: int, drive: bool) -> int:
        """The solenoid inputs from the device's measurements.  Called in the real-time loop."""
        if self._fused:
            return read_stage(self._buf, self._off, self._df, tick, READ_DRIVE if drive else 0)
        m = self.device.read_measurements()
        self.measured.duty[...] = m.duty
        self.measured.current_A[...] = m.current_A
        return read_stage(self._buf, self._off, self._df, tick, (READ_DRIVE if drive else 0) | (READ_SAFE if m.safe
                                                                                             else 0))

    def write(self, tick: int, now_ns: int) -> None:
        """The targets of the tick just stepped, to the device.  Called in the real-time loop."""
        write_stage(self._buf, self._off, self._df, tick)
        if self._fused:
            tcu = self.device.tcu
            if tcu is not None:
                tcu(tick)
        else:  # a sim device not fused calls its TCU itself
            self.device.write_targets(tick, self.targets)

    def _follow_step(self) -> None:
        """The loop's step changed (a lockstep scenario with a ``dt_s`` of its own, between runs): the edges and
        the coil currents integrate over the new one, and a device that counts time in ticks follows it.  Called
        by the first tick at the new step, before it reads (a control request may load the scenario and step it
        without any housekeeping between)."""
        self._period_s = dt = self.ctx.period_s
        self.state.misc[X_DT] = dt
        if self._device_follows:
            self.device.set_tick_s(dt)

    def close(self) -> None:
        if self.device is not None and self._opened:
            self._opened = False
            self.device.close()

    # -- faults (between ticks) ------------------------------------------------------------------------------
    def check_fault(self, spec: DeviceFault) -> None:
        if spec.target != "device":
            raise FaultError(f"fault: the device adapter {self.name!r} injects no {spec.target} faults")
        if self.cmap is None:
            raise FaultError(f"fault: the device adapter {self.name!r} is not open")
        pins = self.cmap.pins()
        if spec.pin not in pins:
            raise FaultError(f"fault: {spec.kind}: no pin {spec.pin!r}; the pins are {', '.join(pins)}")
        if spec.kind in PIN_KINDS:
            return
        wheels = [p.name for p in self.cmap.pulses]
        if spec.pin not in wheels:
            raise FaultError(f"fault: {spec.kind} is a speed sensor's fault; {spec.pin!r} is not one (speed "
                             f"sensors: {', '.join(wheels) or 'none'})")
        teeth = self.cmap.pulses[wheels.index(spec.pin)].teeth
        if spec.kind == "missing_tooth" and not 0 <= spec.tooth < teeth:
            raise FaultError(f"fault: missing_tooth: 'tooth' must be 0 .. {teeth - 1} on {spec.pin}, got {spec.tooth}")

    def set_fault(self, spec: DeviceFault) -> None:
        self.check_fault(spec)
        self._apply_fault(spec, True)

    def clear_fault(self, spec: DeviceFault) -> None:
        if self.cmap is not None and spec.pin in self.cmap.pins():
            self._apply_fault(spec, False)

    def _apply_fault(self, spec: DeviceFault, on: bool) -> None:
        if spec.kind in PIN_KINDS:
            slot = self.layout.index(f"fs_{spec.pin}", "fault_switch")
            self.targets.pin_fault[slot] = PIN_STATES[spec.kind] if on else PIN_OK
            return
        w = [p.name for p in self.cmap.pulses].index(spec.pin)
        if spec.kind == "signal_loss":
            self.state.wheel_i[w, W_LOST] = 1 if on else 0
        else:
            p = self.cmap.pulses[w]
            in_gap = p.gap and spec.tooth >= p.teeth - p.gap
            self.state.present[w, spec.tooth] = 0 if on or in_gap else 1

    # -- values a test file or a control request may set (between ticks) -------------------------------------
    def settable(self) -> dict[str, tuple[int, int]]:
        out = {}
        if self.cmap is not None and self.cmap.range_bits:
            out["range_position"] = (0, len(self.cmap.range_table.positions) - 1)
        if self.cmap is not None and self.cmap.ntc is not None and not self.cmap.ntc.temperature_output:
            out["oil_temperature_C"] = (-40, 150)
        out["supply_mV"] = (0, 32000)
        return out

    def set_values(self, values: dict[str, int]) -> None:
        st = self.state
        if "range_position" in values:
            st.ints[I_RANGE_TARGET] = values["range_position"]
        if "oil_temperature_C" in values:
            st.misc[X_OIL_C] = float(values["oil_temperature_C"])
        if "supply_mV" in values:
            st.misc[X_SUPPLY_V] = values["supply_mV"] / 1000.0

    # -- status (not for the tick) -----------------------------------------------------------------------------
    def command_counts(self) -> CommandCounts | None:
        if not self._opened:
            return None
        return CommandCounts(int(self.state.count[C_READS]), {})

    def _status_internal(self) -> dict[str, Any]:
        if self.device is None:
            return {"type": "device", "backend": self.backend}
        st = self.state
        dev = self.device.status()
        if self._fused:
            dev.update(ticks=int(st.count[C_WRITES]), edges_clipped=int(self.device._clipped[0]))
        faults = {ch.channel: int(self.targets.pin_fault[i]) for i, ch in enumerate(self.layout.of_kind("fault_switch"))
                  if self.targets.pin_fault[i] != PIN_OK}
        return {"type": "device", "backend": self.backend, "channels": self.cmap.describe(), "device": dev,
                "edges_beyond_max": int(st.count[C_EDGE_OVERFLOW]),
                "pin_faults": {k: {v: s for s, v in PIN_STATES.items()}[v] for k, v in faults.items()},
                "range_position": self.cmap.range_table.positions[int(st.ints[I_RANGE_POS])] if self.cmap.range_bits
                else None, "supply_V": float(st.misc[X_SUPPLY_V]), "oil_temperature_C": float(st.misc[X_OIL_C])}


__all__ = ["DeviceAdapter", "RANGE_TRAVEL_S"]
