#!/usr/bin/env python3
"""A controller closing a Powershift clutch-to-clutch swap against the plant server over ZeroMQ.

Gear 1 (clutches 1, 3, 6; ratio 48) to gear 3 (clutches 2, 3, 6; ratio
32): the first stage swaps from clutch 1 (gear pair 1:3) to clutch 2
(pair 1:2), as in section 5 of Morselli, Zanasi & Ferracin.  The controller reads the plant's
outputs and writes pressure and torque commands, the way a TCU would:

1. *hold*: gear 1 at full pressure until ``shift_at_s``;
2. *torque phase*: clutch 2 fills to just above its kiss point and ramps
   up while clutch 1 ramps down, handing the torque over;
3. *inertia phase*: clutch 2 pressure keeps rising at ``sync_rate`` until
   the measured slip of clutch 2 falls below ``sync_slip`` (closed loop on
   the plant's speeds);
4. *lock*: clutch 2 to full pressure once it sticks.

Realtime (the server's default)::

    gearbox-hil serve powershift &
    python examples/closed_loop_swap.py --plot out/demo/closed_loop_swap.png --shutdown

The controller is then called whenever a state message (1 kHz) shows a new
period of ``period_ticks`` ticks (2 by default) and sends a command whenever
its outputs change (at least every 20 ms, which also feeds
the server's command watchdog).  With ``--lockstep`` (server started with
``--mode lockstep``) it steps the plant itself, ``period_ticks`` ticks per
controller update, and the run is deterministic; with ``--offline`` the
plant runs in this process (no server) and the run equals the lockstep one
bit for bit.  The controller is written to the controller interface of
``server/offline/controller.py``: the same object in all three.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from io_adapters.zmq.client import HilClient  # noqa: E402
from server.offline.controller import Controller  # noqa: E402
from server.testbench.closed_loop import closed_loop_lockstep, closed_loop_realtime  # noqa: E402

TRACE_SIGNALS = ("w_1", "w_2", "w_out", "ratio", "gear", "pressure_c1", "pressure_c2", "torque_c1", "torque_c2",
                 "slip_c1", "slip_c2", "stuck_c1", "stuck_c2")


@dataclass
class SwapPlan:
    """Set points of the swap (pressures in bar, torques in N m, times in s)."""

    shift_at_s: float = 0.5
    duration_s: float = 1.5
    off_clutch: int = 1
    on_clutch: int = 2
    held_clutches: tuple[int, ...] = (3, 6)
    full_bar: float = 16.0
    fill_bar: float = 2.0  # kiss point of clutch 2 is 1.5 bar
    torque_phase_bar: float = 7.0  # clutch 2 at the end of the torque phase
    torque_phase_s: float = 0.1  # clutch 1 ramps 16 -> 0 and clutch 2 fill -> torque_phase_bar in this time
    sync_rate_bar_s: float = 40.0  # clutch 2 pressure rise during the inertia phase
    sync_slip_rad_s: float = 0.5  # slip of clutch 2 below which it is taken as synchronised
    lock_s: float = 0.05  # clutch 2 to full pressure in this time once synchronised
    engine_torque: float = 300.0
    load_torque: float = 3500.0


class SwapController(Controller):
    """Pressure commands from the plant's outputs: the controller interface of ``server.offline.controller``.

    The same object runs offline (``closed_loop``), in lockstep and against a
    realtime server (``server.testbench.closed_loop``).  It owns the
    pressures of the off-going and the on-coming clutch, sets the held
    clutches, engine and load torque before tick 0, and is called every
    ``period_ticks`` ticks.  Parameters: a :class:`SwapPlan`, or its fields as
    keywords (what a test file's ``[controller] params`` gives).
    """

    def __init__(self, plan: SwapPlan | None = None, period_ticks: int = 2, **plan_values):
        self.plan = plan if plan is not None else SwapPlan(**plan_values)
        self.period_ticks = period_ticks
        p = self.plan
        self.owned_inputs = (f"p_c{p.off_clutch}", f"p_c{p.on_clutch}")
        self.phase = "hold"
        self.t_sync: float | None = None
        self.p_on_at_sync = 0.0
        self.timeline: list = []  # (t, phase)

    def bind(self, output_names, input_names) -> None:
        """Resolve the signals' indices; a run starts here, in the hold phase at t = 0."""
        super().bind(output_names, input_names)
        self.phase, self.t_sync, self.p_on_at_sync, self.timeline = "hold", None, 0.0, [(0.0, "hold")]
        p = self.plan
        self._off = self.input_index[f"p_c{p.off_clutch}"]
        self._on = self.input_index[f"p_c{p.on_clutch}"]
        self._slip = self.output_index[f"slip_c{p.on_clutch}"]
        self._stuck = self.output_index[f"stuck_c{p.on_clutch}"]

    def initial_inputs(self) -> dict[str, float]:
        p = self.plan
        u = {f"p_c{c}": p.full_bar for c in (p.off_clutch, *p.held_clutches)}
        u.update(engine_torque=p.engine_torque, load_torque=p.load_torque)
        return u

    def _enter(self, phase: str, t: float) -> None:
        self.phase = phase
        self.timeline.append((round(t, 6), phase))

    def update(self, t_s: float, y, u) -> None:
        """Write the pressure commands (bar) for the plant outputs ``y`` at time ``t_s`` (s) into ``u``."""
        u[self._off], u[self._on] = self.pressures(t_s, abs(y[self._slip]), y[self._stuck] >= 0.5)

    def pressures(self, t: float, slip: float, stuck: bool) -> tuple[float, float]:
        """(off-going, on-coming) clutch pressure, bar, at time ``t`` (s) for the on-coming clutch's slip
        (rad/s) and stuck flag."""
        p = self.plan
        if not self.timeline:
            self._enter("hold", t)
        tau = t - p.shift_at_s
        if tau < 0.0:
            return p.full_bar, 0.0
        if self.phase == "hold":
            self._enter("torque", t)
        p_off = max(0.0, p.full_bar * (1.0 - tau / p.torque_phase_s))
        if self.phase == "torque":
            if tau < p.torque_phase_s:
                frac = tau / p.torque_phase_s
                return p_off, p.fill_bar + frac * (p.torque_phase_bar - p.fill_bar)
            self._enter("inertia", t)
        if self.phase == "inertia":
            p_on = min(p.full_bar, p.torque_phase_bar + p.sync_rate_bar_s * (tau - p.torque_phase_s))
            if not (stuck or slip < p.sync_slip_rad_s):
                return 0.0, p_on
            self.t_sync = t
            self.p_on_at_sync = p_on
            self._enter("lock", t)
        frac = min(1.0, max(0.0, (t - self.t_sync) / p.lock_s))
        return 0.0, self.p_on_at_sync + frac * (p.full_bar - self.p_on_at_sync)


@dataclass
class RunResult:
    """What the controller saw."""

    trace: list[dict] = field(default_factory=list)  # one row per state received: t and TRACE_SIGNALS
    gear_changes: list[tuple[float, int, float]] = field(default_factory=list)  # (t, gear, ratio)
    timeline: list = field(default_factory=list)
    commands_sent: int = 0
    states_received: int = 0
    seq_gaps: int = 0

    @property
    def gears(self) -> list[int]:
        return [g for _, g, _ in self.gear_changes]


def _observe(res: RunResult, t: float, y: dict[str, float], last_gear: list) -> None:
    res.trace.append({"t": t, **{k: y[k] for k in TRACE_SIGNALS}})
    g = int(round(y["gear"]))
    if g != last_gear[0]:
        res.gear_changes.append((t, g, y["ratio"]))
        last_gear[0] = g


def run_realtime(hil: HilClient, ctl: SwapController, timeout_s: float = 10.0,
                 heartbeat_s: float = 0.02) -> RunResult:
    """Close the loop on the state stream of a server in realtime mode (``closed_loop_realtime``)."""
    res = RunResult()
    last_gear = [-1]
    st = closed_loop_realtime(hil, ctl, ctl.plan.duration_s, heartbeat_s=heartbeat_s, timeout_s=timeout_s,
                              on_state=lambda s: _observe(res, s.t, s.y, last_gear))
    res.states_received, res.seq_gaps, res.commands_sent = st.states, st.gaps, st.commands
    res.timeline = list(ctl.timeline)
    return res


def _result(r, ctl: SwapController) -> RunResult:
    """The rows of a lockstep or offline closed-loop run (``ClosedLoopResult``) as a :class:`RunResult`."""
    res = RunResult()
    last_gear = [-1]
    for t, row in zip(r.time, r.outputs):
        _observe(res, float(t), dict(zip(r.output_names, row.tolist())), last_gear)
    res.commands_sent = r.updates
    res.states_received = len(r.time) - 1
    res.timeline = list(ctl.timeline)
    return res


def run_lockstep(hil: HilClient, ctl: SwapController, period_ticks: int | None = None) -> RunResult:
    """Close the loop by stepping a server in lockstep mode (deterministic; ``closed_loop_lockstep``)."""
    if period_ticks is not None:
        ctl.period_ticks = period_ticks
    r = closed_loop_lockstep(hil, ctl, duration_s=ctl.plan.duration_s, every=ctl.period_ticks)
    return _result(r, ctl)


def run_offline(ctl: SwapController, config: str = "powershift", dt_s: float = 1e-3) -> tuple[RunResult, dict]:
    """The same controller against the plant in this process, no server (``closed_loop``); (result, describe)."""
    from plant_models.registry import describe_config, load_plant
    from server.offline.controller import closed_loop

    plant = load_plant(config)
    r = closed_loop(plant, None, ctl, every=ctl.period_ticks, duration_s=ctl.plan.duration_s, dt=dt_s)
    return _result(r, ctl), describe_config(config)


def write_csv(res: RunResult, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["t", *TRACE_SIGNALS])
        w.writeheader()
        w.writerows(res.trace)


PHASE_COLORS = {"hold": "0.92", "torque": "#fde0c5", "inertia": "#d5e8f7", "lock": "#dcefd6"}


def shift_name(plant: dict, plan) -> str:
    """The shift by its gears, the swapped clutches in brackets: ``gear 1 -> gear 3 (C1 -> C2)``.

    The gears come from the server's description (each gear's engaged clutches).
    """
    def gear(clutch: int) -> str:
        engaged = {f"C{c}" for c in (clutch, *plan.held_clutches)}
        return next((f"gear {g['name']}" for g in plant.get("gears", []) if set(g["engaged"]) == engaged),
                    "no gear")

    return f"{gear(plan.off_clutch)} -> {gear(plan.on_clutch)} (C{plan.off_clutch} -> C{plan.on_clutch})"


def figure_of(res: RunResult, title: str):
    """The swap as a matplotlib figure: speeds, pressures, torques, ratio and gear, the phases shaded.

    Every line is named in a legend above its panel (never over the data),
    with its physical meaning and unit.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    t = [r["t"] for r in res.trace]
    col = {k: [r[k] for r in res.trace] for k in TRACE_SIGNALS}
    fig = Figure(figsize=(9, 10.5), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots(4, 1, sharex=True)

    def legend(a, *twins):
        handles, labels = [], []
        for x in (a, *twins):
            h, lab = x.get_legend_handles_labels()
            handles += h
            labels += lab
        a.legend(handles, labels, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=min(len(handles), 4),
                 fontsize=8, frameon=False, borderaxespad=0.2)

    # the controller's phases as shaded bands (named once, in the top panel's legend)
    ends = [tt for tt, _ in res.timeline[1:]] + [t[-1] if t else 0.0]
    for k, a in enumerate(ax):
        for (t0, phase), t1 in zip(res.timeline, ends):
            a.axvspan(t0, t1, color=PHASE_COLORS.get(phase, "0.9"), linewidth=0,
                      label=f"{phase} phase" if k == 0 else None)
        a.grid(True, linewidth=0.4, alpha=0.6)
    ax[0].plot(t, col["w_1"], color="tab:blue", label="engine (axle 1) $\\omega_1$")
    ax[0].plot(t, [-v for v in col["w_2"]], color="tab:orange", label="countershaft (axle 2) $-\\omega_2$")
    ax[0].set_ylabel("speed [rad/s]")
    out = ax[0].twinx()
    out.plot(t, col["w_out"], "k--", linewidth=1.0, label="output $\\omega_{out}$ (right axis)")
    out.set_ylabel("output speed [rad/s]")
    legend(ax[0], out)
    ax[1].plot(t, col["pressure_c1"], color="tab:red", label="clutch 1, off-going")
    ax[1].plot(t, col["pressure_c2"], color="tab:green", label="clutch 2, on-coming")
    ax[1].set_ylabel("clutch pressure [bar]")
    legend(ax[1])
    ax[2].plot(t, col["torque_c1"], color="tab:red", label="clutch 1 friction torque")
    ax[2].plot(t, col["torque_c2"], color="tab:green", label="clutch 2 friction torque")
    ax[2].set_ylabel("clutch torque [N m]")
    legend(ax[2])
    import numpy as np

    ratio = np.asarray(col["ratio"], dtype=float)  # input over output speed; 0 while the output nearly stands
    ratio = np.where(ratio != 0.0, ratio, np.nan)
    ax[3].plot(t, ratio, color="tab:purple", label="ratio $\\omega_1/\\omega_{out}$ (input over output speed)")
    ax[3].set_ylabel("ratio [-]")
    gear = ax[3].twinx()
    gear.step(t, col["gear"], color="0.3", where="post", linewidth=1.0, label="engaged gear (right axis)")
    gear.set_ylabel("gear [-]")
    gear.set_ylim(-0.3, max([3.0] + col["gear"]) + 0.6)
    legend(ax[3], gear)
    ax[3].set_xlabel("simulation time [s]")
    fig.suptitle(title, fontsize=11)
    return fig


def plot(res: RunResult, path: Path, title: str) -> None:
    """Write :func:`figure_of` as a PNG."""
    fig = figure_of(res, title)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)


def _report(res: RunResult) -> bool:
    for t, ph in res.timeline:
        print(f"  t = {t:6.3f} s  {ph} phase")
    for t, g, r in res.gear_changes:  # r: the plant's `ratio` output, input over output speed
        print(f"  t = {t:6.3f} s  gear {g}" + (f"  (ratio {r:.1f}, input over output speed)" if g and r else
                                                "  (clutches slipping)"))
    return len(res.gears) >= 2 and res.gears[0] == 1 and res.gears[-1] == 3


def _offline_main(ctl: SwapController, args) -> int:
    res, plant = run_offline(ctl)
    print(f"offline: {plant['kind']} plant in this process, controller every {ctl.period_ticks} ticks")
    shifted = _report(res)
    if args.csv:
        write_csv(res, args.csv)
    if args.plot:
        plot(res, args.plot, f"Powershift {shift_name(plant, ctl.plan)}, closed in process (offline)")
        print(f"  plot written to {args.plot}")
    print("shift gear 1 -> gear 3: " + ("done" if shifted else "NOT completed"))
    return 0 if shifted else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--control", default="tcp://127.0.0.1:5555", help="the server's control endpoint")
    ap.add_argument("--lockstep", action="store_true", help="step the server (started with --mode lockstep)")
    ap.add_argument("--offline", action="store_true", help="run the plant in this process (no server)")
    ap.add_argument("--shift-at", type=float, default=0.5, help="start of the swap, s after the reset")
    ap.add_argument("--duration", type=float, default=1.5, help="simulated time to run, s")
    ap.add_argument("--plot", type=Path, help="write a PNG of the swap here")
    ap.add_argument("--csv", type=Path, help="write the received trace here")
    ap.add_argument("--shutdown", action="store_true", help="shut the server down at the end")
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds to wait for the server")
    ap.add_argument("--client-key", help="this client's secret key file, for a server with CURVE on")
    ap.add_argument("--server-key", help="the server's public key file (with --client-key)")
    args = ap.parse_args(argv)

    ctl = SwapController(SwapPlan(shift_at_s=args.shift_at, duration_s=args.duration))
    if args.offline:
        return _offline_main(ctl, args)
    with HilClient(args.control, timeout_s=args.timeout, client_key=args.client_key,
                   server_key=args.server_key) as hil:
        plant = hil.describe()
        if plant["kind"] != "powershift":
            print(f"this example drives the powershift plant; the server runs {plant['kind']}", file=sys.stderr)
            return 2
        print(f"connected to {args.control}: {plant['kind']} plant, {plant['mode']} mode at "
              f"{plant['rate_hz']:g} Hz")
        res = run_lockstep(hil, ctl) if args.lockstep else run_realtime(hil, ctl, timeout_s=args.timeout)
        shifted = _report(res)
        print(f"  {res.states_received} states received ({res.seq_gaps} gaps), {res.commands_sent} commands sent")
        status = hil.status()
        if args.shutdown:  # before plotting: a silent controller would trip the server's command watchdog
            hil.shutdown()
    tm = status["timing"]
    if tm["lateness_us"]["p99"] is not None:
        print(f"  server timing so far: {tm['ticks']} ticks, rate {tm['rate_hz_actual']:.1f} Hz, "
              f"TET p99 {tm['tet_us']['p99']:.1f} us, lateness p99 {tm['lateness_us']['p99']:.1f} us, "
              f"overruns {tm['overruns']}")
    if args.csv:
        write_csv(res, args.csv)
    if args.plot:
        plot(res, args.plot, f"Powershift {shift_name(plant, ctl.plan)}, closed over ZeroMQ ({plant['mode']})")
        print(f"  plot written to {args.plot}")
    print("shift gear 1 -> gear 3: " + ("done" if shifted else "NOT completed"))
    return 0 if shifted else 1


if __name__ == "__main__":
    sys.exit(main())
