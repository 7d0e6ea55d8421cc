"""The compiled step of the transmission plant (:mod:`.transmission`) and the layout of its tables.

Inputs -> core step -> outputs for any described transmission: pressures
and torques mapped onto the independent speeds (``T^T tau``), the
selectors' row coefficients and capacities, then every output (member
speeds ``T q``, ratio, per element and selector, springs, the gear teeth's
torques rebuilt from the members' accelerations, the components' and the
hydraulics' outputs).  :mod:`.transmission` holds the parameters, the ports,
the Python code that packs the tables laid out here (``PI_*`` / ``PF_*``)
and the plant class.

Why the kernels and the table layout are one module apart from the rest:
numba folds module constants into a kernel and keys the kernel's on-disk
cache to the kernel's own source file, and :mod:`plant_models.core.cache`
adds only the core's and the components' sources (``core/``,
``powertrain/``) to a plant module's stamp, not the other plant modules'.
So every kernel of the plant and every constant one folds in live here: an
edit of this file recompiles them (numba's own check), an edit of
:mod:`.transmission` (Python only) recompiles nothing.
"""

from __future__ import annotations

import math

from numba import njit

from ..clutch import BAR
from ..contract.columns import Columns
from ..core.api import JIT, JIT_STAGE, L, y_act, y_omega, y_row_work
from ..friction_plant import CORE_STATUS
from ..plant import Ports
from ..powertrain.assembly import (before_step, commands_core_inputs, core_inputs, inputs_changed, inputs_finite,
                                   keep_law_inputs, write_outputs)
from ..powertrain.hydraulics import hydraulics_after, hydraulics_before, write_fill_outputs
from .ratio import RATIO_LIMIT, RATIO_MIN_OUTPUT_SPEED
from . import friction_step

# plant int parameters (MI_PLANT block): sizes, port blocks, then the offsets of the int tables
# (in MI_PLANT) and of the float tables (in MF_PLANT), which follow
HEADER = Columns("the plant's int parameters (MI_PLANT): sizes, port blocks, offsets of the int and float tables", (
    ("PI_N_IN", "number of inputs (their rates follow them)"),
    ("PI_N_MEM", "members"),
    ("PI_N_EL", "shift elements (core rows 0 .. n_el - 1)"),
    ("PI_N_SEL", "selectors (core rows n_el .. n_el + n_sel - 1)"),
    ("PI_N_TQ", "torque inputs"),
    ("PI_N_GEAR", "gears of the shift table"),
    ("PI_N_REL", "independent rigid relations"),
    ("PI_N_RELOUT", "relation torque outputs"),
    ("PI_N_SPRING", "springs"),
    ("PI_INPUT_MEMBER", "the input member (its speed is the plant's input speed)"),
    ("PI_OUTPUT_MEMBER", "the output member"),
    ("PI_IN_TQ", "input index of the first torque input"),
    ("PI_OUT_W", "output index of w_<member 0>"),
    ("PI_OUT_WOUT", "output index of w_out"),
    ("PI_OUT_GEAR", "output index of gear"),
    ("PI_OUT_RATIO", "output index of ratio"),
    ("PI_OUT_EL", "first element block"),
    ("PI_OUT_SEL", "first selector block"),
    ("PI_OUT_SPRING", "first spring torque"),
    ("PI_OUT_REL", "first relation torque"),
    ("PI_OUT_STATUS", "output index of status"),
    ("PI_EL_PORT", "[elements] its pressure input (-1: none, a freewheel)"),
    ("PI_TQ_MEMBER", "[torque inputs] the member it acts on"),
    ("PI_SEL_PORT", "[selectors] its command input"),
    ("PI_SEL_NPOS", "[selectors] number of positions"),
    ("PI_SEL_POS", "[selectors] its first position in the position tables"),
    ("PI_POS_VALUE", "[positions] command value"),
    ("PI_GEAR", "[gears] number, n elements, elements..., n positions, (selector, value)..."),
    ("PI_RELOUT", "[relation outputs] (relation, member)"),
    ("PI_SPRING_A", "[springs] member a (twist rate w_a - w_b)"),
    ("PI_SPRING_B", "[springs] member b"),
    ("PI_MEM_COORD", "[members] the independent speed the member is, or -1 (geared to others)"),
    ("PF_T", "[members x n] w_members = T q"),
    ("PF_J", "[members] inertia, kg m^2"),
    ("PF_B", "[members] drag, N m s/rad"),
    ("PF_EL_C", "[elements x members] each element's row over the members"),
    ("PF_EL_R", "[elements] radius its torque and slip are given at (1 for rows in torque units)"),
    ("PF_TQ_SIGN", "[torque inputs] +1 drives, -1 resists"),
    ("PF_POS_COEF", "[positions] selector row coefficient on the 'to' member: -ratio"),
    ("PF_POS_SYNC", "[positions] synchronizer capacity, N m at the selector's member"),
    ("PF_SEL_DOG", "[selectors] dog clutch capacity, N m"),
    ("PF_LAMBDA", "[relations x members] relation forces from the members' torque balance"),
    ("PF_G", "[relations x members] the relations' coefficients"),
    ("PF_OUT_SIGN", "[1] w_out = sign * w_output_member"),
    ("PI_OUT_PT", "output index of the powertrain components' first output, -1: no powertrain"),
    ("PF_HYD", "the clutch hydraulics' parameter block (powertrain/hydraulics.py), empty without"),
    ("PI_HYD_D", "offset in the plant data block of the hydraulics' data, -1: no hydraulics"),
    ("PI_OUT_HYD", "output index of the first fill output"),
), count="PI_LEN")
globals().update(HEADER.constants())  # PI_N_IN .. PI_OUT_HYD (PI_* and PF_* share the numbering); PI_LEN
# plant int data (DI_PLANT block)
PLANT_DATA = Columns("the plant's int data (DI_PLANT)", (
    ("PD_SEL", "[selectors] position in effect (its command value, 0 = neutral); sized when packed", 0),
))
globals().update(PLANT_DATA.constants())  # PD_SEL

