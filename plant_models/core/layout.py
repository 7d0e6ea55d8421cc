"""Flat buffer layout of the compiled friction core.

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
offset of the field in its buffer.  Slot numbers are module constants, so the
compiled code resolves every field with one integer load; nothing is looked up
by name at run time.

Sizes: ``n`` shafts (or bodies), ``g`` friction rows (clutches), ``s`` springs,
``P`` breakpoints per spring characteristic, ``E`` event-log capacity, ``x``
row entries beyond the first two (rows of three or more entries), ``d`` = n
for a reduced system with full inertia and drag matrices (0 otherwise).

Rows: the first two entries of row i sit in ``MI_ROW_A``/``MI_ROW_B`` and
``DF_COEF_A``/``DF_COEF_B`` (every row of the Powershift, DCT and chain has
exactly two, and their arithmetic is that of two entries); the further
entries of a row (``MI_ROW_NX[i]`` of them from ``MI_ROW_XOFF[i]``) in the
``*_X`` fields.  A row to the housing (a brake) has ``MI_ROW_NX[i] = -1``:
its one entry is a, and b repeats a with coefficient 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# --------------------------------------------------------------------------
# header slots in mi (sizes and settings)
# --------------------------------------------------------------------------
H_N = 0  # number of shafts n
H_G = 1  # number of friction rows g
H_S = 2  # number of springs s
H_P = 3  # breakpoints per spring table P
H_NY = 4  # length of the integrated state vector
H_EVCAP = 5  # event log capacity E
H_MAX_EVENTS = 6  # max. event sub-steps handled inside one step
H_MAX_ITER = 7  # max. iterations of the box-constrained friction solve
H_PLANT_NF = 8  # length of the plant's float parameter block in mf
H_PLANT_NI = 9  # length of the plant's int parameter block in mi
H_PLANT_NDF = 10  # length of the plant's float data block in df (io + state)
H_PLANT_NDI = 11  # length of the plant's int data block in di
H_MAX_LOCATE = 12  # max. iterations of one event-time search
H_REUSE = 13  # 1: a step may start from the previous step's end evaluation (see DF_REUSE_*)
H_NKIN = 14  # number of kinematic rows (MF_KIN_SHIFT > 0)
H_FN_STEP = 15  # address of the compiled step entry point in this process (see core/entry.py)
H_FN_START = 16  # address of the compiled start entry point in this process
H_NX = 17  # row entries beyond the first two, over all rows (x)
H_HYPER = 18  # rows with other than two entries (more than two, or one: to the housing)
H_DENSE = 19  # 1: full inertia and drag matrices MF_MASS / MF_MINV / MF_DRAGM (a reduced system)
H_ONEWAY = 170  # number of one-way rows (freewheels)

# --------------------------------------------------------------------------
# model float fields (offset slots in mi)
# --------------------------------------------------------------------------
MF_INERTIA = 20  # [n] inertia of each shaft, kg m^2 (or mass, kg)
MF_INV_INERTIA = 21  # [n] 1 / inertia
MF_DRAG = 22  # [n] viscous drag to ground, N m s/rad (or N s/m)
MF_COEF_A = 23  # [g] initial row coefficient on shaft a (radius in m, or ratio)
MF_COEF_B = 24  # [g] initial row coefficient on shaft b
MF_ACT_LAG = 25  # [g] first-order lag of the actuator, s (0 = none)
MF_ACT_GAIN = 26  # [g] normal force per unit command (piston area, m^2)
MF_ACT_PRELOAD = 27  # [g] return-spring force subtracted from it, N
MF_GAIN_STATIC = 28  # [g] static capacity per unit normal force
MF_GAIN_KINETIC = 29  # [g] Coulomb amplitude per unit normal force
MF_STRIBECK_VS = 30  # [g] Stribeck velocity, row speed units (0 = no Stribeck)
MF_STRIBECK_ALPHA = 31  # [g] Stribeck exponent
MF_ROW_VISC = 32  # [g] viscous drag across the row, force per row speed
MF_SPRING_CA = 33  # [s] twist-rate factor on shaft a
MF_SPRING_CB = 34  # [s] twist-rate factor on shaft b
MF_SPRING_K = 35  # [s] linear stiffness, N m/rad (used when no table)
MF_SPRING_C = 36  # [s] damping, N m s/rad
MF_SPRING_TX = 37  # [s*P] characteristic breakpoints: twist, rad
MF_SPRING_TY = 38  # [s*P] characteristic breakpoints: torque, N m
MF_SETTINGS = 39  # [8] solver settings, see SET_*
MF_PLANT = 40  # [plant nf] plant parameters
MF_KIN_SHIFT = 41  # [g] shift time of a kinematic row, s (0: a friction row)
MF_KIN_CAP = 42  # [g] force an engaged kinematic row holds at most, row force units
MF_KIN_THRESH = 43  # [g] a kinematic row is commanded engaged while its command u >= this

# settings inside MF_SETTINGS
SET_EVENT_TOL = 0  # event-time tolerance, fraction of the step
SET_RANK_TOL = 1  # relative pivot tolerance of the rank test
SET_REG = 2  # relative regularisation of redundant (over-constrained) rows
SET_CYCLE_TOL = 3  # relative tolerance of the cycle-consistency test
SET_SOLVER_TOL = 4  # relative tolerance of the multiplier sign test
SET_BREAK_MARGIN = 5  # relative excess over K that marks a breakaway inside a step
N_SETTINGS = 8

# --------------------------------------------------------------------------
# model int fields
# --------------------------------------------------------------------------
MI_ROW_A = 50  # [g] shaft index a of each row
MI_ROW_B = 51  # [g] shaft index b of each row
MI_SPRING_A = 52  # [s] shaft index a of each spring
MI_SPRING_B = 53  # [s] shaft index b of each spring
MI_SPRING_NPTS = 54  # [s] breakpoints used (0 = linear k)
MI_PLANT = 55  # [plant ni] plant int parameters

# --------------------------------------------------------------------------
# data float fields
# --------------------------------------------------------------------------
# -- state
DF_TIME = 60  # [1] simulation time, s
DF_Y = 61  # [ny] integrated state, see Y_* below
DF_COEF_A = 62  # [g] current row coefficient on shaft a (plants may change it)
DF_COEF_B = 63  # [g] current row coefficient on shaft b
DF_DIR = 64  # [g] slip direction of slipping rows (+1 / -1, 0 = free)
# -- inputs (first-order hold over the step: value + rate * (t - t_step))
DF_U_TAU = 65  # [n] external torque on each shaft, N m
DF_U_TAU_RATE = 66  # [n] its rate, N m/s
DF_U_ACT = 67  # [g] actuator command (pressure in Pa, or force)
DF_U_ACT_RATE = 68  # [g] its rate per second
# -- computed at the end of each step
DF_DELTA = 69  # [g] relative speed of each row
DF_MU = 70  # [g] friction force of each row (constraint force when stuck)
DF_CAP_S = 71  # [g] static capacity K
DF_CAP_K = 72  # [g] Coulomb amplitude k
DF_ACCEL = 73  # [n] shaft accelerations
DF_SPRING_TQ = 74  # [s] spring torques
DF_LAMBDA_REQ = 75  # [g] force each stuck row needs (= mu when stuck)
# -- caches of the current stuck set
DF_P = 76  # [n*n] constrained inverse inertia, acc = P f
DF_L = 77  # [g*n] stuck-row force map, lambda = L f (rows in stuck-list order)
DF_RHO = 78  # [g] parent/child ratio of stuck tree rows
# -- workspace
DF_Y0 = 79  # [ny] state at the start of the current sub-step
DF_YT = 80  # [ny] trial state
DF_YS = 81  # [ny] stage state
DF_K1 = 82  # [ny]
DF_K2 = 83  # [ny]
DF_K3 = 84  # [ny]
DF_K4 = 85  # [ny]
DF_DYE = 86  # [ny] derivative at the trial end
DF_F = 87  # [n] generalised force of the last derivative evaluation
DF_CAPS_T = 88  # [3g] static capacity at the three stage points (0, h/2, h) of a sub-step
DF_CAPK_T = 89  # [3g] Coulomb amplitude at the three stage points
DF_A = 90  # [g*n] dense rows of the solve
DF_W = 91  # [g*g] Delassus matrix R M^-1 R^T of the solve
DF_CH = 92  # [g*g] Cholesky factor
DF_BV = 93  # [g] right-hand side
DF_XV = 94  # [g] solve vector
DF_LAMW = 95  # [g] multipliers of the solve
DF_GRAD = 96  # [g] slip accelerations of the solve
DF_LO = 97  # [g] lower bounds
DF_HI = 98  # [g] upper bounds
DF_TMPN = 99  # [n]
DF_TMPN2 = 100  # [n]
DF_GEV0 = 101  # [g] event functions at the sub-step start
DF_GEV1 = 102  # [g] event functions at the trial end
DF_BACKUP = 103  # [ny + 3g + 1] state saved for roll-back on a non-finite step
DF_EV_TIME = 104  # [E] event log: time, s
DF_PLANT = 105  # [plant ndf] plant io and plant state
DF_PREV_DIR = 106  # [g] slip directions before the current mode solve
DF_XACT = 107  # [3g] actuator states at the three stage points
DF_PROW = 108  # [g] friction power of each row at the current evaluation
DF_EXP_HALF = 109  # [g] lag factor exp(-h/2T) for the cached sub-step length
DF_EXP_FULL = 110  # [g] lag factor exp(-h/T)
DF_EXP_H = 111  # [1] sub-step length h the lag factors belong to
DF_POW = 112  # [3] input, drag and damping power at the last evaluation
DF_DT = 113  # [g] relative speed of each non-stuck row at the last evaluation
DF_GEVC = 114  # [g] event functions at a trial point of the event search
DF_SPLIT_C = 115  # [g*g] redundant stuck rows: coefficients C of A = C A_I (stride g)
DF_SPLIT_G = 116  # [g*g] Cholesky factor of C^T C (stride g)
DF_REUSE_Y = 117  # [ny] state at the last step's end evaluation
DF_REUSE_U = 118  # [n + g] torques and unlagged actuator states that evaluation used
DF_REUSE_MF = 119  # [model block] copy of the model floats it used (MF_INERTIA .. MF_SETTINGS)

# --------------------------------------------------------------------------
# data int fields
# --------------------------------------------------------------------------
DI_MODE = 120  # [g] row mode, see MODE_*
DI_BND = 121  # [g] solver bound state (-1 lower, 0 free, +1 upper)
DI_STUCK = 122  # [g] list of stuck rows
DI_NSTUCK = 123  # [1] length of that list
DI_ORIENT = 124  # [g] +1: shaft a is the tree parent, -1: shaft b, 0: not a tree row
DI_TREE_P = 125  # [n] tree edges in BFS order: parent shaft
DI_TREE_C = 126  # [n] child shaft
DI_TREE_R = 127  # [n] row
DI_NTREE = 128  # [1] number of tree edges
DI_LOCKED = 129  # [n] 1 when the shaft belongs to a component held at zero speed
DI_CAND = 130  # [g] candidate rows of the solve
DI_COMP = 131  # [n] component id of each shaft (workspace)
DI_FLAGS = 132  # [N_FLAGS] see FLAG_*
DI_COUNTERS = 133  # [8] see CNT_*
DI_EV_ROW = 134  # [E] event log: row
DI_EV_KIND = 135  # [E] event log: kind, see EV_*
DI_BACKUP = 136  # [2g] modes and bound states saved for roll-back
DI_QUEUE = 137  # [n] BFS queue (workspace)
DI_PLANT = 138  # [plant ndi] plant int data
DI_IDX = 139  # [g] index scratch of the solver
DI_CBND = 140  # [g] bound states of the candidates during a solve
DI_PREV_MODE = 141  # [g] row modes before the current mode solve
DI_SAVED_MODE = 142  # [g] row modes before an event projection
# -- kinematic rows (the kinematic-clutch article) and prescribed relative accelerations
DF_DRIVE_ACC = 143  # [g] prescribed relative acceleration of a driven row, row speed units/s
DI_DRIVE = 144  # [g] 1: the row is driven (its force is whatever gives DF_DRIVE_ACC) while not stuck
DF_KIN_T0 = 145  # [g] start time of the current engaging / disengaging phase, s
DF_KIN_HOLD = 146  # [g] force held when disengaging started (>= 0), row force units
DI_KIN_PHASE = 147  # [g] phase of a kinematic row, see KIN_*
DF_KIN_CMD = 148  # [2g] the caller's actuator command and rate of kinematic rows, kept during a step
DF_DRV_WS = 149  # [g*n + g*g + g] workspace of the driven-row solve
DI_DRV_LIST = 56  # [g] driven rows of the current evaluation, then candidate marks of a mode solve
# -- rows with other than two entries (reduced planetary transmissions, brakes, freewheels)
MI_ROW_NX = 150  # [g] entries of each row beyond a and b (-1: a row to the housing, entry a only)
MI_ROW_XOFF = 151  # [g] index of the row's first further entry in MI_ROW_XSHAFT / *_COEF_X
MI_ROW_XSHAFT = 152  # [x] shaft of each further entry
MF_COEF_X = 153  # [x] initial coefficient of each further entry
DF_COEF_X = 154  # [x] current coefficient of each further entry (plants may change it)
DF_RHO_AB = 155  # [2g] stuck tree row with other than two entries: coefficient of a, b over the child's
DF_RHO_X = 156  # [x] the same for the further entries
DI_CHILD = 157  # [g] entry (0 a, 1 b, 2 + q further entry q) a stuck tree row with other than two entries fixes
DF_BACKUP_X = 158  # [x] further coefficients saved for roll-back
MI_ONEWAY = 159  # [g] 1: a freewheel row (force 0 .. K, no friction while it overruns)
DI_PEEL = 160  # [n + g] workspace of the substitution order: entries per shaft, then row marks
DF_TMPN3 = 161  # [n] workspace of the reconstruction
# -- reduced systems: full inertia and drag matrices (d = n, else 0)
MF_MASS = 162  # [d*d] inertia matrix M, kg m^2
MF_MINV = 163  # [d*d] its inverse
MF_DRAGM = 164  # [d*d] drag matrix to ground, N m s/rad
DF_AM = 165  # [g*d] A M^-1 of the last Delassus matrix built (rows of DF_A)

DF_KIN_BACKUP = 171  # [3g] DF_KIN_T0, DF_KIN_HOLD, DF_DRIVE_ACC at the step start (a roll-back restores them)
DI_KIN_BACKUP = 172  # [2g] DI_KIN_PHASE, DI_DRIVE at the step start

# -- force law (a compiled law the core calls at every evaluation; 0 = none). See the block
#    "force law" at the end of this module for the law's state and work account.
H_FN_LAW = 173  # address of the compiled force law in this process, 0 = no law (core/entry.py LAW_SIGNATURE)
H_LAW_NF = 174  # length of the law's float parameter block MF_LAW
H_LAW_NI = 175  # length of the law's int parameter block MI_LAW
H_LAW_NDF = 176  # length of the law's float data block DF_LAW
H_LAW_NZ = 177  # number of law states z, integrated in the state vector after the law's work account
MF_LAW = 178  # [law nf] the law's parameters
MI_LAW = 179  # [law ni] the law's int parameters
DF_LAW = 180  # [law ndf] the law's data (its own scratch and reported values)
DF_LAW_POW = 181  # [1] power the law delivered at the last evaluation, W
DF_LAW_ZDOT = 182  # [nz] time derivative of the law states at the last evaluation

N_SLOTS = 183

# kinematic row phases (the kinematic-clutch article)
KIN_DISENGAGED = 0  # no torque
KIN_ENGAGING = 1  # relative speed prescribed to fall linearly to zero over the shift time
KIN_ENGAGED = 2  # held at zero relative speed (a stuck row with capacity MF_KIN_CAP)
KIN_DISENGAGING = 3  # the held force ramps to zero over the shift time
KIN_PHASE_NAMES = {KIN_DISENGAGED: "disengaged", KIN_ENGAGING: "engaging", KIN_ENGAGED: "engaged",
                   KIN_DISENGAGING: "disengaging"}

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

    @property
    def ny(self) -> int:
        return y_offsets(self.n, self.g, self.s, self.law, self.law_nz)["ny"]


def model_block_len(sz: Sizes) -> int:
    """Length of the model floats from MF_INERTIA to the end of MF_SETTINGS (contiguous, in this order)."""
    return 3 * sz.n + 10 * sz.g + 4 * sz.s + 2 * sz.s * sz.P + N_SETTINGS


def _fields(sz: Sizes):
    n, g, s, P, E, ny = sz.n, sz.g, sz.s, sz.P, sz.E, sz.ny
    mf = [
        (MF_INERTIA, n), (MF_INV_INERTIA, n), (MF_DRAG, n), (MF_COEF_A, g), (MF_COEF_B, g),
        (MF_ACT_LAG, g), (MF_ACT_GAIN, g), (MF_ACT_PRELOAD, g), (MF_GAIN_STATIC, g), (MF_GAIN_KINETIC, g),
        (MF_STRIBECK_VS, g), (MF_STRIBECK_ALPHA, g), (MF_ROW_VISC, g),
        (MF_SPRING_CA, s), (MF_SPRING_CB, s), (MF_SPRING_K, s), (MF_SPRING_C, s),
        (MF_SPRING_TX, s * P), (MF_SPRING_TY, s * P), (MF_SETTINGS, N_SETTINGS), (MF_PLANT, sz.plant_nf),
        (MF_KIN_SHIFT, g), (MF_KIN_CAP, g), (MF_KIN_THRESH, g),
        (MF_COEF_X, sz.x), (MF_MASS, sz.d * sz.d), (MF_MINV, sz.d * sz.d), (MF_DRAGM, sz.d * sz.d),
        (MF_LAW, sz.law_nf),
    ]
    mi = [(MI_ROW_A, g), (MI_ROW_B, g), (MI_SPRING_A, s), (MI_SPRING_B, s), (MI_SPRING_NPTS, s), (MI_PLANT, sz.plant_ni),
          (MI_ROW_NX, g), (MI_ROW_XOFF, g), (MI_ROW_XSHAFT, sz.x), (MI_ONEWAY, g), (MI_LAW, sz.law_ni)]
    df = [
        (DF_TIME, 1), (DF_Y, ny), (DF_COEF_A, g), (DF_COEF_B, g), (DF_DIR, g),
        (DF_U_TAU, n), (DF_U_TAU_RATE, n), (DF_U_ACT, g), (DF_U_ACT_RATE, g),
        (DF_DELTA, g), (DF_MU, g), (DF_CAP_S, g), (DF_CAP_K, g), (DF_ACCEL, n), (DF_SPRING_TQ, s), (DF_LAMBDA_REQ, g),
        (DF_P, n * n), (DF_L, g * n), (DF_RHO, g),
        (DF_Y0, ny), (DF_YT, ny), (DF_YS, ny), (DF_K1, ny), (DF_K2, ny), (DF_K3, ny), (DF_K4, ny), (DF_DYE, ny),
        (DF_F, n), (DF_CAPS_T, 3 * g), (DF_CAPK_T, 3 * g), (DF_A, g * n), (DF_W, g * g), (DF_CH, g * g),
        (DF_BV, g), (DF_XV, g), (DF_LAMW, g), (DF_GRAD, g), (DF_LO, g), (DF_HI, g), (DF_TMPN, n), (DF_TMPN2, n),
        (DF_GEV0, g), (DF_GEV1, g), (DF_BACKUP, ny + 3 * g + 1), (DF_EV_TIME, E), (DF_PLANT, sz.plant_ndf),
        (DF_PREV_DIR, g), (DF_XACT, 3 * g), (DF_PROW, g), (DF_EXP_HALF, g), (DF_EXP_FULL, g), (DF_EXP_H, 1),
        (DF_POW, 3), (DF_DT, g), (DF_GEVC, g), (DF_SPLIT_C, g * g), (DF_SPLIT_G, g * g),
        (DF_REUSE_Y, ny), (DF_REUSE_U, n + g), (DF_REUSE_MF, model_block_len(sz)),
        (DF_DRIVE_ACC, g), (DF_KIN_T0, g), (DF_KIN_HOLD, g), (DF_KIN_CMD, 2 * g), (DF_DRV_WS, g * n + g * g + g),
        (DF_KIN_BACKUP, 3 * g),
        (DF_COEF_X, sz.x), (DF_RHO_AB, 2 * g), (DF_RHO_X, sz.x), (DF_BACKUP_X, sz.x), (DF_TMPN3, n), (DF_AM, g * sz.d),
        (DF_LAW, sz.law_ndf), (DF_LAW_POW, 1), (DF_LAW_ZDOT, sz.law_nz),
    ]
    di = [
        (DI_MODE, g), (DI_BND, g), (DI_STUCK, g), (DI_NSTUCK, 1), (DI_ORIENT, g), (DI_TREE_P, n), (DI_TREE_C, n),
        (DI_TREE_R, n), (DI_NTREE, 1), (DI_LOCKED, n), (DI_CAND, g), (DI_COMP, n), (DI_FLAGS, N_FLAGS), (DI_COUNTERS, 8),
        (DI_EV_ROW, E), (DI_EV_KIND, E), (DI_BACKUP, 2 * g), (DI_QUEUE, n), (DI_PLANT, sz.plant_ndi),
        (DI_IDX, g), (DI_CBND, g), (DI_PREV_MODE, g), (DI_SAVED_MODE, g),
        (DI_DRIVE, g), (DI_KIN_PHASE, g), (DI_DRV_LIST, g), (DI_KIN_BACKUP, 2 * g), (DI_CHILD, g),
        (DI_PEEL, n + g),
    ]
    return mf, mi, df, di


def allocate(sz: Sizes):
    """Allocate the four zeroed buffers for the given sizes, with offsets filled in.

    Returns ``(mf, mi, df, di)``.
    """
    mf_f, mi_f, df_f, di_f = _fields(sz)
    header = N_SLOTS
    # mi holds the header first, then its own fields
    mi_len = header + sum(size for _, size in mi_f)
    mi = np.zeros(max(mi_len, 1), dtype=np.int64)
    mi[H_N], mi[H_G], mi[H_S], mi[H_P], mi[H_NY], mi[H_EVCAP] = sz.n, sz.g, sz.s, sz.P, sz.ny, sz.E
    mi[H_PLANT_NF], mi[H_PLANT_NI], mi[H_PLANT_NDF], mi[H_PLANT_NDI] = sz.plant_nf, sz.plant_ni, sz.plant_ndf, sz.plant_ndi
    mi[H_NX], mi[H_DENSE] = sz.x, 1 if sz.d else 0
    mi[H_LAW_NF], mi[H_LAW_NI], mi[H_LAW_NDF], mi[H_LAW_NZ] = sz.law_nf, sz.law_ni, sz.law_ndf, sz.law_nz

    def place(fields, start):
        off = start
        for slot, size in fields:
            mi[slot] = off
            off += size
        return off

    mf_len = place(mf_f, 0)
    place(mi_f, header)
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
