"""Scenario files: time histories of a plant's inputs.

A scenario is a TOML file::

    description = "Powershift single swap (Morselli, Zanasi & Ferracin, section 5)"
    duration_s = 3.5
    dt_s = 0.001                  # default step; the CLI's --dt overrides it
    interpolation = "linear"      # or "hold" (zero-order hold at the step start)

    [inputs]
    engine_torque = 600.0                                 # constant
    p_c1 = [[0.0, 16.0], [0.5, 16.0], [0.7, 0.0]]          # piecewise linear
    p_c2 = [[0.0, 0.0], [0.5, 0.0], [0.5, 4.0], [0.7, 16.0]]  # a step: two points at 0.5 s
    force_1 = { sine = { amplitude = 11.0, frequency_hz = 0.45 } }

Inputs not listed keep their declared defaults, with a warning that lists
them once (``leave_at_default = ["p_c8"]`` names inputs left out on purpose,
which silences it).  A ``[replay]`` table takes inputs from a recorded file
(MF4, CSV, Parquet; :mod:`server.offline.replay`).  Integer inputs (gear selectors) are piecewise constant:
a point holds until the next one.  The format with examples:
``docs/scenarios.md``.

Sampling (the same for ``gearbox-hil simulate`` and for a scenario loaded
into the server, so lockstep runs equal offline runs bit for bit): step k
runs from t_k = k*dt to t_k+1; its input is the value just after t_k (so a
step at t_k applies from step k on), and with ``interpolation = "linear"`` its
rate is (u(t_k+1 -) - u(t_k +)) / dt, a first-order hold that is exact for
ramps whose breakpoints lie on the step grid.  Past the last point the last
value holds.  The inputs of step k are :meth:`CompiledScenario.apply`, the
``inputs`` stage of the run pipeline (:mod:`plant_models.run.stages`) in the
server's scenario playback and in the step-by-step offline runs alike;
:func:`offline_step` is that stage and the plant's step, for tests and
benchmarks.
"""

from __future__ import annotations

import logging
import math
import os
import stat
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from plant_models.config import ConfigError, ConfigReader, did_you_mean, find_config, load_toml
from plant_models.plant import Plant

BLOCK = 4096  # steps generated per table refill

log = logging.getLogger("gearbox_hil.scenario")


@dataclass(frozen=True)
class Profile:
    """One input's time history: constant, piecewise linear, or sine."""

    kind: str  # "const", "pwl", "sine"
    times: tuple[float, ...] = ()
    values: tuple[float, ...] = ()
    amplitude: float = 0.0
    frequency_hz: float = 0.0
    phase_rad: float = 0.0
    offset: float = 0.0
    unit: str = ""  # unit of the values when not the input's own (replayed recordings): converted when compiled

    def value_range(self) -> tuple[float, float]:
        if self.kind == "sine":
            return self.offset - abs(self.amplitude), self.offset + abs(self.amplitude)
        return min(self.values), max(self.values)

    def to_table(self, table, i: int, integer: bool, first_order_hold: bool) -> None:
        """Write this history as input ``i`` of a :class:`plant_models.offline.InputTable`."""
        if self.kind == "const":
            table.set_const(i, self.values[0])
        elif self.kind == "sine":
            table.set_sine(i, self.offset, self.amplitude, self.frequency_hz, self.phase_rad, first_order_hold)
        else:
            table.set_points(i, self.times, self.values, integer, first_order_hold)


