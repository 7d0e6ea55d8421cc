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
from plant_models.run import stages as _stages
from plant_models.run.compiled import CompiledTick, TickPlan, queued_inputs_ctx, state_row_ctx
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
        """Make the tick's stepper and its compiled form again (between ticks: the fault set's tables changed,
        the adapters opened)."""
        self.stepper = self._stages()
        self._tick_step = self.stepper.step
        compiled, self.tick_path_reason = self._compiled_tick()
        self.compiled_tick = compiled
        self._tick_run = compiled.run if compiled is not None else None
        self._tick_step_ns = compiled.step_ns if compiled is not None else None

    def choose_tick_path(self, path: str) -> None:
        """``"auto"``: the compiled tick whenever every stage in use has a compiled form (the default);
        ``"python"``: always the Python stepper (for A/B comparisons and as a fallback).  Between ticks."""
        if path not in ("auto", "python"):
            raise ValueError(f"tick path {path!r}: 'auto' or 'python'")
        self.tick_path_wanted = path
        self._restage()

    @property
    def tick_path(self) -> str:
        """``"compiled"``: a tick is one compiled call (:mod:`plant_models.run.compiled`); ``"python"``: the
        Python stepper runs it (:attr:`tick_path_reason` says why)."""
        return "compiled" if self.compiled_tick is not None else "python"

    def _compiled_tick(self) -> tuple[CompiledTick | None, str]:
        """The tick as one compiled call, when every stage in use has a compiled form; else (None, why not).

        The stages of :meth:`_stages` in the same order: the adapters' reads and the queued inputs
        (``commanded``), the loaded scenario's row and the command watchdog (``inputs``; the scenario's gate
        sends the ticks that swap or refill its table or end it to the stepper, so ``hand_back`` is the
        stepper's), while fault rows are in use ``fault_inputs``, the plant's step, ``fault_outputs``, the
        state ring's row (``state_row``), ``fault_restore``, and the adapters' writes (``send``); and every
        stage of the list declared with a ``make_compiled``, in the list's order
        (:func:`plant_models.run.stages.compiled_order`, the compiled offline run's rule).  Between ticks.
        """
        from plant_models.offline import kernel_address  # the compiled plant step's address, as the offline run

        plant = self.plant
        if self.tick_path_wanted == "python":
            return None, "the Python stepper was chosen (choose_tick_path)"
        extra = _stages.python_only_stages()
        if extra:
            return None, f"stage {', '.join(extra)} has a Python form (make) and no compiled form (make_compiled)"
        if (self._plant_step != plant.step or not getattr(plant, "rehearsable", False)
                or "step" not in getattr(plant, "compiled", {})):
            return None, "the plant's step is not one compiled call on its buffers (or not compiled yet)"
        t_at = plant.time_index() if hasattr(plant, "time_index") else -1
        if t_at < 0:
            return None, "the plant does not say where its time is in its buffers"
        ctx = self.context
        if self._readers and (ctx is None or ctx.feed_watchdog != self.watchdog.feed):
            return None, "the adapters feed another watchdog than the loop's"
        reads = []
        for a in self._readers:
            s = a.compiled_read()
            if s is None:
                return None, f"adapter {a.name} ({type(a).__name__}) has no compiled read"
            reads.append(s)
        writes = []
        for a in self._writers:
            s = a.compiled_write()
            if s is None:
                return None, f"adapter {a.name} ({type(a).__name__}) has no compiled write"
            writes.append(s)
        queued = queued_inputs_ctx(self._queued, self._queued_idx, self._queued_val, plant.u, plant.u_rate)
        scenario = self.player.compiled_stages(plant.u, plant.u_rate, self.tick_info)
        gate, inputs = scenario if scenario is not None else (None, None)
        watchdog = self.watchdog.compiled_stage(self._watchdog_in_mode, self.tick_info)
        impl = dict(commanded=reads + [queued], inputs=[x for x in (inputs, watchdog) if x is not None],
                    state_row=state_row_ctx(self.ring, self.tick_info, plant.df, t_at), send=writes)
        if self.faults.n_signal > 0:  # the stages the Python stepper has while fault rows are in use
            impl["fault_inputs"], impl["fault_outputs"], impl["fault_restore"] = self.faults.compiled_stages()
        n_end = int(round(self.cfg.duration_s / self.dt)) if self.cfg.duration_s > 0 else 0
        _, before, after = _stages.compiled_order(impl, TickPlan(plant, self.dt, self.mode, n_end))
        step_at = kernel_address(plant.compiled["step"])
        return CompiledTick(step_at, plant, self.tick_info, before + after, len(after), gate, self.ring), \
            "every stage in use has a compiled form"

    def _commanded(self, k: int) -> None:
        """Stage ``commanded``: the adapters' commands, then the inputs queued by a request.  Called in the
        real-time loop."""
        now_ns = self._now_ns
        for a in self._readers:
            a.read(k, now_ns)
        queued = self._queued_slots
        n = queued[0]
        if n:
            u, u_rate, idx, val = self.plant.u, self.plant.u_rate, self._queued_idx, self._queued_val
            for j in range(n):
                u[idx[j]] = val[j]
                u_rate[idx[j]] = 0.0
            queued[0] = 0

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
