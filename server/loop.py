"""The fixed-rate loop: read -> step -> write on absolute deadlines, with timing telemetry.

One thread does everything, so nothing waits for the GIL: between ticks it
serves control requests, flushes logs and prints the status line, each only
while enough slack remains before the next deadline; at the deadline it
wakes (sleep, sleep-then-spin or spin) and runs the tick:

1. every adapter's ``read`` applies the newest valid commands to ``plant.u``;
2. a loaded scenario writes the inputs of this step (exactly as the offline
   simulator does), or else the command watchdog applies its safe action;
3. ``plant.step(dt)``: one compiled call;
4. every adapter's ``write`` publishes the outputs.

Deadlines are absolute (``next += period`` on CLOCK_MONOTONIC in ns).  A tick
that ends after the next deadline is an *overrun*: by default the deadlines
it covered are skipped and counted as *missed ticks* (never a burst of
catch-up steps); ``overrun_policy = "stop"`` ends the run after
``max_overruns`` overruns outside the start-up grace period.

Modes: ``realtime`` ticks on the wall clock; ``lockstep`` ticks only when a
client asks for N steps (CI); ``afap`` ticks as fast as possible.  In
lockstep and afap the adapters' and the watchdog's clock is simulated time
(``tick * period``).

The tick creates no containers and no arrays and looks nothing up by name;
the only objects it creates are Python integers/floats and the decoded
command messages themselves, freed by reference counting.  The garbage
collector is frozen and disabled while the loop runs; a young-generation
collection runs in the slack between ticks once a second, so reference
cycles created by control requests do not accumulate.
"""

from __future__ import annotations

import gc
import logging
import signal
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import numpy as np

from io_adapters.base import TI_OVERRUNS, TI_SCENARIO, TI_STATUS, TI_WATCHDOG, Adapter, LoopContext
from plant_models.core import layout as L
from plant_models.plant import Plant

from . import rtsetup
from .params import Param, ParamTable
from .scenario import BLOCK as SCENARIO_BLOCK
from .simulate import offline_step
from .telemetry import (C_MISSED, C_OVERRUNS, C_OVERRUNS_GRACE, C_WIN_OVERRUNS, Telemetry, format_summary,
                        record_tick)
from .watchdog import CommandWatchdog, WatchdogConfig

MODES = ("realtime", "lockstep", "afap")
WAITS = ("sleep", "sleep_spin", "spin")
OVERRUN_POLICIES = ("skip", "stop")

STOPPED = "stopped"
RUNNING = "running"
PAUSED = "paused"

log = logging.getLogger("gearbox_hil.loop")


@dataclass(frozen=True)
class LoopConfig:
    """Validated loop settings (``[loop]`` and ``[realtime]`` in the I/O config, see docs/server.md)."""

    mode: str = "realtime"
    rate_hz: float = 1000.0
    wait: str = "sleep_spin"
    spin_margin_us: float = 200.0  # sleep_spin: wake this early, then spin to the deadline
    spin_margin_adapt: bool = True  # spin only as long as the measured sleep overshoot needs (20 us .. the above)
    autostart: bool = True
    overrun_policy: str = "skip"
    max_overruns: int = 10
    startup_grace_s: float = 1.0
    duration_s: float = 0.0  # 0: until stopped.  Wall time running (realtime) or simulated time (lockstep, afap)
    status_interval_s: float = 0.5  # length of a status window (recent rate, TET, lateness); 0 disables windows
    status_line: bool = True  # print the live status line once per window
    status_outputs: tuple[str, ...] = ()  # outputs shown in the status line; empty: speeds and gear
    service_budget_us: float = 300.0  # slack needed before the deadline to serve a control request
    gc_interval_s: float = 1.0  # young-generation collection in the slack; 0 disables it
    max_step_request: int = 10_000_000  # largest N of one lockstep "step"
    sample_capacity: int = 0  # raw per-tick timing samples kept for benchmarks
    realtime: rtsetup.RealtimeConfig = field(default_factory=rtsetup.RealtimeConfig)

    @property
    def period_ns(self) -> int:
        return int(round(1e9 / self.rate_hz))


