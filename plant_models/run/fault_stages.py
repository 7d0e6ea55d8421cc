"""The compiled forms of the fault stage (``fault_inputs``, ``fault_outputs``, ``fault_restore``).

Each is a stage of the protocol of :mod:`plant_models.run.compiled`
around one of the three compiled functions of
:mod:`plant_models.run.fault_tables`, on array views of the fault set's
tables and the plant's ``df`` (one implementation for the Python stages,
the compiled run and the tick).  Their context (:func:`fault_stages`):
``[fi, fi's rows, ff, df, df's length, n]``, ``n`` the table rows in use
(0: the stage does nothing), which a run sets between two chunks of steps
(:meth:`FaultStages.set_rows`), as a lockstep server's ``fault_set``
between two ticks.

Before the step, ``fault_inputs`` returns
:data:`~plant_models.run.offline_compiled.CHANGED` and
:data:`~plant_models.run.offline_compiled.READS` while rows are in use: it
acts on the step's inputs, and the outputs it faults after the step are read.
"""

from __future__ import annotations

import numpy as np
from numba import carray, cfunc

from .compiled import STAGE_SIGNATURE, CompiledStage, f64_at, i64_at
from .fault_tables import N_FF, N_FI, fault_inputs, fault_outputs, fault_restore
from .offline_compiled import CHANGED, READS

C_FI, C_FI_ROWS, C_FF, C_DF, C_DF_LEN, C_N = range(6)


@cfunc(STAGE_SIGNATURE, cache=True)
def fault_inputs_stage(ctx, k, now_ns, dt, carry):
    """Stage ``fault_inputs``: :func:`~plant_models.run.fault_tables.fault_inputs`.  Called in the real-time loop."""
    n = ctx[C_N]
    if n == 0:
        return 0
    rows = ctx[C_FI_ROWS]
    fault_inputs(carray(i64_at(ctx[C_FI]), (rows, N_FI)), carray(f64_at(ctx[C_FF]), (rows, N_FF)),
                 carray(f64_at(ctx[C_DF]), (ctx[C_DF_LEN],)), n)
    return CHANGED | READS


@cfunc(STAGE_SIGNATURE, cache=True)
def fault_outputs_stage(ctx, k, now_ns, dt, carry):
    """Stage ``fault_outputs``: :func:`~plant_models.run.fault_tables.fault_outputs`.  Called in the real-time
    loop."""
    n = ctx[C_N]
    if n:
        rows = ctx[C_FI_ROWS]
        fault_outputs(carray(i64_at(ctx[C_FI]), (rows, N_FI)), carray(f64_at(ctx[C_FF]), (rows, N_FF)),
                      carray(f64_at(ctx[C_DF]), (ctx[C_DF_LEN],)), n)
    return 0


@cfunc(STAGE_SIGNATURE, cache=True)
def fault_restore_stage(ctx, k, now_ns, dt, carry):
    """Stage ``fault_restore``: :func:`~plant_models.run.fault_tables.fault_restore`.  Called in the real-time
    loop."""
    n = ctx[C_N]
    if n:
        rows = ctx[C_FI_ROWS]
        fault_restore(carray(i64_at(ctx[C_FI]), (rows, N_FI)), carray(f64_at(ctx[C_FF]), (rows, N_FF)),
                      carray(f64_at(ctx[C_DF]), (ctx[C_DF_LEN],)), n)
    return 0


class FaultStages:
    """The three compiled fault stages on a fault set's tables ``fi`` [rows, N_FI], ``ff`` [rows, N_FF] and a
    plant's ``df``; :attr:`stages` by stage name, for an :class:`~plant_models.run.offline_compiled.OfflinePlan`.
    """

    def __init__(self, fi: np.ndarray, ff: np.ndarray, df: np.ndarray):
        if fi.shape[1] != N_FI or ff.shape != (fi.shape[0], N_FF) or fi.dtype != np.int64:
            raise ValueError("the fault tables are not laid out as fault_tables.py declares")
        values = (fi, fi.shape[0], ff, df, df.shape[0], 0)
        self.stages = {name: CompiledStage.of(name, fn, values) for name, fn in (
            ("fault_inputs", fault_inputs_stage), ("fault_outputs", fault_outputs_stage),
            ("fault_restore", fault_restore_stage))}

    def set_rows(self, n: int) -> None:
        """The table rows in use from the next step on (0: the stages do nothing)."""
        for s in self.stages.values():
            s.ctx[C_N] = int(n)


__all__ = ["FaultStages", "fault_inputs_stage", "fault_outputs_stage", "fault_restore_stage"]
