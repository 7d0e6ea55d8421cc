"""Any transmission from a description: members, gear meshes, planetary sets, shift elements.

The description (:mod:`plant_models.drivetrain`, read from a TOML file by
:mod:`plant_models.readers.transmission`, format in docs/transmissions.md)
is reduced once, at load time, to independent speeds ``q`` (``w_members =
T q``, the congruence transform of Biagiotti & Zanasi, "Efficient
simulation of static and dynamic friction for automotive applications");
every shift element is then a row of R over ``q`` (Morselli, Zanasi &
Ferracin, "Modeling and simulation of static and Coulomb friction in a
class of automotive systems", eq. 13) and the friction core runs the
result exactly like the Powershift: a stuck element reads exactly zero
slip and holds a force within its capacity, however many independent
speeds its row couples.

Rows of the core: the shift elements in the order of the description
(clutches, brakes and freewheels; a clutch's capacity comes from its
pressure through the wet clutch of Morselli, Zanasi & Ferracin, section
5), then one row per selector (synchronizer and dog clutch gears on one
shaft, the dual-clutch transmission's layout: its coefficient is the
selected gear's ratio, rewritten in the compiled step when the command
changes; capacity the cone's while it slips, the dog teeth's once stuck).

Ports depend on the description (the chain plant's habit): a pressure
``p_<element>`` per clutch and brake, the selector commands, the torque
inputs; outputs the speed ``w_<member>`` of every member (``T q``), the
output speed, engaged gear and ratio, per element slip, torque, state,
capacity, pressure and dissipated energy, per selector its gear in effect
and state, per spring its torque, per planetary set and mesh the torques
its teeth put on its members (the rigid relations' forces, rebuilt from
the members' accelerations), and the status word.

Why this file is longer than 600 lines: it keeps the compiled step together with the layout of the plant's
tables (``PI_*``/``PF_*``) and the Python code that packs them.  numba folds the table constants into the
kernels and keys its on-disk cache to each kernel's own source file, so constants moved to another plant
module could change without the cached kernels noticing (stale kernels after an edit of the other file).  The
description and its reduction already live in :mod:`plant_models.drivetrain` and :mod:`plant_models.reduction`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from numba import njit

from ..clutch import BAR
from ..core.api import (JIT, L, CoreSpec, LawBlocks, Row, Settings, Spring, core_step, raw_f, raw_i, y_act, y_omega,
                        y_row_work)
from ..drivetrain import Description, Reduction
from ..friction_plant import CORE_STATUS, FrictionPlant, friction_kernels
from ..plant import Param, Ports, Signal
from ..powertrain import components as PT
from ..powertrain.engine import Z_GOV as PT_GOV  # the governor integral in the engine states
from ..powertrain.idle import settled_integral
from ..powertrain.hydraulics import (Hydraulics, data_length, hydraulics_after, hydraulics_before, param_block,
                                     write_fill_outputs)
from ..powertrain.hydraulics import describe as hydraulics_description
from ..powertrain.hydraulics_plant import HydraulicsPlant, current_signal, fill_signal
from ..powertrain.assembly import (POWERTRAIN_LAW, before_step, commands_core_inputs, core_inputs, inputs_changed,
                                   inputs_finite, keep_law_inputs, write_outputs)
from ..reduction import speed_constraints

# plant int parameters (MI_PLANT block): sizes, port blocks, then the offsets of the int tables
# (in MI_PLANT) and of the float tables (in MF_PLANT), which follow
PI_N_IN = 0  # number of inputs (their rates follow them)
PI_N_MEM = 1  # members
PI_N_EL = 2  # shift elements (core rows 0 .. n_el - 1)
PI_N_SEL = 3  # selectors (core rows n_el .. n_el + n_sel - 1)
PI_N_TQ = 4  # torque inputs
PI_N_GEAR = 5  # gears of the shift table
PI_N_REL = 6  # independent rigid relations
PI_N_RELOUT = 7  # relation torque outputs
PI_N_SPRING = 8  # springs
PI_INPUT_MEMBER = 9
PI_OUTPUT_MEMBER = 10
PI_IN_TQ = 11  # input index of the first torque input
PI_OUT_W = 12  # output index of w_<member 0>
PI_OUT_WOUT = 13
PI_OUT_GEAR = 14
PI_OUT_RATIO = 15
PI_OUT_EL = 16  # first element block
PI_OUT_SEL = 17  # first selector block
PI_OUT_SPRING = 18  # first spring torque
PI_OUT_REL = 19  # first relation torque
PI_OUT_STATUS = 20
PI_EL_PORT = 21  # [elements] its pressure input (-1: none, a freewheel)
PI_TQ_MEMBER = 22  # [torque inputs] the member it acts on
PI_SEL_PORT = 23  # [selectors] its command input
PI_SEL_NPOS = 24  # [selectors] number of positions
PI_SEL_POS = 25  # [selectors] its first position in the position tables
PI_POS_VALUE = 26  # [positions] command value
PI_GEAR = 27  # [gears] number, n elements, elements..., n positions, (selector, value)...
PI_RELOUT = 28  # [relation outputs] (relation, member)
PI_SPRING_A = 29  # [springs] member a (twist rate w_a - w_b)
PI_SPRING_B = 30  # [springs] member b
PI_MEM_COORD = 31  # [members] the independent speed the member is, or -1 (geared to others)
PF_T = 32  # [members x n] w_members = T q
PF_J = 33  # [members] inertia, kg m^2
PF_B = 34  # [members] drag, N m s/rad
PF_EL_C = 35  # [elements x members] each element's row over the members
PF_EL_R = 36  # [elements] radius its torque and slip are given at (1 for rows in torque units)
PF_TQ_SIGN = 37  # [torque inputs] +1 drives, -1 resists
PF_POS_COEF = 38  # [positions] selector row coefficient on the 'to' member: -ratio
PF_POS_SYNC = 39  # [positions] synchronizer capacity, N m at the selector's member
PF_SEL_DOG = 40  # [selectors] dog clutch capacity, N m
PF_LAMBDA = 41  # [relations x members] relation forces from the members' torque balance
PF_G = 42  # [relations x members] the relations' coefficients
PF_OUT_SIGN = 43  # [1] w_out = sign * w_output_member
PI_OUT_PT = 44  # output index of the powertrain components' first output, -1: no powertrain
PF_HYD = 45  # the clutch hydraulics' parameter block (powertrain/hydraulics.py), empty without
PI_HYD_D = 46  # offset in the plant data block of the hydraulics' data, -1: no hydraulics
PI_OUT_HYD = 47  # output index of the first fill output
PI_LEN = 48
# plant int data (DI_PLANT block)
PD_SEL = 0  # [selectors] position in effect (its command value, 0 = neutral)

RATIO_MIN_OUTPUT_SPEED = 1.0  # rad/s: below it the ratio output reads 0
RATIO_LIMIT = 100.0
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
SE_LEN = len(SELECTOR)


@dataclass(frozen=True)
class TransmissionParams:
    """A transmission description, its reduction to independent speeds, and the core's settings."""

    description: Description
    reduction: Reduction
    settings: Settings
    powertrain: PT.Powertrain | None = None  # engine, torque converter, vehicle (docs/powertrain.md)
    hydraulics: Hydraulics | None = None  # clutch fill, dead time, valve (docs/powertrain.md)


