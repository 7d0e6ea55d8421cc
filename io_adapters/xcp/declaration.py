"""What the XCP adapter declares to the server: ``--xcp-port PORT`` and its ``[xcp]`` table; it injects no faults.

Imports no socket code (``serve --help`` stays cheap); see :mod:`io_adapters.declaration`.
"""

from __future__ import annotations

from typing import Any

from ..declaration import AdapterDeclaration, CliOption, port_arg

# XCP on Ethernet's usual port is 5555, which the ZeroMQ control socket takes by default (TCP): the next free one
DEFAULT_PORT = 5558


class XcpDeclaration(AdapterDeclaration):
    type_name = "xcp"
    cli_options = (
        CliOption("--xcp-port", "PORT", "serve XCP on Ethernet (docs/xcp.md), UDP and TCP on 127.0.0.1:PORT (the "
                  f"[xcp] table's default is {DEFAULT_PORT}: XCP's usual 5555 is the ZeroMQ control port; 0: a free "
                  "port, named in the start-up lines and the ready file); another host goes in an [xcp] table",
                  port_arg),
    )
    cli_adds_adapter = True
    config_table = True

    def apply_cli(self, options: dict, given: dict[str, Any], source: str, key: str) -> dict:
        port = given.get("--xcp-port")
        return options if port is None else dict(options, port=port)


DECLARATION = XcpDeclaration()

__all__ = ["DECLARATION", "XcpDeclaration", "DEFAULT_PORT"]
