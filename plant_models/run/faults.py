"""The fault stage of the run pipeline: the signal-fault tables of one plant and the three stages that apply them.

A :class:`FaultStage` holds the preallocated tables
(:mod:`plant_models.run.fault_tables`) and gives the pipeline its stages
``fault_inputs``, ``fault_outputs`` and ``fault_restore`` (:meth:`stages`),
each one compiled call while a signal fault is active and nothing else.  What
fills the tables is a fault set, a subclass that turns fault maps
(``docs/faults.md``) into table rows and clutch overlays between steps:
:class:`server.realtime.faults.FaultSet`, which also hands transport faults
to the server's adapters.  A :class:`~plant_models.run.schedule.FaultSchedule`
switches a fault set's faults at given steps of a run.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..plant import Plant
from .compiled import CompiledStage
from .fault_tables import MAX_FAULTS, N_FF, N_FI, compiled_fault_stages, fault_inputs, fault_outputs, fault_restore


class FaultStage:
    """The signal-fault tables of one plant, and the pipeline's fault stages that walk them.

    Parameters
    ----------
    plant
        The plant faulted (its ``df`` is where the stages act).

    Attributes
    ----------
    fi, ff
        The tables (int64 [MAX_FAULTS, N_FI], float64 [MAX_FAULTS, N_FF]).
    n_signal
        The table rows in use (0: the stages call nothing); kept in
        :attr:`rows`, which the compiled forms of the stages read.
    rows
        ``rows[0]`` is :attr:`n_signal` (an int64 array of one, shared with
        the compiled tick).
    active
        The faults set now (what :meth:`set` returned, in order).
    on_change
        None, or called (between steps) after the tables changed: a run
        whose stepper leaves the fault stages out while no row is in use
        (the real-time loop's) makes its stepper again.
    """

    def __init__(self, plant: Plant):
        self.plant = plant
        self.fi = np.zeros((MAX_FAULTS, N_FI), dtype=np.int64)
        self.ff = np.zeros((MAX_FAULTS, N_FF))
        self.rows = np.zeros(1, dtype=np.int64)
        self._rows_slot = memoryview(self.rows)  # a plain int per read
        self.active: list = []
        self.on_change: Callable[[], None] | None = None
        self._df = plant.df
        # compile (or load from numba's cache) now, with no fault active, so the first faulted step pays nothing
        fault_inputs(self.fi, self.ff, self._df, 0)
        fault_outputs(self.fi, self.ff, self._df, 0)
        fault_restore(self.fi, self.ff, self._df, 0)

    @property
    def n_signal(self) -> int:
        return self._rows_slot[0]

    @n_signal.setter
    def n_signal(self, n: int) -> None:
        if not 0 <= n <= MAX_FAULTS:
            raise ValueError(f"{n} signal-table rows: 0 to {MAX_FAULTS}")
        self._rows_slot[0] = int(n)

    # ------------------------------------------------------------------ the stages (called in the real-time loop)
    def inputs(self, k: int) -> None:
        """Stage ``fault_inputs``: the faulted inputs of step k in place of the commanded ones.  Called in the
        real-time loop."""
        n = self.n_signal
        if n:
            fault_inputs(self.fi, self.ff, self._df, n)

    def outputs(self, k: int) -> None:
        """Stage ``fault_outputs``: the outputs as the faulty sensors report them.  Called in the real-time loop."""
        n = self.n_signal
        if n:
            fault_outputs(self.fi, self.ff, self._df, n)

    def restore(self, k: int) -> None:
        """Stage ``fault_restore``: the commanded inputs back.  Called in the real-time loop."""
        n = self.n_signal
        if n:
            fault_restore(self.fi, self.ff, self._df, n)

    def stages(self) -> dict[str, Callable[[int], None]]:
        """This stage's implementations for a :class:`~plant_models.run.stepper.Stepper`, by stage name."""
        return {"fault_inputs": self.inputs, "fault_outputs": self.outputs, "fault_restore": self.restore}

    def compiled_stages(self) -> tuple[CompiledStage, CompiledStage, CompiledStage]:
        """The compiled forms of ``fault_inputs``, ``fault_outputs`` and ``fault_restore`` on these tables (for
        the compiled tick, :mod:`plant_models.run.compiled`); they read :attr:`rows` at every tick."""
        return compiled_fault_stages(self.fi, self.ff, self._df, self.rows)

    def changed(self) -> None:
        """Tell :attr:`on_change` that the tables changed (a fault set calls this between steps)."""
        if self.on_change is not None:
            self.on_change()

    # ------------------------------------------------------------------ between steps (a fault set's job)
    def set(self, fault: Any) -> Any:
        """Activate a fault from the next step on; returns it (an object with its ``name``)."""
        raise NotImplementedError(f"{type(self).__name__} sets no faults (a fault set does)")

    def clear(self, name: str | None = None) -> list[str]:
        """Clear the fault called ``name`` (None: all) from the next step on; returns the names cleared."""
        raise NotImplementedError(f"{type(self).__name__} clears no faults (a fault set does)")


__all__ = ["FaultStage"]
