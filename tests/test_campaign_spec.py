"""Campaign files without Dask: paths, designs, metrics, one-line errors, and runs that fail on their own."""

from __future__ import annotations

import math

import numpy as np
import pytest

from plant_models.config import repo_root
from server.campaign import paths as P
from server.campaign.engine import run_bare
from server.campaign.metrics import compute, evaluate, Series
from server.campaign.spec import apply_case, design_columns, load_campaign
from server.cli import main

ROOT = repo_root()
BASE = f"""
config = "{ROOT / 'configs' / 'powershift.toml'}"
scenario = "{ROOT / 'scenarios' / 'powershift_single_swap.toml'}"
dt_s = 0.002
"""
PARAMS = """
[parameters.friction_scale]
paths = ["config.clutch.friction_static", "config.clutch.friction_kinetic"]
mode = "scale"
range = [0.8, 1.2]
[parameters.c2_offset_s]
path = "scenario.inputs.p_c2"
mode = "shift"
range = [-0.08, 0.08]
"""
METRICS = """
[shift]
start_s = 0.5
window_s = 0.5
off_going = "C1"
on_coming = "C2"
engine_speed = "w_1"
output_speed = "w_out"
reaction_torque = "torque_c6"
[metrics]
builtin = ["shift_time", "final_gear", "flare", "peak_reaction_torque", "rms_reaction_torque", "clutch_energy",
           "max_slip"]
"""


def campaign(tmp_path, text, name="c.toml"):
    p = tmp_path / name
    p.write_text(text)
    return load_campaign(p)


# -- paths ------------------------------------------------------------------------------------------------
def test_paths_set_scale_and_index_into_the_toml_data():
    config = {"clutch": {"friction_static": 0.13}, "axles": {"inertia_kg_m2": [1.5, 0.25]}}
    scenario = {"duration_s": 1.0, "inputs": {"a": 300.0, "p": [[0.0, 1.0], [0.5, 2.0]],
                                              "s": {"sine": {"amplitude": 2.0, "frequency_hz": 1.0}}}}
    P.apply(config, scenario, "config.clutch.friction_static", "scale", 1.5)
    P.apply(config, scenario, "config.clutch.c2.pressure_lag_s", "set", 0.02)  # a new per-clutch table
    P.apply(config, scenario, "config.axles.inertia_kg_m2[1]", "set", 0.5)
    P.apply(config, scenario, "config.axles.inertia_kg_m2", "scale", 2.0)
    P.apply(config, scenario, "scenario.inputs.p[1][1]", "set", 7.0)
    P.apply(config, scenario, "scenario.inputs.p", "scale", 2.0)
    P.apply(config, scenario, "scenario.inputs.s", "scale", 3.0)
    P.apply(config, scenario, "scenario.inputs.a", "scale", 0.5)
    assert config == {"clutch": {"friction_static": 0.13 * 1.5, "c2": {"pressure_lag_s": 0.02}},
                      "axles": {"inertia_kg_m2": [3.0, 1.0]}}
    assert scenario["inputs"] == {"a": 150.0, "p": [[0.0, 2.0], [0.5, 14.0]],
                                  "s": {"sine": {"amplitude": 6.0, "frequency_hz": 1.0}}}


@pytest.mark.parametrize("path,mode,problem", [
    ("clutch.friction", "set", r"a path starts with config\., scenario\., faults\[N\]\., controller\. or fmu\."),
    ("faults.at", "set", r"a path starts with config\., scenario\., faults\[N\]\., controller\. or fmu\."),
    ("config[0].x", "set", r"a path starts with config\., scenario\., faults\[N\]\., controller\. or fmu\."),
    ("config.clutch.fr!ction", "set", "is not a key"),
    ("config.clutch.friction_static", "shift", "a shift moves an input history in time"),
])
def test_malformed_paths_are_refused(path, mode, problem):
    with pytest.raises(ValueError, match=problem):
        P.check(path, mode)


def sample(points, t, integer=False):
    ts = np.array([p[0] for p in points])
    vs = np.array([p[1] for p in points])
    if integer:
        return vs[np.clip(np.searchsorted(ts, t, side="right") - 1, 0, len(vs) - 1)]
    return np.interp(t, ts, vs)  # the scenario's linear interpolation (u(t+) at a step)


