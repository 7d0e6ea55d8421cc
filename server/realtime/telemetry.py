"""Timing telemetry of the real-time loop: TET, wake-up lateness, overruns, missed ticks, rate.

What dSPACE calls turnaround time and VeriStand the loop duration is the
*task execution time* (TET) here: from the tick's wake-up to the end of its
last adapter write (read -> step -> write).  *Lateness* is the wake-up time
minus the tick's absolute deadline.  An *overrun* is a tick that ended after
the next deadline; with the default policy the deadlines it covered are
skipped (*missed ticks*), never caught up in a burst.

Per tick, :func:`record_tick` (one compiled call, no allocation, no Python
object) adds the tick to log-linear histograms (100 ns resolution below
100 us, 1 us below 1 ms, 10 us below 10 ms, 100 us below 100 ms, 1 ms below
1 s) that are kept twice: since the start of the run, and for the current
status window (reset by :meth:`Telemetry.window`).  Percentiles are read from
the histograms outside the tick and are reported as the upper edge of their
bin, so they never understate.  :meth:`Telemetry.histograms` hands out the
run's TET and lateness histograms whole (their non-empty bins), for the web
workspace's timing panel and any client of the status channel.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from plant_models.contract.columns import Columns

JIT = dict(cache=True, nogil=True)

HISTOGRAMS = Columns("the histograms' rows", (
    ("H_LAT", "lateness since the run started"),
    ("H_LAT_WIN", "lateness in the current window"),
    ("H_TET", "TET since the run started"),
    ("H_TET_WIN", "TET in the current window"),
    ("H_STEP", "plant step alone, since the run started"),
    ("H_STEP_WIN", "plant step alone, in the current window"),
), count="N_HIST")
globals().update(HISTOGRAMS.constants())  # H_LAT .. H_STEP_WIN; N_HIST

# bins: (upper bound ns, width ns) of each decade, then one overflow bin
_DECADES = ((100_000, 100), (1_000_000, 1_000), (10_000_000, 10_000), (100_000_000, 100_000),
            (1_000_000_000, 1_000_000))
N_BINS = 1000 + 900 * 4 + 1
OVERFLOW_BIN = N_BINS - 1

COUNTERS = Columns("the counters (int64)", (
    ("C_TICKS", "ticks since the run started"),
    ("C_LAT_SUM", "lateness summed, ns"),
    ("C_LAT_MAX", "largest lateness, ns"),
    ("C_TET_SUM", "TET summed, ns"),
    ("C_TET_MAX", "largest TET, ns"),
    ("C_STEP_SUM", "plant step summed, ns"),
    ("C_STEP_MAX", "largest plant step, ns"),
    ("C_WIN_TICKS", "ticks in the current window"),
    ("C_WIN_LAT_MAX", "largest lateness in the window, ns"),
    ("C_WIN_TET_MAX", "largest TET in the window, ns"),
    ("C_WIN_STEP_MAX", "largest plant step in the window, ns"),
    ("C_OVERRUNS", "overruns"),
    ("C_MISSED", "missed ticks"),
    ("C_OVERRUNS_GRACE", "overruns during the start-up grace period (not counted against the stop policy)"),
    ("C_WIN_OVERRUNS", "overruns in the window"),
    ("C_STATUS_NONZERO", "ticks whose plant status word was not 0"),
    ("C_STATUS_BITS", "[8] ticks with status bit b set", 8),
    ("C_SAMPLES", "number of samples written into the sample ring so far"),
    ("C_LAT_TIMED", "ticks whose lateness is meaningful (wall-clock mode)"),
    ("C_WIN_LAT_TIMED", "the same in the window"),
    ("C_MISSED_GRACE", "missed ticks of the overruns in the start-up grace period (counted in C_MISSED too)"),
    ("C_LAT_MAX_AT", "deadlines since the start (ticks + missed ticks) at the tick of the largest lateness"),
    ("C_TET_MAX_AT", "the same for the largest TET"),
    (None, "spare", 2),
), count="N_COUNTERS")
globals().update(COUNTERS.constants())  # C_TICKS .. C_TET_MAX_AT; N_COUNTERS = 32


@njit("int64(int64)", **JIT)
def bin_of(x_ns):
    """Histogram bin of a duration in ns (negative durations count as 0)."""
    if x_ns < 0:
        return 0
    if x_ns < 100_000:
        return x_ns // 100
    if x_ns < 1_000_000:
        return 1000 + (x_ns - 100_000) // 1_000
    if x_ns < 10_000_000:
        return 1900 + (x_ns - 1_000_000) // 10_000
    if x_ns < 100_000_000:
        return 2800 + (x_ns - 10_000_000) // 100_000
    if x_ns < 1_000_000_000:
        return 3700 + (x_ns - 100_000_000) // 1_000_000
    return 4600


def bin_upper_edges_ns() -> np.ndarray:
    """Upper edge (ns) of every bin; the overflow bin's edge is infinite."""
    edges = []
    lo = 0
    for hi, width in _DECADES:
        edges.extend(range(lo + width, hi + 1, width))
        lo = hi
    edges.append(math.inf)
    out = np.asarray(edges, dtype=float)
    assert len(out) == N_BINS
    return out


