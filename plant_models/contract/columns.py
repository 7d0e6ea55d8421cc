"""Column tables: the slots of a flat buffer or the columns of a table row, declared once, in order, with a doc each.

Flat int/float buffers are indexed by module constants (``M_LEN``,
``CI_RX_M``, ``PF_GAIN``, ...).  Written by hand, ``M_LEN = 0``,
``M_SIG0 = 1``, ..., a slot added in the middle renumbers every one after
it by hand, and a repeated or skipped number goes unnoticed.  A
:class:`Columns` table lists the slots in order instead (the core's layout
does the same from one table, ``core/layout.py``, and the powertrain's
components with :class:`~plant_models.powertrain.slots.Slots`); the offsets
and the count are generated, and the module takes them as its constants::

    MESSAGE = Columns("a message's row", (
        ("M_LEN", "payload length, bytes"),
        ("M_SIG0", "index of the message's first signal"),
    ), count="M_COLS")
    globals().update(MESSAGE.constants())  # M_LEN = 0, M_SIG0 = 1, M_COLS = 2

Each entry is ``(name, doc)`` or ``(name, doc, width)``: a slot ``width``
wide (an array of ``width`` values starting at the constant; the next slot
follows it; 0 for a last block whose size is only known at run time); a
name of ``None`` reserves ``width`` slots that no constant names (room kept
so later offsets stay as they were).  ``count`` names the
constant holding the table's total width (``None``: none, e.g. a table
whose last block has a size only known at run time).

**Compiled kernels.**  numba reads a module's globals when it compiles a
kernel and bakes their values in as constants; its cache keys the kernel on
its own source file only.  So a table a kernel indexes with is declared in
the kernel's own module (an edit of the table is then an edit of that file,
and its cache follows), and ``constants()`` gives plain ``int`` values.
Static checkers do not see names made by ``globals().update``: a line that
uses one carries ``# noqa: F821``, as in the powertrain's modules.

This module imports nothing of the project: every floor may use it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Columns:
    """One table of slots: ``(name, doc)`` or ``(name, doc, width)`` entries in order, from ``start``."""

    title: str
    entries: tuple
    count: str | None = None
    start: int = 0

    def __post_init__(self):
        names = [e[0] for e in self.entries if e[0] is not None]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.title}: a column name repeats: {sorted(n for n in names if names.count(n) > 1)}")
        for e in self.entries:
            if len(e) not in (2, 3) or not isinstance(e[1], str):
                raise ValueError(f"{self.title}: an entry is (name, doc) or (name, doc, width), not {e!r}")
            name, width = e[0], self._width(e)
            if name is not None and not (isinstance(name, str) and name.isidentifier() and name.isupper()):
                raise ValueError(f"{self.title}: column name {name!r} is no upper-case identifier")
            if not isinstance(width, int) or isinstance(width, bool) or width < 0:
                raise ValueError(f"{self.title}: width of {name!r} is {width!r}, not an int >= 0")
        if self.count is not None and self.count in names:
            raise ValueError(f"{self.title}: the count {self.count!r} is also a column name")

    @staticmethod
    def _width(entry) -> int:
        return entry[2] if len(entry) == 3 else 1

    def rows(self) -> list[tuple[str | None, int, int, str]]:
        """``(name, offset, width, doc)`` per entry, reserved ones included (name ``None``)."""
        out, off = [], self.start
        for e in self.entries:
            w = self._width(e)
            out.append((e[0], off, w, e[1]))
            off += w
        return out

    def size(self) -> int:
        """The offset after the last slot (``start`` + the sum of the widths)."""
        return self.start + sum(self._width(e) for e in self.entries)

    def constants(self) -> dict[str, int]:
        """The module constants: each named slot's offset, and ``count`` = :meth:`size` (plain ints)."""
        out = {name: off for name, off, _w, _doc in self.rows() if name is not None}
        if self.count is not None:
            out[self.count] = self.size()
        return out

    def shifted(self, base: int, prefix: str, new_prefix: str) -> dict[str, int]:
        """This table's slots re-based at ``base`` under another prefix (a table nested in a wider row):
        ``TICK.shifted(I_TI, "TI_", "I_")`` gives ``I_WATCHDOG = I_TI + TI_WATCHDOG``, ...; no count."""
        out = {}
        for name, off, _w, _doc in self.rows():
            if name is None:
                continue
            if not name.startswith(prefix):
                raise ValueError(f"{self.title}: {name} does not start with {prefix!r}")
            out[new_prefix + name[len(prefix):]] = base + off - self.start
        return out

    def check(self, namespace: dict) -> list[str]:
        """What in ``namespace`` (a module's globals) differs from :meth:`constants` (empty: nothing)."""
        out = []
        for name, value in self.constants().items():
            got = namespace.get(name)
            if type(got) is not int or got != value:
                out.append(f"{name}: module has {got!r}, table says {value}")
        return out

    def describe(self) -> list[str]:
        """One line per slot for docs: offset, width when not 1, name, doc; the count last."""
        lines = []
        for name, off, w, doc in self.rows():
            span = f"{off}" if w == 1 else f"{off}..{off + w - 1}" if w else f"{off}.."
            lines.append(f"{span:>9}  {name or '(reserved)':<20} {doc}")
        if self.count is not None:
            lines.append(f"{'':>9}  {self.count:<20} = {self.size()}, the count")
        return lines
