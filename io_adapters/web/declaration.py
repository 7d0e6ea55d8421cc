"""What the web workspace declares to the server: ``--web [PORT]`` and its ``[web]`` table; it injects no faults.

Imports no aiohttp (``serve --help`` stays cheap); see :mod:`io_adapters.declaration`.
"""

from __future__ import annotations

from typing import Any

from ..declaration import AdapterDeclaration, CliOption, port_arg

DEFAULT_PORT = 8765
DEFAULT = -1  # `--web` without a port: the adapter's own (its table's `port`, else DEFAULT_PORT)


class WebDeclaration(AdapterDeclaration):
    type_name = "web"
    cli_options = (
        CliOption("--web", "PORT", f"serve the web workspace (docs/workspace.md) on 127.0.0.1:PORT (default "
                  f"{DEFAULT_PORT}; 0: a free port), named in the start-up lines and the ready file; another host "
                  "and the access token go in a [web] table", port_arg, optional_value=True, const=DEFAULT),
    )
    cli_adds_adapter = True
    config_table = True
    path_options = ("token_file", "layouts", "parameter_sets")

    def apply_cli(self, options: dict, given: dict[str, Any], source: str, key: str) -> dict:
        port = given.get("--web", DEFAULT)
        return options if port == DEFAULT else dict(options, port=port)


DECLARATION = WebDeclaration()

__all__ = ["DECLARATION", "WebDeclaration", "DEFAULT_PORT"]
