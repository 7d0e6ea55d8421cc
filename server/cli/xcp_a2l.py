"""``gearbox-hil xcp-a2l CONFIG``: the A2L an XCP server of this plant serves (docs/xcp.md).

The same text a running server uploads over GET_ID type 4, for a master
that reads its A2L from a file (CANape, INCA): the measurements, the
calibration segment and the DAQ events of the plant at the loop rate given,
and the XCP-on-Ethernet address given.  The plant is built (its tunable
parameters come from the built plant); nothing runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from plant_models.config import ConfigError


def add_arguments(p: argparse.ArgumentParser) -> None:
    from io_adapters.xcp.declaration import DEFAULT_PORT

    p.add_argument("config", help="plant config file (or the name of one in configs/)")
    p.add_argument("-o", "--output", help="file to write (default: standard output)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"the server's XCP port (default {DEFAULT_PORT})")
    p.add_argument("--host", default="127.0.0.1", help="the server's XCP address (default 127.0.0.1)")
    p.add_argument("--rate", type=float, default=1000.0, help="the loop rate in Hz (default 1000): the tick event "
                   "and the DAQ timestamps")


def run(args: argparse.Namespace) -> int:
    from io_adapters.xcp.a2l import generate
    from io_adapters.xcp.memory import AddressMap
    from plant_models.registry import load_plant

    if not 0 <= args.port <= 65535:
        raise ConfigError("xcp-a2l", "--port", f"must be a port 0..65535, got {args.port}")
    if not args.rate > 0:
        raise ConfigError("xcp-a2l", "--rate", f"must be a positive rate in Hz, got {args.rate}")
    plant = load_plant(args.config)
    amap = AddressMap(plant.kind, plant.outputs, plant.inputs, plant.tunable_parameters(), 1.0 / args.rate)
    text = generate(amap, args.port, args.host)
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="latin-1")
        except OSError as exc:
            raise ConfigError(args.output, "", f"cannot write the A2L ({exc.strerror})") from None
        print(f"{args.output}: {len(amap.measurements)} measurements, {len(amap.calibrations)} parameters, "
              f"EPK {amap.epk!r}")
    else:
        sys.stdout.write(text)
    return 0
