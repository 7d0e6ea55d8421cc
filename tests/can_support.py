"""Shared pieces of the CAN tests: bus back-ends, a hand-driven adapter harness, the ECU emulator.

Every bus-level test runs on python-can's virtual bus, on the local virtual
bus between processes (io_adapters/vbus), and again on SocketCAN vcan where the kernel has AF_CAN and a vcan interface exists or can be
created (otherwise those cases skip and say why).
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import time
import uuid
from pathlib import Path

import can
import pytest

from io_adapters.base import LoopContext, create_adapter, new_tick_info
from plant_models.registry import load_plant

ROOT = Path(__file__).resolve().parent.parent
VCAN = os.environ.get("GEARBOX_HIL_VCAN", "vcan0")


def vcan_problem() -> str | None:
    """Why SocketCAN vcan tests cannot run here, or None if they can."""
    if not hasattr(socket, "AF_CAN"):
        return "this Python has no socket.AF_CAN"
    try:
        s = socket.socket(socket.AF_CAN, socket.SOCK_RAW, socket.CAN_RAW)
    except OSError as exc:
        return f"the kernel has no AF_CAN sockets ({exc.strerror})"
    try:
        try:
            s.bind((VCAN,))
            return None
        except OSError:
            pass  # AF_CAN exists but vcan0 does not: try to create it (needs CAP_NET_ADMIN)
        for cmd in (["ip", "link", "add", "dev", VCAN, "type", "vcan"], ["ip", "link", "set", "up", VCAN]):
            try:
                subprocess.run(cmd, check=False, capture_output=True, timeout=5)
            except (OSError, subprocess.SubprocessError):
                break
        try:
            s.bind((VCAN,))
            return None
        except OSError as exc:
            return f"no {VCAN} interface and it cannot be created ({exc.strerror})"
    finally:
        s.close()


_VCAN_PROBLEM = vcan_problem()

BACKENDS = [
    pytest.param("virtual", id="virtual"),
    pytest.param("vbus", id="vbus"),  # the local virtual bus between processes (io_adapters/vbus)
    pytest.param("socketcan", id="vcan", marks=pytest.mark.skipif(_VCAN_PROBLEM is not None,
                                                                  reason=f"SocketCAN vcan: {_VCAN_PROBLEM}")),
]


def bus_options(backend: str) -> dict:
    """Adapter options for a fresh bus of this back-end (a private channel on the virtual bus)."""
    if backend in ("virtual", "vbus"):
        return {"interface": backend, "channel": f"test-{uuid.uuid4().hex[:8]}"}
    return {"interface": "socketcan", "channel": VCAN}


def peer_bus(options: dict) -> can.BusABC:
    """The other side of the bus (the TCU's node) for adapter options from :func:`bus_options`."""
    if options["interface"] == "vbus":
        from io_adapters.vbus import register

        register()  # a checkout not installed has no entry point
    return can.Bus(interface=options["interface"], channel=options["channel"])


def load_example(name: str):
    """Import a script from examples/ as a module."""
    path = ROOT / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    import sys
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def wait_until(cond, timeout_s: float = 3.0, what: str = "condition") -> None:
    """Poll ``cond()`` (letting the adapter's receive thread run) until it holds."""
    end = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.0002)


class Harness:
    """A plant and a CAN adapter driven tick by tick, as the loop drives them (read, step, write).

    ``feeds`` collects the ``now_ns`` of every watchdog feed; ``tick_info``
    plays the loop's per-tick slots (``io_adapters.base.TI_WATCHDOG``,
    ``TI_SCENARIO``, ``TI_OVERRUNS``).
    """

    def __init__(self, plant: str = "powershift", options: dict | None = None, backend: str = "virtual",
                 period_s: float = 0.001, mode: str = "realtime"):
        self.plant = load_plant(plant)
        self.period_s = period_s
        self.options = dict(bus_options(backend))
        self.options.update(options or {})
        self.feeds: list[int] = []
        self.tick_info = new_tick_info()
        self.ctx = LoopContext(period_s=period_s, feed_watchdog=self.feeds.append, status=lambda: {},
                               tick_info=self.tick_info, mode=mode)
        self.adapter = create_adapter("can", "can", self.options)
        self.adapter.open(self.plant, self.ctx)
        self.tick = 0

    def peer(self) -> can.BusABC:
        return peer_bus(self.options)

    def run(self, n: int) -> None:
        """n ticks of read -> step -> write, each followed by the between-tick pump (realtime: the frames the
        tick queued are sent there)."""
        for _ in range(n):
            self.tick_without_pump()
            self.adapter.pump(0)

    def tick_without_pump(self) -> None:
        """One tick of read -> step -> write, nothing between ticks."""
        a, p = self.adapter, self.plant
        now = self.tick * int(self.period_s * 1e9)
        a.read(self.tick, now)
        p.step(self.period_s)
        self.tick += 1
        a.write(self.tick, now)

    def wait_frames(self, n: int) -> None:
        """Wait until the adapter's receive thread has handled ``n`` frames in total."""
        wait_until(lambda: self.adapter.rx_handled >= n, what=f"{n} received frames")

    def close(self) -> None:
        self.adapter.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


J1939_PERIOD = 0.001


class Rest:
    """The plant with the j1939 adapter alone on a fresh virtual channel, ticked in lockstep."""

    def __init__(self, **options):
        self.channel = f"out-{uuid.uuid4().hex[:8]}"
        self.plant = load_plant("powershift")
        self.j = create_adapter("j1939", "j1939", {"interface": "virtual", "channel": self.channel, **options})
        self.j.open(self.plant, LoopContext(period_s=J1939_PERIOD, feed_watchdog=lambda ns: None, status=lambda: {},
                                            tick_info=new_tick_info(), mode="lockstep"))
        self.tick = 0

    def run(self, n: int) -> None:
        for _ in range(n):
            self.j.read(self.tick, self.tick * int(J1939_PERIOD * 1e9))
            self.plant.step(J1939_PERIOD)
            self.tick += 1
            self.j.pump(0)

    def pumped(self, cond):
        """``cond`` for wait_until, the adapter pumped (plant time standing) before each look."""
        return lambda: (self.j.pump(0), cond())[1]
