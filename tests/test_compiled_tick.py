"""The compiled tick (plant_models/run/compiled.py) gives the Python stepper's states bit for bit.

Two servers of the same plant and config take the same ticks with the same
inputs, one as one compiled call per tick, the other through the Python
stepper (``Loop.choose_tick_path("python")``): ZeroMQ command rows and
queued inputs, a command watchdog that trips, holds, ramps and recovers, a
scenario played to its end and handed back to commands, CAN frames in and
out (with a watchdog trip on stale messages), every signal fault kind on
inputs and outputs and the clutch faults that take a table row, switched
on and off between ticks (with commands, a scenario's end).  Their plant
buffers, state rings, command queues and watchdog states are compared byte
for byte.  The loop reports which path it takes and why.
"""

from __future__ import annotations

import numpy as np
import pytest

from io_adapters.base import Adapter, create_adapter
from plant_models.registry import load_plant
from plant_models.run import stages
from plant_models.run.stages import AFTER, Stage
from server.offline.scenario import BLOCK, load_scenario
from server.realtime.loop_config import LoopConfig
from server.realtime.runtime import assemble
from server.realtime.watchdog import RAMP, SAFE, WatchdogConfig
from server.testbench.local_server import FREE_ENDPOINTS


def _server(path: str, zmq: bool = True, watchdog: WatchdogConfig | None = None, plant: str = "powershift"):
    adapters = [create_adapter("zmq", "zmq", dict(FREE_ENDPOINTS))] if zmq else []
    srv = assemble(load_plant(plant), adapters, LoopConfig(mode="lockstep", rate_hz=1000.0, status_interval_s=0.0),
                   watchdog)
    srv.open()
    srv.loop.choose_tick_path(path)
    return srv


@pytest.fixture
def pair(request):
    """Two servers (compiled, Python); an indirect parameter gives their options."""
    opts = getattr(request, "param", {})
    servers = [_server("auto", **opts), _server("python", **opts)]
    yield servers
    for s in servers:
        s.close()


def _same(a, b) -> None:
    la, lb = a.loop, b.loop
    assert la.tick == lb.tick
    assert la.plant.df.tobytes() == lb.plant.df.tobytes()
    assert la.plant.di.tobytes() == lb.plant.di.tobytes()
    assert la.ring.ints[:, 0:1].tobytes() == lb.ring.ints[:, 0:1].tobytes()  # row numbers
    assert la.ring.floats.tobytes() == lb.ring.floats.tobytes()
    ia, ib = la.ring.ints.copy(), lb.ring.ints.copy()
    ia[:, 2] = ib[:, 2] = 0  # the tick's clock column: simulated time in lockstep, equal, but compared above
    assert ia.tobytes() == ib.tobytes()
    assert la.tick_info.tobytes() == lb.tick_info.tobytes()
    assert la.watchdog.w.tobytes() == lb.watchdog.w.tobytes()
    for name in ("held", "cur", "cur_rate", "max_rate"):
        assert getattr(la.watchdog, name).tobytes() == getattr(lb.watchdog, name).tobytes()


def _command(srv, seq: int, values: dict[str, float]) -> None:
    """A validated command handed to the tick, as the ZeroMQ adapter's decoder hands it over."""
    plant = srv.loop.plant
    idx = np.array([plant.input_index(k) for k in values], dtype=np.int64)
    val = np.array(list(values.values()), dtype=float)
    assert srv.loop.adapters[0].rows.put(seq, idx, val, len(idx))


def _float_inputs(plant) -> list:
    return [s for s in plant.inputs if not s.integer and s.hi > s.lo]


