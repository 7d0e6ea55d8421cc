"""The fixed-rate loop: read -> step -> write on absolute deadlines, with timing telemetry.

One thread does everything, so nothing waits for the GIL.  Between ticks,
while the slack allows, :mod:`server.realtime.housekeeping` pumps the adapters
(states out, commands in), serves control requests, publishes events and
shows the status line; :mod:`server.realtime.waits` waits for the deadline (sleep,
sleep-then-spin or spin; a sleep wakes for adapter input).  The tick is
the run pipeline's stage list (:mod:`plant_models.run.stages`) run by the
stepper every other mode uses too (:class:`~plant_models.run.stepper.Stepper`):
``commanded`` (the adapters' ``read``), ``inputs`` (a loaded scenario's, as
the offline run writes them, or the command watchdog's safe action), the
fault stages around ``step`` (one compiled call), ``state_row`` (the next
row of the state ring, :mod:`plant_models.run.ring`, read between ticks by
every consumer), ``hand_back`` and ``send`` (the adapters' ``write``).  When
every stage in use has a compiled form the tick is one compiled call
(:mod:`plant_models.run.compiled`, :attr:`Loop.tick_path`), with the same
states bit for bit.

Deadlines are absolute (``next += period`` on CLOCK_MONOTONIC in ns).  A tick
that ends after the next deadline is an *overrun*: by default the deadlines
it covered are skipped and counted as *missed ticks* (never a burst of
catch-up steps); ``overrun_policy = "stop"`` ends the run after
``max_overruns`` overruns outside the start-up grace period.

Modes: ``realtime`` ticks on the wall clock; ``lockstep`` ticks only when a
client asks for N steps (CI); ``afap`` ticks as fast as possible.  In
lockstep and afap the adapters' and the watchdog's clock is simulated time
(``tick * period``).

The tick creates no containers and no arrays, decodes nothing and looks
nothing up by name; the only objects it creates are Python integers and
floats, freed by reference counting.  The garbage
collector is frozen and disabled while the loop runs; a young-generation
collection runs in the slack between ticks once a second, so reference
cycles created by control requests do not accumulate.

The loop does the tick and its transitions.  :mod:`server.realtime.runtime` hands
it the command watchdog and the scenario player, and through
:meth:`Loop.attach` the adapters' context and a :class:`Reporter` (the
status report, which reads the loop; the loop does not import it).  Its
fault set (:attr:`Loop.faults`) sets and clears faults and gives the tick
its fault stages; :mod:`server.realtime.snapshots` assembles a snapshot from
each part's own state.  Control requests (:mod:`server.realtime.control`) change it
only through its public transitions: :meth:`Loop.start`, :meth:`Loop.pause`,
:meth:`Loop.stop`, :meth:`Loop.reset`, :meth:`Loop.step`,
:meth:`Loop.apply_inputs`, :meth:`Loop.queue_inputs`, :meth:`Loop.snapshot`,
:meth:`Loop.restore`, :meth:`Loop.set_step` and :meth:`Loop.request_shutdown`.
"""

from __future__ import annotations

import functools
import gc
import logging
import sys
import time
from typing import Sequence

import numpy as np

from io_adapters.base import TI_OVERRUNS, TI_STATUS, Adapter, LoopContext
from plant_models.run.ring import StateRing, ring_push
from plant_models.errors import SnapshotError
from plant_models.plant import Plant

from server.realtime import rtsetup, snapshots
from server.realtime.faults import FaultSet, FaultSpec
from server.realtime.loop_config import LoopConfig
from server.realtime.scenario_player import ScenarioPlayer
from server.realtime.tick import TickStages
from server.realtime.telemetry import (C_MISSED, C_MISSED_GRACE, C_OVERRUNS, C_OVERRUNS_GRACE, C_WIN_OVERRUNS, Telemetry,
                        record_tick)
from server.realtime.housekeeping import Housekeeping, Reporter
from server.realtime.waits import Waiter
from server.realtime.watchdog import CommandWatchdog

STOPPED = "stopped"
RUNNING = "running"
PAUSED = "paused"

log = logging.getLogger("gearbox_hil.loop")


