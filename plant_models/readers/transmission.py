"""Reading a transmission description (``plant = "transmission"``) into :class:`TransmissionParams`.

The format is described in docs/transmissions.md; configs/zf8hp.toml,
configs/powershift_described.toml and configs/dct_described.toml are
examples.  The file is read into a :class:`~plant_models.drivetrain.Description`
(every name resolved, every number checked), which
:func:`~plant_models.reduction.reduce` checks physically and reduces to
independent speeds; its errors name the table of the file they concern.
"""

from __future__ import annotations

from fractions import Fraction

from ..config import ConfigError, ConfigReader
from ..drivetrain import (Description, DrivetrainError, Element, Member, Position, Relation, Selector, SpringDef,
                          TorqueInput)
from ..plants.transmission import TransmissionParams
from ..reduction import reduce
from .common import read_settings, read_wet_clutch
from .hydraulics import read_hydraulics
from .powertrain import read_powertrain

ELEMENT_KINDS = ("clutch", "brake", "freewheel")
HOUSING = "housing"  # the gearbox case: a planetary member or an element's member held at rest
CLUTCH_KEYS = ("piston_area_m2", "return_spring_N", "friction_static", "friction_kinetic", "surfaces", "mean_radius_m",
               "pressure_lag_s", "stribeck_velocity_rad_s", "stribeck_velocity_m_s", "stribeck_exponent",
               "viscous_N_m_s_per_rad", "viscous_N_s_per_m", "model", "shift_time_s", "kinematic_capacity_N_m",
               "engage_pressure_bar", "pressure_max_bar", "side")


def read_transmission(cfg: ConfigReader) -> TransmissionParams:
    name = cfg.string("name", "transmission")
    members = _members(cfg)
    index = {m.name: k for k, m in enumerate(members)}

    def member(reader: ConfigReader, key: str, value=None, housing: bool = False) -> int | None:
        """The member's index; with ``housing``, ``"housing"`` is allowed and gives None (at rest)."""
        v = reader.raw(key) if value is None else value
        if housing and v == HOUSING:
            return None
        if not isinstance(v, str) or v not in index:
            extra = f" or {HOUSING!r}" if housing else ""
            raise reader.error(key, f"must name a member ({', '.join(index)}){extra}, got {v!r}")
        return index[v]

    relations = _meshes(cfg, member) + _planetary(cfg, member)
    elements = _elements(cfg, member)
    selectors = _selectors(cfg, member)
    springs = _springs(cfg, member)
    torques = _torques(cfg, member)
    inp = cfg.sub("input")
    input_member = member(inp, "member")
    inp.reject_unknown()
    out = cfg.sub("output")
    output_member = member(out, "member")
    output_sign = out.number("sign", 1.0)
    if output_sign not in (1.0, -1.0):
        raise out.error("sign", f"must be 1 or -1 (the forward sense of the output member), got {output_sign:g}")
    out.reject_unknown()
    members, elements, powertrain = read_powertrain(cfg, members, elements, input_member, output_member, output_sign)
    index.update({m.name: k for k, m in enumerate(members)})  # a converter adds the engine's member
    elements, hydraulics = read_hydraulics(cfg, elements)
    gears = _gears(cfg, elements, selectors)
    independent = ()
    if cfg.has("independent_speeds"):
        raw = cfg.raw("independent_speeds")
        if not isinstance(raw, list):
            raise cfg.error("independent_speeds", "must be a list of member names")
        independent = tuple(member(cfg, f"independent_speeds[{k}]", v) for k, v in enumerate(raw))
    ini = cfg.sub("initial", required=False)
    speeds = ()
    if ini.has("speeds_rad_s"):
        sp = ini.sub("speeds_rad_s")
        speeds = tuple((member(sp, k, k), sp.number(k)) for k in list(sp.data))
    engaged = _initial_engaged(ini, elements, gears)
    quasi = ini.string("spring_torque", "zero", choices=("zero", "quasi_steady")) == "quasi_steady"
    ini.reject_unknown()
    settings = read_settings(cfg)
    d = Description(name, tuple(members), tuple(relations), tuple(elements), tuple(selectors), tuple(springs),
                    tuple(torques), input_member, output_member, output_sign,
                    tuple((g[0], g[1], g[2], g[3]) for g in gears), independent, speeds, engaged, (), quasi)
    _unique_signals(cfg, d)
    try:
        red = reduce(d)
    except DrivetrainError as exc:
        raise ConfigError(cfg.source, exc.key, exc.problem) from None
    return TransmissionParams(d, red, settings, powertrain, hydraulics)


