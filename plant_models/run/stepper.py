"""The one stepper: a step of any run is the declared stages in order around the plant's step.

A mode builds a :class:`Stepper` once, before its run, with the
implementations of the stages it has (by stage name, checked against
:data:`plant_models.run.stages.STAGES`), and calls :meth:`Stepper.step`
per step.  The stepper orders them by the declaration, adds the stages
declared with a ``make`` (:class:`~plant_models.run.stages.Stage`), and keeps
two tuples of bound callables: the step runs them with nothing looked up
by name, no allocation and no waiting (the callables of the real-time
loop's tick follow the same rule).

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

    def step(self, k: int) -> int:
        """Step k (from the plant's state after step k - 1): every stage in order; returns the step's status word.

        Called in the real-time loop.
        """
        for stage in self._before:
            stage(k)
        status = self._step(self.dt)
        for stage in self._after:
            stage(k)
        return status


__all__ = ["Stepper"]