_EDGES = bin_upper_edges_ns()
_EDGES_LIST = _EDGES.tolist()  # Python floats: summaries are built from plain numbers, not numpy scalars


@njit("void(int64[::1], int64[:, ::1], int64[:, ::1], int64, int64, int64, int64, boolean)", **JIT)
def record_tick(c, hist, samples, lateness_ns, tet_ns, step_ns, status, timed):
    """Add one tick to the counters and histograms.  Called in the real-time loop.

    ``timed`` is False in lockstep and as-fast-as-possible modes, where a tick
    has no deadline and lateness is not recorded.
    """
    c[C_TICKS] += 1  # noqa: F821
    c[C_WIN_TICKS] += 1  # noqa: F821
    if timed:
        b = bin_of(lateness_ns)
        hist[H_LAT, b] += 1  # noqa: F821
        hist[H_LAT_WIN, b] += 1  # noqa: F821
        c[C_LAT_SUM] += lateness_ns  # noqa: F821
        c[C_LAT_TIMED] += 1  # noqa: F821
        c[C_WIN_LAT_TIMED] += 1  # noqa: F821
        if lateness_ns > c[C_LAT_MAX]:  # noqa: F821
            c[C_LAT_MAX] = lateness_ns  # noqa: F821
            c[C_LAT_MAX_AT] = c[C_TICKS] + c[C_MISSED]  # noqa: F821 this tick's deadline is that many periods after the start
        if lateness_ns > c[C_WIN_LAT_MAX]:  # noqa: F821
            c[C_WIN_LAT_MAX] = lateness_ns  # noqa: F821
    b = bin_of(tet_ns)
    hist[H_TET, b] += 1  # noqa: F821
    hist[H_TET_WIN, b] += 1  # noqa: F821
    c[C_TET_SUM] += tet_ns  # noqa: F821
    if tet_ns > c[C_TET_MAX]:  # noqa: F821
        c[C_TET_MAX] = tet_ns  # noqa: F821
        c[C_TET_MAX_AT] = c[C_TICKS] + c[C_MISSED]  # noqa: F821
    if tet_ns > c[C_WIN_TET_MAX]:  # noqa: F821
        c[C_WIN_TET_MAX] = tet_ns  # noqa: F821
    b = bin_of(step_ns)
    hist[H_STEP, b] += 1  # noqa: F821
    hist[H_STEP_WIN, b] += 1  # noqa: F821
    c[C_STEP_SUM] += step_ns  # noqa: F821
    if step_ns > c[C_STEP_MAX]:  # noqa: F821
        c[C_STEP_MAX] = step_ns  # noqa: F821
    if step_ns > c[C_WIN_STEP_MAX]:  # noqa: F821
        c[C_WIN_STEP_MAX] = step_ns  # noqa: F821
    if status != 0:
        c[C_STATUS_NONZERO] += 1  # noqa: F821
        for bit in range(8):
            if status & (1 << bit):
                c[C_STATUS_BITS + bit] += 1  # noqa: F821
    n = samples.shape[0]
    if n > 0:
        j = c[C_SAMPLES] % n  # noqa: F821
        samples[j, 0] = lateness_ns
        samples[j, 1] = tet_ns
        samples[j, 2] = step_ns
        c[C_SAMPLES] += 1  # noqa: F821


