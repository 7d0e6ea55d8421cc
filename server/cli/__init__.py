"""The ``gearbox-hil`` command line.

Sub-commands register themselves in :data:`COMMANDS` (name -> (setup, run)),
so each part of the project owns its own sub-command module.  User mistakes
(bad files, bad arguments, a misspelled command or name) end with one clear
line on stderr and exit code 2, never a traceback; a misspelled choice
gets a "did you mean".
"""

from __future__ import annotations

import argparse
import logging
import re
import sys

from plant_models.config import ConfigError, did_you_mean

# name -> (module, help); each module provides add_arguments(parser) and run(args) -> int
COMMANDS = {
    "simulate": ("server.cli.simulate", "run a plant offline through a scenario and write trace/events (and plots)"),
    "serve": ("server.cli.serve", "run a plant in the real-time loop with its I/O adapters"),
    "describe": ("server.cli.describe", "print a plant's input and output signals"),
    "list": ("server.cli.listing", "list the plants, plant configs, scenarios and I/O configs, one line each"),
    "warmup": ("server.cli.warmup", "compile and cache the compiled code once (first start on a machine)"),
    "test": ("server.testbench", "run test files: a stimulus, faults, a controller, expectations with verdicts"),
    "campaign": ("server.campaign", "run many offline cases over varied parameters, locally or on a Dask cluster"),
    "fmu": ("server.cli.fmu", "write a plant config as an FMI 2.0 co-simulation FMU (runs in the target's Python)"),
    "xcp-a2l": ("server.cli.xcp_a2l", "write the A2L of a plant's XCP server (measurements, parameters, DAQ events)"),
    "keys": ("server.cli.keys", "write CURVE key pairs for the ZeroMQ sockets (a server's, a client's)"),
}

_INVALID_CHOICE = re.compile(r"invalid choice: '?([^'\s]*)'? \(choose from (.*)\)$")


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (``prog: error: problem (see prog --help)``), exit 2.

    argparse prints the whole usage before the problem; the usage is one
    ``--help`` away, and a single line is what scripts and people read.
    """

    def parse_known_args(self, args=None, namespace=None):
        ns, extras = super().parse_known_args(args, namespace)
        self._command = getattr(ns, "command", None)  # whose options a misspelled flag is compared with
        return ns, extras

    def error(self, message: str):
        m = _INVALID_CHOICE.search(message)
        if m:
            choices = [c.strip().strip("'\"") for c in m.group(2).split(",")]
            message += did_you_mean(m.group(1), choices)
        elif message.startswith("unrecognized arguments: "):
            message += self._flag_hint(message.split(": ", 1)[1].split())
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")

    def _flag_hint(self, extras: list[str]) -> str:
        """``; did you mean '--zmq-port'?`` for the first misspelled flag (``--zmq_port``, ``--plots``)."""
        options = list(self._option_string_actions)
        for action in self._actions:  # the chosen command's own options
            if isinstance(action, argparse._SubParsersAction):
                sub = action.choices.get(getattr(self, "_command", None))
                if sub is not None:
                    options += list(sub._option_string_actions)
        for word in extras:
            if word.startswith("--"):
                flag = word.split("=", 1)[0]
                hint = did_you_mean(flag.replace("_", "-"), options) if flag.replace("_", "-") not in options \
                    else f"; did you mean {flag.replace('_', '-')!r}?"
                if hint:
                    return hint
        return ""


def version() -> str:
    """The installed package's version (from its metadata; no package import)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("gearbox-hil")
    except PackageNotFoundError:
        return "(not installed: run ./demo.sh or pip install -e .)"


class _Version(argparse.Action):
    """``--version``: the version is looked up only when asked for."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"gearbox-hil {version()} (Python {sys.version.split()[0]})")
        parser.exit(0)


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = OneLineParser(prog="gearbox-hil", description="Hardware-in-the-loop plant server for "
                           "multi-clutch transmissions with exact static/Coulomb friction.")
    parser.add_argument("--version", action=_Version, help="print the version and exit")
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


class _CommandLineFormat(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"gearbox-hil: {record.levelname.lower()}: {record.getMessage()}"


def _log_warnings() -> None:
    """Warnings of the library (e.g. inputs a scenario leaves out) as ``gearbox-hil: warning: ...`` lines.

    ``serve`` replaces this with its own log format and level.
    """
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_CommandLineFormat())
        root.addHandler(handler)
        root.setLevel(logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    _log_warnings()
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
