"""A plant whose step is plain Python (plant_models/plants/viscous_coupling.py) through the whole contract.

Offline (StepwiseRun) against the closed form and against the server's
lockstep playback bit for bit, real time on the wall clock, signal faults
on its ports, the CAN codec, snapshot and restore, the parameter table and
the status.
"""

from __future__ import annotations

import math

import can
import cantools
import numpy as np
import pytest

from io_adapters.base import LoopContext, create_adapter, new_tick_info
from plant_models.contract.vocabulary import CNT_EVENTS, CNT_STEPS, ST_BAD_INPUT
from plant_models.offline import Run, StepwiseRun, make_run
from plant_models.plants.viscous_coupling import ViscousCouplingParams, ViscousCouplingPlant
from server.loop_config import LoopConfig
from server.runtime import assemble
from server.scenario import parse_scenario
from server.simulate import events_document, run_offline, run_stepwise

from can_support import bus_options, peer_bus, wait_until

J1, J2, C = 0.2, 0.5, 0.4  # kg m^2, kg m^2, N m s/rad
A = C * (1.0 / J1 + 1.0 / J2)  # 1/s: the slip's decay rate
K = 30.0  # N m/s: the ramp of torque_1
T2 = -4.0  # N m, constant on shaft 2
W1_0, W2_0 = -3.0, 4.0  # rad/s: the slip starts at -7 rad/s
# torque_1 = K t (a ramp the first-order hold carries exactly), torque_2 = T2
SCENARIO = {"duration_s": 1.0, "dt_s": 1e-3, "interpolation": "linear",
            "inputs": {"torque_1": [[0.0, 0.0], [1.0, K]], "torque_2": T2}}


def make_plant(**kw) -> ViscousCouplingPlant:
    p = dict(inertia_1_kg_m2=J1, inertia_2_kg_m2=J2, coupling_N_m_s_per_rad=C, speed_1_rad_s=W1_0,
             speed_2_rad_s=W2_0)
    p.update(kw)
    return ViscousCouplingPlant(ViscousCouplingParams(**p))


