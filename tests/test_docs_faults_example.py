"""docs/faults.md's client example connects where a server listens for control requests, and runs as written.

The example once connected to port 5557, the command port (a PULL socket
that never replies): the request timed out and the message blamed a server
that is down or missing CURVE keys.
"""

from __future__ import annotations

import contextlib
import io
import re

from server.runtime import load_io_config

from server_support import ROOT, ServerProcess


def client_example() -> str:
    text = (ROOT / "docs" / "faults.md").read_text()
    section = text.split("## 2. Switching faults", 1)[1]
    return next(b for b in re.findall(r"```python\n(.*?)```", section, re.S) if "HilClient(" in b)


def test_the_example_connects_to_the_default_control_endpoint():
    endpoint = re.search(r'HilClient\("([^"]+)"\)', client_example()).group(1)
    zmq = next(a for a in load_io_config(None).adapters if a.type == "zmq").options
    assert endpoint == zmq["control_endpoint"], f"{endpoint}: the control endpoint is {zmq['control_endpoint']}"


def test_the_example_runs_against_a_lockstep_server(tmp_path):
    """The block as written, the endpoint moved to the test server's free control port (the only change)."""
    block = client_example()
    zmq = next(a for a in load_io_config(None).adapters if a.type == "zmq").options
    with ServerProcess(tmp_path, mode="lockstep") as srv:
        code = block.replace(f'"{zmq["control_endpoint"]}"', f'"{srv.control}"')
        assert code != block
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, "docs/faults.md", "exec"), {})
        printed = out.getvalue()
        assert "clutch:C3:stuck_closed" in printed and "w_out" in printed, printed
        with srv.client() as hil:
            assert hil.faults() == []  # the example's last line cleared them all
        srv.shutdown()