class Loop(TickStages):
    """The fixed-rate loop that runs a plant and its adapters.

    Parameters
    ----------
    plant
        The plant to run.
    adapters
        Opened by :meth:`open`, in order; read and written in that order.
    cfg
        Loop settings.
    watchdog
        The command watchdog of the plant's inputs (updated in the tick when
        no scenario drives the inputs).
    player
        Plays a loaded scenario into the plant's inputs.
    tick_info
        Per-tick flags shared with the adapters (slots ``TI_*`` of
        :mod:`io_adapters.base`); the loop writes the status word of every
        step and its overrun count.
    initial_inputs
        Inputs applied at every reset (by name, already validated), before
        commands arrive.
    ring
        The state ring the tick writes (default: one of ``cfg.ring_rows``
        rows for the plant).
    """

    def __init__(self, plant: Plant, adapters: Sequence[Adapter], cfg: LoopConfig, watchdog: CommandWatchdog,
                 player: ScenarioPlayer, tick_info: np.ndarray, initial_inputs: dict[str, float] | None = None,
                 ring: StateRing | None = None):
        self.plant = plant
        self.ring = ring if ring is not None else StateRing.for_plant(plant, cfg.ring_rows)
        # ring_push(head, ints, floats, tick_info, df, tick, now_ns, t) with its arrays bound: a C-level call
        self._ring_push = functools.partial(ring_push, self.ring.head, self.ring.ints, self.ring.floats,
                                            tick_info, plant.df)
        self.adapters: tuple[Adapter, ...] = tuple(adapters)
        # the tick calls write only where it does something (a transport that publishes reads the state ring)
        self._writers = tuple(a for a in self.adapters if type(a).write is not Adapter.write)
        self._readers = tuple(a for a in self.adapters if a.reads_commands)  # the others take no commands
        self._pumpers = tuple(a for a in self.adapters if type(a).pump is not Adapter.pump)
        self.cfg = cfg
        self.mode = cfg.mode
        self.period_ns = cfg.period_ns
        self.dt = self.period_ns / 1e9
        self.watchdog = watchdog
        self.player = player
        self.tick_info = tick_info
        self.initial_inputs = dict(initial_inputs or {})
        # injected faults (server/realtime/faults.py): the fault stages of the tick act while n_signal > 0
        self.faults = FaultSet(plant, tick_info, self.adapters)
        self.state = STOPPED
        self.tick = 0  # plant steps taken since the last reset
        self.telemetry = Telemetry(self.period_ns, cfg.sample_capacity)
        self.context: LoopContext | None = None
        self.reporter: Reporter | None = None
        self.exit_code = 0
        self.stop_reason = ""
        self.events_total = 0
        self.first_tick_ns = 0
        self.next_deadline_ns = 0  # realtime: the first deadline not yet run (or skipped) when ticking stopped
        self.started_ns = time.monotonic_ns()
        self._grace_end_ns = 0  # realtime: overruns before this are the start-up's (counted apart)
        self._step_ns = 0
        self._watchdog_in_mode = self.mode in watchdog.cfg.modes
        self._shutdown = False
        self._restart_pending = False  # a start after a stop begins a fresh run from t = 0
        # inputs queued for the start of the next tick (lockstep "step" with "set"): index, value, count
        self._queued_idx = np.zeros(max(plant.n_in, 1), dtype=np.int64)
        self._queued_val = np.zeros(max(plant.n_in, 1))
        self._queued = np.zeros(1, dtype=np.int64)  # the count, an array the compiled tick shares
        self._queued_slots = memoryview(self._queued)
        self.python_ticks = 0  # ticks the Python stepper took while the compiled tick was in use (see _tick)
        self._rt: rtsetup.RealtimeSettings | None = None
        self._opened: list[Adapter] = []
        # Slack needed before a deadline to serve between ticks: at most 60 % of a period, so that high
        # rates still serve requests; and no request waits more than 50 ms (see _run_realtime).
        self.service_budget_ns = min(int(cfg.service_budget_us * 1000), self.period_ns * 6 // 10)
        # the wait before each deadline (it pumps when input arrives), and the work between ticks
        self.waiter = Waiter(self, lambda until_ns: self._pump(until_ns), self.service_budget_ns)
        self.housekeeping = Housekeeping(self)
        self._pumped_at = 0  # ring rows written when the adapters last pumped
        self._pump_every = max(1, self.ring.capacity // 2)  # lockstep and afap pump at least this often
        self._pump_failures = 0
        self._now_ns = 0  # the clock of the tick running now (the adapters' and the watchdog's)
        self._plant_step = plant.step
        self.tick_path_wanted = "auto"  # or "python" (choose_tick_path)
        player.on_change = lambda: self._restage()  # a scenario loaded or unloaded: its compiled stages change
        self._restage()  # the tick: the run pipeline's stages (plant_models/run/stages.py), made again by the
        self.faults.on_change = self._restage  # fault set whenever its tables change
        self.reset()

    # ------------------------------------------------------------------ set-up
    def attach(self, context: LoopContext, reporter: Reporter | None = None) -> None:
        """Hand over what is assembled around the loop: the context shared with the adapters, the status reporter."""
        self.context = context
        self.reporter = reporter
        context.restage = self._restage  # an adapter whose compiled forms change (a CAN bus log starts) asks
        self._restage()

    def open(self) -> None:
        """Open every adapter (bind sockets, open buses); on failure close those already open."""
        if self.context is None:
            raise RuntimeError("Loop.open: no context attached (server.realtime.runtime.assemble attaches one)")
        for a in self.adapters:
            try:
                a.open(self.plant, self.context)
            except BaseException:
                self.close()
                raise
            self._opened.append(a)
        w = self.waiter
        w.wake_fds = [fd for a in self.adapters for fd in a.wake_fds()]
        w.adapter_rehearsals = [a.rehearse for a in self.adapters if type(a).rehearse is not Adapter.rehearse]
        self.housekeeping.adapters_opened(self.adapters, w.wake_fds)
        self._restage()  # the adapters' compiled forms exist once they are open
        log.info("tick: %s (%s)", self.tick_path, self.tick_path_reason)

    def close(self) -> None:
        for a in reversed(self._opened):
            try:
                a.close()
            except Exception:  # closing must go on for the others
                log.exception("closing adapter %s failed", a.name)
        self._opened.clear()

    # ------------------------------------------------------------------ public transitions (between ticks)
    def start(self) -> None:
        """Run: tick on the clock (realtime, afap) or accept steps (lockstep); after a stop, from t = 0."""
        self._begin_running()
        self.state = RUNNING

    def pause(self) -> None:
        """Hold the simulation where it is; :meth:`start` continues it.  Only while running."""
        if self.state != RUNNING:
            raise RuntimeError(f"pause: the loop is {self.state}, not running")
        self.state = PAUSED

    def stop(self) -> None:
        """Stop ticking; the next :meth:`start` begins a fresh run from t = 0 (plant and telemetry reset)."""
        self.state = STOPPED
        self._restart_pending = True

    def reset(self, inputs: dict[str, float] | None = None) -> None:
        """Back to t = 0: a loaded scenario starts over, else the initial inputs apply (updated by ``inputs``).

        Every injected fault is cleared.
        """
        if self.faults.active:
            self.faults.clear()
        initial = self.player.rewind()
        if initial is None:
            initial = dict(self.initial_inputs)
            initial.update(inputs or {})
        self.plant.reset(initial)
        self.tick = 0
        self.tick_info[TI_STATUS] = 0
        self.plant.new_events()  # drop events of the previous run
        self.watchdog.reset()
        self._queued_n = 0

    def apply_inputs(self, idx: np.ndarray, val: np.ndarray, count: int) -> None:
        """Set inputs ``idx[:count]`` to ``val[:count]`` (held: rate 0) now, between ticks."""
        u, u_rate = self.plant.u, self.plant.u_rate
        for j in range(count):
            u[idx[j]] = val[j]
            u_rate[idx[j]] = 0.0

    def queue_inputs(self, idx: np.ndarray, val: np.ndarray, count: int) -> None:
        """Set inputs ``idx[:count]`` to ``val[:count]`` (rate 0) at the start of the next tick.

        They apply after that tick's adapter commands, so a lockstep ``step``
        that carries inputs does not depend on when commands arrived.
        """
        self._queued_idx[:count] = idx[:count]
        self._queued_val[:count] = val[:count]
        self._queued_n = count

    def set_fault(self, fault: dict | FaultSpec) -> FaultSpec:
        """Inject a fault (a map of ``docs/faults.md``) from the next tick on (:meth:`FaultSet.set`); returns it."""
        return self.faults.set(fault)

    def clear_fault(self, name: str | None = None) -> list[str]:
        """Clear the fault called ``name`` (None: all) from the next tick on (:meth:`FaultSet.clear`)."""
        return self.faults.clear(name)

    def snapshot(self) -> dict:
        """The whole simulation state, to continue bit-exactly with :meth:`restore` (:func:`server.realtime.snapshots.take`)."""
        return snapshots.take(self)

    def restore(self, snap: dict) -> None:
        """Continue from a :meth:`snapshot` of this plant and config (:func:`server.realtime.snapshots.restore`).

        Every part checks its own state before any changes; ``SnapshotError``
        (nothing changed) for a snapshot that does not fit.
        """
        snapshots.restore(self, snap)

    # ------------------------------------------------------------------ the clock's part of a snapshot
    def snapshot_state(self) -> dict:
        """The loop's part of a snapshot: tick, step, mode, the status word and the inputs queued for the next tick."""
        return {"tick": self.tick, "period_ns": self.period_ns, "mode": self.mode, "tick_info": self.tick_info.copy(),
                "queued_idx": self._queued_idx.copy(), "queued_val": self._queued_val.copy(),
                "queued_n": self._queued_n}

    def check_state(self, st: dict) -> None:
        """Raise unless ``st`` fits this loop (shapes; a realtime loop keeps its period); changes nothing."""
        period_ns, tick, queued_n = int(st["period_ns"]), int(st["tick"]), int(st["queued_n"])
        shapes = [(np.asarray(st[k]).shape, ref.shape) for k, ref in (
            ("tick_info", self.tick_info), ("queued_idx", self._queued_idx), ("queued_val", self._queued_val))]
        if (any(a != b for a, b in shapes) or not 0 <= queued_n <= self._queued_idx.size or tick < 0
                or period_ns <= 0):
            raise ValueError("loop fields of the wrong shape")
        if period_ns != self.period_ns and self.mode == "realtime":
            raise SnapshotError(f"the snapshot's step {period_ns / 1e9:g} s differs from this realtime server's "
                                f"period {self.dt:g} s")

    def restore_state(self, st: dict) -> None:
        """Restore a checked :meth:`snapshot_state`; the next :meth:`start` continues from it."""
        period_ns = int(st["period_ns"])
        if period_ns != self.period_ns:
            self.set_step(period_ns / 1e9)
        self.tick = int(st["tick"])
        # the other slots: set by the watchdog, the scenario player, the fault set, or telemetry
        self.tick_info[TI_STATUS] = np.asarray(st["tick_info"], dtype=np.int64)[TI_STATUS]
        self._queued_idx[:] = np.asarray(st["queued_idx"], dtype=np.int64)
        self._queued_val[:] = np.asarray(st["queued_val"], dtype=np.float64)
        self._queued_n = int(st["queued_n"])
        self._restart_pending = False

    def set_step(self, dt: float) -> None:
        """Change the step (lockstep and afap only: a loaded scenario's dt_s).  Not while ticking."""
        self.dt = float(dt)
        self.period_ns = int(round(self.dt * 1e9))
        self.telemetry.period_ns = self.period_ns
        if self.context is not None:
            self.context.period_s = self.dt
        self._restage()  # adapters that count time in ticks re-time their compiled forms

    def step(self, n: int) -> int:
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
        ring = self.ring
        for _ in range(n):
            t0 = mono()
            if self.first_tick_ns == 0:
                self.first_tick_ns = t0
            st = tick(self.sim_ns())
            record_tick(c, hist, samples, 0, mono() - t0, self._step_ns, st, False)
            acc |= st
            if ring.written - self._pumped_at >= self._pump_every:  # no state is lost in lockstep
                self._pump(0)
        self.telemetry.add_run_time(mono() - t_begin)
        self._pump(0)  # the states of these ticks are sent before the reply to the request
        if n_end and self.tick >= n_end:
            self.request_shutdown("duration reached")
        return acc

    def request_shutdown(self, reason: str = "", code: int | None = None) -> None:
        """Ask the loop to end after the current tick (safe from signal handlers and other threads)."""
        if reason and not self.stop_reason:
            self.stop_reason = reason
        if code is not None:
            self.exit_code = code
        self._shutdown = True

    # ------------------------------------------------------------------ what the loop reports
    @property
    def shutdown_requested(self) -> bool:
        return self._shutdown

    @property
    def running(self) -> bool:
        return self.state == RUNNING

    @property
    def status_word(self) -> int:
        """Status word of the last plant step (0: normal)."""
        return int(self.tick_info[TI_STATUS])

    @property
    def watchdog_active(self) -> bool:
        """Whether the watchdog supervises the inputs now (enabled, in this mode, no scenario driving them)."""
        return self.watchdog.active_in(self.mode) and self.player.active is None

    @property
    def realtime_settings(self) -> rtsetup.RealtimeSettings | None:
        """The OS settings applied for the current run (None before :meth:`run`)."""
        return self._rt

    @property
    def spin_margin_us(self) -> float:
        """How long before a deadline the sleep_spin wait stops sleeping (adapted to the machine), us."""
        return self.waiter.spin_margin_us

    def sim_ns(self) -> int:
        """Simulated time of the next tick in ns (the clock of lockstep and afap)."""
        return self.tick * self.period_ns

    def clock_ns(self) -> int:
        """The clock of the adapters and the watchdog: the wall clock in realtime, simulated time otherwise."""
        return time.monotonic_ns() if self.mode == "realtime" else self.sim_ns()

    # ------------------------------------------------------------------ the tick
    def _tick(self, now_ns: int) -> int:
        """One read -> step -> write (the run pipeline's stages); returns the plant's status word.  Called in the
        real-time loop.

        One compiled call when every stage in use has a compiled form (:attr:`tick_path`), else, and for a tick
        the compiled call declines (a scenario's table swaps or refills, or it ends), the Python stepper: the
        same states bit for bit (tests/test_compiled_tick.py).
        """
        self._now_ns = now_ns
        run = self._tick_run
        if run is not None:
            st = run(self.tick, now_ns, self.dt)
            if st >= 0:
                self._step_ns = self._tick_step_ns[0]
                self.tick += 1
                return st
            self.python_ticks += 1
        return self._tick_step(self.tick)

    @property
    def _queued_n(self) -> int:
        """Inputs queued for the next tick."""
        return self._queued_slots[0]

    @_queued_n.setter
    def _queued_n(self, n: int) -> None:
        self._queued_slots[0] = int(n)

    # ------------------------------------------------------------------ running
    def run(self) -> int:
        """Run until shutdown (Ctrl-C, SIGTERM, a ``shutdown`` request, ``duration_s``); returns the exit code."""
        handlers = rtsetup.install_signal_handlers(lambda name: self.request_shutdown(name))
        switch = sys.getswitchinterval()
        gc_was = gc.isenabled()
        try:
            self._rt = rtsetup.apply(self.cfg.realtime, log)
            # Other threads (e.g. a CAN receive thread) must hand the GIL back quickly.
            sys.setswitchinterval(min(switch, max(self.dt / 10.0, 5e-5)))
            self._warm_up()
            gc.collect()
            gc.freeze()
            gc.disable()
            if self.cfg.autostart:
                self.state = RUNNING
            while not self._shutdown:
                if self.state == RUNNING and self.mode == "realtime":
                    self._run_realtime()
                elif self.state == RUNNING and self.mode == "afap":
                    self._run_afap()
                else:
                    self.housekeeping.idle()
        finally:
            gc.unfreeze()
            if gc_was:
                gc.enable()
            sys.setswitchinterval(switch)
            if self._rt is not None:
                self._rt.restore()
            rtsetup.restore_signal_handlers(handlers)
        return self.exit_code

    def _warm_up(self) -> None:
        """Run the between-tick code paths once before the first deadline (nothing changes state).

        The first call of a code path pays page faults and lazy initialisation (a few ms after
        start-up); paying them here keeps them out of the first ticks.
        """
        if self.reporter is not None:
            self.reporter.warm_up()  # the status (with every adapter's) and the status line
        self._reset_telemetry()

    def _reset_telemetry(self) -> None:
        self.telemetry.reset()
        self.tick_info[TI_OVERRUNS] = 0

    def _begin_running(self) -> None:
        if self._restart_pending:
            self.reset()
            self._reset_telemetry()
            self._restart_pending = False

    def _run_realtime(self) -> None:
        """Tick on absolute deadlines until stopped.  The TET runs from the wake-up's clock read to the one after
        the tick's work: the compiled call (its arguments read before; the tick count, the step's duration and
        the counters after), else :meth:`_tick` (BENCHMARKS.md, "The last 0.2 us of the tick")."""
        self._begin_running()
        period = self.period_ns
        c, hist, samples = self.telemetry.counters, self.telemetry.hist, self.telemetry.samples
        mono, wait, serve = time.monotonic_ns, self.waiter.wait, self.housekeeping.serve
        t_start = mono()
        self._grace_end_ns = t_start + int(self.cfg.startup_grace_s * 1e9)
        end_ns = t_start + int(self.cfg.duration_s * 1e9) - self.telemetry.run_ns if self.cfg.duration_s > 0 else 0
        deadline = t_start + period
        last_end = t_start
        self._step_ns = 0
        while self.state == RUNNING and not self._shutdown:
            now = mono()
            if deadline - now > self.service_budget_ns:
                serve(now, deadline)
            elif now - self.housekeeping.last_service > 50_000_000:  # never starve control requests (10 kHz)
                serve(now, deadline, force=True)
                if self.state != RUNNING or self._shutdown:
                    break
            elif self.tick:
                # a late tick, too little slack to serve: what it queued (CAN frames, states) still goes out
                # now, up to the deadline, not a period later (BENCHMARKS.md, "The local virtual CAN bus")
                self._pump(deadline)
            wait(deadline)
            run, k, dt = self._tick_run, self.tick, self.dt  # (a pump in the wait may have restaged the tick)
            wake = mono()
            st = run(k, wake, dt) if run is not None else -1
            if st >= 0:  # the compiled call took the tick: its bookkeeping after the end mark
                end = mono()
                self.tick = k + 1
                self._step_ns = self._tick_step_ns[0]
            else:  # no compiled tick, or it declined having changed nothing (a scenario's table swap)
                self._now_ns = wake
                self.python_ticks += run is not None
                st = self._tick_step(k)
                end = mono()
            if self.first_tick_ns == 0:
                self.first_tick_ns = wake
            record_tick(c, hist, samples, wake - deadline, end - wake, self._step_ns, st, True)
            deadline += period
            if end > deadline:
                deadline = self._overrun(end, deadline, last_end)
                if self.state != RUNNING:  # overrun_policy "stop" ended the run
                    break
            if end_ns and end >= end_ns:
                self.request_shutdown("duration reached")
            self.telemetry.add_run_time(end - last_end)
            last_end = end
        self.next_deadline_ns = deadline
        self._pump(0)  # the states of the last ticks (a publisher's unfinished burst) go out now

    def _overrun(self, end: int, deadline: int, last_end: int) -> int:
        """A tick that ended after the next deadline: the deadlines it covered are skipped and counted as missed;
        returns the next deadline not yet passed.  With ``overrun_policy = "stop"``, the run stops after
        ``max_overruns`` overruns outside the start-up grace period.  Called in the real-time loop."""
        c, period = self.telemetry.counters, self.period_ns
        missed = (end - deadline) // period + 1
        deadline += missed * period
        c[C_MISSED] += missed
        if end < self._grace_end_ns:
            c[C_OVERRUNS_GRACE] += 1
            c[C_MISSED_GRACE] += missed
            return deadline
        c[C_OVERRUNS] += 1
        c[C_WIN_OVERRUNS] += 1
        self.tick_info[TI_OVERRUNS] = c[C_OVERRUNS]
        if self.cfg.overrun_policy == "stop" and c[C_OVERRUNS] >= self.cfg.max_overruns:
            self.telemetry.add_run_time(end - last_end)
            self._overrun_stop()
        return deadline

    def _overrun_stop(self) -> None:
        msg = (f"stopped after {self.telemetry.counters[C_OVERRUNS]} overruns "
               f"(overrun_policy = \"stop\", max_overruns = {self.cfg.max_overruns})")
        log.error("%s", msg)
        self.stop()
        self.request_shutdown(msg, code=3)

    def _run_afap(self) -> None:
        self._begin_running()
        c, hist, samples = self.telemetry.counters, self.telemetry.hist, self.telemetry.samples
        mono, tick = time.monotonic_ns, self._tick
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
            if self.ring.written - self._pumped_at >= self._pump_every:  # no state is lost to the ring
                self._pump(0)
            if end >= next_service:
                self.telemetry.add_run_time(end - last)
                last = end
                self.housekeeping.serve(end, 0)
                next_service = mono() + 1_000_000
        self.telemetry.add_run_time(mono() - last)
        self._pump(0)

    def _pump(self, until_ns: int) -> None:
        """Every adapter's :meth:`~io_adapters.base.Adapter.pump` (states out, commands in), between ticks."""
        for a in self._pumpers:
            try:
                a.pump(until_ns)
            except Exception:
                self._pump_failures += 1
                if self._pump_failures <= 10 or self._pump_failures % 1000 == 0:
                    log.exception("adapter %s failed while moving data between ticks (%d failures)", a.name,
                                  self._pump_failures)
        self._pumped_at = self.ring.written


__all__ = ["Loop", "Reporter", "STOPPED", "RUNNING", "PAUSED"]