@dataclass(frozen=True)
class Scenario:
    """A parsed scenario (independent of a plant until :meth:`compile`)."""

    source: str
    description: str
    duration: float
    dt: float | None
    interpolation: str
    profiles: dict[str, Profile]
    leave_at_default: tuple[str, ...] = ()

    def compile(self, plant: Plant, dt: float | None = None, warn: bool = True) -> "CompiledScenario":
        """Check the scenario against the plant's declared inputs and fix the step.

        Inputs the scenario does not set (and does not name in
        ``leave_at_default``) are listed in one logged warning (unless not
        ``warn``: a second compile of the same load): they stay at their
        declared defaults, which may not be what the author meant.
        """
        if any(p.unit for p in self.profiles.values()):  # replayed channels in other units: convert first
            return replace(self, profiles=self._in_input_units(plant)).compile(plant, dt, warn)
        step = dt if dt is not None else self.dt
        if step is None:
            raise ConfigError(self.source, "dt_s", "no step given (set dt_s in the scenario or pass --dt)")
        check_dt(step, self.source, "dt_s" if dt is None else "--dt")
        names = [s.name for s in plant.inputs]
        for name in self.leave_at_default:
            if name not in names:
                raise ConfigError(self.source, "leave_at_default", f"{name!r} is not an input of the {plant.kind} "
                                  f"plant; its inputs are {', '.join(names)}{did_you_mean(name, names)}")
            if name in self.profiles:
                raise ConfigError(self.source, "leave_at_default", f"{name!r} is also given in [inputs]")
        for name, prof in self.profiles.items():
            key = f"inputs.{name}"
            try:
                sig = plant.input_signal(name)
            except KeyError:
                raise ConfigError(self.source, key, f"not an input of the {plant.kind} plant; its inputs are "
                                  + ", ".join(names) + did_you_mean(name, names)) from None
            lo, hi = prof.value_range()
            if lo < sig.lo or hi > sig.hi:
                raise ConfigError(self.source, key, f"values span [{lo:g}, {hi:g}] {sig.unit}, outside the "
                                  f"declared range [{sig.lo:g}, {sig.hi:g}]")
            if sig.integer:
                if prof.kind == "sine":
                    raise ConfigError(self.source, key, "an integer input cannot be a sine")
                if any(v != round(v) for v in prof.values):
                    raise ConfigError(self.source, key, "an integer input needs whole-number values")
            if sig.allowed:
                if prof.kind == "sine":
                    raise ConfigError(self.source, key, "an input with a set of allowed values cannot be a sine")
                bad = [v for v in prof.values if v not in sig.allowed]
                if bad:
                    raise ConfigError(self.source, key, f"{bad[0]:g} is not an allowed value; allowed: "
                                      + ", ".join(f"{a:g}" for a in sig.allowed))
        unset = self.unset_inputs(plant)
        if unset and warn:
            one = len(unset) == 1
            log.warning("%s: the scenario does not set %d %s of the %s plant, which %s at %s declared default: %s; "
                        "name inputs left out on purpose in leave_at_default", self.source, len(unset),
                        "input" if one else "inputs", plant.kind, "stays" if one else "stay", "its" if one else "their",
                        ", ".join(f"{s.name} = {s.default:g} {s.unit}" for s in unset))
        return CompiledScenario(self, plant, step)

    def _in_input_units(self, plant: Plant) -> dict[str, Profile]:
        """The profiles with every value in its input's unit (``Profile.unit`` converted, then cleared)."""
        from plant_models.units import unit_gain

        out = {}
        for name, prof in self.profiles.items():
            if not prof.unit or name not in {s.name for s in plant.inputs}:
                out[name] = prof
                continue
            unit = plant.input_signal(name).unit
            gain = unit_gain(prof.unit, unit)
            if gain is None:
                raise ConfigError(self.source, f"replay.channels.{name}", f"the recording's unit {prof.unit!r} "
                                  f"does not convert to the input's {unit!r}")
            values = prof.values if gain == 1.0 else tuple(v * gain for v in prof.values)
            out[name] = replace(prof, values=values, unit="")
        return out

    def as_map(self, plant: Plant) -> dict:
        """The scenario as the map ``load_scenario`` takes, every history written out as its points.

        :func:`parse_scenario` reads the map back to the same profiles, bit
        for bit; replayed channels come as their points in their inputs'
        units (converted as :meth:`compile` converts them), so a server given
        the map plays what an offline run of the file plays without reading
        the recording itself (which lies with the client, not in the
        server's scenario folders).
        """
        inputs: dict = {}
        for name, prof in self._in_input_units(plant).items():
            if prof.kind == "const":
                inputs[name] = prof.values[0]
            elif prof.kind == "sine":
                inputs[name] = {"sine": {"amplitude": prof.amplitude, "frequency_hz": prof.frequency_hz,
                                         "phase_rad": prof.phase_rad, "offset": prof.offset}}
            else:
                inputs[name] = [[t, v] for t, v in zip(prof.times, prof.values)]
        out = {"description": self.description, "duration_s": self.duration, "interpolation": self.interpolation,
               "inputs": inputs}
        if self.dt is not None:
            out["dt_s"] = self.dt
        if self.leave_at_default:
            out["leave_at_default"] = list(self.leave_at_default)
        return out

    def unset_inputs(self, plant: Plant) -> list:
        """The plant's input signals this scenario neither sets nor names in ``leave_at_default``."""
        return [s for s in plant.inputs if s.name not in self.profiles and s.name not in self.leave_at_default]


