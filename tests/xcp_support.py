"""Shared pieces of the XCP tests: a lockstep server with ZeroMQ and XCP on free ports, a pyxcp master, a raw client."""

from __future__ import annotations

import logging
import socket
import struct
from contextlib import contextmanager
from pathlib import Path

from server.testbench.local_server import FREE_PORTS, LocalServer, write_io

XCP_TABLE = '\n[[adapters]]\ntype = "xcp"\nname = "xcp"\nport = 0\n'


def xcp_server(tmp: Path, plant: str = "powershift", mode: str = "lockstep") -> LocalServer:
    """``gearbox-hil serve`` with the ZeroMQ adapter and the XCP adapter on free loopback ports."""
    io = write_io(Path(tmp) / f"io_xcp_{mode}.toml", "", "", FREE_PORTS + XCP_TABLE)
    return LocalServer(tmp, plant, io, mode)


def xcp_port(srv: LocalServer) -> int:
    return int(srv.endpoints["xcp.tcp"].rsplit(":", 1)[1])


@contextmanager
def pyxcp_master(srv: LocalServer, protocol: str = "TCP", policy=None):
    """A connected pyxcp master (error handling off: a negative response raises ``XcpResponseError``)."""
    from pyxcp.config import create_application_from_config
    from pyxcp.master import Master

    app = create_application_from_config(
        {"Transport": {"Eth": {"host": "127.0.0.1", "port": xcp_port(srv), "protocol": protocol}},
         "General": {"disable_error_handling": True}}, log_level=logging.WARNING)
    with Master("eth", config=app, policy=policy) as x:
        x.connect()
        try:
            yield x
        finally:
            try:
                x.disconnect()
            except Exception:
                pass


def error_code(exc) -> int:
    """The XCP error code of a pyxcp ``XcpResponseError``."""
    code = exc.get_error_code()
    return int(getattr(code, "value", code))


class RawXcp:
    """A minimal XCP-on-UDP client for the fuzzing test: frames packets, reads responses."""

    def __init__(self, port: int, timeout_s: float = 5.0):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.settimeout(timeout_s)
        self.addr = ("127.0.0.1", port)
        self.ctr = 0

    def frame(self, packet: bytes) -> bytes:
        self.ctr = (self.ctr + 1) & 0xFFFF
        return struct.pack("<HH", len(packet), self.ctr) + packet

    def send_raw(self, datagram: bytes) -> None:
        self.sock.sendto(datagram, self.addr)

    def recv(self) -> bytes:
        """One response packet (without its header); datagrams here hold one packet each."""
        data, _ = self.sock.recvfrom(65536)
        n = data[0] | data[1] << 8
        assert len(data) == 4 + n, f"a datagram of {len(data)} bytes framed {n}"
        return data[4:]

    def request(self, packet: bytes) -> bytes:
        self.send_raw(self.frame(packet))
        return self.recv()

    def close(self) -> None:
        self.sock.close()


__all__ = ["xcp_server", "xcp_port", "pyxcp_master", "error_code", "RawXcp", "XCP_TABLE"]
