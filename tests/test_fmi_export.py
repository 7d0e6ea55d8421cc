"""The plant as an FMU: ``gearbox-hil fmu`` writes an FMI 2.0 co-simulation FMU whose C library runs the plant in
a process of its own.  FMPy, in a fresh interpreter, instantiates and frees it run after run, then keeps two
instances alive stepping different inputs: every run equals ``gearbox-hil simulate`` bit for bit (with every
declared start value applied), a state saved at 0.5 s and restored repeats the rest bit for bit, and the
interpreter exits 0.  A plant process that dies is an fmi2Error in the importer, which goes on."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fmpy", reason="needs the fmi extra (pip install 'gearbox-hil[fmi]')")

from plant_models.fmi.export import build_library, compiler, cross_compiler  # noqa: E402
from plant_models.offline import fill_inputs  # noqa: E402
from plant_models.registry import load_plant  # noqa: E402
from server.offline.run import run_offline  # noqa: E402
from server.offline.scenario import parse_scenario  # noqa: E402

pytestmark = pytest.mark.skipif(compiler() is None, reason="needs a C compiler (cc) to build the FMU's library")

ROOT = Path(__file__).resolve().parents[1]

# A master in a fresh interpreter: RUNS runs of scenario a (each instantiates and frees), then a and b in two
# instances alive at once, a's state got at step K, serialized, deserialized and set again after the end.
RUNNER = '''
import sys, numpy as np, fmpy
from fmpy.fmi2 import FMU2Slave
fmu, data, out, runs = sys.argv[1], np.load(sys.argv[2]), sys.argv[3], int(sys.argv[4])
md = fmpy.read_model_description(fmu)
unzipped = fmpy.extract(fmu)
vr = {v.name: v.valueReference for v in md.modelVariables}
ins = [v.valueReference for v in md.modelVariables if v.causality == "input"]
outs = [v.valueReference for v in md.modelVariables if v.causality == "output"]
starts = [(v.valueReference, float(v.start)) for v in md.modelVariables if v.start is not None]
dt = float(md.defaultExperiment.stepSize)

def start(name, U):
    s = FMU2Slave(guid=md.guid, unzipDirectory=unzipped, modelIdentifier=md.coSimulation.modelIdentifier,
                  instanceName=name)
    s.instantiate()
    s.setupExperiment(startTime=0.0)
    s.setReal([r for r, _ in starts], [x for _, x in starts])  # every declared start value
    s.setReal(ins, list(U[0]))
    s.enterInitializationMode()
    s.exitInitializationMode()
    return s

def step(s, U, k):
    s.setReal(ins, list(U[k]))
    s.doStep(k * dt, dt)
    return s.getReal(outs)

equal = []
for i in range(runs):
    U = data["Ua"]
    s = start(f"run{i}", U)
    rows = [s.getReal(outs)] + [step(s, U, k) for k in range(len(U) - 1)]
    s.terminate()
    s.freeInstance()
    equal.append(np.array_equal(np.array(rows), data["ref_a"]))
    if i == 0:
        first = np.array(rows)
a, b = start("a", data["Ua"]), start("b", data["Ub"])
ra, rb = [a.getReal(outs)], [b.getReal(outs)]
K = int(data["K"])
for k in range(len(data["Ua"]) - 1):
    if k == K:
        saved = a.deSerializeFMUstate(a.serializeFMUstate(a.getFMUstate()))
    ra.append(step(a, data["Ua"], k))
    rb.append(step(b, data["Ub"], k))
a.setFMUstate(saved)
again = [step(a, data["Ua"], k) for k in range(K, len(data["Ua"]) - 1)]
for s in (a, b):
    s.terminate()
    s.freeInstance()
np.savez(out, equal=np.array(equal), first=first, a=np.array(ra), b=np.array(rb), again=np.array(again))
'''


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    d = tmp_path_factory.mktemp("export")
    r = subprocess.run([sys.executable, "-m", "server.cli", "fmu", "powershift", "--out", str(d / "ps.fmu")],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return d / "ps.fmu"


def test_the_exported_fmu_passes_fmpy_validation_with_units_ranges_and_the_step(exported):
    import fmpy
    from fmpy.validation import validate_fmu
    assert validate_fmu(str(exported)) == []
    md = fmpy.read_model_description(str(exported))
    assert md.coSimulation.canGetAndSetFMUstate and md.coSimulation.canSerializeFMUstate
    assert not md.coSimulation.canBeInstantiatedOnlyOncePerProcess
    assert set(fmpy.supported_platforms(str(exported))) == {"linux64"} | ({"win64"} if cross_compiler() else set())
    plant = load_plant("powershift")
    v = {x.name: x for x in md.modelVariables}
    for s in plant.inputs:
        assert v[s.name].causality == "input" and float(v[s.name].min) == s.lo and float(v[s.name].max) == s.hi
    for s in plant.outputs:
        assert v[s.name].causality == "output"
    assert v["engine_torque"].unit == "N m" and v["w_1"].unit == "rad/s"
    for p in plant.tunable_parameters():  # tunable parameters with their units and ranges
        x = v[p.name]
        assert (x.causality, x.variability) == ("parameter", "tunable")
        assert (x.unit or "") == ("" if p.unit in ("", "-") else p.unit)
        assert float(x.min) == p.lo and float(x.max) == p.hi and float(x.start) == p.get()
    assert float(md.defaultExperiment.stepSize) == 1e-3


def inputs_and_reference(engine_torque: float):
    """The single swap's inputs (the engine torque given) as held rows, one per step, and its offline run
    (``gearbox-hil simulate``); the master sets inputs at communication points and holds them: the scenario
    with ``interpolation = "hold"``."""
    plant = load_plant("powershift")
    content = tomllib.loads((ROOT / "scenarios" / "powershift_single_swap.toml").read_text())
    content["inputs"]["engine_torque"] = engine_torque
    content["interpolation"] = "hold"
    compiled = parse_scenario(content, "single swap").compile(plant)
    ref = run_offline(plant, compiled)
    kind, times, values = compiled.table.arrays()
    U, R = np.empty((compiled.n_steps + 1, plant.n_in)), np.empty((compiled.n_steps + 1, plant.n_in))
    fill_inputs(kind, times, values, compiled.dt, 0, U, R)
    assert not R.any()
    return U, ref.values


def run_master(exported, tmp_path, runs: int):
    Ua, ref_a = inputs_and_reference(300.0)
    Ub, ref_b = inputs_and_reference(250.0)
    K = 500  # the state saved at 0.5 s
    np.savez(tmp_path / "in.npz", Ua=Ua, Ub=Ub, ref_a=ref_a, K=K)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the plant process imports this checkout
    r = subprocess.run([sys.executable, "-c", RUNNER, str(exported), str(tmp_path / "in.npz"), str(tmp_path / "out.npz"),
                        str(runs)], capture_output=True, text=True, cwd=tmp_path, timeout=3600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]  # a clean exit: nothing of the plant lives in this process
    res = np.load(tmp_path / "out.npz")
    diff = np.abs(res["first"] - ref_a)
    assert np.array_equal(res["first"], ref_a), (np.nonzero(diff.max(axis=1))[0][:5], diff.max())
    assert res["equal"].all() and len(res["equal"]) == runs, np.nonzero(~res["equal"])
    assert np.array_equal(res["a"], ref_a) and np.array_equal(res["b"], ref_b)
    assert not np.array_equal(ref_a, ref_b)  # two instances, two different runs
    assert np.array_equal(res["again"], ref_a[K + 1:])


def test_fmpy_runs_instantiate_and_free_then_two_instances_all_equal_simulate_bit_for_bit(exported, tmp_path):
    run_master(exported, tmp_path, runs=3)


def test_the_library_over_loopback_tcp_equals_simulate_bit_for_bit(exported, tmp_path):
    """The channel of the win64 library (loopback TCP, the plant process's token first; proxy_channel.h), built
    for this platform with PROXY_TCP so it runs here: the same master, the same results."""
    lib = build_library(tmp_path / "tcp.so", defines=("PROXY_TCP",))
    tcp = tmp_path / "tcp.fmu"
    with zipfile.ZipFile(exported) as zin, zipfile.ZipFile(tcp, "w") as zout:
        for item in zin.infolist():
            swap = item.filename.startswith("binaries/linux64/")
            zout.writestr(item, lib.read_bytes() if swap else zin.read(item))
    run_master(tcp, tmp_path, runs=1)


@pytest.mark.skipif(cross_compiler() is None, reason="needs MinGW-w64's cross compiler (apt-get install "
                    "gcc-mingw-w64-x86-64) to build the win64 library; a compile-only check, it cannot run here")
def test_the_exported_fmu_carries_a_cross_compiled_win64_library(exported):
    with zipfile.ZipFile(exported) as z:
        (name,) = [n for n in z.namelist() if n.startswith("binaries/win64/")]
        dll = z.read(name)
    assert name.endswith(".dll") and dll[:2] == b"MZ"
    pe = int.from_bytes(dll[0x3C:0x40], "little")
    assert dll[pe:pe + 4] == b"PE\0\0" and int.from_bytes(dll[pe + 4:pe + 6], "little") == 0x8664  # x86-64
    objdump = shutil.which("x86_64-w64-mingw32-objdump")
    if objdump is None:
        return
    path = exported.parent / "win64.dll"
    path.write_bytes(dll)
    table = subprocess.run([objdump, "-p", str(path)], capture_output=True, text=True, check=True).stdout
    for fn in ("fmi2Instantiate", "fmi2DoStep", "fmi2FreeInstance", "fmi2SerializeFMUstate"):
        assert fn in table
    # it needs nothing a Windows machine lacks: the system's DLLs only (MinGW's runtime linked statically)
    assert sorted(set(line.split(":")[1].strip().lower() for line in table.splitlines() if "DLL Name:" in line)) == [
        "kernel32.dll", "msvcrt.dll", "ws2_32.dll"]


@pytest.mark.slow
def test_a_hundred_fmpy_runs_in_one_process_equal_simulate_bit_for_bit(exported, tmp_path):
    run_master(exported, tmp_path, runs=100)


CRASH = '''
import os, signal, sys, fmpy
from fmpy.fmi1 import FMICallException
from fmpy.fmi2 import FMU2Slave
fmu = sys.argv[1]
md = fmpy.read_model_description(fmu)
vr = {v.name: v.valueReference for v in md.modelVariables}
s = FMU2Slave(guid=md.guid, unzipDirectory=fmpy.extract(fmu), modelIdentifier=md.coSimulation.modelIdentifier,
              instanceName="ps")
s.instantiate()
ins = [vr[n] for n in ("p_c1", "p_c3", "p_c6", "engine_torque", "load_torque")]
outs = [v.valueReference for v in md.modelVariables if v.causality == "output"]

def run(n):
    s.setupExperiment(startTime=0.0)
    s.setReal(ins, [16.0, 16.0, 16.0, 300.0, 3500.0])
    s.enterInitializationMode()
    s.exitInitializationMode()
    rows = []
    for k in range(n):
        s.doStep(k * 1e-3, 1e-3)
        rows.append(s.getReal(outs))
    return rows

first = run(50)
s.reset()  # back to the state after instantiation: the same run again
print("reset repeats:", run(50) == first, s.getReal([vr["engine_torque"]]))
s.setReal([vr["row.C1.gain_static"]], [3.0])
print("tuned:", s.getReal([vr["row.C1.gain_static"]]))
s.doStep(0.05, 1e-3)
kids = [int(p) for t in os.listdir("/proc/self/task") for p in open(f"/proc/self/task/{t}/children").read().split()]
assert len(kids) == 1, kids
try:
    s.setReal([vr["row.C1.gain_static"]], [-1.0])  # out of range: an error reply, the plant process goes on
except FMICallException:
    print("refused")
try:
    s.setReal([vr["row.C1.gain_static"]], [1.0])  # below the kinetic gain: refused, nothing changed
except FMICallException:
    print("refused:", s.getReal([vr["row.C1.gain_static"]]))
s.doStep(0.051, 1e-3)
os.kill(kids[0], signal.SIGKILL)
try:
    s.doStep(0.052, 1e-3)
except FMICallException as exc:
    print("error:", exc)
s.freeInstance()
os.environ["GEARBOX_HIL_PYTHON"] = "/nonexistent/python"  # no plant process: no instance, the importer goes on
t = FMU2Slave(guid=md.guid, unzipDirectory=s.unzipDirectory, modelIdentifier=md.coSimulation.modelIdentifier,
              instanceName="none")
try:
    t.instantiate()
except Exception:
    print("not instantiated")
print("alive")
'''


def test_reset_repeats_a_run_parameters_tune_and_a_dead_plant_process_is_an_fmi2_error(exported, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", CRASH, str(exported)], capture_output=True, text=True, cwd=tmp_path,
                       timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.splitlines() == [  # FMPy's logger prints what the library logs
        "reset repeats: True [300.0]", "tuned: [3.0]",
        "[ERROR] fmi2SetReal: row.C1.gain_static: -1.0 outside [0, 1e+09] 1", "refused",
        "[ERROR] fmi2SetReal: row.C1.gain_kinetic 2.2 must not exceed row.C1.gain_static 1", "refused: [3.0]",
        "[ERROR] fmi2DoStep: the plant process ended by signal 9", "error: fmi2DoStep failed with status 3 (error).",
        "[ERROR] cannot start the plant process /nonexistent/python: No such file or directory", "not instantiated",
        "alive"], r.stdout
