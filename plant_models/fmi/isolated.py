"""An FMU in a process of its own (``process = "own"`` in its ``[[fmu]]`` table, docs/fmi.md).

:class:`ProcessSlot` has the interface of an in-process :class:`.slots.Slot`
(what :class:`.assembly.FmuAssembly` calls), but the FMU is loaded and called
by :mod:`.fmu_host`, a child process, one request and one reply of 32 bytes
per call over a Unix ``SOCK_SEQPACKET`` socket pair, the inputs, outputs
and serialized state in a shared-memory file the child created.  An FMU
that segfaults, aborts or exits ends the child, not the server: the reply
does not come (the socket's end), the slot is marked failed with the
reason (``ended by signal SIGSEGV``), the assembly sets ``fmu_error`` and
holds the FMU's outputs (or puts its ``safe`` values out).  An FMU that
hangs misses its deadline (``timeout_s`` for a step or a parameter,
:data:`LONG_CALL_S` for a start or a state, :data:`SPAWN_S` to load): the
child is killed and the same happens.  The next reset starts a new child.

Why a socket pair and not a spin on shared memory: the server's machine is
shared by the real-time thread and the child; a blocking read gives the core
back while the FMU computes, and the kernel reports the child's end on the
same descriptor at once.  The per-step path allocates nothing on the
server's side: the command and reply are preallocated arrays sent and
received through memoryviews, the inputs are written by the assembly
straight into the shared memory.
"""

from __future__ import annotations

import json
import logging
import mmap
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import weakref
from pathlib import Path

import numpy as np

from ..errors import SnapshotError
from .connect import CheckedFmu
log = logging.getLogger(__name__)

# the protocol with the child (:mod:`.fmu_host`): a request and a reply are both COMMAND bytes
OP_START, OP_STEP, OP_GET_REAL, OP_SET_REAL, OP_GET_STATE, OP_SET_STATE, OP_QUIT = range(1, 8)
COMMAND = 32  # bytes: four float64 (request: op, a, b, 0; reply: FMI status, value, 0, 0)
MAX_HELLO = 1 << 16  # bytes of the table's JSON and of the child's answer to it
MESSAGE = struct.Struct("=4d")  # a request or a reply, packed into and read from buffers allocated once

RC_FATAL = 4  # fmi2Fatal: what a lost process is to the assembly
LONG_CALL_S = 60.0  # s, the deadline of a start (reset, initialization) or a state save / restore
SPAWN_S = 120.0  # s, to start the interpreter and load the FMU (a loaded machine takes seconds)
QUIT_S = 2.0  # s, after a quit request the child is killed
REAP_S = 0.002  # s, the most a read of the message (not the tick) waits for a lost child's exit status
PENDING_END = "closed its socket (its end is logged when reaped)"  # a lost child's end, before its exit status
ROOT = Path(__file__).resolve().parents[2]  # the directory holding plant_models, for the child's imports


class FmuCallError(Exception):
    """A parameter call that failed in the FMU's process (its FMI status, or the process lost)."""


def _end_reason(p: subprocess.Popen) -> str:
    rc = p.returncode
    if rc < 0:
        name = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
        return f"ended by signal {name}"
    return f"exited with status {rc}"


