"""The vocabulary every plant reports in: status bits, event kinds and step counters.

A plant's step returns a *status word*; its event log names *event kinds*;
its :attr:`~plant_models.contract.plant.Plant.counters` are int64 step
counters in one fixed order.  Tools (the live status, ``simulate``'s
events.json, campaigns, the test bench) read all three through the plant
object, so they need to know nothing about how the plant computes.

Status words
    ``ST_OK`` (0) is a normal step.  Two bits mean the same for every plant:
    ``ST_NONFINITE`` (the step produced a non-finite state and was rolled
    back) and ``ST_BAD_INPUT`` (a non-finite input or step: the step was not
    taken, the state is unchanged).  The low byte (1 .. 128) belongs to the
    shared bits and to the bits of the plant's solver (the friction core's:
    numbers fixed by its compiled code, *declared* here with
    :meth:`StatusBits.declare`); the high byte (256 .. 32768) to the plant's
    own bits, *allocated* in declaration order with :meth:`StatusBits.allocate`,
    so no number is chosen by hand.  A plant's ``status`` output (range
    0 .. 2**16) carries the whole word.

Event kinds
    ``EV_STICK``, ``EV_BREAKAWAY`` and ``EV_REVERSAL`` are the events of any
    friction contact (they are the core's numbers); a plant allocates kinds
    of its own (a hard stop) from 4 upward with :meth:`EventKinds.allocate`.

Counters
    ``CNT_STEPS`` (steps taken) and ``CNT_EVENTS`` (events logged, monotonic
    since the reset) every plant keeps; ``CNT_ROLLBACKS`` every plant that
    rolls steps back; the others are the friction core's solver statistics
    (zero for a plant without that solver).  ``COUNTER_NAMES`` are their
    names in events.json.

Each plant kind holds its vocabulary in two objects, derived from the
shared ones: ``STATUS = CORE_STATUS.extend("dct")``, then
``ST_GEAR_REJECTED = STATUS.allocate("gear_command_rejected", "...")``; the
module-level int is what its compiled code uses, the object what tools use
to name the bits (:meth:`StatusBits.names`).
"""

from __future__ import annotations

from typing import Iterable

from .columns import Columns

# -- status bits shared by every plant ------------------------------------------------------------------
ST_OK = 0  # a normal step
ST_NONFINITE = 16  # non-finite result: the step was rolled back (the state is that before the step)
ST_BAD_INPUT = 32  # non-finite input or step length: the step was not taken
SOLVER_BITS_BELOW = 256  # bits under this belong to the shared vocabulary and the plant's solver
PLANT_BITS_BELOW = 2 ** 16  # a plant's own bits: 256 .. 32768 (the status output's range is 0 .. 2**16)

# -- event kinds shared by every plant with friction contacts (the friction core's numbers) ------------
EV_STICK = 1  # a slipping contact reached zero relative speed and stuck
EV_BREAKAWAY = 2  # a stuck contact's required force exceeded its static capacity
EV_REVERSAL = 3  # a slipping contact crossed zero relative speed and kept slipping the other way
PLANT_EVENTS_FROM = 4  # a plant's own event kinds: 4, 5, ...

# -- step counters, in this order in every plant's counters array ------------------------------------------
COUNTERS = Columns("the step counters of every plant", (
    ("CNT_STEPS", "steps taken"),
    ("CNT_EVENTS", "events logged since the reset (monotonic; a ring log's write index = count % capacity)"),
    ("CNT_SOLVER_ITER_MAX", "friction core: most solver iterations seen in one solve"),
    ("CNT_SOLVER_ITER_LAST", "friction core: iterations of the last full solve"),
    ("CNT_SUBSTEPS_MAX", "friction core: most event sub-steps seen in one step"),
    ("CNT_BUDGET_HITS", "friction core: steps that ran out of event sub-steps"),
    ("CNT_ROLLBACKS", "steps rolled back for non-finite results"),
    ("CNT_LOCATE_ITER_MAX", "friction core: most iterations of one event-time search"),
), count="N_COUNTERS")
globals().update(COUNTERS.constants())  # CNT_STEPS .. CNT_LOCATE_ITER_MAX; N_COUNTERS
# their names in events.json: "steps", "events", "solver_iter_max", ...
COUNTER_NAMES = tuple(name[len("CNT_"):].lower() for name, _offset, _width, _doc in COUNTERS.rows())


