"""Control requests: start, stop, pause, reset, step, status, parameters, scenarios (docs/protocol.md).

Every request is a map ``{"v": 1, "cmd": ..., "id": ..., ...}``; every reply
is ``{"v": 1, "id": ..., "cmd": ..., "ok": true, ...}`` or ``{"v": 1, "id":
..., "cmd": ..., "ok": false, "error": {"code": ..., "message": ...}}``.
Requests are executed between ticks, on the loop's thread, so they never race
the tick.  Each handler validates everything before it changes anything, so
a rejected request leaves the plant exactly as it was.

Inputs are validated by ``io_adapters.protocol.InputValidator``, the same
rule as for command messages.  The handler changes the server only through
public methods: the loop's transitions (:class:`server.realtime.loop.Loop`), the
scenario player's load/unload
(:class:`server.realtime.scenario_player.ScenarioPlayer`), the parameter table and
the watchdog.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from io_adapters.protocol import (COMMAND_ERRORS, PROTOCOL_REVISION, PROTOCOL_VERSION, InputValidator, PendingReply,
                                  ProtocolError, error_reply, schema_id)
from plant_models.errors import ConfigError, FaultError, ParamError, SnapshotError

from server.realtime.loop import RUNNING, Loop
from server.realtime.faults import fault_catalogue
from server.realtime.params import ParamTable
from server.offline.scenario import ScenarioFolders, parse_scenario
from server.realtime.scenario_player import ScenarioPlayer
from server.realtime.snapshots import SnapshotStore
from server.realtime.status import StatusReport

log = logging.getLogger("gearbox_hil.control")

SERVER_NAME = "gearbox-hil"


class ControlError(Exception):
    """A request that cannot be executed; ``code`` is one of ``io_adapters.protocol.ERROR_CODES``."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def describe_endpoints(adapters) -> dict[str, str]:
    """Every adapter's endpoints named ``<adapter>.<key>`` (as in ``serve``'s ready file), and un-named the first
    adapter's of each key (``state``, ``command``, ``control``, ``url``, ...: protocol.md 5.2).

    The ZeroMQ adapter that answers a ``describe`` puts its own endpoints
    under the un-named keys (:meth:`io_adapters.zmq.adapter.ZmqAdapter`), so
    a client is sent to the state and command sockets beside the control
    socket it asked, also when a server runs several.
    """
    named: dict[str, str] = {}
    plain: dict[str, str] = {}
    for a in adapters:
        st = a.status()
        if isinstance(st, dict) and isinstance(st.get("endpoints"), dict):
            for k, v in st["endpoints"].items():
                named[f"{a.name}.{k}"] = v
                plain.setdefault(k, v)
    return {**plain, **named}


