"""``gearbox-hil fmu CONFIG --out FILE.fmu``: a plant config exported as an FMI 2.0 co-simulation FMU (docs/fmi.md).

The route is PythonFMU's: the FMU holds a small script (the plant config
as JSON and a :class:`plant_models.fmi.export_slave.PlantSlave` subclass)
and PythonFMU's binary, which runs that script in the target's Python.  So
the target needs Python (the version the FMU was built with) with
gearbox-hil installed; in exchange every plant, compiled or Python-step,
exports without a line of C.  After PythonFMU has written the FMU, its
model description gets each port's unit, range and description, which
PythonFMU does not write.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import tempfile
import zipfile
from pathlib import Path
from xml.etree import ElementTree as ET

from plant_models.config import ConfigError, find_config, load_plant_toml


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="plant config (a file, or a name in configs/)")
    p.add_argument("--out", required=True, help="the .fmu file to write")
    p.add_argument("--step", type=float, default=1e-3, help="default communication step, s (default 0.001)")


def model_name(kind: str) -> str:
    return "Gearbox" + "".join(w.capitalize() for w in re.split(r"[^A-Za-z0-9]+", kind) if w)


SCRIPT = '''"""A gearbox-hil plant as an FMU (written by gearbox-hil fmu)."""
from plant_models.fmi.export_slave import PlantSlave


class {name}(PlantSlave):
    CONFIG = {config!r}
    SOURCE = {source!r}
    STEP_S = {step!r}
'''


def export(config: str, out: str | Path, step: float = 1e-3) -> Path:
    """Write the FMU of a plant config to ``out``; returns its path.  ConfigError for a config it cannot export."""
    from plant_models.registry import read_config_data
    path = find_config(config)
    data = load_plant_toml(path)
    if "fmu" in data:
        raise ConfigError(str(path), "fmu", "a plant with FMUs in the loop cannot be exported as an FMU")
    c = read_config_data(data, str(path))
    plant = c.plant_class(c.params, source=c.source)
    name = model_name(plant.kind)
    out = Path(out)
    try:
        from pythonfmu.builder import FmuBuilder
    except ImportError:
        raise ConfigError("fmu", "", "needs PythonFMU (pip install 'gearbox-hil[fmi]')") from None
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / f"{name}.py"
        script.write_text(SCRIPT.format(name=name, config=json.dumps(data), source=path.name, step=float(step)))
        built = FmuBuilder.build_FMU(script, dest=tmp)
        _annotate(Path(built), plant)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(built), out)
    return out


def _annotate(fmu: Path, plant) -> None:
    """Units, ranges and descriptions of the ports in the FMU's model description."""
    with zipfile.ZipFile(fmu) as z:
        files = {n: z.read(n) for n in z.namelist()}
    root = ET.fromstring(files["modelDescription.xml"])
    sigs = {s.name: s for s in (*plant.inputs, *plant.outputs)}
    # start values as the shortest text that reads back to the same double (PythonFMU writes 16 digits)
    starts = {s.name: s.default for s in plant.inputs} | {p.name: p.get() for p in plant.tunable_parameters()}
    units = sorted({s.unit for s in sigs.values() if s.unit not in ("", "-")})
    if units:
        ud = ET.Element("UnitDefinitions")
        for u in units:
            ET.SubElement(ud, "Unit", name=u)
        root.insert(list(root).index(root.find("CoSimulation")) + 1, ud)  # the schema's order
    for sv in root.find("ModelVariables"):
        if sv.get("name") in starts:
            sv.find("Real").set("start", repr(float(starts[sv.get("name")])))
        s = sigs.get(sv.get("name"))
        if s is None:
            continue
        real = sv.find("Real")
        if s.unit not in ("", "-"):
            real.set("unit", s.unit)
        real.set("min", f"{float(s.lo):.17g}")
        real.set("max", f"{float(s.hi):.17g}")
    ms = root.find("ModelStructure")
    outs = ms.find("Outputs")
    if outs is not None and ms.find("InitialUnknowns") is None:  # outputs are "calculated" at initialization
        iu = ET.Element("InitialUnknowns")
        for u in outs:
            ET.SubElement(iu, "Unknown", index=u.get("index"))
        ms.insert(list(ms).index(outs) + 1, iu)
    files["modelDescription.xml"] = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    with zipfile.ZipFile(fmu, "w", zipfile.ZIP_DEFLATED) as z:
        for n, b in files.items():
            z.writestr(n, b)


def run(args: argparse.Namespace) -> int:
    out = export(args.config, args.out, args.step)
    print(f"wrote {out}")
    return 0
