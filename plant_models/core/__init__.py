"""The exact static/Coulomb friction core (Morselli, Zanasi & Ferracin, eq. 13).

Python users build a :class:`CoreSpec` and get a :class:`Core` handle with
named views into the flat buffers; plant kernels reach the compiled step
through :mod:`plant_models.core.api` only.
"""

from .handle import Core, CoreSpec, Row, Settings, SpecError, Spring

__all__ = ["Core", "CoreSpec", "Row", "Settings", "SpecError", "Spring"]
