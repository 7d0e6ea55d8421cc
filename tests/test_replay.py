"""Measured data as stimulus: a recording replayed into the plant's inputs through a scenario's ``[replay]``.

The acceptance case: an MF4 recorded by a lockstep server, replayed as the stimulus of a new offline run,
reproduces the recorded outputs bit for bit.  Then CSV and Parquet files, unit conversion, a window and
an offset, and the errors.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from plant_models.config import ConfigError
from plant_models.registry import load_plant
from server.offline.scenario import load_scenario
from server.offline.run import run_offline

from server_support import ROOT, ServerProcess

INPUTS = ["p_c1", "p_c2", "p_c3", "p_c4", "p_c5", "p_c6", "p_c7", "p_c8", "engine_torque", "load_torque"]


def _held_swap(tmp_path):
    """The single swap with its inputs held over each step (no first-order hold: every step's input is a sample)."""
    p = tmp_path / "held_swap.toml"
    text = (ROOT / "scenarios" / "powershift_single_swap.toml").read_text()
    assert 'interpolation = "linear"' in text
    p.write_text(text.replace('interpolation = "linear"', 'interpolation = "hold"'))
    return p


def _record(tmp_path, scenario) -> "np.lib.npyio.NpzFile":
    from server.recording import read_recording, recording_files
    import tomllib

    with ServerProcess(tmp_path, mode="lockstep", extra='[recording]\nfolder = "rec"\nchunk_s = 100.0\n') as srv:
        with srv.client() as c:
            info = c.load_scenario(scenario=tomllib.loads(scenario.read_text()))
            c.request("record_start", signals=["*"], name="run")
            c.step(info["n_steps"])
            c.request("record_stop")
            deadline = time.monotonic() + 60
            while c.status()["recording"].get("writer_state") != "closed" and time.monotonic() < deadline:
                time.sleep(0.1)
        srv.shutdown()
    files = recording_files(tmp_path / "rec", "run")
    return files, read_recording(tmp_path / "rec", "run")


def test_an_mf4_recorded_by_the_server_replayed_offline_reproduces_its_outputs_bit_for_bit(tmp_path):
    files, rec = _record(tmp_path, _held_swap(tmp_path))
    assert len(files) == 1 and rec["tick"][0] == 1 and len(rec["tick"]) == 1200
    # a row holds the outputs after its tick's step and the inputs that step applied: step k's input is on
    # the row of tick k + 1, one step later, hence the offset of one step
    sc = tmp_path / "replay.toml"
    sc.write_text('duration_s = 1.2\ndt_s = 0.001\ninterpolation = "hold"\n'
                  f'[replay]\nfile = "rec/{files[0].name}"\ntime_offset_s = -0.001\n[replay.channels]\n'
                  + "".join(f'{n} = "{n}"\n' for n in INPUTS))
    plant = load_plant("powershift")
    tr = run_offline(plant, load_scenario(sc).compile(plant))
    outputs = [s.name for s in plant.outputs]
    assert set(outputs) <= set(rec)
    for name in outputs:
        assert np.array_equal(tr.column(name)[1:], rec[name]), name  # rows 1..1200 = ticks 1..1200
    assert tr.column("gear")[-1] == 3


def _trace_file(tmp_path, fmt: str):
    from server.cli import main

    assert main(["simulate", "powershift", "--scenario", str(_held_swap(tmp_path)), "--out", str(tmp_path / "o"),
                 "--format", fmt, "--quiet"]) == 0
    return tmp_path / "o" / f"trace.{fmt}"


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_trace_file_replays_its_pressures_with_a_window_an_offset_and_a_unit(tmp_path, fmt):
    """The pressure outputs of a trace, from 0.4 s on, played from t = 0.1 s; a channel read in mbar."""
    _trace_file(tmp_path, fmt)
    sc = tmp_path / "w.toml"
    sc.write_text('duration_s = 0.5\ndt_s = 0.001\ninterpolation = "hold"\n'
                  f'[replay]\nfile = "o/trace.{fmt}"\nwindow_s = [0.4, 0.8]\ntime_offset_s = 0.1\n'
                  '[replay.channels]\np_c1 = "pressure_c1"\np_c2 = { channel = "pressure_c2", scale = 0.5 }\n'
                  'p_c3 = { channel = "pressure_c3", unit = "mbar" }\n')  # read as mbar: 1/1000 bar
    plant = load_plant("powershift")
    compiled = load_scenario(sc).compile(plant, warn=False)
    from server.offline.traces import read_trace

    names, data = read_trace(tmp_path / "o" / f"trace.{fmt}")
    col = {n: data[:, j] for j, n in enumerate(names)}
    i0 = int(np.flatnonzero(np.isclose(col["t"], 0.4))[0])
    for k in (0, 50, 100, 150, 300):  # before the window's start plays (t < 0.1 s) the first sample holds
        u, _ = compiled.inputs_at(k)
        j = i0 + max(0, k - 100)
        assert u[plant.input_index("p_c1")] == col["pressure_c1"][j]
        assert u[plant.input_index("p_c2")] == 0.5 * col["pressure_c2"][j]
        assert u[plant.input_index("p_c3")] == pytest.approx(col["pressure_c3"][j] * 1e-3, rel=1e-15)


@pytest.mark.parametrize("body, message", [
    ('file = "nothing.mf4"\n[replay.channels]\np_c1 = "x"', "replay.file: "),
    ('file = "../x.csv"\n[replay.channels]\np_c1 = "x"', "is not inside the scenario's folder"),
    ('file = "o/trace.csv"\n[replay.channels]\np_c1 = "pressure_c9"', "'pressure_c9' is not a column of trace.csv"),
    ('file = "o/trace.csv"\n[replay.channels]\np_c1 = { channel = "w_1", unit = "rpm" }',
     "replay.channels.p_c1: the recording's unit 'rpm' does not convert to the input's 'bar'"),
])
def test_replay_mistakes_are_one_line_errors(tmp_path, body, message):
    _trace_file(tmp_path, "csv")
    sc = tmp_path / "bad.toml"
    sc.write_text(f'duration_s = 0.5\ndt_s = 0.001\n[replay]\n{body}\n')
    with pytest.raises(ConfigError) as ei:
        load_scenario(sc).compile(load_plant("powershift"), warn=False)
    assert message in str(ei.value) and "\n" not in str(ei.value), str(ei.value)


def test_a_test_file_replaying_a_trace_runs_in_lockstep_as_it_runs_offline_bit_for_bit(tmp_path):
    """Lockstep = offline with measured data as stimulus: the runner sends the replayed points, not the file.

    The replay has a first-order hold (rates rebuilt from the samples), a window, an offset, a scale and a
    unit conversion, so each of them must reach the server exactly as the offline run plays it.
    """
    from io_adapters.zmq.client import HilClient
    from server.testbench.runner import ServerRun, run_lockstep, run_spec_offline as bench_offline
    from server.testbench.spec import load_test

    _trace_file(tmp_path, "csv")
    (tmp_path / "replay.toml").write_text(
        'duration_s = 0.6\ndt_s = 0.001\ninterpolation = "linear"\n'
        '[replay]\nfile = "o/trace.csv"\nwindow_s = [0.3, 0.9]\ntime_offset_s = 0.05\n[replay.channels]\n'
        'p_c1 = "pressure_c1"\np_c2 = { channel = "pressure_c2", scale = 0.9 }\n'
        'p_c3 = { channel = "pressure_c3", unit = "mbar" }\np_c4 = "pressure_c4"\n'
        '[inputs]\nengine_torque = 300.0\nload_torque = 3500.0\np_c5 = 16.0\n')
    specs = {}
    for mode in ("offline", "lockstep"):
        p = tmp_path / f"t_{mode}.toml"
        p.write_text(f'plant = "powershift"\nmode = "{mode}"\nscenario = "replay.toml"\n'
                     'name = "replay"\n[[expect]]\nexpr = "gear"\nmin = 0\nat = 0.1\n')
        specs[mode] = load_test(p)
    off = bench_offline(specs["offline"], [])
    (tmp_path / "srv").mkdir()
    with ServerRun(specs["lockstep"].plant_config, "lockstep", tmp_path / "srv") as server:
        with HilClient(server.control, timeout_s=30.0).connect() as client:
            lock = run_lockstep(specs["lockstep"], client, [])
    plant = load_plant("powershift")
    assert len(off.t) == 601 and np.array_equal(off.t, lock.t)
    for name in [s.name for s in plant.outputs] + ["p_c1", "p_c2", "p_c3", "p_c4"]:
        assert off.signals[name].tobytes() == lock.signals[name].tobytes(), name
    # the stimulus is the recording's: the pressures moved through the window, and the plant moved with them
    assert np.ptp(off.signals["pressure_c1"]) > 1.0 and np.ptp(off.signals["w_1"]) > 1.0


def test_a_replayed_scenario_as_a_map_reads_back_to_the_same_profiles(tmp_path):
    """The map the runner sends parses to the profiles the file compiles to (units converted), value for value."""
    from server.offline.scenario import parse_scenario

    _trace_file(tmp_path, "csv")
    sc = tmp_path / "r.toml"
    sc.write_text('duration_s = 0.5\ndt_s = 0.001\n[replay]\nfile = "o/trace.csv"\n[replay.channels]\n'
                  'p_c3 = { channel = "pressure_c3", unit = "mbar" }\n'
                  '[inputs]\np_c1 = 3.0\nload_torque = { sine = { amplitude = 5.0, frequency_hz = 2.0 } }\n')
    plant = load_plant("powershift")
    original = load_scenario(sc)
    back = parse_scenario(original.as_map(plant), "map")
    assert back.profiles["p_c3"].unit == "" and original.profiles["p_c3"].unit == "mbar"
    assert back.profiles["p_c3"].values == tuple(v * 1e-3 for v in original.profiles["p_c3"].values)
    assert back.profiles["p_c3"].times == original.profiles["p_c3"].times
    assert back.profiles["p_c1"] == original.profiles["p_c1"]
    assert back.profiles["load_torque"] == original.profiles["load_torque"]
    a, b = original.compile(plant, warn=False), back.compile(plant, warn=False)
    for k in range(0, 500, 7):
        ua, ra = a.inputs_at(k)
        ub, rb = b.inputs_at(k)
        assert ua.tobytes() == ub.tobytes() and ra.tobytes() == rb.tobytes()
