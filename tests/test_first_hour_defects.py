"""Defects a new user met in their first hour (issue 39, items 6-7): each a one-line error or a clear word."""

from __future__ import annotations

import pytest

from plant_models.config import ConfigError
from plant_models.registry import load_plant
from server.offline.scenario import load_scenario


@pytest.mark.parametrize("text, message", [
    ("t,pressure_c1\n", "trace.csv has a header but no rows"),
    ("t,pressure_c1\n0.0,abc\n", "trace.csv: a row is not 2 numbers as the header names"),
])
def test_a_replay_csv_without_rows_or_with_text_is_a_one_line_error(tmp_path, text, message):
    (tmp_path / "trace.csv").write_text(text)
    sc = tmp_path / "s.toml"
    sc.write_text('duration_s = 0.5\ndt_s = 0.001\n[replay]\nfile = "trace.csv"\n[replay.channels]\n'
                  'p_c1 = "pressure_c1"\n')
    with pytest.raises(ConfigError) as ei:
        load_scenario(sc).compile(load_plant("powershift"), warn=False)
    assert message in str(ei.value) and "\n" not in str(ei.value), str(ei.value)
    assert "replay.file" in str(ei.value)


def test_describe_names_members_and_words_brakes_and_brake_commands_plainly(tmp_path):
    from plant_models.registry import describe_config

    from server_support import ROOT

    text = (ROOT / "configs" / "zf6hp.toml").read_text()
    for doc in ('doc = "engine torque on the input member (converter locked up)"\n',
                'doc = "load torque at the output (road load through the final drive); positive resists forward '
                'motion"\n'):
        text = text.replace(doc, "")
    (tmp_path / "six.toml").write_text(text)
    docs = {s["name"]: s["doc"] for s in describe_config(tmp_path / "six.toml")["inputs"]
            + describe_config(tmp_path / "six.toml")["outputs"]}
    assert docs["input_torque"] == "torque on input"  # a member's name, not its index
    assert docs["load_torque"] == "load torque on output; positive resists"
    assert docs["torque_A"] == "A friction torque: acts +torque on c1, -torque on s3"
    assert docs["torque_C"] == "C friction torque: acts +torque on s2, its reaction on the housing"
    assert docs["torque_F"] == "F friction torque: acts +torque on c2, its reaction on the housing"
    d = describe_config(ROOT / "configs" / "zf8hp_car.toml")
    docs = {s["name"]: s["doc"] for s in d["inputs"]}
    assert docs["p_brake"] == "brake pressure command" and docs["p_A"] == "brake A pressure command"


def test_a_misspelled_file_name_suggests_the_users_file_next_to_it_before_a_shipped_one(tmp_path, monkeypatch):
    from plant_models.config import find_config

    (tmp_path / "zf6hp_car.toml").write_text('plant = "transmission"\n')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as ei:
        find_config("zf6hp_carr.toml")
    assert "did you mean 'zf6hp_car.toml'?" in str(ei.value), str(ei.value)
    with pytest.raises(ConfigError) as ei:  # a shipped name is still suggested when no file here is close
        find_config("powershfit")
    assert "did you mean 'powershift'?" in str(ei.value)


@pytest.mark.parametrize("args, hint", [
    (["simulate", "powershift", "--scenario", "x", "--out", "o", "--plots"], "did you mean '--plot'?"),
    (["serve", "powershift", "--zmq_port", "0"], "did you mean '--zmq-port'?"),
    (["serve", "powershift", "--zmq_port=0"], "did you mean '--zmq-port'?"),
])
def test_a_misspelled_flag_gets_did_you_mean_in_one_line(args, hint, capsys):
    from server.cli import main

    with pytest.raises(SystemExit) as ei:
        main(args)
    err = capsys.readouterr().err
    assert ei.value.code == 2 and err.count("\n") == 1, err
    assert "unrecognized arguments" in err and hint in err, err


