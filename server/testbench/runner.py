"""Running a test file: the plant offline or a server in lockstep/realtime, the fault schedule, a controller.

* offline: the plant in this process, the scenario's steps one by one
  (the same sequence as ``gearbox-hil simulate`` and lockstep), with the
  fault schedule applied around each step as the real-time tick applies it
  (:mod:`server.realtime.fault_schedule`), every output and input recorded
  per step: the same outputs as lockstep with the same faults, bit for bit;
* lockstep without a controller: a ``gearbox-hil serve --mode lockstep``
  process; the runner loads the stimulus and steps it one tick at a time,
  switching scheduled faults between exactly the ticks they name;
* a controller class (``controller = "file.py:Class"``): run in this process,
  offline against the plant here or in lockstep against a server, through
  :func:`run_in_process` (the same recording bit for bit);
* a ``[uds]`` table (a UDS tester beside an ECU controller class): the
  server in this process, on whose virtual bus the ECU and the tester
  run (:func:`run_uds_lockstep`, :mod:`server.testbench.uds_bench`);
* realtime, or a controller process: the runner loads the stimulus (if any), starts
  the controller, and records the state stream; a scheduled fault is
  switched when the stream shows its time has come (within the stream's
  latency, a tick or a few in realtime, one controller step in lockstep).

Faults go through :func:`apply_fault` and :func:`clear_fault` only; the
``[[adapter_set]]`` schedule through :func:`send_adapter_set` (the
``adapter_set`` control request), at the same points as the faults: before
the exact tick in lockstep, when the stream shows its time in realtime.

Why ``run_observed`` is longer than 80 lines: it is the one sequence of a
run on the state stream (start the server, subscribe, start the controller,
play stimulus and fault schedule, stop and collect) with its clean-up in one
``try``/``finally``, so that every way out of it stops what it started.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from plant_models.config import repo_root
from plant_models.errors import FaultError
from plant_models.run.stepper import Stepper

from server.testbench.local_server import FREE_PORTS
from .device_bench import DeviceInputs, device_steps, run_devices_offline
from .spec import WATCHDOG, ScheduledFault, ScheduledSet, TestSpec, substitute
from .verdict import Recording, Verdict, evaluate

# the runner's own servers take a replayed stimulus as one request of its points (64 MiB: about three million
# points; a server on loopback that only this runner talks to)
SERVER_IO = "[loop]\nstatus_line = false\nautostart = {autostart}\n" + FREE_PORTS + "max_request_bytes = 67108864\n"
DEFAULT_DT_S = 1e-3  # the step of a run with neither a scenario nor dt_s: a server's default period (1 kHz)


class FaultUnavailable(RuntimeError):
    """The fault schedule cannot be applied in this mode or by this server."""


class RunError(RuntimeError):
    """The run itself failed (the server did not start, the controller failed, the stream stopped)."""


@dataclass
class Session:
    """What the fault functions need: the mode and, with a server, a connected client."""

    mode: str
    client: object | None = None  # io_adapters.zmq.client.HilClient
    names: dict = field(default_factory=dict)  # id of a scheduled fault's dict -> the name the server gave it


def apply_fault(session: Session, fault: dict) -> None:
    """Switch a fault of the schedule on (the fault map of docs/faults.md, without ``at``/``until``).

    With a server: the ``fault_set`` control request, active from the next
    tick.  Offline runs switch their faults through a
    :class:`server.realtime.fault_schedule.FaultSchedule` instead
    (:func:`offline_schedule`); here, without a client, this raises
    :class:`FaultUnavailable`.
    """
    rep = _fault_request(session, "fault_set", fault=dict(fault))
    session.names[id(fault)] = rep.get("name")


def clear_fault(session: Session, fault: dict) -> None:
    """Switch a fault of the schedule off again (``fault_clear`` with the name ``fault_set`` gave it)."""
    name = session.names.pop(id(fault), None)
    if name is not None:
        _fault_request(session, "fault_clear", name=name)


def _fault_request(session: Session, cmd: str, **args) -> dict:
    if session.client is None:
        raise FaultUnavailable(f"fault injection is not available in {session.mode} mode (run the test in "
                               "lockstep or realtime mode: lockstep is bit-identical to offline)")
    from io_adapters.zmq.client import ServerError

    try:
        return session.client.request(cmd, **args)
    except ServerError as exc:
        if exc.code == "unknown_command":
            raise FaultUnavailable(f"fault injection is not available: the server does not know {cmd}") from None
        raise RunError(f"{cmd} {args}: {exc}") from None


class FaultClock:
    """The schedule as switch times: ``due(t)`` returns the (on/off, fault) switches whose time has come."""

    def __init__(self, faults: tuple[ScheduledFault, ...]):
        ev = [(f.at, 1, f) for f in faults] + [(f.until, 0, f) for f in faults if f.until is not None]
        self.events = sorted(ev, key=lambda e: (e[0], e[1]))  # at the same time: clears before sets
        self.pos = 0

    def due(self, t: float, eps: float) -> list[tuple[int, ScheduledFault]]:
        out = []
        while self.pos < len(self.events) and self.events[self.pos][0] <= t + eps:
            _, on, f = self.events[self.pos]
            out.append((on, f))
            self.pos += 1
        return out


def _switch(session: Session, clock: FaultClock, t: float, eps: float, log: list[str]) -> None:
    for on, f in clock.due(t, eps):
        (apply_fault if on else clear_fault)(session, f.fault)
        log.append(f"t = {t:.6g} s: fault {'set' if on else 'cleared'} {f.key} {f.fault}")


def send_adapter_set(session: Session, entry: ScheduledSet, log: list[str]) -> None:
    """One ``[[adapter_set]]`` entry as the ``adapter_set`` control request (from the server's next tick on)."""
    if session.client is None:
        raise FaultUnavailable(f"{entry.key}: an adapter set needs a server (lockstep or realtime mode)")
    from io_adapters.zmq.client import ServerError

    try:
        rep = session.client.request("adapter_set", adapter=entry.adapter, set=dict(entry.values))
    except ServerError as exc:
        raise RunError(f"adapter_set {entry.adapter} {entry.values}: {exc}") from None
    log.append(f"t = {entry.at:.6g} s: adapter_set {entry.key} {entry.adapter} {rep['set']} from tick {rep['tick']}")


class SetClock:
    """The ``[[adapter_set]]`` schedule (in time order): ``send(t)`` sends the entries whose time has come."""

    def __init__(self, sets: tuple[ScheduledSet, ...], session: Session, log: list[str]):
        self.sets, self.session, self.log, self.pos = sets, session, log, 0

    def send(self, t: float, eps: float) -> None:
        while self.pos < len(self.sets) and self.sets[self.pos].at <= t + eps:
            send_adapter_set(self.session, self.sets[self.pos], self.log)
            self.pos += 1


def _inputs_table(spec: TestSpec, plant, compiled, ticks: np.ndarray) -> dict[str, np.ndarray]:
    """Input values of the stimulus at each sample's tick (the step that starts there; the last step's at the end)."""
    n = compiled.n_steps
    out = np.empty((len(ticks), plant.n_in))
    for j, k in enumerate(ticks):
        out[j] = compiled.inputs_at(int(min(max(k, 0), n - 1)))[0]
    return {s.name: out[:, i].copy() for i, s in enumerate(plant.inputs)}


def _compile(spec: TestSpec):
    from plant_models.registry import load_plant

    plant = load_plant(spec.plant_config)
    compiled = spec.scenario.compile(plant, spec.dt_s, warn=False) if spec.scenario is not None else None
    return plant, compiled


def offline_schedule(spec: TestSpec, plant, dt: float, log: list[str] | None = None,
                     faults: tuple[ScheduledFault, ...] | None = None):
    """The fault schedule (the test file's, or ``faults``) for an offline run of ``plant`` at step ``dt``
    (None without faults)."""
    faults = spec.faults if faults is None else faults
    if not faults:
        return None
    from server.realtime.fault_schedule import FaultSchedule

    try:
        return FaultSchedule(plant, [(f.fault, f.at, f.until) for f in faults], dt, log)
    except FaultError as exc:
        raise FaultUnavailable(str(exc)) from None


def record_offline(spec: TestSpec, plant, compiled, log: list[str] | None = None, controller=None,
                   faults: tuple[ScheduledFault, ...] | None = None) -> Recording:
    """A test file's run offline on a given plant: what the verdicts read, for a campaign that varies the plant
    (its parameters set before), the controller (``controller``: an object of the interface, by default the
    file's controller class made with its parameters) or the faults (``faults``: by default the file's).

    ``compiled``: the file's scenario compiled for ``plant`` (None: no scenario).  Raises :class:`RunError`
    for a run the fault set or the controller refuses.
    """
    from server.offline.controller import ControllerError, closed_loop

    if controller is None and spec.controller_class is not None:
        controller = spec.controller_class.build()
    dt = compiled.dt if compiled is not None else (spec.dt_s or DEFAULT_DT_S)
    schedule = offline_schedule(spec, plant, dt, log, faults)
    try:
        if controller is not None:
            return closed_loop_recording(closed_loop(plant, compiled, controller, schedule,
                                                     duration_s=spec.duration_s, dt=dt))
        return _open_loop(plant, compiled, schedule)
    except (ControllerError, FaultError) as exc:  # a controller that fails its checks; a switch the fault set
        raise RunError(str(exc)) from None  # refuses (e.g. more signal faults at once than its table)


def run_spec_offline(spec: TestSpec, log: list[str]) -> Recording:
    """The plant in this process, step by step; the fault schedule's stage around each step as in the tick."""
    plant, compiled = _compile(spec)
    return record_offline(spec, plant, compiled, log)


def _open_loop(plant, compiled, faults) -> Recording:
    n = compiled.n_steps
    Y = np.empty((n + 1, plant.n_out))
    U = np.empty((n + 1, plant.n_in))
    if faults is not None:
        faults.reset()
    plant.reset(compiled.initial_inputs())
    Y[0] = plant.y
    _offline_steps(plant, compiled, faults, Y, U)
    if faults is not None:  # the plant is left without the schedule's clutch overlays
        faults.reset()
    U[n] = U[n - 1] if n else plant.u
    t = np.arange(n + 1) * compiled.dt
    sig = {s.name: U[:, i].copy() for i, s in enumerate(plant.inputs)}
    sig.update({s.name: Y[:, j].copy() for j, s in enumerate(plant.outputs)})
    sig.setdefault(WATCHDOG, np.zeros(n + 1))  # no command watchdog offline
    return Recording(t, sig, compiled.dt)


def _offline_steps(plant, compiled, faults, Y, U) -> None:
    """The offline run's steps through the run pipeline's stepper, the fault stages around each as in the tick;
    rows into ``Y`` and ``U``."""
    y, u = plant.y, plant.u

    def row(k: int) -> None:
        Y[k + 1] = y
        U[k] = u  # the commanded inputs (after the fault stage put them back), as the lockstep run records them

    stages = {"inputs": lambda k: compiled.apply(plant, k), "row": row}
    if faults is not None:
        stages.update(faults.stages())
    step = Stepper(plant, compiled.dt, stages, "testbench").step
    for k in range(compiled.n_steps):
        step(k)


def closed_loop_recording(r) -> Recording:
    """A closed-loop run's rows (every step) as a recording: an input's sample k is the value step k was
    commanded (the lockstep and offline recordings' convention)."""
    sig = {nm: np.append(r.inputs[1:, i], r.inputs[-1, i]) for i, nm in enumerate(r.input_names)}
    sig.update({nm: r.outputs[:, j].copy() for j, nm in enumerate(r.output_names)})
    sig.setdefault(WATCHDOG, np.zeros(len(r.time)))
    return Recording(r.time, sig, float(r.time[1] - r.time[0]) if len(r.time) > 1 else 0.0)


def run_in_process(spec: TestSpec, workdir: Path, log: list[str]) -> Recording:
    """A controller class in this process: offline against the plant here, or in lockstep against a server.

    The two give the same recording bit for bit (:mod:`server.testbench.closed_loop`).
    """
    from server.offline.controller import ControllerError

    from server.testbench.closed_loop import closed_loop_lockstep

    plant, compiled = _compile(spec)
    if spec.mode == "offline":
        return record_offline(spec, plant, compiled, log)
    dt = compiled.dt if compiled is not None else (spec.dt_s or DEFAULT_DT_S)
    try:
        ctl = spec.controller_class.build()
        io = spec.io_config
        if io is None:
            if 1.0 / (1.0 / dt) != dt:
                raise RunError(f"a lockstep server ticks at 1 / rate_hz: dt = {dt!r} s is not 1 / (1 / dt) in "
                               "floating point; choose another step")
            io = workdir / "io_closed_loop.toml"
            text = SERVER_IO.format(autostart="true")
            io.write_text(text.replace("[loop]\n", f"[loop]\nrate_hz = {1.0 / dt!r}\n", 1))
        from io_adapters.zmq.client import HilClient

        with ServerRun(spec.plant_config, "lockstep", workdir, io) as server:
            with HilClient(server.control, timeout_s=30.0).connect() as client:
                r = closed_loop_lockstep(client, ctl, compiled, duration_s=spec.duration_s,
                                         faults=[(f.fault, f.at, f.until) for f in spec.faults], log=log,
                                         adapter_sets=spec.adapter_sets)
        return closed_loop_recording(r)
    except (ControllerError, ValueError, FaultError) as exc:  # a controller that fails its checks, a server of
        raise RunError(str(exc)) from None  # another step, a fault switch the fault set refuses


def run_uds_lockstep(spec, log: list[str]):
    """A test file with ``[uds]``: its server here, its controller class and the tester on the server's bus;
    the recording with the tester's signals."""
    from io_adapters.zmq.client import HilClient
    from plant_models.errors import FaultError
    from server.offline.controller import ControllerError

    from .closed_loop import closed_loop_lockstep
    from .uds_bench import InProcessServer, TesterAlongside, bus_channel

    plant, compiled = _compile(spec)
    channel = spec.uds.channel or bus_channel(spec.io_config)
    alongside = TesterAlongside(spec.controller_class.build(), spec.uds, spec.uds_probes, channel)
    try:
        with InProcessServer(spec.plant_config, spec.io_config) as srv:
            with HilClient(srv.control, timeout_s=30.0).connect() as client:
                r = closed_loop_lockstep(client, alongside, compiled, duration_s=spec.duration_s,
                                         faults=[(f.fault, f.at, f.until) for f in spec.faults], log=log,
                                         adapter_sets=spec.adapter_sets)
    except (ControllerError, ValueError, FaultError) as exc:  # the controller's checks, a fault the server refuses
        raise RunError(str(exc)) from None
    finally:
        tester = alongside.tester
        alongside.close()
    rec = closed_loop_recording(r)
    if tester is not None:
        rec.signals.update(tester.signals(rec.t))
        st = tester.status()
        log.append(f"uds tester: {st['requests']} requests, {st['answers']} answers, {st['timeouts']} timeouts, "
                   f"negative {st['negative'] or 'none'}")
    return rec


class ServerRun:
    """``gearbox-hil serve`` in a subprocess on free loopback ports (a context manager)."""

    def __init__(self, plant_config: str | Path, mode: str, workdir: Path, io_config: Path | None = None,
                 timeout_s: float = 300.0):
        self.workdir = workdir
        io = io_config
        if io is None:
            io = workdir / "io.toml"
            # a realtime server waits for `start`, so that no state of a run before the test's reaches the runner
            io.write_text(SERVER_IO.format(autostart="false" if mode == "realtime" else "true"))
        ready = workdir / "ready.json"
        self.log_path = workdir / "server.log"
        env = {**os.environ, "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": os.pathsep.join([str(repo_root()), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
        cmd = [sys.executable, "-m", "server.cli", "serve", str(plant_config), "--io", str(io), "--mode", mode,
               "--ready-file", str(ready), "--quiet"]
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, cwd=repo_root(), stdout=self._log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + timeout_s
        while not ready.exists():
            if self.proc.poll() is not None:
                raise RunError(f"the server exited with code {self.proc.returncode}: {self.output()[-2000:]}")
            if time.monotonic() > deadline:
                self.close()
                raise RunError(f"the server was not ready within {timeout_s:g} s")
            time.sleep(0.05)
        time.sleep(0.05)  # the ready file is written whole, but give the writer a moment to close it
        info = json.loads(ready.read_text())
        controls = [v for k, v in info["endpoints"].items() if k.endswith(".control")]
        if not controls:
            self.close()
            raise RunError(f"the I/O config {io} has no ZeroMQ adapter: the runner needs its control endpoint")
        self.control = controls[0]
        self.endpoints: dict[str, str] = dict(info["endpoints"])

    def output(self) -> str:
        self._log.flush()
        return self.log_path.read_text()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                from io_adapters.zmq.client import HilClient

                with HilClient(self.control, timeout_s=5.0).connect() as c:
                    c.shutdown()
                self.proc.wait(timeout=30)
            except Exception:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self._log.close()

    def __enter__(self) -> "ServerRun":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _load_stimulus(client, spec: TestSpec, plant) -> None:
    """Send the test's scenario to the server (``load_scenario`` with the map).

    A scenario that replays a recording (``[replay]``) goes as its points:
    the recording lies with the test file, which the server may not read
    (it reads files only in its own scenario folders), and the points are
    exactly what the offline run plays, so lockstep equals offline with
    such a stimulus too.
    """
    from io_adapters.zmq.client import ServerError

    data = spec.scenario_data
    if "replay" in data:
        data = spec.scenario.as_map(plant)
    try:
        client.load_scenario(scenario=dict(data))
    except ServerError as exc:
        if exc.code != "oversized":
            raise
        raise RunError(f"the stimulus is too long for one request to the server ({exc.message}); raise the zmq "
                       "adapter's max_request_bytes in the test's I/O config") from None


def run_lockstep(spec: TestSpec, client, log: list[str]) -> Recording:
    """Load the stimulus and step it tick by tick, switching faults between exactly the right ticks (a device TCU
    instead of a stimulus: no stimulus, the inputs as the server ran them, :mod:`.device_bench`)."""
    plant, compiled = _compile(spec)
    if compiled is not None:
        _load_stimulus(client, spec, plant)
    dt, n = (compiled.dt, compiled.n_steps) if compiled is not None else device_steps(spec)
    names = client.output_names
    Y = np.empty((n + 1, len(names)))
    inputs = DeviceInputs(client, n) if compiled is None else None
    wd = np.zeros(n + 1)
    g = client.get()
    Y[0] = [g["y"][nm] for nm in names]
    session = Session("lockstep", client)
    clock = FaultClock(spec.faults)
    sets = SetClock(spec.adapter_sets, session, log)
    eps = 0.5 * dt
    for k in range(n):
        _switch(session, clock, k * dt, eps, log)
        sets.send(k * dt, eps)
        r = client.step(1)
        Y[k + 1] = [r.y[nm] for nm in names]
        wd[k + 1] = r.watchdog
        if inputs is not None:
            inputs.record(k)
    ticks = np.arange(n + 1)
    sig = _inputs_table(spec, plant, compiled, ticks) if inputs is None else inputs.table()
    sig.update({nm: Y[:, j].copy() for j, nm in enumerate(names)})
    sig.setdefault(WATCHDOG, wd)
    return Recording(ticks * dt, sig, dt)


def _controller_verdicts(proc, spec: TestSpec, wall_limit: float, out_path: Path) -> list[Verdict]:
    """Wait for the controller process to exit (killed past ``wall_limit``): its failures as verdicts."""
    problems: list[Verdict] = []
    try:
        proc.wait(timeout=max(0.0, wall_limit - time.monotonic()) + 1.0)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)
        problems.append(Verdict("controller", "controller", False, f"the controller did not exit within "
                                f"{spec.controller.timeout_s:g} s (killed)", error=True))
    if proc.returncode is not None and proc.returncode != spec.controller.exit_code and not problems:
        tail = out_path.read_text()[-1500:].strip().replace("\n", " | ")
        problems.append(Verdict("controller", "controller", False, f"the controller exited with code "
                                f"{proc.returncode} (expected {spec.controller.exit_code}): {tail}", error=True))
    return problems


def run_observed(spec: TestSpec, client, server: ServerRun, mode: str, log: list[str]) -> tuple[Recording, list]:
    """Record the state stream while a stimulus plays (realtime) or a controller drives the server."""
    plant = compiled = None
    if spec.scenario is not None:
        plant, compiled = _compile(spec)
    client.subscribe(("state",))
    time.sleep(0.2)  # a SUB socket receives only what is published after it has connected
    dt = float(client.describe()["period_s"])
    if compiled is not None:
        _load_stimulus(client, spec, plant)
        dt = compiled.dt
    else:
        client.reset()
    if client.status()["state"] != "running":
        client.start()
    proc = None
    out_path = server.workdir / "controller.log"
    if spec.controller is not None:
        c = spec.controller
        here = Path(spec.source).resolve().parent
        try:
            args = [substitute(a, server.control, here, server.endpoints) for a in c.command]
        except KeyError as exc:
            raise RunError(f"controller command: {exc.args[0]}") from None
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen(args, cwd=c.cwd, stdout=open(out_path, "w"), stderr=subprocess.STDOUT, env=env)
    session = Session(mode, client)
    clock = FaultClock(spec.faults)
    sets = SetClock(spec.adapter_sets, session, log)
    sets.send(0.0, 0.5 * dt)  # the entries at t = 0 before the first state is awaited
    eps = 0.5 * dt
    rows: list[tuple[int, float, dict, bool]] = []
    wall_limit = time.monotonic() + (spec.controller.timeout_s if spec.controller else 60.0 + 2 * spec.duration_s)
    ended_at = None
    full = False  # duration_s recorded; with a controller, a later reset of the plant starts over
    last_tick = -1
    while True:
        s = client.recv_state(timeout_s=0.1)
        now = time.monotonic()
        if s is not None:
            if s.tick < last_tick:
                log.append(f"the plant was reset at t = {rows[-1][1] if rows else 0:.6g} s; recording from the "
                           "reset on")
                rows.clear()
                full = False
                clock = FaultClock(spec.faults)  # a reset clears the server's faults: the schedule starts over
                sets = SetClock(spec.adapter_sets, session, log)
            last_tick = s.tick
            if not full:
                rows.append((s.tick, s.t, s.y, s.watchdog))
                _switch(session, clock, s.t, eps, log)
                sets.send(s.t, eps)
                full = s.t >= spec.duration_s - eps
                if full and proc is None:
                    break
        if proc is not None and proc.poll() is not None:
            ended_at = ended_at or now
            if now - ended_at > spec.settle_s:  # the states it caused have arrived (a realtime server ticks on)
                break
        elif proc is None and s is None and now > wall_limit:
            break
        if now > wall_limit:
            break
    problems = _controller_verdicts(proc, spec, wall_limit, out_path) if proc is not None else []
    if not rows:
        raise RunError("no state message received from the server")
    ticks = np.array([r[0] for r in rows])
    t = np.array([r[1] for r in rows])
    names = client.output_names
    sig = _inputs_table(spec, plant, compiled, ticks) if compiled is not None else {}
    sig.update({nm: np.array([r[2][nm] for r in rows], dtype=float) for nm in names})
    sig.setdefault(WATCHDOG, np.array([float(r[3]) for r in rows]))
    gaps = int(np.count_nonzero(np.diff(ticks) > 1))
    if gaps:
        log.append(f"{gaps} gaps in the state stream (missed ticks or lost messages)")
    return Recording(t, sig, dt), problems


@dataclass
class TestResult:
    spec: TestSpec
    verdicts: list[Verdict]
    wall_s: float
    log: list[str]

    @property
    def passed(self) -> bool:
        return all(v.passed for v in self.verdicts)


def run_test(spec: TestSpec, workdir: Path | None = None, artifacts: Path | None = None) -> TestResult:
    """Run one test file and check every expectation; never raises for a failure of the run itself.

    ``artifacts``: a folder for the trace and plot of a failure (:mod:`server.testbench.artifacts`).
    """
    from io_adapters.zmq.client import HilClient

    t0 = time.perf_counter()
    log: list[str] = []
    verdicts: list[Verdict] = []
    tmp = None
    if workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="gearbox-hil-test-")
        workdir = Path(tmp.name)
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        if spec.uds is not None:
            rec = run_uds_lockstep(spec, log)
        elif spec.controller_class is not None:
            rec = run_in_process(spec, workdir, log)
        elif spec.mode == "offline":  # with a device TCU in its I/O config: that closed loop (.device_bench)
            rec = run_devices_offline(spec, log) if spec.devices else run_spec_offline(spec, log)
        else:
            with ServerRun(spec.plant_config, spec.mode, workdir, spec.io_config) as server:
                with HilClient(server.control, timeout_s=30.0).connect() as client:
                    if spec.mode == "lockstep" and spec.controller is None:
                        rec = run_lockstep(spec, client, log)
                    else:
                        rec, verdicts = run_observed(spec, client, server, spec.mode, log)
        verdicts += [evaluate(e, rec) for e in spec.expectations]
        if artifacts is not None:
            from .artifacts import keep_failure, note

            if keep_failure(spec, rec, verdicts, artifacts) is not None:
                note(verdicts, artifacts)
    except (FaultUnavailable, RunError, FaultError, TimeoutError, OSError) as exc:
        verdicts.append(Verdict("run", "run", False, f"{type(exc).__name__}: {exc}", error=True))
    finally:
        if tmp is not None:
            tmp.cleanup()
    return TestResult(spec, verdicts, time.perf_counter() - t0, log)
