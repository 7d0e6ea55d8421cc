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
from typing import Any, Callable

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
        which every compiled offline run takes in its loop
        (:class:`plant_models.run.offline_compiled.OfflinePlan` being built
        gives the plant, dt and mode).  The real-time tick takes a stage
        declared with a ``make`` through its Python stepper.
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
    """The stages every mode builds from their ``make``: the compiled tick cannot take them in its call (the
    compiled offline run takes those declared with a ``make_compiled`` too,
    :func:`plant_models.run.offline_compiled.compiled_run_possible`)."""
    return tuple(s.name for s in STAGES if s.make is not None)


__all__ = ["AFTER", "BEFORE", "STAGES", "STEP", "Stage", "python_only_stages", "stage_names"]
