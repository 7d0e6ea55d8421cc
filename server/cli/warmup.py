"""``gearbox-hil warmup [CONFIG ...]``: compile and cache the compiled code once, with progress shown.

Compiles the friction core, the kernels of the given plant configs (all
plant configs in ``configs/`` when none is given), the loop's telemetry and
watchdog kernels, the CAN codec's kernels and the compiled offline run
(:mod:`plant_models.offline`), so that later starts take
about a second (``--serve-only``: not the offline run, which the
real-time server never calls; ``./demo.sh`` uses it).  On a machine with two
or more cores it compiles in two processes (``--jobs``): the core's step
entry point and the plants in this one, the core's mode solver and start
entry point and the server's own kernels in a second one (the loop's
telemetry kernels in the first, after the plants: balance).  Its progress is
written for a person (:mod:`server.cli.warmup_progress`): three stages
(core, server, plant) with a count each and the time left; ``-v`` adds a
line per compiled function, by name.  With everything cached already,
warm-up loads the code in a few seconds and says so.  ``./demo.sh`` and
``./test.sh`` run it once after set-up; the container image runs it at
build time.

numba writes its cache next to the sources (``__pycache__``) or to
``NUMBA_CACHE_DIR``.  The cache is specific to the CPU model it was built
on: on a different CPU numba compiles again at the first start.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

from plant_models.config import ConfigError, load_toml, repo_root


def plant_configs(folder: Path | None = None) -> list[Path]:
    """The plant configs in ``configs/`` (I/O configs and message sets have no ``plant`` key)."""
    folder = folder or repo_root() / "configs"
    out = []
    for p in sorted(folder.glob("*.toml")):
        try:
            data = load_toml(p)
            if "plant" in data or "extends" in data:
                out.append(p)
        except ConfigError:
            continue
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("configs", nargs="*", metavar="CONFIG",
                   help="plant configs to compile (default: every plant config in configs/)")
    p.add_argument("--quiet", action="store_true", help="print only errors")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="a line per compiled function, by name (default: a few stages with a count each)")
    p.add_argument("--serve-only", action="store_true",
                   help="compile only what `gearbox-hil serve` runs: not the compiled offline run of "
                        "simulate, test and campaign (it compiles at their first use)")
    p.add_argument("--jobs", type=int, choices=(1, 2), default=None,
                   help="processes that compile at once (default: 2 on a machine with 2 or more cores: the "
                        "core's step and the plants in this one, the server's own kernels beside it)")
    p.add_argument("--server-kernels", action="store_true", help=argparse.SUPPRESS)  # the second process's part
    p.add_argument("--record-progress", metavar="PATH", help=argparse.SUPPRESS)  # bench/bench_warmup_eta.py


def _say(line: str) -> None:
    print(f"warmup: {line}", flush=True)


def _server_kernels(serve_only: bool, second_process: bool = False) -> None:
    """Compile (or load) the core's mode solver and start entry point and the kernels of the server.

    The mode solver is a C entry point of its own, which the step calls
    through its address (:func:`plant_models.core.entry.compile_solve_entry`),
    and the loop's, the faults' and the CAN and ZeroMQ codecs' kernels call
    neither the core nor a plant's code; the start's C entry point, last,
    shares most of its kernels with the step's (a kernel one process
    compiles the other waits for and loads).  So they compile in a process
    of their own while the core's step entry point compiles (numba's cache
    files are one per function, written whole under a temporary name and
    renamed); the first process then loads the solver's and the start's
    entry points and compiles the plants' own kernels.  In the second
    process (``second_process``) the loop's telemetry kernels are left to
    the first (:func:`_first_process_share`).
    """
    from plant_models.core.api import compile_solve_entry, compile_start_entry

    compile_solve_entry()
    import io_adapters.handover  # noqa: F401  (compiled at import: its signature is given; with the compiled tick)
    import io_adapters.zmq.codec  # noqa: F401  (the state publisher's row packing, as above)
    from io_adapters.can.layouts import warm_up as warm_up_can_codec  # the codec and the CAN tick stages
    from plant_models.offline import warm_up as warm_up_offline_run
    from server.realtime import scenario_player, watchdog  # noqa: F401  (their kernels compile or load at import)
    from server.realtime.faults import warm_up as warm_up_faults

    if not second_process:
        _first_process_share()

    warm_up_can_codec()
    if not serve_only:
        warm_up_offline_run()
    warm_up_faults()
    # last: most of its kernels are the step's, which the first process has compiled by now (compiled earlier,
    # this process waited for them at their locks while its own kernels waited)
    compile_start_entry()


def _first_process_share() -> None:
    """The server's kernels the first process compiles after the plants' when two processes compile: the loop's
    telemetry (its four kernels, compiled or loaded at import).

    The second process's part is the longer one (a cold compile of the first
    demo's set at load 20, two processes: the first finished 72 s before
    the second, of 468 s; the telemetry took the second 43 s; BENCHMARKS.md,
    cold start), and the telemetry shares no kernel with either part: moved,
    nothing compiles twice.
    """
    from server.realtime import telemetry  # noqa: F401  (its kernels compile or load at import)


_CORE_LINE = re.compile(r"^  core \d+(/\d+)?: (?P<name>\S+) \((?P<took>[0-9.]+) s;")


class _Beside:
    """The second process of a warm-up (see _server_kernels); its progress lines come through ``attach``.

    It writes a line ``@done GROUP NAME`` per compiled function (what the
    stages count) besides its lines for ``-v``.
    """

    def __init__(self, serve_only: bool):
        """Start it (before this process loads numba: the second loads it meanwhile, a second earlier at work)."""
        import subprocess

        cmd = [sys.executable, "-m", "server.cli.warmup", "--server-kernels"] + (["--serve-only"] if serve_only else [])
        self._proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                                      cwd=str(repo_root()))
        self.compiled = 0
        self.output: list[str] = []
        self._said = False

    def attach(self, progress, stages=None) -> None:
        """Show its progress through this process's from now on (its lines wait in the pipe till then).

        ``stages`` (a :class:`StageProgress`): its functions counted there
        and its ``-v`` lines dropped; None: its ``-v`` lines shown.
        """
        import threading

        def forward():
            for line in self._proc.stdout:
                line = line.rstrip("\n")
                if line.startswith(_DONE):
                    if stages is not None:
                        stages.start()
                        stages.done(*line[len(_DONE):].split(" ", 1), source="beside")
                elif line.startswith("  "):  # a function compiled (or still compiling): -v
                    if stages is None:
                        self._verbose_line(progress, line)
                elif line.startswith("compiled "):
                    self.compiled = int(line.split()[1])
                elif line.startswith("first start"):
                    if stages is not None:
                        stages.start()
                else:
                    self.output.append(line)

        self._reader = threading.Thread(target=forward, name="warmup-beside", daemon=True)
        self._reader.start()

    def _verbose_line(self, progress, line: str) -> None:
        if not self._said:
            progress.write("  (a second process compiles the core's mode solver and start and the server loop's "
                           "and the codecs' kernels meanwhile)")
            self._said = True
        core = _CORE_LINE.match(line)
        if core:  # counted in this process's core n/m
            progress.external("core", core["name"], float(core["took"]))
        else:
            progress.write(line)

    def wait(self) -> int:
        code = self._proc.wait()
        self._reader.join()
        if code:
            print("warmup: error: compiling the server's kernels failed:\n" + "\n".join(self.output), file=sys.stderr)
        return code


_DONE = "@done "  # the second process's line per compiled function: "@done GROUP NAME"


class _Beat:
    """``with _Beat(say, what):`` a line ``still WHAT (N s)`` every ``every_s`` until the block ends."""

    def __init__(self, say, what: str, every_s: float):
        import threading

        self._say, self._what, self._every, self._done = say, what, every_s, threading.Event()
        self._thread = threading.Thread(target=self._beat, name="warmup-beat", daemon=True)

    def _beat(self) -> None:
        began = time.perf_counter()
        while not self._done.wait(self._every):
            self._say(f"  still {self._what} ({time.perf_counter() - began:.0f} s)")

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()


def warm(configs: list[str | Path], say=_say, serve_only: bool = False, jobs: int | None = None,
         verbose: bool = False, live=None, record: str | None = None) -> int:
    """Compile (or load) everything a server of these plant configs runs; returns the number of failures.

    With ``serve_only`` the compiled offline run (which the real-time
    server never calls) is left to its first use.  With ``jobs`` 2 (the
    default on a machine with 2 or more cores) the server's own kernels
    compile in a second process while this one compiles the core and the
    plants: on a cold cache the core takes most of the time, and the
    other kernels need none of its code.  ``verbose``: a line per compiled
    function (else the stages of :mod:`.warmup_progress`); ``live``: on a
    terminal, a raw writer for the stage line rewritten in place;
    ``record``: a JSON file for ``bench/bench_warmup_eta.py``.
    """
    say("loading the compiler (numba) and the plant code")  # a second or two before numba says anything
    if jobs is None:
        jobs = 2 if (os.cpu_count() or 1) >= 2 else 1
    beside = _Beside(serve_only) if jobs == 2 else None
    from .warmup_progress import PIPE_EVERY_S, StageProgress, load_profile, person_lines, profile_key

    # 1 s on an idle machine, 3 s beside the second process's at load 2; loading LLVM holds the interpreter's
    # lock, which can hold this line back too
    with _Beat(say, "loading the compiler", PIPE_EVERY_S):
        from plant_models.compiling import CompileProgress, core_kernel_count  # loads numba: not for --help

    began = time.perf_counter()
    cpu0 = time.process_time() + _children_cpu()
    failed = 0
    stages = None if verbose else StageProgress(say, load_profile(profile_key(configs, serve_only)),
                                                core_kernel_count(), live=live)
    with CompileProgress(say if verbose else person_lines(stages),
                         on_done=None if stages is None else stages.done) as progress:
        if beside is not None:
            beside.attach(progress, stages)
        failed += _build_plants(configs, say if stages is None else stages.note, began)
        if beside is None:
            _server_kernels(serve_only)
        else:
            _first_process_share()
            failed += 1 if beside.wait() else 0
            progress.add_compiled(beside.compiled)
        if stages is not None:
            stages.finish()
        how = "compiled" if progress.compiled else "everything was cached already"
    if record and stages is not None:
        _record(record, stages, time.perf_counter() - stages.began)
    # CPU time beside the wall time: on a shared machine the wall time also says how busy the others are
    cpu = time.process_time() + _children_cpu() - cpu0
    say(f"ready in {time.perf_counter() - began:.1f} s ({how}; {cpu:.1f} s of CPU)")
    return failed


def _build_plants(configs, say, began: float) -> int:
    """Build each plant and step it (its kernels compile or load); returns the number of bad configs."""
    from plant_models.registry import load_plant

    failed = 0
    for cfg in configs:
        try:
            plant = load_plant(cfg)
            for _ in range(3):
                plant.step(1e-3)
        except ConfigError as exc:
            failed += 1
            print(f"warmup: error: {exc}", file=sys.stderr)
            continue
        say(f"{Path(str(cfg)).stem}: {plant.kind} plant ready ({time.perf_counter() - began:.1f} s elapsed)")
    return failed


def _record(path: str, stages, end_s: float) -> None:
    """The compile's functions as they finished, with the time left shown then, and its end (bench input)."""
    import json

    Path(path).write_text(json.dumps({"end_s": end_s, "totals": stages.counts,
                                      "done": [list(r) for r in stages.record]}))


