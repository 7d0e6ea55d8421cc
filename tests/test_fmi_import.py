"""FMUs in the loop: a first-order torque source (an FMI 2.0 co-simulation FMU built here from tests/fmu_src/)
drives the Powershift's engine torque, offline, in lockstep and through snapshots; bad tables are one line, exit 2.
Its FMI 3.0 twin equals it bit for bit (Real, Integer and Boolean variables); model-exchange FMUs (a first-order
lag, a bouncing ball) are integrated by RK4 at the plant step: 4th-order convergence to the closed form, events
within 1e-9 s of it."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fmpy", reason="needs the fmi extra (pip install 'gearbox-hil[fmi]')")

from fmu_build import build_first_order, build_first_order3, build_me, compiler  # noqa: E402
from plant_models.registry import load_plant  # noqa: E402
from server.realtime.loop_config import LoopConfig  # noqa: E402
from server.realtime.runtime import assemble  # noqa: E402
from server.offline.scenario import parse_scenario  # noqa: E402
from server.offline.run import run_offline  # noqa: E402

pytestmark = pytest.mark.skipif(compiler() is None, reason="needs a C compiler (cc) to build the test FMU")

ROOT = Path(__file__).resolve().parents[1]
TAU = 0.05  # s, the torque source's time constant
T_CMD = 300.0  # N m, the commanded engine torque (a step at t = 0)
DT = 1e-3  # s
GEAR_1 = {"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0}  # clutches 1, 3, 6 engaged: gear 1
SCENARIO = {"duration_s": 0.5, "dt_s": DT, "interpolation": "linear",
            "inputs": {"engine.torque_cmd": T_CMD, "load_torque": 3500.0, **GEAR_1}}


@pytest.fixture(scope="module")
def fmu_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("fmu")
    build_first_order(d / "engine.fmu")
    build_first_order(d / "stateless.fmu", state=False)
    build_first_order(d / "rpm.fmu", torque_unit="rad/s")
    build_first_order(d / "win.fmu", platform="win64")
    build_first_order(d / "wide.fmu", out_range=(-1e4, 1e4))
    build_first_order(d / "typed2.fmu", typed=True)
    build_first_order3(d / "typed3.fmu")
    build_me(d / "lag.fmu", "lag")
    build_me(d / "ball.fmu", "ball")
    build_me(d / "ball3.fmu", "ball", version=3)
    return d


def write_config(d: Path, name: str = "ps.toml", **table) -> Path:
    t = dict(name="engine", file="engine.fmu", start={"tau": TAU}, to_plant={"torque": "engine_torque"})
    t.update(table)

    def val(v):
        if isinstance(v, dict):
            return "{ " + ", ".join(f'{k} = {val(x)}' for k, x in v.items()) + " }"
        return f'"{v}"' if isinstance(v, str) else repr(v)
    body = "\n".join(f"{k} = {val(v)}" for k, v in t.items())
    p = d / name
    p.write_text(f'extends = "{ROOT / "configs" / "powershift.toml"}"\n\n[[fmu]]\n{body}\n')
    return p


def offline(plant, content=SCENARIO):
    return run_offline(plant, parse_scenario(content, "inline").compile(plant))


def test_the_fmu_torque_is_the_closed_form_and_drives_the_plant_one_step_ahead(fmu_dir):
    plant = load_plant(write_config(fmu_dir))
    trace = offline(plant)
    t = trace.time
    torque = trace.values[:, plant.output_index("engine.torque")]
    # the FMU integrates T' = (T_cmd - T)/tau exactly over each step: the closed form at every step
    assert np.allclose(torque, T_CMD * -np.expm1(-t / TAU), rtol=0, atol=1e-10)
    # the plant sees T(t_k+1) held over [t_k, t_k+1]: the bare plant stepped with that sequence is the same run
    bare = load_plant(ROOT / "configs" / "powershift.toml")
    bare.reset({"load_torque": 3500.0, "engine_torque": 0.0, **GEAR_1})
    k_eng = bare.input_index("engine_torque")
    rows = [bare.y.copy()]
    for k in range(1, len(t)):
        bare.u[k_eng] = T_CMD * -math.expm1(-t[k] / TAU)
        bare.step(DT)
        rows.append(bare.y.copy())
    n = bare.n_out
    assert np.allclose(trace.values[:, :n], np.array(rows), rtol=1e-12, atol=1e-9)


def test_the_result_equals_the_closed_form_torque_within_the_coupling_error(fmu_dir):
    """Against the engine torque T_CMD (1 - exp(-t/tau)) given to the bare plant as a first-order hold:
    the FMU's value at the step's end, held, exceeds the hold's mean by half the step's increment, a
    telescoping sum: at most T_CMD * dt / 2 = 0.15 N m s of extra impulse on axle 1 (J1 = 1.5 kg m^2),
    so |dw_1| <= 0.1 rad/s."""
    plant = load_plant(write_config(fmu_dir))
    trace = offline(plant)
    t = trace.time
    pts = [[float(x), T_CMD * -math.expm1(-x / TAU)] for x in t]
    ref_plant = load_plant(ROOT / "configs" / "powershift.toml")
    ref = offline(ref_plant, {**SCENARIO, "inputs": {**{k: v for k, v in SCENARIO["inputs"].items()
                                                       if not k.startswith("engine.")}, "engine_torque": pts}})
    k = plant.output_index("w_1")
    err = np.abs(trace.values[:, k] - ref.values[:, k])
    bound = T_CMD * DT / 2.0 / 1.5
    assert err.max() <= bound
    assert err.max() > 0.0  # the one-step coupling is visible: the two runs are not the same computation
    assert trace.values[-1, plant.output_index("gear")] == 1.0


def test_lockstep_equals_offline_bit_for_bit_and_a_snapshot_repeats_the_run(fmu_dir):
    cfg = write_config(fmu_dir)
    ref = offline(load_plant(cfg))
    plant = load_plant(cfg)
    srv = assemble(plant, [], LoopConfig(mode="lockstep", status_interval_s=0.0))
    rep = srv.control.handle({"v": 1, "cmd": "load_scenario", "scenario": SCENARIO})
    assert rep["ok"], rep
    srv.loop.start()
    rows = [plant.y.copy()]
    for _ in range(200):
        srv.loop.step(1)
        rows.append(plant.y.copy())
    snap = srv.loop.snapshot()
    for _ in range(300):
        srv.loop.step(1)
        rows.append(plant.y.copy())
    assert np.array_equal(np.array(rows), ref.values)
    srv.loop.restore(snap)
    again = []
    for _ in range(300):
        srv.loop.step(1)
        again.append(plant.y.copy())
    assert np.array_equal(np.array(again), ref.values[201:])


def test_an_fmu_without_state_access_refuses_a_snapshot(fmu_dir):
    plant = load_plant(write_config(fmu_dir, file="stateless.fmu"))
    with pytest.raises(ValueError, match=r"^fmu engine: cannot save its state \(canGetAndSetFMUstate is false\)$"):
        plant.get_state()


def test_an_fmu_error_sets_the_status_bit_and_the_plant_keeps_stepping(fmu_dir):
    plant = load_plant(write_config(fmu_dir, start={"tau": TAU, "fail_at": 0.1}))
    trace = offline(plant)
    status = trace.values[:, plant.output_index("status")].astype(int)
    bit = plant.ST_FMU_ERROR
    assert plant.status_bits.names()[bit] == "fmu_error" and bit >= 256
    k_fail = int(round(0.1 / DT))  # the step from t = 0.1 s is the first the FMU refuses
    assert not (status[:k_fail + 1] & bit).any() and (status[k_fail + 1:] & bit).all()
    torque = trace.values[:, plant.output_index("engine.torque")]
    assert (torque[k_fail + 1:] == torque[k_fail]).all()  # held
    assert trace.time[-1] == pytest.approx(0.5) and plant.counters[0] == 500
    assert plant.fmu_errors == ["fmu engine: fmi2DoStep returned error at t = 0.100000 s; its outputs hold from now on"]


@pytest.mark.parametrize("table, message", [
    (dict(to_plant={"torq": "engine_torque"}),
     "fmu[0].to_plant.torq: fmu engine: no Real, Integer or Boolean variable 'torq'"),
    (dict(to_plant={"torque_cmd": "engine_torque"}),
     "fmu[0].to_plant.torque_cmd: fmu engine: variable 'torque_cmd' has causality input, needs output"),
    (dict(file="rpm.fmu"),
     "fmu[0].to_plant.torque: fmu engine: variable 'torque' has unit 'rad/s', plant port 'engine_torque' has 'N m'"),
    (dict(file="win.fmu"), "fmu[0].file: fmu engine: no binary for this platform (linux64); the FMU has win64"),
    (dict(to_plant={"torque": "engine_trq"}), "fmu[0].to_plant.torque: fmu engine: the plant has no input "
                                             "'engine_trq'"),
    (dict(file="wide.fmu"), "fmu[0].to_plant.torque: fmu engine: variable 'torque' range [-10000, 10000] exceeds "
                            "plant input 'engine_torque' range [-1000, 5000]"),
    (dict(start={"tau": -1.0}), "fmu[0].start.tau: fmu engine: start value -1.0 outside the variable's range "
                                "[1e-06, inf]"),
    (dict(file="typed2.fmu", start={"divider": 1.5}),
     "fmu[0].start.divider: fmu engine: start value 1.5 of Integer variable 'divider' is not an integer"),
])
def test_a_bad_table_is_one_line_and_exit_2_through_simulate(fmu_dir, tmp_path, table, message):
    import fmpy
    if "linux64" in message and fmpy.platform != "linux64":
        pytest.skip("the message names this platform")
    cfg = write_config(fmu_dir, name="bad.toml", **table)
    scen = tmp_path / "s.toml"
    scen.write_text('duration_s = 0.01\ndt_s = 0.001\n[inputs]\n"engine.torque_cmd" = 1.0\n')
    r = subprocess.run([sys.executable, "-m", "server.cli", "simulate", str(cfg), "--scenario", str(scen), "--out",
                        str(tmp_path / "out")], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines == [f"gearbox-hil: error: {cfg}: {message}"], r.stderr


def test_a_realtime_server_steps_the_fmu_once_per_tick(fmu_dir):
    plant = load_plant(write_config(fmu_dir))
    rate, n = 1000.0, 300
    cfg = LoopConfig(mode="realtime", rate_hz=rate, duration_s=n / rate, status_interval_s=0.0, startup_grace_s=0.0)
    srv = assemble(plant, [], cfg, initial_inputs={"engine.torque_cmd": T_CMD, **GEAR_1})
    srv.open()
    try:
        srv.run()
    finally:
        srv.close()
    ticks = srv.loop.tick
    # how many ticks fit in the wall-clock duration depends on the machine's load (78 of 300 seen at load 19):
    # not asserted; each tick that ran stepped the plant and the FMU once
    assert ticks > 10 and plant.counters[0] == ticks
    # one FMU step per tick: its torque is the closed form at the plant's time
    t = plant.time
    assert plant.y[plant.output_index("engine.torque")] == pytest.approx(T_CMD * -math.expm1(-t / TAU), abs=1e-9)


def test_a_plant_output_feeds_an_fmu_input_from_the_start_of_the_step(fmu_dir):
    """from_plant: the lag filters w_1 (its unit here rad/s); T_k+1 = w_k + (T_k - w_k) exp(-dt/tau), w_k at t_k."""
    plant = load_plant(write_config(fmu_dir, file="rpm.fmu", to_plant={}, from_plant={"torque_cmd": "w_1"}))
    assert "engine.torque_cmd" not in [s.name for s in plant.inputs]
    trace = offline(plant, {**SCENARIO, "inputs": {"engine_torque": 300.0, "load_torque": 3500.0, **GEAR_1}})
    w = trace.values[:, plant.output_index("w_1")]
    lag = trace.values[:, plant.output_index("engine.torque")]
    expected = w[:-1] + (lag[:-1] - w[:-1]) * math.exp(-DT / TAU)
    assert np.allclose(lag[1:], expected, rtol=1e-13, atol=1e-12)
    assert lag[0] == 0.0 and abs(lag[-1] - w[-1]) < abs(w[-1] - w[0])


# -- FMI 3.0 co-simulation: the twin of the 2.0 source -----------------------------------------------------------
TYPED_SCENARIO = {"duration_s": 0.5, "dt_s": DT, "interpolation": "linear",
                  "inputs": {"engine.torque_cmd": T_CMD, "load_torque": 3500.0, **GEAR_1,
                             "engine.divider": [[0.0, 1.0], [0.1, 3.0]],  # Integer input: 1, 2, 3 (rounded)
                             "engine.enabled": [[0.0, 1.0], [0.4, 1.0], [0.41, 0.0]]}}  # Boolean: false at 0.41 s


def test_an_fmi3_fmu_equals_its_fmi2_twin_bit_for_bit_with_integer_and_boolean_variables(fmu_dir):
    runs = {}
    for f in ("typed2.fmu", "typed3.fmu"):
        plant = load_plant(write_config(fmu_dir, name=f"{f}.toml", file=f))
        assert plant.slots[0].fmu.version == int(f[5])
        runs[f] = (plant, offline(plant, TYPED_SCENARIO))
    (p2, r2), (p3, r3) = runs["typed2.fmu"], runs["typed3.fmu"]
    assert [s.name for s in p2.outputs] == [s.name for s in p3.outputs]
    assert [s.name for s in p2.inputs] == [s.name for s in p3.inputs]
    assert np.array_equal(r2.values, r3.values)
    col = {n: r3.values[:, p3.output_index(f"engine.{n}")] for n in ("torque", "step_count", "settled")}
    k = np.arange(len(r3.time))
    assert np.array_equal(col["step_count"], k.astype(float))  # Int64 output: one step per plant step
    assert set(np.unique(col["settled"])) == {0.0, 1.0}  # Boolean output
    # the torque follows T_CMD / divider, then 0 once disabled; settled where within 1 N m of that command
    t = r3.time
    divider = np.rint(np.interp(t[:-1], [0.0, 0.1], [1.0, 3.0]))
    enabled = np.interp(t[:-1], [0.0, 0.4, 0.41], [1.0, 1.0, 0.0]) != 0.0
    cmd = np.where(enabled, T_CMD / divider, 0.0)
    expected = np.empty_like(t)
    expected[0] = 0.0
    for i in range(len(t) - 1):
        expected[i + 1] = cmd[i] + (expected[i] - cmd[i]) * math.exp(-DT / TAU)
    assert np.allclose(col["torque"], expected, rtol=0, atol=1e-9)
    assert np.array_equal(col["settled"][1:], (np.abs(expected[1:] - cmd) <= 1.0).astype(float))
    assert col["settled"][-1] == 0.0 and 0.0 < col["torque"][-1] < 100.0  # disabled: decaying to 0


def test_an_fmi3_fmu_state_restored_repeats_the_run(fmu_dir):
    plant = load_plant(write_config(fmu_dir, name="typed3s.toml", file="typed3.fmu"))
    plant.reset({"engine.torque_cmd": T_CMD, "load_torque": 3500.0, **GEAR_1})
    for _ in range(100):
        plant.step(DT)
    snap = plant.get_state()
    first = []
    for _ in range(100):
        plant.step(DT)
        first.append(plant.y.copy())
    plant.set_state(snap)
    again = []
    for _ in range(100):
        plant.step(DT)
        again.append(plant.y.copy())
    assert np.array_equal(np.array(first), np.array(again))
    assert plant.y[plant.output_index("engine.step_count")] == 200.0


# -- model exchange: RK4 at the plant step, events located inside it ----------------------------------------------
def lag_error(fmu_dir, dt: float, duration: float = 0.4) -> float:
    """Max |T - T_CMD (1 - exp(-t/tau))| over a run of the model-exchange lag at plant step dt, N m."""
    plant = load_plant(write_config(fmu_dir, name="lag.toml", file="lag.fmu", to_plant={}))
    scen = {"duration_s": duration, "dt_s": dt, "interpolation": "linear",
            "inputs": {"engine.torque_cmd": T_CMD, "engine_torque": 0.0, "load_torque": 0.0}}
    trace = offline(plant, scen)
    torque = trace.values[:, plant.output_index("engine.torque")]
    return float(np.max(np.abs(torque - T_CMD * -np.expm1(-trace.time / TAU))))


def test_a_model_exchange_lag_converges_to_the_closed_form_at_fourth_order(fmu_dir):
    errors = [lag_error(fmu_dir, dt) for dt in (8e-3, 4e-3, 2e-3)]
    orders = [math.log2(a / b) for a, b in zip(errors, errors[1:])]
    assert errors[0] < 1e-3 and all(3.8 < p < 4.2 for p in orders), (errors, orders)  # RK4: 4th order
    assert lag_error(fmu_dir, DT) < 1e-5  # at the plant's 1 ms: within RK4's error of the closed form


def test_a_time_event_inside_a_step_is_handled_at_its_time(fmu_dir):
    """The lag's command doubles at the time event t_b = 10.5 ms (inside the 11th step): the closed form
    T = u (1 - exp(-t/tau)) before, 2u + (T(t_b) - 2u) exp(-(t - t_b)/tau) after, within RK4's error; the
    event taken at a step's end instead would be off by about u dt / (2 tau) = 3 N m."""
    t_b = 10.5e-3
    plant = load_plant(write_config(fmu_dir, name="lagb.toml", file="lag.fmu", to_plant={},
                                    start={"tau": TAU, "boost_at": t_b}))
    scen = {"duration_s": 0.2, "dt_s": DT, "interpolation": "linear",
            "inputs": {"engine.torque_cmd": T_CMD, "engine_torque": 0.0, "load_torque": 0.0}}
    trace = offline(plant, scen)
    t = trace.time
    torque = trace.values[:, plant.output_index("engine.torque")]
    at_b = T_CMD * -math.expm1(-t_b / TAU)
    closed = np.where(t < t_b, T_CMD * -np.expm1(-t / TAU), 2 * T_CMD + (at_b - 2 * T_CMD) * np.exp(-(t - t_b) / TAU))
    assert np.max(np.abs(torque - closed)) < 1e-6
    assert plant.slots[0].events == 1


