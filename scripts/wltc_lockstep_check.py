"""The whole WLTC class 3b with the 8HP car and the reference TCU, offline and in lockstep against a server, compared
bit for bit (rows every 10 ms: outputs and commanded inputs).  Too long for the test suite (the lockstep run makes
180 000 requests); tests/test_reference_tcu.py compares the first 22 s.

Run: ``PYTHONPATH=. python scripts/wltc_lockstep_check.py [duration_s]``.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
from reference_tcu import ZF8HP_CAR, ReferenceTcu  # noqa: E402

from io_adapters.zmq.client import HilClient  # noqa: E402
from plant_models.registry import load_plant  # noqa: E402
from server.offline.controller import closed_loop  # noqa: E402
from server.testbench.closed_loop import closed_loop_lockstep  # noqa: E402
from server.testbench.runner import ServerRun  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    dur = float(argv[0]) if argv else 1800.0
    off_tcu = ReferenceTcu(ZF8HP_CAR)
    off = closed_loop(load_plant("zf8hp_car"), None, off_tcu, every=10, duration_s=dur, dt=1e-3)
    with tempfile.TemporaryDirectory() as tmp:
        with ServerRun("zf8hp_car", "lockstep", Path(tmp)) as server:
            with HilClient(server.control, timeout_s=30.0).connect() as client:
                t0 = time.perf_counter()
                lock_tcu = ReferenceTcu(ZF8HP_CAR)
                lock = closed_loop_lockstep(client, lock_tcu, duration_s=dur, every=10)
                wall = time.perf_counter() - t0
    same_out = off.outputs.tobytes() == lock.outputs.tobytes()
    same_in = off.inputs.tobytes() == lock.inputs.tobytes()
    print(f"{dur:.0f} s: offline {off.outputs.shape[0]} rows, lockstep {lock.outputs.shape[0]} rows in {wall:.1f} s; "
          f"outputs identical {same_out}, inputs identical {same_in}; shifts {off_tcu.shifts} / {lock_tcu.shifts}")
    return 0 if same_out and same_in else 1


if __name__ == "__main__":
    raise SystemExit(main())
