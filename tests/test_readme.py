"""Every command of the README's "Using it" section, run as written, succeeds.

The commands are read from README.md (not copied here), so a command added
to the README is tested as it stands.  They run through ``bash`` the way a
new user runs them: from a fresh working folder that holds the project's
files (linked, so ``out/`` and ``keys/`` land in the test's folder), after
the activation line the section gives first.  A server command runs until
its first status line says it is running, then gets SIGINT (Ctrl-C), prints
its timing summary and must exit 0.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
ACTIVATE = "source .venv/bin/activate"
COMMAND_TIMEOUT_S = 300.0  # the campaign's 1200 runs take about 30 s on two idle cores
READY_TIMEOUT_S = 120.0


def using_it() -> str:
    text = README.read_text()
    return text.split("\n## Using it\n", 1)[1].split("\n## ", 1)[0]


def sh_blocks(section: str) -> list[list[str]]:
    """The lines of each ```sh block, comments kept (bash ignores them)."""
    return [[ln for ln in b.splitlines() if ln.strip()] for b in re.findall(r"```sh\n(.*?)```", section, re.S)]


def commands() -> list[str]:
    blocks = sh_blocks(using_it())
    return [c for b in blocks for c in b if c != ACTIVATE]


def test_the_activation_comes_before_any_command_that_needs_it():
    text = README.read_text()
    first_use = min(m.start() for m in re.finditer(r"^gearbox-hil ", text, re.M))
    assert ACTIVATE in text[:first_use], "the activation line must come before the first gearbox-hil command"
    blocks = sh_blocks(using_it())
    assert blocks[0] == [ACTIVATE] and len(commands()) >= 10


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A fresh folder that looks like the checkout: the project's files linked, the running Python's venv."""
    d = tmp_path_factory.mktemp("checkout")
    for entry in ROOT.iterdir():
        if entry.name not in (".venv", "out", "keys", ".git"):
            (d / entry.name).symlink_to(entry)
    (d / ".venv").symlink_to(Path(sys.prefix))
    return d


def _bash(command: str, cwd: Path, **kw) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV",)}
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"  # a new shell: only the activation puts gearbox-hil on it
    env["PYTHONUNBUFFERED"] = "1"
    return subprocess.Popen(["bash", "-c", f"{ACTIVATE}\n{command}"], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, **kw)


def _serve(command: str, cwd: Path) -> tuple[int, str, str]:
    """Start a server, wait for its first 'running' status line, Ctrl-C it, return (code, stdout, stderr)."""
    p = _bash(command, cwd)
    lines = []
    deadline = time.monotonic() + READY_TIMEOUT_S
    try:
        for line in p.stdout:  # a server prints its status line as soon as it ticks
            lines.append(line)
            if re.match(r"\[(realtime|lockstep|afap) running\]", line):
                break
            assert time.monotonic() < deadline, "".join(lines)
        else:
            raise AssertionError(f"the server ended before it ran: {''.join(lines)}{p.stderr.read()}")
        time.sleep(0.5)
        os.killpg(p.pid, signal.SIGINT)  # what Ctrl-C sends to the terminal's foreground process group
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    return p.returncode, "".join(lines) + out, err


@pytest.mark.parametrize("command", commands())
def test_every_readme_command_succeeds_as_written(command, workdir):
    if command.startswith("gearbox-hil serve "):
        code, out, err = _serve(command, workdir)
        assert code == 0, f"{command}\n{out}\n{err}"
        assert "timing summary" in out and "stopped: SIGINT" in out, out
        return
    p = _bash(command, workdir)
    try:
        out, err = p.communicate(timeout=COMMAND_TIMEOUT_S)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 0, f"{command}\n{out}\n{err}"
    assert "Traceback" not in err, err
    if "--junit" in command:
        assert out.strip().splitlines()[-1].startswith("PASSED: ")
        assert (workdir / "out" / "report.xml").is_file()
