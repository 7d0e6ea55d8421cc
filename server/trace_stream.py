"""Offline runs whose trace does not fit in memory: written to the trace file in chunks as the run goes.

A day at dt = 1 ms is 86.4 million steps; with the Powershift's 55 outputs
its whole trace would be 36 GiB.  ``gearbox-hil simulate`` keeps a trace in
memory only up to :data:`TRACE_MEMORY_BYTES`; above that the compiled run
(:class:`plant_models.offline.Run` with an output buffer of
:data:`CHUNK_ROWS` rows) stops whenever its buffer is full, the rows go to
the file (CSV lines, or a Parquet row group), and the run goes on, so memory
stays bounded at any length.  The chunks change nothing in the results: the
file holds the same rows, bit for bit, as one written from a whole trace
(:meth:`server.traces.Trace.write`).
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Callable

import numpy as np

from plant_models.config import ConfigError
from plant_models.plant import Plant

from .scenario import CompiledScenario
from .traces import SUFFIX, Trace, run_trace, _pyarrow, choose_format, csv_lines, parquet_schema

TRACE_MEMORY_BYTES = 512 << 20  # a trace up to this size (t and every output, float64) is kept whole
CHUNK_ROWS = 1 << 16  # rows per chunk of a streamed trace (about 29 MB with 55 outputs)


def trace_bytes(plant: Plant, n_steps: int, every: int) -> int:
    """Bytes of a whole trace in memory: ``t`` and every output as float64, for each kept row."""
    from plant_models.offline import output_rows

    return output_rows(n_steps, every) * (plant.n_out + 1) * 8


def needs_streaming(plant: Plant, n_steps: int, every: int) -> bool:
    return trace_bytes(plant, n_steps, every) > TRACE_MEMORY_BYTES


def every_to_fit(plant: Plant, n_steps: int, every: int) -> int:
    """The smallest ``--every`` whose whole trace fits in :data:`TRACE_MEMORY_BYTES`."""
    n = every
    while needs_streaming(plant, n_steps, n):
        n *= 2
    lo = n // 2 + 1 if n > every else every
    while lo < n:  # the smallest between the last two tried
        mid = (lo + n) // 2
        if needs_streaming(plant, n_steps, mid):
            lo = mid + 1
        else:
            n = mid
    return n


class _InterruptFlag:
    """SIGINT sets :attr:`raised` instead of raising, while the ``with`` block runs (main thread only)."""

    def __init__(self):
        self.raised = False
        self._old = None

    def _on_signal(self, signum, frame) -> None:
        self.raised = True

    def __enter__(self) -> "_InterruptFlag":
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._on_signal)
        return self

    def __exit__(self, *exc) -> None:
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)


class TraceWriter:
    """A trace file written a chunk of rows at a time (the columns and formats of :class:`Trace`)."""

    def __init__(self, folder: Path, fmt: str, names: list[str], units: list[str], n_values: int,
                 metadata: dict[str, str] | None = None):
        self.format = choose_format(fmt, n_values)
        self.path = folder / ("trace" + SUFFIX[self.format])
        self.rows = 0
        if self.format == "csv":
            self._fh = open(self.path, "w", newline="")
            self._fh.write(",".join(["t"] + names) + "\n")
        else:
            pa, pq = _pyarrow()
            self._pa = pa
            self._schema = parquet_schema(names, units, metadata)
            self._pq = pq.ParquetWriter(self.path, self._schema, compression="zstd", compression_level=1,
                                        use_dictionary=False)

    def append(self, time_s: np.ndarray, values: np.ndarray) -> None:
        if self.format == "csv":
            self._fh.writelines(csv_lines(time_s, values))
        else:
            columns = [self._pa.array(time_s)] + [self._pa.array(np.ascontiguousarray(values[:, j]))
                                                  for j in range(values.shape[1])]
            self._pq.write_table(self._pa.Table.from_arrays(columns, schema=self._schema))
        self.rows += len(time_s)

    def close(self) -> None:
        if self.format == "csv":
            self._fh.close()
        else:
            self._pq.close()


def run_streamed(plant: Plant, compiled: CompiledScenario, writer: TraceWriter, every: int = 1,
                 progress: Callable[[int, int], None] | None = None) -> Trace:
    """:func:`server.simulate.run_offline` with the rows written to ``writer`` a chunk at a time.

    Returns the run's :class:`Trace` holding only its last row (``time``,
    ``values``) and, in ``rows_written``, the rows of the file.  Ctrl-C
    between two chunks ends the run with the rows so far written.
    """
    from plant_models.offline import make_run

    try:
        start_status = plant.reset(compiled.start_inputs())
    except ValueError as exc:  # an input value the plant refuses (Signal.check)
        raise ConfigError(compiled.scenario.source, "inputs", f"initial value rejected: {exc}") from None
    events = plant.new_events()
    run = make_run(plant, compiled.table, compiled.dt, compiled.n_steps, every, buffer_rows=CHUNK_ROWS)
    last = (np.zeros(1), np.array([plant.y.copy()]))
    wall = 0.0
    # Ctrl-C is taken between two chunks, never inside one: a KeyboardInterrupt raised inside a chunk's
    # write could leave a row group in the file that the count (and events.json) does not know of
    stop = _InterruptFlag()
    with stop:
        try:
            while not run.done and not stop.raised:
                t1 = time.perf_counter()
                run.advance(CHUNK_ROWS * every)
                wall += time.perf_counter() - t1
                steps, values = run.take_rows()
                if len(steps):
                    last = (steps[-1:].astype(float) * compiled.dt, values[-1:])
                    writer.append(steps.astype(float) * compiled.dt, values)
                if progress is not None:
                    progress(run.k, run.n_steps)
        finally:
            writer.close()
    complete = run.done
    events += run.events()
    n_steps = compiled.n_steps if complete else int(round(last[0][0] / compiled.dt))
    trace = run_trace(plant, last[0], last[1], events, run.status_or | start_status, start_status, wall, every,
                   n_steps, run.events_lost)
    trace.complete = complete
    trace.rows_written = writer.rows
    return trace
