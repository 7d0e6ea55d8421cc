"""Plants on the exact static/Coulomb friction core: the shared base :class:`FrictionPlant`.

A friction plant is parameters, ports and a mechanical network
(:class:`~plant_models.core.api.CoreSpec`: shafts, friction rows, springs)
plus two small compiled functions of its own, ``_inputs`` (ports -> core
inputs) and ``_outputs`` (core state -> ports).  Everything else is here:
the core's buffers (the plant's ports and parameter blocks live inside
them), the start sequence, the core's tunable parameters, state copies and
events.  The plant's module imports from the core only
:mod:`plant_models.core.api`.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from typing import Any, ClassVar

import numpy as np

from .core.api import BUFS, L, Core, CoreSpec
from .contract.vocabulary import SHARED_EVENTS, SHARED_STATUS
from .plant import CompiledPlant, Kernel, Param, Ports  # noqa: F401  (Ports re-exported for the plant modules)

__all__ = ["CORE_STATUS", "FrictionPlant", "Ports", "friction_kernels"]

# the friction core's own status bits (numbers fixed by its compiled code), beside the shared ones it also sets
CORE_STATUS = SHARED_STATUS.extend("the friction core")
CORE_STATUS.declare(L.ST_OVERCONSTRAINED, "overconstrained", "redundant stuck rows: forces split by minimum norm")
CORE_STATUS.declare(L.ST_LOCKED, "locked", "a group of shafts is held at zero speed by the stuck rows")
CORE_STATUS.declare(L.ST_EVENT_BUDGET, "event_budget", "more events in one step than the sub-step budget")
CORE_STATUS.declare(L.ST_SOLVER_LIMIT, "solver_limit", "the friction solve stopped at its iteration limit")
CORE_STATUS.declare(L.ST_DRIVE_REDUNDANT, "drive_redundant",
                    "a driven row's relative speed is fixed by stuck rows: its prescription is dropped")

STEP_SIGNATURE = "int64(" + BUFS + ", float64)"  # step(mf, mi, df, di, dt) -> status word
REFRESH_SIGNATURE = "int64(" + BUFS + ", int64)"  # refresh(mf, mi, df, di, status) -> plant status bits


def friction_kernels(step, refresh) -> tuple[Kernel, Kernel]:
    """The two kernels of a friction plant (see :class:`FrictionPlant` for how they are written)."""
    return Kernel("step", step, STEP_SIGNATURE), Kernel("refresh", refresh, REFRESH_SIGNATURE)


class FrictionPlant(CompiledPlant):
    """A plant whose dynamics are the friction core's; the plant maps ports to the core and back.

    A subclass (one module in ``plant_models/plants/``) provides:

    * class attributes ``kind``, ``description``, ``params_type``,
      ``input_ports`` / ``output_ports`` (:class:`~plant_models.plant.Ports`)
      and ``kernels = friction_kernels(x_step, x_refresh)``; optional
      ``plant_nf`` / ``plant_ni`` / ``plant_ndi`` (sizes of the plant's own
      float and int parameter blocks and int data block in the core's
      buffers, at ``mi[L.MF_PLANT]``, ``mi[L.MI_PLANT]``, ``mi[L.DI_PLANT]``);
    * :meth:`build_spec` (the network from the parameters),
      :meth:`_initial_state` (speeds, actuator states), and where needed
      :meth:`_fill_model` (the plant's parameter blocks) and
      :meth:`_engaged_at_start` (rows that start stuck);
    * two compiled functions on raw pointers (``raw_f``/``raw_i`` of the
      buffers): ``_inputs(mf, mi, df, di) -> plant status bits`` writes the
      core's inputs (``L.DF_U_TAU``, ``L.DF_U_ACT`` and their rates) from the
      ports, ``_outputs(mf, mi, df, di, st, h)`` writes the output ports from
      the core's state ``h`` s after the step start (``h = 0`` when
      refreshing).  The ports sit at ``mi[L.DF_PLANT]``: inputs, then their
      rates, then the outputs;
    * the step and refresh kernels, in this pattern, word for word except the
      names (numba caches a function per source file, so each plant writes
      its own two; a shared generated wrapper would not cache)::

          @njit(**JIT)
          def x_step(mf, mi, df, di, dt):
              \"\"\"Inputs -> core step -> outputs.  Called in the real-time loop.\"\"\"
              rmf, rmi, rdf, rdi = raw_f(mf), raw_i(mi), raw_f(df), raw_i(di)
              pst = _inputs(rmf, rmi, rdf, rdi)
              st = core_step(rmf, rmi, rdf, rdi, dt)
              if st != L.ST_BAD_INPUT:  # a refused step reports only that
                  st |= pst
              _outputs(rmf, rmi, rdf, rdi, st, dt)
              return st

          @njit(**JIT)
          def x_refresh(mf, mi, df, di, st):
              \"\"\"Inputs -> outputs without stepping (at the start).\"\"\"
              rmf, rmi, rdf, rdi = raw_f(mf), raw_i(mi), raw_f(df), raw_i(di)
              pst = _inputs(rmf, rmi, rdf, rdi)
              _outputs(rmf, rmi, rdf, rdi, st | pst, 0.0)
              return pst

    ``@njit(**JIT)`` carries no signature: the kernels compile (or load from
    numba's cache) at the first reset, in :meth:`CompiledPlant.compile_kernels`.
    """

    status_bits = CORE_STATUS
    event_kinds = SHARED_EVENTS  # the core logs stick, breakaway and reversal
    plant_nf: ClassVar[int] = 0  # plant float parameters (MF_PLANT block)
    plant_ni: ClassVar[int] = 0  # plant int parameters (MI_PLANT block)
    plant_ndi: ClassVar[int] = 0  # plant int data (DI_PLANT block)

    def __init__(self, params: Any, source: str = ""):
        self.spec = self.build_spec(params)
        super().__init__(params, source)
        self._fill_model()
        self.reset()

    # -- what the plant is ---------------------------------------------------------------------------
    @classmethod
    @abstractmethod
    def build_spec(cls, params: Any) -> CoreSpec:
        """The mechanical network of a plant with these parameters."""

    @classmethod
    def clutch_names(cls, params: Any) -> list[str]:
        return [r.name for r in cls.build_spec(params).rows]

    # -- buffers: the core's, with the ports in its plant data block ------------------------------------
    def _allocate(self):
        self.core = Core(self.spec, plant_nf=self.plant_nf, plant_ni=self.plant_ni,
                         plant_ndf=2 * self.n_in + self.n_out, plant_ndi=max(self.plant_ndi, 1))
        return self.core.mf, self.core.mi, self.core.df, self.core.di

    @property
    def input_offset(self) -> int:
        return int(self.mi[L.DF_PLANT])

    def _fill_model(self) -> None:
        """Write the plant's parameter blocks (``core.plant_f`` / ``core.plant_i``); none by default."""

    def _clear(self) -> None:
        self.core.reset()

    # -- life cycle ----------------------------------------------------------------------------------
    def _engaged_at_start(self) -> list[int]:
        """Rows that start stuck (if their capacity holds: the core decides); none by default."""
        return []

    def start(self) -> int:
        """Map the inputs, engage the initially engaged rows, and compute the outputs.

        The rows to engage are marked stuck before the inputs are mapped, so
        an input mapping that depends on the mode (the DCT's dog clutches)
        sees them engaged; the core then solves the start, and the outputs
        are computed from its result.
        """
        engaged = self._engaged_at_start()
        for i in engaged:
            self.core.mode[i] = L.MODE_STUCK
        refresh = self.compiled["refresh"]
        refresh(self.mf, self.mi, self.df, self.di, 0)
        st = self.core.start(engaged)
        st |= int(refresh(self.mf, self.mi, self.df, self.di, st))
        return st

    @property
    def time(self) -> float:
        return float(self.core.time[0])

    @property
    def counters(self) -> np.ndarray:
        return self.core.counters

    def row_names(self) -> list[str]:
        return [r.name for r in self.core.spec.rows]

    def _drain_events(self) -> list[tuple[float, int, int]]:
        return self.core.new_events()

    def event_log(self) -> tuple[int, int, int, int, int]:
        mi = self.mi
        return (int(mi[L.DF_EV_TIME]), int(mi[L.DI_EV_ROW]), int(mi[L.DI_EV_KIND]),
                int(mi[L.DI_COUNTERS]) + L.CNT_EVENTS, self.core.sizes.E)

    def mark_events_read(self) -> None:
        self.core.mark_events_read()

    @property
    def events_lost(self) -> int:
        """Events overwritten in the core's ring log before they were read, since the last reset."""
        return self.core.events_lost

    def get_state(self):
        return self.core.get_state()

    def set_state(self, state) -> None:
        self.core.set_state(state)

    # -- parameters a running server may tune ---------------------------------------------------------
    def tunable_parameters(self) -> list[Param]:
        """The core's parameters the compiled step reads afresh at every step.

        * ``shaft.<name>.drag``: viscous drag of a shaft to ground (N m s/rad
          for rotating shafts, N s/m for translating bodies);
        * ``row.<name>.gain_static`` / ``gain_kinetic``: static capacity and
          Coulomb amplitude of a row per unit normal force (for a clutch
          mu * surfaces * mean radius / gear radius); kinetic <= static;
        * ``row.<name>.viscous``: viscous drag across a row (force per row speed);
        * ``row.<name>.act_lag_s``: first-order lag of the row's actuator, s.

        Inertias are not offered: changing the inertia of a moving shaft
        changes its momentum and invalidates the core's constrained-inertia
        cache.  Subclasses add their own with ``super().tunable_parameters() + [...]``.
        """
        mf, mi, df = self.mf, self.mi, self.df

        def slot(name, unit, lo, hi, doc, slot_, idx, after_set=None, at_most=""):
            off = int(mi[slot_]) + idx

            def set_(v):
                mf[off] = v
                if after_set is not None:
                    after_set()

            return Param(name, unit, lo, hi, doc, lambda: float(mf[off]), set_, at_most=at_most)

        def lag_changed():
            # the lag factors are cached per sub-step length; NaN never equals h, so they are recomputed
            df[int(mi[L.DF_EXP_H])] = math.nan

        out = [slot(f"shaft.{s}.drag", "N m s/rad", 0.0, 1e9, f"viscous drag of shaft {s} to ground", L.MF_DRAG, j)
               for j, s in enumerate(self.core.spec.shaft_names)]
        for i, row in enumerate(self.core.spec.rows):
            r = row.name
            out += [
                slot(f"row.{r}.gain_static", "1", 0.0, 1e9, f"static capacity of {r} per unit normal force",
                     L.MF_GAIN_STATIC, i),
                slot(f"row.{r}.gain_kinetic", "1", 0.0, 1e9,
                     f"Coulomb amplitude of {r} per unit normal force (<= gain_static)", L.MF_GAIN_KINETIC, i,
                     at_most=f"row.{r}.gain_static"),
                slot(f"row.{r}.viscous", "force/(row speed)", 0.0, 1e9, f"viscous drag across {r}", L.MF_ROW_VISC, i),
                slot(f"row.{r}.act_lag_s", "s", 0.0, 10.0, f"first-order lag of the actuator of {r}", L.MF_ACT_LAG,
                     i, lag_changed),
            ]
        return out
