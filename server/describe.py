"""``gearbox-hil describe CONFIG``: the plant's signals with units, ranges and defaults.

Read from the config's parameters alone: the plant is not built and nothing compiles.
"""

from __future__ import annotations

import argparse
import json

from plant_models.registry import describe_config


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="plant config file (or the name of one in configs/)")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")


def run(args: argparse.Namespace) -> int:
    d = describe_config(args.config)
    if args.json:
        print(json.dumps(d, indent=2))
        return 0
    print(f"{d['kind']}: {d['description']}\n  config: {d['source']}")
    for title, key in (("inputs", "inputs"), ("outputs", "outputs")):
        print(f"\n{title}:")
        for s in d[key]:
            print(f"  {s['name']:<16} {s['unit']:<7} [{s['min']:g}, {s['max']:g}]  default {s['default']:g}  {s['doc']}")
    return 0