# the status bits of a transmission step: the core's, and one of its own (allocated: 256)
STATUS = CORE_STATUS.extend("the transmission plant")
ST_GEAR_REJECTED = STATUS.allocate("selector_command_rejected",
                                   "a selector command was not one of its positions: the previous one was kept")

ELEMENT = Ports()  # the outputs of one shift element ({e}: its name)
EL_SLIP = ELEMENT.add("slip_{e}", "rad/s", -2000.0, 2000.0, 0.0, "{e} slip speed across its plates")
EL_TORQUE = ELEMENT.add("torque_{e}", "N m", -1.0e5, 1.0e5, 0.0,
                        "{e} friction torque: acts +torque on its first member, -torque on the second")
EL_STUCK = ELEMENT.add("stuck_{e}", "-", 0, 1, 0, "{e} stuck (1) or slipping/open (0)", integer=True)
EL_CAPACITY = ELEMENT.add("capacity_{e}", "N m", 0.0, 1.0e5, 0.0, "{e} static torque capacity")
EL_PRESSURE = ELEMENT.add("pressure_{e}", "bar", -10.0, 50.0, 0.0, "{e} actual pressure (after the valve lag)")
EL_ENERGY = ELEMENT.add("energy_{e}", "J", 0.0, 1.0e9, 0.0, "friction energy dissipated in {e} since reset")
EL_LEN = len(ELEMENT)

SELECTOR = Ports()  # the outputs of one selector ({s}: its name)
SE_SELECTED = SELECTOR.add("selected_{s}", "-", -100, 100, 0, "position in effect on {s} (0 = neutral)",
                           integer=True)
SE_LOCKED = SELECTOR.add("locked_{s}", "-", 0, 1, 0, "{s}: a gear engaged (synchronizer stuck, dog teeth in)",
                         integer=True)
SE_TORQUE = SELECTOR.add("torque_{s}", "N m", -1.0e5, 1.0e5, 0.0, "torque {s} passes, at its member")
# the synchronizer's cone friction dissipates energy as a clutch's plates do: without it as an output the energy
# balance from the outputs alone (docs/powertrain.md, section 5) misses the synchronizers' term
SE_ENERGY = SELECTOR.add("energy_{s}", "J", 0.0, 1.0e9, 0.0, "friction energy dissipated in {s}'s synchronizer "
                         "since reset")
