"""The process of one imported FMU run out of the server's process: ``python -m plant_models.fmi.fmu_host FD``.

Started by :class:`.isolated.ProcessSlot` (``process = "own"`` in an
``[[fmu]]`` table, docs/fmi.md) with one end of a Unix ``SOCK_SEQPACKET``
socket pair as ``FD``.  The protocol, bounded both ways:

1. the server sends the FMU's table as JSON (at most
   :data:`.isolated.MAX_HELLO` bytes); this process loads the FMU into an
   in-process slot (:func:`.assembly.make_slot`: the same code as ``process = "server"``,
   so both give the same numbers bit for bit), creates a shared-memory
   file (``memfd``) of ``8 * (n_in + n_out) + state_size`` bytes and answers
   ``{"n_in", "n_out", "state_size"}`` or ``{"error"}`` as JSON with the
   file's descriptor attached (``SCM_RIGHTS``);
2. then every request is one :data:`.isolated.COMMAND` (four float64:
   op, a, b, 0) and every reply one (status, value, 0, 0); the inputs,
   outputs and the serialized state travel in the shared memory: inputs
   ``[0, n_in)``, outputs ``[n_in, n_in + n_out)`` (float64), then the state
   bytes.  A message of another size is a broken peer: this process exits.

The socket's end (the server gone) or :data:`.isolated.OP_QUIT` ends the process; it
also asks the kernel to kill it when its parent dies (``PR_SET_PDEATHSIG``).
An FMI call that fails is an FMI status in the reply (error 3, fatal 4);
an exception in a call that is not a step (a parameter the FMU refuses) is
status 3.  What this process cannot catch (the FMU's segfault, abort, or
endless loop) the server sees as the socket's end or a missed deadline.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import resource
import signal
import socket
import sys

import numpy as np

from .isolated import (COMMAND, MAX_HELLO, MESSAGE, OP_GET_REAL, OP_GET_STATE, OP_QUIT, OP_SET_REAL,
                       OP_SET_STATE, OP_START, OP_STEP)

RC_ERROR = 3  # fmi2Error


def _die_with_parent() -> None:
    """The kernel kills this process when the server's process ends (a server killed cannot ask)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the socket's end still ends this process at its next request


def _load(hello: bytes):
    """The slot of the FMU the table names (its start values and tuned parameters applied by ``start``)."""
    from pathlib import Path

    from .assembly import make_slot
    from .connect import FmuTable, check_fmu
    spec = json.loads(hello)
    table = FmuTable(spec["name"], Path(spec["file"]), {k: float(v) for k, v in spec["start"].items()})
    return make_slot(check_fmu(table, spec["source"], {}, {}), in_process=True)


class Host:
    """The loaded FMU, its shared memory and the answers to the server's requests."""

    def __init__(self, sock: socket.socket, slot):
        self.sock, self.slot = sock, slot
        n_in, n_out = slot.n_in, slot.n_out
        self.fd = os.memfd_create(f"fmu-{slot.name}", os.MFD_CLOEXEC)
        size = max(8 * (n_in + n_out) + slot.state_size, 8)
        os.ftruncate(self.fd, size)
        self.shm = mmap.mmap(self.fd, size)
        floats = np.frombuffer(self.shm, dtype=np.float64, count=n_in + n_out)
        # the slot reads its inputs from and writes its outputs to the shared memory itself (no copies); the
        # server copies the outputs only after a step that succeeded
        slot.np_in, slot.np_out = floats[:n_in], floats[n_in:]
        self.state_at = 8 * (n_in + n_out)

    def answer(self, op: int, a: float, b: float) -> tuple[float, float]:
        """(status, value) of one request; the data in the shared memory."""
        s = self.slot
        if op == OP_STEP:
            return s.step(a, b), 0.0
        if op == OP_START:
            s.start()
            return (s.get_outputs() if s.n_out else 0), 0.0
        if op == OP_GET_REAL:
            return 0, s.get_real(int(a))
        if op == OP_SET_REAL:
            s.set_real(int(a), b)
            s.tuned[int(a)] = b
            return 0, 0.0
        if op == OP_GET_STATE:
            blob = s.state_bytes()
            if len(blob) != s.state_size:
                return RC_ERROR, float(len(blob))
            self.shm[self.state_at:self.state_at + len(blob)] = blob
            return 0, 0.0
        if op == OP_SET_STATE:
            s.set_state_bytes(bytes(self.shm[self.state_at:self.state_at + s.state_size]))
            s.tuned = {vr: s.get_real(vr) for vr in s.tuned}
            return 0, 0.0
        raise ValueError(f"unknown request {op}")

    def serve(self) -> None:
        buf = bytearray(COMMAND)  # request in, reply out
        recv_into, send, unpack, pack = self.sock.recv_into, self.sock.send, MESSAGE.unpack_from, MESSAGE.pack_into
        while True:
            if recv_into(buf) != COMMAND:  # the end of the socket (0), or a broken peer
                return
            op, a, b, _ = unpack(buf)
            if op == OP_QUIT:
                return
            try:
                rc, value = self.answer(op, a, b)
            except Exception as exc:  # an FMI call that raised (FMPy checks statuses outside the step path)
                print(f"fmu {self.slot.name}: {exc}", file=sys.stderr)
                rc, value = RC_ERROR, 0.0
            pack(buf, 0, rc, value, 0.0, 0.0)
            send(buf)


def main(argv: list[str]) -> int:
    _die_with_parent()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # an FMU that crashes writes no core: the server waits on it
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C at the terminal is the server's to handle
    sock = socket.socket(fileno=int(argv[0]))
    hello = sock.recv(MAX_HELLO)
    try:
        slot = _load(hello)
        host = Host(sock, slot)
    except Exception as exc:  # the server reports it as the FMU's load error
        sock.send(json.dumps({"error": str(exc).splitlines()[0] if str(exc) else repr(exc)}).encode())
        return 1
    reply = {"n_in": slot.n_in, "n_out": slot.n_out, "state_size": slot.state_size,
             "in_names": slot.in_names, "out_names": slot.out_names}
    socket.send_fds(sock, [json.dumps(reply).encode()], [host.fd])
    try:
        host.serve()
    finally:
        try:
            slot.close()
        except Exception:  # nothing to report to: the server has gone or asked to quit
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
