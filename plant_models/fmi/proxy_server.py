"""The plant process of an exported FMU: ``python -m plant_models.fmi.proxy_server CHANNEL RESOURCES``.

Started by the FMU's C library (``proxy_fmu.c``), one process per FMU
instance; it builds the plant from ``RESOURCES/config.json`` (written by
``gearbox-hil fmu``) and answers the library's requests on its channel
(``CHANNEL``: the number of an inherited socket, Linux; or ``tcp:PORT:TOKEN``,
Windows and the library built with ``PROXY_TCP``: a connection to the
library on 127.0.0.1 at PORT, the token sent first, ``proxy_channel.h``)
until a quit request or the end of the socket (the importer gone), then
exits.  The message layout is the C file's: a request is ``{uint32 op,
uint32 n, double a, double b}`` and n items; a reply is ``{int32 status,
uint32 bytes}`` and that many bytes.  The first reply (the plant built)
carries ``{uint32 n_in, n_out}``, the inputs and the outputs; a step and the exit
of initialization carry the inputs (n_in doubles) and are answered with the
outputs; a reset and a state set are answered with the inputs and the
outputs (the library keeps both: one round trip per step).  A request that fails (a value
reference that does not exist, a parameter value out of its range, a
plant error) is an ``fmi2Error`` reply with the reason as text; the process
goes on.

Value references: the plant's inputs (0 ..), then its outputs, then its
tunable parameters, in the plant's order (the model description the export
writes numbers them the same way, :func:`variables`).  ``fmi2DoStep`` takes
one plant step of the communication step with the inputs held (a step
within 1e-9, relative, of the fixed step is the fixed step).  A state is the
plant's model floats and data buffers as bytes (``mf``, ``df``, ``di``).
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
from pathlib import Path

import numpy as np

OP_SET_REAL, OP_GET_REAL, OP_DO_STEP, OP_EXIT_INIT, OP_RESET, OP_GET_STATE, OP_SET_STATE, OP_QUIT = range(1, 9)
REQUEST = struct.Struct("=IIdd")
REPLY = struct.Struct("=iI")
OK, ERROR = 0, 3  # fmi2OK, fmi2Error
MAX_ITEMS = 1 << 24  # a request's bound: more items than this is a broken peer


def variables(plant) -> list[tuple[str, str, object]]:
    """(causality, name, port or Param) in value-reference order: inputs, outputs, tunable parameters."""
    return ([("input", s.name, s) for s in plant.inputs] + [("output", s.name, s) for s in plant.outputs]
            + [("parameter", p.name, p) for p in plant.tunable_parameters()])


class ProxyPlant:
    """The plant of an exported FMU and its answers to the requests, by value reference."""

    def __init__(self, resources: Path):
        from plant_models.registry import read_config_data
        spec = json.loads((resources / "config.json").read_text())
        c = read_config_data(spec["config"], spec["source"])
        self.plant = c.plant_class(c.params, source=c.source)
        self.step_s = float(spec["step"])
        self.n_in, self.n_out = self.plant.n_in, self.plant.n_out
        self.params = self.plant.tunable_parameters()
        self.n_vars = self.n_in + self.n_out + len(self.params)
        self.initial = self.state_bytes()

    def set_real(self, vrs: np.ndarray, values: np.ndarray) -> None:
        """Inputs and parameters; a call with any refused value changes nothing (ParamError or ValueError)."""
        p, n_io = self.plant, self.n_in + self.n_out
        new: dict[int, float] = {}
        for vr, v in zip(vrs.tolist(), values.tolist()):
            if self.n_in <= vr < n_io:
                raise ValueError(f"value reference {vr} is an output ({p.outputs[vr - self.n_in].name})")
            if vr >= self.n_vars:
                raise ValueError(f"no variable with value reference {vr}")
            if vr >= n_io:
                prm = self.params[vr - n_io]
                v = prm.validate(bool(v) if prm.kind == "bool" else v)  # ParamError (a ValueError) out of range
            new[vr] = v
        value = {q.name: new.get(n_io + k, q.get()) for k, q in enumerate(self.params)}
        for q in self.params:  # each bound (kinetic <= static) against the values the call leaves in place
            if q.at_most and value[q.name] > value[q.at_most]:
                raise ValueError(f"{q.name} {value[q.name]:g} must not exceed {q.at_most} {value[q.at_most]:g}")
        for vr, v in new.items():
            if vr < self.n_in:
                p.u[vr] = v
            else:
                self.params[vr - n_io].set(v)

    def get_real(self, vrs: np.ndarray) -> np.ndarray:
        p, out = self.plant, np.empty(len(vrs))
        for k, vr in enumerate(vrs.tolist()):
            if vr < self.n_in:
                out[k] = p.u[vr]
            elif vr < self.n_in + self.n_out:
                out[k] = p.y[vr - self.n_in]
            elif vr < self.n_vars:
                out[k] = float(self.params[vr - self.n_in - self.n_out].get())
            else:
                raise ValueError(f"no variable with value reference {vr}")
        return out

    def inputs(self, payload: bytes) -> None:
        """The inputs a step or the exit of initialization carries (all of them, in port order)."""
        if len(payload) != 8 * self.n_in:
            raise ValueError(f"{len(payload) // 8} inputs; the plant has {self.n_in}")
        self.plant.u[:] = np.frombuffer(payload, dtype=np.float64)

    def do_step(self, h: float) -> None:
        p = self.plant
        p.u_rate[:] = 0.0
        # a master's step is often a difference of communication points (t_k+1 - t_k), off the fixed step by
        # rounding; within 1e-9 of it the plant takes its own fixed step, as gearbox-hil simulate does
        p.step(self.step_s if abs(h - self.step_s) <= 1e-9 * self.step_s else h)

    def exit_init(self) -> None:
        """The inputs set before initialization are the plant's start inputs (actuators settled at them)."""
        p = self.plant
        p.reset({s.name: float(p.u[k]) for k, s in enumerate(p.inputs)})

    def state_bytes(self) -> bytes:
        df, di = self.plant.get_state()
        return self.plant.mf.tobytes() + df.tobytes() + di.tobytes()

    def set_state_bytes(self, b: bytes) -> None:
        p = self.plant
        n_mf, (df, di) = p.mf.size, p.get_state()
        if len(b) != len(self.initial):
            raise ValueError(f"a state of {len(b)} bytes; this plant's is {len(self.initial)}")
        a = np.frombuffer(b, dtype=np.uint8)
        o1, o2 = 8 * n_mf, 8 * (n_mf + df.size)
        p.mf[:] = a[:o1].view(np.float64)
        p.set_state((a[o1:o2].view(np.float64).copy(), a[o2:].view(di.dtype).copy()))


