"""The electrical side of the plant as a production TCU sees it through its pins (docs/electrical.md).

One module per kind of channel, each a closed form compiled with numba and
called once a tick: tooth wheels on shafts (exact edge times of a speed
sensor's pulse train within the tick), pressure-control solenoids (PWM duty
on an R-L coil, the current the valve map turns into a pressure), the NTC
oil-temperature sensor, and the range selector's 4-bit codes.
"""
