"""Locked gears give exactly the ratio that R implies (Morselli, Zanasi & Ferracin, eq. 20)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from plant_models.core import layout as L
from plant_models.config import ConfigReader, load_toml, resolve_config
from plant_models.plants.powershift import STAGES, PowershiftPlant
from plant_models.readers.powershift import read_powershift


@pytest.mark.parametrize("ca,cb", [(0.03, 0.09), (0.09, 0.03), (1.0, -3.7), (-2.5, -0.4), (0.04, -0.12),
                                   (1.0, 1.0)])
def test_locked_gear_row_holds_its_ratio_and_the_generalised_stuck_force(two_shafts, ca, cb):
    """A row ca*w_a + cb*w_b = 0: same-sign entries are an external mesh (shafts turn opposite ways),
    a negative entry a reverse/internal gear (same direction)."""
    J1, J2, t1, t2 = 1.5, 0.3, 120.0, -40.0
    c = two_shafts(J1=J1, J2=J2, coef_a=ca, coef_b=cb, K=1e9, w0=(100.0, 0.0), torque=(t1, t2), engaged=True)
    # the constraint force mu that keeps ca*a_a + cb*a_b = 0 with J a = t + R^T mu
    mu = -(ca * t1 / J1 + cb * t2 / J2) / (ca * ca / J1 + cb * cb / J2)
    for k in range(100):
        assert c.step(1e-3) == L.ST_OK
        assert c.delta[0] == 0.0
        assert c.omega[1] / c.omega[0] == pytest.approx(-ca / cb, rel=2e-16, abs=0)
        assert c.mu[0] == pytest.approx(mu, rel=1e-12)
    # the speed ratio's direction: same-sign coefficients turn the shafts in opposite directions
    assert np.sign(c.omega[1]) == -np.sign(ca * cb) * np.sign(c.omega[0])


def _powershift_params(engaged):
    path = resolve_config("powershift")
    params = read_powershift(ConfigReader(load_toml(path), str(path)))
    return dataclasses.replace(params, engaged0=tuple(engaged))


def _stage_ratio(R_row):
    """|w_b / w_a| of one gear pair: r_a w_a + r_b w_b = 0."""
    ra, rb = [v for v in R_row if v != 0]
    return ra / rb


@pytest.mark.parametrize("gear", range(1, 19))
def test_each_powershift_gear_gives_its_ratio(gear):
    probe = PowershiftPlant(_powershift_params((0, 2, 5)))
    trip = tuple(i - 1 for i in probe.gear_clutches(gear))
    params = _powershift_params(trip)
    plant = PowershiftPlant(params)
    inputs = {f"p_c{i + 1}": (16.0 if i in trip else 0.0) for i in range(8)}
    inputs.update(engine_torque=150.0, load_torque=100.0)
    assert plant.reset(inputs) == L.ST_OK
    # one clutch of each stage engaged
    assert sorted(len(set(trip) & set(s)) for s in STAGES) == [1, 1, 1]
    expect = 1.0
    for i in trip:
        expect *= _stage_ratio(params.R[i])
    gear_idx = plant.output_index("gear")
    ratio_idx = plant.output_index("ratio")
    for _ in range(200):
        assert plant.step(1e-3) == L.ST_OK
    w = plant.core.omega
    assert -w[3] / w[0] == pytest.approx(expect, rel=1e-14)
    assert plant.y[ratio_idx] == pytest.approx(1.0 / expect, rel=1e-14)  # input over output speed
    assert plant.y[gear_idx] == gear
    assert plant.gear_ratio(gear) == pytest.approx(1.0 / expect, rel=1e-14)
    for i in trip:
        assert plant.core.delta[i] == 0.0
    # gears are numbered from the largest reduction (ratio) down
    if gear > 1:
        assert plant.gear_ratio(gear) <= plant.gear_ratio(gear - 1)
