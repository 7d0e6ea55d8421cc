"""The plant base: ports declared once, nothing compiled before the first reset, tunable parameters, plots by kind."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from plant_models.config import repo_root
from plant_models.errors import ParamError
from plant_models.friction_plant import FrictionPlant
from plant_models.plant import Param, Plant, Ports, Signal
from plant_models.registry import BUILTIN, load_plant, plant_class
from server.realtime.params import ParamTable

ROOT = repo_root()


# -- ports ---------------------------------------------------------------------------------------
def test_a_port_index_is_what_its_declaration_returns():
    ports = Ports()
    assert ports.add("a", "N m", -1.0, 1.0) == 0
    assert ports.add_block(Signal(f"b{k}", "-", 0, 1) for k in range(3)) == 1
    assert ports.add("c", "rad/s", 0.0, lambda p: 2.0 * p, doc="range from the parameters") == 4
    assert len(ports) == 5
    signals = ports.signals(3.0)
    assert [s.name for s in signals] == ["a", "b0", "b1", "b2", "c"] and signals[4].hi == 6.0
    with pytest.raises(ValueError, match="port 'a' is declared twice"):
        ports.add("a", "-", 0, 1)


def test_a_repeated_block_is_declared_once_and_formatted_per_instance():
    block = Ports()
    slip = block.add("slip_c{c}", "{v}", -1.0, 1.0, doc="slip of clutch {c}")
    torque = block.add("torque_c{c}", "N m", -1.0, 1.0)
    outputs = Ports()
    first = outputs.add_block(s for c in (1, 2) for s in block.formatted(c=c, v="rad/s"))
    names = [s.name for s in outputs.signals()]
    assert names[first + len(block) * 1 + slip] == "slip_c2" and names[first + torque] == "torque_c1"
    assert outputs.signals()[2].unit == "rad/s" and outputs.signals()[2].doc == "slip of clutch 2"


def test_the_plants_kernels_index_the_ports_they_declare():
    """A port constant of a plant module is the index of the signal of that name."""
    from plant_models.plants import dct, powershift
    from plant_models.plants import servo_kernel as servo  # the servo's ports are declared beside its kernels

    ps = load_plant("powershift")
    assert ps.output_index("energy_c8") == powershift.OUT_CL + 7 * powershift.CL_LEN + powershift.CL_ENERGY
    assert ps.input_index("load_torque") == powershift.IN_LOAD
    d = load_plant("dct")
    assert d.input_index("gear_even") == dct.IN_GEAR_ODD + 1 and d.output_index("selected_even") == dct.OUT_SEL_ODD + 1
    sv = load_plant("servo")
    assert sv.output_index("status") == servo.OUT_STATUS == sv.n_out - 1


# -- compile only what is used, never on import ---------------------------------------------------------
DESCRIBE_EVERYTHING = """
import importlib, importlib.util, json
from plant_models.config import repo_root
from plant_models.registry import BUILTIN, describe_config, read_config
for path in sorted((repo_root() / "configs").glob("*.toml")):
    if not path.name.startswith("io_"):
        read_config(path)
        describe_config(path)
compiled = []
modules = [importlib.import_module(plant_ref.split(":")[0]) for plant_ref, _ in BUILTIN.values()]
modules += [importlib.import_module(m.__name__ + "_kernel") for m in modules
            if importlib.util.find_spec(m.__name__ + "_kernel") is not None]  # a plant's kernels kept apart
for module in modules:
    for name, obj in vars(module).items():
        py_func = getattr(obj, "py_func", None)
        if py_func is not None and py_func.__module__ == module.__name__ and obj.overloads:
            compiled.append(f"{module.__name__}.{name}")
print(json.dumps(compiled))
"""


def test_reading_and_describing_every_config_compiles_no_plant_code():
    """Parameters, ports and descriptions need no compiled code: the kernels compile at the first reset."""
    out = subprocess.run([sys.executable, "-c", DESCRIBE_EVERYTHING], capture_output=True, text=True, cwd=ROOT,
                         check=True)
    assert json.loads(out.stdout.splitlines()[-1]) == []


PROGRESS = """
import json
from numba import njit
from plant_models.compiling import CompileProgress

@njit
def square(x):
    return x * x

@njit
def twice_square(x):
    return 2.0 * square(x)

lines = []
with CompileProgress(lines.append):
    twice_square(3.0)
    twice_square(4.0)  # compiled already: nothing to report
quiet = []
with CompileProgress(quiet.append):
    twice_square(5.0)
