"""Model exchange in the loop (FMI 2.0 and 3.0): the FMU's continuous states integrated at the plant's step.

The scheme is the core's (docs/method.md, section 3): classical RK4 over the
plant step ``dt``, inputs held at their values at the step's start (as a
co-simulation FMU sees them).  The step is fixed, so lockstep equals offline
bit for bit.  One step from t to t + dt:

1. the states x(t) and the event indicators z(t) are read from the FMU;
2. an RK4 step from the current time tc to the step's end (or to the next
   time event, when the FMU declared one before it);
3. an event indicator that changed sign (strictly positive to <= 0, or
   strictly negative to >= 0) marks a state event: its time is located by
   bisection on "has an indicator changed sign by tc + theta", each trial an
   RK4 sub-step from tc of length theta, to a bracket of
   ``EVENT_TIME_TOL_S``; the states are set at the bracket's right end (the
   first point past the crossing);
4. at an event (state or time): ``fmi2EnterEventMode``,
   ``fmi2NewDiscreteStates`` (3.0: ``fmi3UpdateDiscreteStates``) until it
   needs no more, ``fmi2EnterContinuousTimeMode``, the states read again; the step goes on
   from the event's time (back to 2), at most ``MAX_EVENTS_PER_STEP`` events
   a step (then the rest is integrated without locating);
5. at the step's end ``fmi2CompletedIntegratorStep``; an event it asks for
   is handled at t + dt.

An indicator exactly 0 at a sub-step's start (a ball put back on the floor
by its own event) is no crossing until it leaves 0 and comes back.
"""

from __future__ import annotations

import ctypes

import numpy as np

from .slots import RC_FAILED, Cs3Slot, Slot

EVENT_TIME_TOL_S = 1e-12  # width of the bracket a state event is located to, s
MAX_EVENTS_PER_STEP = 16  # events located per plant step; beyond it the rest of the step is integrated without
MAX_EVENT_ITERATIONS = 100  # fmi2NewDiscreteStates calls per event before the FMU counts as failed


