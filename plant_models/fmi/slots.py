"""One loaded FMU per slot, by FMI version and kind: what :class:`.assembly.FmuAssembly` calls each step.

* :class:`Cs2Slot`: FMI 2.0 co-simulation (``fmi2DoStep``);
* :class:`Cs3Slot`: FMI 3.0 co-simulation (``fmi3DoStep``, no event mode);
* :class:`.model_exchange.Me2Slot`, :class:`.model_exchange.Me3Slot`: FMI
  2.0 and 3.0 model exchange: the FMU's continuous states integrated by
  classical RK4 at the plant's step (the core's scheme, docs/method.md),
  its event indicators located inside the step by bisection, state and
  time events handled through event mode.

Each slot sees its variables as float64 ports: Integer (Int32, Int64)
values are rounded to the nearest integer on the way in, Boolean values are
true when non-zero; on the way out both come back as 0.0/1.0 or the
integer's value.  The per-step calls go through ctypes on arrays allocated
at load time; an FMI status above warning is returned to the assembly,
which marks the FMU failed.
"""

from __future__ import annotations

import ctypes
import shutil
import weakref

import numpy as np

from .connect import CheckedFmu

RC_FAILED = 3  # the status reported for a slot-side failure (fmi2Error): terminate requested, event loop stuck

# FMI type -> (ctypes type of its values, the suffix of its get/set functions, kind): "real", "int", "bool"
_TYPES_2 = {"Real": (ctypes.c_double, "Real", "real"), "Integer": (ctypes.c_int32, "Integer", "int"),
            "Boolean": (ctypes.c_int32, "Boolean", "bool")}
_TYPES_3 = {"Float64": (ctypes.c_double, "Float64", "real"), "Int32": (ctypes.c_int32, "Int32", "int"),
            "Int64": (ctypes.c_int64, "Int64", "int"), "Boolean": (ctypes.c_bool, "Boolean", "bool")}


class _Group:
    """The variables of one FMI type on one side (inputs or outputs): one get or set call per step."""

    def __init__(self, fn, vrs: list[int], idx: list[int], ctype, kind: str, v3: bool):
        n = len(vrs)
        self.fn, self.n, self.kind = fn, n, kind
        # a run of consecutive ports is a slice (a view: no index array, no copy made to read it)
        contiguous = idx == list(range(idx[0], idx[0] + n))
        self.idx = slice(idx[0], idx[0] + n) if contiguous else np.array(idx, dtype=np.int64)
        self.vr = (ctypes.c_uint32 * n)(*vrs)
        self.val = (ctype * n)()
        self.view = np.ctypeslib.as_array(self.val) if ctype is not ctypes.c_bool else \
            np.frombuffer(self.val, dtype=np.bool_)
        self.n_c = ctypes.c_size_t(n)  # the count as the C type: the raw function converts nothing
        # one Real: copied as a scalar (two numpy calls fewer each way; the same double)
        self.scalar = idx[0] if n == 1 and kind == "real" else -1
        self.extra = (ctypes.c_size_t(n),) if v3 else ()

    def put(self, comp, values: np.ndarray) -> int:
        if self.scalar >= 0:
            self.val[0] = values[self.scalar]
            return self.fn(comp, self.vr, self.n_c, self.val, *self.extra)
        x = values[self.idx]
        if self.kind == "real":
            self.view[:] = x
        elif self.kind == "int":
            self.view[:] = np.rint(x)
        else:
            self.view[:] = x != 0.0
        return self.fn(comp, self.vr, self.n_c, self.val, *self.extra)

    def take(self, comp, values: np.ndarray) -> int:
        rc = self.fn(comp, self.vr, self.n_c, self.val, *self.extra)
        if self.scalar >= 0:
            values[self.scalar] = self.val[0]
        else:
            values[self.idx] = self.view
        return rc


