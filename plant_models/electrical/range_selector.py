"""The range selector (PRNDL) switch as a TCU reads it: a 4-bit code per position, transition codes between.

A transmission range switch closes four contacts; each lever position has a
4-bit code, and between two adjacent positions the contacts pass through a
transition code of their own.  Codes are chosen so that a single broken
contact never turns one valid position into another: a TCU checks
plausibility (a code that is neither a position nor a transition is a fault,
and so is a transition held too long).  The table is per transmission; the
default is a common automatic layout (P R N D 3 2 1 with Gray-like codes at
Hamming distance >= 2 between positions).

:class:`RangeTable` is the frozen table; :func:`code_at` gives the code the
bench drives for a lever at ``position`` moving towards ``target`` with
``travel`` in [0, 1] of the way (in the transition window it reads the
transition code).  Called in the real-time loop: allocates nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from ..core.api import JIT

INVALID = -1  # what decode() answers for an implausible code


@dataclass(frozen=True)
class RangeTable:
    """Positions in lever order with their 4-bit codes, and the transition code between each adjacent pair."""

    positions: tuple[str, ...] = ("P", "R", "N", "D", "3", "2", "1")
    codes: tuple[int, ...] = (0b1100, 0b0110, 0b0011, 0b1001, 0b0101, 0b1010, 0b1111)
    transitions: tuple[int, ...] = (0b0100, 0b0010, 0b0001, 0b1000, 0b0000, 0b1110)
    transition_window: tuple[float, float] = (0.4, 0.6)  # fraction of the travel that reads the transition code

    def __post_init__(self):
        n = len(self.positions)
        if n < 2 or len(self.codes) != n or len(self.transitions) != n - 1:
            raise ValueError("range table: need >= 2 positions, a code each and a transition code per adjacent pair")
        if len(set(self.positions)) != n:
            raise ValueError(f"range table: position names repeat: {self.positions}")
        everything = list(self.codes) + list(self.transitions)
        if any(not 0 <= c <= 15 for c in everything):
            raise ValueError("range table: codes are 4-bit (0..15)")
        if len(set(everything)) != len(everything):
            raise ValueError("range table: every position and transition code must differ from the others")
        lo, hi = self.transition_window
        if not 0.0 < lo < hi < 1.0:
            raise ValueError("range table: transition_window must satisfy 0 < start < end < 1")

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(codes, transitions, window)`` as arrays for :func:`code_at`; ``decode_table[code]`` is the
        position index (>= 0), ``-2 - k`` for the transition after position k, or ``INVALID``."""
        return (np.array(self.codes, dtype=np.int64), np.array(self.transitions, dtype=np.int64),
                np.array(self.transition_window, dtype=np.float64))

    def decode_table(self) -> np.ndarray:
        table = np.full(16, INVALID, dtype=np.int64)
        for k, c in enumerate(self.codes):
            table[c] = k
        for k, c in enumerate(self.transitions):
            table[c] = -2 - k
        return table

    def index(self, name: str) -> int:
        try:
            return self.positions.index(name)
        except ValueError:
            raise ValueError(f"range selector: no position {name!r} (positions: {', '.join(self.positions)})") from None


@njit(**JIT)
def code_at(position, target, travel, codes, transitions, window):
    """The 4-bit code of a lever at ``position`` moving to the adjacent ``target`` (``travel`` 0..1 of the
    way); a lever at rest (``target == position``) reads its position's code."""
    if target == position or travel <= window[0]:
        return codes[position]
    if travel >= window[1]:
        return codes[target]
    return transitions[min(position, target)]


@njit(**JIT)
def decode(code, decode_table):
    """What a TCU reads from a code: the position index, ``-2 - k`` inside the transition after position
    ``k``, or ``INVALID`` (-1) for an implausible code."""
    if code < 0 or code > 15:
        return INVALID
    return decode_table[code]


__all__ = ["RangeTable", "code_at", "decode", "INVALID"]
