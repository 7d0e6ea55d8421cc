"""A lockstep server in this process with an ECU on its virtual bus and the UDS tester beside it.

python-can's virtual bus lives in one process, so a test file with a ``[uds]``
table runs its server here (:class:`InProcessServer`: the loop in a thread,
the control channel on loopback as usual) and its controller class, the ECU
(e.g. ``examples/ecu_diagnostics.py``), on the server's bus.  The tester runs
after the ECU's task in the same period (:class:`TesterAlongside`), so a
request sent in one task is answered in the ECU's next one, 10 ms of plant
time later, in every run (the UDS timing is plant time; the ECU's CAN
commands reach the plant through the CAN adapter's receive thread).

:class:`UdsBench` is the same for Python: a ``udsoncan.client.Client`` on a
:class:`~server.testbench.uds.LockstepConnection`, whose waits step the bench.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import can

from .uds import LockstepConnection, Probe, UdsTester, UdsTesterConfig

log = logging.getLogger(__name__)


def bus_channel(io_config: Path) -> str:
    """The channel of the I/O config's first ``can`` adapter on a virtual bus (ValueError if there is none)."""
    from server.realtime.runtime import load_io_config

    for a in load_io_config(io_config).adapters:
        if a.type == "can" and a.options.get("interface", "virtual") == "virtual":
            return str(a.options.get("channel", "gearbox-hil"))
    raise ValueError(f"{io_config}: no can adapter on a virtual bus for the UDS tester to join")


class InProcessServer:
    """``build(plant, io)`` with its loop in a thread of this process (lockstep, or ``mode``); a context manager.

    ``control`` is the ZeroMQ control endpoint; ``server`` the server (its adapters: ``server.loop.adapters``).
    """

    def __init__(self, plant_config: str | Path, io_config: str | Path, mode: str = "lockstep"):
        from server.realtime.runtime import build

        self.server = build(plant_config, io_config, mode=mode)
        self.server.loop.open()
        zmq = [a for a in self.server.loop.adapters if getattr(a, "endpoints", None) and "control" in a.endpoints]
        if not zmq:
            self.server.loop.close()
            raise ValueError(f"{io_config}: the I/O config has no ZeroMQ adapter (the control channel)")
        self.control = zmq[0].endpoints["control"]
        self._thread = threading.Thread(target=self.server.loop.run, name="lockstep-loop", daemon=True)
        self._thread.start()

    def close(self) -> None:
        from io_adapters.zmq.client import HilClient

        self._thread.join(timeout=5)  # a shutdown already asked for (UdsBench.close) ends the loop by itself
        if self._thread.is_alive():
            try:
                with HilClient(self.control, timeout_s=10.0).connect() as c:
                    c.shutdown()
            except Exception as exc:  # the server may be gone already; the join below bounds the wait either way
                log.warning("UDS bench: the in-process server did not take its shutdown request: %s", exc)
            self._thread.join(timeout=30)
        self.server.loop.close()

    def __enter__(self) -> "InProcessServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class TesterAlongside:
    """A controller (the ECU) and the UDS tester after it in each of its periods: the controller interface."""

    def __init__(self, controller, config: UdsTesterConfig, probes: tuple[Probe, ...], channel: str):
        self.controller, self.config, self.probes, self.channel = controller, config, probes, channel
        self.period_ticks = controller.period_ticks
        self.owned_inputs = tuple(controller.owned_inputs)
        self.now_ns = 0
        self.bus = self.tester = None

    def bind(self, output_names, input_names) -> None:
        self.controller.bind(output_names, input_names)

    def initial_inputs(self) -> dict[str, float]:
        f = getattr(self.controller, "initial_inputs", None)
        return f() if callable(f) else {}

    def update(self, t_s: float, y, u) -> None:
        self.controller.update(t_s, y, u)
        self.now_ns = int(round(t_s * 1e9))
        if self.tester is None:
            self.bus = can.Bus(interface="virtual", channel=self.channel, receive_own_messages=False)
            self.tester = UdsTester(self.bus, self.config, lambda: self.now_ns, self.probes)
        self.tester.update()

    def close(self) -> None:
        for obj in (self.controller,):
            f = getattr(obj, "close", None)
            if callable(f):
                f()
        if self.bus is not None:
            self.bus.shutdown()
            self.bus = None


