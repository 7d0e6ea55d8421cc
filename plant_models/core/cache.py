"""Keep numba's on-disk caches consistent with what each compiled kernel contains.

numba checks a cached function against its own source file only, but a
compiled function carries the code of the functions it inlines or calls
directly: the step in :mod:`.step` contains the dynamics of :mod:`.dynamics`,
the mode solver of :mod:`.modes` and so on.  After a change in one module the
others' caches would keep running the old code.  What a kernel contains
decides what must compile again:

* a kernel of the core contains other core modules' code: any change in
  ``core/`` drops every cached kernel of the core;
* a component's kernel (``powertrain/``) contains other components' code
  and the core's layout constants: a change in ``core/`` or ``powertrain/``
  drops the components' caches;
* a plant module's kernels (``plants/``) and the compiled runs of
  ``plant_models/`` (``offline.py``, ``closed_loop.py``) contain the core's
  layout constants and helpers, and, if the module imports a component, that
  component's code; the core's step itself is called through an address
  (:func:`.api.core_step`), so it is not inside them.  Each such module has
  a stamp of its own: a change in ``core/`` drops all of them, a change in
  ``powertrain/`` only those that import a component, and a change in one
  plant module only that module's (numba's own check).

So a comment added to ``powertrain/law.py`` recompiles the components and the
three plants that link them, not the core and not the ``chain`` plant; an edit
of ``plants/dct.py`` recompiles the DCT alone (``bench/bench_cache_edit.py``).
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

STAMP_NAME = "core_sources.sha256"
# the per-module stamps of a folder whose modules depend on different packages: core_sources.<module>.sha256
MODULE_STAMP = "core_sources.{module}.sha256"


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


def _imports(source: Path, package: str) -> set[str]:
    """What a module of ``plant_models`` (``package`` "" for the top level, or "plants") imports from it, as
    "core", "powertrain", "plants.<module>" or "<module>" (a top-level module), the imports inside
    functions included."""
    try:
        tree = ast.parse(source.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return {"core", "powertrain"}  # unreadable: assume it links everything, so nothing stale survives
    found: set[str] = set()
    for node in ast.walk(tree):
        targets: list[list[str]] = []
        if isinstance(node, ast.ImportFrom):
            base = (node.module or "").split(".") if node.module else []
            if node.level:  # relative: resolved against the module's own package
                here = [package] if package else []
                up = here[: len(here) - (node.level - 1)] if node.level - 1 <= len(here) else None
                if up is None:
                    continue
                base = up + base
            elif base[:1] == ["plant_models"]:
                base = base[1:]
            else:
                continue
            targets.extend(base + [alias.name] for alias in node.names)
        elif isinstance(node, ast.Import):
            targets.extend(a.name.split(".")[1:] for a in node.names if a.name.split(".")[0] == "plant_models")
        for parts in targets:
            parts = [p for p in parts if p]
            if not parts:
                continue
            if parts[0] in ("core", "powertrain"):
                found.add(parts[0])
            elif parts[0] == "plants" and len(parts) > 1:
                found.add(f"plants.{parts[1]}")
            else:
                found.add(parts[0])
    return found


def links_components(models: Path) -> dict[tuple[str, str], bool]:
    """For each module of ``plants/`` and of the top level of ``plant_models`` (as (package, name)): whether
    it imports a component (``powertrain/``), directly or through other modules of those two folders."""
    graph: dict[str, set[str]] = {}
    for package in ("plants", ""):
        for path in sorted((models / package).glob("*.py")):
            key = f"{package}.{path.stem}" if package else path.stem
            graph[key] = _imports(path, package)
    linked: dict[str, bool] = {}

    def visit(key: str, seen: set[str]) -> bool:
        if key in linked:
            return linked[key]
        seen.add(key)
        hit = "powertrain" in graph.get(key, ())
        for dep in graph.get(key, ()):
            if not hit and dep in graph and dep not in seen:
                hit = visit(dep, seen)
        linked[key] = hit
        return hit

    for key in graph:
        visit(key, set())
    return {(k.split(".")[0] if "." in k else "", k.split(".")[-1]): v for k, v in linked.items()}


def _drop(folder: Path, stamp_name: str, stamp: str, prefix: str = "") -> None:
    """Remove the folder's cached kernels (those of the module ``prefix`` names, or all) unless its stamp
    file holds ``stamp``; then write the stamp."""
    marker = folder / stamp_name
    try:
        if marker.read_text() == stamp:
            return
    except OSError:
        pass
    for pattern in (f"{prefix}*.nbi", f"{prefix}*.nbc"):
        for f in list(folder.glob(pattern)):
            try:
                f.unlink()
            except OSError:  # another process removed it, or a read-only cache
                pass
    try:
        folder.mkdir(parents=True, exist_ok=True)
        marker.write_text(stamp)
    except OSError:
        pass


def drop_stale_caches(models: Path | None = None) -> None:
    """Remove the cached kernels whose contents a change of the core's or the components' sources made
    stale (the rules in the module docstring); ``models`` is the ``plant_models`` folder (default: this one)."""
    models = models or Path(__file__).resolve().parent.parent
    core = models / "core"
    powertrain = models / "powertrain"
    try:
        core_stamp = sources_digest(core)
        components_stamp = core_stamp + (sources_digest(powertrain) if powertrain.is_dir() else "")
    except OSError:
        return
    for folder in cache_folders(core):
        _drop(folder, STAMP_NAME, core_stamp)
    if powertrain.is_dir():
        for folder in cache_folders(powertrain):
            _drop(folder, STAMP_NAME, components_stamp)
    links = links_components(models)
    for package in ("plants", ""):
        folders = cache_folders(models / package if package else models)
        for (pkg, name), linked in links.items():
            if pkg != package or name == "__init__":
                continue
            stamp = components_stamp if linked else core_stamp
            for folder in folders:
                _drop(folder, MODULE_STAMP.format(module=name), stamp, prefix=f"{name}.")
        for folder in folders:  # the one stamp of the plants' folder kept before the per-module ones
            try:
                (folder / STAMP_NAME).unlink()
            except OSError:
                pass


__all__ = ["drop_stale_caches", "sources_digest", "cache_folders", "links_components"]
