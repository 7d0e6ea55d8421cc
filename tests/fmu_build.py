"""Builds the test FMUs at test time from tests/fmu_src/ (no FMU binary is kept in the repository).

:func:`build_first_order` compiles ``first_order.c`` against the FMI 2.0
headers FMPy ships (``fmpy/c-code``) with the machine's C compiler and zips
it with a model description into an FMI 2.0 co-simulation FMU.
"""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

SRC = Path(__file__).parent / "fmu_src"


def compiler() -> str | None:
    return shutil.which("cc") or shutil.which("gcc")


MD = """<?xml version="1.0" encoding="UTF-8"?>
<fmiModelDescription fmiVersion="2.0" modelName="first_order" guid="{{8c4e810f-3df3-4a00-8276-176fa3c9f001}}"
    generationTool="gearbox-hil tests" variableNamingConvention="flat" numberOfEventIndicators="0">
  <CoSimulation modelIdentifier="first_order" canHandleVariableCommunicationStepSize="true"
      canGetAndSetFMUstate="{state}" canSerializeFMUstate="{state}"/>
  <UnitDefinitions>
    <Unit name="{torque_unit}"/>
    <Unit name="s"/>
  </UnitDefinitions>
  <ModelVariables>
    <ScalarVariable name="torque" valueReference="0" causality="output" variability="continuous" initial="calculated">
      <Real unit="{torque_unit}"{out_range}/>
    </ScalarVariable>
    <ScalarVariable name="torque_cmd" valueReference="1" causality="input" variability="continuous">
      <Real unit="{torque_unit}" start="0"/>
    </ScalarVariable>
    <ScalarVariable name="tau" valueReference="2" causality="parameter" variability="tunable"
        description="time constant of the lag">
      <Real unit="s" start="0.1" min="1e-6"/>
    </ScalarVariable>
    <ScalarVariable name="torque_start" valueReference="3" causality="parameter" variability="fixed">
      <Real unit="{torque_unit}" start="0"/>
    </ScalarVariable>
    <ScalarVariable name="fail_at" valueReference="4" causality="parameter" variability="fixed">
      <Real unit="s" start="-1"/>
    </ScalarVariable>
  </ModelVariables>
  <ModelStructure>
    <Outputs><Unknown index="1"/></Outputs>
    <InitialUnknowns><Unknown index="1"/></InitialUnknowns>
  </ModelStructure>
</fmiModelDescription>
"""


def build_first_order(out: Path, platform: str | None = None, torque_unit: str = "N.m", state: bool = True,
                      out_range: tuple[float, float] | None = None) -> Path:
    """``out`` (a .fmu path): the first-order torque source, its binary for ``platform`` (default: this one)."""
    import fmpy
    work = out.with_suffix(".build")
    lib_dir = work / "binaries" / (platform or fmpy.platform)
    lib_dir.mkdir(parents=True, exist_ok=True)
    headers = Path(fmpy.__file__).parent / "c-code"
    lib = lib_dir / ("first_order.dll" if lib_dir.name.startswith("win") else "first_order.so")  # a name only
    subprocess.run([compiler(), "-shared", "-fPIC", "-O2", "-I", str(headers), str(SRC / "first_order.c"),
                    "-o", str(lib), "-lm"], check=True, capture_output=True)
    rng = f' min="{out_range[0]}" max="{out_range[1]}"' if out_range else ""
    (work / "modelDescription.xml").write_text(MD.format(state=str(state).lower(), torque_unit=torque_unit,
                                                         out_range=rng))
    with zipfile.ZipFile(out, "w") as z:
        for f in sorted(work.rglob("*")):
            if f.is_file():
                z.write(f, f.relative_to(work).as_posix())
    shutil.rmtree(work)
    return out