@pytest.mark.parametrize("shift", [0.07, -0.03, -0.5, -0.55, -5.0])
def test_a_time_shift_moves_the_history_u_new_of_t_is_u_of_t_minus_shift(shift):
    points = [[0.0, 0.0], [0.5, 0.0], [0.5, 2.0], [0.6, 7.0], [0.7, 7.0], [0.75, 16.0]]
    new = P.shift_history(points, shift)
    assert new[0][0] >= 0.0 and all(a[0] <= b[0] for a, b in zip(new, new[1:]))
    t = np.linspace(0.0, 1.5, 3001)
    t = t[np.abs((t[:, None] - shift) - np.array([0.5])).min(axis=1) > 1e-9]  # away from the step itself
    assert np.allclose(sample(new, t), sample(points, t - shift), atol=1e-12)


def test_a_shift_cuts_a_whole_number_history_as_steps_and_moves_a_sine_phase():
    gears = [[0.0, 1], [0.3, 3], [0.6, 5]]
    assert P.shift_history(gears, -0.4, integer=True) == [[0.0, 3], [0.19999999999999996, 5]]
    sine = {"sine": {"amplitude": 1.0, "frequency_hz": 2.0, "phase_rad": 0.1}}
    moved = P.shift_history(sine, 0.1)
    assert moved["sine"]["phase_rad"] == pytest.approx(0.1 - 2 * math.pi * 2.0 * 0.1)
    assert P.shift_history(300.0, 0.2) == 300.0


# -- designs ------------------------------------------------------------------------------------------------
def test_a_grid_is_the_full_product_with_the_first_parameter_slowest(tmp_path):
    spec = campaign(tmp_path, BASE + """
[design]
method = "grid"
[parameters.torque]
path = "scenario.inputs.engine_torque"
values = [200.0, 300.0]
[parameters.lag]
path = "config.clutch.pressure_lag_s"
range = [0.01, 0.03]
points = 3
""" + METRICS)
    assert spec.runs == 6
    cols = design_columns(spec)
    assert cols[0] == [200.0] * 3 + [300.0] * 3
    assert cols[1] == pytest.approx([0.01, 0.02, 0.03] * 2)


def test_latin_hypercube_puts_one_sample_in_each_stratum_and_is_seeded(tmp_path):
    text = BASE + '[design]\nmethod = "lhs"\nruns = 50\nseed = 3\n' + PARAMS + METRICS
    spec = campaign(tmp_path, text)
    cols = design_columns(spec)
    for p, col in zip(spec.parameters, cols):
        strata = np.floor((np.array(col) - p.lo) / (p.hi - p.lo) * 50).astype(int)
        assert sorted(strata) == list(range(50))
    assert design_columns(campaign(tmp_path, text, "again.toml")) == cols
    other = campaign(tmp_path, text.replace("seed = 3", "seed = 4"), "other.toml")
    assert design_columns(other) != cols and other.digest != spec.digest


