"""Run hints: a compiled offline run tells each step what it will not need (``CompiledPlant.run_hints_slot``).

* Outputs on demand: the Powershift, DCT and described-transmission plants
  write no output port at a step whose outputs the run keeps in no row and
  no controller reads (``RUN_OUTPUTS_UNREAD``), but still do what the next
  step reads (the force law's input bookkeeping).
* The model floats are the previous step's from a call's second step on
  (``RUN_MODEL_SAME``): the core does not compare them there.
* Inputs the previous step's, bit for bit (``RUN_INPUTS_SAME``): the
  described transmission keeps the core's inputs it mapped then and tells
  the core (``RUN_CORE_INPUTS_SAME``), which does not check them again.

What must hold: the rows a run keeps, its events and the plant's whole state
at its end are those of the lockstep sequence, which writes every output of
every step and compares the model at every step, bit for bit; a model changed
between two calls of a run is seen; the hints are cleared when a run returns.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from plant_models.config import repo_root
from plant_models.core import layout as L
from plant_models.offline import InputTable, Run
from plant_models.registry import load_plant
from server.offline.run import run_offline, run_stepwise
from server.offline.scenario import load_scenario

ROOT = repo_root()
CASES = [("zf8hp_car", "zf8hp_car_drive"), ("zf8hp_car_hydraulics", "zf8hp_car_drive"),
         ("zf8hp", "zf8hp_shifts"), ("powershift_hydraulics", "powershift_swaps"), ("dct", "dct_upshift")]


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.int64) if a.dtype == np.float64 else a


def _car_with_its_inputs_held(pedal: float):
    """The 8HP car reset with this pedal, and a table holding every input at its value after the reset."""
    plant = load_plant(ROOT / "configs" / "zf8hp_car.toml")
    plant.reset({"pedal": pedal})
    table = InputTable(plant.n_in)
    for i, v in enumerate(plant.u):
        table.set_const(i, float(v))
    return plant, table


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_run_that_skips_unread_outputs_keeps_the_lockstep_rows_and_state_bit_for_bit(case):
    config, scenario = case
    plant = load_plant(ROOT / "configs" / f"{config}.toml")
    assert plant.skips_unread_outputs  # the plant skips them: the comparison below is not vacuous
    compiled = load_scenario(ROOT / "scenarios" / f"{scenario}.toml").compile(plant, None)
    every = 37
    ref = run_stepwise(plant, compiled)  # every output of every step
    ref_state = plant.get_state()
    got = run_offline(plant, compiled, every=every)
    n = compiled.n_steps
    steps = sorted(set(range(0, n + 1, every)) | {n})
    assert np.array_equal(_bits(got.values), _bits(ref.values[steps]))
    assert got.events == ref.events and len(got.events) > 0
    assert got.status_or == ref.status_or
    for a, b in zip(plant.get_state(), ref_state):
        assert np.array_equal(_bits(a), _bits(b))
    assert plant.di[plant.run_hints_slot()] == 0  # cleared when the run returned


def test_a_step_with_the_flag_set_writes_no_output_but_keeps_the_law_inputs():
    from plant_models.powertrain import engine
    from plant_models.powertrain.components import data_offsets

    plant = load_plant(ROOT / "configs" / "zf8hp_car.toml")
    plant.reset({"pedal": 0.3})
    step = plant.compiled["step"]
    flag = plant.run_hints_slot()
    y0 = plant.y.copy()
    t0 = plant.df[plant.mi[L.DF_TIME]]
    plant.u[[s.name for s in plant.inputs].index("pedal")] = 0.6
    plant.di[flag] = L.RUN_OUTPUTS_UNREAD
    step(plant.mf, plant.mi, plant.df, plant.di, 1e-3)
    plant.di[flag] = 0
    assert plant.df[plant.mi[L.DF_TIME]] == t0 + 1e-3
    assert np.array_equal(_bits(plant.y), _bits(y0))  # the outputs still those before the step
    pedal_end = data_offsets(plant.params.powertrain, plant.core.sizes.n)["engine"] + engine.D_PEDAL_END
    assert plant.df[plant.mi[L.DF_LAW] + pedal_end] == 0.6  # what the next step's reuse test reads
    step(plant.mf, plant.mi, plant.df, plant.di, 1e-3)
    assert not np.array_equal(plant.y, y0)


def test_a_closed_loop_keeps_its_rows_and_the_controllers_view_when_outputs_are_skipped():
    """The controller reads the outputs every 10th step: those are written, the others skipped."""
    sys.path.insert(0, str(ROOT / "examples"))
    from reference_tcu import ZF8HP_CAR, ReferenceTcu

    from server.offline.controller import closed_loop

    runs = []
    for every in (1, 250):
        plant = load_plant(ROOT / "configs" / "zf8hp_car.toml")
        tcu = ReferenceTcu(ZF8HP_CAR)
        runs.append((closed_loop(plant, None, tcu, every=every, duration_s=25.0, dt=1e-3), tcu, plant.get_state()))
    (full, tcu_full, s_full), (dec, tcu_dec, s_dec) = runs
    assert tcu_full.shifts == tcu_dec.shifts and tcu_full.shifts > 0
    steps = np.arange(0, full.steps + 1, 250)
    assert np.array_equal(_bits(dec.outputs), _bits(full.outputs[steps]))
    assert np.array_equal(_bits(dec.inputs), _bits(full.inputs[steps]))
    for a, b in zip(s_dec, s_full):
        assert np.array_equal(_bits(a), _bits(b))


def test_a_model_changed_between_two_calls_of_a_run_is_seen_as_by_the_lockstep_sequence():
    """The run vouches for the model floats only within a call: Python may retune between calls.  A drag
    changed between two chunks must give what a step-by-step run (no hints) with the same change gives."""
    states = []
    for chunked in (True, False):
        plant, table = _car_with_its_inputs_held(0.4)
        drag = int(plant.mi[L.MF_DRAG])
        if chunked:
            run = Run(plant, table, 1e-3, 1000, every=1000)
            run.advance(500)
            plant.mf[drag] *= 40.0
            run.advance()
        else:
            step = plant.compiled["step"]
            for k in range(1000):
                if k == 500:
                    plant.mf[drag] *= 40.0
                step(plant.mf, plant.mi, plant.df, plant.di, 1e-3)
        states.append(plant.get_state())
    for a, b in zip(*states):
        assert np.array_equal(_bits(a), _bits(b))


def test_a_step_told_its_inputs_are_the_previous_steps_keeps_the_core_inputs_it_mapped():
    """RUN_INPUTS_SAME: the described transmission skips its input mapping and tells the core so.  The hint
    is given here although a pressure moved, to see the skip: the core keeps the pressure mapped before."""
    plant = load_plant(ROOT / "configs" / "zf8hp_car.toml")
    plant.reset({"pedal": 0.3, "p_A": 2.0})
    step, flag = plant.compiled["step"], plant.run_hints_slot()
    row = [r.name for r in plant.core.spec.rows].index("A")
    act = int(plant.mi[L.DF_U_ACT]) + row
    step(plant.mf, plant.mi, plant.df, plant.di, 1e-3)
    mapped = plant.df[act]
    assert mapped > 0.0
    plant.u[[s.name for s in plant.inputs].index("p_A")] = 5.0
    plant.di[flag] = L.RUN_INPUTS_SAME | L.RUN_MODEL_SAME
    step(plant.mf, plant.mi, plant.df, plant.di, 1e-3)
    assert plant.df[act] == mapped  # not mapped again
    assert plant.di[flag] & L.RUN_CORE_INPUTS_SAME  # and the core was told it need not check them
    plant.di[flag] = 0
    step(plant.mf, plant.mi, plant.df, plant.di, 1e-3)
    assert plant.df[act] == 2.5 * mapped  # without the hint the new pressure is mapped


def test_inputs_held_non_finite_are_refused_at_every_step_of_a_run_as_step_by_step():
    """An infinite pressure held over many steps gives the same inputs step after step (inf == inf; a NaN
    never equals itself, so a run never calls it the same): every one of those steps must be refused
    (ST_BAD_INPUT, state untouched) as in a step-by-step run, never stepped on the inputs an earlier step
    mapped or integrated into a roll-back (ST_NONFINITE)."""
    from plant_models.offline import fill_inputs

    n, dt = 300, 1e-3
    results = []
    for compiled_run in (True, False):
        plant, table = _car_with_its_inputs_held(0.3)
        ip = [s.name for s in plant.inputs].index("p_C")
        table.set_points(ip, [0.0, 0.1, 0.2], [3.0, math.inf, 3.0], integer=True, first_order_hold=False)
        if compiled_run:
            run = Run(plant, table, dt, n, every=n)
            run.advance()
            status = run.status_or
        else:
            U, R = np.empty((n, plant.n_in)), np.empty((n, plant.n_in))
            fill_inputs(*table.arrays(), dt, 0, U, R)
            status = 0
            for k in range(n):
                plant.u[:], plant.u_rate[:] = U[k], R[k]
                status |= plant.step(dt)
        results.append((status, plant.get_state()))
    (st_run, s_run), (st_ref, s_ref) = results
    assert st_ref & L.ST_BAD_INPUT and not st_ref & L.ST_NONFINITE  # the reference refuses, never rolls back
    assert st_run == st_ref
    for a, b in zip(s_run, s_ref):
        assert np.array_equal(_bits(a), _bits(b))