def test_an_idle_speed_given_in_rad_s_is_refused_with_the_reason(tmp_path):
    from plant_models.registry import read_config

    from server_support import ROOT

    text = (ROOT / "configs" / "zf8hp_car.toml").read_text()
    assert "idle_speed_rpm = 700.0" in text
    p = tmp_path / "car.toml"
    p.write_text(text.replace("idle_speed_rpm = 700.0", "idle_speed_rpm = 73.3"))
    with pytest.raises(ConfigError) as ei:
        read_config(p)
    msg = str(ei.value)
    assert "engine.idle_speed_rpm" in msg and "73.3" in msg and "rad/s" in msg and "700 rpm" in msg, msg


def test_scenario_folders_resolve_like_the_recording_folder_from_the_io_configs_folder(tmp_path):
    from server.realtime.runtime import load_io_config

    from server_support import ROOT

    bench = tmp_path / "bench"
    (bench / "my_scenarios").mkdir(parents=True)
    io = bench / "io.toml"
    io.write_text('[scenarios]\nfolders = ["my_scenarios"]\n[recording]\nfolder = "recs"\n')
    cfg = load_io_config(io)
    assert cfg.scenarios.folders == ((bench / "my_scenarios").resolve(),)
    assert cfg.recording.folder.resolve() == (bench / "recs").resolve()
    io.write_text('[scenarios]\nfolders = ["scenarios"]\n')  # the project's, written as from the project folder
    with pytest.raises(ConfigError) as ei:
        load_io_config(io)
    assert "relative to the I/O config's folder" in str(ei.value) and "\n" not in str(ei.value)
    io.write_text('[scenarios]\nmax_bytes = 65536\n')  # no folders: the project's scenarios/, as before
    assert load_io_config(io).scenarios.folders[0].resolve() == (ROOT / "scenarios").resolve()


def test_every_config_an_example_names_exists():
    import re

    from server_support import ROOT

    missing = [(p.name, m) for p in sorted((ROOT / "examples").glob("*.py"))
               for m in re.findall(r"configs/[\w./-]+\.(?:toml|dbc)", p.read_text()) if not (ROOT / m).exists()]
    assert not missing, missing


def _section(doc: str, start: str, end: str) -> str:
    from server_support import ROOT

    text = (ROOT / "docs" / doc).read_text()
    return text.split(start, 1)[1].split(end, 1)[0]


def test_powertrain_doc_states_the_value_of_g_the_code_uses():
    import re

    from plant_models.powertrain.components import GRAVITY
    from server_support import ROOT

    m = re.search(r"`g = ([\d.]+) m/s\^2`", (ROOT / "docs" / "powertrain.md").read_text())
    assert m, "docs/powertrain.md does not state g"
    assert float(m.group(1)) == GRAVITY


def test_the_mesh_and_planetary_key_tables_list_the_required_name():
    mesh = _section("transmissions.md", "A fixed gear mesh ties two members:", "A planetary set ties")
    planetary = _section("transmissions.md", "A planetary set ties its sun", "A Ravigneaux set")
    assert "| `name` |" in mesh and "| `name` |" in planetary


def test_the_pto_doc_says_the_table_starts_at_the_zero_point_the_reader_requires(tmp_path):
    from plant_models.registry import read_config
    from server_support import ROOT

    pto = _section("powertrain.md", "### 4c. PTO load (`[pto]`)", "### 4d")
    assert "must begin with the point 0 rpm, 0 N m" in " ".join(pto.split())
    text = (ROOT / "configs" / "powershift_tractor_pto.toml").read_text()
    import re

    speeds = re.search(r"speed_rpm = \[([^\]]*)\]", text).group(1)
    torques = re.search(r"torque_N_m = \[([^\]]*)\]", text).group(1)
    assert speeds.split(",")[0].strip() in ("0", "0.0") and torques.split(",")[0].strip() in ("0", "0.0")
    cut = text.replace(speeds, ", ".join(speeds.split(",")[1:])).replace(torques, ", ".join(torques.split(",")[1:]))
    base = (ROOT / "configs" / "powershift_tractor.toml").as_posix()
    (tmp_path / "pto.toml").write_text(cut.replace('extends = "powershift_tractor.toml"', f'extends = "{base}"'))
    with pytest.raises(ConfigError, match="must start at 0 N m at 0 rpm"):
        read_config(tmp_path / "pto.toml")
