"""The powertrain as an assembly of components: the container of their parameters, their ports, and the
packing of the force law's blocks from the component table (:mod:`.table`).

A component that is a friction row (the lock-up clutch, the service brake,
the rolling resistance) becomes an element of the transmission's
description when the file is read (:mod:`plant_models.readers.powertrain`);
what depends on the state beyond friction (engine torque, converter
torques, aerodynamic drag, grade, ...) is a component module's part of the
force law (:mod:`.assembly`), whose blocks are packed here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..plant import Ports
from . import law as W
from .law import BRAKE, ENGINE_MEMBER, LOCKUP, ROLLING, RPM
from .converter import TorqueConverter
from .driver import Driver
from .engine import Engine
from .pto import Pto
from .table import COMPONENTS
from .vehicle import GRAVITY, Vehicle

__all__ = ["BRAKE", "ENGINE_MEMBER", "GRAVITY", "LOCKUP", "RPM", "ROLLING", "Driver", "Engine", "Packing",
           "Powertrain", "Pto", "TorqueConverter", "Vehicle", "add_ports", "describe", "law_tables",
           "data_offsets", "monotone_slopes", "settle", "work_accounts"]



def monotone_slopes(xs, ys) -> list[float]:
    """Slopes at the breakpoints of the monotone cubic Hermite interpolant (Fritsch and Carlson, SIAM J.
    Numer. Anal. 17, 1980; the weighted harmonic mean of Fritsch and Butland): no overshoot between
    breakpoints, a flat slope where the data turn."""
    n = len(xs)
    h = [xs[k + 1] - xs[k] for k in range(n - 1)]
    dl = [(ys[k + 1] - ys[k]) / h[k] for k in range(n - 1)]
    d = [dl[0]] + [0.0] * (n - 2) + [dl[-1]]
    for k in range(1, n - 1):
        if dl[k - 1] * dl[k] > 0.0:
            w1, w2 = 2.0 * h[k] + h[k - 1], h[k] + 2.0 * h[k - 1]
            d[k] = (w1 + w2) / (w1 / dl[k - 1] + w2 / dl[k])
    for k in (0, n - 1):  # end slopes no steeper than three times the secant (monotone)
        j = 0 if k == 0 else n - 2
        if d[k] * dl[j] <= 0.0:
            d[k] = 0.0
        elif abs(d[k]) > 3.0 * abs(dl[j]):
            d[k] = 3.0 * dl[j]
    return d


@dataclass(frozen=True)
class Powertrain:
    """The components present (None: absent) and the members they act on (member indices).

    ``parts`` holds the components the table reads by their ``KIND``
    (their module's ``read``), as (kind, parameters) pairs.
    """

    engine: Engine | None
    converter: TorqueConverter | None
    vehicle: Vehicle | None
    engine_member: int  # the engine's crank (the impeller with a converter; else the transmission input)
    turbine_member: int  # the transmission input
    output_member: int
    output_sign: float
    driver: Driver | None = None
    brake_row: int = -1  # the service brake's element (core row)
    pto: Pto | None = None
    parts: tuple = ()  # ((kind, parameters), ...) of the components read through the table

    def part(self, kind: str):
        """The parameters of the component of that kind, or None."""
        named = {"engine": self.engine, "torque_converter": self.converter, "vehicle": self.vehicle,
                 "driver": self.driver, "pto": self.pto}
        if kind in named:
            return named[kind]
        return next((p for k, p in self.parts if k == kind), None)

    def present(self) -> list[tuple[object, object]]:
        """(module, parameters) of each component present, in the table's order."""
        return [(m, self.part(m.KIND)) for m in COMPONENTS if self.part(m.KIND) is not None]

    @property
    def law_states(self) -> int:
        """Number of the law's states z: each present component's."""
        return sum(m.N_Z for m, _ in self.present())

    def law_data(self, n: int) -> int:
        """Length of the law's data block: the bus, the force scratch of n, each present component's."""
        return W.N_B + n + sum(m.N_D for m, _ in self.present())


def add_ports(pt: Powertrain, inputs: Ports, outputs: Ports) -> dict[str, int]:
    """The components' input and output ports, in the table's order, then their work accounts (J);
    returns {name: index} of each."""
    idx = {}
    present = pt.present()
    for m, p in present:
        idx.update(m.add_ports(p, pt, inputs, outputs))
    for m, _ in present:
        for _, name, doc in m.SLOTS.work_accounts():
            idx[name] = outputs.add(name, "J", -1.0e12, 1.0e12, 0.0, doc[0].upper() + doc[1:] + " since reset")
    for name, doc in W.CORE_ACCOUNTS:
        idx[name] = outputs.add(name, "J", -1.0e12, 1.0e12, 0.0, doc[0].upper() + doc[1:])
    return idx


class Packing:
    """What a component's ``pack`` fills: its ints (``ints[I_*]``) and floats (``floats``: its ``F_*``, then
    its tables), with the ports and plant inputs it names resolved."""

    def __init__(self, module, float_base: int, port, inputs: dict[str, int], data_offsets: dict[str, int]):
        self.ints = [0] * module.N_I
        self.floats = [0.0] * module.N_F
        self.float_base = float_base  # offset in MF_LAW of floats[0]
        self.port = port  # member index -> the value of a port slot (law.apply_torque)
        self._inputs = inputs
        self._data = data_offsets
        self.read_inputs: list[int] = []

    def input(self, name: str) -> int:
        """The plant input's index (and the law's finite-input check learns it reads that input)."""
        k = self._inputs[name]
        self.read_inputs.append(k)
        return k

    def data_of(self, kind: str) -> int:
        """Offset in DF_LAW of the data of the component of that kind (packed earlier in the table)."""
        return self._data[kind]

    def table(self, slot: int, slot_n: int, xs, ys, cubic: bool = False) -> None:
        """A table after the floats so far: its offset in MF_LAW into ints[slot], its length into ints[slot_n]
        (x values, then y values, then with ``cubic`` the monotone slopes)."""
        self.ints[slot] = self.float_base + len(self.floats)
        self.ints[slot_n] = len(xs)
        self.floats.extend(float(x) for x in xs)
        self.floats.extend(float(y) for y in ys)
        if cubic:
            self.floats.extend(monotone_slopes(xs, ys))


def law_tables(pt: Powertrain, T: np.ndarray, coordinates: tuple[int, ...], n_in: int,
               ports: dict[str, int]) -> tuple[list[int], list[float]]:
    """The law's int and float blocks (layout: :mod:`.law`), each present component's record packed by its
    module."""
    present = pt.present()
    geared: list[int] = []  # ports that are no independent speed: their rows of T start MF_LAW
    for m, _ in present:
        for member in m.members(pt):
            if member not in coordinates and member not in geared:
                geared.append(member)
    floats: list[float] = [float(v) for member in geared for v in T[member]]

    def port(member: int) -> int:  # the independent speed, or -(1 + its row of T)
        return coordinates.index(member) if member in coordinates else -(1 + geared.index(member))
    records: list[list[int]] = []
    record_of = [-1] * len(COMPONENTS)
    read_inputs: list[int] = []
    work: list[int] = []
    data_offsets: dict[str, int] = {}
    z = 0
    d = W.N_B + T.shape[1]  # after the bus and the force scratch
    for m, p in present:
        ctx = Packing(m, len(floats), port, ports, data_offsets)
        m.pack(p, pt, ctx)
        records.append([len(floats), z, d] + ctx.ints)
        floats.extend(float(v) for v in ctx.floats)
        read_inputs.extend(ctx.read_inputs)
        work.extend(z + k for k, _, _ in m.SLOTS.work_accounts())
        data_offsets[m.KIND] = d
        z += m.N_Z
        d += m.N_D
    read_inputs = list(dict.fromkeys(read_inputs))
    ints = [0] * W.N_H + [-1] * len(COMPONENTS)  # the header, the record offsets (W.RECORDS)
    ints[W.H_N_IN] = n_in
    for name, values in (("inputs", read_inputs), ("work", work)):
        ints[getattr(W, f"H_{name.upper()}")] = len(ints)
        ints.extend(values)
    ints[W.H_N_INPUTS] = len(read_inputs)
    ints[W.H_N_WORK] = len(work)
    kinds = [m.KIND for m in COMPONENTS]
    for (m, _), rec in zip(present, records):
        record_of[kinds.index(m.KIND)] = len(ints)
        ints.extend(rec)
    ints[W.RECORDS:W.RECORDS + len(COMPONENTS)] = record_of
    return ints, floats


def settle(pt: Powertrain, z: np.ndarray, inputs: dict[str, float]) -> None:
    """The law's states at reset: each present component with a ``settle`` sets its own (z: its block)."""
    k = 0
    for m, p in pt.present():
        if hasattr(m, "settle"):
            m.settle(p, z[k:k + m.N_Z], inputs)
        k += m.N_Z


def describe(pt: Powertrain, names: list[str]) -> dict:
    """What ``describe`` shows of the components."""
    return {m.KIND: m.describe(p, pt, names) for m, p in pt.present()}


def work_accounts(pt: Powertrain, z) -> dict[str, float]:
    """The components' work accounts (J) by their output names from the law's states ``z``; a component of the
    table that is absent reads 0.0 (its accounts did no work)."""
    out = {name: 0.0 for m in COMPONENTS for _, name, _ in m.SLOTS.work_accounts()}
    k = 0
    for m, _ in pt.present():
        for j, name, _ in m.SLOTS.work_accounts():
            out[name] = float(z[k + j])
        k += m.N_Z
    return out


def data_offsets(pt: Powertrain, n: int) -> dict[str, int]:
    """Offset in DF_LAW of each present component's data (``D_*`` of its module), by kind (n: independent
    speeds, the length of the force scratch before them)."""
    out, d = {}, W.N_B + n
    for m, _ in pt.present():
        out[m.KIND] = d
        d += m.N_D
    return out
