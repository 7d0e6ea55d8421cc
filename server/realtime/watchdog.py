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
from numba import carray, cfunc, njit

from plant_models.plant import Param, Plant
from plant_models.contract.columns import Columns
from plant_models.run.compiled import FED, STAGE_SIGNATURE, CompiledStage, f64_at, i64_at
from plant_models.run.ring import TI_SCENARIO

JIT = dict(cache=True, nogil=True)

log = logging.getLogger("gearbox_hil.watchdog")

OK = 0
HOLD = 1
RAMP = 2
SAFE = 3
PHASE_NAMES = {OK: "ok", HOLD: "hold", RAMP: "ramp", SAFE: "safe"}

# the watchdog's state and settings: one int64 array, so the compiled tick runs the same state machine
WATCHDOG_SLOTS = Columns("the watchdog's state and settings (int64)", (
    ("W_PHASE", "OK, HOLD, RAMP or SAFE"),
    ("W_ARMED", "1 once a command has fed it"),
    ("W_LAST_FEED_NS", "when a command last fed it, ns"),
    ("W_TRIP_NS", "when it last tripped, ns"),
    ("W_TRIPS", "trips so far"),
    ("W_RECOVERIES", "recoveries so far"),
    ("W_TIMEOUT_NS", "setting: the command timeout, ns"),
    ("W_HOLD_NS", "setting: how long the last command is held before the ramp, ns"),
    ("W_ENABLED", "setting: 1 when the watchdog is on"),
    ("W_AUTO", "setting: 1 when recovery is \"auto\""),
), count="N_W")
globals().update(WATCHDOG_SLOTS.constants())  # W_PHASE .. W_AUTO; N_W


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


@njit(**JIT)
def _hold(u, u_rate, held, supervised, n):
    """Keep supervised inputs at their values at the trip.  Called in the real-time loop."""
    for i in range(n):
        if supervised[i] != 0.0:
            u[i] = held[i]
            u_rate[i] = 0.0


@njit(**JIT)
def _start_ramp(held, safe, ramp_s, cur, cur_rate, max_rate, n):
    """Start every ramp at its held value, with the rate that covers the distance in its ramp time.

    Called in the real-time loop.
    """
    for i in range(n):
        cur[i] = held[i]
        cur_rate[i] = 0.0
        max_rate[i] = abs(safe[i] - held[i]) / ramp_s[i] if ramp_s[i] > 0.0 else 0.0


@njit(**JIT)
def _ramp(u, u_rate, cur, cur_rate, safe, max_rate, supervised, last, n, dt):
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
    for i in range(n):
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
    for i in range(n):
        if supervised[i] == 0.0 or last[i] == 0.0:
            continue
        if moving == 0:
            cur[i] = safe[i]
        u[i] = cur[i]
        u_rate[i] = 0.0
    return moving


@njit(**JIT)
def _feed(w, tripped, now_ns):
    """A valid command was applied at ``now_ns`` (``w``: the ``W_*`` slots).  Called in the real-time loop."""
    w[W_LAST_FEED_NS] = now_ns  # noqa: F821
    w[W_ARMED] = 1  # noqa: F821
    if w[W_PHASE] != OK and w[W_AUTO] != 0:  # noqa: F821
        w[W_PHASE] = OK  # noqa: F821
        tripped[0] = 0
        w[W_RECOVERIES] += 1  # noqa: F821


