"""Waiting for the loop's next deadline: sleep, sleep then spin, or spin, and what is done meanwhile.

* ``sleep``: sleep until the deadline (on the adapters' wake descriptors, so
  input that arrives meanwhile is taken in at once);
* ``sleep_spin``: sleep until a margin before it, then spin; the margin
  adapts to the 99th percentile of this machine's sleep overshoot, and
  :data:`REHEARSE_LEAD_NS` before the deadline the spin rehearses the tick on
  scratch copies (the compiled tick's own call on a scratch plan, which also
  reads the tick's stages' memory and the state ring's next row; the
  plant's step and the ring row for the Python stepper), so that a tick
  after a sleep finds its code and data in the caches (BENCHMARKS.md, "The
  tick", "The tick after a sleep");
* ``spin``: spin (rates of several kHz), first rehearsing the adapters'
  decoding on scratch data when the slack allows.
"""

from __future__ import annotations

import functools
import logging
import select
import time
from typing import Callable

import numpy as np

from plant_models.run.ring import StateRing, ring_push
from plant_models.plant import Plant

from server.realtime.telemetry import Telemetry, record_tick

# The spin wait rehearses the adapters' decoding (about 10 us) only with at least this much time to the deadline.
REHEARSAL_SLACK_NS = 30_000
# The sleep_spin wait rehearses the tick this long before its deadline (after spinning to it): early enough that the
# rehearsal (a few us, more on a loaded host) ends before the deadline, late enough that nothing else runs
# between it and the tick (BENCHMARKS.md, "The tick after a sleep").
REHEARSE_LEAD_NS = 30_000

log = logging.getLogger("gearbox_hil.loop")


