"""The fixed-rate loop: read -> step -> write on absolute deadlines, with timing telemetry.

One thread does everything, so nothing waits for the GIL: between ticks it
lets the adapters publish the states of the last ticks and take in arrived
commands (:meth:`~io_adapters.base.Adapter.pump`), serves control requests,
flushes logs and prints the status line, each only while enough slack
remains before the next deadline; it sleeps on the adapters' input
(:meth:`~io_adapters.base.Adapter.wake_fds`), so a command that arrives
while it sleeps is taken in at once; at the deadline it wakes (sleep,
sleep-then-spin or spin) and runs the tick, which does physics and copies,
nothing else:

1. every adapter's ``read`` copies the commands decoded since the last tick
   into ``plant.u``;
2. a loaded scenario writes the inputs of this step (exactly as the offline
   simulator does), or else the command watchdog applies its safe action;
3. ``plant.step(dt)``: one compiled call; with signal faults injected
   (:mod:`server.faults`), one compiled call before it fakes the faulted
   inputs;
4. the state after the step goes into the next row of the state ring
   (:mod:`io_adapters.ring`): one compiled call, which is how the ZeroMQ
   state stream (and any other consumer) gets it, between ticks; with signal
   faults injected the same call first fakes the faulted outputs and then
   gives the faulted inputs their commanded values back;
5. the ``write`` of every adapter that sends something every tick (CAN
   frames due this tick).

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

The loop does the tick and its transitions.  It is handed its parts by
:mod:`server.runtime`: the command watchdog (:mod:`server.watchdog`), the
scenario player (:mod:`server.scenario_player`), and, through
:meth:`Loop.attach`, the context it shares with the adapters and a
:class:`Reporter` (the status report of :mod:`server.status`, which reads
the loop; the loop does not import it).  It builds its fault set
(:class:`server.faults.FaultSet`, :attr:`Loop.faults`), whose tables and
compiled partials the tick calls; setting and clearing faults is the fault
set's (``Loop.set_fault`` and ``clear_fault`` hand over to it).  A snapshot
is assembled by :mod:`server.snapshots` from each part's own state (the
loop's part: its clock and queued inputs, :meth:`Loop.snapshot_state`).
Control requests (:mod:`server.control`) change it only through its
public transitions: :meth:`Loop.start`, :meth:`Loop.pause`,
:meth:`Loop.stop`, :meth:`Loop.reset`, :meth:`Loop.step`,
:meth:`Loop.apply_inputs`, :meth:`Loop.queue_inputs`, :meth:`Loop.snapshot`,
:meth:`Loop.restore`, :meth:`Loop.set_step` and :meth:`Loop.request_shutdown`.
"""

from __future__ import annotations

import functools
import gc
import logging
import select
import signal
import sys
import threading
import time
from typing import Protocol, Sequence

import numpy as np

from io_adapters.base import TI_OVERRUNS, TI_STATUS, Adapter, LoopContext
from io_adapters.ring import StateRing, ring_push
from plant_models.errors import SnapshotError
from plant_models.plant import Plant

from . import rtsetup, snapshots
from .faults import FaultSet, FaultSpec
from .loop_config import LoopConfig
from .scenario import offline_step
from .scenario_player import ScenarioPlayer
from .telemetry import (C_MISSED, C_MISSED_GRACE, C_OVERRUNS, C_OVERRUNS_GRACE, C_WIN_OVERRUNS, Telemetry,
                        record_tick)
from .watchdog import CommandWatchdog

STOPPED = "stopped"
RUNNING = "running"
PAUSED = "paused"
# The spin wait rehearses the adapters' decoding (about 10 us) only with at least this much time to the deadline.
REHEARSAL_SLACK_NS = 30_000

log = logging.getLogger("gearbox_hil.loop")


class Reporter(Protocol):
    """What the loop calls to report its status between ticks (implemented by :class:`server.status.StatusReport`)."""

    def warm_up(self) -> None:
        """Run the reporting code paths once before the first deadline (changes nothing)."""

    def status_window(self) -> None:
        """A status window ended while running: close it and show the status line."""


