"""The plant as an FMU: ``gearbox-hil fmu`` writes an FMI 2.0 co-simulation FMU that passes FMPy's validation
and, simulated by FMPy in a separate interpreter, repeats ``gearbox-hil simulate`` on the swap scenario."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fmpy", reason="needs the fmi extra (pip install 'gearbox-hil[fmi]')")
pytest.importorskip("pythonfmu", reason="needs the fmi extra (pip install 'gearbox-hil[fmi]')")

from plant_models.offline import fill_inputs  # noqa: E402
from plant_models.registry import load_plant  # noqa: E402
from server.offline.scenario import load_scenario  # noqa: E402
from server.offline.run import run_offline  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

RUNNER = '''
import os, sys, numpy as np, fmpy
fmu, inputs, out = sys.argv[1:4]
table = np.load(inputs)
names = [n for n in table.dtype.names if n != "time"]
res = fmpy.simulate_fmu(fmu, stop_time=float(table["time"][-1]), step_size=float(table["time"][1]),
                        start_values={n: float(table[n][0]) for n in names}, input=table,
                        output_interval=float(table["time"][1]))
np.save(out, res)
sys.stdout.flush()
os._exit(0)  # PythonFMU's library can crash in the interpreter's own teardown after the run (docs/fmi.md, limits)
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
    plant = load_plant("powershift")
    v = {x.name: x for x in md.modelVariables}
    for s in plant.inputs:
        assert v[s.name].causality == "input" and float(v[s.name].min) == s.lo and float(v[s.name].max) == s.hi
    for s in plant.outputs:
        assert v[s.name].causality == "output"
    assert v["engine_torque"].unit == "N m" and v["w_1"].unit == "rad/s"
    assert {p.name for p in plant.tunable_parameters()} <= {x.name for x in md.modelVariables
                                                           if x.causality == "parameter"}
    assert md.defaultExperiment.stepSize == "0.001" or float(md.defaultExperiment.stepSize) == 1e-3


def test_fmpy_in_a_fresh_interpreter_repeats_simulate_on_the_swap_scenario(exported, tmp_path):
    plant = load_plant("powershift")
    sc = load_scenario(ROOT / "scenarios" / "powershift_single_swap.toml")
    # the master sets inputs at communication points and holds them: the scenario's zero-order hold
    sc = dataclasses.replace(sc, interpolation="hold")
    compiled = sc.compile(plant)
    ref = run_offline(plant, compiled)
    n = compiled.n_steps
    kind, times, values = compiled.table.arrays()
    U, R = np.empty((n + 1, plant.n_in)), np.empty((n + 1, plant.n_in))
    fill_inputs(kind, times, values, compiled.dt, 0, U, R)
    assert not R.any()
    table = np.zeros(n + 1, dtype=[("time", "f8")] + [(s.name, "f8") for s in plant.inputs])
    table["time"] = np.arange(n + 1) * compiled.dt
    for k, s in enumerate(plant.inputs):
        table[s.name] = U[:, k]
    np.save(tmp_path / "in.npy", table)
    r = subprocess.run([sys.executable, "-c", RUNNER, str(exported), str(tmp_path / "in.npy"), str(tmp_path / "out.npy")],
                       capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr
    res = np.load(tmp_path / "out.npy")
    assert len(res) == n + 1
    got = np.column_stack([res[s.name] for s in plant.outputs])
    diff = np.abs(got - ref.values)
    rows = np.nonzero(diff.max(axis=1) > 0)[0]
    assert np.array_equal(got, ref.values), (rows[:5], diff.max(), [plant.outputs[j].name for j in
                                                                   np.nonzero(diff.max(axis=0))[0]][:5])
