"""The J1939 TCU of examples/ecu_emulator_j1939.py as a controller of the closed-loop interface.

It commands no plant input (``owned_inputs`` is empty): it talks to the
server's ``can`` and ``j1939`` adapters on their virtual bus, one 10 ms task
after every ten 1 ms ticks, so a lockstep run is the same frames every time.
The bus exists only in the server's process: run it against a server made in
that process (tests/test_testbench_adapter_set.py).
"""

from __future__ import annotations

import sys

import can

from plant_models.config import repo_root

EXAMPLES = str(repo_root() / "examples")
if EXAMPLES not in sys.path:
    sys.path.insert(0, EXAMPLES)


class J1939TcuController:
    period_ticks = 10  # the TCU's 10 ms task at the server's 1 kHz
    owned_inputs: tuple[str, ...] = ()

    def __init__(self, channel: str = "gearbox-hil-tc1", torque_limit_pct: float = 15.0):
        self.channel, self.torque_limit_pct = channel, torque_limit_pct
        self.bus = self.tcu = None

    def bind(self, output_names, input_names) -> None:
        pass

    def initial_inputs(self) -> dict[str, float]:
        return {}

    def update(self, t_s: float, y, u) -> None:
        if self.tcu is None:  # the bus is opened by the first task, not when the test file is checked
            from ecu_emulator_j1939 import J1939Tcu

            self.bus = can.Bus(interface="virtual", channel=self.channel)
            self.tcu = J1939Tcu(self.bus, torque_limit_pct=self.torque_limit_pct)
        self.tcu.cycle(t_s, 0.01)

    def close(self) -> None:
        if self.bus is not None:
            self.bus.shutdown()
