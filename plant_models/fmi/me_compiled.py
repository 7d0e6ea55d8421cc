"""A model-exchange FMU (FMI 2.0 or 3.0) advanced over one step in compiled code:
:meth:`.model_exchange.Me2Slot.advance` with the FMU's C functions called by address.

The same classical RK4 at the plant step, the same bisection of a sign
change of the event indicators, the same event iteration, the same calls
in the same order on the same numbers as the Python slot, so the compiled
assembly (:mod:`.compiled`) equals the Python one bit for bit.  Its
record in the assembly's table (``M_*``) holds the functions' addresses,
the FMU's state, derivative and indicator buffers (the slot's ctypes
arrays), the addresses of what the event iteration's call writes
(FMI 2.0: ``fmi2NewDiscreteStates``' event info and its fields; FMI 3.0:
``fmi3UpdateDiscreteStates``' six out-pointers, in a table), the
completed-step flags (``fmi2Boolean`` is an int32, ``fmi3Boolean`` a byte:
``M_V3`` says which), the slot's ``next_time_event`` / ``events`` pair
(:attr:`.model_exchange.Me2Slot.ev_state`) and a scratch array (x, the
step's x, four RK4 slopes, three sets of indicators), all allocated when
the FMU was loaded.  Its start (initialization and the event iteration
that ends it) stays in Python.
"""

from __future__ import annotations

import ctypes

import numpy as np
from numba import carray, njit

from ..core.api import JIT as _JIT
from .cabi import (fmi2_completed_call, fmi2_mode_call, fmi2_pointer_call, fmi2_time_call, fmi2_vector_call,
                   fmi3_update_call, ptr_f64, ptr_i32, ptr_u8)
from .model_exchange import EVENT_TIME_TOL_S, MAX_EVENT_ITERATIONS, MAX_EVENTS_PER_STEP
from .slots import RC_FAILED

# M_NEW_DISCRETE: fmi2NewDiscreteStates or fmi3UpdateDiscreteStates; M_INFO: its argument (the event info, or the
# table of its six out-pointers); M_INFO_*: the addresses of the fields read (need, terminate, time defined, time)
(M_SET_TIME, M_SET_X, M_GET_X, M_GET_DER, M_GET_Z, M_COMPLETED, M_ENTER_EVENT, M_NEW_DISCRETE, M_CONTINUOUS,
 M_NX, M_NZ, M_X_C, M_DX_C, M_Z_C, M_INFO, M_INFO_NEEDED, M_INFO_STOP, M_INFO_DEFINED, M_INFO_TIME,
 M_FLAG_EVENT, M_FLAG_STOP, M_EVS, M_SCRATCH, M_V3, M_LEN) = range(25)
INF = np.inf
# not cached on their own: compiled into the assembly's step (plant_models.fmi.compiled), whose cache
# plant_models/core/cache.py drops when this module or one it takes constants from changes
JIT = dict(_JIT, cache=False)


def _event_words(s, keep: list) -> list[int]:
    """M_NEW_DISCRETE .. M_INFO_TIME of the record: the event iteration's call, its argument, the fields read."""
    if s.version == 3:  # fmi3UpdateDiscreteStates(instance, &need, &terminate, &nominals, &values, &defined, &time)
        refs = [ctypes.addressof(f) for f in s._update_flags] + [ctypes.addressof(s._next_time)]
        table = np.array(refs, dtype=np.int64)
        keep.append(table)
        return [_at(s.c_update), table.ctypes.data, refs[0], refs[1], refs[4], refs[5]]
    info, base = type(s._info), ctypes.addressof(s._info)
    return [_at(s.c_new_discrete), base, base + info.newDiscreteStatesNeeded.offset,
            base + info.terminateSimulation.offset, base + info.nextEventTimeDefined.offset,
            base + info.nextEventTime.offset]


def _at(fn) -> int:
    return int(ctypes.cast(fn, ctypes.c_void_p).value)


def me_words(s, keep: list) -> list[int]:
    """The record of a :class:`.model_exchange.Me2Slot` or ``Me3Slot`` (its functions bound, its buffers
    allocated)."""
    nx, nz = s.nx, s.nz
    scratch = np.zeros(6 * nx + 3 * nz + 1)
    keep.append(scratch)
    new_discrete, *info = _event_words(s, keep)
    return [_at(s.c_set_time), _at(s.c_set_x), _at(s.c_get_x), _at(s.c_der), _at(s.c_z), _at(s.c_completed),
            _at(s.c_enter_event), new_discrete, _at(s.c_continuous), nx, nz, ctypes.addressof(s._x_c),
            ctypes.addressof(s._dx_c), ctypes.addressof(s._z_c), *info, ctypes.addressof(s._flag_event),
            ctypes.addressof(s._flag_stop), s.ev_state.ctypes.data, scratch.ctypes.data, int(s.version == 3)]