def _children_cpu() -> float:
    """CPU s of the finished child processes so far (the second compiling process among them)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(args: argparse.Namespace) -> int:
    if args.server_kernels:  # the second process of a warm-up: progress lines without the prefix
        from plant_models.compiling import CompileProgress

        import threading

        lock = threading.Lock()  # its heartbeat thread writes too: a line is written whole, never interleaved

        def line_out(line: str) -> None:
            with lock:
                sys.stdout.write(line + "\n")
                sys.stdout.flush()

        with CompileProgress(line_out, on_done=lambda group, name: line_out(f"{_DONE}{group} {name}")):
            _server_kernels(args.serve_only, second_process=True)
        return 0
    configs = args.configs or plant_configs()
    # on a terminal the stages' line is rewritten in place; into a pipe or a file, a line every few seconds
    live = _live if not args.quiet and not args.verbose and sys.stdout.isatty() else None
    # numba is loaded in warm(), after its first line and after the second process started: loaded here first, it
    # left the demo a second without a line and started the second process a second later
    return 1 if warm(configs, _silent if args.quiet else _say, serve_only=args.serve_only, jobs=args.jobs,
                     verbose=args.verbose, live=live, record=args.record_progress) else 0


def _live(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _silent(line: str) -> None:
    """Prints nothing (``--quiet``; :func:`plant_models.compiling.silent` without loading numba for it)."""


EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a Ctrl-C


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m server.cli.warmup", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    interrupted = _count_interrupts()
    try:
        return run(args)
    except ConfigError as exc:
        print(f"warmup: error: {exc}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, RuntimeError):
        # numba swallows an interrupt in the middle of a compile and fails later ("no compiled object yet for
        # ..."): after a Ctrl-C either is the interrupt; a RuntimeError without one is a real error
        if not interrupted:
            raise
        if not args.server_kernels:  # the second process was interrupted too: one line, from the first
            print("warmup: interrupted (Ctrl-C); what was compiled is cached, the next run compiles the rest",
                  file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED


def _count_interrupts() -> list:
    """A SIGINT handler that records the interrupt (the returned list is non-empty after one) and raises it."""
    import signal

    import _thread

    seen: list = []

    def on_sigint(signum, frame):
        seen.append(signum)
        raise KeyboardInterrupt

    # An interrupt raised inside a callback from compiled code (LLVM's object-cache notification) cannot leave it:
    # Python would print it as "Exception ignored ..." with a traceback and carry on.  It is delivered again a
    # moment later from a timer thread, so that it lands in the main thread's Python code, where the compile's
    # own code catches it.
    default_hook = sys.unraisablehook

    def on_unraisable(unraisable):
        if seen and unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
            import threading

            threading.Timer(0.01, _thread.interrupt_main).start()
            return
        default_hook(unraisable)

    sys.unraisablehook = on_unraisable
    signal.signal(signal.SIGINT, on_sigint)
    return seen


if __name__ == "__main__":
    code = main()
    # everything is in numba's cache files already (each written whole when compiled); tearing down an
    # interpreter holding numba and LLVM's compiled code takes another 0.3 s that ./demo.sh would wait for
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
