"""What the loop does between ticks, in the slack before a deadline, and while it idles.

The adapters' pumps first (states out, commands in: what the clients wait
for), then control requests, the next scenario block's prefetch, plant
events, the status window and a young-generation garbage collection, each
only while the slack allows; while paused, stopped or in lockstep, a wait
on the adapters' descriptors between these rounds.
"""

from __future__ import annotations

import gc
import logging
import select
import time
from typing import Protocol

from io_adapters.base import Adapter

log = logging.getLogger("gearbox_hil.loop")


class Reporter(Protocol):
    """What the loop calls to report its status between ticks (implemented by :class:`server.status.StatusReport`)."""

    def warm_up(self) -> None:
        """Run the reporting code paths once before the first deadline (changes nothing)."""

    def status_window(self) -> None:
        """A status window ended while running: close it and show the status line."""


class Housekeeping:
    """The between-tick work of one :class:`server.loop.Loop` (its adapters, player, watchdog, reporter).

    Attributes
    ----------
    last_service
        When :meth:`serve` last ran, ns (the realtime loop serves at least
        every 50 ms, slack or not).
    """

    def __init__(self, loop):
        self._loop = loop
        self.last_service = 0
        self._last_status_window = 0
        self._last_gc = 0
        self._last_events = 0
        self._idle_fds: list[int] = []  # what idle() waits on: the adapters' wake_fds and idle_fds
        self._idle_pending: list = []  # adapters' idle_pending methods (those that have one)

    def adapters_opened(self, adapters, wake_fds: list[int]) -> None:
        """What to wait on while idle, once the adapters are open."""
        self._idle_fds = list(wake_fds) + [fd for a in adapters for fd in a.idle_fds()]
        self._idle_pending = [a.idle_pending for a in adapters if type(a).idle_pending is not Adapter.idle_pending]

    def idle(self) -> None:
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
        self.serve(now, 0)

    def serve(self, now: int, deadline: int, force: bool = False) -> None:
        """Housekeeping between ticks, each item only while the slack allows (deadline 0: no deadline).

        ``force`` serves the adapters once even without slack (an overrun is then counted).
        """
        lp = self._loop
        budget = lp.service_budget_ns
        mono = time.monotonic_ns
        self.last_service = now
        # states out and commands in first: they are what the clients wait for
        lp._pump(deadline - budget if deadline else 0)
        for a in lp.adapters:
            if deadline and not force and deadline - mono() < budget:
                return
            try:
                a.poll_control(lp.sim_ns() if lp.mode != "realtime" else mono())
            except Exception:
                log.exception("adapter %s failed while serving control requests", a.name)
        if deadline and lp.player.active is not None:
            lp.player.prefetch(lp.tick, deadline - mono())
        if now - self._last_events >= 20_000_000 and (not deadline or deadline - mono() >= budget):
            self._last_events = now
            self.collect_events()
            lp.watchdog.log_changes()
        cfg = lp.cfg
        if (cfg.status_interval_s > 0 and now - self._last_status_window >= cfg.status_interval_s * 1e9
                and (not deadline or deadline - mono() >= budget)):
            self._last_status_window = now
            if lp.reporter is not None and lp.running:
                lp.reporter.status_window()
        if (cfg.gc_interval_s > 0 and now - self._last_gc >= cfg.gc_interval_s * 1e9
                and (not deadline or deadline - mono() >= budget)):
            self._last_gc = now
            gc.collect(1)

    def collect_events(self) -> None:
        """The plant's new events to every adapter (publish_events), counted in the loop's ``events_total``."""
        lp = self._loop
        events = lp.plant.new_events()
        if not events:
            return
        lp.events_total += len(events)
        for a in lp.adapters:
            try:
                a.publish_events(events)
            except Exception:
                log.exception("adapter %s failed to publish events", a.name)


__all__ = ["Housekeeping", "Reporter"]
