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
