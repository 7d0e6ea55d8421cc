"""python-can's MF4 support without its cost until a frame recording to ``.mf4`` asks for it.

python-can imports ``can.io.mf4`` with ``can`` itself, and that module
imports asammdf at once whenever asammdf is installed (the ``record`` extra
installs it for signal recording), and asammdf brings pandas and pyarrow:
about 80 MB and three threads more in every process that uses CAN, the
server's included, although only a CAN recording with the ``.mf4`` suffix
uses them.

:func:`install` (run when :mod:`io_adapters.can` is first imported, before
this package imports python-can or cantools) makes ``can.io.mf4`` load as
python-can loads it when asammdf is not installed: its ``MF4Reader`` and
``MF4Writer`` exist and raise when used.  :func:`enable` runs the module
again with asammdf and hands the working classes to python-can's tables
(``can.Logger``, ``can.LogReader``, ``can.MF4Writer``, ...); the frame
recorder calls it for an ``.mf4`` file.  A process that imported python-can
before :func:`install` keeps python-can's own behaviour, and :func:`enable`
finds nothing to do there.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys

MF4_MODULE = "can.io.mf4"

_state = {"installed": False, "deferring": True, "loading": False}


class _DeferringLoader(importlib.abc.Loader):
    """Runs ``can.io.mf4`` with the import of asammdf refused (ModuleNotFoundError, as if not installed)."""

    def __init__(self, real: importlib.abc.Loader):
        self.real = real

    def create_module(self, spec):
        return self.real.create_module(spec)

    def exec_module(self, module) -> None:
        _state["loading"] = True
        try:
            self.real.exec_module(module)
        finally:
            _state["loading"] = False


class _Finder(importlib.abc.MetaPathFinder):
    """Hands ``can.io.mf4`` to :class:`_DeferringLoader`; refuses asammdf while that module loads."""

    def find_spec(self, name, path=None, target=None):
        if _state["loading"] and (name == "asammdf" or name.startswith("asammdf.")):
            raise ModuleNotFoundError(f"No module named {name!r} (deferred until MF4 is asked for)", name=name)
        if name != MF4_MODULE or not _state["deferring"]:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _DeferringLoader(spec.loader)
        return spec


def install() -> None:
    """Defer asammdf in ``can.io.mf4`` for the imports of python-can that follow (idempotent)."""
    if not _state["installed"]:
        _state["installed"] = True
        sys.meta_path.insert(0, _Finder())


def enable() -> None:
    """Make python-can's MF4 reader and writer work: load asammdf and run ``can.io.mf4`` again with it.

    Raises
    ------
    ImportError
        asammdf is not installed (``pip install gearbox-hil[record]``).
    """
    _state["deferring"] = False
    import can  # noqa: F401  (loads can.io.mf4, deferred or not)

    mod = sys.modules[MF4_MODULE]
    if getattr(mod, "asammdf", None) is not None:
        return  # loaded whole: python-can was imported before install(), or enable() ran before
    try:
        import asammdf  # noqa: F401
    except ImportError as exc:
        why = f"MF4 needs asammdf, which is not installed (pip install gearbox-hil[record]): {exc}"
        raise ImportError(why) from None
    loader = mod.__spec__.loader
    (loader.real if isinstance(loader, _DeferringLoader) else loader).exec_module(mod)
    import can.io
    import can.io.logger
    import can.io.player

    can.io.logger.MESSAGE_WRITERS[".mf4"] = mod.MF4Writer
    can.io.player.MESSAGE_READERS[".mf4"] = mod.MF4Reader
    for namespace in (can, can.io):
        namespace.MF4Writer = mod.MF4Writer
        namespace.MF4Reader = mod.MF4Reader


def deferred() -> bool:
    """``can.io.mf4`` is loaded without asammdf (so asammdf is not imported on python-can's account)."""
    mod = sys.modules.get(MF4_MODULE)
    return mod is not None and getattr(mod, "asammdf", None) is None


__all__ = ["install", "enable", "deferred", "MF4_MODULE"]