@njit("int64(int64[::1], float64)", **JIT)
def percentile_bin(hist_row, q):
    """Bin holding the q-th percentile (0..100) of a histogram row (the nearest-rank definition); -1 if empty."""
    total = 0
    for b in range(hist_row.shape[0]):
        total += hist_row[b]
    if total == 0:
        return -1
    rank = max(1, int(math.ceil(q / 100.0 * total)))
    acc = 0
    for b in range(hist_row.shape[0]):
        acc += hist_row[b]
        if acc >= rank:
            return b
    return hist_row.shape[0] - 1


@njit("void(int64[::1], float64[::1], int64[::1])", **JIT)
def percentile_bins(hist_row, qs, out):
    """Bins of several ascending percentiles in one pass (-1 if the row is empty)."""
    total = 0
    for b in range(hist_row.shape[0]):
        total += hist_row[b]
    j = 0
    acc = 0
    for b in range(hist_row.shape[0]):
        if j >= qs.shape[0]:
            break
        acc += hist_row[b]
        while j < qs.shape[0] and total > 0 and acc >= max(1, int(math.ceil(qs[j] / 100.0 * total))):
            out[j] = b
            j += 1
    while j < qs.shape[0]:
        out[j] = -1 if total == 0 else hist_row.shape[0] - 1
        j += 1


_QS = np.array([50.0, 99.0, 99.9])


def percentile_ns(hist_row: np.ndarray, q: float) -> float:
    """The q-th percentile (0..100) of a histogram row, as the upper edge of its bin (ns); NaN if empty."""
    b = percentile_bin(hist_row, q)
    return math.nan if b < 0 else float(_EDGES[b])


def _stats_us(hist_row: np.ndarray, count: int, total_ns: int | None, max_ns: int) -> dict:
    if count == 0:
        return {"p50": None, "p99": None, "p999": None, "max": None, "mean": None}

    def us(x):
        return None if (x is None or not math.isfinite(x)) else round(x / 1000.0, 3)

    bins = np.empty(3, dtype=np.int64)
    percentile_bins(hist_row, _QS, bins)
    # a bin's upper edge may lie above the largest value seen
    mx = float(max_ns)
    p50, p99, p999 = (min(_EDGES_LIST[b], mx) if b >= 0 else math.nan for b in bins.tolist())
    return {"p50": us(p50), "p99": us(p99), "p999": us(p999), "max": us(float(max_ns)),
            "mean": us(total_ns / count) if total_ns is not None else None}


def histogram_bins(hist_row: np.ndarray) -> dict:
    """The non-empty bins of a histogram row: ``lower_us``, ``upper_us`` (None: the overflow bin), ``count``.

    ``total`` is the sum of the counts (the ticks the row holds).  A bin holds
    the durations d with lower <= d < upper; negative durations are in the
    first bin.  Outside the tick.
    """
    nz = np.flatnonzero(hist_row)
    lower = [0.0 if b == 0 else _EDGES_LIST[b - 1] / 1000.0 for b in nz.tolist()]
    upper = [None if b == OVERFLOW_BIN else _EDGES_LIST[b] / 1000.0 for b in nz.tolist()]
    counts = hist_row[nz].tolist()
    return {"total": int(sum(counts)), "lower_us": lower, "upper_us": upper, "count": counts}


