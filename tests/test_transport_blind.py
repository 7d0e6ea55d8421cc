"""server/ is transport-blind: adapters own their options, fault kinds and what the idle loop waits on.

Every import statement of server/ (function-local ones included) is read
from the syntax tree; a module of ZeroMQ or CAN (``zmq``, ``can``,
``io_adapters.zmq``, ``io_adapters.can`` and below) may be imported only
where the list below says why.  A third transport then needs no edit of
server/: its adapter module, its declaration and its entries in the tables
of io_adapters/base.py and io_adapters/declaration.py.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TRANSPORTS = ("zmq", "can", "io_adapters.zmq", "io_adapters.can")

# file (relative to server/) -> the transport modules it may import, and why
ALLOWED = {
    # `gearbox-hil warmup` compiles every kernel, the CAN and ZeroMQ codecs' too
    "cli/warmup.py": {"io_adapters.can.layouts", "io_adapters.zmq.codec"},
    "cli/keys.py": {"io_adapters.zmq.curve"},  # `gearbox-hil keys` writes the ZeroMQ CURVE key files
    "offline/bus_log.py": {"can"},  # python-can's BLF/ASC file readers: a recorded bus log replayed, no bus opened
    "testbench/runner.py": {"io_adapters.zmq.client"},  # the test bench is a ZeroMQ client of a server
    "testbench/pytest_plugin.py": {"io_adapters.zmq.client"},
    "testbench/local_server.py": {"io_adapters.zmq.client"},  # a server started for tests and benchmarks, and its client
    # the test bench's UDS tester speaks ISO-TP on the CAN bus of a [uds] test file, beside the emulator's UDS server:
    # the tester's transport side is io_adapters' (the uds adapter's too); the file adds polls and signals
    "testbench/uds.py": {"can", "io_adapters.can.uds_tester", "io_adapters.can.uds_server"},
    "testbench/uds_bench.py": {"can", "io_adapters.zmq.client"},  # the UDS bench: a CAN bus and the server's client
}


def _imports(source: str) -> set[str]:
    """Every module an import statement of ``source`` names (``from a import b``: ``a`` and ``a.b``)."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{alias.name}" for alias in node.names)
    return out


def _transport(module: str) -> bool:
    return any(module == t or module.startswith(t + ".") for t in TRANSPORTS)


def _violations(rel: str, source: str) -> set[str]:
    found = {m for m in _imports(source) if _transport(m)}
    allowed = ALLOWED.get(rel, set())
    return {m for m in found if m not in allowed and not any(m.startswith(a + ".") for a in allowed)
            and not any(a.startswith(m + ".") for a in allowed)}


def test_server_imports_no_transport_outside_the_allowed_list():
    bad = {}
    for path in sorted((ROOT / "server").rglob("*.py")):
        rel = path.relative_to(ROOT / "server").as_posix()
        v = _violations(rel, path.read_text())
        if v:
            bad[rel] = sorted(v)
    assert bad == {}


@pytest.mark.parametrize("planted", [
    "def _idle():\n    import zmq\n",
    "from io_adapters.zmq.adapter import DEFAULTS\n",
    "from io_adapters.can import frames\n",
    "import can.interfaces.virtual\n",
    "def f():\n    from io_adapters import zmq\n",
])
def test_the_check_finds_a_planted_transport_import(planted):
    assert _violations("loop.py", textwrap.dedent(planted))
    assert not _violations("loop.py", "from io_adapters.declaration import declaration\nimport select\n")


def test_the_allowed_list_names_only_imports_that_exist():
    """An entry that no longer matches an import is removed, so the list cannot hide a new one."""
    for rel, modules in ALLOWED.items():
        found = {m for m in _imports((ROOT / "server" / rel).read_text()) if _transport(m)}
        assert modules <= found, rel


