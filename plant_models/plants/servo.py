"""Electro-hydraulic position servo with load-dependent dry friction and hard stops.

The flap actuator of Borello & Dalla Vedova, "A dry friction model and
robust computational algorithm for reversible or irreversible motion
transmissions", sections 3-6: a
proportional position controller drives a two-stage servovalve, the valve
feeds a hydraulic motor, and the motor moves a control surface through a
transmission whose dry friction depends on the load through two
efficiencies.  The surface travels between two mechanical hard stops.  One
degree of freedom; it does not use the shaft/row friction core but its own
fixed-step algorithm (the paper's Table 1), compiled into one step function
on buffers of its own (a :class:`~plant_models.contract.compiled.CompiledPlant`).

The compiled step and the layout of the buffers it works on (parameters
``PF_*``, ports, data ``DF_*`` / ``DI_*``, event kinds) are in
:mod:`.servo_kernel` (why apart: there); this module holds the parameters'
dataclass and the plant class.

Signs: positions, rates and torques are positive in the deploy direction.
A positive ``load_torque`` T_LD acts against positive motion (the
aerodynamic hinge moment of a deploying flap): it *opposes* a positive rate
and *aids* a negative one.

Model, per internal sub-step of length h (the plant step dt is split into
``ceil(dt / internal_step_s)`` equal sub-steps; inputs follow a first-order
hold over dt):

Controller (pure proportional law, as in the paper's runs)
    ``Err = Com - XJ``, ``Cor = sat(G_amp * Err, +-I_max)`` [A].
Servovalve first stage (second order, flapper stops +-XF_max)
    ``XF'' = wF^2 (G_F (Cor - XS / K_XS) - XF) - 2 zF wF XF'``: the torque
    motor moves the flapper in proportion to the current minus the spool's
    feedback spring, which makes the spool position proportional to the
    current in steady state (``XS = K_XS * Cor``).
Second stage (first order: integrator, spool stops +-XS_max)
    ``XS' = G_S * XF`` (the flapper's differential nozzle pressure moves the
    spool); with the feedback loop the spool follows the current with the
    time constant ``K_XS / (G_S G_F)``.
Pressure (the paper's simplification: pressure gain with saturation, losses
from the total flow)
    ``P12 = sat(G_P XS, +-PSR) - R_Q (Q_J + Q_L)``, ``Q_J = Dis * DXJ``,
    ``Q_L = C_L * P12`` (leakage through the piston seals), hence
    ``P12 = (sat(G_P XS, +-PSR) - R_Q Dis DXJ) / (1 + R_Q C_L)``.  ``R_Q =
    G_P / G_Q`` is the valve's pressure-flow coefficient; the supply-return
    pressure PSR is an input.
Motor and transmission (Table 1)
    ``T_M = Dis * P12``; ``Act = T_M - T_LD - C_M DXJ``;
    ``FDO = T_FR0 + (1/EtO - 1)|T_LD|`` (opposing load, eq. 3),
    ``FDA = T_FR0 + (1 - EtA)|T_LD|`` (aiding load, eq. 4).
    Moving (DXJ != 0): ``T_FR = sign(DXJ) FDO``, or ``sign(DXJ) FDA`` when the
    load aids the motion (DXJ * T_LD < 0).
    At rest: ``T_FR = clamp(Act, -FSD*FDA, FSD*FDO)`` for T_LD >= 0 and
    ``clamp(Act, -FSD*FDO, FSD*FDA)`` for T_LD < 0, i.e. the static limit of
    the breakaway direction (statements 8-9).
    ``D2XJ = (Act - T_FR) / J_M``; a velocity sign change inside a sub-step
    stops the element (statement 14; the next sub-step decides between
    staying stuck and breaking away the other way); the position is
    integrated with the trapezoidal rule and clamped to the hard stops,
    where the impact is inelastic and only motion away from the stop is kept
    (statements 15-17).

One deviation from the listing, for robustness: the two velocity-
proportional torques (C_M DXJ and the valve's pressure-flow loss
``Dis^2 R_Q / (1 + R_Q C_L) * DXJ``) are integrated implicitly (linearly
implicit Euler), so a sub-step stays stable for any inertia; everything else
is the explicit fixed step of Table 1.  With that loss the valve damps the
surface far more than C_M does (about 1e6 N m s/rad with the defaults).

EtO must lie in (0, 1]; EtA <= 1: 0 < EtA <= 1 is a reversible
transmission, EtA <= 0 an irreversible one (the load alone cannot move it:
with EtA = -0.5 the friction produced by a load is 1.5 times the load).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..contract.vocabulary import CNT_EVENTS, N_COUNTERS, SHARED_STATUS
from ..core.api import BUFS
from ..plant import CompiledPlant, EventRing, Kernel, Param
from .servo_kernel import (DEG, DF_EV_TIME, DF_LEN, DF_STATE, DF_TIME, DF_U, DI_AT_STOP, DI_COUNTERS, DI_EV_KIND,
                           DI_EV_SOURCE, DI_LEN, DI_STUCK, EVENTS, EVENT_CAPACITY, EVENT_NAMES, EVENT_SOURCES, INPUTS,
                           IN_COMMAND, N_STATE, OUTPUTS, PF_AMP_GAIN, PF_CLEAK, PF_CURRENT_MAX, PF_DIS, PF_ETA, PF_ETO,
                           PF_FSD, PF_GF, PF_GP, PF_GS, PF_H_MAX, PF_INERTIA, PF_KXS, PF_LEN, PF_RQ, PF_TFR0,
                           PF_VISCOUS, PF_WF, PF_XF_MAX, PF_XJ_MAX, PF_XJ_MIN, PF_XS_MAX, PF_ZF, S_X, servo_refresh,
                           servo_step)


@dataclass(frozen=True)
class ServoParams:
    """Validated parameters of the servo actuator, SI units (angles in rad)."""

    amp_gain_A_per_rad: float
    current_max_A: float
    first_stage_freq_rad_s: float
    first_stage_damping: float
    flapper_gain_m_per_A: float
    flapper_travel_m: float
    spool_velocity_gain_per_s: float
    spool_per_current_m_per_A: float
    spool_travel_m: float
    pressure_gain_Pa_per_m: float
    pressure_flow_Pa_s_per_m3: float
    leakage_m3_per_s_Pa: float
    displacement_m3_per_rad: float
    inertia_kg_m2: float
    viscous_N_m_s_per_rad: float
    friction_load_independent_N_m: float
    efficiency_opposing: float
    efficiency_aiding: float
    static_to_dynamic: float
    travel_min_rad: float
    travel_max_rad: float
    internal_step_s: float = 1.0e-5
    supply_nominal_MPa: float = 26.0

    def validate(self, where=None) -> None:
        """Raise ValueError (or the reader's ConfigError, when ``where`` is given) on bad values."""
        def bad(key, problem):
            if where is not None:
                raise where(key, problem)
            raise ValueError(f"{key}: {problem}")

        if not (0.0 < self.efficiency_opposing <= 1.0):
            bad("efficiency_opposing", f"must lie in (0, 1] so that the motor can drive the load, "
                f"got {self.efficiency_opposing}")
        if not (-10.0 <= self.efficiency_aiding <= 1.0):
            bad("efficiency_aiding", f"must lie in [-10, 1] (> 0 reversible, <= 0 irreversible), "
                f"got {self.efficiency_aiding}")
        if not self.static_to_dynamic >= 1.0:
            bad("static_to_dynamic_ratio", f"must be >= 1, got {self.static_to_dynamic}")
        if not self.travel_min_rad < self.travel_max_rad:
            bad("travel_max_deg", "must be greater than travel_min_deg")
        if not (1e-7 <= self.internal_step_s <= 1e-3):
            bad("internal_step_s", f"must lie in [1e-7, 1e-3] s, got {self.internal_step_s}")
        # the explicit first stage needs wF h well inside its stability limit
        if self.first_stage_freq_rad_s * self.internal_step_s > 0.5:
            bad("internal_step_s", f"too long for the first stage: 2 pi f h = "
                f"{self.first_stage_freq_rad_s * self.internal_step_s:.3g} must be <= 0.5")

    @property
    def reversible(self) -> bool:
        return self.efficiency_aiding > 0.0


# ==========================================================================
# plant
# ==========================================================================
class ServoActuatorPlant(CompiledPlant):
    """Electro-hydraulic flap servo with load-dependent dry friction and hard stops (Borello & Dalla Vedova)."""

    kind = "servo"
    description = ("Electro-hydraulic position servo: proportional control, two-stage servovalve, "
                   "load-dependent dry friction with efficiencies, hard stops (Borello & Dalla Vedova)")
    params_type = ServoParams
    input_ports = INPUTS
    output_ports = OUTPUTS
    kernels = (Kernel("step", servo_step, "int64(" + BUFS + ", float64)"),
               Kernel("refresh", servo_refresh, "int64(" + BUFS + ")"))
    status_bits = SHARED_STATUS  # the step sets only the shared bits (bad_input, nonfinite_rolled_back)
    event_kinds = EVENTS

    def __init__(self, params: ServoParams, source: str = ""):
        params.validate()
        super().__init__(params, source)
        p = params
        mf = self.mf
        mf[PF_AMP_GAIN] = p.amp_gain_A_per_rad
        mf[PF_CURRENT_MAX] = p.current_max_A
        mf[PF_WF] = p.first_stage_freq_rad_s
        mf[PF_ZF] = p.first_stage_damping
        mf[PF_GF] = p.flapper_gain_m_per_A
        mf[PF_XF_MAX] = p.flapper_travel_m
        mf[PF_GS] = p.spool_velocity_gain_per_s
        mf[PF_KXS] = p.spool_per_current_m_per_A
        mf[PF_XS_MAX] = p.spool_travel_m
        mf[PF_GP] = p.pressure_gain_Pa_per_m
        mf[PF_RQ] = p.pressure_flow_Pa_s_per_m3
        mf[PF_CLEAK] = p.leakage_m3_per_s_Pa
        mf[PF_DIS] = p.displacement_m3_per_rad
        mf[PF_INERTIA] = p.inertia_kg_m2
        mf[PF_VISCOUS] = p.viscous_N_m_s_per_rad
        mf[PF_TFR0] = p.friction_load_independent_N_m
        mf[PF_ETO] = p.efficiency_opposing
        mf[PF_ETA] = p.efficiency_aiding
        mf[PF_FSD] = p.static_to_dynamic
        mf[PF_XJ_MIN] = p.travel_min_rad
        mf[PF_XJ_MAX] = p.travel_max_rad
        mf[PF_H_MAX] = p.internal_step_s
        self._events = EventRing(self.df, self.di, DF_EV_TIME, DI_EV_SOURCE, DI_EV_KIND,
                                 DI_COUNTERS + CNT_EVENTS, EVENT_CAPACITY)
        self.reset()

    @classmethod
    def description_of(cls, params: ServoParams, source: str = "") -> dict:
        d = super().description_of(params, source)
        d["transmission"] = "reversible" if params.reversible else "irreversible"
        return d

    # -- buffers -------------------------------------------------------------------------------------
    def _allocate(self):
        return np.zeros(PF_LEN), np.zeros(1, dtype=np.int64), np.zeros(DF_LEN), np.zeros(DI_LEN, dtype=np.int64)

    @property
    def input_offset(self) -> int:
        return DF_U

    def _clear(self) -> None:
        self.df[:] = 0.0
        self.di[:] = 0
        self._events.clear()

    # -- life cycle ----------------------------------------------------------------------------------
    def _initial_state(self) -> None:
        """At rest at the commanded position (clamped to the stops), servovalve settled at null."""
        p = self.params
        x = min(max(float(self.u[IN_COMMAND]) * DEG, p.travel_min_rad), p.travel_max_rad)
        self.df[DF_STATE:DF_STATE + N_STATE] = 0.0
        self.df[DF_STATE + S_X] = x
        self.di[DI_STUCK] = 1
        self.di[DI_AT_STOP] = -1 if x <= p.travel_min_rad else (1 if x >= p.travel_max_rad else 0)

    def start(self) -> int:
        self.compiled["refresh"](self.mf, self.mi, self.df, self.di)
        return 0

    @property
    def time(self) -> float:
        return float(self.df[DF_TIME])

    @property
    def counters(self) -> np.ndarray:
        return self.di[DI_COUNTERS:DI_COUNTERS + N_COUNTERS]

    @property
    def state(self) -> np.ndarray:
        """The state block (view): rate, position, valve states and the last torques, see ``S_*``."""
        return self.df[DF_STATE:DF_STATE + N_STATE]

    def _drain_events(self) -> list[tuple[float, int, int]]:
        return self._events.drain()

    @property
    def events_lost(self) -> int:
        """Events overwritten in the ring log before they were read, since the last reset."""
        return self._events.lost

    def event_log(self) -> tuple[int, int, int, int, int]:
        return DF_EV_TIME, DI_EV_SOURCE, DI_EV_KIND, DI_COUNTERS + CNT_EVENTS, EVENT_CAPACITY

    def mark_events_read(self) -> None:
        self._events.mark_all_read()

    def name_events(self, raw: list[tuple[float, int, int]]) -> list[dict]:
        """Stick / breakaway / hard-stop events, named by their source (shaft, stop)."""
        out = []
        for t, r, k in raw:
            src = EVENT_SOURCES[r] if 0 <= r < len(EVENT_SOURCES) else str(r)
            # 'clutch' names the element for tools written for the clutch plants
            out.append(dict(time=t, clutch=src, source=src, row=r, type=EVENT_NAMES.get(k, str(k))))
        return out

    def set_state(self, state) -> None:
        df, di = state
        if df.shape != self.df.shape or di.shape != self.di.shape:
            raise ValueError("state does not belong to this plant")
        self.df[:] = df
        self.di[:] = di
        self._events.mark_all_read()

    def tunable_parameters(self) -> list[Param]:
        """Friction and controller parameters a running server may change (read afresh every sub-step)."""
        mf = self.mf

        def slot(name, unit, lo, hi, doc, idx):
            return Param(name, unit, lo, hi, doc, lambda: float(mf[idx]), lambda v: mf.__setitem__(idx, v))

        return [
            # C_M, named as the viscous drag of a shaft like the friction plants' shafts
            slot("shaft.surface.drag", "N m s/rad", 0.0, 1e9, "viscous drag of shaft surface to ground", PF_VISCOUS),
            slot("friction.efficiency_opposing", "-", 1e-3, 1.0, "EtO, efficiency with an opposing load (eq. 3)",
                 PF_ETO),
            slot("friction.efficiency_aiding", "-", -10.0, 1.0,
                 "EtA, efficiency with an aiding load (eq. 4); <= 0 irreversible", PF_ETA),
            slot("friction.static_to_dynamic_ratio", "-", 1.0, 10.0, "FSD, static / dynamic friction", PF_FSD),
            slot("friction.load_independent", "N m", 0.0, 1.0e7, "T_FR0, load-independent friction torque", PF_TFR0),
            slot("controller.gain", "A/rad", 0.0, 100.0, "servo-amplifier gain (proportional law)", PF_AMP_GAIN),
        ]
