"""The whole-run compiled offline path: input tables, decimation, chunks, events, and equality with lockstep."""

from __future__ import annotations

import math

import numpy as np
import pytest

from plant_models.config import repo_root
from plant_models.offline import InputTable, Run, event_room, fill_inputs
from plant_models.registry import load_plant
from server.offline.scenario import Profile, load_scenario, parse_scenario
from server.offline.run import run_offline, run_stepwise

ROOT = repo_root()


# -- the input tables against the vectorised NumPy sampling the scenario player used before ---------------
def numpy_sample(prof: Profile, t: np.ndarray, side: str, integer: bool) -> np.ndarray:
    """Values at times t; side="right" gives u(t+), side="left" u(t-) (the former Profile.sample)."""
    if prof.kind == "const":
        return np.full(t.shape, prof.values[0])
    if prof.kind == "sine":
        return prof.offset + prof.amplitude * np.sin(2.0 * math.pi * prof.frequency_hz * t + prof.phase_rad)
    ts, vs = np.asarray(prof.times), np.asarray(prof.values)
    if integer:
        i = np.searchsorted(ts, t, side="right" if side == "right" else "left") - 1
        return vs[np.clip(i, 0, len(vs) - 1)]
    i = np.searchsorted(ts, t, side=side)
    out = np.empty(t.shape)
    before, after = i == 0, i >= len(ts)
    mid = ~(before | after)
    out[before], out[after] = vs[0], vs[-1]
    j = i[mid]
    w = (t[mid] - ts[j - 1]) / (ts[j] - ts[j - 1])
    out[mid] = vs[j - 1] + w * (vs[j] - vs[j - 1])
    return out


def numpy_rows(profiles, integer, linear, dt, k0, n):
    ks = np.arange(k0, k0 + n, dtype=float)
    t0, t1 = ks * dt, (ks + 1.0) * dt
    U, R = np.zeros((n, len(profiles))), np.zeros((n, len(profiles)))
    for k, (prof, whole) in enumerate(zip(profiles, integer)):
        U[:, k] = numpy_sample(prof, t0, "right", whole)
        if linear and not whole and prof.kind != "const":
            R[:, k] = (numpy_sample(prof, t1, "left", whole) - U[:, k]) / dt
    return U, R


