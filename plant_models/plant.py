"""Plants: a friction core plus named, unit-carrying input and output ports.

A plant (Drake's "system") declares its input and output signals with name,
unit, range and default.  Transports (CAN, ZeroMQ, the offline simulator)
never see the core: they write ``plant.u`` (and ``plant.u_rate`` for a
first-order hold) by index and read ``plant.y`` by index, indices resolved
once from the signal names at start-up.  ``plant.step(dt)`` is one call into
compiled code that maps the inputs to the core, steps it and writes the
outputs; it allocates nothing.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, ClassVar

import numpy as np

from .core import layout as L
from .core import Core, CoreSpec
from .errors import InputError


@dataclass(frozen=True)
class Signal:
    """A named plant port.

    ``lo``/``hi`` is the accepted range of an input (commands outside it are
    rejected by the transports) or the physical range of an output (what a
    DBC signal must be able to carry).  ``integer`` marks discrete signals
    (gear numbers, flags).
    """

    name: str
    unit: str
    lo: float
    hi: float
    default: float = 0.0
    doc: str = ""
    integer: bool = False
    allowed: tuple[float, ...] = ()  # if given, the only accepted values (e.g. gear numbers)

    def validate(self, value) -> float:
        """``value`` as a float when it is acceptable for this input; else raise :class:`InputError`.

        Booleans, strings and other non-numbers are ``wrong_type``; the
        message names the signal and says exactly what is wrong.
        """
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError("wrong_type", f"{self.name}: expected a number, got {_type_name(value)}")
        try:
            v = float(value)
        except OverflowError:
            raise InputError("out_of_range", f"{self.name}: {value} outside [{self.lo:g}, {self.hi:g}] {self.unit}") from None
        if not math.isfinite(v):
            raise InputError("not_finite", f"{self.name}: not finite ({value})")
        if v < self.lo or v > self.hi:
            raise InputError("out_of_range", f"{self.name}: {value} outside [{self.lo:g}, {self.hi:g}] {self.unit}")
        if self.integer and v != round(v):
            raise InputError("not_allowed", f"{self.name}: must be a whole number, got {value}")
        if self.allowed and v not in self.allowed:
            raise InputError("not_allowed", f"{self.name}: {value} is not one of {', '.join(f'{a:g}' for a in self.allowed)}")
        return v

    def check(self, value: float) -> str | None:
        """Why ``value`` is not acceptable for this input, or None."""
        if isinstance(value, bool):
            value = float(value)
        if not isinstance(value, (int, float)):
            return f"{self.name}: expected a number, got {type(value).__name__}"
        v = float(value)
        if not math.isfinite(v):
            return f"{self.name}: not finite ({value})"
        if v < self.lo or v > self.hi:
            return f"{self.name}: {value} outside [{self.lo}, {self.hi}] {self.unit}"
        if self.integer and v != round(v):
            return f"{self.name}: must be a whole number, got {value}"
        if self.allowed and v not in self.allowed:
            return f"{self.name}: {value} is not one of {', '.join(f'{a:g}' for a in self.allowed)}"
        return None


def _type_name(value) -> str:
    """The type of a rejected value in the words of the wire formats (msgpack/TOML), for messages."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (bytes, bytearray)):
        return "binary"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "map"
    return type(value).__name__


def signal_table(signals) -> list[dict]:
    """Plain-data description of signals (for status replies and docs)."""
    return [dict(name=s.name, unit=s.unit, min=s.lo, max=s.hi, default=s.default, doc=s.doc,
                 integer=s.integer, allowed=list(s.allowed)) for s in signals]


