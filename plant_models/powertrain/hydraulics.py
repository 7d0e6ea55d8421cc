"""Clutch hydraulics: command -> dead time -> valve -> fill -> piston pressure, per clutch or brake.

A shift element's command (a pressure, or a solenoid current through the
valve map) reaches its piston after a dead time of whole steps; an optional
valve lag (a first-order response, making the whole second order) follows.
Before the plates touch, the piston strokes against its return spring: the
chamber fills its fill volume at the flow limit, and its pressure is the
spring's, rising linearly with the filled volume from the rest pressure
(spring preload) to the kiss-point pressure (spring force at full stroke
over piston area).  Once full, the chamber pressure follows the valve's
output through the first-order lag of the core's actuator.  Below the kiss
point the piston drains at its drain flow (spring pushing back), and it
stops stroking where the spring pressure equals the command.  Equations and
parameters: docs/powertrain.md.

How the core stays exact: the core integrates each row's actuator in closed
form (:mod:`plant_models.core.actuator`).  Before each step this stage
decides, per element, for how long its piston strokes in that step and at
which slope its pressure rises (or falls) meanwhile, and hands both to the
core (``DF_ACT_HOLD``, ``DF_ACT_RAMP``) with the command for the lag after;
the capacity at every stage point and the kiss point the core locates then
lie on that one trajectory, so a fill that completes inside a step engages
at the instant the fill volume and flow limit give.  After the step the
fill volume is advanced by the same closed form, and a chamber whose
pressure fell below the kiss point during the step starts to drain at the
instant it crossed (found on the lag's closed form).

State (in the plant's data block, so snapshots carry it): the step count,
per element the fill volume, the valve's output, the last valve command
(what a stuck valve keeps), the dead-time ring of (value, rate) pairs, and
what the step in progress will commit.  Faults (``slow_fill``, ``leakage``,
``valve_stuck``) are floats of the parameter block, written between steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from numba import njit

from ..core.api import JIT, L, y_act
from .slots import Slots

BAR = 1.0e5  # Pa per bar

# -- parameters, per element (HP_LEN floats after H_FIRST); the block starts with the count and the valve map
BLOCK = Slots(ints=(
    ("count", "number of elements with hydraulics"),
    ("map_n", "breakpoints of the valve map (0: the commands are pressures in bar)"),
    ("map", "offset (in the block) of the valve map: currents (A), then pressures (Pa)"),
    ("n_in", "number of plant inputs (their rates follow them)"),
))
globals().update(BLOCK.constants(("H",)))  # H_COUNT, H_MAP_N, H_MAP, H_N_IN; N_H
H_FIRST = N_H  # noqa: F821
ELEMENT = Slots(ints=(
    ("row", "the element's core row"),
    ("dead", "dead time, steps"),
    ("ring", "offset of its dead-time ring in the data block"),
    ("vfill", "fill volume, m^3"),
    ("qfill", "fill flow limit, m^3/s"),
    ("qdrain", "drain flow, m^3/s"),
    ("prest", "rest pressure (return spring preload / piston area), Pa"),
    ("pkiss", "kiss-point pressure (return spring force at full stroke / piston area), Pa"),
    ("tv", "valve lag, s (0: none: first-order hydraulics)"),
    ("flow", "fault: fill flow factor (1: none; slow_fill < 1)"),
    ("leak", "fault: pressure lost at the piston, Pa (leakage)"),
    ("stuck", "fault: 1.0 while the valve is stuck at its last output"),
    ("port", "the plant input of its command (bar, or A through the valve map)"),
))
globals().update(ELEMENT.constants(("HP",)))  # HP_ROW .. HP_PORT; N_HP
HP_LEN = N_HP  # noqa: F821

# -- data (the plant's df): the step count, per element HS_LEN floats, then the rings
DATA = Slots(ints=(("tick", "steps taken"),))
globals().update(DATA.constants(("D",)))  # D_TICK; N_D
D_FIRST = N_D  # noqa: F821
STATE = Slots(ints=(
    ("v", "filled volume, m^3 (0 .. fill volume)"),
    ("pv", "valve output, Pa (with a valve lag)"),
    ("last", "the valve command at the end of the last step, Pa (a stuck valve keeps it)"),
    ("in", "this step: the command that enters the dead-time ring, its value"),
    ("in_rate", "... and its rate"),
    ("pv_next", "this step: the valve output at its end"),
    ("last_next", "this step: the valve command at its end"),
    ("cmd", "this step: the command the piston sees (Pa), held over a stroking step"),
    ("s1", "this step: stroke time, s (the core's DF_ACT_HOLD)"),
    ("q", "this step: pressure slope while stroking, Pa/s (the core's DF_ACT_RAMP)"),
    ("x0", "this step: the chamber pressure at its start, Pa"),
    ("head", "the dead-time ring's slot of this step (0 .. dead time - 1)"),
    ("exp_dt", "the step length the valve's lag factor belongs to, s (NaN: none yet)"),
    ("exp", "exp(-dt / valve lag) for that step length"),
))
globals().update(STATE.constants(("HS",)))  # HS_V .. HS_EXP; N_HS
HS_LEN = N_HS  # noqa: F821


@dataclass(frozen=True)
class ClutchHydraulics:
    """The hydraulics of one shift element (SI units)."""

    dead_time_steps: int
    fill_volume_m3: float
    fill_flow_m3_s: float
    drain_flow_m3_s: float
    rest_pressure_Pa: float
    kiss_pressure_Pa: float  # the clutch's return spring force / piston area (its kiss point)
    time_constant_s: float  # first-order lag of the chamber pressure once full (the core's actuator lag)
    valve_time_constant_s: float = 0.0

    def fill_time_s(self) -> float:
        """Time from an empty chamber to the kiss point at the flow limit: fill volume / flow limit."""
        return self.fill_volume_m3 / self.fill_flow_m3_s


@dataclass(frozen=True)
class Hydraulics:
    """The hydraulics of a transmission: the elements that have them and the valve map, if commands are currents."""

    elements: tuple[int, ...]  # element indices (core rows)
    clutches: tuple[ClutchHydraulics, ...]
    valve_current_A: tuple[float, ...] = ()  # the valve map (empty: pressure commands)
    valve_pressure_bar: tuple[float, ...] = ()

    def of(self, element: int) -> ClutchHydraulics | None:
        return self.clutches[self.elements.index(element)] if element in self.elements else None

    @property
    def current_commands(self) -> bool:
        return len(self.valve_current_A) > 0

    def pressure_of_current(self, amps: float) -> float:
        """The valve map, bar (linear between breakpoints, held beyond its ends)."""
        xs, ys = self.valve_current_A, self.valve_pressure_bar
        if amps <= xs[0]:
            return ys[0]
        for k in range(1, len(xs)):
            if amps <= xs[k]:
                return ys[k - 1] + (ys[k] - ys[k - 1]) * (amps - xs[k - 1]) / (xs[k] - xs[k - 1])
        return ys[-1]


def param_block(h: Hydraulics, n_in: int, ports: list[int]) -> list[float]:
    """The floats of the parameter block (layout: H_* / HP_* above); ``ports``: each element's command input."""
    n = len(h.elements)
    nm = len(h.valve_current_A)
    out = [float(n), float(nm), float(H_FIRST + n * HP_LEN), float(n_in)]
    ring = D_FIRST + n * HS_LEN
    for e, c, port in zip(h.elements, h.clutches, ports):
        blk = [0.0] * HP_LEN
        blk[HP_PORT] = float(port)
        blk[HP_ROW], blk[HP_DEAD], blk[HP_RING] = float(e), float(c.dead_time_steps), float(ring)
        blk[HP_VFILL], blk[HP_QFILL], blk[HP_QDRAIN] = c.fill_volume_m3, c.fill_flow_m3_s, c.drain_flow_m3_s
        blk[HP_PREST], blk[HP_PKISS], blk[HP_TV] = c.rest_pressure_Pa, c.kiss_pressure_Pa, c.valve_time_constant_s
        blk[HP_FLOW] = 1.0
        out += blk
        ring += 2 * c.dead_time_steps
    out += [float(a) for a in h.valve_current_A] + [float(p) * BAR for p in h.valve_pressure_bar]
    return out


