"""The wet clutch's old home: it now lives in :mod:`plant_models.clutch` (below the plants, beside the drivetrain).

Kept as a re-export for callers outside ``plant_models`` that still import it from here.
"""

from ..clutch import BAR, WetClutch, pressure_capacity_gains

__all__ = ["BAR", "WetClutch", "pressure_capacity_gains"]
