"""The ``ratio`` output of the plants with gears: its cut-off and its limit, one home for the three.

The Powershift, the DCT plant and the transmission described as data each
report their momentary speed ratio as an output; near standstill the ratio of
two small speeds means nothing and through a launch it passes through huge
values, so all three read 0 below a speed of the ratio's denominator and limit
it to a range.  Their kernels import these constants (numba folds them in;
``core/cache.py`` recompiles the three when this file changes).
"""

from __future__ import annotations

# rad/s: below this speed of the ratio's denominator (the output shaft; the wheels on the DCT) the ratio reads 0
# (80 rad/s in the Powershift's gear 1 turns its output at 1.67 rad/s, so a moving vehicle is well above it)
RATIO_MIN_OUTPUT_SPEED = 1.0
# the ratio output is limited to +-RATIO_LIMIT (a launch slips through huge values); also its declared range
RATIO_LIMIT = 100.0

__all__ = ["RATIO_MIN_OUTPUT_SPEED", "RATIO_LIMIT"]
