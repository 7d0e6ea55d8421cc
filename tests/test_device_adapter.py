"""The device adapter: chosen in the I/O config, its compiled tick against the electrical closed forms, pin faults
through the fault set, the channels in ``describe`` and the status."""

import math

import numpy as np
import pytest

from io_adapters.base import LoopContext, create_adapter
from io_adapters.devices.channel_map import DEFAULT_BETA_K, parse_channel_map
from plant_models.config import repo_root
from plant_models.electrical.ntc import beta_resistance_ohm
from plant_models.electrical.solenoid import coil_resistance_ohm
from plant_models.electrical.tooth_wheel import advance_angle, wheel_edges
from plant_models.errors import ConfigError, FaultError
from plant_models.registry import load_plant
from server.realtime.faults import FaultSet, fault_catalogue

DT = 1e-3
PLANT = "powershift_electrical"
INITIAL = {"engine_torque": 300.0, "load_torque": 3500.0, "i_c1": 0.84, "i_c3": 0.84, "i_c6": 0.84}


def _ctx():
    return LoopContext(period_s=DT, feed_watchdog=lambda ns: None, status=dict, mode="lockstep")


def _open(options=None, plant=None):
    plant = plant or load_plant(PLANT)
    plant.reset(dict(INITIAL))
    ad = create_adapter("device", "device", dict({"backend": "sim"}, **(options or {})))
    ad.open(plant, _ctx())
    return plant, ad


def _tick(plant, ad, k):
    ad.read(k, k * 1_000_000)
    plant.step(DT)
    ad.write(k + 1, k * 1_000_000)


@pytest.fixture(scope="module")
def opened():
    plant, ad = _open()
    yield plant, ad
    ad.close()


def test_options_and_channel_map_errors_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match="backend: must be one of 'gpiod', 'mcu', 'sim', 'visa', got 'fpga'"):
        create_adapter("device", "d", {"backend": "fpga"})
    with pytest.raises(ConfigError, match="unknown key"):
        create_adapter("device", "d", {"chanels": "x.toml"})
    with pytest.raises(ConfigError, match=r"solenoid\[0\].measure: must be one of 'duty', 'current'"):
        parse_channel_map({"solenoid": [{"name": "s", "input": "i_c1", "measure": "voltage"}]}, "m.toml")
    with pytest.raises(ConfigError, match="m.toml: a: names two channels"):
        parse_channel_map({"pulse": [{"name": "a", "shaft": "w_1"}], "solenoid": [{"name": "a", "input": "i"}]},
                          "m.toml")
    with pytest.raises(ConfigError, match=r"range.bits: must list the names of the 4"):
        parse_channel_map({"range": {"bits": ["a", "b"]}}, "m.toml")
    # the plain Powershift takes pressures: its solenoid inputs do not exist, and the message says what is missing
    ad = create_adapter("device", "d", {"channels": "io_device_powershift.toml"})
    with pytest.raises(ConfigError, match="has no input 'i_c1' .*valve map"):
        ad.open(load_plant("powershift"), _ctx())


def test_edges_equal_the_wheel_closed_form_and_levels_their_models(opened):
    plant, ad = _open()
    dev = ad.device
    k_w1 = plant.output_index("w_1")
    theta, w_prev = 0.0, float(plant.y[k_w1])
    t_s, tooth, direction = np.zeros(64), np.zeros(64, np.int64), np.zeros(64, np.int64)
    present = np.ones(60, np.int64)
    total = 0
    for k in range(300):
        _tick(plant, ad, k)
        w1 = float(plant.y[k_w1])
        n = wheel_edges(theta, w_prev, w1, DT, 60, 0.0, present, False, t_s, tooth, direction)
        expect = np.array([int(round(x * 1e9)) for x in t_s[:n]], dtype=np.int64)
        assert np.array_equal(dev.tcu_edges(0), expect), k
        theta, w_prev = advance_angle(theta, w_prev, w1, DT), w1
        total += n
    assert total > 200  # about 120 rad/s: 1.1 edges a tick
    # the NTC at the map's 80 C by the beta model; lever in D (code 0b1001); KL30
    assert dev.tcu_resistance_ohm(0) == beta_resistance_ohm(80.0, 3500.0, DEFAULT_BETA_K)
    assert 400.0 < dev.tcu_resistance_ohm(0) < 700.0
    assert [dev.tcu_digital(i) for i in range(4)] == [1, 0, 0, 1]
    assert dev.tcu_analog_V(0) == 13.5
    ad.close()


