"""The open loop's fused loop (plant_models/offline_stages.py ``run_table_events_row``): chosen from the stage list
for exactly its stage sequence, equal to the generic loop over the stages' addresses bit for bit, kept in numba's
cache; and the input table's values kept for the next step (``write_inputs_kept``), equal to ``write_inputs``'s."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from numba import njit

from plant_models.config import repo_root
from plant_models.core.api import raw_f, raw_i
from plant_models.input_table import InputTable, write_inputs, write_inputs_kept
from plant_models.offline import Run, event_room
from plant_models.offline_stages import run_table_events_row
from plant_models.registry import load_plant
from plant_models.run import stages
from plant_models.run.compiled import CompiledStage
from plant_models.run.offline_compiled import run_compiled
from plant_models.run.stages import AFTER, BEFORE, Stage
from server.offline.run import run_offline
from server.offline.scenario import load_scenario

ROOT = repo_root()
CASES = [("powershift", "powershift_swaps"), ("dct", "dct_upshift"), ("chain", "chain_4mass")]


def run_with(loop, config: str, scenario: str, every: int = 1, chunk: int | None = None, room: int | None = None):
    """A whole :class:`Run` of ``scenario`` on a fresh ``config`` plant through ``loop`` (None: the plan's own);
    returns the run, its plan's loop before any override, and the plant's state after it."""
    plant = load_plant(ROOT / "configs" / f"{config}.toml")
    compiled = load_scenario(ROOT / "scenarios" / f"{scenario}.toml").compile(plant)
    plant.reset(compiled.initial_inputs())
    plant.new_events()
    run = Run(plant, compiled.table, compiled.dt, compiled.n_steps, every)
    chosen = run.plan.loop
    if loop is not None:
        run.plan.loop = loop
    if room is not None:
        event_room(run, room)  # the room check stops calls: the arrays grow (plan.replace keeps the loop's choice)
        if loop is not None:
            run.plan.loop = loop
    while not run.done:
        run.advance(chunk)
    df, di = plant.get_state()
    return run, chosen, (plant.mf.copy(), df, di)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("every, chunk", [(1, None), (7, 333), (1000, None)])
def test_the_fused_loop_equals_the_generic_loop_bit_for_bit(case, every, chunk):
    fused, chosen, s_fused = run_with(None, *case, every=every, chunk=chunk)
    generic, _, s_generic = run_with(run_compiled, *case, every=every, chunk=chunk)
    assert chosen is run_table_events_row  # the open loop's stages: the plan picks the fused loop
    r = fused.rows
    assert r == generic.rows and r >= 2
    assert fused.out[:r].tobytes() == generic.out[:r].tobytes()
    assert np.array_equal(fused.out_step[:r], generic.out_step[:r])
    assert fused.acc.tobytes() == generic.acc.tobytes()  # rows, events read and collected, lost, status
    assert fused.events() == generic.events()
    for a, b in zip(s_fused, s_generic):  # the plant's whole state after the run, model floats included
        assert a.tobytes() == b.tobytes()


def test_the_fused_loop_stops_for_room_and_goes_on_as_the_generic_loop_does():
    plant = load_plant(ROOT / "configs" / "powershift.toml")
    cap = plant.event_log()[4]
    fused, _, s_fused = run_with(None, "powershift", "powershift_swaps", room=cap + 2)
    generic, _, s_generic = run_with(run_compiled, "powershift", "powershift_swaps", room=cap + 2)
    assert fused.plan.loop is run_table_events_row and fused._ev[0].shape[0] > cap + 2  # it stopped and grew
    assert len(fused.events()) > 2 and fused.events() == generic.events()
    assert fused.out.tobytes() == generic.out.tobytes() and fused.acc.tobytes() == generic.acc.tobytes()
    assert all(a.tobytes() == b.tobytes() for a, b in zip(s_fused, s_generic))


def test_a_stage_planted_in_the_list_or_a_fault_schedule_sends_the_run_through_the_generic_loop(monkeypatch):
    from server.realtime.fault_schedule import FaultSchedule

    plant = load_plant("powershift")
    compiled = load_scenario("powershift_single_swap").compile(plant)
    fault = ({"target": "signal", "signal": "w_out", "kind": "offset", "value": 5.0}, 0.2, 0.4)
    plain = Run(plant, compiled.table, compiled.dt, compiled.n_steps)
    assert plain.plan.loop is run_table_events_row and plain.plan.stages == ("inputs", "step", "events", "row")
    from plant_models.closed_loop import StagedRun

    staged = StagedRun(plant, compiled.table, compiled.dt, compiled.n_steps,
                       faults=FaultSchedule(plant, [fault], compiled.dt))
    assert staged.plan.loop is run_compiled and "fault_outputs" in staged.plan.stages
    # a compiled stage declared in the list (before the step or after it): every run takes it, so no fused loop
    for side, at in ((BEFORE, stages.stage_names().index("step")), (AFTER, stages.stage_names().index("step") + 1)):
        noop = Stage("noop", side, "does nothing", make_compiled=lambda plan: CompiledStage.of(
            "noop", run_compiled_noop(), (np.zeros(1),)))
        monkeypatch.setattr(stages, "STAGES", stages.STAGES[:at] + (noop,) + stages.STAGES[at:])
        run = Run(plant, compiled.table, compiled.dt, compiled.n_steps)
        assert "noop" in run.plan.stages and run.plan.loop is run_compiled
        monkeypatch.undo()


def run_compiled_noop():
    from numba import cfunc

    from plant_models.run.compiled import STAGE_SIGNATURE

    @cfunc(STAGE_SIGNATURE)
    def noop(ctx, k, now_ns, dt, carry):
        return 0
    return noop


def test_run_offline_goes_through_the_fused_loop_and_equals_the_stepwise_run():
    from server.offline.run import run_stepwise

    plant = load_plant("dct")
    compiled = load_scenario("dct_upshift").compile(plant)
    ref = run_stepwise(plant, compiled)
    got = run_offline(plant, compiled)
    assert got.values.tobytes() == ref.values.tobytes() and got.events == ref.events


PROBE = """
import json
from plant_models import offline
from plant_models.offline_stages import run_table_events_row
from plant_models.run.offline_compiled import run_compiled
offline.warm_up()
print(json.dumps({f.__name__: [len(f.stats.cache_hits), len(f.stats.cache_misses)]
                  for f in (run_compiled, run_table_events_row)}))
"""


def test_the_fused_loop_loads_from_numbas_cache_in_a_new_process():
    """No per-configuration code: the fused loop is one cached function; a second process loads it, compiling
    nothing (the first may compile it, if this tree's sources changed since the cache was written)."""
    for attempt in range(2):
        out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=True)
        stats = json.loads(out.stdout.strip().splitlines()[-1])
    assert stats == {"run_compiled": [1, 0], "run_table_events_row": [1, 0]}, stats


@njit
def _both(kind, times, values, dt, ks, kept, kept_k):
    """Rows of (values, rates, changed) of ``write_inputs`` and of ``write_inputs_kept`` at the steps ``ks`` in turn,
    each on its own df (the kept values carried along ``ks``)."""
    n_in = kind.shape[0]
    a, b = np.zeros(2 * n_in), np.zeros(2 * n_in)
    ra, rb = np.empty((ks.shape[0], 2 * n_in + 1)), np.empty((ks.shape[0], 2 * n_in + 1))
    pk, pt, pv = raw_i(kind), raw_f(times), raw_f(values)
    for q in range(ks.shape[0]):
        ca = write_inputs(pk, n_in, pt, pv, dt, ks[q], raw_f(a), 0)
        cb = write_inputs_kept(pk, n_in, pt, pv, dt, ks[q], raw_f(b), 0, raw_f(kept), raw_i(kept_k))
        ra[q, :2 * n_in], rb[q, :2 * n_in] = a, b
        ra[q, 2 * n_in], rb[q, 2 * n_in] = 1.0 if ca else 0.0, 1.0 if cb else 0.0
    return ra, rb


@pytest.mark.parametrize("seed", range(4))
def test_the_kept_input_values_are_write_inputs_values_bit_for_bit(seed):
    """Points on the step grid (a point at t_k+1: no value kept), jumps (two points at one time), points between
    grid times, sines, constants, integer steps; steps in order, then again from earlier steps (a restored
    snapshot) and skipping ahead."""
    rng = np.random.default_rng(seed)
    dt = 1e-3
    table = InputTable(10)
    for i in range(10):
        kind = i % 5
        if kind == 0:
            table.set_const(i, float(rng.normal()))
        elif kind == 1:
            table.set_sine(i, float(rng.normal()), float(rng.normal()), float(rng.uniform(0, 20)),
                           float(rng.uniform(-3, 3)), bool(rng.integers(2)))
        elif kind == 2:  # on the grid, with jumps
            ts = np.sort(rng.integers(0, 300, 6) * dt)
            ts = np.sort(np.concatenate([ts, ts[:2]]))
            table.set_points(i, ts, rng.normal(size=ts.shape[0]), integer=False, first_order_hold=True)
        elif kind == 3:
            ts = np.sort(rng.uniform(0, 0.3, 7))
            table.set_points(i, ts, rng.normal(size=7), integer=False, first_order_hold=bool(rng.integers(2)))
        else:
            ts = np.sort(rng.integers(0, 300, 5) * dt)
            table.set_points(i, ts, rng.integers(0, 5, 5).astype(float), integer=True, first_order_hold=True)
    kind, times, values = table.arrays()
    ks = np.concatenate([np.arange(0, 320), np.arange(100, 200), np.arange(150, 160), np.arange(400, 410),
                         np.arange(5, 8)]).astype(np.int64)
    kept, kept_k = np.zeros(10), np.full(10, -1, dtype=np.int64)
    ref, got = _both(kind, times, values, dt, ks, kept, kept_k)
    assert ref.tobytes() == got.tobytes()
    kept, kept_k = np.zeros(10), np.full(10, -1, dtype=np.int64)
    ref, got = _both(kind, times, values, dt, np.arange(0, 500), kept, kept_k)
    assert ref.tobytes() == got.tobytes()
    assert (kept_k <= -2).sum() >= 4  # the tables of points past their last point: their last value kept
    ref, got = _both(kind, times, values, dt, np.arange(499, -1, -1), kept, kept_k)  # back, a step at a time
    assert ref.tobytes() == got.tobytes()
    kept, kept_k = np.zeros(10), np.full(10, -1, dtype=np.int64)
    ref, got = _both(kind, times, values, dt, np.arange(0, 150), kept, kept_k)
    assert (kept_k >= 0).sum() >= 2  # values kept for the next step (sines, points between grid times)
