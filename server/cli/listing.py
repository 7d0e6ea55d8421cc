"""``gearbox-hil list``: plants, plant configs, scenarios, I/O configs, CAN message sets, campaigns; a line each.

Read from the files alone (their first comment sentence or their
``description`` key): nothing is built and nothing compiles.  The names
printed are the ones the other commands accept (``gearbox-hil simulate
powershift --scenario powershift_swaps``, ``serve --io io_can``).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

from plant_models.config import ConfigError, load_plant_toml, load_toml, repo_root

# top-level keys that make a TOML file in configs/ an I/O config (see docs/server.md, "The I/O config")
IO_KEYS = frozenset(("loop", "realtime", "watchdog", "initial_inputs", "adapters"))
CHANNEL_MAP_KEYS = frozenset(("pulse", "solenoid", "ntc", "range", "supply"))  # io_adapters/devices/channel_map.py


def first_sentence(path: Path) -> str:
    """The first sentence of the comment block a file starts with ("" if it has none)."""
    lines = []
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.startswith("#"):
                    break
                text = line.lstrip("#").strip()
                if not text:
                    if lines:
                        break
                    continue
                lines.append(text)
    except OSError:
        return ""
    text = " ".join(lines)
    # a full stop or colon followed by a space (or the end) ends the sentence; "e.g." and initials do not
    m = re.search(r"(?<!\be\.g)(?<!\bi\.e)(?<![A-Z])[.:](\s|$)", text)
    return text[: m.start()].strip() if m else text.strip()


def catalog(root: Path | None = None) -> dict[str, list[dict]]:
    """Everything ``list`` shows: group -> entries (``name``, ``text`` and group-specific keys)."""
    from plant_models.registry import plant_class, plant_kinds

    root = root or repo_root()
    out: dict[str, list[dict]] = {"plants": [], "configs": [], "scenarios": [], "io_configs": [],
                                  "message_sets": [], "channel_maps": [], "campaigns": []}
    for kind in plant_kinds():
        out["plants"].append({"name": kind, "text": plant_class(kind)[0].description})
    for path in sorted((root / "configs").glob("*.toml")):
        try:
            data = load_toml(path)
        except ConfigError as exc:
            out["configs"].append({"name": path.stem, "text": f"(unreadable: {exc.problem})", "kind": "?"})
            continue
        if "plant" in data or "extends" in data:
            try:
                kind = load_plant_toml(path).get("plant", "?")
            except ConfigError:
                kind = "?"
            out["configs"].append({"name": path.stem, "kind": str(kind), "text": first_sentence(path)})
        elif "dbc" in data:
            out["message_sets"].append({"name": path.stem, "text": first_sentence(path), "dbc": str(data["dbc"])})
        elif CHANNEL_MAP_KEYS & set(data):
            out["channel_maps"].append({"name": path.stem, "text": first_sentence(path)})
        elif IO_KEYS & set(data):
            out["io_configs"].append({"name": path.stem, "text": first_sentence(path)})
    for path in sorted((root / "scenarios").glob("*.toml")):
        try:
            data = load_toml(path)
        except ConfigError as exc:
            out["scenarios"].append({"name": path.stem, "text": f"(unreadable: {exc.problem})"})
            continue
        text = data.get("description") if isinstance(data.get("description"), str) else first_sentence(path)
        out["scenarios"].append({"name": path.stem, "text": text, "duration_s": data.get("duration_s")})
    for path in sorted((root / "campaigns").glob("*.toml")):
        try:
            data = load_toml(path)
        except ConfigError as exc:
            out["campaigns"].append({"name": path.stem, "text": f"(unreadable: {exc.problem})"})
            continue
        text = data.get("description") if isinstance(data.get("description"), str) else first_sentence(path)
        out["campaigns"].append({"name": path.stem, "text": text})
    return out


TITLES = {
    "plants": "plants (the `plant` key of a config)",
    "configs": "plant configs (simulate / serve / describe CONFIG)",
    "scenarios": "scenarios (simulate --scenario NAME; load_scenario)",
    "io_configs": "I/O configs (serve --io NAME)",
    "message_sets": "CAN message sets (message_set of a can adapter; default io_can_<plant>)",
    "channel_maps": "electrical channel maps (channels of a device adapter; default io_device_<plant>)",
    "campaigns": "campaigns (campaign NAME --out DIR)",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 3, 0)].rstrip() + "..."


def run(args: argparse.Namespace) -> int:
    cat = catalog()
    if args.json:
        print(json.dumps(cat, indent=2))
        return 0
    width = max(shutil.get_terminal_size((120, 24)).columns, 60)
    blocks = []
    for group, entries in cat.items():
        if not entries:
            continue
        name_w = max(len(e["name"]) for e in entries)
        lines = [TITLES[group] + ":"]
        for e in entries:
            extra = ""
            if group == "configs":
                extra = f"[{e['kind']}] "
            elif group == "scenarios" and isinstance(e.get("duration_s"), (int, float)):
                extra = f"[{e['duration_s']:g} s] "
            head = f"  {e['name']:<{name_w}}  "
            lines.append(head + _fit(extra + e["text"], width - len(head) - 1))
        blocks.append("\n".join(lines))
    print("\n\n".join(blocks))
    return 0
