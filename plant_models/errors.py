"""The project's error types, in one place below every user of them.

Each layer raises a typed error with a complete message; callers decide by
type, never by matching message text:

* :class:`ConfigError`: a file or a command-line argument is wrong
  (``file: key: problem``);
* :class:`SpecError`: a mechanical network is not physically or structurally valid;
* :class:`InputError`: a value offered for a plant input is not acceptable
  (``reason`` is a short stable code that transports count and report);
* :class:`ParamError`: a tunable parameter cannot be set;
* :class:`FaultError`: a fault to inject does not fit the plant or the
  server's transports (``docs/faults.md``);
* :class:`SnapshotError`: a snapshot cannot be saved or restored.
"""

from __future__ import annotations

# The reasons an input value is rejected (shared by every transport's counters and replies).
INPUT_REASONS = ("wrong_type", "not_finite", "out_of_range", "not_allowed")


class GearboxHilError(Exception):
    """Base of every error this project raises on purpose."""


class ConfigError(GearboxHilError, ValueError):
    """A configuration or scenario file (or a command-line argument) is missing, unreadable or invalid.

    ``str(err)`` is the complete message for the user: ``file: key: problem``.
    """

    def __init__(self, source: str, key: str, problem: str):
        self.source = source
        self.key = key
        self.problem = problem
        where = f"{source}: {key}: " if key else f"{source}: "
        super().__init__(where + problem)


class SpecError(GearboxHilError, ValueError):
    """A core specification is not physically or structurally valid."""


class InputError(GearboxHilError, ValueError):
    """A value is not acceptable for a plant input; ``reason`` is one of :data:`INPUT_REASONS`."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


class ParamError(GearboxHilError, ValueError):
    """A tunable parameter does not exist or cannot take the value."""


class FaultError(GearboxHilError, ValueError):
    """A fault to inject is malformed or does not fit the plant, its clutches or the server's transports."""


class SnapshotError(GearboxHilError, ValueError):
    """A snapshot cannot be written or read (folder, size, file) or does not fit this server."""