BALL = dict(g=9.81, e=0.8, h0=1.0)


def bounce_times(n: int) -> list[float]:
    """Closed form: the first impact at t1 = sqrt(2 h0 / g); after bounce k the flight lasts 2 e^k t1."""
    t1 = math.sqrt(2.0 * BALL["h0"] / BALL["g"])
    return [t1 * (1.0 + 2.0 * sum(BALL["e"] ** k for k in range(1, i))) for i in range(1, n + 1)]


def ball_height(t: np.ndarray) -> np.ndarray:
    g, e = BALL["g"], BALL["e"]
    times = bounce_times(6)
    h = BALL["h0"] - 0.5 * g * t ** 2
    for k, tk in enumerate(times):
        after = t >= tk
        v_up = e ** (k + 1) * g * times[0]
        h[after] = v_up * (t[after] - tk) - 0.5 * g * (t[after] - tk) ** 2
    return h


def ball_config(fmu_dir: Path, file: str = "ball.fmu") -> Path:
    return write_config(fmu_dir, name=f"{file}.toml", file=file, start={}, to_plant={})


BALL_SCENARIO = {"duration_s": 2.0, "dt_s": DT, "interpolation": "linear",
                 "inputs": {"engine_torque": 0.0, "load_torque": 0.0}}


@pytest.mark.parametrize("file", ["ball.fmu", "ball3.fmu"])  # FMI 2.0 and its 3.0 twin
def test_a_model_exchange_ball_bounces_at_the_closed_form_times_within_1e_9_s(fmu_dir, file):
    plant = load_plant(ball_config(fmu_dir, file))
    assert plant.slots[0].fmu.kind == "me" and plant.slots[0].fmu.version == (3 if "3" in file else 2)
    trace = offline(plant, BALL_SCENARIO)
    t = trace.time
    bounces = trace.values[:, plant.output_index("engine.bounces")]
    t_bounce = trace.values[:, plant.output_index("engine.t_bounce")]
    expected = bounce_times(3)  # 0.4515, 1.1740, 1.7520 s within the 2 s run
    assert bounces[-1] == 3.0
    located = [float(t_bounce[np.argmax(bounces == n)]) for n in (1, 2, 3)]
    assert np.max(np.abs(np.array(located) - expected)) <= 1e-9, (located, expected)
    for n, te in zip((1, 2, 3), expected):  # the bounce shows in the step that contains it
        k = int(np.argmax(bounces == n))
        assert t[k - 1] < te <= t[k]
    # between events RK4 integrates the parabola exactly: the height at every step is the closed form
    assert np.max(np.abs(trace.values[:, plant.output_index("engine.h")] - ball_height(t))) < 1e-9


