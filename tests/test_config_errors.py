"""Every mistake in a plant config is one ConfigError naming the file, the key and the problem.

Each case edits one line of a shipped config (so the rest of the file is valid) and checks the exact
message the user sees.
"""

from __future__ import annotations

import re

import pytest

from plant_models.config import ConfigError, repo_root
from plant_models.registry import load_plant

CONFIGS = repo_root() / "configs"


def edited(tmp_path, name: str, pattern: str, replacement: str):
    text = (CONFIGS / name).read_text()
    new, n = re.subn(pattern, replacement, text, count=1, flags=re.MULTILINE)
    assert n == 1, f"pattern {pattern!r} not found in {name}"
    path = tmp_path / name
    path.write_text(new)
    return path


CASES = [
    # DCT
    ("dct.toml", r"^inertia_kg_m2 = 0.20", "inertia_kg_m2 = -0.2", "engine.inertia_kg_m2: must be > 0, got -0.2"),
    ("dct.toml", r"^odd_inertia_kg_m2 = 0.025", "odd_inertia_kg_m2 = \"heavy\"",
     "input_shafts.odd_inertia_kg_m2: must be a number, got string 'heavy'"),
    ("dct.toml", r"^ratios = \[.*\]", "ratios = [3.5, 2.1, 2.5, 1.0]",
     "gears.ratios[2]: gear 3 must have a smaller ratio than gear 2 (2.5 >= 2.1)"),
    ("dct.toml", r"^ratios = \[.*\]", "ratios = [3.5]",
     "gears.ratios: must list 2 to 9 forward gear ratios (gear 1 first), got 1"),
    ("dct.toml", r"^cone_torque_N_m = \[.*\]", "cone_torque_N_m = [150.0, 120.0]",
     "synchronizer.cone_torque_N_m: must have 7 entries, got 2"),
    ("dct.toml", r"^kinetic_to_static = 0.85", "kinetic_to_static = 1.2",
     "synchronizer.kinetic_to_static: must be <= 1.0, got 1.2"),
    ("dct.toml", r"^friction_kinetic = 0.12", "friction_kinetic = 0.2",
     "clutch.friction_kinetic: must not exceed friction_static (0.13)"),
    ("dct.toml", r"^# \[clutch.c1\]\n# surfaces = 10", "[clutch.c1]\nsurfaces = 0",
     "clutch.c1.surfaces: must be >= 1, got 0"),
    ("dct.toml", r"^clutch_engaged = \"none\"", "clutch_engaged = \"c3\"",
     "initial.clutch_engaged: must be one of 'c1', 'c2', 'none', got 'c3'"),
    ("dct.toml", r"^stiffness_N_m_per_rad = 10000.0", "stiffnes_N_m_per_rad = 10000.0",
     "driveshaft.stiffness_N_m_per_rad: is required but missing"),
    ("dct.toml", r"^mass_kg = 1500.0", "mass_kg = 1500.0\nmas_kg = 1",
     "vehicle.mas_kg: unknown key (check the spelling; see the default config for the keys)"),
    ("dct.toml", r"^\[synchronizer\]", "[synchronizers]", "[synchronizer]: table is required but missing"),
    ("dct.toml", r"^plant = \"dct\"", "plant = \"dtc\"", "plant: must be one of"),
    # chain
    ("chain.toml", r"^inertia = \[.*\]", "inertia = [10.0, 0.0, 10.0, 10.0]",
     "bodies.inertia[1]: must be > 0, got 0.0"),
    ("chain.toml", r"^static_capacity = \[.*\]", "static_capacity = [12.0, -10.0, 13.0]",
     "contacts.static_capacity[1]: must be >= 0, got -10.0"),
    ("chain.toml", r"^motion = \"translational\"", "motion = \"linear\"",
     "motion: must be one of 'translational', 'rotational', got 'linear'"),
    ("chain.toml", r"^velocity = \[.*\]", "velocity = [2.0, -1.0, nan, 2.0]",
     "initial.velocity[2]: must be finite, got nan"),
    # Powershift
    ("powershift.toml", r"^piston_area_m2 = 0.012", "piston_area_m2 = -0.01",
     "clutch.piston_area_m2: must be > 0, got -0.01"),
    ("powershift.toml", r"^side = \"a\"", "side = \"c\"", "clutch.side: must be one of 'a', 'b', got 'c'"),
    ("powershift.toml", r"^\[clutch.c7\]\nsurfaces = 16", "[clutch.c7]\nsurfaces = 16.5",
     "clutch.c7.surfaces: must be an integer, got number 16.5"),
    ("powershift.toml", r"^engaged = \[1, 3, 6\]", "engaged = [1, 3, 9]",
     "initial.engaged: must be a list of clutch numbers 1..8, got [1, 3, 9]"),
    ("powershift.toml", r"^  \[0, 1, 4, 0\],", "  [0, 1, 4, 2],",
     "gears.R[2]: each row couples exactly two axles (two non-zero radii), got [0, 1, 4, 2]"),
]


@pytest.mark.parametrize("name,pattern,replacement,problem", CASES,
                         ids=[f"{c[0]}:{c[3][:40]}" for c in CASES])
def test_config_mistake_names_file_key_and_problem(tmp_path, name, pattern, replacement, problem):
    path = edited(tmp_path, name, pattern, replacement)
    with pytest.raises(ConfigError) as exc:
        load_plant(path)
    msg = str(exc.value)
    assert msg.startswith(f"{path}: ")
    assert problem in msg
    assert "\n" not in msg


@pytest.mark.parametrize("name", ["dct.toml", "chain.toml", "powershift.toml"])
def test_shipped_configs_load(name):
    plant = load_plant(CONFIGS / name)
    assert plant.source == str(CONFIGS / name)
    assert plant.describe()["outputs"]