class ControlHandler:
    """Executes control requests against a loop and the parts around it.

    Parameters
    ----------
    loop
        The loop (with its plant, adapters and watchdog).
    player
        The loop's scenario player.
    params
        The run-time tunable parameters.
    report
        The status report (for ``status``).
    scenarios
        The folders ``load_scenario`` may read from, and the size cap
        (default: the project's ``scenarios/``, 1 MiB).
    """

    # command -> allowed keys besides v, cmd, id
    KEYS = {
        "ping": (), "describe": (), "status": (), "start": (), "pause": (), "stop": (), "shutdown": (),
        "reset": ("inputs",), "step": ("n", "set", "outputs"), "set": ("set",), "get": (),
        "get_params": ("names",), "set_params": ("params",), "load_scenario": ("path", "scenario", "dt_s"),
        "list_scenarios": (),
        "unload_scenario": (), "clear_watchdog": (), "fault_set": ("fault",), "fault_clear": ("name",),
        "fault_list": (), "adapter_set": ("adapter", "set"),
        "snapshot_save": ("name", "path"), "snapshot_restore": ("name", "path"),
        "record_start": ("signals", "every", "name"), "record_stop": (),
    }

    def __init__(self, loop: Loop, player: ScenarioPlayer, params: ParamTable, report: StatusReport,
                 scenarios: ScenarioFolders | None = None):
        self.loop = loop
        self.scenarios = scenarios or ScenarioFolders.default()
        self._reader: ThreadPoolExecutor | None = None  # reads scenario files off the loop's thread
        self._loading: Future | None = None
        self.player = player
        self.params = params
        self.report = report
        self.update = InputValidator(loop.plant.inputs)
        self.snapshots = SnapshotStore(loop.cfg.snapshot_dir, loop.cfg.snapshot_max_bytes)
        self.handled = 0
        self.errors = 0
        self.recorder = None  # server.recording.Recorder, with a [recording] table in the I/O config

    def handle_now(self, req: dict, timeout_s: float = 30.0) -> dict:
        """:meth:`handle`, waiting for a pending reply: for callers that drive the loop themselves.

        Scripts and tests that run a server in their own thread use it; a
        transport never does (it must keep serving ticks while a file is
        read).  A reply still pending after ``timeout_s`` is a ``TimeoutError``.
        """
        rep = self.handle(req)
        if isinstance(rep, PendingReply):
            end = time.monotonic() + timeout_s
            while not rep.ready():
                if time.monotonic() > end:
                    raise TimeoutError(f"control request {req.get('cmd')!r}: no reply after {timeout_s} s")
                time.sleep(0.001)
            rep = rep.reply()
        return rep

    def handle(self, req: dict) -> dict | PendingReply:
        """Execute ``req``; returns the reply (a :class:`PendingReply` for a file to read).  Never raises."""
        self.handled += 1
        try:
            cmd = req.get("cmd")
            served = self._adapter_requests()
            keys = self.KEYS.get(cmd) if isinstance(cmd, str) else None
            if keys is None and isinstance(cmd, str) and cmd in served:
                keys = served[cmd][1]
            if keys is None:
                raise ControlError("unknown_command", f"unknown command {cmd!r}; commands are "
                                   + ", ".join([*self.KEYS, *served]))
            rid = req.get("id")
            if not (rid is None or isinstance(rid, (int, str)) and not isinstance(rid, bool)):
                raise ControlError("bad_message", "'id' must be an integer or a string")
            allowed = {"v", "cmd", "id", *keys}
            for k in req:
                if k not in allowed:
                    raise ControlError("bad_request", f"{cmd}: unknown key {k!r}; allowed: "
                                       + (", ".join(keys) or "none besides v, cmd, id"))
            result = getattr(self, "_" + cmd)(req) if cmd in self.KEYS else self._adapter_request(served, cmd, req)
            if isinstance(result, PendingReply):
                return result
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
    def _adapter_requests(self) -> dict[str, tuple[Any, tuple[str, ...]]]:
        """The requests adapters serve themselves (``Adapter.control_requests``): command -> (adapters, keys)."""
        out: dict = {}
        for a in self.loop.adapters:
            for cmd, keys in a.control_requests().items():
                if cmd not in self.KEYS:
                    out.setdefault(cmd, ([], tuple(keys)))[0].append(a)
        return out

    def _adapter_request(self, served: dict, cmd: str, req: dict):
        """An adapter's request: to the adapter ``req["adapter"]`` names (default: the first that serves it)."""
        adapters = served[cmd][0]
        name = req.get("adapter", adapters[0].name)
        by_name = {a.name: a for a in adapters}
        if name not in by_name:
            raise ControlError("bad_request", f"{cmd}: no adapter {name!r} serves it; it is served by "
                               + ", ".join(by_name))
        try:
            return by_name[name].handle_request(cmd, req)
        except ProtocolError as exc:
            raise ControlError(exc.reason, exc.message) from None

    def _parse_inputs(self, updates: Any) -> None:
        """Validate a ``{name: value}`` map whole into ``self.update``, or raise ControlError with the reason."""
        try:
            self.update.validate(updates)
        except COMMAND_ERRORS as exc:
            raise ControlError(exc.reason, exc.message) from None

    def _require_no_scenario(self, what: str) -> None:
        sc = self.player.active
        if sc is not None:
            raise ControlError("scenario_active", f"{what}: the inputs are driven by the loaded scenario "
                               f"({self.player.info['source']}) until tick {sc.n_steps}; send unload_scenario first")

    # ------------------------------------------------------------------ commands
    def _ping(self, req):
        return {"server": SERVER_NAME, "protocol": PROTOCOL_VERSION, "revision": PROTOCOL_REVISION,
                "time_ns": time.monotonic_ns()}

    def _describe(self, req):
        lp = self.loop
        d = lp.plant.describe()
        endpoints = describe_endpoints(lp.adapters)
        d.update({
            "server": SERVER_NAME, "protocol": PROTOCOL_VERSION, "revision": PROTOCOL_REVISION,
            "mode": lp.mode, "state": lp.state,
            "period_s": lp.dt, "rate_hz": 1.0 / lp.dt,
            "input_names": [s.name for s in lp.plant.inputs],
            "output_names": [s.name for s in lp.plant.outputs],
            "schema": schema_id(s.name for s in lp.plant.outputs),
            "endpoints": endpoints, "params": self.params.names(), "fault_kinds": fault_catalogue(lp.plant),
        })
        return {"plant": d}

    def _status(self, req):
        return {"status": self.report.status()}

    def _start(self, req):
        lp = self.loop
        prev = lp.state
        lp.start()
        return {"state": lp.state, "previous": prev, "tick": lp.tick}

    def _pause(self, req):
        lp = self.loop
        if lp.state != RUNNING:
            raise ControlError("bad_state", f"pause: the simulation is {lp.state}, not running")
        lp.pause()
        return {"state": lp.state, "tick": lp.tick, "t": lp.plant.time}

    def _stop(self, req):
        lp = self.loop
        prev = lp.state
        lp.stop()
        return {"state": lp.state, "previous": prev, "tick": lp.tick, "t": lp.plant.time}

    def _shutdown(self, req):
        self.loop.request_shutdown("shutdown requested by a client")
        return {"state": "shutting down"}

    def _reset(self, req):
        lp = self.loop
        inputs = {}
        if "inputs" in req:
            if self.player.loaded is not None:
                raise ControlError("scenario_active", "reset with inputs: a reset replays the loaded scenario "
                                   f"({self.player.info['source']}), which sets the inputs; send unload_scenario "
                                   "first")
            self._parse_inputs(req["inputs"])
            inputs = self.update.as_dict()
        lp.reset(inputs)
        return {"tick": lp.tick, "t": lp.plant.time, "status_word": lp.status_word}

    def _step(self, req):
        lp = self.loop
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
            self._parse_inputs(req["set"])
            lp.queue_inputs(self.update.idx, self.update.val, self.update.count)
            lp.watchdog.feed(lp.sim_ns())
        status_or = lp.step(n)
        rep = {"tick": lp.tick, "t": lp.plant.time, "status_word": lp.status_word,
               "status_or": int(status_or), "watchdog": lp.watchdog.tripped}
        if self.player.info is not None:
            rep["scenario_finished"] = bool(self.player.info.get("finished"))
        if outputs:
            rep["y"] = lp.plant.output_dict()
        return rep

    def _set(self, req):
        lp = self.loop
        if "set" not in req:
            raise ControlError("bad_request", "set: needs a 'set' map of signal name to value")
        self._require_no_scenario("set")
        self._parse_inputs(req["set"])
        lp.apply_inputs(self.update.idx, self.update.val, self.update.count)
        lp.watchdog.feed(lp.clock_ns())
        return {"applied": self.update.count, "tick": lp.tick}

    def _get(self, req):
        lp = self.loop
        return {"tick": lp.tick, "t": lp.plant.time, "u": lp.plant.input_dict(), "y": lp.plant.output_dict(),
                "status_word": lp.status_word}

    def _get_params(self, req):
        names = req.get("names")
        if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) for n in names)):
            raise ControlError("bad_request", "get_params: 'names' must be a list of strings")
        try:
            return {"params": self.params.describe(names)}
        except ParamError as exc:
            raise ControlError("param_error", str(exc)) from None

    def _set_params(self, req):
        if "params" not in req:
            raise ControlError("bad_request", "set_params: needs a 'params' map of name to value")
        try:
            changed = self.params.set_many(req["params"])
        except ParamError as exc:
            raise ControlError("param_error", str(exc)) from None
        return {"params": self.params.describe(list(changed))}

    def _load_scenario(self, req):
        has_path, has_inline = "path" in req, "scenario" in req
        if has_path == has_inline:
            raise ControlError("bad_request", "load_scenario: give exactly one of 'path' (a scenario file on the "
                               "server) or 'scenario' (its content as a map)")
        dt = req.get("dt_s")
        if dt is not None and (isinstance(dt, bool) or not isinstance(dt, (int, float))):
            raise ControlError("bad_request", "load_scenario: 'dt_s' must be a number")
        if has_path:
            if not isinstance(req["path"], str):
                raise ControlError("bad_request", "load_scenario: 'path' must be a string")
            if self._loading is not None:
                raise ControlError("bad_state", "load_scenario: another scenario file is being read; retry when "
                                   "its reply has come")
            if self._reader is None:
                self._reader = ThreadPoolExecutor(1, thread_name_prefix="scenario-reader")
            # the file is read and parsed in a worker thread: no file (a FIFO, a slow disk) can stall a tick
            self._loading = self._reader.submit(self.scenarios.read, req["path"])
            return _ScenarioRead(self, req, self._loading)
        try:
            if not isinstance(req["scenario"], dict):
                raise ControlError("bad_request", "load_scenario: 'scenario' must be a map")
            sc = parse_scenario(req["scenario"], "<load_scenario request>")
        except ConfigError as exc:
            raise ControlError("scenario_error", str(exc)) from None
        return self._install_scenario(sc, dt)

    def _list_scenarios(self, req):
        """The scenario files ``load_scenario`` may read, listed in the worker thread (a folder may be slow)."""
        if self._reader is None:
            self._reader = ThreadPoolExecutor(1, thread_name_prefix="scenario-reader")
        return _ListingRead(req, self._reader.submit(self.scenarios.listing))

    def _install_scenario(self, sc, dt) -> dict:
        """Compile a parsed scenario for the plant and load it (on the loop's thread, between ticks)."""
        lp = self.loop
        try:
            step = float(dt) if dt is not None else (sc.dt if sc.dt is not None else lp.dt)
            if lp.mode == "realtime" and step != lp.dt:
                raise ControlError("scenario_error", f"load_scenario: the scenario's step {step} s differs from the "
                                   f"server period {lp.dt} s; in realtime mode start the server with "
                                   f"--rate {1.0 / step:g}")
            compiled = sc.compile(lp.plant, step)
            spare = sc.compile(lp.plant, step, warn=False)  # the same load: its warnings are logged once
        except ConfigError as exc:
            raise ControlError("scenario_error", str(exc)) from None
        if step != lp.dt:
            lp.set_step(step)
        self.player.load(compiled, spare, lp.period_ns)
        lp.reset()
        return {"scenario": dict(self.player.info), "tick": lp.tick, "period_s": lp.dt}

    def finish_read(self, req: dict, fut: Future) -> dict:
        """The reply to a ``load_scenario`` whose file the worker has read (loop's thread).  Never raises."""
        self._loading = None
        try:
            exc = fut.exception()
            if exc is not None:
                if isinstance(exc, ConfigError):
                    raise ControlError("scenario_error", str(exc))
                raise exc
            result = self._install_scenario(fut.result(), req.get("dt_s"))
        except ControlError as exc:
            self.errors += 1
            return error_reply(exc.code, exc.message, req)
        except Exception as exc:
            self.errors += 1
            log.exception("load_scenario failed")
            return error_reply("internal", f"internal error: {type(exc).__name__}: {exc}", req)
        rep = {"v": PROTOCOL_VERSION, "id": req.get("id"), "cmd": "load_scenario", "ok": True}
        rep.update(result)
        return rep

    def close(self) -> None:
        """Stop the scenario reader thread (a read under way finishes; nothing waits for it)."""
        if self._reader is not None:
            self._reader.shutdown(wait=False, cancel_futures=True)
            self._reader = None

    def _unload_scenario(self, req):
        if self.player.loaded is None:
            raise ControlError("bad_state", "unload_scenario: no scenario is loaded")
        self.player.unload()
        return {"tick": self.loop.tick}

    def _fault_set(self, req):
        lp = self.loop
        if "fault" not in req:
            raise ControlError("bad_request", "fault_set: needs a 'fault' map (docs/faults.md)")
        try:
            spec = lp.set_fault(req["fault"])
        except FaultError as exc:
            raise ControlError("fault_error", f"fault_set: {exc}") from None
        log.info("fault set: %s %s", spec.name, spec.raw)
        return {"name": spec.name, "tick": lp.tick, "faults": lp.faults.listing()}

    def _fault_clear(self, req):
        lp = self.loop
        name = req.get("name")
        if name is not None and not isinstance(name, str):
            raise ControlError("bad_request", "fault_clear: 'name' must be a string (absent: clear every fault)")
        try:
            gone = lp.clear_fault(name)
        except KeyError as exc:
            raise ControlError("fault_error", f"fault_clear: {exc.args[0]}") from None
        if gone:
            log.info("faults cleared: %s", ", ".join(gone))
        return {"cleared": gone, "tick": lp.tick, "faults": lp.faults.listing()}

    def _adapter_set(self, req):
        lp = self.loop
        name = req.get("adapter")
        by_name = {a.name: a for a in lp.adapters}
        if name not in by_name:
            raise ControlError("bad_request", f"adapter_set: no adapter {name!r}; the adapters are "
                               + ", ".join(by_name))
        ad = by_name[name]
        try:
            values = ad.check_values(req.get("set"))
        except ValueError as exc:
            raise ControlError("bad_request", f"adapter_set: {exc}") from None
        ad.set_values(values)
        log.info("adapter %s set: %s", name, values)
        return {"adapter": name, "set": values, "tick": lp.tick}

    def _fault_list(self, req):
        return {"faults": self.loop.faults.listing(), "tick": self.loop.tick}

    def _snapshot_save(self, req):
        lp = self.loop
        name, path = self._snapshot_target(req, "snapshot_save")
        try:
            snap = lp.snapshot()
        except SnapshotError as exc:  # a part that cannot save its state (an FMU without state access)
            raise ControlError("snapshot_error", f"snapshot_save: {exc}") from None
        if path is not None:
            try:
                size = self.snapshots.save_file(snap, path)
            except SnapshotError as exc:
                raise ControlError("snapshot_error", f"snapshot_save: {exc}") from None
            return {"path": path, "bytes": size, "tick": lp.tick, "t": lp.plant.time}
        try:
            self.snapshots.keep(name, snap)
        except SnapshotError as exc:
            raise ControlError("snapshot_error", f"snapshot_save: {exc}") from None
        return {"name": name, "tick": lp.tick, "t": lp.plant.time}

    def _snapshot_restore(self, req):
        lp = self.loop
        name, path = self._snapshot_target(req, "snapshot_restore")
        try:
            snap = self.snapshots.load_file(path) if path is not None else self.snapshots.get(name)
            lp.restore(snap)
        except SnapshotError as exc:
            raise ControlError("snapshot_error", f"snapshot_restore: {exc}") from None
        return {"tick": lp.tick, "t": lp.plant.time, "faults": lp.faults.listing()}

    def _snapshot_target(self, req, cmd):
        has_name, has_path = "name" in req, "path" in req
        if has_name and has_path:
            raise ControlError("bad_request", f"{cmd}: give 'name' (kept in memory) or 'path' (a file in the "
                               "snapshot folder), not both")
        if has_path:
            if not isinstance(req["path"], str):
                raise ControlError("bad_request", f"{cmd}: 'path' must be a string")
            return None, req["path"]
        name = req.get("name", "default")
        if not isinstance(name, str) or not 1 <= len(name) <= 64:
            raise ControlError("bad_request", f"{cmd}: 'name' must be a string of 1 to 64 characters")
        return name, None

    def _clear_watchdog(self, req):
        lp = self.loop
        was = lp.watchdog.clear(lp.clock_ns())
        return {"was_tripped": was}


    def _require_recorder(self, what: str):
        if self.recorder is None:
            raise ControlError("bad_state", f"{what}: recording is not configured (add a [recording] table to the "
                               "I/O config, docs/testing.md)")
        return self.recorder

    def _record_start(self, req):
        from server.recording import RecordingError

        rec = self._require_recorder("record_start")
        try:
            job = rec.start(req.get("signals"), req.get("every"), req.get("name"))
        except RecordingError as exc:
            raise ControlError("bad_request", f"record_start: {exc}") from None
        return {"recording": job}

    def _record_stop(self, req):
        from server.recording import RecordingError

        rec = self._require_recorder("record_stop")
        try:
            return {"recording": rec.stop(wait=False)}
        except RecordingError as exc:
            raise ControlError("bad_state", f"record_stop: {exc}") from None


class _ScenarioRead(PendingReply):
    """A ``load_scenario`` whose file is being read off the loop's thread."""

    def __init__(self, handler: ControlHandler, req: dict, fut: Future):
        self.handler, self.req, self.fut = handler, req, fut
        self._reply: dict | None = None

    def ready(self) -> bool:
        return self.fut.done()

    def reply(self) -> dict:
        if self._reply is None:
            self._reply = self.handler.finish_read(self.req, self.fut)
        return self._reply


class _ListingRead(PendingReply):
    """A ``list_scenarios`` whose folders are being listed off the loop's thread."""

    def __init__(self, req: dict, fut: Future):
        self.req, self.fut = req, fut

    def ready(self) -> bool:
        return self.fut.done()

    def reply(self) -> dict:
        exc = self.fut.exception()
        if exc is not None:
            return error_reply("internal", f"list_scenarios: {type(exc).__name__}: {exc}", self.req)
        entries, cut = self.fut.result()
        return {"v": PROTOCOL_VERSION, "id": self.req.get("id"), "cmd": "list_scenarios", "ok": True,
                "scenarios": entries, "truncated": cut}


__all__ = ["ControlError", "ControlHandler", "SERVER_NAME", "describe_endpoints"]