class CompiledScenario:
    """A scenario bound to a plant and a step: writes the plant's inputs for step k.

    The profiles become an :class:`~plant_models.offline.InputTable`, which
    the compiled offline run evaluates step by step
    (:class:`plant_models.offline.Run`); for the server's playback, tick by
    tick, the same compiled evaluation fills blocks of rows of values and
    rates, so :meth:`apply` is two array copies (no per-signal Python work
    per tick) and both write the same inputs bit for bit.
    """

    def __init__(self, scenario: Scenario, plant: Plant, dt: float):
        from plant_models.offline import InputTable  # loads numba: not for --help

        self.scenario = scenario
        self.dt = float(dt)
        self.n_steps = int(round(scenario.duration / self.dt))
        self.n_in = plant.n_in
        self._names = [s.name for s in plant.inputs]
        self.table = InputTable(self.n_in)
        for k, sig in enumerate(plant.inputs):
            self.table.set_const(k, sig.default)
        linear = scenario.interpolation == "linear"
        for name, prof in scenario.profiles.items():
            k = plant.input_index(name)
            prof.to_table(self.table, k, plant.inputs[k].integer, linear)
        self._arrays = self.table.arrays()
        self._U = np.empty((BLOCK, self.n_in))
        self._R = np.empty((BLOCK, self.n_in))
        # the first step of the table's block: an array the server's compiled tick reads (scenario_player.py)
        self.k0_slot = np.array([-BLOCK], dtype=np.int64)

    def _fill(self, k0: int) -> None:
        from plant_models.offline import fill_inputs

        kind, times, values = self._arrays
        fill_inputs(kind, times, values, self.dt, k0, self._U, self._R)
        self.k0_slot[0] = k0

    @property
    def _k0(self) -> int:
        return int(self.k0_slot[0])

    def inputs_at(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(values, rates) applied during step k (views into the current table)."""
        if not (self._k0 <= k < self._k0 + BLOCK):
            self._fill((k // BLOCK) * BLOCK)
        j = k - self._k0
        return self._U[j], self._R[j]

    def apply(self, plant: Plant, k: int) -> None:
        """Write the inputs of step k into the plant."""
        u, r = self.inputs_at(k)
        plant.u[:] = u
        plant.u_rate[:] = r

    def initial_inputs(self) -> dict[str, float]:
        """Input values at t = 0 by name (for a plant reset); fills the table's first block for the first ticks."""
        u, _ = self.inputs_at(0)
        return {name: float(u[i]) for i, name in enumerate(self._names)}

    def start_inputs(self) -> dict[str, float]:
        """The same values as :meth:`initial_inputs`, evaluated alone (a compiled run needs no table)."""
        from plant_models.offline import fill_inputs

        kind, times, values = self._arrays
        u, r = np.empty((1, self.n_in)), np.empty((1, self.n_in))
        fill_inputs(kind, times, values, self.dt, 0, u, r)
        return {name: float(u[0, i]) for i, name in enumerate(self._names)}

    def time_of(self, k: int) -> float:
        return k * self.dt


def offline_step(plant: Plant, compiled: CompiledScenario, k: int) -> int:
    """Step k of a scenario run: apply the scenario's inputs, then one plant step.

    Returns the step's status word.  This is the whole per-step sequence of
    an offline run (:func:`server.offline.run.run_offline`); the server's
    scenario playback calls exactly this, so a lockstep run equals an
    offline run bit for bit.  Called in the real-time loop.
    """
    compiled.apply(plant, k)
    return plant.step(compiled.dt)


def check_dt(dt: float, source: str, key: str) -> None:
    if not (isinstance(dt, (int, float)) and math.isfinite(dt) and 5e-5 <= dt <= 1e-2):
        raise ConfigError(source, key, f"step must be between 5e-05 and 0.01 s, got {dt}")


def _profile(inp: ConfigReader, name: str) -> Profile:
    val = inp.raw(name)
    if isinstance(val, bool):
        raise inp.error(name, "must be a number, a list of [time, value] points or a {sine = {...}} table")
    if isinstance(val, (int, float)):
        if not math.isfinite(val):
            raise inp.error(name, f"must be finite, got {val}")
        return Profile("const", values=(float(val),))
    if isinstance(val, dict):
        tab = ConfigReader(val, inp.source, inp.key(name))
        sine = tab.sub("sine")
        p = Profile("sine", amplitude=sine.number("amplitude"), frequency_hz=sine.number("frequency_hz", nonnegative=True),
                    phase_rad=sine.number("phase_rad", 0.0), offset=sine.number("offset", 0.0))
        sine.reject_unknown()
        tab.reject_unknown()
        return p
    if isinstance(val, list):
        if not val:
            raise inp.error(name, "needs at least one [time, value] point")
        ts, vs = [], []
        for j, pt in enumerate(val):
            if (not isinstance(pt, list) or len(pt) != 2
                    or any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in pt)):
                raise inp.error(f"{name}[{j}]", f"must be a [time, value] pair of numbers, got {pt!r}")
            t, v = float(pt[0]), float(pt[1])
            if not (math.isfinite(t) and math.isfinite(v)):
                raise inp.error(f"{name}[{j}]", f"must be finite, got {pt!r}")
            if t < 0:
                raise inp.error(f"{name}[{j}]", f"time must be >= 0, got {t}")
            if ts and t < ts[-1]:
                raise inp.error(f"{name}[{j}]", f"times must not decrease ({t} after {ts[-1]})")
            if len(ts) >= 2 and t == ts[-1] == ts[-2]:
                raise inp.error(f"{name}[{j}]", f"at most two points may share a time ({t})")
            ts.append(t)
            vs.append(v)
        return Profile("pwl", times=tuple(ts), values=tuple(vs))
    raise inp.error(name, "must be a number, a list of [time, value] points or a {sine = {...}} table")


