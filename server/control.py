"""Control requests: start, stop, pause, reset, step, status, parameters, scenarios (docs/protocol.md).

Every request is a map ``{"v": 1, "cmd": ..., "id": ..., ...}``; every reply
is ``{"v": 1, "id": ..., "cmd": ..., "ok": true, ...}`` or ``{"v": 1, "id":
..., "cmd": ..., "ok": false, "error": {"code": ..., "message": ...}}``.
Requests are executed between ticks, on the loop's thread, so they never race
the tick.  Each handler validates everything before it changes anything, so
a rejected request leaves the plant exactly as it was.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from io_adapters.protocol import COMMAND_ERRORS, PROTOCOL_VERSION, InputValidator, error_reply, schema_id
from plant_models.config import ConfigError

from .params import ParamError

if TYPE_CHECKING:  # pragma: no cover
    from .loop import Loop

log = logging.getLogger("gearbox_hil.control")

SERVER_NAME = "gearbox-hil"

class ControlError(Exception):
    """A request that cannot be executed; ``code`` is one of :data:`io_adapters.protocol.ERROR_CODES`."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class ControlHandler:
    """Executes control requests against a :class:`~server.loop.Loop`."""

    # command -> allowed keys besides v, cmd, id
    KEYS = {
        "ping": (), "describe": (), "status": (), "start": (), "pause": (), "stop": (), "shutdown": (),
        "reset": ("inputs",), "step": ("n", "set", "outputs"), "set": ("set",), "get": (),
        "get_params": ("names",), "set_params": ("params",), "load_scenario": ("path", "scenario", "dt_s"),
        "unload_scenario": (), "clear_watchdog": (),
    }

    def __init__(self, loop: "Loop"):
        self.loop = loop
        self.validator = InputValidator(loop.plant.inputs)
        self.handled = 0
        self.errors = 0

    def handle(self, req: dict) -> dict:
        """Execute ``req``; returns the reply.  Never raises."""
        self.handled += 1
        try:
            cmd = req.get("cmd")
            if cmd not in self.KEYS:
                raise ControlError("unknown_command", f"unknown command {cmd!r}; commands are "
                                   + ", ".join(self.KEYS))
            rid = req.get("id")
            if not (rid is None or isinstance(rid, (int, str)) and not isinstance(rid, bool)):
                raise ControlError("bad_message", "'id' must be an integer or a string")
            allowed = {"v", "cmd", "id", *self.KEYS[cmd]}
            for k in req:
                if k not in allowed:
                    raise ControlError("bad_request", f"{cmd}: unknown key {k!r}; allowed: "
                                       + (", ".join(self.KEYS[cmd]) or "none besides v, cmd, id"))
            result = getattr(self, "_" + cmd)(req)
            rep = {"v": PROTOCOL_VERSION, "id": rid, "cmd": cmd, "ok": True}
            rep.update(result)
            return rep
        except ControlError as exc:
            self.errors += 1
            return error_reply(exc.code, exc.message, req)
        except Exception as exc:  # a bug must cost one request, not the server
            self.errors += 1
            log.exception("control request %r failed", req.get("cmd") if isinstance(req, dict) else req)
            return error_reply("internal", f"internal error: {type(exc).__name__}: {exc}", req)

    # ------------------------------------------------------------------ helpers
    def _validate(self, updates: Any) -> None:
        """Validate ``updates`` into ``self.validator``, or raise ControlError with the reason."""
        try:
            self.validator.validate(updates)
        except COMMAND_ERRORS as exc:
            raise ControlError(exc.reason, exc.message) from None

    def _validated_inputs(self, updates: Any) -> dict[str, float]:
        self._validate(updates)
        return self.validator.as_dict()

    def _require_no_scenario(self, what: str) -> None:
        if self.loop.scenario is not None:
            raise ControlError("scenario_active", f"{what}: the inputs are driven by the loaded scenario "
                               f"({self.loop.scenario_info['source']}) until tick {self.loop.scenario.n_steps}; "
                               "send unload_scenario first")

    def _outputs(self) -> dict[str, float]:
        return self.loop.plant.output_dict()

    # ------------------------------------------------------------------ commands
    def _ping(self, req):
        return {"server": SERVER_NAME, "protocol": PROTOCOL_VERSION, "time_ns": time.monotonic_ns()}

    def _describe(self, req):
        lp = self.loop
        d = lp.plant.describe()
        endpoints = {}
        for a in lp.adapters:
            st = a.status() if hasattr(a, "status") else {}
            if isinstance(st, dict) and isinstance(st.get("endpoints"), dict):
                endpoints.update(st["endpoints"])
        d.update({
            "server": SERVER_NAME, "protocol": PROTOCOL_VERSION, "mode": lp.mode, "state": lp.state,
            "period_s": lp.dt, "rate_hz": 1.0 / lp.dt,
            "input_names": [s.name for s in lp.plant.inputs],
            "output_names": [s.name for s in lp.plant.outputs],
            "schema": schema_id(s.name for s in lp.plant.outputs),
            "endpoints": endpoints, "params": lp.params.names(),
        })
        return {"plant": d}

    def _status(self, req):
        return {"status": self.loop.status()}

    def _start(self, req):
        lp = self.loop
        from .loop import RUNNING

        prev = lp.state
        lp._begin_running()
        lp.state = RUNNING
        return {"state": lp.state, "previous": prev, "tick": lp.tick}

    def _pause(self, req):
        lp = self.loop
        from .loop import PAUSED, RUNNING

        if lp.state != RUNNING:
            raise ControlError("bad_state", f"pause: the simulation is {lp.state}, not running")
        lp.state = PAUSED
        return {"state": lp.state, "tick": lp.tick, "t": lp.plant.time}

    def _stop(self, req):
        lp = self.loop
        from .loop import STOPPED

        prev = lp.state
        lp.state = STOPPED
        lp._restart_pending = True  # the next start begins a fresh run from t = 0
        return {"state": lp.state, "previous": prev, "tick": lp.tick, "t": lp.plant.time}

    def _shutdown(self, req):
        self.loop.request_shutdown("shutdown requested by a client")
        return {"state": "shutting down"}

    def _reset(self, req):
        lp = self.loop
        inputs = {}
        if "inputs" in req:
            if lp.scenario_loaded is not None:
                raise ControlError("scenario_active", "reset with inputs: a reset replays the loaded scenario "
                                   f"({lp.scenario_info['source']}), which sets the inputs; send unload_scenario "
                                   "first")
            inputs = self._validated_inputs(req["inputs"])
        lp.reset_plant(inputs)
        return {"tick": lp.tick, "t": lp.plant.time, "status_word": int(lp.tick_info[1])}

    def _step(self, req):
        lp = self.loop
        from .loop import RUNNING

        if lp.mode != "lockstep":
            raise ControlError("wrong_mode", f"step: only in lockstep mode (the server runs in {lp.mode} mode)")
        if lp.state != RUNNING:
            raise ControlError("bad_state", f"step: the simulation is {lp.state}; send start first")
        n = req.get("n", 1)
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= lp.cfg.max_step_request:
            raise ControlError("bad_request", f"step: 'n' must be an integer in 1..{lp.cfg.max_step_request}, "
                               f"got {n!r}")
        outputs = req.get("outputs", True)
        if not isinstance(outputs, bool):
            raise ControlError("bad_request", "step: 'outputs' must be true or false")
        if "set" in req:
            self._require_no_scenario("step with set")
            self._validate(req["set"])
            cnt = self.validator.count
            lp._pending_idx[:cnt] = self.validator.idx[:cnt]
            lp._pending_val[:cnt] = self.validator.val[:cnt]
            lp._pending_set = (lp._pending_idx, lp._pending_val, cnt)
            lp.watchdog.feed(lp.sim_ns())
        status_or = lp.step_lockstep(n)
        rep = {"tick": lp.tick, "t": lp.plant.time, "status_word": int(lp.tick_info[1]),
               "status_or": int(status_or), "watchdog": bool(lp.tick_info[0])}
        if lp.scenario_info is not None:
            rep["scenario_finished"] = bool(lp.scenario_info.get("finished"))
        if outputs:
            rep["y"] = self._outputs()
        return rep

    def _set(self, req):
        lp = self.loop
        if "set" not in req:
            raise ControlError("bad_request", "set: needs a 'set' map of signal name to value")
        self._require_no_scenario("set")
        self._validate(req["set"])
        self.validator.apply(lp.plant.u, lp.plant.u_rate)
        lp.watchdog.feed(lp.sim_ns() if lp.mode != "realtime" else time.monotonic_ns())
        return {"applied": self.validator.count, "tick": lp.tick}

    def _get(self, req):
        lp = self.loop
        return {"tick": lp.tick, "t": lp.plant.time, "u": lp.plant.input_dict(), "y": self._outputs(),
                "status_word": int(lp.tick_info[1])}

    def _get_params(self, req):
        names = req.get("names")
        if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) for n in names)):
            raise ControlError("bad_request", "get_params: 'names' must be a list of strings")
        try:
            return {"params": self.loop.params.describe(names)}
        except ParamError as exc:
            raise ControlError("param_error", str(exc)) from None

    def _set_params(self, req):
        if "params" not in req:
            raise ControlError("bad_request", "set_params: needs a 'params' map of name to value")
        try:
            changed = self.loop.params.set_many(req["params"])
        except ParamError as exc:
            raise ControlError("param_error", str(exc)) from None
        self.loop._update_wd_live()
        return {"params": self.loop.params.describe(list(changed))}

    def _load_scenario(self, req):
        from .scenario import load_scenario, parse_scenario

        lp = self.loop
        has_path, has_inline = "path" in req, "scenario" in req
        if has_path == has_inline:
            raise ControlError("bad_request", "load_scenario: give exactly one of 'path' (a scenario file on the "
                               "server) or 'scenario' (its content as a map)")
        dt = req.get("dt_s")
        if dt is not None and (isinstance(dt, bool) or not isinstance(dt, (int, float))):
            raise ControlError("bad_request", "load_scenario: 'dt_s' must be a number")
        try:
            if has_path:
                if not isinstance(req["path"], str):
                    raise ControlError("bad_request", "load_scenario: 'path' must be a string")
                sc = load_scenario(req["path"])
            else:
                if not isinstance(req["scenario"], dict):
                    raise ControlError("bad_request", "load_scenario: 'scenario' must be a map")
                sc = parse_scenario(req["scenario"], "<load_scenario request>")
            step = float(dt) if dt is not None else (sc.dt if sc.dt is not None else lp.dt)
            if lp.mode == "realtime" and step != lp.dt:
                raise ControlError("scenario_error", f"load_scenario: the scenario's step {step} s differs from the "
                                   f"server period {lp.dt} s; in realtime mode start the server with "
                                   f"--rate {1.0 / step:g}")
            compiled = sc.compile(lp.plant, step)
            spare = sc.compile(lp.plant, step)
        except ConfigError as exc:
            raise ControlError("scenario_error", str(exc)) from None
        if step != lp.dt:
            lp.set_step(step)
        lp.scenario_info = {"source": sc.source, "description": sc.description, "n_steps": compiled.n_steps,
                            "dt_s": compiled.dt, "duration_s": sc.duration, "finished": False}
        lp.load_scenario(compiled, spare)
        return {"scenario": dict(lp.scenario_info), "tick": lp.tick, "period_s": lp.dt}

    def _unload_scenario(self, req):
        lp = self.loop
        if lp.scenario_loaded is None:
            raise ControlError("bad_state", "unload_scenario: no scenario is loaded")
        lp.scenario = None
        lp.scenario_loaded = None
        lp._sc_spare = None
        lp._sc_pair = (None, None)
        lp._sc_swap_at = -1
        lp.scenario_info = None
        lp.tick_info[2] = 0
        lp.plant.u_rate[:] = 0.0
        np.clip(lp.plant.u, lp._in_lo, lp._in_hi, out=lp.plant.u)
        lp.watchdog.reset()
        lp._update_wd_live()
        return {"tick": lp.tick}

    def _clear_watchdog(self, req):
        lp = self.loop
        was = lp.watchdog.clear(lp.sim_ns() if lp.mode != "realtime" else time.monotonic_ns())
        return {"was_tripped": was}
