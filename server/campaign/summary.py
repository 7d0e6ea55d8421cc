"""What a campaign over a test file answers: pass rates, which parameters decide failure, the worst runs.

From the table alone (:mod:`.testbase` columns):

* **pass rates**: the share of runs whose every expectation passed, and per
  expectation the shares that passed, failed and were in error (a run that
  failed as a whole counts as an error of every expectation);
* **influence**: for every numeric parameter, the share of the variance of
  the failure indicator (1 for a run that did not pass, 0 for one that did;
  and, per expectation that failed in some runs, of its own indicator)
  that the parameter explains alone: the first-order index Var(E[F | x]) /
  Var(F), estimated by cutting the runs into (up to) 10 bins of equal count
  along the parameter and comparing the bins' failure rates
  (:func:`server.plots.campaign.first_order`).  The two parameters with the
  largest index span the failing-region plot.  A first-order index sees
  what a parameter does on its own; a failure that needs two parameters
  together shows in neither index alone (the plot shows it);
* **worst runs**: the runs with the most failing (or erring) expectations;
  among runs with as many, the one farthest outside a bound first (the
  failing value's distance beyond the bound, relative to the bound's size;
  0 for a condition), then the lower run number.  Each is listed with the
  command that replays it as a test file (:mod:`.replay`).

``OUT/summary.json`` holds all of it; the command line prints it.
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .spec import CampaignSpec
from .testbase import VERDICT, column

SUMMARY = "summary.json"
WORST = 10  # runs listed


@dataclass
class ExpectationRate:
    column: str
    name: str
    expects: str
    passed: int
    failed: int
    errors: int
    pass_rate: float


@dataclass
class WorstRun:
    run: int
    parameters: dict
    failing: list  # [{"column", "name", "verdict", "t_s", "value"}]
    distance: float  # the largest relative distance beyond a bound of its failing expectations
    replay: str  # the command that replays it


@dataclass
class Summary:
    runs: int
    passed: int
    pass_rate: float
    expectations: list[ExpectationRate]
    influence: dict[str, float]  # parameter -> first-order index of failure, largest first
    region: list[str]  # the two parameters of the failing-region plot
    worst: list[WorstRun] = field(default_factory=list)
    # per expectation that failed in some runs but not all: the first-order indices of its own failure
    influence_per_expectation: dict[str, dict[str, float]] = field(default_factory=dict)


def _distance(exp, value: float) -> float:
    """How far a failing value lies beyond the expectation's bound, relative to the bound (0 for a condition)."""
    if value is None or not math.isfinite(value):
        return 0.0
    if exp.eq is not None:
        tol = max(exp.tol, exp.rel_tol * abs(exp.eq))
        return max(0.0, abs(value - exp.eq) - tol) / max(abs(exp.eq), tol, 1e-12)
    d = 0.0
    if exp.lo is not None:
        d = max(d, (exp.lo - exp.tol - value) / max(abs(exp.lo), exp.tol, 1e-12))
    if exp.hi is not None:
        d = max(d, (value - exp.hi - exp.tol) / max(abs(exp.hi), exp.tol, 1e-12))
    return max(0.0, d)


