"""The set-up (``scripts/bootstrap.sh``): its progress, what it installs first, a failure in the background.

``./demo.sh`` on a fresh clone installs what compiling needs first (numpy,
numba, msgpack), starts compiling and installs the rest in the background
(``--background``).  These tests hold the pieces to their promises: a
"still installing" line while pip works, nothing the warm-up imports missing
from the first part, and a background install that fails says so and
leaves no stamp that would make the next set-up take it as complete.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from importlib.metadata import requires
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# pip's output as it comes: a package, a pause longer than the heartbeat, a line split by a pause, the unpacking
STAND_IN_PIP = textwrap.dedent("""
    import sys, time
    def out(text, pause):
        sys.stdout.write(text); sys.stdout.flush(); time.sleep(pause)
    out("Collecting numba>=0.59 (from gearbox-hil==0.1.0)\\n", 0.1)
    out("  Downloading numba-0.68.1-cp311-cp311-manylinux_2_28_x86_64.whl (3.8 MB)\\n", 2.3)
    out("Processing /opt/pypi/files/numpy-2.4.6-cp311-cp311-manylinux_2_28_x86_64.whl (from numba)\\n", 0.1)
    out("Installing collected ", 1.3)
    out("packages: llvmlite, numpy, numba\\n", 1.5)
    out("Successfully installed llvmlite-0.50.0 numba-0.68.1 numpy-2.4.6\\n", 0.0)
""")


def _stamped_lines(cmd: str, cwd: Path, env: dict | None = None) -> tuple[list[tuple[float, str]], int]:
    t0 = time.monotonic()
    proc = subprocess.Popen(["bash", "-c", cmd], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, bufsize=1, env=env)
    lines = [(time.monotonic() - t0, line.rstrip("\n")) for line in proc.stdout]
    return lines + [(time.monotonic() - t0, "")], proc.wait()


def test_set_up_progress_is_a_line_per_package_and_says_it_is_still_installing_in_a_long_pause():
    """A pause of 2.3 s with the heartbeat at 1 s (5 s by default): at least one "still" line.  (Counted, not
    timed: how regular the lines are depends on the machine.)"""
    cmd = (f"GEARBOX_HIL_SETUP_BEAT_S=1; {sys.executable} -c '{STAND_IN_PIP}' | "
           "{ source scripts/setup_lib.sh; _setup_show; }")
    lines, code = _stamped_lines(cmd, ROOT)
    assert code == 0
    shown = [text for _, text in lines[:-1]]
    assert [s for s in shown if "still" not in s] == [
        "[set-up]   resolving numba>=0.59", "[set-up]   resolving numpy (2.4.6)",
        "[set-up]   unpacking 3 packages", "[set-up]   installed"], shown
    assert any(re.fullmatch(r"\[set-up\]   still installing \(\d s\)", s) for s in shown), shown


def test_the_warm_up_imports_only_what_the_set_up_installs_first():
    """The demo compiles while pip installs the rest: the warm-up (both its parts) must need nothing else."""
    early = re.search(r'^EARLY="([^"]+)"', (ROOT / "scripts" / "bootstrap.sh").read_text(), re.M).group(1).split()
    cmd = f"source scripts/setup_lib.sh; _setup_early pyproject.toml {' '.join(early)}"
    first = subprocess.run(["bash", "-c", cmd], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split("\n")
    assert [re.split(r"[<>=;]", r)[0] for r in first if r] == early  # each found in pyproject.toml's dependencies
    allowed = {n.lower() for n in early} | {"llvmlite", "gearbox-hil"}  # numba's own dependency comes with it
    assert all(re.match(r"llvmlite|numpy", r) for r in requires("numba") if "extra ==" not in r)
    # the warm-up (jobs=1: the second process's part in this one too) with every other installed package hidden,
    # as on a fresh clone before the background install got to it (numba's optional imports find nothing either)
    probe = textwrap.dedent(f"""
        import sys
        from importlib.metadata import packages_distributions
        hidden = {{top for top, dists in packages_distributions().items()
                   if not any(d.lower() in {sorted(allowed)!r} for d in dists)}}

        class Hide:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in hidden:
                    raise ModuleNotFoundError(f"No module named {{name!r}} (hidden)", name=name)

        preloaded = set(sys.modules)  # what the interpreter imported at its start (a .pth file's, say)
        sys.meta_path.insert(0, Hide())
        from server.cli.warmup import warm
        print("failures", warm(["powershift"], serve_only=True, jobs=1))
        print("hidden", len(hidden), sorted(m for m in sys.modules if m.split(".")[0] in hidden and m not in preloaded))
    """)
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[-2] == "failures 0" and re.fullmatch(r"hidden \d{2,} \[\]", lines[-1]), out.stdout


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_a_failed_background_install_says_so_and_leaves_no_stamp(tmp_path, installer):
    if installer == "uv" and shutil.which("uv") is None:
        pytest.skip("no uv on PATH to install with (the set-up would download it)")
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    for name in ("bootstrap.sh", "setup_lib.sh"):
        (project / "scripts" / name).write_text((ROOT / "scripts" / name).read_text())
    (project / "pyproject.toml").write_text(textwrap.dedent("""
        [project]
        name = "gearbox-hil-set-up-probe"
        version = "0.1.0"
        dependencies = [
          "msgpack>=1.0",
          "gearbox-hil-no-such-package-anywhere>=99",
        ]
        [project.optional-dependencies]
        plot = []
        [tool.setuptools]
        py-modules = []
    """))
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "GEARBOX_HIL_VENV", "PYTHONPATH")}
    env["PYTHON"] = sys.executable
    env["GEARBOX_HIL_SETUP_UV"] = "1" if installer == "uv" else "0"  # 0: pip even with uv on PATH
    cmd = ("source scripts/bootstrap.sh plot --background; echo started; "
           "if setup_wait server; then echo waited; else echo 'wait failed'; fi")
    lines, code = _stamped_lines(cmd, project, env)
    shown = "\n".join(text for _, text in lines)
    assert code == 0, shown
    assert "[set-up] installing what compiling needs first: msgpack" in shown and "started" in shown, shown
    assert shown.rstrip().endswith("wait failed"), shown
    assert f"[set-up] installing what the server needs failed; {installer} said:" in shown, shown
    assert "no-such-package" in shown, shown
    assert not list((project / ".venv").glob(".gearbox-hil-installed-*"))  # the next set-up installs again
    assert (project / ".venv" / "bin" / "python").exists()


def test_the_set_ups_still_lines_come_every_few_seconds_then_a_third_of_the_time_so_far():
    """A few lines however long pip takes on a busy machine (the first demo's output stays short); the time so
    far counts from the demo's start when it says when that was."""
    cmd = "source scripts/setup_lib.sh; for now in 1 12 60 600; do _setup_due 0 $((now * 1000000)); done"
    out = subprocess.run(["bash", "-c", cmd], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, "GEARBOX_HIL_SETUP_BEGAN_US": ""}).stdout.split()
    assert out == ["5000000", "5000000", "20000000", "200000000"]
    cmd = "source scripts/setup_lib.sh; _setup_due 300000000 330000000"  # a wait 30 s long, 330 s into the demo
    out = subprocess.run(["bash", "-c", cmd], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, "GEARBOX_HIL_SETUP_BEGAN_US": "0"}).stdout.split()
    assert out == ["110000000"]