def transmission_ports(d: Description, red: Reduction | None = None, pt: PT.Powertrain | None = None,
                       hyd: Hydraulics | None = None) -> tuple[Ports, Ports, dict[int, int]]:
    """Inputs, outputs, and the start of each port block as the plant's int parameters ``{PI_*: index}``."""
    names = [m.name for m in d.members]
    inputs = Ports()
    ports = {}
    for k, e in enumerate(d.elements):
        if hyd is not None and hyd.current_commands and k in hyd.elements:
            ports[k] = inputs.add_block([current_signal(hyd, e.name, e.kind)])
        elif e.clutch is not None:
            what = e.name if e.name.lower() == e.kind else f"{e.kind} {e.name}"  # not "brake brake"
            ports[k] = inputs.add(f"p_{e.name}", "bar", 0.0, e.pressure_max_bar, 0.0, f"{what} pressure command")
    sel_ports = [inputs.add(s.input, "-", min([0] + [p.value for p in s.positions]),
                            max([0] + [p.value for p in s.positions]), 0,
                            f"gear selected on {s.name} (0 = neutral)", integer=True,
                            allowed=tuple(float(v) for v in sorted({0} | {p.value for p in s.positions})))
                 for s in d.selectors]
    in_tq = len(inputs)
    for t in d.torques:
        inputs.add(t.name, "N m", t.lo, t.hi, 0.0, t.doc or (f"load torque on {names[t.member]}; positive resists"
                                                             if t.sign < 0 else f"torque on {names[t.member]}"))
    outputs = Ports()
    out_w = outputs.add_block(Signal(f"w_{nm}", "rad/s", -2000.0, 2000.0, 0.0, f"speed of member {nm}")
                              for nm in names)
    out_wout = outputs.add("w_out", "rad/s", -2000.0, 2000.0, 0.0, "output speed, forward positive")
    numbers = [g.number for g in red.gears] if red is not None else [0]
    out_gear = outputs.add("gear", "-", min([0] + numbers), max([0] + numbers), 0,
                           "engaged gear (all its elements stuck), 0 = none", integer=True)
    out_ratio = outputs.add("ratio", "-", -RATIO_LIMIT, RATIO_LIMIT, 0.0,
                            "overall ratio w_input / w_out; 0 below 1 rad/s output speed, limited to +-100")
    # a pressure output reads up to the element's command range (a service brake's runs to 200 bar)
    out_el = outputs.add_block(replace(s, hi=max(s.hi, e.pressure_max_bar)) if s.name == f"pressure_{e.name}" else
                               replace(s, doc=element_torque_doc(d, e)) if s.name == f"torque_{e.name}" else s
                               for e in d.elements for s in ELEMENT.formatted(e=e.name))
    out_sel = outputs.add_block(s for sel in d.selectors for s in SELECTOR.formatted(s=sel.name))
    out_spring = outputs.add_block(Signal(f"torque_{s.name}", "N m", -1.0e5, 1.0e5, 0.0,
                                          f"torque of spring {s.name}") for s in d.springs)
    relout = relation_outputs(d, red)
    out_rel = outputs.add_block(Signal(nm, "N m", -1.0e5, 1.0e5, 0.0, doc) for nm, doc, _, _ in relout)
    out_pt = len(outputs) if pt is not None else -1
    pt_ports = PT.add_ports(pt, inputs, outputs) if pt is not None else {}
    out_hyd = -1
    if hyd is not None:
        out_hyd = outputs.add_block(fill_signal(d.elements[k].name) for k in hyd.elements)
    out_status = outputs.add("status", "-", 0, 2 ** 16, 0,
                             f"core status bits, plus {ST_GEAR_REJECTED} = selector command rejected",
                             integer=True)
    blocks = {PI_N_IN: len(inputs), PI_IN_TQ: in_tq, PI_OUT_W: out_w, PI_OUT_WOUT: out_wout, PI_OUT_GEAR: out_gear,
              PI_OUT_RATIO: out_ratio, PI_OUT_EL: out_el, PI_OUT_SEL: out_sel, PI_OUT_SPRING: out_spring,
              PI_OUT_REL: out_rel, PI_OUT_STATUS: out_status, PI_OUT_PT: out_pt, PI_OUT_HYD: out_hyd}
    return inputs, outputs, dict(blocks, element_ports=ports, selector_ports=sel_ports, powertrain_ports=pt_ports)


