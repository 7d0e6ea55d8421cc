"""A CAN bus log (BLF, ASC) replayed through the plant's DBC as a scenario's stimulus.

The log holds the command frames a TCU would send for the single swap (the
scenario's pressures, engine and load torque, one frame of each message per
1 ms step, on absolute time stamps), encoded through configs/powershift.dbc;
replayed with ``dbc = "powershift.dbc"``, every step's input is the commanded
value at the DBC's resolution (0.01 bar, 0.25 N m, 0.1 N m), nothing else.
"""

from __future__ import annotations

import numpy as np
import pytest

from plant_models.config import ConfigError, repo_root
from plant_models.registry import load_plant
from server.offline.scenario import load_scenario

DT = 1e-3
T0 = 1_780_000_000.0  # epoch seconds, as a logger stamps its frames
PRESSURES = [f"p_c{i}" for i in range(1, 9)]
CHANNELS = {**{p: f"PressureCmd_C{p[-1]}" for p in PRESSURES}, "engine_torque": "EngineTorque",
            "load_torque": "LoadTorque"}


@pytest.fixture(scope="module")
def commanded():
    """(plant, the swap's commanded input rows per step (n, n_in))."""
    plant = load_plant("powershift")
    sc = load_scenario("powershift_single_swap")
    compiled = sc.compile(plant, DT, warn=False)
    return plant, np.array([compiled.inputs_at(k)[0].copy() for k in range(compiled.n_steps)])


def _write_log(path, plant, rows) -> None:
    import can
    import cantools

    db = cantools.database.load_file(str(repo_root() / "configs" / "powershift.dbc"))
    col = {nm: rows[:, plant.input_index(nm)] for nm in CHANNELS}
    writer = can.BLFWriter(str(path)) if path.suffix == ".blf" else can.ASCWriter(str(path))
    with writer:
        for k in range(len(rows)):
            for msg in (db.get_message_by_name(n) for n in ("TCU_ClutchCmdA", "TCU_ClutchCmdB", "ENG_Torque",
                                                              "ENV_Load")):
                values = {s.name: 0 for s in msg.signals}  # counters and checksums: not checked by a replay
                values.update({CHANNELS[nm]: float(col[nm][k]) for nm in CHANNELS if CHANNELS[nm] in values})
                writer.on_message_received(can.Message(timestamp=T0 + k * DT, arbitration_id=msg.frame_id,
                                                       is_extended_id=False, data=msg.encode(values)))


def _scenario(tmp_path, log: str, channels: dict, extra: str = "") -> "Path":
    sc = tmp_path / "replay.toml"
    sc.write_text(f'duration_s = 1.2\ndt_s = {DT}\ninterpolation = "hold"\n[replay]\nfile = "{log}"\n{extra}'
                  '[replay.channels]\n' + "".join(f'{k} = "{v}"\n' for k, v in channels.items()))
    return sc


@pytest.mark.parametrize("suffix", [".blf", ".asc"])
def test_a_bus_log_replayed_through_the_dbc_reproduces_the_commanded_inputs(tmp_path, commanded, suffix):
    plant, rows = commanded
    _write_log(tmp_path / f"session{suffix}", plant, rows)
    sc = _scenario(tmp_path, f"session{suffix}", CHANNELS, 'dbc = "powershift.dbc"\n')
    compiled = load_scenario(sc).compile(plant, warn=False)
    assert compiled.n_steps == len(rows) == 1200
    got = np.array([compiled.inputs_at(k)[0].copy() for k in range(compiled.n_steps)])
    for nm, res in [(p, 0.01) for p in PRESSURES] + [("engine_torque", 0.25), ("load_torque", 0.1)]:
        j = plant.input_index(nm)
        # the DBC's raw integer times its factor: the commanded value rounded to the signal's resolution
        assert np.array_equal(got[:, j], np.round(rows[:, j] / res) * res), nm
        assert np.max(np.abs(got[:, j] - rows[:, j])) <= 0.5 * res + 1e-12, nm
    assert np.ptp(got[:, plant.input_index("p_c2")]) > 10.0  # the swap's ramps are in it, not a constant


def test_a_message_name_picks_the_signal(tmp_path, commanded):
    """``Message.Signal`` names a signal as well as its bare name; the DBC's "Nm" is the input's N m."""
    plant, rows = commanded
    _write_log(tmp_path / "s.blf", plant, rows[:50])
    sc = _scenario(tmp_path, "s.blf", {"engine_torque": "ENG_Torque.EngineTorque"}, 'dbc = "powershift.dbc"\n')
    u = load_scenario(sc).compile(plant, warn=False).inputs_at(10)[0]
    assert u[plant.input_index("engine_torque")] == np.round(rows[10, plant.input_index("engine_torque")] / 0.25) * 0.25


@pytest.mark.parametrize("extra, channels, words", [
    ("", {"p_c1": "PressureCmd_C1"}, "replay.dbc: a bus log is decoded through a DBC"),
    ('dbc = "powershfit.dbc"\n', {"p_c1": "PressureCmd_C1"}, "did you mean 'powershift.dbc'"),
    ('dbc = "powershift.dbc"\n', {"p_c1": "PressureCmd_C9"}, "'PressureCmd_C9' is not a signal of powershift.dbc"),
    ('dbc = "powershift.dbc"\n', {"p_c1": "EngineSpeed"}, "no sample of 'EngineSpeed' in the played window"),
])
def test_bus_log_mistakes_are_one_line_errors(tmp_path, commanded, extra, channels, words):
    plant, rows = commanded
    _write_log(tmp_path / "s.blf", plant, rows[:5])
    with pytest.raises(ConfigError) as exc:
        load_scenario(_scenario(tmp_path, "s.blf", channels, extra)).compile(plant, warn=False)
    assert words in str(exc.value)


def test_a_dbc_for_a_file_that_is_not_a_bus_log_is_refused(tmp_path, commanded):
    (tmp_path / "r.csv").write_text("t,p\n0,1\n")
    with pytest.raises(ConfigError) as exc:
        load_scenario(_scenario(tmp_path, "r.csv", {"p_c1": "p"}, 'dbc = "powershift.dbc"\n'))
    assert "only a bus log (.blf, .asc) is decoded through a DBC" in str(exc.value)
