"""What the benchmarks share: a server in a subprocess on free loopback ports, its I/O template, a server with the
web workspace and a headless Chromium showing its page, the plant state and signal faults of the fault
benchmarks, and the CAN adapter's ``write`` timed per tick.

The server helpers are one implementation for the test bench, the tests and
the benchmarks (:mod:`server.testbench.local_server`, :mod:`server.testbench.workspace_page`); the scripts import
them as ``_support`` (they run as ``python bench/NAME.py``, with ``bench/``
first on the path).  They are imported on first use (PEP 562 module
``__getattr__``): bench/bench_pipeline.py runs a child of this tree's bench
against a base commit's packages, and that child takes only the plain data
below, so it never imports this tree's ``server`` over the base's, nor a
module the base does not have.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

FAULT_INITIAL = {"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0, "engine_torque": 300.0, "load_torque": 3500.0}
"""The Powershift's inputs of the fault benchmarks (gear 1 with load: every signal below moves)."""

SIGNAL_FAULTS = (
    {"target": "signal", "signal": "w_out", "kind": "offset", "value": 5.0},
    {"target": "signal", "signal": "ratio", "kind": "gain", "value": 1.1},
    {"target": "signal", "signal": "w_1", "kind": "noise", "value": 0.5, "seed": 3},
    {"target": "signal", "signal": "slip_c2", "kind": "freeze"},
    {"target": "signal", "signal": "torque_c4", "kind": "force", "value": 0.0},
    {"target": "signal", "signal": "p_c2", "kind": "force", "value": 0.0},
    {"target": "signal", "signal": "p_c4", "kind": "freeze"},
    {"target": "signal", "signal": "p_c5", "kind": "dropout"},
    {"target": "signal", "signal": "p_c7", "kind": "offset", "value": 0.0},
    {"target": "signal", "signal": "engine_torque", "kind": "gain", "value": 1.0},
)
"""Ten signal faults on the Powershift, every kind (bench_faults.py, bench_pipeline.py's ``faults`` blocks)."""



def can_write_us(message_set: str, ticks: int, opened=None):
    """The CAN adapter's ``write`` per tick, us (wall clock around the call; numpy array of ``ticks``).

    The Powershift plant and the CAN adapter with ``message_set`` on a fresh channel of python-can's virtual bus
    (no receiver), ticked by hand in lockstep (read, step, write) at 1 ms; ``opened(adapter)`` runs once the
    adapter is open (e.g. starts the recording's bus spool).  Imports this tree's packages when called.
    """
    import time
    import uuid

    import numpy as np

    from io_adapters.base import LoopContext, create_adapter, new_tick_info
    from plant_models.registry import load_plant

    plant = load_plant("powershift")
    ctx = LoopContext(period_s=0.001, feed_watchdog=lambda ns: None, status=lambda: {}, tick_info=new_tick_info(),
                      mode="lockstep")
    a = create_adapter("can", "can", {"interface": "virtual", "channel": f"bench-{uuid.uuid4().hex[:8]}",
                                      "message_set": message_set})
    a.open(plant, ctx)
    out = np.zeros(ticks)
    clock = time.perf_counter_ns
    try:
        if opened is not None:
            opened(a)
        for k in range(ticks):
            a.read(k, k * 1_000_000)
            plant.step(0.001)
            t0 = clock()
            a.write(k + 1, k * 1_000_000)
            out[k] = clock() - t0
    finally:
        a.close()
    return out / 1e3


_SERVER_NAMES = ("FREE_ENDPOINTS", "FREE_PORTS", "LocalServer", "write_io")
_PAGE_NAMES = ("chromium", "cpu_s", "open_workspace", "serve_workspace", "web_process_pid")


def __getattr__(name: str):
    if name in _SERVER_NAMES:
        from server.testbench import local_server

        return getattr(local_server, name)
    if name in _PAGE_NAMES:
        from server.testbench import workspace_page

        return getattr(workspace_page, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ROOT", "FAULT_INITIAL", "SIGNAL_FAULTS", "can_write_us", *_SERVER_NAMES, *_PAGE_NAMES]