class _Codes:
    """Integer codes with names, each declared once; derived sets share the codes declared before."""

    what = "code"

    def __init__(self, owner: str, codes: Iterable[tuple[int, str, str, str]] = ()):
        self.owner = owner
        self._codes: dict[int, tuple[str, str, str]] = {}  # code -> (name, owner, doc)
        for code, name, who, doc in codes:
            self._codes[code] = (name, who, doc)

    def extend(self, owner: str):
        """A new set with every code of this one, for ``owner`` to declare or allocate its own in."""
        return type(self)(owner, ((c, n, w, d) for c, (n, w, d) in self._codes.items()))

    def _check_free(self, code: int, name: str) -> None:
        if code in self._codes:
            other, who, _ = self._codes[code]
            raise ValueError(f"{self.owner}: {self.what} {code} ({name!r}) is already {other!r} of {who}")
        for c, (n, who, _) in self._codes.items():
            if n == name:
                raise ValueError(f"{self.owner}: {self.what} name {name!r} is already {self.what} {c} of {who}")

    def _add(self, code: int, name: str, doc: str) -> int:
        self._check_free(code, name)
        self._codes[code] = (name, self.owner, doc)
        return code

    def names(self) -> dict[int, str]:
        """Code -> name, in increasing order of the codes."""
        return {c: self._codes[c][0] for c in sorted(self._codes)}

    def table(self) -> list[dict]:
        """Code, name, owner and meaning of every code (for docs and ``describe``)."""
        return [dict(code=c, name=n, owner=w, doc=d) for c, (n, w, d) in sorted(self._codes.items())]


class StatusBits(_Codes):
    """The bits of one plant kind's status word, each with a name and a meaning.

    :meth:`declare` takes a bit whose number is fixed elsewhere (the shared
    bits, a solver's compiled constants: below ``SOLVER_BITS_BELOW``);
    :meth:`allocate` hands a plant the lowest free bit from 256 upward.
    """

    what = "status bit"

    def declare(self, bit: int, name: str, doc: str = "") -> int:
        """Register a bit whose number is fixed (a solver's); returns it.  Refuses a bit or name already taken."""
        if bit <= 0 or bit & (bit - 1) or bit >= SOLVER_BITS_BELOW:
            raise ValueError(f"{self.owner}: a declared status bit is a power of two below {SOLVER_BITS_BELOW}, "
                             f"got {bit}")
        return self._add(bit, name, doc)

    def allocate(self, name: str, doc: str = "") -> int:
        """The lowest free bit from 256 upward, registered under ``name``; returns it."""
        bit = SOLVER_BITS_BELOW
        while bit in self._codes:
            bit <<= 1
        if bit >= PLANT_BITS_BELOW:
            raise ValueError(f"{self.owner}: no status bit left for {name!r} (plant bits are 256 .. 32768)")
        return self._add(bit, name, doc)

    def names_of(self, status: int) -> list[str]:
        """Names of the bits set in ``status``, in increasing order of the bits."""
        return status_names(self.names(), status)


class EventKinds(_Codes):
    """The event kinds one plant kind logs: the shared friction events and the plant's own from 4 upward."""

    what = "event kind"

    def allocate(self, name: str, doc: str = "") -> int:
        """The lowest free kind from ``PLANT_EVENTS_FROM`` upward, registered under ``name``; returns it."""
        kind = PLANT_EVENTS_FROM
        while kind in self._codes:
            kind += 1
        return self._add(kind, name, doc)


def status_names(names: dict[int, str], status: int) -> list[str]:
    """Names of the bits of ``status`` found in ``names`` (bit -> name), in increasing order of the bits.

    The one function that names status bits: :meth:`StatusBits.names_of`,
    :meth:`Plant.status_names <plant_models.contract.plant.Plant.status_names>`
    and through them the live status and ``simulate``'s events.json.
    """
    status = int(status)
    return [names[bit] for bit in sorted(names) if status & bit]


SHARED_STATUS = StatusBits("every plant")
SHARED_STATUS.declare(ST_NONFINITE, "nonfinite_rolled_back", "non-finite result: the step was rolled back")
SHARED_STATUS.declare(ST_BAD_INPUT, "bad_input", "non-finite input or step length: the step was not taken")

SHARED_EVENTS = EventKinds("every plant")
SHARED_EVENTS._add(EV_STICK, "stick", "a slipping contact stuck")
SHARED_EVENTS._add(EV_BREAKAWAY, "breakaway", "a stuck contact broke away")
SHARED_EVENTS._add(EV_REVERSAL, "reversal", "a slipping contact reversed its slip direction")

__all__ = ["CNT_BUDGET_HITS", "CNT_EVENTS", "CNT_LOCATE_ITER_MAX", "CNT_ROLLBACKS", "CNT_SOLVER_ITER_LAST",
           "CNT_SOLVER_ITER_MAX", "CNT_STEPS", "CNT_SUBSTEPS_MAX", "COUNTER_NAMES", "EV_BREAKAWAY", "EV_REVERSAL",
           "EV_STICK", "EventKinds", "N_COUNTERS", "PLANT_EVENTS_FROM", "SHARED_EVENTS", "SHARED_STATUS",
           "ST_BAD_INPUT", "ST_NONFINITE", "ST_OK", "StatusBits", "status_names"]