class Slot:
    """An FMU loaded, instantiated, with its per-step arrays (subclasses: version and kind)."""

    version = 2
    types = _TYPES_2
    advance_call = "a call"  # the FMI function of advance(), named in the failure message
    failed_call = "a call"  # the function whose status was above warning (set when one was)

    def __init__(self, fmu: CheckedFmu):
        import fmpy
        t = fmu.table
        self.fmu, self.name = fmu, t.name
        self.unzipped = fmpy.extract(str(t.file))
        weakref.finalize(self, shutil.rmtree, self.unzipped, True)  # the extracted files go with the slot
        self.slave = self._instantiate()
        comp = self.slave.component
        self._comp = comp if isinstance(comp, ctypes.c_void_p) else ctypes.c_void_p(comp)  # as the C type, once
        self._bind_step()
        v = fmu.variables
        self.in_names = [n for n, x in v.items() if x.causality == "input"]
        self.out_names = [n for n, x in v.items() if x.causality == "output"]
        self.n_in, self.n_out = len(self.in_names), len(self.out_names)
        self.np_in, self.np_out = np.zeros(self.n_in), np.zeros(self.n_out)
        self.in_groups = self._groups(self.in_names, "Set")
        self.out_groups = self._groups(self.out_names, "Get")
        self.failed = False
        self.tuned: dict[int, float] = {}  # value reference -> value set through set_params (kept over resets)
        self.state_size = 0  # bytes of the serialized FMU state (a snapshot keeps it in the assembly's di)
        if fmu.can_get_set_state:
            self.start()
            self.state_size = len(self.state_bytes())

    def _raw(self, name: str, argtypes=None):
        """The library's function ``name`` without FMPy's argument types: the get and set calls pass arguments
        already of their C types (arrays, ``c_size_t``, ``c_void_p``), so ctypes checks and converts nothing
        (FMPy's ``POINTER`` checks cost about a third of each call)."""
        fn = self.slave.dll[name]  # a new function object: FMPy's keeps its argument types
        fn.restype, fn.argtypes = ctypes.c_int, argtypes
        return fn

    def _groups(self, names: list[str], verb: str) -> list[_Group]:
        v3 = self.version == 3
        out = []
        for fmi_type, (ctype, suffix, kind) in self.types.items():
            idx = [k for k, n in enumerate(names) if self.fmu.variables[n].type == fmi_type]
            if idx:
                vrs = [self.fmu.variables[names[k]].vr for k in idx]
                out.append(_Group(self._raw(f"fmi{self.version}{verb}{suffix}"), vrs, idx, ctype, kind, v3))
        return out

    @property
    def comp(self):
        return self._comp

    # -- per step (called in the real-time loop) ------------------------------------------------------
    def set_inputs(self) -> int:
        for g in self.in_groups:
            rc = g.put(self.comp, self.np_in)
            if rc > 1:
                self.failed_call = g.fn.__name__
                return rc
        return 0

    def get_outputs(self) -> int:
        for g in self.out_groups:
            rc = g.take(self.comp, self.np_out)
            if rc > 1:
                self.failed_call = g.fn.__name__
                return rc
        return 0

    def step(self, t: float, dt: float) -> int:
        """Inputs set, one step from t to t + dt, outputs read; the worst FMI status (the failed call's name in
        :attr:`failed_call`)."""
        rc = self.set_inputs()
        if rc <= 1:
            rc = self.advance(t, dt)
            if rc > 1:
                self.failed_call = self.advance_call
        if rc <= 1:
            rc = self.get_outputs()
        return rc

    def advance(self, t: float, dt: float) -> int:
        raise NotImplementedError

    def _bind_step(self) -> None:
        """The per-step functions of the kind, bound once after instantiation (none here)."""

    # -- start values, parameters, state --------------------------------------------------------------
    def _set_start(self, name: str, value: float) -> None:
        v = self.fmu.variables[name]
        kind = self.types[v.type][2]
        setter = getattr(self.slave, f"set{self.types[v.type][1]}")
        setter([v.vr], [float(value) if kind == "real" else int(round(value)) if kind == "int" else value != 0.0])

    def _apply_starts(self) -> None:
        for name, value in self.fmu.table.start.items():
            self._set_start(name, value)
        for vr, value in self.tuned.items():  # tuned parameters outlast a reset, as the plant's do
            self.set_real(vr, value)

    def get_real(self, vr: int) -> float:
        return float(self.slave.getReal([vr])[0])

    def set_real(self, vr: int, value: float) -> None:
        self.slave.setReal([vr], [float(value)])

    def state_bytes(self) -> bytes:
        st = self.slave.getFMUstate()
        try:
            return self.slave.serializeFMUstate(st)
        finally:
            self.slave.freeFMUstate(st)

    def set_state_bytes(self, blob: bytes) -> None:
        st = self.slave.deSerializeFMUstate(blob)
        try:
            self.slave.setFMUstate(st)
        finally:
            self.slave.freeFMUstate(st)

    def close(self) -> None:
        try:
            self.slave.terminate()
            self.slave.freeInstance()
        finally:
            shutil.rmtree(self.unzipped, ignore_errors=True)