SE_LEN = len(SELECTOR)


# -- compiled step --------------------------------------------------------------------------------
@njit(**JIT)
def _itab(mi, slot):
    """Offset in mi of one of the plant's int tables.  Called in the real-time loop."""
    opi = mi[L.MI_PLANT]
    return opi + mi[opi + slot]


@njit(**JIT)
def _ftab(mi, slot):
    """Offset in mf of one of the plant's float tables.  Called in the real-time loop."""
    return mi[L.MF_PLANT] + mi[mi[L.MI_PLANT] + slot]


@njit(**JIT)
def _selector_command(mi, df, di, s):
    """The position (command value, table entry) to apply on selector s, and whether its command was rejected.

    A command that is not 0 or one of the selector's positions keeps the
    previous one.  Called in the real-time loop.
    """
    u = df[mi[L.DF_PLANT] + mi[_itab(mi, PI_SEL_PORT) + s]]  # noqa: F821
    prev = di[mi[L.DI_PLANT] + PD_SEL + s]  # noqa: F821
    ov = _itab(mi, PI_POS_VALUE)  # noqa: F821
    p0 = mi[_itab(mi, PI_SEL_POS) + s]  # noqa: F821
    p1 = p0 + mi[_itab(mi, PI_SEL_NPOS) + s]  # noqa: F821
    if u == 0.0:
        return 0, -1, False
    for p in range(p0, p1):
        if u == float(mi[ov + p]):
            return mi[ov + p], p, False
    for p in range(p0, p1):
        if prev == mi[ov + p]:
            return prev, p, True
    return 0, -1, True


@njit(**JIT)
def _same_inputs(mi, df, di):
    """May this step keep the core's inputs the previous step mapped?  When a compiled run says the plant's
    inputs are the previous step's (L.RUN_INPUTS_SAME) and the mapping depends on them alone: no selector (its
    capacity follows the row's mode), no hydraulics (the step's stroke), no driver commanding the brake, and
    the previous step not refused (its inputs were finite).  Called in the real-time loop."""
    ofl = mi[L.DI_FLAGS]
    opi = mi[L.MI_PLANT]
    return ((di[ofl + L.FLAG_RUN_HINTS] & L.RUN_INPUTS_SAME) != 0 and di[ofl + L.FLAG_STATUS] != L.ST_BAD_INPUT
            and mi[opi + PI_N_SEL] == 0 and mi[opi + PI_HYD_D] < 0  # noqa: F821
            and not (mi[opi + PI_OUT_PT] >= 0 and commands_core_inputs(mi, df)))  # noqa: F821


