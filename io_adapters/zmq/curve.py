"""CURVE authentication of the ZeroMQ sockets (docs/protocol.md, section 8).

ZeroMQ's CURVE (elliptic-curve encryption and authentication, RFC 26
"CurveZMQ") with pyzmq's ZAP handler (:mod:`zmq.auth`): the server holds a
key pair, every client its own; the server admits a client only if the
client's public key is in the allow-list, a folder of public key files.
Keys are the Z85 certificate files of :func:`zmq.auth.create_certificates`
(``<name>.key`` public, ``<name>.key_secret`` public and secret), which
``gearbox-hil keys`` writes.

Only the connection handshake goes through the ZAP handler (its own thread);
an admitted connection costs the loop the encryption of its messages and
nothing else.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator

from plant_models.config import ConfigReader, repo_root

log = logging.getLogger("gearbox_hil.zmq")

SECRET_SUFFIX = ".key_secret"
PUBLIC_SUFFIX = ".key"


@dataclass(frozen=True)
class CurveServer:
    """The server's key pair and its allow-list folder."""

    public: bytes
    secret: bytes
    clients_dir: str
    n_clients: int


def _key_path(cfg: ConfigReader, key: str) -> Path:
    """An option's path: as given if it exists, else relative to the project folder."""
    p = Path(cfg.string(key))
    if not p.exists() and not p.is_absolute() and (repo_root() / p).exists():
        p = repo_root() / p
    return p


def load_secret(path: Path) -> tuple[bytes, bytes]:
    """(public, secret) from a ``.key_secret`` certificate file; ValueError with the reason."""
    try:
        public, secret = zmq.auth.load_certificate(str(path))
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the key file: {exc}") from None
    if not secret:
        raise ValueError(f"no secret key in it (give the {SECRET_SUFFIX} file of `gearbox-hil keys`, not the "
                         f"public {PUBLIC_SUFFIX})")
    return public, secret


def server_config(cfg: ConfigReader) -> CurveServer | None:
    """The CURVE options ``curve_secret_key`` and ``curve_clients`` of a zmq adapter, checked; None if unset.

    Raises
    ------
    ConfigError
        A key file that cannot be read or holds no secret key, or an
        allow-list folder that does not exist or holds no public key.
    """
    if not cfg.has("curve_secret_key"):
        if cfg.has("curve_clients"):
            raise cfg.error("curve_clients", "needs curve_secret_key (the server's key pair) as well")
        return None
    if not cfg.has("curve_clients"):
        raise cfg.error("curve_secret_key", "needs curve_clients as well (a folder of the allowed clients' "
                        f"public {PUBLIC_SUFFIX} files)")
    kp = _key_path(cfg, "curve_secret_key")
    try:
        public, secret = load_secret(kp)
    except ValueError as exc:
        raise cfg.error("curve_secret_key", f"{kp}: {exc}") from None
    clients = _key_path(cfg, "curve_clients")
    if not clients.is_dir():
        raise cfg.error("curve_clients", f"{clients} is not a folder")
    n = sum(1 for f in os.listdir(clients) if f.endswith(PUBLIC_SUFFIX))
    if n == 0:
        raise cfg.error("curve_clients", f"{clients} holds no public key file (*{PUBLIC_SUFFIX}); no client could "
                        "connect")
    return CurveServer(public, secret, str(clients), n)


def start_authenticator(ctx: zmq.Context, cs: CurveServer) -> ThreadAuthenticator:
    """Start the ZAP handler of ``ctx`` that admits the public keys in ``cs.clients_dir``."""
    auth = ThreadAuthenticator(ctx, log=logging.getLogger("gearbox_hil.zmq.auth"))
    auth.start()
    auth.configure_curve(domain="*", location=cs.clients_dir)
    log.info("CURVE authentication on: %d allowed client key(s) in %s", cs.n_clients, cs.clients_dir)
    return auth


def make_server(sock: zmq.Socket, cs: CurveServer) -> None:
    """Make ``sock`` a CURVE server (before it binds)."""
    sock.curve_secretkey = cs.secret
    sock.curve_publickey = cs.public
    sock.curve_server = True


def make_client(sock: zmq.Socket, client_secret_file: str | Path, server_public: bytes | str | Path) -> None:
    """Make ``sock`` a CURVE client (before it connects).

    ``server_public`` is the server's public key (40 Z85 characters) or a
    file holding it (the server's ``.key`` or ``.key_secret`` file).
    """
    public, secret = load_secret(Path(client_secret_file))
    sock.curve_secretkey = secret
    sock.curve_publickey = public
    sock.curve_serverkey = server_public_key(server_public)


def server_public_key(server_public: bytes | str | Path) -> bytes:
    """The server's public key from its Z85 text or a certificate file holding it."""
    if isinstance(server_public, bytes) and len(server_public) == 40:
        return server_public
    if isinstance(server_public, str) and len(server_public) == 40 and not Path(server_public).exists():
        return server_public.encode("ascii")
    try:
        public, _ = zmq.auth.load_certificate(str(server_public))
    except (OSError, ValueError) as exc:
        raise ValueError(f"server key {server_public}: cannot read it: {exc}") from None
    return public


def generate(folder: str | Path, name: str) -> tuple[Path, Path]:
    """Write a new key pair ``<folder>/<name>.key`` and ``<name>.key_secret`` (owner-only); returns both paths.

    Raises
    ------
    FileExistsError
        Either file exists (keys are never overwritten).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    pub, sec = folder / (name + PUBLIC_SUFFIX), folder / (name + SECRET_SUFFIX)
    for p in (pub, sec):
        if p.exists():
            raise FileExistsError(f"{p} exists; keys are never overwritten (remove it first)")
    old = os.umask(0o077)  # the secret file is never readable by others, not even for a moment
    try:
        public_file, secret_file = zmq.auth.create_certificates(str(folder), name)
    finally:
        os.umask(old)
    os.chmod(public_file, 0o644)
    return Path(public_file), Path(secret_file)


__all__ = ["CurveServer", "server_config", "start_authenticator", "make_server", "make_client", "generate",
           "load_secret", "server_public_key"]
