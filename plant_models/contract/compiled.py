"""The compiled plant: four flat buffers and one compiled step, a refinement of the base contract.

Like MuJoCo's ``(mjModel, mjData)`` pair, a compiled plant keeps everything
in four flat buffers: ``mf``/``mi`` (the model: parameters, read-only while
stepping) and ``df``/``di`` (the data: time, ports, state, counters, event
log), and its step is one compiled function of them,
``int64 step(mf, mi, df, di, float64 dt)``, which allocates nothing and
holds no Python object.  This is what the compiled offline run needs (it
calls the step through the address of its compiled function and reads the
event log from the buffers: :meth:`CompiledPlant.event_log`), and what lets
the real-time loop rehearse a step on scratch copies before a deadline.

Plants on the exact friction core derive from
:class:`plant_models.friction_plant.FrictionPlant`; a plant with an
integrator of its own (the servo actuator) derives from
:class:`CompiledPlant` directly and lays out its own buffers.

This module imports neither numba nor the friction core: a plant's compiled
functions (:class:`Kernel`) compile, or load from numba's cache, at the
plant's first :meth:`~.plant.Plant.reset`, through
:meth:`CompiledPlant.compile_kernels`; importing a plant module, reading
its parameters and building its ports compile nothing.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import numpy as np

from .plant import Plant

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


class CompiledPlant(Plant):
    """A plant whose step is one compiled function of its four flat buffers ``(mf, mi, df, di)``.

    A subclass sets, besides what :class:`~.plant.Plant` asks, ``kernels``
    (one :class:`Kernel` named ``"step"`` with the signature
    ``int64(mf, mi, df, di, float64 dt)``, and any others it calls), and
    implements :meth:`_allocate` (the four buffers) instead of
    ``_allocate_data`` -- or, if it allocates its own way (the compiled FMU
    assembly builds its table besides), overrides ``_allocate_data`` and
    need not give ``_allocate`` -- and :meth:`event_log` /
    :meth:`mark_events_read` (for the compiled offline run, which reads the
    event log itself).
    """

    kernels: ClassVar[tuple[Kernel, ...]] = ()

    def __init_subclass__(cls, **kwargs):
        """A class that overrides ``_allocate_data`` (and not ``_allocate``) no longer owes ``_allocate``: its
        abstract slot is filled with :meth:`_allocated_in_data`.  This runs before ``ABCMeta`` counts the class's
        abstract methods, so such a plant can be instantiated without a stub of its own."""
        super().__init_subclass__(**kwargs)
        if "_allocate_data" in cls.__dict__ and "_allocate" not in cls.__dict__:
            cls._allocate = CompiledPlant._allocated_in_data

    def _allocated_in_data(self):
        """``_allocate`` of a plant whose ``_allocate_data`` allocates everything: never called by the base."""
        raise TypeError(f"{type(self).__name__} allocates its buffers in _allocate_data")

    def __init__(self, params: Any, source: str = ""):
        self._step_fn: Callable | None = None
        self.compiled: dict[str, Callable] = {}  # the plant's kernels by name, from the first reset on
        super().__init__(params, source)

    # -- buffers -------------------------------------------------------------------------------------
    @abstractmethod
    def _allocate(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The four buffers ``(mf, mi, df, di)``: float64 and int64, contiguous; ports inside ``df``."""

    def _allocate_data(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        mf, self.mi, df, di = self._allocate()
        return mf, df, di

    # -- kernels -------------------------------------------------------------------------------------
    @classmethod
    def compile_kernels(cls) -> dict[str, Callable]:
        """Every kernel of this plant kind by name, compiled or loaded from numba's cache (once per process).

        The one place that compiles a plant's code (progress:
        :class:`plant_models.compiling.CompileProgress`).
        """
        return {kernel.name: kernel.compile() for kernel in cls.kernels}

    def _prepare(self) -> None:
        """The first reset compiles the plant's kernels (or loads them from the cache)."""
        if self._step_fn is None:
            self.compiled = self.compile_kernels()
            self._step_fn = self.compiled["step"]

    # -- stepping ------------------------------------------------------------------------------------
    def step(self, dt: float) -> int:
        """One fixed step: one call into compiled code; returns the status word.  Called in the real-time loop."""
        return self._step_fn(self.mf, self.mi, self.df, self.di, dt)

    @property
    def rehearsable(self) -> bool:
        # only when the step is the standard compiled call on the buffers: then the plant's state is all in them
        return type(self).step is CompiledPlant.step

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

    def run_hints_slot(self) -> int:
        """Index in ``di`` of the word a compiled offline run writes before each step, -1: the plant takes none.

        Its bits (``plant_models.core.layout.RUN_*``): the run will not read
        this step's outputs (a plant may skip writing them, but still does all
        the next step depends on), and the model floats are those of the
        previous step (the run's own steps change none).  The run clears the
        word before it returns.
        """
        return -1

    def time_index(self) -> int:
        """Index in ``df`` of the simulated time, s (what :attr:`~.plant.Plant.time` reads); -1: not in ``df``.

        The real-time loop's compiled tick (:mod:`plant_models.run.compiled`)
        reads the time there for the state ring's row; a plant that says -1
        is ticked through the Python stepper.
        """
        return -1

    # -- the event log, for compiled readers ------------------------------------------------------------
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


__all__ = ["CompiledPlant", "Kernel"]