def test_a_model_exchange_fmu_runs_the_same_in_lockstep_and_through_a_snapshot(fmu_dir):
    cfg = ball_config(fmu_dir)
    ref = offline(load_plant(cfg), BALL_SCENARIO)
    plant = load_plant(cfg)
    srv = assemble(plant, [], LoopConfig(mode="lockstep", status_interval_s=0.0))
    rep = srv.control.handle({"v": 1, "cmd": "load_scenario", "scenario": BALL_SCENARIO})
    assert rep["ok"], rep
    srv.loop.start()
    rows = [plant.y.copy()]
    for _ in range(1000):
        srv.loop.step(1)
        rows.append(plant.y.copy())
    snap = srv.loop.snapshot()  # between the first and the second bounce
    for _ in range(1000):
        srv.loop.step(1)
        rows.append(plant.y.copy())
    assert np.array_equal(np.array(rows), ref.values)
    srv.loop.restore(snap)
    again = []
    for _ in range(1000):
        srv.loop.step(1)
        again.append(plant.y.copy())
    assert np.array_equal(np.array(again), ref.values[1001:])


def test_an_fmi3_model_exchange_fmu_equals_its_fmi2_twin_bit_for_bit(fmu_dir):
    r2, r3 = (offline(load_plant(ball_config(fmu_dir, f)), BALL_SCENARIO) for f in ("ball.fmu", "ball3.fmu"))
    assert np.array_equal(r2.values, r3.values)
