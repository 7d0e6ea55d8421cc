"""A failing test file leaves its trace around the failure and a plot; test expressions use the shift metrics."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from server.testbench.expr import Expr, ExprError
from server.testbench.spec import load_test

ROOT = Path(__file__).resolve().parent.parent
BENCHES = ROOT / "tests" / "benches"
SLOW = BENCHES / "failing" / "swap_too_slow_fails.toml"


@pytest.fixture(scope="module")
def reference():
    """The swap's scenario stepped independently of the test bench: (plant, trace)."""
    from plant_models.registry import load_plant
    from server.offline.run import run_stepwise
    from server.offline.scenario import load_scenario

    plant = load_plant("powershift")
    sc = load_scenario("powershift_single_swap")
    return plant, run_stepwise(plant, sc.compile(plant, warn=False))


def _read_csv(path: Path) -> tuple[list[str], np.ndarray]:
    names = path.read_text().splitlines()[0].split(",")
    return names, np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)


def test_a_failing_file_keeps_the_trace_around_the_failure_and_a_plot(tmp_path, reference):
    plant, tr = reference
    art = tmp_path / "art"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "server.cli", "test", str(SLOW), str(BENCHES / "swap_1_3.toml"),
                        "--artifacts", str(art)], cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    folder = art / "00_swap_too_slow_fails"
    fails = [ln for ln in r.stdout.splitlines() if ln.startswith("  FAIL ")]
    assert len(fails) == 2 and all(ln.endswith(f"[trace and plot: {folder}]") for ln in fails)
    assert sorted(p.name for p in art.iterdir()) == ["00_swap_too_slow_fails"]  # the passing file left nothing
    names, rows = _read_csv(folder / "trace.csv")
    assert names[0] == "t" and {"w_1", "gear", "p_c2", "stuck_c2"} <= set(names)
    # the failures: gear at 0.6 s, w_1 first below 155 rad/s after 0.6 s; kept from 0.5 s before to 0.5 s after
    w1 = tr.values[:, plant.output_index("w_1")]
    t_w1 = tr.time[np.flatnonzero((tr.time >= 0.6 - 5e-4) & (w1 < 155.0))[0]]
    t = rows[:, 0]
    assert t[0] == pytest.approx(0.1, abs=1e-12) and t[-1] == pytest.approx(t_w1 + 0.5, abs=1e-12)
    i0 = int(np.argmin(np.abs(tr.time - t[0])))
    for nm in ("w_1", "gear", "stuck_c2"):  # the offline run's samples, bit for bit
        assert np.array_equal(rows[:, names.index(nm)], tr.values[i0:i0 + len(t), plant.output_index(nm)])
    png = (folder / "failure.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    assert "FAIL  gear 3 within 0.1 s" in (folder / "verdicts.txt").read_text()


def test_shift_metrics_in_expressions_equal_the_campaigns(reference):
    """Each metric of an expression is the campaign's built-in over the same window, and a fact of the run."""
    from types import SimpleNamespace

    from server.campaign import metrics as cm
    from server.offline import shift_metrics

    plant, tr = reference
    sig = {"t": tr.time, **{nm: tr.values[:, j] for j, nm in enumerate(tr.names)}}
    shift = SimpleNamespace(start_s=0.5, window_s=0.5, off_going="C1", on_coming="C2", engine_speed="w_1",
                            output_speed="w_out", reaction_torque="torque_c6")
    spec = SimpleNamespace(shift=shift, builtin=cm.BUILTINS, expressions=())
    camp = cm.compute(spec, tr, {})
    texts = {"flare": "flare(w_1, w_out, 0.5, 1.0)", "peak_reaction_torque": "peak_reaction_torque(torque_c6, 0.5, 1)",
             "rms_reaction_torque": "rms_reaction_torque(torque_c6, 0.5, 1.0)",
             "clutch_energy": "clutch_energy(energy_c1, energy_c2, 0.5, 1.0)",
             "tie_up_energy": "tie_up_energy(stuck_c1, energy_c2, 0.5, 1.0)", "max_slip": "max_slip(slip_c2, 0.5, 1.0)",
             "shift_time": "shift_time(stuck_c2, 0.5)"}
    got = {m: Expr(text, sig).evaluate(sig) for m, text in texts.items()}
    for m, v in got.items():
        assert v.shape == tr.time.shape and np.all(v == v[0]), m  # one number, on every sample
        if m == "shift_time":  # the sample that first shows the clutch stuck, the step after its located event
            assert 0.0 <= v[0] - camp[m] < tr.time[1] - tr.time[0]
        else:
            assert v[0] == camp[m], m
    # facts of the run: clutch 2 sticks at 0.682 s and stays stuck; clutch 1 held its energy before the shift
    stuck = sig["stuck_c2"]
    k = int(np.flatnonzero(stuck == 0)[-1]) + 1
    assert got["shift_time"][0] == tr.time[k] - 0.5 and tr.time[k] == pytest.approx(0.682, abs=1e-9)
    i0, i1 = int(np.argmin(np.abs(tr.time - 0.5))), int(np.argmin(np.abs(tr.time - 1.0)))
    e = sig["energy_c1"] + sig["energy_c2"]
    assert got["clutch_energy"][0] == e[i1] - e[i0] > 0.0
    assert got["max_slip"][0] == np.max(np.abs(sig["slip_c2"][i0:i1 + 1]))
    assert cm.flare is shift_metrics.flare and cm.tie_up_energy is shift_metrics.tie_up_energy  # re-exported


def test_a_metric_in_a_test_file_passes_and_fails_with_its_value(tmp_path, reference):
    from server.testbench.runner import run_test

    plant, tr = reference
    (tmp_path / "t.toml").write_text(
        f'name = "shift time"\nplant = "powershift"\nmode = "offline"\nscenario = "powershift_single_swap"\n'
        '[[expect]]\nname = "shifts within 0.25 s"\nexpr = "shift_time(stuck_c2, 0.5)"\nmax = 0.25\nat = 1.2\n'
        '[[expect]]\nname = "shifts within 0.1 s"\nexpr = "shift_time(stuck_c2, 0.5)"\nmax = 0.1\nat = 1.2\n'
        '[[expect]]\nname = "the overlap heats clutch 2"\nexpr = "tie_up_energy(stuck_c1, energy_c2, 0.5)"\nmin = 100\n'
        'at = 1.2\n')
    res = run_test(load_test(tmp_path / "t.toml"), artifacts=tmp_path / "art")
    ok, slow, tie = res.verdicts
    assert ok.passed and tie.passed and not slow.passed
    assert slow.value == pytest.approx(0.182, abs=1e-9) and slow.t == pytest.approx(1.2)
    # while clutch 1 still holds, clutch 2 slips under its rising pressure: its energy over those steps
    i0 = int(np.argmin(np.abs(tr.time - 0.5)))
    e2, s1 = tr.values[i0:, plant.output_index("energy_c2")], tr.values[i0:, plant.output_index("stuck_c1")]
    assert tie.value == pytest.approx(float(np.sum(np.diff(e2)[s1[:-1] == 1.0])), rel=1e-12)
    assert (tmp_path / "art" / "trace.csv").exists()


@pytest.mark.parametrize("text, word", [
    ("flare(w_1, 0.5)", "flare() takes the engine speed and the output speed"),
    ("shift_time(stuck_c2)", "then the window's start"),
    ("shift_time(stuck_c2, t)", "(numbers)"),
    ("max_slip(2 * slip_c2, 0.5)", "max_slip() takes the on-coming clutch's slip"),
    ("max_slip(slip_c9, 0.5)", "unknown signal 'slip_c9'"),
])
def test_a_misused_metric_is_a_one_line_error(text, word):
    with pytest.raises(ExprError) as exc:
        Expr(text, ["w_1", "w_out", "stuck_c2", "slip_c2"])
    assert word in str(exc.value)


def test_shift_time_from_the_stuck_flag():
    t = np.arange(6) * 0.1
    from server.offline.shift_metrics import shift_time

    assert shift_time(t, np.array([1, 1, 0, 0, 1, 1.0]), 0.1) == pytest.approx(0.3)
    assert math.isnan(shift_time(t, np.array([0, 0, 1, 1, 0, 0.0]), 0.1))  # not stuck at the end
    assert math.isnan(shift_time(t, np.ones(6), 0.1))  # stuck all along: no shift onto it
