"""Timing telemetry: histogram bins, percentiles against numpy on known samples, window bookkeeping."""

from __future__ import annotations

import numpy as np

from server.realtime.telemetry import (C_TICKS, H_LAT, N_BINS, Telemetry, bin_of, bin_upper_edges_ns, format_summary,
                              percentile_ns, record_tick)


def test_bins_are_contiguous_and_every_value_lies_below_its_upper_edge():
    edges = bin_upper_edges_ns()
    assert len(edges) == N_BINS and np.all(np.diff(edges[:-1]) > 0) and np.isinf(edges[-1])
    for x in [0, 1, 99, 100, 99_999, 100_000, 100_999, 999_999, 1_000_000, 12_345_678, 999_999_999,
              10 ** 9, 10 ** 12]:
        b = bin_of(x)
        assert x < edges[b]
        assert b == 0 or x >= edges[b - 1]  # and not below the previous edge
    assert bin_of(-5) == 0


def test_percentiles_match_numpy_to_the_bin_resolution():
    rng = np.random.default_rng(3)
    lat = np.concatenate([rng.integers(0, 5_000, 9_000), rng.integers(20_000, 400_000, 990),
                          rng.integers(2_000_000, 30_000_000, 10)])
    tel = Telemetry(1_000_000)
    c, h, s = tel.counters, tel.hist, tel.samples
    for x in lat:
        record_tick(c, h, s, int(x), 10_000, 4_000, 0, True)
    for q in (50.0, 99.0, 99.9):
        exact = np.percentile(lat, q, method="inverted_cdf")
        edge = percentile_ns(h[H_LAT], q)
        b = bin_of(int(exact))
        assert edge == bin_upper_edges_ns()[b]  # the upper edge of the bin holding numpy's percentile
        assert exact < edge
    summ = tel.summary()
    assert summ["ticks"] == len(lat) and summ["lateness_us"]["max"] == lat.max() / 1000.0
    assert summ["lateness_us"]["p999"] <= summ["lateness_us"]["max"]


def test_window_resets_but_totals_accumulate_and_status_bits_are_counted():
    tel = Telemetry(1_000_000, sample_capacity=4)
    c, h, s = tel.counters, tel.hist, tel.samples
    for k in range(6):
        record_tick(c, h, s, 1000 * k, 2000, 1000, 0 if k % 2 else 16 | 1, True)
    tel.add_run_time(6_000_000)
    w = tel.window()
    assert w["ticks"] == 6 and w["rate_hz"] == 1000.0
    assert tel.window()["ticks"] == 0
    assert c[C_TICKS] == 6
    summ = tel.summary()
    assert summ["plant_status_nonzero_ticks"] == 3 and summ["plant_status_bit_ticks"] == {"1": 3, "16": 3}
    assert tel.sample_array()[:, 0].tolist() == [2000, 3000, 4000, 5000]  # the ring keeps the newest, in order
    text = format_summary(summ, "realtime")
    assert "wake-up lateness" in text and "missed ticks 0" in text


def test_untimed_ticks_record_no_lateness():
    tel = Telemetry(1_000_000)
    record_tick(tel.counters, tel.hist, tel.samples, 123_456, 5_000, 3_000, 0, False)
    summ = tel.summary()
    assert summ["lateness_us"]["p50"] is None and summ["tet_us"]["p50"] is not None


def _nearest_rank_upper_us(hist: dict, q: float) -> float:
    """The q-th percentile read from the whole histogram as the status hands it out (upper edge, us)."""
    rank = max(1, int(np.ceil(q / 100.0 * hist["total"])))
    acc = np.cumsum(hist["count"])
    return hist["upper_us"][int(np.searchsorted(acc, rank))]


def test_the_whole_histograms_count_every_tick_and_agree_with_the_percentiles():
    rng = np.random.default_rng(7)
    n = 5000
    tet = np.concatenate([rng.integers(3_000, 9_000, n - 60), rng.integers(40_000, 900_000, 50),
                          rng.integers(2_000_000, 20_000_000, 9), [3_000_000_000]])
    lat = rng.integers(-2_000, 300_000, n)
    tel = Telemetry(1_000_000)
    c, h, s = tel.counters, tel.hist, tel.samples
    for k in range(n):
        record_tick(c, h, s, int(lat[k]), int(tet[k]), 1_000, 0, k % 2 == 0)  # every other tick untimed
    hs, summ = tel.histograms(), tel.summary()
    assert hs["tet_us"]["total"] == sum(hs["tet_us"]["count"]) == summ["ticks"] == n
    assert hs["lateness_us"]["total"] == (n + 1) // 2  # the timed ticks only
    # each bin's count is the number of samples between its edges (the overflow bin's upper edge is None)
    for key, x in (("tet_us", tet), ("lateness_us", lat[::2])):
        hb = hs[key]
        for lo, hi, cnt in zip(hb["lower_us"], hb["upper_us"], hb["count"]):
            inside = (x >= lo * 1000) & (x < (np.inf if hi is None else hi * 1000))
            if lo == 0:
                inside |= x < 0  # negative lateness is counted in the first bin
            assert cnt == int(inside.sum())
        assert hb["upper_us"] == sorted(hb["upper_us"], key=lambda u: np.inf if u is None else u)
    assert hs["tet_us"]["upper_us"][-1] is None and hs["tet_us"]["count"][-1] == 1  # the 3 s tick: overflow
    for key in ("tet_us", "lateness_us"):
        for q, name in ((50.0, "p50"), (99.0, "p99"), (99.9, "p999")):
            edge = _nearest_rank_upper_us(hs[key], q)
            assert summ[key][name] == min(edge, summ[key]["max"])  # the summary's percentile is capped at max

