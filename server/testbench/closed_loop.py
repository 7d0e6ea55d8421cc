"""An in-process controller against a server over its client: lockstep (stepping it) and realtime (its state stream).

The controller interface is :mod:`server.offline.controller`; its offline
run is :func:`server.offline.controller.closed_loop`.  Here the same
controller object drives a ``gearbox-hil serve`` process through a
connected client (:class:`io_adapters.zmq.client.HilClient`, passed in; this
module names no transport):

* :func:`closed_loop_lockstep`: the client resets the plant to the
  controller's initial inputs, then steps it; before each tick it sends
  exactly the inputs the offline closed-loop step applies (the scenario's
  values for the inputs the controller does not own, its commands for those
  it owns, whenever one changes), switches the fault schedule's faults
  (``fault_set`` / ``fault_clear``) before the ticks the offline run switches
  them, and after every ``period_ticks``-th tick hands the outputs of the
  step reply to ``update``.  So a lockstep closed-loop run equals the offline
  one bit for bit (``tests/test_closed_loop.py``).  Ticks in which nothing
  is sent or read are taken in one ``step`` request.
* :func:`closed_loop_realtime`: a server in realtime mode ticks on its own
  clock; the controller is called when a state message shows that a new
  period has begun (with that message's time and outputs) and its commands
  go out as a command message when they change, and at least every
  ``heartbeat_s`` (which feeds the server's command watchdog).  Not
  deterministic: states arrive a tick or a few late and may be dropped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from server.offline.controller import ClosedLoopResult, ConstantInputs, bind_controller, closed_loop_start, row_steps
from server.offline.scenario import CompiledScenario
from plant_models.run.schedule import schedule_switches


def _vector(values: dict, names: Sequence[str]) -> np.ndarray:
    return np.array([values[nm] for nm in names], dtype=float)


def closed_loop_lockstep(client, controller: Any, compiled: CompiledScenario | None = None,
                         duration_s: float | None = None, faults: Sequence[tuple[dict, float, float | None]] = (),
                         every: int = 1, log: list[str] | None = None,
                         adapter_sets: Sequence[Any] = ()) -> ClosedLoopResult:
    """Run ``controller`` against a lockstep server through ``client`` (see the module's docstring).

    Parameters
    ----------
    client
        A connected client of a server in lockstep mode with no scenario
        loaded (``HilClient``).
    controller
        The controller (:mod:`server.offline.controller`).
    compiled
        The scenario for the inputs the controller does not own, compiled
        for the server's plant at its step; None: those inputs keep their
        values after the reset, for ``duration_s`` at the server's period.
    faults
        ``(fault map, at_s, until_s)`` each, switched over the control channel.
    every
        Keep a row every ``every``-th step (and after the last).
    log
        If given, a line per fault switched and per adapter set.
    adapter_sets
        The test file's ``[[adapter_set]]`` entries (:class:`server.testbench.spec.ScheduledSet`, in time
        order): each an ``adapter_set`` request before the tick of its time.
    """
    outs, ins = list(client.output_names), list(client.input_names)
    b = bind_controller(controller, outs, ins)
    compiled, held, mask = _lockstep_start(client, b, compiled, duration_s, ins)
    n, dt, period, update = compiled.n_steps, compiled.dt, b.period_ticks, controller.update
    switches = schedule_switches(list(faults), dt)
    set_steps = [int(round(e.at / dt)) for e in adapter_sets] + [n]
    keep = row_steps(n, every)
    g = client.get()
    Y = np.empty((len(keep), len(outs)))
    U = np.empty((len(keep), len(ins)))
    Y[0], U[0] = _vector(g["y"], outs), _vector(g["u"], ins)
    sent = U[0].copy()  # the server's commanded inputs now (every rate 0)
    names: dict[int, str] = {}
    k, row, sw, st, updates, status = 0, 1, 0, 0, 0, 0
    t0 = time.perf_counter()
    while k < n:
        while sw < len(switches) and switches[sw].step <= k:
            _switch(client, switches[sw], faults, names, k * dt, log)
            sw += 1
        while st < len(adapter_sets) and set_steps[st] <= k:
            _adapter_set(client, adapter_sets[st], log)
            st += 1
        want = np.where(mask, held, compiled.inputs_at(k)[0])
        changed = np.flatnonzero(want.view(np.int64) != sent.view(np.int64))
        # the ticks up to the next one that needs a message: a new period, a row, a switch, a new input value
        stop = min(n, (k // period + 1) * period, int(keep[row]), switches[sw].step if sw < len(switches) else n,
                   max(set_steps[st], k + 1))
        m = 1
        while k + m < stop and np.array_equal(np.where(mask, held, compiled.inputs_at(k + m)[0]).view(np.int64),
                                              want.view(np.int64)):
            m += 1
        read = bool(k + m == keep[row] or (k + m) % period == 0)
        r = client.step(m, inputs={ins[i]: float(want[i]) for i in changed} or None, outputs=read)
        sent = want
        status |= r.status_or
        k += m
        if not read:
            continue
        y = _vector(r.y, outs)
        if k == keep[row]:
            Y[row], U[row] = y, want
            row += 1
        if k % period == 0:
            cmd = want.copy()
            update(r.t, y, cmd)
            held[mask] = cmd[mask]
            updates += 1
    for j in list(names):  # the server is left without the schedule's faults
        client.clear_fault(names.pop(j))
    return ClosedLoopResult(outs, ins, keep.astype(float) * dt, Y, U, n, every, int(status), 0, [],
                            time.perf_counter() - t0, updates)


def _lockstep_start(client, b, compiled, duration_s, ins):
    """Reset the server's plant to the run's initial inputs; (the inputs of each step, the commands, the owned
    mask).  Without a scenario, the inputs keep their values after the reset."""
    period_s = float(client.describe()["period_s"])
    if compiled is None:
        if duration_s is None:
            raise ValueError("closed_loop_lockstep: give a compiled scenario or duration_s")
        client.reset(b.initial)
        base = _vector(client.get()["u"], ins)
        compiled = ConstantInputs(base, period_s, int(round(duration_s / period_s)))
        held, mask = base.copy(), np.zeros(len(ins), bool)
        mask[b.owned] = True
        return compiled, held, mask
    if period_s != compiled.dt:
        raise ValueError(f"closed_loop_lockstep: the scenario's step {compiled.dt!r} s is not the server's "
                         f"period {period_s!r} s (serve it at rate_hz = 1 / dt)")
    init, held, mask = closed_loop_start(b, compiled, ins)
    client.reset(init)
    return compiled, held, mask


def _switch(client, s, faults, names: dict, t: float, log: list[str] | None) -> None:
    """One switch of the fault schedule over the control channel (between ticks)."""
    fault = faults[s.index][0]
    if s.on:
        names[s.index] = client.set_fault(dict(fault))
    elif s.index in names:
        client.clear_fault(names.pop(s.index))
    if log is not None:
        log.append(f"t = {t:.6g} s: fault {'set' if s.on else 'cleared'} faults[{s.index}] {fault}")


def _adapter_set(client, entry, log: list[str] | None) -> None:
    """One entry of the ``[[adapter_set]]`` schedule over the control channel (between ticks)."""
    rep = client.request("adapter_set", adapter=entry.adapter, set=dict(entry.values))
    if log is not None:
        log.append(f"t = {entry.at:.6g} s: adapter_set {entry.key} {entry.adapter} {rep['set']} from tick {rep['tick']}")


@dataclass
class RealtimeStats:
    """What a realtime closed loop saw: states received, sequence gaps, controller calls, commands sent."""

    states: int = 0
    gaps: int = 0
    updates: int = 0
    commands: int = 0
    t_end_s: float = 0.0  # the plant time of the last state seen (>= duration_s when the run is complete)


def closed_loop_realtime(client, controller: Any, duration_s: float, heartbeat_s: float = 0.02,
                         timeout_s: float = 10.0, on_state: Callable | None = None) -> RealtimeStats:
    """Run ``controller`` on the state stream of a realtime server (no scenario loaded) for ``duration_s``.

    The plant is reset to the controller's initial inputs; the first state
    that acknowledges a command sent after the reset starts the run.
    ``on_state(state)``, if given, sees every state received (before the
    controller).  Raises ``TimeoutError`` when the stream stops and
    ``RuntimeError`` when another client resets the plant.  The run ends
    at the plant's ``duration_s``, not the wall clock's: a loop that misses
    ticks (a loaded machine) takes longer, and the wall-time bound
    (``timeout_s`` + twice ``duration_s``) raises ``TimeoutError`` naming
    how far the plant got, rather than ending the run short.
    """
    outs, ins = list(client.output_names), list(client.input_names)
    b = bind_controller(controller, outs, ins)
    client.subscribe(("state",))
    client.reset(b.initial)
    u = _vector(client.get()["u"], ins)
    owned = [ins[i] for i in b.owned]
    # states queued before the reset are stale: the first one acknowledging a command sent after it is ours
    seq = client.set_inputs({nm: float(u[ins.index(nm)]) for nm in owned} or dict(zip(ins[:1], u[:1])))
    first = client.wait_for(lambda s: s.ack >= seq, timeout_s)
    if first is None:
        raise TimeoutError("no state acknowledging our command (is the server running and started?)")
    st = RealtimeStats()
    period, update, mask = b.period_ticks, controller.update, np.zeros(len(ins), bool)
    mask[b.owned] = True
    last_period = first.tick // period
    last_sent = u[b.owned].copy()
    last_wall, prev_seq, prev_tick = time.monotonic(), first.seq, first.tick
    deadline = time.monotonic() + timeout_s + 2.0 * duration_s
    s = first
    while True:
        if s is None:
            raise TimeoutError("the state stream stopped")
        st.t_end_s = s.t
        if time.monotonic() > deadline:
            raise TimeoutError(f"the plant reached t = {s.t:.3f} s of {duration_s:g} s within "
                               f"{timeout_s + 2.0 * duration_s:g} s of wall time")
        st.states += 1
        st.gaps += int(s.seq != prev_seq + 1 and s is not first)
        if s.tick < prev_tick:
            raise RuntimeError(f"the plant was reset by another client at tick {prev_tick}; run one controller "
                               "per server")
        prev_seq, prev_tick = s.seq, s.tick
        if on_state is not None:
            on_state(s)
        if s.t >= duration_s:
            break
        if s.tick // period > last_period:
            last_period = s.tick // period
            cmd = u.copy()
            update(s.t, _vector(s.y, outs), cmd)
            u[mask] = cmd[mask]
            st.updates += 1
        now = time.monotonic()
        if owned and (not np.array_equal(u[b.owned], last_sent) or now - last_wall >= heartbeat_s):
            client.set_inputs({nm: float(u[ins.index(nm)]) for nm in owned})
            st.commands += 1
            last_sent, last_wall = u[b.owned].copy(), now
        s = client.latest_state(timeout_s=1.0)
    return st


__all__ = ["RealtimeStats", "closed_loop_lockstep", "closed_loop_realtime"]
