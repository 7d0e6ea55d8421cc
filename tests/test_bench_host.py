"""Every benchmark records the machine it ran on (bench/_host.py): CPU model, kernel, Python, numba."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"


def scripts() -> list[Path]:
    """The runnable scripts of bench/: every file with a ``__main__`` block (helpers start with ``_``)."""
    return [p for p in sorted(BENCH.glob("*.py"))
            if not p.name.startswith("_") and 'if __name__ == "__main__":' in p.read_text()]


def test_every_benchmark_prints_the_host_and_puts_it_in_its_json():
    missing, unrecorded = [], []
    for path in scripts():
        tree = ast.parse(path.read_text())
        main_block = [n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)]
        if not main_block or "host_line()" not in ast.unparse(main_block[0]):
            missing.append(path.name)
        for node in ast.walk(tree):  # a results file written with --json carries the host's facts
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("write_text"):
                text = ast.unparse(node)
                if "args.json" in ast.unparse(node.func) and "json.dumps" in text and "with_host(" not in text:
                    unrecorded.append(f"{path.name}:{node.lineno}")
    assert not missing, f"benchmarks that do not print host_line() first: {missing}"
    assert not unrecorded, f"results written without with_host(...): {unrecorded}"


def test_host_facts_name_the_cpu_and_the_versions():
    sys.path.insert(0, str(BENCH))
    try:
        import _host
    finally:
        sys.path.remove(str(BENCH))
    facts = _host.host_facts()
    assert facts["cpu"] and facts["cpu"] != "unknown"
    assert facts["python"].count(".") == 2 and facts["numba"] and facts["kernel"]
    line = _host.host_line()
    assert line.startswith("host: ") and facts["cpu"] in line and f"numba {facts['numba']}" in line
    assert _host.with_host({"a": 1})["a"] == 1 and "host" in _host.with_host([1])
    assert _host.cpu_family("AMD EPYC 7B13") == "AMD EPYC"
    assert _host.cpu_family("Intel(R) Xeon(R) CPU @ 2.20GHz") == "Intel Xeon"
