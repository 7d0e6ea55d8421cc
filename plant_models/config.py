"""Reading TOML configuration files with errors that name the file, the key and the problem.

Every user-facing file (plant configs, scenarios, I/O configs) is read
through :class:`ConfigReader`, so a mistake produces one clear line such as::

    configs/powershift.toml: [clutch].piston_area_m2: must be > 0, got -0.01

and never a traceback.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import sys
import typing
from pathlib import Path
from typing import Any, Iterable

from .errors import ConfigError  # noqa: F401  (re-exported: the config readers raise it)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


def load_toml(path: str | Path) -> dict:
    """Parse a TOML file; a missing file, bytes that are not UTF-8 or a syntax error become a ConfigError."""
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise ConfigError(str(path), "", "file not found") from None
    except IsADirectoryError:
        raise ConfigError(str(path), "", "is a directory, not a file") from None
    except OSError as exc:
        raise ConfigError(str(path), "", f"cannot be read ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")  # TOML is UTF-8 by definition (what tomllib.load does, without its traceback)
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(str(path), "", f"not UTF-8 text: byte 0x{raw[exc.start]:02x} on line {line}; TOML files "
                          "must be saved as UTF-8") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), "", f"not valid TOML ({exc})") from None


def closest(word: str, known: Iterable[str]) -> str | None:
    """The known name closest to a misspelled ``word`` (difflib's similarity >= 0.6), or None."""
    close = difflib.get_close_matches(word, [k for k in known if k != word], n=1, cutoff=0.6)
    return close[0] if close else None


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the known name closest to a misspelled ``word``, else ``""``.

    For messages about a name a user typed (a config, a scenario, a signal,
    a key, a choice); appended after the message's own list of names.
    """
    close = closest(word, known)
    return f"; did you mean {close!r}?" if close else ""


def _merge(base: dict, over: dict) -> dict:
    """Tables merge key by key (recursively); any other value in ``over`` replaces the base's."""
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load_plant_toml(path: str | Path) -> dict:
    """Parse a plant config, resolving ``extends = "other.toml"`` (a path relative to the file).

    A config that extends another holds only what it changes: its tables are
    merged into the other file's key by key.  Chains are followed; a cycle,
    a missing base or a non-string ``extends`` is a ConfigError.
    """
    seen: list[Path] = []
    layers = []
    p = Path(path)
    while True:
        key = p.resolve()
        if key in seen:
            raise ConfigError(str(p), "extends", "configs extend each other in a cycle: "
                              + " -> ".join(str(x.name) for x in seen + [key]))
        seen.append(key)
        data = load_toml(p)
        layers.append(data)
        base = data.get("extends")
        if base is None:
            break
        if not isinstance(base, str) or not base:
            raise ConfigError(str(p), "extends", f"must be the file name of another config, got {base!r}")
        nxt = p.parent / base
        if not nxt.exists():
            raise ConfigError(str(p), "extends", f"no such config {str(nxt)!r}")
        p = nxt
    merged: dict = {}
    for data in reversed(layers):
        merged = _merge(merged, {k: v for k, v in data.items() if k != "extends"})
    return merged


_MISSING = object()


class ConfigReader:
    """Typed access to a parsed TOML table with error messages that carry the key path.

    ``reader.sub("clutch").number("piston_area_m2", positive=True)`` reports
    ``file: [clutch].piston_area_m2: ...`` on any problem.  Unknown keys can be
    rejected with :meth:`reject_unknown`, so typos do not pass silently.
    """

    def __init__(self, data: dict, source: str, prefix: str = ""):
        if not isinstance(data, dict):
            raise ConfigError(source, prefix or "(top level)", "must be a table")
        self.data = data
        self.source = source
        self.prefix = prefix
        self._used: set[str] = set()

    # -- paths and errors ------------------------------------------------------
    def key(self, name: str) -> str:
        return f"{self.prefix}.{name}" if self.prefix else name

    def error(self, name: str, problem: str) -> ConfigError:
        return ConfigError(self.source, self.key(name), problem)

    def has(self, name: str) -> bool:
        return name in self.data

    def raw(self, name: str, default: Any = _MISSING) -> Any:
        self._used.add(name)
        if name not in self.data:
            if default is _MISSING:
                raise self.error(name, "is required but missing")
            return default
        return self.data[name]

    # -- typed getters -----------------------------------------------------------
    def sub(self, name: str, required: bool = True) -> "ConfigReader":
        self._used.add(name)
        if name not in self.data:
            if required:
                raise ConfigError(self.source, f"[{self.key(name)}]", "table is required but missing")
            return ConfigReader({}, self.source, self.key(name))
        val = self.data[name]
        if not isinstance(val, dict):
            raise ConfigError(self.source, self.key(name), "must be a table")
        return ConfigReader(val, self.source, self.key(name))

    def number(self, name: str, default: Any = _MISSING, *, positive: bool = False,
               nonnegative: bool = False, lo: float | None = None, hi: float | None = None) -> float:
        val = self.raw(name, default)
        return _check_number(self, name, val, positive, nonnegative, lo, hi)

    def integer(self, name: str, default: Any = _MISSING, *, lo: int | None = None, hi: int | None = None) -> int:
        val = self.raw(name, default)
        if isinstance(val, bool) or not isinstance(val, int):
            raise self.error(name, f"must be an integer, got {_describe(val)}")
        if lo is not None and val < lo:
            raise self.error(name, f"must be >= {lo}, got {val}")
        if hi is not None and val > hi:
            raise self.error(name, f"must be <= {hi}, got {val}")
        return val

    def string(self, name: str, default: Any = _MISSING, choices: Iterable[str] | None = None) -> str:
        val = self.raw(name, default)
        if not isinstance(val, str):
            raise self.error(name, f"must be a string, got {_describe(val)}")
        if choices is not None:
            choices = list(choices)
            if val not in choices:
                raise self.error(name, f"must be one of {', '.join(repr(c) for c in choices)}, got {val!r}"
                                 + did_you_mean(val, choices))
        return val

    def boolean(self, name: str, default: Any = _MISSING) -> bool:
        val = self.raw(name, default)
        if not isinstance(val, bool):
            raise self.error(name, f"must be true or false, got {_describe(val)}")
        return val

    def numbers(self, name: str, length: int | None = None, default: Any = _MISSING, *,
                positive: bool = False, nonnegative: bool = False) -> list[float]:
        val = self.raw(name, default)
        if not isinstance(val, list):
            raise self.error(name, f"must be a list of numbers, got {_describe(val)}")
        if length is not None and len(val) != length:
            raise self.error(name, f"must have {length} entries, got {len(val)}")
        return [_check_number(self, f"{name}[{k}]", v, positive, nonnegative, None, None) for k, v in enumerate(val)]

    def reject_unknown(self, allowed: Iterable[str] | None = None) -> None:
        """Raise on keys that were not read (or are not in ``allowed``)."""
        known = set(allowed) if allowed is not None else self._used
        for k in self.data:
            if k not in known:
                raise self.error(k, "unknown key (check the spelling; see the default config for the keys)"
                                 + did_you_mean(k, sorted(known)))


def _describe(val: Any) -> str:
    if isinstance(val, bool):
        return f"boolean {val}"
    if isinstance(val, (int, float)):
        return f"number {val}"
    if isinstance(val, str):
        return f"string {val!r}"
    if isinstance(val, list):
        return "a list"
    if isinstance(val, dict):
        return "a table"
    return type(val).__name__


def _check_number(reader: ConfigReader, name: str, val: Any, positive: bool, nonnegative: bool,
                  lo: float | None, hi: float | None) -> float:
    if isinstance(val, bool) or not isinstance(val, (int, float)):
        raise reader.error(name, f"must be a number, got {_describe(val)}")
    x = float(val)
    if not math.isfinite(x):
        raise reader.error(name, f"must be finite, got {val}")
    if positive and not x > 0:
        raise reader.error(name, f"must be > 0, got {val}")
    if nonnegative and not x >= 0:
        raise reader.error(name, f"must be >= 0, got {val}")
    if lo is not None and x < lo:
        raise reader.error(name, f"must be >= {lo}, got {val}")
    if hi is not None and x > hi:
        raise reader.error(name, f"must be <= {hi}, got {val}")
    return x


def read_params(cfg: ConfigReader, params_type: type) -> Any:
    """A frozen parameter dataclass read field by field from the keys of the same names.

    For plants whose config is flat: a field of type ``float``, ``int``,
    ``bool``, ``str`` or ``tuple[float, ...]`` (``tuple[float, float]`` fixes
    the length) is read with the checks named in its metadata
    (``positive``, ``nonnegative``, ``lo``, ``hi``; ``choices`` for strings),
    e.g. ``inertia_kg_m2: tuple[float, float] = field(default=(1.0, 2.0),
    metadata=dict(positive=True))``.  A field without a default is required.
    """
    hints = typing.get_type_hints(params_type)
    values = {}
    for f in dataclasses.fields(params_type):
        default = f.default if f.default is not dataclasses.MISSING else _MISSING
        kind, checks = hints[f.name], dict(f.metadata)
        if kind is float:
            values[f.name] = cfg.number(f.name, default, **checks)
        elif kind is int:
            values[f.name] = cfg.integer(f.name, default, **checks)
        elif kind is bool:
            values[f.name] = cfg.boolean(f.name, default)
        elif kind is str:
            values[f.name] = cfg.string(f.name, default, **checks)
        elif typing.get_origin(kind) is tuple:
            args = typing.get_args(kind)
            length = None if Ellipsis in args else len(args)
            listed = list(default) if default is not _MISSING else _MISSING
            values[f.name] = tuple(cfg.numbers(f.name, length, listed, **checks))
        else:
            raise TypeError(f"{params_type.__name__}.{f.name}: read_params reads numbers, flags, strings and "
                            f"tuples of numbers, not {kind}")
    return params_type(**values)


def repo_root() -> Path:
    """The project directory (the parent of the plant_models package)."""
    return Path(__file__).resolve().parent.parent


def resolve_config(name_or_path: str | Path, folder: str = "configs", suffix: str = ".toml") -> Path:
    """A path as given if it exists, else ``<project>/<folder>/<name>.toml``.

    Lets users write ``gearbox-hil simulate powershift`` as well as a path.
    """
    p = Path(name_or_path)
    if p.exists():
        return p
    cand = repo_root() / folder / (p.name if p.suffix else p.name + suffix)
    if cand.exists():
        return cand
    return p


def find_config(name_or_path: str | Path, folder: str = "configs", suffix: str = ".toml") -> Path:
    """:func:`resolve_config`, or a ConfigError that suggests the closest existing name.

    A bare name (``powershfit``) is compared with the files in the current
    folder (the user's own, first) and then in ``<project>/<folder>``, a path (``configs/powershfit.toml``) with the
    files in its own folder, and the suggestion is written the way the user
    wrote the name.
    """
    p = resolve_config(name_or_path, folder, suffix)
    if p.exists():
        return p
    given = Path(name_or_path)
    bare = given.parent == Path(".")
    word = given.stem if given.suffix == suffix else given.name
    # a bare name is first the user's own file next to them (the current folder), then a shipped one
    close = None
    for where in ([Path("."), repo_root() / folder] if bare else [given.parent]):
        try:
            files = sorted(f.name for f in where.iterdir() if f.name.endswith(suffix))
        except OSError:
            files = []
        # compare the names without their suffix (a shared ".toml" would make any two names look alike)
        close = closest(word, [f[: -len(suffix)] for f in files])
        if close is not None:
            break
    if close is not None:
        close += given.suffix if given.suffix == suffix else ""
        hint = f"; did you mean {close if bare else str(given.parent / close)!r}?"
    elif bare:
        hint = f" (neither as a path nor as a name in {folder}/; `gearbox-hil list` shows the names)"
    else:
        hint = ""
    raise ConfigError(str(name_or_path), "", "file not found" + hint)
