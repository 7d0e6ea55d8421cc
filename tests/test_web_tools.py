"""The workspace's server side of its tools: paths from the I/O config's folder, capture files, parameter sets.

No browser here (tests/test_web_browser_tools.py drives the page): the web
adapter's path options as the I/O config resolves them, a capture written
as Parquet and MF4 read back bit for bit, and the parameter-set routes in a
real aiohttp server (names checked, nothing read outside their folder).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from io_adapters.web.capture import Capture

pytest.importorskip("aiohttp")


def _config(folder, body: str):
    io = folder / "io_web.toml"
    io.write_text(body)
    return io


@pytest.mark.parametrize("table", ["[web]\n", '[[adapters]]\ntype = "web"\nname = "page"\n'])
def test_the_web_adapters_folders_and_token_file_are_from_the_io_configs_folder(tmp_path, monkeypatch, table):
    from server.realtime.runtime import create_adapters, load_io_config

    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "token.txt").write_text("a-token-of-at-least-16-chars\n")
    io = _config(conf, table + 'port = 0\ntoken_file = "token.txt"\nlayouts = "layouts"\n'
                 'parameter_sets = "sets/bench"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the working directory is not where the config's relative paths point
    web = next(a for a in create_adapters(load_io_config(io)) if a.type_name == "web")
    assert web.token == "a-token-of-at-least-16-chars"
    assert web.layouts == str((conf / "layouts").resolve())
    assert web.parameter_sets == str((conf / "sets" / "bench").resolve())


def test_absolute_paths_stay_and_a_missing_token_file_names_the_config_key(tmp_path, monkeypatch):
    from plant_models.config import ConfigError
    from server.realtime.runtime import create_adapters, load_io_config

    io = _config(tmp_path, f'[web]\nport = 0\nlayouts = "{tmp_path / "abs"}"\n')
    monkeypatch.chdir("/")
    web = next(a for a in create_adapters(load_io_config(io)) if a.type_name == "web")
    assert web.layouts == str((tmp_path / "abs").resolve())
    io = _config(tmp_path, '[web]\nport = 0\ntoken_file = "nope.txt"\n')
    with pytest.raises(ConfigError, match=r"web\.token_file.*cannot read ") as err:
        create_adapters(load_io_config(io))
    assert str(tmp_path / "nope.txt") in str(err.value)  # where it looked: beside the config


def _capture() -> Capture:
    rng = np.random.default_rng(7)
    ticks = np.arange(251, 402, dtype=np.int64)
    values = rng.standard_normal((len(ticks), 3)) * np.array([1e3, 1e-9, 7.0])
    values[5, 1] = np.nextafter(1.0, 2.0)  # a value whose shortest text is long
    return Capture(["w_out", "slip_c1", "engine_torque"], ticks, ticks * 1e-3, values, 301,
                   {"signal": "w_out", "condition": "rising", "level": 0.1, "pre_s": 0.05, "post_s": 0.1,
                    "mode": "single"})


UNITS = {"w_out": "rad/s", "slip_c1": "rad/s", "engine_torque": "N m"}


def test_a_capture_as_parquet_reads_back_bit_for_bit_with_its_trigger_and_units():
    import io

    pq = pytest.importorskip("pyarrow.parquet")
    from io_adapters.web.exports import capture_file

    cap = _capture()
    table = pq.read_table(io.BytesIO(capture_file(cap, "parquet", UNITS)))
    assert table.column_names == ["tick", "t", "w_out", "slip_c1", "engine_torque"]
    assert table.column("tick").to_numpy().tolist() == cap.ticks.tolist()
    assert np.array_equal(table.column("t").to_numpy(), cap.t)
    for k, n in enumerate(cap.names):
        assert np.array_equal(table.column(n).to_numpy(), cap.values[:, k])  # bit for bit (no NaN here)
    meta = table.schema.metadata
    assert json.loads(meta[b"gearbox_hil.trigger"])["tick"] == 301
    assert json.loads(meta[b"gearbox_hil.units"]) == UNITS


def test_a_capture_as_mf4_reads_back_bit_for_bit_with_units():
    import io

    pytest.importorskip("asammdf")
    from asammdf import MDF

    from io_adapters.web.exports import capture_file

    cap = _capture()
    with MDF(io.BytesIO(capture_file(cap, "mf4", UNITS))) as mdf:
        tick = mdf.get("tick")
        assert tick.samples.tolist() == cap.ticks.tolist()
        assert np.array_equal(tick.timestamps, cap.t)
        for k, n in enumerate(cap.names):
            sig = mdf.get(n)
            assert np.array_equal(sig.samples, cap.values[:, k]) and sig.unit == UNITS[n]


def test_a_missing_package_is_a_clear_export_error(monkeypatch):
    import builtins

    from io_adapters.web.exports import ExportError, capture_file

    real = builtins.__import__

    def no_asammdf(name, *a, **kw):
        if name.startswith("asammdf"):
            raise ImportError("no asammdf")
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_asammdf)
    with pytest.raises(ExportError, match=r"needs asammdf .*gearbox-hil\[record\]"):
        capture_file(_capture(), "mf4", UNITS)


def test_parameter_sets_are_saved_listed_and_loaded_inside_their_folder_only(tmp_path):
    import asyncio

    from aiohttp.test_utils import TestClient, TestServer
    from aiohttp import web

    from io_adapters.web.guard import parse_json
    from io_adapters.web.layouts import Layouts

    folder = tmp_path / "sets"
    (tmp_path / "secret.json").write_text('{"params": {"x": 1}}')
    store = Layouts(str(folder), 4096, parse_json, kind="parameter set", route="/api/paramsets",
                    option="parameter_sets")
    none = Layouts(None, 4096, parse_json, kind="parameter set", route="/api/paramsets", option="parameter_sets")

    async def run():
        app = web.Application()
        store.add_routes(app.router)
        async with TestClient(TestServer(app)) as c:
            r = await c.post("/api/paramsets/gear%201", data=json.dumps({"version": 1, "params": {"k_oil": 0.5}}))
            assert r.status == 200
            listed = await (await c.get("/api/paramsets")).json()
            assert listed["layouts"] == ["gear 1"] and listed["last"] == "gear 1"
            got = await (await c.get("/api/paramsets/gear%201")).json()
            assert got["layout"] == {"version": 1, "params": {"k_oil": 0.5}}
            (folder / "link.json").symlink_to(tmp_path / "secret.json")
            r = await c.get("/api/paramsets/link")
            assert r.status == 404 and "parameter set" in (await r.json())["error"]["message"]
            assert (await c.get("/api/paramsets/..%2Fsecret")).status in (400, 404)
            assert (await c.post("/api/paramsets/x", data=b"[1]")).status == 400
            assert (await c.post("/api/paramsets/x", data=b"{" * 5000)).status in (400, 413)
        app = web.Application()
        none.add_routes(app.router)
        async with TestClient(TestServer(app)) as c:
            r = await c.get("/api/paramsets/a")
            assert r.status == 404 and "parameter_sets" in (await r.json())["error"]["message"]

    asyncio.run(run())
    assert sorted(p.name for p in folder.iterdir()) == [".last", "gear 1.json", "link.json"]


def test_the_history_keeps_the_newest_rows_since_the_last_reset_across_its_wrap():
    from io_adapters.web.archive import History

    h = History(seconds=0.05, row_period_s=0.01, n_floats=3, t_col=0)  # 6 rows
    assert h.capacity == 6

    def rows(ticks):
        ticks = np.asarray(ticks, np.int64)
        return ticks, np.column_stack([ticks * 1e-3, ticks * 2.0, -ticks * 1.0])

    h.add(*rows([10, 20, 30, 40]))
    h.add(*rows([50, 60, 70, 80]))  # wraps: the two oldest go
    ticks, t, v = h.last(1.0, [1, 2], 1)
    assert ticks.tolist() == [30, 40, 50, 60, 70, 80] and t.tolist() == [k * 1e-3 for k in ticks]
    assert v[:, 0].tolist() == [k * 2.0 for k in ticks] and v[:, 1].tolist() == [-k * 1.0 for k in ticks]
    assert h.last(0.0205, [1], 1)[0].tolist() == [60, 70, 80]  # the last 20.5 ms of run time
    assert h.last(1.0, [1], 20)[0].tolist() == [40, 60, 80]  # the page's own step
    h.add(*rows([10, 20]))  # a reset: the ticks start again
    assert h.last(1.0, [1], 1)[0].tolist() == [10, 20]
    h.add(*rows(range(30, 200, 10)))  # more rows at once than it holds
    assert h.last(1.0, [1], 1)[0].tolist() == [140, 150, 160, 170, 180, 190]
    empty = History(0.0, 0.01, 3, 0)
    assert empty.capacity == 0
    empty.add(*rows([10]))
