"""One byte buffer behind every array a device's tick touches, so one compiled call takes them all.

Calling a numba function costs about 50 ns for each array passed (its type
is checked and it is unboxed at every call); the device adapter's tick
touches some thirty arrays (the targets, the pins, the measurements, the
models' state), so passing them one by one cost more than the budget of the
whole device stage.  An :class:`Arena` gathers existing arrays into one
8-byte-aligned ``uint8`` buffer and rebinds each owner's attribute to a view
of it, so the Python side (the TCU emulator, tests, status) keeps using the
arrays by name while the compiled tick gets two arguments: the buffer and
``offsets``, each array's first and last-plus-one byte in a fixed order.
Every member starts on an 8-byte boundary, so compiled code reaches member
``k`` of type ``T`` as ``buf.view(T)[offsets[k, 0] // T's itemsize + j]``
(:mod:`io_adapters.devices.stage`).

Adopting happens once, before the first tick, and the owners' arrays are
rebound then: nothing may keep a reference to the old arrays.
"""

from __future__ import annotations

import numpy as np

_ALIGN = 8


class Arena:
    """Arrays gathered into one buffer; :meth:`adopt` them in the order the compiled code reads them."""

    def __init__(self) -> None:
        self._members: list[tuple[object, str, np.ndarray]] = []
        self.buffer: np.ndarray | None = None
        self.offsets: np.ndarray | None = None
        self.slot: dict[str, int] = {}

    def adopt(self, owner: object, attribute: str, label: str | None = None) -> int:
        """Take ``owner.attribute`` (an array) into the arena; returns its row in :attr:`offsets`.

        ``label`` (default ``attribute``) names the slot in :attr:`slot`.
        """
        if self.buffer is not None:
            raise RuntimeError("arena: already built")
        arr = getattr(owner, attribute)
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"arena: {attribute} is not an array")
        self._members.append((owner, attribute, np.ascontiguousarray(arr)))
        key = label or attribute
        if key in self.slot:
            raise ValueError(f"arena: slot {key!r} adopted twice")
        self.slot[key] = len(self._members) - 1
        return self.slot[key]

    def build(self, order: tuple[str, ...] | None = None) -> None:
        """Allocate the buffer, copy every adopted array in and rebind each owner's attribute to its view.

        ``order``: the slots' labels in the order their arrays are laid out in the buffer (every label once);
        default the order of adoption.  :attr:`offsets` rows stay in adoption order.
        """
        if order is not None:
            if sorted(order) != sorted(self.slot):
                raise ValueError("arena: the order must name every adopted slot once")
            layout = [self.slot[label] for label in order]
        else:
            layout = list(range(len(self._members)))
        starts = [0] * len(self._members)
        size = 0
        for k in layout:
            arr = self._members[k][2]
            starts[k] = size
            size += -(-max(arr.nbytes, 1) // _ALIGN) * _ALIGN
        # a float64 array's data is 16-byte aligned by numpy, so every member starts 8-byte aligned
        self.buffer = np.zeros(max(size, _ALIGN) // 8, dtype=np.float64).view(np.uint8)
        self.offsets = np.array([[s, s + arr.nbytes] for s, (_, _, arr) in zip(starts, self._members)],
                                dtype=np.int64).reshape(-1, 2)
        for (owner, attribute, arr), start in zip(self._members, starts):
            view = self.buffer[start:start + arr.nbytes].view(arr.dtype).reshape(arr.shape)
            view[...] = arr
            setattr(owner, attribute, view)

    @property
    def nbytes(self) -> int:
        return 0 if self.buffer is None else int(self.buffer.nbytes)


__all__ = ["Arena"]
