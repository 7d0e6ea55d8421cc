"""A test file's fault schedule for a run without a server: fault maps parsed into the run pipeline's schedule.

The schedule itself (the switch steps, the ``switch`` stage, the rule shared
with the lockstep fault clock) is :mod:`plant_models.run.schedule`; this
module parses the maps of ``docs/faults.md`` against the plant into a
:class:`~server.realtime.faults.FaultSet` and refuses the transport faults,
which a run without a server has nothing to act on -- unless the run has
the adapter they act on: an offline run with the devices of an I/O config
(:mod:`server.testbench.device_run`) hands its pin faults (target ``device``)
to its device adapter exactly as ``fault_set`` does in a server.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from plant_models.errors import FaultError
from plant_models.plant import Plant
from plant_models.run.schedule import FaultSchedule as _Schedule

from server.realtime.faults import FaultSet, parse_fault


class FaultSchedule(_Schedule):
    """:class:`plant_models.run.schedule.FaultSchedule` of fault maps: ``(fault, at_s, until_s)`` each, a
    signal or clutch fault of ``docs/faults.md`` on ``plant``, switched on at ``at_s`` and off at ``until_s``
    (None: until the end), for a run at step ``dt`` (s); ``log`` as the base class's.  ``adapters``: the opened
    adapters the run steps (an offline run with devices); a transport fault of one of their types goes to it
    through the fault set, as in the server.

    Raises ``FaultError`` for a map that does not fit the plant or a transport fault no adapter of the run takes.
    """

    def __init__(self, plant: Plant, faults: Iterable[tuple[dict, float, float | None]], dt: float,
                 log: list[str] | None = None, adapters: Sequence = ()):
        faults = list(faults)
        fault_set = FaultSet(plant, adapters=adapters)
        types = {a.type_name for a in adapters}
        specs = []
        for j, (fault, _, _) in enumerate(faults):
            target = fault.get("target") if isinstance(fault, dict) else None
            if target in types:  # checked against the run's adapter (its pins), as fault_set checks it
                spec = fault_set.parse(dict(fault), f"faults[{j}]")
            else:
                spec = parse_fault(dict(fault), plant, f"faults[{j}]")
            if spec.transport is not None and spec.target not in types:
                raise FaultError(f"faults[{j}]: a {spec.target} fault acts on a transport, which a run without "
                                 "a server does not have (run it in lockstep or realtime mode)")
            specs.append(spec)
        super().__init__(fault_set, specs, faults, dt, log)


__all__ = ["FaultSchedule"]
