"""The tick's fault stage as a step of any run: a fault schedule switched between steps, offline as in the loop.

The real-time loop's tick is: the scenario's inputs, :func:`fault_inputs`
(the faulted inputs), the plant step, then the faulted outputs, the state
row and the commanded inputs back (:func:`fault_push`); a ``fault_set`` or
``fault_clear`` request changes the tables between two ticks.  An offline
run does the same with a :class:`FaultSchedule`: the faults of a test file
(``at``/``until``, s) become the steps at which they are switched, and the
run calls, around each of its steps::

    faults.switch(k)           # between steps: the faults due at step k set or cleared
    n = faults.n_signal
    (scenario inputs of step k)
    if n: faults.inputs(n)     # fault_inputs, as in the tick
    plant.step(dt)
    if n: faults.outputs(n)    # fault_outputs: what the faulty sensors report
    (keep the outputs)
    if n: faults.restore(n)    # fault_restore: the commanded inputs back

which is :func:`fault_push` with the row kept by the run instead of the
state ring (so no ring is needed offline: :class:`FaultSet` without one).
A fault switched at step k is switched by a lockstep run before its tick k
(:class:`server.testbench.runner.FaultClock` uses the same rule,
:func:`switch_step`), so the offline run and the lockstep run with the same
faults give the same outputs bit for bit.  Clutch faults need nothing per
step: their overlay is in the plant's model floats from the switch on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from plant_models.errors import FaultError
from plant_models.plant import Plant

from server.realtime.fault_tables import fault_inputs, fault_outputs, fault_restore
from server.realtime.faults import FaultSet, FaultSpec, parse_fault


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
    plant
        The plant of the run (its faults go into this plant's tables and
        clutch overlays).
    faults
        ``(fault, at_s, until_s)`` each: a fault map of ``docs/faults.md``
        (signal or clutch; a transport fault needs a server), its switch-on
        time and its switch-off time (None: until the end), s.
    dt
        The run's step, s.
    log
        If given, a line is appended per switch (the test bench's log).

    Attributes
    ----------
    n_signal
        The signal-table rows in use now (0: the step calls no fault function).
    switches
        The :class:`Switch` es in the order they are made (by time; at one time, clears before sets).
    fi, ff, stage
        The fault set's tables and ``(fault_inputs, fault_outputs,
        fault_restore)``, for a compiled run that calls them in its loop
        (:class:`plant_models.closed_loop.StagedRun`).
    """

    def __init__(self, plant: Plant, faults: Iterable[tuple[dict, float, float | None]], dt: float,
                 log: list[str] | None = None):
        self.plant = plant
        self.dt = float(dt)
        self.specs: list[FaultSpec] = []
        self.maps: list[dict] = []
        faults = list(faults)
        for j, (fault, at, until) in enumerate(faults):
            spec = parse_fault(dict(fault), plant, f"faults[{j}]")
            if spec.transport is not None:
                raise FaultError(f"faults[{j}]: a {spec.target} fault acts on a transport, which a run without "
                                 "a server does not have (run it in lockstep or realtime mode)")
            self.specs.append(spec)
            self.maps.append(dict(fault))
        self.switches = schedule_switches(faults, self.dt)
        self.log = log
        self.set = FaultSet(plant)  # no ring: the run keeps the rows itself
        self._pos = 0
        self._names: dict[int, str] = {}
        fs = self.set
        self.outputs = lambda n: fault_outputs(fs.fi, fs.ff, plant.df, n)
        self.restore = lambda n: fault_restore(fs.fi, fs.ff, plant.df, n)
        # for a compiled run's loop (plant_models.closed_loop.StagedRun): the tables and the three functions
        self.fi, self.ff = fs.fi, fs.ff
        self.stage = (fault_inputs, fault_outputs, fault_restore)

    @property
    def n_signal(self) -> int:
        return self.set.n_signal

    def inputs(self, n: int) -> None:
        """:func:`fault_inputs` with this schedule's tables (after the step's inputs are written)."""
        fault_inputs(self.set.fi, self.set.ff, self.plant.df, n)

    @property
    def next_step(self) -> int | None:
        """The step before which the next switch is due (None: no more switches)."""
        return self.switches[self._pos].step if self._pos < len(self.switches) else None

    def switch(self, k: int) -> None:
        """Make the switches due before step ``k`` (between steps; a no-op when none is due)."""
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

    def reset(self) -> None:
        """Clear every fault and start the schedule over (after the plant's reset)."""
        if self.set.active:
            self.set.clear()
        self._pos = 0
        self._names.clear()


__all__ = ["FaultSchedule", "Switch", "schedule_switches", "switch_step"]