@njit(**JIT)
def _update(w, tripped, u, u_rate, held, cur, cur_rate, max_rate, safe, ramp_s, last, supervised, n, now_ns, dt):
    """Check the command age and apply the safe action: the watchdog's state machine on its ``W_*`` slots, for
    arrays and raw pointers alike.  Called in the real-time loop, before the step."""
    if w[W_ARMED] == 0 or w[W_ENABLED] == 0:  # noqa: F821
        return
    phase = w[W_PHASE]  # noqa: F821
    if phase == OK:
        if now_ns - w[W_LAST_FEED_NS] <= w[W_TIMEOUT_NS]:  # noqa: F821
            return
        w[W_PHASE] = phase = HOLD  # noqa: F821
        w[W_TRIP_NS] = now_ns  # noqa: F821
        w[W_TRIPS] += 1  # noqa: F821
        tripped[0] = 1
        for i in range(n):
            held[i] = u[i]
    if phase == HOLD:
        if now_ns - w[W_TRIP_NS] < w[W_HOLD_NS]:  # noqa: F821
            _hold(u, u_rate, held, supervised, n)
            return
        w[W_PHASE] = RAMP  # noqa: F821
        _start_ramp(held, safe, ramp_s, cur, cur_rate, max_rate, n)
    # RAMP, and SAFE (keeps holding the safe values against manual-mode commands)
    if _ramp(u, u_rate, cur, cur_rate, safe, max_rate, supervised, last, n, dt) == 0 and w[W_PHASE] == RAMP:  # noqa: F821
        w[W_PHASE] = SAFE  # noqa: F821


_F = "float64[::1], "


@njit("void(int64[::1], int64[::1], " + _F * 10 + "int64, int64, float64)", **JIT)
def update_inputs(w, tripped, u, u_rate, held, cur, cur_rate, max_rate, safe, ramp_s, last, supervised, n, now_ns,
                  dt):
    """:func:`_update` on arrays (the Python stepper's call).  Called in the real-time loop."""
    _update(w, tripped, u, u_rate, held, cur, cur_rate, max_rate, safe, ramp_s, last, supervised, n, now_ns, dt)


