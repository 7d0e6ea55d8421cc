"""Builds the test FMUs at test time from tests/fmu_src/ (no FMU binary is kept in the repository).

:func:`build_first_order` compiles ``first_order.c`` against the FMI 2.0
headers FMPy ships (``fmpy/c-code``) with the machine's C compiler and zips
it with a model description into an FMI 2.0 co-simulation FMU;
:func:`build_first_order3` its FMI 3.0 twin (``first_order3.c``);
:func:`build_me` the model-exchange lag and bouncing ball (``me_model.c``,
FMI 2.0; their FMI 3.0 twins ``me_model3.c``).
FMPy binds every FMI function of the FMU's version and kind when it loads
a library, so each build links weak stubs (returning the status error) for
the functions the model does not define, their names read from the headers.
"""

from __future__ import annotations

import re
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
    </ScalarVariable>{typed_vars}
  </ModelVariables>
  <ModelStructure>
    <Outputs><Unknown index="1"/>{typed_outputs}</Outputs>
    <InitialUnknowns><Unknown index="1"/></InitialUnknowns>
  </ModelStructure>
</fmiModelDescription>
"""


TYPED2 = """
    <ScalarVariable name="enabled" valueReference="5" causality="input" variability="discrete">
      <Boolean start="true"/>
    </ScalarVariable>
    <ScalarVariable name="divider" valueReference="6" causality="input" variability="discrete">
      <Integer start="1" min="1" max="1000"/>
    </ScalarVariable>
    <ScalarVariable name="step_count" valueReference="7" causality="output" variability="discrete">
      <Integer/>
    </ScalarVariable>
    <ScalarVariable name="settled" valueReference="8" causality="output" variability="discrete">
      <Boolean/>
    </ScalarVariable>"""

MD3 = """<?xml version="1.0" encoding="UTF-8"?>
<fmiModelDescription fmiVersion="3.0" modelName="first_order"
    instantiationToken="{8c4e810f-3df3-4a00-8276-176fa3c9f001}" generationTool="gearbox-hil tests"
    variableNamingConvention="flat">
  <CoSimulation modelIdentifier="first_order" canHandleVariableCommunicationStepSize="true"
      canGetAndSetFMUState="true" canSerializeFMUState="true"/>
  <UnitDefinitions>
    <Unit name="N.m"/>
    <Unit name="s"/>
  </UnitDefinitions>
  <ModelVariables>
    <Float64 name="torque" valueReference="0" causality="output" variability="continuous" initial="calculated"
        unit="N.m"/>
    <Float64 name="torque_cmd" valueReference="1" causality="input" variability="continuous" start="0" unit="N.m"/>
    <Float64 name="tau" valueReference="2" causality="parameter" variability="tunable" start="0.1" min="1e-6"
        unit="s" description="time constant of the lag"/>
    <Float64 name="torque_start" valueReference="3" causality="parameter" variability="fixed" start="0" unit="N.m"/>
    <Float64 name="fail_at" valueReference="4" causality="parameter" variability="fixed" start="-1" unit="s"/>
    <Boolean name="enabled" valueReference="5" causality="input" variability="discrete" start="true"/>
    <Int32 name="divider" valueReference="6" causality="input" variability="discrete" start="1" min="1" max="1000"/>
    <Int64 name="step_count" valueReference="7" causality="output" variability="discrete"/>
    <Boolean name="settled" valueReference="8" causality="output" variability="discrete"/>
  </ModelVariables>
  <ModelStructure>
    <Output valueReference="0"/>
    <Output valueReference="7"/>
    <Output valueReference="8"/>
    <InitialUnknown valueReference="0"/>
  </ModelStructure>
