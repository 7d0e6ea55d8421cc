"""Command watchdog: what the plant's inputs do when the controller goes silent.

A real TCU that loses its link must not leave 16 bar on a clutch forever,
and neither may the HIL plant.  The watchdog is plant-agnostic: it knows the
plant only through its declared input signals.

Behaviour (``docs/server.md``): once armed by the first valid command, if no
valid command arrives for ``timeout``, the watchdog *trips*: every
supervised input is held at its last commanded value for ``hold``, then
ramps linearly to its safe value (by default its declared default, so
pressures and torques go to 0) in ``ramp`` time; integer inputs (gear
selectors) keep their value until every other input has arrived, then jump
(clutches open before a gear goes to neutral).  The ramp is applied as a
first-order hold (value and rate per step), so the plant sees an exact
straight line.  With ``recovery = "auto"`` the next valid command ends the
trip and commands take over again from where the watchdog left the inputs;
with ``"manual"`` the safe action continues until a ``clear_watchdog``
control request.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
from numba import njit

from plant_models.plant import Param, Plant

JIT = dict(cache=True, nogil=True)

log = logging.getLogger("gearbox_hil.watchdog")

OK = 0
HOLD = 1
RAMP = 2
SAFE = 3
PHASE_NAMES = {OK: "ok", HOLD: "hold", RAMP: "ramp", SAFE: "safe"}


@dataclass(frozen=True)
class InputPolicy:
    """Safe action of one input: its safe value, its ramp time (s) and whether it is supervised at all."""

    safe_value: float
    ramp_s: float
    supervised: bool = True


@dataclass(frozen=True)
class WatchdogConfig:
    """Validated watchdog settings (see ``[watchdog]`` in docs/server.md)."""

    enabled: bool = True
    timeout_s: float = 0.1
    hold_s: float = 0.2
    ramp_s: float = 0.5
    modes: tuple[str, ...] = ("realtime",)
    recovery: str = "auto"  # or "manual"
    inputs: tuple[tuple[str, InputPolicy], ...] = ()  # per-input overrides


@njit("void(float64[::1], float64[::1], float64[::1], float64[::1])", **JIT)
def hold_inputs(u, u_rate, held, supervised):
    """Keep supervised inputs at their values at the trip.  Called in the real-time loop."""
    for i in range(u.shape[0]):
        if supervised[i] != 0.0:
            u[i] = held[i]
            u_rate[i] = 0.0


@njit("void(float64[::1], float64[::1], float64[::1], float64[::1], float64[::1], float64[::1])", **JIT)
def start_ramp(held, safe, ramp_s, cur, cur_rate, max_rate):
    """Start every ramp at its held value, with the rate that covers the distance in its ramp time.

    Called in the real-time loop.
    """
    for i in range(held.shape[0]):
        cur[i] = held[i]
        cur_rate[i] = 0.0
        max_rate[i] = abs(safe[i] - held[i]) / ramp_s[i] if ramp_s[i] > 0.0 else 0.0


@njit("int64(float64[::1], float64[::1], float64[::1], float64[::1], float64[::1], float64[::1], float64[::1], "
      "float64[::1], float64)", **JIT)
def ramp_inputs(u, u_rate, cur, cur_rate, safe, max_rate, supervised, last, dt):
    """Advance the ramp of every supervised input by one step; returns how many are still moving.

    ``cur`` is the watchdog's own value of each input at the start of the
    step and ``cur_rate`` the rate it applied in the previous step; an input
    arrives at ``safe`` exactly, at the end of the step in which it gets
    there.  ``max_rate <= 0`` means a jump.  Inputs marked in ``last``
    (discrete ones such as gear selectors) keep their held value until every
    other input has arrived, then jump: clutches open before a gear goes to
    neutral.  Called in the real-time loop.
    """
    moving = 0
    for i in range(u.shape[0]):
        if supervised[i] == 0.0 or last[i] != 0.0:
            continue
        s = safe[i]
        before = s - cur[i]
        x = cur[i] + cur_rate[i] * dt
        after = s - x
        if before == 0.0 or after * before <= 0.0 or abs(after) <= 1e-12 * (abs(s) + abs(before)):
            x = s  # arrived (or passed it by rounding)
        if max_rate[i] <= 0.0:
            x = s
        cur[i] = x
        d = s - x
        r = 0.0
        if d != 0.0:
            step = max_rate[i] * dt
            if abs(d) <= step:
                r = d / dt
            elif d > 0.0:
                r = max_rate[i]
            else:
                r = -max_rate[i]
            moving += 1
        cur_rate[i] = r
        u[i] = x
        u_rate[i] = r
    for i in range(u.shape[0]):
        if supervised[i] == 0.0 or last[i] == 0.0:
            continue
        if moving == 0:
            cur[i] = safe[i]
        u[i] = cur[i]
        u_rate[i] = 0.0
    return moving


class CommandWatchdog:
    """The command watchdog of one plant.

    Parameters
    ----------
    plant
        The plant whose inputs it supervises.
    cfg
        Validated settings; ``cfg.inputs`` names only inputs of ``plant``.
    tripped_flag
        A one-element int64 array the watchdog keeps at 1 while tripped, else
        0 (the server passes its slot of the loop's ``tick_info``, which the
        adapters read every tick); by default a private one.
    """

    def __init__(self, plant: Plant, cfg: WatchdogConfig, tripped_flag: np.ndarray | None = None):
        self.plant = plant
        self.cfg = cfg
        n = plant.n_in
        self.safe = np.array([s.default for s in plant.inputs], dtype=float)
        self.ramp_s = np.array([0.0 if s.integer else cfg.ramp_s for s in plant.inputs], dtype=float)
        self.last = np.array([1.0 if s.integer else 0.0 for s in plant.inputs], dtype=float)
        self.supervised = np.ones(n, dtype=float)
        for name, pol in cfg.inputs:
            k = plant.input_index(name)
            self.safe[k] = pol.safe_value
            self.ramp_s[k] = 0.0 if plant.inputs[k].integer else pol.ramp_s
            self.supervised[k] = 1.0 if pol.supervised else 0.0
        self.held = np.zeros(n)
        self.cur = np.zeros(n)
        self.cur_rate = np.zeros(n)
        self.max_rate = np.zeros(n)
        self.timeout_ns = int(round(cfg.timeout_s * 1e9))
        self.hold_ns = int(round(cfg.hold_s * 1e9))
        self.enabled = cfg.enabled
        self.default_ramp_s = cfg.ramp_s  # of the inputs without their own ramp_ms
        self.phase = OK
        self.armed = False
        self.last_feed_ns = 0
        self.trip_ns = 0
        self.trips = 0
        self.recoveries = 0
        self._logged_trips = self._logged_recoveries = 0
        # mirrors phase != OK for cheap reads
        self.tripped_flag = tripped_flag if tripped_flag is not None else np.zeros(1, dtype=np.int64)
        self.tripped_flag[0] = 0

    @property
    def tripped(self) -> bool:
        """Whether a trip is in progress (hold, ramp or safe)."""
        return bool(self.tripped_flag[0])

    def active_in(self, mode: str) -> bool:
        """Whether the watchdog supervises the inputs in loop mode ``mode`` (enabled, and configured for it)."""
        return self.enabled and mode in self.cfg.modes

    # -- settings (between ticks) ------------------------------------------------
    def tunable_parameters(self) -> list[Param]:
        """The watchdog's settings as run-time parameters (``watchdog.*`` in ``get_params``/``set_params``)."""

        def set_enabled(v):
            self.enabled = bool(v)
            if not self.enabled:
                self.reset()

        return [
            Param("watchdog.enabled", "-", 0, 1, "command watchdog on/off", lambda: 1.0 if self.enabled else 0.0,
                  set_enabled, kind="bool"),
            Param("watchdog.timeout_s", "s", 1e-4, 3600.0, "command age that trips the watchdog",
                  lambda: self.timeout_ns / 1e9, lambda v: self.set_times(timeout_s=v)),
            Param("watchdog.hold_s", "s", 0.0, 3600.0, "hold time after a trip, before the ramp",
                  lambda: self.hold_ns / 1e9, lambda v: self.set_times(hold_s=v)),
            Param("watchdog.ramp_s", "s", 0.0, 3600.0, "ramp time to the safe values (inputs without an override)",
                  lambda: self.default_ramp_s, lambda v: self.set_times(ramp_s=v)),
        ]

    def set_times(self, timeout_s: float | None = None, hold_s: float | None = None, ramp_s: float | None = None) -> None:
        if timeout_s is not None:
            self.timeout_ns = int(round(timeout_s * 1e9))
        if hold_s is not None:
            self.hold_ns = int(round(hold_s * 1e9))
        if ramp_s is not None:
            self.default_ramp_s = ramp_s
            names = {name for name, _ in self.cfg.inputs}
            for k, s in enumerate(self.plant.inputs):
                if s.name not in names and not s.integer:
                    self.ramp_s[k] = ramp_s

    def reset(self) -> None:
        """Disarm (after a plant reset or scenario load): the next valid command arms it again."""
        self.phase = OK
        self.armed = False
        self.tripped_flag[0] = 0

    # -- snapshots (between ticks) -------------------------------------------------
    def snapshot_state(self, now_ns: int) -> dict:
        """The watchdog's state; its times relative to ``now_ns`` (the loop's clock), so a restore re-bases them."""
        return {"phase": int(self.phase), "armed": bool(self.armed), "feed_age_ns": int(now_ns - self.last_feed_ns),
                "trip_age_ns": int(now_ns - self.trip_ns), "trips": int(self.trips),
                "recoveries": int(self.recoveries), "held": self.held.copy(), "cur": self.cur.copy(),
                "cur_rate": self.cur_rate.copy(), "max_rate": self.max_rate.copy()}

    def check_state(self, st: dict) -> None:
        """Raise (``KeyError``, ``TypeError``, ``ValueError``) unless ``st`` is a :meth:`snapshot_state` of a
        watchdog of these inputs; changes nothing."""
        for k in ("phase", "feed_age_ns", "trip_age_ns", "trips", "recoveries"):
            int(st[k])
        bool(st["armed"])
        for k in ("held", "cur", "cur_rate", "max_rate"):
            if np.shape(st[k]) != getattr(self, k).shape:
                raise ValueError(f"watchdog.{k} of the wrong shape")

    def restore_state(self, st: dict, now_ns: int) -> None:
        """Restore :meth:`snapshot_state` (checked) at ``now_ns`` on the loop's clock."""
        self.phase = int(st["phase"])
        self.armed = bool(st["armed"])
        self.last_feed_ns = now_ns - int(st["feed_age_ns"])
        self.trip_ns = now_ns - int(st["trip_age_ns"])
        self.trips = int(st["trips"])
        self.recoveries = int(st["recoveries"])
        for k in ("held", "cur", "cur_rate", "max_rate"):
            getattr(self, k)[:] = st[k]
        self.tripped_flag[0] = 1 if self.phase != OK else 0

    # -- real-time path ------------------------------------------------------------
    def feed(self, now_ns: int) -> None:
        """A valid command was applied at ``now_ns``.  Called in the real-time loop."""
        self.last_feed_ns = now_ns
        self.armed = True
        if self.phase != OK and self.cfg.recovery == "auto":
            self.phase = OK
            self.tripped_flag[0] = 0
            self.recoveries += 1

    def clear(self, now_ns: int) -> bool:
        """Manual recovery: end a trip.  Returns whether it was tripped."""
        was = self.phase != OK
        self.phase = OK
        self.tripped_flag[0] = 0
        self.last_feed_ns = now_ns
        if was:
            self.recoveries += 1
        return was

    def update(self, now_ns: int, dt: float) -> None:
        """Check the command age and apply the safe action.  Called in the real-time loop, before the step."""
        if not self.armed or not self.enabled:
            return
        phase = self.phase
        if phase == OK:
            if now_ns - self.last_feed_ns <= self.timeout_ns:
                return
            self.phase = phase = HOLD
            self.trip_ns = now_ns
            self.trips += 1
            self.tripped_flag[0] = 1
            np.copyto(self.held, self.plant.u)
        if phase == HOLD:
            if now_ns - self.trip_ns < self.hold_ns:
                hold_inputs(self.plant.u, self.plant.u_rate, self.held, self.supervised)
                return
            self.phase = RAMP
            start_ramp(self.held, self.safe, self.ramp_s, self.cur, self.cur_rate, self.max_rate)
        # RAMP, and SAFE (keeps holding the safe values against manual-mode commands)
        if ramp_inputs(self.plant.u, self.plant.u_rate, self.cur, self.cur_rate, self.safe, self.max_rate,
                       self.supervised, self.last, dt) == 0 and self.phase == RAMP:
            self.phase = SAFE

    # -- reporting -------------------------------------------------------------------
    def log_changes(self) -> None:
        """Log the trips and recoveries since the last call (between ticks: the tick only counts them)."""
        trips, rec = self.trips, self.recoveries
        if trips == self._logged_trips and rec == self._logged_recoveries:
            return
        if trips != self._logged_trips:
            n = trips - self._logged_trips
            log.warning("command watchdog tripped%s: no valid command for more than %.1f ms; supervised inputs "
                        "hold for %.0f ms, then ramp to their safe values (trip %d)",
                        f" {n} times" if n > 1 else "", self.timeout_ns / 1e6, self.hold_ns / 1e6, trips)
        if rec != self._logged_recoveries:
            log.warning("command watchdog recovered (%s; %d recoveries); commands drive the inputs again%s",
                        "a valid command" if self.cfg.recovery == "auto" else "clear_watchdog", rec,
                        "" if self.phase == OK else ", though it has tripped again")
        self._logged_trips, self._logged_recoveries = trips, rec

    def status(self, now_ns: int, active: bool) -> dict:
        age = (now_ns - self.last_feed_ns) / 1e9 if self.armed else None
        return {
            "enabled": self.enabled,
            "active": active,
            "armed": self.armed,
            "tripped": self.phase != OK,
            "phase": PHASE_NAMES[self.phase],
            "trips": self.trips,
            "recoveries": self.recoveries,
            "last_command_age_s": None if age is None else round(age, 6),
            "timeout_s": self.timeout_ns / 1e9,
            "hold_s": self.hold_ns / 1e9,
            "recovery": self.cfg.recovery,
            "modes": list(self.cfg.modes),
        }
