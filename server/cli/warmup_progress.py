"""The warm-up's progress written for a person: three stages, each with a count, and the time left.

A first start on a machine compiles about 130 functions in two processes
(:mod:`server.cli.warmup`).  A line per function, named, is for whoever
works on the compiled code (``warmup -v``); at the default verbosity the
warm-up shows instead::

    warmup: compiling 46 of 128: core 34/73, server 12/47, plant 0/8 (12 s so far, about 14 s left)

Stages and counts.  The functions are counted in three stages: ``core``
(the friction core, shared by every plant), ``server`` (the real-time
loop's, the faults' and the CAN and ZeroMQ codecs' kernels) and ``plant``
(the plant's own kernels).  numba's own helpers are compiled too but not
counted: their number depends on numba's version.  A stage's total comes
from the recorded profile below (the core's also from
:func:`plant_models.core.api.kernel_count`); a count never passes its
total: if a newer numba compiles more than the profile knows, the total
shown grows with the count.

Time left.  The profile (``warmup_profile.json``, recorded by
``bench/bench_warmup_eta.py --record`` from a cold warm-up of the first
demo's set) holds, for every function, the share of the whole compile's
wall time at which it was finished.  When a function finishes at ``t``
seconds into the compile and the profile says it used to finish at the
share ``f``, the whole compile takes about ``t / f``: the measured
relative costs of the kernels (the shares) scaled by the pace observed on
this machine now.  The estimate uses the furthest share reached so far.
Without a profile for the set being compiled (another set of configs) no
time left is shown, rather than a guess.  A function the profile does not
know (a kernel added since it was recorded) counts as the median cost of
its stage in its process (:func:`median_costs`: the median step between
consecutive shares): the process's timeline grows by that much, so a few
new kernels shift the estimate by about their own cost, not by whatever
the pace then does.  The profile must follow the compile set: a slow test
(``tests/test_warmup_profile.py``) compiles the set cold and fails when the
profile knows less than :data:`PROFILE_COVERAGE` of the functions compiled
(or of those it lists are no longer compiled), naming the command that
records it again.  The benchmark measures the
estimate against the actual end (``BENCHMARKS.md``).  Below
:data:`SHORT_LEFT_S` the line says ``under 5 s left`` (then ``finishing``):
a bound, not whole seconds that round badly near the end
(:func:`time_left_words`).

Liveness.  On a terminal the line is rewritten in place every
:data:`TTY_EVERY_S`; into a pipe or a file (CI, ``./demo.sh | tee``) a
new line follows after :data:`PIPE_EVERY_S` without one, or a third of
the time so far if that is longer (:data:`PIPE_SHARE`: a slow compile on a
busy machine still writes a few lines, about 13 for 200 s, not 40).  The thread that writes it needs the
interpreter's lock: a compile step that holds it (numba loading LLVM, for
one) can delay a line by a second or more on a busy machine, so the
interval is what the warm-up aims at, not a bound it can promise.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

PIPE_EVERY_S = 5.0  # into a pipe or file: a new line after this long without one, or PIPE_SHARE of the time so far
PIPE_SHARE = 1 / 3  # (so a compile of T s writes about 3 + ln(T / 15 s) / ln(4 / 3) lines: 13 for 200 s, 16 for 600 s)
TTY_EVERY_S = 0.5  # on a terminal: the line rewritten in place this often
PROFILE_PATH = Path(__file__).with_name("warmup_profile.json")

STAGES = ("core", "server", "plant")
SHORT_LEFT_S = 5.0  # below this the time left is shown as a bound ("under 5 s left"): see time_left_words
LAST_SHARE = 0.995  # a process's function at this share of its compile or later: its last, the process is done
# the share of the functions a warm-up compiles that the profile must know, and of the profile's functions that
# must still be compiled: a couple of kernels added by another change leave it above, a stale profile (more than
# a tenth missing: its estimates ran 25-43 % short) below
PROFILE_COVERAGE = 0.9
RECORD_COMMAND = "python bench/bench_warmup_eta.py --record 3 --runs 0"  # on a quiet machine
STAGE_OF_GROUP = {"core": "core", "loop": "server", "codecs": "server", "plant": "plant", "other": "plant"}


def time_left_words(left_s: float) -> str:
    """The time left as a person reads it: ``about N s left`` (whole seconds), below :data:`SHORT_LEFT_S` the
    bound ``under 5 s left``, and ``finishing`` at 0 s by the estimate (every process past its last
    function, or the end it predicted passed): also a claim of under 5 s.

    Why a bound: a few seconds before the end whole seconds round badly (``about 2 s left`` with 1.2 s left
    is 65 % off, though a second early), and the estimate's error there is the pace of the last function or
    two, not the profile.  bench/bench_warmup_eta.py counts a bound as right when the actual time left is
    within it.
    """
    if left_s >= SHORT_LEFT_S:
        return f"about {left_s:.0f} s left"
    if left_s > 0.0:
        return f"under {SHORT_LEFT_S:.0f} s left"
    return "finishing"


def profile_key(configs, serve_only: bool) -> str:
    """The key of a warm-up set in the profile: its config names (stems) and whether it is for a server only."""
    names = sorted(Path(str(c)).stem for c in configs)
    return " ".join(names) + (" --serve-only" if serve_only else "")


def load_profile(key: str, path: Path = PROFILE_PATH) -> dict | None:
    """The recorded profile of this warm-up set (``{"totals": {...}, "shares": {fkey: share}}``), or None."""
    try:
        return json.loads(path.read_text()).get(key)
    except (OSError, ValueError):
        return None


def profile_problem(profile: dict | None, compiled: list[str], key: str) -> str | None:
    """Why the profile ``key`` no longer fits the compile set, or None.  ``compiled``: the function keys a cold
    warm-up of that set finished (``process:stage:name:k``; the process is left out of the comparison, since a
    kernel both processes need goes to whichever gets to it first).  It fits while it knows at least
    :data:`PROFILE_COVERAGE` of the functions compiled and at least that share of its functions are still
    compiled."""
    if profile is None:
        return f"no profile {key!r} in {PROFILE_PATH.name}; record it on a quiet machine: {RECORD_COMMAND}"
    done = {k.split(":", 1)[1] for k in compiled}
    listed = {k.split(":", 1)[1] for k in profile.get("shares", {})}
    known = done & listed
    if len(known) >= PROFILE_COVERAGE * len(done) and len(known) >= PROFILE_COVERAGE * len(listed):
        return None
    new, gone = sorted(done - listed), sorted(listed - done)
    return (f"the warm-up's time-left profile {key!r} ({PROFILE_PATH.name}) is stale: it knows {len(known)} of the "
            f"{len(done)} functions a cold warm-up compiles and {len(known)} of its {len(listed)} are still compiled "
            f"(at least {PROFILE_COVERAGE:.0%} of each needed); not in it: {', '.join(new[:12]) or '-'}"
            f"{' ...' if len(new) > 12 else ''}; no longer compiled: {', '.join(gone[:12]) or '-'}"
            f"{' ...' if len(gone) > 12 else ''}.  Re-record it on a quiet machine: {RECORD_COMMAND}")


def median_costs(shares: dict[str, float]) -> dict[tuple[str, str], float]:
    """``{(process, stage): cost}``: the median share of its process's compile that a function of that stage
    took in the profile (the step from the share before it in its process); ``(process, "")``: over every stage
    of the process.  Used for a function the profile does not know."""
    steps: dict[tuple[str, str], list[float]] = {}
    for source in {k.split(":")[0] for k in shares}:
        timeline = sorted((v, k.split(":")[1]) for k, v in shares.items() if k.startswith(source + ":"))
        before = 0.0
        for share, stage in timeline:
            steps.setdefault((source, stage), []).append(share - before)
            steps.setdefault((source, ""), []).append(share - before)
            before = share
    return {key: statistics.median(v) for key, v in steps.items()}


def function_key(stage: str, name: str, seen: dict) -> str:
    """``stage:name:k``, k counting the earlier functions of that name in the stage (one per signature)."""
    k = seen.get((stage, name), 0)
    seen[(stage, name)] = k + 1
    return f"{stage}:{name}:{k}"


class StageProgress:
    """Counts compiled functions per stage and writes the person's lines (see the module's docstring).

    ``done(group, name)`` is called as each function is finished (from any
    thread; ``group`` as :mod:`plant_models.compiling` names them);
    ``start()`` starts the line thread, ``finish()`` stops it.  ``clock``
    and ``live`` (the thread) can be replaced in tests.
    """

    def __init__(self, say: Callable[[str], None], profile: dict | None, core_total: int,
                 live: Callable[[str], None] | None = None, clock: Callable[[], float] = time.perf_counter,
                 prefix: str = "warmup: "):
        """``say`` writes a line (no newline); ``live``, on a terminal, writes raw text (a line rewritten in
        place: ``prefix`` then goes before the text, as ``say`` puts it before its lines)."""
        self._say, self._live, self._clock, self._prefix = say, live, clock, prefix
        self._tty = live is not None
        self.profile = profile or {}
        totals = dict(self.profile.get("totals", {}))
        totals.setdefault("core", core_total)
        self.totals = {s: totals.get(s) for s in STAGES}
        self.counts = dict.fromkeys(STAGES, 0)
        self.began = clock()
        # per process: (furthest share reached, progress then, t), progress counting unknown functions' costs
        self._best: dict[str, tuple[float, float, float]] = {}
        self._extra: dict[str, float] = {}  # per process: the estimated cost of the functions the profile lacks
        self._costs = median_costs(self.profile.get("shares", {}))
        self._seen: dict = {}
        self._last_line = self.began
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pending = False  # a TTY line written without its newline
        self.record: list[tuple[float, str, float | None]] = []  # (t, function key, time left then) per function

    # -- events
    def done(self, group: str, name: str, source: str = "here") -> None:
        """A function of ``group`` compiled by ``source`` (``"here"``, or ``"beside"``: the second process)."""
        stage = STAGE_OF_GROUP.get(group)
        if stage is None:  # numba's own helpers: not counted
            return
        with self._lock:
            now = self._clock() - self.began
            self.counts[stage] += 1
            total = self.totals[stage]
            if total is not None and self.counts[stage] > total:  # the profile is older than this numba
                self.totals[stage] = self.counts[stage]
            key = function_key(f"{source}:{stage}", name, self._seen)
            share = self.profile.get("shares", {}).get(key)
            best = self._best.get(source)
            if share is None:  # not in the profile (a kernel added since): its stage's median cost
                cost = self._costs.get((source, stage), self._costs.get((source, "")))
                if cost is not None:
                    extra = self._extra[source] = self._extra.get(source, 0.0) + cost
                    reached = best[0] if best is not None else 0.0
                    self._best[source] = (reached, reached + extra, now)
            elif best is None or share > best[0]:
                self._best[source] = (share, share + self._extra.get(source, 0.0), now)
            self.record.append((now, key, self._left(now)))

    def note(self, text: str) -> None:
        """A line of its own (on a TTY it replaces the in-place line, which the next update writes again)."""
        self._line(text, final=True)

    # -- what is shown
    def elapsed_s(self) -> float:
        """Seconds since the stages began."""
        return self._clock() - self.began

    def left_s(self, now: float | None = None) -> float | None:
        """Seconds left by the profile and the pace so far (None: no profile or no share reached yet)."""
        return self._left((self._clock() if now is None else now) - self.began)

    def _left(self, now: float) -> float | None:
        # each process on its own timeline: the one that will finish last decides; a process past its last
        # function (share 1) is done
        # (with no unknown function, progress = share and the end is t / share)
        if not self._best:
            return None
        ends = [t * (1.0 + self._extra.get(source, 0.0)) / progress
                for source, (share, progress, t) in self._best.items() if share < LAST_SHARE and progress > 0.0]
        return max([end - now for end in ends] + [0.0])

    def summary(self) -> str:
        """``compiling 46 of 128: core 34/73, server 12/47, plant 0/8 (12 s so far, about 14 s left)``."""
        now = self._clock()
        parts = []
        for s in STAGES:
            total = self.totals[s]
            parts.append(f"{s} {self.counts[s]}" + (f"/{total}" if total is not None else ""))
        n = sum(self.counts.values())
        totals = [self.totals[s] for s in STAGES]
        of = f" of {sum(totals)}" if None not in totals else ""
        left = self.left_s(now)
        when = "" if left is None else f", {time_left_words(left)}"
        return f"compiling {n}{of}: {', '.join(parts)} ({now - self.began:.0f} s so far{when})"

    def _line(self, text: str, final: bool = False) -> None:
        with self._lock:
            if self._live is not None:
                self._live(f"\r\033[K{self._prefix}{text}" + ("\n" if final else ""))
                self._pending = not final
            else:
                self._say(text)
            self._last_line = self._clock()

    def due_s(self, now: float) -> float:
        """How long after the last line the next one is due (at ``now``)."""
        return TTY_EVERY_S if self._tty else max(PIPE_EVERY_S, PIPE_SHARE * (now - self.began))

    def tick(self) -> None:
        """Write the summary if it is due (the line thread calls this; tests call it with their clock)."""
        now = self._clock()
        if now - self._last_line >= self.due_s(now):
            self._line(self.summary())

    # -- the line thread
    def start(self) -> "StageProgress":
        """Start the line thread (once; a second call does nothing)."""
        with self._lock:
            if self._thread is not None:
                return self
            self._thread = threading.Thread(target=self._run, name="warmup-progress", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.tick()

    def finish(self) -> None:
        """Stop the line thread; end an in-place line with its newline."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._pending:
            self._line(self.summary(), final=True)


