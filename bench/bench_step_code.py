"""The machine code of the plants' compiled steps against an older checkout: the same code, or what differs.

A timing on a loaded host cannot show a change of a few instructions; the code
itself can.  For each plant step (``chain``, ``dct``, ``powershift`` and the
8HP's ``transmission_step``), in this checkout and in a baseline checkout (in
fresh processes), the step's Python function is compiled once more without
numba's cache (its callees load from the cache, as the plant's own step links
them) and its assembly normalised: comments, directives and labels dropped,
symbol names, label references, addresses and immediates masked.  Prints the
instruction count of each side and the number of differing lines::

    python bench/bench_step_code.py --baseline ../gearbox-hil-base
"""

from __future__ import annotations

import argparse
import difflib
import json
import subprocess
import sys
from pathlib import Path

from _host import host_line  # noqa: E402  (bench/ is first on the path)

ROOT = Path(__file__).resolve().parents[1]
STEPS = (("chain", "plant_models.plants.chain", "chain_step"), ("dct", "plant_models.plants.dct", "dct_step"),
         ("powershift", "plant_models.plants.powershift", "powershift_step"),
         ("zf8hp", "plant_models.plants.transmission_kernel", "transmission_step"))

PROBE = """
import importlib, json, re, sys
from numba import njit
sys.path[:0] = [sys.argv[1]]
from plant_models.registry import load_plant
out = {}
for cfg, mod, name in json.loads(sys.argv[2]):
    load_plant(cfg)  # compiles or loads the plant's kernels, as a run does
    f = getattr(importlib.import_module(mod), name)
    g = njit(cache=False, nogil=True, error_model="numpy")(f.py_func)
    g.compile(f.signatures[0])
    body = []
    for line in g.inspect_asm(f.signatures[0]).splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith(".") and not line.endswith(":"):
            body.append(re.sub(r"_Z\\S+|\\.L\\S+|0x[0-9a-f]+|\\$-?\\d+", "X", line))
    out[name] = body
print(json.dumps(out))
"""


def assembly(checkout: Path) -> dict[str, list[str]]:
    out = subprocess.run([sys.executable, "-c", PROBE, str(checkout), json.dumps(STEPS)], cwd=checkout,
                         capture_output=True, text=True, check=True, env={"PYTHONPATH": str(checkout),
                                                                          "PATH": "/usr/bin:/bin"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="checkout of the older version")
    args = ap.parse_args(argv)
    before, after = assembly(Path(args.baseline).resolve()), assembly(ROOT)
    print("| step | instructions before | after | differing lines |")
    print("| --- | --- | --- | --- |")
    for _, _, name in STEPS:
        b, a = before[name], after[name]
        changed = difflib.unified_diff(b, a, lineterm="", n=0)
        diff = sum(1 for d in changed if d[:1] in "+-" and d[:3] not in ("+++", "---"))
        print(f"| {name} | {len(b)} | {len(a)} | {diff} |")
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
