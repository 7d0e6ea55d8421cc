"""The exact static/Coulomb friction core (Morselli, Zanasi & Ferracin, eq. 13).

Python users build a :class:`CoreSpec` and get a :class:`Core` handle with
named views into the flat buffers; plant kernels reach the compiled step
through :mod:`plant_models.core.api` only.
"""

from .cache import drop_stale_caches

drop_stale_caches()  # before any kernel of the core is loaded from numba's cache

from .handle import Core  # noqa: E402
from .spec import CoreSpec, Row, Settings, SpecError, Spring  # noqa: E402

__all__ = ["Core", "CoreSpec", "Row", "Settings", "SpecError", "Spring"]
