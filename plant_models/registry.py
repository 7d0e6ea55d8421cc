"""Plants by name: the ``plant = "..."`` key of a config file selects the class and its config reader.

Two steps, so that a config can be checked and described without building
anything: :func:`read_config` reads a file into the plant class and its
frozen parameters (errors name the file, the key and the problem), and
:func:`load_plant` builds the plant from them (the plant's first reset
compiles its kernels or loads them from numba's cache).
:func:`describe_config` is what ``gearbox-hil describe`` prints, from the
parameters alone: nothing is built and nothing compiled.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .config import ConfigError, ConfigReader, find_config, load_plant_toml, read_params
from .plant import Plant

# Built-in plants: kind -> (plant class, config reader), as "module:name".  A module is imported
# only when a config asks for its kind, so starting a server imports (and compiles) one plant only.
BUILTIN = {
    "powershift": ("plant_models.plants.powershift:PowershiftPlant",
                   "plant_models.readers.powershift:read_powershift"),
    "dct": ("plant_models.plants.dct:DctPlant", "plant_models.readers.dct:read_dct"),
    "chain": ("plant_models.plants.chain:ChainPlant", "plant_models.readers.chain:read_chain"),
    "damper": ("plant_models.plants.damper:DamperClutchPlant", "plant_models.readers.damper:read_damper"),
    "servo": ("plant_models.plants.servo:ServoActuatorPlant", "plant_models.readers.servo:read_servo"),
    "kinematic": ("plant_models.plants.kinematic:KinematicClutchPlant",
                  "plant_models.readers.kinematic:read_kinematic"),
    "transmission": ("plant_models.plants.transmission:TransmissionPlant",
                     "plant_models.readers.transmission:read_transmission"),
}

Reader = Callable[[ConfigReader], Any]
_REGISTERED: dict[str, tuple[type[Plant], Reader]] = {}


def register(kind: str, plant_class: type[Plant], reader: Reader | None = None) -> None:
    """Make a plant class available to configs under ``plant = kind`` (for plants outside the built-ins).

    ``reader(cfg) -> params`` reads the rest of the config; without one, the
    fields of ``plant_class.params_type`` are read as top-level keys of the
    same names (:func:`plant_models.config.read_params`).
    """
    if reader is None:
        params_type = plant_class.params_type
        if params_type is None:
            raise TypeError(f"{plant_class.__name__} has no params_type: pass a reader to register {kind!r}")

        def reader(cfg: ConfigReader) -> Any:
            return read_params(cfg, params_type)

    _REGISTERED[kind] = (plant_class, reader)


def _load(ref: str):
    module, name = ref.split(":")
    return getattr(importlib.import_module(module), name)


@functools.lru_cache(maxsize=1)
def _available_builtin() -> tuple[str, ...]:
    """The built-in kinds whose modules are installed (looked up once per process)."""
    return tuple(kind for kind, (plant, _) in BUILTIN.items()
                 if importlib.util.find_spec(plant.split(":")[0]) is not None)


def plant_kinds() -> list[str]:
    return sorted(set(_REGISTERED) | set(_available_builtin()))


def plant_class(kind: str) -> tuple[type[Plant], Reader]:
    """The plant class of a kind and its config reader (imports the plant's module, compiles nothing)."""
    if kind not in _REGISTERED:
        plant_ref, reader_ref = BUILTIN[kind]
        _REGISTERED[kind] = (_load(plant_ref), _load(reader_ref))
    return _REGISTERED[kind]


@dataclass(frozen=True)
class PlantConfig:
    """A plant config read and validated: what :func:`load_plant` builds the plant from."""

    plant_class: type[Plant]
    params: Any  # the plant's frozen parameters (``plant_class.params_type``)
    source: str  # the config file
    fmus: tuple = ()  # the [[fmu]] tables (plant_models.fmi.connect.FmuTable), checked when the plant is built


def read_config(path_or_name: str | Path) -> PlantConfig:
    """Read a plant config (a path, or the name of a file in configs/) without building the plant.

    Raises ConfigError with file, key and problem for any mistake in the file.
    """
    path = find_config(path_or_name)
    return read_config_data(load_plant_toml(path), str(path))


def read_config_data(data: dict, source: str) -> PlantConfig:
    """Read a plant config already parsed from TOML (``extends`` resolved); ``source`` names it in errors.

    For configs changed in memory before they are read (a campaign's
    parameters, :mod:`server.campaign`).
    """
    fmus = ()
    if "fmu" in data:  # FMUs in the loop (docs/fmi.md): read here, checked against the FMU when built
        from .fmi.connect import read_fmu_tables
        data = dict(data)
        fmus = read_fmu_tables(data.pop("fmu"), source)
    cfg = ConfigReader(data, source)
    kind = cfg.string("plant", choices=plant_kinds())
    cls, reader = plant_class(kind)
    params = reader(cfg)
    cfg.reject_unknown()
    return PlantConfig(cls, params, cfg.source, fmus)


def load_plant(path_or_name: str | Path) -> Plant:
    """Build a plant from a config file, reset and ready to step (its kernels compile at this first reset).

    Raises ConfigError with file, key and problem for any mistake in the file.
    """
    return build_plant(read_config(path_or_name))


def build_plant(c: PlantConfig) -> Plant:
    """The plant of a config read (:func:`read_config`, :func:`read_config_data`), with its FMUs if it has
    ``[[fmu]]`` tables (an :class:`~plant_models.fmi.assembly.FmuAssembly`, docs/fmi.md; its step compiled
    where :func:`~plant_models.fmi.compiled.assemble` can)."""
    plant = c.plant_class(c.params, source=c.source)
    if c.fmus:
        from .fmi.compiled import assemble
        from .fmi.describe import checked
        plant = assemble(plant, checked(c.fmus, c.source, plant.inputs, plant.outputs))
    return plant


def config_signals(c: PlantConfig) -> tuple:
    """(inputs, outputs) of a config's plant as Signals, its FMUs' ports included, without building it."""
    inputs, outputs = c.plant_class.signals(c.params)
    if c.fmus:
        from .fmi.describe import assembly_signals, checked
        inputs, outputs = assembly_signals(checked(c.fmus, c.source, inputs, outputs), inputs, outputs)
    return inputs, outputs


def describe_config(path_or_name: str | Path) -> dict:
    """The description of a config's plant (kind, signals, clutches), from its parameters alone."""
    c = read_config(path_or_name)
    d = c.plant_class.description_of(c.params, c.source)
    if c.fmus:  # the FMUs' model descriptions read (no binary loaded): their ports and parameters
        from .fmi.describe import describe_with_fmus
        d = describe_with_fmus(d, c.fmus, c.source, *c.plant_class.signals(c.params))
    return d


__all__ = ["ConfigError", "PlantConfig", "build_plant", "config_signals", "describe_config", "load_plant", "plant_class", "plant_kinds",
           "read_config", "read_config_data", "register"]
