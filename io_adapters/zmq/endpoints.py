"""Where the ZeroMQ adapter listens: its endpoint options, the loopback check, binding, and the names it reports.

The three endpoint options (``state_endpoint``, ``command_endpoint``,
``control_endpoint``; defaults in :data:`~io_adapters.zmq.declaration.DEFAULTS`)
are read and checked here; an endpoint beyond loopback needs CURVE or
``insecure_remote = true`` (docs/protocol.md, section 8).  A bound socket is
reported under its short name (``state``, ``command``, ``control``) with the
endpoint ZeroMQ actually bound (``tcp://127.0.0.1:0`` becomes the free port
it picked): in the adapter's status, in ``gearbox-hil serve``'s ready file
and in the reply to a ``describe`` request.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

import zmq

from plant_models.config import ConfigReader

from ..base import AdapterError
from . import curve
from .declaration import DEFAULTS


def is_loopback(endpoint: str) -> bool:
    """The endpoint is reachable from this host only (``tcp://127.x``, ``[::1]``, ``localhost``, ``ipc://``)."""
    u = urlsplit(endpoint)
    if u.scheme in ("ipc", "inproc"):
        return True
    host = u.netloc.rsplit(":", 1)[0].strip("[]") if u.netloc else ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # "*", an interface or a host name: not provably loopback
        return False


def endpoint_options(cfg: ConfigReader) -> dict[str, str]:
    """The three endpoint options of the adapter's table (option -> endpoint); ConfigError for one that is none."""
    out = {k: cfg.string(k, v) for k, v in DEFAULTS.items()}
    for k, v in out.items():
        if "://" not in v:
            raise cfg.error(k, f"must be a ZeroMQ endpoint such as tcp://127.0.0.1:5556, got {v!r}")
    return out


def remote_options(cfg: ConfigReader, endpoints: dict[str, str], authenticated: bool, insecure_remote: bool
                   ) -> list[str]:
    """The endpoint options that listen beyond loopback; ConfigError if there are any without authentication
    (``authenticated``: CURVE is configured) and without ``insecure_remote``."""
    remote = [k for k, v in endpoints.items() if not is_loopback(v)]
    if remote and not authenticated and not insecure_remote:
        k = remote[0]
        raise cfg.error(k, f"{endpoints[k]} listens beyond loopback without authentication; set "
                        "curve_secret_key and curve_clients (keys from `gearbox-hil keys`), or "
                        "insecure_remote = true on a network you trust")
    return remote


def short_name(option: str) -> str:
    """The name a bound endpoint is reported under: ``state_endpoint`` -> ``state``."""
    return option.replace("_endpoint", "")


def bind(zctx: zmq.Context, kind: int, option: str, endpoint: str, curve_config, options: dict):
    """A socket of ``kind`` with LINGER 0, CURVE (if ``curve_config``) and ``options`` set, bound to ``endpoint``;
    (socket, the endpoint bound).  ``AdapterError`` naming ``option`` when it cannot bind."""
    s = zctx.socket(kind)
    s.setsockopt(zmq.LINGER, 0)
    if curve_config is not None:
        curve.make_server(s, curve_config)
    for opt, value in options.items():
        s.setsockopt(opt, value)
    try:
        s.bind(endpoint)
    except zmq.ZMQError as exc:
        s.close(0)
        raise AdapterError(f"{option}: cannot bind {endpoint}: {exc.strerror}") from None
    return s, s.getsockopt_string(zmq.LAST_ENDPOINT)


def describe_with_endpoints(reply: dict, endpoints: dict[str, str]) -> dict:
    """A ``describe`` reply whose ``plant.endpoints`` name this adapter's sockets: the un-named state, command and
    control are the answering socket's own (a server may run several ZeroMQ adapters)."""
    if isinstance(reply.get("plant", {}).get("endpoints"), dict):
        reply["plant"]["endpoints"] = {**reply["plant"]["endpoints"], **endpoints}
    return reply


__all__ = ["bind", "describe_with_endpoints", "endpoint_options", "is_loopback", "remote_options", "short_name"]
