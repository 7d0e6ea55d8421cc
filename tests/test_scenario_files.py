"""The shipped scenarios of the papers' demonstrations: they load, run cleanly and show what they claim."""

from __future__ import annotations

import numpy as np
import pytest

from plant_models.config import repo_root
from plant_models.core import layout as L
from plant_models.registry import load_plant
from server.offline.scenario import load_scenario
from server.offline.run import run_offline

ROOT = repo_root()
SCENARIOS = {
    "powershift_single_swap.toml": "powershift.toml",
    "powershift_double_swap.toml": "powershift.toml",
    "powershift_triple_swap.toml": "powershift.toml",
    "powershift_swaps.toml": "powershift.toml",
    "dct_upshift.toml": "dct.toml",
    "chain_4mass.toml": "chain.toml",
    "powershift_kinematic_swap.toml": "powershift_kinematic.toml",
    "dct_kinematic_upshift.toml": "dct_kinematic.toml",
    "zf8hp_shifts.toml": "zf8hp.toml",
    "zf8hp_car_drive.toml": "zf8hp_car.toml",
    "powershift_tractor_pull.toml": "powershift_tractor.toml",
    "dct_car_launch.toml": "dct_car.toml",
    "powershift_tractor_pto.toml": "powershift_tractor_pto.toml",
    "zf8hp_car_p2_launch.toml": "zf8hp_car_p2.toml",
}
# a car standing in gear on its brake: brake, rolling resistance and the gear's elements all stuck hold the
# whole transmission at zero speed (locked) with more rows than it needs (overconstrained); the DCT car
# stands on its brake and rolling resistance with both shafts' gears preselected (dog teeth in)
ALLOWED_STATUS = {"zf8hp_car_drive.toml": L.ST_OVERCONSTRAINED | L.ST_LOCKED,
                  "zf8hp_car_p2_launch.toml": L.ST_OVERCONSTRAINED | L.ST_LOCKED,
                  "dct_car_launch.toml": L.ST_OVERCONSTRAINED | L.ST_LOCKED}
_runs: dict = {}


def run(name):
    if name not in _runs:
        plant = load_plant(ROOT / "configs" / SCENARIOS[name])
        compiled = load_scenario(ROOT / "scenarios" / name).compile(plant)
        _runs[name] = (plant, run_offline(plant, compiled))
    return _runs[name]


def test_every_scenario_of_these_plants_is_covered():
    shipped = {p.name for p in (ROOT / "scenarios").glob("*.toml")
               if p.name.split("_")[0] in ("powershift", "dct", "chain", "zf8hp")}
    assert shipped == set(SCENARIOS)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_runs_cleanly_inside_the_declared_ranges(name):
    plant, tr = run(name)
    # no redundant/locked sets, no budget or solver limits, no roll-backs
    assert tr.status_or & ~ALLOWED_STATUS.get(name, 0) == 0, tr.status_or
    assert np.all(np.isfinite(tr.values))
    for k, sig in enumerate(plant.outputs):
        col = tr.values[:, k]
        assert col.min() >= sig.lo and col.max() <= sig.hi, (sig.name, col.min(), col.max(), sig.lo, sig.hi)
    assert load_scenario(ROOT / "scenarios" / name).description


def test_powershift_partial_scenarios_are_the_start_of_the_whole_sequence():
    """single/double/triple are the paper's sequence up to that shift; until clutch 8 is pressurised
    at 1.1 s they are the same run as powershift_swaps, bit for bit."""
    _, whole = run("powershift_swaps.toml")
    k_c8 = int(round(1.1 / 1e-3))
    for name, gear_end in (("powershift_single_swap.toml", 3), ("powershift_double_swap.toml", 5),
                           ("powershift_triple_swap.toml", 12)):
        _, tr = run(name)
        assert np.array_equal(tr.values[:k_c8 + 1], whole.values[:k_c8 + 1])
        assert tr.column("gear")[-1] == gear_end


def test_dct_upshift_engages_the_clutches_alternately():
    """Seed 000 figs. 10-11: the two clutches take turns; each upshift ends on the new synchronous speed."""
    plant, tr = run("dct_upshift.toml")
    t = tr.time
    gear = tr.column("gear")
    steps = [int(g) for g, prev in zip(gear[1:], gear[:-1]) if g != prev and g != 0]
    assert steps == [1, 2, 3]
    stuck1, stuck2 = tr.column("stuck_c1"), tr.column("stuck_c2")
    assert not np.any((stuck1 == 1) & (stuck2 == 1))  # never a tie-up of both clutches
    for g, t0, t1 in ((1, 1.25, 1.95), (2, 2.45, 3.15), (3, 3.65, 4.0)):
        on = (t > t0) & (t < t1)
        assert np.all(gear[on] == g)
        np.testing.assert_allclose(tr.column("w_engine")[on], plant.total_ratio(g) * tr.column("w_out")[on],
                                   rtol=1e-12)
    # each gear was preselected and synchronised before its clutch closed
    sync = {(e["clutch"], round(e["time"], 2)) for e in tr.events if e["clutch"].startswith("S_")}
    assert ("S_even", 1.01) in sync and ("S_odd", 2.6) in sync
    assert tr.column("vehicle_speed")[-1] > 45.0


