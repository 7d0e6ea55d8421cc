"""Shared fixtures for the friction-core tests; the hypothesis profile of CI."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import settings

# CI draws the same examples every run (a red build is then the code's, reproducible, not the draw's);
# a developer's run draws new ones each time and keeps the failures it finds in .hypothesis/.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

from plant_models.core import Core, CoreSpec, Row


def make_two_shafts(J1=2.0, J2=3.0, coef_a=1.0, coef_b=-1.0, K=100.0, k=None, drag=(0.0, 0.0), viscous=0.0,
                    w0=(0.0, 0.0), torque=(0.0, 0.0), engaged=False, **settings) -> Core:
    """Two shafts coupled by one row driven directly by capacity (``u_act`` = K).

    ``k`` defaults to ``K`` (equal static and Coulomb amplitudes).
    """
    from plant_models.core import Settings

    k_ratio = 1.0 if k is None else (k / K if K else 1.0)
    row = Row("row", 0, 1, coef_a, coef_b, gain_static=1.0, gain_kinetic=k_ratio, viscous=viscous)
    spec = CoreSpec(("a", "b"), (J1, J2), tuple(drag), (row,), settings=Settings(**settings))
    c = Core(spec)
    c.omega[:] = w0
    c.u_act[0] = K
    c.act[0] = K
    c.u_torque[:] = torque
    c.start([0] if engaged else [])
    return c


@pytest.fixture
def two_shafts():
    """Factory for a two-shaft core with one friction row (see :func:`make_two_shafts`)."""
    return make_two_shafts


def drive_foh(core: Core, dt: float, steps: int, torque=None, command=None, t0: float = 0.0, record=None):
    """Step ``core`` with first-order-hold inputs sampled from functions of time.

    ``torque(t)`` -> [n] and ``command(t)`` -> [g] (either may be None: held).
    ``record(core, k)`` is called after each step.  Returns the OR of the status words.
    """
    st = 0
    for k in range(steps):
        ta, tb = t0 + k * dt, t0 + (k + 1) * dt
        if torque is not None:
            a, b = np.asarray(torque(ta)), np.asarray(torque(tb))
            core.u_torque[:] = a
            core.u_torque_rate[:] = (b - a) / dt
        if command is not None:
            a, b = np.asarray(command(ta)), np.asarray(command(tb))
            core.u_act[:] = a
            core.u_act_rate[:] = (b - a) / dt
        st |= core.step(dt)
        if record is not None:
            record(core, k)
    return st


@pytest.fixture
def foh():
    """The :func:`drive_foh` helper."""
    return drive_foh