def test_the_lever_passes_through_its_transition_code(opened):
    plant, ad = _open()
    dev = ad.device
    codes = []
    ad.set_values(ad.check_values({"range_position": 2}))  # D (3) -> N (2)
    for k in range(400):
        _tick(plant, ad, k)
        codes.append(sum(dev.tcu_digital(i) << i for i in range(4)))
    seen = [c for i, c in enumerate(codes) if i == 0 or c != codes[i - 1]]
    assert seen == [0b1001, 0b0001, 0b0011]  # D, the N-D transition, N (the default table)
    assert ad.status()["range_position"] == "N"
    with pytest.raises(ValueError, match="range_position = 9: must be an integer in 0 .. 6"):
        ad.check_values({"range_position": 9})
    ad.close()


def test_duty_gives_the_rl_mean_current_and_current_mode_is_bit_identical_to_the_input(tmp_path):
    plant, ad = _open()
    dev, k_in = ad.device, plant.input_index("i_c2")
    r = coil_resistance_ohm(5.0, 80.0)
    tau = 0.025 / r
    i = 0.0
    for k, duty in enumerate([0.0] * 5 + [0.3] * 40 + [0.8] * 40):
        dev.tcu_drive_pwm(1, duty, 0.0)
        ad.read(k, k * 1_000_000)
        i_inf = duty * 13.5 / r
        mean = i_inf + (i - i_inf) * tau / DT * (1.0 - math.exp(-DT / tau))
        i = i_inf + (i - i_inf) * math.exp(-DT / tau)
        assert plant.u[k_in] == pytest.approx(min(mean, 1.1), rel=1e-12, abs=1e-15), k
        plant.step(DT)
        ad.write(k + 1, 0)
    ad.close()
    # "current": the TCU's measured current is the input, and the plant runs as if it had been set directly
    text = (repo_root() / "configs" / "io_device_powershift.toml").read_text().replace('name = "sol_c2"\ninput = "i_c2"',
                                                              'name = "sol_c2"\ninput = "i_c2"\nmeasure = "current"')
    m = tmp_path / "io_device_current.toml"
    m.write_text(text)
    plant, ad = _open({"channels": str(m)})
    direct = load_plant(PLANT)
    direct.reset(dict(INITIAL))
    currents = np.linspace(0.0, 1.0, 50)
    for k, amps in enumerate(currents):
        ad.device.tcu_drive_pwm(1, 0.5, float(amps))
        for s in (0, 2, 5):
            ad.device.tcu_drive_pwm(s, 0.84 * coil_resistance_ohm(5.0, 80.0) / 13.5, 0.0)
        _tick(plant, ad, k)
        direct.u[:] = plant.u  # the other coils through the R-L model: copied; i_c2 set as a client would
        direct.set_input("i_c2", float(amps))
        direct.step(DT)
        assert np.array_equal(direct.y, plant.y) and plant.u[k_in] == amps
    ad.close()


