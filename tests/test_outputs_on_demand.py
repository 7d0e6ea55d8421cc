"""Outputs on demand: a compiled offline run lets the plant skip the outputs of steps it keeps in no row.

The Powershift, DCT and described-transmission plants honour the run's
outputs-unread flag (``Plant.outputs_unread_flag``): at such a step they
write no output port but still do what the next step reads (the force law's
input bookkeeping).  What must hold: the rows a run keeps, its events and the
plant's whole state at its end are those of the lockstep sequence, which
writes every output of every step, bit for bit; and the flag is set only
inside a run.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from plant_models.config import repo_root
from plant_models.core import layout as L
from plant_models.registry import load_plant
from server.offline.run import run_offline, run_stepwise
from server.offline.scenario import load_scenario

ROOT = repo_root()
CASES = [("zf8hp_car", "zf8hp_car_drive"), ("zf8hp_car_hydraulics", "zf8hp_car_drive"),
         ("zf8hp", "zf8hp_shifts"), ("powershift_hydraulics", "powershift_swaps"), ("dct", "dct_upshift")]


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.int64) if a.dtype == np.float64 else a


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_run_that_skips_unread_outputs_keeps_the_lockstep_rows_and_state_bit_for_bit(case):
    config, scenario = case
    plant = load_plant(ROOT / "configs" / f"{config}.toml")
    assert plant.outputs_unread_flag() >= 0  # the plant honours the flag: the comparison below is not vacuous
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
    assert plant.di[plant.outputs_unread_flag()] == 0  # cleared when the run returned


def test_a_step_with_the_flag_set_writes_no_output_but_keeps_the_law_inputs():
    from plant_models.powertrain.law import LD_IN_END

    plant = load_plant(ROOT / "configs" / "zf8hp_car.toml")
    plant.reset({"pedal": 0.3})
    step = plant.compiled["step"]
    flag = plant.outputs_unread_flag()
    y0 = plant.y.copy()
    t0 = plant.df[plant.mi[L.DF_TIME]]
    plant.u[[s.name for s in plant.inputs].index("pedal")] = 0.6
    plant.di[flag] = 1
    step(plant.mf, plant.mi, plant.df, plant.di, 1e-3)
    plant.di[flag] = 0
    assert plant.df[plant.mi[L.DF_TIME]] == t0 + 1e-3
    assert np.array_equal(_bits(plant.y), _bits(y0))  # the outputs still those before the step
    assert plant.df[plant.mi[L.DF_LAW] + LD_IN_END] == 0.6  # what the next step's reuse test reads
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
