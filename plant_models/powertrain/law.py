"""The powertrain's force law: the layout its components share and the helpers they act through.

The law the core calls (``assembly.POWERTRAIN_LAW``, generated from the
component table of :mod:`.table`) evaluates each component present, in the
table's order.  A component is one module (``engine.py``, ``converter.py``,
...): its parameter, state and data slots declared in a :class:`~.slots.Slots`
table, its compiled functions, and its Python side (reading, ports,
packing).  Nothing here names a component.

Blocks (offsets from ``MI_LAW``, ``MF_LAW``, ``DF_LAW``):

* ``MI_LAW``: the header (``H_*``), then the record offset of each kind of
  the table (``RECORDS``; -1: absent), the plant inputs the law reads, the
  work accounts' state indices, then one record per component present: the
  record header (``R_*``: where its floats, states and data are) followed by
  its own ints (``I_*`` of its module).
* ``MF_LAW``: the rows of ``T`` of the ports that are no independent speed
  (``n`` each), then each component's floats (``F_*``) and tables.
* ``DF_LAW``: the bus (``B_*``: what one component tells another within a
  step), a force scratch of ``n`` for the outputs' evaluation, then each
  component's data (``D_*``).
* The law's states ``z`` (after its work account in the state vector):
  each component's ``Z_*`` from its record's first state.

**Ports.**  A component acts on members of the description through ports:
any member may be one.  A port that is an independent speed of the reduced
system is read and driven directly, any other through its row of ``T``
(``w_m = T[m] q``; a torque ``tau`` on it is ``T[m]^T tau`` on ``q``).  A
component's port slot holds the independent speed's index, or ``-(1 + k)``
for the k-th row of ``T`` (resolved when the blocks are packed, so reading a
port costs one load).
Equations: docs/powertrain.md.
"""

from __future__ import annotations

import math

from numba import njit

from ..core.api import JIT, JIT_STAGE, L, y_omega, y_work
from .slots import Slots

HEADER = Slots(ints=(
    ("n_in", "number of plant inputs (their rates follow them in DF_PLANT)"),
    ("n_inputs", "number of plant inputs the components read"),
    ("inputs", "offset in MI_LAW of their input indices"),
    ("n_work", "number of work accounts (outputs work_*, J)"),
    ("work", "offset in MI_LAW of their indices among the law's states"),
), data=(
    ("pedal_on", "1.0: a driver commands the pedal in this step (set before the step)"),
    ("pedal", "the driver's pedal for this step, 0..1"),
))
globals().update(HEADER.constants("H..B"))  # H_N_IN, ..., B_PEDAL_ON, B_PEDAL; N_H, N_B
RECORDS = N_H  # noqa: F821  offset in MI_LAW of the record offsets, one per kind of the component table (-1: absent)

RECORD = Slots(ints=(
    ("floats", "offset in MF_LAW of the component's floats"),
    ("state", "index of its first state among the law's states"),
    ("data", "offset in DF_LAW of its data"),
))
globals().update(RECORD.constants("R"))  # R_FLOATS, R_STATE, R_DATA; N_R

RPM = 2.0 * math.pi / 60.0  # rad/s per rpm
# the elements the components add to the description (friction rows of the core) and the engine's member
ENGINE_MEMBER = "engine"  # the member a converter's impeller and the engine's crank make
LOCKUP = "lockup"  # the lock-up clutch element
BRAKE = "brake"  # the service brake element
ROLLING = "rolling"  # the rolling-resistance element

SCRATCH = N_B  # noqa: F821  offset in DF_LAW of the force scratch [n] of an evaluation made for the outputs only

# The helpers below (JIT_STAGE) are inlined into the components' functions, and those into the assembly's:
# the optimiser left calls to the table searches and the member mappings at every one of the law's
# evaluations a step.


@njit(**JIT_STAGE)
def record(mi, kind):
    """Offset in mi of the own ints of the component of table kind ``kind``, -1 when absent.

    Called in the real-time loop.
    """
    oli = mi[L.MI_LAW]
    r = mi[oli + RECORDS + kind]
    return -1 if r < 0 else oli + r + N_R  # noqa: F821


@njit(**JIT_STAGE)
def floats_of(mi, ri):
    """Offset in mf of the floats of the component whose ints are at mi[ri].  Called in the real-time loop."""
    return mi[L.MF_LAW] + mi[ri - N_R + R_FLOATS]  # noqa: F821


@njit(**JIT_STAGE)
def state_of(mi, ri):
    """Index of the component's first state among the law's states.  Called in the real-time loop."""
    return mi[ri - N_R + R_STATE]  # noqa: F821


@njit(**JIT_STAGE)
def data_of(mi, ri):
    """Offset in df of the component's data.  Called in the real-time loop."""
    return mi[L.DF_LAW] + mi[ri - N_R + R_DATA]  # noqa: F821


@njit(**JIT_STAGE)
def law_states(mi, oy):
    """Offset in df of the law's states in the state vector at df[oy].  Called in the real-time loop."""
    return oy + mi[L.H_NY] - mi[L.H_LAW_NZ]


@njit(**JIT_STAGE)
def port_speed(mf, mi, df, port, oy):
    """Speed of a port's member at the state df[oy], rad/s (``port``: see :func:`apply_torque`).  Called in the
    real-time loop."""
    if port >= 0:
        return df[oy + port]
    n = mi[L.H_N]
    ot = mi[L.MF_LAW] - (port + 1) * n
    w = 0.0
    for j in range(n):
        w += mf[ot + j] * df[oy + j]
    return w