def _items(cfg: ConfigReader, key: str) -> list[ConfigReader]:
    """The tables of an array of tables ``[[key]]`` (none when absent)."""
    raw = cfg.raw(key, [])
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        raise cfg.error(key, f"must be an array of tables ([[{key}]])")
    return [ConfigReader(t, cfg.source, f"{key}[{k}]") for k, t in enumerate(raw)]


def _unique_name(r: ConfigReader, seen: set, what: str) -> str:
    nm = r.string("name")
    if not nm or not nm.replace("_", "").replace("-", "").isalnum():
        raise r.error("name", f"must be letters, digits, '_' or '-' (it names signals), got {nm!r}")
    if nm in seen:
        raise r.error("name", f"{what} {nm!r} is defined twice")
    seen.add(nm)
    return nm


def _members(cfg: ConfigReader) -> list[Member]:
    out, seen = [], set()
    for r in _items(cfg, "member"):
        if r.raw("name", None) == HOUSING:
            raise r.error("name", f"{HOUSING!r} is reserved: it names the gearbox case, which is at rest "
                          "(a planetary member or an element's member may be the housing); rename the member")
        out.append(Member(_unique_name(r, seen, "member"), r.number("inertia_kg_m2", nonnegative=True),
                          r.number("drag_N_m_s_per_rad", 0.0, nonnegative=True)))
        r.reject_unknown()
    if not out:
        raise cfg.error("member", "at least one [[member]] is needed")
    return out


def _member_list(r: ConfigReader, member, key: str, counts: tuple[int, ...], housing: bool = False) -> list:
    """Member indices; with ``housing`` a list of two may name ``"housing"`` once (None: at rest)."""
    raw = r.raw(key)
    if not isinstance(raw, list) or len(raw) not in counts:
        want = " or ".join(str(c) for c in counts)
        raise r.error(key, f"must list {want} member names")
    ms = [member(r, f"{key}[{k}]", v, housing=housing and len(raw) == 2) for k, v in enumerate(raw)]
    if len(set(ms)) != len(ms):
        raise r.error(key, "names the same member twice")
    return ms


def _meshes(cfg: ConfigReader, member) -> list[Relation]:
    out, seen = [], set()
    for k, r in enumerate(_items(cfg, "mesh")):
        nm = _unique_name(r, seen, "mesh")
        a, b = _member_list(r, member, "members", (2,))
        if r.has("teeth"):
            za, zb = _teeth(r, "teeth", 2)
            internal = r.boolean("internal", False)
            # external pair: the two turn against each other; a pinion in a ring gear: the same way
            coefs = ((a, Fraction(za)), (b, Fraction(-zb if internal else zb)))
        else:
            ratio = r.number("ratio")
            if ratio == 0.0:
                raise r.error("ratio", "must be w_a / w_b, not zero (negative for an external pair)")
            coefs = ((a, Fraction(1)), (b, -Fraction(ratio)))
        r.reject_unknown()
        out.append(Relation(nm, f"mesh[{k}]", "mesh", coefs, ("a", "b")))
    return out


def _teeth(r: ConfigReader, key: str, count: int) -> list[int]:
    raw = r.raw(key)
    if not isinstance(raw, list) or len(raw) != count or not all(
            isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in raw):
        raise r.error(key, f"must be {count} positive whole tooth counts, got {raw!r}")
    return raw


def _planetary(cfg: ConfigReader, member) -> list[Relation]:
    out, seen = [], set()
    for k, r in enumerate(_items(cfg, "planetary")):
        nm = _unique_name(r, seen, "planetary set")
        s, ring, c = (member(r, "sun", housing=True), member(r, "ring", housing=True),
                      member(r, "carrier", housing=True))
        if [s, ring, c].count(None) > 1:
            raise r.error("sun", f"only one of sun, ring and carrier may be {HOUSING!r} (two held would hold "
                          "the third still too)")
        if len({s, ring, c}) != 3:
            raise r.error("sun", "sun, ring and carrier must be three different members")
        zs = r.integer("sun_teeth", lo=1)
        zr = r.integer("ring_teeth", lo=1)
        if zr <= zs:
            raise r.error("ring_teeth", f"a ring gear has more teeth than its sun ({zr} <= {zs})")
        kind = r.string("kind", "simple", choices=("simple", "double_pinion"))
        r.reject_unknown()
        zs, zr = Fraction(zs), Fraction(zr)
        if kind == "simple":  # Willis: (w_S - w_C) / (w_R - w_C) = -z_R / z_S
            coefs = ((s, zs), (ring, zr), (c, -(zs + zr)))
        else:  # a double-pinion set turns the ring with the sun: (w_S - w_C) / (w_R - w_C) = +z_R / z_S
            coefs = ((s, zs), (ring, -zr), (c, zr - zs))
        # a member held to the housing turns at zero: its term drops out (the housing takes its tooth force)
        kept = [(mc, role) for mc, role in zip(coefs, ("sun", "ring", "carrier")) if mc[0] is not None]
        held = tuple(role for mc, role in zip(coefs, ("sun", "ring", "carrier")) if mc[0] is None)
        out.append(Relation(nm, f"planetary[{k}]", "planetary", tuple(mc for mc, _ in kept),
                            tuple(role for _, role in kept), held))
    return out