def test_chain_scenario_is_the_four_mass_benchmark():
    plant, tr = run("chain_4mass.toml")
    assert tr.time[-1] == pytest.approx(4.0)
    assert [round(e["time"], 2) for e in tr.events[:3]] == [0.80, 0.93, 0.97]
    v = np.column_stack([tr.column(f"v_{j}") for j in (1, 2, 3, 4)])
    assert np.ptp(v[-1]) == 0.0  # all four masses move together at the end


def test_a_request_path_that_starts_with_the_scenario_folder_names_the_file_inside_it(tmp_path):
    """``scenarios/powershift_single_swap.toml`` (a path from the project folder) is the file in the folder
    ``<project>/scenarios``; outside the folders, ``..`` and absolute paths are still refused."""
    from plant_models.config import ConfigError
    from server.offline.scenario import ScenarioFolders

    folders = ScenarioFolders.default()
    want = ROOT / "scenarios" / "powershift_single_swap.toml"
    assert folders.resolve("scenarios/powershift_single_swap.toml") == want
    assert folders.resolve("scenarios/powershift_single_swap") == want
    assert folders.resolve("powershift_single_swap") == want
    deep = tmp_path / "bench" / "scen"
    deep.mkdir(parents=True)
    (deep / "a.toml").write_text(want.read_text())
    nested = ScenarioFolders((deep,))
    assert nested.resolve("bench/scen/a.toml") == deep / "a.toml"  # trailing folders of the folder's path
    assert nested.resolve("scen/a") == deep / "a.toml"
    refused = {
        "scenarios/../configs/powershift.toml": "'..' is not accepted",
        str(want): "absolute paths are not accepted",
        "configs/powershift.toml": "no such scenario",  # in the project, not in a scenario folder
        "other/powershift_single_swap.toml": "no such scenario",  # a folder of another name
    }
    for path, why in refused.items():
        with pytest.raises(ConfigError) as ei:
            folders.resolve(path)
        assert why in str(ei.value), (path, str(ei.value))
    with pytest.raises(ConfigError) as ei:
        folders.resolve("scenarios/powershift_singel_swap.toml")
    msg = str(ei.value)
    assert "a path is taken relative to a scenario folder" in msg
    assert msg.endswith("did you mean 'powershift_single_swap'?"), msg


def test_the_listing_names_only_scenario_files_inside_the_folders(tmp_path):
    """list_scenarios offers what load_scenario would read: nothing reached through a link out of a folder."""
    import os

    from server.offline.scenario import ScenarioFolders

    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "secret.toml").write_text("[meta]\n")
    (outside / "deep" / "more.toml").write_text("[meta]\n")
    a, b = tmp_path / "a", tmp_path / "b"
    (a / "sub" / "subsub" / "too_deep").mkdir(parents=True)
    for rel in ("x.toml", "sub/y.toml", "sub/subsub/z.toml", "sub/subsub/too_deep/w.toml", ".hidden.toml",
                "notes.txt"):
        (a / rel).write_text("[meta]\n")
    os.symlink(outside / "secret.toml", a / "escape.toml")  # a file link out of the folder
    os.symlink(outside / "deep", a / "linked_dir")  # a folder link out of it
    os.symlink(a / "x.toml", a / "alias.toml")  # a link that stays inside: listed (load_scenario reads it)
    b.mkdir()
    (b / "x.toml").write_text("[meta]\n")  # shadowed by a/x.toml, which load_scenario reads
    (b / "v.toml").write_text("[meta]\n")
    folders = ScenarioFolders((a, b))
    entries, cut = folders.listing()
    assert not cut
    assert entries == [{"path": "alias.toml", "folder": "a"}, {"path": "x.toml", "folder": "a"},
                       {"path": "sub/y.toml", "folder": "a"}, {"path": "sub/subsub/z.toml", "folder": "a"},
                       {"path": "v.toml", "folder": "b"}]
    for e in entries:  # every name listed is one load_scenario resolves inside its folder
        real = os.path.realpath(folders.resolve(e["path"]))
        assert real.startswith(str(a) + os.sep) or real.startswith(str(b) + os.sep)
    assert folders.listing(max_entries=2) == (entries[:2], True)
