"""Two inertias joined by a viscous coupling, stepped in plain Python: the example of a plant without compiled code.

What a plant whose step is foreign code (an FMU, a co-simulation slave)
looks like to the server: a :class:`~plant_models.contract.plant.Plant`
that keeps its ports in a data buffer ``df`` (the state ring, the CAN codec
and signal faults address them there by offset), steps in Python, and
reports in the shared vocabulary.  It runs offline (through
:class:`plant_models.offline.StepwiseRun`), in lockstep and in real time.

Model: shaft 1 (inertia J1) and shaft 2 (J2), external torques T1 and T2
(first-order hold over a step: ``T + rate * s``), a viscous coupling that
passes ``c * (w1 - w2)`` from shaft 1 to shaft 2, no drag to ground.  In
the momentum ``p = J1 w1 + J2 w2`` and the slip ``d = w1 - w2``::

    p' = T1 + T2
    d' = -a d + T1 / J1 - T2 / J2,     a = c (1 / J1 + 1 / J2)

Both are integrated exactly over a step for inputs linear in time (the
first-order hold), so a run with constant or ramped torques equals the
closed form to rounding.  A change of sign of the slip is logged as the
shared ``reversal`` event of source 0 (``coupling``), at the time linear
interpolation of the slip gives.

Not a built-in kind (it has no config file, figures or CAN mapping):
a program registers it with :func:`plant_models.registry.register` and
builds it from :class:`ViscousCouplingParams`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..contract.columns import Columns
from ..contract.plant import EventRing, Plant
from ..contract.ports import Param, Ports
from ..contract.vocabulary import (CNT_EVENTS, CNT_ROLLBACKS, CNT_STEPS, EV_REVERSAL, N_COUNTERS, SHARED_EVENTS,
                                   SHARED_STATUS, ST_BAD_INPUT, ST_NONFINITE, ST_OK)


@dataclass(frozen=True)
class ViscousCouplingParams:
    """Parameters of the two coupled inertias, SI units."""

    inertia_1_kg_m2: float = 0.2  # J1
    inertia_2_kg_m2: float = 0.5  # J2
    coupling_N_m_s_per_rad: float = 0.4  # c: torque passed from shaft 1 to shaft 2 per rad/s of slip
    speed_1_rad_s: float = 0.0  # initial speed of shaft 1
    speed_2_rad_s: float = 0.0  # initial speed of shaft 2
    event_capacity: int = 256  # events kept in the ring log until read

    def __post_init__(self):
        for name in ("inertia_1_kg_m2", "inertia_2_kg_m2"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0.0):
                raise ValueError(f"{name}: must be a positive number, got {v}")
        c = self.coupling_N_m_s_per_rad
        if not (math.isfinite(c) and 0.0 <= c <= 1.0e6):
            raise ValueError(f"coupling_N_m_s_per_rad: must lie in [0, 1e6], got {c}")
        if not (math.isfinite(self.speed_1_rad_s) and math.isfinite(self.speed_2_rad_s)):
            raise ValueError("initial speeds must be finite")
        if self.event_capacity < 1:
            raise ValueError(f"event_capacity: must be at least 1, got {self.event_capacity}")


INPUTS = Ports()
IN_T1 = INPUTS.add("torque_1", "N m", -1.0e4, 1.0e4, 0.0, "external torque on shaft 1, positive forward")
IN_T2 = INPUTS.add("torque_2", "N m", -1.0e4, 1.0e4, 0.0, "external torque on shaft 2, positive forward")
N_IN = len(INPUTS)

OUTPUTS = Ports()
OUT_W1 = OUTPUTS.add("w_1", "rad/s", -1.0e4, 1.0e4, 0.0, "speed of shaft 1")
OUT_W2 = OUTPUTS.add("w_2", "rad/s", -1.0e4, 1.0e4, 0.0, "speed of shaft 2")
OUT_SLIP = OUTPUTS.add("slip", "rad/s", -2.0e4, 2.0e4, 0.0, "w_1 - w_2")
OUT_TORQUE = OUTPUTS.add("coupling_torque", "N m", -1.0e6, 1.0e6, 0.0,
                         "torque the coupling passes from shaft 1 to shaft 2, c * slip")
OUT_STATUS = OUTPUTS.add("status", "-", 0, 2 ** 16, 0, "step status bits (bad_input 32, nonfinite_rolled_back 16)",
                         integer=True)
N_OUT = len(OUTPUTS)

# -- the buffers (numpy arrays; nothing is compiled) ----------------------------------------------------------
MODEL_FLOATS = Columns("the model floats", (
    ("MF_COUPLING", "c, N m s/rad (tunable: the step reads it afresh)"),
), count="MF_LEN")
DATA_FLOATS = Columns("the data floats", (
    ("DF_TIME", "simulated time, s"),
    ("DF_U", "[N_IN] inputs, then [N_IN] their rates (per s), then [N_OUT] outputs", 2 * N_IN + N_OUT),
    ("DF_P", "momentum J1 w1 + J2 w2, N m s"),
    ("DF_D", "slip w1 - w2, rad/s"),
    ("DF_EV_TIME", "[event_capacity] event times, s", 0),
))
DATA_INTS = Columns("the data ints", (
    ("DI_COUNTERS", "[N_COUNTERS] steps, events, ..., rollbacks (contract.vocabulary.CNT_*)", N_COUNTERS),
    ("DI_EV_SOURCE", "[event_capacity] event source (0: the coupling); the event kinds follow the sources", 0),
))
globals().update(MODEL_FLOATS.constants())  # MF_COUPLING; MF_LEN
globals().update(DATA_FLOATS.constants())  # DF_TIME .. DF_EV_TIME
globals().update(DATA_INTS.constants())  # DI_COUNTERS, DI_EV_SOURCE


def _phi(a: float, h: float) -> tuple[float, float, float]:
    """``exp(-a h)``, ``int_0^h exp(-a (h - s)) ds`` and ``int_0^h exp(-a (h - s)) s ds`` for a >= 0.

    The responses of ``d' = -a d + b`` over a step to d(0), a constant b and
    b = s; a series where ``a h`` is small (no cancellation).
    """
    x = a * h
    if x < 1e-4:
        phi1 = h * (1.0 - x / 2.0 + x * x / 6.0 - x * x * x / 24.0)
        phi2 = h * h * (0.5 - x / 6.0 + x * x / 24.0 - x * x * x / 120.0)
    else:
        phi1 = -math.expm1(-x) / a
        phi2 = (h - phi1) / a
    return math.exp(-x), phi1, phi2


class ViscousCouplingPlant(Plant):
    """Two inertias joined by a viscous coupling, stepped in Python (exact for first-order-hold torques)."""

    kind = "viscous_coupling"
    description = "Two inertias joined by a viscous coupling; a plain-Python step (the example of a non-compiled plant)"
    params_type = ViscousCouplingParams
    input_ports = INPUTS
    output_ports = OUTPUTS
    status_bits = SHARED_STATUS  # the step sets only the shared bits
    event_kinds = SHARED_EVENTS  # a change of the slip's sign is the shared reversal

    def __init__(self, params: ViscousCouplingParams, source: str = ""):
        self._cap = params.event_capacity
        super().__init__(params, source)
        self.mf[MF_COUPLING] = params.coupling_N_m_s_per_rad  # noqa: F821
        self._j1, self._j2 = params.inertia_1_kg_m2, params.inertia_2_kg_m2
        self._events = EventRing(self.df, self.di, DF_EV_TIME, DI_EV_SOURCE, DI_EV_SOURCE + self._cap,  # noqa: F821
                                 DI_COUNTERS + CNT_EVENTS, self._cap)  # noqa: F821
        self.reset()

    @classmethod
    def clutch_names(cls, params) -> list[str]:
        return ["coupling"]  # the source of the events

    # -- buffers -------------------------------------------------------------------------------------
    def _allocate_data(self):
        return (np.zeros(MF_LEN), np.zeros(DF_EV_TIME + self._cap),  # noqa: F821
                np.zeros(DI_EV_SOURCE + 2 * self._cap, dtype=np.int64))  # noqa: F821

    @property
    def input_offset(self) -> int:
        return DF_U  # noqa: F821

    # -- life cycle ----------------------------------------------------------------------------------
    def _clear(self) -> None:
        self.df[:] = 0.0
        self.di[:] = 0
        self._events.clear()

    def _initial_state(self) -> None:
        p = self.params
        self.df[DF_P] = self._j1 * p.speed_1_rad_s + self._j2 * p.speed_2_rad_s  # noqa: F821
        self.df[DF_D] = p.speed_1_rad_s - p.speed_2_rad_s  # noqa: F821

    def start(self) -> int:
        self._outputs(ST_OK)
        return ST_OK

    def step(self, dt: float) -> int:
        """Inputs -> one exact step of momentum and slip -> outputs.  Called in the real-time loop."""
        df = self.df
        t1, t2 = df[DF_U + IN_T1], df[DF_U + IN_T2]  # noqa: F821
        r1, r2 = df[DF_U + N_IN + IN_T1], df[DF_U + N_IN + IN_T2]  # noqa: F821
        if not (dt > 0.0 and math.isfinite(dt) and math.isfinite(t1) and math.isfinite(t2)
                and math.isfinite(r1) and math.isfinite(r2)):
            df[DF_U + 2 * N_IN + OUT_STATUS] = float(ST_BAD_INPUT)  # noqa: F821 the state is untouched
            return ST_BAD_INPUT
        j1, j2 = self._j1, self._j2
        a = self.mf[MF_COUPLING] * (1.0 / j1 + 1.0 / j2)  # noqa: F821
        decay, phi1, phi2 = _phi(a, dt)
        d0 = df[DF_D]  # noqa: F821
        p = df[DF_P] + (t1 + t2) * dt + (r1 + r2) * (0.5 * dt * dt)  # noqa: F821
        d = d0 * decay + (t1 / j1 - t2 / j2) * phi1 + (r1 / j1 - r2 / j2) * phi2
        di = self.di
        di[DI_COUNTERS + CNT_STEPS] += 1  # noqa: F821
        if not (math.isfinite(p) and math.isfinite(d)):  # roll back: the state stays that before the step
            di[DI_COUNTERS + CNT_ROLLBACKS] += 1  # noqa: F821
            self._outputs(ST_NONFINITE)
            return ST_NONFINITE
        t0 = df[DF_TIME]  # noqa: F821
        if d0 * d < 0.0:
            self._events.log(t0 + dt * d0 / (d0 - d), 0, EV_REVERSAL)
        df[DF_P] = p  # noqa: F821
        df[DF_D] = d  # noqa: F821
        df[DF_TIME] = t0 + dt  # noqa: F821
        self._outputs(ST_OK)
        return ST_OK

    def _outputs(self, status: int) -> None:
        df = self.df
        p, d = df[DF_P], df[DF_D]  # noqa: F821
        j1, j2 = self._j1, self._j2
        y = DF_U + 2 * N_IN  # noqa: F821
        df[y + OUT_W1] = (p + j2 * d) / (j1 + j2)
        df[y + OUT_W2] = (p - j1 * d) / (j1 + j2)
        df[y + OUT_SLIP] = d
        df[y + OUT_TORQUE] = self.mf[MF_COUPLING] * d  # noqa: F821
        df[y + OUT_STATUS] = float(status)

    # -- reporting -----------------------------------------------------------------------------------
    @property
    def time(self) -> float:
        return float(self.df[DF_TIME])  # noqa: F821

    def time_index(self) -> int:
        return DF_TIME  # noqa: F821

    @property
    def counters(self) -> np.ndarray:
        return self.di[DI_COUNTERS:DI_COUNTERS + N_COUNTERS]  # noqa: F821

    def _drain_events(self) -> list[tuple[float, int, int]]:
        return self._events.drain()

    @property
    def events_lost(self) -> int:
        return self._events.lost

    def _restored(self) -> None:
        self._events.mark_all_read()

    def tunable_parameters(self) -> list[Param]:
        """The coupling (read afresh at every step); the inertias are not offered (they would change momentum)."""
        mf = self.mf
        return [Param("coupling.viscous", "N m s/rad", 0.0, 1.0e6, "viscous coupling c between the shafts",
                      lambda: float(mf[MF_COUPLING]), lambda v: mf.__setitem__(MF_COUPLING, v))]  # noqa: F821


__all__ = ["ViscousCouplingParams", "ViscousCouplingPlant"]