print(json.dumps([lines, quiet]))
"""


def test_compilation_progress_names_each_compiled_function_once_and_nothing_when_nothing_compiles():
    out = subprocess.run([sys.executable, "-c", PROGRESS], capture_output=True, text=True, cwd=ROOT, check=True)
    lines, quiet = json.loads(out.stdout.splitlines()[-1])
    lines = [ln for ln in lines if not ln.startswith("  still ")]  # a busy machine's heartbeat lines
    assert lines[0].startswith("first start with this code on this machine: compiling")
    assert [line.split(" (")[0].strip() for line in lines[1:3]] == ["other 1: square", "other 2: twice_square"]
    assert lines[3].startswith("compiled 2 functions in ") and len(lines) == 4
    assert quiet == []


GAPS = """
import json, time
import numpy as np
from numba import njit
import plant_models.compiling as compiling

compiling.HEARTBEAT_S = 0.4

@njit
def copy_row(a, b):
    a[0] = b  # a row assignment: numba compiles some 40 helpers of its own for it
    return a.sum()

stamps = []
with compiling.CompileProgress(lambda line: stamps.append((time.perf_counter(), line))):
    t0 = time.perf_counter()
    copy_row(np.zeros((2, 3)), np.ones(3))
    time.sleep(1.0)  # not compiling: a pause of the caller's (loading, linking) is covered too
    t1 = time.perf_counter()
