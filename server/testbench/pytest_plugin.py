"""A pytest plugin: a plant server in lockstep mode and a connected client, as fixtures.

Installed with the package (the ``pytest11`` entry point ``gearbox_hil``), so
a controller's tests are plain pytest::

    def test_gear_1_holds(hil):
        hil.reset({"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0, "engine_torque": 300.0})
        r = hil.step(200)
        assert r.y["gear"] == 1

Fixtures:

* ``hil_server`` (one per test session): ``gearbox-hil serve PLANT --mode
  lockstep`` on free loopback ports; ``.control`` is its control endpoint,
  ``.output()`` its log.  ``--hil-plant`` (default ``powershift``) and
  ``--hil-io`` choose the plant config and the I/O config.
* ``hil``: an :class:`io_adapters.zmq.client.HilClient` connected to it, the
  plant reset to t = 0 with no scenario loaded, for each test.

Without the entry point (a checkout that is not installed): ``pytest -p
server.testbench.pytest_plugin``.  Importing this module loads nothing
compiled; the server is started only by a test that asks for it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("gearbox-hil")
    group.addoption("--hil-plant", default="powershift",
                    help="plant config of the hil_server fixture (a name in configs/ or a path; default powershift)")
    group.addoption("--hil-io", default=None, help="I/O config of the hil_server fixture (default: ZeroMQ on free "
                    "loopback ports)")


@pytest.fixture(scope="session")
def hil_server(request):
    """A lockstep plant server for the whole session (stopped at its end)."""
    from .runner import ServerRun

    plant = request.config.getoption("--hil-plant")
    io = request.config.getoption("--hil-io")
    with tempfile.TemporaryDirectory(prefix="gearbox-hil-pytest-") as tmp:
        server = ServerRun(plant, "lockstep", Path(tmp), Path(io) if io else None)
        try:
            yield server
        finally:
            server.close()


@pytest.fixture
def hil(hil_server):
    """A client connected to ``hil_server``; the plant is reset to t = 0 (no scenario loaded) first."""
    from io_adapters.zmq.client import HilClient

    with HilClient(hil_server.control, timeout_s=30.0).connect() as client:
        if client.status().get("scenario"):
            client.unload_scenario()
        client.reset()
        yield client
