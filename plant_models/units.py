"""Physical units by name: which quantity a unit measures and its factor to SI, for converting between the
units a plant declares and the units a DBC file or a recording uses.

Units are compared case- and space-insensitively (``"N m"``, ``"n m"``, ``"Nm"``); an unknown unit converts
only to itself.
"""

from __future__ import annotations

import math
import re

# unit -> (quantity, SI factor); plant value = DBC value * f_dbc / f_plant
_UNITS = {
    "rad/s": ("angular speed", 1.0), "rpm": ("angular speed", 2.0 * math.pi / 60.0),
    "1/min": ("angular speed", 2.0 * math.pi / 60.0), "u/min": ("angular speed", 2.0 * math.pi / 60.0),
    "deg/s": ("angular speed", math.pi / 180.0),
    "pa": ("pressure", 1.0), "hpa": ("pressure", 100.0), "mbar": ("pressure", 100.0), "kpa": ("pressure", 1e3),
    "bar": ("pressure", 1e5), "mpa": ("pressure", 1e6), "psi": ("pressure", 6894.757293168361),
    "n m": ("torque", 1.0), "nm": ("torque", 1.0), "n.m": ("torque", 1.0), "n*m": ("torque", 1.0),
    "knm": ("torque", 1e3), "k n m": ("torque", 1e3),
    "m/s": ("speed", 1.0), "km/h": ("speed", 1.0 / 3.6), "kph": ("speed", 1.0 / 3.6), "mph": ("speed", 0.44704),
    "j": ("energy", 1.0), "kj": ("energy", 1e3), "mj": ("energy", 1e6),
    "s": ("time", 1.0), "ms": ("time", 1e-3), "us": ("time", 1e-6),
    "rad": ("angle", 1.0), "deg": ("angle", math.pi / 180.0),
    "w": ("power", 1.0), "kw": ("power", 1e3),
    "-": ("dimensionless", 1.0), "": ("dimensionless", 1.0), "1": ("dimensionless", 1.0),
}


def _norm_unit(unit: str | None) -> str:
    return re.sub(r"\s+", " ", (unit or "").strip().lower())


def unit_gain(dbc_unit: str | None, plant_unit: str) -> float | None:
    """Factor ``g`` with plant value = g * value in ``dbc_unit`` (a DBC's or a recording's unit), or None if the units are unknown or incompatible."""
    a, b = _norm_unit(dbc_unit), _norm_unit(plant_unit)
    if a == b:
        return 1.0
    if a in _UNITS and b in _UNITS and _UNITS[a][0] == _UNITS[b][0]:
        return _UNITS[a][1] / _UNITS[b][1]
    return None


__all__ = ["unit_gain"]
