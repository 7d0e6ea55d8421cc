"""``FmuAssembly``: a plant plus its FMUs, one :class:`~plant_models.contract.plant.Plant` through the contract.

Ports: the inner plant's inputs that no FMU drives, then each FMU's inputs
that no plant output feeds (``name.var``); the inner plant's outputs, then
each FMU's outputs (``name.var``).  One step of ``dt``, in this fixed order:

1. each FMU's inputs are set: from the assembly's inputs, and from the
   inner plant's outputs at the start of the step (time t);
2. each FMU does one step from t to t + dt, in config order: ``fmi2DoStep``
   or ``fmi3DoStep`` for co-simulation; for model exchange, its states
   integrated by RK4 with its events located (:mod:`.model_exchange`);
3. the FMU outputs at t + dt are written to the inner plant's inputs they
   drive, held over the step (rate 0); the other inputs and rates are copied;
4. the inner plant steps from t to t + dt; the outputs are gathered.

So a plant input driven by an FMU lags by one step against a monolithic
model (the coupling error docs/fmi.md states).  The per-step path calls the
FMU's C functions through ctypes on arrays allocated once at load time
(:mod:`.slots`: one slot per FMU, by FMI version and kind; with ``process =
"own"`` a :class:`.isolated.ProcessSlot` in front of a child process).

An FMU call that fails (status error or fatal) sets the status bit
``fmu_error``; the FMU is not called again until the next reset, its
outputs hold their last values, the inner plant keeps stepping, and the
message is kept in :attr:`FmuAssembly.fmu_errors`; the table's ``safe``
values, if any, replace the held outputs.  FMUs are loaded (FMPy
changes the working directory while it extracts and loads a library) when
the assembly is built, before any real-time thread starts.
"""

from __future__ import annotations

import math

import numpy as np

from ..contract.plant import Plant
from ..contract.ports import Param, Signal
from ..contract.vocabulary import ST_BAD_INPUT
from ..errors import ConfigError, ParamError, SnapshotError
from .connect import CheckedFmu
from .model_exchange import Me2Slot, Me3Slot
from .slots import Cs2Slot, Cs3Slot, Slot

DF_TIME = 0  # simulated time, s
DF_U = 1  # [n_in] inputs, [n_in] rates, [n_out] outputs


def make_slot(fmu: CheckedFmu, in_process: bool = False) -> Slot:
    """The slot for the FMU's version and kind (checked in :func:`.connect.check_fmu`); with ``process = "own"``
    (and not ``in_process``, as :mod:`.fmu_host` asks) a :class:`.isolated.ProcessSlot` in front of a child."""
    if fmu.table.process == "own" and not in_process:
        from .isolated import FmuCallError, ProcessSlot
        try:
            return ProcessSlot(fmu)
        except FmuCallError as exc:  # the FMU did not load in its process: a config problem, one line
            raise ConfigError(str(fmu.table.file), f"{fmu.table.key}.file", str(exc)) from None
    if fmu.kind == "me":
        return Me3Slot(fmu) if fmu.version == 3 else Me2Slot(fmu)
    return Cs3Slot(fmu) if fmu.version == 3 else Cs2Slot(fmu)


def failure_message(s: Slot, t: float, rc: int, call: str) -> str:
    """What :attr:`FmuAssembly.fmu_errors` says of a failed FMU: the call and its status, or why its process ended."""
    held = "its safe values are out, the others hold" if s.fmu.table.safe else "its outputs hold"
    why = getattr(s, "why", "")
    if why:
        return f"fmu {s.name}: its process {why} at t = {t:.6f} s; {held} from now on"
    what = {2: "discard", 3: "error", 4: "fatal"}.get(int(rc), str(rc))
    return f"fmu {s.name}: {call} returned {what} at t = {t:.6f} s; {held} from now on"


