"""Keep numba's on-disk cache of the core consistent across its modules.

numba checks a cached function against its own source file only, but a
compiled function carries the code of the functions it calls: the step in
:mod:`.step` contains the dynamics of :mod:`.dynamics`, the mode solver of
:mod:`.modes` and so on.  After a change in one module the others' caches
would keep running the old code.  So a hash of every source file of this
package and of the powertrain components (``plant_models/powertrain``, whose
force law the plants' output kernels call) is kept next to the caches; when
it differs, every cached kernel of the core, the components and the plants
(whose steps call into the core) is removed and compiles again on first use.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

STAMP_NAME = "core_sources.sha256"


def sources_digest(package: Path) -> str:
    """SHA-256 over the names and contents of the package's ``*.py`` files, in name order."""
    digest = hashlib.sha256()
    for path in sorted(package.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def cache_folders(package: Path) -> list[Path]:
    """The folders where numba may keep the caches of the modules in ``package`` (existing or not)."""
    folders = [package / "__pycache__"]
    try:  # numba's own rule for NUMBA_CACHE_DIR and the user-wide fallback
        try:
            from numba.core.caching import CacheImpl  # numba >= 0.59
        except ImportError:  # pragma: no cover - older numba
            from numba.core.caching import _CacheImpl as CacheImpl

        probe = str(package / "__init__.py")
        for locator_class in CacheImpl._locator_classes:
            try:
                # a locator reads the line number of the function it is asked about: any function will do
                locator = locator_class.from_function(cache_folders, probe)
            except Exception:  # a locator that does not apply to this file
                locator = None
            if locator is not None:  # numba uses the first locator that applies
                folders.append(Path(locator.get_cache_path()))
                break
    except ImportError:
        pass
    return list(dict.fromkeys(folders))


def drop_stale_caches() -> None:
    """Remove the cached kernels of the core, the powertrain components and the plants when the sources of
    the core or of the components changed (a plant's step carries the components' code too)."""
    core = Path(__file__).resolve().parent
    powertrain = core.parent / "powertrain"
    try:
        stamp = sources_digest(core) + (sources_digest(powertrain) if powertrain.is_dir() else "")
    except OSError:
        return
    for package in (core, core.parent / "plants", powertrain):
        for folder in cache_folders(package):
            marker = folder / STAMP_NAME
            try:
                if marker.read_text() == stamp:
                    continue
            except OSError:
                pass
            for f in list(folder.glob("*.nbi")) + list(folder.glob("*.nbc")):
                try:
                    f.unlink()
                except OSError:  # another process removed it, or a read-only cache
                    pass
            try:
                folder.mkdir(parents=True, exist_ok=True)
                marker.write_text(stamp)
            except OSError:
                pass


__all__ = ["drop_stale_caches", "sources_digest", "cache_folders"]
