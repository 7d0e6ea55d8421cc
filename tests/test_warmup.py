"""`gearbox-hil warmup`: what it compiles for a server only, and what its last line says."""

from __future__ import annotations

import plant_models.offline as offline
from server.cli import warmup


def _warm(monkeypatch, serve_only: bool) -> tuple[int, list[str]]:
    calls = []
    monkeypatch.setattr(offline, "warm_up", lambda: calls.append(1))
    lines: list[str] = []
    assert warmup.warm(["powershift"], lines.append, serve_only=serve_only) == 0
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

    assert "python -m server.cli.warmup powershift --serve-only\n" in (repo_root() / "demo.sh").read_text()
