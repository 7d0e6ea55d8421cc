"""The device layer's channel types, backend table and the in-process ``sim`` backend."""

import math

import numpy as np
import pytest

from devices_layout import bench_layout
from io_adapters.devices import (PIN_OPEN, PIN_SHORT_BAT, PIN_SHORT_GND, PULSE_FREQUENCY, DeviceError, DeviceLayout,
                                 DigitalOut, FaultSwitch, PulseOut, UnknownDeviceType, create_device, device_types)
from plant_models.electrical.tooth_wheel import wheel_edges, wheel_teeth
from plant_models.errors import ConfigError

DT_S = 1e-3


def _wheel_ticks(n_ticks, rpm0, rpm1, teeth=60):
    """Edge times (integer ns from each tick's start) of a wheel accelerating from rpm0 to rpm1."""
    present = wheel_teeth(teeth)
    t_s, tooth, direction = np.zeros(64), np.zeros(64, np.int64), np.zeros(64, np.int64)
    theta, ticks = 0.0, []
    for k in range(n_ticks):
        w0 = (rpm0 + (rpm1 - rpm0) * k / n_ticks) * math.pi / 30
        w1 = (rpm0 + (rpm1 - rpm0) * (k + 1) / n_ticks) * math.pi / 30
        n = wheel_edges(theta, w0, w1, DT_S, teeth, 0.0, present, False, t_s, tooth, direction)
        ticks.append(np.round(t_s[:n] * 1e9).astype(np.int64))
        theta += (w0 + w1) / 2 * DT_S
    return ticks


def test_backend_table_and_layout_errors():
    assert device_types() == ["gpiod", "mcu", "sim", "visa"]
    with pytest.raises(UnknownDeviceType, match="unknown device type 'fpga'; known types: gpiod, mcu, sim, visa"):
        create_device("fpga", "d", bench_layout())
    with pytest.raises(ConfigError, match="declared twice"):
        DeviceLayout((DigitalOut("a"), DigitalOut("a")))
    with pytest.raises(ConfigError, match="device layout: f: no channel 'x' to switch"):
        DeviceLayout((DigitalOut("a"), FaultSwitch("f", "x")))
    with pytest.raises(ConfigError, match="max_edges must be 1..255"):
        DeviceLayout((PulseOut("w", max_edges=300),))
    layout = bench_layout()
    assert layout.index("sol3", "pwm_in") == 3
    with pytest.raises(ConfigError, match="'sol3' is a pwm_in, not a pulse_out"):
        layout.index("sol3", "pulse_out")
    with pytest.raises(DeviceError, match="give a serial 'port'"):
        create_device("mcu", "d", layout, {})


def test_sim_edges_are_bit_exact_and_the_tcu_drives_pwm():
    layout = bench_layout()
    ticks = _wheel_ticks(50, 2000.0, 2600.0)
    with create_device("sim", "bench", layout) as dev:
        targets = dev.new_targets()
        seen = []
        for k, edges in enumerate(ticks):
            targets.edge_ns[0, : len(edges)] = edges
            targets.edge_count[0] = len(edges)
            dev.write_targets(k, targets)
            seen.append(dev.tcu_edges(0).copy())
            dev.tcu_drive_pwm(2, 0.25 + k * 0.01, 0.1 * k)
            m = dev.read_measurements()
            assert m.duty[2] == 0.25 + k * 0.01 and m.current_A[2] == 0.1 * k
            assert m.edges_out[0] == len(edges) and m.tick == k + 1
        assert all(np.array_equal(a, b) for a, b in zip(seen, ticks))
        # 2000..2600 rpm, 60 teeth, 50 ms: the count of edges is the angle turned in teeth
        assert sum(len(e) for e in ticks) == int(2300.0 / 60 * 0.05 * 60)
        assert dev.status()["ticks"] == 50


def test_sim_pin_faults_follow_the_table():
    layout = bench_layout()
    dev = create_device("sim", "bench", layout, {"supply_V": 12.0})
    dev.open()
    t = dev.new_targets()
    t.edge_ns[0, :3] = [100, 200, 300]
    t.edge_count[0] = 3
    t.resistance_ohm[0] = 2500.0
    t.digital[0] = 1
    fs = {name: layout.index(name, "fault_switch") for name in ("fs_n_in", "fs_sol0", "fs_ntc", "fs_range0",
                                                              "fs_relay")}
    dev.tcu_drive_pwm(0, 0.4, 0.6)
    dev.tcu_drive_digital(0, 1)
    dev.write_targets(0, t)
    assert list(dev.tcu_edges(0)) == [100, 200, 300] and dev.tcu_pulse_level(0) == -1
    assert dev.tcu_resistance_ohm(0) == 2500.0 and dev.tcu_digital(0) == 1
    m = dev.read_measurements()
    assert (m.duty[0], m.current_A[0], m.digital[0]) == (0.4, 0.6, 1)

    t.pin_fault[:] = PIN_OPEN
    dev.write_targets(1, t)
    m = dev.read_measurements()
    assert len(dev.tcu_edges(0)) == 0 and dev.tcu_pulse_level(0) == 0 and m.edges_out[0] == 0
    assert dev.tcu_resistance_ohm(0) == math.inf and dev.tcu_digital(0) == 0
    assert (m.duty[0], m.current_A[0], m.digital[0]) == (0.4, 0.0, 0)

    t.pin_fault[:] = PIN_SHORT_GND
    dev.write_targets(2, t)
    m = dev.read_measurements()
    assert dev.tcu_pulse_level(0) == 0 and dev.tcu_resistance_ohm(0) == 0.0 and dev.tcu_digital(0) == 0
    assert (m.duty[0], m.current_A[0], m.digital[0]) == (0.0, 0.0, 0)

    t.pin_fault[:] = PIN_SHORT_BAT
    t.pin_fault[fs["fs_relay"]] = PIN_SHORT_GND
    dev.write_targets(3, t)
    m = dev.read_measurements()
    assert len(dev.tcu_edges(0)) == 0 and dev.tcu_pulse_level(0) == 1 and dev.tcu_digital(0) == 1
    assert (m.duty[0], m.current_A[0], m.digital[0]) == (1.0, 0.6, 0)
    # channels without a switch are untouched, and clearing the faults restores everything
    assert dev.tcu_digital(1) == 0 and m.duty[1] == 0.0
    t.pin_fault[:] = 0
    dev.write_targets(4, t)
    m = dev.read_measurements()
    assert list(dev.tcu_edges(0)) == [100, 200, 300] and (m.duty[0], m.current_A[0], m.digital[0]) == (0.4, 0.6, 1)
    dev.close()
    assert len(dev.tcu_edges(0)) == 0 and dev.tcu_resistance_ohm(0) == 3500.0


def test_sim_frequency_mode_and_clipping():
    layout = bench_layout()
    with create_device("sim", "bench", layout) as dev:
        t = dev.new_targets()
        t.pulse_mode[1] = PULSE_FREQUENCY
        t.frequency_Hz[1] = 3000.0
        t.edge_count[2] = 40  # more than the channel's 16
        dev.write_targets(0, t)
        assert dev.tcu_frequency_Hz(1) == 3000.0 and len(dev.tcu_edges(1)) == 0
        assert len(dev.tcu_edges(2)) == 16 and dev.status()["edges_clipped"] == 24
