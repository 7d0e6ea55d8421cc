"""A fault schedule: faults switched on and off at given steps of a run, between two steps, as in the tick.

The server switches a fault between two ticks when a ``fault_set`` or
``fault_clear`` request arrives; a run without a server does the same with
a :class:`FaultSchedule`: the faults of a test file (``at``/``until``, s)
become the steps before which they are switched, and the run pipeline's
``switch`` stage (:meth:`FaultSchedule.switch`) makes them before the
step's inputs; the fault stages (:meth:`FaultSchedule.stages`, the fault
set's) then act around the step exactly as in the tick.  A fault switched at
step k is switched by a lockstep run before its tick k (the test bench's
fault clock uses the same rule, :func:`switch_step`), so the offline run and
the lockstep run with the same faults give the same outputs bit for bit.
Clutch faults need nothing per step: their overlay is in the plant's model
floats from the switch on.

The schedule switches faults of a fault set (a
:class:`~plant_models.run.faults.FaultStage` that sets and clears parsed
faults: :class:`server.realtime.faults.FaultSet`, whose
:class:`server.realtime.fault_schedule.FaultSchedule` parses a test file's
fault maps into one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .faults import FaultStage


def switch_step(t_s: float, dt: float) -> int:
    """The first step k whose start k * dt is at or past ``t_s`` within half a step (``t_s <= k dt + dt / 2``).

    The rule of the test bench's fault clock in lockstep (a switch due
    before tick k is made between ticks k - 1 and k), evaluated with the
    same float expression, so offline and lockstep switch at the same tick.
    """
    eps = 0.5 * dt
    k = max(0, int(t_s / dt) - 1)
    while k > 0 and t_s <= (k - 1) * dt + eps:
        k -= 1
    while not t_s <= k * dt + eps:
        k += 1
    return k


@dataclass(frozen=True)
class Switch:
    """One switch of a schedule: fault number ``index`` set (``on``) or cleared before step ``step``."""

    step: int
    on: bool
    index: int


def schedule_switches(faults: Sequence[tuple[dict, float, float | None]], dt: float) -> list[Switch]:
    """The switches of ``(fault, at_s, until_s)`` entries at step ``dt``, in the order they are made.

    The test bench's fault clock's order: by time, at one time clears
    before sets, else the schedule's order.  A lockstep runner makes them
    before the ticks named (``fault_set`` / ``fault_clear``), an offline run
    through :class:`FaultSchedule`.
    """
    sets, clears = [], []
    for j, (_, at, until) in enumerate(faults):
        sets.append((float(at), 1, j))
        if until is not None:
            clears.append((float(until), 0, j))
    ev = sorted(sets + clears, key=lambda e: (e[0], e[1]))
    return [Switch(switch_step(t, dt), bool(on), j) for t, on, j in ev]


class FaultSchedule:
    """Faults switched on and off at given times, applied to one plant's run step by step.

    Parameters
    ----------
    fault_set
        The plant's fault set, with no fault active (the faults go into its
        tables and the plant's clutch overlays).
    specs
        The faults, each what ``fault_set.set`` takes (parsed).
    faults
        ``(fault, at_s, until_s)`` each: the map of each spec (for the log),
        its switch-on time and its switch-off time (None: until the end), s.
    dt
        The run's step, s.
    log
        If given, a line is appended per switch (the test bench's log).

    Attributes
    ----------
    n_signal
        The signal-table rows in use now (0: the fault stages call nothing).
    switches
        The :class:`Switch` es in the order they are made (by time; at one time, clears before sets).
    fi, ff
        The fault set's tables, for a compiled run that calls the fault
        stages' compiled forms on them in its loop
        (:mod:`plant_models.run.fault_tables`, :class:`plant_models.closed_loop.StagedRun`).
    """

    def __init__(self, fault_set: FaultStage, specs: Sequence, faults: Sequence[tuple[dict, float, float | None]],
                 dt: float, log: list[str] | None = None):
        self.plant = fault_set.plant
        self.dt = float(dt)
        self.specs = list(specs)
        self.maps = [dict(f) for f, _, _ in faults]
        self.switches = schedule_switches(faults, self.dt)
        self.log = log
        self.set = fault_set
        self._pos = 0
        self._due = self._next_due()
        self._names: dict[int, str] = {}
        # for a compiled run's loop (plant_models.closed_loop.StagedRun): the tables its fault stages act on
        self.fi, self.ff = fault_set.fi, fault_set.ff

    def stages(self) -> dict:
        """The pipeline's ``switch`` stage and the fault set's three stages, by stage name."""
        return dict(self.set.stages(), switch=self.switch)

    @property
    def n_signal(self) -> int:
        return self.set.n_signal

    @property
    def next_step(self) -> int | None:
        """The step before which the next switch is due (None: no more switches)."""
        return self.switches[self._pos].step if self._pos < len(self.switches) else None

    def _next_due(self) -> float:
        return self.switches[self._pos].step if self._pos < len(self.switches) else float("inf")

    def switch(self, k: int) -> None:
        """Stage ``switch``: make the switches due before step ``k`` (a no-op when none is due)."""
        if k < self._due:
            return
        while self._pos < len(self.switches) and self.switches[self._pos].step <= k:
            sw = self.switches[self._pos]
            self._pos += 1
            if sw.on:
                self._names[sw.index] = self.set.set(self.specs[sw.index]).name
            elif sw.index in self._names:
                self.set.clear(self._names.pop(sw.index))
            if self.log is not None:
                self.log.append(f"t = {k * self.dt:.6g} s: fault {'set' if sw.on else 'cleared'} "
                                f"faults[{sw.index}] {self.maps[sw.index]}")
        self._due = self._next_due()

    def reset(self) -> None:
        """Clear every fault and start the schedule over (after the plant's reset)."""
        if self.set.active:
            self.set.clear()
        self._pos = 0
        self._due = self._next_due()
        self._names.clear()


__all__ = ["FaultSchedule", "Switch", "schedule_switches", "switch_step"]
