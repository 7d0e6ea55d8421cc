"""``[[fmu]]`` tables: which FMU, its start values, and its connections to the plant's ports, checked at load time.

A table::

    [[fmu]]
    name = "engine"                       # its signals are "engine.<variable>"
    file = "engine.fmu"                   # relative to the config file
    start = { tau = 0.05 }                # parameters / inputs set before initialization
    to_plant = { torque = "torque_in" }   # FMU output -> plant input (the plant input is no longer a port)
    from_plant = { speed = "w_in" }       # plant output -> FMU input
    process = "own"                       # "server" (default): in the server's process; "own": a child process
    timeout_s = 0.05                      # with "own": a step not answered by then is a hang (the child killed)
    safe = { torque = 0.0 }               # output values after a fault (the others hold their last values)

Every mistake is a :class:`~plant_models.errors.ConfigError` of one line
naming the config, the FMU, the variable and the problem: a missing
variable, a wrong causality, a unit that differs from the port's, a start
value outside the variable's range, an FMU output whose declared range
exceeds the plant input's, an FMU that is neither FMI 2.0 / 3.0
co-simulation nor FMI 2.0 / 3.0 model exchange, or has no binary for this
platform.

Variables: Real (FMI 3.0: Float64), Integer (Int32, Int64) and Boolean;
each is a float64 port of the assembly (:mod:`.slots`).
"""

from __future__ import annotations

import math
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# the FMI types imported, and what they are to the loop: "real", "int" or "bool"
TYPE_KINDS = {"Real": "real", "Float64": "real", "Integer": "int", "Int32": "int", "Int64": "int",
              "Boolean": "bool"}
KEYS = ("name", "file", "start", "to_plant", "from_plant", "process", "timeout_s", "safe")
SUPPORTED = "only FMI 2.0 / 3.0 co-simulation and model-exchange FMUs are supported"


@dataclass(frozen=True)
class FmuTable:
    """One ``[[fmu]]`` table as read from the config (not yet checked against the FMU)."""

    name: str
    file: Path
    start: dict[str, float] = field(default_factory=dict)
    to_plant: dict[str, str] = field(default_factory=dict)  # FMU output -> plant input
    from_plant: dict[str, str] = field(default_factory=dict)  # FMU input <- plant output
    key: str = "fmu"  # where in the config, for errors
    process: str = "server"  # "server": loaded in the server's process; "own": in a child (.isolated)
    timeout_s: float = 0.5  # s, with process "own": the deadline of a step or a parameter call
    safe: dict[str, float] = field(default_factory=dict)  # FMU output -> its value after a fault


