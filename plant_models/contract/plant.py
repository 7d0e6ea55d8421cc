"""The base contract of a plant: ports on a data buffer, reset / step / get_state / set_state, status, events.

What the server, the transports and the offline run need from *any* plant,
whatever computes its step (compiled code on flat buffers, plain Python, a
foreign library such as an FMU):

* **ports**: ``inputs`` / ``outputs`` (:class:`~.ports.Signal`), and the
  arrays ``u`` (inputs), ``u_rate`` (their first-order-hold rates, per s)
  and ``y`` (outputs), views into the float data buffer ``df`` in this
  order from :attr:`Plant.input_offset`.  The compiled parts of the server
  address the ports there by offset and nothing else in ``df``: the state
  ring (``ring_push`` reads ``y`` and ``u``), the CAN codec (writes ``u``,
  reads ``y``) and the signal faults (rewrite ``u`` before the step and
  ``y`` after it);
* **buffers**: ``df`` (float64: the ports, and whatever else the plant
  keeps there), ``di`` (int64 data, may be empty) and ``mf`` (float64 model
  floats: the values :meth:`tunable_parameters` change, may be empty); a
  snapshot of the server copies ``mf`` and :meth:`get_state`;
* **life cycle**: :meth:`reset` (-> status word), :meth:`step` ``(dt)``
  (-> status word; called in the real-time loop), :meth:`get_state` /
  :meth:`set_state` (two arrays, like ``df`` and ``di``; restoring resumes
  bit-exactly), :attr:`time`;
* **reporting** in the shared vocabulary (:mod:`.vocabulary`): the status
  word's bits (:attr:`Plant.status_bits`, named by :meth:`status_names`),
  events (:meth:`new_events`, kinds named by :attr:`Plant.event_kinds`) and
  :attr:`counters` (int64, ``COUNTER_NAMES`` order, at least steps and
  events).

A plant whose step is compiled numba code on four flat buffers is a
:class:`~.compiled.CompiledPlant`; only such a plant runs in the compiled
offline loop (:class:`plant_models.offline.Run`; others run through
:class:`plant_models.offline.StepwiseRun`, with the same trace) and is
rehearsed before a real-time deadline.  ``core`` is the friction core a
plant's rows live in, or None: clutch faults need it.

This module imports neither numba nor the friction core.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, ClassVar

import numpy as np

from ..errors import SnapshotError
from .ports import Param, Ports, Signal, signal_table
from .vocabulary import CNT_EVENTS, SHARED_EVENTS, SHARED_STATUS, EventKinds, StatusBits


class EventRing:
    """An event log kept as a ring in a plant's own data buffers (and its reader, not for the real-time tick).

    Event ``q`` (counted from the last reset) sits at ring slot
    ``q % capacity``: its time (s) in ``df`` from ``time_at``, its source and
    kind (ints) in ``di`` from ``source_at`` / ``kind_at``; ``di[count_at]``
    counts every event logged.  A compiled step writes the slots itself; a
    Python step calls :meth:`log`.
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

    def log(self, t: float, source: int, kind: int) -> None:
        """Log one event (time s, source, kind) from a Python step.  Called in the real-time loop."""
        q = int(self.di[self.count_at])
        slot = q % self.capacity
        self.times[slot] = t
        self.sources[slot] = source
        self.kinds[slot] = kind
        self.di[self.count_at] = q + 1

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
    """Base class of all plants: ports on a data buffer, reset / step / get_state / set_state, status, events.

    A subclass sets the class attributes ``kind``, ``description``,
    ``params_type`` (its frozen parameter dataclass), ``input_ports`` /
    ``output_ports`` (or overrides :meth:`signals` when the number of ports
    depends on the parameters), ``status_bits`` / ``event_kinds`` when it
    has bits or kinds of its own, and implements :meth:`_allocate_data`,
    :attr:`input_offset`, :meth:`_clear`, :meth:`_initial_state`,
    :meth:`start`, :meth:`step`, :attr:`time`, :attr:`counters` and
    :meth:`_drain_events`.
    """

    kind: ClassVar[str] = ""
    description: ClassVar[str] = ""
    params_type: ClassVar[type | None] = None
    input_ports: ClassVar[Ports | None] = None
    output_ports: ClassVar[Ports | None] = None
    # the bits of its status word and the kinds of its events (plant_models.contract.vocabulary)
    status_bits: ClassVar[StatusBits] = SHARED_STATUS
    event_kinds: ClassVar[EventKinds] = SHARED_EVENTS
    core: Any = None  # the friction core (plant_models.core.handle.Core) the plant's rows live in, if any
    # the fault kinds of its own physics (clutch faults ...): .faults.PlantFaults, collected along the bases by
    # .faults.plant_fault_declarations; signal faults fit every plant and need no declaration
    fault_declarations: ClassVar[tuple] = ()

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
        self.mf, self.df, self.di = self._allocate_data()
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

    @classmethod
    def compile_kernels(cls) -> dict[str, Callable]:
        """The plant's compiled functions by name, compiled or loaded from numba's cache; none by default."""
        return {}

    # -- buffers -------------------------------------------------------------------------------------
    @abstractmethod
    def _allocate_data(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(mf, df, di)``: float64, float64 and int64, contiguous; the ports inside ``df``."""

    @property
    @abstractmethod
    def input_offset(self) -> int:
        """Index in ``df`` of input 0; the inputs' rates follow at ``input_offset + n_in``, then the outputs.

        For compiled transports (the CAN codec, the state ring, signal
        faults) that address the ports in the data buffer by offset.
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

    @property
    def rehearsable(self) -> bool:
        """Whether :meth:`rehearse_step` can take a step on scratch copies of ``df``/``di`` (a compiled plant)."""
        return False

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
            raise KeyError(f"{self.kind}: no output signal {name!r}; "
                           f"outputs are {', '.join(self._out_index)}") from None

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
        """
        self._prepare()
        self._clear()
        self._bind_views()
        self.set_defaults()
        for name, value in (inputs or {}).items():
            self.set_input(name, value)
        self._initial_state()
        return self.start()

    def _prepare(self) -> None:
        """Make the step callable (a compiled plant compiles its kernels here, at the first reset)."""

    @abstractmethod
    def _clear(self) -> None:
        """Zero the data: t = 0, every state and counter zero, the event log empty."""

    @abstractmethod
    def _initial_state(self) -> None:
        """Set the initial state from the parameters and the inputs."""

    @abstractmethod
    def start(self) -> int:
        """Make the state consistent and compute the outputs at the current time; returns the status word."""

    @abstractmethod
    def step(self, dt: float) -> int:
        """One fixed step of ``dt`` s with the inputs ``u`` and rates ``u_rate``; returns the status word.

        Writes the outputs ``y``.  Non-finite inputs or ``dt`` leave the
        state unchanged and return ``ST_BAD_INPUT``.  Called in the
        real-time loop.
        """

    def status_names(self, status: int) -> list[str]:
        """Names of the status bits set in a step's status word (shared, solver and plant bits), by increasing bit."""
        return self.status_bits.names_of(status)

    @property
    @abstractmethod
    def time(self) -> float:
        """Simulated time since the reset, s."""

    @property
    @abstractmethod
    def counters(self) -> np.ndarray:
        """Step counters (int64, in the order of ``contract.vocabulary.COUNTER_NAMES``: steps, events, ...)."""

    @property
    def events_logged(self) -> int:
        """Events logged since the reset (the ``events`` counter)."""
        return int(self.counters[CNT_EVENTS])

    @property
    def events_lost(self) -> int:
        """Events overwritten before they were read, since the last reset; none by default."""
        return 0

    def row_names(self) -> list[str]:
        """Names of the friction rows or event sources events refer to by index (``clutches`` in events.json)."""
        return self.clutch_names(self.params)

    @abstractmethod
    def _drain_events(self) -> list[tuple[float, int, int]]:
        """Events logged since the last call, as (time s, row or source, kind)."""

    def new_events(self) -> list[dict]:
        """Events since the last call, named (not for the real-time tick)."""
        return self.name_events(self._drain_events())

    def name_events(self, raw: list[tuple[float, int, int]]) -> list[dict]:
        """Events as (time s, row or source, kind) -> dicts with time, clutch, row and type."""
        names = self.row_names()
        kinds = self.event_kinds.names()
        return [dict(time=t, clutch=names[r], row=r, type=kinds.get(k, str(k))) for t, r, k in raw]

    def get_state(self) -> tuple[np.ndarray, np.ndarray]:
        """A complete copy of the plant's data; :meth:`set_state` resumes bit-exactly.  By default ``df`` and ``di``."""
        return self.df.copy(), self.di.copy()

    def set_state(self, state: tuple[np.ndarray, np.ndarray]) -> None:
        """Restore a copy made by :meth:`get_state` (by default into ``df`` and ``di``)."""
        df, di = state
        if df.shape != self.df.shape or di.shape != self.di.shape:
            raise ValueError("state does not belong to this plant")
        self.df[:] = df
        self.di[:] = di
        self._restored()

    def _restored(self) -> None:
        """After :meth:`set_state`: events logged before the state count as read; nothing by default."""

    # -- snapshots (assembled by server/realtime/snapshots.py) -------------------------------------------------
    def snapshot_state(self) -> dict:
        """What the plant is and its whole state: kind and ports (to check a restore against), the model floats
        (tuned parameters) and the data (:meth:`get_state`)."""
        df, di = self.get_state()
        return {"kind": self.kind, "n_in": self.n_in, "n_out": self.n_out,
                "outputs": [s.name for s in self.outputs], "mf": self.mf.copy(), "df": df, "di": di}

    def check_state(self, st: dict) -> None:
        """Raise ``SnapshotError`` unless ``st`` is a :meth:`snapshot_state` of a plant of this kind, these
        ports and these buffer shapes; changes nothing."""
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

    def tunable_parameters(self) -> list[Param]:
        """Parameters a running server may change (read afresh at every step); none by default."""
        return []


__all__ = ["EventRing", "Plant"]