def _read(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            return None
        got += k
    return bytes(buf)


def serve(sock: socket.socket, proxy: ProxyPlant) -> None:
    """Answer requests until quit or the end of the socket."""
    while True:
        head = _read(sock, REQUEST.size)
        if head is None:
            return
        op, n, a, b = REQUEST.unpack(head)
        if n > MAX_ITEMS:
            return  # a broken peer: end, the library reports the process gone
        size = {OP_SET_REAL: 12 * n, OP_GET_REAL: 4 * n, OP_SET_STATE: n, OP_DO_STEP: 8 * n,
                OP_EXIT_INIT: 8 * n}.get(op, 0)
        payload = _read(sock, size) if size else b""
        if payload is None:
            return
        if op == OP_QUIT:
            return
        try:
            out = _answer(proxy, op, n, b, payload)
        except Exception as exc:  # the request fails, the plant process goes on
            text = (str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}").encode()[:4000]
            sock.sendall(REPLY.pack(ERROR, len(text)) + text)
        else:
            sock.sendall(REPLY.pack(OK, len(out)) + out)


def _answer(proxy: ProxyPlant, op: int, n: int, h: float, payload: bytes) -> bytes:
    """The reply's payload to one request (``h``: the communication step of a doStep, s)."""
    if op == OP_SET_REAL:
        proxy.set_real(np.frombuffer(payload[:4 * n], dtype=np.uint32), np.frombuffer(payload[4 * n:], dtype=np.float64))
        return b""
    if op == OP_GET_REAL:
        return proxy.get_real(np.frombuffer(payload, dtype=np.uint32)).tobytes()
    p = proxy.plant
    if op == OP_DO_STEP:
        proxy.inputs(payload)
        proxy.do_step(h)
        return p.y.tobytes()
    if op == OP_EXIT_INIT:
        proxy.inputs(payload)
        proxy.exit_init()
        return p.y.tobytes()
    if op == OP_RESET:
        proxy.set_state_bytes(proxy.initial)
        return p.u.tobytes() + p.y.tobytes()
    if op == OP_GET_STATE:
        return proxy.state_bytes()
    if op == OP_SET_STATE:
        proxy.set_state_bytes(payload)
        return p.u.tobytes() + p.y.tobytes()
    raise ValueError(f"unknown request {op}")


def connect(channel: str) -> socket.socket:
    """The channel to the library: an inherited socket (its number), or ``tcp:PORT:TOKEN`` (loopback only)."""
    if not channel.startswith("tcp:"):
        return socket.socket(fileno=int(channel))
    _, port, token = channel.split(":")
    sock = socket.create_connection(("127.0.0.1", int(port)), timeout=60.0)
    sock.settimeout(None)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # small messages, one round trip a step
    sock.sendall(token.encode("ascii"))
    return sock


def main(argv: list[str]) -> int:
    sock, resources = connect(argv[0]), Path(argv[1])
    try:
        proxy = ProxyPlant(resources)
    except Exception as exc:  # the config does not build here: the library's fmi2Instantiate logs why
        text = f"cannot build the plant: {type(exc).__name__}: {exc}".encode()[:4000]
        sock.sendall(REPLY.pack(ERROR, len(text)) + text)
        return 1
    hello = struct.pack("=II", proxy.n_in, proxy.n_out) + proxy.plant.u.tobytes() + proxy.plant.y.tobytes()
    sock.sendall(REPLY.pack(OK, len(hello)) + hello)
    try:
        serve(sock, proxy)
    except OSError:  # the importer's end closed mid-message: nothing to answer
        pass
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # no interpreter teardown: with the plant's kernels loaded it takes seconds (3.3 s measured), and
    # fmi2FreeInstance waits for this process; nothing here needs it (no files open, the socket is done)
    os._exit(code)