def test_pin_faults_through_the_fault_set(opened):
    plant, ad = _open()
    faults = FaultSet(plant, adapters=[ad])
    assert fault_catalogue()["device"] == ["open", "short_gnd", "short_bat", "signal_loss", "missing_tooth"]
    with pytest.raises(FaultError, match="no pin 'sol_c9'; the pins are n_in, n_mid, n_out, sol_c1"):
        faults.set({"target": "device", "kind": "open", "pin": "sol_c9"})
    with pytest.raises(FaultError, match="signal_loss is a speed sensor's fault; 'ntc_oil' is not one"):
        faults.set({"target": "device", "kind": "signal_loss", "pin": "ntc_oil"})
    with pytest.raises(FaultError, match="'tooth' must be 0 .. 17 on n_out"):
        faults.set({"target": "device", "kind": "missing_tooth", "pin": "n_out", "tooth": 18})
    with pytest.raises(FaultError, match="needs 'pin'"):
        faults.set({"target": "device", "kind": "open"})
    dev = ad.device
    k_c1 = plant.input_index("i_c1")
    spec = faults.set({"target": "device", "kind": "open", "pin": "sol_c1"})
    assert spec.name == "device:sol_c1:open"
    faults.set({"target": "device", "kind": "short_bat", "pin": "range_a"})
    faults.set({"target": "device", "kind": "open", "pin": "ntc_oil"})
    faults.set({"target": "device", "kind": "signal_loss", "pin": "n_in"})
    for s in (0, 2, 5):
        dev.tcu_drive_pwm(s, 0.84 * coil_resistance_ohm(5.0, 80.0) / 13.5, 0.84)
    for k in range(20):
        _tick(plant, ad, k)
        # the pins change at the write that carries the switches; the measured inputs from the next tick on
        assert (plant.u[k_c1] == 0.0) == (k > 0) and len(dev.tcu_edges(0)) == 0
    assert dev.tcu_digital(0) == 1 and dev.tcu_resistance_ohm(0) == math.inf
    assert ad.status()["pin_faults"] == {"sol_c1": "open", "ntc_oil": "open", "range_a": "short_bat"}
    faults.clear()
    assert ad.status()["pin_faults"] == {}
    for k in range(20, 60):
        _tick(plant, ad, k)
    assert plant.u[k_c1] > 0.8 and dev.tcu_digital(0) == 1 and dev.tcu_resistance_ohm(0) < 1000.0
    ad.close()


def test_a_missing_tooth_removes_exactly_its_edges(opened):
    runs = []
    for fault in (None, {"target": "device", "kind": "missing_tooth", "pin": "n_in", "tooth": 7}):
        plant, ad = _open()
        if fault:
            FaultSet(plant, adapters=[ad]).set(fault)
        edges = []
        for k in range(400):
            _tick(plant, ad, k)
            edges += [(k, int(e)) for e in ad.device.tcu_edges(0)]
        runs.append(edges)
        ad.close()
    full, faulted = runs
    removed = sorted(set(full) - set(faulted))
    assert set(faulted) <= set(full) and len(full) - len(faulted) == len(removed)
    # tooth 7 of 60 passes once a turn: the removed edges are one in every 60, starting with the 8th
    assert removed == [full[j] for j in range(7, len(full), 60)]


def test_describe_and_status_show_the_channels(capsys):
    from server.cli import describe

    describe.run(type("A", (), {"config": PLANT, "json": False})())
    text = capsys.readouterr().out
    assert "device channels (configs/io_device_powershift.toml" in text
    assert "n_in" in text and "pulse_out" in text and "sol_c1" in text and "i_c1" in text
    describe.run(type("A", (), {"config": PLANT, "json": True})())
    import json

    d = json.loads(capsys.readouterr().out)
    assert [c["name"] for c in d["device_channels"]][:4] == ["n_in", "n_mid", "n_out", "sol_c1"]
    # the plain Powershift takes pressures: no channel map fits it, and describe says nothing about one
    describe.run(type("A", (), {"config": "powershift", "json": False})())
    assert "device channels" not in capsys.readouterr().out


