"""Reading a chain config (``plant = "chain"``, configs/chain.toml) into :class:`ChainParams`."""

from __future__ import annotations

from ..config import ConfigReader
from ..plants.chain import MAX_BODIES, ChainParams
from .common import read_settings


def read_chain(cfg: ConfigReader) -> ChainParams:
    motion = cfg.string("motion", "translational", choices=("translational", "rotational"))
    bo = cfg.sub("bodies")
    inertia = bo.numbers("inertia", positive=True)
    n = len(inertia)
    if not 2 <= n <= MAX_BODIES:
        raise bo.error("inertia", f"needs 2 to {MAX_BODIES} bodies, got {n}")
    drag = bo.numbers("drag", n, [0.0] * n, nonnegative=True)
    bo.reject_unknown()
    co = cfg.sub("contacts")

    def per_contact(name, default=None, **kw):
        """One number for every contact, or a list with one per contact (required if no default)."""
        raw = co.raw(name) if default is None else co.raw(name, default)
        if isinstance(raw, list):
            return co.numbers(name, n - 1, **kw)
        return [co.number(name, raw, **kw)] * (n - 1)

    cap = per_contact("static_capacity", nonnegative=True)
    ratio = per_contact("kinetic_to_static", 1.0, nonnegative=True)
    for i, r in enumerate(ratio):
        if r > 1.0:
            raise co.error("kinetic_to_static", f"must be <= 1 (Coulomb amplitude k <= static capacity K), "
                           f"got {r} for contact {i + 1}-{i + 2}")
    visc = per_contact("viscous", 0.0, nonnegative=True)
    vs = per_contact("stribeck_velocity", 0.0, nonnegative=True)
    alpha = per_contact("stribeck_exponent", 2.0, positive=True)
    co.reject_unknown()
    ini = cfg.sub("initial", required=False)
    v0 = ini.numbers("velocity", n, [0.0] * n)
    x0 = ini.numbers("position", n, [0.0] * n)
    ini.reject_unknown()
    return ChainParams(motion == "rotational", tuple(inertia), tuple(drag), tuple(cap), tuple(ratio),
                       tuple(visc), tuple(vs), tuple(alpha), tuple(v0), tuple(x0), read_settings(cfg))
