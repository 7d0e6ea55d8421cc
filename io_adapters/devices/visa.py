"""Backend ``visa``: programmable instruments over pyvisa (function generator, power supply, electronic load).

Options::

    visa_library = "@py"          # pyvisa's back end ("" for the system VISA, "file.yaml@sim" for pyvisa-sim)
    termination = "\n"            # of what is written and read (SCPI's usual line feed)
    timeout_ms = 1000
    tick_s = 0.001                # the tick's length (default: the device adapter gives its loop's period and
                                  # follows it when it changes, a lockstep scenario's dt_s; given: kept)
    [[instruments]]
    role = "function_generator"   # FREQ <Hz>, OUTP 0|1: a tooth wheel's frequency per tick
    resource = "USB0::0x0957::0x2807::MY1::INSTR"
    channel = "n_out"             # a pulse_out channel
    [[instruments]]
    role = "power_supply"         # VOLT <V>, OUTP 0|1: KL30 voltage sweeps; MEAS:VOLT? read back
    resource = "TCPIP::10.0.0.5::INSTR"
    channel = "kl30"              # an analog_out channel, V
    measure = "kl30_meas"         # optional analog_in channel for MEAS:VOLT?
    [[instruments]]
    role = "electronic_load"      # CURR <A>, INP 0|1: a sink current; MEAS:VOLT? read back
    resource = "ASRL/dev/ttyUSB0::INSTR"
    channel = "load_A"            # an analog_out channel whose value is the sink current, A

An instrument answers in milliseconds, so the tick never talks to it:
:meth:`VisaDevice.write_targets` copies the targets into a preallocated
pending set under a lock and wakes a worker thread, which sends each
instrument its set-point when it changed (the latest targets win; targets
an instrument was too slow for are counted as ``skipped``) and reads the
measure queries back into the measurements.  A pulse channel drives its
generator in frequency mode directly; in edge mode at the mean frequency of
the tick's edges (``(n - 1) / span``), or, in a tick with one edge (a
60-tooth wheel below 1000 rpm at 1 kHz), at the period from the last edge
of an earlier tick (:class:`EdgePeriods`); a tick without an edge holds
the frequency while the time since the last edge is within twice its
period (the wheel then turns slower than the generator's half frequency:
off).  A pin fault on the channel, no edges or a zero frequency turn the
output off; :meth:`VisaDevice.close` turns every output off.
"""

from __future__ import annotations

import threading

from .base import Device, DeviceError
from .channels import PIN_OK, PULSE_FREQUENCY, DeviceLayout, Measurements, Targets

ROLES = {
    # role: (channel kind, set-point command, output command)
    "function_generator": ("pulse_out", "FREQ {:.6f}", "OUTP {:d}"),
    "power_supply": ("analog_out", "VOLT {:.4f}", "OUTP {:d}"),
    "electronic_load": ("analog_out", "CURR {:.4f}", "INP {:d}"),
}
MEASURE_QUERY = "MEAS:VOLT?"


def pulse_frequency_Hz(t: Targets, slot: int) -> float:
    """The frequency a generator puts out for pulse channel ``slot``: the target, or the mean of the edges."""
    if t.pulse_mode[slot] == PULSE_FREQUENCY:
        return float(t.frequency_Hz[slot])
    n = int(t.edge_count[slot])
    if n < 2:
        return 0.0
    span_ns = int(t.edge_ns[slot, n - 1] - t.edge_ns[slot, 0])
    return (n - 1) * 1e9 / span_ns if span_ns > 0 else 0.0


