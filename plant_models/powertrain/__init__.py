"""Powertrain components around a described transmission: engine, torque converter, vehicle and brake, driver,
PTO, clutch hydraulics.

Each component of the force law is one module (``engine.py``, ``converter.py``,
``vehicle.py``, ``driver.py``, ``pto.py``): its slots declared in a table
(:mod:`.slots`), its parameters, ports and compiled hooks; the law the core
calls is generated from the component table (:mod:`.table`, :mod:`.assembly`)
over the layout the components share (:mod:`.law`).  Friction components (the
lock-up clutch, the service brake, the rolling resistance) are ordinary rows
of the core, added to the description when the file is read
(:mod:`plant_models.readers.powertrain`).  Equations: docs/powertrain.md.
"""
