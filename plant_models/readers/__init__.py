"""Config readers: a plant config file (TOML, already parsed) -> the plant's frozen parameters.

One module per plant kind, each with one ``read_<kind>(cfg) -> Params``
function, and :mod:`.common` for what several plants share (the solver
settings, the wet clutch).  Every mistake becomes a
:class:`~plant_models.errors.ConfigError` naming the file, the key and the
problem (:class:`~plant_models.config.ConfigReader` does the typing).

Why the readers are not in the plant modules:

* a plant module is the physics (parameters, ports, network, compiled
  kernels) and reads as that; a file format, its defaults, overrides and
  error messages are another concern, which changes for other reasons;
* numba checks a cached kernel against the time stamp of the source file
  that holds it: every edit of a reader kept beside the kernels would throw
  away the plant's compiled code and cost a recompilation of minutes;
* a plant is built from its parameters alone (tests, scripts, the
  ``describe`` command) with no file format involved.

The registry (:mod:`plant_models.registry`) pairs each plant kind with its
reader.
"""
