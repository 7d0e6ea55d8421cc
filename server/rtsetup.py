"""Operating-system settings for the real-time thread: SCHED_FIFO, CPU affinity, mlockall, timer slack.

Each setting is optional and best effort, the way ros2_control asks for
SCHED_FIFO: where the process lacks the privilege (no CAP_SYS_NICE, an
RLIMIT_MEMLOCK too small for the interpreter, a container without
``--cap-add``), the loop logs a warning and runs without it.  Everything is
undone by :meth:`RealtimeSettings.restore`.

SCHED_FIFO together with a pure busy-wait starves the kernel's own threads on
that CPU and triggers real-time throttling (``sched_rt_runtime_us``: the
process is stopped for about 50 ms every second), so that combination is
refused unless the configuration explicitly allows it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import sys
import threading
from dataclasses import dataclass, field

PR_SET_TIMERSLACK = 29
PR_GET_TIMERSLACK = 30
MCL_CURRENT = 1
MCL_FUTURE = 2


@dataclass(frozen=True)
class RealtimeConfig:
    """Requested OS settings (``[realtime]`` in the I/O config)."""

    sched_fifo_priority: int = 0  # 1..99 asks for SCHED_FIFO; 0 keeps normal scheduling
    cpu_affinity: tuple[int, ...] = ()  # CPUs the loop may run on; empty keeps the inherited set
    lock_memory: bool = False  # mlockall(MCL_CURRENT | MCL_FUTURE)
    timer_slack_ns: int = 1  # prctl(PR_SET_TIMERSLACK); the default 50 us adds to every sleep
    allow_fifo_with_spin: bool = False


@dataclass
class RealtimeSettings:
    """What was applied, what failed, and how to undo it."""

    applied: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    _old_sched: tuple | None = None
    _old_affinity: set | None = None
    _old_slack: int | None = None
    _locked: bool = False

    def as_dict(self) -> dict:
        return {"applied": dict(self.applied), "warnings": list(self.warnings)}

    def restore(self) -> None:
        """Undo the settings (scheduler, affinity, timer slack, memory lock)."""
        if self._old_sched is not None and hasattr(os, "sched_setscheduler"):
            try:
                policy, prio = self._old_sched
                os.sched_setscheduler(0, policy, os.sched_param(prio))
            except OSError as exc:
                self.warnings.append(f"could not restore the scheduling policy: {exc.strerror}")
            self._old_sched = None
        if self._old_affinity is not None:
            try:
                os.sched_setaffinity(0, self._old_affinity)
            except OSError as exc:
                self.warnings.append(f"could not restore the CPU affinity: {exc.strerror}")
            self._old_affinity = None
        if self._old_slack is not None:
            _prctl(PR_SET_TIMERSLACK, self._old_slack)
            self._old_slack = None
        if self._locked:
            libc = _libc()
            if libc is not None:
                libc.munlockall()
            self._locked = False


def _libc():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None


def _prctl(option: int, value: int) -> int:
    libc = _libc()
    if libc is None or not hasattr(libc, "prctl"):
        return -1
    return int(libc.prctl(ctypes.c_int(option), ctypes.c_ulong(value), ctypes.c_ulong(0), ctypes.c_ulong(0),
                          ctypes.c_ulong(0)))


def check_combination(cfg: RealtimeConfig, wait: str) -> str | None:
    """Why the requested settings must not be combined with this wait strategy, or None."""
    if cfg.sched_fifo_priority > 0 and wait == "spin" and not cfg.allow_fifo_with_spin:
        return ("SCHED_FIFO with wait = \"spin\" starves the CPU and triggers the kernel's real-time throttling "
                "(the loop stops for ~50 ms every second); use wait = \"sleep_spin\", or set "
                "allow_fifo_with_spin = true if the CPU is isolated and throttling is disabled")
    return None


def apply(cfg: RealtimeConfig, log: logging.Logger) -> RealtimeSettings:
    """Apply the settings to the calling thread; failures become warnings."""
    rs = RealtimeSettings()
    if sys.platform.startswith("linux"):
        old = _prctl(PR_GET_TIMERSLACK, 0)
        if cfg.timer_slack_ns > 0 and old >= 0 and _prctl(PR_SET_TIMERSLACK, cfg.timer_slack_ns) == 0:
            rs._old_slack = old
            rs.applied["timer_slack_ns"] = cfg.timer_slack_ns
    if cfg.cpu_affinity:
        try:
            rs._old_affinity = os.sched_getaffinity(0)
            os.sched_setaffinity(0, set(cfg.cpu_affinity))
            rs.applied["cpu_affinity"] = sorted(cfg.cpu_affinity)
        except (OSError, AttributeError) as exc:
            rs._old_affinity = None
            rs.warnings.append(f"CPU affinity {list(cfg.cpu_affinity)} not applied: {_why(exc)}")
    if cfg.sched_fifo_priority > 0:
        try:
            rs._old_sched = (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(cfg.sched_fifo_priority))
            rs.applied["sched_fifo_priority"] = cfg.sched_fifo_priority
        except (OSError, AttributeError) as exc:
            rs._old_sched = None
            rs.warnings.append(f"SCHED_FIFO priority {cfg.sched_fifo_priority} not applied: {_why(exc)} "
                               "(needs CAP_SYS_NICE or an rtprio limit; in Docker: --cap-add SYS_NICE)")
    if cfg.lock_memory:
        libc = _libc()
        if libc is None:
            rs.warnings.append("mlockall not applied: libc not found")
        elif libc.mlockall(MCL_CURRENT | MCL_FUTURE) != 0:
            err = ctypes.get_errno()
            rs.warnings.append(f"mlockall not applied: {os.strerror(err)} (needs CAP_IPC_LOCK or a large enough "
                               "RLIMIT_MEMLOCK; in Docker: --cap-add IPC_LOCK --ulimit memlock=-1)")
        else:
            rs._locked = True
            rs.applied["mlockall"] = True
    for w in rs.warnings:
        log.warning("%s", w)
    return rs


def install_signal_handlers(on_signal) -> dict | None:
    """SIGINT and SIGTERM call ``on_signal(name)`` (the main thread only; elsewhere None); returns the old handlers."""
    if threading.current_thread() is not threading.main_thread():
        return None
    old = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        old[sig] = signal.signal(sig, lambda signum, frame: on_signal(signal.Signals(signum).name))
    return old


def restore_signal_handlers(old: dict | None) -> None:
    """Put back what :func:`install_signal_handlers` returned."""
    for sig, h in (old or {}).items():
        signal.signal(sig, h)


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
