"""The loop's settings, checked once: modes, wait strategies, rate bounds, run-time limits.

A light module (no compiled code), so the command line can offer the
choices and check them without loading the loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from plant_models.errors import GearboxHilError

from server.realtime import rtsetup

MODES = ("realtime", "lockstep", "afap")
WAITS = ("sleep", "sleep_spin", "spin")
OVERRUN_POLICIES = ("skip", "stop")
RATE_MIN_HZ = 100.0  # below this the loop is no HIL plant any more
RATE_MAX_HZ = 10_000.0  # above this a Python tick cannot keep its deadlines


class SettingError(GearboxHilError, ValueError):
    """Loop settings the loop cannot run with.

    ``settings`` names the settings involved as :class:`LoopConfig` fields
    (``realtime.<name>`` for the OS settings), the one to change first;
    ``problem`` says what is wrong.  :mod:`server.realtime.runtime` reports it against
    the config key or the command-line option the value came from.
    """

    def __init__(self, settings: tuple[str, ...], problem: str):
        super().__init__(problem)
        self.settings = settings
        self.problem = problem


@dataclass(frozen=True)
class LoopConfig:
    """Loop settings (``[loop]`` and ``[realtime]`` in the I/O config, see docs/server.md).

    Every rule the loop relies on is checked here, once, whatever the
    settings came from (a config file, command-line overrides, code):
    raises :class:`SettingError`.
    """

    mode: str = "realtime"
    rate_hz: float = 1000.0
    wait: str = "sleep_spin"
    spin_margin_us: float = 200.0  # sleep_spin: wake this early, then spin to the deadline
    spin_margin_adapt: bool = True  # spin only as long as the measured sleep overshoot needs (20 us .. the above)
    autostart: bool = True
    overrun_policy: str = "skip"
    max_overruns: int = 10
    startup_grace_s: float = 1.0
    duration_s: float = 0.0  # 0: until stopped.  Wall time running (realtime) or simulated time (lockstep, afap)
    status_interval_s: float = 0.5  # length of a status window (recent rate, TET, lateness); 0 disables windows
    status_line: bool = True  # print the live status line once per window
    status_outputs: tuple[str, ...] = ()  # outputs shown in the status line; empty: speeds and gear
    service_budget_us: float = 300.0  # slack needed before the deadline to serve a control request
    gc_interval_s: float = 1.0  # young-generation collection in the slack; 0 disables it
    max_step_request: int = 10_000_000  # largest N of one lockstep "step"
    sample_capacity: int = 0  # raw per-tick timing samples kept for benchmarks
    ring_rows: int = 4096  # rows of the state ring (ticks its consumers may fall behind before losing states)
    snapshot_dir: str = ""  # the only folder snapshot files are read from and written to; "": files refused
    snapshot_max_bytes: int = 64 * 2 ** 20  # largest snapshot file written or read
    realtime: rtsetup.RealtimeConfig = field(default_factory=rtsetup.RealtimeConfig)

    def __post_init__(self) -> None:
        for name, choices in (("mode", MODES), ("wait", WAITS), ("overrun_policy", OVERRUN_POLICIES)):
            value = getattr(self, name)
            if value not in choices:
                raise SettingError((name,), f"must be one of {', '.join(repr(c) for c in choices)}, got {value!r}")
        if not RATE_MIN_HZ <= self.rate_hz <= RATE_MAX_HZ:
            raise SettingError(("rate_hz",), f"must be between {RATE_MIN_HZ:g} and {RATE_MAX_HZ:g} Hz, "
                               f"got {self.rate_hz:g}")
        if not 16 <= self.ring_rows <= 10_000_000:
            raise SettingError(("ring_rows",), f"must be between 16 and 10000000 rows, got {self.ring_rows}")
        if not 1024 <= self.snapshot_max_bytes <= 2 ** 34:
            raise SettingError(("snapshot_max_bytes",), f"must be between 1024 and {2 ** 34} bytes, "
                               f"got {self.snapshot_max_bytes}")
        if not self.duration_s >= 0:
            raise SettingError(("duration_s",), f"must be >= 0 s, got {self.duration_s:g}")
        problem = rtsetup.check_combination(self.realtime, self.wait)
        if problem:
            raise SettingError(("realtime.sched_fifo_priority", "wait"), problem)

    @property
    def period_ns(self) -> int:
        return int(round(1e9 / self.rate_hz))