def parse_scenario(data: dict, source: str) -> Scenario:
    cfg = ConfigReader(data, source)
    desc = cfg.string("description", "")
    duration = cfg.number("duration_s", positive=True)
    if duration > 24 * 3600:
        raise cfg.error("duration_s", f"must be at most one day, got {duration}")
    dt = None
    if cfg.has("dt_s"):
        dt = cfg.number("dt_s", positive=True)
        check_dt(dt, source, "dt_s")
    interp = cfg.string("interpolation", "linear", choices=("linear", "hold"))
    inp = cfg.sub("inputs", required=False)
    profiles = {name: _profile(inp, name) for name in inp.data}
    if cfg.has("replay"):  # measured data as stimulus (server.offline.replay)
        from server.offline.replay import replay_profiles

        for name, (times, values, unit) in replay_profiles(cfg.sub("replay"), source, dt).items():
            if name in profiles:
                raise cfg.error(f"replay.channels.{name}", "is also given in [inputs]")
            profiles[name] = Profile("pwl", times=times, values=values, unit=unit)
    keep = cfg.raw("leave_at_default", [])
    if not isinstance(keep, list) or not all(isinstance(x, str) for x in keep):
        raise cfg.error("leave_at_default", "must be a list of input names")
    cfg.reject_unknown()
    return Scenario(source, desc, duration, dt, interp, profiles, tuple(keep))