def _elements(cfg: ConfigReader, member) -> list[Element]:
    base = cfg.sub("clutch", required=False)
    out, seen = [], set()
    overridden: set[str] = set()
    for k, r in enumerate(_items(cfg, "element")):
        nm = _unique_name(r, seen, "element")
        kind = r.string("kind", choices=ELEMENT_KINDS)
        key = f"element[{k}]"
        counts = {"clutch": (2,), "brake": (1,), "freewheel": (1, 2)}[kind]
        ms = _member_list(r, member, "members", counts, housing=kind != "brake")
        radius = 1.0
        if kind == "clutch" and r.has("radii_m"):
            # a clutch that locks a gear pair (the Powershift's): row r_a w_a + r_b w_b, its torque and
            # slip at the radius of the gear it sits on
            ra, rb = r.numbers("radii_m", 2)
            if ra == 0.0 or rb == 0.0:
                raise r.error("radii_m", "pitch radii must be non-zero (negative for an internal gear)")
            coefs = tuple((m, Fraction(c)) for m, c in ((ms[0], ra), (ms[1], rb)) if m is not None)
            src = r if r.has("side") else base
            radius = abs(ra if src.string("side", "a", choices=("a", "b")) == "a" else rb)
        elif len(ms) == 2:  # w_a - w_b; a side that is the housing is at rest and drops out
            coefs = tuple((m, Fraction(c)) for m, c in ((ms[0], 1), (ms[1], -1)) if m is not None)
        else:
            coefs = ((ms[0], Fraction(1)),)
        geared = kind == "clutch" and r.has("radii_m")
        if kind == "freewheel":
            e = Element(nm, key, kind, coefs, radius, None, 0.0, r.number("holding_N_m", positive=True))
        else:
            # speed-dependent terms per unit of the row's speed: m/s at a gear mesh, rad/s otherwise
            clutch = read_wet_clutch(base, r, speed_unit="m_s" if geared else "rad_s",
                                     viscous_unit="N_s_per_m" if geared else "N_m_s_per_rad")
            pmax = r.number("pressure_max_bar", base.number("pressure_max_bar", 40.0, positive=True), positive=True)
            e = Element(nm, key, kind, coefs, radius, clutch, pmax)
        r.reject_unknown()
        out.append(e)
        overridden |= r._used
    if cfg.has("clutch"):
        # the common table's keys are defaults: one that some element overrode need not be read here
        base.reject_unknown(base._used | (overridden & set(CLUTCH_KEYS)))
    return out


def _selectors(cfg: ConfigReader, member) -> list[Selector]:
    out, seen = [], set()
    for k, r in enumerate(_items(cfg, "selector")):
        nm = _unique_name(r, seen, "selector")
        m, to = member(r, "member"), member(r, "to")
        if m == to:
            raise r.error("to", "a selector couples two different members")
        final = r.number("final_drive", 1.0, positive=True)
        positions, values = [], set()
        for q, p in enumerate(_items(r, "positions")):
            v = p.integer("value")
            if v == 0 or v in values:
                raise p.error("value", f"must be a non-zero command value used once (0 is neutral), got {v}")
            values.add(v)
            ratio = p.number("ratio")
            if ratio == 0.0:
                raise p.error("ratio", "must be w_member / w_to before the final drive, not zero")
            cone = p.number("cone_torque_N_m", positive=True)
            # the cone sits on the idler, which turns at w_member / ratio: referred to the member
            positions.append(Position(v, p.string("name", str(v)), ratio * final, cone / abs(ratio)))
            p.reject_unknown()
        if not positions:
            raise r.error("positions", "a selector needs at least one position")
        kin = r.number("kinetic_to_static", 1.0, positive=True, hi=1.0)
        dog = r.number("dog_capacity_N_m", positive=True)
        sig = r.string("input", f"gear_{nm}")
        r.reject_unknown()
        out.append(Selector(nm, f"selector[{k}]", m, to, sig, tuple(positions), kin, dog))
    return out