</fmiModelDescription>
"""

ME_LAG = """<?xml version="1.0" encoding="UTF-8"?>
<fmiModelDescription fmiVersion="2.0" modelName="lag" guid="{{8c4e810f-3df3-4a00-8276-176fa3c9f002}}"
    generationTool="gearbox-hil tests" variableNamingConvention="structured" numberOfEventIndicators="0">
  <ModelExchange modelIdentifier="lag" canGetAndSetFMUstate="true" canSerializeFMUstate="true"/>
  <UnitDefinitions>
    <Unit name="N.m"/>
    <Unit name="s"/>
  </UnitDefinitions>
  <ModelVariables>
    <ScalarVariable name="torque" valueReference="0" causality="output" variability="continuous" initial="calculated">
      <Real unit="N.m"/>
    </ScalarVariable>
    <ScalarVariable name="torque_cmd" valueReference="1" causality="input" variability="continuous">
      <Real unit="N.m" start="0"/>
    </ScalarVariable>
    <ScalarVariable name="tau" valueReference="2" causality="parameter" variability="tunable"
        description="time constant of the lag">
      <Real unit="s" start="0.1" min="1e-6"/>
    </ScalarVariable>
    <ScalarVariable name="torque_start" valueReference="3" causality="parameter" variability="fixed">
      <Real unit="N.m" start="0"/>
    </ScalarVariable>
    <ScalarVariable name="der(torque)" valueReference="4" causality="local" variability="continuous">
      <Real derivative="1"/>
    </ScalarVariable>
    <ScalarVariable name="boost_at" valueReference="5" causality="parameter" variability="fixed"
        description="time event: the command doubles from here on (negative: never)">
      <Real unit="s" start="-1"/>
    </ScalarVariable>
  </ModelVariables>
  <ModelStructure>
    <Outputs><Unknown index="1"/></Outputs>
    <Derivatives><Unknown index="5"/></Derivatives>
  </ModelStructure>
</fmiModelDescription>
"""

ME_BALL = """<?xml version="1.0" encoding="UTF-8"?>
<fmiModelDescription fmiVersion="2.0" modelName="ball" guid="{{8c4e810f-3df3-4a00-8276-176fa3c9f003}}"
    generationTool="gearbox-hil tests" variableNamingConvention="structured" numberOfEventIndicators="1">
  <ModelExchange modelIdentifier="ball" canGetAndSetFMUstate="true" canSerializeFMUstate="true"/>
  <ModelVariables>
    <ScalarVariable name="h" valueReference="0" causality="output" variability="continuous" initial="calculated">
      <Real unit="m"/>
    </ScalarVariable>
    <ScalarVariable name="v" valueReference="1" causality="output" variability="continuous" initial="calculated">
      <Real unit="m/s"/>
    </ScalarVariable>
    <ScalarVariable name="der(h)" valueReference="2" causality="local" variability="continuous">
      <Real derivative="1"/>
    </ScalarVariable>
    <ScalarVariable name="der(v)" valueReference="3" causality="local" variability="continuous">
      <Real derivative="2"/>
    </ScalarVariable>
    <ScalarVariable name="g" valueReference="4" causality="parameter" variability="fixed">
      <Real unit="m/s2" start="9.81"/>
    </ScalarVariable>
    <ScalarVariable name="e" valueReference="5" causality="parameter" variability="tunable">
      <Real start="0.8" min="0" max="1"/>
    </ScalarVariable>
    <ScalarVariable name="h_start" valueReference="6" causality="parameter" variability="fixed">
      <Real unit="m" start="1"/>
    </ScalarVariable>
    <ScalarVariable name="bounces" valueReference="7" causality="output" variability="discrete">
      <Integer/>
    </ScalarVariable>
    <ScalarVariable name="t_bounce" valueReference="8" causality="output" variability="discrete"
        description="time of the last bounce">
      <Real unit="s"/>
    </ScalarVariable>
  </ModelVariables>
  <ModelStructure>
    <Outputs><Unknown index="1"/><Unknown index="2"/><Unknown index="8"/><Unknown index="9"/></Outputs>
    <Derivatives><Unknown index="3"/><Unknown index="4"/></Derivatives>
  </ModelStructure>
