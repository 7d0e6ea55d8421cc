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
* a plant module's kernels (``plants/``), the compiled runs of
  ``plant_models/`` (``offline.py``, ``closed_loop.py``) and the compiled
  FMU assembly (``fmi/compiled.py``, which links the FMI calls of
  ``fmi/cabi.py`` and the model-exchange step of ``fmi/me_compiled.py``) contain the core's
  layout constants and helpers, and, if the module imports a component, that
  component's code; the core's step itself is called through an address
  (:func:`.api.core_step`), so it is not inside them.  Each such module has
  a stamp of its own: a change in ``core/`` drops all of them, a change in
  ``powertrain/`` only those that import a component, and a change in one
  plant module that module's (numba's own check) and those of the modules
  that import it, directly or through others (a kernel folds in the
  constants and inlines the compiled helpers of the modules it imports:
  ``BAR`` from ``clutch.py``, the status bits of ``friction_plant.py``, a
  plant's kernels from its ``*_kernel.py``, an intrinsic made by a call such
  as ``ptr_f64 = intrinsic(...)``); importing only classes (a plant's base,
  its ports, the FMU assembly's Python class) links nothing
  (:func:`module_dependencies`).  The folders whose modules are stamped so
  are ``FOLLOWED``.

Every stamp is computed from file names relative to ``plant_models`` and
the files' contents, never from where the tree lies, so a copy of the tree
(a second clone, a container image) with the same sources keeps every cache
numba itself still accepts.

So a comment added to ``powertrain/law.py`` recompiles the components and the
three plants that link them, not the core and not the ``chain`` plant; an edit
of ``plants/dct.py`` recompiles the DCT alone (``bench/bench_cache_edit.py``).
"""

from __future__ import annotations

import ast
import functools
import hashlib
from pathlib import Path

STAMP_NAME = "core_sources.sha256"
# the per-module stamps of a folder whose modules depend on different packages: core_sources.<module>.sha256
MODULE_STAMP = "core_sources.{module}.sha256"
# the folders of plant_models (relative; "" the top level) whose modules get a stamp each, with what they link
FOLLOWED = ("plants", "fmi", "")
# stamps an older version kept in a followed folder, removed once (fmi/compiled.py stamped its own kernels)
OLD_STAMPS = (STAMP_NAME, "fmi_compiled.sha256")


@functools.lru_cache(maxsize=512)
def _parse_cached(path: str, mtime_ns: int, size: int) -> ast.Module:
    return ast.parse(Path(path).read_text(encoding="utf-8"))


def _parse(source: Path) -> ast.Module:
    """``source`` parsed, once per process and version of the file (the rules read each file several times)."""
    st = source.stat()
    return _parse_cached(str(source), st.st_mtime_ns, st.st_size)


def _import_nodes(tree: ast.Module):
    """The import statements of a module, those inside functions and classes included (statements only are
    walked: an import is never inside an expression)."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
            continue
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(node, field, None)
            if block:
                todo.extend(block)


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
    """What a module of ``plant_models`` (``package`` "" for the top level, or a folder of ``FOLLOWED``) imports
    from it, as "core", "powertrain", "plants.<module>", "fmi.<module>" or "<module>" (a top-level module), the
    imports inside functions included."""
    try:
        tree = _parse(source)
    except (OSError, SyntaxError, ValueError):
        return {"core", "powertrain"}  # unreadable: assume it links everything, so nothing stale survives
    found: set[str] = set()
    for node in _import_nodes(tree):
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
            elif parts[0] in FOLLOWED and len(parts) > 1:
                found.add(f"{parts[0]}.{parts[1]}")
            else:
                found.add(parts[0])
    return found


def links_components(models: Path) -> dict[tuple[str, str], bool]:
    """For each module of the ``FOLLOWED`` folders (as (package, name); "" the top level of ``plant_models``):
    whether it imports a component (``powertrain/``), directly or through other modules of those folders."""
    graph: dict[str, set[str]] = {}
    for package in FOLLOWED:
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


_COMPILED_DECORATORS = frozenset({"njit", "jit", "intrinsic", "generated_jit", "overload", "register_jitable",
                                  "cfunc", "vectorize", "guvectorize"})


def _module_file(models: Path, parts: list[str]) -> Path | None:
    """The file of the ``plant_models`` module named by ``parts`` (a package: its ``__init__.py``)."""
    if not parts:
        return models / "__init__.py"
    target = models.joinpath(*parts)
    if target.is_dir():
        return target / "__init__.py"
    file = target.with_suffix(".py")
    return file if file.exists() else None


def _import_base(node: ast.ImportFrom, source: Path, models: Path) -> list[str] | None:
    """The ``plant_models`` module an ``from ... import`` statement of ``source`` names, as its parts
    (None: a module outside ``plant_models``)."""
    base = (node.module or "").split(".") if node.module else []
    if node.level:
        here = list(source.parent.relative_to(models).parts)
        if node.level - 1 > len(here):
            return None
        base = here[: len(here) - (node.level - 1)] + base
    elif base[:1] == ["plant_models"]:
        base = base[1:]
    else:
        return None
    return [p for p in base if p]


def _module_names(source: Path, models: Path) -> tuple[set[str], dict[str, tuple[list[str] | None, str]]]:
    """What ``source`` offers a kernel: its compiled functions and upper-case constants (numba folds both
    into the kernel), and the names it imports (name -> (module parts or None, name there)).  Unreadable:
    every name counts as compiled."""
    try:
        tree = _parse(source)
    except (OSError, SyntaxError, ValueError):
        return {"*"}, {}
    defined: set[str] = set()
    imported: dict[str, tuple[list[str] | None, str]] = {}

    def compiling(node) -> bool:  # a decorator, or a call of one (``intrinsic(typer)``, ``njit(cache=True)(f)``)
        fn = node.func if isinstance(node, ast.Call) else node
        if isinstance(fn, ast.Call):
            return compiling(fn)
        return (fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")) in _COMPILED_DECORATORS

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(compiling(dec) for dec in node.decorator_list):
                defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            made = isinstance(node.value, ast.Call) and compiling(node.value)  # a compiled function made by a call
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Name) and (made or leaf.id.isupper()):
                        defined.add(leaf.id)
        elif isinstance(node, ast.ImportFrom):
            base = _import_base(node, source, models)
            for alias in node.names:
                imported[alias.asname or alias.name] = (base, alias.name)
    return defined, imported


def _name_source(models: Path, parts: list[str], name: str, cache: dict, depth: int = 0) -> set[Path]:
    """The files of ``plant_models`` (``core/`` and ``powertrain/`` left out) that define ``name`` of the
    module ``parts`` as a compiled function or a constant, following re-exports; a module imported by that
    name counts whole."""
    if parts[:1] in (["core"], ["powertrain"]) or depth > 8:
        return set()
    sub = _module_file(models, parts + [name])
    target = _module_file(models, parts)
    if sub is not None and sub != target:
        return {sub}
    if target is None:
        return set()
    if target not in cache:
        cache[target] = _module_names(target, models)
    defined, imported = cache[target]
    if name in defined or "*" in defined or name == "*":
        return {target}
    if name in imported:
        base, original = imported[name]
        return _name_source(models, base, original, cache, depth + 1) if base is not None else set()
    return set()


def _kernel_imports(source: Path, models: Path, cache: dict) -> set[Path]:
    """The files of ``plant_models`` whose compiled functions or constants ``source`` imports (a module
    imported whole counts as such), ``core/`` and ``powertrain/`` left out."""
    try:
        tree = _parse(source)
    except (OSError, SyntaxError, ValueError):
        return set()
    found: set[Path] = set()
    for node in _import_nodes(tree):
        if isinstance(node, ast.ImportFrom):
            base = _import_base(node, source, models)
            if base is None:
                continue
            for alias in node.names:
                found |= _name_source(models, base, alias.name, cache)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "plant_models" and parts[1:2] not in (["core"], ["powertrain"]):
                    target = _module_file(models, parts[1:])
                    if target is not None:
                        found.add(target)
    found.discard(source)
    return found


def module_dependencies(models: Path) -> dict[tuple[str, str], list[Path]]:
    """For each module of the ``FOLLOWED`` folders (as (package, name); "" the top level of ``plant_models``):
    the files of ``plant_models`` whose compiled functions or constants its kernels may contain, i.e. those it
    takes such names from, directly or through those files' own such imports; itself, ``core/`` and
    ``powertrain/`` left out (their own stamps cover them).  A module that imports only classes from a file
    (``Plant``, ``Param``) does not depend on it: an edit there recompiles nothing."""
    edges: dict[Path, set[Path]] = {}
    names: dict = {}  # file -> _module_names(file), parsed once

    def imports_of(path: Path) -> set[Path]:
        if path not in edges:
            edges[path] = _kernel_imports(path, models, names)
        return edges[path]

    deps: dict[tuple[str, str], list[Path]] = {}
    for package in FOLLOWED:
        for path in sorted((models / package).glob("*.py")):
            seen: set[Path] = set()
            todo = list(imports_of(path))
            while todo:
                dep = todo.pop()
                if dep in seen or dep == path:
                    continue
                seen.add(dep)
                todo.extend(imports_of(dep))
            deps[(package, path.stem)] = sorted(seen)
    return deps


def _dependencies_digest(paths: list[Path], models: Path) -> str:
    """SHA-256 over the names and contents of the files ``paths``, in the given order; each name relative to
    ``models`` (the ``plant_models`` folder), so a copy of the tree elsewhere (a second clone, a container)
    with the same sources keeps its caches."""
    digest = hashlib.sha256()
    for path in paths:
        try:
            name = path.relative_to(models).as_posix()
        except ValueError:  # not under the package: its full name is all there is
            name = str(path)
        digest.update(name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


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
    try:
        deps = module_dependencies(models)
    except OSError:
        return
    for package in FOLLOWED:
        if package and not (models / package).is_dir():
            continue
        folders = cache_folders(models / package if package else models)
        for (pkg, name), linked in links.items():
            if pkg != package or name == "__init__":
                continue
            try:
                stamp = (components_stamp if linked else core_stamp) + _dependencies_digest(deps.get((pkg, name), []), models)
            except OSError:
                continue
            for folder in folders:
                _drop(folder, MODULE_STAMP.format(module=name), stamp, prefix=f"{name}.")
        for folder in folders:  # the one stamp of a folder kept before the per-module ones
            for old in OLD_STAMPS:
                try:
                    (folder / old).unlink()
                except OSError:
                    pass


__all__ = ["drop_stale_caches", "sources_digest", "cache_folders", "links_components", "module_dependencies"]
