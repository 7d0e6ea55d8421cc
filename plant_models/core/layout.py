"""Flat buffer layout of the compiled friction core, generated from one table.

The core keeps everything in four flat arrays, the way MuJoCo keeps ``mjModel``
and ``mjData``:

* ``mf`` -- model floats (frozen parameters),
* ``mi`` -- model ints (a header of sizes and field offsets, then integer
  parameters),
* ``df`` -- data floats (state, inputs, outputs, caches and workspace),
* ``di`` -- data ints (modes, caches, counters, event log).

Passing four arrays to a numba function costs about 0.3 us per call from
Python, against 5 us for a namedtuple of 40 arrays, which is why the core does
not use richer containers.  Each field has a *slot*: ``mi[slot]`` holds the
offset of the field in its buffer (a header slot holds the value itself).
Slot numbers are plain module ints, so the compiled code folds them as
constants and resolves every field with one integer load; nothing is looked up
by name at run time.

Every field is declared once, in :data:`TABLE` (as MuJoCo declares its structs
once, in ``mjxmacro.h``): a row ``F(name, buffer, size, group, doc)`` gives
the field's slot (its position in the table), the module constant of that
name, its place and length in its buffer (:func:`allocate`) and its line in
:func:`describe`.  ``buffer`` is ``mf``, ``mi``, ``df``, ``di`` or ``hdr``
(a header int in ``mi``); ``size`` an expression in the sizes below (for a
header int: the value :func:`allocate` writes, or empty when the
:class:`~.handle.Core` sets it from the spec).  A field is placed in its
buffer after the fields before it in the table, or right after the field its
``after`` names.  Adding a field is one line at the end of the table: it gets
the next slot number and the end of its buffer, and no other slot or offset
moves.  (The unused slots and the three ``after`` placements keep the slot
numbers and offsets of the hand-numbered layout this table replaced.)

Sizes: ``n`` shafts (or bodies), ``g`` friction rows (clutches), ``s`` springs,
``P`` breakpoints per spring characteristic, ``E`` event-log capacity, ``x``
row entries beyond the first two (rows of three or more entries), ``d`` = n
for a reduced system with full inertia and drag matrices (0 otherwise),
``ny`` the length of the integrated state vector (:func:`y_offsets`),
``plant_nf``/``plant_ni``/``plant_ndf``/``plant_ndi`` the plant's blocks,
``model_block`` the model floats ``MF_INERTIA`` .. ``MF_SETTINGS``, and the
constants ``N_SETTINGS``, ``N_FLAGS``, ``N_COUNTERS``.

Rows: the first two entries of row i sit in ``MI_ROW_A``/``MI_ROW_B`` and
``DF_COEF_A``/``DF_COEF_B`` (every row of the Powershift, DCT and chain has
exactly two, and their arithmetic is that of two entries); the further
entries of a row (``MI_ROW_NX[i]`` of them from ``MI_ROW_XOFF[i]``) in the
``*_X`` fields.  A row to the housing (a brake) has ``MI_ROW_NX[i] = -1``:
its one entry is a, and b repeats a with coefficient 0.

``python -m plant_models.core.layout`` prints the table with its slots.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

# indices inside fields, and the fixed sizes the table uses (N_*)
# settings inside MF_SETTINGS
SET_EVENT_TOL = 0  # event-time tolerance, fraction of the step
SET_RANK_TOL = 1  # relative pivot tolerance of the rank test
SET_REG = 2  # relative regularisation of redundant (over-constrained) rows
SET_CYCLE_TOL = 3  # relative tolerance of the cycle-consistency test
SET_SOLVER_TOL = 4  # relative tolerance of the multiplier sign test
SET_BREAK_MARGIN = 5  # relative excess over K that marks a breakaway inside a step
N_SETTINGS = 8

# flags inside DI_FLAGS
FLAG_COEF_DIRTY = 0  # a plant changed row coefficients since the last step
FLAG_CACHE_VALID = 1  # DF_P / DF_L / tree match the stuck list
FLAG_STATUS = 2  # status word of the last step
FLAG_OVERCONSTRAINED = 3  # stuck rows are redundant (rank deficient)
FLAG_LOCKED = 4  # some component is held at zero speed
FLAG_REUSE = 5  # the last step ended with an evaluation at its final state (DF_REUSE_* hold its inputs)
FLAG_DRIVE_REDUNDANT = 6  # a driven row could not be prescribed during the current step
FLAG_TREE_PARTIAL = 7  # the substitution order misses independent stuck rows: speeds are projected first
FLAG_HELD = 8  # some shaft is held at zero speed by a stuck row to the housing on it alone (a brake): zeroed
FLAG_RUN_HINTS = 9  # what a compiled offline run tells the next step (RUN_* bits); 0 outside such runs
RUN_OUTPUTS_UNREAD = 1  # nobody reads this step's outputs: a plant may skip writing them
RUN_MODEL_SAME = 2  # the model floats are those of the previous step: the core need not compare them
RUN_INPUTS_SAME = 4  # the plant's inputs (values, rates) are bit for bit the previous step's: a plant whose input
#                      mapping depends on them alone may skip it (the described transmission: its _same_inputs)
RUN_CORE_INPUTS_SAME = 8  # set by such a plant that skipped it: the core's inputs are those of the previous step,
#                           which the core accepted, so it need not check them again
N_FLAGS = 10

# counters inside DI_COUNTERS
CNT_STEPS = 0  # steps taken
CNT_EVENTS = 1  # events logged (monotonic; ring index = count % E)
CNT_SOLVER_ITER_MAX = 2  # most solver iterations seen in one solve
CNT_SOLVER_ITER_LAST = 3  # iterations of the last full solve
CNT_SUBSTEPS_MAX = 4  # most event sub-steps seen in one step
CNT_BUDGET_HITS = 5  # steps that ran out of event sub-steps
CNT_ROLLBACKS = 6  # steps rolled back for non-finite results
CNT_LOCATE_ITER_MAX = 7  # most iterations of one event-time search
N_COUNTERS = 8


class Field(NamedTuple):
    """One row of :data:`TABLE`."""

    name: str  # the module constant holding the slot ("" for an unused slot)
    buf: str  # "mf", "mi", "df", "di", or "hdr" (a header int in mi)
    size: str  # length in the sizes (see the module doc); for "hdr" the value allocate writes, or ""
    group: str  # key of GROUPS
    doc: str  # what the field holds, with its unit
    after: str = ""  # placed right after this field of its buffer (default: after the rows before it)


def F(name: str, buf: str, size: str, group: str, doc: str, after: str = "") -> Field:
    """A row of :data:`TABLE`."""
    return Field(name, buf, size, group, doc, after)


def _unused(count: int) -> tuple[Field, ...]:
    """Slots no field holds (kept so that the slot numbers after them stay)."""
    return (Field("", "", "", "", "unused"),) * count


GROUPS = {
    "hdr": "header: sizes and settings (ints in mi)",
    "model": "model parameters",
    "plant": "the plant's own blocks",
    "state": "state",
    "in": "inputs (first-order hold over the step: value + rate * (t - t_step))",
    "out": "computed at the end of each step",
    "cache": "caches of the current stuck set",
    "work": "workspace",
    "log": "event log",
    "solver": "modes, stuck set, tree and solver state",
    "kin": "kinematic rows (the kinematic-clutch article) and prescribed relative accelerations",
    "rows": "rows with other than two entries (reduced planetary transmissions, brakes, freewheels)",
    "dense": "reduced systems: full inertia and drag matrices (d = n, else 0)",
    "law": "force law: a compiled law the core calls at every evaluation (0 = none), its parameters and data",
}

TABLE: tuple[Field, ...] = (
    F("H_N", "hdr", "n", "hdr", "number of shafts n"),
    F("H_G", "hdr", "g", "hdr", "number of friction rows g"),
    F("H_S", "hdr", "s", "hdr", "number of springs s"),
    F("H_P", "hdr", "P", "hdr", "breakpoints per spring table P"),
    F("H_NY", "hdr", "ny", "hdr", "length of the integrated state vector"),
    F("H_EVCAP", "hdr", "E", "hdr", "event log capacity E"),
    F("H_MAX_EVENTS", "hdr", "", "hdr", "max. event sub-steps handled inside one step"),
    F("H_MAX_ITER", "hdr", "", "hdr", "max. iterations of the box-constrained friction solve"),
    F("H_PLANT_NF", "hdr", "plant_nf", "hdr", "length of the plant's float parameter block in mf"),
    F("H_PLANT_NI", "hdr", "plant_ni", "hdr", "length of the plant's int parameter block in mi"),
    F("H_PLANT_NDF", "hdr", "plant_ndf", "hdr", "length of the plant's float data block in df (io + state)"),
    F("H_PLANT_NDI", "hdr", "plant_ndi", "hdr", "length of the plant's int data block in di"),
    F("H_MAX_LOCATE", "hdr", "", "hdr", "max. iterations of one event-time search"),
    F("H_REUSE", "hdr", "", "hdr", "1: a step may start from the previous step's end evaluation (see DF_REUSE_*)"),
    F("H_NKIN", "hdr", "", "hdr", "number of kinematic rows (MF_KIN_SHIFT > 0)"),
    F("H_FN_STEP", "hdr", "", "hdr", "address of the compiled step entry point in this process (see core/entry.py)"),
    F("H_FN_START", "hdr", "", "hdr", "address of the compiled start entry point in this process"),
    F("H_NX", "hdr", "x", "hdr", "row entries beyond the first two, over all rows (x)"),
    F("H_HYPER", "hdr", "", "hdr", "rows with other than two entries (more than two, or one: to the housing)"),
    F("H_DENSE", "hdr", "d > 0", "hdr", "1: full matrices MF_MASS / MF_MINV / MF_DRAGM (a reduced system)"),
    F("MF_INERTIA", "mf", "n", "model", "inertia of each shaft, kg m^2 (or mass, kg)"),
    F("MF_INV_INERTIA", "mf", "n", "model", "1 / inertia"),
    F("MF_DRAG", "mf", "n", "model", "viscous drag to ground, N m s/rad (or N s/m)"),
    F("MF_COEF_A", "mf", "g", "model", "initial row coefficient on shaft a (radius in m, or ratio)"),
    F("MF_COEF_B", "mf", "g", "model", "initial row coefficient on shaft b"),
    F("MF_ACT_LAG", "mf", "g", "model", "first-order lag of the actuator, s (0 = none)"),
    F("MF_ACT_GAIN", "mf", "g", "model", "normal force per unit command (piston area, m^2)"),
    F("MF_ACT_PRELOAD", "mf", "g", "model", "return-spring force subtracted from it, N"),
    F("MF_GAIN_STATIC", "mf", "g", "model", "static capacity per unit normal force"),
    F("MF_GAIN_KINETIC", "mf", "g", "model", "Coulomb amplitude per unit normal force"),
    F("MF_STRIBECK_VS", "mf", "g", "model", "Stribeck velocity, row speed units (0 = no Stribeck)"),
    F("MF_STRIBECK_ALPHA", "mf", "g", "model", "Stribeck exponent"),
    F("MF_ROW_VISC", "mf", "g", "model", "viscous drag across the row, force per row speed"),
    F("MF_SPRING_CA", "mf", "s", "model", "twist-rate factor on shaft a"),
    F("MF_SPRING_CB", "mf", "s", "model", "twist-rate factor on shaft b"),
    F("MF_SPRING_K", "mf", "s", "model", "linear stiffness, N m/rad (used when no table)"),
    F("MF_SPRING_C", "mf", "s", "model", "damping, N m s/rad"),
    F("MF_SPRING_TX", "mf", "s*P", "model", "characteristic breakpoints: twist, rad"),
    F("MF_SPRING_TY", "mf", "s*P", "model", "characteristic breakpoints: torque, N m"),
    F("MF_SETTINGS", "mf", "N_SETTINGS", "model", "solver settings, see SET_*"),
    F("MF_PLANT", "mf", "plant_nf", "plant", "plant parameters"),
    F("MF_KIN_SHIFT", "mf", "g", "kin", "shift time of a kinematic row, s (0: a friction row)"),
    F("MF_KIN_CAP", "mf", "g", "kin", "force an engaged kinematic row holds at most, row force units"),
    F("MF_KIN_THRESH", "mf", "g", "kin", "a kinematic row is commanded engaged while its command u >= this"),
    *_unused(6),  # slots 44-49
    F("MI_ROW_A", "mi", "g", "model", "shaft index a of each row"),
    F("MI_ROW_B", "mi", "g", "model", "shaft index b of each row"),
    F("MI_SPRING_A", "mi", "s", "model", "shaft index a of each spring"),
    F("MI_SPRING_B", "mi", "s", "model", "shaft index b of each spring"),
    F("MI_SPRING_NPTS", "mi", "s", "model", "breakpoints used (0 = linear k)"),
    F("MI_PLANT", "mi", "plant_ni", "plant", "plant int parameters"),
    F("DI_DRV_LIST", "di", "g", "kin", "driven rows of an evaluation, then a mode solve's candidate marks",
      after="DI_KIN_PHASE"),
    *_unused(3),  # slots 57-59
    F("DF_TIME", "df", "1", "state", "simulation time, s"),
    F("DF_Y", "df", "ny", "state", "integrated state, see y_offsets"),
    F("DF_COEF_A", "df", "g", "state", "current row coefficient on shaft a (plants may change it)"),
    F("DF_COEF_B", "df", "g", "state", "current row coefficient on shaft b"),
    F("DF_DIR", "df", "g", "state", "slip direction of slipping rows (+1 / -1, 0 = free)"),
    F("DF_U_TAU", "df", "n", "in", "external torque on each shaft, N m"),
    F("DF_U_TAU_RATE", "df", "n", "in", "its rate, N m/s"),
    F("DF_U_ACT", "df", "g", "in", "actuator command (pressure in Pa, or force)"),
    F("DF_U_ACT_RATE", "df", "g", "in", "its rate per second"),
    F("DF_DELTA", "df", "g", "out", "relative speed of each row"),
    F("DF_MU", "df", "g", "out", "friction force of each row (constraint force when stuck)"),
    F("DF_CAP_S", "df", "g", "out", "static capacity K"),
    F("DF_CAP_K", "df", "g", "out", "Coulomb amplitude k"),
    F("DF_ACCEL", "df", "n", "out", "shaft accelerations"),
    F("DF_SPRING_TQ", "df", "s", "out", "spring torques"),
    F("DF_LAMBDA_REQ", "df", "g", "out", "force each stuck row needs (= mu when stuck)"),
    F("DF_P", "df", "n*n", "cache", "constrained inverse inertia, acc = P f"),
    F("DF_L", "df", "g*n", "cache", "stuck-row force map, lambda = L f (rows in stuck-list order)"),
    F("DF_RHO", "df", "g", "cache", "parent/child ratio of stuck tree rows"),
    F("DF_Y0", "df", "ny", "work", "state at the start of the current sub-step"),
    F("DF_YT", "df", "ny", "work", "trial state"),
    F("DF_YS", "df", "ny", "work", "stage state"),
    F("DF_K1", "df", "ny", "work", "RK4 stage derivative 1"),
    F("DF_K2", "df", "ny", "work", "RK4 stage derivative 2"),
    F("DF_K3", "df", "ny", "work", "RK4 stage derivative 3"),
    F("DF_K4", "df", "ny", "work", "RK4 stage derivative 4"),
    F("DF_DYE", "df", "ny", "work", "derivative at the trial end"),
    F("DF_F", "df", "n", "work", "generalised force of the last derivative evaluation"),
    F("DF_CAPS_T", "df", "3*g", "work", "static capacity at the three stage points (0, h/2, h) of a sub-step"),
    F("DF_CAPK_T", "df", "3*g", "work", "Coulomb amplitude at the three stage points"),
    F("DF_A", "df", "g*n", "work", "dense rows of the solve"),
    F("DF_W", "df", "g*g", "work", "Delassus matrix R M^-1 R^T of the solve"),
    F("DF_CH", "df", "g*g", "work", "Cholesky factor"),
    F("DF_BV", "df", "g", "work", "right-hand side"),
    F("DF_XV", "df", "g", "work", "solve vector"),
    F("DF_LAMW", "df", "g", "work", "multipliers of the solve"),
    F("DF_GRAD", "df", "g", "work", "slip accelerations of the solve"),
    F("DF_LO", "df", "g", "work", "lower bounds"),
    F("DF_HI", "df", "g", "work", "upper bounds"),
    F("DF_TMPN", "df", "n", "work", "workspace"),
    F("DF_TMPN2", "df", "n", "work", "workspace"),
    F("DF_GEV0", "df", "g", "work", "event functions at the sub-step start"),
    F("DF_GEV1", "df", "g", "work", "event functions at the trial end"),
    F("DF_BACKUP", "df", "ny + 3*g + 1", "work", "state saved for roll-back on a non-finite step"),
    F("DF_EV_TIME", "df", "E", "log", "event log: time, s"),
    F("DF_PLANT", "df", "plant_ndf", "plant", "plant io and plant state"),
    F("DF_PREV_DIR", "df", "g", "work", "slip directions before the current mode solve"),
    F("DF_XACT", "df", "3*g", "work", "actuator states at the three stage points"),
    F("DF_PROW", "df", "g", "work", "friction power of each row at the current evaluation"),
    F("DF_EXP_HALF", "df", "g", "work", "lag factor exp(-h/2T) for the cached sub-step length"),
    F("DF_EXP_FULL", "df", "g", "work", "lag factor exp(-h/T)"),
    F("DF_EXP_H", "df", "1", "work", "sub-step length h the lag factors belong to"),
    F("DF_POW", "df", "3", "work", "input, drag and damping power at the last evaluation"),
    F("DF_DT", "df", "g", "work", "relative speed of each non-stuck row at the last evaluation"),
    F("DF_GEVC", "df", "g", "work", "event functions at a trial point of the event search"),
    F("DF_SPLIT_C", "df", "g*g", "work", "redundant stuck rows: coefficients C of A = C A_I (stride g)"),
    F("DF_SPLIT_G", "df", "g*g", "work", "Cholesky factor of C^T C (stride g)"),
    F("DF_REUSE_Y", "df", "ny", "work", "state at the last step's end evaluation"),
    F("DF_REUSE_U", "df", "n + g", "work", "torques and unlagged actuator states that evaluation used"),
    F("DF_REUSE_MF", "df", "model_block", "work", "copy of the model floats it used (MF_INERTIA .. MF_SETTINGS)"),
    F("DI_MODE", "di", "g", "solver", "row mode, see MODE_*"),
    F("DI_BND", "di", "g", "solver", "solver bound state (-1 lower, 0 free, +1 upper)"),
    F("DI_STUCK", "di", "g", "solver", "list of stuck rows"),
    F("DI_NSTUCK", "di", "1", "solver", "length of that list"),
    F("DI_ORIENT", "di", "g", "solver", "+1: shaft a is the tree parent, -1: shaft b, 0: not a tree row"),
    F("DI_TREE_P", "di", "n", "solver", "tree edges in BFS order: parent shaft"),
    F("DI_TREE_C", "di", "n", "solver", "child shaft"),
    F("DI_TREE_R", "di", "n", "solver", "row"),
    F("DI_NTREE", "di", "1", "solver", "number of tree edges"),
    F("DI_LOCKED", "di", "n", "solver", "1 when the shaft belongs to a component held at zero speed"),
    F("DI_CAND", "di", "g", "solver", "candidate rows of the solve"),
    F("DI_COMP", "di", "n", "solver", "component id of each shaft (workspace)"),
    F("DI_FLAGS", "di", "N_FLAGS", "solver", "flags, see FLAG_*"),
    F("DI_COUNTERS", "di", "N_COUNTERS", "solver", "counters, see CNT_*"),
    F("DI_EV_ROW", "di", "E", "log", "event log: row"),
    F("DI_EV_KIND", "di", "E", "log", "event log: kind, see EV_*"),
    F("DI_BACKUP", "di", "2*g", "solver", "modes and bound states saved for roll-back"),
    F("DI_QUEUE", "di", "n", "solver", "BFS queue (workspace)"),
    F("DI_PLANT", "di", "plant_ndi", "plant", "plant int data"),
    F("DI_IDX", "di", "g", "solver", "index scratch of the solver"),
    F("DI_CBND", "di", "g", "solver", "bound states of the candidates during a solve"),
    F("DI_PREV_MODE", "di", "g", "solver", "row modes before the current mode solve"),
    F("DI_SAVED_MODE", "di", "g", "solver", "row modes before an event projection"),
    F("DF_DRIVE_ACC", "df", "g", "kin", "prescribed relative acceleration of a driven row, row speed units/s"),
    F("DI_DRIVE", "di", "g", "kin", "1: a driven row (its force is whatever gives DF_DRIVE_ACC) while not stuck"),
    F("DF_KIN_T0", "df", "g", "kin", "start time of the current engaging / disengaging phase, s"),
    F("DF_KIN_HOLD", "df", "g", "kin", "force held when disengaging started (>= 0), row force units"),
    F("DI_KIN_PHASE", "di", "g", "kin", "phase of a kinematic row, see KIN_*"),
    F("DF_KIN_CMD", "df", "2*g", "kin", "the caller's command and rate of kinematic rows, kept during a step"),
    F("DF_DRV_WS", "df", "g*n + g*g + g", "kin", "workspace of the driven-row solve"),
    F("MI_ROW_NX", "mi", "g", "rows", "entries of each row beyond a and b (-1: a row to the housing, entry a only)"),
    F("MI_ROW_XOFF", "mi", "g", "rows", "index of the row's first further entry in MI_ROW_XSHAFT / *_COEF_X"),
    F("MI_ROW_XSHAFT", "mi", "x", "rows", "shaft of each further entry"),
    F("MF_COEF_X", "mf", "x", "rows", "initial coefficient of each further entry"),
    F("DF_COEF_X", "df", "x", "rows", "current coefficient of each further entry (plants may change it)"),
    F("DF_RHO_AB", "df", "2*g", "rows", "stuck tree row of other than two entries: coefficients of a, b over the child"),
    F("DF_RHO_X", "df", "x", "rows", "the same for the further entries"),
    F("DI_CHILD", "di", "g", "rows", "entry (0 a, 1 b, 2 + q further q) a stuck tree row of other than two entries fixes"),
    F("DF_BACKUP_X", "df", "x", "rows", "further coefficients saved for roll-back"),
    F("MI_ONEWAY", "mi", "g", "rows", "1: a freewheel row (force 0 .. K, no friction while it overruns)"),
    F("DI_PEEL", "di", "n + g", "rows", "workspace of the substitution order: entries per shaft, then row marks"),
    F("DF_TMPN3", "df", "n", "rows", "workspace of the reconstruction"),
    F("MF_MASS", "mf", "d*d", "dense", "inertia matrix M, kg m^2"),
    F("MF_MINV", "mf", "d*d", "dense", "its inverse"),
    F("MF_DRAGM", "mf", "d*d", "dense", "drag matrix to ground, N m s/rad"),
    F("DF_AM", "df", "g*d", "dense", "A M^-1 of the last Delassus matrix built (rows of DF_A)"),
    *_unused(4),  # slots 166-169
    F("H_ONEWAY", "hdr", "", "hdr", "number of one-way rows (freewheels)"),
    F("DF_KIN_BACKUP", "df", "3*g", "kin", "DF_KIN_T0, DF_KIN_HOLD, DF_DRIVE_ACC at the step start (roll-back)",
      after="DF_DRV_WS"),
    F("DI_KIN_BACKUP", "di", "2*g", "kin", "DI_KIN_PHASE, DI_DRIVE at the step start", after="DI_DRV_LIST"),
    F("H_FN_LAW", "hdr", "", "law", "address of the compiled force law in this process, 0 = no law (entry.LAW_SIGNATURE)"),
    F("H_LAW_NF", "hdr", "law_nf", "law", "length of the law's float parameter block MF_LAW"),
    F("H_LAW_NI", "hdr", "law_ni", "law", "length of the law's int parameter block MI_LAW"),
    F("H_LAW_NDF", "hdr", "law_ndf", "law", "length of the law's float data block DF_LAW"),
    F("H_LAW_NZ", "hdr", "law_nz", "law", "number of law states z, integrated after the law's work account"),
    F("MF_LAW", "mf", "law_nf", "law", "the law's parameters"),
    F("MI_LAW", "mi", "law_ni", "law", "the law's int parameters"),
    F("DF_LAW", "df", "law_ndf", "law", "the law's data (its own scratch and reported values)"),
    F("DF_LAW_POW", "df", "law", "law", "power the law delivered at the last evaluation, W (only with a law: a plant"
      " without one keeps the data buffer, and its snapshot files, of the layout before the seam)"),
    F("DF_LAW_ZDOT", "df", "law_nz", "law", "time derivative of the law states at the last evaluation"),
    F("H_ACT_HOLD", "hdr", "hold", "hdr",
      "1: rows may hold their actuator on a ramp before its lag (DF_ACT_HOLD, DF_ACT_RAMP); a plant with the"
      " blocks may clear it for a step in which no row holds"),
    F("DF_ACT_HOLD", "df", "hold*g", "in", "time into the step until which the row's actuator state follows the ramp"
      " DF_ACT_RAMP instead of its lag, s (0: the lag from the step start; only with H_ACT_HOLD: a clutch fill)"),
    F("DF_ACT_RAMP", "df", "hold*g", "in", "slope of that ramp, command units/s"),
    F("H_FN_SOLVE", "hdr", "", "hdr", "address of the compiled mode solver's entry point in this process (core/entry.py)"),
)

BUFFERS = ("mf", "mi", "df", "di")
_SIZE_NAMES = frozenset(("n", "g", "s", "P", "E", "x", "d", "ny", "plant_nf", "plant_ni", "plant_ndf", "plant_ndi",
                         "law", "law_nf", "law_ni", "law_ndf", "law_nz", "hold", "model_block", "N_SETTINGS", "N_FLAGS",
                         "N_COUNTERS"))
_SIZE_NODES = (ast.Expression, ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.Name, ast.Load, ast.Constant, ast.Compare,
               ast.Gt)


def _compile_size(field: Field):
    """The size expression of a row as code, checked to use only sums and products of the sizes."""
    if not field.size:
        return None
    tree = ast.parse(field.size, mode="eval")
    for node in ast.walk(tree):
        if not isinstance(node, _SIZE_NODES) or (isinstance(node, ast.Name) and node.id not in _SIZE_NAMES) \
                or (isinstance(node, ast.Constant) and type(node.value) is not int):
            raise ValueError(f"layout: size of {field.name} is not a sum or product of the sizes: {field.size!r}")
    return compile(tree, f"<layout {field.name}>", "eval")


def _generate(table: tuple[Field, ...]):
    """Slots by name and the placement order of each buffer, from a table."""
    slots: dict[str, int] = {}
    order: dict[str, list[int]] = {b: [] for b in BUFFERS + ("hdr",)}
    for slot, f in enumerate(table):
        if not f.name:
            continue
        if f.name in slots or f.buf not in order or f.group not in GROUPS:
            raise ValueError(f"layout: row {slot} ({f.name}): repeated name, unknown buffer or unknown group")
        if f.buf != "hdr" and not f.size:
            raise ValueError(f"layout: field {f.name} has no size")
        slots[f.name] = slot
        if not f.after:
            order[f.buf].append(slot)
    for slot, f in enumerate(table):  # then the fields placed after a named one, in table order
        if f.name and f.after:
            placed = order[f.buf]
            if slots.get(f.after, -1) not in placed:
                raise ValueError(f"layout: {f.name} is placed after {f.after}, not a placed field of buffer {f.buf}")
            placed.insert(placed.index(slots[f.after]) + 1, slot)
    return slots, {b: tuple(v) for b, v in order.items()}


SLOTS, PLACEMENT = _generate(TABLE)
_SIZE_CODE = {slot: _compile_size(f) for slot, f in enumerate(TABLE) if f.name}
globals().update(SLOTS)  # the slot constants: MF_INERTIA = 20, ...
N_SLOTS = len(TABLE)

# kinematic row phases (the kinematic-clutch article)
KIN_DISENGAGED = 0  # no torque
KIN_ENGAGING = 1  # relative speed prescribed to fall linearly to zero over the shift time
KIN_ENGAGED = 2  # held at zero relative speed (a stuck row with capacity MF_KIN_CAP)
KIN_DISENGAGING = 3  # the held force ramps to zero over the shift time
KIN_PHASE_NAMES = {KIN_DISENGAGED: "disengaged", KIN_ENGAGING: "engaging", KIN_ENGAGED: "engaged",
                   KIN_DISENGAGING: "disengaging"}

# row modes
MODE_FREE = 0  # zero relative speed and zero capacity: no friction
MODE_STUCK = 1  # held at zero relative speed by static friction
MODE_SLIP = 2  # slipping in direction DF_DIR

# event kinds
EV_STICK = 1  # a slipping row reached zero relative speed and stuck
EV_BREAKAWAY = 2  # a stuck row's required force exceeded its static capacity
EV_REVERSAL = 3  # a slipping row crossed zero and kept slipping the other way
EVENT_NAMES = {EV_STICK: "stick", EV_BREAKAWAY: "breakaway", EV_REVERSAL: "reversal"}

# status bits returned by a step
ST_OK = 0
ST_OVERCONSTRAINED = 1  # redundant stuck rows: forces split by minimum norm
ST_LOCKED = 2  # a group of shafts is held at zero speed by the stuck rows
ST_EVENT_BUDGET = 4  # more events in one step than the sub-step budget
ST_SOLVER_LIMIT = 8  # friction solve stopped at its iteration limit
ST_NONFINITE = 16  # non-finite result: the step was rolled back
ST_BAD_INPUT = 32  # non-finite input: the step was not taken
ST_DRIVE_REDUNDANT = 64  # a driven row's relative speed is fixed by stuck rows: its prescription is dropped
STATUS_NAMES = {
    ST_OVERCONSTRAINED: "overconstrained",
    ST_LOCKED: "locked",
    ST_EVENT_BUDGET: "event_budget",
    ST_SOLVER_LIMIT: "solver_limit",
    ST_NONFINITE: "nonfinite_rolled_back",
    ST_BAD_INPUT: "bad_input",
    ST_DRIVE_REDUNDANT: "drive_redundant",
}


def status_names(status: int) -> list[str]:
    """Names of the bits set in a step status word."""
    return [name for bit, name in STATUS_NAMES.items() if status & bit]


# state vector layout helpers (offsets inside DF_Y)
def y_offsets(n: int, g: int, s: int, law: int = 0, nz: int = 0) -> dict[str, int]:
    """Offsets of the blocks of the integrated state vector.

    ``omega`` [n] shaft speeds, ``theta`` [n] shaft angles, ``twist`` [s]
    spring twists, ``act`` [g] actuator states (e.g. actual pressure),
    ``work`` [4 + g (+ 1)]: input work, drag work, spring damping work, impulse
    work (energy removed by the projections at sticking events), then the
    friction work of each row, then (with a force law, ``law = 1``) the work
    of the law (``W_ROW0 + g``).  All work in J, positive into the system.
    ``z`` [nz]: the force law's own states (after the work block).
    """
    o_omega = 0
    o_theta = n
    o_twist = 2 * n
    o_act = 2 * n + s
    o_work = 2 * n + s + g
    o_z = o_work + 4 + g + law
    return {"omega": o_omega, "theta": o_theta, "twist": o_twist, "act": o_act, "work": o_work, "z": o_z,
            "ny": o_z + nz}


# work accounts at the start of the work block of y (y_offsets()["work"]), J
W_INPUT = 0
W_DRAG = 1
W_DAMP = 2
W_IMPULSE = 3
W_ROW0 = 4


@dataclass(frozen=True)
class Sizes:
    n: int
    g: int
    s: int
    P: int
    E: int
    plant_nf: int = 0
    plant_ni: int = 0
    plant_ndf: int = 0
    plant_ndi: int = 0
    x: int = 0  # row entries beyond the first two
    d: int = 0  # n for a reduced system with full inertia and drag matrices, else 0
    law: int = 0  # 1: a force law is installed (its work account ends the work block)
    law_nf: int = 0
    law_ni: int = 0
    law_ndf: int = 0
    law_nz: int = 0
    hold: int = 0  # 1: rows may hold their actuator on a ramp before its lag (a clutch's hydraulic fill)

    @property
    def ny(self) -> int:
        return y_offsets(self.n, self.g, self.s, self.law, self.law_nz)["ny"]


def _size_values(sz: Sizes) -> dict[str, int]:
    """The names a size expression of TABLE may use, for these sizes."""
    ns = {"n": sz.n, "g": sz.g, "s": sz.s, "P": sz.P, "E": sz.E, "x": sz.x, "d": sz.d, "ny": sz.ny,
          "plant_nf": sz.plant_nf, "plant_ni": sz.plant_ni, "plant_ndf": sz.plant_ndf, "plant_ndi": sz.plant_ndi,
          "law": sz.law, "law_nf": sz.law_nf, "law_ni": sz.law_ni, "law_ndf": sz.law_ndf, "law_nz": sz.law_nz,
          "hold": sz.hold, "N_SETTINGS": N_SETTINGS, "N_FLAGS": N_FLAGS, "N_COUNTERS": N_COUNTERS, "model_block": 0}
    block = PLACEMENT["mf"]
    first, last = block.index(SLOTS["MF_INERTIA"]), block.index(SLOTS["MF_SETTINGS"])
    ns["model_block"] = sum(_size(slot, ns) for slot in block[first:last + 1])
    return ns


def _size(slot: int, ns: dict[str, int]) -> int:
    return int(eval(_SIZE_CODE[slot], {"__builtins__": {}}, ns))  # checked by _compile_size: sums and products


def model_block_len(sz: Sizes) -> int:
    """Length of the model floats from MF_INERTIA to the end of MF_SETTINGS (contiguous, in this order)."""
    return _size_values(sz)["model_block"]


def _fields(sz: Sizes):
    """``(slot, size)`` of every field of mf, mi, df and di, in the order they are placed in their buffer."""
    ns = _size_values(sz)
    return tuple([(slot, _size(slot, ns)) for slot in PLACEMENT[b]] for b in BUFFERS)


def allocate(sz: Sizes):
    """Allocate the four zeroed buffers for the given sizes, with offsets and header sizes filled in.

    Returns ``(mf, mi, df, di)``.
    """
    mf_f, mi_f, df_f, di_f = _fields(sz)
    # mi holds the header first, then its own fields
    mi_len = N_SLOTS + sum(size for _, size in mi_f)
    mi = np.zeros(max(mi_len, 1), dtype=np.int64)
    ns = _size_values(sz)
    for slot in PLACEMENT["hdr"]:
        if _SIZE_CODE[slot] is not None:
            mi[slot] = _size(slot, ns)

    def place(fields, start):
        off = start
        for slot, size in fields:
            mi[slot] = off
            off += size
        return off

    mf_len = place(mf_f, 0)
    place(mi_f, N_SLOTS)
    df_len = place(df_f, 0)
    di_len = place(di_f, 0)
    mf = np.zeros(max(mf_len, 1))
    df = np.zeros(max(df_len, 1))
    di = np.zeros(max(di_len, 1), dtype=np.int64)
    return mf, mi, df, di


def view(buf: np.ndarray, mi: np.ndarray, slot: int, size: int) -> np.ndarray:
    """A numpy view of one field (Python side; the compiled side slices the same way)."""
    off = int(mi[slot])
    return buf[off:off + size]


def describe() -> str:
    """The table as text: slot, name, buffer, size and doc of every field, by group in slot order."""
    lines = []
    for key, title in GROUPS.items():
        rows = [(slot, f) for slot, f in enumerate(TABLE) if f.name and f.group == key]
        if rows:
            lines.append(f"-- {title}")
            lines += [f"{slot:4d}  {f.name:<18} {f.buf:<3} [{f.size or 'spec'}]  {f.doc}" for slot, f in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    print(describe())
