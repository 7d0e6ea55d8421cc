"""The co-simulation slave of an exported plant FMU (``gearbox-hil fmu``), run by PythonFMU inside the target's Python.

The FMU's script subclasses :class:`PlantSlave` and holds the plant config
as JSON (``CONFIG``, ``extends`` already resolved) and its name
(``SOURCE``).  On instantiation the slave builds the plant from it with the
installed gearbox-hil package; every input port is an FMU input, every
output port an FMU output, every tunable parameter an FMU parameter (real,
tunable).  ``do_step`` takes one plant step of the communication step with
the inputs held over it (rate 0: a zero-order hold, as a co-simulation
master sets inputs at communication points); a communication step within
1e-9 (relative) of ``STEP_S`` is taken as ``STEP_S``.
"""

from __future__ import annotations

import json

from pythonfmu import Fmi2Causality, Fmi2Slave, Fmi2Variability, Real
from pythonfmu.default_experiment import DefaultExperiment


class PlantSlave(Fmi2Slave):
    """A gearbox-hil plant as a PythonFMU slave; subclasses set ``CONFIG`` (JSON text), ``SOURCE`` and ``STEP_S``."""

    CONFIG = "{}"
    SOURCE = ""
    STEP_S = 1e-3

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        from plant_models.registry import read_config_data
        c = read_config_data(json.loads(self.CONFIG), self.SOURCE)
        self.plant = c.plant_class(c.params, source=c.source)
        self.default_experiment = DefaultExperiment(start_time=0.0, step_size=self.STEP_S)
        p = self.plant
        for k, s in enumerate(p.inputs):
            self.register_variable(Real(s.name, causality=Fmi2Causality.input, variability=Fmi2Variability.continuous,
                                        start=s.default, description=s.doc, getter=_get(p.u, k),
                                        setter=_set(p.u, k)), nested=False)
        for k, s in enumerate(p.outputs):
            self.register_variable(Real(s.name, causality=Fmi2Causality.output, variability=Fmi2Variability.continuous,
                                        description=s.doc, getter=_get(p.y, k)), nested=False)
        for prm in p.tunable_parameters():
            self.register_variable(Real(prm.name, causality=Fmi2Causality.parameter,
                                        variability=Fmi2Variability.tunable, start=prm.get(), description=prm.doc,
                                        getter=prm.get, setter=_checked(prm)), nested=False)

    def exit_initialization_mode(self):
        """The inputs set before initialization are the plant's start inputs (actuators settled at them)."""
        self.plant.reset({s.name: float(self.plant.u[k]) for k, s in enumerate(self.plant.inputs)})

    def do_step(self, current_time: float, step_size: float) -> bool:
        self.plant.u_rate[:] = 0.0
        # a master's step is often a difference of communication points (t_k+1 - t_k), off the fixed step by
        # rounding; within 1e-9 of it the plant takes its own fixed step, as gearbox-hil simulate does
        h = self.STEP_S if abs(step_size - self.STEP_S) <= 1e-9 * self.STEP_S else step_size
        self.plant.step(h)
        return True


def _get(a, k):
    return lambda: float(a[k])


def _set(a, k):
    def setter(v):
        a[k] = v
    return setter


def _checked(prm):
    def setter(v):
        prm.set(float(v))
    return setter