def param_length(h: Hydraulics) -> int:
    """Floats of the parameter block."""
    return H_FIRST + len(h.elements) * HP_LEN + 2 * len(h.valve_current_A)


def data_length(h: Hydraulics) -> int:
    """Floats of the data block."""
    return D_FIRST + len(h.elements) * HS_LEN + sum(2 * c.dead_time_steps for c in h.clutches)


def initial_data(h: Hydraulics, commands_Pa: list[float]) -> list[float]:
    """The data block at a start where each element's command (Pa, after the valve map) has been held long
    enough: the ring full of it, the valve settled, the piston stroked to where the spring balances it."""
    out = [0.0] * data_length(h)
    ring = D_FIRST + len(h.elements) * HS_LEN
    for k, (c, p) in enumerate(zip(h.clutches, commands_Pa)):
        s = D_FIRST + k * HS_LEN
        frac = min(max((p - c.rest_pressure_Pa) / (c.kiss_pressure_Pa - c.rest_pressure_Pa), 0.0), 1.0)
        out[s + HS_V] = c.fill_volume_m3 * frac
        out[s + HS_PV] = out[s + HS_LAST] = p
        out[s + HS_EXP_DT] = math.nan
        for j in range(c.dead_time_steps):
            out[ring + 2 * j] = p
        ring += 2 * c.dead_time_steps
    return out