</fmiModelDescription>
"""

ME_BALL3 = """<?xml version="1.0" encoding="UTF-8"?>
<fmiModelDescription fmiVersion="3.0" modelName="ball"
    instantiationToken="{8c4e810f-3df3-4a00-8276-176fa3c9f004}" generationTool="gearbox-hil tests">
  <ModelExchange modelIdentifier="ball" canGetAndSetFMUState="true" canSerializeFMUState="true"/>
  <ModelVariables>
    <Float64 name="h" valueReference="0" causality="output" variability="continuous" initial="calculated" unit="m"/>
    <Float64 name="v" valueReference="1" causality="output" variability="continuous" initial="calculated"
        unit="m/s"/>
    <Float64 name="der(h)" valueReference="2" causality="local" variability="continuous" derivative="0"/>
    <Float64 name="der(v)" valueReference="3" causality="local" variability="continuous" derivative="1"/>
    <Float64 name="g" valueReference="4" causality="parameter" variability="fixed" start="9.81" unit="m/s2"/>
    <Float64 name="e" valueReference="5" causality="parameter" variability="tunable" start="0.8" min="0" max="1"/>
    <Float64 name="h_start" valueReference="6" causality="parameter" variability="fixed" start="1" unit="m"/>
    <Int32 name="bounces" valueReference="7" causality="output" variability="discrete"/>
    <Float64 name="t_bounce" valueReference="8" causality="output" variability="discrete" unit="s"
        description="time of the last bounce"/>
  </ModelVariables>
  <ModelStructure>
    <Output valueReference="0"/>
    <Output valueReference="1"/>
    <Output valueReference="7"/>
    <Output valueReference="8"/>
    <ContinuousStateDerivative valueReference="2"/>
    <ContinuousStateDerivative valueReference="3"/>
    <EventIndicator valueReference="0"/>
  </ModelStructure>
</fmiModelDescription>
"""


ME_LAG3 = """<?xml version="1.0" encoding="UTF-8"?>
<fmiModelDescription fmiVersion="3.0" modelName="lag"
    instantiationToken="{8c4e810f-3df3-4a00-8276-176fa3c9f005}" generationTool="gearbox-hil tests">
  <ModelExchange modelIdentifier="lag" canGetAndSetFMUState="true" canSerializeFMUState="true"/>
  <UnitDefinitions>
    <Unit name="N.m"/>
    <Unit name="s"/>
  </UnitDefinitions>
  <ModelVariables>
    <Float64 name="torque" valueReference="0" causality="output" variability="continuous" initial="calculated"
        unit="N.m"/>
    <Float64 name="torque_cmd" valueReference="1" causality="input" variability="continuous" start="0" unit="N.m"/>
    <Float64 name="tau" valueReference="2" causality="parameter" variability="tunable" start="0.1" min="1e-6"
        unit="s" description="time constant of the lag"/>
    <Float64 name="torque_start" valueReference="3" causality="parameter" variability="fixed" start="0" unit="N.m"/>
    <Float64 name="der(torque)" valueReference="4" causality="local" variability="continuous" derivative="0"/>
    <Float64 name="boost_at" valueReference="5" causality="parameter" variability="fixed" start="-1" unit="s"
        description="time event: the command doubles from here on (negative: never)"/>
  </ModelVariables>
  <ModelStructure>
    <Output valueReference="0"/>
    <ContinuousStateDerivative valueReference="4"/>
  </ModelStructure>