class UdsBench:
    """A lockstep server in this process, an ECU controller on its bus, and a udsoncan client (a context manager).

    ``advance()`` steps the plant one ECU period (``client.step``) and runs the ECU's task; ``t_s`` is the
    plant time; ``uds_client(**config)`` a ``udsoncan.client.Client`` on a :class:`LockstepConnection` (its
    ``config``: udsoncan's client settings).  ``on_period(t_s)``, if set, runs after each ECU task (e.g. a
    tester task of its own).
    """

    def __init__(self, plant_config: str | Path, io_config: str | Path, controller,
                 tester: UdsTesterConfig = UdsTesterConfig()):
        from io_adapters.zmq.client import HilClient

        self.srv = InProcessServer(plant_config, io_config)
        self.controller = controller
        self.channel = tester.channel or bus_channel(Path(io_config))
        self.tester_config = tester
        self.hil = HilClient(self.srv.control, timeout_s=30.0).connect()
        self.period = int(controller.period_ticks)
        self.dt = float(self.hil.describe()["period_s"])
        self.hil.reset(controller.initial_inputs() if hasattr(controller, "initial_inputs") else None)
        controller.bind(self.hil.output_names, self.hil.input_names)
        self.bus = can.Bus(interface="virtual", channel=self.channel, receive_own_messages=False)
        self.ticks = 0
        self.on_period = None

    @property
    def t_s(self) -> float:
        return self.ticks * self.dt

    def clock_ns(self) -> int:
        return int(round(self.t_s * 1e9))

    def advance(self) -> None:
        r = self.hil.step(self.period)
        self.ticks += self.period
        self.last = r
        y = [r.y[nm] for nm in self.hil.output_names]
        self.controller.update(self.t_s, y, None)
        if self.on_period is not None:
            self.on_period(self.t_s)

    def wait_commands(self, frames: int, timeout_s: float = 10.0) -> bool:
        """Wait until the server's CAN adapters have accepted ``frames`` command frames in all; False on timeout.

        The ECU's commands reach the plant through a CAN adapter's receive thread, which a loaded machine may
        hold back past the next ``step``; a script that compares runs tick for tick waits for them after each
        :meth:`advance` (``frames``: what the ECU sent so far), so each run applies them at the same tick.
        """
        adapters = [a for a in self.srv.server.loop.adapters if a.type_name == "can"]
        end = time.monotonic() + timeout_s
        while sum(c.applied for c in (a.command_counts() for a in adapters) if c is not None) < frames:
            if time.monotonic() > end:
                return False
            time.sleep(0.0002)
        return True

    def run_for(self, seconds: float) -> None:
        for _ in range(int(round(seconds / (self.period * self.dt)))):
            self.advance()

    def connection(self) -> LockstepConnection:
        return LockstepConnection(self.bus, self.tester_config, self.advance, self.clock_ns)

    def uds_client(self, **config):
        from udsoncan.client import Client
        from udsoncan.configs import default_client_config

        c = self.tester_config
        cfg = {"p2_timeout": c.p2_ms / 1000, "p2_star_timeout": c.p2_star_ms / 1000, "request_timeout": None,
               **config}
        return Client(self.connection(), config={**default_client_config, **cfg})

    def close(self) -> None:
        try:
            self.hil.shutdown()
        except Exception as exc:  # a server that already stopped; the client is closed below either way
            log.warning("UDS bench: the server did not take its shutdown request: %s", exc)
        self.hil.close()
        f = getattr(self.controller, "close", None)
        if callable(f):
            f()
        self.bus.shutdown()
        self.srv.close()

    def __enter__(self) -> "UdsBench":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["InProcessServer", "TesterAlongside", "UdsBench", "bus_channel"]
