"""The run pipeline: the stages of one step of any run, declared once, and the one stepper that runs them.

* :mod:`.stages`: the stage list (:data:`~.stages.STAGES`), in the order every mode runs it;
* :mod:`.stepper`: :class:`~.stepper.Stepper`, a step of any run;
* :mod:`.faults`, :mod:`.fault_tables`: the fault stage (the signal-fault tables and the three compiled
  functions that walk them);
* :mod:`.schedule`: a fault schedule, faults switched at given steps (the ``switch`` stage);
* :mod:`.ring`: the state ring the server's ``state_row`` stage writes, and the tick-info slots it copies;
* :mod:`.compiled`: the compiled-stage protocol and the real-time tick as one compiled call (``tick_run``);
* :mod:`.offline_compiled`: the compiled offline run, the same stages' compiled forms looped over n steps
  (``run_compiled``, ``OfflinePlan`` built from the stage list); :mod:`.fault_tables`: the fault stage's compiled
  functions and the three stages' compiled forms (one set for the tick and the offline runs).

Which mode gives which stage, and the compiled runs, are in ``docs/architecture.md`` ("The run pipeline").
"""
