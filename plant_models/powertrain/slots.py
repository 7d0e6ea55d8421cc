"""Slot tables: a component's parameter, state and data slots declared once, by name, with their units.

As the core's layout is generated from one table (``core/layout.py``, in the
manner of MuJoCo's ``mjxmacro.h``), a component declares its slots in a
:class:`Slots` table and its module takes the constants from it
(``globals().update(SLOTS.constants())``), so no slot number is written by
hand and a new slot is one line.  The four groups and their prefixes:

* ``I_*`` int parameters, in the component's record of ``MI_LAW`` after the
  record header (``R_*`` of :mod:`.law`),
* ``F_*`` float parameters, in its block of ``MF_LAW``,
* ``Z_*`` states of the law, integrated by the core with the speeds (a work
  account is a state whose derivative is the component's power; ``work``
  names its output),
* ``D_*`` data, in its block of ``DF_LAW`` (values of the last evaluation,
  per-step samples).

Each entry is ``(name, doc)``; a state that is a work account is
``(name, doc, output)`` with the name of its output signal (J).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Slots:
    """The slots of one component (or of the law's shared header): name -> index per group."""

    ints: tuple = ()
    floats: tuple = ()
    states: tuple = ()
    data: tuple = ()

    def constants(self, prefixes=("I", "F", "Z", "D")) -> dict[str, int]:
        """The module constants: ``I_<NAME>``, ``F_<NAME>``, ``Z_<NAME>``, ``D_<NAME>`` and the group sizes
        ``N_I``, ``N_F``, ``N_Z``, ``N_D`` (other prefixes, one per group, for a shared table; ``.`` skips a group)."""
        out = {}
        for prefix, group in zip(prefixes, (self.ints, self.floats, self.states, self.data)):
            if prefix == ".":  # a group the table does not use
                continue
            names = [entry[0] for entry in group]
            if len(set(names)) != len(names):
                raise ValueError(f"slot names repeat in the {prefix}_* group: {names}")
            for k, name in enumerate(names):
                out[f"{prefix}_{name.upper()}"] = k
            out[f"N_{prefix}"] = len(names)
        return out

    def work_accounts(self) -> list[tuple[int, str, str]]:
        """(state index, output name, doc) of each state that is a work account."""
        return [(k, entry[2], entry[1]) for k, entry in enumerate(self.states) if len(entry) > 2]

    def describe(self) -> list[str]:
        """One line per slot: group, index, name, doc."""
        return [f"{prefix}_{entry[0].upper():<16} {k:>3}  {entry[1]}"
                for prefix, group in (("I", self.ints), ("F", self.floats), ("Z", self.states), ("D", self.data))
                for k, entry in enumerate(group)]