def test_the_loop_reports_its_path_and_why(pair):
    fast, slow = pair
    status = fast.control.handle({"cmd": "status"})["status"]
    assert fast.loop.tick_path == "compiled" and status["tick_path"] == "compiled" and status["python_ticks"] == 0
    assert slow.loop.tick_path == "python" and "chosen" in slow.loop.tick_path_reason
    fast.loop.set_fault({"target": "signal", "signal": fast.loop.plant.outputs[0].name, "kind": "offset",
                         "value": 1.0})
    assert fast.loop.tick_path == "compiled"  # signal faults have compiled stages
    names = [s.stage for s in fast.loop.compiled_tick.stages]
    order = [names.index(s) for s in ("inputs", "fault_inputs", "fault_outputs", "state_row", "fault_restore")]
    assert order == sorted(order) and fast.loop.compiled_tick.plan[2] == 3  # the last three after the step
    fast.loop.clear_fault()
    assert fast.loop.tick_path == "compiled" and "fault_inputs" not in [s.stage for s in fast.loop.compiled_tick.stages]


def test_commands_and_queued_inputs_give_the_python_states_bit_for_bit(pair):
    plant = pair[0].loop.plant
    ins = _float_inputs(plant)[:3]
    rng = np.random.default_rng(7)
    for block in range(12):
        vals = {s.name: float(rng.uniform(s.lo, s.lo + 0.3 * (s.hi - s.lo))) for s in ins}
        for srv in pair:
            if block % 3 != 2:
                _command(srv, 100 + block, vals)
                _command(srv, 0, dict(list(vals.items())[:1]))  # a second row in the same tick, no seq
            if block % 4 == 1:
                idx = np.array([plant.input_index(ins[-1].name)], dtype=np.int64)
                srv.loop.queue_inputs(idx, np.array([ins[-1].lo]), 1)
            srv.loop.step(1 + block % 5)
        _same(*pair)
    fast, slow = pair
    assert fast.loop.python_ticks == 0 and fast.loop.tick > 30
    rows_f, rows_s = fast.loop.adapters[0].rows, slow.loop.adapters[0].rows
    assert rows_f.q.tobytes() == rows_s.q.tobytes() and rows_f.applied == rows_s.applied == 16
    assert fast.loop.watchdog.armed  # the commands fed it in both


@pytest.mark.parametrize("pair", [{"watchdog": WatchdogConfig(timeout_s=0.004, hold_s=0.005, ramp_s=0.012,
                                                               modes=("lockstep",))}], indirect=True)
def test_a_watchdog_trip_gives_the_python_states_bit_for_bit(pair):
    plant = pair[0].loop.plant
    vals = {s.name: s.lo + 0.5 * (s.hi - s.lo) for s in _float_inputs(plant)}
    phases = []
    for srv in pair:
        _command(srv, 1, vals)
        srv.loop.step(1)
    for _ in range(30):  # silence: trip after 4 ms, hold 5 ms, ramp 12 ms, then safe
        for srv in pair:
            srv.loop.step(1)
        _same(*pair)
        phases.append(pair[0].loop.watchdog.phase)
    assert RAMP in phases and phases[-1] == SAFE
    for srv in pair:  # a command recovers it ("auto")
        _command(srv, 2, vals)
        srv.loop.step(3)
    _same(*pair)
    wd = pair[0].loop.watchdog
    assert wd.trips == 1 and wd.recoveries == 1 and not wd.tripped
    assert pair[0].loop.python_ticks == 0


