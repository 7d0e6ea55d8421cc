"""Shift metrics honour their window, and a metric that cannot be computed is an ERROR with its reason."""

from __future__ import annotations

import math

import numpy as np
import pytest

from server.offline.shift_metrics import shift_time
from server.testbench.expr import Expr
from server.testbench.spec import Expectation
from server.testbench.verdict import Recording, evaluate

DT = 1e-3


def _stuck_then_released(stick_s: float = 3.359, release_s: float = 6.0, end_s: float = 8.0):
    """A clutch that slips, sticks at ``stick_s`` and releases again at ``release_s`` (1 ms samples)."""
    t = np.arange(int(round(end_s / DT)) + 1) * DT
    stuck = ((t >= stick_s - 1e-9) & (t < release_s - 1e-9)).astype(float)
    return t, stuck


def test_shift_time_with_an_end_returns_the_stick_inside_the_window_though_it_releases_later():
    t, stuck = _stuck_then_released()
    assert shift_time(t, stuck, 3.0, 5.0) == pytest.approx(0.359, abs=1e-12)
    sig = {"t": t, "stuck_C": stuck}
    v = Expr("shift_time(stuck_C, 3.0, 5.0)", sig).evaluate(sig)
    assert v[0] == pytest.approx(0.359, abs=1e-12)
    # without an end the window runs to the end of the run, where the clutch is released: not computable
    assert math.isnan(shift_time(t, stuck, 3.0))


def test_shift_time_honours_the_window_end_before_the_stick():
    t, stuck = _stuck_then_released()
    assert math.isnan(shift_time(t, stuck, 3.0, 3.2))  # the window closes before the clutch sticks


def _expect(text: str, sig, **kw) -> Expectation:
    return Expectation("m", "expect[1]", Expr(text, sig), kw.pop("kind", "at"), **kw)


def test_a_metric_that_cannot_be_computed_is_an_error_with_its_reason():
    t, stuck = _stuck_then_released()
    sig = {"t": t, "stuck_C": stuck, "w_e": np.zeros_like(t), "w_o": np.ones_like(t)}
    rec = Recording(t, dict(sig), DT)
    v = evaluate(_expect("shift_time(stuck_C, 3.0)", sig, at_s=7.0, hi=0.5), rec)
    assert v.error and not v.passed and v.label == "ERROR"
    assert "nan" not in v.message.lower()
    assert "stuck_C" in v.message and "not stuck at the window's end" in v.message and "8" in v.message
    v = evaluate(_expect("shift_time(stuck_C, 3.0, 3.2)", sig, at_s=7.0, hi=0.5), rec)
    assert v.error and "not stuck at the window's end" in v.message and "3.2" in v.message
    v = evaluate(_expect("shift_time(stuck_C, 4.0, 5.0)", sig, at_s=7.0, hi=0.5), rec)
    assert v.error and "stuck throughout" in v.message
    v = evaluate(_expect("flare(w_e, w_o, 1.0, 2.0)", sig, at_s=7.0, hi=5.0), rec)
    assert v.error and "w_e" in v.message and "0" in v.message
    # a computable metric is still a plain verdict
    ok = evaluate(_expect("shift_time(stuck_C, 3.0, 5.0)", sig, at_s=7.0, hi=0.5), rec)
    assert ok.passed and not ok.error and ok.value == pytest.approx(0.359, abs=1e-12)
    bad = evaluate(_expect("shift_time(stuck_C, 3.0, 5.0)", sig, at_s=7.0, hi=0.3), rec)
    assert not bad.passed and not bad.error


def test_a_nan_in_a_metrics_signal_is_an_error_naming_it():
    t = np.arange(101) * DT
    torque = np.ones_like(t)
    torque[50] = np.nan
    sig = {"t": t, "tq": torque}
    v = evaluate(_expect("peak_reaction_torque(tq, 0.0, 0.1)", sig, at_s=0.1, hi=5.0), Recording(t, dict(sig), DT))
    assert v.error and "tq" in v.message and "0.05" in v.message


def test_a_metric_window_that_ends_before_it_starts_is_refused():
    from server.testbench.expr import ExprError

    with pytest.raises(ExprError, match="ends before it starts"):
        Expr("max_slip(s, 2.0, 1.0)", ["s"])
