"""What the ZeroMQ adapter declares to the server: ``--zmq-port`` and the endpoint options, its two fault kinds.

Imports no ZeroMQ (``serve --help`` and fault checks stay cheap); see
:mod:`io_adapters.declaration`.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from ..declaration import AdapterDeclaration, CliOption, TransportFault, fault_error, fault_integer, fault_keys

# where the adapter listens by default (the options control_endpoint, state_endpoint, command_endpoint)
DEFAULTS = {
    "state_endpoint": "tcp://127.0.0.1:5556",
    "command_endpoint": "tcp://127.0.0.1:5557",
    "control_endpoint": "tcp://127.0.0.1:5555",
}
# `--zmq-port N`: the endpoints on N, N+1 and N+2, in the order of the defaults (5555, 5556, 5557)
PORT_OFFSETS = {"control_endpoint": 0, "state_endpoint": 1, "command_endpoint": 2}
ENDPOINT_OPTIONS = {"control_endpoint": "--zmq-control", "state_endpoint": "--zmq-state",
                    "command_endpoint": "--zmq-command"}
FAULT_KINDS = ("drop_commands", "delay_commands")


def _port_arg(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= v <= 65533:  # the base port and the two after it
        raise argparse.ArgumentTypeError(f"must be 0 (free ports) or a port 1..65533, got {text}")
    return v


def _endpoint_arg(text: str) -> str:
    if "://" not in text:
        raise argparse.ArgumentTypeError(f"must be a ZeroMQ endpoint such as tcp://127.0.0.1:5555, got {text!r}")
    return text


@dataclass(frozen=True)
class ZmqFault(TransportFault):
    """``drop_commands``, or ``delay_commands`` by ``cycles`` ticks."""

    cycles: int = 1


def _with_port(endpoint: str, port: int, option: str, key: str) -> str:
    """``tcp://host:port`` with another port (0: any free port)."""
    from plant_models.config import ConfigError

    if not endpoint.startswith("tcp://") or ":" not in endpoint[len("tcp://"):]:
        raise ConfigError(option, "", f"the zmq adapter's {key} {endpoint!r} is not a tcp://host:port endpoint; "
                          f"set it with {ENDPOINT_OPTIONS[key]}")
    host = endpoint[len("tcp://"):].rsplit(":", 1)[0]
    return f"tcp://{host}:{port}"


class ZmqDeclaration(AdapterDeclaration):
    type_name = "zmq"
    cli_options = (
        CliOption("--zmq-port", "PORT", "ZeroMQ control on PORT, state on PORT+1, commands on PORT+2 (the defaults "
                  "are 5555-5557); 0: each on a free port, named in the start-up lines and the ready file", _port_arg),
        CliOption("--zmq-control", "ENDPOINT", "the ZeroMQ control endpoint, e.g. tcp://127.0.0.1:6000 (port 0 or *: "
                  "a free port)", _endpoint_arg),
        CliOption("--zmq-state", "ENDPOINT", "the ZeroMQ state endpoint", _endpoint_arg),
        CliOption("--zmq-command", "ENDPOINT", "the ZeroMQ command endpoint", _endpoint_arg),
    )
    fault_kinds = FAULT_KINDS

    def apply_cli(self, options: dict, given: dict[str, Any], source: str, key: str) -> dict:
        """``--zmq-port`` moves the three endpoints (each on the host its endpoint names), then the endpoint options."""
        from plant_models.config import ConfigError

        options = dict(options)
        port = given.get("--zmq-port")
        option = "--zmq-port" if port is not None else next(iter(given))
        if port is not None:
            for k, offset in PORT_OFFSETS.items():
                endpoint = options.get(k, DEFAULTS[k])
                if not isinstance(endpoint, str):
                    raise ConfigError(source, f"{key}.{k}", "must be a string")
                options[k] = _with_port(endpoint, port + offset if port else 0, option, k)
        for k, flag in ENDPOINT_OPTIONS.items():
            if given.get(flag) is not None:
                options[k] = given[flag]
        return options

    def parse_fault(self, d: dict, where: str) -> ZmqFault:
        fault_keys(d, ("cycles",), where)
        cycles = fault_integer(d, "cycles", where, 1, 1, 10000)
        if "cycles" in d and d["kind"] != "delay_commands":
            raise fault_error(where, "'cycles' is for delay_commands faults")
        return ZmqFault("zmq", d["kind"], "commands", cycles=cycles)


DECLARATION = ZmqDeclaration()

__all__ = ["DECLARATION", "ZmqDeclaration", "ZmqFault", "DEFAULTS", "FAULT_KINDS"]
