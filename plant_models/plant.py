"""Plants: named, unit-carrying ports on flat buffers, and compiled kernels that step them.

A plant (Drake's "system") declares its input and output signals with name,
unit, range and default, each in one place (:class:`Ports`: the index of a
port is what its declaration returns).  Transports (CAN, ZeroMQ, the offline
simulator) never see how the plant computes: they write ``plant.u`` (and
``plant.u_rate`` for a first-order hold) by index and read ``plant.y`` by
index, indices resolved once from the signal names at start-up.
``plant.step(dt)`` is one call into compiled code; it allocates nothing.

Like MuJoCo's ``(mjModel, mjData)`` pair, a plant keeps everything in four
flat buffers: ``mf``/``mi`` (the model: parameters, read-only while
stepping) and ``df``/``di`` (the data: time, ports, state, counters, event
log).  ``u``, ``u_rate`` and ``y`` are views into ``df``, in this order from
:attr:`Plant.input_offset`, so compiled transports can address them by
offset.  ``get_state``/``set_state`` copy the data buffers and resume
bit-exactly.

:class:`Plant` assumes nothing about how the step computes.  Plants on the
exact friction core derive from
:class:`plant_models.friction_plant.FrictionPlant`; a plant with an
integrator of its own (the servo actuator) derives from :class:`Plant`
directly and lays out its own buffers.

This module imports neither numba nor the friction core, so transports can
use :class:`Signal` without loading either.  A plant's compiled functions
(:class:`Kernel`) compile, or load from numba's cache, at the plant's first
:meth:`Plant.reset`, through :meth:`Plant.compile_kernels`; importing a
plant module, reading its parameters and building its ports compile
nothing.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import Any, Callable, ClassVar, Iterable

import numpy as np

from .errors import InputError, ParamError


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


# ids of the kernels compiled in this process (a dispatcher refuses a second compile once locked)
_COMPILED: set[int] = set()


@dataclass(frozen=True)
class Kernel:
    """A compiled function of a plant: a numba dispatcher and the one signature it is compiled for.

    ``function`` is made with ``@njit(**JIT)`` *without* a signature, so
    importing its module compiles nothing; :meth:`compile` compiles it (or
    loads it from numba's cache, ``cache=True``) for ``signature`` and then
    locks it, so a call with other argument types raises instead of
    compiling again in the middle of a run.
    """

    name: str  # what it does, for progress messages: "step", "refresh"
    function: Any  # numba dispatcher
    signature: str  # numba signature, e.g. "int64(float64[::1], int64[::1], float64[::1], int64[::1], float64)"

    @property
    def compiled(self) -> bool:
        """Whether :meth:`compile` already ran in this process."""
        return id(self.function) in _COMPILED

    def compile(self):
        """The dispatcher, compiled for ``signature`` (once per process)."""
        f = self.function
        if not self.compiled:
            f.compile(self.signature)
            f.disable_compile()
            _COMPILED.add(id(f))
        return f


class EventRing:
    """Reader of an event log a plant keeps as a ring in its own data buffers.

    Event ``q`` (counted from the last reset) sits at ring slot
    ``q % capacity``: its time (s) in ``df`` from ``time_at``, its source and
    kind (ints) in ``di`` from ``source_at`` / ``kind_at``; ``di[count_at]``
    counts every event logged.  Not for the real-time tick.
    """

    def __init__(self, df: np.ndarray, di: np.ndarray, time_at: int, source_at: int, kind_at: int, count_at: int,
                 capacity: int):
        self.times = df[time_at:time_at + capacity]
        self.sources = di[source_at:source_at + capacity]
        self.kinds = di[kind_at:kind_at + capacity]
        self.di = di
        self.count_at = count_at
        self.capacity = capacity
        self.read = 0
        self.lost = 0

    def clear(self) -> None:
        self.read = 0
        self.lost = 0

    def mark_all_read(self) -> None:
        """After a state was restored: events logged before it count as read, later ones are reported again."""
        self.read = int(self.di[self.count_at])

    def drain(self) -> list[tuple[float, int, int]]:
        """Events logged since the last call, as (time s, source, kind); overwritten ones count as lost."""
        E = self.capacity
        total = int(self.di[self.count_at])
        first = max(self.read, total - E)
        out = [(float(self.times[q % E]), int(self.sources[q % E]), int(self.kinds[q % E]))
               for q in range(first, total)]
        self.lost += first - self.read
        self.read = total
        return out


class Plant(ABC):
    """Base class of all plants: ports, buffers, kernels, reset / get_state / set_state, step.

    A subclass sets the class attributes ``kind``, ``description``,
    ``params_type`` (its frozen parameter dataclass), ``input_ports`` /
    ``output_ports`` (or overrides :meth:`signals` when the number of ports
    depends on the parameters) and ``kernels`` (one :class:`Kernel` named
    ``"step"`` with the signature ``int64(mf, mi, df, di, float64 dt)``, and
    any others it calls), and implements the buffer layout
    (:meth:`_allocate`, :attr:`input_offset`), :meth:`_clear`,
    :meth:`_initial_state`, :meth:`start`, :attr:`time`, :attr:`counters`,
    :meth:`_drain_events`, and :meth:`event_log` / :meth:`mark_events_read`
    (for the compiled offline run, which reads the event log itself).
    """

    kind: ClassVar[str] = ""
    description: ClassVar[str] = ""
    params_type: ClassVar[type | None] = None
    input_ports: ClassVar[Ports | None] = None
    output_ports: ClassVar[Ports | None] = None
    kernels: ClassVar[tuple[Kernel, ...]] = ()
    # names of the status bits of a step's status word; plant-specific bits in extra_status_names
    status_bits: ClassVar[dict[int, str]] = {}
    extra_status_names: ClassVar[dict[int, str]] = {}
    event_names: ClassVar[dict[int, str]] = {}  # event kind -> name
    # called as progress(label, k, n) before the k-th of n kernels compiles (or loads from the cache)

    def __init__(self, params: Any, source: str = ""):
        self.params = params
        self.source = source
        self.inputs, self.outputs = self.signals(params)
        self.n_in = len(self.inputs)
        self.n_out = len(self.outputs)
        self._in_index = {s.name: k for k, s in enumerate(self.inputs)}
        self._out_index = {s.name: k for k, s in enumerate(self.outputs)}
        if len(self._in_index) != self.n_in or len(self._out_index) != self.n_out:
            raise ValueError("signal names must be unique")
        self._step_fn: Callable | None = None
        self.compiled: dict[str, Callable] = {}  # the plant's kernels by name, from the first reset on
        self.mf, self.mi, self.df, self.di = self._allocate()
        self._bind_views()

    # -- what the plant is (no buffers, nothing compiled) ------------------------------------------
    @classmethod
    def signals(cls, params: Any) -> tuple[tuple[Signal, ...], tuple[Signal, ...]]:
        """The input and output signals of a plant with these parameters."""
        return cls.input_ports.signals(params), cls.output_ports.signals(params)

    @classmethod
    def clutch_names(cls, params: Any) -> list[str]:
        """Names of the friction rows (clutches, contacts) events refer to by index; none by default."""
        return []

    @classmethod
    def description_of(cls, params: Any, source: str = "") -> dict:
        """What ``gearbox-hil describe`` prints, from the parameters alone (builds and compiles nothing)."""
        inputs, outputs = cls.signals(params)
        return dict(kind=cls.kind, description=cls.description, source=source, inputs=signal_table(inputs),
                    outputs=signal_table(outputs), clutches=cls.clutch_names(params))

    def describe(self) -> dict:
        return self.description_of(self.params, self.source)

    # -- buffers -------------------------------------------------------------------------------------
    @abstractmethod
    def _allocate(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The four buffers ``(mf, mi, df, di)``: float64 and int64, contiguous; ports inside ``df``."""

    @property
    @abstractmethod
    def input_offset(self) -> int:
        """Index in ``df`` of input 0; the inputs' rates follow at ``input_offset + n_in``.

        For compiled transports (the CAN codec) that write commands into the
        data buffer by offset instead of through the ``u`` view.
        """

    @property
    def output_offset(self) -> int:
        """Index in ``df`` of output 0 (compiled transports read ``y`` there)."""
        return self.input_offset + 2 * self.n_in

    def _bind_views(self) -> None:
        o, n_in = self.input_offset, self.n_in
        self.u = self.df[o:o + n_in]
        self.u_rate = self.df[o + n_in:o + 2 * n_in]
        self.y = self.df[o + 2 * n_in:o + 2 * n_in + self.n_out]

    # -- kernels -------------------------------------------------------------------------------------
    @classmethod
    def compile_kernels(cls) -> dict[str, Callable]:
        """Every kernel of this plant kind by name, compiled or loaded from numba's cache (once per process).

        The one place that compiles a plant's code (progress:
        :class:`plant_models.compiling.CompileProgress`).
        """
        return {kernel.name: kernel.compile() for kernel in cls.kernels}

    # -- ports ---------------------------------------------------------------------------------------
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

    # -- life cycle ----------------------------------------------------------------------------------
    def reset(self, inputs: dict[str, float] | None = None) -> int:
        """Back to the configured initial state at t = 0.

        Inputs are set to their defaults, then to ``inputs``; actuators start
        settled at those commands.  Returns the status word of the start.
        The first reset compiles the plant's kernels (or loads them from the cache).
        """
        if self._step_fn is None:
            self.compiled = self.compile_kernels()
            self._step_fn = self.compiled["step"]
        self._clear()
        self._bind_views()
        self.set_defaults()
        for name, value in (inputs or {}).items():
            self.set_input(name, value)
        self._initial_state()
        return self.start()

    @abstractmethod
    def _clear(self) -> None:
        """Zero the data buffers: t = 0, every state and counter zero, the event log empty."""

    @abstractmethod
    def _initial_state(self) -> None:
        """Set the initial state from the parameters and the inputs."""

    @abstractmethod
    def start(self) -> int:
        """Make the state consistent and compute the outputs at the current time; returns the status word."""

    def step(self, dt: float) -> int:
        """One fixed step; returns the status word.  Called in the real-time loop."""
        return self._step_fn(self.mf, self.mi, self.df, self.di, dt)

    def rehearse_step(self, df_scratch: np.ndarray, di_scratch: np.ndarray, dt: float) -> int:
        """Take one step on copies of the data buffers (``df``, ``di``); the plant's own state does not change.

        The same compiled code on the same parameters and the same state as
        the next :meth:`step`: a real-time loop that slept calls it just
        before its deadline so the step finds its code and data in the
        caches.  ``df_scratch`` and ``di_scratch`` are preallocated like
        ``df`` and ``di``.  Called in the real-time loop (between ticks).
        """
        np.copyto(df_scratch, self.df)
        np.copyto(di_scratch, self.di)
        return self._step_fn(self.mf, self.mi, df_scratch, di_scratch, dt)

    def status_names(self, status: int) -> list[str]:
        """Names of the status bits set in a step's status word (shared and plant bits)."""
        names = [name for bit, name in self.status_bits.items() if status & bit]
        return names + [name for bit, name in self.extra_status_names.items() if status & bit]

    @property
    @abstractmethod
    def time(self) -> float:
        """Simulated time since the reset, s."""

    @property
    @abstractmethod
    def counters(self) -> np.ndarray:
        """Step counters (int64 view, in the friction core's order: steps, events, ...; see ``layout.CNT_*``)."""

    def row_names(self) -> list[str]:
        """Names of the friction rows events refer to by index (``clutches`` in events.json)."""
        return self.clutch_names(self.params)

    @abstractmethod
    def _drain_events(self) -> list[tuple[float, int, int]]:
        """Events logged since the last call, as (time s, row or source, kind)."""

    def new_events(self) -> list[dict]:
        """Stick / breakaway / reversal events since the last call (not for the real-time tick)."""
        return self.name_events(self._drain_events())

    def name_events(self, raw: list[tuple[float, int, int]]) -> list[dict]:
        """Events as (time s, row or source, kind) -> dicts with time, clutch, row and type."""
        names = self.row_names()
        return [dict(time=t, clutch=names[r], row=r, type=self.event_names.get(k, str(k))) for t, r, k in raw]

    @abstractmethod
    def event_log(self) -> tuple[int, int, int, int, int]:
        """Where the plant's ring log of events lives, for compiled readers (:mod:`plant_models.offline`).

        ``(times, sources, kinds, count, capacity)``: event ``q`` (counted
        from the reset) has its time (s) at ``df[times + q % capacity]``, its
        row or source and kind at ``di[sources + ...]`` and ``di[kinds + ...]``;
        ``di[count]`` counts the events logged.
        """

    @abstractmethod
    def mark_events_read(self) -> None:
        """Count every event logged so far as read (a compiled reader collected them)."""

    def get_state(self) -> tuple[np.ndarray, np.ndarray]:
        """A complete copy of the plant's data; :meth:`set_state` resumes bit-exactly."""
        return self.df.copy(), self.di.copy()

    @abstractmethod
    def set_state(self, state: tuple[np.ndarray, np.ndarray]) -> None:
        """Restore a copy made by :meth:`get_state`."""

    def tunable_parameters(self) -> list[Param]:
        """Parameters a running server may change (read afresh at every step); none by default."""
        return []

    # -- snapshots (assembled by server/snapshots.py) -------------------------------------------------
    def snapshot_state(self) -> dict:
        """What the plant is and its whole state: kind and ports (to check a restore against), the model floats
        (tuned parameters) and the data (:meth:`get_state`)."""
        df, di = self.get_state()
        return {"kind": self.kind, "n_in": self.n_in, "n_out": self.n_out,
                "outputs": [s.name for s in self.outputs], "mf": self.mf.copy(), "df": df, "di": di}

    def check_state(self, st: dict) -> None:
        """Raise ``SnapshotError`` unless ``st`` is a :meth:`snapshot_state` of a plant of this kind, these
        ports and these buffer shapes; changes nothing."""
        from .errors import SnapshotError

        if (st.get("kind") != self.kind or st.get("n_in") != self.n_in or st.get("n_out") != self.n_out
                or list(st.get("outputs", [])) != [s.name for s in self.outputs]):
            raise SnapshotError(f"the snapshot is of a {st.get('kind')} plant with other signals, not of this "
                                f"{self.kind} plant")
        for key, buf in (("mf", self.mf), ("df", self.df), ("di", self.di)):
            a = st.get(key)
            if not isinstance(a, np.ndarray) or a.shape != buf.shape or a.dtype != buf.dtype:
                raise SnapshotError(f"the snapshot's plant buffer {key} does not fit this plant's configuration")

    def restore_state(self, st: dict) -> None:
        """Restore a checked :meth:`snapshot_state`: model floats, then the data."""
        self.mf[:] = st["mf"]
        self.set_state((st["df"], st["di"]))