@njit(**JIT)
def valve_map(mf, of, amps):
    """Pressure (Pa) of a solenoid current (A) and the map's slope there (Pa/A).  Called in the real-time loop."""
    n = int(mf[of + H_MAP_N])
    ox = of + int(mf[of + H_MAP])
    oy = ox + n
    if amps <= mf[ox]:
        return mf[oy], 0.0
    if amps >= mf[ox + n - 1]:
        return mf[oy + n - 1], 0.0
    q = 1
    while amps > mf[ox + q]:
        q += 1
    slope = (mf[oy + q] - mf[oy + q - 1]) / (mf[ox + q] - mf[ox + q - 1])
    return mf[oy + q - 1] + slope * (amps - mf[ox + q - 1]), slope


@njit(**JIT)
def _valve(mf, df, p, s, od, c, rc, dt):
    """Dead time, stuck valve, leakage and valve lag: the command (value, rate) the piston sees over this step.

    Keeps what the step will commit (HS_IN, HS_LAST_NEXT, HS_PV_NEXT).  Called in the real-time loop.
    """
    nd = int(mf[p + HP_DEAD])
    if nd > 0:
        slot = od + int(mf[p + HP_RING]) + 2 * int(df[s + HS_HEAD])
        df[s + HS_IN] = c
        df[s + HS_IN + 1] = rc
        c = df[slot]
        rc = df[slot + 1]
    if mf[p + HP_STUCK] != 0.0:
        c = df[s + HS_LAST]
        rc = 0.0
    df[s + HS_LAST_NEXT] = c + rc * dt
    c -= mf[p + HP_LEAK]
    if c < 0.0:  # a chamber is not pulled below the tank's pressure
        c = 0.0
        rc = 0.0
    tv = mf[p + HP_TV]
    if tv > 0.0:
        pv0 = df[s + HS_PV]
        pv1 = pv0
        if dt > 0.0:
            if df[s + HS_EXP_DT] != dt:  # the factor is kept per step length (an exp per step costs 20 ns)
                df[s + HS_EXP] = math.exp(-dt / tv)
                df[s + HS_EXP_DT] = dt
            pv1 = c + rc * dt - rc * tv + (pv0 - c + rc * tv) * df[s + HS_EXP]
            rc = (pv1 - pv0) / dt  # the valve's output, a ramp over the step, drives the piston's lag
        else:
            rc = 0.0
        df[s + HS_PV_NEXT] = pv1
        c = pv0
    return c, rc