@njit(**JIT_STAGE)
def apply_torque(mf, mi, df, port, of, tq):
    """Add torque tq (N m) on a port's member to the generalised forces at df[of].

    ``port`` (a component's port slot): the independent speed the member is
    (>= 0), or ``-(1 + k)`` for the k-th row of ``T`` at the start of
    ``MF_LAW`` (a member geared to others).  Called in the real-time loop.
    """
    if port >= 0:
        df[of + port] += tq
        return
    n = mi[L.H_N]
    ot = mi[L.MF_LAW] - (port + 1) * n
    for j in range(n):
        df[of + j] += mf[ot + j] * tq


@njit(**JIT_STAGE)
def law_input(mi, df, k, s):
    """Plant input k at time s into the step (first-order hold: value + rate s).  Called in the real-time loop."""
    op = mi[L.DF_PLANT]
    return df[op + k] + df[op + mi[mi[L.MI_LAW] + H_N_IN] + k] * s  # noqa: F821


@njit(**JIT_STAGE)
def table_linear(mf, ox, n, x):
    """Linear interpolation in the table at mf[ox] (n x values, then n y values), held beyond its ends.

    Called in the real-time loop.
    """
    if x <= mf[ox]:
        return mf[ox + n]
    if x >= mf[ox + n - 1]:
        return mf[ox + 2 * n - 1]
    q = 1
    while x > mf[ox + q]:
        q += 1
    x0 = mf[ox + q - 1]
    y0 = mf[ox + n + q - 1]
    return y0 + (mf[ox + n + q] - y0) * (x - x0) / (mf[ox + q] - x0)


@njit(**JIT_STAGE)
def hermite(mf, ox, n, q, x):
    """The monotone cubic of the table at ox (n x, n y, then n slopes) on its interval q (x in (x[q-1], x[q]]).

    Called in the real-time loop.
    """
    x0 = mf[ox + q - 1]
    h = mf[ox + q] - x0
    t = (x - x0) / h
    u = 1.0 - t
    y0 = mf[ox + n + q - 1]
    y1 = mf[ox + n + q]
    d0 = mf[ox + 2 * n + q - 1]
    d1 = mf[ox + 2 * n + q]
    return (y0 * (1.0 + 2.0 * t) + h * d0 * t) * u * u + (y1 * (3.0 - 2.0 * t) - h * d1 * u) * t * t


@njit(**JIT_STAGE)
def inputs_finite(mi, df):
    """Are the values and rates of every plant input the law reads finite?  Called in the real-time loop."""
    oli = mi[L.MI_LAW]
    op = mi[L.DF_PLANT]
    n_in = mi[oli + H_N_IN]  # noqa: F821
    oin = oli + mi[oli + H_INPUTS]  # noqa: F821
    probe = 0.0
    for j in range(mi[oli + H_N_INPUTS]):  # noqa: F821
        k = mi[oin + j]
        probe += (df[op + k] - df[op + k]) + (df[op + n_in + k] - df[op + n_in + k])
    return probe == 0.0  # x - x is NaN for inf or NaN


# The core's accounts and the kinetic energy, after the components' work accounts: with the elements'
# energy_<element> outputs they close the energy balance from the outputs alone (docs/powertrain.md, section 5).
CORE_ACCOUNTS = (
    ("work_input", "work of the plant's torque inputs since reset, J (0 when the engine is the only source)"),
    ("work_drag", "work of the members' viscous drags and the springs' damping since reset, J (<= 0)"),
    ("work_impulse", "work of the impulses that equalise speeds when elements stick, since reset, J (<= 0)"),
    ("kinetic_energy", "kinetic energy of every inertia (members, engine, vehicle reflected), J"),
)


@njit(**JIT_STAGE)
def kinetic_energy(mf, mi, df):
    """1/2 w^T M w at the current state, J (M the reduced inertia matrix, or the shafts' inertias).

    Called in the real-time loop.
    """
    ow = y_omega(mi)
    n = mi[L.H_N]
    e = 0.0
    if mi[L.H_DENSE] == 1:
        om = mi[L.MF_MASS]
        for i in range(n):
            row = 0.0
            for j in range(n):
                row += mf[om + i * n + j] * df[ow + j]
            e += df[ow + i] * row
    else:
        oj = mi[L.MF_INERTIA]
        for i in range(n):
            e += mf[oj + i] * df[ow + i] * df[ow + i]
    return 0.5 * e


@njit(**JIT_STAGE)
def write_work(mf, mi, df, q):
    """The components' work accounts, then the core's accounts and the kinetic energy (J, CORE_ACCOUNTS), from
    df[q] on, at the current state.  Called in the real-time loop."""
    oli = mi[L.MI_LAW]
    oz = law_states(mi, y_omega(mi))
    ow = oli + mi[oli + H_WORK]  # noqa: F821
    nw = mi[oli + H_N_WORK]  # noqa: F821
    for j in range(nw):
        df[q + j] = df[oz + mi[ow + j]]
    q += nw
    owk = y_work(mi)
    df[q] = df[owk + L.W_INPUT]
    df[q + 1] = df[owk + L.W_DRAG] + df[owk + L.W_DAMP]
    df[q + 2] = df[owk + L.W_IMPULSE]
    df[q + 3] = kinetic_energy(mf, mi, df)


@njit(**JIT)
def clear_scratch(mi, df):
    """Zero the force scratch of an evaluation made for the outputs; returns its offset.  Called in the
    real-time loop."""
    of = mi[L.DF_LAW] + SCRATCH
    for j in range(mi[L.H_N]):
        df[of + j] = 0.0
    return of
