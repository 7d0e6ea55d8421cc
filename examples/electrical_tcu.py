#!/usr/bin/env python3
"""A TCU over electrical signals only: it shifts the Powershift from gear 1 to gear 3 through the ``sim`` device.

The TCU sees what a production TCU sees on its connector
(configs/io_device_powershift.toml) and nothing else: the edges of its
speed sensors, the NTC's resistance, the range code and KL30; it drives
its solenoids with PWM duty.  It

* measures shaft speeds from edge periods as a TCU's timer capture does:
  each edge time-stamped on a 25 ns timer, the speed from the span of the
  edges of the last ``window_ms`` (at least two edges), zero after
  ``timeout_ms`` without an edge;
* reads the oil temperature from the NTC (the beta model's inverse) and the
  lever's position from the range code (a code that is neither a position
  nor a transition holds the last position and is counted);
* commands each clutch's pressure as a current through the valve map's
  inverse and turns it into a PWM duty for its coil's resistance at the oil
  temperature and the measured KL30 (feed-forward, as a TCU's current
  controller settles to);
* closes the clutch-to-clutch swap from clutch 1 to clutch 2 (gear 1,
  ratio 48, to gear 3, ratio 32) on the measured speeds: *fill* the
  on-coming clutch, *torque* phase (the off-going clutch ramps out while
  the on-coming one takes the torque), *inertia* phase (the on-coming
  pressure rises until its slip, measured as the intermediate shaft's
  speed against half the input speed, its gear pair 1:2, is below a
  tolerance), *lock*.

It runs inside the server's tick as the sim device's TCU (the device calls
:meth:`ElectricalTcu.step` once its pins show a tick's targets), so the run
is deterministic in every mode: ``run_stepwise`` (the plant and the device
adapter stepped in this process, no loop), ``run_lockstep`` (the server's
loop, stepped) and ``run_realtime`` (the loop at 1 kHz on the wall clock)::

    python examples/electrical_tcu.py [--mode stepwise|lockstep|realtime]
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from plant_models.electrical.ntc import ZERO_C_K  # noqa: E402
from plant_models.electrical.range_selector import INVALID, decode  # noqa: E402
from plant_models.electrical.solenoid import coil_resistance_ohm, duty_for_current  # noqa: E402

PLANT = "powershift_electrical"
TIMER_NS = 25  # the TCU's capture timer (40 MHz)
TWO_PI = 2.0 * math.pi


@dataclass
class SwapPlan:
    """Set points of the swap: pressures in bar, times in s, speeds in rad/s."""

    shift_at_s: float = 0.6
    duration_s: float = 1.6
    full_bar: float = 16.0
    fill_bar: float = 3.0  # strokes the on-coming piston at the fill flow limit
    fill_s: float = 0.15
    torque_phase_bar: float = 7.0
    torque_phase_s: float = 0.1
    sync_rate_bar_s: float = 40.0
    sync_tolerance_rad_s: float = 1.0  # the on-coming clutch's measured slip below which it is synchronous
    lock_s: float = 0.05
    on_pair: float = 2.0  # input over intermediate speed through the on-coming clutch 2's gear pair (1:2)


@dataclass
class SpeedSensor:
    """Period measurement of one pulse channel (slot in the device's pulse channels)."""

    slot: int
    teeth: int
    window_ns: int
    timeout_ns: int
    times: list = field(default_factory=list)  # captured edge times, ns (timer ticks x 25 ns)

    def capture(self, start_ns: int, edges) -> None:
        for e in edges:
            self.times.append((start_ns + int(e)) // TIMER_NS * TIMER_NS)
        if len(self.times) > 256:
            del self.times[:-256]

    def speed_rad_s(self, now_ns: int) -> float:
        t = self.times
        if not t or now_ns - t[-1] > self.timeout_ns:
            return 0.0
        first = len(t) - 1
        while first > 0 and t[-1] - t[first - 1] <= self.window_ns:
            first -= 1
        if first == len(t) - 1:  # one edge in the window: the last period, if there is one
            first = max(len(t) - 2, 0)
        if first == len(t) - 1:
            return 0.0
        return (len(t) - 1 - first) * TWO_PI / self.teeth / ((t[-1] - t[first]) * 1e-9)


class ElectricalTcu:
    """The TCU (module docstring); :meth:`attach` it to the device adapter of a running or stepped server."""

    def __init__(self, plan: SwapPlan | None = None, window_ms: float = 20.0, timeout_ms: float = 200.0):
        self.plan = plan or SwapPlan()
        self.window_ns = int(window_ms * 1e6)
        self.timeout_ns = int(timeout_ms * 1e6)
        self.phase = "hold"
        self.timeline: list[tuple[float, str]] = []
        self.trace: list[tuple] = []  # (t, measured input, intermediate, output speed, oil C, duty c1, duty c2)
        self.bad_range_codes = 0

    def attach(self, adapter) -> None:
        """Wire the TCU to a device adapter's ``sim`` device (opened), resolving channels by name once."""
        dev, cmap = adapter.device, adapter.cmap
        self.dev, self.dt_ns = dev, int(round(adapter.ctx.period_s * 1e9))
        layout = dev.layout
        wheels = {p.name: p for p in cmap.pulses}
        self.n_in = SpeedSensor(layout.index("n_in", "pulse_out"), wheels["n_in"].teeth, self.window_ns,
                                self.timeout_ns)
        self.n_mid = SpeedSensor(layout.index("n_mid", "pulse_out"), wheels["n_mid"].teeth, self.window_ns,
                                 self.timeout_ns)
        self.n_out = SpeedSensor(layout.index("n_out", "pulse_out"), wheels["n_out"].teeth, self.window_ns * 10,
                                 self.timeout_ns * 5)  # the slow output wheel: a longer window
        self.sol = {int(s.input[3:]): (layout.index(s.name, "pwm_in"), s.resistance_20C_ohm) for s in cmap.solenoids}
        self.ntc_slot, self.ntc = layout.index(cmap.ntc.name, "resistance_out"), cmap.ntc
        self.range_slots = [layout.index(b, "digital_out") for b in cmap.range_bits]
        self.range_decode = cmap.range_table.decode_table()
        self.range_position = cmap.range_table.index(cmap.range_position)
        self.kl30_slot = layout.index(cmap.supply_name, "analog_out")
        hyd = adapter.plant.params.hydraulics
        self.valve_A, self.valve_bar = np.array(hyd.valve_current_A), np.array(hyd.valve_pressure_bar)
        self.phase, self.timeline, self.trace = "hold", [(0.0, "hold")], []
        self.oil_C, self.kl30_V = 80.0, 13.5
        self._drive({1: self.plan.full_bar, 3: self.plan.full_bar, 6: self.plan.full_bar})
        dev.tcu = self.step

    # -- the TCU's inputs ----------------------------------------------------------------------------
    def _sense(self, tick: int) -> tuple[float, float, float]:
        dev = self.dev
        start = tick * self.dt_ns
        now = start + self.dt_ns
        self.n_in.capture(start, dev.tcu_edges(self.n_in.slot))
        self.n_mid.capture(start, dev.tcu_edges(self.n_mid.slot))
        self.n_out.capture(start, dev.tcu_edges(self.n_out.slot))
        r = dev.tcu_resistance_ohm(self.ntc_slot)
        if 10.0 < r < 1e6:  # an open or shorted sensor keeps the last temperature
            self.oil_C = 1.0 / (1.0 / (25.0 + ZERO_C_K) + math.log(r / self.ntc.r25_ohm) / self.ntc.beta_K) - ZERO_C_K
        code = sum(dev.tcu_digital(s) << k for k, s in enumerate(self.range_slots))
        pos = decode(code, self.range_decode)
        if pos == INVALID:
            self.bad_range_codes += 1
        elif pos >= 0:
            self.range_position = pos
        v = dev.tcu_analog_V(self.kl30_slot)
        if v > 6.0:
            self.kl30_V = v
        return self.n_in.speed_rad_s(now), self.n_mid.speed_rad_s(now), self.n_out.speed_rad_s(now)

    # -- the TCU's outputs ---------------------------------------------------------------------------
    def current_A(self, pressure_bar: float) -> float:
        """The valve map's inverse (its rising part): the current for a pressure, A."""
        if pressure_bar <= 0.0:
            return 0.0
        rising = np.flatnonzero(np.diff(self.valve_bar) > 0)
        k0 = rising[0]
        return float(np.interp(pressure_bar, self.valve_bar[k0:], self.valve_A[k0:]))

    def _drive(self, pressures: dict[int, float]) -> None:
        for clutch, bar in pressures.items():
            slot, r20 = self.sol[clutch]
            amps = self.current_A(bar)
            self.dev.tcu_drive_pwm(slot, duty_for_current(amps, self.kl30_V, coil_resistance_ohm(r20, self.oil_C)),
                                   amps)

    # -- the swap ------------------------------------------------------------------------------------
    def _enter(self, phase: str, t: float) -> None:
        self.phase = phase
        self.timeline.append((round(t, 6), phase))

    def pressures(self, t: float, w_in: float, w_mid: float) -> tuple[float, float]:
        """(off-going clutch 1, on-coming clutch 2) pressure, bar, from the measured input and intermediate speeds
        (magnitudes, rad/s)."""
        p = self.plan
        tau = t - (p.shift_at_s - p.fill_s)
        if tau < 0.0:
            return p.full_bar, 0.0
        if self.phase == "hold":
            self._enter("fill", t)
        if self.phase == "fill":
            if tau < p.fill_s:
                return p.full_bar, p.fill_bar
            self._enter("torque", t)
            self.t_torque = t
        tq = t - self.t_torque
        p_off = max(0.0, p.full_bar * (1.0 - tq / p.torque_phase_s))
        if self.phase == "torque":
            if tq < p.torque_phase_s:
                return p_off, p.fill_bar + tq / p.torque_phase_s * (p.torque_phase_bar - p.fill_bar)
            self._enter("inertia", t)
        if self.phase == "inertia":
            p_on = min(p.full_bar, p.torque_phase_bar + p.sync_rate_bar_s * (tq - p.torque_phase_s))
            if abs(w_mid - w_in / p.on_pair) >= p.sync_tolerance_rad_s:
                return 0.0, p_on
            self.t_sync, self.p_on_sync = t, p_on
            self._enter("lock", t)
        frac = min(1.0, (t - self.t_sync) / p.lock_s)
        return 0.0, self.p_on_sync + frac * (p.full_bar - self.p_on_sync)

    def step(self, tick: int) -> None:
        """One TCU task: the pins of hardware tick ``tick`` in, PWM duties out (the device calls it)."""
        w_in, w_mid, w_out = self._sense(tick)
        t = tick * self.dt_ns * 1e-9
        p1, p2 = self.pressures(t, w_in, w_mid)
        self._drive({1: p1, 2: p2})
        self.trace.append((t, w_in, w_mid, w_out, self.oil_C, self.dev.driven.duty[self.sol[1][0]],
                           self.dev.driven.duty[self.sol[2][0]]))

    @property
    def phases(self) -> list[str]:
        return [p for _, p in self.timeline]


# -- the three ways to run it ------------------------------------------------------------------------------
IO_STEPPED = """[loop]
status_line = false
[initial_inputs]
engine_torque = 300.0
load_torque = 3500.0
i_c1 = 0.84
i_c3 = 0.84
i_c6 = 0.84
[[adapters]]
type = "device"
name = "device"
backend = "sim"
channels = "io_device_powershift.toml"
"""
"""An I/O config of the device adapter alone (no socket) with gear 1 engaged from the start."""

INITIAL = {"engine_torque": 300.0, "load_torque": 3500.0, "i_c1": 0.84, "i_c3": 0.84, "i_c6": 0.84}


def run_stepwise(tcu: ElectricalTcu, duration_s: float | None = None, dt_s: float = 1e-3) -> np.ndarray:
    """The plant and the device adapter stepped in this process (read, step, write), no loop; every tick's outputs."""
    from io_adapters.base import LoopContext, create_adapter
    from plant_models.registry import load_plant

    plant = load_plant(PLANT)
    plant.reset(dict(INITIAL))
    ad = create_adapter("device", "device", {"backend": "sim", "channels": "io_device_powershift.toml"})
    ad.open(plant, LoopContext(period_s=dt_s, feed_watchdog=lambda ns: None, status=dict, mode="lockstep"))
    tcu.attach(ad)
    n = int(round((duration_s or tcu.plan.duration_s) / dt_s))
    out = np.empty((n, plant.n_out))
    try:
        for k in range(n):
            ad.read(k, k * tcu.dt_ns)
            plant.step(dt_s)
            ad.write(k + 1, k * tcu.dt_ns)
            out[k] = plant.y
    finally:
        ad.close()
    return out


def _server(io_path: Path, mode: str, duration_s: float = 0.0):
    from server.realtime.runtime import build

    srv = build(PLANT, io_path, mode=mode, duration_s=duration_s or None, status_line=False)
    srv.loop.open()
    adapter = next(a for a in srv.loop.adapters if a.type_name == "device")
    return srv, adapter


def run_lockstep(tcu: ElectricalTcu, io_path: Path, duration_s: float | None = None) -> np.ndarray:
    """The server's loop in lockstep, stepped one tick at a time in this process; every tick's outputs."""
    srv, adapter = _server(io_path, "lockstep")
    tcu.attach(adapter)
    n = int(round((duration_s or tcu.plan.duration_s) / srv.loop.dt))
    out = np.empty((n, srv.plant.n_out))
    try:
        srv.loop.start()
        for k in range(n):
            srv.loop.step(1)
            out[k] = srv.plant.y
    finally:
        srv.loop.close()
    return out


def run_realtime(tcu: ElectricalTcu, io_path: Path, duration_s: float | None = None, wall_limit_s: float = 60.0) -> dict:
    """The server's loop at its rate on the wall clock until the plan's duration of ticks has run (a tick that
    overran makes the loop skip deadlines, not plant time; ``wall_limit_s`` bounds the run); the plant's last
    outputs."""
    srv, adapter = _server(io_path, "realtime", wall_limit_s)
    tcu.attach(adapter)
    n_ticks = int(round((duration_s or tcu.plan.duration_s) / srv.loop.dt))
    tcu_step = adapter.device.tcu

    def step_then_stop(tick: int) -> None:
        tcu_step(tick)
        if tick >= n_ticks:
            srv.loop.request_shutdown("the plan's duration")

    adapter.device.tcu = step_then_stop
    try:
        srv.loop.run()
        status = srv.report.status()
    finally:
        srv.loop.close()
    return {"outputs": srv.plant.output_dict(), "ticks": srv.loop.tick, "status": status}


def main(argv: list[str] | None = None) -> int:
    import tempfile

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("stepwise", "lockstep", "realtime"), default="stepwise")
    args = ap.parse_args(argv)
    tcu = ElectricalTcu()
    with tempfile.TemporaryDirectory() as tmp:
        io = Path(tmp) / "io_electrical_stepped.toml"
        io.write_text(IO_STEPPED)
        if args.mode == "realtime":
            y = run_realtime(tcu, io)["outputs"]
        else:
            from plant_models.registry import load_plant

            rows = run_stepwise(tcu) if args.mode == "stepwise" else run_lockstep(tcu, io)
            y = dict(zip([s.name for s in load_plant(PLANT).outputs], rows[-1]))
    print(f"phases: {', '.join(f'{p} at {t:.3f} s' for t, p in tcu.timeline)}")
    print(f"gear {int(y['gear'])}, input {y['w_1']:.2f} rad/s, output {y['w_out']:.3f} rad/s; the TCU measured "
          f"{tcu.trace[-1][1]:.2f} and {tcu.trace[-1][3]:.3f} rad/s, oil {tcu.oil_C:.1f} C")
    return 0 if int(y["gear"]) == 3 else 1


if __name__ == "__main__":
    sys.exit(main())
