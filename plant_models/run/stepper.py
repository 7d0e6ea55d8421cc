"""The one stepper: a step of any run is the declared stages in order around the plant's step.

A mode builds a :class:`Stepper` once, before its run, with the
implementations of the stages it has (by stage name, checked against
:data:`plant_models.run.stages.STAGES`), and calls :meth:`Stepper.step`
per step.  The stepper orders them by the declaration, adds the stages
declared with a ``make`` (:class:`~plant_models.run.stages.Stage`), and
composes one function that calls them in order (the stages before the step,
the plant's step, the stages after it), each callable bound once: the step
looks nothing up by name, allocates nothing and waits for nothing (the
callables of the real-time loop's tick follow the same rule).

The modes: the real-time loop's tick (:class:`server.realtime.loop.Loop`,
realtime, lockstep and afap), the open-loop offline run of a Python-step
plant or with a fault schedule (:class:`plant_models.offline.StepwiseRun`,
which ``gearbox-hil simulate``, the campaign workers and the test bench's
offline runs use), the reference run of ``simulate``
(:func:`server.offline.run.run_stepwise`), the test bench's offline run
(:func:`server.testbench.runner.record_offline`) and the closed loop
(:func:`server.offline.controller.closed_loop`).
"""

from __future__ import annotations

from typing import Callable

from ..plant import Plant
from . import stages as _stages


class Stepper:
    """One step of a run: the implementations given, in the order of the stage list, around the plant's step.

    Parameters
    ----------
    plant
        The plant stepped.
    dt
        The step, s (:attr:`dt` may be changed between steps).
    implementations
        Stage name -> ``callable(k)`` (``callable(dt) -> status`` for
        ``"step"``; default ``plant.step``); a None value leaves the stage
        out.  A name not in the stage list raises ``ValueError``.
    mode
        What runs the steps ("realtime", "lockstep", "afap", "offline",
        "testbench", "closed_loop"), for the stages made by every mode.

    Attributes
    ----------
    stages
        The names of the stages this stepper runs, in order.
    step
        ``step(k) -> status``: step k (from the plant's state after step
        k - 1), every stage in order; the stages' callables are bound once,
        here.  Called in the real-time loop.
    """

    def __init__(self, plant: Plant, dt: float, implementations: dict[str, Callable | None], mode: str):
        self.plant = plant
        self.dt = float(dt)
        self.mode = mode
        declared = _stages.STAGES
        names = [s.name for s in declared]
        unknown = sorted(set(implementations) - set(names))
        if unknown:
            raise ValueError(f"no stage called {', '.join(unknown)}; the stages: {', '.join(names)}")
        before: list[Callable] = []
        after: list[Callable] = []
        run: list[str] = []
        self._step = plant.step
        for s in declared:
            fn = implementations.get(s.name)
            if fn is None and s.make is not None:
                fn = s.make(self)
            if s.side == _stages.STEP:
                self._step = fn if fn is not None else plant.step
                run.append(s.name)
            elif fn is not None:
                (before if s.side == _stages.BEFORE else after).append(fn)
                run.append(s.name)
        self._before = tuple(before)
        self._after = tuple(after)
        self.stages = tuple(run)
        self.step = self._compose()

    def _compose(self) -> Callable[[int], int]:
        """The step as one function that calls the stages in order, each bound to a name of its own.

        The same calls as a loop over the two tuples, without the loop: a
        tick of the real-time loop has no time to spare for iterating.
        """
        names = [f"b{i}" for i in range(len(self._before))] + [f"a{i}" for i in range(len(self._after))]
        lines = [f"def make({', '.join(names + ['plant_step', 'stepper'])}):", "    def step(k):"]
        lines += [f"        b{i}(k)" for i in range(len(self._before))]
        lines.append("        status = plant_step(stepper.dt)")
        lines += [f"        a{i}(k)" for i in range(len(self._after))]
        lines += ["        return status", "    return step"]
        scope: dict = {}  # the callables are the closure's cells: no name is looked up when the step runs
        exec(compile("\n".join(lines), f"<stepper {self.mode}: {' '.join(self.stages)}>", "exec"), scope)
        step = scope["make"](*self._before, *self._after, self._step, self)
        step.__doc__ = """Step k (from the plant's state after step k - 1): every stage in order; returns the step's status
        word.  Called in the real-time loop."""
        return step


__all__ = ["Stepper"]
