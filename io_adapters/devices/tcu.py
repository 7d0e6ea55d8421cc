"""A TCU emulator on the ``sim`` device, named in the I/O config, so that a server's run is a closed loop over pins.

::

    [[adapters]]
    type = "device"
    backend = "sim"
    channels = "io_device_zf8hp.toml"
    tcu = "examples/electrical_tcu.py:ElectricalTcu"   # a file (relative to the project's root) and a class
    [adapters.tcu_params]                               # its constructor's keyword arguments
    gearbox = "zf8hp"

The class is made once, when the adapter opens, with ``tcu_params`` as
keyword arguments, and its ``attach(adapter)`` is called with the opened
adapter: it resolves its channels there and sets the device's ``tcu``
hook (:class:`~io_adapters.devices.sim.SimDevice`), which the device calls
once a tick's targets are on its pins.  At the loop's reset (a tick not
after the last one read) the adapter calls ``attach`` again before the
reset's first tick is read, so the TCU starts afresh and that tick reads
the outputs it drives at its start, as the first run's first tick did.
The same I/O config then closes
the same loop in ``serve``, in a lockstep test file and in an offline run
with the devices of an I/O config (:mod:`server.testbench.device_run`), so
a pin fault acts alike in each.

A TCU emulator is test equipment: it runs in the tick, so it must allocate
little and block on nothing.  A real TCU is on the other side of a real
backend's pins; ``tcu`` is refused for any backend but ``sim``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from plant_models.config import repo_root
from plant_models.errors import ConfigError


def tcu_file(target: str, source: str) -> tuple[Path, str]:
    """(the file, the class name) of ``"file.py:Class"``; the file relative to the project's root."""
    file, sep, cls = target.rpartition(":")
    if not sep or not file.endswith(".py") or not cls.isidentifier():
        raise ConfigError(source, "tcu", f"must be \"file.py:ClassName\", got {target!r}")
    path = Path(file)
    if not path.is_absolute():
        path = repo_root() / path
    if not path.is_file():
        raise ConfigError(source, "tcu", f"no such file {file!r} (relative to the project's root)")
    return path, cls


def load_tcu(target: str, params: dict, source: str) -> Any:
    """The TCU object: the class of ``target`` made with ``params``; ``ConfigError`` naming ``tcu`` for a file,
    class or parameter that does not fit."""
    path, cls_name = tcu_file(target, source)
    mod_name = f"gearbox_hil_tcu_{path.stem}"
    module = sys.modules.get(mod_name)
    if module is None or Path(getattr(module, "__file__", "")) != path:
        spec = importlib.util.spec_from_file_location(mod_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module  # dataclasses of the module look it up while it executes
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            del sys.modules[mod_name]
            raise ConfigError(source, "tcu", f"{path.name}: {type(exc).__name__}: {exc}") from None
    cls = getattr(module, cls_name, None)
    if cls is None or not callable(getattr(cls, "attach", None)):
        raise ConfigError(source, "tcu", f"{path.name} has no class {cls_name!r} with an attach(adapter) method")
    try:
        return cls(**params)
    except (TypeError, ValueError, KeyError) as exc:
        raise ConfigError(source, "tcu_params", f"{cls_name}: {exc}") from None


__all__ = ["load_tcu", "tcu_file"]
