"""A config's FMUs described without loading them: the assembly's ports and the FMUs' parameters.

From the model descriptions alone (:func:`.connect.check_fmu` reads the XML
and the zip's listing; no binary is loaded, no process started), for
``gearbox-hil describe`` (:func:`plant_models.registry.describe_config`) and
a campaign's checks of the signals its metrics name.  The port lists are
the ones :class:`.assembly.FmuAssembly` builds: the plant's inputs that no
FMU drives, then each FMU's inputs that no plant output feeds
(``name.variable``); the plant's outputs, then each FMU's outputs
(``name.variable``).  ``tests/test_fmi_campaign.py`` checks that they equal
the built assembly's, name for name.
"""

from __future__ import annotations

import math

from ..contract.ports import Signal, signal_table
from .connect import CheckedFmu, check_fmu

OPEN = 1e300  # an open end of a range, as get_params states it


def _bound(x: float, default: float) -> float:
    return x if math.isfinite(x) else default


def checked(fmus, source: str, inputs, outputs) -> list[CheckedFmu]:
    """Each ``[[fmu]]`` table checked against its FMU and the plant's ports (ConfigError otherwise)."""
    ins, outs = {s.name: s for s in inputs}, {s.name: s for s in outputs}
    return [check_fmu(t, source, ins, outs) for t in fmus]


def assembly_signals(fmus: list[CheckedFmu], inputs, outputs) -> tuple[tuple[Signal, ...], tuple[Signal, ...]]:
    """The assembly's (inputs, outputs) as :class:`~plant_models.contract.ports.Signal` tuples."""
    driven = {port for f in fmus for port in f.table.to_plant.values()}
    ins = [s for s in inputs if s.name not in driven]
    outs = list(outputs)
    for f in fmus:
        for n, v in f.variables.items():
            if v.causality == "input" and n not in f.table.from_plant:
                ins.append(Signal(f"{f.table.name}.{n}", v.unit or "-", _bound(v.lo, -OPEN), _bound(v.hi, OPEN),
                                  v.start, f"input of FMU {f.table.name}"))
        for n, v in f.variables.items():
            if v.causality == "output":
                outs.append(Signal(f"{f.table.name}.{n}", v.unit or "-", -OPEN, OPEN, 0.0,
                                   f"output of FMU {f.table.name}"))
    return tuple(ins), tuple(outs)


def tunable(f: CheckedFmu) -> list:
    """The FMU's parameters that are parameters of the server: Real (Float64), causality parameter, tunable."""
    return [v for v in f.variables.values()
            if v.causality == "parameter" and v.variability == "tunable" and v.kind == "real"]


def parameter_rows(f: CheckedFmu) -> list[dict]:
    """Every parameter of the FMU (fixed ones too, which only ``start`` sets), its value before the run."""
    rows = []
    for n, v in f.variables.items():
        if v.causality != "parameter":
            continue
        rows.append(dict(name=f"{f.table.name}.{n}", unit=v.unit or "-", min=_bound(v.lo, -OPEN),
                         max=_bound(v.hi, OPEN), value=f.table.start.get(n, v.start),
                         tunable=v.variability == "tunable" and v.kind == "real", type=v.type,
                         doc=v.doc or f"parameter of FMU {f.table.name}"))
    return rows


def fmu_table(f: CheckedFmu) -> dict:
    """One FMU as ``describe`` shows it."""
    t = f.table
    return dict(name=t.name, file=str(t.file), fmi=f"{f.version}.0", kind=("co-simulation" if f.kind == "cs"
                                                                            else "model exchange"),
                process=t.process, to_plant=dict(t.to_plant), from_plant=dict(t.from_plant), safe=dict(t.safe),
                parameters=parameter_rows(f))


def describe_with_fmus(d: dict, fmus, source: str, inputs, outputs) -> dict:
    """A plant's description (``describe_of``) with its FMUs: the assembly's ports and an ``fmus`` list."""
    checked_fmus = checked(fmus, source, inputs, outputs)
    ins, outs = assembly_signals(checked_fmus, inputs, outputs)
    d = dict(d)
    d["inputs"], d["outputs"] = signal_table(ins), signal_table(outs)
    d["fmus"] = [fmu_table(f) for f in checked_fmus]
    return d


__all__ = ["assembly_signals", "checked", "describe_with_fmus", "fmu_table", "parameter_rows", "tunable"]
