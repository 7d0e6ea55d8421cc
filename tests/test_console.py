"""Console output never stalls the loop: a reader that stops reading stdout costs lines, not ticks.

* :class:`server.realtime.console.ConsoleWriter` returns at once while the pipe it
  writes to is full, counts what it cannot queue, and delivers what it
  queued, in order, once the reader reads again.
* A server whose stdout is a pipe nobody reads keeps ticking and answering
  while its status lines queue up (before, the loop blocked in the status
  line's write once the pipe's buffer was full).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import subprocess
import sys
import threading
import time

from server.realtime.console import ConsoleLogHandler, ConsoleWriter

from server_support import ROOT, wait_until, write_io

PIPE_BYTES = 4096  # the smallest pipe buffer Linux gives (a page), so that it fills in a second


def _small_pipe() -> tuple[int, int]:
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    return r, w


def _read_all(fd: int) -> bytes:
    os.set_blocking(fd, False)
    chunks = []
    while True:
        try:
            b = os.read(fd, 65536)
        except BlockingIOError:
            return b"".join(chunks)
        if not b:
            return b"".join(chunks)
        chunks.append(b)


def test_a_full_pipe_drops_and_counts_lines_without_blocking_the_writer_then_delivers_the_queued_in_order():
    r, w = _small_pipe()
    stream = os.fdopen(w, "w", buffering=1)
    writer = ConsoleWriter(stream, capacity=50)
    n = 2000
    line = "x" * 90
    done = threading.Event()

    def produce():  # as the loop does; a write that blocked would leave this thread hanging
        for k in range(n):
            writer.write(f"{k:05d} {line}\n")
        done.set()

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    assert done.wait(30.0), "ConsoleWriter.write blocked on a full pipe"
    # 2000 lines of 97 bytes do not fit a 4 kB pipe and 50 queued lines: the rest was dropped and counted
    assert writer.dropped > 0
    got = []  # now the reader reads again: what was queued arrives

    def drained() -> bool:
        got.append(_read_all(r))
        return writer.written + writer.dropped == n and writer.status()["waiting"] == 0

    assert wait_until(drained, 30.0)
    got.append(_read_all(r))
    got = b"".join(got)
    lines = got.decode().splitlines()
    numbers = [int(x.split()[0]) for x in lines]
    assert len(lines) == writer.written == n - writer.dropped  # every queued line arrived, whole
    assert numbers == sorted(numbers) and numbers[0] == 0  # in order; the first lines were written first
    assert all(x.endswith(line) for x in lines)
    assert writer.close(5.0)
    os.close(r)


def test_a_closed_stream_is_counted_and_the_writer_goes_on():
    r, w = os.pipe()
    stream = os.fdopen(w, "w", buffering=1)
    os.close(r)  # the reader went away: writes fail with EPIPE (Python ignores SIGPIPE)
    writer = ConsoleWriter(stream)
    for k in range(10):
        writer.write(f"{k}\n")
    assert wait_until(lambda: writer.written + writer.dropped == 10, 10.0)
    assert writer.status()["broken"] is True and writer.dropped == 10
    writer.write("more\n")
    assert wait_until(lambda: writer.dropped == 11, 10.0)
    writer.close(5.0)


def test_log_records_go_through_the_writer_formatted_and_in_order_and_close_writes_what_waits():
    r, w = os.pipe()
    writer = ConsoleWriter(os.fdopen(w, "w"))
    handler = ConsoleLogHandler(writer)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    log = logging.getLogger("gearbox_hil.test_console")
    log.propagate = False
    log.addHandler(handler)
    try:
        for k in range(5):
            log.warning("record %d", k)
        assert writer.close(10.0)  # everything queued was written
        assert writer.close(1.0)  # a second close is harmless
        writer.write("after close\n")  # refused and counted, not written
        assert writer.dropped == 1
        text = _read_all(r).decode()
        assert text == "".join(f"WARNING gearbox_hil.test_console: record {k}\n" for k in range(5))
    finally:
        log.removeHandler(handler)
        os.close(r)


def test_a_server_whose_stdout_nobody_reads_keeps_ticking_and_answering(tmp_path):
    """Status lines 20 times a second fill a 4 kB pipe within a second; the loop must not notice."""
    io = write_io(tmp_path / "io.toml", loop="status_interval_s = 0.05")
    io.write_text(io.read_text().replace("status_line = false", "status_line = true"))
    ready, err = tmp_path / "ready.json", tmp_path / "stderr.txt"
    r, w = _small_pipe()
    with open(err, "w") as err_fh:
        proc = subprocess.Popen([sys.executable, "-m", "server.cli", "serve", "powershift", "--io", str(io),
                                 "--ready-file", str(ready)], cwd=ROOT, stdout=w, stderr=err_fh)
    os.close(w)
    try:
        assert wait_until(lambda: ready.exists() or proc.poll() is not None, 300.0)
        assert proc.poll() is None, err.read_text()
        from io_adapters.zmq.client import HilClient

        with HilClient(json.loads(ready.read_text())["endpoints"]["zmq.control"], timeout_s=20.0).connect() as hil:
            # the pipe is full: the writer thread is stuck in its write, the lines queue up behind it
            assert wait_until(lambda: hil.status()["console"]["stdout"]["waiting"] > 5, 60.0), hil.status()["console"]
            s0 = hil.status()
            time.sleep(1.0)
            s1 = hil.status()
            # a second of ticks while the stdout is stuck (before, the loop itself was stuck in that write)
            assert s1["tick"] - s0["tick"] > 500
            assert s1["console"]["stdout"]["waiting"] > s0["console"]["stdout"]["waiting"]
            assert s1["console"]["stdout"]["written"] == s0["console"]["stdout"]["written"]
        assert _read_all(r).startswith(b"gearbox-hil serve: powershift plant")  # what was written is readable
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        os.close(r)
