"""The verdicts on the terminal and as JUnit XML (one test suite per file, one test case per expectation)."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TextIO

from .runner import TestResult


def print_result(res: TestResult, out: TextIO | None = None) -> None:
    """``file: name (mode, duration)`` then a line per verdict: ``PASS``/``FAIL``/``ERROR`` name: message."""
    out = out or sys.stdout
    s = res.spec
    print(f"{s.source}: {s.name} ({s.mode}, {s.duration_s:g} s simulated, {res.wall_s:.2f} s)", file=out)
    for line in res.log:
        print(f"  note  {line}", file=out)
    for v in res.verdicts:
        print(f"  {v.label:<5} {v.name}: {v.message}", file=out)
    out.flush()


def counts(results: list[TestResult]) -> tuple[int, int, int]:
    """(passed, failed, errors) over every verdict."""
    vs = [v for r in results for v in r.verdicts]
    return (sum(v.passed for v in vs), sum(not v.passed and not v.error for v in vs), sum(v.error for v in vs))


def summary_line(results: list[TestResult]) -> str:
    p, f, e = counts(results)
    verdict = "PASSED" if f == 0 and e == 0 else "FAILED"
    return f"{verdict}: {p} passed, {f} failed, {e} errors in {len(results)} test file(s)"


def write_junit(results: list[TestResult], path: str | Path) -> None:
    """JUnit XML: ``testsuites`` > a ``testsuite`` per file > a ``testcase`` per verdict (``failure``/``error``)."""
    p, f, e = counts(results)
    root = ET.Element("testsuites", name="gearbox-hil test", tests=str(p + f + e), failures=str(f), errors=str(e),
                      time=f"{sum(r.wall_s for r in results):.3f}")
    for r in results:
        vs = r.verdicts
        suite = ET.SubElement(root, "testsuite", name=r.spec.name, file=r.spec.source, tests=str(len(vs)),
                              failures=str(sum(not v.passed and not v.error for v in vs)),
                              errors=str(sum(v.error for v in vs)), time=f"{r.wall_s:.3f}")
        props = ET.SubElement(suite, "properties")
        for k, val in (("mode", r.spec.mode), ("plant", str(r.spec.plant_config)),
                       ("duration_s", f"{r.spec.duration_s:g}")):
            ET.SubElement(props, "property", name=k, value=val)
        for v in vs:
            case = ET.SubElement(suite, "testcase", classname=Path(r.spec.source).stem, name=v.name, time="0")
            if not v.passed:
                attrs = {"message": v.message, "type": "error" if v.error else "expectation"}
                if v.t is not None:
                    attrs["time_s"] = f"{v.t:.9g}"
                if v.value is not None:
                    attrs["value"] = f"{v.value:.9g}"
                el = ET.SubElement(case, "error" if v.error else "failure", attrs)
                el.text = v.message
        if r.log:
            ET.SubElement(suite, "system-out").text = "\n".join(r.log)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(str(path), encoding="utf-8", xml_declaration=True)