class Loop:
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
        self.cfg = cfg
        self.mode = cfg.mode
        self.period_ns = cfg.period_ns
        self.dt = self.period_ns / 1e9
        self.watchdog = watchdog
        self.player = player
        self.tick_info = tick_info
        self.initial_inputs = dict(initial_inputs or {})
        # injected faults (server/faults.py): the tick calls their two compiled partials while n_signal > 0
        self.faults = FaultSet(plant, tick_info, self.adapters, self.ring)
        # The tick's rehearsal (sleep_spin): the step, the ring row and the telemetry on scratch copies, in the spin
        # before the deadline, so that a tick after a sleep finds its code and data in the caches (BENCHMARKS.md,
        # "The tick").
        # (only a plant whose step is the standard compiled call on its buffers: its state is all in them)
        self._rehearse_step = type(plant).step is Plant.step
        self._dry_df = np.empty_like(plant.df)
        self._dry_di = np.empty_like(plant.di)
        dry_ring = StateRing.for_plant(plant, 4)
        self._dry_ring_push = functools.partial(ring_push, dry_ring.head, dry_ring.ints, dry_ring.floats,
                                                tick_info.copy(), self._dry_df)
        scratch = Telemetry(cfg.period_ns, 1)
        self._dry_record_tick = functools.partial(record_tick, scratch.counters, scratch.hist, scratch.samples)
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
        self._step_ns = 0
        self._watchdog_in_mode = self.mode in watchdog.cfg.modes
        self._shutdown = False
        self._restart_pending = False  # a start after a stop begins a fresh run from t = 0
        # inputs queued for the start of the next tick (lockstep "step" with "set"): index, value, count
        self._queued_idx = np.zeros(max(plant.n_in, 1), dtype=np.int64)
        self._queued_val = np.zeros(max(plant.n_in, 1))
        self._queued_n = 0
        self._last_status_window = 0
        self._last_gc = 0
        self._last_events = 0
        self._rt: rtsetup.RealtimeSettings | None = None
        self._opened: list[Adapter] = []
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
        self._wake_fds: list[int] = []
        self._idle_fds: list[int] = []  # what _idle waits on: wake_fds and the adapters' idle_fds
        self._idle_pending: list = []  # adapters' idle_pending methods (those that have one)
        self._adapter_rehearsals: list = []  # adapters' rehearse methods (those that have one), set by open()
        self._pumped_at = 0  # ring rows written when the adapters last pumped
        self._pump_every = max(1, self.ring.capacity // 2)  # lockstep and afap pump at least this often
        self._pump_failures = 0
        self.reset()

    # ------------------------------------------------------------------ set-up
    def attach(self, context: LoopContext, reporter: Reporter | None = None) -> None:
        """Hand over what is assembled around the loop: the context shared with the adapters, the status reporter."""
        self.context = context
        self.reporter = reporter

    def open(self) -> None:
        """Open every adapter (bind sockets, open buses); on failure close those already open."""
        if self.context is None:
            raise RuntimeError("Loop.open: no context attached (server.runtime.assemble attaches one)")
        for a in self.adapters:
            try:
                a.open(self.plant, self.context)
            except BaseException:
                self.close()
                raise
            self._opened.append(a)
        self._wake_fds = [fd for a in self.adapters for fd in a.wake_fds()]
        self._idle_fds = self._wake_fds + [fd for a in self.adapters for fd in a.idle_fds()]
        self._idle_pending = [a.idle_pending for a in self.adapters if type(a).idle_pending is not Adapter.idle_pending]
        self._adapter_rehearsals = [a.rehearse for a in self.adapters if type(a).rehearse is not Adapter.rehearse]

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
        """Inject a fault (the map of ``docs/faults.md``, or a parsed spec) from the next tick on; returns it.

        :meth:`server.faults.FaultSet.set` of :attr:`faults`; raises
        ``FaultError`` for a bad fault, changing nothing.
        """
        return self.faults.set(fault)

    def clear_fault(self, name: str | None = None) -> list[str]:
        """Clear the fault called ``name`` (None: all) from the next tick on (:meth:`FaultSet.clear`)."""
        return self.faults.clear(name)

    def snapshot(self) -> dict:
        """The whole simulation state, to continue bit-exactly with :meth:`restore` (:func:`server.snapshots.take`)."""
        return snapshots.take(self)

    def restore(self, snap: dict) -> None:
        """Continue from a :meth:`snapshot` of this plant and config (:func:`server.snapshots.restore`).

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
        return self._spin_margin_ns / 1000.0

    def sim_ns(self) -> int:
        """Simulated time of the next tick in ns (the clock of lockstep and afap)."""
        return self.tick * self.period_ns

    def clock_ns(self) -> int:
        """The clock of the adapters and the watchdog: the wall clock in realtime, simulated time otherwise."""
        return time.monotonic_ns() if self.mode == "realtime" else self.sim_ns()

    # ------------------------------------------------------------------ the tick
    def _tick(self, now_ns: int) -> int:
        """One read -> step -> write; returns the plant's status word.  Called in the real-time loop."""
        plant = self.plant
        player = self.player
        k = self.tick
        for a in self.adapters:
            a.read(k, now_ns)
        n = self._queued_n
        if n:
            idx, val = self._queued_idx, self._queued_val
            for j in range(n):
                plant.u[idx[j]] = val[j]
                plant.u_rate[idx[j]] = 0.0
            self._queued_n = 0
        if k == player.swap_at:
            player.swap()
        sc = player.active
        faults = self.faults
        nf = faults.n_signal
        if sc is not None and k < sc.n_steps:
            # exactly the offline simulator's step, so lockstep equals `gearbox-hil simulate` bit for bit
            t0 = time.monotonic_ns()
            if nf:  # the same two stages with the faulted inputs between them
                sc.apply(plant, k)
                faults.inputs(nf)
                st = plant.step(sc.dt)
            else:
                st = offline_step(plant, sc, k)
        else:
            if sc is not None:
                player.release(k)
            elif self._watchdog_in_mode:
                self.watchdog.update(now_ns, self.dt)
            if nf:
                faults.inputs(nf)
            t0 = time.monotonic_ns()
            st = plant.step(self.dt)
        self._step_ns = time.monotonic_ns() - t0
        self.tick = k + 1
        self.tick_info[TI_STATUS] = st
        if nf:
            faults.push(nf, k + 1, now_ns, plant.time)
            if sc is not None and k + 1 >= sc.n_steps:
                player.release(k + 1)  # after the commanded inputs are back, so its final values stay
        else:
            if sc is not None and k + 1 >= sc.n_steps:
                player.release(k + 1)
            self._ring_push(k + 1, now_ns, plant.time)
        for a in self._writers:
            a.write(k + 1, now_ns)
        return st

    # ------------------------------------------------------------------ waiting
    def _sleep_until(self, target: int, deadline: int) -> bool:
        """Sleep until ``target`` (ns), taking in adapter input that arrives meanwhile while the slack allows.

        Returns True when the sleep ended at ``target`` by its timeout (so
        its overshoot says how late this machine wakes a sleeper).
        """
        mono = time.monotonic_ns
        rem = target - mono()
        if rem <= 0:
            return False
        fds = self._wake_fds
        wakes = 0
        while fds and wakes < 8:  # a few early wake-ups per period at most, then a plain sleep
            readable = select.select(fds, (), (), rem / 1e9)[0]
            if not readable:
                return True
            wakes += 1
            now = mono()
            if deadline - now <= self._service_budget_ns:
                break
            self._pump(deadline - self._service_budget_ns)  # a command arrived: ready for the next tick
            rem = target - mono()
            if rem <= 0:
                return False
        rem = target - mono()
        if rem > 0:
            time.sleep(rem / 1e9)
            return wakes == 0
        return False

    def _wait_sleep(self, deadline: int) -> None:
        self._sleep_until(deadline, deadline)

    def _wait_sleep_spin(self, deadline: int) -> None:
        mono = time.monotonic_ns
        margin = self._spin_margin_ns
        target = deadline - margin
        slept = self._sleep_until(target, deadline)
        if slept and self._adapt_margin:
            # Track the 99th percentile of the sleep's overshoot (stochastic quantile estimate: up
            # 99 steps when above it, down 1 step when below), so that rare stalls move it little;
            # spin that long plus 15 us (which also covers the rehearsal below).
            q = self._overshoot_q
            q = q + 3_960 if mono() - target > q else q - 40
            q = min(max(q, 0), self._margin_max_ns)
            self._overshoot_q = q
            margin = q + 15_000
            self._spin_margin_ns = min(max(margin, self._margin_min_ns), self._margin_max_ns)
        self._rehearse(deadline)
        while mono() < deadline:
            pass

    def _rehearse(self, now_ns: int) -> None:
        """The tick's compiled work on scratch copies: plant step, ring row, telemetry (no state changes)."""
        if self._rehearse_step:
            self.plant.rehearse_step(self._dry_df, self._dry_di, self.dt)
        self._dry_ring_push(self.tick + 1, now_ns, self.plant.time)
        self._dry_record_tick(0, 0, 0, 0, True)

    def _wait_spin(self, deadline: int) -> None:
        mono = time.monotonic_ns
        if self._adapter_rehearsals and deadline - mono() > REHEARSAL_SLACK_NS:
            self._rehearse_adapters()
        while mono() < deadline:
            pass

    def _rehearse_adapters(self) -> None:
        """The adapters' between-tick decoding on scratch data (:meth:`Adapter.rehearse`), in the spin wait.

        At rates where the spin wait is used, a command arrives every hundred ticks or so and its
        decoding, cold by then, cost more than the gap between two ticks (BENCHMARKS.md, "The tick").
        """
        for rehearse in self._adapter_rehearsals:
            try:
                rehearse()
            except Exception:  # a rehearsal must never stop the loop: drop it
                log.exception("rehearsal of an adapter's decoding failed; it is not rehearsed any more")
                self._adapter_rehearsals = [r for r in self._adapter_rehearsals if r != rehearse]
                return

    # ------------------------------------------------------------------ running
    def run(self) -> int:
        """Run until shutdown (Ctrl-C, SIGTERM, a ``shutdown`` request, ``duration_s``); returns the exit code."""
        handlers = self._install_signal_handlers()
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
        if self.reporter is not None:
            self.reporter.warm_up()  # the status (with every adapter's) and the status line
        self._reset_telemetry()

    def _reset_telemetry(self) -> None:
        self.telemetry.reset()
        self.tick_info[TI_OVERRUNS] = 0

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
            self.reset()
            self._reset_telemetry()
            self._restart_pending = False

    def _run_realtime(self) -> None:
        self._begin_running()
        period = self.period_ns
        c = self.telemetry.counters
        hist = self.telemetry.hist
        samples = self.telemetry.samples
        tick_info = self.tick_info
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
                    c[C_MISSED_GRACE] += missed
                else:
                    c[C_OVERRUNS] += 1
                    c[C_WIN_OVERRUNS] += 1
                    tick_info[TI_OVERRUNS] = c[C_OVERRUNS]
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
        self._pump(0)  # the states of the last ticks (a publisher's unfinished burst) go out now

    def _overrun_stop(self) -> None:
        msg = (f"stopped after {self.telemetry.counters[C_OVERRUNS]} overruns "
               f"(overrun_policy = \"stop\", max_overruns = {self.cfg.max_overruns})")
        log.error("%s", msg)
        self.stop()
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
            if self.ring.written - self._pumped_at >= self._pump_every:  # no state is lost to the ring
                self._pump(0)
            if end >= next_service:
                self.telemetry.add_run_time(end - last)
                last = end
                self._service(end, 0)
                next_service = mono() + 1_000_000
        self.telemetry.add_run_time(mono() - last)
        self._pump(0)

    def _idle(self) -> None:
        """Paused, stopped or lockstep: wait for control requests without spinning.

        Up to 20 ms on the adapters' descriptors (:meth:`Adapter.wake_fds`,
        :meth:`Adapter.idle_fds`), unless an adapter says input already waits.
        """
        if not any(pending() for pending in self._idle_pending):
            if self._idle_fds:
                select.select(self._idle_fds, (), (), 0.02)
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
        # states out and commands in first: they are what the clients wait for
        self._pump(deadline - budget if deadline else 0)
        for a in self.adapters:
            if deadline and not force and deadline - mono() < budget:
                return
            try:
                a.poll_control(self.sim_ns() if self.mode != "realtime" else mono())
            except Exception:
                log.exception("adapter %s failed while serving control requests", a.name)
        if deadline and self.player.active is not None:
            self.player.prefetch(self.tick, deadline - mono())
        if now - self._last_events >= 20_000_000 and (not deadline or deadline - mono() >= budget):
            self._last_events = now
            self._collect_events()
            self.watchdog.log_changes()
        if (self.cfg.status_interval_s > 0 and now - self._last_status_window >= self.cfg.status_interval_s * 1e9
                and (not deadline or deadline - mono() >= budget)):
            self._last_status_window = now
            if self.reporter is not None and self.state == RUNNING:
                self.reporter.status_window()
        if (self.cfg.gc_interval_s > 0 and now - self._last_gc >= self.cfg.gc_interval_s * 1e9
                and (not deadline or deadline - mono() >= budget)):
            self._last_gc = now
            gc.collect(1)

    def _pump(self, until_ns: int) -> None:
        """Every adapter's :meth:`~io_adapters.base.Adapter.pump` (states out, commands in), between ticks."""
        for a in self.adapters:
            try:
                a.pump(until_ns)
            except Exception:
                self._pump_failures += 1
                if self._pump_failures <= 10 or self._pump_failures % 1000 == 0:
                    log.exception("adapter %s failed while moving data between ticks (%d failures)", a.name,
                                  self._pump_failures)
        self._pumped_at = self.ring.written

    def _collect_events(self) -> None:
        events = self.plant.new_events()
        if not events:
            return
        self.events_total += len(events)
        for a in self.adapters:
            try:
                a.publish_events(events)
            except Exception:
                log.exception("adapter %s failed to publish events", a.name)


__all__ = ["Loop", "Reporter", "STOPPED", "RUNNING", "PAUSED"]