def element_torque_doc(d: Description, e) -> str:
    """What an element's torque output acts on, by member name (a row to the housing: its reaction there)."""
    names = [d.members[m].name for m, _ in e.coefs]
    if len(names) == 2:
        return f"{e.name} friction torque: acts +torque on {names[0]}, -torque on {names[1]}"
    if len(names) == 1:
        return f"{e.name} friction torque: acts +torque on {names[0]}, its reaction on the housing"
    return f"{e.name} friction torque along its row over {', '.join(names)}"


def relation_outputs(d: Description, red: Reduction | None) -> list[tuple[str, str, int, int]]:
    """(signal, doc, relation row, member) of each gear-tooth torque output: every member of every
    independent planetary set or mesh."""
    out = []
    if red is None:
        return out
    for k, rel_index in enumerate(red.relation_names):
        rel = d.relations[rel_index]
        for (m, _), role in zip(rel.coefs, rel.roles):
            label = role if rel.kind == "planetary" else d.members[m].name
            held = "".join(f"; its {h} is held to the housing" for h in rel.held)
            out.append((f"torque_{rel.name}_{label}", f"torque the teeth of {rel.name} put on its {role} "
                        f"({d.members[m].name}{held})", k, m))
    return out


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
    u = df[mi[L.DF_PLANT] + mi[_itab(mi, PI_SEL_PORT) + s]]
    prev = di[mi[L.DI_PLANT] + PD_SEL + s]
    ov = _itab(mi, PI_POS_VALUE)
    p0 = mi[_itab(mi, PI_SEL_POS) + s]
    p1 = p0 + mi[_itab(mi, PI_SEL_NPOS) + s]
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
            and mi[opi + PI_N_SEL] == 0 and mi[opi + PI_HYD_D] < 0
            and not (mi[opi + PI_OUT_PT] >= 0 and commands_core_inputs(mi, df)))


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
        if mi[opi + PI_OUT_PT] >= 0 and inputs_changed(mi, df):
            di[mi[L.DI_FLAGS] + L.FLAG_REUSE] = 0
        return 0  # no selector: no status bits
    n_in = mi[opi + PI_N_IN]
    oua = mi[L.DF_U_ACT]
    ouar = mi[L.DF_U_ACT_RATE]
    out = mi[L.DF_U_TAU]
    outr = mi[L.DF_U_TAU_RATE]
    oport = _itab(mi, PI_EL_PORT)
    finite = True
    for i in range(mi[opi + PI_N_EL]):
        k = mi[oport + i]
        if k >= 0:
            df[oua + i] = df[op + k] * BAR
            df[ouar + i] = df[op + n_in + k] * BAR
            finite = finite and math.isfinite(df[op + k]) and math.isfinite(df[op + n_in + k])
    ot = _ftab(mi, PF_T)
    ots = _ftab(mi, PF_TQ_SIGN)
    otm = _itab(mi, PI_TQ_MEMBER)
    itq = op + mi[opi + PI_IN_TQ]
    for j in range(n):
        df[out + j] = 0.0
        df[outr + j] = 0.0
    for k in range(mi[opi + PI_N_TQ]):
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
    if mi[opi + PI_OUT_PT] >= 0 and not inputs_finite(mi, df):
        df[out] = math.nan  # a force-law input is not finite: the core refuses the step like any other
        finite = False
    if not finite:
        return 0  # the core rejects the step (ST_BAD_INPUT); leave the selections untouched too
    if mi[opi + PI_OUT_PT] >= 0:
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
    nel = mi[mi[L.MI_PLANT] + PI_N_EL]
    oua = mi[L.DF_U_ACT]
    ouar = mi[L.DF_U_ACT_RATE]
    ocb = mi[L.DF_COEF_B]
    omode = mi[L.DI_MODE]
    st = 0
    for s in range(mi[mi[L.MI_PLANT] + PI_N_SEL]):
        row = nel + s
        g, p, rejected = _selector_command(mi, df, di, s)
        if rejected:
            st |= ST_GEAR_REJECTED
        changed = g != di[opd + PD_SEL + s]
        di[opd + PD_SEL + s] = g
        if changed and g != 0:
            coef = mf[_ftab(mi, PF_POS_COEF) + p]
            if df[ocb + row] != coef:
                df[ocb + row] = coef
                di[mi[L.DI_FLAGS] + L.FLAG_COEF_DIRTY] = 1
        # neutral: no capacity; a gear whose row is stuck and unchanged: dog teeth in;
        # otherwise the cone synchronizes (a freshly selected gear always starts on the cone)
        if g == 0:
            cap = 0.0
        elif di[omode + row] == L.MODE_STUCK and not changed:
            cap = mf[_ftab(mi, PF_SEL_DOG) + s]
        else:
            cap = mf[_ftab(mi, PF_POS_SYNC) + p]
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
        if mi[opi + PI_OUT_PT] >= 0:
            keep_law_inputs(mi, df, h)
        return
    oy = mi[L.DF_PLANT] + 2 * mi[opi + PI_N_IN]
    ow = y_omega(mi)
    ot = _ftab(mi, PF_T)
    ocoord = _itab(mi, PI_MEM_COORD)
    ooutw = oy + mi[opi + PI_OUT_W]
    for m in range(mi[opi + PI_N_MEM]):
        c = mi[ocoord + m]
        if c >= 0:
            df[ooutw + m] = df[ow + c]
        else:
            acc = 0.0
            for j in range(n):
                acc += mf[ot + m * n + j] * df[ow + j]
            df[ooutw + m] = acc
    w_in = df[ooutw + mi[opi + PI_INPUT_MEMBER]]
    w_out = mf[_ftab(mi, PF_OUT_SIGN)] * df[ooutw + mi[opi + PI_OUTPUT_MEMBER]]
    df[oy + mi[opi + PI_OUT_WOUT]] = w_out
    ratio = w_in / w_out if abs(w_out) > RATIO_MIN_OUTPUT_SPEED else 0.0
    df[oy + mi[opi + PI_OUT_RATIO]] = min(max(ratio, -RATIO_LIMIT), RATIO_LIMIT)
    _element_outputs(mf, mi, df, di, oy)
    df[oy + mi[opi + PI_OUT_GEAR]] = float(_engaged_gear(mi, di))
    osp = oy + mi[opi + PI_OUT_SPRING]
    for j in range(mi[L.H_S]):
        df[osp + j] = df[mi[L.DF_SPRING_TQ] + j]
    if mi[opi + PI_N_RELOUT] > 0:
        _relation_outputs(mf, mi, df, di, oy, h)
    if mi[opi + PI_OUT_PT] >= 0:
        write_outputs(mf, mi, df, di, h, oy + mi[opi + PI_OUT_PT])
    if mi[opi + PI_HYD_D] >= 0:
        write_fill_outputs(mf, df, _ftab(mi, PF_HYD), mi[L.DF_PLANT] + mi[opi + PI_HYD_D], oy + mi[opi + PI_OUT_HYD])
    df[oy + mi[opi + PI_OUT_STATUS]] = float(st)