@njit(**JIT)
def _inputs(mf, mi, df, di):
    """Pressures, torques (on the independent speeds: T^T tau) and selector positions to the core.

    Returns plant status bits.  At a step whose inputs are the previous
    step's (see :func:`_same_inputs`) the core's inputs stand, and the core
    is told so (L.RUN_CORE_INPUTS_SAME); only the force law's reuse test
    runs (its inputs' rates move them over a step).  Called in the real-time loop.
    """
    n = mi[L.H_N]
    op = mi[L.DF_PLANT]
    opi = mi[L.MI_PLANT]
    if _same_inputs(mi, df, di):
        di[mi[L.DI_FLAGS] + L.FLAG_RUN_HINTS] |= L.RUN_CORE_INPUTS_SAME
        if mi[opi + PI_OUT_PT] >= 0 and inputs_changed(mi, df):  # noqa: F821
            di[mi[L.DI_FLAGS] + L.FLAG_REUSE] = 0
        return 0  # no selector: no status bits
    n_in = mi[opi + PI_N_IN]  # noqa: F821
    oua = mi[L.DF_U_ACT]
    ouar = mi[L.DF_U_ACT_RATE]
    out = mi[L.DF_U_TAU]
    outr = mi[L.DF_U_TAU_RATE]
    oport = _itab(mi, PI_EL_PORT)  # noqa: F821
    finite = True
    for i in range(mi[opi + PI_N_EL]):  # noqa: F821
        k = mi[oport + i]
        if k >= 0:
            df[oua + i] = df[op + k] * BAR
            df[ouar + i] = df[op + n_in + k] * BAR
            finite = finite and math.isfinite(df[op + k]) and math.isfinite(df[op + n_in + k])
    ot = _ftab(mi, PF_T)  # noqa: F821
    ots = _ftab(mi, PF_TQ_SIGN)  # noqa: F821
    otm = _itab(mi, PI_TQ_MEMBER)  # noqa: F821
    itq = op + mi[opi + PI_IN_TQ]  # noqa: F821
    for j in range(n):
        df[out + j] = 0.0
        df[outr + j] = 0.0
    for k in range(mi[opi + PI_N_TQ]):  # noqa: F821
        m = mi[otm + k]
        v = mf[ots + k] * df[itq + k]
        r = mf[ots + k] * df[itq + n_in + k]
        finite = finite and math.isfinite(v) and math.isfinite(r)
        for j in range(n):
            t = mf[ot + m * n + j]
            if t == 1.0:
                df[out + j] += v
                df[outr + j] += r
            elif t != 0.0:
                df[out + j] += t * v
                df[outr + j] += t * r
    if mi[opi + PI_OUT_PT] >= 0 and not inputs_finite(mi, df):  # noqa: F821
        df[out] = math.nan  # a force-law input is not finite: the core refuses the step like any other
        finite = False
    if not finite:
        return 0  # the core rejects the step (ST_BAD_INPUT); leave the selections untouched too
    if mi[opi + PI_OUT_PT] >= 0:  # noqa: F821
        _powertrain_inputs(mi, df, di)
    return _selectors_in(mf, mi, df, di)


@njit(**JIT)
def _powertrain_inputs(mi, df, di):
    """The core inputs the components command (the driver's brake pressure in place of p_brake); reuse of the
    last step's end evaluation only if the force law's inputs did not move.  Called in the real-time loop."""
    core_inputs(mi, df)
    if inputs_changed(mi, df):
        di[mi[L.DI_FLAGS] + L.FLAG_REUSE] = 0  # the force law's inputs moved: evaluate afresh


@njit(**JIT)
def _selectors_in(mf, mi, df, di):
    """Selector commands -> row coefficients and capacities (the dual-clutch transmission's synchronizers).

    Returns plant status bits.  Called in the real-time loop.
    """
    opd = mi[L.DI_PLANT]
    nel = mi[mi[L.MI_PLANT] + PI_N_EL]  # noqa: F821
    oua = mi[L.DF_U_ACT]
    ouar = mi[L.DF_U_ACT_RATE]
    ocb = mi[L.DF_COEF_B]
    omode = mi[L.DI_MODE]
    st = 0
    for s in range(mi[mi[L.MI_PLANT] + PI_N_SEL]):  # noqa: F821
        row = nel + s
        g, p, rejected = _selector_command(mi, df, di, s)
        if rejected:
            st |= ST_GEAR_REJECTED
        changed = g != di[opd + PD_SEL + s]  # noqa: F821
        di[opd + PD_SEL + s] = g  # noqa: F821
        if changed and g != 0:
            coef = mf[_ftab(mi, PF_POS_COEF) + p]  # noqa: F821
            if df[ocb + row] != coef:
                df[ocb + row] = coef
                di[mi[L.DI_FLAGS] + L.FLAG_COEF_DIRTY] = 1
        # neutral: no capacity; a gear whose row is stuck and unchanged: dog teeth in;
        # otherwise the cone synchronizes (a freshly selected gear always starts on the cone)
        if g == 0:
            cap = 0.0
        elif di[omode + row] == L.MODE_STUCK and not changed:
            cap = mf[_ftab(mi, PF_SEL_DOG) + s]  # noqa: F821
        else:
            cap = mf[_ftab(mi, PF_POS_SYNC) + p]  # noqa: F821
        df[oua + row] = cap
        df[ouar + row] = 0.0
    return st