class Me2Slot(Slot):
    """FMI 2.0 model exchange, integrated by RK4 at the plant step (the module docstring).

    Not for the real-time tick except :meth:`advance` (and what it calls).
    """

    def _instantiate(self):
        from fmpy.fmi2 import FMU2Model, fmi2EventInfo
        md = self.fmu.md
        s = FMU2Model(guid=md.guid, unzipDirectory=self.unzipped, modelIdentifier=md.modelExchange.modelIdentifier,
                      instanceName=self.fmu.table.name)
        s.instantiate()
        self._bind(s._functions, "fmi2", "GetDerivatives", ctypes.c_int32)
        self._info = fmi2EventInfo()
        self._info_ref = ctypes.byref(self._info)
        self.c_new_discrete = s._functions["fmi2NewDiscreteStates"]
        return s

    def _bind(self, fn: dict, prefix: str, derivatives: str, flag_type) -> None:
        """The per-step functions and buffers (FMI 2.0 and 3.0 share these signatures)."""
        md = self.fmu.md
        self.c_set_time, self.c_set_x = fn[f"{prefix}SetTime"], fn[f"{prefix}SetContinuousStates"]
        self.c_get_x, self.c_der = fn[f"{prefix}GetContinuousStates"], fn[f"{prefix}{derivatives}"]
        self.c_z, self.c_completed = fn[f"{prefix}GetEventIndicators"], fn[f"{prefix}CompletedIntegratorStep"]
        self.c_enter_event = fn[f"{prefix}EnterEventMode"]
        self.c_continuous = fn[f"{prefix}EnterContinuousTimeMode"]
        self.nx, self.nz = len(md.derivatives), int(md.numberOfEventIndicators or 0)
        self._x_c = (ctypes.c_double * max(self.nx, 1))()
        self._dx_c = (ctypes.c_double * max(self.nx, 1))()
        self._z_c = (ctypes.c_double * max(self.nz, 1))()
        self.x_buf = np.ctypeslib.as_array(self._x_c)[:self.nx]
        self.dx_buf = np.ctypeslib.as_array(self._dx_c)[:self.nx]
        self.z_buf = np.ctypeslib.as_array(self._z_c)[:self.nz]
        self._flag_event, self._flag_stop = flag_type(), flag_type()
        self._completed_refs = (ctypes.byref(self._flag_event), ctypes.byref(self._flag_stop))
        # the FMU's next time event (s, fmi2EventInfo.nextEventTime) and the events handled since the last start
        # (state, time and step events), in an array the compiled step (.me_compiled) updates as well
        self.ev_state = np.array([float("inf"), 0.0])

    @property
    def next_time_event(self) -> float:
        return float(self.ev_state[0])

    @next_time_event.setter
    def next_time_event(self, value: float) -> None:
        self.ev_state[0] = value

    @property
    def events(self) -> int:
        return int(self.ev_state[1])

    @events.setter
    def events(self, value: int) -> None:
        self.ev_state[1] = value

    def _new_discrete_states(self) -> tuple[int, bool, bool]:
        """One fmi2NewDiscreteStates: (status, more needed, terminate); the next time event kept."""
        info = self._info
        rc = self.c_new_discrete(self.comp, self._info_ref)
        self.next_time_event = float(info.nextEventTime) if info.nextEventTimeDefined else float("inf")
        return rc, bool(info.newDiscreteStatesNeeded), bool(info.terminateSimulation)

    def start(self) -> None:
        """Reset, start values, initialization, the event iteration that ends it (not for the real-time tick)."""
        s = self.slave
        s.reset()
        s.setupExperiment(startTime=0.0)
        self._apply_starts()
        s.enterInitializationMode()
        s.exitInitializationMode()
        self.next_time_event = float("inf")
        self.events = 0
        if self._event_iteration(after_init=True) > 1:
            raise RuntimeError(f"fmu {self.name}: the event iteration after initialization did not settle")
        self.failed = False

    # -- integration ----------------------------------------------------------------------------------
    def _derivatives(self, t: float, x: np.ndarray) -> tuple[int, np.ndarray]:
        comp = self.comp
        self.x_buf[:] = x
        rc = max(self.c_set_time(comp, t), self.c_set_x(comp, self._x_c, self.nx))
        rc = max(rc, self.c_der(comp, self._dx_c, self.nx))
        return rc, self.dx_buf.copy()

    def _rk4(self, t: float, x: np.ndarray, h: float) -> tuple[int, np.ndarray]:
        """x(t + h) by one classical RK4 step; the FMU left at (t + h, x(t + h))."""
        r1, k1 = self._derivatives(t, x)
        r2, k2 = self._derivatives(t + 0.5 * h, x + 0.5 * h * k1)
        r3, k3 = self._derivatives(t + 0.5 * h, x + 0.5 * h * k2)
        r4, k4 = self._derivatives(t + h, x + h * k3)
        x1 = x + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        self.x_buf[:] = x1
        rc = max(r1, r2, r3, r4, self.c_set_time(self.comp, t + h), self.c_set_x(self.comp, self._x_c, self.nx))
        return rc, x1

    def _indicators(self) -> tuple[int, np.ndarray]:
        if not self.nz:
            return 0, self.z_buf
        rc = self.c_z(self.comp, self._z_c, self.nz)
        return rc, self.z_buf.copy()

    @staticmethod
    def _crossed(z0: np.ndarray, z1: np.ndarray) -> bool:
        return bool(np.any(((z0 > 0.0) & (z1 <= 0.0)) | ((z0 < 0.0) & (z1 >= 0.0))))

    def _locate(self, tc: float, x: np.ndarray, z0: np.ndarray, h: float) -> tuple[int, float, np.ndarray]:
        """The first crossing in (0, h] by bisection: (status, theta past the crossing, x(tc + theta))."""
        lo, hi = 0.0, h
        while hi - lo > EVENT_TIME_TOL_S:
            mid = 0.5 * (lo + hi)
            if mid <= lo or mid >= hi:  # the bracket is as narrow as doubles allow
                break
            rc, _ = self._rk4(tc, x, mid)
            rz, z = self._indicators()
            if max(rc, rz) > 1:
                return max(rc, rz), hi, x
            if self._crossed(z0, z):
                hi = mid
            else:
                lo = mid
        rc, x1 = self._rk4(tc, x, hi)
        return rc, hi, x1

    def _event_iteration(self, after_init: bool = False) -> int:
        """Event mode (entered already after initialization), discrete states until settled, continuous mode."""
        comp = self.comp
        rc = 0 if after_init else self.c_enter_event(comp)
        for _ in range(MAX_EVENT_ITERATIONS):
            if rc > 1:
                return rc
            r, needed, stop = self._new_discrete_states()
            rc = max(rc, r)
            if stop:
                return RC_FAILED
            if not needed:
                break
        else:
            return RC_FAILED
        self.events += 0 if after_init else 1
        return max(rc, self.c_continuous(comp))

    def advance(self, t: float, dt: float) -> int:
        """States from t to t + dt with the events inside located and handled.  Called in the real-time loop."""
        comp = self.comp
        rc = self.c_get_x(comp, self._x_c, self.nx) if self.nx else 0
        x = self.x_buf.copy()
        rc = max(rc, self.c_set_time(comp, t))
        rz, z0 = self._indicators()
        rc = max(rc, rz)
        t_end, tc, located = t + dt, t, 0
        while rc <= 1:
            stop = min(t_end, self.next_time_event)
            time_event = self.next_time_event <= t_end
            r, x1 = self._rk4(tc, x, stop - tc)
            rz, z1 = self._indicators()
            rc = max(rc, r, rz)
            if rc > 1:
                break
            if located < MAX_EVENTS_PER_STEP and self._crossed(z0, z1):
                r, theta, x1 = self._locate(tc, x, z0, stop - tc)
                rc = max(rc, r)
                stop, time_event = tc + theta, True
            if not time_event:
                break
            located += 1
            rc = max(rc, self.c_set_time(comp, stop))  # the event's own time, not tc + (stop - tc) rounded
            rc = max(rc, self._event_iteration())
            if self.next_time_event <= stop:  # a time event not in the future: handled now, not again
                self.next_time_event = float("inf")
            rc = max(rc, self.c_get_x(comp, self._x_c, self.nx) if self.nx else 0)
            x, tc = self.x_buf.copy(), stop
            rz, z0 = self._indicators()
            rc = max(rc, rz)
            if tc >= t_end:
                break
        if rc <= 1:
            rc = max(rc, self.c_completed(comp, True, *self._completed_refs))
            if self._flag_stop.value:
                return RC_FAILED
            if self._flag_event.value:
                rc = max(rc, self._event_iteration())
        return rc


