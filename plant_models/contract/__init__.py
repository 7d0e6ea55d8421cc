"""The plant contract: what any plant is, independent of how its step computes.

* :mod:`.ports`: ``Signal``, ``Ports``, ``Param`` (ports and tunable
  parameters, declared once with units and ranges);
* :mod:`.vocabulary`: the status bits, event kinds and step counters every
  plant reports in, with the allocator of a plant's own bits and kinds.

Neither imports numba nor the friction core.
"""
