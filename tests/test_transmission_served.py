"""The 8-speed automatic served like every plant: lockstep over ZeroMQ equals the offline run bit for bit.

A lockstep server (a subprocess on free loopback ports) serves configs/zf8hp.toml;
the client loads scenarios/zf8hp_shifts.toml and steps it through in chunks; at
every chunk boundary the served outputs equal, bit for bit, those of the same
scenario run offline in this process (`run_offline`), through all 14 shifts.
A snapshot taken before a shift and restored repeats the shift bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

from plant_models.registry import load_plant
from server.offline.scenario import load_scenario
from server.offline.run import run_offline
from server_support import ServerProcess

CHUNK = 500


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    srv = ServerProcess(tmp_path_factory.mktemp("zf8hp_lockstep"), plant="zf8hp", mode="lockstep")
    yield srv
    srv.shutdown()


def test_the_served_8hp_equals_the_offline_run_bit_for_bit(served):
    plant = load_plant("zf8hp")
    offline = run_offline(plant, load_scenario("zf8hp_shifts").compile(plant))
    with served.client() as hil:
        names = hil.output_names
        assert names == list(offline.names)
        info = hil.load_scenario("zf8hp_shifts")
        n = info["n_steps"]
        assert n == offline.values.shape[0] - 1
        y0 = hil.get()["y"]
        assert np.array_equal(np.array([y0[nm] for nm in names]), offline.values[0])
        k = 0
        while k < n:
            r = hil.step(min(CHUNK, n - k))
            k = r.tick
            got = np.array([r.y[nm] for nm in names])
            want = offline.values[k]
            bad = [nm for nm, a, b in zip(names, got, want) if a.view(np.int64) != b.view(np.int64)]
            assert not bad, f"tick {k}: lockstep differs from the offline run in {bad}"
        assert r.scenario_finished is True
        assert r.y["gear"] == 1.0


def test_a_snapshot_of_the_8hp_mid_shift_continues_bit_exactly():
    """Save in 3rd gear at 2.9 s, run through the 3 -> 4 swap (E off, D on) and back: the same rows."""
    from plant_models.offline import Run
    from server.realtime.snapshots import from_bytes, to_bytes

    plant = load_plant("zf8hp")
    sc = load_scenario("zf8hp_shifts").compile(plant, 0.001)
    plant.reset(sc.start_inputs())
    run = Run(plant, sc.table, sc.dt, sc.n_steps)
    run.advance(2900)
    snap = run.snapshot()
    run.advance(1000)
    first = run.out[2901:3901].copy()
    df_end = plant.df.copy()
    run.restore(from_bytes(to_bytes(snap)))
    run.advance(1000)
    assert np.array_equal(run.out[2901:3901], first)
    assert np.array_equal(plant.df, df_end)
    gear = first[:, plant.output_index("gear")]
    assert gear[0] == 3.0 and gear[-1] == 4.0  # the swap is inside the compared window
