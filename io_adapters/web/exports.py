"""A capture of the workspace (:mod:`io_adapters.web.capture`) as a file to download: CSV, Parquet or MF4.

Every format holds the capture's ticks, run times and float64 values
unchanged, so each reads back bit for bit as the ZeroMQ state stream of the
same ticks:

* **CSV**: ``tick,t,NAME...``, each value written with Python's ``repr``
  (the shortest text that reads back as the same float64);
* **Parquet** (pyarrow, the ``campaign`` extra): the columns ``tick``
  (int64), ``t`` and one float64 column per signal; the schema's metadata
  holds the trigger (``gearbox_hil.trigger``, JSON) and the units
  (``gearbox_hil.units``);
* **MF4** (asammdf, the ``record`` extra), as the server's recordings are
  written: one channel group, the run time as its master, a ``tick``
  channel and one channel per signal with its unit.

The file is made in memory from the capture (at most
:data:`~io_adapters.web.capture.MAX_ROWS` rows of
:data:`~io_adapters.web.capture.MAX_SIGNALS` signals); nothing is read from
or written to disk.
"""

from __future__ import annotations

import io
import json

import numpy as np

FORMATS = {"csv": "text/csv", "parquet": "application/vnd.apache.parquet", "mf4": "application/octet-stream"}
PACKAGES = {"parquet": ("pyarrow", "campaign"), "mf4": ("asammdf", "record")}


class ExportError(Exception):
    """A format this installation cannot write (its package is missing): one line."""


def capture_file(cap, fmt: str, units: dict[str, str]) -> bytes:
    """The capture ``cap`` in format ``fmt`` (a key of :data:`FORMATS`); ``units``: signal -> unit."""
    if fmt == "csv":
        return cap.csv().encode()
    try:
        return _parquet(cap, units) if fmt == "parquet" else _mf4(cap, units)
    except ImportError:
        package, extra = PACKAGES[fmt]
        raise ExportError(f"a {fmt} download needs {package} (pip install 'gearbox-hil[{extra}]')") from None


def _parquet(cap, units: dict[str, str]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols = {"tick": pa.array(np.asarray(cap.ticks, np.int64)), "t": pa.array(np.asarray(cap.t, np.float64))}
    for k, name in enumerate(cap.names):
        cols[name] = pa.array(np.ascontiguousarray(cap.values[:, k], np.float64))
    meta = {"gearbox_hil.trigger": json.dumps(dict(cap.trigger, tick=cap.at)),
            "gearbox_hil.units": json.dumps({n: units.get(n, "") for n in cap.names})}
    table = pa.table(cols).replace_schema_metadata(meta)
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def _mf4(cap, units: dict[str, str]) -> bytes:
    from asammdf import MDF, Signal

    t = np.ascontiguousarray(cap.t, np.float64)
    sigs = [Signal(np.asarray(cap.ticks, np.int64), t, name="tick", unit="", comment="plant steps since the last reset")]
    sigs += [Signal(np.ascontiguousarray(cap.values[:, k], np.float64), t, name=n, unit=units.get(n, ""))
             for k, n in enumerate(cap.names)]
    mdf = MDF(version="4.10")
    try:
        trig = cap.trigger
        mdf.append(sigs, comment=f"gearbox-hil capture {cap.id}: {trig['signal']} {trig['condition']} {trig['level']!r} "
                                 f"at tick {cap.at}")
        out = io.BytesIO()
        mdf.save(out)
        return out.getvalue()
    finally:
        mdf.close()


__all__ = ["FORMATS", "ExportError", "capture_file"]
