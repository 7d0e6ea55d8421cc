"""FMUs in the loop: ``[[fmu]]`` tables on a plant config (docs/fmi.md).

* :mod:`.connect`: reads and checks the tables against the FMU's model
  description and the plant's ports (one-line errors, exit 2);
* :mod:`.assembly`: ``FmuAssembly``, a :class:`~plant_models.contract.plant.Plant`
  that steps the FMUs, then the inner plant, once per tick;
  :mod:`.compiled`: the same step as one compiled function calling the
  FMUs' C entry points by address (FMI 2.0 co-simulation in process),
  ``assemble`` picks it where it applies;
* :mod:`.slots`: one loaded FMU, FMI 2.0 or 3.0 co-simulation;
  :mod:`.model_exchange`: FMI 2.0 or 3.0 model exchange, its states
  integrated by RK4 at the plant step with its events located;
* :mod:`.isolated`: one FMU in a process of its own (``process = "own"``:
  a crash or hang ends that process, not the server), :mod:`.fmu_host`
  the process;
* :mod:`.export`: a plant exported as an FMU (``gearbox-hil fmu``,
  :mod:`server.cli.fmu`): the model description and the C library
  ``proxy_fmu.c``, which runs the plant in a process of its own,
  :mod:`.proxy_server`, and steps it over a socket.

FMPy is imported only when a config has an ``[[fmu]]`` table, and by the export (for its FMI headers).
"""
