"""A plant config as an FMI 2.0 co-simulation FMU whose binary runs the plant in a process of its own.

:func:`build_fmu` writes the FMU: the model description (every input, output
and tunable parameter with its unit, range, description and start value),
the C library compiled here from ``proxy_fmu.c`` (and its platform side
``proxy_channel.h``) with the machine's C compiler against FMPy's FMI 2.0
headers (``fmpy/c-code``) for ``linux64``, and cross-compiled for
``win64`` when MinGW-w64's compiler is installed
(``x86_64-w64-mingw32-gcc``; loopback TCP instead of a socket pair), and the
resources the library's plant process reads (``config.json``: the config,
its name and the fixed step; ``python``: the interpreter to run it with).
Start values are written with ``repr``, the shortest text that reads back
to the same double.  Value references follow
:func:`plant_models.fmi.proxy_server.variables`.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import subprocess
import sys
import tempfile
import uuid
import zipfile
from pathlib import Path
from xml.etree import ElementTree as ET

from ..errors import ConfigError
from .proxy_server import variables

SOURCE = Path(__file__).with_name("proxy_fmu.c")
PLATFORM = "linux64"  # the binary built with the machine's compiler (the library spawns with posix_spawn)
WIN64 = "win64"  # the binary cross-built with MinGW-w64 where it is installed (CreateProcess, loopback TCP)
CROSS_WIN64 = "x86_64-w64-mingw32-gcc"


def compiler() -> str | None:
    return shutil.which("cc") or shutil.which("gcc")


def cross_compiler() -> str | None:
    """MinGW-w64's C compiler for win64 (Debian: ``apt-get install gcc-mingw-w64-x86-64``), or None."""
    return shutil.which(CROSS_WIN64)


def build_library(lib: Path, platform: str = PLATFORM, defines: tuple[str, ...] = ()) -> Path:
    """``proxy_fmu.c`` compiled into ``lib`` for ``platform`` (``linux64`` with the machine's compiler, ``win64``
    with MinGW-w64's); ``defines``: ``PROXY_TCP`` builds the loopback-TCP channel on Linux (the tests run it)."""
    import fmpy
    cc = cross_compiler() if platform == WIN64 else compiler()
    if cc is None:
        raise ConfigError("fmu", "", f"needs a C compiler ({CROSS_WIN64 if platform == WIN64 else 'cc or gcc'}) "
                          f"to build the FMU's {platform} library")
    flags = ["-shared", "-O2", "-static-libgcc"] if platform == WIN64 else ["-shared", "-fPIC", "-O2"]
    libs = ["-lws2_32"] if platform == WIN64 else []
    lib.parent.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([cc, *flags, *[f"-D{d}" for d in defines], "-I", str(Path(fmpy.__file__).parent / "c-code"),
                        str(SOURCE), "-o", str(lib), *libs], capture_output=True, text=True)
    if r.returncode != 0:
        raise ConfigError("fmu", "", f"the FMU's {platform} library did not compile: {r.stderr.strip()[:2000]}")
    return lib


def _number(x: float) -> str:
    return repr(float(x))


def model_description(plant, model: str, guid: str, step: float) -> bytes:
    """The FMI 2.0 model description of ``plant`` exported as ``model``."""
    root = ET.Element("fmiModelDescription", fmiVersion="2.0", modelName=model, guid=guid,
                      description=plant.description, generationTool="gearbox-hil",
                      variableNamingConvention="structured", numberOfEventIndicators="0")
    ET.SubElement(root, "CoSimulation", modelIdentifier=model, needsExecutionTool="true",
                  canHandleVariableCommunicationStepSize="true", canInterpolateInputs="false",
                  canBeInstantiatedOnlyOncePerProcess="false", canNotUseMemoryManagementFunctions="true",
                  canGetAndSetFMUstate="true", canSerializeFMUstate="true")
    vs = variables(plant)
    units = sorted({x.unit for _, _, x in vs if x.unit not in ("", "-")})
    if units:
        ud = ET.SubElement(root, "UnitDefinitions")
        for u in units:
            ET.SubElement(ud, "Unit", name=u)
    ET.SubElement(root, "DefaultExperiment", startTime="0.0", stepSize=_number(step))
    mv = ET.SubElement(root, "ModelVariables")
    outputs = []
    for vr, (causality, name, x) in enumerate(vs):
        sv = ET.SubElement(mv, "ScalarVariable", name=name, valueReference=str(vr), description=x.doc,
                           causality=causality, variability="tunable" if causality == "parameter" else "continuous")
        real = ET.SubElement(sv, "Real")
        if causality == "output":
            sv.set("initial", "calculated")
            outputs.append(str(vr + 1))
        if x.unit not in ("", "-"):
            real.set("unit", x.unit)
        for key, v in (("min", x.lo), ("max", x.hi)):
            if math.isfinite(v):
                real.set(key, _number(v))
        if causality == "input":
            real.set("start", _number(x.default))
        elif causality == "parameter":
            real.set("start", _number(x.get()))
    ms = ET.SubElement(root, "ModelStructure")
    for tag in ("Outputs", "InitialUnknowns"):
        el = ET.SubElement(ms, tag)
        for index in outputs:
            ET.SubElement(el, "Unknown", index=index)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def build_fmu(data: dict, source: str, plant, model: str, out: Path, step: float) -> Path:
    """Write the FMU of ``plant`` (built from the config ``data`` named ``source``) to ``out``."""
    try:
        import fmpy  # noqa: F401 -- its headers
    except ImportError:
        raise ConfigError("fmu", "", "needs FMPy's FMI headers (pip install 'gearbox-hil[fmi]')") from None
    spec = json.dumps({"config": data, "source": source, "step": float(step)}, sort_keys=True)
    guid = "{" + str(uuid.UUID(hashlib.sha256(spec.encode()).hexdigest()[:32])) + "}"
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        build_library(work / "binaries" / PLATFORM / f"{model}.so")
        if cross_compiler() is not None:
            build_library(work / "binaries" / WIN64 / f"{model}.dll", WIN64)
        res = work / "resources"
        res.mkdir()
        (res / "config.json").write_text(spec)
        (res / "python").write_text(sys.executable + "\n")
        (work / "modelDescription.xml").write_bytes(model_description(plant, model, guid, step))
        out.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
            for f in sorted(work.rglob("*")):
                if f.is_file():
                    z.write(f, f.relative_to(work).as_posix())
    return out


__all__ = ["build_fmu", "build_library", "compiler", "cross_compiler", "model_description"]
