"""Docstrings cite modules that exist: every ``:mod:`` reference in the project's packages imports."""

from __future__ import annotations

import importlib.util
import re

from plant_models.config import repo_root

ROOT = repo_root()
PACKAGES = ("plant_models", "server", "io_adapters")


def _module_of(path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_every_mod_reference_names_a_module_that_exists():
    missing = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            here = _module_of(path)
            package = here if path.name == "__init__.py" else here.rpartition(".")[0]
            for m in re.finditer(r":mod:`~?(\.*[A-Za-z_][\w.]*)`", path.read_text(encoding="utf-8")):
                name = m.group(1)
                full = importlib.util.resolve_name(name, package) if name.startswith(".") else name
                if importlib.util.find_spec(full) is None:
                    missing.append(f"{path.relative_to(ROOT)}: {name}")
    assert missing == []
