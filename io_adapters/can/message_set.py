"""CAN message sets: a DBC file plus the mapping of its signals to plant ports.

A message set is a TOML file in ``configs/`` (``io_can_<plant>.toml``)::

    dbc = "powershift.dbc"            # relative to this file

    [defaults]
    timeout_cycles = 3                # a command is stale after 3 missed cycles
    max_delta_counter = 1             # accepted alive-counter step (1 = no lost frame)
    crc_variant = "sae_j1850"         # or "autosar_p01" (E2E profile 1: init 0x00, no final XOR),
                                      # or "autosar_p05" (profile 5: CRC-16 in two bytes, CAN FD)

    [rx.TCU_ClutchCmdA]               # TCU -> plant: DBC message name
    checksum = "ClutchCmdA_CRC"       # CRC-8 SAE J1850 byte (optional)
    counter = "ClutchCmdA_Counter"    # alive counter (optional)
    data_id = 0x0100                  # E2E data ID (default: the frame ID)
    [rx.TCU_ClutchCmdA.signals]
    PressureCmd_C1 = "p_c1"           # DBC signal = plant input

    [tx.HIL_SpeedsA]                  # plant -> TCU
    checksum = "SpeedsA_CRC"
    counter = "SpeedsA_Counter"
    [tx.HIL_SpeedsA.signals]
    EngineSpeed = "w_1"               # DBC signal = plant output or status source

Everything is resolved once, when the server starts (:func:`load_message_set`):
DBC messages and signals by name, plant ports by name, unit conversions
(the DBC may carry rpm where the plant speaks rad/s), accepted raw ranges
(the DBC's range intersected with the plant's declared range and allowed
values), cycle times in ticks (from the DBC's ``GenMsgCycleTime``), start
offsets (``GenMsgStartDelayTime``, else staggered) and receive timeouts.
The result is a pair of :class:`~io_adapters.can.layouts.CompiledLayout`.

Why ``_message`` is longer than 80 lines: it resolves one DBC message
against its mapping and the plant's ports in one pass (signals, units,
ranges, cycle time, E2E, timeouts), each step ending in a one-line error
naming the file, message and signal; the steps depend on one another's
results (a range needs the unit's gain, a timeout the cycle time).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from plant_models.config import ConfigError, ConfigReader, load_toml, resolve_config
from plant_models.plant import Plant
from plant_models.units import unit_gain

from .frames import CRC_BITS, CRC_VARIANTS, N_AUX, SOURCE_AUX, SOURCE_PLANT
from .layouts import CompiledLayout, MessageLayout, SignalLayout, compile_layout, raw_bounds, raw_range
from .nm import NmConfig, parse_nm

# Values a transmitted signal can carry besides plant outputs (index = position).
AUX_SOURCES = (
    ("hil.tick", "loop tick number since start"),
    ("hil.overruns", "ticks that missed their deadline"),
    ("hil.watchdog", "command watchdog: 0 = commands fresh, 1 = tripped (safe state)"),
    ("can.commands_fresh", "1 when every required command message is fresh"),
    ("can.crc_errors", "received frames rejected for a wrong checksum"),
    ("can.counter_errors", "received frames rejected for a frozen or jumping alive counter"),
    ("can.dlc_errors", "received frames rejected for a wrong length"),
    ("can.unknown_ids", "received frames with an ID outside the message set"),
    ("can.range_errors", "received frames rejected for a value out of range"),
    ("can.timeouts", "command messages that went stale"),
    ("can.rx_ok", "received frames accepted"),
    ("can.tx_errors", "frames the bus refused to send"),
    ("can.unknown_mux", "received frames rejected for a multiplexer value the DBC does not define"),
)
AUX_INDEX = {name: k for k, (name, _) in enumerate(AUX_SOURCES)}

@dataclass
class MessageSet:
    """A resolved message set: both directions compiled, plus what docs and status need."""

    source: str
    dbc_path: str
    db: object  # cantools.database.can.Database
    rx: CompiledLayout
    tx: CompiledLayout
    notes: list[str]
    nm: NmConfig | None = None  # the rest-bus's CanNm ([nm], io_adapters/can/nm.py)

    def frame_ids(self) -> dict[tuple[int, bool], int]:
        """(frame ID, extended) -> receive row (for the receive thread's look-up)."""
        return {(m.frame_id, m.extended): k for k, m in enumerate(self.rx.messages)}


def load_dbc(path: Path, source: str, key: str):
    """Load a DBC with cantools; any problem becomes a ConfigError naming the file."""
    import cantools

    try:
        return cantools.database.load_file(str(path), database_format="dbc", strict=True)
    except FileNotFoundError:
        raise ConfigError(source, key, f"DBC file {path} not found") from None
    except Exception as exc:  # cantools raises several unrelated types for bad files
        raise ConfigError(source, key, f"DBC file {path} cannot be read: {exc}") from None


def load_message_set(path_or_name: str | Path, plant: Plant, period_s: float) -> MessageSet:
    """Read a message-set file and resolve it against ``plant`` for a loop of ``period_s``.

    Raises ConfigError (file, key, problem) for anything that does not fit:
    unknown DBC message or signal, unknown plant port, incompatible units, a
    cycle time that is not a whole number of ticks, a mapped input whose
    plant range the DBC signal cannot carry, and so on.
    """
    path = resolve_config(path_or_name)
    data = load_toml(path)
    cfg = ConfigReader(data, str(path))
    dbc_name = cfg.string("dbc")
    dbc_path = Path(dbc_name)
    if not dbc_path.is_absolute():
        dbc_path = path.parent / dbc_path
    db = load_dbc(dbc_path, str(path), "dbc")
    defaults = cfg.sub("defaults", required=False)
    timeout_cycles = defaults.number("timeout_cycles", 3.0, positive=True)
    max_delta = defaults.integer("max_delta_counter", 1, lo=1)
    crc_variant = defaults.string("crc_variant", "sae_j1850", choices=sorted(CRC_VARIANTS))
    defaults.reject_unknown()
    notes: list[str] = []
    rx_tab = cfg.sub("rx", required=False)
    tx_tab = cfg.sub("tx", required=False)
    constants: list[float] = []  # constant transmit values ({ value = ... }: e.g. network-management frames)
    rx = [_message(rx_tab, name, db, plant, period_s, "rx", timeout_cycles, max_delta, crc_variant, notes)
          for name in rx_tab.data]
    tx = [_message(tx_tab, name, db, plant, period_s, "tx", timeout_cycles, max_delta, crc_variant, notes,
                   constants) for name in tx_tab.data]
    nm = parse_nm(cfg.sub("nm", required=False), [m.name for m in tx])
    cfg.reject_unknown()
    seen: dict[tuple[int, bool], str] = {}
    for m in rx:
        k = (m.frame_id, m.extended)
        if k in seen:
            raise ConfigError(str(path), f"rx.{m.name}", f"frame ID 0x{m.frame_id:X} is already received as {seen[k]}")
        seen[k] = m.name
    _stagger(tx)
    tx_layout = compile_layout(tx)
    tx_layout.constants = constants
    return MessageSet(str(path), str(dbc_path), db, compile_layout(rx), tx_layout, notes, nm)


def _stagger(tx: list[MessageLayout]) -> None:
    """Spread messages without an explicit start delay over the ticks of their cycle.

    Sending all messages of a cycle in one tick would make that tick the
    slowest and bunch the frames on the bus; message k starts at tick
    ``k mod period`` instead (the DBC's GenMsgStartDelayTime wins if set).
    """
    for k, m in enumerate(tx):
        if m.offset_ticks < 0 and m.period_ticks > 0:
            m.offset_ticks = k % m.period_ticks
        m.offset_ticks = max(m.offset_ticks, 0)


def _ticks(ms: float, period_s: float, reader: ConfigReader, key: str, what: str) -> int:
    ticks = ms * 1e-3 / period_s
    n = round(ticks)
    if n < 1 or abs(ticks - n) > 1e-6 * max(ticks, 1.0):
        raise reader.error(key, f"{what} {ms:g} ms is not a whole number of {period_s * 1e3:g} ms ticks")
    return n


def _message(tab: ConfigReader, name: str, db, plant: Plant, period_s: float, direction: str,
             timeout_cycles: float, max_delta_default: int, crc_default: str, notes: list[str],
             constants: list[float] | None = None) -> MessageLayout:
    """Message ``name`` of the DBC ``db`` with its table of the message set, resolved against the plant."""
    mc = tab.sub(name)
    try:
        msg = db.get_message_by_name(name)
    except KeyError:
        raise tab.error(name, f"no message {name!r} in the DBC; its messages are "
                        + ", ".join(sorted(m.name for m in db.messages))) from None
    if msg.is_container:
        raise tab.error(name, "container messages are not supported")
    sig_names = [s.name for s in msg.signals]

    def sig_index(key: str) -> int:
        if not mc.has(key):
            return -1
        sname = mc.string(key)
        if sname not in sig_names:
            raise mc.error(key, f"message {name} has no signal {sname!r}; its signals are {', '.join(sig_names)}")
        return sig_names.index(sname)

    crc_i = sig_index("checksum")
    cnt_i = sig_index("counter")
    if crc_i >= 0 and cnt_i == crc_i:
        raise mc.error("counter", "the counter and the checksum must be different signals")
    data_id = mc.integer("data_id", msg.frame_id & 0xFFFF, lo=0, hi=0xFFFF)
    variant = mc.string("crc_variant", crc_default, choices=sorted(CRC_VARIANTS))
    crc_init, crc_xor = CRC_VARIANTS[variant]
    crc_bits = CRC_BITS[variant]
    max_delta = mc.integer("max_delta_counter", max_delta_default, lo=1)
    cycle_ms = msg.cycle_time or 0
    if mc.has("cycle_ms"):
        cycle_ms = mc.number("cycle_ms", positive=True)
    layouts: list[SignalLayout] = []
    for s in msg.signals:
        if s.is_float:
            lo_b, hi_b = 0, 0
        else:
            lo_b, hi_b = raw_bounds(s.length, s.is_signed)
        layouts.append(SignalLayout(s.name, s.start, s.length, s.byte_order == "little_endian", s.is_signed,
                                    float(s.scale), float(s.offset), lo_b, hi_b))
    pages = _multiplexing(msg, layouts)
    for key, i in (("checksum", crc_i), ("counter", cnt_i)):
        if i >= 0 and (layouts[i].mux_conditions or layouts[i].mux_values):
            raise mc.error(key, f"{msg.signals[i].name} is multiplexed; the checksum and the counter must be in "
                           "every frame of the message")
    counter_mod = _counter_modulus(mc, msg.signals[cnt_i]) if cnt_i >= 0 else 16
    if crc_i >= 0:
        _check_checksum(mc, msg.signals[crc_i], crc_bits, variant)
    _map_signals(mc, name, msg, layouts, (crc_i, cnt_i), direction, plant, notes, constants)
    required = mc.boolean("required", True) if direction == "rx" else False
    timing = _timing(mc, name, msg, direction, cycle_ms, period_s, timeout_cycles, len(pages))
    mc.reject_unknown()
    return MessageLayout(name=name, frame_id=msg.frame_id, extended=bool(msg.is_extended_frame), fd=bool(msg.is_fd),
                         length=msg.length, signals=layouts, crc_signal=crc_i, counter_signal=cnt_i,
                         counter_modulus=counter_mod, data_id=data_id, crc_init=crc_init, crc_xor=crc_xor,
                         crc_bits=crc_bits,
                         max_delta=max_delta,
                         required=required, cycle_ms=float(cycle_ms or 0.0), pages=pages, **timing)


def _counter_modulus(mc: ConfigReader, cs) -> int:
    """The modulus of alive counter signal ``cs`` (DBC maximum + 1); ConfigError if it cannot count."""
    if cs.is_signed or cs.scale != 1 or cs.offset != 0 or cs.is_float:
        raise mc.error("counter", f"{cs.name} must be an unsigned raw integer (scale 1, offset 0)")
    counter_mod = (int(cs.maximum) if cs.maximum is not None else (1 << cs.length) - 1) + 1
    if counter_mod < 2:
        raise mc.error("counter", f"{cs.name} must count at least 0..1")
    return counter_mod


def _check_checksum(mc: ConfigReader, cs, crc_bits: int, variant: str) -> None:
    """Checksum signal ``cs`` must fill one byte (CRC-8) or two Intel bytes (CRC-16)."""
    if crc_bits == 16:
        if cs.length != 16 or cs.is_signed or cs.start % 8 != 0 or cs.byte_order != "little_endian":
            raise mc.error("checksum", f"{cs.name} must be an unsigned 16-bit Intel signal filling two bytes "
                           f"(crc_variant {variant})")
    elif cs.length != 8 or cs.is_signed or cs.start % 8 != (0 if cs.byte_order == "little_endian" else 7):
        raise mc.error("checksum", f"{cs.name} must be an unsigned 8-bit signal filling one byte")


def _map_signals(mc: ConfigReader, name: str, msg, layouts: list[SignalLayout], protection: tuple[int, int],
                 direction: str, plant: Plant, notes: list[str], constants: list[float] | None) -> None:
    """The message's ``signals`` table into ``layouts``: each signal's port (or constant), factor and bias.

    ``protection``: the indices of the checksum and the counter signal (-1: none), which the adapter fills.
    """
    sig_names = [s.name for s in msg.signals]
    sigs = mc.sub("signals", required=False)
    for sname in sigs.data:
        if sname not in sig_names:
            raise sigs.error(sname, f"message {name} has no signal {sname!r}; its signals are {', '.join(sig_names)}")
        j = sig_names.index(sname)
        if j in protection:
            raise sigs.error(sname, "is the message's checksum or counter; the adapter fills and checks it")
        if layouts[j].mux_values:
            raise sigs.error(sname, "is a multiplexer; the adapter sends the message's pages in turn and reads "
                             "the page of each frame from it")
        dbc_sig = msg.signals[j]
        if dbc_sig.is_float:
            raise sigs.error(sname, "IEEE float signals are not supported; use a scaled integer signal")
        if dbc_sig.length > 52:
            raise sigs.error(sname, f"{dbc_sig.length} bits: mapped signals carry at most 52 bits "
                             "(the integers a float64 holds exactly)")
        lay = layouts[j]
        if isinstance(sigs.raw(sname), dict) and "value" in sigs.raw(sname):
            if direction != "tx":
                raise sigs.error(sname, "a constant value is for sent signals; a received signal maps to a port")
            _constant(sigs, sname, msg.signals[j], lay, constants)
            continue
        port, factor, bias = _mapping_entry(sigs, sname)
        if direction == "rx":
            _resolve_rx(sigs, sname, dbc_sig, lay, plant, port, factor, bias)
        else:
            _resolve_tx(sigs, sname, dbc_sig, lay, plant, port, factor, bias, notes, name)


def _timing(mc: ConfigReader, name: str, msg, direction: str, cycle_ms: float, period_s: float,
            timeout_cycles: float, n_pages: int) -> dict:
    """The message's times in ticks of the loop's period (MessageLayout's fields): a sent message's cycle and
    start delay, a received one's timeout."""
    period_ticks = offset_ticks = timeout_ticks = 0
    start_delay_ms = None
    timeout_ms = 0.0
    if direction == "tx":
        if not cycle_ms:
            raise mc.error("cycle_ms", f"message {name} has no GenMsgCycleTime in the DBC; give cycle_ms here")
        period_ticks = _ticks(cycle_ms, period_s, mc, "cycle_ms", "cycle time")
        offset_ticks = -1
        delay = msg.dbc.attributes.get("GenMsgStartDelayTime") if msg.dbc is not None else None
        if mc.has("start_delay_ms"):
            start_delay_ms = mc.number("start_delay_ms", nonnegative=True)
        elif delay is not None:
            start_delay_ms = float(delay.value)
        if start_delay_ms is not None:
            offset_ticks = round(start_delay_ms * 1e-3 / period_s)
    else:
        if mc.has("timeout_ms"):
            timeout_ms = mc.number("timeout_ms", positive=True)
        elif cycle_ms:  # a multiplexed message brings each page once in n_pages frames
            timeout_ms = timeout_cycles * cycle_ms * max(n_pages, 1)
        else:
            raise mc.error("timeout_ms", f"message {name} has no GenMsgCycleTime in the DBC; give timeout_ms here")
        timeout_ticks = max(1, math.ceil(timeout_ms * 1e-3 / period_s - 1e-9))
    return dict(period_ticks=period_ticks, offset_ticks=offset_ticks, timeout_ticks=timeout_ticks,
                start_delay_ms=start_delay_ms, timeout_ms=timeout_ms)


def _multiplexing(msg, layouts: list[SignalLayout]) -> list[tuple[tuple[int, int], ...]]:
    """Fill the multiplexing of a DBC message into its signal layouts; return its pages (empty if not multiplexed).

    cantools gives each signal its multiplexer (``multiplexer_signal``) and
    the values selecting it (``multiplexer_ids``); a multiplexer that is
    itself multiplexed is extended multiplexing (``SG_MUL_VAL_``).  A
    signal's conditions are its whole chain up to the top multiplexer; a
    multiplexer's values are those its signals name; a page is one choice of
    value for every multiplexer present, so every signal of the message is in
    at least one page.
    """
    if not msg.is_multiplexed():
        return []
    index = {sig.name: j for j, sig in enumerate(msg.signals)}
    values: dict[int, set[int]] = {}
    for sig in msg.signals:
        if sig.multiplexer_signal is not None:
            values.setdefault(index[sig.multiplexer_signal], set()).update(int(v) for v in sig.multiplexer_ids or ())
    for j, sig in enumerate(msg.signals):
        chain, cur = [], sig
        while cur.multiplexer_signal is not None:
            chain.append((index[cur.multiplexer_signal], tuple(sorted(int(v) for v in cur.multiplexer_ids or ()))))
            cur = msg.signals[index[cur.multiplexer_signal]]
        layouts[j].mux_conditions = tuple(chain)
        layouts[j].mux_values = tuple(sorted(values.get(j, ())))

    def present(j: int, assign: dict[int, int]) -> bool:
        return all(m in assign and assign[m] in vals for m, vals in layouts[j].mux_conditions)

    def expand(assign: dict[int, int]) -> list[dict[int, int]]:
        for m in sorted(values):
            if m not in assign and present(m, assign):
                return [page for v in sorted(values[m]) for page in expand({**assign, m: v})]
        return [assign]

    return [tuple(sorted(page.items())) for page in expand({})]


def _constant(sigs: ConfigReader, sname: str, dbc_sig, lay: SignalLayout, constants: list[float]) -> None:
    """``Signal = { value = 33 }``: the signal always carries this DBC value (network management, fixed IDs)."""
    t = ConfigReader(sigs.raw(sname), sigs.source, sigs.key(sname))
    value = t.number("value")
    t.reject_unknown()
    lo = float(dbc_sig.minimum) if dbc_sig.minimum is not None else None
    hi = float(dbc_sig.maximum) if dbc_sig.maximum is not None else None
    lay.raw_lo, lay.raw_hi = raw_range(lay.length, lay.signed, lay.scale, lay.offset, lo, hi)
    x = (value - lay.offset) / lay.scale
    raw = round(x)
    if abs(x - raw) > 1e-9 or not lay.raw_lo <= raw <= lay.raw_hi:
        raise sigs.error(sname, f"value {value:g} is not a raw step of the signal inside its range")
    lay.source, lay.target, lay.gain, lay.bias = SOURCE_AUX, N_AUX + len(constants), 1.0, 0.0
    constants.append(float(value))


def _mapping_entry(sigs: ConfigReader, sname: str) -> tuple[str, float | None, float]:
    val = sigs.raw(sname)
    if isinstance(val, str):
        return val, None, 0.0
    if isinstance(val, dict):
        t = ConfigReader(val, sigs.source, sigs.key(sname))
        port = t.string("port")
        factor = t.number("factor") if t.has("factor") else None
        if factor == 0:
            raise t.error("factor", "must not be 0")
        bias = t.number("bias", 0.0)
        t.reject_unknown()
        return port, factor, bias
    raise sigs.error(sname, "must be a port name or a table { port = ..., factor = ..., bias = ... }")


def _gain(sigs: ConfigReader, sname: str, dbc_unit, port_unit: str, port: str, factor) -> float:
    if factor is not None:
        return float(factor)
    g = unit_gain(dbc_unit, port_unit)
    if g is None:
        raise sigs.error(sname, f"unit {dbc_unit or '(none)'!r} of the DBC signal does not convert to unit "
                         f"{port_unit!r} of {port}; give {{ port = \"{port}\", factor = ... }} "
                         "(plant value = factor * DBC value + bias)")
    return g


def _resolve_rx(sigs, sname, dbc_sig, lay: SignalLayout, plant: Plant, port, factor, bias) -> None:
    try:
        k = plant.input_index(port)
    except KeyError as exc:
        raise sigs.error(sname, str(exc.args[0])) from None
    ps = plant.inputs[k]
    gain = _gain(sigs, sname, dbc_sig.unit, ps.unit, port, factor)
    # accepted range in DBC units: the DBC's own range and the plant's declared range
    a, b = (ps.lo - bias) / gain, (ps.hi - bias) / gain
    lo, hi = min(a, b), max(a, b)
    if dbc_sig.minimum is not None:
        lo = max(lo, float(dbc_sig.minimum))
    if dbc_sig.maximum is not None:
        hi = min(hi, float(dbc_sig.maximum))
    rlo, rhi = raw_range(lay.length, lay.signed, lay.scale, lay.offset, lo, hi)
    if rlo > rhi:
        raise sigs.error(sname, f"the DBC signal cannot carry any value of {port} "
                         f"([{ps.lo:g}, {ps.hi:g}] {ps.unit})")
    step = gain * lay.scale
    if ps.integer and not (_whole(step) and _whole(gain * lay.offset + bias)):
        raise sigs.error(sname, f"{port} takes whole numbers; the signal's scaling (factor {lay.scale:g}, "
                         f"offset {lay.offset:g}) gives fractions")
    allowed: list[int] = []
    for v in ps.allowed:
        x = ((v - bias) / gain - lay.offset) / lay.scale
        r = round(x)
        if abs(x - r) > 1e-9 or not rlo <= r <= rhi:
            raise sigs.error(sname, f"allowed value {v:g} of {port} is not representable in the DBC signal")
        allowed.append(int(r))
    lay.raw_lo, lay.raw_hi = rlo, rhi
    lay.target = k
    lay.gain, lay.bias = gain, bias
    lay.allowed_raw = tuple(allowed)


def _resolve_tx(sigs, sname, dbc_sig, lay: SignalLayout, plant: Plant, port, factor, bias, notes, msg_name) -> None:
    if port in AUX_INDEX:
        lay.source, lay.target, unit = SOURCE_AUX, AUX_INDEX[port], "-"
        lo_p = hi_p = None
    else:
        try:
            k = plant.output_index(port)
        except KeyError as exc:
            raise sigs.error(sname, str(exc.args[0]) + "; or a status source: " + ", ".join(AUX_INDEX)) from None
        ps = plant.outputs[k]
        lay.source, lay.target, unit = SOURCE_PLANT, k, ps.unit
        lo_p, hi_p = ps.lo, ps.hi
    gain = _gain(sigs, sname, dbc_sig.unit, unit, port, factor)
    lay.gain, lay.bias = gain, bias
    lo = float(dbc_sig.minimum) if dbc_sig.minimum is not None else None
    hi = float(dbc_sig.maximum) if dbc_sig.maximum is not None else None
    lay.raw_lo, lay.raw_hi = raw_range(lay.length, lay.signed, lay.scale, lay.offset, lo, hi)
    if lay.raw_lo > lay.raw_hi:
        raise sigs.error(sname, "the DBC range is empty")
    if lo_p is not None:
        phys = sorted(((lo_p - bias) / gain, (hi_p - bias) / gain))
        carry = sorted((lay.raw_lo * lay.scale + lay.offset, lay.raw_hi * lay.scale + lay.offset))
        if phys[0] < carry[0] - 1e-9 or phys[1] > carry[1] + 1e-9:
            notes.append(f"{msg_name}.{sname} carries [{carry[0]:g}, {carry[1]:g}] {dbc_sig.unit or ''}; "
                         f"{port} spans [{phys[0]:g}, {phys[1]:g}] in those units and saturates outside")


def _whole(x: float) -> bool:
    return abs(x - round(x)) < 1e-9


def message_table_markdown(ms_path: str | Path) -> str:
    """Markdown tables of a message set (for docs/can.md): messages, then signals with their mapping.

    Needs no plant: the mapping is shown as written in the message-set file.
    """
    path = resolve_config(ms_path)
    data = load_toml(path)
    cfg = ConfigReader(data, str(path))
    dbc_path = Path(cfg.string("dbc"))
    if not dbc_path.is_absolute():
        dbc_path = path.parent / dbc_path
    db = load_dbc(dbc_path, str(path), "dbc")
    lines = [f"Generated from `configs/{dbc_path.name}` and `configs/{path.name}`.", "",
             "| direction | message | ID | DLC | cycle, ms | sender | E2E (checksum, counter, data ID) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    rows = []
    for direction in ("rx", "tx"):
        for name, tab in (data.get(direction) or {}).items():
            msg = db.get_message_by_name(name)
            cyc = tab.get("cycle_ms", msg.cycle_time or "")
            e2e = "-"
            if "checksum" in tab or "counter" in tab:
                e2e = f"{tab.get('checksum', '-')}, {tab.get('counter', '-')}, 0x{tab.get('data_id', msg.frame_id):04X}"
            arrow = "TCU -> plant" if direction == "rx" else "plant -> TCU"
            lines.append(f"| {arrow} | {name} | 0x{msg.frame_id:03X} | {msg.length} | {cyc} | "
                         f"{', '.join(msg.senders)} | {e2e} |")
            rows.append((direction, name, msg, tab))
    lines += ["", "| message | signal | bits (start\\|length, order) | factor, offset | range | unit | plant port |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for direction, name, msg, tab in rows:
        mapping = tab.get("signals", {})
        for s in msg.signals:
            port = mapping.get(s.name, "")
            if isinstance(port, dict) and "value" in port:
                port = f"= {port['value']:g}"
            elif isinstance(port, dict):
                port = f"{port.get('port')} (x {port.get('factor', 1)})"
            if s.name in (tab.get("checksum"), tab.get("counter")):
                port = "(E2E)"
            order = "Intel" if s.byte_order == "little_endian" else "Motorola"
            sign = ", signed" if s.is_signed else ""
            if s.is_multiplexer:
                sign += ", multiplexer"
            if s.multiplexer_signal is not None:
                ids = "/".join(str(v) for v in s.multiplexer_ids or ())
                sign += f", when {s.multiplexer_signal} = {ids}"
            rng = f"{s.minimum:g} .. {s.maximum:g}" if s.minimum is not None and s.maximum is not None else ""
            lines.append(f"| {name} | {s.name} | {s.start}\\|{s.length}, {order}{sign} | {s.scale:g}, {s.offset:g} | "
                         f"{rng} | {s.unit or ''} | {port} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m io_adapters.can.message_set io_can_powershift`` prints the message-set tables of docs/can.md."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m io_adapters.can.message_set MESSAGE_SET [...]", file=sys.stderr)
        return 2
    try:
        for name in args:
            sys.stdout.write(message_table_markdown(name))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
