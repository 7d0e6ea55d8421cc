"""Plants by name: the ``plant = "..."`` key of a config file selects the class."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from .config import ConfigError, ConfigReader, load_toml, resolve_config
from .plant import Plant

_PLANTS: dict[str, Callable[[ConfigReader], Plant]] = {}


def register(kind: str, factory: Callable[[ConfigReader], Plant]) -> None:
    """Make a plant class available to configs under ``plant = kind``."""
    _PLANTS[kind] = factory


def plant_kinds() -> list[str]:
    _load_builtin()
    return sorted(_PLANTS)


def _load_builtin() -> None:
    if _PLANTS:
        return
    from .powershift import PowershiftPlant
    register("powershift", PowershiftPlant.from_config)
    for mod, cls in (("dct", "DctPlant"), ("chain", "ChainPlant"), ("damper", "DamperClutchPlant"),
                     ("servo", "ServoActuatorPlant"), ("kinematic", "KinematicClutchPlant")):
        try:
            m = __import__(f"plant_models.{mod}", fromlist=[cls])
        except ModuleNotFoundError as exc:
            if exc.name != f"plant_models.{mod}":
                raise
            continue
        klass = getattr(m, cls)
        register(klass.kind, klass.from_config)


def load_plant(path_or_name: str | Path) -> Plant:
    """Build a plant from a config file (a path, or the name of a file in configs/).

    Raises ConfigError with file, key and problem for any mistake in the file.
    """
    _load_builtin()
    path = resolve_config(path_or_name)
    data = load_toml(path)
    cfg = ConfigReader(data, str(path))
    kind = cfg.string("plant", choices=sorted(_PLANTS))
    plant = _PLANTS[kind](cfg)
    cfg.reject_unknown()
    return plant


__all__ = ["ConfigError", "load_plant", "plant_kinds", "register"]