print(json.dumps([t0, t1, stamps]))
"""


def test_compile_progress_leaves_no_gap_and_names_no_numba_internals():
    """Heartbeat lines while compiling and while the caller pauses; numba's helpers unnamed.

    (How regular the heartbeat is depends on the machine: a compile step that holds the interpreter's lock
    delays it, so the test counts lines and bounds no gap.)"""
    out = subprocess.run([sys.executable, "-c", GAPS], capture_output=True, text=True, cwd=ROOT, check=True)
    t0, t1, stamps = json.loads(out.stdout.splitlines()[-1])
    assert any(line.startswith("  still working") for t, line in stamps if t >= t1 - 1.0), stamps  # the pause
    lines = [line for _, line in stamps]
    assert [ln.split(" (")[0].strip() for ln in lines if ln.startswith("  ") and "still" not in ln] == ["other 1: copy_row"]
    assert any(ln.startswith("  still ") for ln in lines)
    assert not any("impl" in ln or "<lambda>" in ln for ln in lines), lines
    n = int(lines[-1].split()[1])
    assert lines[-1].startswith("compiled ") and n > 10  # the helpers are counted in the total


def test_kernels_are_compiled_at_the_first_reset_for_their_signature_only():
    plant = load_plant("kinematic")
    step = plant.kernels[0].function
    assert plant.kernels[0].name == "step" and len(step.overloads) == 1
    with pytest.raises(TypeError):  # locked: other argument types do not compile a second version mid-run
        step(plant.mf.astype(np.float32), plant.mi, plant.df, plant.di, 1e-3)


def test_every_builtin_plant_has_one_shape():
    for kind in BUILTIN:
        cls, _ = plant_class(kind)
        assert issubclass(cls, Plant) and cls.kind == kind and cls.params_type is not None
        assert [k.name for k in cls.kernels][0] == "step"
        assert not hasattr(cls, "plot_figures") and not hasattr(cls, "from_config")
    servo_class, _ = plant_class("servo")
    assert not issubclass(servo_class, FrictionPlant)  # its own integrator on its own buffers


def test_the_servo_keeps_its_ports_where_its_offsets_say():
    plant = load_plant("servo")
    assert plant.core is None  # no friction core: the contract says so (clutch faults refuse it)
    o = plant.input_offset
    assert np.shares_memory(plant.u, plant.df) and plant.u.ctypes.data == plant.df[o:].ctypes.data
    assert plant.u_rate.ctypes.data == plant.df[o + plant.n_in:].ctypes.data
    assert plant.y.ctypes.data == plant.df[plant.output_offset:].ctypes.data
    assert plant.counters.shape == (8,) and plant.time == 0.0


# -- tunable parameters --------------------------------------------------------------------------
def test_core_parameters_are_declared_by_the_friction_plant():
    table = ParamTable(load_plant("damper"))
    names = table.names()
    assert names[:3] == ["shaft.engine.drag", "shaft.disk.drag", "shaft.transmission.drag"]
    assert "row.clutch.gain_kinetic" in names and names[-1] == "damper.friction_torque"


def test_a_kinetic_gain_above_the_static_one_is_refused_whole():
    plant = load_plant("dct")
    table = ParamTable(plant)
    before = table.describe(["row.C1.gain_static", "row.C1.gain_kinetic", "row.C2.viscous"])
    with pytest.raises(ParamError, match=r"^row\.C1: gain_kinetic 0\.2 must not exceed gain_static 0\.1$"):
        table.set_many({"row.C2.viscous": 1.0, "row.C1.gain_static": 0.1, "row.C1.gain_kinetic": 0.2})
    with pytest.raises(ParamError, match=r"^row\.C1: gain_kinetic .* must not exceed gain_static 1e-06$"):
        table.set_many({"row.C1.gain_static": 1e-6})
    assert table.describe(list(before)) == before  # nothing was written


@pytest.mark.parametrize("value,message", [
    (True, "p: expected a number, got bool"),
    ("1", "p: expected a number, got str"),
    (float("nan"), "p: not finite (nan)"),
    (3.0, "p: 3.0 outside [0, 2] N m"),
    (10 ** 400, "outside [0, 2] N m"),
])
def test_a_parameter_validates_its_value(value, message):
    p = Param("p", "N m", 0.0, 2.0, "", lambda: 0.0, lambda v: None)
    with pytest.raises(ParamError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        p.validate(value)
    assert p.validate(1) == 1.0
    flag = Param("f", "-", 0.0, 1.0, "", lambda: 0.0, lambda v: None, kind="bool")
    assert flag.validate(True) == 1.0
    with pytest.raises(ParamError, match="f: expected true or false, got int"):
        flag.validate(1)


# -- figures are the server's, chosen by kind --------------------------------------------------------
def test_figures_are_chosen_by_plant_kind():
    from server.plots import FIGURES

    assert sorted(FIGURES) == sorted(BUILTIN)


# -- the tick's rehearsal --------------------------------------------------------------------------------
@pytest.mark.parametrize("config", ["powershift", "powershift_kinematic", "dct", "chain", "damper", "servo",
                                    "kinematic", "zf8hp"])
def test_a_rehearsed_step_changes_nothing_of_the_plant(config):
    """Steps with a rehearsal before each are bit for bit the steps without, and the parameters stay as they were.

    Inputs jump to random values inside their ranges every 40 steps, so that
    rows engage, slip and break away (events, mode changes) in both runs.
    """
    plain, rehearsed = load_plant(config), load_plant(config)
    mf, mi = rehearsed.mf.copy(), rehearsed.mi.copy()
    df_scratch, di_scratch = np.empty_like(rehearsed.df), np.empty_like(rehearsed.di)
    rng = np.random.default_rng(7)
    events = 0
    for k in range(400):
        if k % 40 == 0:
            for s in plain.inputs:
                v = float(rng.choice(s.allowed)) if s.allowed else float(rng.uniform(s.lo, s.hi))
                v = float(round(v)) if s.integer else v
                plain.set_input(s.name, v)
                rehearsed.set_input(s.name, v)
        status = rehearsed.rehearse_step(df_scratch, di_scratch, 1e-3)
        assert status == plain.step(1e-3) == rehearsed.step(1e-3)
        assert np.array_equal(plain.df, rehearsed.df, equal_nan=True) and np.array_equal(plain.di, rehearsed.di)
        events += len(plain.new_events())
        rehearsed.new_events()
    assert np.array_equal(mf, rehearsed.mf) and np.array_equal(mi, rehearsed.mi)
    if config not in ("servo",):
        assert events > 0, "the inputs should have made rows stick or break away"


def test_a_compiled_plant_that_allocates_in_allocate_data_owes_no_allocate():
    """``CompiledPlant._allocate`` is abstract for a plant that uses the base's ``_allocate_data``; one that
    overrides ``_allocate_data`` (the compiled FMU assembly) is concrete without a stub of its own."""
    import inspect

    from plant_models.contract.compiled import CompiledPlant
    from plant_models.fmi.compiled import CompiledFmuAssembly

    class Incomplete(CompiledPlant):  # neither _allocate nor _allocate_data
        pass

    class OwnData(CompiledPlant):  # allocates in _allocate_data
        def _allocate_data(self):
            return np.zeros(1), np.zeros(1), np.zeros(1, dtype=np.int64)

    assert "_allocate" in Incomplete.__abstractmethods__
    assert "_allocate" not in OwnData.__abstractmethods__
    assert OwnData._allocate is CompiledPlant._allocated_in_data
    with pytest.raises(TypeError, match="allocates its buffers in _allocate_data"):
        CompiledPlant._allocated_in_data(object())
    assert CompiledFmuAssembly._allocate is CompiledPlant._allocated_in_data  # no stub of its own
    assert not inspect.isabstract(CompiledFmuAssembly)
    assert "_allocate" in FrictionPlant.__dict__  # the friction plants still give the four buffers
