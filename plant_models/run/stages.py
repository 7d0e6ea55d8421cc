"""The stage list of one step of any run, declared once.

Every way a plant is stepped (the server's real-time, lockstep and afap
ticks, the offline runs, the test bench, the closed loops, the campaign
workers) runs the stages below in this order around the plant's step
(:class:`plant_models.run.stepper.Stepper`).  A mode gives the stages it
has an implementation of (the server has transports to read and write, an
offline run has rows to keep); a stage a mode has nothing for is left out of
its step, at no cost.  A stage with a ``make`` is built by every mode (the
hook a new stage uses: one declaration here, and every mode runs it).

The order, and why:

* the fault **switch** comes first: a fault switched "at step k" acts on
  step k's inputs (a server switches between ticks, on request);
* **commanded** inputs (a transport's commands) are written before the
  scenario's or replay's **inputs**, which win while a scenario drives them;
* the faulted inputs (**fault_inputs**) are what the plant sees, so they
  come after every writer of inputs and right before the **step**;
* after the step, **fault_outputs** replaces the outputs by what the faulty
  sensors report; the **state_row** (the server's state ring) shows the
  plant as it ran: faulted inputs, reported outputs;
* **fault_restore** puts the commanded inputs back; the **row** a run keeps
  (outputs as reported, inputs as commanded) comes after it, and so does the
  **controller**, which must see its own commands, not the faulted values;
* the server's scenario playback **hand_back** (the inputs back to
  commands after the scenario's last step) and the transports' writes
  (**send**) end the step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

BEFORE = "before"  # runs before the plant's step, called with the step's index k
STEP = "step"  # the plant's step itself, called with the step's length dt, returns the status word
AFTER = "after"  # runs after the plant's step, called with the index k of the step just taken


@dataclass(frozen=True)
class Stage:
    """One stage of a step.

    Attributes
    ----------
    name
        What a mode names when it gives the stage's implementation.
    side
        :data:`BEFORE`, :data:`STEP` or :data:`AFTER` the plant's step.
    doc
        What the stage does, in one line.
    make
        None, or ``make(stepper) -> callable(k) | None``: an implementation
        every mode gets (the :class:`~plant_models.run.stepper.Stepper`
        being built gives the plant, dt and mode).  A compiled run has no
        Python per step: a run with such a stage and no ``make_compiled`` is
        taken step by step.
    make_compiled
        None, or ``make_compiled(plan) -> CompiledStage | None``: the same
        stage's compiled form (:class:`plant_models.run.compiled.CompiledStage`),
        which every compiled run takes in its loop: the compiled offline
        runs (:class:`plant_models.run.offline_compiled.OfflinePlan` being
        built gives the plant, dt, mode and ``last``) and the real-time
        loop's compiled tick (a :class:`plant_models.run.compiled.TickPlan`
        gives the same four), both in the order of :func:`compiled_order`.
        A stage with a ``make`` and no ``make_compiled`` sends the real-time
        tick to its Python stepper and an offline run step by step.
    """

    name: str
    side: str
    doc: str
    make: Callable[[Any], Callable[[int], None] | None] | None = None
    make_compiled: Callable[[Any], Any] | None = None


STAGES: tuple[Stage, ...] = (
    Stage("switch", BEFORE, "the faults due before step k switched on or off (a run's fault schedule)"),
    Stage("commanded", BEFORE, "the commanded inputs: the transports' commands, inputs queued by a request"),
    Stage("inputs", BEFORE, "the inputs of step k from the scenario or replay (closed loop: the controller's "
                            "commands over them; a server with no scenario: the command watchdog)"),
    Stage("fault_inputs", BEFORE, "the faulted inputs the plant sees during the step"),
    Stage("step", STEP, "the plant's step"),
    Stage("fault_outputs", AFTER, "the outputs as the faulty sensors report them"),
    Stage("events", AFTER, "the events the plant logged in the step, collected"),
    Stage("state_row", AFTER, "the server's state-ring row: the plant as it ran (faulted inputs, reported outputs)"),
    Stage("fault_restore", AFTER, "the commanded inputs back in place of the faulted ones"),
    Stage("row", AFTER, "the row a run keeps: the outputs as reported, the inputs as commanded"),
    Stage("hand_back", AFTER, "a scenario past its last step hands the inputs back to commands"),
    Stage("controller", AFTER, "the controller called on the outputs and inputs, its commands held for the next "
                               "steps"),
    Stage("send", AFTER, "the transports' writes of this tick"),
)


def stage_names() -> tuple[str, ...]:
    """The names of :data:`STAGES`, in order (read at call time: a stage added to the list is in it)."""
    return tuple(s.name for s in STAGES)


def python_only_stages() -> tuple[str, ...]:
    """The stages declared with a ``make`` and no ``make_compiled``: no compiled run (the real-time tick, the
    compiled offline runs) can take them in its call."""
    return tuple(s.name for s in STAGES if s.make is not None and s.make_compiled is None)


def compiled_order(implementations: Mapping[str, Any], plan: Any) -> tuple[tuple[str, ...], list, list]:
    """The compiled forms a compiled run calls, in the order of :data:`STAGES` (read at call time): one rule
    for the compiled offline run and the real-time tick.

    ``implementations`` maps a stage's name to what the run gives for it: a compiled form, a list or tuple of
    them (called in that order: a tick's adapters' reads), or None (left out).  A stage of the list declared
    with ``make_compiled`` that the run gives nothing for gets ``make_compiled(plan)`` (None: left out).
    Returns the names of the stages called (the step included), the compiled forms before the step and those
    after it.  Raises ``ValueError`` for a name not in the list and for a stage with a ``make`` and no
    compiled form (:func:`python_only_stages`).
    """
    names = [s.name for s in STAGES]
    unknown = sorted(set(implementations) - set(names))
    if unknown:
        raise ValueError(f"no stage called {', '.join(unknown)}; the stages: {', '.join(names)}")
    run: list[str] = []
    before: list = []
    after: list = []
    for s in STAGES:
        if s.side == STEP:
            run.append(s.name)
            continue
        impl = implementations.get(s.name)
        if impl is None and s.make_compiled is not None:
            impl = s.make_compiled(plan)
        elif impl is None and s.make is not None:
            raise ValueError(f"stage {s.name} has no compiled form")
        forms = [] if impl is None else list(impl) if isinstance(impl, (list, tuple)) else [impl]
        if forms:
            (before if s.side == BEFORE else after).extend(forms)
            run.append(s.name)
    return tuple(run), before, after


__all__ = ["AFTER", "BEFORE", "STAGES", "STEP", "Stage", "compiled_order", "python_only_stages", "stage_names"]
