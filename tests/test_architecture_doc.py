"""docs/architecture.md names only modules that exist.

Each table of the page lists the modules of one package (the section's
heading names it: "Ground floor: `plant_models/`", "`server/realtime/`", ...).
Every name in a table's first column is a file or a folder of that package,
and every ``name.py`` a row about a folder mentions in its job column is a
file of that folder; so a module renamed, moved or removed leaves no stale
row behind.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
NAME = re.compile(r"`([A-Za-z0-9_./]+)`")


def tables() -> list[tuple[str, int, list[str]]]:
    """(package folder from the section heading, line number, cells) for every table row of the page."""
    rows, package = [], None
    for number, line in enumerate(DOC.read_text().splitlines(), start=1):
        if line.startswith("#"):
            named = [n for n in NAME.findall(line) if n.endswith("/")]
            package = named[0] if named else ("server/" if "other packages" in line else package)
        elif line.startswith("| ") and not line.startswith("| ---") and package:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells[0] in ("module", "package"):
                continue
            rows.append((package, number, cells))
    return rows


def test_the_page_has_tables_for_every_floor():
    packages = {package for package, _, _ in tables()}
    assert {"plant_models/", "plant_models/core/", "io_adapters/", "server/realtime/", "server/offline/",
            "server/cli/", "server/"} <= packages


def test_every_module_the_tables_name_exists():
    missing = []
    for package, number, cells in tables():
        base = ROOT / package
        names = NAME.findall(cells[0])
        for name in names:
            if not (base / name).exists():
                missing.append(f"architecture.md:{number}: {package}{name}")
        folders = [n for n in names if n.endswith("/")]
        if len(folders) == 1 and len(cells) > 1:  # a row about one folder: the files its job names are in it
            for name in NAME.findall(cells[1]):
                if name.endswith(".py") and "/" not in name and not (base / folders[0] / name).exists():
                    missing.append(f"architecture.md:{number}: {package}{folders[0]}{name}")
    assert missing == []


def test_every_module_and_package_is_named():
    """The other way round: every module and sub-package of a package the page has a table for is named in a
    first column there (or has a section of its own), so a package added without a row is caught (the XCP
    adapter, io_adapters/xcp/, had none)."""
    named: dict[str, set[str]] = {}
    for package, _, cells in tables():
        named.setdefault(package, set()).update(NAME.findall(cells[0]))
    unnamed = []
    for package, names in named.items():
        for path in sorted((ROOT / package).iterdir()):
            if path.is_dir() and (path / "__init__.py").exists():
                key = path.name + "/"
                if key not in names and f"{package}{key}" not in named and not any(n.startswith(key) for n in names):
                    unnamed.append(f"{package}{key}")
            elif path.suffix == ".py" and path.name != "__init__.py" and path.name not in names:
                unnamed.append(f"{package}{path.name}")
    assert unnamed == []