@njit(**JIT)
def _outputs(mf, mi, df, di, st, h):
    """Write the plant outputs from the core state; at a step whose outputs a compiled offline run will not
    read (L.RUN_OUTPUTS_UNREAD in the run hints), only what the next step reads.  Called in the real-time loop."""
    n = mi[L.H_N]
    opi = mi[L.MI_PLANT]
    if di[mi[L.DI_FLAGS] + L.FLAG_RUN_HINTS] & L.RUN_OUTPUTS_UNREAD:
        if mi[opi + PI_OUT_PT] >= 0:  # noqa: F821
            keep_law_inputs(mi, df, h)
        return
    oy = mi[L.DF_PLANT] + 2 * mi[opi + PI_N_IN]  # noqa: F821
    ow = y_omega(mi)
    ot = _ftab(mi, PF_T)  # noqa: F821
    ocoord = _itab(mi, PI_MEM_COORD)  # noqa: F821
    ooutw = oy + mi[opi + PI_OUT_W]  # noqa: F821
    for m in range(mi[opi + PI_N_MEM]):  # noqa: F821
        c = mi[ocoord + m]
        if c >= 0:
            df[ooutw + m] = df[ow + c]
        else:
            acc = 0.0
            for j in range(n):
                acc += mf[ot + m * n + j] * df[ow + j]
            df[ooutw + m] = acc
    w_in = df[ooutw + mi[opi + PI_INPUT_MEMBER]]  # noqa: F821
    w_out = mf[_ftab(mi, PF_OUT_SIGN)] * df[ooutw + mi[opi + PI_OUTPUT_MEMBER]]  # noqa: F821
    df[oy + mi[opi + PI_OUT_WOUT]] = w_out  # noqa: F821
    ratio = w_in / w_out if abs(w_out) > RATIO_MIN_OUTPUT_SPEED else 0.0
    df[oy + mi[opi + PI_OUT_RATIO]] = min(max(ratio, -RATIO_LIMIT), RATIO_LIMIT)  # noqa: F821
    _element_outputs(mf, mi, df, di, oy)
    df[oy + mi[opi + PI_OUT_GEAR]] = float(_engaged_gear(mi, di))  # noqa: F821
    osp = oy + mi[opi + PI_OUT_SPRING]  # noqa: F821
    for j in range(mi[L.H_S]):
        df[osp + j] = df[mi[L.DF_SPRING_TQ] + j]
    if mi[opi + PI_N_RELOUT] > 0:  # noqa: F821
        _relation_outputs(mf, mi, df, di, oy, h)
    if mi[opi + PI_OUT_PT] >= 0:  # noqa: F821
        write_outputs(mf, mi, df, di, h, oy + mi[opi + PI_OUT_PT])  # noqa: F821
    if mi[opi + PI_HYD_D] >= 0:  # noqa: F821
        write_fill_outputs(mf, df, _ftab(mi, PF_HYD), mi[L.DF_PLANT] + mi[opi + PI_HYD_D],  # noqa: F821
                           oy + mi[opi + PI_OUT_HYD])  # noqa: F821
    df[oy + mi[opi + PI_OUT_STATUS]] = float(st)  # noqa: F821


@njit(**JIT)
def _element_outputs(mf, mi, df, di, oy):
    """Per element: slip, torque, state, capacity, pressure, energy; per selector: position, state, torque,
    energy.

    Called in the real-time loop.
    """
    opi = mi[L.MI_PLANT]
    nel = mi[opi + PI_N_EL]  # noqa: F821
    odelta = mi[L.DF_DELTA]
    omu = mi[L.DF_MU]
    ocap = mi[L.DF_CAP_S]
    omode = mi[L.DI_MODE]
    oact = y_act(mi)
    owork = y_row_work(mi)
    orad = _ftab(mi, PF_EL_R)  # noqa: F821
    oport = _itab(mi, PI_EL_PORT)  # noqa: F821
    oel = oy + mi[opi + PI_OUT_EL]  # noqa: F821
    for i in range(nel):
        rc = mf[orad + i]
        base = oel + EL_LEN * i
        df[base + EL_SLIP] = df[odelta + i] / rc
        df[base + EL_TORQUE] = df[omu + i] * rc
        df[base + EL_STUCK] = 1.0 if di[omode + i] == L.MODE_STUCK else 0.0
        df[base + EL_CAPACITY] = df[ocap + i] * rc
        if mi[oport + i] < 0:
            df[base + EL_PRESSURE] = 0.0  # a freewheel
        else:
            # a kinematic clutch has no pressure state: report its command
            df[base + EL_PRESSURE] = (df[oact + i] if mf[mi[L.MF_KIN_SHIFT] + i] <= 0.0
                                      else df[mi[L.DF_U_ACT] + i]) / BAR
        # dissipated energy >= 0 (the work of friction is <= 0); a row held at its bound at zero slip in a
        # locked, redundant set (a parked car's brake and rolling resistance) books rounding of either sign
        e_diss = 0.0 - df[owork + i]
        df[base + EL_ENERGY] = e_diss if e_diss > 0.0 else 0.0
    osel = oy + mi[opi + PI_OUT_SEL]  # noqa: F821
    for k in range(mi[opi + PI_N_SEL]):  # noqa: F821
        row = nel + k
        sel = di[mi[L.DI_PLANT] + PD_SEL + k]  # noqa: F821
        base = osel + SE_LEN * k
        df[base + SE_SELECTED] = float(sel)
        df[base + SE_LOCKED] = 1.0 if sel != 0 and di[omode + row] == L.MODE_STUCK else 0.0
        df[base + SE_TORQUE] = df[omu + row]
        e_diss = 0.0 - df[owork + row]  # >= 0 but for rounding, as an element's
        df[base + SE_ENERGY] = e_diss if e_diss > 0.0 else 0.0