class Waiter:
    """The wait strategy of one loop (``[loop] wait``) with its spin margin and rehearsal scratch.

    Parameters
    ----------
    loop
        The :class:`server.realtime.loop.Loop` (its ``plant``, ``tick``, ``dt``,
        ``tick_info`` and ``cfg`` are read).
    pump
        ``pump(until_ns)``: the adapters' pumps, called when input arrives
        during a sleep.
    service_budget_ns
        Slack a pump needs before the deadline.

    Attributes
    ----------
    wait
        ``wait(deadline_ns)``: the configured strategy.  Called in the real-time loop.
    wake_fds, adapter_rehearsals
        The adapters' wake descriptors and rehearse methods (set when they open).
    """

    def __init__(self, loop, pump: Callable[[int], None], service_budget_ns: int):
        self._loop = loop
        self._pump = pump
        self._budget_ns = service_budget_ns
        plant, cfg = loop.plant, loop.cfg
        # (the step is rehearsed only for a compiled plant whose step is the standard call on its buffers: its
        # state is all in them)
        self._rehearse_step = plant.rehearsable
        self._dry_df = np.empty_like(plant.df)
        self._dry_di = np.empty_like(plant.di)
        dry_ring = StateRing.for_plant(plant, 4)
        self._dry_ring_push = functools.partial(ring_push, dry_ring.head, dry_ring.ints, dry_ring.floats,
                                                loop.tick_info.copy(), self._dry_df)
        scratch = Telemetry(cfg.period_ns, 1)
        self._dry_record_tick = functools.partial(record_tick, scratch.counters, scratch.hist, scratch.samples)
        self.wait = {"sleep": self._wait_sleep, "sleep_spin": self._wait_sleep_spin,
                     "spin": self._wait_spin}[cfg.wait]
        self._spin_margin_ns = int(cfg.spin_margin_us * 1000)
        self._adapt_margin = cfg.spin_margin_adapt
        self._margin_min_ns = 20_000
        # At most half a period: a margin near the period is a pure spin, which under SCHED_FIFO triggers
        # the kernel's real-time throttling.
        self._margin_max_ns = max(min(self._spin_margin_ns, cfg.period_ns // 2), self._margin_min_ns)
        if self._adapt_margin:
            self._spin_margin_ns = self._margin_max_ns
        self._overshoot_q = self._spin_margin_ns
        self.wake_fds: list[int] = []
        self.adapter_rehearsals: list = []
        # the sleep_spin wait's rehearsal: "tick" (the compiled tick's own call on scratch copies; the step's
        # and the ring row's without it), "step" (the step's and the ring row's), "none"; made this long before
        # the deadline (0: as soon as the sleep ends)
        self.rehearsal = "tick"
        self.rehearse_lead_ns = REHEARSE_LEAD_NS

    @property
    def spin_margin_us(self) -> float:
        """How long before a deadline the sleep_spin wait stops sleeping (adapted to the machine), us."""
        return self._spin_margin_ns / 1000.0

    def sleep_until(self, target: int, deadline: int) -> bool:
        """Sleep until ``target`` (ns), taking in adapter input that arrives meanwhile while the slack allows.

        Returns True when the sleep ended at ``target`` by its timeout (so
        its overshoot says how late this machine wakes a sleeper).
        """
        mono = time.monotonic_ns
        rem = target - mono()
        if rem <= 0:
            return False
        fds = self.wake_fds
        wakes = 0
        while fds and wakes < 8:  # a few early wake-ups per period at most, then a plain sleep
            readable = select.select(fds, (), (), rem / 1e9)[0]
            if not readable:
                return True
            wakes += 1
            now = mono()
            if deadline - now <= self._budget_ns:
                break
            self._pump(deadline - self._budget_ns)  # a command arrived: ready for the next tick
            rem = target - mono()
            if rem <= 0:
                return False
        rem = target - mono()
        if rem > 0:
            time.sleep(rem / 1e9)
            return wakes == 0
        return False

    def _wait_sleep(self, deadline: int) -> None:
        self.sleep_until(deadline, deadline)

    def _wait_sleep_spin(self, deadline: int) -> None:
        mono = time.monotonic_ns
        margin = self._spin_margin_ns
        target = deadline - margin
        slept = self.sleep_until(target, deadline)
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
        lead = self.rehearse_lead_ns
        if lead:
            at = deadline - lead
            while mono() < at:
                pass
        self._rehearse(deadline)
        while mono() < deadline:
            pass

    def _rehearse(self, now_ns: int) -> None:
        """The tick's work on scratch copies (no state changes): with the compiled tick, its own call on a scratch
        plan (:attr:`plant_models.run.compiled.CompiledTick.rehearse`), else the plant's step and the ring row;
        then the telemetry's."""
        loop = self._loop
        how = self.rehearsal
        if how == "tick" and loop.compiled_tick is not None:
            loop.compiled_tick.rehearse(loop.tick, now_ns, loop.dt)
        elif how != "none":
            if self._rehearse_step:
                loop.plant.rehearse_step(self._dry_df, self._dry_di, loop.dt)
            self._dry_ring_push(loop.tick + 1, now_ns, loop.plant.time)
        self._dry_record_tick(0, 0, 0, 0, True)

    def _wait_spin(self, deadline: int) -> None:
        mono = time.monotonic_ns
        if self.adapter_rehearsals and deadline - mono() > REHEARSAL_SLACK_NS:
            self._rehearse_adapters()
        while mono() < deadline:
            pass

    def _rehearse_adapters(self) -> None:
        """The adapters' between-tick decoding on scratch data (:meth:`Adapter.rehearse`), in the spin wait.

        At rates where the spin wait is used, a command arrives every hundred ticks or so and its
        decoding, cold by then, cost more than the gap between two ticks (BENCHMARKS.md, "The tick").
        """
        for rehearse in self.adapter_rehearsals:
            try:
                rehearse()
            except Exception:  # a rehearsal must never stop the loop: drop it
                log.exception("rehearsal of an adapter's decoding failed; it is not rehearsed any more")
                self.adapter_rehearsals = [r for r in self.adapter_rehearsals if r != rehearse]
                return


__all__ = ["Waiter", "REHEARSAL_SLACK_NS", "REHEARSE_LEAD_NS"]
