"""The pytest plugin: a controller developer's plain pytest file against the lockstep server fixture."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent

USER_TESTS = '''
GEAR_1 = {"p_c1": 16.0, "p_c3": 16.0, "p_c6": 16.0, "engine_torque": 300.0, "load_torque": 3500.0}


def test_gear_1_holds(hil):
    hil.reset(GEAR_1)
    r = hil.step(200)
    assert r.tick == 200 and r.y["gear"] == 1
    assert abs(r.y["ratio"] - 48.0) < 1e-9 * 48.0


def test_each_test_starts_from_a_reset(hil):
    assert hil.get()["tick"] == 0
    r = hil.step(5, inputs={"engine_torque": 100.0})
    assert r.tick == 5


def test_releasing_every_clutch_leaves_no_gear(hil):
    hil.reset(GEAR_1)
    hil.step(10)
    r = hil.step(300, inputs={"p_c1": 0.0})
    assert r.y["gear"] == 1, "fails on purpose: clutch 1 released, no gear is engaged"
'''


def test_entry_point_is_declared():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert data["project"]["entry-points"]["pytest11"] == {"gearbox_hil": "server.testbench.pytest_plugin"}


def test_plugin_fixtures_in_a_plain_pytest_run(tmp_path):
    (tmp_path / "test_controller.py").write_text(USER_TESTS)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # -p no:gearbox_hil: where the package is installed its entry point loads the same module; load it once
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:gearbox_hil", "-p", "server.testbench.pytest_plugin",
                        "-q", "-p", "no:cacheprovider", "--hil-plant", "powershift",
                        str(tmp_path / "test_controller.py")],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert re.search(r"\b1 failed, 2 passed\b", out), out
    assert "fails on purpose: clutch 1 released, no gear is engaged" in out
    assert "FAILED test_controller.py::test_releasing_every_clutch_leaves_no_gear" in out