@njit(**JIT)
def hydraulics_before(mf, mi, df, of, od, dt):
    """Per element: the command after the valve, and the stroke of this step, into the core's inputs.

    ``of``: the parameter block in mf, ``od``: the data block in df.  The
    element's command input (bar, or A through the valve map) becomes, in
    ``DF_U_ACT`` (Pa), what reaches the piston; while the chamber is not full the
    piston strokes for ``DF_ACT_HOLD`` s at ``DF_ACT_RAMP`` Pa/s towards the
    pressure where its spring balances the command (the kiss point at most),
    with the command held over the step.  Called in the real-time loop.
    """
    oua = mi[L.DF_U_ACT]
    ouar = mi[L.DF_U_ACT_RATE]
    ohold = mi[L.DF_ACT_HOLD]
    oramp = mi[L.DF_ACT_RAMP]
    oact = y_act(mi)
    op = mi[L.DF_PLANT]
    n_in = int(mf[of + H_N_IN])
    mapped = mf[of + H_MAP_N] > 0.0
    stroking = 0
    for k in range(int(mf[of + H_COUNT])):
        p = of + H_FIRST + k * HP_LEN
        s = od + D_FIRST + k * HS_LEN
        row = int(mf[p + HP_ROW])
        port = int(mf[p + HP_PORT])
        if not (math.isfinite(df[op + port]) and math.isfinite(df[op + n_in + port])):
            # the core refuses the step (ST_BAD_INPUT) and nothing here commits: the bad command does not
            # enter the dead-time ring (where it would refuse every step once it came out), and a current
            # is not clamped to the valve map's end
            df[oua + row] = math.nan
            df[ohold + row] = 0.0
            continue
        if mapped:  # a solenoid current through the valve map
            c, slope = valve_map(mf, of, df[op + port])
            rc = slope * df[op + n_in + port]
        else:
            c = df[op + port] * BAR
            rc = df[op + n_in + port] * BAR
        c, rc = _valve(mf, df, p, s, od, c, rc, dt)
        v = df[s + HS_V]
        vf = mf[p + HP_VFILL]
        s1 = 0.0
        q = 0.0
        if v < vf:
            rc = 0.0  # the command is held over a step in which the piston strokes
            pr = mf[p + HP_PREST]
            pk = mf[p + HP_PKISS]
            dpdv = (pk - pr) / vf
            if v > 0.0:
                ps = pr + dpdv * v
                df[oact + row] = ps  # the chamber's pressure is the spring's while the piston strokes
            else:
                ps = pr
            if c > ps and (v > 0.0 or c > pr):
                df[oact + row] = ps  # an empty chamber rises to the preload at once (oil is stiff)
                q = dpdv * mf[p + HP_QFILL] * mf[p + HP_FLOW]
                s1 = (min(c, pk) - ps) / q
            elif c < ps and v > 0.0:
                q = -dpdv * mf[p + HP_QDRAIN]
                s1 = (max(c, pr) - ps) / q
        df[s + HS_CMD] = c
        df[s + HS_X0] = df[oact + row]
        df[s + HS_S1] = s1
        df[s + HS_Q] = q
        df[oua + row] = c
        df[ouar + row] = rc
        df[ohold + row] = s1
        df[oramp + row] = q
        if s1 > 0.0:
            stroking = 1
    # the core looks at the rows' holds only in a step in which a piston strokes (the flag is this step's)
    mi[L.H_ACT_HOLD] = stroking


@njit(**JIT)
def _crossing(mf, mi, df, row, c, rc, x0, target, dt):
    """When in [0, dt] the lag from x0 towards c + rc s falls to ``target`` (bisection on its closed form).

    Called in the real-time loop, in the step a chamber falls below its kiss point.
    """
    T = mf[mi[L.MF_ACT_LAG] + row]
    lo = 0.0
    hi = dt
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        x = c + rc * mid - rc * T + (x0 - c + rc * T) * math.exp(-mid / T) if T > 0.0 else c + rc * mid
        if x > target:
            lo = mid
        else:
            hi = mid
    return hi