@njit(**JIT)
def _element_outputs(mf, mi, df, di, oy):
    """Per element: slip, torque, state, capacity, pressure, energy; per selector: position, state, torque.

    Called in the real-time loop.
    """
    opi = mi[L.MI_PLANT]
    nel = mi[opi + PI_N_EL]
    odelta = mi[L.DF_DELTA]
    omu = mi[L.DF_MU]
    ocap = mi[L.DF_CAP_S]
    omode = mi[L.DI_MODE]
    oact = y_act(mi)
    owork = y_row_work(mi)
    orad = _ftab(mi, PF_EL_R)
    oport = _itab(mi, PI_EL_PORT)
    oel = oy + mi[opi + PI_OUT_EL]
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
    osel = oy + mi[opi + PI_OUT_SEL]
    for k in range(mi[opi + PI_N_SEL]):
        row = nel + k
        sel = di[mi[L.DI_PLANT] + PD_SEL + k]
        base = osel + SE_LEN * k
        df[base + SE_SELECTED] = float(sel)
        df[base + SE_LOCKED] = 1.0 if sel != 0 and di[omode + row] == L.MODE_STUCK else 0.0
        df[base + SE_TORQUE] = df[omu + row]


@njit(**JIT)
def _engaged_gear(mi, di):
    """Number of the gear whose elements are all stuck (and positions selected and stuck); 0 if none
    or more than one.  Called in the real-time loop."""
    opi = mi[L.MI_PLANT]
    omode = mi[L.DI_MODE]
    osel = mi[L.DI_PLANT] + PD_SEL
    nel = mi[opi + PI_N_EL]
    q = _itab(mi, PI_GEAR)
    found = 0
    count = 0
    for _ in range(mi[opi + PI_N_GEAR]):
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
    nmem = mi[opi + PI_N_MEM]
    nel = mi[opi + PI_N_EL]
    nrel = mi[opi + PI_N_REL]
    n_in = mi[opi + PI_N_IN]
    ot = _ftab(mi, PF_T)
    oj = _ftab(mi, PF_J)
    ob = _ftab(mi, PF_B)
    oc = _ftab(mi, PF_EL_C)
    olam = _ftab(mi, PF_LAMBDA)
    og = _ftab(mi, PF_G)
    ots = _ftab(mi, PF_TQ_SIGN)
    otm = _itab(mi, PI_TQ_MEMBER)
    itq = mi[L.DF_PLANT] + mi[opi + PI_IN_TQ]
    ow = y_omega(mi)
    oacc = mi[L.DF_ACCEL]
    omu = mi[L.DF_MU]
    olamv = oy + mi[opi + PI_OUT_STATUS] + 1  # [relations] scratch after the outputs (see _allocate)
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
        for k in range(mi[opi + PI_N_TQ]):
            if mi[otm + k] == m:
                f += mf[ots + k] * (df[itq + k] + df[itq + n_in + k] * h)
        for i in range(nel):
            f += mf[oc + i * nmem + m] * df[omu + i]
        f += _selector_and_spring_torque(mi, df, m)
        r = mf[oj + m] * a - f
        for k in range(nrel):
            df[olamv + k] += mf[olam + k * nmem + m] * r
    o = oy + mi[opi + PI_OUT_REL]
    orel = _itab(mi, PI_RELOUT)
    for q in range(mi[opi + PI_N_RELOUT]):
        k = mi[orel + 2 * q]
        m = mi[orel + 2 * q + 1]
        df[o + q] = mf[og + k * nmem + m] * df[olamv + k]