class FmuAssembly(Plant):
    """An inner plant and its FMUs stepped as one plant (the order in the module docstring)."""

    description = "a plant with FMUs in the loop"

    def __init__(self, inner: Plant, fmus: list[CheckedFmu]):
        self.inner = inner
        self.kind = inner.kind
        self.status_bits = inner.status_bits.extend(f"{inner.kind} with FMUs")
        self.ST_FMU_ERROR = self.status_bits.allocate("fmu_error", "an FMU call failed: its outputs hold, see the log")
        self.event_kinds = inner.event_kinds
        self.slots = [make_slot(f) for f in fmus]
        self.fmu_errors: list[str] = []
        self.fmu_faults = {s.name: 0 for s in self.slots}  # faults since the plant was built (not reset)
        self._wire()
        super().__init__(inner.params, inner.source)
        self.reset()

    # -- wiring (once) -------------------------------------------------------------------------------
    def _wire(self) -> None:
        inner = self.inner
        driven = {port: (k, s.out_names.index(v)) for k, s in enumerate(self.slots)
                  for v, port in s.fmu.table.to_plant.items()}
        self._free_in = np.array([i for i, sig in enumerate(inner.inputs) if sig.name not in driven], dtype=np.int64)
        self._driven = [(inner.input_index(p), k, j) for p, (k, j) in driven.items()]
        ins, outs = [inner.inputs[i] for i in self._free_in], list(inner.outputs)
        self._fmu_in = []  # per slot: (indices in its inputs fed by assembly inputs, assembly input indices)
        self._fed = []  # per slot: (indices in its inputs, inner output indices)
        for s in self.slots:
            fed = s.fmu.table.from_plant
            own, ext = [], []
            for j, n in enumerate(s.in_names):
                if n not in fed:
                    v = s.fmu.variables[n]
                    own.append(j)
                    ext.append(len(ins))
                    lo, hi = (v.lo if math.isfinite(v.lo) else -1e300), (v.hi if math.isfinite(v.hi) else 1e300)
                    ins.append(Signal(f"{s.name}.{n}", v.unit or "-", lo, hi, v.start, f"input of FMU {s.name}"))
            self._fmu_in.append((np.array(own, dtype=np.int64), np.array(ext, dtype=np.int64)))
            pairs = [(s.in_names.index(n), inner.output_index(p)) for n, p in fed.items()]
            self._fed.append((np.array([a for a, _ in pairs], dtype=np.int64),
                              np.array([b for _, b in pairs], dtype=np.int64)))
            for n in s.out_names:
                v = s.fmu.variables[n]
                outs.append(Signal(f"{s.name}.{n}", v.unit or "-", -1e300, 1e300, 0.0, f"output of FMU {s.name}"))
        self._ins, self._outs = tuple(ins), tuple(outs)
        self._status_at = next((k for k, sig in enumerate(inner.outputs) if sig.name == "status"), -1)

    def signals(self, params):
        return self._ins, self._outs

    def describe(self) -> dict:
        from ..contract.ports import signal_table
        d = dict(kind=self.kind, description=self.inner.description, source=self.source,
                 inputs=signal_table(self._ins), outputs=signal_table(self._outs), clutches=self.row_names())
        from .describe import fmu_table
        d["fmus"] = [fmu_table(s.fmu) for s in self.slots]
        return d

    def clutch_names(self, params=None) -> list[str]:
        return self.inner.row_names()

    def row_names(self) -> list[str]:
        return self.inner.row_names()

    def _allocate_data(self):
        # df: time, ports, then room for the inner plant's df in a state copy; di: a word, the head of a state copy
        # (inner lengths, each FMU's failed flag), the inner di and each FMU's serialized state, one byte per int64
        extra_df, extra_di = self._extra_data()
        n_df = DF_U + 2 * len(self._ins) + len(self._outs) + extra_df
        self._n_df, self._n_di = n_df, 1 + extra_di
        idf, idi = self.inner.get_state()
        n_di = self._n_di + 2 + len(self.slots) + len(idi) + sum(s.state_size for s in self.slots)
        return np.zeros(0), np.zeros(n_df + len(idf)), np.zeros(n_di, dtype=np.int64)

    def _extra_data(self) -> tuple[int, int]:
        """Words of ``df`` and ``di`` after the ports and the first word, kept in a state (none here)."""
        return 0, 0

    @property
    def input_offset(self) -> int:
        return DF_U

    # -- life cycle ----------------------------------------------------------------------------------
    def _clear(self) -> None:
        self.df[:] = 0.0
        self.di[:] = 0
        self.fmu_errors.clear()

    def _initial_state(self) -> None:
        """FMUs initialized, then the inner plant reset with its free inputs and the FMU outputs at t = 0."""
        for s in self.slots:
            rc = s.start()
            if s.failed:  # an FMU in its own process that could not start: reported, held as after a fault
                self._fail(s, 0.0, rc)
        self._get_outputs()
        inputs = {self.inner.inputs[i].name: float(self.u[k]) for k, i in enumerate(self._free_in)}
        inputs.update({self.inner.inputs[i].name: float(self.slots[k].np_out[j]) for i, k, j in self._driven})
        self._start_status = self.inner.reset(inputs)

    def reset(self, inputs=None) -> int:
        """Back to t = 0: the FMUs reset and initialized with their start values, the inner plant reset."""
        return super().reset(inputs)

    def start(self) -> int:
        self._gather(self._start_status)
        return self._start_status

    def _get_outputs(self) -> None:
        for s in self.slots:
            if s.n_out and not s.failed:
                s.get_outputs()

    def _drive_inner(self) -> None:
        u = self.inner.u
        for i, k, j in self._driven:
            u[i] = self.slots[k].np_out[j]
            self.inner.u_rate[i] = 0.0

    def step(self, dt: float) -> int:
        """FMUs (inputs at t, one doStep), then the inner plant with the FMU outputs held.

        Called in the real-time loop."""
        if not (dt > 0.0 and math.isfinite(dt)):
            return ST_BAD_INPUT
        t = self.df[DF_TIME]
        inner, u, y_in = self.inner, self.u, self.inner.y
        status = 0
        for k, s in enumerate(self.slots):
            if s.failed:
                status |= self.ST_FMU_ERROR
                continue
            own, ext = self._fmu_in[k]
            if len(own):  # an empty fancy assignment still costs about half a microsecond
                s.np_in[own] = u[ext]
            a, b = self._fed[k]
            if len(a):
                s.np_in[a] = y_in[b]
            rc = s.step(t, dt)
            if rc > 1:
                self._fail(s, t, rc)
                status |= self.ST_FMU_ERROR
        n_free = len(self._free_in)
        inner.u[self._free_in] = u[:n_free]
        inner.u_rate[self._free_in] = self.u_rate[:n_free]
        self._drive_inner()
        status |= inner.step(dt)
        self.df[DF_TIME] = inner.time
        self._gather(status)
        return status

    def _fail(self, s: Slot, t: float, rc: int) -> None:
        """Not for the real-time tick, but taken once per FMU failure (then the FMU is skipped)."""
        s.failed = True
        self.fmu_faults[s.name] += 1
        for name, value in s.fmu.table.safe.items():
            s.np_out[s.out_names.index(name)] = value
        self.fmu_errors.append(failure_message(s, t, rc, getattr(s, "failed_call", "a call")))

    def _gather(self, status: int) -> None:
        y = self.y
        n = self.inner.n_out
        y[:n] = self.inner.y
        o = n
        for s in self.slots:
            y[o:o + s.n_out] = s.np_out
            o += s.n_out
        if self._status_at >= 0:  # the step's status word, FMU bits included
            y[self._status_at] = float(int(y[self._status_at]) | status)

    # -- reporting -----------------------------------------------------------------------------------
    @property
    def fmu_errors(self) -> list[str]:
        """The FMU failures since the reset, one message each (an FMU in its own process lost in a tick before
        its exit status was known: the status waited for here, between ticks, and put in its message)."""
        for s in getattr(self, "slots", ()):
            settle = getattr(s, "settle", None)
            changed = settle() if settle is not None else None
            if changed:
                old, new = (f"fmu {s.name}: its process {why} at" for why in changed)
                self._errors[:] = [m.replace(old, new, 1) if m.startswith(old) else m for m in self._errors]
        return self._errors

    @fmu_errors.setter
    def fmu_errors(self, value: list[str]) -> None:
        self._errors = value

    def fmu_status(self) -> list[dict]:
        """Per FMU, for the server's status object (``status`` -> ``fmus``): where it runs, whether it is
        stepped (not failed), its faults since the plant was built and the last message."""
        out = []
        for s in self.slots:
            last = next((m for m in reversed(self.fmu_errors) if m.startswith(f"fmu {s.name}:")), "")
            proc = getattr(s, "proc", None)
            out.append(dict(name=s.name, process=s.fmu.table.process, stepped=not s.failed,
                            faults=self.fmu_faults[s.name], last_error=last,
                            pid=proc.pid if proc is not None and proc.returncode is None else None))
        return out

    @property
    def time(self) -> float:
        return float(self.df[DF_TIME])

    @property
    def counters(self) -> np.ndarray:
        return self.inner.counters

    @property
    def events_lost(self) -> int:
        return self.inner.events_lost

    def _drain_events(self):
        return self.inner._drain_events()

    def tunable_parameters(self) -> list[Param]:
        """The inner plant's, then each FMU's tunable Real parameters as ``name.variable``."""
        return self.inner.tunable_parameters() + [p for s in self.slots for p in self._fmu_params(s)]

    @staticmethod
    def _fmu_params(s: Slot) -> list[Param]:
        """The FMU's tunable parameters: read from the FMU, written to it between steps (and kept for resets)."""
        from fmpy.fmi1 import FMICallException

        from .isolated import FmuCallError
        failures = (FMICallException, FmuCallError)
        out = []
        for n, v in s.fmu.variables.items():
            if v.causality != "parameter" or v.variability != "tunable" or v.kind != "real":
                continue

            def get(vr=v.vr, start=v.start) -> float:
                try:
                    return s.get_real(vr)
                except failures:  # an FMU that failed: the value last set
                    return s.tuned.get(vr, start)

            def put(value: float, vr=v.vr, name=f"{s.name}.{n}") -> None:
                try:
                    s.set_real(vr, value)
                except failures as exc:
                    raise ParamError(f"{name}: the FMU refused {value:g} ({exc})") from None
                s.tuned[vr] = float(value)

            out.append(Param(f"{s.name}.{n}", v.unit or "-", v.lo if math.isfinite(v.lo) else -1e300,
                             v.hi if math.isfinite(v.hi) else 1e300, v.doc or f"parameter of FMU {s.name}", get, put))
        return out

    @property
    def mf(self):
        return self.inner.mf

    @mf.setter
    def mf(self, value):
        pass  # the tunable values live in the inner plant's mf

    # -- snapshots -----------------------------------------------------------------------------------
    def get_state(self) -> tuple[np.ndarray, np.ndarray]:
        """The assembly's and the inner plant's data, and each FMU's serialized state (bytes as int64).

        Shaped as ``df`` and ``di`` (the server's snapshot checks the shapes).
        Raises SnapshotError naming the FMU when one cannot get and set its state.
        """
        blobs = []
        for s in self.slots:
            if not s.fmu.can_get_set_state:
                raise SnapshotError(f"fmu {s.name}: cannot save its state (canGetAndSetFMUstate is false)")
            blob = s.state_bytes()
            if len(blob) != s.state_size:
                raise SnapshotError(f"fmu {s.name}: its serialized state changed size ({s.state_size} -> {len(blob)} "
                                 f"bytes); cannot save it")
            blobs.append(np.frombuffer(blob, dtype=np.uint8).astype(np.int64))
        idf, idi = self.inner.get_state()
        df = self.df.copy()
        df[self._n_df:] = idf
        head = np.array([len(idf), len(idi)] + [int(s.failed) for s in self.slots], dtype=np.int64)
        di = np.concatenate([self.di[:self._n_di], head, idi, *blobs])
        return df, di

    def set_state(self, state: tuple[np.ndarray, np.ndarray]) -> None:
        df, di = state
        if df.shape != self.df.shape or di.shape != self.di.shape:
            raise ValueError("state does not belong to this plant")
        n_di = self._n_di
        n_idi = int(di[n_di + 1])
        failed = di[n_di + 2:n_di + 2 + len(self.slots)]
        o = n_di + 2 + len(self.slots)
        idf, idi = df[self._n_df:], di[o:o + n_idi]
        o += n_idi
        for k, s in enumerate(self.slots):
            blob = di[o:o + s.state_size].astype(np.uint8).tobytes()
            o += s.state_size
            s.set_state_bytes(blob)
            s.failed = bool(failed[k])  # each FMU as it was: a healthy one steps on beside a failed one
            if not s.failed:  # the tuned values as the restored FMU holds them
                s.tuned = {vr: s.get_real(vr) for vr in s.tuned}
        self.inner.set_state((idf.copy(), idi.copy()))
        self.df[:self._n_df] = df[:self._n_df]
        self.di[:n_di] = di[:n_di]

    def close(self) -> None:
        """Free the FMU instances and their extracted files."""
        for s in self.slots:
            s.close()
        self.slots = []


__all__ = ["FmuAssembly"]