@njit(**JIT)
def hydraulics_after(mf, mi, df, of, od, dt):
    """After an accepted step of dt: commit the ring and the valve, advance the fill volumes, count the step.

    A full chamber that fell below its kiss point in the step drains from
    the instant it crossed.  Called in the real-time loop.
    """
    oact = y_act(mi)
    for k in range(int(mf[of + H_COUNT])):
        p = of + H_FIRST + k * HP_LEN
        s = od + D_FIRST + k * HS_LEN
        row = int(mf[p + HP_ROW])
        nd = int(mf[p + HP_DEAD])
        if nd > 0:
            head = int(df[s + HS_HEAD])
            slot = od + int(mf[p + HP_RING]) + 2 * head
            df[slot] = df[s + HS_IN]
            df[slot + 1] = df[s + HS_IN + 1]
            df[s + HS_HEAD] = float(head + 1) if head + 1 < nd else 0.0
        df[s + HS_LAST] = df[s + HS_LAST_NEXT]
        df[s + HS_PV] = df[s + HS_PV_NEXT]
        v = df[s + HS_V]
        vf = mf[p + HP_VFILL]
        pr = mf[p + HP_PREST]
        pk = mf[p + HP_PKISS]
        c = df[s + HS_CMD]
        if v < vf:
            s1 = df[s + HS_S1]
            q = df[s + HS_Q]
            if q != 0.0:
                if s1 <= dt:  # stroked to where the spring balances the command (full at the kiss point)
                    v = vf if c >= pk else (vf * (c - pr) / (pk - pr) if c > pr else 0.0)
                else:
                    v = min(max(v + q / ((pk - pr) / vf) * dt, 0.0), vf)
                df[s + HS_V] = v
        else:
            x = df[oact + row]
            x0 = df[s + HS_X0]
            if x < pk and x0 >= pk:  # fell below the kiss point in this step: the spring pushes back
                rc = df[mi[L.DF_U_ACT_RATE] + row]
                sd = _crossing(mf, mi, df, row, c, rc, x0, pk, dt)
                c_end = c + rc * dt
                v_eq = vf * min(max((c_end - pr) / (pk - pr), 0.0), 1.0)
                v = max(vf - mf[p + HP_QDRAIN] * (dt - sd), v_eq)
                df[s + HS_V] = v
                df[oact + row] = pr + (pk - pr) * v / vf if v > 0.0 else min(x, pr)
    df[od + D_TICK] += 1.0


@njit(**JIT)
def write_fill_outputs(mf, df, of, od, oout):
    """Each element's filled fraction (0 .. 1) from df[oout] on.  Called in the real-time loop."""
    for k in range(int(mf[of + H_COUNT])):
        df[oout + k] = df[od + D_FIRST + k * HS_LEN + HS_V] / mf[of + H_FIRST + k * HP_LEN + HP_VFILL]


def describe(h: Hydraulics, element_names: list[str]) -> dict:
    """What ``describe`` shows of the hydraulics: the elements and their ports, each parameter once when the
    elements share it (else per element)."""
    names = [element_names[e] for e in h.elements]
    out = dict(elements=names, inputs=[("i_" if h.current_commands else "p_") + n for n in names],
               outputs=[f"fill_{n}" for n in names])
    values = {"dead_time_steps": [c.dead_time_steps for c in h.clutches],
              "fill_volume_cm3": [round(c.fill_volume_m3 * 1e6, 4) for c in h.clutches],
              "fill_flow_l_per_min": [round(c.fill_flow_m3_s * 6e4, 4) for c in h.clutches],
              "fill_time_s": [round(c.fill_time_s(), 6) for c in h.clutches],
              "rest_pressure_bar": [c.rest_pressure_Pa / BAR for c in h.clutches],
              "kiss_point_bar": [round(c.kiss_pressure_Pa / BAR, 6) for c in h.clutches],
              "time_constant_s": [c.time_constant_s for c in h.clutches],
              "valve_time_constant_s": [c.valve_time_constant_s for c in h.clutches]}
    for key, vs in values.items():
        out[key] = vs[0] if len(set(vs)) == 1 else ", ".join(f"{n} {v}" for n, v in zip(names, vs))
    if h.current_commands:
        out["valve_map_A_to_bar"] = ", ".join(f"{a}:{p}" for a, p in zip(h.valve_current_A, h.valve_pressure_bar))
    return out
