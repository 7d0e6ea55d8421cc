#!/usr/bin/env python3
"""The figures and numbers of a campaign's section in docs/campaigns.md, made from a fresh run of the campaign.

Runs the campaign on the embedded Dask cluster (from scratch: ``--restart``),
draws its figures (``--plot``), copies them into ``docs/figures/`` as
``PREFIX_NAME.png`` and prints what the section cites: the pass rates, the
first-order indices of failure and, for the two parameters that decide
failure most, the failure rate over bins of each (where the failing region
begins), plus the medians of the metrics of passing and failing runs.

    python scripts/campaign_figures.py campaigns/closed_loop_swap_1_3.toml --prefix campaign_closed_loop \
        --figures failing_region sensitivity shift_time
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def bins_table(x: np.ndarray, fail: np.ndarray, n: int = 8) -> list[tuple[float, float, float, int]]:
    """(low, high, failure rate, runs) over n equal-width bins of x."""
    edges = np.linspace(np.min(x), np.max(x), n + 1)
    idx = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, n - 1)
    return [(edges[b], edges[b + 1], float(fail[idx == b].mean()) if np.any(idx == b) else float("nan"),
             int(np.sum(idx == b))) for b in range(n)]


def _rates_in(cols: dict, p: str, lo: float, hi: float, n_exp: int) -> list[tuple[str, float]]:
    """Per expectation, the failure rate of the runs with ``lo <= p <= hi``."""
    sel = (cols[p] >= lo) & (cols[p] <= hi)
    return [(f"expect[{k}]", float(np.mean(cols[f"expect[{k}].verdict"][sel] != "pass"))) for k in range(n_exp)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("campaign")
    ap.add_argument("--prefix", required=True, help="figure names in docs/figures: PREFIX_NAME.png")
    ap.add_argument("--out", default=None, help="the campaign's output folder (default: out/PREFIX)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--figures", nargs="+", default=None, metavar="NAME",
                    help="copy only these figures (names without .png; default: all)")
    args = ap.parse_args()
    from server.cli import main as cli

    out = Path(args.out or ROOT / "out" / args.prefix)
    code = cli(["campaign", args.campaign, "--out", str(out), "--workers", str(args.workers), "--restart", "--plot"])
    if code != 0:
        return code
    import json

    import pyarrow.parquet as pq

    from server.campaign.spec import load_campaign

    spec = load_campaign(args.campaign)
    figures = ROOT / "docs" / "figures"
    for png in sorted(out.glob("*.png")):
        if args.figures and png.stem not in args.figures:
            continue
        dest = figures / f"{args.prefix}_{png.name}"
        shutil.copyfile(png, dest)
        print(f"figure: {dest.relative_to(ROOT)}")
    table = pq.read_table(out / "campaign.parquet")
    cols = {n: table.column(n).to_numpy(zero_copy_only=False) for n in table.column_names}
    if not spec.judged:
        return 0
    summary = json.loads((out / "summary.json").read_text())
    fail = cols["verdict"] != "pass"
    print(f"\nruns {summary['runs']}, passed {summary['passed']} ({summary['pass_rate']:.1%})")
    for r in summary["expectations"]:
        print(f"  {r['column']} {r['name']} ({r['expects']}): pass rate {r['pass_rate']:.1%}, {r['failed']} failed, "
              f"{r['errors']} errors")
    print("first-order index of failure: " + ", ".join(f"{p} {v:.3f}" for p, v in summary["influence"].items()))
    for col, s1 in summary["influence_per_expectation"].items():
        print(f"  {col} alone: " + ", ".join(f"{p} {v:.3f}" for p, v in s1.items()))
    for p in [p.name for p in spec.parameters if cols[p.name].dtype.kind in "fi"]:
        print(f"\nfailure rate over {p}:")
        for lo, hi, rate, count in bins_table(cols[p].astype(float), fail):
            per = ", ".join(f"{c} {r:.0%}" for c, r in _rates_in(cols, p, lo, hi, len(spec.expectations)))
            print(f"  [{lo:9.4g}, {hi:9.4g}]  {rate:6.1%} of {count} ({per})")
    for m in spec.metric_names:
        v = cols[m]
        ok = np.isfinite(v)
        print(f"{m}: median {np.median(v[ok & ~fail]) if np.any(ok & ~fail) else float('nan'):.4g} in passing runs, "
              f"{np.median(v[ok & fail]) if np.any(ok & fail) else float('nan'):.4g} in failing runs")
    print(f"\nworst run: {summary['worst'][0] if summary['worst'] else None}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
