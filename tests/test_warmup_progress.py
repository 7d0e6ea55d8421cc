"""The warm-up's progress for a person (server/cli/warmup_progress.py): stages, counts, time left, liveness.

Driven by a clock of the test's own, so nothing here depends on how busy
the machine is.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from server.cli import warmup, warmup_progress
from server.cli.warmup_progress import PIPE_EVERY_S, StageProgress, load_profile, profile_key


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


PROFILE = {"totals": {"core": 3, "server": 2, "plant": 1},
           "shares": {"here:core:_a:0": 0.25, "here:core:_b:0": 0.5, "here:core:_c:0": 0.75,
                      "here:plant:step:0": 1.0, "beside:server:_x:0": 0.5, "beside:server:_y:0": 1.0}}


def test_counts_never_pass_their_totals():
    lines: list[str] = []
    clock = Clock()
    p = StageProgress(lines.append, {"totals": {"core": 2}}, core_total=99, clock=clock)
    assert p.totals["core"] == 2  # the profile's total wins over the kernel count
    for name in ("_a", "_b", "_c"):  # a third the profile does not know (a newer numba)
        p.done("core", name)
    assert p.counts["core"] == 3 and p.totals["core"] == 3
    assert "core 3/3" in p.summary()
    p.done("numba", "impl")  # numba's own helpers are not counted anywhere
    assert sum(p.counts.values()) == 3


def test_time_left_is_the_profiles_shares_scaled_by_the_pace_observed():
    clock = Clock()
    p = StageProgress([].append, PROFILE, core_total=3, clock=clock)
    assert p.left_s() is None and "left" not in p.summary()  # no share reached yet: no guess
    clock.t += 10.0
    p.done("core", "_a")  # a quarter of this process's compile in 10 s: 40 s in all
    assert p.left_s() == 30.0
    clock.t += 10.0
    p.done("loop", "_x", source="beside")  # the second process half-way at 20 s: it ends at 40 s too
    assert p.left_s() == 20.0
    clock.t += 30.0  # a slower pace now: this process at its half after 50 s, so 100 s in all
    p.done("core", "_b")
    assert p.left_s() == 50.0
    summary = p.summary()
    assert re.fullmatch(r"compiling 3 of 6: core 2/3, server 1/2, plant 0/1 \(50 s so far, about 50 s left\)",
                        summary), summary
    clock.t += 60.0  # later than the estimate: no negative time, a word instead
    assert p.left_s() == 0.0 and p.summary().endswith("(110 s so far, finishing)")


def test_a_process_past_its_last_function_no_longer_decides_the_time_left():
    clock = Clock()
    p = StageProgress([].append, PROFILE, core_total=3, clock=clock)
    clock.t += 5.0
    p.done("loop", "_x", source="beside")
    clock.t += 5.0
    p.done("loop", "_y", source="beside")  # the second process is done at 10 s
    clock.t += 10.0
    p.done("core", "_b")  # this one half-way at 20 s
    assert p.left_s() == 20.0


def test_into_a_pipe_a_line_every_few_seconds_then_a_third_of_the_time_so_far():
    lines: list[str] = []
    clock = Clock()
    p = StageProgress(lines.append, PROFILE, core_total=3, clock=clock)
    clock.t += PIPE_EVERY_S - 0.1
    p.tick()
    assert lines == []
    clock.t += 0.1
    p.tick()
    assert len(lines) == 1 and lines[0].startswith("compiling 0 of 6: ")
    for _ in range(2000):  # 200 s in steps of 0.1 s
        clock.t += 0.1
        p.tick()
    assert 9 <= len(lines) <= 14, lines  # not 40 (every 5 s): the interval grows with the time so far


def test_on_a_terminal_the_line_is_rewritten_in_place_and_ended_with_a_newline():
    raw: list[str] = []
    clock = Clock()
    p = StageProgress([].append, PROFILE, core_total=3, live=raw.append, clock=clock)
    clock.t += 1.0
    p.tick()
    clock.t += 1.0
    p.tick()
    assert len(raw) == 2 and all(r.startswith("\r\033[Kwarmup: compiling ") and "\n" not in r for r in raw)
    p.note("first start with this code on this machine: compiling (cached for later starts)")
    assert raw[-1].endswith("(cached for later starts)\n")
    clock.t += 1.0
    p.tick()
    p.finish()  # the in-place line gets its newline
    assert raw[-1].endswith("\n") and raw[-1].startswith("\r\033[Kwarmup: compiling ")


def test_function_names_and_heartbeats_are_for_verbose_only():
    lines: list[str] = []
    p = StageProgress(lines.append, PROFILE, core_total=3, clock=Clock())
    write = warmup_progress.person_lines(p)
    write("first start with this code on this machine: compiling (cached for later starts)")
    write("  core 1/73: _sizes (0.1 s; 1 s elapsed, about 40 s left)")
    write("  still compiling _build_cache (4 s so far; 5 s elapsed)")
    write("compiled 136 functions in 26.5 s; later starts load them from the cache")
    p.finish()
    assert lines == ["first start with this code on this machine: compiling (cached for later starts)"]


def test_the_first_demos_set_has_a_profile_with_a_share_for_nearly_every_counted_function():
    """A kernel both processes need is compiled by whichever gets to it first: the profile leaves out those
    whose process differed between its runs (bench/bench_warmup_eta.py), a few at most."""
    profile = load_profile(profile_key(["powershift"], serve_only=True))
    assert profile is not None
    counted = {}
    for key, share in profile["shares"].items():
        source, stage, _name, _k = key.split(":")
        assert source in ("here", "beside") and stage in warmup_progress.STAGES and 0 < share <= 1
        counted[stage] = counted.get(stage, 0) + 1
    assert set(counted) == set(profile["totals"])
    assert all(0.9 * profile["totals"][s] <= n <= profile["totals"][s] for s, n in counted.items()), counted
    assert profile_key(["configs/powershift.toml"], True) == "powershift --serve-only"


def test_loading_the_compiler_says_so_while_it_takes_long():
    """A line per interval while the block lasts (at least one in ten intervals: no bound on the machine's pace)."""
    import time

    lines: list[str] = []
    with warmup._Beat(lines.append, "loading the compiler", every_s=0.05):
        time.sleep(0.5)
    assert lines and all(re.fullmatch(r"  still loading the compiler \(\d+ s\)", ln) for ln in lines), lines


def test_short_times_left_are_said_as_a_bound_not_in_whole_seconds():
    """A few seconds before the end whole seconds round badly (a quiet host's "about 2 s left" with 1.2 s left
    was the one estimate of 11 outside +-30 %): below 5 s the line says "under 5 s left", at 0 "finishing"."""
    from server.cli.warmup_progress import SHORT_LEFT_S, time_left_words

    assert SHORT_LEFT_S == 5.0
    assert time_left_words(818.4) == "about 818 s left"
    assert time_left_words(5.0) == "about 5 s left"
    assert time_left_words(4.99) == "under 5 s left"
    assert time_left_words(1.2) == "under 5 s left"
    assert time_left_words(0.0) == "finishing"
    clock = Clock()
    p = StageProgress([].append, PROFILE, core_total=3, clock=clock)
    clock.t += 10.0
    p.done("core", "_a")  # 40 s in all by the profile
    clock.t += 27.0
    assert p.left_s() == 3.0 and p.summary().endswith("(37 s so far, under 5 s left)")


def test_the_benchmark_counts_a_bound_right_when_the_actual_time_left_is_within_it():
    """bench/bench_warmup_eta.py reads the lines a person sees: "about N s left" by its relative error, "under
    5 s left" and "finishing" as right when the warm-up ended within 5 s, else by how far short the bound fell."""
    bench = Path(__file__).resolve().parent.parent / "bench"
    sys.path.insert(0, str(bench))
    try:
        import bench_warmup_eta as b
    finally:
        sys.path.remove(str(bench))
    lines = [(0.0, "first start with this code on this machine"),
             (10.0, "compiling 9 of 123: ... (10 s so far, about 21 s left)"),
             (27.0, "compiling 99 of 123: ... (27 s so far, under 5 s left)"),
             (29.8, "compiling 123 of 123: ... (29 s so far, finishing)"),
             (31.0, "ready in 31.0 s (compiled; 40.1 s of CPU)")]
    record = {"end_s": 31.0, "done": [[10.0, "k", 21.0], [27.0, "k", 3.2], [29.0, "k", 0.0]]}
    shown, dense = b.errors({"lines": lines, "record": record})
    assert shown == [0.0, 0.0, 0.0]  # 21 s with 21 s left; 4 s and 1.2 s left, both within 5 s
    assert dense == [0.0, 0.0, 0.0]
    late = [(0.0, "first start"), (10.0, "(10 s so far, under 5 s left)"), (20.0, "ready in 20.0 s")]
    assert b.errors({"lines": late, "record": {"end_s": 20.0, "done": []}})[0] == [5.0 / 10.0 - 1]


def test_a_function_the_profile_does_not_know_counts_as_its_stages_median_cost():
    """A kernel added since the profile was recorded: every function here takes 10 s, the profile knows four of
    them (a quarter each) and a fifth core kernel is new.  Counted at its stage's median cost (a quarter of the
    old compile), the estimate is exact (50 s in all) from the moment the new kernel has been seen; ignoring it,
    as before, left the estimates off by up to 10 s (20 s left said at 30 s, 30 s left at 20 s)."""
    from server.cli.warmup_progress import median_costs

    assert median_costs(PROFILE["shares"])[("here", "core")] == 0.25
    assert median_costs(PROFILE["shares"])[("beside", "server")] == 0.5
    clock = Clock()
    p = StageProgress([].append, PROFILE, core_total=3, clock=clock)
    clock.t += 10.0
    p.done("core", "_a")
    assert p.left_s() == 30.0  # 40 s by the profile: the new kernel is not known yet
    for name, end in (("_new", 50.0), ("_b", 50.0), ("_c", 50.0)):
        clock.t += 10.0
        p.done("core", name)
        assert p.left_s() == end - (clock.t - 100.0), name
    clock.t += 10.0
    p.done("plant", "step")  # the process's last function: done
    assert p.left_s() == 0.0 and p.counts["core"] == 4 and p.totals["core"] == 4
