"""The machine a benchmark ran on, recorded beside every figure: CPU model, kernel, Python, numba, numpy.

Every script in ``bench/`` prints :func:`host_line` when it starts and puts
:func:`host_facts` into the JSON it writes (:func:`with_host`), so a figure
never travels without the CPU family it was measured on (``BENCHMARKS.md``
keeps a table per CPU family).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name as the kernel reports it (``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def cpu_family(model: str | None = None) -> str:
    """``"AMD EPYC"``, ``"Intel Xeon"``, ... : the family a figure's row in ``BENCHMARKS.md`` belongs to."""
    model = model or cpu_model()
    for family in ("AMD EPYC", "AMD Ryzen", "Intel Xeon", "Intel Core", "Apple"):
        if all(word in model for word in family.split()):
            return family
    return model


def host_facts() -> dict:
    """CPU model and family, logical CPUs, kernel, Python, numba and numpy versions, load average."""
    facts = {"cpu": cpu_model(), "cpu_family": cpu_family(), "cpus": os.cpu_count(),
             "kernel": platform.release(), "python": platform.python_version()}
    for module in ("numba", "numpy"):
        try:
            facts[module] = __import__(module).__version__
        except ImportError:
            facts[module] = None
    try:
        facts["load_average"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        facts["load_average"] = None
    return facts


def host_line() -> str:
    """One line for a benchmark's output: ``host: <CPU> (<n> CPUs), Linux <kernel>, Python .., numba ..``."""
    f = host_facts()
    load = "/".join(f"{x:.1f}" for x in f["load_average"]) if f["load_average"] else "-"
    return (f"host: {f['cpu']} ({f['cpus']} CPUs), {platform.system()} {f['kernel']}, Python {f['python']}, "
            f"numba {f['numba']}, numpy {f['numpy']}, load {load}")


def with_host(results):
    """``results`` with the host's facts under ``"host"`` (a dict), or wrapped with them (anything else)."""
    if isinstance(results, dict):
        return {**results, "host": host_facts()}
    return {"results": results, "host": host_facts()}


__all__ = ["cpu_model", "cpu_family", "host_facts", "host_line", "with_host"]
