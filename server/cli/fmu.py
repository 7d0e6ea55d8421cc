"""``gearbox-hil fmu CONFIG --out FILE.fmu``: a plant config exported as an FMI 2.0 co-simulation FMU (docs/fmi.md).

The FMU's binary is a small C library (:mod:`plant_models.fmi.export`,
compiled here with the machine's C compiler) that runs the plant in a
gearbox-hil process of its own and steps it over a socket in lockstep: no
Python in the importer's process.  The target needs a Python with
gearbox-hil installed, where the plant process runs.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from plant_models.config import ConfigError, find_config, load_plant_toml


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="plant config (a file, or a name in configs/)")
    p.add_argument("--out", required=True, help="the .fmu file to write")
    p.add_argument("--step", type=float, default=1e-3, help="default communication step, s (default 0.001)")


def model_name(kind: str) -> str:
    return "Gearbox" + "".join(w.capitalize() for w in re.split(r"[^A-Za-z0-9]+", kind) if w)


def export(config: str, out: str | Path, step: float = 1e-3) -> Path:
    """Write the FMU of a plant config to ``out``; returns its path.  ConfigError for a config it cannot export."""
    from plant_models.fmi.export import build_fmu
    from plant_models.registry import read_config_data
    path = find_config(config)
    data = load_plant_toml(path)
    if "fmu" in data:
        raise ConfigError(str(path), "fmu", "a plant with FMUs in the loop cannot be exported as an FMU")
    if not (step > 0.0):
        raise ConfigError("fmu", "--step", f"must be > 0 s (got {step})")
    c = read_config_data(data, str(path))
    plant = c.plant_class(c.params, source=c.source)
    return build_fmu(data, path.name, plant, model_name(plant.kind), Path(out), float(step))


def run(args: argparse.Namespace) -> int:
    out = export(args.config, args.out, args.step)
    print(f"wrote {out}")
    return 0