def influence(cols: dict, params: list[str], fail: np.ndarray) -> dict[str, float]:
    """First-order index of the failure indicator per numeric parameter, largest first (ties: file order)."""
    from server.plots.campaign import first_order

    y = fail.astype(float)
    bins = max(2, min(10, y.size // 5))
    s1 = {p: first_order(cols[p].astype(float), y, bins) for p in params if cols[p].dtype.kind in "fi"}
    return dict(sorted(s1.items(), key=lambda kv: -kv[1]))


def replay_command(spec: CampaignSpec, out: Path, run: int) -> str:
    return shlex.join(["gearbox-hil", "campaign", spec.source, "--out", str(out), "--replay", str(run)])


def summarize(table, spec: CampaignSpec, out: Path, worst: int = WORST) -> Summary:
    """The summary of a campaign table over a test file (see the module's docstring)."""
    cols = {name: table.column(name).to_numpy(zero_copy_only=False) for name in table.column_names}
    n = table.num_rows
    passed_run = cols[VERDICT] == "pass"
    rates = []
    for k, e in enumerate(spec.expectations):
        v = cols[column(k, "verdict")]
        p, f, er = int(np.sum(v == "pass")), int(np.sum(v == "fail")), int(np.sum(v == "error"))
        rates.append(ExpectationRate(f"expect[{k}]", e.name, e.bounds_text(), p, f, er, p / n if n else math.nan))
    params = [p.name for p in spec.parameters]
    s1 = influence(cols, params, ~passed_run)
    numeric = list(s1)
    region = numeric[:2]
    # the worst runs: most expectations not passed, then the farthest beyond a bound, then the run number
    bad = np.flatnonzero(~passed_run)
    scored = []
    for i in bad:
        failing, far = [], 0.0
        for k, e in enumerate(spec.expectations):
            label = cols[column(k, "verdict")][i]
            if label != "pass":
                t, value = float(cols[column(k, "fail_t_s")][i]), float(cols[column(k, "fail_value")][i])
                far = max(far, _distance(e, value))
                failing.append({"column": f"expect[{k}]", "name": e.name, "verdict": label,
                                "t_s": None if math.isnan(t) else t, "value": None if math.isnan(value) else value})
        scored.append((-len(failing), -far, int(cols["run"][i]), i, failing, far))
    scored.sort(key=lambda s: s[:3])
    worst_runs = [WorstRun(run, {p: _plain(cols[p][i]) for p in params}, failing, far,
                           replay_command(spec, out, run)) for _, _, run, i, failing, far in scored[:worst]]
    per = {}
    for k in range(len(spec.expectations)):
        bad_k = cols[column(k, "verdict")] != "pass"
        if 0 < bad_k.sum() < n:
            per[f"expect[{k}]"] = influence(cols, params, bad_k)
    return Summary(n, int(passed_run.sum()), float(passed_run.mean()) if n else math.nan, rates, s1, region,
                   worst_runs, per)


def _plain(x):
    return x.item() if hasattr(x, "item") else x


def write_summary(summary: Summary, out: Path) -> Path:
    path = out / SUMMARY
    path.write_text(json.dumps(asdict(summary), indent=1, allow_nan=False, default=str) + "\n")
    return path


def print_summary(summary: Summary, file=None) -> None:
    """The summary in a few lines: pass rates, influence, the worst runs with their replay command."""
    s = summary
    w = [f"pass rate {s.pass_rate:.1%}: {s.passed} of {s.runs} runs met every expectation"]
    for r in s.expectations:
        extra = f", {r.errors} in error" if r.errors else ""
        w.append(f"  {r.pass_rate:7.1%}  {r.column} {r.name} ({r.expects}): {r.failed} failed{extra}")
    if s.passed < s.runs and s.influence:
        w.append("what decides failure (first-order index: the share of the failure's variance a parameter "
                 "explains alone): " + ", ".join(f"{p} {v:.2f}" for p, v in s.influence.items()))
        for col, s1 in s.influence_per_expectation.items():
            w.append(f"  {col} alone: " + ", ".join(f"{p} {v:.2f}" for p, v in s1.items()))
    for r in s.worst[:5]:
        first = r.failing[0]
        at = f" at t = {first['t_s']:.6g} s, value {first['value']:.6g}" if first["t_s"] is not None else ""
        values = ", ".join(f"{p} = {v:.6g}" if isinstance(v, float) else f"{p} = {v}" for p, v in r.parameters.items())
        w.append(f"  run {r.run}: {len(r.failing)} failing, first {first['column']} {first['name']}{at} ({values})")
    if s.worst:
        w.append(f"replay one: {s.worst[0].replay}")
    print("\n".join(w), file=file)


__all__ = ["SUMMARY", "Summary", "influence", "print_summary", "replay_command", "summarize", "write_summary"]
