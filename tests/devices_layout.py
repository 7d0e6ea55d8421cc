"""A device layout shared by the device-layer tests: 3 tooth wheels, 8 solenoids, range code, NTC, supply."""

from io_adapters.devices import (AnalogIn, AnalogOut, DeviceLayout, DigitalIn, DigitalOut, FaultSwitch, PulseOut,
                                 PwmIn, ResistanceOut)


def bench_layout() -> DeviceLayout:
    channels = [PulseOut("n_in", max_edges=16), PulseOut("n_mid", max_edges=16), PulseOut("n_out", max_edges=16)]
    channels += [PwmIn(f"sol{i}") for i in range(8)]
    channels += [DigitalOut(f"range_bit{i}") for i in range(4)]
    channels += [ResistanceOut("ntc_oil", safe_ohm=3500.0), AnalogOut("kl30_sense", max_V=20.0, safe_V=0.0)]
    channels += [DigitalIn("relay"), AnalogIn("sensor_supply")]
    channels += [FaultSwitch("fs_n_in", "n_in"), FaultSwitch("fs_sol0", "sol0"), FaultSwitch("fs_ntc", "ntc_oil"),
                 FaultSwitch("fs_range0", "range_bit0"), FaultSwitch("fs_relay", "relay")]
    return DeviceLayout(tuple(channels))
