"""Plants: the names of the plant contract, where the plant modules and the server have always imported them.

The contract lives in :mod:`plant_models.contract`: ports and parameters
(:mod:`~plant_models.contract.ports`), the status / event / counter
vocabulary (:mod:`~plant_models.contract.vocabulary`), the base
:class:`Plant` whose step may be plain Python
(:mod:`~plant_models.contract.plant`) and its compiled refinement
:class:`CompiledPlant` on four flat buffers
(:mod:`~plant_models.contract.compiled`).  This module imports neither
numba nor the friction core, so transports can use :class:`Signal` without
loading either.
"""

from __future__ import annotations

from .contract.compiled import CompiledPlant, Kernel
from .contract.plant import EventRing, Plant
from .contract.ports import Param, Ports, Signal, signal_table, wire_type_name

__all__ = ["CompiledPlant", "EventRing", "Kernel", "Param", "Plant", "Ports", "Signal", "signal_table",
           "wire_type_name"]