@njit(**JIT)
def _selector_and_spring_torque(mi, df, m):
    """Torque the selector rows and the springs put on member m (their members are independent speeds).

    Called in the real-time loop.
    """
    opi = mi[L.MI_PLANT]
    nel = mi[opi + PI_N_EL]
    c = mi[_itab(mi, PI_MEM_COORD) + m]
    f = 0.0
    if c >= 0:
        for s in range(mi[opi + PI_N_SEL]):
            row = nel + s
            if mi[mi[L.MI_ROW_A] + row] == c:
                f += df[mi[L.DF_COEF_A] + row] * df[mi[L.DF_MU] + row]
            if mi[mi[L.MI_ROW_B] + row] == c:
                f += df[mi[L.DF_COEF_B] + row] * df[mi[L.DF_MU] + row]
    osa = _itab(mi, PI_SPRING_A)
    osb = _itab(mi, PI_SPRING_B)
    for j in range(mi[opi + PI_N_SPRING]):
        tq = df[mi[L.DF_SPRING_TQ] + j]
        if mi[osa + j] == m:
            f -= tq
        if mi[osb + j] == m:
            f += tq
    return f


@njit(**JIT)
def transmission_step(mf, mi, df, di, dt):
    """Inputs -> core step -> outputs.  Called in the real-time loop."""
    rmf, rmi, rdf, rdi = raw_f(mf), raw_i(mi), raw_f(df), raw_i(di)
    if rmi[rmi[L.MI_PLANT] + PI_OUT_PT] >= 0:
        before_step(rmf, rmi, rdf, dt)
    pst = _inputs(rmf, rmi, rdf, rdi)
    ohd = rmi[rmi[L.MI_PLANT] + PI_HYD_D]
    if ohd >= 0:  # clutch hydraulics: the command after dead time and valve, the stroke of this step
        hydraulics_before(rmf, rmi, rdf, _ftab(rmi, PF_HYD), rmi[L.DF_PLANT] + ohd, dt)
    st = core_step(rmf, rmi, rdf, rdi, dt)
    if st != L.ST_BAD_INPUT:  # a refused step reports only that
        st |= pst
        if ohd >= 0:
            hydraulics_after(rmf, rmi, rdf, _ftab(rmi, PF_HYD), rmi[L.DF_PLANT] + ohd, dt)
    _outputs(rmf, rmi, rdf, rdi, st, dt)
    return st


@njit(**JIT)
def transmission_refresh(mf, mi, df, di, st):
    """Inputs -> outputs without stepping (at the start)."""
    rmf, rmi, rdf, rdi = raw_f(mf), raw_i(mi), raw_f(df), raw_i(di)
    pst = _inputs(rmf, rmi, rdf, rdi)
    ohd = rmi[rmi[L.MI_PLANT] + PI_HYD_D]
    if ohd >= 0:
        hydraulics_before(rmf, rmi, rdf, _ftab(rmi, PF_HYD), rmi[L.DF_PLANT] + ohd, 0.0)
    _outputs(rmf, rmi, rdf, rdi, st | pst, 0.0)
    return pst