def person_lines(stages: StageProgress) -> Callable[[str], None]:
    """:class:`plant_models.compiling.CompileProgress`'s lines at the default verbosity: its first (no function
    names), the stages' line thread started with it; a line per function, a "still compiling NAME" and its
    count of every function numba compiled (its own helpers too) are for ``-v`` only."""
    def write(line: str) -> None:
        if line.startswith((" ", "compiled ")):
            return
        stages.note(line)
        if line.startswith("first start"):
            stages.start()
    return write


@contextmanager
def compile_progress(say: Callable[[str], None], verbose: bool = False,
                     live: Callable[[str], None] | None = None, prefix: str = "gearbox-hil: ") -> Iterator:
    """``with compile_progress(say):`` around a command's set-up (``serve``, ``simulate``): what a first start
    compiles, shown as the warm-up shows it, for a person: the stages with their counts and the time so far, a
    line every few seconds into a pipe or one line rewritten in place on a terminal (``live``), and on leaving
    one line with the counts and how long it took.  ``verbose``: a line per function by name instead (-v).

    No time left is shown here: the recorded profile is of the warm-up's two processes, and a command
    compiles everything in one, in another order (a wrong estimate is worse than none; ``gearbox-hil warmup``
    compiles the same with its time left).  Yields the :class:`~plant_models.compiling.CompileProgress`.
    """
    from plant_models.compiling import CompileProgress, core_kernel_count  # loads numba: not for --help

    if verbose:
        with CompileProgress(say) as progress:
            yield progress
        return
    stages = StageProgress(say, None, core_kernel_count(), live=live, prefix=prefix)
    with CompileProgress(person_lines(stages), on_done=stages.done) as progress:
        try:
            yield progress
        finally:
            stages.finish()
            if progress.compiled:
                stages.note(stages.summary().replace("compiling", "compiled", 1).split(" (")[0]
                            + f" in {stages.elapsed_s():.0f} s; later starts load them from the cache")