def load_scenario(path: str | Path) -> Scenario:
    """Read a scenario file (a path, or the name of a file in scenarios/)."""
    p = find_config(path, folder="scenarios")
    return parse_scenario(load_toml(p), str(p))


DEFAULT_MAX_SCENARIO_BYTES = 1 << 20
MAX_LISTED = 1000  # scenario files list_scenarios names at most


@dataclass(frozen=True)
class ScenarioFolders:
    """Where the ``load_scenario`` control request may read scenario files, and how much of one.

    A request names a file *relative to* one of ``folders`` (a name such as
    ``powershift_single_swap`` gets ``.toml`` appended; a path that starts
    with the folder's own name, ``scenarios/powershift_single_swap.toml``,
    means the file inside it); absolute paths and ``..`` are refused, and so is a name whose real path (symlinks
    resolved) leaves its folder.  Only regular files of at most
    ``max_bytes`` are read: a FIFO, a device or a socket is refused before
    a byte is read, and the file is opened non-blocking so that no open can
    wait either.  Called off the real-time thread (the control handler reads
    in a worker thread).

    Attributes
    ----------
    folders
        The scenario folders, searched in order (absolute paths).
    max_bytes
        The longest scenario file read, bytes.
    """

    folders: tuple[Path, ...]
    max_bytes: int = DEFAULT_MAX_SCENARIO_BYTES

    @classmethod
    def default(cls) -> "ScenarioFolders":
        """The project's ``scenarios/`` folder, 1 MiB."""
        from plant_models.config import repo_root

        return cls((repo_root() / "scenarios",))

    def resolve(self, name: str) -> Path:
        """The file ``name`` refers to inside the folders; ConfigError (key ``path``) if it is not allowed or absent."""
        given = Path(name)
        if not name or "\x00" in name:
            raise ConfigError(repr(name), "path", "not a file name")
        if given.is_absolute() or given.drive:
            raise ConfigError(name, "path", "absolute paths are not accepted; name a file relative to the scenario "
                              f"folders ({self._where()})")
        if ".." in given.parts:
            raise ConfigError(name, "path", "'..' is not accepted; name a file inside the scenario folders "
                              f"({self._where()})")
        if not given.suffix:
            given = given.with_name(given.name + ".toml")
        for folder in self.folders:
            for inside in _inside_parts(folder, given):
                cand = folder / inside
                if not os.path.lexists(cand):
                    continue
                real, root = os.path.realpath(cand), os.path.realpath(folder)
                if os.path.commonpath([real, root]) != root:
                    raise ConfigError(name, "path", f"leads outside the scenario folder {folder} (a symbolic link)")
                return cand
        names = sorted({f.name[:-5] for d in self.folders if d.is_dir() for f in d.iterdir() if f.suffix == ".toml"})
        raise ConfigError(name, "path", f"no such scenario in {self._where()} (a path is taken relative to a "
                          "scenario folder)" + (did_you_mean(given.stem, names) or ""))

    def _where(self) -> str:
        return ", ".join(str(f) for f in self.folders)

    def listing(self, max_entries: int = MAX_LISTED) -> tuple[list[dict], bool]:
        """The scenario files of the folders as ``load_scenario`` names them, and whether the list was cut.

        Each entry is ``{"path": "sub/name.toml", "folder": "<the folder's own name>"}``: every
        ``*.toml`` in a folder and in its sub-folders (two levels deep), in
        name order per folder.  Hidden names, entries whose real path leaves
        their folder (a symbolic link) and names an earlier folder already
        has (``load_scenario`` reads that one) are left out; at most
        ``max_entries``.  Lists only; reads no file.  Off the loop's thread.
        """
        out: list[dict] = []
        seen: set[str] = set()
        for folder in self.folders:
            root = os.path.realpath(folder)
            if not os.path.isdir(root):
                continue
            for rel in _tomls_inside(folder, root):
                if rel in seen:
                    continue
                if len(out) >= max_entries:
                    return out, True
                seen.add(rel)
                out.append({"path": rel, "folder": folder.name})
        return out, False

    def read(self, name: str) -> "Scenario":
        """Resolve, read (regular files only, at most ``max_bytes``) and parse the scenario ``name``.

        Raises
        ------
        ConfigError
            Not allowed, not found, not a regular file, too long, not UTF-8
            TOML, or not a valid scenario.
        """
        p = self.resolve(name)
        try:  # O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it
            fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise ConfigError(str(p), "", f"cannot be opened ({exc.strerror})") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode)
                        or stat.S_ISBLK(st.st_mode) else "a directory" if stat.S_ISDIR(st.st_mode) else "a socket"
                        if stat.S_ISSOCK(st.st_mode) else "not a regular file")
                raise ConfigError(str(p), "", f"is {kind}; only regular scenario files are read")
            if st.st_size > self.max_bytes:
                raise ConfigError(str(p), "", f"{st.st_size} bytes, more than the limit of {self.max_bytes} "
                                  "([scenarios] max_bytes)")
            chunks, n = [], 0
            while n <= self.max_bytes:  # a file that grows while it is read is still cut at the limit
                b = os.read(fd, self.max_bytes + 1 - n)
                if not b:
                    break
                chunks.append(b)
                n += len(b)
            if n > self.max_bytes:
                raise ConfigError(str(p), "", f"longer than the limit of {self.max_bytes} bytes ([scenarios] "
                                  "max_bytes)")
        finally:
            os.close(fd)
        raw = b"".join(chunks)
        try:
            data = tomllib.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise ConfigError(str(p), "", "not UTF-8 text") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(str(p), "", f"not valid TOML ({exc})") from None
        return parse_scenario(data, str(p))