class TransmissionPlant(HydraulicsPlant, FrictionPlant):
    """A transmission described in a file, reduced to independent speeds, on the friction core."""

    kind = "transmission"
    skips_unread_outputs = True
    description = "Transmission from a description: members, gear meshes, planetary sets, clutches, brakes, " \
                  "freewheels, selectors (Morselli, Zanasi & Ferracin; Biagiotti & Zanasi)"
    status_bits = STATUS
    params_type = TransmissionParams
    kernels = friction_kernels(transmission_step, transmission_refresh)

    @classmethod
    def signals(cls, params: TransmissionParams):
        inputs, outputs, _ = transmission_ports(params.description, params.reduction, params.powertrain,
                                               params.hydraulics)
        return inputs.signals(params), outputs.signals(params)

    @classmethod
    def description_of(cls, params: TransmissionParams, source: str = "") -> dict:
        """What ``describe`` prints: the signals, the independent speeds and every gear with its ratio."""
        out = super().description_of(params, source)
        p, d, red = params, params.description, params.reduction
        out["description"] = f"{d.name}: {cls.description}"
        out["independent_speeds"] = [d.members[m].name for m in red.coordinates]
        out["gears"] = [dict(name=g.name, number=g.number,
                             engaged=[d.elements[e].name for e in g.elements]
                             + [f"{d.selectors[s].name}:{v}" for s, v in g.positions],
                             ratio=float(g.ratio)) for g in red.gears]
        if p.powertrain is not None:
            out["components"] = PT.describe(p.powertrain, [m.name for m in d.members])
        if p.hydraulics is not None:
            out.setdefault("components", {})["hydraulics"] = hydraulics_description(p.hydraulics,
                                                                                    [e.name for e in d.elements])
        return out

    @classmethod
    def build_spec(cls, p: TransmissionParams) -> CoreSpec:
        d, red = p.description, p.reduction
        coords = red.coordinates
        rows = [_element_row(e, entries) for e, entries in zip(d.elements, red.rows)]
        for s in d.selectors:
            # one row per selector; its ratio is the selected gear's (the first one until a gear is selected)
            rows.append(Row(s.name, coords.index(s.member), coords.index(s.to), 1.0, -s.positions[0].ratio,
                            act_gain=1.0, gain_static=1.0, gain_kinetic=s.kinetic_to_static))
        springs = tuple(Spring(sp.name, coords.index(sp.members[0]), coords.index(sp.members[1]), 1.0, -1.0,
                               stiffness=sp.stiffness, damping=sp.damping, table=sp.table) for sp in d.springs)
        names = tuple(d.members[m].name for m in coords)
        if not red.dense:
            return CoreSpec(names, tuple(d.members[m].inertia for m in coords), tuple(d.members[m].drag for m in coords),
                            tuple(rows), springs, p.settings)
        M = red.mass
        return CoreSpec(names, tuple(M[i][i] for i in range(len(M))), (0.0,) * len(M), tuple(rows), springs,
                        p.settings, inertia_matrix=M, drag_matrix=red.drag)

    @classmethod
    def clutch_names(cls, params: TransmissionParams) -> list[str]:
        d = params.description
        return [e.name for e in d.elements] + [s.name for s in d.selectors]

    # -- buffers ---------------------------------------------------------------------------------------
    def _allocate(self):
        from ..core.api import Core

        nrel = len(self.params.reduction.relation_names)
        tables = _tables(self.params)
        self.plant_nf = len(tables[1])
        self.plant_ni = len(tables[0])
        self.plant_ndi = max(len(self.params.description.selectors), 1)
        law = None
        if self.params.powertrain is not None:
            li, lf = self._law_tables()
            law = LawBlocks(POWERTRAIN_LAW, nf=len(lf), ni=len(li), ndf=self.params.powertrain.law_data(
                            len(self.spec.inertia)), nz=self.params.powertrain.law_states,
                            checks_reuse=True)
        hyd = self.params.hydraulics
        self.core = Core(self.spec, plant_nf=self.plant_nf, plant_ni=self.plant_ni,
                         plant_ndf=2 * self.n_in + self.n_out + nrel + (data_length(hyd) if hyd else 0),
                         plant_ndi=self.plant_ndi, law=law, act_hold=hyd is not None)
        return self.core.mf, self.core.mi, self.core.df, self.core.di

    def _law_tables(self):
        p = self.params
        _, _, blocks = transmission_ports(p.description, p.reduction, p.powertrain, p.hydraulics)
        T = np.asarray(p.reduction.T, dtype=float).reshape(len(p.description.members), len(p.reduction.coordinates))
        return PT.law_tables(p.powertrain, T, p.reduction.coordinates, self.n_in, blocks["powertrain_ports"])

    def _fill_model(self) -> None:
        ints, floats = _tables(self.params)
        self.core.plant_i[:] = ints
        self.core.plant_f[:] = floats
        if self.params.powertrain is not None:
            li, lf = self._law_tables()
            self.core.law_i[:] = li
            self.core.law_f[:] = lf

    # -- life cycle ------------------------------------------------------------------------------------
    def _positions(self) -> list[tuple[int, int]]:
        """(selector, position value) selected by the commands at reset."""
        d = self.params.description
        out = []
        for s, sel in enumerate(d.selectors):
            v = int(self.u[self.input_index(sel.input)])
            out.append((s, v if any(p.value == v for p in sel.positions) else 0))
        return out

    def _initial_state(self) -> None:
        d, red = self.params.description, self.params.reduction
        c = self.core
        nel = len(d.elements)
        positions = self._positions()
        for s, v in positions:
            c.plant_di[PD_SEL + s] = v
            if v != 0:
                pos = next(p for p in d.selectors[s].positions if p.value == v)
                c.coef_b[nel + s] = -pos.ratio
        c.omega[:] = initial_speeds(d, red, positions)
        for i, e in enumerate(d.elements):
            if e.clutch is not None:
                c.act[i] = self.command_pressure(i) * BAR
            else:
                c.act[i] = e.holding_N_m / e.force_radius
            c.u_act[i] = c.act[i]
        for s, v in positions:
            cap = d.selectors[s].dog_capacity if v else 0.0
            c.act[nel + s] = cap
            c.u_act[nel + s] = cap
        c.twist[:] = 0.0
        self._settle_hydraulics()
        if self.params.powertrain is not None:  # the components' states that start settled
            PT.settle(self.params.powertrain, c.law_z, {s.name: float(self.u[k]) for k, s in enumerate(self.inputs)})

    def _engaged_at_start(self) -> list[int]:
        d = self.params.description
        nel = len(d.elements)
        return list(d.initial_engaged) + [nel + s for s in range(len(d.selectors))
                                          if self.core.plant_di[PD_SEL + s] != 0]

    def start(self) -> int:
        """The start of :class:`FrictionPlant`; with ``spring_torque = "quasi_steady"`` the springs are then
        given the torques at which their two ends accelerate alike, and the start is made again."""
        st = super().start()
        if self.params.description.quasi_steady_springs and self.core.sizes.s:
            self.core.twist[:] = quasi_steady_twists(self.core)
            st = super().start()
        return st

    def reset(self, inputs: dict[str, float] | None = None) -> int:
        """The reset of :class:`FrictionPlant`; an engine starting at its idle speed starts with its idle
        governor settled (:mod:`plant_models.powertrain.idle`: its integral solved by trial starts)."""
        st = super().reset(inputs)
        pt = self.params.powertrain
        if pt is None or pt.engine is None:
            return st
        c, red = self.core, self.params.reduction
        z_gov = sum(m.N_Z for m, _ in pt.present()[:[m.KIND for m, _ in pt.present()].index("engine")]) + PT_GOV
        row = np.asarray(red.T, dtype=float).reshape(len(self.params.description.members),
                                                     len(red.coordinates))[pt.engine_member]
        speed = float(row @ c.omega)

        def accel_at(g: float) -> float:
            c.law_z[z_gov] = g
            c.counters[L.CNT_EVENTS] = 0  # the events of this start only (the reset emptied the log)
            self.start()
            return float(row @ c.accel)

        g = settled_integral(pt.engine, speed, min(max(self.input_dict()["pedal"], 0.0), 1.0), accel_at)
        if g is None:
            return st
        c.law_z[z_gov] = g
        c.counters[L.CNT_EVENTS] = 0
        return self.start()

    def tunable_parameters(self) -> list[Param]:
        """The core's row parameters; for a reduced system the members' drags (the reduced drag matrix is
        rebuilt from them) in place of the independent speeds' drags."""
        params = super().tunable_parameters()
        if not self.params.reduction.dense:
            return params
        params = [p for p in params if not p.name.startswith("shaft.")]
        d, red = self.params.description, self.params.reduction
        T = np.asarray(red.T)
        drags = np.array([m.drag for m in d.members])
        n = len(red.coordinates)
        o_dm = int(self.mi[L.MF_DRAGM])
        o_d = int(self.mi[L.MF_DRAG])

        def make(m):
            def set_(v):
                drags[m] = v
                D = T.T @ np.diag(drags) @ T
                self.mf[o_dm:o_dm + n * n] = (0.5 * (D + D.T)).ravel()
                # the diagonal also in MF_DRAG: the step's reuse of its last evaluation compares that block
                self.mf[o_d:o_d + n] = np.diag(D)
            return Param(f"member.{d.members[m].name}.drag", "N m s/rad", 0.0, 1e9,
                         f"viscous drag of member {d.members[m].name} to the housing",
                         lambda: float(drags[m]), set_)
        return [make(m) for m in range(len(d.members))] + params

    # -- helpers for tests, docs and scenario design ----------------------------------------------------
    def start_in_gear(self, gear: str, input_speed: float) -> int:
        """Put the transmission in a gear of its table at an input speed and start there.

        The gear's elements (and selector positions) are engaged, the other
        members take the speeds the gear gives them, the actuators are
        settled at the current inputs.  Returns the status word of the start.
        """
        d, red = self.params.description, self.params.reduction
        g = next((x for x in red.gears if x.name == gear), None)
        if g is None:
            raise KeyError(f"no gear {gear!r}; the gears are {', '.join(x.name for x in red.gears)}")
        c = self.core
        nel = len(d.elements)
        for s in range(len(d.selectors)):
            c.plant_di[PD_SEL + s] = 0
        for s, v in g.positions:
            c.plant_di[PD_SEL + s] = v
            c.coef_b[nel + s] = -next(p.ratio for p in d.selectors[s].positions if p.value == v)
        held = replace(d, initial_engaged=g.elements, initial_speeds=((d.input_member, input_speed),))
        c.omega[:] = initial_speeds(held, red, list(g.positions))
        refresh = self.compiled["refresh"]
        self._settle_hydraulics()
        refresh(self.mf, self.mi, self.df, self.di, 0)
        c.act[:] = c.u_act
        for s, v in g.positions:
            c.act[nel + s] = c.u_act[nel + s] = d.selectors[s].dog_capacity
        st = c.start(list(g.elements) + [nel + s for s, _ in g.positions])
        return st | int(refresh(self.mf, self.mi, self.df, self.di, st))

    # -- clutch hydraulics (the rest in HydraulicsPlant) --------------------------------------------------
    def _command_input(self, row: int) -> int:
        e = self.params.description.elements[row]
        hyd = self.params.hydraulics
        current = hyd is not None and hyd.current_commands and row in hyd.elements
        return self.input_index(f"{'i' if current else 'p'}_{e.name}")

    def _hydraulics_offsets(self) -> tuple[int, int]:
        opi = int(self.mi[L.MI_PLANT])
        return (int(self.mi[L.MF_PLANT]) + int(self.mi[opi + PF_HYD]),
                int(self.mi[L.DF_PLANT]) + int(self.mi[opi + PI_HYD_D]))

    def gear_ratio(self, name: str) -> float:
        """w_input / w_out of a gear of the shift table."""
        return float(next(g.ratio for g in self.params.reduction.gears if g.name == name))

    def member_speeds(self) -> np.ndarray:
        """Every member's speed, rad/s (T q)."""
        return np.asarray(self.params.reduction.T) @ self.core.omega


