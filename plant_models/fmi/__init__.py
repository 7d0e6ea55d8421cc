"""FMUs in the loop: ``[[fmu]]`` tables on a plant config (docs/fmi.md).

* :mod:`.connect`: reads and checks the tables against the FMU's model
  description and the plant's ports (one-line errors, exit 2);
* :mod:`.assembly`: ``FmuAssembly``, a :class:`~plant_models.contract.plant.Plant`
  that steps the FMUs, then the inner plant, once per tick;
* :mod:`.export_slave`: ``PlantSlave``, the PythonFMU slave of a plant
  exported as an FMU (``gearbox-hil fmu``, :mod:`server.cli.fmu`).

FMPy is imported only when a config has an ``[[fmu]]`` table, PythonFMU only by the export.
"""
