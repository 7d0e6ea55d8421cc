"""Progress bars of long offline work (``simulate``, ``campaign``), drawn by rich on stderr.

A bar is drawn only on a terminal; piped or redirected output (CI logs,
scripts) gets nothing but the commands' summary lines.  rich is imported
only when a bar is drawn.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Callable, Iterator


def _console():
    from rich.console import Console

    return Console(file=sys.stderr)


@contextmanager
def simulation_bar(label: str, dt: float, enabled: bool = True) -> Iterator[Callable[[int, int], None] | None]:
    """``with simulation_bar("powershift", dt) as progress:`` -- ``progress(k, n)`` after each chunk of steps.

    Shows simulated time against the total, the elapsed wall time and the
    rate (simulated seconds per wall second).  Yields None when no bar is
    drawn (not a terminal, or ``enabled`` false).
    """
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    console = _console()
    columns = (TextColumn("{task.description}"), BarColumn(),
               TextColumn("{task.fields[simulated]:.3g} / {task.fields[total_s]:.3g} s simulated"),
               TimeElapsedColumn(), TextColumn("{task.fields[rate]:.0f}x real time"))
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(label, total=1, simulated=0.0, total_s=0.0, rate=0.0)

        def update(k: int, n: int) -> None:
            elapsed = bar.tasks[0].elapsed or 0.0
            bar.update(task, total=n, completed=k, simulated=k * dt, total_s=n * dt,
                       rate=(k * dt / elapsed) if elapsed > 0 else 0.0)

        yield update


@contextmanager
def count_bar(label: str, total: int, done: int = 0,
              enabled: bool = True) -> Iterator[Callable[[int, str], None] | None]:
    """``with count_bar("campaign", n) as progress:`` -- ``progress(done, note)`` as work finishes.

    Shows done / total, elapsed and remaining time, and a short note (e.g.
    failures so far).  Yields None when no bar is drawn.
    """
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
        TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TimeRemainingColumn(), TextColumn("{task.fields[note]}"))
    with Progress(*columns, console=_console(), transient=False) as bar:
        task = bar.add_task(label, total=total, completed=done, note="")

        def update(completed: int, note: str = "") -> None:
            bar.update(task, completed=completed, note=note)

        yield update


__all__ = ["count_bar", "simulation_bar"]
