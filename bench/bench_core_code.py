"""The machine code of the core's C entry points against an older checkout: its size, and what differs.

``bench/bench_step_code.py`` compares the plants' compiled steps, which call
the core through an address and so contain none of its code.  This compares
the core itself: its three C entry points (the step, the start, the mode
solver; :mod:`plant_models.core.entry`), each one object with every kernel it
calls linked in and optimised together with it.  In this checkout and in a
baseline checkout (fresh processes; each compiles or loads its entry points
from its own numba cache, as a run does), the object code numba cached for
each entry point is disassembled (``objdump -d``) and normalised as
``bench_step_code.py`` does (symbols, labels, addresses and immediates
masked).  Prints the ``.text`` bytes and instruction count of each side and
the number of differing lines::

    python bench/bench_core_code.py --baseline ../gearbox-hil-base

Needs binutils (``objdump``, ``size``).  A cold cache compiles the core
first (minutes of CPU).
"""

from __future__ import annotations

import argparse
import difflib
import json
import pickle
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from _host import host_line  # noqa: E402  (bench/ is first on the path)

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import glob, json, os, sys
sys.path[:0] = [sys.argv[1]]
from plant_models.core import entry
out = {}
for func, signature in entry.entry_points():
    compiled = entry._compile_entry(func, signature, dict(error_model="numpy"))  # loads from the cache when warm
    cache_file = compiled._cache._cache_file
    stem = os.path.join(cache_file._cache_path, cache_file._index_name[:-len(".nbi")])
    out[func.__name__] = sorted(glob.glob(stem + ".*.nbc"), key=os.path.getmtime)[-1]
print(json.dumps(out))
"""


def _objects(value, found: list[bytes], depth: int = 0) -> list[bytes]:
    """The ELF objects inside an unpickled numba cache entry (its code library's object code)."""
    if isinstance(value, (bytes, bytearray)) and value[:4] == b"\x7fELF":
        found.append(bytes(value))
    elif isinstance(value, (tuple, list)) and depth < 8:
        for item in value:
            _objects(item, found, depth + 1)
    elif isinstance(value, dict) and depth < 8:
        for item in value.values():
            _objects(item, found, depth + 1)
    return found


def disassemble(cache_data: Path) -> tuple[int, list[str]]:
    """(``.text`` bytes, normalised instruction lines) of the object code in a numba cache data file."""
    import numba  # noqa: F401  (the classes the cache entry unpickles into)

    text = 0
    body: list[str] = []
    for obj in _objects(pickle.loads(cache_data.read_bytes()), []):
        with tempfile.NamedTemporaryFile(suffix=".o") as tmp:
            tmp.write(obj)
            tmp.flush()
            text += int(subprocess.run(["size", tmp.name], capture_output=True, text=True,
                                       check=True).stdout.splitlines()[1].split()[0])
            listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", tmp.name], capture_output=True,
                                     text=True, check=True).stdout
        for line in listing.splitlines():
            m = re.match(r"^\s+[0-9a-f]+:\s+(.*)$", line)
            if m:
                insn = m.group(1).split("#")[0].split("<")[0].strip()
                body.append(re.sub(r"0x[0-9a-f]+|\$-?\d+|\b[0-9a-f]{4,}\b", "X", insn))
    return text, body


def entry_files(checkout: Path) -> dict[str, str]:
    out = subprocess.run([sys.executable, "-c", PROBE, str(checkout)], cwd=checkout, capture_output=True,
                         text=True, check=True, env={"PYTHONPATH": str(checkout), "PATH": "/usr/bin:/bin"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="checkout of the older version")
    args = ap.parse_args(argv)
    before, after = entry_files(Path(args.baseline).resolve()), entry_files(ROOT)
    print("| entry point | .text bytes before / after | instructions before / after | differing lines |")
    print("| --- | --- | --- | --- |")
    for name in after:
        (tb, b), (ta, a) = disassemble(Path(before[name])), disassemble(Path(after[name]))
        diff = sum(1 for line in difflib.unified_diff(b, a, lineterm="", n=0)
                   if line[:1] in "+-" and line[:3] not in ("+++", "---"))
        print(f"| `{name}` | {tb} / {ta} | {len(b)} / {len(a)} | {diff} |")
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
