"""The real-time loop's implementations of the run pipeline's stages: what one tick does, stage by stage.

:class:`TickStages` is a part of :class:`server.realtime.loop.Loop` (its
base class: the stages read the loop's attributes directly, with no
indirection in the tick).  :meth:`TickStages._stages` hands them to the
:class:`~plant_models.run.stepper.Stepper`, which runs them in the order of
:mod:`plant_models.run.stages`, the order of every offline mode too.  Each
is called in the real-time loop: it allocates nothing, blocks on nothing
and looks up nothing by name.
"""

from __future__ import annotations

import time

from io_adapters.base import TI_STATUS
from plant_models.run.stepper import Stepper


class TickStages:
    """The tick's stages; the attributes they read are :class:`~server.realtime.loop.Loop`'s."""

    def _stages(self) -> Stepper:
        """The tick's implementations of the run pipeline's stages (:mod:`plant_models.run.stages`).

        The fault stages (and the scenario's hand-back after them) are left
        out while no fault row is in use: the fault set calls
        :meth:`_restage` between ticks whenever its tables change.
        """
        faulted = self.faults.n_signal > 0
        return Stepper(self.plant, self.dt, dict(self.faults.stages() if faulted else {}, commanded=self._commanded,
                                                 inputs=self._inputs, step=self._timed_step,
                                                 state_row=self._state_row,
                                                 hand_back=self._hand_back if faulted else None,
                                                 send=self._send if self._writers else None), self.mode)

    def _restage(self) -> None:
        """Make the tick's stepper again (between ticks: the fault set's tables changed)."""
        self.stepper = self._stages()
        self._tick_step = self.stepper.step

    def _commanded(self, k: int) -> None:
        """Stage ``commanded``: the adapters' commands, then the inputs queued by a request.  Called in the
        real-time loop."""
        now_ns = self._now_ns
        for a in self._readers:
            a.read(k, now_ns)
        n = self._queued_n
        if n:
            u, u_rate, idx, val = self.plant.u, self.plant.u_rate, self._queued_idx, self._queued_val
            for j in range(n):
                u[idx[j]] = val[j]
                u_rate[idx[j]] = 0.0
            self._queued_n = 0

    def _inputs(self, k: int) -> None:
        """Stage ``inputs``: a scenario's inputs of step k (exactly the offline run's, so lockstep equals
        ``gearbox-hil simulate`` bit for bit), else the command watchdog.  Called in the real-time loop."""
        player = self.player
        if k == player.swap_at:
            player.swap()
        sc = player.active
        if sc is not None and k < sc.n_steps:
            sc.apply(self.plant, k)
            self.stepper.dt = sc.dt
            return
        if sc is not None:
            player.release(k)
        elif self._watchdog_in_mode:
            self.watchdog.update(self._now_ns, self.dt)
        self.stepper.dt = self.dt

    def _timed_step(self, dt: float) -> int:
        """Stage ``step``: the plant's step, timed.  Called in the real-time loop."""
        t0 = time.monotonic_ns()
        st = self._plant_step(dt)
        self._step_ns = time.monotonic_ns() - t0
        self.tick += 1
        self.tick_info[TI_STATUS] = st
        return st

    def _state_row(self, k: int) -> None:
        """Stage ``state_row``: the state-ring row; a scenario that ends here with no fault rows hands the inputs
        back first, so the row holds its final values.  Called in the real-time loop."""
        sc = self.player.active
        if sc is not None and k + 1 >= sc.n_steps and not self.faults.n_signal:
            self.player.release(k + 1)
        self._ring_push(k + 1, self._now_ns, self.plant.time)

    def _hand_back(self, k: int) -> None:
        """Stage ``hand_back``: with fault rows, the scenario's end after the commanded inputs are back (so its
        final values stay).  Called in the real-time loop."""
        sc = self.player.active
        if sc is not None and k + 1 >= sc.n_steps:
            self.player.release(k + 1)

    def _send(self, k: int) -> None:
        """Stage ``send``: the writes of the adapters that send every tick.  Called in the real-time loop."""
        now_ns = self._now_ns
        for a in self._writers:
            a.write(k + 1, now_ns)


__all__ = ["TickStages"]
