"""The compiled offline run: the stage list's compiled forms, looped over n steps in one compiled call.

The real-time tick runs the stages' compiled forms around the plant's step
once per tick (:func:`plant_models.run.compiled.tick_run`).  An offline run
(``gearbox-hil simulate``, a campaign's runs, the closed loop, a run with a
fault schedule) takes the same stages around the same step for a whole
chunk of steps: :func:`run_compiled` is that loop, one fixed compiled
function kept in numba's cache for every configuration (nothing is
generated per configuration).  Its plan has the layout of
:func:`~plant_models.run.compiled.tick_run`'s (the step's address, the
plant's four buffers, the stages as (address, ctx) pairs in the order of
:data:`plant_models.run.stages.STAGES`, before the step then after it), and
the stages follow the protocol of :mod:`plant_models.run.compiled`
(:data:`~plant_models.run.compiled.STAGE_SIGNATURE`).  So a stage with a
compiled form is one implementation for the real-time tick and the
offline run, and a stage declared in the list with a compiled form
(:attr:`~plant_models.run.stages.Stage.make_compiled`) is in every
compiled offline run and in the real-time compiled tick without an edit of
any run, in the order of :func:`plant_models.run.stages.compiled_order`
(one rule for both).

What the offline loop adds to the tick's:

* the **room** check before every step: the call ends before step k,
  having changed nothing, when the int64 word at ``O_ROOM_AT`` is above
  ``O_ROOM_LIMIT`` (the events collected, with less room left in the event
  arrays than the plant's ring holds: the caller grows them and calls
  again); a compare, not a call, at every step;
* the plant's **run hints** (:attr:`CompiledPlant.run_hints_slot`) are
  written between the stages before the step and the step: the outputs of
  the step are unread unless a kept row, a controller call, the call's last
  step or a stage that says so (:data:`READS` in its return word) reads
  them; the inputs are the previous step's when no stage before the step
  returned :data:`CHANGED`.  The plan says which steps a row or a
  controller reads (``O_EVERY``, ``O_LAST``, ``O_PERIOD``), the rule the
  row and controller stages apply themselves;
* the steps' status words are OR-ed into the int64 word at ``O_STATUS_AT``.

``now_ns`` is 0 for every stage of an offline run (it has no clock).

**Fused loops.**  The stage sequence most runs have (the open loop's: the
input table's ``inputs`` before the step, ``events`` and ``row`` after
it) also has a loop of its own, registered by the module of those stages
(:func:`register_fused`, :func:`plant_models.offline_stages.run_table_events_row`):
the same plan, the same stage bodies called directly (inlined) instead of
through their addresses, the same order.  :class:`OfflinePlan` picks it
when the stages :func:`~plant_models.run.stages.compiled_order` gives are
exactly that sequence (so a stage planted in the list, or a fault stage,
sends the run through :func:`run_compiled`); tests/test_offline_fused.py
shows both loops give the same rows, events, counters and plant state bit
for bit.  Both are fixed functions in numba's cache: nothing is generated
per configuration.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from numba import carray, njit

from ..core.api import JIT, L, call_step_at
from ..contract.columns import Columns
from . import stages as _stages
from .compiled import (CHANGED, MAX_STAGES, P_BUFFERS, P_N_AFTER, P_N_BEFORE, P_STAGES, P_STEP_AT, READS,
                       CompiledStage, address, call_stage_at, f64_at, i64_at)


# what a compiled offline run carries from one call to the next: an int64 array ``acc`` (its stages write it,
# plant_models.offline_stages; acc[ACC_STATUS] is the plan's status word, acc[ACC_EVENTS] its room word)
ACCOUNTS = Columns("what a compiled offline run carries from one call to the next (int64)", (
    ("ACC_ROWS", "output rows written"),
    ("ACC_EV_READ", "the plant's event count read so far"),
    ("ACC_EVENTS", "events collected"),
    ("ACC_LOST", "events overwritten in the ring before they were read"),
    ("ACC_STATUS", "OR of every step's status word"),
), count="ACC_LEN")
globals().update(ACCOUNTS.constants())  # ACC_ROWS .. ACC_STATUS; ACC_LEN

# the offline run's slots of the plan, after the tick's layout
OFFLINE_PLAN = Columns("the offline run's slots of the plan (int64), after the tick's", (
    ("O_HINTS", "index in di of the plant's run-hints word, -1: none"),
    ("O_EVERY", "a row is kept after every N-th step (k + 1 a multiple of N) ..."),
    ("O_LAST", "... and after this step count (the run's last)"),
    ("O_PERIOD", "a controller reads the outputs after every N-th step, 0: none"),
    ("O_STATUS_AT", "the address of the int64 word the steps' status words are OR-ed into"),
    ("O_ROOM_AT", "0, or the address of an int64 word: a call ends before a step when it is ..."),
    ("O_ROOM_LIMIT", "... above this"),
), count="PLAN_LEN", start=P_STAGES + 2 * MAX_STAGES)  # noqa: F821
globals().update(OFFLINE_PLAN.constants())  # O_HINTS .. O_ROOM_LIMIT; PLAN_LEN


@njit(**JIT)
def run_hints(k, k0, read, same_inputs):
    """The run hints (``L.RUN_*``) for step k of a call that started at step k0; ``read``: its outputs are read;
    ``same_inputs``: its inputs are the previous step's, bit for bit, and no fault stage acts on them.

    The model floats, and the inputs when they are the same, count as the
    previous step's from the call's second step on (Python may change them,
    and the plant's data, between calls; the steps change none).
    """
    unread = 0 if read else L.RUN_OUTPUTS_UNREAD
    if k == k0:
        return unread
    return L.RUN_MODEL_SAME | unread | (L.RUN_INPUTS_SAME if same_inputs else 0)


@njit(**JIT)
def end_call(di, hints_at, k):
    """End a compiled run's call before step k: the plant's run hints cleared (a step taken after the call
    gets none).  Returns k."""
    if hints_at >= 0:
        di[hints_at] = 0
    return k


@njit(cache=True, nogil=True)  # compiled (or loaded from the cache) at its first call, not when the module loads
def run_compiled(plan, k0, k1, dt):
    """Steps ``k0 .. k1 - 1``, each the plan's stages before the step, the plant's step, the stages after it;
    returns the next step to take (k1, or earlier when the room check stopped the call).

    The same calls in the same order as :func:`~plant_models.run.compiled.tick_run` per step (no clock, no
    tick-info slots), and the run hints and the room check of the module's docstring.
    """
    b = P_BUFFERS
    mf, mi = carray(f64_at(plan[b]), (plan[b + 1],)), carray(i64_at(plan[b + 2]), (plan[b + 3],))
    df, di = carray(f64_at(plan[b + 4]), (plan[b + 5],)), carray(i64_at(plan[b + 6]), (plan[b + 7],))
    step_at, n_before, n_after = plan[P_STEP_AT], plan[P_N_BEFORE], plan[P_N_AFTER]
    room_at, room_limit = plan[O_ROOM_AT], plan[O_ROOM_LIMIT]  # noqa: F821
    room = i64_at(room_at)
    hints_at, every, last, period = plan[O_HINTS], plan[O_EVERY], plan[O_LAST], plan[O_PERIOD]  # noqa: F821
    status_word = i64_at(plan[O_STATUS_AT])  # noqa: F821
    status = status_word[0]
    # the next step counts (k + 1) a row and a controller read: counted, not divided at every step
    next_row = (k0 // every + 1) * every
    next_call = (k0 // period + 1) * period if period > 0 else -1
    for k in range(k0, k1):
        if room_at != 0 and room[0] > room_limit:
            status_word[0] = status
            return end_call(di, hints_at, k)
        carry = 0
        for j in range(n_before):
            at = P_STAGES + 2 * j
            carry |= call_stage_at(plan[at], i64_at(plan[at + 1]), k, 0, dt, carry)
        read = (carry & READS) != 0 or k + 1 == next_row or k + 1 == last or k + 1 == next_call or k + 1 == k1
        if k + 1 == next_row:
            next_row += every
        if k + 1 == next_call:
            next_call += period
        if hints_at >= 0:
            di[hints_at] = run_hints(k, k0, read, (carry & CHANGED) == 0)
        st = call_step_at(step_at, mf, mi, df, di, dt)
        status |= st
        for j in range(n_before, n_before + n_after):
            at = P_STAGES + 2 * j
            call_stage_at(plan[at], i64_at(plan[at + 1]), k, 0, dt, st)
    status_word[0] = status
    return end_call(di, hints_at, k1)


# the fused loops: ((addresses of the stages before the step), (after it)) -> a loop of run_compiled's signature
_FUSED: dict[tuple[tuple[int, ...], tuple[int, ...]], Any] = {}


def register_fused(before: tuple, after: tuple, loop) -> None:
    """Declare ``loop`` (``loop(plan, k0, k1, dt) -> k``, :func:`run_compiled`'s contract) as the loop of the plans
    whose stages are the cfuncs ``before`` the step and ``after`` it, in that order, exactly."""
    _FUSED[(tuple(int(f.address) for f in before), tuple(int(f.address) for f in after))] = loop


def fused_loop(before: list, after: list):
    """The loop registered for these compiled stages (:class:`~plant_models.run.compiled.CompiledStage`), or None."""
    return _FUSED.get((tuple(s.address for s in before), tuple(s.address for s in after)))


class OfflinePlan:
    """The plan of :func:`run_compiled` for a plant and the compiled forms of the stages a run gives.

    Parameters
    ----------
    step_at
        The address of the plant's compiled step (:func:`plant_models.offline.kernel_address`).
    plant
        The plant (a :class:`~plant_models.contract.compiled.CompiledPlant`: its four buffers are bound).
    dt
        The step, s (for the stages declared with ``make_compiled``, as :attr:`last`, the run's step count).
    implementations
        Stage name -> :class:`~plant_models.run.compiled.CompiledStage` (or None: left out), ordered here by
        the stage list, as :class:`~plant_models.run.stepper.Stepper` orders a mode's callables; a stage of
        the list declared with ``make_compiled`` is added from it.  A name not in the list raises
        ``ValueError``; so does a stage declared with a Python ``make`` and no compiled form
        (:func:`compiled_run_possible` says beforehand).
    room
        None, or ``(word, limit)``: an int64 array and a number; a call ends before a step when ``word[0]`` is
        above ``limit`` (:meth:`set_room`).
    status_word
        An int64 array; its element 0 receives the OR of the steps' status words.
    every, last, period
        The steps whose outputs a row or a controller reads (see the module's docstring).
    mode
        What runs (``"offline"``, ``"closed_loop"``), for the stages declared with ``make_compiled``.

    Attributes
    ----------
    stages
        The names of the stages the plan calls, in order (the step included).
    loop
        The compiled loop :meth:`run` calls: a fused loop registered for exactly these stages
        (:func:`register_fused`), else :func:`run_compiled`.
    """

    def __init__(self, step_at: int, plant, dt: float, implementations: Mapping[str, CompiledStage | None],
                 status_word: np.ndarray, every: int, last: int, period: int = 0, room: tuple | None = None,
                 mode: str = "offline"):
        self.plant, self.dt, self.mode = plant, float(dt), mode
        self.every, self.last, self.period = int(every), int(last), int(period)  # for the stages made here
        run, before, after = _stages.compiled_order(implementations, self)  # the tick's order rule too
        if len(before) + len(after) > MAX_STAGES:
            raise ValueError(f"a compiled run takes at most {MAX_STAGES} stages, not {len(before) + len(after)}")
        self.stages = tuple(run)
        self.compiled = tuple(before + after)
        self.loop = fused_loop(before, after) or run_compiled
        self.plan = np.zeros(PLAN_LEN, dtype=np.int64)  # noqa: F821
        self.plan[P_STEP_AT] = step_at
        self.plan[P_N_BEFORE], self.plan[P_N_AFTER] = len(before), len(after)
        for j, s in enumerate(self.compiled):
            self.plan[P_STAGES + 2 * j] = s.address
            self.plan[P_STAGES + 2 * j + 1] = address(s.ctx)
        for j, buf in enumerate((plant.mf, plant.mi, plant.df, plant.di)):
            self.plan[P_BUFFERS + 2 * j] = address(buf)
            self.plan[P_BUFFERS + 2 * j + 1] = buf.shape[0]
        self.plan[O_HINTS] = plant.run_hints_slot()  # noqa: F821
        self.plan[O_EVERY], self.plan[O_LAST], self.plan[O_PERIOD] = int(every), int(last), int(period)  # noqa: F821
        if status_word.dtype != np.int64 or not status_word.flags.c_contiguous:
            raise ValueError("the status word must be a contiguous int64 array")
        self.plan[O_STATUS_AT] = address(status_word)  # noqa: F821
        self._keep: list[Any] = [plant.mf, plant.mi, plant.df, plant.di, status_word]  # alive with their addresses
        self.set_room(*(room if room is not None else (None, 0)))

    def set_room(self, word: np.ndarray | None, limit: int) -> None:
        """From now on, end a call before a step when ``word[0]`` (an int64 array's) is above ``limit`` (None:
        never)."""
        if word is not None and (word.dtype != np.int64 or not word.flags.c_contiguous):
            raise ValueError("the room word must be a contiguous int64 array")
        self.room = word
        self.plan[O_ROOM_AT] = 0 if word is None else address(word)  # noqa: F821
        self.plan[O_ROOM_LIMIT] = int(limit)  # noqa: F821

    def replace(self, stage: CompiledStage) -> None:
        """Put ``stage`` in the place of the plan's stage of the same name (its arrays were reallocated)."""
        for j, s in enumerate(self.compiled):
            if s.stage == stage.stage:
                self.compiled = self.compiled[:j] + (stage,) + self.compiled[j + 1:]
                self.plan[P_STAGES + 2 * j] = stage.address
                self.plan[P_STAGES + 2 * j + 1] = address(stage.ctx)
                n_before = int(self.plan[P_N_BEFORE])
                self.loop = fused_loop(list(self.compiled[:n_before]), list(self.compiled[n_before:])) or run_compiled
                return
        raise ValueError(f"the plan has no stage {stage.stage}")

    def run(self, k0: int, k1: int) -> int:
        """Steps ``k0 .. k1 - 1`` (:func:`run_compiled`); returns the next step to take."""
        return int(self.loop(self.plan, int(k0), int(k1), self.dt))


def compiled_run_possible() -> bool:
    """Whether every stage of the list declared for every mode has a compiled form (else a run goes step by
    step through :class:`~plant_models.run.stepper.Stepper`)."""
    return not _stages.python_only_stages()


def warm_up() -> None:
    """Compile (or load from numba's cache) :func:`run_compiled` and the fused loops registered so far, taking no
    step."""
    plan, status = np.zeros(PLAN_LEN, dtype=np.int64), np.zeros(1, dtype=np.int64)  # noqa: F821
    plan[O_EVERY], plan[O_HINTS], plan[O_STATUS_AT] = 1, -1, address(status)  # noqa: F821
    for loop in (run_compiled, *dict.fromkeys(_FUSED.values())):
        loop(plan, 0, 0, 1e-3)


__all__ = ["ACC_EVENTS", "ACC_EV_READ", "ACC_LEN", "ACC_LOST", "ACC_ROWS", "ACC_STATUS", "CHANGED", "OfflinePlan",
           "READS", "compiled_run_possible", "end_call", "fused_loop", "register_fused", "run_compiled", "run_hints",
           "warm_up"]