def _str_table(source: str, key: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigError(source, key, "must be a table of FMU variable = \"plant port\"")
    return dict(value)


def read_fmu_tables(raw: Any, source: str) -> tuple[FmuTable, ...]:
    """The ``fmu`` array of tables of a config (``source`` its file); files resolved relative to it."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        raise ConfigError(source, "fmu", "must be an array of tables ([[fmu]])")
    out, names = [], set()
    for k, t in enumerate(raw):
        key = f"fmu[{k}]"
        unknown = set(t) - set(KEYS)
        if unknown:
            raise ConfigError(source, f"{key}.{sorted(unknown)[0]}", f"unknown key ({', '.join(KEYS)})")
        name = t.get("name")
        if not isinstance(name, str) or not NAME.match(name) or name in names:
            raise ConfigError(source, f"{key}.name", "needs a unique identifier (letters, digits, _)")
        names.add(name)
        file = t.get("file")
        if not isinstance(file, str):
            raise ConfigError(source, f"{key}.file", "needs the path of the .fmu file")
        path = (Path(source).parent / file).resolve()
        if not path.is_file():
            raise ConfigError(source, f"{key}.file", f"fmu {name}: no such file {file}")
        start = t.get("start", {})
        if not isinstance(start, dict) or not all(isinstance(v, (int, float)) for v in start.values()):
            raise ConfigError(source, f"{key}.start", f"fmu {name}: must be a table of variable = number "
                                                       f"(or true/false)")
        out.append(FmuTable(name, path, {a: float(b) for a, b in start.items()},
                            _str_table(source, f"{key}.to_plant", t.get("to_plant", {})),
                            _str_table(source, f"{key}.from_plant", t.get("from_plant", {})), key,
                            *_isolation(source, key, name, t)))
    return tuple(out)


def _isolation(source: str, key: str, name: str, t: dict) -> tuple[str, float, dict[str, float]]:
    """``process``, ``timeout_s`` and ``safe`` of one table, checked."""
    process = t.get("process", "server")
    if process not in ("server", "own"):
        raise ConfigError(source, f"{key}.process", f"fmu {name}: must be \"server\" (in the server's process) or "
                                                     f"\"own\" (a process of its own), not {process!r}")
    timeout = t.get("timeout_s", FmuTable.timeout_s)
    if "timeout_s" in t and process != "own":
        raise ConfigError(source, f"{key}.timeout_s", f"fmu {name}: applies only with process = \"own\"")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0.0 < timeout <= 3600.0:
        raise ConfigError(source, f"{key}.timeout_s", f"fmu {name}: must be a number of seconds in (0, 3600]")
    safe = t.get("safe", {})
    if not isinstance(safe, dict) or not all(isinstance(v, (int, float)) for v in safe.values()):
        raise ConfigError(source, f"{key}.safe", f"fmu {name}: must be a table of output = number")
    return process, float(timeout), {a: float(b) for a, b in safe.items()}


def normalize_unit(unit: str) -> str:
    """A unit in one spelling: FMI's "N.m" and the plant's "N m" compare equal; "" and "-" mean dimensionless."""
    u = unit.strip().replace("*", ".").replace(" ", ".")
    return "" if u in ("-", "1") else u


@dataclass(frozen=True)
class FmuVar:
    """What the loop needs of one FMU variable."""

    name: str
    vr: int
    causality: str
    unit: str
    lo: float
    hi: float
    start: float
    variability: str = "continuous"
    doc: str = ""
    type: str = "Real"  # the FMI type: Real, Integer, Boolean (2.0); Float64, Int32, Int64, Boolean (3.0)

    @property
    def kind(self) -> str:
        """"real", "int" or "bool"."""
        return TYPE_KINDS[self.type]


def _variables(md) -> dict[str, FmuVar]:
    units = {t.name: (t.unit or "") for t in md.typeDefinitions}
    out = {}
    for v in md.modelVariables:
        if v.type not in TYPE_KINDS:
            continue
        unit = (v.unit or units.get(v.declaredType.name if v.declaredType else "", "") or "") \
            if TYPE_KINDS[v.type] == "real" else ""
        lo = float(v.min) if v.min is not None else float("-inf")
        hi = float(v.max) if v.max is not None else float("inf")
        if v.type == "Boolean":
            lo, hi = 0.0, 1.0
            start = 1.0 if str(v.start).lower() in ("true", "1") else 0.0
        else:
            start = float(v.start) if v.start is not None else 0.0
        out[v.name] = FmuVar(v.name, int(v.valueReference), v.causality, unit, lo, hi, start,
                             v.variability or ("continuous" if TYPE_KINDS[v.type] == "real" else "discrete"),
                             v.description or "", v.type)
    return out


@dataclass(frozen=True)
class CheckedFmu:
    """An ``[[fmu]]`` table checked against its FMU and the plant's ports: what :class:`.assembly.FmuAssembly` loads."""

    table: FmuTable
    md: Any  # fmpy's ModelDescription
    variables: dict[str, FmuVar]
    can_get_set_state: bool
    version: int = 2  # FMI 2 or 3
    kind: str = "cs"  # "cs" co-simulation, "me" model exchange


def check_fmu(t: FmuTable, source: str, inputs: dict, outputs: dict) -> CheckedFmu:
    """Check one table against its FMU's model description and the plant's ports (``name -> Signal``)."""
    import fmpy

    def err(key: str, problem: str) -> ConfigError:
        return ConfigError(source, f"{t.key}.{key}" if key else t.key, f"fmu {t.name}: {problem}")

    try:
        md = fmpy.read_model_description(str(t.file), validate=False)
    except Exception as exc:  # a broken zip or XML: one line, whatever FMPy raised
        raise err("file", f"cannot read the model description ({str(exc).splitlines()[0] if str(exc) else exc!r})")
    version = int(md.fmiVersion.split(".")[0]) if md.fmiVersion[:2] in ("2.", "3.") else 0
    if not version:
        raise err("file", f"FMI {md.fmiVersion} (not supported); {SUPPORTED}")
    if md.coSimulation is None and md.modelExchange is None:
        raise err("file", f"FMI {md.fmiVersion} with neither a co-simulation nor a model-exchange element; "
                          f"{SUPPORTED}")
    kind = "cs" if md.coSimulation is not None else "me"  # both elements: co-simulation
    element = md.coSimulation if kind == "cs" else md.modelExchange
    platform = fmpy.platform if version == 2 else fmpy.platform_tuple  # the folder FMPy loads from
    has = fmpy.supported_platforms(str(t.file))
    if fmpy.platform not in has:
        raise err("file", f"no binary for this platform ({platform}); the FMU has {', '.join(has) or 'none'}")
    lib = f"binaries/{platform}/{element.modelIdentifier}{fmpy.sharedLibraryExtension}"
    with zipfile.ZipFile(t.file) as z:
        if lib not in z.namelist():
            what = "co-simulation" if kind == "cs" else "model exchange"
            raise err("file", f"no binary {lib} (FMI {md.fmiVersion} {what} loads that file)")
    variables = _variables(md)

    def var(key: str, name: str, causalities: tuple[str, ...]) -> FmuVar:
        v = variables.get(name)
        if v is None:
            raise err(key, f"no Real, Integer or Boolean variable {name!r}")
        if v.causality not in causalities:
            raise err(key, f"variable {name!r} has causality {v.causality}, needs {' or '.join(causalities)}")
        return v

    for name, value in t.start.items():
        v = var(f"start.{name}", name, ("parameter", "input"))
        if v.kind == "int" and value != int(value):
            raise err(f"start.{name}", f"start value {value} of {v.type} variable {name!r} is not an integer")
        if not v.lo <= value <= v.hi:
            raise err(f"start.{name}", f"start value {value} outside the variable's range [{v.lo:g}, {v.hi:g}]")
    for name, value in t.safe.items():
        v = var(f"safe.{name}", name, ("output",))
        if not v.lo <= value <= v.hi:
            raise err(f"safe.{name}", f"safe value {value} outside the variable's range [{v.lo:g}, {v.hi:g}]")
        port = inputs.get(t.to_plant.get(name, ""))
        if port is not None and not port.lo <= value <= port.hi:
            raise err(f"safe.{name}", f"safe value {value} outside plant input {port.name!r} range "
                                      f"[{port.lo:g}, {port.hi:g}]")
    driven = set()
    for name, port in t.to_plant.items():
        v = var(f"to_plant.{name}", name, ("output",))
        s = inputs.get(port)
        if s is None:
            raise err(f"to_plant.{name}", f"the plant has no input {port!r}")
        if port in driven:
            raise err(f"to_plant.{name}", f"plant input {port!r} is driven twice")
        driven.add(port)
        _check_unit(err, f"to_plant.{name}", v, s)
        if (math.isfinite(v.lo) and v.lo < s.lo) or (math.isfinite(v.hi) and v.hi > s.hi):  # declared bounds only
            raise err(f"to_plant.{name}", f"variable {name!r} range [{v.lo:g}, {v.hi:g}] exceeds plant input "
                                          f"{port!r} range [{s.lo:g}, {s.hi:g}]")
    for name, port in t.from_plant.items():
        v = var(f"from_plant.{name}", name, ("input",))
        s = outputs.get(port)
        if s is None:
            raise err(f"from_plant.{name}", f"the plant has no output {port!r}")
        _check_unit(err, f"from_plant.{name}", v, s)
    return CheckedFmu(t, md, variables, bool(element.canGetAndSetFMUstate), version, kind)


def _check_unit(err, key: str, v: FmuVar, s) -> None:
    if v.unit and normalize_unit(v.unit) != normalize_unit(s.unit):
        raise err(key, f"variable {v.name!r} has unit {v.unit!r}, plant port {s.name!r} has {s.unit!r}")


__all__ = ["CheckedFmu", "FmuTable", "FmuVar", "check_fmu", "normalize_unit", "read_fmu_tables"]
