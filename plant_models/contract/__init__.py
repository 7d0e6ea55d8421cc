"""The plant contract: what any plant is, independent of how its step computes (docs/plants.md).

* :mod:`.ports`: ``Signal``, ``Ports``, ``Param`` (ports and tunable
  parameters, declared once with units and ranges);
* :mod:`.vocabulary`: the status bits, event kinds and step counters every
  plant reports in, with the allocator of a plant's own bits and kinds;
* :mod:`.plant`: ``Plant``, the base contract (ports on a data buffer,
  reset / step / get_state / set_state, status, events, counters; the step
  may be plain Python), and ``EventRing``;
* :mod:`.compiled`: ``CompiledPlant``, a plant whose step is one compiled
  function of four flat buffers, and ``Kernel``.

None of them imports numba or the friction core.
"""