class EdgePeriods:
    """The frequency a generator should play for each pulse channel, from the edges across ticks (module doc).

    ``update(tick, targets)`` is called with every tick's targets, in order
    (the tick's start is ``tick * tick_ns``); ``frequency_Hz[slot]`` is then
    the frequency for that tick's set-point.  A tick number not after the
    last one (a reset) starts over.
    """

    def __init__(self, n_pulse: int, tick_ns: int, slots: tuple[int, ...] | None = None):
        self.tick_ns = int(tick_ns)
        self.slots = tuple(range(n_pulse)) if slots is None else tuple(slots)  # those a generator plays
        self.frequency_Hz = [0.0] * n_pulse
        self._last_edge_ns = [-1] * n_pulse  # the last edge seen, ns from tick 0's start (-1: none)
        self._period_ns = [0] * n_pulse
        self._tick = -1

    def update(self, tick: int, t: Targets) -> None:
        """Called in the real-time loop (a few operations a pulse channel)."""
        if tick <= self._tick:
            self._last_edge_ns = [-1] * len(self._last_edge_ns)
            self._period_ns = [0] * len(self._period_ns)
        self._tick = tick
        start = tick * self.tick_ns
        for slot in self.slots:
            if t.pulse_mode[slot] == PULSE_FREQUENCY:
                self.frequency_Hz[slot] = float(t.frequency_Hz[slot])
                self._last_edge_ns[slot] = -1
                continue
            n = int(t.edge_count[slot])
            last = self._last_edge_ns[slot]
            if n >= 2:
                self.frequency_Hz[slot] = pulse_frequency_Hz(t, slot)
                self._period_ns[slot] = int(t.edge_ns[slot, n - 1] - t.edge_ns[slot, n - 2])
            elif n == 1 and last >= 0:
                self._period_ns[slot] = start + int(t.edge_ns[slot, 0]) - last
                self.frequency_Hz[slot] = 1e9 / self._period_ns[slot] if self._period_ns[slot] > 0 else 0.0
            elif n == 0 and (last < 0 or start + self.tick_ns - last > 2 * self._period_ns[slot]):
                self.frequency_Hz[slot] = 0.0  # no edge for two periods: stopped (or not started)
            if n:
                self._last_edge_ns[slot] = start + int(t.edge_ns[slot, n - 1])

    def retime(self, tick_ns: int) -> None:
        """The ticks are now ``tick_ns`` long: the edges seen before are forgotten (their times were counted in
        ticks of the old length)."""
        self.tick_ns = int(tick_ns)
        self._last_edge_ns = [-1] * len(self._last_edge_ns)
        self._period_ns = [0] * len(self._period_ns)


class _Instrument:
    def __init__(self, spec: dict, layout: DeviceLayout, index: int):
        role = spec.get("role")
        if role not in ROLES:
            raise DeviceError(f"instrument {index}: role {role!r} is not one of {', '.join(ROLES)}")
        if "resource" not in spec or "channel" not in spec:
            raise DeviceError(f"instrument {index} ({role}): give 'resource' and 'channel'")
        self.role = role
        self.resource = str(spec["resource"])
        kind, self.set_cmd, self.out_cmd = ROLES[role]
        self.slot = layout.index(spec["channel"], kind)
        self.kind = kind
        self.measure = layout.index(spec["measure"], "analog_in") if spec.get("measure") else -1
        switches = [s for s, (k, slot) in enumerate(layout.switch_targets()) if (k, slot) == (kind, self.slot)]
        self.switch = switches[0] if switches else -1
        self.handle = None
        self.idn = ""
        self.sent: tuple[float, int] | None = None  # last (set-point, output on) sent

    def setpoint(self, t: Targets, pulse_Hz: list[float]) -> tuple[float, int]:
        """(set-point, output on) for targets ``t``; ``pulse_Hz``: the frequency of each pulse channel for them
        (:class:`EdgePeriods`)."""
        value = pulse_Hz[self.slot] if self.kind == "pulse_out" else float(t.analog_V[self.slot])
        faulted = self.switch >= 0 and t.pin_fault[self.switch] != PIN_OK
        on = int(value > 0.0 and not faulted)
        return (value if on else 0.0), on


