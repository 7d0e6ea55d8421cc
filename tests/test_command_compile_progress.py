"""``simulate`` and ``serve`` show a first start's compile as the warm-up does: stages and counts for a person,
internal function names only with -v (server/cli/warmup_progress.py, compile_progress).

A cold compile takes minutes on a loaded machine, too long for a test: a fake compile sequence is sent through
numba's own compile events (what CompileProgress listens to) while the real command runs on warm caches.
"""

from __future__ import annotations

import re
import time

import pytest
from numba.core import event

from plant_models.config import repo_root
from plant_models.core.api import kernel_count
from server.cli import main, serve, simulate

ROOT = repo_root()
# names a person must not see at the default verbosity (the issue's own examples among them)
CORE, PLANT, LOOP, CODECS = "plant_models.core.modes", "plant_models.plants.powershift", "server.realtime.loop", \
    "io_adapters.can.codec"
FAKE = [(CORE, f"_fake_core_kernel_{k}") for k in range(kernel_count() - 2)] + [
    (CORE, "_build_cache"), (CORE, "_box_qp"), (PLANT, "_fake_plant_step"), (LOOP, "_fake_loop_tick"),
    (CODECS, "tx_pack"), ("numba.np.arraymath", "impl")]


class _Dispatcher:
    def __init__(self, module: str, name: str):
        ns = {"__name__": module}
        exec(f"def {name}(): pass", ns)
        self.py_func = ns[name]


def _fake_compile(slow_s: float = 0.0) -> None:
    """A cold compile's events: every function of FAKE begun and finished (one of them slow_s long)."""
    for k, (module, name) in enumerate(FAKE):
        with event.trigger_event("numba:compile", data=dict(dispatcher=_Dispatcher(module, name), args=())):
            if k == 3:
                time.sleep(slow_s)  # long enough for a "still compiling NAME" heartbeat (-v only)


@pytest.fixture
def cold_load(monkeypatch):
    """simulate's plant loading with a fake cold compile before the real (cached) load."""
    real = simulate.load_plant

    def load(cfg):
        _fake_compile(slow_s=1.6)
        return real(cfg)
    monkeypatch.setattr(simulate, "load_plant", load)


def _simulate(tmp_path, *extra) -> int:
    return main(["simulate", str(ROOT / "configs/powershift.toml"), "--scenario",
                 str(ROOT / "scenarios/powershift_single_swap.toml"), "--out", str(tmp_path), *extra])


def _compile_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("gearbox-hil: ")]


def test_a_cold_simulate_shows_stages_and_counts_and_no_function_names(cold_load, tmp_path, capsys):
    assert _simulate(tmp_path) == 0
    lines = _compile_lines(capsys.readouterr().err)
    text = "\n".join(lines)
    assert not [name for _, name in FAKE if name in text], text
    assert "still compiling" not in text
    # the first line, a stage line every 5 s or a third of the time so far (the real compiles this tree still
    # needs add to the fake ones on a loaded machine), the last
    assert 2 <= len(lines) <= 10, text
    assert lines[0].endswith("first start with this code on this machine: compiling (cached for later starts)")
    m = re.search(r"compiled (\d+): core (\d+)/(\d+), server (\d+), plant (\d+) in \d+ s; later starts load "
                  r"them from the cache$", lines[-1])
    assert m, text
    n, core, core_total, server, plant = map(int, m.groups())
    # the core's fake kernels are kernel_count() (more if this tree compiles the real core too: the total grows)
    assert core == core_total >= kernel_count() and server >= 2 and plant >= 1 and n == core + server + plant


def test_with_v_every_function_is_named(cold_load, tmp_path, capsys):
    assert _simulate(tmp_path, "-v") == 0
    text = "\n".join(_compile_lines(capsys.readouterr().err))
    assert "_build_cache" in text and "tx_pack" in text and "still compiling" in text


def test_serve_uses_the_same_progress():
    """serve's set-up runs inside compile_progress too (its -v for the names); its run needs sockets and a loop,
    so this reads its argument table and code rather than serving."""
    import argparse
    import inspect

    p = argparse.ArgumentParser()
    serve.add_arguments(p)
    assert p.parse_args(["powershift", "-v"]).verbose and not p.parse_args(["powershift"]).verbose
    assert "compile_progress(_progress_line, args.verbose)" in inspect.getsource(serve._run)