class Cs2Slot(Slot):
    """FMI 2.0 co-simulation: ``fmi2DoStep``."""

    advance_call = "fmi2DoStep"

    def _instantiate(self):
        from fmpy.fmi2 import FMU2Slave
        md = self.fmu.md
        s = FMU2Slave(guid=md.guid, unzipDirectory=self.unzipped, modelIdentifier=md.coSimulation.modelIdentifier,
                      instanceName=self.fmu.table.name)
        s.instantiate()
        return s

    def _bind_step(self) -> None:
        self.c_step = self._raw("fmi2DoStep", [ctypes.c_void_p, ctypes.c_double, ctypes.c_double, ctypes.c_int])

    def start(self) -> None:
        """Reset, start values, initialization (not for the real-time tick)."""
        s = self.slave
        s.reset()
        s.setupExperiment(startTime=0.0)
        self._apply_starts()
        s.enterInitializationMode()
        s.exitInitializationMode()
        self.failed = False

    def advance(self, t: float, dt: float) -> int:
        return self.c_step(self.comp, t, dt, 1)


class Cs3Slot(Slot):
    """FMI 3.0 co-simulation: ``fmi3DoStep`` (instantiated without event mode and early return)."""

    version = 3
    types = _TYPES_3
    advance_call = "fmi3DoStep"

    def _instantiate(self):
        from fmpy.fmi3 import FMU3Slave
        md = self.fmu.md
        s = FMU3Slave(guid=md.guid, unzipDirectory=self.unzipped, modelIdentifier=md.coSimulation.modelIdentifier,
                      instanceName=self.fmu.table.name)
        s.instantiate()
        self.c_step = s._functions["fmi3DoStep"]
        self._flags = [ctypes.c_bool() for _ in range(3)]  # eventHandlingNeeded, terminateSimulation, earlyReturn
        self._last_time = ctypes.c_double()
        self._step_refs = [ctypes.byref(f) for f in self._flags] + [ctypes.byref(self._last_time)]
        return s

    def start(self) -> None:
        s = self.slave
        s.reset()
        self._apply_starts()
        s.enterInitializationMode(startTime=0.0)
        s.exitInitializationMode()
        self.failed = False

    def advance(self, t: float, dt: float) -> int:
        rc = self.c_step(self.comp, t, dt, True, *self._step_refs)
        if rc <= 1 and (self._flags[1].value or self._flags[2].value):  # a stop or a step cut short: not supported
            return RC_FAILED
        return rc

    def get_real(self, vr: int) -> float:
        return float(self.slave.getFloat64([vr])[0])

    def set_real(self, vr: int, value: float) -> None:
        self.slave.setFloat64([vr], [float(value)])

    def state_bytes(self) -> bytes:
        st = self.slave.getFMUState()
        try:
            return self.slave.serializeFMUState(st)
        finally:
            self.slave.freeFMUState(st)

    def set_state_bytes(self, blob: bytes) -> None:
        st = self.slave.deserializeFMUState(blob)
        try:
            self.slave.setFMUState(st)
        finally:
            self.slave.freeFMUState(st)


__all__ = ["Cs2Slot", "Cs3Slot", "RC_FAILED", "Slot"]
