"""The plants, one module each (see docs/plants.md, "Adding a plant").

On the friction core (:class:`plant_models.friction_plant.FrictionPlant`):
``powershift``, ``dct``, ``chain``, ``damper``, ``kinematic`` and the
example ``two_shafts``; with a compiled integrator of its own
(:class:`plant_models.contract.compiled.CompiledPlant`): ``servo``; with a
step in plain Python (:class:`plant_models.contract.plant.Plant`): the
example ``viscous_coupling``.  ``transmission_kernel`` and
``servo_kernel`` hold the compiled steps (and the table layouts they read)
of ``transmission`` and ``servo``.  ``clutch`` is the wet
clutch the Powershift and the DCT share.  Their config readers are in
:mod:`plant_models.readers`, their figures in ``server/plots``.
"""