</fmiModelDescription>
"""


def _stubs(version: int) -> str:
    """Weak definitions of every FMI function of ``version`` (FMPy's header), each returning the status error."""
    import fmpy
    header = (Path(fmpy.__file__).parent / "c-code" / f"fmi{version}Functions.h").read_text()
    names = sorted(set(re.findall(rf"#define\s+(fmi{version}\w+)\s+fmi{version}FullName", header)))
    return "".join(f"__attribute__((weak)) int {n}(void) {{ return 3; }}\n" for n in names)


def _build(out: Path, md: str, identifier: str, source: str, version: int, platform: str | None = None,
           defines: tuple[str, ...] = ()) -> Path:
    """Compile ``source`` (with the stubs) into ``binaries/PLATFORM/IDENTIFIER.so`` and zip it with ``md``."""
    import fmpy
    work = out.with_suffix(".build")
    plat = platform or (fmpy.platform if version == 2 else fmpy.platform_tuple)
    lib_dir = work / "binaries" / plat
    lib_dir.mkdir(parents=True, exist_ok=True)
    headers = Path(fmpy.__file__).parent / "c-code"
    stubs = work / "stubs.c"
    stubs.write_text(_stubs(version))
    lib = lib_dir / (identifier + (".dll" if "win" in plat else ".so"))  # a name only
    subprocess.run([compiler(), "-shared", "-fPIC", "-O2", *[f"-D{d}" for d in defines], "-I", str(headers),
                    str(SRC / source), str(stubs), "-o", str(lib), "-lm"], check=True, capture_output=True)
    stubs.unlink()
    (work / "modelDescription.xml").write_text(md)
    with zipfile.ZipFile(out, "w") as z:
        for f in sorted(work.rglob("*")):
            if f.is_file():
                z.write(f, f.relative_to(work).as_posix())
    shutil.rmtree(work)
    return out


def build_first_order(out: Path, platform: str | None = None, torque_unit: str = "N.m", state: bool = True,
                      out_range: tuple[float, float] | None = None, typed: bool = False, fail_by: str = "") -> Path:
    """``out`` (a .fmu path): the first-order torque source, its binary for ``platform`` (default: this one);
    ``typed``: its Integer and Boolean variables declared too (the twin of :func:`build_first_order3`);
    ``fail_by`` "crash" or "hang": from ``fail_at`` on, a step segfaults or never returns instead of an error;
    "load": the library aborts as it is loaded."""
    rng = f' min="{out_range[0]}" max="{out_range[1]}"' if out_range else ""
    md = MD.format(state=str(state).lower(), torque_unit=torque_unit, out_range=rng,
                   typed_vars=TYPED2 if typed else "",
                   typed_outputs='<Unknown index="8"/><Unknown index="9"/>' if typed else "")
    defines = {"": (), "crash": ("FAIL_BY_CRASH",), "hang": ("FAIL_BY_HANG",), "load": ("FAIL_AT_LOAD",)}[fail_by]
    return _build(out, md, "first_order", "first_order.c", 2, platform, defines)


def build_first_order3(out: Path) -> Path:
    """``out``: the FMI 3.0 co-simulation twin of ``build_first_order(typed=True)``."""
    return _build(out, MD3, "first_order", "first_order3.c", 3)


def build_me(out: Path, model: str, version: int = 2) -> Path:
    """``out``: the FMI 2.0 model-exchange ``"lag"`` or ``"ball"`` of ``me_model.c``; version 3: their FMI 3.0
    twins (``me_model3.c``)."""
    if version == 3:
        if model == "lag":
            return _build(out, ME_LAG3, "lag", "me_model3.c", 3)
        return _build(out, ME_BALL3, "ball", "me_model3.c", 3, defines=("BALL",))
    md = {"lag": ME_LAG, "ball": ME_BALL}[model].format()
    return _build(out, md, model, "me_model.c", 2, defines=("BALL",) if model == "ball" else ())


def python_assembly(config):
    """The plant of ``config`` (a TOML file with ``[[fmu]]`` tables) with its FMUs stepped from Python
    (:class:`plant_models.fmi.assembly.FmuAssembly`), whatever :func:`plant_models.registry.load_plant` picks:
    the reference of the compiled assembly's tests and benchmark."""
    from plant_models.fmi.assembly import FmuAssembly
    from plant_models.fmi.describe import checked
    from plant_models.registry import read_config
    c = read_config(config)
    inner = c.plant_class(c.params, source=c.source)
    return FmuAssembly(inner, checked(c.fmus, c.source, inner.inputs, inner.outputs))