@njit(**JIT)
def _flag(pm, m, address):
    """A boolean the FMU wrote at ``address``: an ``fmi2Boolean`` (int32) or an ``fmi3Boolean`` (one byte)."""
    if pm[m + M_V3]:
        return ptr_u8(address)[0] != 0
    return ptr_i32(address)[0] != 0


@njit(**JIT)
def _scratch(pm, m):
    """The scratch array (a view without an owner: the slot keeps it)."""
    return carray(ptr_f64(pm[m + M_SCRATCH]), 6 * pm[m + M_NX] + 3 * pm[m + M_NZ] + 1)


@njit(**JIT)
def _derivatives(pm, m, comp, t, k):
    """Slopes at (t, the states already in the FMU's state buffer) into ``k``: SetTime, SetContinuousStates,
    GetDerivatives (all three called, as the Python slot does).  Called in the real-time loop."""
    nx = pm[m + M_NX]
    rc = max(fmi2_time_call(pm[m + M_SET_TIME], comp, t), fmi2_vector_call(pm[m + M_SET_X], comp, pm[m + M_X_C], nx))
    rc = max(rc, fmi2_vector_call(pm[m + M_GET_DER], comp, pm[m + M_DX_C], nx))
    dx = ptr_f64(pm[m + M_DX_C])
    for i in range(nx):
        k[i] = dx[i]
    return rc


@njit(**JIT)
def _rk4(pm, m, comp, t, x, h, x1):
    """x(t + h) into ``x1`` by one classical RK4 step (the Python slot's expressions, in its order); the FMU left
    at (t + h, x(t + h)).  Called in the real-time loop."""
    nx = pm[m + M_NX]
    sc = _scratch(pm, m)
    k1, k2, k3, k4 = sc[2 * nx:3 * nx], sc[3 * nx:4 * nx], sc[4 * nx:5 * nx], sc[5 * nx:6 * nx]
    xc = ptr_f64(pm[m + M_X_C])
    for i in range(nx):
        xc[i] = x[i]
    r1 = _derivatives(pm, m, comp, t, k1)
    hh = 0.5 * h
    for i in range(nx):
        xc[i] = x[i] + hh * k1[i]
    r2 = _derivatives(pm, m, comp, t + hh, k2)
    for i in range(nx):
        xc[i] = x[i] + hh * k2[i]
    r3 = _derivatives(pm, m, comp, t + hh, k3)
    for i in range(nx):
        xc[i] = x[i] + h * k3[i]
    r4 = _derivatives(pm, m, comp, t + h, k4)
    w = h / 6.0
    for i in range(nx):
        x1[i] = x[i] + w * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i])
        xc[i] = x1[i]
    rc = max(max(r1, r2), max(r3, r4))
    rc = max(rc, fmi2_time_call(pm[m + M_SET_TIME], comp, t + h))
    return max(rc, fmi2_vector_call(pm[m + M_SET_X], comp, pm[m + M_X_C], nx))


@njit(**JIT)
def _indicators(pm, m, comp, z):
    nz = pm[m + M_NZ]
    if nz == 0:
        return np.int32(0)
    rc = fmi2_vector_call(pm[m + M_GET_Z], comp, pm[m + M_Z_C], nz)
    zc = ptr_f64(pm[m + M_Z_C])
    for i in range(nz):
        z[i] = zc[i]
    return rc


@njit(**JIT)
def _crossed(z0, z1, nz):
    for i in range(nz):
        if (z0[i] > 0.0 and z1[i] <= 0.0) or (z0[i] < 0.0 and z1[i] >= 0.0):
            return True
    return False


@njit(**JIT)
def _locate(pm, m, comp, tc, x, z0, h, x1):
    """The first crossing in (0, h] by bisection: (status, theta past the crossing); x(tc + theta) in ``x1``."""
    nx, nz = pm[m + M_NX], pm[m + M_NZ]
    zm = _scratch(pm, m)[6 * nx + 2 * nz:6 * nx + 3 * nz]
    lo, hi = 0.0, h
    while hi - lo > EVENT_TIME_TOL_S:
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        rc = _rk4(pm, m, comp, tc, x, mid, x1)
        rz = _indicators(pm, m, comp, zm)
        if max(rc, rz) > 1:
            return max(rc, rz), hi
        if _crossed(z0, zm, nz):
            hi = mid
        else:
            lo = mid
    return _rk4(pm, m, comp, tc, x, hi, x1), hi


