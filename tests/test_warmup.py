"""`gearbox-hil warmup`: what it compiles for a server only, and what its last line says."""

from __future__ import annotations

import sys

import plant_models.offline as offline
from server.cli import warmup


def _warm(monkeypatch, serve_only: bool, jobs: int = 1) -> tuple[int, list[str]]:
    calls = []
    monkeypatch.setattr(offline, "warm_up", lambda: calls.append(1))
    lines: list[str] = []
    assert warmup.warm(["powershift"], lines.append, serve_only=serve_only, jobs=jobs) == 0
    return len(calls), lines


def test_serve_only_leaves_the_offline_run_to_its_first_use(monkeypatch):
    """The real-time server never calls the compiled offline run: demo.sh's warm-up does not compile it."""
    assert _warm(monkeypatch, serve_only=True)[0] == 0
    assert _warm(monkeypatch, serve_only=False)[0] == 1


def test_ready_line_gives_wall_and_cpu_time(monkeypatch):
    last = _warm(monkeypatch, serve_only=True)[1][-1]
    assert last.startswith("ready in ") and last.endswith(" s of CPU)"), last


def test_demo_warms_up_for_the_server_only():
    from plant_models.config import repo_root

    assert "python -m server.cli.warmup powershift --serve-only " in (repo_root() / "demo.sh").read_text()


def test_the_second_process_compiles_the_server_kernels_with_the_same_serve_only(monkeypatch):
    """With 2 jobs the server's kernels are the second process's part, which gets --serve-only as given."""
    started = []

    class Proc:
        stdout = iter(["first start with this code on this machine: compiling (cached for later starts)\n",
                       "  server loop 1: bin_of (0.1 s; 1 s elapsed)\n",
                       "compiled 3 functions in 1.0 s; later starts load them from the cache\n"])

        def __init__(self, cmd, **kw):
            started.append(cmd)

        def wait(self):
            return 0

    import subprocess

    monkeypatch.setattr(subprocess, "Popen", Proc)
    monkeypatch.setattr(warmup, "_server_kernels", lambda *args: started.append("in this process"))
    lines: list[str] = []
    assert warmup.warm(["powershift"], lines.append, serve_only=True, jobs=2, verbose=True) == 0
    assert started == [[sys.executable, "-m", "server.cli.warmup", "--server-kernels", "--serve-only"]]
    assert "  server loop 1: bin_of (0.1 s; 1 s elapsed)" in lines  # its progress comes through this one's
    assert not any(line.startswith("first start") and "server loop" in line for line in lines)


def test_a_failing_second_process_is_a_failure(monkeypatch, capsys):
    class Proc:
        stdout = iter(["Traceback (most recent call last):\n", "ImportError: no module\n"])

        def __init__(self, cmd, **kw):
            """A second process that has already failed: its command is not run."""

        def wait(self):
            return 1

    import subprocess

    monkeypatch.setattr(subprocess, "Popen", Proc)
    assert warmup.warm(["powershift"], [].append, serve_only=True, jobs=2) == 1
    assert "ImportError: no module" in capsys.readouterr().err


def test_the_second_process_part_covers_what_the_server_compiles_at_its_start():
    """The server's start compiled 5 more functions (the command hand-over, the state row packing, the CAN
    send queue): the warm-up's part for the server loads them, in the types the adapters call them with."""
    import subprocess

    probe = """
import sys
import numpy as np
from numba import typeof
from server.cli import warmup
warmup._server_kernels(serve_only=True)
from io_adapters.can import frames
q = (np.zeros(64, dtype=np.int64), np.zeros((64, frames.MAX_PAYLOAD), dtype=np.uint8), np.zeros(frames.Q_COLS, dtype=np.int64))
adapter_types = (typeof(np.zeros(8, dtype=np.int64)), typeof(np.zeros(8, dtype=np.uint8)), typeof(0)) + tuple(map(typeof, q))
print(adapter_types in frames.tx_enqueue.signatures, len(frames.tx_enqueue.signatures),
      'io_adapters.handover' in sys.modules, 'io_adapters.zmq.codec' in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "1", "True", "True"], out


def test_core_lines_count_both_processes_in_one_n_of_m_with_the_time_left():
    """The core's kernels compiled by the second process are counted in this one's ``core n/m``, and every
    line but the last gives the time left at the pace so far (here 2 s a kernel)."""
    from plant_models.compiling import CompileProgress

    lines: list[str] = []
    progress = CompileProgress(lines.append)
    progress.expected["core"] = 4
    progress.external("core", "_mode_full", 2.0)  # began 2 s ago: 2 s a kernel, 3 to go
    progress.external("core", "_box_qp", 0.0)  # 2 kernels in 2 s: 1 s a kernel, 2 to go
    assert lines[0].startswith("  core 1/4: _mode_full (2.0 s; ") and lines[0].endswith(", about 6 s left)")
    assert lines[1].startswith("  core 2/4: _box_qp (0.0 s; ") and lines[1].endswith(", about 2 s left)")
    assert progress.count_here["core"] == 0 and progress.compiled == 0  # compiled elsewhere: added by its total


def test_stages_are_named_for_a_user():
    from plant_models.compiling import LABELS

    assert LABELS["core"] == "core" and LABELS["plant"] == "plant"
    assert LABELS["codecs"] == "CAN/ZeroMQ codec" and LABELS["loop"] == "server loop"


def test_demo_arguments_go_to_the_server_not_to_the_set_up(tmp_path):
    """A sourced script sees the caller's arguments: `./demo.sh --rate 2000` made the set-up install the
    extras `[--rate]` and fail; the set-up is given its extras by name."""
    import subprocess

    from plant_models.config import repo_root

    demo = (repo_root() / "demo.sh").read_text()
    setup = next(line for line in demo.splitlines() if line.startswith("source scripts/bootstrap.sh"))
    stand_in = tmp_path / "bootstrap.sh"
    stand_in.write_text('echo "extras=${1:-plot}"\n')  # what bootstrap.sh takes for its extras
    probe = "set -- --rate 2000\n" + setup.replace("scripts/bootstrap.sh", str(stand_in))
    assert subprocess.run(["bash", "-c", probe], capture_output=True, text=True).stdout == "extras=plot\n"