def _element_row(e, entries) -> Row:
    """The core row of a shift element from its entries over the independent speeds."""
    (a, ca), *rest = entries
    kw = {}
    if rest:
        (b, cb), *more = rest
        kw = dict(shaft_b=b, coef_b=cb, more=tuple(more))
    else:
        from ..core.api import GROUND
        kw = dict(shaft_b=GROUND, coef_b=1.0)
    if e.kind == "freewheel":
        return Row(e.name, a, coef_a=ca, act_gain=1.0, gain_static=1.0, gain_kinetic=0.0, one_way=True, **kw)
    if e.kind == "rolling":  # a vehicle's rolling resistance: Coulomb friction of constant capacity
        return Row(e.name, a, coef_a=ca, act_gain=1.0, gain_static=1.0, gain_kinetic=1.0, **kw)
    base = e.clutch.row(e.name, a, kw["shaft_b"], ca, kw["coef_b"], force_radius_m=e.force_radius)
    return replace(base, more=kw.get("more", ()))


def initial_speeds(d: Description, red: Reduction, positions) -> np.ndarray:
    """Independent speeds at reset: the listed member speeds, the engaged elements and selected gears
    holding (least squares; the description was checked for a unique solution when it was read)."""
    n = len(red.coordinates)
    if not d.initial_speeds:
        return np.zeros(n)
    _, rows, rhs = speed_constraints(d, red, positions)
    if not rows or n == 0:
        return np.zeros(n)
    q, *_ = np.linalg.lstsq(np.array(rows), np.array(rhs), rcond=None)
    for m, v in d.initial_speeds:  # a listed member that is an independent speed gets its value exactly
        if m in red.coordinates:
            q[red.coordinates.index(m)] = v
    return q


