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
from .contract.clutch_faults import CLUTCH_FAULTS, NEUTRAL_OVERLAY
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


# The row model floats a clutch fault changes (the base value of each is the tuned one), in the order of the
# columns of FrictionPlant._tuned.
_FAULTED_SLOTS = (L.MF_GAIN_STATIC, L.MF_GAIN_KINETIC, L.MF_ACT_PRELOAD, L.MF_ACT_LAG, L.MF_KIN_CAP)
T_GAIN_STATIC, T_GAIN_KINETIC, T_PRELOAD, T_LAG, T_KIN_CAP = range(5)
# columns of the fault overlay of a row (FrictionPlant.set_clutch_overlay)
O_CAPACITY, O_STATIC, O_LAG, O_PRELOAD = range(4)  # (NEUTRAL_OVERLAY: no fault; contract/clutch_faults.py)
PA_PER_BAR = 1.0e5  # the pressure inputs are in bar


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
    * the step and refresh kernels, made from the one sequence of
      :mod:`plant_models.plants.friction_step` (inputs -> core step ->
      outputs; a refused step reports only that) as the plant module's own
      functions, after its ``_inputs`` and ``_outputs``::

          x_step, x_refresh = friction_step.plant_kernels(globals(), "x")

    A plant whose clutches may carry hydraulics (the transmission, the
    Powershift, the DCT plant) mixes in
    :class:`plant_models.powertrain.hydraulics_plant.HydraulicsPlant` and
    defines the sequence's optional stages ``_before_core`` (the compiled
    ``hydraulics_before``) and ``_after_core`` (``hydraulics_after``, after
    an accepted core step), each acting only when its hydraulics' data offset
    is >= 0 -- the Powershift and the DCT take the two written once in
    :func:`plant_models.plants.friction_step.hydraulics_stages`; the
    transmission's ``_before_inputs`` lets its powertrain sample once per
    step.

    ``@njit(**JIT)`` carries no signature: the kernels compile (or load from
    numba's cache) at the first reset, in :meth:`CompiledPlant.compile_kernels`.
    """

    status_bits = CORE_STATUS
    event_kinds = SHARED_EVENTS  # the core logs stick, breakaway and reversal
    # the faults of its clutches (docs/faults.md): kinds, checks and the overlay they put on set_clutch_overlay
    fault_declarations = (CLUTCH_FAULTS,)
    plant_nf: ClassVar[int] = 0  # plant float parameters (MF_PLANT block)
    # its _outputs writes no port at a step with L.RUN_OUTPUTS_UNREAD in the run hints (CompiledPlant.run_hints_slot)
    skips_unread_outputs: ClassVar[bool] = False
    plant_ni: ClassVar[int] = 0  # plant int parameters (MI_PLANT block)
    plant_ndi: ClassVar[int] = 0  # plant int data (DI_PLANT block)

    def __init__(self, params: Any, source: str = ""):
        self.spec = self.build_spec(params)
        super().__init__(params, source)
        self._fill_model()
        g = len(self.spec.rows)
        # The tuned (base) values of the row floats a clutch fault changes, and the fault overlay of each row:
        # the model floats the step reads are computed from both whenever either changes (_apply_row), so a
        # parameter tuned during a fault, and a fault cleared after a tuning, both leave the right value.
        self._tuned = np.array([[float(self.mf[int(self.mi[s]) + r]) for r in range(g)] for s in _FAULTED_SLOTS])
        self._overlay = np.tile(np.array(NEUTRAL_OVERLAY), (g, 1))
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
        nf, ndf, hold = self._extra_blocks()
        self.core = Core(self.spec, plant_nf=self.plant_nf + nf, plant_ni=self.plant_ni,
                         plant_ndf=2 * self.n_in + self.n_out + ndf, plant_ndi=max(self.plant_ndi, 1), act_hold=hold)
        return self.core.mf, self.core.mi, self.core.df, self.core.di

    def _extra_blocks(self) -> tuple[int, int, bool]:
        """Floats the plant adds after its parameter block (``plant_nf``) and after its ports in its data block,
        and whether the core may hold its rows' actuators on a ramp (``act_hold``, a clutch fill): none by
        default (:class:`plant_models.powertrain.hydraulics_plant.HydraulicsPlant` adds clutch hydraulics)."""
        return 0, 0, False

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

    def time_index(self) -> int:
        return int(self.mi[L.DF_TIME])

    @property
    def counters(self) -> np.ndarray:
        return self.core.counters

    def row_names(self) -> list[str]:
        return [r.name for r in self.core.spec.rows]

    def _drain_events(self) -> list[tuple[float, int, int]]:
        return self.core.new_events()

    def run_hints_slot(self) -> int:
        return int(self.mi[L.DI_FLAGS]) + L.FLAG_RUN_HINTS

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
        mf, mi = self.mf, self.mi

        def slot(name, unit, lo, hi, doc, slot_, idx, at_most=""):
            off = int(mi[slot_]) + idx

            def set_(v):
                mf[off] = v

            return Param(name, unit, lo, hi, doc, lambda: float(mf[off]), set_, at_most=at_most)

        def tuned(name, unit, lo, hi, doc, col, idx, at_most=""):
            # a row float a clutch fault may change: the parameter is its tuned value, under any fault overlay
            def set_(v):
                self._tuned[col, idx] = v
                self._apply_row(idx)

            return Param(name, unit, lo, hi, doc, lambda: float(self._tuned[col, idx]), set_, at_most=at_most)

        out = [slot(f"shaft.{s}.drag", "N m s/rad", 0.0, 1e9, f"viscous drag of shaft {s} to ground", L.MF_DRAG, j)
               for j, s in enumerate(self.core.spec.shaft_names)]
        for i, row in enumerate(self.core.spec.rows):
            r = row.name
            out += [
                tuned(f"row.{r}.gain_static", "1", 0.0, 1e9, f"static capacity of {r} per unit normal force",
                      T_GAIN_STATIC, i),
                tuned(f"row.{r}.gain_kinetic", "1", 0.0, 1e9,
                      f"Coulomb amplitude of {r} per unit normal force (<= gain_static)", T_GAIN_KINETIC, i,
                      at_most=f"row.{r}.gain_static"),
                slot(f"row.{r}.viscous", "force/(row speed)", 0.0, 1e9, f"viscous drag across {r}", L.MF_ROW_VISC, i),
                tuned(f"row.{r}.act_lag_s", "s", 0.0, 10.0, f"first-order lag of the actuator of {r}", T_LAG, i),
            ]
        return out

    # -- clutch faults: an overlay on the tuned row floats ---------------------------------------------
    def is_kinematic_row(self, row: int) -> bool:
        """Whether friction row ``row`` is a kinematic clutch (a shift time, no pressure lag)."""
        return self.spec.rows[row].kinematic_shift_time > 0

    def full_normal_force(self, row: int) -> float:
        """Normal force of row ``row`` at the top of its command range (its pressure input's upper bound), N.

        30 bar when the plant has no pressure input for the row (above any shipped clutch's range).
        """
        gain = float(self.mf[int(self.mi[L.MF_ACT_GAIN]) + row])
        name = self.row_names()[row]
        names = {s.name for s in self.inputs}
        for cand in (f"p_{name.lower()}", f"p_c{row + 1}"):
            if cand in names:
                return gain * self.input_signal(cand).hi * PA_PER_BAR
        return gain * 30.0 * PA_PER_BAR

    def clutch_overlay(self, row: int) -> tuple[float, float, float, float]:
        """The fault overlay of row ``row``: (capacity factor, static factor, lag factor, preload offset N)."""
        return tuple(float(v) for v in self._overlay[row])

    def set_clutch_overlay(self, row: int, capacity: float = 1.0, static: float = 1.0, lag: float = 1.0,
                           preload: float = 0.0) -> None:
        """Put a fault overlay on row ``row`` (the neutral values: none); between steps.

        The model floats of the row become: static gain = tuned x ``capacity``
        x ``static``; Coulomb gain and kinematic capacity = tuned x
        ``capacity``; actuator lag = tuned x ``lag``; actuator preload = tuned
        + ``preload`` (N).  The tuned values stay what ``set_params`` sets and
        ``get_params`` reports.
        """
        self._overlay[row] = (capacity, static, lag, preload)
        self._apply_row(row)

    def clear_clutch_overlays(self) -> None:
        """Every row back to its tuned values."""
        for r in range(self._overlay.shape[0]):
            if tuple(self._overlay[r]) != NEUTRAL_OVERLAY:
                self.set_clutch_overlay(r)

    def _apply_row(self, r: int) -> None:
        """Write row r's model floats from its tuned values and its overlay (between steps)."""
        t, (cap, stat, lag, pre) = self._tuned[:, r], self._overlay[r]
        values = (t[T_GAIN_STATIC] * cap * stat, t[T_GAIN_KINETIC] * cap, t[T_PRELOAD] + pre, t[T_LAG] * lag,
                  t[T_KIN_CAP] * cap)
        mf, mi = self.mf, self.mi
        lag_slot = int(mi[L.MF_ACT_LAG]) + r
        old_lag = float(mf[lag_slot])
        for s, v in zip(_FAULTED_SLOTS, values):
            mf[int(mi[s]) + r] = v
        if mf[lag_slot] != old_lag:
            # the lag factors are cached per sub-step length; NaN never equals h, so they are recomputed
            self.df[int(mi[L.DF_EXP_H])] = math.nan

    def tuned_state(self) -> np.ndarray:
        """A copy of the tuned row floats (rows: static gain, Coulomb gain, preload, lag, kinematic capacity).

        For a snapshot: the model floats (``mf``) carry the overlay, these are what it acts on.
        """
        return self._tuned.copy()

    def set_tuned_state(self, tuned: np.ndarray) -> None:
        """Restore :meth:`tuned_state` (the overlays are set again by whoever set them); ValueError if it does
        not fit this plant."""
        if not isinstance(tuned, np.ndarray) or tuned.shape != self._tuned.shape or tuned.dtype != self._tuned.dtype:
            raise ValueError("the tuned row floats do not fit this plant")
        self._tuned[:] = tuned

    def tuned_from_model(self, originals: dict[int, list[float]]) -> None:
        """The tuned values from the model floats, except the rows of ``originals`` (row -> the 5 tuned floats).

        For a snapshot of before the overlay (whose fault set kept the faulted rows' original floats).
        """
        mf, mi = self.mf, self.mi
        for c, s in enumerate(_FAULTED_SLOTS):
            self._tuned[c] = mf[int(mi[s]):int(mi[s]) + self._tuned.shape[1]]
        for r, vals in originals.items():
            self._tuned[:, int(r)] = vals