@cfunc(STAGE_SIGNATURE, cache=True)
def watchdog_stage(ctx, k, now_ns, dt, carry):
    """Stage ``inputs`` with no scenario: fed when a reader applied commands (``carry & FED``, as
    ``Adapter.read`` feeds it), then (in a mode it supervises, no scenario driving) :func:`_update`.

    ``ctx``: [w, tripped, u, u_rate, held, cur, cur_rate, max_rate, safe, ramp_s, last, supervised, n, in_mode,
    tick_info] (:meth:`CommandWatchdog.compiled_stage`).  Called in the real-time loop.
    """
    # the context's addresses as arrays of their lengths: _update and its helpers then take the array types that
    # update_inputs gives them, and compile once for both (as pointers they compiled a second time, 1.8 s of CPU)
    w, tripped, n = carray(i64_at(ctx[0]), (N_W,)), carray(i64_at(ctx[1]), (1,)), ctx[12]  # noqa: F821
    if carry & FED:
        _feed(w, tripped, now_ns)
    if ctx[13] != 0 and i64_at(ctx[14])[TI_SCENARIO] == 0:
        _update(w, tripped, carray(f64_at(ctx[2]), (n,)), carray(f64_at(ctx[3]), (n,)), carray(f64_at(ctx[4]), (n,)),
                carray(f64_at(ctx[5]), (n,)), carray(f64_at(ctx[6]), (n,)), carray(f64_at(ctx[7]), (n,)),
                carray(f64_at(ctx[8]), (n,)), carray(f64_at(ctx[9]), (n,)), carray(f64_at(ctx[10]), (n,)),
                carray(f64_at(ctx[11]), (n,)), n, now_ns, dt)
    return 0


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
        # the state and settings (W_*): an array the compiled tick shares; a memoryview for Python's plain ints
        self.w = np.zeros(N_W, dtype=np.int64)  # noqa: F821
        self._wv = memoryview(self.w)
        self.timeout_ns = int(round(cfg.timeout_s * 1e9))
        self.hold_ns = int(round(cfg.hold_s * 1e9))
        self.enabled = cfg.enabled
        self.w[W_AUTO] = 1 if cfg.recovery == "auto" else 0  # noqa: F821
        self.default_ramp_s = cfg.ramp_s  # of the inputs without their own ramp_ms
        self._logged_trips = self._logged_recoveries = 0
        # mirrors phase != OK for cheap reads
        self.tripped_flag = tripped_flag if tripped_flag is not None else np.zeros(1, dtype=np.int64)
        self.tripped_flag[0] = 0

    phase = property(lambda self: self._wv[W_PHASE], lambda self, v: self._set(W_PHASE, v),  # noqa: F821
                     doc="OK, HOLD, RAMP or SAFE")
    last_feed_ns = property(lambda self: self._wv[W_LAST_FEED_NS], lambda self, v: self._set(W_LAST_FEED_NS, v),  # noqa: F821
                            doc="the loop's clock at the last valid command, ns")
    trip_ns = property(lambda self: self._wv[W_TRIP_NS], lambda self, v: self._set(W_TRIP_NS, v),  # noqa: F821
                       doc="the loop's clock at the last trip, ns")
    trips = property(lambda self: self._wv[W_TRIPS], lambda self, v: self._set(W_TRIPS, v), doc="trips counted")  # noqa: F821
    recoveries = property(lambda self: self._wv[W_RECOVERIES], lambda self, v: self._set(W_RECOVERIES, v),  # noqa: F821
                          doc="recoveries counted")
    timeout_ns = property(lambda self: self._wv[W_TIMEOUT_NS], lambda self, v: self._set(W_TIMEOUT_NS, v),  # noqa: F821
                          doc="the command age that trips it, ns")
    hold_ns = property(lambda self: self._wv[W_HOLD_NS], lambda self, v: self._set(W_HOLD_NS, v),  # noqa: F821
                       doc="the hold after a trip, ns")
    armed = property(lambda self: bool(self._wv[W_ARMED]), lambda self, v: self._set(W_ARMED, 1 if v else 0),  # noqa: F821
                     doc="whether a valid command arrived since the last reset")
    enabled = property(lambda self: bool(self._wv[W_ENABLED]), lambda self, v: self._set(W_ENABLED, 1 if v else 0),  # noqa: F821
                       doc="whether it supervises at all")

    def _set(self, slot: int, value) -> None:
        self._wv[slot] = int(value)

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
        """A valid command was applied at ``now_ns`` (what :func:`_feed` does).  Called in the real-time loop."""
        w = self._wv
        w[W_LAST_FEED_NS] = now_ns  # noqa: F821
        w[W_ARMED] = 1  # noqa: F821
        if w[W_PHASE] != OK and w[W_AUTO]:  # noqa: F821
            w[W_PHASE] = OK  # noqa: F821
            self.tripped_flag[0] = 0
            w[W_RECOVERIES] += 1  # noqa: F821

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
        """Check the command age and apply the safe action (:func:`_update`; the compiled tick runs the same
        function in :meth:`compiled_stage`).  Called in the real-time loop, before the step."""
        w = self._wv
        if not w[W_ARMED] or not w[W_ENABLED] or (w[W_PHASE] == OK and now_ns - w[W_LAST_FEED_NS] <= w[W_TIMEOUT_NS]):  # noqa: F821
            return  # nothing to do: the common case, without a compiled call
        u, u_rate = self.plant.u, self.plant.u_rate
        update_inputs(self.w, self.tripped_flag, u, u_rate, self.held, self.cur, self.cur_rate, self.max_rate,
                      self.safe, self.ramp_s, self.last, self.supervised, u.shape[0], now_ns, dt)

    def compiled_stage(self, in_mode: bool, tick_info: np.ndarray) -> CompiledStage:
        """The compiled form of the ``inputs`` stage without a scenario (:func:`watchdog_stage`): fed when the
        stages before it applied commands, updated when ``in_mode`` (the loop's mode is one it supervises)."""
        u, u_rate = self.plant.u, self.plant.u_rate
        return CompiledStage.of("inputs", watchdog_stage, (
            self.w, self.tripped_flag, u, u_rate, self.held, self.cur, self.cur_rate, self.max_rate, self.safe,
            self.ramp_s, self.last, self.supervised, u.shape[0], int(in_mode), tick_info))

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
