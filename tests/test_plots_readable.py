"""Figures read without the code: every series in a legend, legends never over the data, physical names and units.

Every figure of every plant kind (and the demo's figure) is drawn and its
artists are inspected after the draw: a line's style must be listed in a
legend of its panel (a panel holding one series may name it by its axis
label alone); no legend may overlap any panel's data area or leave the
figure; axis labels name a quantity, and no label shows a raw signal name
such as ``w_1`` or ``slip_c2``.
"""

from __future__ import annotations

import importlib.util
import re
import sys

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from matplotlib.colors import to_rgba  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from plant_models.config import repo_root  # noqa: E402
from plant_models.registry import load_plant  # noqa: E402
from server.plots import plot_trace  # noqa: E402
from server.offline.scenario import load_scenario  # noqa: E402
from server.offline.run import run_offline  # noqa: E402

ROOT = repo_root()
RAW_NAME = re.compile(r"\b[a-z]+_[a-z0-9_]+\b")  # a signal name as the code writes it (w_1, slip_c2, ...)

RUNS = {
    "powershift": ("powershift", "powershift_single_swap", 0.002),
    "dct": ("dct", "dct_upshift", 0.002),
    "chain": ("chain", "chain_4mass", 0.004),
    "damper": ("damper", "damper_clutch_engagement", 0.002),
    "kinematic": ("kinematic", "kinematic_engagement", 0.004),
    "servo": ("servo", "servo_load_step_ramp", 0.0005),
    "transmission": ("zf8hp", "zf8hp_shifts", 0.002),
    "generic": ("chain", "chain_4mass", 0.004),  # a kind without figures of its own
}


def _key(line) -> tuple:
    return to_rgba(line.get_color()), line.get_linestyle()


def _handles(leg) -> list:
    return list(getattr(leg, "legend_handles", None) or getattr(leg, "legendHandles", []))


def _panels(fig: Figure) -> list[list]:
    """Axes grouped by position: an axes with its twins."""
    groups: dict[tuple, list] = {}
    for ax in fig.axes:
        groups.setdefault(tuple(np.round(ax.get_position().bounds, 6)), []).append(ax)
    return list(groups.values())


def _strip_math(text: str) -> str:
    return re.sub(r"\$[^$]*\$", "", text)


def check_readable(fig: Figure) -> None:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    fig_box = fig.bbox
    legends = [leg for ax in fig.axes for leg in ([ax.get_legend()] if ax.get_legend() else [])]
    for panel in _panels(fig):
        lines = [ln for ax in panel for ln in ax.get_lines() if ln.get_visible() and len(ln.get_xdata()) > 1]
        if not lines:
            continue
        listed = {_key(h) for ax in panel if ax.get_legend() for h in _handles(ax.get_legend())
                  if hasattr(h, "get_xdata")}  # lines (spans are patches)
        styles = {_key(ln) for ln in lines}
        names = " ".join(ax.get_ylabel() + ax.get_title() for ax in panel).strip()
        if len(styles) == 1 and not listed:
            assert names, "a panel's lone series is named by neither a legend nor an axis label"
        else:
            missing = [ln.get_label() for ln in lines if _key(ln) not in listed]
            assert not missing, f"lines without a legend entry in the panel {names!r}: {missing}"
        for ax in panel:
            for text in (ax.get_ylabel(), ax.get_title()):
                assert not RAW_NAME.search(_strip_math(text)), f"raw signal name in the label {text!r}"
        assert any(ax.get_ylabel() or ax.get_title() for ax in panel), "a panel without an axis label"
    for leg in legends:
        box = leg.get_window_extent(renderer)
        for text in leg.get_texts():
            assert not RAW_NAME.search(_strip_math(text.get_text())), f"raw signal name {text.get_text()!r}"
        for ax in fig.axes:
            overlap = min(box.x1, ax.bbox.x1) - max(box.x0, ax.bbox.x0), min(box.y1, ax.bbox.y1) - max(box.y0,
                                                                                                        ax.bbox.y0)
            assert min(overlap) <= 1.0, f"a legend ({[t.get_text() for t in leg.get_texts()]}) covers a panel"
        assert box.x0 >= fig_box.x0 - 1 and box.x1 <= fig_box.x1 + 1 and box.y0 >= fig_box.y0 - 1 \
            and box.y1 <= fig_box.y1 + 1, "a legend outside the figure"


@pytest.fixture
def drawn(monkeypatch):
    """Every figure saved while the test runs."""
    figures = []
    original = Figure.savefig

    def savefig(self, *args, **kwargs):
        figures.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return figures


@pytest.mark.parametrize("case", list(RUNS))
def test_every_figure_of_every_plant_kind_reads_without_the_code(case, tmp_path, drawn):
    config, scenario, dt = RUNS[case]
    plant = load_plant(config)
    trace = run_offline(plant, load_scenario(scenario).compile(plant, dt))
    if case == "generic":
        plant.kind = "other"  # instance attribute: this plant only
    files = plot_trace(plant, trace, tmp_path, title=f"{case} figures")
    assert files and len(drawn) == len(files)
    for fig in drawn:
        check_readable(fig)


def _example():
    spec = importlib.util.spec_from_file_location("closed_loop_swap", ROOT / "examples" / "closed_loop_swap.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_demo_figure_reads_without_the_code(tmp_path):
    ex = _example()
    res = ex.RunResult()
    for k in range(200):  # a made-up swap: only the figure is under test here
        t = k * 0.01
        y = {name: 0.0 for name in ex.TRACE_SIGNALS}
        y.update(w_1=80.0 - 10 * (t > 0.6), w_2=-30.0, w_out=1.7, ratio=48.0 if t < 0.8 else 32.0,
                 gear=1.0 if t < 0.5 else (0.0 if t < 0.8 else 3.0), pressure_c1=16.0 * (t < 0.6),
                 pressure_c2=16.0 * (t > 0.6), torque_c1=300.0 * (t < 0.6), torque_c2=300.0 * (t > 0.6))
        res.trace.append({"t": t, **y})
    res.timeline = [(0.0, "hold"), (0.5, "torque"), (0.6, "inertia"), (0.8, "lock")]
    fig = ex.figure_of(res, "a Powershift swap")
    check_readable(fig)
    ex.plot(res, tmp_path / "swap.png", "a Powershift swap")
    assert (tmp_path / "swap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_check_catches_a_line_without_a_legend_entry_and_a_legend_over_the_data():
    from server.plots.figures import figure, legend

    fig, (ax,) = figure(1)
    ax.plot([0, 1], [0, 1], label="first")
    ax.plot([0, 1], [1, 0])  # not named anywhere
    ax.set_ylabel("speed [rad/s]")
    legend(ax)
    with pytest.raises(AssertionError, match="without a legend entry"):
        check_readable(fig)
    fig, (ax,) = figure(1)
    ax.plot([0, 1], [0, 1], label="first")
    ax.plot([0, 1], [1, 0], label="second")
    ax.set_ylabel("speed [rad/s]")
    ax.legend(loc="center")  # over the data
    with pytest.raises(AssertionError, match="covers a panel"):
        check_readable(fig)
    fig, (ax,) = figure(1)
    ax.plot([0, 1], [0, 1], label="w_1")
    ax.plot([0, 1], [1, 0], label="engine speed")
    ax.set_ylabel("speed [rad/s]")
    legend(ax)
    with pytest.raises(AssertionError, match="raw signal name"):
        check_readable(fig)