class Telemetry:
    """Counters and histograms of one run, with the status-window bookkeeping.

    Parameters
    ----------
    period_ns
        The loop period, for the target rate.
    sample_capacity
        Length of an optional ring of raw per-tick samples (lateness, TET,
        step time in ns) for benchmarks; 0 keeps none.
    """

    def __init__(self, period_ns: int, sample_capacity: int = 0):
        self.period_ns = int(period_ns)
        self.counters = np.zeros(N_COUNTERS, dtype=np.int64)  # noqa: F821
        self.hist = np.zeros((N_HIST, N_BINS), dtype=np.int64)  # noqa: F821
        self.samples = np.zeros((max(int(sample_capacity), 0), 3), dtype=np.int64)
        self.run_ns = 0  # wall time spent running (paused time excluded), ns
        self.run_ticks_at_window = 0
        self.window_start_ns = 0
        self.window_run_ns = 0
        self.last_window: dict = {}

    def reset(self) -> None:
        self.counters[:] = 0
        self.hist[:] = 0
        self.samples[:] = 0
        self.run_ns = 0
        self.window_run_ns = 0
        self.last_window = {}

    def sample_array(self) -> np.ndarray:
        """The recorded raw samples in tick order, shape (n, 3): lateness, TET, step time (ns)."""
        n = self.samples.shape[0]
        k = int(self.counters[C_SAMPLES])  # noqa: F821
        if n == 0 or k == 0:
            return np.zeros((0, 3), dtype=np.int64)
        if k <= n:
            return self.samples[:k].copy()
        j = k % n
        return np.concatenate([self.samples[j:], self.samples[:j]])

    def add_run_time(self, ns: int) -> None:
        """Account wall time spent in the running state (for the actual rate)."""
        self.run_ns += ns
        self.window_run_ns += ns

    def summary(self) -> dict:
        """Timing since the run started (plain data for the status channel)."""
        c = self.counters
        ticks = int(c[C_TICKS])  # noqa: F821
        timed = int(c[C_LAT_TIMED])  # noqa: F821
        run_s = self.run_ns / 1e9
        return {
            "ticks": ticks,
            "run_time_s": round(run_s, 6),
            "rate_hz_target": round(1e9 / self.period_ns, 3),
            "rate_hz_actual": round(ticks / run_s, 3) if run_s > 0 else None,
            "lateness_us": _stats_us(self.hist[H_LAT], timed, int(c[C_LAT_SUM]), int(c[C_LAT_MAX])),  # noqa: F821
            "tet_us": _stats_us(self.hist[H_TET], ticks, int(c[C_TET_SUM]), int(c[C_TET_MAX])),  # noqa: F821
            "step_us": _stats_us(self.hist[H_STEP], ticks, int(c[C_STEP_SUM]), int(c[C_STEP_MAX])),  # noqa: F821
            "overruns": int(c[C_OVERRUNS]),  # noqa: F821
            "overruns_in_grace": int(c[C_OVERRUNS_GRACE]),  # noqa: F821
            "missed_ticks": int(c[C_MISSED]),  # noqa: F821
            "missed_ticks_in_grace": int(c[C_MISSED_GRACE]),  # noqa: F821
            # when the extremes happened: the deadline of their tick, s after the start (realtime mode)
            "lateness_max_at_s": round(int(c[C_LAT_MAX_AT]) * self.period_ns / 1e9, 6) if timed else None,  # noqa: F821
            "tet_max_at_s": round(int(c[C_TET_MAX_AT]) * self.period_ns / 1e9, 6) if timed else None,  # noqa: F821
            "missed_fraction": round(int(c[C_MISSED]) / (ticks + int(c[C_MISSED])), 6) if ticks else 0.0,  # noqa: F821
            "plant_status_nonzero_ticks": int(c[C_STATUS_NONZERO]),  # noqa: F821
            "plant_status_bit_ticks": {str(1 << b): int(c[C_STATUS_BITS + b]) for b in range(8)  # noqa: F821
                                       if c[C_STATUS_BITS + b]},  # noqa: F821
        }

    def histograms(self) -> dict:
        """The run's TET and lateness histograms (:func:`histogram_bins`; lateness is empty unless realtime)."""
        return {"tet_us": histogram_bins(self.hist[H_TET]), "lateness_us": histogram_bins(self.hist[H_LAT])}  # noqa: F821

    def window(self) -> dict:
        """Timing of the window since the last call, then start a new window."""
        c = self.counters
        ticks = int(c[C_WIN_TICKS])  # noqa: F821
        run_s = self.window_run_ns / 1e9
        out = {
            "ticks": ticks,
            "duration_s": round(run_s, 6),
            "rate_hz": round(ticks / run_s, 3) if run_s > 0 else None,
            "lateness_us": _stats_us(self.hist[H_LAT_WIN], int(c[C_WIN_LAT_TIMED]), None, int(c[C_WIN_LAT_MAX])),  # noqa: F821
            "tet_us": _stats_us(self.hist[H_TET_WIN], ticks, None, int(c[C_WIN_TET_MAX])),  # noqa: F821
            "overruns": int(c[C_WIN_OVERRUNS]),  # noqa: F821
        }
        for k in (C_WIN_TICKS, C_WIN_LAT_MAX, C_WIN_TET_MAX, C_WIN_STEP_MAX, C_WIN_OVERRUNS, C_WIN_LAT_TIMED):  # noqa: F821
            c[k] = 0
        self.hist[H_LAT_WIN] = 0  # noqa: F821
        self.hist[H_TET_WIN] = 0  # noqa: F821
        self.hist[H_STEP_WIN] = 0  # noqa: F821
        self.window_run_ns = 0
        self.last_window = out
        return out


