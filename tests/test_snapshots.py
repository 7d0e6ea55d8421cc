"""Snapshots: save -> run 2 s -> restore -> run 2 s gives bit-identical traces, offline, lockstep, realtime-paused.

The snapshot holds the whole simulation state (plant data and model floats,
tick, scenario position, faults with their held values and noise streams,
watchdog), so the run after a restore repeats the run after the save bit for
bit, faults included.  Files are read and written only inside the configured
folder, bounded in size; a bad request is refused in one line and changes
nothing.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from io_adapters.zmq.client import ServerError
from plant_models.errors import SnapshotError
from plant_models.offline import Run
from plant_models.registry import load_plant
from server.loop_config import LoopConfig
from server.runtime import assemble
from server.scenario import load_scenario
from server.snapshots import SnapshotStore, from_bytes, to_bytes

from server_support import ServerProcess

TWO_S = 2000  # ticks at 1 kHz
FAULTS = [
    {"target": "signal", "signal": "w_out", "kind": "noise", "value": 0.3, "seed": 11},
    {"target": "signal", "signal": "p_c2", "kind": "offset", "value": 0.5},
    {"target": "clutch", "clutch": 2, "kind": "worn", "value": 0.8},
]


def test_an_offline_run_continues_bit_exactly_after_a_restore():
    plant = load_plant("powershift")
    sc = load_scenario("powershift_single_swap").compile(plant, 0.001)
    plant.reset(sc.start_inputs())
    run = Run(plant, sc.table, sc.dt, sc.n_steps)
    run.advance(700)
    snap = run.snapshot()
    run.advance(TWO_S)
    first = run.out[701:701 + TWO_S].copy()
    df_end = plant.df.copy()
    run.restore(from_bytes(to_bytes(snap)))  # through the file format too
    run.advance(TWO_S)
    assert np.array_equal(run.out[701:701 + TWO_S], first)
    assert np.array_equal(plant.df, df_end)
    assert np.ptp(first[:, plant.output_index("w_out")]) > 1.0  # the swap happens inside the compared window


def test_an_in_process_loop_with_faults_continues_bit_exactly_after_a_restore(tmp_path):
    plant = load_plant("powershift")
    srv = assemble(plant, [], LoopConfig(mode="lockstep", snapshot_dir=str(tmp_path)))
    lp = srv.loop
    assert srv.control.handle_now({"cmd": "load_scenario", "path": "powershift_single_swap"})["ok"]
    lp.start()
    lp.step(400)
    for f in FAULTS:
        lp.set_fault(f)
    lp.step(100)
    snap = lp.snapshot()
    store = SnapshotStore(tmp_path)
    store.save_file(snap, "mid")

    def run():
        rows = []
        for _ in range(TWO_S):
            lp.step(1)
            rows.append(plant.df.copy())
        return np.array(rows)

    a = run()
    lp.clear_fault()
    lp.restore(snap)
    assert [f["name"] for f in lp.faults.listing()] == ["signal:w_out:noise", "signal:p_c2:offset", "clutch:C2:worn"]
    b = run()
    lp.reset()  # clears the faults and rewinds the scenario: the file must bring all back
    lp.restore(store.load_file("mid"))
    c = run()
    assert np.array_equal(a, b) and np.array_equal(a, c)


def _collect(hil, n):
    states = [hil.recv_state(30.0) for _ in range(n)]
    assert all(s is not None for s in states)
    return states


def test_lockstep_snapshot_restore_over_zmq_is_bit_identical(tmp_path):
    loop = f'snapshot_dir = "{tmp_path / "snaps"}"'
    with ServerProcess(tmp_path, mode="lockstep", loop=loop) as srv:
        with srv.client() as hil:
            hil.subscribe(("state",))
            time.sleep(0.3)
            hil.load_scenario("powershift_single_swap")
            hil.step(400)
            for f in FAULTS:
                hil.set_fault(f)
            hil.step(100)
            _collect(hil, 500)
            assert hil.snapshot_save(name="m")["tick"] == 500
            assert hil.snapshot_save(path="sub/file")["bytes"] > 0
            assert (tmp_path / "snaps" / "sub" / "file.npz").is_file()
            runs = []
            for how in ({"name": "m"}, {"path": "sub/file"}, None):
                hil.step(TWO_S)
                runs.append(_collect(hil, TWO_S))
                if how is not None:
                    rep = hil.snapshot_restore(**how)
                    assert rep["tick"] == 500 and len(rep["faults"]) == 3
            ticks = [s.tick for s in runs[0]]
            assert ticks == list(range(501, 501 + TWO_S))
            for other in runs[1:]:
                assert [s.tick for s in other] == ticks
                assert all(s.faults == 3 for s in other)
                for s0, s1 in zip(runs[0], other):
                    assert s0.y == s1.y and s0.t == s1.t and s0.status_word == s1.status_word


def test_realtime_paused_snapshot_restore_is_bit_identical(tmp_path):
    with ServerProcess(tmp_path, mode="realtime", extra="[watchdog]\nenabled = false") as srv:
        with srv.client() as hil:
            hil.subscribe(("state",))
            time.sleep(0.3)
            hil.load_scenario("powershift_single_swap")  # resets to t = 0; the realtime loop keeps ticking
            for f in FAULTS:
                hil.set_fault(f)
            time.sleep(0.3)
            hil.request("pause")
            k0 = hil.snapshot_save(name="p")["tick"]
            assert k0 > 0

            def run():
                while hil.recv_state(0.2) is not None:  # what was sent before
                    pass
                hil.request("start")
                got = {}
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    s = hil.recv_state(5.0)
                    if s is None:
                        continue
                    if s.tick > k0:
                        got[s.tick] = s
                    if s.tick >= k0 + TWO_S:
                        break
                hil.request("pause")
                return got

            a = run()
            rep = hil.snapshot_restore(name="p")
            assert rep["tick"] == k0
            b = run()
    want = range(k0 + 1, k0 + TWO_S + 1)
    assert all(k in a for k in want) and all(k in b for k in want)  # nothing lost on the stream
    for k in want:
        assert a[k].y == b[k].y and a[k].t == b[k].t and a[k].faults == b[k].faults == 3


def test_bad_snapshot_requests_are_refused_in_one_line_and_change_nothing(tmp_path):
    folder = tmp_path / "snaps"
    plant = load_plant("powershift")
    srv = assemble(plant, [], LoopConfig(mode="lockstep", snapshot_dir=str(folder), snapshot_max_bytes=4096))
    h = srv.control.handle
    srv.loop.start()
    srv.loop.step(10)
    df0 = plant.df.copy()
    folder.mkdir()
    (folder / "junk.npz").write_bytes(b"not a zip")
    (tmp_path / "outside.npz").write_bytes(to_bytes(srv.loop.snapshot()))
    for req, msg in [
        ({"cmd": "snapshot_save", "path": "../outside"}, "outside the snapshot folder"),
        ({"cmd": "snapshot_save", "path": str(tmp_path / "abs")}, "relative to the snapshot folder"),
        ({"cmd": "snapshot_save", "path": "big"}, "more than snapshot_max_bytes"),
        ({"cmd": "snapshot_restore", "path": "../outside"}, "outside the snapshot folder"),
        ({"cmd": "snapshot_restore", "path": "junk"}, "not a readable snapshot file"),
        ({"cmd": "snapshot_restore", "path": "missing"}, "cannot read the snapshot"),
        ({"cmd": "snapshot_restore", "name": "never"}, "no snapshot named 'never'"),
        ({"cmd": "snapshot_save", "name": "a", "path": "b"}, "not both"),
    ]:
        rep = h(req)
        assert not rep["ok"] and msg in rep["error"]["message"], (req, rep)
        assert "\n" not in rep["error"]["message"]
    assert np.array_equal(plant.df, df0) and not (folder / "big.npz").exists()
    # a snapshot of this plant with a part missing or of the wrong shape
    good = srv.loop.snapshot()
    for broken in ({k: v for k, v in good.items() if k != "watchdog"},
                   {**good, "loop": {**good["loop"], "queued_idx": np.zeros(3, dtype=np.int64)}},
                   {**good, "faults": {**good["faults"], "active": [{"target": "signal", "signal": "nope",
                                                                     "kind": "freeze"}]}}):
        srv.loop.step(3)
        df1, tick1 = plant.df.copy(), srv.loop.tick
        with pytest.raises(Exception, match="damaged snapshot|no signal 'nope'"):
            srv.loop.restore(broken)
        assert np.array_equal(plant.df, df1) and srv.loop.tick == tick1
    # a snapshot of another plant does not fit
    other = assemble(load_plant("dct"), [], LoopConfig(mode="lockstep"))
    with pytest.raises(Exception, match="not of this powershift plant"):
        srv.loop.restore(other.loop.snapshot())
    # files are off without a folder
    bare = assemble(load_plant("powershift"), [], LoopConfig(mode="lockstep"))
    rep = bare.control.handle({"cmd": "snapshot_save", "path": "x"})
    assert not rep["ok"] and "snapshot_dir" in rep["error"]["message"]


def test_a_snapshot_of_another_format_is_refused_with_its_version_and_each_part_checks_its_own():
    plant = load_plant("powershift")
    srv = assemble(plant, [], LoopConfig(mode="lockstep"))
    srv.loop.start()
    srv.loop.step(5)
    good = srv.loop.snapshot()
    assert set(good) == {"format", "plant", "loop", "scenario", "faults", "watchdog"} and good["format"] == 1
    with pytest.raises(SnapshotError, match="^a snapshot of format 2; this server reads format 1$"):
        srv.loop.restore({**good, "format": 2})
    with pytest.raises(SnapshotError, match="^f.npz: a snapshot of format 2; this server reads format 1$"):
        from_bytes(to_bytes({**good, "format": 2}), "f.npz")
    # each part refuses a damaged state of its own before any part changes
    df0, tick0 = plant.df.copy(), srv.loop.tick
    for part, key, bad in (("watchdog", "cur", np.zeros(1)), ("faults", "fi", np.zeros(1)),
                           ("loop", "tick_info", np.zeros(1, dtype=np.int64)), ("plant", "df", np.zeros(1))):
        with pytest.raises(SnapshotError):
            srv.loop.restore({**good, part: {**good[part], key: bad}})
        assert np.array_equal(plant.df, df0) and srv.loop.tick == tick0
    srv.loop.restore(good)
    assert np.array_equal(plant.df, df0)


def test_restore_needs_the_same_scenario_loaded(tmp_path):
    plant = load_plant("powershift")
    srv = assemble(plant, [], LoopConfig(mode="lockstep"))
    srv.loop.start()
    snap = srv.loop.snapshot()
    assert srv.control.handle_now({"cmd": "load_scenario", "path": "powershift_single_swap"})["ok"]
    df0 = plant.df.copy()
    with pytest.raises(Exception, match="no scenario loaded"):
        srv.loop.restore(snap)
    assert np.array_equal(plant.df, df0)


def test_the_client_reports_a_refused_restore(tmp_path):
    with ServerProcess(tmp_path, mode="lockstep") as srv:
        with srv.client() as hil:
            with pytest.raises(ServerError, match="snapshot_dir"):
                hil.snapshot_save(path="x")
