"""The ``gpiod`` backend: its option checks everywhere; its lines on the kernel's simulated GPIO chip
(gpio-sim, configured through configfs) where the kernel has one."""

import os
import uuid
from pathlib import Path

import pytest

pytest.importorskip("gpiod", reason="the gpiod package (libgpiod v2 bindings) is not installed")

from io_adapters.devices import (PIN_SHORT_BAT, PIN_SHORT_GND, DeviceError, DeviceLayout, DigitalIn, DigitalOut,
                                 FaultSwitch, PwmIn, create_device)

GPIO_SIM = Path("/sys/kernel/config/gpio-sim")


def _layout():
    return DeviceLayout((DigitalOut("range_bit0"), DigitalOut("range_bit1", safe_level=1), DigitalIn("relay"),
                         FaultSwitch("fs_bit0", "range_bit0")))


def test_option_errors_and_a_missing_chip():
    lines = {"range_bit0": 0, "range_bit1": 1, "relay": 2}
    with pytest.raises(DeviceError, match="give a 'chip' and a \\[lines\\] table"):
        create_device("gpiod", "io", _layout(), {"chip": "/dev/gpiochip0"})
    with pytest.raises(DeviceError, match="channel 'relay' has no line"):
        create_device("gpiod", "io", _layout(), {"chip": "x", "lines": {"range_bit0": 0, "range_bit1": 1}})
    with pytest.raises(DeviceError, match="two channels on one line"):
        create_device("gpiod", "io", _layout(), {"chip": "x", "lines": {**lines, "relay": 1}})
    with pytest.raises(DeviceError, match="'sol' is a pwm_in, not a GPIO line"):
        create_device("gpiod", "io", DeviceLayout((PwmIn("sol"),)), {"chip": "x", "lines": {"sol": 0}})
    dev = create_device("gpiod", "io", _layout(), {"chip": "/nonexistent/gpiochip99", "lines": lines})
    with pytest.raises(DeviceError, match="cannot request lines on /nonexistent/gpiochip99"):
        dev.open()


@pytest.fixture
def sim_chip():
    """A live gpio-sim chip of 8 lines: (its /dev path, its lines' sysfs directory)."""
    if not GPIO_SIM.is_dir():
        pytest.skip("this kernel has no gpio-sim (CONFIG_GPIO_SIM and configfs at /sys/kernel/config)")
    if os.geteuid() != 0:
        pytest.skip("configuring gpio-sim needs root")
    root = GPIO_SIM / f"gearbox-hil-{uuid.uuid4().hex[:8]}"
    root.mkdir()
    (root / "bank0").mkdir()
    (root / "bank0" / "num_lines").write_text("8")
    (root / "live").write_text("1")
    try:
        chip = (root / "bank0" / "chip_name").read_text().strip()
        dev_name = (root / "dev_name").read_text().strip()
        yield f"/dev/{chip}", Path("/sys/devices/platform") / dev_name / chip
    finally:
        (root / "live").write_text("0")
        (root / "bank0").rmdir()
        root.rmdir()


def test_lines_on_the_simulated_chip(sim_chip):
    chip, sysfs = sim_chip
    level = lambda line: int((sysfs / f"sim_gpio{line}" / "value").read_text())  # noqa: E731
    with create_device("gpiod", "io", _layout(), {"chip": chip,
                                                  "lines": {"range_bit0": 0, "range_bit1": 1, "relay": 2}}) as dev:
        assert (level(0), level(1)) == (0, 1)  # the safe levels
        t = dev.new_targets()
        t.digital[:] = [1, 0]
        dev.write_targets(0, t)
        assert (level(0), level(1)) == (1, 0)
        t.pin_fault[0] = PIN_SHORT_GND
        dev.write_targets(1, t)
        assert level(0) == 0
        t.pin_fault[0] = PIN_SHORT_BAT
        t.digital[0] = 0
        dev.write_targets(2, t)
        assert level(0) == 1
        (sysfs / "sim_gpio2" / "pull").write_text("pull-up")
        assert dev.read_measurements().digital[0] == 1
        (sysfs / "sim_gpio2" / "pull").write_text("pull-down")
        assert dev.read_measurements().digital[0] == 0


# -- inside a server: the device adapter with the gpiod backend carries the range code ----------------------------
RANGE_ONLY = """[range]
bits = ["range_a", "range_b", "range_c", "range_d"]
position = "D"
"""


def _io(tmp_path, chip):
    (tmp_path / "io_device_range.toml").write_text(RANGE_ONLY)
    io = tmp_path / "io_gpiod.toml"
    io.write_text(f"""[loop]
mode = "lockstep"
status_line = false
[[adapters]]
type = "device"
name = "device"
backend = "gpiod"
channels = "{tmp_path / 'io_device_range.toml'}"
[adapters.backend_options]
chip = "{chip}"
[adapters.backend_options.lines]
range_a = 0
range_b = 1
range_c = 2
range_d = 3
""")
    return io


def test_a_server_with_a_gpiod_device_on_a_missing_chip_says_which(tmp_path):
    from server.realtime.runtime import build

    srv = build("powershift_electrical", _io(tmp_path, "/nonexistent/gpiochip99"), mode="lockstep",
                status_line=False)
    with pytest.raises(DeviceError, match="cannot request lines on /nonexistent/gpiochip99"):
        srv.open()
    srv.close()


def test_a_lockstep_server_puts_the_range_code_on_the_simulated_chips_lines(sim_chip, tmp_path):
    """Not run where the kernel has no gpio-sim (the skip says so)."""
    from plant_models.electrical.range_selector import RangeTable
    from server.realtime.runtime import build

    chip, sysfs = sim_chip
    level = lambda line: int((sysfs / f"sim_gpio{line}" / "value").read_text())  # noqa: E731
    table = RangeTable()
    code = lambda pos: [(table.codes[table.index(pos)] >> k) & 1 for k in range(4)]  # noqa: E731
    srv = build("powershift_electrical", _io(tmp_path, chip), mode="lockstep", status_line=False)
    srv.open()
    try:
        assert srv.control.handle_now({"cmd": "start"})["ok"]
        assert srv.control.handle_now({"cmd": "step", "n": 2})["ok"]
        assert [level(k) for k in range(4)] == code("D")
        rep = srv.control.handle_now({"cmd": "adapter_set", "adapter": "device", "set": {"range_position": 4}})
        assert rep["ok"], rep
        assert srv.control.handle_now({"cmd": "step", "n": 400})["ok"]  # the lever's travel is 0.3 s
        assert [level(k) for k in range(4)] == code("3")
        rep = srv.control.handle_now({"cmd": "fault_set", "fault": {"target": "device", "kind": "short_bat",
                                                                      "pin": "range_a"}})
        assert rep["ok"], rep
        assert srv.control.handle_now({"cmd": "step", "n": 1})["ok"]
        assert level(0) == 1
    finally:
        srv.close()
