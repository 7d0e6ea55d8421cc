"""Ports and parameters: what a plant offers the outside, each declared once with its unit and range.

A plant (Drake's "system") declares its input and output signals with name,
unit, range and default in one place (:class:`Ports`: the index of a port
is what its declaration returns), and the parameters a running server may
tune (:class:`Param`).  Transports (CAN, ZeroMQ, the offline simulator)
resolve signal names to indices once at start-up and never see how the
plant computes.

This module imports neither numba nor the friction core, so transports can
use :class:`Signal` without loading either.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable

from ..errors import InputError, ParamError


@dataclass(frozen=True)
class Signal:
    """A named plant port.

    ``lo``/``hi`` is the accepted range of an input (commands outside it are
    rejected by the transports) or the physical range of an output (what a
    DBC signal must be able to carry).  ``integer`` marks discrete signals
    (gear numbers, flags).

    In a :class:`Ports` declaration ``lo``, ``hi``, ``default`` and
    ``allowed`` may be functions of the plant's parameters (a range that
    depends on the configuration); :meth:`Ports.signals` evaluates them.
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
            raise InputError("wrong_type", f"{self.name}: expected a number, got {wire_type_name(value)}")
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


def wire_type_name(value) -> str:
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


class Ports:
    """The ordered ports of one direction, each declared once; a declaration returns the port's index.

    Drake's habit (``DeclareVectorInputPort`` returns the port): a plant
    module writes ::

        INPUTS = Ports()
        IN_ENGINE = INPUTS.add("engine_torque", "N m", -1000.0, 5000.0, 0.0, "engine torque on axle 1")
        IN_P = INPUTS.add_block(Signal(f"p_c{i + 1}", "bar", 0.0, 40.0) for i in range(8))

    and its compiled kernels use ``IN_ENGINE`` and ``IN_P + i`` (module-level
    ints are compile-time constants for numba), so the index a kernel uses
    and the signal a transport sees come from the same line.
    """

    def __init__(self) -> None:
        self._declared: list[Signal] = []

    def add(self, name: str, unit: str, lo, hi, default=0.0, doc: str = "", *, integer: bool = False,
            allowed=()) -> int:
        """Declare one port (the fields of :class:`Signal`); returns its index."""
        return self.add_block([Signal(name, unit, lo, hi, default, doc, integer, allowed)])

    def add_block(self, signals: Iterable[Signal]) -> int:
        """Declare consecutive ports; returns the index of the first (the others follow in order)."""
        first = len(self._declared)
        names = {s.name for s in self._declared}
        for s in signals:
            if s.name in names:
                raise ValueError(f"port {s.name!r} is declared twice")
            names.add(s.name)
            self._declared.append(s)
        return first

    def __len__(self) -> int:
        return len(self._declared)

    def formatted(self, **fields) -> list[Signal]:
        """The declared ports with ``{field}`` in names, units and docs filled in: one instance of a repeated block.

        ``CLUTCH.add("slip_c{c}", ...)`` declares the offset of a field inside
        every clutch's block; ``OUTPUTS.add_block(s for c in (1, 2) for s in
        CLUTCH.formatted(c=c))`` lays the blocks out one after the other.
        """
        return [replace(s, name=s.name.format(**fields), unit=s.unit.format(**fields), doc=s.doc.format(**fields))
                for s in self._declared]

    def signals(self, params: Any = None) -> tuple[Signal, ...]:
        """The declared ports as signals, with the fields given as functions evaluated for ``params``."""
        return tuple(_resolve(s, params) for s in self._declared)


def _resolve(s: Signal, params: Any) -> Signal:
    changes = {f: getattr(s, f)(params) for f in ("lo", "hi", "default", "allowed") if callable(getattr(s, f))}
    return replace(s, **changes) if changes else s


@dataclass(frozen=True)
class Param:
    """One parameter a running server may tune: how to read and write it, its unit and range.

    Only values the compiled step reads afresh at every step are offered, so
    a change takes effect at the next tick.  ``at_most`` names another
    parameter this one must not exceed (a Coulomb amplitude and its static
    capacity); the server checks it against the values a request leaves in
    place.
    """

    name: str
    unit: str
    lo: float
    hi: float
    doc: str
    get: Callable[[], float]
    set: Callable[[float], None]
    kind: str = "float"  # "float" or "bool"
    at_most: str = ""

    def validate(self, value) -> float:
        """``value`` as the float to write (a flag as 1.0 / 0.0); else raise :class:`ParamError`."""
        name = self.name
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise ParamError(f"{name}: expected true or false, got {type(value).__name__}")
            return 1.0 if value else 0.0
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ParamError(f"{name}: expected a number, got {type(value).__name__}")
        try:
            v = float(value)
        except OverflowError:
            raise ParamError(f"{name}: {value} outside [{self.lo:g}, {self.hi:g}] {self.unit}") from None
        if not math.isfinite(v):
            raise ParamError(f"{name}: not finite ({value})")
        if v < self.lo or v > self.hi:
            raise ParamError(f"{name}: {value} outside [{self.lo:g}, {self.hi:g}] {self.unit}")
        return v


__all__ = ["Param", "Ports", "Signal", "signal_table", "wire_type_name"]