@njit(**JIT)
def _event_iteration(pm, m, comp):
    """Event mode, fmi2NewDiscreteStates (fmi3UpdateDiscreteStates) until settled (the next time event kept),
    continuous-time mode."""
    rc = fmi2_mode_call(pm[m + M_ENTER_EVENT], comp)
    info = pm[m + M_INFO]
    evs = ptr_f64(pm[m + M_EVS])
    settled = False
    for _ in range(MAX_EVENT_ITERATIONS):
        if rc > 1:
            return rc
        if pm[m + M_V3]:
            r = fmi3_update_call(pm[m + M_NEW_DISCRETE], comp, info)
        else:
            r = fmi2_pointer_call(pm[m + M_NEW_DISCRETE], comp, info)
        evs[0] = ptr_f64(pm[m + M_INFO_TIME])[0] if _flag(pm, m, pm[m + M_INFO_DEFINED]) else INF
        rc = max(rc, r)
        if _flag(pm, m, pm[m + M_INFO_STOP]):
            return np.int32(RC_FAILED)
        if not _flag(pm, m, pm[m + M_INFO_NEEDED]):
            settled = True
            break
    if not settled:
        return np.int32(RC_FAILED)
    evs[1] += 1.0
    return max(rc, fmi2_mode_call(pm[m + M_CONTINUOUS], comp))


@njit(**JIT)
def me_advance(pm, m, comp, t, dt):
    """States from t to t + dt with the events inside located and handled (:meth:`.model_exchange.Me2Slot.advance`,
    line for line); returns the worst status.  Called in the real-time loop."""
    nx, nz = pm[m + M_NX], pm[m + M_NZ]
    sc = _scratch(pm, m)
    x, x1, z0, z1 = sc[:nx], sc[nx:2 * nx], sc[6 * nx:6 * nx + nz], sc[6 * nx + nz:6 * nx + 2 * nz]
    xc = ptr_f64(pm[m + M_X_C])
    evs = ptr_f64(pm[m + M_EVS])
    rc = fmi2_vector_call(pm[m + M_GET_X], comp, pm[m + M_X_C], nx) if nx else np.int32(0)
    for i in range(nx):
        x[i] = xc[i]
    rc = max(rc, fmi2_time_call(pm[m + M_SET_TIME], comp, t))
    rc = max(rc, _indicators(pm, m, comp, z0))
    t_end, tc, located = t + dt, t, 0
    while rc <= 1:
        stop = evs[0] if evs[0] < t_end else t_end  # Python's min(t_end, next time event)
        time_event = evs[0] <= t_end
        r = _rk4(pm, m, comp, tc, x, stop - tc, x1)
        rz = _indicators(pm, m, comp, z1)
        rc = max(rc, max(r, rz))
        if rc > 1:
            break
        if located < MAX_EVENTS_PER_STEP and _crossed(z0, z1, nz):
            r, theta = _locate(pm, m, comp, tc, x, z0, stop - tc, x1)
            rc = max(rc, r)
            stop, time_event = tc + theta, True
        if not time_event:
            break
        located += 1
        rc = max(rc, fmi2_time_call(pm[m + M_SET_TIME], comp, stop))  # the event's own time
        rc = max(rc, _event_iteration(pm, m, comp))
        if evs[0] <= stop:  # a time event not in the future: handled now, not again
            evs[0] = INF
        rc = max(rc, fmi2_vector_call(pm[m + M_GET_X], comp, pm[m + M_X_C], nx) if nx else np.int32(0))
        for i in range(nx):
            x[i] = xc[i]
        tc = stop
        rc = max(rc, _indicators(pm, m, comp, z0))
        if tc >= t_end:
            break
    if rc <= 1:
        rc = max(rc, fmi2_completed_call(pm[m + M_COMPLETED], comp, pm[m + M_FLAG_EVENT], pm[m + M_FLAG_STOP]))
        if _flag(pm, m, pm[m + M_FLAG_STOP]):
            return np.int32(RC_FAILED)
        if _flag(pm, m, pm[m + M_FLAG_EVENT]):
            rc = max(rc, _event_iteration(pm, m, comp))
    return rc


__all__ = ["M_LEN", "me_advance", "me_words"]
