"""A new user's first hour on the command line.

Every mistake a new user made (a misspelled name, a file that is not UTF-8,
an I/O config nobody could reach, an unknown adapter type, a mistyped
argument) ends with exit code 2 and exactly one line on stderr, naming
file, key and problem, with a "did you mean" where a name was misspelled,
and never a traceback.  Then what helps: ``--version``, ``list``, the
endpoint options of ``serve`` (two servers on one machine, port 0),
``--quiet``, a status line that is not repeated while nothing changes, the
warning about inputs a scenario leaves out, and the timing-tolerance check.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from io_adapters.zmq.client import HilClient
from plant_models.config import ConfigError, closest, did_you_mean, find_config, load_toml
from server.cli import main
from server.realtime.status import timing_problems

from server_support import FREE_PORTS, ROOT, wait_until

NON_UTF8 = b'description = "caf\xe9"\n'  # Latin-1, as an editor on another system may save it


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, "-m", "server.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env)


def one_line_error(stderr: str) -> str:
    """The single error line of a refused command (fails on anything else on stderr)."""
    assert "Traceback" not in stderr, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{stderr}"
    return lines[0]


def write(path: Path, data: str | bytes) -> Path:
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


# -- every mistake: exit 2, one line, no traceback -----------------------------------------------------
def _mistakes(tmp: Path, make: bool = True) -> dict[str, tuple[list[str], str]]:
    """name -> (arguments, the start of the error line); ``make`` writes the files the arguments name."""
    write = globals()["write"] if make else (lambda path, data: path)
    bad_plant = write(tmp / "bad_plant.toml", (ROOT / "configs" / "dct.toml").read_text().replace(
        'plant = "dct"', 'plant = "dtc"'))
    latin1_plant = write(tmp / "latin1_plant.toml", b'plant = "chain"\n# Stra\xdfe\n')
    latin1_scenario = write(tmp / "latin1_scenario.toml", NON_UTF8 + b"duration_s = 1.0\n")
    latin1_io = write(tmp / "latin1_io.toml", b"# \xe9\n[loop]\n")
    misspelled_input = write(tmp / "typo.toml", "duration_s = 1.0\ndt_s = 0.001\n[inputs]\nengine_torqe = 10.0\n")
    no_adapters = write(tmp / "no_adapters.toml", "adapters = []\n[loop]\nmode = \"realtime\"\n")
    disabled = write(tmp / "disabled.toml", FREE_PORTS + "enabled = false\n")
    serial = write(tmp / "serial.toml", '[[adapters]]\ntype = "serial"\n')
    zqm = write(tmp / "zqm.toml", '[[adapters]]\ntype = "zqm"\n')
    initial = write(tmp / "initial.toml", FREE_PORTS + '[initial_inputs]\np_c11 = 1.0\n')
    out = str(tmp / "out")
    return {
        "misspelled config (simulate)": (["simulate", "powershfit", "--scenario", "powershift_swaps", "--out", out],
                                         "gearbox-hil: error: powershfit: file not found; did you mean 'powershift'?"),
        "misspelled config (serve)": (["serve", "powershfit"],
                                      "gearbox-hil: error: powershfit: file not found; did you mean 'powershift'?"),
        "misspelled config (describe)": (["describe", "dtc"], "gearbox-hil: error: dtc: file not found; did you "
                                         "mean 'dct'?"),
        "misspelled config path": (["describe", "configs/powershfit.toml"], "gearbox-hil: error: "
                                   "configs/powershfit.toml: file not found; did you mean 'configs/powershift.toml'?"),
        "unknown name": (["describe", "tractor"], "gearbox-hil: error: tractor: file not found (neither as a path "
                         "nor as a name in configs/; `gearbox-hil list` shows the names)"),
        "misspelled scenario": (["simulate", "chain", "--scenario", "chain_4mas", "--out", out],
                                "gearbox-hil: error: chain_4mas: file not found; did you mean 'chain_4mass'?"),
        "misspelled I/O config": (["serve", "powershift", "--io", "io_defualt"],
                                  "gearbox-hil: error: io_defualt: file not found; did you mean 'io_default'?"),
        "misspelled plant kind": (["describe", str(bad_plant)], f"gearbox-hil: error: {bad_plant}: plant: must be "
                                  "one of 'chain', 'damper', 'dct', 'kinematic', 'powershift', 'servo', 'transmission', got 'dtc'; "
                                  "did you mean 'dct'?"),
        "misspelled scenario input": (["simulate", "dct", "--scenario", str(misspelled_input), "--out", out],
                                      f"gearbox-hil: error: {misspelled_input}: inputs.engine_torqe: not an input "
                                      "of the dct plant; its inputs are "),
        "misspelled initial input": (["serve", "powershift", "--io", str(initial)],
                                     f"gearbox-hil: error: {initial}: initial_inputs.p_c11: not an input of the "
                                     "powershift plant; its inputs are "),
        "plant config not UTF-8": (["describe", str(latin1_plant)], f"gearbox-hil: error: {latin1_plant}: not UTF-8 "
                                   "text: byte 0xdf on line 2; TOML files must be saved as UTF-8"),
        "scenario not UTF-8": (["simulate", "chain", "--scenario", str(latin1_scenario), "--out", out],
                               f"gearbox-hil: error: {latin1_scenario}: not UTF-8 text: byte 0xe9 on line 1; TOML "
                               "files must be saved as UTF-8"),
        "I/O config not UTF-8": (["serve", "powershift", "--io", str(latin1_io)], f"gearbox-hil: error: "
                                 f"{latin1_io}: not UTF-8 text: byte 0xe9 on line 1; TOML files must be saved as "
                                 "UTF-8"),
        "I/O config without adapters": (["serve", "powershift", "--io", str(no_adapters)],
                                        f"gearbox-hil: error: {no_adapters}: adapters: no adapter configured, so no "
                                        "client could reach the server"),
        "I/O config with its only adapter disabled": (["serve", "powershift", "--io", str(disabled), "--mode",
                                                       "lockstep", "--duration", "1"],
                                                      f"gearbox-hil: error: {disabled}: adapters: no adapter "
                                                      "configured"),
        "unknown adapter type": (["serve", "powershift", "--io", str(serial)], f"gearbox-hil: error: {serial}: "
                                 "adapters[0].type: unknown adapter type 'serial'; known types: can, device, j1939, uds, web, xcp, zmq"),
        "misspelled adapter type": (["serve", "powershift", "--io", str(zqm)], f"gearbox-hil: error: {zqm}: "
                                    "adapters[0].type: unknown adapter type 'zqm'; known types: can, device, j1939, uds, web, xcp, zmq"),
        "misspelled command": (["serv", "powershift"], "gearbox-hil: error: argument COMMAND: invalid choice: 'serv' "
                               "(choose from "),
        "bad port": (["serve", "powershift", "--zmq-port", "70000"], "gearbox-hil serve: error: argument --zmq-port: "
                     "must be 0 (free ports) or a port 1..65533, got 70000 (see `gearbox-hil serve --help`)"),
        "bad share URL": (["serve", "powershift", "--can-share", "ws://127.0.0.1/"], "gearbox-hil serve: error: "
                          "argument --can-share: must be ws://HOST:PORT/, HOST:PORT or PORT (0: a free port)"),
        "endpoint option without the adapter": (["serve", "powershift", "--io", str(no_adapters), "--zmq-port", "0"],
                                                f"gearbox-hil: error: --zmq-port: the I/O config {no_adapters} has no "
                                                "enabled zmq adapter"),
        "bad rate": (["serve", "powershift", "--rate", "50"],
                     "gearbox-hil: error: --rate: must be between 100 and 10000 Hz, got 50"),
    }


MISTAKES = list(_mistakes(Path("."), make=False))


@pytest.mark.parametrize("name", MISTAKES)
def test_every_mistake_is_exit_2_and_one_line_without_a_traceback(name, tmp_path):
    args, expected = _mistakes(tmp_path)[name]
    r = cli(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    line = one_line_error(r.stderr)
    assert line.startswith(expected), line
    if "did you mean" in expected or name in ("misspelled scenario input", "misspelled initial input",
                                              "misspelled adapter type", "misspelled command"):
        assert "did you mean" in line, line
    assert not (tmp_path / "out" / "trace.csv").exists()


def test_suggestions_name_the_closest_known_name():
    assert closest("engine_torqe", ["p_c1", "engine_torque", "load_torque"]) == "engine_torque"
    assert closest("xyz", ["engine_torque", "load_torque"]) is None
    assert did_you_mean("p_c9", ["p_c1", "w_out"]) == "; did you mean 'p_c1'?"
    assert did_you_mean("p_c1", ["p_c1"]) == ""
    assert find_config("powershift") == ROOT / "configs" / "powershift.toml"
    assert find_config("powershift_swaps", folder="scenarios") == ROOT / "scenarios" / "powershift_swaps.toml"
    with pytest.raises(ConfigError) as ei:
        find_config("missing.toml")  # the shared ".toml" alone is no likeness
    assert "did you mean" not in str(ei.value)


def test_a_non_utf8_file_is_reported_with_its_byte_and_line(tmp_path):
    p = write(tmp_path / "x.toml", b'a = 1\nb = "\xff"\n')
    with pytest.raises(ConfigError) as ei:
        load_toml(p)
    assert ei.value.problem == "not UTF-8 text: byte 0xff on line 2; TOML files must be saved as UTF-8"


# -- what helps ---------------------------------------------------------------------------------------------
def test_version(capsys):
    with pytest.raises(SystemExit) as ei:
        main(["--version"])
    assert ei.value.code == 0
    out = capsys.readouterr().out
    from importlib.metadata import version

    assert out.startswith(f"gearbox-hil {version('gearbox-hil')} (Python ")


def test_list_shows_every_plant_config_scenario_and_io_config_on_one_line_each(capsys):
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    named = {ln.split()[0] for ln in lines if ln.startswith("  ")}
    configs = {p.stem for p in (ROOT / "configs").glob("*.toml")}
    scenarios = {p.stem for p in (ROOT / "scenarios").glob("*.toml")}
    assert configs | scenarios | {"powershift", "dct", "chain", "damper", "servo", "kinematic"} <= named
    for name in configs | scenarios:  # one line each (a name may be a plant kind and a config)
        assert 1 <= sum(1 for ln in lines if ln.startswith(f"  {name} ")) <= 2, name
    assert any(ln.startswith("I/O configs") for ln in lines)
    assert main(["list", "--json"]) == 0
    cat = json.loads(capsys.readouterr().out)
    assert {e["name"] for e in cat["io_configs"]} == {"io_default", "io_can", "io_docker", "io_zf8hp", "io_10khz",
                                                      "io_canfd_dct", "io_canfd_zf8hp", "io_j1939_powershift",
                                                      "io_electrical", "io_can_mux", "io_electrical_zf8hp"}
    assert {e["name"] for e in cat["channel_maps"]} == {"io_device_powershift", "io_device_zf8hp"}
    assert {e["name"] for e in cat["message_sets"]} == {"io_can_powershift", "io_can_dct", "io_can_zf8hp",
                                                        "io_can_dct_fd", "io_can_zf8hp_fd", "io_can_powershift_j1939",
                                                        "io_can_powershift_mux"}
    assert next(e for e in cat["configs"] if e["name"] == "dct_kinematic")["kind"] == "dct"  # through `extends`
    assert {e["name"] for e in cat["campaigns"]} == {p.stem for p in (ROOT / "campaigns").glob("*.toml")}


def test_endpoint_options_move_the_sockets_of_the_config():
    from server.realtime.runtime import apply_adapter_options, load_io_config

    io = apply_adapter_options(load_io_config("io_can"), {"zmq": {"--zmq-port": 6000},
                                                          "can": {"--can-share": ("127.0.0.1", 0)}})
    zmq = next(a for a in io.adapters if a.type == "zmq").options
    assert (zmq["control_endpoint"], zmq["state_endpoint"], zmq["command_endpoint"]) == (
        "tcp://127.0.0.1:6000", "tcp://127.0.0.1:6001", "tcp://127.0.0.1:6002")
    assert next(a for a in io.adapters if a.type == "can").options["share"] == {"host": "127.0.0.1", "port": 0}
    io = apply_adapter_options(load_io_config("io_can"), {"can": {"--can-channel": "bench-2"}})
    can_options = next(a for a in io.adapters if a.type == "can").options
    assert can_options["channel"] == "bench-2" and "share" not in can_options
    io = apply_adapter_options(load_io_config("io_j1939_powershift"), {"can": {"--can-channel": "bench-3"}})
    assert {a.type: a.options["channel"] for a in io.adapters if a.type in ("can", "j1939")} == \
        {"can": "bench-3", "j1939": "bench-3"}  # the rest-bus stays on the CAN adapter's bus
    io = apply_adapter_options(load_io_config(None), {"zmq": {"--zmq-port": 0,
                                                              "--zmq-control": "tcp://127.0.0.1:7000"}})
    zmq = next(a for a in io.adapters if a.type == "zmq").options
    assert (zmq["control_endpoint"], zmq["state_endpoint"]) == ("tcp://127.0.0.1:7000", "tcp://127.0.0.1:0")
    assert "share" not in next(a for a in io.adapters if a.type == "can").options


class Served:
    """``gearbox-hil serve`` in a subprocess with the given arguments (no --quiet unless given)."""

    def __init__(self, tmp: Path, name: str, *args: str):
        self.ready = tmp / f"{name}.json"
        self.out = tmp / f"{name}.out"
        self.err = tmp / f"{name}.err"
        self.proc = subprocess.Popen([sys.executable, "-m", "server.cli", "serve", *args, "--ready-file",
                                      str(self.ready)], cwd=ROOT, stdout=open(self.out, "w"),
                                     stderr=open(self.err, "w"), env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def wait_ready(self, timeout_s: float = 300.0) -> dict:
        assert wait_until(lambda: self.ready.exists() or self.proc.poll() is not None, timeout_s), "not ready"
        assert self.ready.exists(), self.err.read_text()
        return json.loads(self.ready.read_text())

    def finish(self, timeout_s: float = 60.0) -> tuple[int, str, str]:
        code = self.proc.wait(timeout=timeout_s)
        return code, self.out.read_text(), self.err.read_text()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


def test_two_servers_on_one_machine_on_free_ports_and_a_taken_share_port_is_refused(tmp_path):
    a = Served(tmp_path, "a", "powershift", "--io", "io_can", "--zmq-port", "0", "--can-share", "0", "--quiet")
    b = c = None
    try:
        ra = a.wait_ready()
        b = Served(tmp_path, "b", "dct", "--zmq-port", "0", "--quiet")
        rb = b.wait_ready()
        assert ra["endpoints"]["zmq.control"] != rb["endpoints"]["zmq.control"]
        assert not ra["endpoints"]["zmq.control"].endswith(":5555")
        share = ra["endpoints"]["can.share"]
        assert share.startswith("ws://127.0.0.1:") and not share.endswith(":54701/")
        for ready, kind in ((ra, "powershift"), (rb, "dct")):
            with HilClient(ready["endpoints"]["zmq.control"], timeout_s=30) as hil:
                assert hil.describe()["kind"] == kind
        # the start-up lines name the chosen endpoints
        assert wait_until(lambda: share in a.out.read_text(), 30), a.out.read_text()
        assert ra["endpoints"]["zmq.control"] in a.out.read_text()
        # a third server asking for the first one's share port does not join its bus: it refuses to start
        port = share.rsplit(":", 1)[1].rstrip("/")
        c = Served(tmp_path, "c", "powershift", "--io", "io_can", "--zmq-port", "0", "--can-share", port, "--quiet")
        code, _, err = c.finish(timeout_s=300)
        assert code == 2 and f"cannot listen on 127.0.0.1:{port}" in one_line_error(err)
    finally:
        for s in (a, b, c):
            if s is not None:
                s.kill()


def test_quiet_prints_the_endpoints_and_the_summary_and_no_log_or_status_lines(tmp_path):
    s = Served(tmp_path, "q", "powershift", "--zmq-port", "0", "--duration", "1", "--quiet")
    code, out, err = s.finish(timeout_s=300)
    assert code == 0, err
    assert "zmq.control" in out and "timing summary (realtime mode)" in out
    assert "[realtime running]" not in out
    assert " INFO " not in err and " DEBUG " not in err, err
    s = Served(tmp_path, "loud", "powershift", "--zmq-port", "0", "--duration", "1")
    code, out, err = s.finish(timeout_s=300)
    assert code == 0 and " INFO " in err and "[realtime running]" in out  # what --quiet leaves out


def test_an_idle_lockstep_server_does_not_repeat_its_status_line(tmp_path):
    io = write(tmp_path / "io.toml", "[loop]\nstatus_interval_s = 0.05\n" + FREE_PORTS)
    s = Served(tmp_path, "idle", "powershift", "--io", str(io), "--mode", "lockstep", "--log-level", "WARNING")
    try:
        ready = s.wait_ready()
        time.sleep(1.0)  # about 20 status windows with nothing happening
        with HilClient(ready["endpoints"]["zmq.control"], timeout_s=30) as hil:
            hil.step(10)
            time.sleep(0.5)
            hil.shutdown()
        code, out, err = s.finish()
    finally:
        s.kill()
    assert code == 0, err
    lines = [ln for ln in out.splitlines() if ln.startswith("[lockstep running]")]
    assert 2 <= len(lines) <= 4, lines  # t = 0; after the steps (with and without the window's rate)
    assert all(x != y for x, y in zip(lines, lines[1:])), lines
    assert any("t=    0.010 s" in ln for ln in lines), lines


# -- warnings ---------------------------------------------------------------------------------------------
def test_a_scenario_that_leaves_inputs_out_lists_them_once(tmp_path):
    sc = write(tmp_path / "partial.toml", "duration_s = 0.05\ndt_s = 0.001\n[inputs]\np_c1 = 16.0\n"
                                           "engine_torque = 100.0\n")
    r = cli("simulate", "powershift", "--scenario", str(sc), "--out", str(tmp_path / "out"), "--quiet")
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert lines == [f"gearbox-hil: warning: {sc}: the scenario does not set 8 inputs of the powershift plant, "
                     "which stay at their declared default: p_c2 = 0 bar, p_c3 = 0 bar, p_c4 = 0 bar, p_c5 = 0 bar, "
                     "p_c6 = 0 bar, p_c7 = 0 bar, p_c8 = 0 bar, load_torque = 0 N m; name inputs left out on "
                     "purpose in leave_at_default"], r.stderr
    kept = write(tmp_path / "kept.toml", sc.read_text().replace(
        "[inputs]", 'leave_at_default = ["p_c2", "p_c3", "p_c4", "p_c5", "p_c6", "p_c7", "p_c8", "load_torque"]\n'
        "[inputs]"))
    r = cli("simulate", "powershift", "--scenario", str(kept), "--out", str(tmp_path / "out"), "--quiet")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    wrong = write(tmp_path / "wrong.toml", kept.read_text().replace('"load_torque"]', '"load_torqe"]'))
    r = cli("simulate", "powershift", "--scenario", str(wrong), "--out", str(tmp_path / "out"))
    assert r.returncode == 2
    assert one_line_error(r.stderr).endswith("did you mean 'load_torque'?")


def test_shipped_scenarios_set_every_input_or_say_why_not(caplog):
    sys.path.insert(0, str(ROOT / "tests"))
    from golden import CASES

    from plant_models.registry import load_plant
    from server.offline.scenario import load_scenario

    for config, scenario, _ in CASES:
        plant = load_plant(config.removesuffix(".toml"))
        with caplog.at_level(logging.WARNING, logger="gearbox_hil.scenario"):
            load_scenario(scenario.removesuffix(".toml")).compile(plant)
        assert not caplog.records, f"{config} + {scenario}: {caplog.records[0].getMessage()}"


def test_timing_tolerance_counts_rate_and_missed_ticks_after_the_start_up_grace():
    ok = {"ticks": 9881, "run_time_s": 10.0, "rate_hz_target": 1000.0, "missed_ticks": 119,
          "missed_ticks_in_grace": 60}
    assert timing_problems(ok, 5.0) == []
    # the run: 28 % of the ticks missed
    bad = {"ticks": 7200, "run_time_s": 10.0, "rate_hz_target": 1000.0, "missed_ticks": 2800,
           "missed_ticks_in_grace": 0}
    assert timing_problems(bad, 5.0) == [
        "actual rate 720.0 Hz (after the start-up grace) is 28.0 % below the target 1000 Hz",
        "28.0 % of the ticks were missed after the start-up grace (2800 of 10000)"]
    # misses during the start-up grace alone (caches warming up) are not held against the run
    start = dict(bad, missed_ticks_in_grace=2800)
    assert timing_problems(start, 5.0) == []
    assert timing_problems(dict(bad, missed_ticks=300, ticks=9700), 5.0) == []
    assert timing_problems(dict(bad, missed_ticks=600, ticks=9400), 5.0) == [
        "actual rate 940.0 Hz (after the start-up grace) is 6.0 % below the target 1000 Hz",
        "6.0 % of the ticks were missed after the start-up grace (600 of 10000)"]
    assert timing_problems({"ticks": 0, "run_time_s": 0.0, "rate_hz_target": 1000.0}, 5.0) == []


def test_strict_timing_exits_4_with_the_reason_when_the_run_misses_ticks(tmp_path):
    s = Served(tmp_path, "strict", "powershift", "--zmq-port", "0", "--duration", "2.5", "--quiet",
               "--strict-timing", "--summary-json", str(tmp_path / "summary.json"))
    try:
        ready = s.wait_ready()
        time.sleep(1.3)  # past the start-up grace
        os.kill(ready["pid"], signal.SIGSTOP)  # every deadline of the next 0.5 s is missed
        time.sleep(0.5)
        os.kill(ready["pid"], signal.SIGCONT)
        code, out, err = s.finish()
    finally:
        s.kill()
    assert code == 4, (out, err)
    warning = [ln for ln in err.splitlines() if "timing tolerance" in ln]
    assert len(warning) == 1 and warning[0].startswith("gearbox-hil: warning: the real-time run is outside its "
                                                       "timing tolerance (5 %): "), err
    check = json.loads((tmp_path / "summary.json").read_text())["timing_check"]
    assert check["tolerance_pct"] == 5.0 and any("missed after the start-up grace" in p for p in check["problems"])


# -- docs/scenarios.md says what the code does --------------------------------------------------------------
def test_the_scenario_guide_example_runs_without_warnings(tmp_path):
    text = (ROOT / "docs" / "scenarios.md").read_text()
    block = text.split("```toml\n", 1)[1].split("```", 1)[0]
    sc = write(tmp_path / "my_swap.toml", block)
    r = cli("simulate", "powershift", "--scenario", str(sc), "--out", str(tmp_path / "out"), "--quiet")
    assert r.returncode == 0 and r.stderr == "", r.stderr


@pytest.mark.parametrize("interpolation, expected", [
    ("linear", {0: (0.0, 200.0), 1: (2.0, 200.0), 4: (8.0, 200.0), 5: (10.0, 0.0)}),
    ("hold", {0: (0.0, 0.0), 1: (2.0, 0.0), 4: (8.0, 0.0), 5: (10.0, 0.0)}),
])
def test_the_scenario_guide_table_of_first_order_hold_and_steps(interpolation, expected):
    from plant_models.registry import load_plant
    from server.offline.scenario import parse_scenario

    plant = load_plant("powershift")
    sc = parse_scenario({"duration_s": 0.1, "dt_s": 0.01, "interpolation": interpolation,
                         "inputs": {"p_c1": [[0.0, 0.0], [0.05, 10.0]]}}, "table")
    compiled = sc.compile(plant, warn=False)
    k_in = plant.input_index("p_c1")
    for k, (value, rate) in expected.items():
        u, r = compiled.inputs_at(k)
        assert u[k_in] == pytest.approx(value, abs=1e-12) and r[k_in] == pytest.approx(rate, rel=1e-9, abs=1e-9)