def _tomls_inside(folder: Path, root: str, depth: int = 2) -> list[str]:
    """Relative paths (``/``-separated) of the ``*.toml`` files in ``folder`` whose real path stays in ``root``."""
    out: list[str] = []
    todo = [("", 0)]
    while todo:
        rel, level = todo.pop(0)
        try:
            entries = sorted(os.scandir(os.path.join(folder, rel)), key=lambda e: e.name)
        except OSError:  # unreadable: nothing to offer from it
            continue
        for e in entries:
            if e.name.startswith("."):
                continue
            real = os.path.realpath(e.path)
            if os.path.commonpath([real, root]) != root:  # a symbolic link out of the folder
                continue
            r = f"{rel}/{e.name}" if rel else e.name
            try:
                if e.is_dir():
                    if level < depth:
                        todo.append((r, level + 1))
                elif e.name.endswith(".toml") and e.is_file():
                    out.append(r)
            except OSError:
                continue
    return out


def _inside_parts(folder: Path, given: Path) -> list[Path]:
    """The paths inside ``folder`` that the relative path ``given`` may mean, the literal one first.

    ``given`` may also start with the folder's own name or trailing folders
    (``scenarios/powershift_single_swap.toml`` for the folder ``<project>/scenarios``,
    as a path from the project folder is written); those leading parts are
    dropped.  ``given`` has no ``..`` and is not absolute (checked by the caller).
    """
    out = [given]
    parts, tail = given.parts, folder.parts
    for k in range(1, min(len(parts) - 1, len(tail)) + 1):
        if parts[:k] == tail[len(tail) - k:]:
            out.append(Path(*parts[k:]))
    return out