class ProcessSlot:
    """One FMU in its own process; the attributes and calls of :class:`.slots.Slot`."""

    def __init__(self, fmu: CheckedFmu):
        t = fmu.table
        self.fmu, self.name = fmu, t.name
        self.timeout_s = t.timeout_s
        v = fmu.variables
        self.in_names = [n for n, x in v.items() if x.causality == "input"]
        self.out_names = [n for n, x in v.items() if x.causality == "output"]
        self.n_in, self.n_out = len(self.in_names), len(self.out_names)
        self.np_out = np.zeros(self.n_out)
        self._cmd, self._rep = bytearray(COMMAND), bytearray(COMMAND)
        self.value = 0.0  # the value of the last reply (a parameter read)
        self.failed = False
        self.why = ""  # how the process was lost, for the assembly's message
        self._exc_note = ""  # the exception that told of the loss, after the end in why
        self.tuned: dict[int, float] = {}
        self.proc: subprocess.Popen | None = None
        self._end_told = True  # whether the lost child's exit status was in the message (else logged when reaped)
        self.sock: socket.socket | None = None
        self._spawn()

    # -- the child ------------------------------------------------------------------------------------
    def _spawn(self) -> None:
        """Start the child, send the table, map the shared memory it answers with (not for the real-time tick)."""
        t = self.fmu.table
        if self.proc is not None:  # the last child, lost in a tick: reaped here, its end logged if not told yet
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            if not self._end_told:
                log.error("fmu %s: its last process %s", self.name, _end_reason(self.proc))
                self._end_told = True
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", "plant_models.fmi.fmu_host", str(theirs.fileno())],
                                         pass_fds=[theirs.fileno()], env=env, stdin=subprocess.DEVNULL, stdout=2)
        finally:
            theirs.close()
        weakref.finalize(self, _kill, self.proc)
        self.sock = ours
        self._deadline(SPAWN_S)
        hello = dict(name=t.name, file=str(t.file), start=t.start, source=str(t.file))
        try:
            ours.send(json.dumps(hello).encode())
            msg, fds, _, _ = socket.recv_fds(ours, MAX_HELLO, 1)
        except OSError as exc:
            self._lost(exc)
            self.settle()  # not in a tick: its exit status is worth the wait
            raise FmuCallError(f"fmu {self.name}: its process {self.why}") from None
        if not msg:  # not in a tick: its exit status is worth the wait
            try:
                self.proc.wait(timeout=QUIT_S)
            except subprocess.TimeoutExpired:
                pass
            self._lost(None)
            raise FmuCallError(f"fmu {self.name}: its process {self.why} while loading the FMU")
        spec = json.loads(msg)
        if "error" in spec:
            self._lost(None)
            raise FmuCallError(f"fmu {self.name}: its process could not load the FMU: {spec['error']}")
        assert spec["in_names"] == self.in_names and spec["out_names"] == self.out_names, "a different FMU"
        self.state_size = int(spec["state_size"])
        size = max(8 * (self.n_in + self.n_out) + self.state_size, 8)
        try:
            self.shm = mmap.mmap(fds[0], size)
        finally:
            for fd in fds:
                os.close(fd)
        self.np_in = np.frombuffer(self.shm, dtype=np.float64, count=self.n_in)  # the assembly writes here
        self._sh_out = np.frombuffer(self.shm, dtype=np.float64, count=self.n_out, offset=8 * self.n_in)
        self._state_at = 8 * (self.n_in + self.n_out)
        self._deadline(self.timeout_s)

    def _deadline(self, seconds: float) -> None:
        """The socket's receive deadline, kept by the kernel (``SO_RCVTIMEO``): the socket stays blocking, so a
        step is one ``send`` and one ``recv`` (Python's own timeouts would poll before each: two more calls)."""
        sec = int(seconds)
        tv = struct.pack("ll", sec, int(round((seconds - sec) * 1e6)))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
        self.sock_timeout = seconds

    @property
    def alive(self) -> bool:
        return self.sock is not None

    def _lost(self, exc: BaseException | None) -> int:
        """The child gone (the socket's end) or past its deadline (killed); its end in :attr:`why`.

        Taken once per loss, in the tick that meets it, so it waits for nothing: a child past its deadline
        gets SIGKILL and is reaped later (the next start, or close); one whose socket ended is asked for its
        exit status once, without waiting; if it has none yet (its address space is torn down before its
        socket closes, so it is a zombie in moments), :meth:`settle` waits for it between ticks.
        """
        hang = isinstance(exc, (TimeoutError, BlockingIOError))  # BlockingIOError: the kernel's deadline passed
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        p = self.proc
        if hang:
            p.kill()
            end = p.poll()
            self.why = f"did not answer within {self.sock_timeout:g} s and " + (
                "was killed (SIGKILL)" if end is None or end == -signal.SIGKILL else _end_reason(p))
        else:
            end = _end_reason(p) if p.poll() is not None else PENDING_END
            self._exc_note = "" if exc is None else f" ({exc.__class__.__name__})"
            self.why = end + self._exc_note
        self.failed = True
        self._end_told = p.returncode is not None
        log.error("fmu %s: its process %s", self.name, self.why)
        return RC_FATAL

    def settle(self) -> tuple[str, str] | None:
        """The end of a child lost in a tick before it had an exit status: waited for (at most :data:`REAP_S`),
        then in :attr:`why`.  Returns ``(old why, new why)`` when it changed, else None.  Not for the real-time
        tick: the assembly calls it when its messages are read."""
        p = self.proc
        if not self.why.startswith(PENDING_END) or p is None:
            return None
        deadline = time.perf_counter() + REAP_S
        while p.poll() is None and time.perf_counter() < deadline:
            time.sleep(0.0002)
        if p.returncode is None:
            return None
        old, self.why = self.why, _end_reason(p) + self._exc_note
        self._end_told = True
        log.error("fmu %s: its process %s", self.name, self.why)
        return old, self.why

    def _call(self, op: int, a: float = 0.0, b: float = 0.0, timeout: float | None = None) -> int:
        """One request and its reply; the FMI status, or :data:`RC_FATAL` when the child is lost."""
        if self.sock is None:
            return RC_FATAL
        MESSAGE.pack_into(self._cmd, 0, op, a, b, 0.0)
        try:
            if timeout is not None:
                self._deadline(timeout)
            self.sock.send(self._cmd)
            n = self.sock.recv_into(self._rep)
            if timeout is not None:
                self._deadline(self.timeout_s)
        except OSError as exc:  # BlockingIOError (a hang: the deadline), ConnectionResetError, BrokenPipeError
            return self._lost(exc)
        if n != COMMAND:
            return self._lost(None)
        rc, self.value, _, _ = MESSAGE.unpack_from(self._rep)
        return int(rc)

    # -- the slot's calls -----------------------------------------------------------------------------
    def start(self) -> int:
        """Reset and initialize; a new child first when the last one was lost (not for the real-time tick)."""
        if not self.alive:
            self._spawn()
            for vr, value in self.tuned.items():
                self._call(OP_SET_REAL, vr, value, LONG_CALL_S)
        self.failed, self.why = False, ""
        rc = self._call(OP_START, timeout=LONG_CALL_S)
        if rc <= 1:
            self.np_out[:] = self._sh_out
        else:
            self.failed = True
        return rc

    def get_outputs(self) -> int:
        return 0  # the outputs come with each step's reply

    def step(self, t: float, dt: float) -> int:
        """One step from t to t + dt in the child; the inputs are already in the shared memory."""
        rc = self._call(OP_STEP, t, dt)
        if rc <= 1:
            self.np_out[:] = self._sh_out
        return rc

    def get_real(self, vr: int) -> float:
        rc = self._call(OP_GET_REAL, vr)
        if rc > 1:
            raise FmuCallError(f"get failed with status {rc}" + (f": its process {self.why}" if self.why else ""))
        return self.value

    def set_real(self, vr: int, value: float) -> None:
        rc = self._call(OP_SET_REAL, vr, value)
        if rc > 1:
            raise FmuCallError(f"set failed with status {rc}" + (f": its process {self.why}" if self.why else ""))

    def state_bytes(self) -> bytes:
        rc = self._call(OP_GET_STATE, timeout=LONG_CALL_S)
        if rc > 1:
            raise SnapshotError(f"fmu {self.name}: cannot save its state (status {rc}{'; ' if self.why else ''}"
                                f"{'its process ' + self.why if self.why else ''})")
        return bytes(self.shm[self._state_at:self._state_at + self.state_size])

    def set_state_bytes(self, blob: bytes) -> None:
        """The state set in the child (a new child first when the last one was lost)."""
        if not self.alive:
            self._spawn()
        self.shm[self._state_at:self._state_at + len(blob)] = blob
        rc = self._call(OP_SET_STATE, timeout=LONG_CALL_S)
        if rc > 1:
            raise SnapshotError(f"fmu {self.name}: cannot restore its state (status {rc})")
        self.failed, self.why = False, ""

    def close(self) -> None:
        """Ask the child to quit; killed after :data:`QUIT_S`."""
        if self.sock is not None:
            try:
                self.sock.send(MESSAGE.pack(OP_QUIT, 0.0, 0.0, 0.0))
            except OSError:
                pass
            self.sock.close()
            self.sock = None
        if self.proc is not None:
            try:
                self.proc.wait(timeout=QUIT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _kill(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.kill()
        p.wait()


__all__ = ["FmuCallError", "ProcessSlot"]