@njit(**JIT)
def _engaged_gear(mi, di):
    """Number of the gear whose elements are all stuck (and positions selected and stuck); 0 if none
    or more than one.  Called in the real-time loop."""
    opi = mi[L.MI_PLANT]
    omode = mi[L.DI_MODE]
    osel = mi[L.DI_PLANT] + PD_SEL  # noqa: F821
    nel = mi[opi + PI_N_EL]  # noqa: F821
    q = _itab(mi, PI_GEAR)  # noqa: F821
    found = 0
    count = 0
    for _ in range(mi[opi + PI_N_GEAR]):  # noqa: F821
        number = mi[q]
        ne = mi[q + 1]
        ok = True
        for e in range(ne):
            if di[omode + mi[q + 2 + e]] != L.MODE_STUCK:
                ok = False
        q += 2 + ne
        npos = mi[q]
        for p in range(npos):
            sel = mi[q + 1 + 2 * p]
            if di[osel + sel] != mi[q + 2 + 2 * p] or di[omode + nel + sel] != L.MODE_STUCK:
                ok = False
        q += 1 + 2 * npos
        if ok:
            found = number
            count += 1
    return found if count == 1 else 0


@njit(**JIT)
def _relation_outputs(mf, mi, df, di, oy, h):
    """Torques the gear teeth put on the members: the rigid relations' forces lambda = Lambda (J a - f).

    f is each member's torque (inputs at the end of the step, drag, element
    and selector forces, springs) and a = T dq/dt its acceleration; without
    the relations a member would not balance by J a - f, and relation k puts
    G[k, m] lambda_k on member m.  Called in the real-time loop.
    """
    n = mi[L.H_N]
    opi = mi[L.MI_PLANT]
    nmem = mi[opi + PI_N_MEM]  # noqa: F821
    nel = mi[opi + PI_N_EL]  # noqa: F821
    nrel = mi[opi + PI_N_REL]  # noqa: F821
    n_in = mi[opi + PI_N_IN]  # noqa: F821
    ot = _ftab(mi, PF_T)  # noqa: F821
    oj = _ftab(mi, PF_J)  # noqa: F821
    ob = _ftab(mi, PF_B)  # noqa: F821
    oc = _ftab(mi, PF_EL_C)  # noqa: F821
    olam = _ftab(mi, PF_LAMBDA)  # noqa: F821
    og = _ftab(mi, PF_G)  # noqa: F821
    ots = _ftab(mi, PF_TQ_SIGN)  # noqa: F821
    otm = _itab(mi, PI_TQ_MEMBER)  # noqa: F821
    itq = mi[L.DF_PLANT] + mi[opi + PI_IN_TQ]  # noqa: F821
    ow = y_omega(mi)
    oacc = mi[L.DF_ACCEL]
    omu = mi[L.DF_MU]
    olamv = oy + mi[opi + PI_OUT_STATUS] + 1  # noqa: F821  [relations] scratch after the outputs (see _allocate)
    for k in range(nrel):
        df[olamv + k] = 0.0
    for m in range(nmem):
        w = 0.0
        a = 0.0
        for j in range(n):
            t = mf[ot + m * n + j]
            w += t * df[ow + j]
            a += t * df[oacc + j]
        f = -mf[ob + m] * w
        for k in range(mi[opi + PI_N_TQ]):  # noqa: F821
            if mi[otm + k] == m:
                f += mf[ots + k] * (df[itq + k] + df[itq + n_in + k] * h)
        for i in range(nel):
            f += mf[oc + i * nmem + m] * df[omu + i]
        f += _selector_and_spring_torque(mi, df, m)
        r = mf[oj + m] * a - f
        for k in range(nrel):
            df[olamv + k] += mf[olam + k * nmem + m] * r
    o = oy + mi[opi + PI_OUT_REL]  # noqa: F821
    orel = _itab(mi, PI_RELOUT)  # noqa: F821
    for q in range(mi[opi + PI_N_RELOUT]):  # noqa: F821
        k = mi[orel + 2 * q]
        m = mi[orel + 2 * q + 1]
        df[o + q] = mf[og + k * nmem + m] * df[olamv + k]