# -- one-line errors ------------------------------------------------------------------------------------------
ERRORS = {
    "unknown design": ('[design]\nmethod = "sobol"\n' + PARAMS + METRICS,
                       "design.method: must be one of 'grid', 'list', 'random', 'lhs', got 'sobol'"),
    "no runs": ('[design]\nmethod = "lhs"\n' + PARAMS + METRICS, "design.runs: is required by the lhs design"),
    "range without points": ('[design]\nmethod = "grid"\n' + PARAMS + METRICS,
                             "parameters.friction_scale.values: is required by the grid design"),
    "bad prefix": ('[design]\nmethod = "list"\n[parameters.x]\npath = "plant.clutch.mu"\nvalues = [1.0]\n' + METRICS,
                   "parameters.x.path: 'plant.clutch.mu': a path starts with config., scenario., faults[N]., controller. or fmu."),
    "unknown config key": ('[design]\nmethod = "list"\n[parameters.x]\npath = "config.clutch.frction_static"\n'
                           'values = [0.1]\n' + METRICS, "clutch.frction_static: unknown key"),
    "list lengths": ('[design]\nmethod = "list"\n[parameters.x]\npath = "config.clutch.pressure_lag_s"\n'
                     'values = [0.1, 0.2]\n[parameters.y]\npath = "scenario.inputs.engine_torque"\nvalues = [1.0]\n'
                     + METRICS, "the list design needs the same number of values for every parameter"),
    "reserved name": ('[design]\nmethod = "list"\n[parameters.status]\npath = "config.clutch.pressure_lag_s"\n'
                      'values = [0.1]\n' + METRICS, "parameters.status: is the name of a column of campaign tables"),
    "unknown metric": ('[design]\nmethod = "lhs"\nruns = 2\n' + PARAMS + METRICS.replace('"max_slip"', '"jerk"'),
                       "metrics.builtin[6]: unknown metric 'jerk'"),
    "metric needs a shift key": ('[design]\nmethod = "lhs"\nruns = 2\n' + PARAMS
                                 + METRICS.replace('on_coming = "C2"\n', ""),
                                 "shift.on_coming: is required by the metric shift_time"),
    "expression syntax": ('[design]\nmethod = "lhs"\nruns = 2\n' + PARAMS + METRICS
                          + '[metrics.expressions]\nx = "max(torque_c6"\n', "metrics.expressions.x: not an expression"),
    "expression attribute": ('[design]\nmethod = "lhs"\nruns = 2\n' + PARAMS + METRICS
                             + '[metrics.expressions]\nx = "torque_c6.__class__"\n',
                             "metrics.expressions.x: attribute is not allowed"),
    "expression function": ('[design]\nmethod = "lhs"\nruns = 2\n' + PARAMS + METRICS
                            + '[metrics.expressions]\nx = "open(torque_c6)"\n',
                            "metrics.expressions.x: unknown function 'open'"),
    "expression name": ('[design]\nmethod = "lhs"\nruns = 2\n' + PARAMS + METRICS
                        + '[metrics.expressions]\nx = "max(torqe_c6)"\n',
                        "metrics.expressions.x: unknown name 'torqe_c6'"),
    "missing output": ('[design]\nmethod = "lhs"\nruns = 2\n' + PARAMS + METRICS.replace('"torque_c6"', '"torque_c9"'),
                       "peak_reaction_torque needs the output 'torque_c9', which the powershift plant does not have"),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_mistakes_in_a_campaign_file_give_one_line_and_exit_2(name, tmp_path, capsys):
    text, expected = ERRORS[name]
    path = tmp_path / "c.toml"
    path.write_text(BASE + text)
    code = main(["campaign", str(path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("gearbox-hil: error: ") and expected in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv,expected", [
    (["--workers", "0"], "argument --workers: must be at least 1, got 0"),
    (["--workers", "2", "--scheduler", "tcp://127.0.0.1:8786"], "not allowed with argument"),
    (["--batch", "x"], "argument --batch: not a whole number: 'x'"),
])
def test_bad_campaign_arguments_exit_2(argv, expected, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["campaign", "powershift_swap_1_2", "--out", str(tmp_path), *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err


def test_the_worked_example_reads_and_has_over_a_thousand_runs():
    spec = load_campaign("powershift_swap_1_2")
    assert spec.runs >= 1000 and spec.design == "lhs"
    assert [p.name for p in spec.parameters] == ["friction_scale", "actuator_lag_s", "engine_torque_N_m", "c2_delay_s"]


# -- runs, metrics ---------------------------------------------------------------------------------------------
def test_a_failing_run_is_recorded_with_its_error_and_the_others_go_on(tmp_path):
    spec = campaign(tmp_path, BASE + """
[design]
method = "list"
[parameters.lag]
path = "config.clutch.pressure_lag_s"
values = [0.03, -1.0, 0.02]
""" + METRICS + '[metrics.expressions]\nseries = "abs(torque_c6) * lag"\n')
    results = run_bare(spec, [0, 1, 2])
    assert [r.status for r in results] == ["failed"] * 3  # the expression gives a series, in every run
    assert "metric series gives a series" in results[0].error
    spec = campaign(tmp_path, BASE + """
[design]
method = "list"
[parameters.lag]
path = "config.clutch.pressure_lag_s"
values = [0.03, -1.0, 0.02]
""" + METRICS, "ok.toml")
    ok, bad, ok2 = run_bare(spec, [0, 1, 2])
    assert ok.status == ok2.status == "ok" and bad.status == "failed"
    assert "(run 1)" in bad.error and "pressure_lag_s" in bad.error and "\n" not in bad.error
    assert all(math.isnan(v) for v in bad.metrics.values())
    assert ok.metrics["final_gear"] == 3.0 and ok.metrics["shift_time"] > 0


def test_built_in_metrics_agree_with_the_trace_they_summarise(tmp_path):
    """The dissipated energy is the integral of slip times torque; the clutch is stuck from the shift time on."""
    from plant_models.registry import read_config_data
    from server.offline.scenario import parse_scenario
    from server.offline.run import run_offline

    spec = campaign(tmp_path, BASE.replace("dt_s = 0.002", "dt_s = 0.0005")
                    + '[design]\nmethod = "list"\n[parameters.off]\npath = "scenario.inputs.p_c2"\nmode = "shift"\n'
                      'values = [0.05]\n' + METRICS)
    config, scenario = apply_case(spec, (0.05,))
    c = read_config_data(config, "c")
    plant = c.plant_class(c.params)
    tr = run_offline(plant, parse_scenario(scenario, "s").compile(plant, spec.dt))
    m = compute(spec, tr, {"off": 0.05})
    t = tr.time
    win = (t >= 0.5 - 1e-9) & (t <= 1.0 + 1e-9)
    power = 0.0
    for c_ in ("c1", "c2"):
        s, q = tr.column(f"slip_{c_}")[win], tr.column(f"torque_{c_}")[win]
        power = power + np.abs(s * q)
    energy = float(np.sum(0.5 * (power[1:] + power[:-1]) * np.diff(t[win])))
    assert m["clutch_energy"] == pytest.approx(energy, rel=2e-3)
    lock = 0.5 + m["shift_time"]
    stuck = tr.column("stuck_c2")
    assert np.all(stuck[t > lock + 1e-9] == 1.0) and np.all(tr.column("slip_c2")[t > lock + 1e-9] == 0.0)
    assert stuck[np.searchsorted(t, lock) - 1] == 0.0  # slipping in the step the stick happened in
    we, wo = tr.column("w_1"), tr.column("w_out")
    i0 = int(np.searchsorted(t, 0.5 - 1e-9))
    assert m["flare"] == pytest.approx(max(0.0, float(np.max((we - wo * we[i0] / wo[i0])[win]))))
    assert m["max_slip"] == np.max(np.abs(tr.column("slip_c2")[win]))


def test_expressions_compute_over_series_and_refuse_what_they_cannot_reduce():
    t = np.linspace(0.0, 1.0, 11)
    names = {"t": Series(t, t), "x": Series(t, 2 * t), "k": 3.0}
    assert evaluate("max(x) * k", names) == 6.0
    assert evaluate("at(x, 0.5) + final(t)", names) == pytest.approx(2.0)
    assert evaluate("integral(x)", names) == pytest.approx(1.0)
    assert evaluate("max(window(x, 0.2, 0.4))", names) == pytest.approx(0.8)
    assert evaluate("time_of_max(-abs(x - 1))", names) == pytest.approx(0.5)
    assert isinstance(evaluate("x * 2", names), Series)
    with pytest.raises(ValueError, match="different times"):
        evaluate("max(window(x, 0, 0.5) + x)", names)


def test_metrics_of_a_run_that_never_shifts_are_nan_where_undefined(tmp_path):
    spec = campaign(tmp_path, BASE + '[design]\nmethod = "list"\n[parameters.s]\npath = "scenario.inputs.p_c2"\n'
                    'mode = "scale"\nvalues = [0.0]\n' + METRICS)
    (r,) = run_bare(spec, [0])
    assert r.status == "ok"
    assert math.isnan(r.metrics["shift_time"]) and r.metrics["final_gear"] == 0.0
    assert r.metrics["flare"] > 10.0  # clutch 1 released, clutch 2 never applied: the engine runs away


@pytest.mark.parametrize("address", ["bogus", "tcp://host", "tcp://10.0.0.5:port"])
def test_a_scheduler_address_that_is_not_one_is_refused_at_once(address, tmp_path, capsys):
    code = main(["campaign", "powershift_swap_1_2", "--out", str(tmp_path), "--scheduler", address])
    err = capsys.readouterr().err
    assert code == 2
    assert err == f"gearbox-hil: error: --scheduler: {address!r} is not an address like tcp://10.0.0.5:8786\n"


def test_first_order_index_finds_what_a_metric_depends_on():
    from server.plots.campaign import first_order

    rng = np.random.default_rng(1)
    x1, x2 = rng.random(2000), rng.random(2000)
    assert first_order(x1, 3.0 * x1) > 0.98 and first_order(x2, 3.0 * x1) < 0.02
    y = np.sin(2 * np.pi * x1) + 0.5 * x2  # Var: 1/2 from x1, 1/48 from x2
    assert first_order(x1, y) == pytest.approx(0.5 / (0.5 + 1 / 48), abs=0.03)


def test_campaign_figures_are_drawn_from_the_table(tmp_path):
    from server.campaign.engine import batch_table
    from server.campaign.spec import case_values
    from server.plots.campaign import plot_campaign

    spec = campaign(tmp_path, BASE + '[design]\nmethod = "lhs"\nruns = 40\nseed = 2\n' + PARAMS
                    + METRICS.replace('"max_slip"]', '"max_slip", "tie_up_energy"]'))
    runs = list(range(40))
    table = batch_table(spec, run_bare(spec, runs), dict(zip(runs, case_values(spec, runs))))
    files = plot_campaign(table, [p.name for p in spec.parameters], spec.metric_names, tmp_path, "a title")
    assert [f.name for f in files] == ["sensitivity.png", "shift_time.png", "flare.png", "regions.png"]
    for f in files:
        assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f.stat().st_size > 10_000


def test_guided_batches_shrink_to_the_end_and_cover_every_run_once():
    from server.campaign.engine import MAX_BATCH, MIN_BATCH, batch_sizes

    for todo, workers in ((1200, 2), (1200, 1), (50_000, 8), (10, 2), (1, 4)):
        sizes = batch_sizes(todo, workers)
        assert sum(sizes) == todo and all(0 < n <= MAX_BATCH for n in sizes)
        assert all(a >= b for a, b in zip(sizes, sizes[1:]))  # large first, small last
        assert all(n >= MIN_BATCH for n in sizes[:-1])
    assert batch_sizes(1200, 2)[0] == 150 and batch_sizes(1200, 2)[-2:] == [16, 9]
    assert batch_sizes(10, 2, fixed=3) == [3, 3, 3, 1]


def test_paths_reach_a_fault_schedule_and_a_controller_table():
    faults = [{"at": 0.3, "target": "clutch", "clutch": 2, "kind": "stuck_closed"}, {"at": 0.1, "value": 2.0}]
    controller = {"params": {"sync_rate_bar_s": 40.0}}
    assert P.parse("faults[1].value") == ("faults", [1, "value"])
    P.apply({}, {}, "faults[0].at", "set", 0.45, faults=faults, controller=controller)
    P.apply({}, {}, "faults[1].value", "scale", 1.5, faults=faults, controller=controller)
    P.apply({}, {}, "controller.params.sync_rate_bar_s", "scale", 0.5, faults=faults, controller=controller)
    assert faults == [{"at": 0.45, "target": "clutch", "clutch": 2, "kind": "stuck_closed"}, {"at": 0.1, "value": 3.0}]
    assert controller == {"params": {"sync_rate_bar_s": 20.0}}
    with pytest.raises(ValueError, match=r"faults\[2\]\.at: index \[2\] is outside the list"):
        P.apply({}, {}, "faults[2].at", "set", 0.1, faults=faults, controller=controller)
    with pytest.raises(ValueError, match=r"the campaign's base has no faults"):
        P.apply({}, {}, "faults[0].at", "set", 0.1)