def test_the_adapter_types_declare_their_options_and_fault_kinds_in_light_modules():
    """The command line and the fault map get them without importing a transport library."""
    import subprocess
    import sys

    code = ("import sys\nfrom io_adapters.declaration import declarations, fault_targets\n"
            "print(sorted(o.flag for d in declarations() for o in d.cli_options), fault_targets(),"
            " 'zmq' in sys.modules, 'can' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.strip() == ("['--can-channel', '--can-share', '--web', '--xcp-port', '--zmq-command', '--zmq-control', "
                           "'--zmq-port', '--zmq-state'] "
                           "('zmq', 'can', 'j1939', 'device') False False")


def test_a_third_transport_brings_its_option_and_fault_kind_without_an_edit_of_server(monkeypatch):
    """An adapter type from outside (a dashboard, say): its option reaches `serve`'s command line and its
    config table, its fault kind the fault map, the fault its adapter; server/ is not touched."""
    import argparse

    from io_adapters import base, declaration as decl_mod
    from io_adapters.base import Adapter, register_adapter
    from io_adapters.declaration import AdapterDeclaration, CliOption, TransportFault, fault_keys
    from plant_models.registry import load_plant
    from server.realtime.faults import FaultSet
    from server.realtime.runtime import AdapterSpec, IoConfig, apply_adapter_options, load_io_config
    from server.cli.serve import _adapter_options, add_arguments

    class WebDeclaration(AdapterDeclaration):
        type_name = "dash"
        cli_options = (CliOption("--dash-port", "PORT", "the dashboard's port", int),)
        fault_kinds = ("freeze_page",)

        def apply_cli(self, options, given, source, key):
            return dict(options, port=given["--dash-port"])

        def parse_fault(self, d, where):
            fault_keys(d, (), where)
            return TransportFault("dash", d["kind"], "page")

    class WebAdapter(Adapter):
        type_name = "dash"
        declaration = WebDeclaration()
        faults: list = []

        def close(self):
            pass

        def check_fault(self, spec):
            pass

        def set_fault(self, spec):
            self.faults.append(spec)

    monkeypatch.setattr(base, "_REGISTERED", {})
    monkeypatch.setattr(decl_mod, "_REGISTERED", {})
    register_adapter("dash", WebAdapter)
    p = argparse.ArgumentParser()
    add_arguments(p)
    given = _adapter_options(p.parse_args(["powershift", "--dash-port", "8080"]))
    assert given == {"dash": {"--dash-port": 8080}}
    io = load_io_config(None)
    io = IoConfig(io.source, io.loop, io.watchdog, {}, io.adapters + (AdapterSpec("dash", "dash", {}, "adapters[2]"),))
    assert apply_adapter_options(io, given).adapters[-1].options == {"port": 8080}
    web = WebAdapter("dash", {})
    fs = FaultSet(load_plant("powershift"), adapters=[web])
    spec = fs.set({"target": "dash", "kind": "freeze_page"})
    assert spec.name == "dash:page:freeze_page" and web.faults == [TransportFault("dash", "freeze_page", "page")]


def test_faults_loop_and_snapshots_reach_the_core_only_through_the_plant():
    """Clutch faults go through the plant's overlay (FrictionPlant.set_clutch_overlay), not the core's slots."""
    files = [ROOT / "server" / "realtime" / rel for rel in ("faults.py", "fault_schedule.py", "loop.py", "tick.py",
                                                             "snapshots.py", "params.py", "runtime.py", "waits.py",
                                                             "housekeeping.py")]
    files += sorted((ROOT / "plant_models" / "run").glob("*.py"))  # the fault stage, its tables, the ring
    # the compiled tick calls the plant's compiled step by its address, as the offline runs do: the call's
    # intrinsic and the raw pointer view are the core's ABI, not its slots; the compiled offline run also writes the
    # step's run hints (the core's RUN_* bits, at the index its plan gives) and compiles with the core's JIT options
    abi = {"compiled.py": "from ..core.api import call_step_at, raw_i\n",
           "offline_compiled.py": "from ..core.api import JIT, L, call_step_at\n"}
    for path in files:
        text = path.read_text()
        if path.name in abi and path.parent.name == "run":
            assert text.count(abi[path.name]) == 1, f"{path.name} takes only the step call's ABI from the core"
            text = text.replace(abi[path.name], "")
            if path.name == "offline_compiled.py":
                used = set(re.findall(r"\bL\.([A-Z_]+)", text))
                assert used and all(u.startswith("RUN_") for u in used), f"offline_compiled.py: only run hints: {used}"
        found = {m for m in _imports(text) if m.startswith("plant_models.core")}
        assert found == set() and "from ..core" not in text, path.name