def _when(at_s: float | None, grace_s: float) -> str:
    if at_s is None:
        return "n/a"
    return f"t = {at_s:.3f} s" + (" (in the start-up grace)" if at_s < grace_s else "")


def format_summary(s: dict, mode: str, grace_s: float | None = None) -> str:
    """The timing summary printed at shutdown (plain text, one item per line).

    With ``grace_s`` (the start-up grace, s) a line says when the largest
    lateness and TET happened and whether in the grace, where caches warm up
    and the start is allowed to be late.
    """

    def st(d: dict) -> str:
        if d.get("p50") is None:
            return "n/a"
        return (f"p50 {d['p50']:.1f}  p99 {d['p99']:.1f}  p99.9 {d['p999']:.1f}  max {d['max']:.1f}"
                + (f"  mean {d['mean']:.1f}" if d.get("mean") is not None else "") + " us")

    rate = s.get("rate_hz_actual")
    lines = [
        f"timing summary ({mode} mode)",
        f"  ticks            {s['ticks']} in {s['run_time_s']:.3f} s running",
        f"  rate             {rate if rate is None else f'{rate:.2f}'} Hz actual / {s['rate_hz_target']:.2f} Hz target",
        f"  wake-up lateness {st(s['lateness_us'])}",
        f"  TET              {st(s['tet_us'])}",
        f"  plant step       {st(s['step_us'])}",
        f"  overruns         {s['overruns']} (+{s['overruns_in_grace']} during start-up grace), "
        f"missed ticks {s['missed_ticks']} ({100.0 * s['missed_fraction']:.3f} %)",
    ]
    if grace_s is not None and s.get("lateness_max_at_s") is not None:
        lines.append(f"  maxima at        lateness {_when(s['lateness_max_at_s'], grace_s)}, "
                     f"TET {_when(s['tet_max_at_s'], grace_s)} (start-up grace: the first {grace_s:g} s)")
    if s.get("plant_status_nonzero_ticks"):
        lines.append(f"  plant status     {s['plant_status_nonzero_ticks']} ticks with a non-zero status word "
                     f"{s['plant_status_bit_ticks']}")
    return "\n".join(lines)
