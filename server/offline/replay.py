"""Measured data as stimulus: a scenario's ``[replay]`` table plays recorded channels into the plant's inputs.

::

    [replay]
    file = "recordings/rec_0001.mf4"   # MF4 (asammdf), CSV, Parquet, or a BLF/ASC bus log, in the scenario
                                       # file's folder or below
    dbc = "powershift.dbc"             # a bus log's DBC: in the scenario's folder or below, or a name in configs/
    window_s = [2.0, 5.0]              # optional: the part of the recording played, recording time, s
    time_offset_s = 0.0                # optional: recording time t plays at t - window start + offset
    time_channel = "t"                 # CSV/Parquet: the time column (default "t"); MF4: the master channel
    [replay.channels]                  # plant input = channel, or a table
    p_c1 = "p_c1"
    engine_torque = { channel = "EngTrq", scale = 1.0, offset = 0.0 }
    w_set = { channel = "EngineSpeed", unit = "rpm" }   # converted to the input's unit when compiled

Each replayed input becomes a piecewise-linear history through the recorded
samples, so the scenario's sampling rule resamples it to the step exactly as
it does written points: with ``interpolation = "linear"`` a first-order
hold, with ``"hold"`` the last sample at or before the step's start.
Sample times that lie on the step grid (to 1e-6 of a step) are put on it
exactly, so a recording made at the step replays its samples unchanged.
``scale`` and ``offset`` act in the recording's unit, then the unit (the
channel's own in MF4 and Parquet files with units, or ``unit``) converts to
the input's.  A bus log's channels are DBC signals (``Signal`` or
``Message.Signal``), decoded by :mod:`server.offline.bus_log`, in the DBC's
units.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from plant_models.config import ConfigError, ConfigReader

SUFFIXES = (".mf4", ".mdf", ".csv", ".parquet", ".blf", ".asc")
BUS_LOGS = (".blf", ".asc")


def _read(path: Path, channels: list[str], time_channel: str, source: str) -> dict[str, tuple]:
    """channel -> (times s, values, unit) from an MF4, CSV or Parquet file."""
    suffix = path.suffix.lower()
    out = {}
    if suffix in (".mf4", ".mdf"):
        try:
            from asammdf import MDF
        except ImportError:
            raise ConfigError(source, "replay.file", "reading MF4 needs asammdf (pip install 'gearbox-hil[record]')") \
                from None
        with MDF(path) as mdf:
            known = {ch.name for grp in mdf.groups for ch in grp.channels}
            for ch in channels:
                if ch not in known:
                    raise ConfigError(source, "replay.channels", f"{ch!r} is not a channel of {path.name}")
                sig = mdf.get(ch)
                out[ch] = (np.asarray(sig.timestamps, float), np.asarray(sig.samples, float), sig.unit or "")
        return out
    if suffix == ".parquet":
        from server.offline.traces import _pyarrow

        _, pq = _pyarrow()
        table = pq.read_table(path)
        names, units = table.column_names, {}
        for f in table.schema:
            units[f.name] = (f.metadata or {}).get(b"unit", b"").decode()
        cols = {n: table.column(n).to_numpy().astype(float) for n in names if n in (*channels, time_channel)}
    elif suffix == ".csv":
        names, data = _read_csv(path, source)
        cols, units = {n: data[:, j] for j, n in enumerate(names)}, {}
    else:
        raise ConfigError(source, "replay.file", f"{path.name}: not a recording this reads ({', '.join(SUFFIXES)})")
    if time_channel not in cols:
        raise ConfigError(source, "replay.time_channel", f"{time_channel!r} is not a column of {path.name}")
    for ch in channels:
        if ch not in cols:
            raise ConfigError(source, "replay.channels", f"{ch!r} is not a column of {path.name}")
        out[ch] = (cols[time_channel], cols[ch], units.get(ch, ""))
    return out


def _read_csv(path: Path, source: str) -> tuple[list[str], np.ndarray]:
    """A CSV trace: its header's names and its rows (one line, not a traceback, for a file without rows)."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        names = fh.readline().strip().split(",")
        has_rows = any(ln.strip() for ln in fh)
    if not has_rows:
        raise ConfigError(source, "replay.file", f"{path.name} has a header but no rows" if names != [""]
                          else f"{path.name} is empty")
    try:
        data = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    except ValueError as exc:  # numpy names the row: "could not convert string 'abc' to float64 at row 0, column 2."
        raise ConfigError(source, "replay.file", f"{path.name}: a row is not {len(names)} numbers as the header "
                          f"names ({str(exc).splitlines()[0]})") from None
    if data.shape[1] != len(names):
        raise ConfigError(source, "replay.file", f"{path.name}: rows have {data.shape[1]} values, the header names "
                          f"{len(names)}")
    return names, data