def test_the_fused_sim_equals_the_sim_driven_as_a_real_backend_bit_for_bit():
    """The stage applies the sim device's pin table itself (fuse = true); through the device's own write_targets and
    read_measurements (fuse = false) the pins, the measurements and the plant are the same, faults and all."""
    runs = []
    for fuse in (True, False):
        plant, ad = _open({"fuse": fuse})
        faults = FaultSet(plant, adapters=[ad])
        dev = ad.device
        seen = []
        for k in range(120):
            if k == 30:
                faults.set({"target": "device", "kind": "short_gnd", "pin": "sol_c3"})
                faults.set({"target": "device", "kind": "short_bat", "pin": "n_mid"})
                faults.set({"target": "device", "kind": "short_gnd", "pin": "ntc_oil"})
                faults.set({"target": "device", "kind": "open", "pin": "kl30_sense"})
            if k == 60:
                faults.set({"target": "device", "kind": "short_bat", "pin": "sol_c1"})
                faults.set({"target": "device", "kind": "short_bat", "pin": "kl30_sense"})
            if k == 90:
                faults.clear()
            for s in range(8):
                dev.tcu_drive_pwm(s, 0.1 * s + 0.001 * k, 0.05 * s)
            _tick(plant, ad, k)
            m = dev.measurements
            seen.append((plant.y.copy(), plant.u.copy(), [dev.tcu_edges(w).copy() for w in range(3)],
                         [dev.tcu_pulse_level(w) for w in range(3)], dev.tcu_resistance_ohm(0),
                         [dev.tcu_digital(i) for i in range(4)], dev.tcu_analog_V(0), m.duty.copy(),
                         m.current_A.copy(), m.edges_out.copy()))
        runs.append(seen)
        ad.close()
    for k, (a, b) in enumerate(zip(*runs)):
        for x, y in zip(a, b):
            if isinstance(x, list):
                assert all(np.array_equal(p, q) for p, q in zip(x, y)), k
            else:
                assert np.array_equal(x, y), k
    assert runs[0][40][3] == [-1, 1, -1] and runs[0][40][4] == 0.0 and runs[0][70][6] == 13.5


def test_the_adapter_drives_the_mcu_backend_through_its_emulator():
    """A real backend through the adapter's generic path: the mcu host on a pseudo-terminal, the emulator (the
    firmware's side in Python) on the other end.  Safe until the device answers; then the emulated pins show the
    adapter's targets, its TCU's PWM sets the solenoid input, and a pin fault travels down the wire."""
    import os
    import time
    import tty

    from io_adapters.devices.mcu import McuEmulator

    master, slave = os.openpty()
    tty.setraw(slave)
    plant = load_plant(PLANT)
    plant.reset(dict(INITIAL))
    ad = create_adapter("device", "device", {"backend": "mcu", "channels": "io_device_powershift.toml",
                                             "backend_options": {"fd": master, "stall_ticks": 50}})
    ad.open(plant, _ctx())
    emu = McuEmulator(slave, ad.layout).start()
    faults = FaultSet(plant, adapters=[ad])
    k_c2 = plant.input_index("i_c2")
    try:
        emu.sim.tcu_drive_pwm(1, 0.5, 0.0)
        driven = []
        for k in range(40):
            if k == 20:
                faults.set({"target": "device", "kind": "open", "pin": "ntc_oil"})
            before = ad.device.counters["frames_in"]
            driven.append(ad._read_internal(k, 0, True))
            plant.step(DT)
            ad.write(k + 1, 0)
            deadline = time.monotonic() + 60.0  # a bound for a broken emulator, not a timing check
            while ad.device.counters["frames_in"] == before and time.monotonic() < deadline:
                time.sleep(0.001)
        # safe for the first frames (the plant's inputs untouched), then driven by the measured duty; clutch 1's
        # coil gets no duty from this TCU: its current decays from 0.84 A at tau = L / R (about 4 ms)
        assert driven[0] == 0 and driven[-1] == 1 and 0.0 < plant.u[plant.input_index("i_c1")] < 1e-3
        assert 0.3 < plant.u[k_c2] <= 1.1
        assert [emu.sim.tcu_digital(i) for i in range(4)] == [1, 0, 0, 1]
        assert emu.sim.tcu_resistance_ohm(0) == math.inf  # the pin fault, down the wire
        assert emu.sim.tcu_analog_V(0) == 13.5 and ad.device.counters["crc_errors"] == 0
        st = ad.status()
        assert st["backend"] == "mcu" and st["device"]["safe"] is False and st["pin_faults"] == {"ntc_oil": "open"}
    finally:
        ad.close()
        emu.stop()
        os.close(master)
        os.close(slave)
