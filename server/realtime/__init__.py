"""The real-time side: the loop, its clock, watchdog, telemetry, faults, snapshots, status, control and the runtime that assembles a server."""
