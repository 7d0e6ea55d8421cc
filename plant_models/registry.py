"""Plants by name: the ``plant = "..."`` key of a config file selects the class."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from .config import ConfigError, ConfigReader, load_plant_toml, resolve_config
from .plant import Plant

# Built-in plants: kind -> (module, class).  A module is imported only when a
# config asks for its kind, so starting a server compiles/loads one plant only.
BUILTIN = {
    "powershift": ("plant_models.plants.powershift", "PowershiftPlant"),
    "dct": ("plant_models.plants.dct", "DctPlant"),
    "chain": ("plant_models.plants.chain", "ChainPlant"),
    "damper": ("plant_models.plants.damper", "DamperClutchPlant"),
    "servo": ("plant_models.plants.servo", "ServoActuatorPlant"),
    "kinematic": ("plant_models.plants.kinematic", "KinematicClutchPlant"),
}

_PLANTS: dict[str, Callable[[ConfigReader], Plant]] = {}


def register(kind: str, factory: Callable[[ConfigReader], Plant]) -> None:
    """Make a plant class available to configs under ``plant = kind`` (for plants outside this package)."""
    _PLANTS[kind] = factory


def _available_builtin() -> list[str]:
    import importlib.util

    return [kind for kind, (mod, _) in BUILTIN.items() if importlib.util.find_spec(mod) is not None]


def plant_kinds() -> list[str]:
    return sorted(set(_PLANTS) | set(_available_builtin()))


def _factory(kind: str) -> Callable[[ConfigReader], Plant]:
    if kind not in _PLANTS:
        import importlib

        modname, clsname = BUILTIN[kind]
        _PLANTS[kind] = getattr(importlib.import_module(modname), clsname).from_config
    return _PLANTS[kind]


def load_plant(path_or_name: str | Path) -> Plant:
    """Build a plant from a config file (a path, or the name of a file in configs/).

    Raises ConfigError with file, key and problem for any mistake in the file.
    """
    path = resolve_config(path_or_name)
    data = load_plant_toml(path)
    cfg = ConfigReader(data, str(path))
    kind = cfg.string("plant", choices=plant_kinds())
    plant = _factory(kind)(cfg)
    cfg.reject_unknown()
    return plant


__all__ = ["ConfigError", "load_plant", "plant_kinds", "register"]
