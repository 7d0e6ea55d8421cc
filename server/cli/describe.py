"""``gearbox-hil describe CONFIG``: the plant's signals with units, ranges and defaults, where those units
hold (ZeroMQ: as listed; CAN: the DBC's, e.g. rpm), and every gear with its engaged elements and its ratio
(input speed over output speed) for the plants with gears (Powershift, DCT, transmissions described as
data, which also show their independent speeds).

Read from the config's parameters alone: the plant is not built and nothing compiles.
"""

from __future__ import annotations

import argparse
import json

from plant_models.config import repo_root
from plant_models.registry import describe_config


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="plant config file (or the name of one in configs/)")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")


def run(args: argparse.Namespace) -> int:
    d = describe_config(args.config)
    channels = device_channels(d)
    if channels is not None:
        d["device_channels_source"], d["device_channels"] = channels
    if args.json:
        print(json.dumps(d, indent=2))
        return 0
    print(f"{d['kind']}: {d['description']}\n  config: {d['source']}")
    for title, key in (("inputs", "inputs"), ("outputs", "outputs")):
        print(f"\n{title}:")
        for s in d[key]:
            print(f"  {s['name']:<16} {s['unit']:<7} [{s['min']:g}, {s['max']:g}]  default {s['default']:g}  {s['doc']}")
    print("\n" + units_note(d["kind"]))
    for f in d.get("fmus", ()):  # FMUs in the loop (docs/fmi.md): read from their model descriptions
        print_fmu(f)
    if d.get("independent_speeds"):  # a transmission described as data: its reduction and shift table
        print(f"\nindependent speeds: {', '.join(d['independent_speeds'])}")
    if d.get("gears"):
        print(f"\ngears (engaged elements; {RATIO})")
        for g in d["gears"]:
            print(f"  {g['name']:<4} {', '.join(g['engaged']):<24} {g['ratio']:.4f}")
    if d.get("components"):  # the powertrain around a described transmission (docs/powertrain.md)
        print("\ncomponents:")
        for name, comp in d["components"].items():
            ports = "; ".join(f"{k} {', '.join(comp[k])}" for k in ("inputs", "outputs", "elements") if k in comp)
            rest = ", ".join(f"{k} {v}" for k, v in comp.items() if k not in ("inputs", "outputs", "elements"))
            print(f"  {name:<17} {ports}\n  {'':<17} {rest}")
    if channels is not None:
        print(f"\ndevice channels ({channels[0]}; the device adapter, docs/electrical.md)")
        for c in channels[1]:
            print(f"  {c['name']:<12} {c['kind']:<15} {c['port'] or '-':<10} {c['detail']}")
    return 0


def device_channels(d: dict) -> tuple[str, list[dict]] | None:
    """(file, channels) of the first channel map of ``configs/`` whose ports are all the plant's: the plant kind's
    ``io_device_<kind>.toml`` first, then the others by name (a described transmission is kind ``transmission``:
    the 8HP with valve maps finds ``io_device_zf8hp.toml``); a Powershift with a valve map takes solenoid
    currents, the plain one pressures and has none.  None when no map fits."""
    from io_adapters.devices.channel_map import load_channel_map

    folder = repo_root() / "configs"
    own = folder / f"io_device_{d['kind']}.toml"
    ins_known, outs_known = {s["name"] for s in d["inputs"]}, {s["name"] for s in d["outputs"]}
    for path in ([own] if own.is_file() else []) + sorted(p for p in folder.glob("io_device_*.toml") if p != own):
        cmap = load_channel_map(str(path))
        ins, outs = cmap.ports()
        if ins <= ins_known and outs <= outs_known:
            return f"configs/{path.name}", cmap.describe()
    return None


RATIO = "ratio = input speed / output speed"


def print_fmu(f: dict) -> None:
    """One ``[[fmu]]`` table: what it is, where it runs, its connections and its parameters."""
    where = "in the server's process" if f["process"] == "server" else "in a process of its own"
    print(f"\nfmu {f['name']}: FMI {f['fmi']} {f['kind']}, {where} ({f['file']})")
    for title, key in (("drives", "to_plant"), ("reads", "from_plant")):
        if f[key]:
            print(f"  {title}: " + ", ".join(f"{f['name']}.{v} -> {p}" if key == "to_plant" else
                                              f"{p} -> {f['name']}.{v}" for v, p in f[key].items()))
    if f["safe"]:
        print("  after a fault: " + ", ".join(f"{f['name']}.{v} = {x:g}" for v, x in f["safe"].items()))
    if f["parameters"]:
        print("  parameters (tunable: set_params and campaigns; fixed: start values and campaigns):")
    for r in f["parameters"]:
        kind = "tunable" if r["tunable"] else "fixed"
        print(f"  {r['name']:<20} {r['unit']:<5} [{r['min']:g}, {r['max']:g}]  value {r['value']:g}  {kind:<7} "
              f"{r['doc']}")


def units_note(kind: str) -> str:
    """Where the units above hold, and what CAN carries instead."""
    text = "units: as listed over ZeroMQ, in scenarios, traces and recordings (speeds in rad/s)"
    if (repo_root() / "configs" / f"io_can_{kind}.toml").is_file():
        text += (f"; over CAN as the DBC states them, converted by the adapter (speeds in rpm, "
                 f"configs/io_can_{kind}.toml)")
    return text