class Plant(ABC):
    """Base class of all plants.

    Subclasses set ``kind``, build ``self.inputs`` / ``self.outputs`` and a
    :class:`CoreSpec`, fill the plant parameter blocks and provide a compiled
    ``step_fn(mf, mi, df, di, dt) -> status`` with an explicit signature.

    The plant's float data block in ``df`` is laid out as
    ``[u (n_in) | u_rate (n_in) | y (n_out) | plant state]``.
    """

    kind: ClassVar[str] = ""
    description: ClassVar[str] = ""
    # plant-specific status bits (above the core's ST_* bits) and their names
    extra_status_names: ClassVar[dict[int, str]] = {}

    def __init__(self, spec: CoreSpec, inputs: tuple[Signal, ...], outputs: tuple[Signal, ...],
                 step_fn: Callable, plant_nf: int = 0, plant_ni: int = 0, plant_nstate: int = 0,
                 plant_ndi: int = 0, source: str = ""):
        self.inputs = inputs
        self.outputs = outputs
        self.source = source
        self._step_fn = step_fn
        self.n_in = len(inputs)
        self.n_out = len(outputs)
        ndf = 2 * self.n_in + self.n_out + plant_nstate
        self.core = Core(spec, plant_nf=plant_nf, plant_ni=plant_ni, plant_ndf=ndf, plant_ndi=max(plant_ndi, 1))
        self._in_index = {s.name: k for k, s in enumerate(inputs)}
        self._out_index = {s.name: k for k, s in enumerate(outputs)}
        if len(self._in_index) != self.n_in or len(self._out_index) != self.n_out:
            raise ValueError("signal names must be unique")
        self._bind_views()

    def _bind_views(self) -> None:
        blk = self.core.plant_df
        self.u = blk[:self.n_in]
        self.u_rate = blk[self.n_in:2 * self.n_in]
        self.y = blk[2 * self.n_in:2 * self.n_in + self.n_out]
        self.plant_state = blk[2 * self.n_in + self.n_out:]
        self.mf, self.mi, self.df, self.di = self.core.mf, self.core.mi, self.core.df, self.core.di

    @property
    def input_offset(self) -> int:
        """Index in ``df`` of input 0; the inputs' rates follow at ``input_offset + n_in``.

        For compiled transports (the CAN codec) that write commands into the
        data buffer by offset instead of through the ``u`` view.
        """
        return int(self.mi[L.DF_PLANT])

    @property
    def output_offset(self) -> int:
        """Index in ``df`` of output 0 (compiled transports read ``y`` there)."""
        return self.input_offset + 2 * self.n_in

    # -- ports -------------------------------------------------------------
    def input_index(self, name: str) -> int:
        try:
            return self._in_index[name]
        except KeyError:
            raise KeyError(f"{self.kind}: no input signal {name!r}; inputs are {', '.join(self._in_index)}") from None

    def output_index(self, name: str) -> int:
        try:
            return self._out_index[name]
        except KeyError:
            raise KeyError(f"{self.kind}: no output signal {name!r}; outputs are {', '.join(self._out_index)}") from None

    def input_signal(self, name: str) -> Signal:
        return self.inputs[self.input_index(name)]

    def output_signal(self, name: str) -> Signal:
        return self.outputs[self.output_index(name)]

    def set_input(self, name: str, value: float, rate: float = 0.0) -> None:
        """Set one input by name after validating it (not for the real-time tick)."""
        k = self.input_index(name)
        err = self.inputs[k].check(value)
        if err:
            raise ValueError(err)
        self.u[k] = float(value)
        self.u_rate[k] = float(rate)

    def output_dict(self) -> dict[str, float]:
        return {s.name: float(self.y[k]) for k, s in enumerate(self.outputs)}

    def input_dict(self) -> dict[str, float]:
        return {s.name: float(self.u[k]) for k, s in enumerate(self.inputs)}

    def set_defaults(self) -> None:
        for k, s in enumerate(self.inputs):
            self.u[k] = s.default
        self.u_rate[:] = 0.0

    # -- life cycle -----------------------------------------------------------
    def reset(self, inputs: dict[str, float] | None = None) -> int:
        """Back to the configured initial state at t = 0.

        Inputs are set to their defaults, then to ``inputs``; actuators start
        settled at those commands.  Returns the status word of the start.
        """
        self.core.reset()
        self._bind_views()
        self.set_defaults()
        for name, value in (inputs or {}).items():
            self.set_input(name, value)
        self._initial_state()
        return self.start()

    @abstractmethod
    def _initial_state(self) -> None:
        """Set initial speeds, actuator states and engaged rows."""

    def start(self) -> int:
        """Engage the initially engaged rows and compute outputs at the current time."""
        st = self._start_fn()
        return st

    def _start_fn(self) -> int:
        """Plants override when they need their own start logic (default: engage nothing)."""
        return self.core.start([])

    def step(self, dt: float) -> int:
        """One fixed step; returns the status word.  Called in the real-time loop."""
        return self._step_fn(self.mf, self.mi, self.df, self.di, dt)

    def status_names(self, status: int) -> list[str]:
        """Names of the status bits set in a step's status word (core and plant bits)."""
        names = L.status_names(status)
        names += [name for bit, name in self.extra_status_names.items() if status & bit]
        return names

    @property
    def time(self) -> float:
        return float(self.core.time[0])

    def row_names(self) -> list[str]:
        return [r.name for r in self.core.spec.rows]

    def new_events(self) -> list[dict]:
        """Stick / breakaway / reversal events since the last call (not for the real-time tick)."""
        names = self.row_names()
        return [dict(time=t, clutch=names[r], row=r, type=L.EVENT_NAMES.get(k, str(k)))
                for t, r, k in self.core.new_events()]

    def get_state(self):
        """A complete copy of the plant's data; :meth:`set_state` resumes bit-exactly."""
        return self.core.get_state()

    def set_state(self, state) -> None:
        self.core.set_state(state)

    def describe(self) -> dict:
        return dict(kind=self.kind, description=self.description, source=self.source,
                    inputs=signal_table(self.inputs), outputs=signal_table(self.outputs),
                    clutches=self.row_names())


def pressure_capacity_gains(mean_radius_m: float, surfaces: int, mu_static: float, mu_kinetic: float,
                            gear_radius_m: float) -> tuple[float, float]:
    """Static and Coulomb force per newton of normal force at the gear mesh (seed 003, section 5).

    ``K = F_N * eta_s * n_c * r_m / r_c`` and ``k = F_N * eta_c * n_c * r_m / r_c``.
    For rows written in torque units (coefficients 1 and a ratio) use
    ``gear_radius_m = 1``: the result is then the clutch torque per newton.
    """
    return (mu_static * surfaces * mean_radius_m / gear_radius_m,
            mu_kinetic * surfaces * mean_radius_m / gear_radius_m)


BAR = 1.0e5  # Pa per bar
