#!/usr/bin/env python3
"""A controller with a compiled kernel: a PI controller of a clutch's slip speed, for the Powershift plant.

It owns one clutch pressure (``p_c2`` by default) and drives the clutch's
slip speed to ``slip_target_rad_s`` from ``start_s`` on: the pressure
command is ``p0 + kp * e + ki * integral(e)`` with ``e = |slip| - target``
(rad/s), clamped to ``[0, p_max]`` bar.  Its work is a numba kernel
:func:`slip_pi_kernel` over its own state and parameter arrays, so a
compiled offline run calls it inside its loop without Python
(``plant_models/closed_loop.py``); ``update`` calls the same kernel, so the
lockstep and realtime runs (and the offline run through ``update``) give
the same commands bit for bit.

    python examples/slip_pi_controller.py      # offline, in this process: the slip it reached
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from numba import njit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from server.offline.controller import Controller  # noqa: E402

# kernel_params
P_SLIP, P_OUT, P_KP, P_KI, P_P0, P_PMAX, P_TARGET, P_START, P_DT = range(9)
# kernel_state
S_INTEGRAL = 0  # integral of the slip error, rad


@njit  # not cached: this file is loaded under several module names (a script, a test file's controller)
def slip_pi_kernel(t_s, y, u, state, params):
    """The pressure command (bar) into ``u`` from the slip in ``y`` (rad/s) at time ``t_s`` (s)."""
    if t_s < params[P_START]:
        return
    e = abs(y[int(params[P_SLIP])]) - params[P_TARGET]
    state[S_INTEGRAL] += e * params[P_DT]
    p = params[P_P0] + params[P_KP] * e + params[P_KI] * state[S_INTEGRAL]
    u[int(params[P_OUT])] = min(max(p, 0.0), params[P_PMAX])


class SlipPIController(Controller):
    """PI control of clutch ``clutch``'s slip speed through its pressure (see the module docstring)."""

    kernel = staticmethod(slip_pi_kernel)

    def __init__(self, clutch: int = 2, slip_target_rad_s: float = 5.0, kp: float = 0.2, ki: float = 2.0,
                 p0_bar: float = 2.0, p_max_bar: float = 16.0, start_s: float = 0.3, period_ticks: int = 2,
                 dt_s: float = 1e-3, initial: dict | None = None):
        self.clutch = clutch
        self.period_ticks = period_ticks
        self.owned_inputs = (f"p_c{clutch}",)
        self.kernel_state = np.zeros(1)
        self.kernel_params = np.zeros(9)
        self.kernel_params[[P_KP, P_KI, P_P0, P_PMAX, P_TARGET, P_START]] = (kp, ki, p0_bar, p_max_bar,
                                                                             slip_target_rad_s, start_s)
        self.kernel_params[P_DT] = period_ticks * dt_s  # the time between two calls, s
        self.initial = dict(initial if initial is not None else
                            {"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0, "engine_torque": 300.0,
                             "load_torque": 3500.0})

    def bind(self, output_names, input_names) -> None:
        super().bind(output_names, input_names)
        self.kernel_params[P_SLIP] = self.output_index[f"slip_c{self.clutch}"]
        self.kernel_params[P_OUT] = self.input_index[f"p_c{self.clutch}"]
        self.kernel_state[:] = 0.0

    def initial_inputs(self) -> dict[str, float]:
        return dict(self.initial)

    def update(self, t_s, y, u) -> None:
        slip_pi_kernel(t_s, y, u, self.kernel_state, self.kernel_params)


def main() -> int:
    from plant_models.registry import load_plant
    from server.offline.controller import closed_loop

    plant = load_plant("powershift")
    ctl = SlipPIController(initial={"p_c3": 16.0, "p_c6": 16.0, "engine_torque": 300.0, "load_torque": 0.0})
    r = closed_loop(plant, None, ctl, duration_s=2.0, dt=1e-3)
    slip = r.outputs[:, r.output_names.index("slip_c2")]
    p = r.inputs[:, r.input_names.index("p_c2")]
    print(f"clutch 2 slip at 2 s: {slip[-1]:.3f} rad/s (target 5), pressure {p[-1]:.2f} bar; "
          f"{r.updates} kernel calls inside the compiled loop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