def random_profiles(rng, dt):
    out, integer = [], []
    for _ in range(12):
        kind = rng.choice(["const", "pwl", "pwl_grid", "steps", "sine", "int"])
        if kind == "const":
            out.append(Profile("const", values=(float(rng.normal()),)))
            integer.append(False)
        elif kind == "sine":
            out.append(Profile("sine", amplitude=float(rng.normal()), frequency_hz=float(rng.uniform(0, 20)),
                               phase_rad=float(rng.uniform(-3, 3)), offset=float(rng.normal())))
            integer.append(False)
        else:
            n = int(rng.integers(1, 9))
            if kind == "pwl":
                ts = np.sort(rng.uniform(0, 0.5, n))
            else:  # on the step grid, with steps (two points at one time)
                ts = np.sort(rng.integers(0, 400, n) * dt)
                ts = np.sort(np.concatenate([ts, ts[: n // 2]]))
                ts = ts[[j for j in range(len(ts)) if j < 2 or not (ts[j] == ts[j - 1] == ts[j - 2])]]
            vs = rng.integers(0, 5, len(ts)).astype(float) if kind == "int" else rng.normal(size=len(ts))
            out.append(Profile("pwl", times=tuple(map(float, ts)), values=tuple(map(float, vs))))
            integer.append(kind == "int")
    return out, integer


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("linear", [True, False], ids=["first-order hold", "hold"])
def test_compiled_input_tables_equal_the_numpy_sampling_bit_for_bit(seed, linear):
    rng = np.random.default_rng(seed)
    dt = [1e-3, 5e-5, 7.3e-4][seed % 3]
    profiles, integer = random_profiles(rng, dt)
    table = InputTable(len(profiles))
    for i, (prof, whole) in enumerate(zip(profiles, integer)):
        prof.to_table(table, i, whole, linear)
    kind, times, values = table.arrays()
    for k0 in (0, 4096 * 3):
        U, R = np.empty((600, len(profiles))), np.empty((600, len(profiles)))
        fill_inputs(kind, times, values, dt, k0, U, R)
        U_ref, R_ref = numpy_rows(profiles, integer, linear, dt, k0, 600)
        assert np.array_equal(U, U_ref)
        assert np.array_equal(R, R_ref)


def test_a_ramp_between_grid_points_is_exact_and_a_step_applies_from_its_step_on():
    sc = parse_scenario({"duration_s": 0.1, "dt_s": 0.01, "inputs": {
        "drive_torque": [[0.0, 0.0], [0.03, 3.0], [0.05, 3.0], [0.05, 7.0]]}}, "s.toml")
    from plant_models.plants.two_shafts import TwoShaftsParams, TwoShaftsPlant

    plant = TwoShaftsPlant(TwoShaftsParams())
    c = sc.compile(plant)
    u = [c.inputs_at(k)[0][0] for k in range(8)]
    r = [c.inputs_at(k)[1][0] for k in range(8)]
    assert u[:3] == pytest.approx([0.0, 1.0, 2.0]) and r[:3] == pytest.approx([100.0, 100.0, 100.0])
    assert u[3:5] == pytest.approx([3.0, 3.0]) and r[3:5] == [0.0, 0.0]
    assert u[5:] == [7.0, 7.0, 7.0] and r[5:] == [0.0, 0.0, 0.0]


# -- whole runs ---------------------------------------------------------------------------------------------
CASES = [("powershift", "powershift_swaps"), ("dct", "dct_upshift"), ("chain", "chain_4mass"),
         ("servo", "servo_slow_ramp_stick_slip"), ("kinematic", "kinematic_engagement"),
         ("damper", "damper_clutch_engagement")]


def prepared(config, scenario, dt=None):
    plant = load_plant(ROOT / "configs" / f"{config}.toml")
    return plant, load_scenario(ROOT / "scenarios" / f"{scenario}.toml").compile(plant, dt)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_the_compiled_run_equals_the_lockstep_sequence_bit_for_bit(case):
    plant, compiled = prepared(*case)
    ref = run_stepwise(plant, compiled)
    got = run_offline(plant, compiled)
    assert np.array_equal(got.time, ref.time)
    assert np.array_equal(got.values, ref.values)
    assert got.events == ref.events and len(got.events) > 0
    assert got.status_or == ref.status_or and got.counters == ref.counters
    # the plant's own event reader starts after the run's events
    assert plant.new_events() == []


@pytest.mark.parametrize("every", [2, 7, 1000, 5000])
def test_decimated_rows_are_the_full_runs_rows_at_every_nth_step_and_the_last(every):
    plant, compiled = prepared("dct", "dct_upshift")
    full = run_offline(plant, compiled)
    dec = run_offline(plant, compiled, every=every)
    n = compiled.n_steps
    steps = sorted(set(range(0, n + 1, every)) | {n})
    assert dec.values.shape == (len(steps), plant.n_out)
    assert np.array_equal(dec.values, full.values[steps])
    assert np.array_equal(dec.time, full.time[steps])
    assert dec.events == full.events and dec.status_or == full.status_or and dec.steps == n


def test_progress_chunks_change_nothing_and_report_every_step():
    plant, compiled = prepared("powershift", "powershift_swaps")
    whole = run_offline(plant, compiled)
    seen = []
    chunked = run_offline(plant, compiled, progress=lambda k, n: seen.append((k, n)))
    assert np.array_equal(chunked.values, whole.values) and chunked.events == whole.events
    assert seen[-1] == (compiled.n_steps, compiled.n_steps) and len(seen) >= 2
    assert all(a[0] < b[0] for a, b in zip(seen, seen[1:]))


def test_event_arrays_grow_when_a_run_has_more_events_than_room():
    plant, compiled = prepared("powershift", "powershift_swaps")
    ref = run_offline(plant, compiled)
    plant.reset(compiled.initial_inputs())
    plant.new_events()
    run = Run(plant, compiled.table, compiled.dt, compiled.n_steps)
    cap = plant.event_log()[4]
    # room for the ring's capacity plus two events: the run must stop, grow the arrays and go on
    event_room(run, cap + 2)
    run.advance()
    assert run._ev[0].shape[0] > cap + 2
    assert run.events() == ref.events and len(ref.events) > 2
    assert np.array_equal(run.out, ref.values)


def test_a_table_for_another_plant_is_refused():
    plant, compiled = prepared("dct", "dct_upshift")
    with pytest.raises(ValueError, match="input table has 3 rows"):
        Run(plant, InputTable(3), 1e-3, 10)
    with pytest.raises(ValueError, match="every must be >= 1"):
        Run(plant, compiled.table, 1e-3, 10, every=0)


def test_only_a_function_compiled_as_a_plant_step_is_called_through_its_address():
    from numba import njit

    from plant_models.offline import kernel_address

    @njit
    def not_a_step(a, dt):
        return 0

    not_a_step.compile("int64(float64[::1], float64)")
    with pytest.raises(TypeError, match="a plant step must be"):
        kernel_address(not_a_step)
    plant, _ = prepared("dct", "dct_upshift")
    assert kernel_address(plant.compiled["step"]) > 0