def test_a_scenario_goes_through_the_stepper_and_hands_back_to_the_compiled_tick(pair):
    sc = load_scenario("powershift_single_swap")
    for srv in pair:
        srv.control._install_scenario(sc, None)
    n = pair[0].loop.player.loaded.n_steps
    for srv in pair:
        srv.loop.step(n // 2)
    _same(*pair)
    for srv in pair:
        srv.loop.step(n - n // 2 + 20)
    _same(*pair)
    fast = pair[0].loop
    # compiled but for the ticks that refill the table (a block of 4096 steps, no prefetch in lockstep), the
    # first (its table filled by the reset) and the last (the release)
    blocks = (n - 1) // BLOCK
    assert fast.tick_path == "compiled" and fast.python_ticks == blocks + 1
    plant = fast.plant
    vals = {s.name: s.lo for s in _float_inputs(plant)[:2]}
    for srv in pair:  # commands drive the inputs again after the hand-back
        _command(srv, 5, vals)
        srv.loop.step(5)
    _same(*pair)
    assert fast.python_ticks == blocks + 1


@pytest.mark.parametrize("prefetch", [False, True], ids=["refill", "prefetch"])
def test_a_long_scenario_over_table_blocks_gives_the_python_states_bit_for_bit(pair, prefetch):
    """9 s at 1 ms: three table blocks, refilled in the tick (lockstep) or prefetched between ticks (as the
    realtime loop does in its slack) and swapped in the tick."""
    from server.offline.scenario import parse_scenario

    sc = parse_scenario({"duration_s": 9.0, "dt_s": 0.001, "interpolation": "linear",
                         "inputs": {"engine_torque": 300.0, "load_torque": 3500.0, "p_c3": 16.0, "p_c6": 16.0,
                                    "p_c1": [[0.0, 16.0], [4.0, 16.0], [4.2, 0.0], [8.5, 0.0]],
                                    "p_c2": [[0.0, 0.0], [4.0, 0.0], [4.2, 16.0], [8.5, 16.0]]}}, "<test>")
    for srv in pair:
        srv.control._install_scenario(sc, None)
    n = pair[0].loop.player.loaded.n_steps
    assert n == 9000 and n > 2 * BLOCK
    for _ in range(10):
        for srv in pair:
            if prefetch:
                srv.loop.player.prefetch(srv.loop.tick, 10**12)
            srv.loop.step(1000)
        _same(*pair)
    fast = pair[0].loop
    assert fast.player.active is None and fast.tick == 10000
    assert fast.python_ticks == 3  # two refills or two swaps, and the release
    assert (fast.player.prefetches == 2) == prefetch


def test_a_stage_without_a_compiled_form_takes_the_python_path(monkeypatch):
    probe = Stage("probe", AFTER, "records steps", make=lambda stepper: (lambda k: None))
    at = stages.stage_names().index("state_row")
    monkeypatch.setattr(stages, "STAGES", stages.STAGES[:at] + (probe,) + stages.STAGES[at:])
    srv = _server("auto", zmq=False)
    try:
        assert srv.loop.tick_path == "python" and "probe" in srv.loop.tick_path_reason
    finally:
        srv.close()


class _PythonReader(Adapter):
    type_name = "python_reader"

    def _read_internal(self, tick, now_ns, drive):
        return 0

    def close(self):
        pass


def test_an_adapter_without_a_compiled_read_takes_the_python_path():
    srv = assemble(load_plant("powershift"), [_PythonReader("r", {})],
                   LoopConfig(mode="lockstep", rate_hz=1000.0, status_interval_s=0.0))
    srv.open()
    try:
        assert srv.loop.tick_path == "python" and "r (_PythonReader) has no compiled read" in srv.loop.tick_path_reason
        srv.loop.step(3)
        assert srv.loop.tick == 3
    finally:
        srv.close()


def _can_server(path: str):
    import uuid

    from io_adapters.can.adapter import CanAdapter

    adapter = CanAdapter("can", {"interface": "virtual", "channel": f"ctick-{uuid.uuid4().hex[:8]}"})
    srv = assemble(load_plant("powershift"), [adapter], LoopConfig(mode="lockstep", rate_hz=1000.0,
                                                                   status_interval_s=0.0),
                   WatchdogConfig(timeout_s=0.02, hold_s=0.005, ramp_s=0.01, modes=("lockstep",)))
    srv.open()
    # lockstep sends the frames in the tick (from Python): no compiled write
    assert srv.loop.tick_path == "python" and "can (CanAdapter) has no compiled write" in srv.loop.tick_path_reason
    adapter._queue_tx = True  # as in realtime: frames queued by the tick, sent between ticks (no peer here)
    srv.loop.choose_tick_path(path)
    return srv


def test_can_commands_and_frames_give_the_python_states_bit_for_bit():
    import can
    import cantools

    from io_adapters.can.e2e import E2EEncoder
    from can_support import ROOT

    dbc = cantools.database.load_file(str(ROOT / "configs" / "powershift.dbc"))
    msg = dbc.get_message_by_name
    values = {0x100: {"PressureCmd_C1": 16.0, "PressureCmd_C2": 0.0, "PressureCmd_C3": 16.0, "PressureCmd_C4": 0.0},
              0x101: {"PressureCmd_C5": 0.0, "PressureCmd_C6": 16.0, "PressureCmd_C7": 0.0, "PressureCmd_C8": 0.0},
              0x110: {"EngineTorque": 100.0}}
    pair = [_can_server("auto"), _can_server("python")]
    try:
        assert pair[0].loop.tick_path == "compiled" and pair[1].loop.tick_path == "python"
        encoders = [{0x100: E2EEncoder(msg("TCU_ClutchCmdA"), "ClutchCmdA_CRC", "ClutchCmdA_Counter", 0x0100),
                     0x101: E2EEncoder(msg("TCU_ClutchCmdB"), "ClutchCmdB_CRC", "ClutchCmdB_Counter", 0x0101),
                     0x110: E2EEncoder(msg("ENG_Torque"), "EngTorque_CRC", "EngTorque_Counter", 0x0110)}
                    for _ in pair]
        for k in range(120):
            for srv, enc in zip(pair, encoders):
                if k < 40 and k % 10 == 0 or k >= 90 and k % 10 == 0:  # silence from 40 to 90: the watchdog trips
                    for fid, e in enc.items():
                        srv.loop.adapters[0]._on_frame(can.Message(arbitration_id=fid, is_extended_id=False,
                                                                   data=e.encode(values[fid])))
                srv.loop._tick(srv.loop.sim_ns())  # one tick, without the lockstep request's pump
            _same(*pair)
            a, b = (srv.loop.adapters[0] for srv in pair)
            assert a.codec.ci.tobytes() == b.codec.ci.tobytes() and a.codec.cf.tobytes() == b.codec.cf.tobytes()
            assert a._txq_state.tobytes() == b._txq_state.tobytes() and a._txq_data.tobytes() == b._txq_data.tobytes()
        wd = pair[0].loop.watchdog
        assert wd.trips == 1 and wd.recoveries == 1 and pair[0].loop.python_ticks == 0
        assert pair[0].loop.adapters[0]._txq_state[0] > 0  # the ticks queued frames (the queue's head)
    finally:
        for srv in pair:
            srv.close()


def test_a_realtime_run_takes_the_compiled_tick():
    srv = assemble(load_plant("chain"), [], LoopConfig(mode="realtime", rate_hz=1000.0, duration_s=0.05,
                                                       status_interval_s=0.0))
    srv.open()
    try:
        assert srv.loop.tick_path == "compiled"
        srv.run()
    finally:
        srv.close()
    status = srv.report.status()
    assert status["tick_path"] == "compiled" and status["python_ticks"] == 0 and srv.loop.tick > 0
    assert srv.loop.ring.written == srv.loop.tick  # every compiled tick wrote its ring row


def test_a_realtime_run_of_a_scenario_gives_the_lockstep_states_bit_for_bit():
    """The realtime loop's own tick path: the compiled call, the tick it declines (the scenario's release, its
    last tick) taken by the Python stepper, the tick count kept after the call; the run stops when the scenario
    has ended (no watchdog: the inputs hold after it, as in lockstep)."""
    sc = load_scenario("powershift_single_swap")
    rt = assemble(load_plant("powershift"), [], LoopConfig(mode="realtime", rate_hz=1000.0, duration_s=60.0,
                                                           status_interval_s=0.0), WatchdogConfig(enabled=False))
    loop, release = rt.loop, rt.loop.player.release

    def release_and_stop(tick: int) -> None:
        release(tick)
        loop.request_shutdown("the scenario ended")

    loop.player.release = release_and_stop
    rt.open()
    try:
        rt.control._install_scenario(sc, None)
        rt.run()
    finally:
        rt.close()
    ticks = loop.tick
    assert loop.stop_reason == "the scenario ended" and ticks >= loop.player.loaded.n_steps
    assert loop.ring.written == ticks and loop.tick_path == "compiled" and loop.python_ticks == 1
    ls = _server("python", zmq=False)
    try:
        ls.control._install_scenario(sc, None)
        ls.loop.step(ticks)
        assert ls.loop.tick == ticks and ls.loop.player.active is None
        assert loop.plant.df.tobytes() == ls.loop.plant.df.tobytes()
        assert loop.plant.di.tobytes() == ls.loop.plant.di.tobytes()
        assert loop.ring.floats.tobytes() == ls.loop.ring.floats.tobytes()
        assert loop.ring.ints[:, 0:2].tobytes() == ls.loop.ring.ints[:, 0:2].tobytes()
    finally:
        ls.close()


# every kind of fault that takes a signal-table row, on an input and on an output (the clutch faults on outputs)
SIGNAL_FAULTS = [
    {"target": "signal", "signal": "p_c1", "kind": "force", "value": 12.5},
    {"target": "signal", "signal": "p_c3", "kind": "freeze"},
    {"target": "signal", "signal": "engine_torque", "kind": "offset", "value": 40.0},
    {"target": "signal", "signal": "p_c6", "kind": "gain", "value": 0.7},
    {"target": "signal", "signal": "engine_torque", "kind": "noise", "value": 25.0, "seed": 11},
    {"target": "signal", "signal": "p_c2", "kind": "dropout"},
    {"target": "signal", "signal": "p_c4", "kind": "dropout", "mode": "last"},
    {"target": "signal", "signal": "p_c3", "kind": "offset", "value": 60.0},  # clamped to the input's range
    {"target": "signal", "signal": "w_out", "kind": "force", "value": 3.0},
    {"target": "signal", "signal": "w_1", "kind": "freeze"},
    {"target": "signal", "signal": "w_out", "kind": "offset", "value": -2.5},
    {"target": "signal", "signal": "torque_c3", "kind": "gain", "value": 1.5},
    {"target": "signal", "signal": "w_2", "kind": "noise", "value": 0.5, "seed": 3},
    {"target": "signal", "signal": "slip_c1", "kind": "dropout"},
    {"target": "signal", "signal": "energy_c6", "kind": "dropout", "mode": "last"},
    {"target": "clutch", "clutch": 2, "kind": "pressure_bias", "value": 1.5},
    {"target": "clutch", "clutch": "C6", "kind": "stuck_closed"},
]


def _signal_fault_id(f: dict) -> str:
    return f"{f['target']}-{f.get('signal', f.get('clutch'))}-{f['kind']}-{f.get('mode', '')}"


@pytest.mark.parametrize("fault", SIGNAL_FAULTS, ids=_signal_fault_id)
def test_each_signal_fault_kind_gives_the_python_states_bit_for_bit(pair, fault):
    plant = pair[0].loop.plant
    ins = _float_inputs(plant)
    rng = np.random.default_rng(3)
    for block in range(10):
        vals = {s.name: float(rng.uniform(s.lo, s.lo + 0.4 * (s.hi - s.lo))) for s in ins[:3]}
        vals["p_c3"], vals["p_c6"], vals["engine_torque"] = 16.0, 16.0, 200.0 + 10 * block
        for srv in pair:
            if block == 2:
                srv.loop.set_fault(dict(fault))
            if block == 7:
                srv.loop.clear_fault()
            _command(srv, 10 + block, vals)
            srv.loop.step(3 + block % 4)
        _same(*pair)
        assert pair[0].loop.faults.ff.tobytes() == pair[1].loop.faults.ff.tobytes()
        assert pair[0].loop.faults.fi.tobytes() == pair[1].loop.faults.fi.tobytes()
        if 2 <= block < 7:
            assert pair[0].loop.faults.n_signal == 1 and pair[0].loop.tick_path == "compiled"
    assert pair[0].loop.python_ticks == 0


def test_several_faults_switched_at_ticks_give_the_python_states_bit_for_bit(pair):
    """Faults stacked on one signal, set and cleared one by one at different ticks, beside commands and
    queued inputs; a clutch fault on the physics (no table row) among them."""
    plant = pair[0].loop.plant
    switches = {3: ("set", SIGNAL_FAULTS[2]), 5: ("set", SIGNAL_FAULTS[4]), 6: ("set", SIGNAL_FAULTS[10]),
                8: ("set", SIGNAL_FAULTS[8]), 9: ("set", {"target": "clutch", "clutch": 3, "kind": "worn",
                                                          "value": 0.5}),
                11: ("clear", "signal:engine_torque:offset"), 12: ("set", SIGNAL_FAULTS[12]), 14: ("clear", None),
                15: ("set", SIGNAL_FAULTS[1])}
    vals = {"p_c3": 16.0, "p_c6": 16.0, "engine_torque": 250.0, "load_torque": 100.0}
    for tick in range(18):
        for srv in pair:
            what = switches.get(tick)
            if what and what[0] == "set":
                srv.loop.set_fault(dict(what[1]))
            elif what:
                srv.loop.clear_fault(what[1])
            if tick % 2 == 0:
                _command(srv, 50 + tick, dict(vals, engine_torque=250.0 + 5 * tick))
            if tick % 5 == 1:
                srv.loop.queue_inputs(np.array([plant.input_index("p_c1")], dtype=np.int64), np.array([4.0]), 1)
            srv.loop.step(2)
        _same(*pair)
        assert pair[0].loop.faults.ff.tobytes() == pair[1].loop.faults.ff.tobytes()
    assert pair[0].loop.python_ticks == 0 and pair[0].loop.faults.n_signal == 1


def test_a_scenario_with_faults_ends_through_the_stepper_bit_for_bit(pair):
    """A scenario played under an input fault and an output fault: its last tick (the hand-back after the
    commanded inputs are restored) goes through the stepper, every other through the compiled tick."""
    sc = load_scenario("powershift_single_swap")
    for srv in pair:
        srv.control._install_scenario(sc, None)
        srv.loop.set_fault(dict(SIGNAL_FAULTS[3]))  # gain on p_c6
        srv.loop.set_fault(dict(SIGNAL_FAULTS[10]))  # offset on w_out
    n = pair[0].loop.player.loaded.n_steps
    for srv in pair:
        srv.loop.step(n // 3)
    _same(*pair)
    for srv in pair:
        srv.loop.step(n - n // 3 + 10)
    _same(*pair)
    fast = pair[0].loop
    assert fast.player.active is None and fast.tick_path == "compiled"
    assert fast.python_ticks == (n - 1) // BLOCK + 1


def test_the_rehearsal_before_a_deadline_changes_nothing_the_tick_reads(pair):
    """The sleep_spin wait's rehearsal (the compiled tick's call on a scratch plan, with a fault row in use
    and commands pending) between every tick of one server: both still agree bit for bit, and the rehearsal
    steps the plant on its scratch copies (their time moves on)."""
    fast = pair[0].loop
    ct = fast.compiled_tick
    assert ct is not None and ct.dry_plan[1] == 1 and ct.dry_plan[2] == 0  # one stage (the warm stage), none after
    vals = {"p_c3": 16.0, "p_c6": 16.0, "engine_torque": 300.0}
    for tick in range(12):
        for srv in pair:
            if tick == 4:
                srv.loop.set_fault(dict(SIGNAL_FAULTS[2]))  # the stages change: the rehearsal is made again
            _command(srv, 70 + tick, dict(vals, engine_torque=300.0 + tick))
        for _ in range(3):
            fast.compiled_tick.rehearse(fast.tick, 0, fast.dt)
            fast.waiter._rehearse(0)
        for srv in pair:
            srv.loop.step(2)
        _same(*pair)
    ct = fast.compiled_tick
    t_at = fast.plant.time_index()
    before = fast.plant.df.tobytes()
    ct.rehearse(fast.tick, 0, fast.dt)
    assert fast.plant.df.tobytes() == before
    assert ct._dry_df[t_at] == fast.plant.df[t_at] + fast.dt  # the rehearsed step went one step further
    assert "fault_inputs" in [s.stage for s in ct.stages] and fast.python_ticks == 0