def closed_form(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """w_1, w_2 for torque_1 = K t, torque_2 = T2 from W1_0, W2_0."""
    p = J1 * W1_0 + J2 * W2_0 + K * t * t / 2.0 + T2 * t
    b0, br = -T2 / J2, K / J1  # d' = -A d + b0 + br t
    e = np.exp(-A * t)
    d = (W1_0 - W2_0) * e + b0 * (1.0 - e) / A + br * (t / A - (1.0 - e) / A ** 2)
    return (p + J2 * d) / (J1 + J2), (p - J1 * d) / (J1 + J2)


def compiled_scenario(plant, content=SCENARIO):
    return parse_scenario(content, "inline").compile(plant)


def test_the_offline_run_of_a_python_step_equals_the_closed_form():
    plant = make_plant()
    trace = run_offline(plant, compiled_scenario(plant))
    assert trace.steps == 1000 and trace.values.shape == (1001, plant.n_out)
    w1, w2 = closed_form(trace.time)
    names = trace.names
    np.testing.assert_allclose(trace.values[:, names.index("w_1")], w1, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(trace.values[:, names.index("w_2")], w2, rtol=1e-12, atol=1e-12)
    # momentum: J1 w1 + J2 w2 grows by the impulse of the two torques
    p_end = J1 * trace.values[-1, 0] + J2 * trace.values[-1, 1]
    assert p_end == pytest.approx(J1 * W1_0 + J2 * W2_0 + K / 2.0 + T2, rel=1e-13)
    assert trace.status_or == 0 and trace.counters["steps"] == 1000


def test_the_slip_reversal_is_an_event_at_the_closed_form_time():
    plant = make_plant()
    trace = run_offline(plant, compiled_scenario(plant))
    # the slip starts at -7 rad/s; the coupling, T2 < 0 on shaft 2 and the ramp on shaft 1 drive it through zero
    t = np.linspace(0.0, 1.0, 200001)
    w1, w2 = closed_form(t)
    crossings = t[1:][np.diff(np.sign(w1 - w2)) != 0]
    assert len(trace.events) == len(crossings) >= 1
    for e, tc in zip(trace.events, crossings):
        assert e["type"] == "reversal" and e["clutch"] == "coupling"
        assert e["time"] == pytest.approx(tc, abs=2e-5)
    doc = events_document(plant, trace, "inline", "inline", 1e-3)
    assert doc["counters"]["events"] == len(crossings) and doc["status_bits_seen"] == []


def test_offline_equals_the_stepwise_lockstep_sequence_bit_for_bit_and_decimates_alike():
    a, b, c = make_plant(), make_plant(), make_plant()
    ra = run_offline(a, compiled_scenario(a))
    rb = run_stepwise(b, compiled_scenario(b))
    assert np.array_equal(ra.values, rb.values) and ra.events == rb.events
    rc = run_offline(c, compiled_scenario(c), every=7)
    assert np.array_equal(rc.values, ra.values[[*range(0, 1001, 7), 1000]])
    assert rc.events == ra.events


def test_a_lockstep_server_plays_the_scenario_as_the_offline_run():
    plant = make_plant()
    srv = assemble(plant, [], LoopConfig(mode="lockstep", status_interval_s=0.0))
    rep = srv.control.handle({"v": 1, "cmd": "load_scenario", "scenario": SCENARIO})
    assert rep["ok"], rep
    srv.loop.start()
    rows = [plant.y.copy()]
    for _ in range(1000):
        srv.loop.step(1)
        rows.append(plant.y.copy())
    ref_plant = make_plant()
    ref = run_offline(ref_plant, compiled_scenario(ref_plant))
    assert np.array_equal(np.array(rows), ref.values)
    status = srv.report.status()
    assert status["plant"]["kind"] == "viscous_coupling" and status["sim_time_s"] == plant.time
    assert plant.counters[CNT_EVENTS] == len(ref.events) == 1
    assert plant.new_events() == ref.events


def test_the_compiled_run_refuses_a_python_step_and_make_run_picks_the_stepwise_run():
    plant = make_plant()
    sc = compiled_scenario(plant)
    with pytest.raises(TypeError, match="Python step"):
        Run(plant, sc.table, sc.dt, sc.n_steps)
    assert isinstance(make_run(plant, sc.table, sc.dt, sc.n_steps), StepwiseRun)
    assert not plant.rehearsable and plant.core is None


def test_a_realtime_server_ticks_a_python_step_on_the_wall_clock():
    plant = make_plant()
    rate, n = 1000.0, 300
    cfg = LoopConfig(mode="realtime", rate_hz=rate, duration_s=n / rate, status_interval_s=0.0, startup_grace_s=0.0)
    srv = assemble(plant, [], cfg, initial_inputs={"torque_1": 2.0, "torque_2": 1.0})
    srv.open()
    try:
        srv.run()
    finally:
        srv.close()
    ticks = srv.loop.tick
    timing = srv.report.status()["timing"]
    # how many deadlines the host let pass is the host's business (benchmarks measure it); the loop must
    # tick, never run ahead of the clock, and count what it missed
    assert 0 < ticks <= n and timing["missed_ticks"] >= 0
    assert plant.counters[CNT_STEPS] == ticks and plant.time == pytest.approx(ticks / rate, rel=1e-12)
    # the momentum grew by (2 + 1) N m over the simulated time, whatever ticks the machine missed
    p = J1 * plant.y[0] + J2 * plant.y[1]
    assert p == pytest.approx(J1 * W1_0 + J2 * W2_0 + 3.0 * plant.time, rel=1e-12)


def _lockstep(plant, inputs):
    srv = assemble(plant, [], LoopConfig(mode="lockstep", status_interval_s=0.0), initial_inputs=inputs)
    srv.loop.start()
    return srv


def test_signal_faults_apply_to_a_python_plants_ports():
    inputs = {"torque_1": 2.0, "torque_2": 1.0}
    a, b = make_plant(), make_plant()
    fa, fb = _lockstep(a, inputs), _lockstep(b, inputs)
    fa.loop.step(50)
    fb.loop.step(50)
    assert np.array_equal(a.y, b.y)
    # an input fault: the plant receives 10 N m on shaft 1 instead of 2; the commanded value stays in u
    fa.loop.set_fault({"target": "signal", "signal": "torque_1", "kind": "force", "value": 10.0})
    # a sensor fault: w_2 reads 5 rad/s high, the physics does not change
    fa.loop.set_fault({"target": "signal", "signal": "w_2", "kind": "offset", "value": 5.0})
    t0 = a.time
    p0 = J1 * a.y[0] + J2 * a.y[1]
    fa.loop.step(100)
    fb.loop.step(100)
    assert a.u[0] == 2.0
    dt = a.time - t0
    p = J1 * a.y[0] + J2 * (a.y[1] - 5.0)
    assert p == pytest.approx(p0 + (10.0 + 1.0) * dt, rel=1e-12)  # the forced torque acted
    assert a.y[2] == pytest.approx(a.y[0] - (a.y[1] - 5.0), rel=1e-12)  # slip from the true w_2
    assert len(fa.report.status()["faults"]) == 2
    assert not np.array_equal(a.y, b.y)
    fa.loop.clear_fault()
    fa.loop.step(1)
    assert a.u[0] == 2.0 and J1 * a.y[0] + J2 * a.y[1] == pytest.approx(p + 3.0 * 1e-3, rel=1e-12)


def test_snapshot_restore_and_parameters_of_a_python_plant():
    plant = make_plant()
    srv = _lockstep(plant, {"torque_1": 1.0, "torque_2": 0.0})
    srv.loop.step(100)
    snap = srv.loop.snapshot()
    srv.loop.step(200)
    end = plant.df.copy()
    srv.loop.restore(snap)
    srv.loop.step(200)
    assert np.array_equal(plant.df, end)
    rep = srv.control.handle({"v": 1, "cmd": "set_params", "params": {"coupling.viscous": 0.0}})
    assert rep["ok"], rep
    slip = plant.y[2]
    srv.loop.step(10)  # no coupling, torque only on shaft 1: the slip grows by 1 N m / J1 per second
    assert plant.y[2] == pytest.approx(slip + 10 * 1e-3 / J1, rel=1e-12)


def test_a_bad_input_leaves_the_state_untouched_and_is_named():
    plant = make_plant()
    plant.reset({"torque_1": 1.0})
    plant.step(1e-3)
    before = plant.get_state()
    plant.u[0] = math.nan
    assert plant.step(1e-3) == ST_BAD_INPUT
    assert plant.status_names(ST_BAD_INPUT) == ["bad_input"]
    after = plant.get_state()
    assert np.array_equal(after[1], before[1]) and plant.time == before[0][0]
    assert plant.counters[CNT_EVENTS] == 0


def test_registered_it_loads_from_a_config(tmp_path, monkeypatch):
    from plant_models import registry

    monkeypatch.setattr(registry, "_REGISTERED", dict(registry._REGISTERED))  # other tests see the built-ins only
    registry.register("viscous_coupling", ViscousCouplingPlant)
    cfg = tmp_path / "vc.toml"
    cfg.write_text('plant = "viscous_coupling"\ninertia_1_kg_m2 = 0.3\ncoupling_N_m_s_per_rad = 1.5\n')
    plant = registry.load_plant(cfg)
    assert isinstance(plant, ViscousCouplingPlant) and plant.params.inertia_1_kg_m2 == 0.3
    assert plant.tunable_parameters()[0].get() == 1.5
    assert plant.describe()["inputs"][0] == dict(name="torque_1", unit="N m", min=-1.0e4, max=1.0e4, default=0.0,
                                                 doc="external torque on shaft 1, positive forward", integer=False,
                                                 allowed=[])


DBC = '''VERSION ""
NS_ :
BS_:
BU_: TCU HIL
BO_ 256 TCU_Torques: 4 TCU
 SG_ Torque1 : 0|16@1- (0.1,0) [-3000|3000] "Nm" HIL
 SG_ Torque2 : 16|16@1- (0.1,0) [-3000|3000] "Nm" HIL

BO_ 512 HIL_Speeds: 4 HIL
 SG_ Speed1 : 0|16@1- (0.01,0) [-300|300] "rad/s" TCU
 SG_ Speed2 : 16|16@1- (0.01,0) [-300|300] "rad/s" TCU

BA_DEF_ BO_ "GenMsgCycleTime" INT 0 65535;
BA_DEF_DEF_ "GenMsgCycleTime" 0;
BA_ "GenMsgCycleTime" BO_ 256 10;
BA_ "GenMsgCycleTime" BO_ 512 1;
'''
MAPPING = '''dbc = "vc.dbc"
[rx.TCU_Torques.signals]
Torque1 = "torque_1"
Torque2 = "torque_2"
[tx.HIL_Speeds.signals]
Speed1 = "w_1"
Speed2 = "w_2"
'''


def test_the_can_codec_drives_a_python_plant_through_its_ports(tmp_path):
    """The compiled CAN codec writes u and reads y in the Python plant's df by offset, as for a compiled plant."""
    (tmp_path / "vc.dbc").write_text(DBC)
    (tmp_path / "vc_can.toml").write_text(MAPPING)
    db = cantools.database.load_string(DBC, database_format="dbc")
    plant = make_plant(speed_1_rad_s=0.0, speed_2_rad_s=0.0)
    options = dict(bus_options("virtual"), message_set=str(tmp_path / "vc_can.toml"))
    ctx = LoopContext(period_s=1e-3, feed_watchdog=lambda now: None, status=lambda: {}, tick_info=new_tick_info(),
                      mode="realtime")
    adapter = create_adapter("can", "can", options)
    adapter.open(plant, ctx)
    peer = peer_bus(options)
    try:
        cmd = db.get_message_by_name("TCU_Torques")
        peer.send(can.Message(arbitration_id=cmd.frame_id, is_extended_id=False,
                              data=cmd.encode({"Torque1": 12.5, "Torque2": -2.5})))
        wait_until(lambda: adapter.rx_handled >= 1, what="the command frame")
        speeds = db.get_message_by_name("HIL_Speeds")
        for tick in range(100):  # 0.1 s: w_1 = 12.5 * 0.1 / J1 at most, inside the DBC's +-300 rad/s
            adapter.read(tick, tick * 1_000_000)
            plant.step(1e-3)
            adapter.write(tick + 1, tick * 1_000_000)
            adapter.pump(0)
        assert plant.u[0] == 12.5 and plant.u[1] == -2.5
        last = None
        while True:
            msg = peer.recv(0.2)
            if msg is None:
                break
            if msg.arbitration_id == speeds.frame_id:
                last = speeds.decode(msg.data)
        assert last is not None
        assert last["Speed1"] == pytest.approx(plant.y[0], abs=0.005) and abs(plant.y[0]) > 1.0
        assert last["Speed2"] == pytest.approx(plant.y[1], abs=0.005)
    finally:
        peer.shutdown()
        adapter.close()


def test_a_buffered_stepwise_run_gives_the_whole_run_in_chunks():
    """The streamed trace of a long run (simulate's chunks) works for a Python step too, row for row."""
    sc = compiled_scenario(make_plant())
    whole = make_plant()
    whole.reset(sc.start_inputs())
    ref = make_run(whole, sc.table, sc.dt, sc.n_steps, 3)
    ref.advance()
    plant = make_plant()
    plant.reset(sc.start_inputs())
    run = make_run(plant, sc.table, sc.dt, sc.n_steps, 3, buffer_rows=7)
    steps, rows = [], []
    while not run.done:
        run.advance(50)
        s, o = run.take_rows()
        assert len(s) <= 7
        steps.append(s)
        rows.append(o)
    assert np.array_equal(np.concatenate(steps), ref.out_step[:ref.rows])
    assert np.array_equal(np.concatenate(rows), ref.out[:ref.rows])
