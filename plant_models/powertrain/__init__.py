"""Powertrain components around a described transmission: engine, torque converter, vehicle and brake.

Each component is parameters (:mod:`.components`), ports, a part of the
compiled force law the core evaluates at every stage point (:mod:`.law`) or
an ordinary friction row of the core (the lock-up clutch, the service brake,
the rolling resistance), and a table of the transmission's TOML file
(:mod:`plant_models.readers.powertrain`).  Equations: docs/powertrain.md.
"""
