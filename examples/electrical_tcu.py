#!/usr/bin/env python3
"""A TCU over electrical signals only: it shifts the Powershift 1 -> 3 or the 8HP 1 -> 2 through the ``sim`` device.

The TCU sees what a production TCU sees on its connector
(configs/io_device_powershift.toml, configs/io_device_zf8hp.toml) and nothing else: the edges of its
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
* closes a clutch-to-clutch swap on the measured speeds: *fill* the
  on-coming element, *torque* phase (the off-going element ramps out while
  the on-coming one takes the torque), *inertia* phase (the on-coming
  pressure rises until its slip, measured from the speed sensors, is below
  a tolerance), *lock*.  Which elements and which slip is the
  :class:`Gearbox`'s: :data:`POWERSHIFT` swaps clutch 1 for clutch 2 (gear 1,
  ratio 48, to gear 3, ratio 32; the slip is the intermediate shaft's speed
  against half the input speed, its gear pair 1:2), :data:`ZF8HP` swaps
  clutch C for clutch E (gear 1, 108/23, to gear 2, 72/23, brakes A and B
  held; the slip is the input speed against 72/23 times the output speed,
  the ratio a TCU sees).

It runs inside the server's tick as the sim device's TCU (the device calls
:meth:`ElectricalTcu.step` once its pins show a tick's targets), so the run
is deterministic in every mode: ``run_stepwise`` (the plant and the device
adapter stepped in this process, no loop), ``run_lockstep`` (the server's
loop, stepped) and ``run_realtime`` (the loop at 1 kHz on the wall clock)::

    python examples/electrical_tcu.py [--mode stepwise|lockstep|realtime] [--gearbox powershift|zf8hp]
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

TIMER_NS = 25  # the TCU's capture timer (40 MHz)
TWO_PI = 2.0 * math.pi


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class Gearbox:
    """What the TCU knows of the transmission it drives: the plant and channel map, the start, the swap.

    Elements are named by their solenoid's input without ``i_`` (``c1``, ``A``).
    ``slip`` says how the on-coming element's slip is measured: ``"pair"``
    (the intermediate sensor against the input over ``on_ratio``, a gear pair
    the TCU can see across), ``"ratio"`` (the input against ``on_ratio``
    times the output: the target gear's ratio reached).
    """

    plant: str
    channels: str
    initial: tuple[tuple[str, float], ...]  # the plant's inputs at the start (torques; the engaged gear's currents)
    held: tuple[str, ...]  # elements at full pressure through the swap
    off: str
    on: str
    slip: str
    on_ratio: float
    gear_from: int
    gear_to: int
    plan: SwapPlan = SwapPlan()
    output_window: int = 10  # the output sensor's window and timeout over the others' (a slow wheel: longer)

    @property
    def initial_inputs(self) -> dict[str, float]:
        return dict(self.initial)


POWERSHIFT = Gearbox("powershift_electrical", "io_device_powershift.toml",
                     (("engine_torque", 300.0), ("load_torque", 3500.0), ("i_c1", 0.84), ("i_c3", 0.84),
                      ("i_c6", 0.84)), held=("c3", "c6"), off="c1", on="c2", slip="pair", on_ratio=2.0,
                     gear_from=1, gear_to=3)
"""The Powershift's 1 -> 3 swap (configs/powershift_electrical.toml): gear 1 at 16 bar from the start."""

ZF8HP = Gearbox("zf8hp_electrical", "io_device_zf8hp.toml",
                (("input_torque", 150.0), ("load_torque", 300.0), ("i_A", 0.68), ("i_B", 0.68), ("i_C", 0.68)),
                held=("A", "B"), off="C", on="E", slip="ratio", on_ratio=72.0 / 23.0, gear_from=1, gear_to=2,
                plan=SwapPlan(full_bar=12.0, torque_phase_bar=5.0, sync_rate_bar_s=30.0,
                              sync_tolerance_rad_s=2.0), output_window=2)
"""The 8HP's 1 -> 2 upshift (configs/zf8hp_electrical.toml): brakes A, B and clutch C at 12 bar from the
start, C swapped for E; 150 N m on the input, 300 N m of road load.  Its output wheel has 60 teeth (a tooth
every 4 ms at 25 rad/s): a 40 ms window, so the measured ratio does not lag the shift."""

GEARBOXES = {"powershift": POWERSHIFT, "zf8hp": ZF8HP}
PLANT = POWERSHIFT.plant  # the default gearbox's plant


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

    def __init__(self, plan: SwapPlan | None = None, window_ms: float = 20.0, timeout_ms: float = 200.0,
                 gearbox: Gearbox | str = POWERSHIFT):
        if isinstance(gearbox, str):  # by name, as an I/O config's tcu_params give it
            if gearbox not in GEARBOXES:
                raise ValueError(f"gearbox must be one of {', '.join(sorted(GEARBOXES))}, got {gearbox!r}")
            gearbox = GEARBOXES[gearbox]
        self.gearbox = gearbox
        self.plan = plan or gearbox.plan
        self.window_ns = int(window_ms * 1e6)
        self.timeout_ns = int(timeout_ms * 1e6)
        self.phase = "hold"
        self.timeline: list[tuple[float, str]] = []
        self.trace: list[tuple] = []  # (t, measured input, intermediate, output speed, oil C, duty c1, duty c2)
        self.bad_range_codes = 0

    def attach(self, adapter) -> None:
        """Wire the TCU to a device adapter's ``sim`` device (opened), resolving channels by name once."""
        dev, cmap = adapter.device, adapter.cmap
        self.adapter, self.last_tick = adapter, 0
        self.dev, self.dt_ns = dev, int(round(adapter.ctx.period_s * 1e9))
        layout = dev.layout
        wheels = {p.name: p for p in cmap.pulses}

        def sensor(name: str, window: int = 1, timeout: int = 1) -> SpeedSensor | None:
            if name not in wheels:  # a transmission without that sensor
                return None
            return SpeedSensor(layout.index(name, "pulse_out"), wheels[name].teeth, self.window_ns * window,
                               self.timeout_ns * timeout)

        self.n_in, self.n_mid = sensor("n_in"), sensor("n_mid")
        out_window = self.gearbox.output_window
        self.n_out = sensor("n_out", out_window, max(out_window // 2, 1))
        self.sol = {s.input[2:]: (layout.index(s.name, "pwm_in"), s.resistance_20C_ohm) for s in cmap.solenoids}
        self.ntc_slot, self.ntc = layout.index(cmap.ntc.name, "resistance_out"), cmap.ntc
        self.range_slots = [layout.index(b, "digital_out") for b in cmap.range_bits]
        self.range_decode = cmap.range_table.decode_table()
        self.range_position = cmap.range_table.index(cmap.range_position)
        self.kl30_slot = layout.index(cmap.supply_name, "analog_out")
        hyd = adapter.plant.params.hydraulics
        self.valve_A, self.valve_bar = np.array(hyd.valve_current_A), np.array(hyd.valve_pressure_bar)
        self.phase, self.timeline, self.trace = "hold", [(0.0, "hold")], []
        self.oil_C, self.kl30_V = 80.0, 13.5
        gb = self.gearbox
        held = (gb.off,) + gb.held  # at full pressure; every other solenoid off (after a reset too)
        self._drive({e: self.plan.full_bar if e in held else 0.0 for e in self.sol})
        dev.tcu = self.step

    # -- the TCU's inputs ----------------------------------------------------------------------------
    def _sense(self, tick: int) -> tuple[float, float, float]:
        dev = self.dev
        start = tick * self.dt_ns
        now = start + self.dt_ns
        sensors = (self.n_in, self.n_mid, self.n_out)
        for s in sensors:
            if s is not None:
                s.capture(start, dev.tcu_edges(s.slot))
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
        w_in, w_mid, w_out = (0.0 if s is None else s.speed_rad_s(now) for s in sensors)
        return w_in, w_mid, w_out

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

    def on_slip_rad_s(self, w_in: float, w_mid: float, w_out: float) -> float:
        """The on-coming element's slip as the TCU measures it (the :class:`Gearbox`'s ``slip``), rad/s."""
        gb = self.gearbox
        if gb.slip == "pair":
            return abs(w_mid - w_in / gb.on_ratio)
        return abs(w_in - gb.on_ratio * w_out)

    def pressures(self, t: float, w_in: float, w_mid: float, w_out: float = 0.0) -> tuple[float, float]:
        """(off-going, on-coming) pressure, bar, from the measured input, intermediate and output speeds
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
            if self.on_slip_rad_s(w_in, w_mid, w_out) >= p.sync_tolerance_rad_s:
                return 0.0, p_on
            self.t_sync, self.p_on_sync = t, p_on
            self._enter("lock", t)
        frac = min(1.0, (t - self.t_sync) / p.lock_s)
        return 0.0, self.p_on_sync + frac * (p.full_bar - self.p_on_sync)

    def step(self, tick: int) -> None:
        """One TCU task: the pins of hardware tick ``tick`` in, PWM duties out (the device calls it).

        A tick not after the last one is the loop's reset: the TCU starts
        afresh (as :meth:`attach` left it; a device adapter whose I/O config
        names this TCU has attached it again before the reset's first tick
        was read, so that tick read the duties of the TCU's start)."""
        if tick <= self.last_tick:
            self.attach(self.adapter)
        self.last_tick = tick
        w_in, w_mid, w_out = self._sense(tick)
        t = tick * self.dt_ns * 1e-9
        gb = self.gearbox
        p_off, p_on = self.pressures(t, w_in, w_mid, w_out)
        self._drive({gb.off: p_off, gb.on: p_on})
        self.trace.append((t, w_in, w_mid, w_out, self.oil_C, self.dev.driven.duty[self.sol[gb.off][0]],
                           self.dev.driven.duty[self.sol[gb.on][0]]))

    @property
    def phases(self) -> list[str]:
        return [p for _, p in self.timeline]


# -- the three ways to run it ------------------------------------------------------------------------------
def io_stepped(gearbox: Gearbox = POWERSHIFT) -> str:
    """An I/O config of the device adapter alone (no socket) with the gearbox's start (gear engaged)."""
    inputs = "".join(f"{k} = {v!r}\n" for k, v in gearbox.initial)
    return (f"[loop]\nstatus_line = false\n[initial_inputs]\n{inputs}[[adapters]]\ntype = \"device\"\n"
            f"name = \"device\"\nbackend = \"sim\"\nchannels = \"{gearbox.channels}\"\n")


IO_STEPPED = io_stepped(POWERSHIFT)
INITIAL = POWERSHIFT.initial_inputs


def run_stepwise(tcu: ElectricalTcu, duration_s: float | None = None, dt_s: float = 1e-3) -> np.ndarray:
    """The plant and the device adapter stepped in this process (read, step, write), no loop; every tick's outputs."""
    from io_adapters.base import LoopContext, create_adapter
    from plant_models.registry import load_plant

    gb = tcu.gearbox
    plant = load_plant(gb.plant)
    plant.reset(gb.initial_inputs)
    ad = create_adapter("device", "device", {"backend": "sim", "channels": gb.channels})
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


def _server(io_path: Path, mode: str, duration_s: float = 0.0, gearbox: Gearbox = POWERSHIFT):
    from server.realtime.runtime import build

    srv = build(gearbox.plant, io_path, mode=mode, duration_s=duration_s or None, status_line=False)
    srv.loop.open()
    adapter = next(a for a in srv.loop.adapters if a.type_name == "device")
    return srv, adapter


def run_lockstep(tcu: ElectricalTcu, io_path: Path, duration_s: float | None = None) -> np.ndarray:
    """The server's loop in lockstep, stepped one tick at a time in this process; every tick's outputs."""
    srv, adapter = _server(io_path, "lockstep", gearbox=tcu.gearbox)
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
    srv, adapter = _server(io_path, "realtime", wall_limit_s, tcu.gearbox)
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
    ap.add_argument("--gearbox", choices=sorted(GEARBOXES), default="powershift")
    args = ap.parse_args(argv)
    gb = GEARBOXES[args.gearbox]
    tcu = ElectricalTcu(gearbox=gb)
    with tempfile.TemporaryDirectory() as tmp:
        io = Path(tmp) / "io_electrical_stepped.toml"
        io.write_text(io_stepped(gb))
        if args.mode == "realtime":
            y = run_realtime(tcu, io)["outputs"]
        else:
            from plant_models.registry import load_plant

            rows = run_stepwise(tcu) if args.mode == "stepwise" else run_lockstep(tcu, io)
            y = dict(zip([s.name for s in load_plant(gb.plant).outputs], rows[-1]))
    w_in = y.get("w_1", y.get("w_input"))
    print(f"phases: {', '.join(f'{p} at {t:.3f} s' for t, p in tcu.timeline)}")
    print(f"gear {int(y['gear'])}, input {w_in:.2f} rad/s, output {y['w_out']:.3f} rad/s; the TCU measured "
          f"{tcu.trace[-1][1]:.2f} and {tcu.trace[-1][3]:.3f} rad/s, oil {tcu.oil_C:.1f} C")
    return 0 if int(y["gear"]) == gb.gear_to else 1

if __name__ == "__main__":
    sys.exit(main())