def _springs(cfg: ConfigReader, member) -> list[SpringDef]:
    out, seen = [], set()
    for k, r in enumerate(_items(cfg, "spring")):
        nm = _unique_name(r, seen, "spring")
        a, b = _member_list(r, member, "members", (2,))
        table = ()
        if r.has("table"):
            raw = r.raw("table")
            if not isinstance(raw, list) or not all(isinstance(p, list) and len(p) == 2 for p in raw):
                raise r.error("table", "must be a list of [twist rad, torque N m] pairs")
            table = tuple((float(x), float(y)) for x, y in raw)
            xs = [x for x, _ in table]
            if len(table) < 2 or any(b2 <= a2 for a2, b2 in zip(xs, xs[1:])):
                raise r.error("table", "needs at least 2 points with strictly increasing twist")
        stiff = r.number("stiffness_N_m_per_rad", 0.0 if table else None, nonnegative=True) if table else \
            r.number("stiffness_N_m_per_rad", positive=True)
        out.append(SpringDef(nm, f"spring[{k}]", (a, b), stiff, r.number("damping_N_m_s_per_rad", 0.0,
                                                                            nonnegative=True), table))
        r.reject_unknown()
    return out


def _torques(cfg: ConfigReader, member) -> list[TorqueInput]:
    out, seen = [], set()
    for k, r in enumerate(_items(cfg, "torque")):
        nm = _unique_name(r, seen, "torque input")
        m = member(r, "member")
        resists = r.boolean("resists", False)
        lo = r.number("min", -1.0e4)
        hi = r.number("max", 1.0e4)
        if not lo < hi:
            raise r.error("max", f"must be above min ({hi:g} <= {lo:g})")
        doc = r.string("doc", "")  # none: the plant words it with the member's name
        r.reject_unknown()
        out.append(TorqueInput(nm, m, -1.0 if resists else 1.0, lo, hi, doc))
    return out


def _gears(cfg: ConfigReader, elements: list[Element], selectors: list[Selector]):
    """``[gears]``: name -> the elements it engages ("A") and selector positions ("S_odd:3")."""
    gr = cfg.sub("gears", required=False)
    names = {e.name: k for k, e in enumerate(elements)}
    sels = {s.name: k for k, s in enumerate(selectors)}
    out = []
    for gname in list(gr.data):
        raw = gr.raw(gname)
        if not isinstance(raw, list) or not raw or not all(isinstance(v, str) for v in raw):
            raise gr.error(gname, "must be a list of element names (and 'selector:position')")
        els, pos = [], []
        for v in raw:
            if ":" in v:
                s, _, p = v.partition(":")
                if s not in sels:
                    raise gr.error(gname, f"{v!r}: no selector {s!r}")
                sel = selectors[sels[s]]
                match = [q.value for q in sel.positions if q.label == p or str(q.value) == p]
                if not match:
                    raise gr.error(gname, f"{v!r}: selector {s!r} has no position {p!r}")
                pos.append((sels[s], match[0]))
            elif v in names:
                els.append(names[v])
            else:
                raise gr.error(gname, f"{v!r} is not an element ({', '.join(names)})")
        if len(set(els)) != len(els) or len({s for s, _ in pos}) != len(pos):
            raise gr.error(gname, "names an element or selector twice")
        out.append((gname, tuple(els), tuple(pos), f"gears.{gname}"))
    return out


def _initial_engaged(ini: ConfigReader, elements: list[Element], gears) -> tuple[int, ...]:
    names = {e.name: k for k, e in enumerate(elements)}
    if ini.has("gear") and ini.has("engaged"):
        raise ini.error("engaged", "give either gear or engaged, not both")
    if ini.has("gear"):
        g = ini.string("gear")
        match = [x for x in gears if x[0] == g]
        if not match:
            raise ini.error("gear", f"no gear {g!r} in [gears] ({', '.join(x[0] for x in gears)})")
        if match[0][2]:
            raise ini.error("gear", "a gear with selector positions starts from the selector commands; "
                            "list its elements in engaged instead")
        return match[0][1]
    raw = ini.raw("engaged", [])
    if not isinstance(raw, list) or not all(isinstance(v, str) and v in names for v in raw):
        raise ini.error("engaged", f"must be a list of element names ({', '.join(names)}), got {raw!r}")
    return tuple(names[v] for v in raw)


def _unique_signals(cfg: ConfigReader, d: Description) -> None:
    """Signal names derive from member, element and input names; two may not coincide."""
    from ..plants.transmission import transmission_ports

    try:
        transmission_ports(d)
    except ValueError as exc:
        raise cfg.error("member", f"two signals would have the same name ({exc}): signal names come from the "
                        "names of members (w_<member>), elements, selectors, springs and inputs; rename one") from None
