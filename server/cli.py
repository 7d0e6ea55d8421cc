"""The ``gearbox-hil`` command line.

Sub-commands register themselves in :data:`COMMANDS` (name -> (setup, run)),
so each part of the project owns its own sub-command module.  User mistakes
(bad files, bad arguments) end with one clear line on stderr and exit code 2,
never a traceback.
"""

from __future__ import annotations

import argparse
import sys

from plant_models.config import ConfigError

# name -> (module, help); each module provides add_arguments(parser) and run(args) -> int
COMMANDS = {
    "simulate": ("server.simulate", "run a plant offline through a scenario and write trace/events (and plots)"),
    "serve": ("server.serve", "run a plant in the real-time loop with its I/O adapters"),
    "describe": ("server.describe", "print a plant's input and output signals"),
    "warmup": ("server.warmup", "compile and cache the compiled code once (first start on a machine)"),
    "campaign": ("server.campaign", "run many offline cases over varied parameters, locally or on a Dask cluster"),
}


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = argparse.ArgumentParser(prog="gearbox-hil", description="Hardware-in-the-loop plant server for "
                                     "multi-clutch transmissions with exact static/Coulomb friction.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (modname, helptext) in COMMANDS.items():
        try:
            mod = importlib.import_module(modname)
        except ModuleNotFoundError as exc:
            if exc.name == modname:
                continue
            raise
        p = sub.add_parser(name, help=helptext, description=helptext)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except ConfigError as exc:
        print(f"gearbox-hil: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # output piped into e.g. `head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