class Me3Slot(Me2Slot):
    """FMI 3.0 model exchange: the same integration, FMI 3.0's calls and types."""

    version = 3
    types = Cs3Slot.types

    def _instantiate(self):
        from fmpy.fmi3 import FMU3Model
        md = self.fmu.md
        s = FMU3Model(guid=md.guid, unzipDirectory=self.unzipped, modelIdentifier=md.modelExchange.modelIdentifier,
                      instanceName=self.fmu.table.name)
        s.instantiate()
        self._bind(s._functions, "fmi3", "GetContinuousStateDerivatives", ctypes.c_bool)
        self.c_update = s._functions["fmi3UpdateDiscreteStates"]
        self._update_flags = [ctypes.c_bool() for _ in range(5)]  # need update, terminate, nominals, values, time
        self._next_time = ctypes.c_double()
        self._update_refs = [ctypes.byref(f) for f in self._update_flags] + [ctypes.byref(self._next_time)]
        return s

    def start(self) -> None:
        s = self.slave
        s.reset()
        self._apply_starts()
        s.enterInitializationMode(startTime=0.0)
        s.exitInitializationMode()  # FMI 3.0 model exchange: in event mode from here
        self.next_time_event = float("inf")
        self.events = 0
        if self._event_iteration(after_init=True) > 1:
            raise RuntimeError(f"fmu {self.name}: the event iteration after initialization did not settle")
        self.failed = False

    @property
    def next_time_event(self) -> float:
        return float(self.ev_state[0])

    @next_time_event.setter
    def next_time_event(self, value: float) -> None:
        self.ev_state[0] = value

    @property
    def events(self) -> int:
        return int(self.ev_state[1])

    @events.setter
    def events(self, value: int) -> None:
        self.ev_state[1] = value

    def _new_discrete_states(self) -> tuple[int, bool, bool]:
        rc = self.c_update(self.comp, *self._update_refs)
        need, stop, _, _, timed = (f.value for f in self._update_flags)
        self.next_time_event = float(self._next_time.value) if timed else float("inf")
        return rc, need, stop

    get_real, set_real = Cs3Slot.get_real, Cs3Slot.set_real
    state_bytes, set_state_bytes = Cs3Slot.state_bytes, Cs3Slot.set_state_bytes


__all__ = ["EVENT_TIME_TOL_S", "MAX_EVENTS_PER_STEP", "Me2Slot", "Me3Slot"]
