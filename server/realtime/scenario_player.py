"""Scenario playback in the server: a loaded scenario drives the plant's inputs, tick by tick.

A scenario loaded with the ``load_scenario`` control request replaces the
commands: from the loop's next reset, each tick's ``inputs`` stage applies
the scenario's inputs of that step (:meth:`CompiledScenario.apply`), exactly
as ``gearbox-hil simulate`` does, so a lockstep run equals the offline run bit
for bit.  When its last step is done the player *releases* it: the inputs
hold the scenario's final values (rate 0), and commands take over.  The
scenario stays loaded, so a reset plays it again from t = 0, until
``unload_scenario``.

Life cycle, each step called between ticks unless marked otherwise:

* :meth:`ScenarioPlayer.load` (a control request), then the loop's reset,
  which calls :meth:`ScenarioPlayer.rewind`;
* per tick, by the loop: :meth:`ScenarioPlayer.swap` when a prefetched
  block is due, :meth:`ScenarioPlayer.release` after the last step;
* :meth:`ScenarioPlayer.prefetch`: in realtime, the loop offers its slack
  before a deadline, so the tick never fills an input table itself (about
  1 ms every 4096 steps);
* :meth:`ScenarioPlayer.unload` (a control request).

The player sets ``tick_info[TI_SCENARIO]`` while a scenario drives the
inputs, so adapters reject commands meanwhile (reason ``scenario_active``).
"""

from __future__ import annotations

import time

import numpy as np
from numba import carray, cfunc

from io_adapters.base import TI_SCENARIO
from plant_models.contract.columns import Columns
from plant_models.plant import Plant
from plant_models.run.compiled import STAGE_SIGNATURE, CompiledStage, f64_at, i64_at

from server.offline.scenario import BLOCK, CompiledScenario
from server.realtime.watchdog import CommandWatchdog


# the player's state for the compiled tick: an int64 array kept in step with the player (ScenarioPlayer._sync)
PLAYER_SLOTS = Columns("the scenario player's state for the compiled tick (int64)", (
    ("S_ACTIVE", "0: no scenario drives the inputs; 1, 2: the first or second compiled copy does"),
    ("S_SWAP_AT", "the player's swap_at"),
    ("S_N_STEPS", "the scenario's steps"),
), count="N_S")
globals().update(PLAYER_SLOTS.constants())  # S_ACTIVE, S_SWAP_AT, S_N_STEPS; N_S


@cfunc(STAGE_SIGNATURE, cache=True)
def scenario_gate(ctx, k, now_ns, dt, carry):
    """Whether tick k, while a scenario drives the inputs, needs the Python stepper (non-zero): no copy is
    active, the prefetched block takes over (``swap_at``), the scenario ends in this tick (its release), the
    active copy's table does not hold step k, or the loop's step is not the scenario's.

    ``ctx``: [state (``S_*``), first copy's block start, second copy's block start, the scenario's step (a
    float64)] (:meth:`ScenarioPlayer.compiled_stages`).  Called in the real-time loop.
    """
    state = i64_at(ctx[0])
    active = state[S_ACTIVE]  # noqa: F821
    if active == 0 or k == state[S_SWAP_AT] or k + 1 >= state[S_N_STEPS] or f64_at(ctx[3])[0] != dt:  # noqa: F821
        return 1
    k0 = i64_at(ctx[active])[0]
    return 0 if k0 <= k < k0 + BLOCK else 1


@cfunc(STAGE_SIGNATURE, cache=True)
def scenario_stage(ctx, k, now_ns, dt, carry):
    """Stage ``inputs`` while a scenario drives them: row k of the active copy's table into the inputs and
    their rates (what :meth:`CompiledScenario.apply` copies; :func:`scenario_gate` passed the tick).

    ``ctx``: [state, first copy's block start, its values, its rates, the second copy's three, u, u_rate,
    inputs, tick_info].  Called in the real-time loop.
    """
    active = i64_at(ctx[0])[S_ACTIVE]  # noqa: F821
    if active == 0 or i64_at(ctx[10])[TI_SCENARIO] == 0:
        return 0
    at = 1 + 3 * (active - 1)
    n = ctx[9]
    j = k - i64_at(ctx[at])[0]
    values = carray(f64_at(ctx[at + 1]), (BLOCK, n))
    rates = carray(f64_at(ctx[at + 2]), (BLOCK, n))
    u, u_rate = f64_at(ctx[7]), f64_at(ctx[8])
    for i in range(n):
        u[i] = values[j, i]
        u_rate[i] = rates[j, i]
    return 0


