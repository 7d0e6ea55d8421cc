"""Traces of offline runs: the :class:`Trace` object and its files, CSV or Parquet.

Two formats, both lossless (every float reads back bit for bit):

* **CSV** (``trace.csv``): ``t`` then one column per output, each float as
  its shortest ``repr``.  Readable by anything; the default for small runs.
  Writing costs about 1 us per value (a 120 s run at 50 us with 59 outputs
  is 140 million values: minutes and more than a gigabyte).
* **Parquet** (``trace.parquet``, through pyarrow): the same columns as
  float64 with each output's unit in its field metadata and the run's
  description (plant, config, scenario, step, decimation) in the file
  metadata; columnar, compressed, written and read at memory speed, and
  read by pandas, polars, DuckDB, MATLAB and Spark alike.  The campaign
  table of :mod:`server.campaign` is a Parquet file too, so one reader
  serves both.  MF4 (asammdf) was the other candidate: the measurement
  format of automotive tools, but a second large dependency, row-oriented
  writing through Python objects, and nothing a campaign table could use.

``--format auto`` (the default of ``gearbox-hil simulate``) writes CSV up
to :data:`AUTO_PARQUET_VALUES` values and Parquet above (when pyarrow is
installed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from plant_models.config import ConfigError
from plant_models.contract.vocabulary import COUNTER_NAMES

AUTO_PARQUET_VALUES = 2_000_000  # above this many values (about 40 MB of CSV), --format auto writes Parquet
FORMATS = ("auto", "csv", "parquet")
SUFFIX = {"csv": ".csv", "parquet": ".parquet"}


@dataclass
class Trace:
    """The result of an offline run.

    ``time`` [rows] in s; ``values`` [rows, n_out], row j = the plant
    outputs at ``time[j]`` (row 0 after the reset; then every ``every``-th
    step and the last); ``events`` the stick/breakaway/reversal events as
    dicts (time, clutch, row, type); ``status_or`` the OR of all step status
    words; ``counters`` the core's diagnostic counters at the end;
    ``wall_time_s`` the run's wall time (the compiled steps, no file work).
    """

    names: list[str]
    units: list[str]
    time: np.ndarray
    values: np.ndarray
    events: list[dict] = field(default_factory=list)
    status_or: int = 0
    start_status: int = 0
    wall_time_s: float = 0.0
    counters: dict = field(default_factory=dict)
    every: int = 1
    steps: int = 0  # steps the trace covers
    events_lost: int = 0
    complete: bool = True  # false: the run was interrupted after ``steps`` steps
    rows_written: int = 0  # > 0: the trace was streamed to its file (server.trace_stream); time/values: its last row

    def column(self, name: str) -> np.ndarray:
        """One output signal over time (a view)."""
        try:
            return self.values[:, self.names.index(name)]
        except ValueError:
            raise KeyError(f"no output {name!r} in the trace") from None

    def __contains__(self, name: str) -> bool:
        return name in self.names

    def write_csv(self, path: str | Path) -> None:
        """``t`` then one column per output; each float as its shortest repr (reads back exactly)."""
        with open(path, "w", newline="") as fh:
            fh.write(",".join(["t"] + self.names) + "\n")
            for a in range(0, len(self.time), 65536):  # a block at a time: no list of every row at once
                fh.writelines(csv_lines(self.time[a:a + 65536], self.values[a:a + 65536]))

    def write_parquet(self, path: str | Path, metadata: dict[str, str] | None = None) -> None:
        """One float64 column per output after ``t``, units in the field metadata (needs pyarrow)."""
        pa, pq = _pyarrow()
        schema = parquet_schema(self.names, self.units, metadata)
        columns = [pa.array(self.time)] + [pa.array(np.ascontiguousarray(self.values[:, j]))
                                           for j in range(self.values.shape[1])]
        # zstd at its fastest level without dictionary pages: dictionaries find nothing to share in
        # float signals and cost two thirds of the writing time; the file comes out smaller too
        pq.write_table(pa.Table.from_arrays(columns, schema=schema), path, compression="zstd", compression_level=1,
                       use_dictionary=False, row_group_size=1 << 20)

    def write(self, folder: Path, fmt: str, metadata: dict[str, str] | None = None) -> Path:
        """Write ``trace.csv`` or ``trace.parquet`` into ``folder`` (``fmt``: csv, parquet or auto)."""
        fmt = choose_format(fmt, self.values.size)
        path = folder / ("trace" + SUFFIX[fmt])
        if fmt == "csv":
            self.write_csv(path)
        else:
            self.write_parquet(path, metadata)
        return path


def csv_lines(time_s: np.ndarray, values: np.ndarray):
    """The CSV lines of these rows: ``t`` then the outputs, each float as its shortest repr."""
    data = np.column_stack([time_s, values]).tolist()
    return (",".join(map(repr, row)) + "\n" for row in data)


def parquet_schema(names: list[str], units: list[str], metadata: dict[str, str] | None = None):
    """The Parquet schema of a trace: ``t`` and one float64 column per output, units in the field metadata."""
    pa, _ = _pyarrow()
    fields = [pa.field("t", pa.float64(), metadata={"unit": "s"})]
    fields += [pa.field(n, pa.float64(), metadata={"unit": u}) for n, u in zip(names, units)]
    return pa.schema(fields, metadata={k: str(v) for k, v in (metadata or {}).items()})


def has_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def choose_format(fmt: str, values: int) -> str:
    """The format a trace of ``values`` numbers is written in: ``auto`` picks CSV for small traces."""
    if fmt == "auto":
        return "parquet" if values > AUTO_PARQUET_VALUES and has_pyarrow() else "csv"
    if fmt not in SUFFIX:
        raise ConfigError("--format", "", f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    return fmt


def _pyarrow():
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError("--format", "parquet", "needs pyarrow (pip install 'gearbox-hil[campaign]')") from None
    return pa, pq


def read_trace_csv(path: str | Path) -> tuple[list[str], np.ndarray]:
    """Read a trace.csv back: (column names including ``t``, float array)."""
    with open(path) as fh:
        header = fh.readline().strip().split(",")
        rows = [[float(x) for x in line.split(",")] for line in fh if line.strip()]
    return header, np.array(rows, dtype=float).reshape(len(rows), len(header))


def read_trace_parquet(path: str | Path) -> tuple[list[str], np.ndarray, dict[str, str]]:
    """Read a trace.parquet back: (column names including ``t``, float array, the file's metadata)."""
    _, pq = _pyarrow()
    table = pq.read_table(path)
    data = np.column_stack([table.column(j).to_numpy() for j in range(table.num_columns)]) if table.num_rows else \
        np.empty((0, table.num_columns))
    meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    return table.column_names, data, meta


def read_trace(path: str | Path) -> tuple[list[str], np.ndarray]:
    """Read a trace file of either format: (column names including ``t``, float array)."""
    if str(path).endswith(".parquet"):
        names, data, _ = read_trace_parquet(path)
        return names, data
    return read_trace_csv(path)


__all__ = ["AUTO_PARQUET_VALUES", "FORMATS", "Trace", "choose_format", "has_pyarrow", "read_trace", "read_trace_csv",
           "read_trace_parquet"]


def run_trace(plant, time_s, values, events, status_or, start_status, wall, every, steps, lost) -> Trace:
    """The :class:`Trace` of an offline run of ``plant``: its outputs' names and units, the run's rows and counts."""
    return Trace(names=[s.name for s in plant.outputs], units=[s.unit for s in plant.outputs], time=time_s,
                 values=values, events=events, status_or=int(status_or), start_status=int(start_status),
                 wall_time_s=wall, counters={nm: int(v) for nm, v in zip(COUNTER_NAMES, plant.counters)},
                 every=every, steps=steps, events_lost=lost)
