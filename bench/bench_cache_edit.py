"""What an edit recompiles: the CPU time to the first step after a comment is added to a source file.

For each variant of ``plant_models/core/cache.py`` (``--baseline REF``: the
file as it was at a git revision, and the working tree's), the project's
sources are copied with their numba caches into a scratch folder (file times
kept, so numba's own check finds the caches valid), every plant the
measurement uses is stepped once (warm), and then, in turn:

* a comment line is appended to ``plant_models/powertrain/law.py`` and a fresh
  process steps the ``chain`` plant (no components): its CPU time (user +
  system) and the kernels it compiled are reported;
* the file is put back, everything stepped warm again, a comment line is
  appended to ``plant_models/plants/dct.py`` and a fresh process steps
  ``chain``, ``powershift`` and ``dct``: which modules' kernels compiled;
* the file is put back, everything stepped warm again, and the whole scratch
  tree is copied (file times kept) to another folder, as a second clone or a
  container image would hold it: a fresh process there steps every plant,
  which should compile nothing.

Kernels compiled are counted as the numba index files (``*.nbi``) written
during the process.  Run from the project root::

    python bench/bench_cache_edit.py --baseline HEAD --json bench/results/cache_edit.json
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _host import host_line, with_host  # noqa: E402  (bench/ is first on the path)

ROOT = Path(__file__).resolve().parent.parent
COPIED = ("plant_models", "server", "io_adapters", "configs", "scenarios")
STEP_SCRIPT = """
import sys
from plant_models.registry import load_plant
for name in sys.argv[1:]:
    plant = load_plant(name)
    plant.reset()
    plant.step(1e-3)
"""


def copy_tree(dest: Path) -> None:
    for name in COPIED:
        shutil.copytree(ROOT / name, dest / name, copy_function=shutil.copy2, symlinks=True,
                        ignore=shutil.ignore_patterns("out", "*.lock"))


def index_times(tree: Path) -> dict[str, float]:
    return {str(p.relative_to(tree)): p.stat().st_mtime_ns for p in tree.rglob("*.nbi")}


def step_process(tree: Path, plants: list[str]) -> dict:
    """Step the plants once in a fresh process in ``tree``: CPU seconds, wall seconds, kernels written."""
    before = index_times(tree)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", STEP_SCRIPT, *plants], cwd=tree, check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after_usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after_usage.ru_utime - usage.ru_utime) + (after_usage.ru_stime - usage.ru_stime)
    after = index_times(tree)
    written = sorted(k for k, t in after.items() if before.get(k) != t)
    modules: dict[str, int] = {}
    for key in written:
        folder = str(Path(key).parent.parent)
        module = f"{folder}/{Path(key).name.split('.')[0]}"
        modules[module] = modules.get(module, 0) + 1
    return {"cpu_s": round(cpu, 2), "wall_s": round(wall, 2), "kernels_compiled": len(written),
            "modules": modules}


def edit(path: Path) -> bytes:
    original = path.read_bytes()
    path.write_bytes(original + b"\n# an edit that changes no code\n")
    return original


def measure_variant(cache_source: str, label: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="cache-edit-") as scratch:
        tree = Path(scratch)
        copy_tree(tree)
        (tree / "plant_models/core/cache.py").write_text(cache_source)
        everything = ["chain", "powershift", "dct", "zf8hp"]
        warm = step_process(tree, everything)
        result = {"variant": label, "first_warm_up": warm}
        law = tree / "plant_models/powertrain/law.py"
        original = edit(law)
        result["law_comment_then_chain"] = step_process(tree, ["chain"])
        result["law_comment_then_all"] = step_process(tree, everything)
        law.write_bytes(original)
        result["warm_again"] = step_process(tree, everything)
        dct = tree / "plant_models/plants/dct.py"
        original = edit(dct)
        result["dct_comment_then_chain_powershift_dct"] = step_process(tree, ["chain", "powershift", "dct"])
        dct.write_bytes(original)
        step_process(tree, everything)  # warm again
        with tempfile.TemporaryDirectory(prefix="cache-copy-") as elsewhere:
            copy = Path(elsewhere) / "clone"
            shutil.copytree(tree, copy, copy_function=shutil.copy2, symlinks=True)
            result["copied_tree_then_all"] = step_process(copy, everything)
        return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", default=None,
                        help="a git revision whose plant_models/core/cache.py is measured beside the working tree's")
    parser.add_argument("--json", type=Path, default=None, help="write the results here as JSON")
    args = parser.parse_args()
    variants = []
    if args.baseline:
        old = subprocess.run(["git", "show", f"{args.baseline}:plant_models/core/cache.py"], cwd=ROOT,
                             check=True, capture_output=True, text=True).stdout
        variants.append((old, f"cache.py at {args.baseline}"))
    variants.append(((ROOT / "plant_models/core/cache.py").read_text(), "working tree"))
    results = {"variants": []}
    for source, label in variants:
        print(f"measuring {label} ...", flush=True)
        measured = measure_variant(source, label)
        results["variants"].append(measured)
        for key, value in measured.items():
            if isinstance(value, dict):
                print(f"  {key}: {value['cpu_s']} s CPU, {value['wall_s']} s wall, "
                      f"{value['kernels_compiled']} kernels {value['modules']}", flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(with_host(results), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    print(host_line(), flush=True)
    sys.exit(main())