class VisaDevice(Device):
    """Instruments over pyvisa; see the module doc for the options."""

    type_name = "visa"

    def __init__(self, name: str, layout: DeviceLayout, options: dict | None = None):
        super().__init__(name, layout, options)
        specs = self.options.get("instruments") or []
        if not specs:
            raise DeviceError(f"device {name!r} (visa): give at least one [[instruments]] entry")
        self.instruments = [_Instrument(s, layout, i) for i, s in enumerate(specs)]
        self._pending = Targets(layout)
        self._work = Targets(layout)
        n_pulse = layout.count("pulse_out")
        self._periods = EdgePeriods(n_pulse, int(round(float(self.options.get("tick_s", 1e-3)) * 1e9)),
                                    tuple(ins.slot for ins in self.instruments if ins.kind == "pulse_out"))
        self._pending_Hz = [0.0] * n_pulse  # the frequencies of the pending targets (under the lock)
        self._work_Hz = [0.0] * n_pulse
        self._latest = Measurements(layout)
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._posted = 0  # targets handed over by the tick
        self._taken = 0  # targets the worker took
        self._done = 0  # targets the worker finished
        self._stop = False
        self._thread: threading.Thread | None = None
        self._rm = None
        self.counters.update(skipped=0, commands=0, instrument_errors=0)

    def open(self) -> None:
        try:
            import pyvisa
        except ImportError as exc:
            raise DeviceError("the visa device needs pyvisa (pip install 'gearbox-hil[instruments]')") from exc
        try:
            self._rm = pyvisa.ResourceManager(self.options.get("visa_library", ""))
            for ins in self.instruments:
                ins.handle = self._rm.open_resource(ins.resource)
                ins.handle.timeout = int(self.options.get("timeout_ms", 1000))
                ins.handle.write_termination = ins.handle.read_termination = self.options.get("termination", "\n")
                ins.idn = ins.handle.query("*IDN?").strip()
                if ins.idn.count(",") != 3:  # IEEE 488.2: maker, model, serial, firmware
                    raise DeviceError(f"device {self.name!r} (visa): cannot open {ins.resource}: *IDN? answered "
                                      f"{ins.idn[:60]!r}, not an IEEE 488.2 identification")
                ins.handle.write(ins.out_cmd.format(0))
        except (pyvisa.Error, OSError, ValueError, DeviceError) as exc:
            if self._rm is not None:
                self._rm.close()  # closes the instruments opened so far
            if isinstance(exc, DeviceError):
                raise
            raise DeviceError(f"device {self.name!r} (visa): cannot open {exc}") from exc
        self._stop = False
        self._thread = threading.Thread(target=self._worker, name=f"device-{self.name}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        if self._thread is None:
            return
        with self._wake:
            self._stop = True
            self._wake.notify()
        self._thread.join(timeout=5.0)
        self._thread = None
        for ins in self.instruments:
            try:
                ins.handle.write(ins.out_cmd.format(0))
                ins.handle.close()
            except Exception:  # noqa: BLE001 -- closing must not fail on a dead instrument
                self.counters["instrument_errors"] += 1
        self._rm.close()

    def write_targets(self, tick: int, targets: Targets) -> None:
        """Hand the targets to the worker (latest wins).  Called in the real-time loop: never waits on I/O."""
        periods = self._periods
        periods.update(tick, targets)  # only the tick's thread touches it
        with self._wake:
            self._pending.copy_from(targets)
            self._pending_Hz[:] = periods.frequency_Hz
            if self._posted != self._taken:
                self.counters["skipped"] += 1
            self._posted += 1
            self._latest.tick = tick + 1
            self._wake.notify()
        self.counters["ticks"] += 1

    def status(self) -> dict:
        """The counters, and each instrument's identification."""
        return {**super().status(), "instruments": [f"{i.role}: {i.idn or i.resource}" for i in self.instruments]}

    def read_measurements(self) -> Measurements:
        """The measure queries' latest answers.  Called in the real-time loop."""
        with self._lock:
            self.measurements.copy_from(self._latest)
        return self.measurements

    def set_tick_s(self, tick_s: float) -> None:
        """The edge periods across ticks follow the loop's new tick length (the tick's thread only)."""
        self._periods.retime(int(round(tick_s * 1e9)))

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait until the worker has sent the last targets handed over (tests, sweeps; never the tick)."""
        with self._wake:
            return self._wake.wait_for(lambda: self._done == self._posted, timeout=timeout_s)

    def _worker(self) -> None:
        while True:
            with self._wake:
                self._wake.wait_for(lambda: self._stop or self._posted != self._taken)
                if self._stop:
                    return
                self._work.copy_from(self._pending)
                self._work_Hz[:] = self._pending_Hz
                self._taken = posted = self._posted
            readings = self._apply(self._work)
            with self._wake:
                for slot, volts in readings:
                    self._latest.analog_V[slot] = volts
                self._done = posted
                self._wake.notify_all()

    def _apply(self, t: Targets) -> list[tuple[int, float]]:
        readings = []
        for ins in self.instruments:
            want = ins.setpoint(t, self._work_Hz)
            try:
                if want != ins.sent:
                    if want[1]:
                        ins.handle.write(ins.set_cmd.format(want[0]))
                    if ins.sent is None or want[1] != ins.sent[1]:
                        ins.handle.write(ins.out_cmd.format(want[1]))
                    self.counters["commands"] += 1
                    ins.sent = want
                if ins.measure >= 0:
                    readings.append((ins.measure, float(ins.handle.query(MEASURE_QUERY))))
            except Exception:  # noqa: BLE001 -- an instrument's failure is counted; the worker keeps going
                self.counters["instrument_errors"] += 1
                ins.sent = None
        return readings

