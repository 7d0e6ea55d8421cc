"""``gearbox-hil keys``: CURVE key pairs for the ZeroMQ sockets (docs/protocol.md, section 8).

``gearbox-hil keys server`` writes ``keys/server.key`` (public) and
``keys/server.key_secret`` (public and secret, owner-only); ``gearbox-hil
keys bench1 --allow`` writes a client's pair and copies its public key into
the server's allow-list folder (``keys/clients/``).  Existing key files are
never overwritten.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from plant_models.config import ConfigError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="+", help="one key pair per name, e.g. `server` or `bench1` (letters, digits, - _)")
    p.add_argument("--dir", default="keys", help="folder for the key files (default: keys)")
    p.add_argument("--allow", action="store_true",
                   help="also copy each public key into DIR/clients/, the folder a server config names as "
                        "curve_clients")


def run(args: argparse.Namespace) -> int:
    from io_adapters.zmq.curve import generate

    folder = Path(args.dir)
    for name in args.name:
        if not name or not all(c.isalnum() or c in "-_" for c in name):
            raise ConfigError("keys", "name", f"{name!r}: use letters, digits, '-' and '_' only")
    for name in args.name:
        try:
            public, secret = generate(folder, name)
        except FileExistsError as exc:
            raise ConfigError("keys", "name", str(exc)) from None
        except OSError as exc:
            raise ConfigError(str(folder), "", f"cannot write keys ({exc.strerror})") from None
        line = f"{name}: public {public}, secret {secret} (keep it private)"
        if args.allow:
            allowed = folder / "clients" / public.name
            if allowed.exists():
                raise ConfigError("keys", "--allow", f"{allowed} exists")
            allowed.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(public, allowed)
            line += f", allowed in {allowed.parent}"
        print(line)
    return 0