class ScenarioPlayer:
    """Owns the loaded scenario of one loop and plays it into the plant's inputs.

    Parameters
    ----------
    plant
        The plant whose inputs the scenario drives.
    watchdog
        The command watchdog; disarmed whenever the scenario hands the inputs
        back, so that it arms again with the first command.
    tick_info
        The loop's per-tick flags shared with the adapters (``TI_SCENARIO``
        is written here).
    """

    def __init__(self, plant: Plant, watchdog: CommandWatchdog, tick_info: np.ndarray):
        self.plant = plant
        self.watchdog = watchdog
        self.tick_info = tick_info
        self.active: CompiledScenario | None = None  # driving the inputs now
        self.loaded: CompiledScenario | None = None  # kept after it finished, so that a reset replays it
        self.info: dict | None = None  # what status and load_scenario report about the loaded scenario
        self.swap_at = -1  # tick at which the prefetched spare takes over; -1: none due
        self.prefetches = 0  # table blocks filled between ticks
        # A second compiled copy of the loaded scenario, whose input table is filled for the next block
        # between ticks; at the block boundary the two swap places.
        self._spare: CompiledScenario | None = None
        self._pair: tuple[CompiledScenario | None, CompiledScenario | None] = (None, None)
        self._prefetch_ns = 0  # slack a prefetch needs, ns (refined by every measured prefetch)
        self._in_lo = np.array([s.lo for s in plant.inputs], dtype=float)
        self._in_hi = np.array([s.hi for s in plant.inputs], dtype=float)
        self.state = np.zeros(N_S, dtype=np.int64)  # noqa: F821 S_*: the player as the compiled tick reads it
        self._dt = np.zeros(1)  # the loaded scenario's step, s
        self.on_change = lambda: None  # the loaded pair changed: the loop builds its compiled tick again

    def _sync(self) -> None:
        """Keep :attr:`state` in step with the player (after every change of ``active`` or ``swap_at``)."""
        a = self.active
        st = self.state
        st[S_ACTIVE] = 0 if a is None else (1 if a is self._pair[0] else 2)  # noqa: F821
        st[S_SWAP_AT] = self.swap_at  # noqa: F821
        st[S_N_STEPS] = a.n_steps if a is not None else 0  # noqa: F821

    def compiled_stages(self, u: np.ndarray, u_rate: np.ndarray,
                        tick_info: np.ndarray) -> tuple[CompiledStage, CompiledStage] | None:
        """The compiled tick's gate and ``inputs`` stage for the loaded scenario (:func:`scenario_gate`,
        :func:`scenario_stage`); None without one.  Between ticks."""
        first, second = self._pair
        if first is None or second is None:
            return None
        k0 = (first.k0_slot, second.k0_slot)
        gate = CompiledStage.of("inputs", scenario_gate, (self.state, k0[0], k0[1], self._dt))
        stage = CompiledStage.of("inputs", scenario_stage, (
            self.state, k0[0], first._U, first._R, k0[1], second._U, second._R, u, u_rate, u.shape[0], tick_info))
        return gate, stage

    # ------------------------------------------------------------------ between ticks
    def load(self, compiled: CompiledScenario, spare: CompiledScenario, period_ns: int) -> None:
        """Load ``compiled`` (``spare``: an identical copy used for prefetching); it plays from the next rewind.

        ``period_ns`` is the loop's period, the first guess of the slack a
        prefetch needs.  The caller resets the loop next.
        """
        sc = compiled.scenario
        self.loaded = compiled
        self._pair = (compiled, spare)
        self._prefetch_ns = period_ns // 2
        self._dt[0] = compiled.dt
        self.on_change()
        self.info = {"source": sc.source, "description": sc.description, "n_steps": compiled.n_steps,
                     "dt_s": compiled.dt, "duration_s": sc.duration, "finished": False}

    def rewind(self) -> dict[str, float] | None:
        """Back to t = 0 (part of the loop's reset): the plant's initial inputs by name, or None without a scenario."""
        self.swap_at = -1
        if self.loaded is None:
            self._sync()
            return None
        self.active = self.loaded
        self._spare = self._pair[1]
        self.tick_info[TI_SCENARIO] = 1
        if self.info is not None:
            self.info["finished"] = False
            self.info.pop("finished_at_tick", None)
        initial = self.active.initial_inputs()
        self._sync()
        return initial

    def prefetch(self, tick: int, slack_ns: int) -> None:
        """Fill the spare's input table for the block after ``tick``'s, if one is due and ``slack_ns`` suffices."""
        if self._spare is None or self.active is None or self.swap_at >= 0 or slack_ns < self._prefetch_ns:
            return
        nxt = (tick // BLOCK + 1) * BLOCK
        if nxt >= self.active.n_steps:
            return
        t0 = time.monotonic_ns()
        self._spare.inputs_at(nxt)
        took = time.monotonic_ns() - t0
        self._prefetch_ns = max(self._prefetch_ns // 2, took + took // 2)
        self.swap_at = nxt
        self.prefetches += 1
        self._sync()

    def unload(self) -> None:
        """Forget the scenario; commands drive the inputs from here, starting from where it left them."""
        self.active = None
        self.loaded = None
        self._spare = None
        self._pair = (None, None)
        self.swap_at = -1
        self.info = None
        self._hand_inputs_to_commands()
        self._sync()
        self.on_change()

    def snapshot_state(self) -> dict | None:
        """Which scenario is loaded and whether it still drives the inputs (None: none loaded); its position is
        the loop's tick."""
        sc = self.loaded
        if sc is None:
            return None
        info = self.info or {}
        return {"source": sc.scenario.source, "n_steps": sc.n_steps, "dt_s": sc.dt, "active": self.active is not None,
                "finished": bool(info.get("finished")), "finished_at_tick": info.get("finished_at_tick")}

    def check_state(self, want: dict | None) -> None:
        """Raise ``SnapshotError`` unless ``want`` (a :meth:`snapshot_state`) names the scenario loaded now."""
        from plant_models.errors import SnapshotError

        have = self.loaded
        if (want is None) != (have is None) or (want is not None and (
                want["source"] != have.scenario.source or want["n_steps"] != have.n_steps
                or want["dt_s"] != have.dt)):
            raise SnapshotError("the snapshot was taken with " + (f"scenario {want['source']} loaded" if want else
                                "no scenario loaded") + ", the server has " +
                                (f"scenario {have.scenario.source} loaded" if have else "none loaded"))

    def restore_state(self, position: dict | None, tick: int) -> None:
        """Continue the loaded scenario at ``tick`` (a snapshot's restore); ``position`` a checked :meth:`snapshot_state`.

        The input tables are filled for the block of ``tick`` on demand (as at
        any block boundary), so the inputs of every later step are those of
        an uninterrupted run.
        """
        self.swap_at = -1
        self._sync()
        if self.loaded is None or position is None:
            return
        self._spare = self._pair[1]
        if position["active"]:
            self.active = self.loaded
            self.tick_info[TI_SCENARIO] = 1
        else:
            self.active = None
            self.tick_info[TI_SCENARIO] = 0
        if self.info is not None:
            self.info["finished"] = bool(position["finished"])
            self.info.pop("finished_at_tick", None)
            if position.get("finished_at_tick") is not None:
                self.info["finished_at_tick"] = position["finished_at_tick"]
        self._sync()

    # ------------------------------------------------------------------ in the tick
    def swap(self) -> None:
        """The prefetched block is due: the spare becomes the active copy.  Called in the real-time loop."""
        self.active, self._spare = self._spare, self.active
        self.swap_at = -1
        self._sync()

    def release(self, tick: int) -> None:
        """The last step is done: hold the final values (rate 0) and let commands take over.

        ``tick`` is the loop's tick count, reported as ``finished_at_tick``.
        Called in the real-time loop.
        """
        sc = self.active
        sc.apply(self.plant, sc.n_steps)  # the value at the end time (scenarios hold their last value)
        self.active = None
        if self.info is not None:
            self.info["finished"] = True
            self.info["finished_at_tick"] = tick
        self._hand_inputs_to_commands()
        self._sync()

    def _hand_inputs_to_commands(self) -> None:
        """Inputs held still inside their declared ranges, commands accepted again, the watchdog disarmed."""
        self.plant.u_rate[:] = 0.0
        np.clip(self.plant.u, self._in_lo, self._in_hi, out=self.plant.u)
        self.tick_info[TI_SCENARIO] = 0
        self.watchdog.reset()


__all__ = ["ScenarioPlayer"]
