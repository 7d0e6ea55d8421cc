"""What the workspace server sends: JSON-ready values (non-finite floats as None), compact JSON, the plotly script.

Kept apart from :mod:`io_adapters.web.server` (its routes and checks), which
imports them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np


def plotly_js() -> Path:
    """The path of ``plotly.min.js`` in the installed plotly package."""
    import plotly

    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing (plotly {plotly.__version__})")
    return path


def clean(obj):
    """``obj`` with every non-finite float as None and tuples as lists (JSON that ``JSON.parse`` reads)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean(v) for v in obj]
    if isinstance(obj, np.generic):
        return clean(obj.item())
    if isinstance(obj, (bytes, bytearray)):
        return obj.hex()
    return obj


def column(a: np.ndarray) -> list:
    """A float column as a JSON-ready list (non-finite values as None)."""
    vals = a.tolist()
    if not np.isfinite(a).all():
        vals = [v if math.isfinite(v) else None for v in vals]
    return vals


def dumps(obj) -> str:
    return json.dumps(obj, separators=(",", ":"))


__all__ = ["clean", "column", "dumps", "plotly_js"]