def _channel(chans: ConfigReader, name: str) -> tuple[str, float, float, str | None]:
    """(channel, scale, offset, unit or None) of one input's entry."""
    val = chans.raw(name)
    if isinstance(val, str) and val:
        return val, 1.0, 0.0, None
    if not isinstance(val, dict):
        raise chans.error(name, "must be a channel name or { channel = \"...\", scale, offset, unit }")
    t = chans.sub(name)
    spec = (t.string("channel"), t.number("scale", 1.0), t.number("offset", 0.0),
            t.string("unit") if t.has("unit") else None)
    t.reject_unknown()
    return spec


def _dbc(cfg: ConfigReader, base: Path) -> Path:
    """A bus log's DBC: a file in the scenario's folder or below, or the name of one of the project's (configs/)."""
    from plant_models.config import did_you_mean, repo_root

    if not cfg.has("dbc"):
        raise cfg.error("dbc", "a bus log is decoded through a DBC: give dbc = \"FILE.dbc\"")
    name = cfg.string("dbc")
    path = (base / name).resolve()
    if base in path.parents and path.is_file():
        return path
    shipped = repo_root() / "configs"
    if Path(name).name == name and (shipped / name).is_file():  # a bare name: one of the project's DBCs
        return shipped / name
    raise cfg.error("dbc", f"{name!r} is neither a file inside the scenario's folder {base} nor a DBC in configs/"
                    + did_you_mean(name, sorted(p.name for p in shipped.glob("*.dbc"))))


def replay_profiles(cfg: ConfigReader, scenario_source: str, dt: float | None) -> dict:
    """The ``[replay]`` table as input name -> ``(times, values, unit)``: the points of a piecewise-linear profile.

    The scenario format (:mod:`server.offline.scenario`) makes them profiles; this module does not import it, so
    the two stay apart (the scenario imports the replay only for a ``[replay]`` table).
    """
    if not Path(scenario_source).is_file():  # e.g. a scenario sent over the control channel as a map
        raise cfg.error("file", "a [replay] needs a scenario file: the recording is read from its folder")
    base = Path(scenario_source).resolve().parent
    path = (base / cfg.string("file")).resolve()
    if base not in path.parents:  # a scenario reads only below its own folder (the server loads scenario files)
        raise cfg.error("file", f"{cfg.string('file')!r} is not inside the scenario's folder {base}")
    if not path.is_file():
        raise cfg.error("file", f"{path}: no such file")
    window = cfg.numbers("window_s", 2, nonnegative=True) if cfg.has("window_s") else None
    if window is not None and window[1] <= window[0]:
        raise cfg.error("window_s", f"the window ends before it starts: [{window[0]:g}, {window[1]:g}]")
    shift = cfg.number("time_offset_s", 0.0)
    time_channel = cfg.string("time_channel", "t")
    chans = cfg.sub("channels")
    specs = {name: _channel(chans, name) for name in chans.data}
    if not specs:
        raise cfg.error("channels", "names no input")
    names = sorted({s[0] for s in specs.values()})
    if path.suffix.lower() in BUS_LOGS:
        from server.offline.bus_log import read_bus_log

        data = read_bus_log(path, _dbc(cfg, base), names, cfg.source)
    elif cfg.has("dbc"):
        raise cfg.error("dbc", f"only a bus log ({', '.join(BUS_LOGS)}) is decoded through a DBC")
    cfg.reject_unknown()
    if path.suffix.lower() not in BUS_LOGS:
        data = _read(path, names, time_channel, cfg.source)
    profiles = {}
    for name, (ch, scale, offset, unit) in specs.items():
        t, v, file_unit = data[ch]
        keep = np.isfinite(t) & np.isfinite(v)
        if window is not None:
            keep &= (t >= window[0]) & (t <= window[1])
        t = t[keep] - (window[0] if window is not None else 0.0) + shift
        v = v[keep] * scale + offset
        if dt is not None:  # samples on the step grid go on it exactly (the step's own rounding: k * dt)
            k = np.round(t / dt)
            on = np.abs(t / dt - k) < 1e-6
            t = np.where(on, k * dt, t)
        v, t = v[t >= 0.0], t[t >= 0.0]
        if len(t) == 0:
            raise ConfigError(cfg.source, f"replay.channels.{name}", f"no sample of {ch!r} in the played window")
        if np.any(np.diff(t) < 0):
            raise ConfigError(cfg.source, f"replay.channels.{name}", f"the times of {ch!r} decrease")
        if not all(math.isfinite(x) for x in (scale, offset)):
            raise ConfigError(cfg.source, f"replay.channels.{name}", "scale and offset must be finite")
        profiles[name] = (tuple(t.tolist()), tuple(v.tolist()), unit if unit is not None else file_unit)
    return profiles
