"""The workspace process: ``python -m io_adapters.web.process FD``, started by the web adapter.

The web server lives in a process of its own so that encoding and sending
the page's updates never holds the real-time loop's interpreter lock (in a
thread of the server process it did: TET p99.9 and lateness p99 grew by
hundreds of us at 1 kHz, BENCHMARKS.md).  It reads the state ring in shared
memory through its own decimated cursor, and everything else goes through
one Unix socket to the server process (``FD``, inherited), one JSON object
a line:

* server -> workspace: ``job`` first (the adapter's options, the page's
  meta, the ring's shared-memory name), then ``reply`` (a control reply, by
  ``id``), ``status`` (the status map asked for), ``events`` (plant events
  while a page is open) and ``stop``;
* workspace -> server: ``ready`` (the URL) or ``failed`` (why it cannot
  serve), then ``control`` (a request for the server's one control handler),
  ``status`` (asks for the status map while a page is open, with the
  counters) and ``counters`` (rows shown, skipped and lost, pages open,
  refusals: the adapter's status; sent by themselves only when a page opens
  or closes or a request is refused, so the loop serves no message for
  them while nothing changes).

It ends on ``stop``, when the socket closes (the server ended or was
killed: it then releases the shared ring's name, as the recording writer
does) and on SIGTERM; SIGINT is ignored (a Ctrl-C in the server's terminal
reaches the server, which then stops this process).
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
import signal
import socket
import sys

log = logging.getLogger("gearbox_hil.web")

LINE_LIMIT = 1 << 26  # one status map or reply is far below this
# The workspace runs at a lower CPU priority than the loop: on a busy machine the scheduler then lets the loop's
# thread, waking for its deadline, preempt it rather than wait for its time slice to end.
NICE = 10


def dumps_line(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


class Link:
    """The workspace process's side of the socket to the server process."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer
        self.status: dict | None = None  # the newest status map
        self.status_version = 0
        self.events: collections.deque = collections.deque(maxlen=1000)
        self.closed = asyncio.Event()
        self._waiting: dict[int, asyncio.Future] = {}
        self._next_id = 0
        self._status_wait: asyncio.Future | None = None

    def _send(self, obj) -> None:
        if self.closed.is_set():
            raise ConnectionError("the link to the server process is closed")
        self.writer.write(dumps_line(obj))

    async def control(self, req: dict) -> dict:
        """Send ``req`` to the server's control handler; its reply."""
        self._next_id += 1
        rid = self._next_id
        fut = asyncio.get_running_loop().create_future()
        self._waiting[rid] = fut
        try:
            self._send({"op": "control", "id": rid, "req": req})
            return await fut
        finally:
            self._waiting.pop(rid, None)

    async def request_status(self, counters: dict) -> None:
        """Ask for the status map, handing over ``counters`` (for the adapter's part of it); wait for it (<= 10 s)."""
        if self.closed.is_set():
            return
        self._status_wait = asyncio.get_running_loop().create_future()
        self._send({"op": "status", "counters": counters})
        try:
            await asyncio.wait_for(self._status_wait, 10.0)
        except asyncio.TimeoutError:  # the server is busy or gone: the page keeps its last status, the next poll asks again
            pass

    def send_counters(self, counters: dict) -> None:
        if not self.closed.is_set():
            self.writer.write(dumps_line({"op": "counters", "counters": counters}))

    async def read_forever(self, on_stop) -> None:
        """Dispatch what the server process sends until ``stop`` or the end of the socket; then ``on_stop()``."""
        try:
            while True:
                line = await self.reader.readline()
                if not line:
                    break
                msg = json.loads(line)
                op = msg.get("op")
                if op == "reply":
                    fut = self._waiting.get(msg.get("id"))
                    if fut is not None and not fut.done():
                        fut.set_result(msg["reply"])
                elif op == "status":
                    self.status = msg["status"]
                    self.status_version += 1
                    if self._status_wait is not None and not self._status_wait.done():
                        self._status_wait.set_result(None)
                elif op == "events":
                    self.events.extend(msg["events"])
                elif op == "stop":
                    break
        finally:
            self.closed.set()
            for fut in self._waiting.values():
                if not fut.done():
                    fut.set_exception(ConnectionError("the server process closed the link"))
            on_stop()


def _read_job(sock: socket.socket) -> dict:
    buf = b""
    while not buf.endswith(b"\n"):
        part = sock.recv(1 << 16)
        if not part:
            raise ConnectionError("the server process closed the link before sending the job")
        buf += part
    return json.loads(buf)


async def _run(sock: socket.socket, job: dict) -> bool:
    """Serve until stopped; True when the server process went away without a ``stop``."""
    from plant_models.run.ring import StateRing
    from .server import WebServer

    reader, writer = await asyncio.open_unix_connection(sock=sock, limit=LINE_LIMIT)
    link = Link(reader, writer)
    ring = StateRing.attach(job["shm"])
    opts = job["options"]
    try:
        srv = WebServer(link, job["meta"], ring, int(job["every"]), host=opts["host"], port=opts["port"],
                        token=opts["token"], max_request_bytes=opts["max_request_bytes"],
                        max_clients=opts["max_clients"], allowed_origins=tuple(opts["allowed_origins"]),
                        status_hz=opts["status_hz"], log=log,
                        allowed_hosts=tuple(opts.get("allowed_hosts", ())), layouts=opts.get("layouts"),
                        parameter_sets=opts.get("parameter_sets"), history_s=float(opts.get("history_s", 0.0)),
                        recordings=opts.get("recordings"), max_download_bytes=int(opts.get("max_download_bytes", 1 << 30)))
    except (ImportError, OSError) as exc:  # plotly missing, or its package without plotly.min.js
        writer.write(dumps_line({"op": "failed", "error": f"the workspace's plotting library: {exc} "
                                 "(pip install 'gearbox-hil[web]')"}))
        await writer.drain()
        return False
    stopped = {"by_server": False}

    def on_stop() -> None:
        stopped["by_server"] = True
        srv.stop()

    def ready(url: str) -> None:
        writer.write(dumps_line({"op": "ready", "url": url, "pid": os.getpid()}))
        asyncio.ensure_future(link.read_forever(on_stop))

    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, srv.stop)
    try:
        await srv.serve(ready)
    except OSError as exc:  # a failure to bind
        writer.write(dumps_line({"op": "failed", "error": f"cannot serve the workspace on {opts['host']}:"
                                 f"{opts['port']}: {exc}"}))
        await writer.drain()
        return False
    finally:
        parent_gone = os.getppid() != int(job["parent_pid"])
        if parent_gone:  # the server was killed: its shared block would otherwise stay behind
            try:
                ring.close(unlink=True)
            except Exception:  # best effort while this process ends: at worst the block stays in /dev/shm until reboot
                pass
        else:
            ring.close()
    return parent_gone


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        os.nice(NICE)
    except OSError:  # not allowed here: it runs at the server's priority
        pass
    logging.basicConfig(level=logging.WARNING, format="gearbox-hil workspace: %(levelname)s: %(message)s")
    fd = int((argv or sys.argv[1:])[0])
    sock = socket.socket(fileno=fd)
    job = _read_job(sock)
    if job.get("cpus"):  # off the loop's pinned CPUs, before any thread starts (they inherit it)
        try:
            os.sched_setaffinity(0, job["cpus"])
        except OSError as exc:
            log.warning("could not keep off the loop's CPUs (%s)", exc.strerror)
    asyncio.run(_run(sock, job))
    return 0


if __name__ == "__main__":
    sys.exit(main())
