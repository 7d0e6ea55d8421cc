"""A test file's fault schedule for a run without a server: fault maps parsed into the run pipeline's schedule.

The schedule itself (the switch steps, the ``switch`` stage, the rule shared
with the lockstep fault clock) is :mod:`plant_models.run.schedule`; this
module parses the maps of ``docs/faults.md`` against the plant into a
:class:`~server.realtime.faults.FaultSet` and refuses the transport faults,
which a run without a server has nothing to act on.
"""

from __future__ import annotations

from typing import Iterable

from plant_models.errors import FaultError
from plant_models.plant import Plant
from plant_models.run.schedule import FaultSchedule as _Schedule

from server.realtime.faults import FaultSet, parse_fault


class FaultSchedule(_Schedule):
    """:class:`plant_models.run.schedule.FaultSchedule` of fault maps: ``(fault, at_s, until_s)`` each, a
    signal or clutch fault of ``docs/faults.md`` on ``plant``, switched on at ``at_s`` and off at ``until_s``
    (None: until the end), for a run at step ``dt`` (s); ``log`` as the base class's.

    Raises ``FaultError`` for a map that does not fit the plant or a transport fault.
    """

    def __init__(self, plant: Plant, faults: Iterable[tuple[dict, float, float | None]], dt: float,
                 log: list[str] | None = None):
        faults = list(faults)
        specs = []
        for j, (fault, _, _) in enumerate(faults):
            spec = parse_fault(dict(fault), plant, f"faults[{j}]")
            if spec.transport is not None:
                raise FaultError(f"faults[{j}]: a {spec.target} fault acts on a transport, which a run without "
                                 "a server does not have (run it in lockstep or realtime mode)")
            specs.append(spec)
        super().__init__(FaultSet(plant), specs, faults, dt, log)


__all__ = ["FaultSchedule"]