def quasi_steady_twists(core) -> np.ndarray:
    """Spring twists at which both ends of every spring accelerate alike (no transient at the start).

    With the forces f at the start state (spring torques zero) and the
    stuck set's constrained inverse inertia P, the spring torques t solve
    C^T P (f - C t) = 0 (C: one column per spring, its twist-rate factors).
    """
    from ..core.api import L as LL

    n, s = core.sizes.n, core.sizes.s
    f = core.df[int(core.mi[LL.DF_F]):int(core.mi[LL.DF_F]) + n].copy()
    if core.stuck.any():
        P = core.df[int(core.mi[LL.DF_P]):int(core.mi[LL.DF_P]) + n * n].reshape(n, n)
    else:
        P = np.linalg.inv(core.spec.mass_matrix())
    C = np.zeros((n, s))
    for j, sp in enumerate(core.spec.springs):
        C[sp.shaft_a, j] += sp.factor_a
        C[sp.shaft_b, j] += sp.factor_b
    torque = np.linalg.solve(C.T @ P @ C, C.T @ P @ f)
    out = np.zeros(s)
    for j, sp in enumerate(core.spec.springs):
        if sp.table:
            xs, ys = zip(*sp.table)
            out[j] = float(np.interp(torque[j], ys, xs))
        else:
            out[j] = torque[j] / sp.stiffness
    return out


def _tables(p: TransmissionParams) -> tuple[list[int], list[float]]:
    """The plant's int and float parameter blocks (layout: the PI_* / PF_* slots above)."""
    d, red = p.description, p.reduction
    inputs, outputs, blocks = transmission_ports(d, red, p.powertrain, p.hydraulics)
    N, n = len(d.members), len(red.coordinates)
    ints = [0] * PI_LEN
    floats: list[float] = []
    ints[PI_N_IN], ints[PI_N_MEM], ints[PI_N_EL], ints[PI_N_SEL] = len(inputs), N, len(d.elements), len(d.selectors)
    ints[PI_N_TQ], ints[PI_N_GEAR], ints[PI_N_REL] = len(d.torques), len(red.gears), len(red.relation_names)
    relout = relation_outputs(d, red)
    ints[PI_N_RELOUT], ints[PI_N_SPRING] = len(relout), len(d.springs)
    ints[PI_INPUT_MEMBER], ints[PI_OUTPUT_MEMBER] = d.input_member, d.output_member
    for slot in (PI_IN_TQ, PI_OUT_W, PI_OUT_WOUT, PI_OUT_GEAR, PI_OUT_RATIO, PI_OUT_EL, PI_OUT_SEL, PI_OUT_SPRING,
                 PI_OUT_REL, PI_OUT_STATUS, PI_OUT_PT):
        ints[slot] = blocks[slot]

    def itable(slot, values):
        ints[slot] = len(ints)
        ints.extend(int(v) for v in values)

    def ftable(slot, values):
        ints[slot] = len(floats)
        floats.extend(float(v) for v in values)

    itable(PI_EL_PORT, [blocks["element_ports"].get(k, -1) for k in range(len(d.elements))])
    itable(PI_TQ_MEMBER, [t.member for t in d.torques])
    itable(PI_SEL_PORT, blocks["selector_ports"])
    itable(PI_SEL_NPOS, [len(s.positions) for s in d.selectors])
    starts = np.cumsum([0] + [len(s.positions) for s in d.selectors])[:-1]
    itable(PI_SEL_POS, starts)
    itable(PI_POS_VALUE, [q.value for s in d.selectors for q in s.positions])
    gear_table = []
    for g in red.gears:
        gear_table += [g.number, len(g.elements), *g.elements, len(g.positions)]
        for s, v in g.positions:
            gear_table += [s, v]
    itable(PI_GEAR, gear_table)
    itable(PI_RELOUT, [v for _, _, k, m in relout for v in (k, m)])
    itable(PI_SPRING_A, [sp.members[0] for sp in d.springs])
    itable(PI_SPRING_B, [sp.members[1] for sp in d.springs])
    itable(PI_MEM_COORD, [red.coordinates.index(m) if m in red.coordinates else -1 for m in range(N)])
    T = np.asarray(red.T, dtype=float).reshape(N, n)
    ftable(PF_T, T.ravel())
    ftable(PF_J, [m.inertia for m in d.members])
    ftable(PF_B, [m.drag for m in d.members])
    C = np.zeros((len(d.elements), N))
    for i, e in enumerate(d.elements):
        for m, c in e.coefs:
            C[i, m] += float(c)
    ftable(PF_EL_C, C.ravel())
    ftable(PF_EL_R, [e.force_radius for e in d.elements])
    ftable(PF_TQ_SIGN, [t.sign for t in d.torques])
    ftable(PF_POS_COEF, [-q.ratio for s in d.selectors for q in s.positions])
    ftable(PF_POS_SYNC, [q.sync_capacity for s in d.selectors for q in s.positions])
    ftable(PF_SEL_DOG, [s.dog_capacity for s in d.selectors])
    ftable(PF_LAMBDA, np.asarray(red.relation_map, dtype=float).ravel())
    ftable(PF_G, np.asarray(red.relation_rows, dtype=float).ravel())
    ftable(PF_OUT_SIGN, [d.output_sign])
    hyd = p.hydraulics
    ftable(PF_HYD, [] if hyd is None else param_block(hyd, len(inputs),
                                                       [blocks["element_ports"][k] for k in hyd.elements]))
    ints[PI_OUT_HYD] = blocks[PI_OUT_HYD]
    # the hydraulics' data follow the ports and the relation scratch in the plant's data block
    ints[PI_HYD_D] = -1 if hyd is None else 2 * len(inputs) + len(outputs) + len(red.relation_names)
    return ints, floats