class Loop:
    """A plant, its adapters and the fixed-rate loop that runs them.

    Parameters
    ----------
    plant
        The plant to run (already reset to its initial state).
    adapters
        Opened by :meth:`open`, in order; read and written in that order.
    cfg
        Loop settings.
    watchdog_cfg
        Command watchdog settings.
    initial_inputs
        Inputs applied at every reset (by name), before commands arrive.
    """

    def __init__(self, plant: Plant, adapters: Sequence[Adapter], cfg: LoopConfig,
                 watchdog_cfg: WatchdogConfig | None = None, initial_inputs: dict[str, float] | None = None,
                 out: Callable[[str], None] | None = None):
        if cfg.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {cfg.mode!r}")
        if cfg.wait not in WAITS:
            raise ValueError(f"wait must be one of {WAITS}, got {cfg.wait!r}")
        self.plant = plant
        self.adapters: tuple[Adapter, ...] = tuple(adapters)
        self.cfg = cfg
        self.mode = cfg.mode
        self.period_ns = cfg.period_ns
        self.dt = self.period_ns / 1e9
        self.initial_inputs = dict(initial_inputs or {})
        self.state = STOPPED
        self.tick = 0  # plant steps taken since the last reset
        self.telemetry = Telemetry(self.period_ns, cfg.sample_capacity)
        self.watchdog = CommandWatchdog(plant, watchdog_cfg or WatchdogConfig())
        self.tick_info = np.zeros(4, dtype=np.int64)
        self.watchdog.tripped_flag = self.tick_info[TI_WATCHDOG:TI_WATCHDOG + 1]
        self._wd_live = False
        self._step_ns = 0
        self.scenario = None  # CompiledScenario driving the inputs now, or None
        self.scenario_loaded = None  # the loaded scenario (kept after it finished, so a reset replays it)
        # A second copy of the loaded scenario whose input table is filled for the next block between
        # ticks (realtime), so the tick never computes a block itself (about 1 ms every 4096 ticks).
        self._sc_spare = None
        self._sc_pair = (None, None)
        self._sc_swap_at = -1
        self.scenario_prefetches = 0  # scenario table blocks filled between ticks
        self.scenario_info: dict | None = None
        self.exit_code = 0
        self.stop_reason = ""
        self.recent_events: list[dict] = []
        self.events_total = 0
        self.first_tick_ns = 0
        self.next_deadline_ns = 0  # realtime: the first deadline not yet run (or skipped) when ticking stopped
        self.started_ns = time.monotonic_ns()
        self._out = out or (lambda s: print(s, flush=True))
        self._shutdown = False
        self._restart_pending = False
        self._pending_set: tuple[np.ndarray, np.ndarray, int] | None = None
        self._pending_idx = np.zeros(max(plant.n_in, 1), dtype=np.int64)
        self._pending_val = np.zeros(max(plant.n_in, 1))
        self._in_lo = np.array([s.lo for s in plant.inputs], dtype=float)
        self._in_hi = np.array([s.hi for s in plant.inputs], dtype=float)
        self._wd_modes = set(self.watchdog.cfg.modes)
        self._last_status_line = 0
        self._last_gc = 0
        self._last_events = 0
        self._status_line_outputs = self._pick_status_outputs(cfg.status_outputs)
        self._tty = sys.stdout.isatty()
        self._status_line_broken = False
        self._rt: rtsetup.RealtimeSettings | None = None
        self._opened: list[Adapter] = []
        self.params = ParamTable(plant, extra=self._loop_params())
        self.ctx = LoopContext(period_s=self.dt, feed_watchdog=self.watchdog.feed, status=self.status,
                               control=self.control, log=logging.getLogger("gearbox_hil.io"),
                               tick_info=self.tick_info, mode=self.mode)
        self._wait = {"sleep": self._wait_sleep, "sleep_spin": self._wait_sleep_spin,
                      "spin": self._wait_spin}[cfg.wait]
        self._spin_margin_ns = int(cfg.spin_margin_us * 1000)
        self._adapt_margin = cfg.spin_margin_adapt
        self._margin_min_ns = 20_000
        # At most half a period: a margin near the period is a pure spin, which under SCHED_FIFO triggers
        # the kernel's real-time throttling.
        self._margin_max_ns = max(min(self._spin_margin_ns, self.period_ns // 2), self._margin_min_ns)
        if self._adapt_margin:
            self._spin_margin_ns = self._margin_max_ns
        self._overshoot_q = self._spin_margin_ns
        # Slack needed before a deadline to serve between ticks: at most 60 % of a period, so that high
        # rates still serve requests; and no request waits more than 50 ms (see _run_realtime).
        self._service_budget_ns = min(int(cfg.service_budget_us * 1000), self.period_ns * 6 // 10)
        self._last_service = 0
        self._prefetch_ns = self.period_ns // 2
        from .control import ControlHandler  # noqa: E402  (control needs Loop's names)
        self._control = ControlHandler(self)
        self.reset_plant()

    # ------------------------------------------------------------------ set-up
    def _loop_params(self) -> list[Param]:
        wd = self.watchdog

        def set_enabled(v):
            wd.enabled = bool(v)
            if not wd.enabled:
                wd.reset()

        return [
            Param("watchdog.enabled", "-", 0, 1, "command watchdog on/off", lambda: 1.0 if wd.enabled else 0.0,
                  set_enabled, kind="bool"),
            Param("watchdog.timeout_s", "s", 1e-4, 3600.0, "command age that trips the watchdog",
                  lambda: wd.timeout_ns / 1e9, lambda v: wd.set_times(timeout_s=v)),
            Param("watchdog.hold_s", "s", 0.0, 3600.0, "hold time after a trip, before the ramp",
                  lambda: wd.hold_ns / 1e9, lambda v: wd.set_times(hold_s=v)),
            Param("watchdog.ramp_s", "s", 0.0, 3600.0, "ramp time to the safe values (inputs without an override)",
                  lambda: wd.default_ramp_s,
                  lambda v: wd.set_times(ramp_s=v)),
        ]

    def _pick_status_outputs(self, names: Sequence[str]) -> list[tuple[str, int, str]]:
        outs = self.plant.outputs
        if names:
            return [(n, self.plant.output_index(n), self.plant.output_signal(n).unit) for n in names]
        picked = [k for k, s in enumerate(outs) if s.unit == "rad/s"][:1]
        for k, s in enumerate(outs):
            if s.name in ("w_out", "gear") and k not in picked:
                picked.append(k)
        if len(picked) < 2:
            picked += [k for k, s in enumerate(outs) if s.unit == "rad/s" and k not in picked][:2 - len(picked)]
        return [(outs[k].name, k, outs[k].unit) for k in picked]

    def open(self) -> None:
        """Open every adapter (bind sockets, open buses); on failure close those already open."""
        for a in self.adapters:
            try:
                a.open(self.plant, self.ctx)
            except BaseException:
                self.close()
                raise
            self._opened.append(a)

    def close(self) -> None:
        for a in reversed(self._opened):
            try:
                a.close()
            except Exception:  # closing must go on for the others
                log.exception("closing adapter %s failed", a.name)
        self._opened.clear()

    def set_step(self, dt: float) -> None:
        """Change the step (lockstep and afap only: a loaded scenario's dt_s).  Not while ticking."""
        self.dt = float(dt)
        self.period_ns = int(round(self.dt * 1e9))
        self.telemetry.period_ns = self.period_ns
        self.ctx.period_s = self.dt

    def reset_plant(self, inputs: dict[str, float] | None = None) -> None:
        """Back to t = 0: a loaded scenario starts over, else the configured initial inputs apply."""
        self._sc_swap_at = -1
        if self.scenario_loaded is not None:
            self.scenario = self.scenario_loaded
            self._sc_spare = self._sc_pair[1]
            self.tick_info[TI_SCENARIO] = 1
            if self.scenario_info is not None:
                self.scenario_info["finished"] = False
                self.scenario_info.pop("finished_at_tick", None)
            self.plant.reset(self.scenario.initial_inputs())
        else:
            merged = dict(self.initial_inputs)
            merged.update(inputs or {})
            self.plant.reset(merged)
        self.tick = 0
        self.tick_info[TI_STATUS] = 0
        self.plant.new_events()  # drop events of the previous run
        self.watchdog.reset()
        self._pending_set = None
        self._update_wd_live()

    # ------------------------------------------------------------------ the tick
    def _tick(self, now_ns: int) -> int:
        """One read -> step -> write; returns the plant's status word.  Called in the real-time loop."""
        plant = self.plant
        k = self.tick
        for a in self.adapters:
            a.read(k, now_ns)
        if self._pending_set is not None:
            idx, val, n = self._pending_set
            for j in range(n):
                plant.u[idx[j]] = val[j]
                plant.u_rate[idx[j]] = 0.0
            self._pending_set = None
        if k == self._sc_swap_at:
            self.scenario, self._sc_spare = self._sc_spare, self.scenario
            self._sc_swap_at = -1
        sc = self.scenario
        if sc is not None and k < sc.n_steps:
            # exactly the offline simulator's step, so lockstep equals `gearbox-hil simulate` bit for bit
            t0 = time.monotonic_ns()
            st = offline_step(plant, sc, k)
        else:
            if sc is not None:
                self._release_scenario()
            elif self._wd_live:
                self.watchdog.update(now_ns, self.dt)
            t0 = time.monotonic_ns()
            st = plant.step(self.dt)
        self._step_ns = time.monotonic_ns() - t0
        self.tick = k + 1
        self.tick_info[TI_STATUS] = st
        if sc is not None and k + 1 >= sc.n_steps:
            self._release_scenario()
        for a in self.adapters:
            a.write(k + 1, now_ns)
        return st

    def _release_scenario(self) -> None:
        """The scenario's last step is done: hold its final values (rate 0) and let commands take over."""
        sc = self.scenario
        sc.apply(self.plant, sc.n_steps)  # the value at the end time (scenarios hold their last value)
        self.plant.u_rate[:] = 0.0
        np.clip(self.plant.u, self._in_lo, self._in_hi, out=self.plant.u)
        self.scenario = None
        self.tick_info[TI_SCENARIO] = 0
        if self.scenario_info is not None:
            self.scenario_info["finished"] = True
            self.scenario_info["finished_at_tick"] = self.tick
        self.watchdog.reset()
        self._update_wd_live()

    def _update_wd_live(self) -> None:
        self._wd_live = self.watchdog.enabled and self.mode in self._wd_modes and self.scenario is None

    # ------------------------------------------------------------------ waiting
    def _wait_sleep(self, deadline: int) -> None:
        rem = deadline - time.monotonic_ns()
        if rem > 0:
            time.sleep(rem / 1e9)

    def _wait_sleep_spin(self, deadline: int) -> None:
        mono = time.monotonic_ns
        margin = self._spin_margin_ns
        target = deadline - margin
        rem = target - mono()
        if rem > 0:
            time.sleep(rem / 1e9)
            if self._adapt_margin:
                # Track the 99th percentile of the sleep's overshoot (stochastic quantile estimate: up
                # 99 steps when above it, down 1 step when below), so that rare stalls move it little;
                # spin that long plus 15 us.
                q = self._overshoot_q
                q = q + 3_960 if mono() - target > q else q - 40
                q = min(max(q, 0), self._margin_max_ns)
                self._overshoot_q = q
                margin = q + 15_000
                self._spin_margin_ns = min(max(margin, self._margin_min_ns), self._margin_max_ns)
        while mono() < deadline:
            pass

    def _wait_spin(self, deadline: int) -> None:
        mono = time.monotonic_ns
        while mono() < deadline:
            pass

    # ------------------------------------------------------------------ running
    def sim_ns(self) -> int:
        """Simulated time of the next tick in ns (the clock of lockstep and afap)."""
        return self.tick * self.period_ns

    def run(self) -> int:
        """Run until shutdown (Ctrl-C, SIGTERM, a ``shutdown`` request, ``duration_s``); returns the exit code."""
        handlers = self._install_signal_handlers()
        switch = sys.getswitchinterval()
        gc_was = gc.isenabled()
        try:
            problem = rtsetup.check_combination(self.cfg.realtime, self.cfg.wait)
            if problem:
                raise ValueError(problem)
            self._rt = rtsetup.apply(self.cfg.realtime, log)
            # Other threads (e.g. a CAN receive thread) must hand the GIL back quickly.
            sys.setswitchinterval(min(switch, max(self.dt / 10.0, 5e-5)))
            self._warm_up()
            gc.collect()
            gc.freeze()
            gc.disable()
            self._update_wd_live()
            if self.cfg.autostart:
                self.state = RUNNING
            while not self._shutdown:
                if self.state == RUNNING and self.mode == "realtime":
                    self._run_realtime()
                elif self.state == RUNNING and self.mode == "afap":
                    self._run_afap()
                else:
                    self._idle()
        finally:
            gc.unfreeze()
            if gc_was:
                gc.enable()
            sys.setswitchinterval(switch)
            if self._rt is not None:
                self._rt.restore()
            self._restore_signal_handlers(handlers)
        return self.exit_code

    def _warm_up(self) -> None:
        """Run the between-tick code paths once before the first deadline (nothing changes state).

        The first call of a code path pays page faults and lazy initialisation (a few ms after
        start-up); paying them here keeps them out of the first ticks.
        """
        self.status()
        self.status_line()
        self.telemetry.reset()
        for a in self.adapters:
            a.status()

    def request_shutdown(self, reason: str = "", code: int | None = None) -> None:
        """Ask the loop to end after the current tick (safe from signal handlers and other threads)."""
        if reason and not self.stop_reason:
            self.stop_reason = reason
        if code is not None:
            self.exit_code = code
        self._shutdown = True

    def _install_signal_handlers(self):
        if threading.current_thread() is not threading.main_thread():
            return None
        old = {}

        def on_signal(signum, frame):
            self.request_shutdown(signal.Signals(signum).name)

        for sig in (signal.SIGINT, signal.SIGTERM):
            old[sig] = signal.signal(sig, on_signal)
        return old

    @staticmethod
    def _restore_signal_handlers(old) -> None:
        if old:
            for sig, h in old.items():
                signal.signal(sig, h)

    def _begin_running(self) -> None:
        if self._restart_pending:
            self.reset_plant()
            self.telemetry.reset()
            self.tick_info[TI_OVERRUNS] = 0
            self._restart_pending = False

    def _run_realtime(self) -> None:
        self._begin_running()
        period = self.period_ns
        c = self.telemetry.counters
        hist = self.telemetry.hist
        samples = self.telemetry.samples
        mono = time.monotonic_ns
        wait = self._wait
        tick = self._tick
        stop_policy = self.cfg.overrun_policy == "stop"
        max_overruns = self.cfg.max_overruns
        t_start = mono()
        grace_end = t_start + int(self.cfg.startup_grace_s * 1e9)
        end_ns = t_start + int(self.cfg.duration_s * 1e9) - self.telemetry.run_ns if self.cfg.duration_s > 0 else 0
        deadline = t_start + period
        last_end = t_start
        self._step_ns = 0
        while self.state == RUNNING and not self._shutdown:
            now = mono()
            if deadline - now > self._service_budget_ns:
                self._service(now, deadline)
            elif now - self._last_service > 50_000_000:  # never starve control requests (e.g. at 10 kHz)
                self._service(now, deadline, force=True)
                if self.state != RUNNING or self._shutdown:
                    break
            wait(deadline)
            wake = mono()
            st = tick(wake)
            end = mono()
            if self.first_tick_ns == 0:
                self.first_tick_ns = wake
            record_tick(c, hist, samples, wake - deadline, end - wake, self._step_ns, st, True)
            deadline += period
            if end > deadline:
                missed = (end - deadline) // period + 1
                deadline += missed * period
                c[C_MISSED] += missed
                if end < grace_end:
                    c[C_OVERRUNS_GRACE] += 1
                else:
                    c[C_OVERRUNS] += 1
                    self.tick_info[TI_OVERRUNS] = c[C_OVERRUNS]  # the CAN status frame reports it
                    c[C_WIN_OVERRUNS] += 1
                    if stop_policy and c[C_OVERRUNS] >= max_overruns:
                        self.telemetry.add_run_time(end - last_end)
                        last_end = end
                        self._overrun_stop()
                        break
            if end_ns and end >= end_ns:
                self.request_shutdown("duration reached")
            self.telemetry.add_run_time(end - last_end)
            last_end = end
        self.next_deadline_ns = deadline

    def _overrun_stop(self) -> None:
        msg = (f"stopped after {self.telemetry.counters[C_OVERRUNS]} overruns "
               f"(overrun_policy = \"stop\", max_overruns = {self.cfg.max_overruns})")
        log.error("%s", msg)
        self.state = STOPPED
        self._restart_pending = True
        self.request_shutdown(msg, code=3)

    def _run_afap(self) -> None:
        self._begin_running()
        c = self.telemetry.counters
        hist = self.telemetry.hist
        samples = self.telemetry.samples
        mono = time.monotonic_ns
        tick = self._tick
        n_end = int(round(self.cfg.duration_s / self.dt)) if self.cfg.duration_s > 0 else 0
        last = mono()
        next_service = last + 1_000_000
        self._step_ns = 0
        while self.state == RUNNING and not self._shutdown:
            t0 = mono()
            if self.first_tick_ns == 0:
                self.first_tick_ns = t0
            st = tick(self.sim_ns())
            end = mono()
            record_tick(c, hist, samples, 0, end - t0, self._step_ns, st, False)
            if n_end and self.tick >= n_end:
                self.request_shutdown("duration reached")
            if end >= next_service:
                self.telemetry.add_run_time(end - last)
                last = end
                self._service(end, 0)
                next_service = mono() + 1_000_000
        self.telemetry.add_run_time(mono() - last)

    def step_lockstep(self, n: int) -> int:
        """Take n ticks now (lockstep); returns the OR of their status words."""
        c = self.telemetry.counters
        hist = self.telemetry.hist
        samples = self.telemetry.samples
        mono = time.monotonic_ns
        tick = self._tick
        acc = 0
        t_begin = mono()
        self._step_ns = 0
        n_end = int(round(self.cfg.duration_s / self.dt)) if self.cfg.duration_s > 0 else 0
        for _ in range(n):
            t0 = mono()
            if self.first_tick_ns == 0:
                self.first_tick_ns = t0
            st = tick(self.sim_ns())
            record_tick(c, hist, samples, 0, mono() - t0, self._step_ns, st, False)
            acc |= st
        self.telemetry.add_run_time(mono() - t_begin)
        if n_end and self.tick >= n_end:
            self.request_shutdown("duration reached")
        return acc

    def _idle(self) -> None:
        """Paused, stopped or lockstep: wait for control requests without spinning."""
        items = []
        for a in self.adapters:
            items.extend(a.wait_handles())
        if items:
            import zmq  # only for its poller, which also accepts plain file descriptors

            poller = zmq.Poller()
            for it in items:
                poller.register(it, zmq.POLLIN)
            poller.poll(20)
        else:
            time.sleep(0.02)
        now = time.monotonic_ns()
        self._service(now, 0)

    # ------------------------------------------------------------------ between ticks
    def _service(self, now: int, deadline: int, force: bool = False) -> None:
        """Housekeeping between ticks, each item only while the slack allows (deadline 0: no deadline).

        ``force`` serves the adapters once even without slack (an overrun is then counted).
        """
        budget = self._service_budget_ns
        mono = time.monotonic_ns
        self._last_service = now
        for a in self.adapters:
            if deadline and not force and deadline - mono() < budget:
                return
            try:
                a.poll_control(self.sim_ns() if self.mode != "realtime" else mono())
            except Exception:
                log.exception("adapter %s failed while serving control requests", a.name)
        if (self._sc_spare is not None and self.scenario is not None and self._sc_swap_at < 0
                and deadline and deadline - mono() >= self._prefetch_ns):
            self._prefetch_scenario_block()
        if now - self._last_events >= 20_000_000 and (not deadline or deadline - mono() >= budget):
            self._last_events = now
            self._collect_events()
        if (self.cfg.status_interval_s > 0 and now - self._last_status_line >= self.cfg.status_interval_s * 1e9
                and (not deadline or deadline - mono() >= budget)):
            self._last_status_line = now
            self._print_status_line()
        if (self.cfg.gc_interval_s > 0 and now - self._last_gc >= self.cfg.gc_interval_s * 1e9
                and (not deadline or deadline - mono() >= budget)):
            self._last_gc = now
            gc.collect(1)

    def load_scenario(self, compiled, spare) -> None:
        """Let ``compiled`` drive the inputs from t = 0 (``spare``: an identical copy used for prefetching)."""
        self.scenario_loaded = compiled
        self._sc_pair = (compiled, spare)
        self._prefetch_ns = self.period_ns // 2  # refined by the first measured prefetch
        self.reset_plant()

    def _prefetch_scenario_block(self) -> None:
        """Fill the spare scenario's table for the next block (between ticks, realtime)."""
        nxt = (self.tick // SCENARIO_BLOCK + 1) * SCENARIO_BLOCK
        if nxt >= self.scenario.n_steps:
            return
        t0 = time.monotonic_ns()
        self._sc_spare.inputs_at(nxt)
        took = time.monotonic_ns() - t0
        self._prefetch_ns = max(self._prefetch_ns // 2, took + took // 2)
        self._sc_swap_at = nxt
        self.scenario_prefetches += 1

    def _collect_events(self) -> None:
        events = self.plant.new_events()
        if not events:
            return
        self.events_total += len(events)
        self.recent_events.extend(events)
        del self.recent_events[:-32]
        for a in self.adapters:
            try:
                a.publish_events(events)
            except Exception:
                log.exception("adapter %s failed to publish events", a.name)

    def status_line(self) -> str:
        w = self.telemetry.window()
        lat = w["lateness_us"]["p99"]
        tet = w["tet_us"]["p99"]
        rate = w["rate_hz"]
        y = self.plant.y
        parts = [f"[{self.mode} {self.state}] t={self.plant.time:9.3f} s",
                 f"rate {rate:8.1f} Hz" if rate else "rate      -- Hz",
                 f"TET p99 {tet:7.1f} us" if tet is not None else "TET p99    -- us"]
        if self.mode == "realtime":
            parts.append(f"late p99 {lat:7.1f} us" if lat is not None else "late p99    -- us")
            parts.append(f"overruns {int(self.telemetry.counters[C_OVERRUNS])}")
        for name, k, unit in self._status_line_outputs:
            v = float(y[k])
            parts.append(f"{name} {v:.0f}" if unit in ("-", "") else f"{name} {v:7.1f} {unit}")
        if self.watchdog.tripped_flag[0]:
            parts.append("WATCHDOG")
        if self.scenario is not None:
            parts.append("scenario")
        return "  ".join(parts)

    def _print_status_line(self) -> None:
        if self.state != RUNNING:
            return
        line = self.status_line()  # also closes the status window
        if not self.cfg.status_line or self._status_line_broken:
            return
        try:
            if self._tty:
                sys.stdout.write("\r" + line[:200] + "\x1b[K")
                sys.stdout.flush()
            else:
                self._out(line)
        except (OSError, ValueError):  # stdout closed (a pipe whose reader went away): keep running
            self._status_line_broken = True

    def end_status_line(self) -> None:
        if self._tty and self.cfg.status_interval_s > 0 and self.cfg.status_line:
            sys.stdout.write("\n")
            sys.stdout.flush()

    # ------------------------------------------------------------------ status and control
    def status(self) -> dict:
        """The status channel's content: state, timing, watchdog, scenario, adapters."""
        now = time.monotonic_ns() if self.mode == "realtime" else self.sim_ns()
        return {
            "state": self.state,
            "mode": self.mode,
            "period_s": self.dt,
            "tick": self.tick,
            "sim_time_s": self.plant.time,
            "plant": {"kind": self.plant.kind, "status_word": int(self.tick_info[TI_STATUS]),
                      "status_names": L.status_names(int(self.tick_info[TI_STATUS])),
                      "events_total": self.events_total},
            "timing": self.telemetry.summary(),
            "window": self.telemetry.last_window,
            "watchdog": self.watchdog.status(now, self._wd_live),
            "scenario": dict(self.scenario_info) if self.scenario_info else None,
            "realtime": (dict(self._rt.as_dict(), spin_margin_us=round(self._spin_margin_ns / 1000.0, 1))
                         if self._rt is not None else None),
            "adapters": {a.name: _safe_status(a) for a in self.adapters},
            "startup_s": round((self.first_tick_ns - self.started_ns) / 1e9, 6) if self.first_tick_ns else None,
        }

    def control(self, request: dict) -> dict:
        """Execute one control request (see docs/protocol.md) and return its reply.  Never raises."""
        return self._control.handle(request)

    def summary_text(self) -> str:
        s = self.telemetry.summary()
        text = format_summary(s, self.mode)
        wd = self.watchdog
        text += f"\n  watchdog         {wd.trips} trips, {wd.recoveries} recoveries"
        for a in self.adapters:
            st = _safe_status(a)
            rej = st.get("rejected") if isinstance(st, dict) else None
            if isinstance(rej, dict):
                by = {k: v for k, v in rej.get("by_reason", {}).items() if v}
                text += f"\n  {a.name:<16} {st.get('applied', 0)} commands applied, {rej.get('total', 0)} rejected"
                if by:
                    text += " " + ", ".join(f"{k} {v}" for k, v in by.items())
        if self.stop_reason:
            text += f"\n  stopped: {self.stop_reason}"
        return text


def _safe_status(a: Adapter) -> dict:
    try:
        return a.status()
    except Exception as exc:  # a broken adapter must not break the status channel
        return {"error": f"status failed: {exc}"}


def with_overrides(cfg: LoopConfig, **kw: Any) -> LoopConfig:
    """A copy of ``cfg`` with the given non-None fields replaced."""
    return replace(cfg, **{k: v for k, v in kw.items() if v is not None})


__all__ = ["Loop", "LoopConfig", "MODES", "WAITS", "OVERRUN_POLICIES", "with_overrides",
           "STOPPED", "RUNNING", "PAUSED", "TI_WATCHDOG", "TI_STATUS", "TI_SCENARIO"]