@njit(**JIT)
def _selector_and_spring_torque(mi, df, m):
    """Torque the selector rows and the springs put on member m (their members are independent speeds).

    Called in the real-time loop.
    """
    opi = mi[L.MI_PLANT]
    nel = mi[opi + PI_N_EL]  # noqa: F821
    c = mi[_itab(mi, PI_MEM_COORD) + m]  # noqa: F821
    f = 0.0
    if c >= 0:
        for s in range(mi[opi + PI_N_SEL]):  # noqa: F821
            row = nel + s
            if mi[mi[L.MI_ROW_A] + row] == c:
                f += df[mi[L.DF_COEF_A] + row] * df[mi[L.DF_MU] + row]
            if mi[mi[L.MI_ROW_B] + row] == c:
                f += df[mi[L.DF_COEF_B] + row] * df[mi[L.DF_MU] + row]
    osa = _itab(mi, PI_SPRING_A)  # noqa: F821
    osb = _itab(mi, PI_SPRING_B)  # noqa: F821
    for j in range(mi[opi + PI_N_SPRING]):  # noqa: F821
        tq = df[mi[L.DF_SPRING_TQ] + j]
        if mi[osa + j] == m:
            f -= tq
        if mi[osb + j] == m:
            f += tq
    return f


@njit(**JIT_STAGE)
def _before_inputs(mf, mi, df, dt):
    """Stage before the inputs (plants/friction_step.py): what the powertrain's components sample once per step,
    if the transmission has a powertrain.  Called in the real-time loop."""
    if mi[mi[L.MI_PLANT] + PI_OUT_PT] >= 0:  # noqa: F821
        before_step(mf, mi, df, dt)


@njit(**JIT_STAGE)
def _before_core(mf, mi, df, dt):
    """Stage before the core's step (plants/friction_step.py): the clutch hydraulics, if the plant has them, take
    the command through dead time and valve and stroke the piston for this step.  Called in the real-time loop."""
    ohd = mi[mi[L.MI_PLANT] + PI_HYD_D]  # noqa: F821
    if ohd >= 0:
        hydraulics_before(mf, mi, df, _ftab(mi, PF_HYD), mi[L.DF_PLANT] + ohd, dt)  # noqa: F821


@njit(**JIT_STAGE)
def _after_core(mf, mi, df, dt):
    """Stage after an accepted core step: the clutch hydraulics' piston, if any.  Called in the real-time loop."""
    ohd = mi[mi[L.MI_PLANT] + PI_HYD_D]  # noqa: F821
    if ohd >= 0:
        hydraulics_after(mf, mi, df, _ftab(mi, PF_HYD), mi[L.DF_PLANT] + ohd, dt)  # noqa: F821


# the step (inputs -> core step -> outputs) and the refresh: the one sequence of plants/friction_step.py
transmission_step, transmission_refresh = friction_step.plant_kernels(globals(), "transmission")
