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

This module holds the parameters, the ports, the Python code that packs the
plant's tables and the plant class; the compiled step and the layout of the
tables it reads (``PI_*`` / ``PF_*``) are in :mod:`.transmission_kernel`
(why apart: there).  The description and its reduction live in
:mod:`plant_models.drivetrain` and :mod:`plant_models.reduction`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..clutch import BAR
from ..core.api import L, CoreSpec, LawBlocks, Row, Settings, Spring
from ..drivetrain import Description, Reduction
from ..friction_plant import FrictionPlant, friction_kernels
from ..plant import Param, Ports, Signal
from ..powertrain import components as PT
from ..powertrain.assembly import POWERTRAIN_LAW
from ..powertrain.engine import Z_GOV as PT_GOV  # the governor integral in the engine states
from ..powertrain.hydraulics import Hydraulics, data_length, param_block
from ..powertrain.idle import settled_integral
from ..powertrain.hydraulics import describe as hydraulics_description
from ..powertrain.hydraulics_plant import HydraulicsPlant, current_signal, fill_signal
from ..reduction import speed_constraints
from .ratio import RATIO_LIMIT
from .transmission_kernel import (ELEMENT, PD_SEL, PF_B, PF_EL_C, PF_EL_R, PF_G, PF_HYD, PF_J, PF_LAMBDA, PF_OUT_SIGN,
                                  PF_POS_COEF, PF_POS_SYNC, PF_SEL_DOG, PF_T, PF_TQ_SIGN, PI_EL_PORT, PI_GEAR, PI_HYD_D,
                                  PI_INPUT_MEMBER, PI_IN_TQ, PI_LEN, PI_MEM_COORD, PI_N_EL, PI_N_GEAR, PI_N_IN,
                                  PI_N_MEM, PI_N_REL, PI_N_RELOUT, PI_N_SEL, PI_N_SPRING, PI_N_TQ, PI_OUTPUT_MEMBER,
                                  PI_OUT_EL, PI_OUT_GEAR, PI_OUT_HYD, PI_OUT_PT, PI_OUT_RATIO, PI_OUT_REL, PI_OUT_SEL,
                                  PI_OUT_SPRING, PI_OUT_STATUS, PI_OUT_W, PI_OUT_WOUT, PI_POS_VALUE, PI_RELOUT,
                                  PI_SEL_NPOS, PI_SEL_PORT, PI_SEL_POS, PI_SPRING_A, PI_SPRING_B, PI_TQ_MEMBER,
                                  SELECTOR, STATUS, ST_GEAR_REJECTED, transmission_refresh, transmission_step)

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
