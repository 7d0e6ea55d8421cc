"""A plant's electrical channels: which plant port each pin carries, read from a channel map (``io_device_<kind>.toml``).

A channel map is to the device adapter what a CAN message set is to the CAN
adapter: the plant's ports mapped to what the TCU's connector carries.  Its
tables (docs/electrical.md, "The device adapter"):

* ``[[pulse]]``: a speed sensor on a shaft: ``name``, ``shaft`` (a plant
  output in rad/s), ``teeth``, ``gap`` (absent teeth of the wheel, 60-2:
  ``gap = 2``), ``scale`` (the sensed shaft's speed over the output: a
  gear between them, or -1 for a shaft the output counts backwards),
  ``phase_deg``, ``max_edges`` (edges one tick may carry);
* ``[[solenoid]]``: a pressure-control solenoid: ``name``, ``input`` (the
  plant input its current drives, A: a valve map's ``i_<clutch>``),
  ``resistance_20C_ohm``, ``inductance_H``, ``measure`` (``"duty"``: the
  coil current follows the measured PWM duty through the R-L model;
  ``"current"``: the measured mean current is the input);
* ``[ntc]``: the oil-temperature sensor: ``name``, ``r25_ohm``, ``beta_K``,
  ``temperature_C`` (the oil temperature; the plants have no thermal model
  yet) or ``temperature_output`` (a plant output in C);
* ``[range]``: the range selector's four contacts ``bits`` (bit 0 first)
  and the lever's ``position`` (the default table of
  :class:`plant_models.electrical.range_selector.RangeTable`);
* ``[supply]``: ``name`` of the analog channel showing KL30, and
  ``volts`` (the solenoids' supply and a short to battery's level).

Every channel gets a fault switch ``fs_<name>`` in series with its pin, so
any pin can be opened or shorted (the ``device`` fault target).  Parsing
reads no plant: :meth:`ChannelMap.resolve` checks the ports against one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from plant_models.config import ConfigReader, load_toml, resolve_config
from plant_models.electrical.ntc import beta_from_points
from plant_models.electrical.range_selector import RangeTable
from plant_models.errors import ConfigError

from .channels import AnalogOut, DeviceLayout, DigitalOut, FaultSwitch, PulseOut, PwmIn, ResistanceOut

# the sensor of the transmission: about 3500 ohm at 25 C and 250 ohm at 110 C
DEFAULT_BETA_K = beta_from_points(25.0, 3500.0, 110.0, 250.0)
MEASURES = ("duty", "current")


@dataclass(frozen=True)
class PulseMap:
    name: str
    shaft: str
    teeth: int
    gap: int
    scale: float
    phase_deg: float
    max_edges: int


@dataclass(frozen=True)
class SolenoidMap:
    name: str
    input: str
    resistance_20C_ohm: float
    inductance_H: float
    measure: str


@dataclass(frozen=True)
class NtcMap:
    name: str
    r25_ohm: float
    beta_K: float
    temperature_C: float
    temperature_output: str


@dataclass(frozen=True)
class ChannelMap:
    """The parsed map (module docstring); ``source`` names the file for messages."""

    source: str
    pulses: tuple[PulseMap, ...]
    solenoids: tuple[SolenoidMap, ...]
    ntc: NtcMap | None
    range_bits: tuple[str, ...]
    range_position: str
    supply_name: str
    supply_V: float
    range_table: RangeTable = RangeTable()

    def layout(self) -> DeviceLayout:
        """The device channels, and a fault switch ``fs_<name>`` on each."""
        chans: list = [PulseOut(p.name, max_edges=p.max_edges) for p in self.pulses]
        chans += [PwmIn(s.name) for s in self.solenoids]
        if self.ntc is not None:
            chans.append(ResistanceOut(self.ntc.name, min_ohm=10.0, max_ohm=1.0e6, safe_ohm=1.0e6))
        chans += [DigitalOut(b) for b in self.range_bits]
        if self.supply_name:
            chans.append(AnalogOut(self.supply_name, min_V=0.0, max_V=40.0, safe_V=0.0))
        chans += [FaultSwitch(f"fs_{ch.name}", ch.name) for ch in list(chans)]
        return DeviceLayout(tuple(chans))

    def pins(self) -> list[str]:
        """Every channel name (what a ``device`` fault's ``pin`` may name)."""
        return ([p.name for p in self.pulses] + [s.name for s in self.solenoids]
                + ([self.ntc.name] if self.ntc else []) + list(self.range_bits)
                + ([self.supply_name] if self.supply_name else []))

    def describe(self) -> list[dict]:
        """One entry per channel: name, kind, the plant port it carries and how (for ``describe`` and the workspace)."""
        out = [dict(name=p.name, kind="pulse_out", port=p.shaft, unit="rad/s",
                    detail=f"{p.teeth} teeth" + (f", gap {p.gap}" if p.gap else "")
                    + (f", x {p.scale:g}" if p.scale != 1.0 else "")) for p in self.pulses]
        out += [dict(name=s.name, kind="pwm_in", port=s.input, unit="A",
                     detail=f"{s.resistance_20C_ohm:g} ohm, {s.inductance_H * 1e3:g} mH, from the {s.measure}")
                for s in self.solenoids]
        if self.ntc is not None:
            n = self.ntc
            src = n.temperature_output or f"{n.temperature_C:g} C"
            out.append(dict(name=n.name, kind="resistance_out", port=n.temperature_output, unit="ohm",
                            detail=f"NTC {n.r25_ohm:g} ohm at 25 C, beta {n.beta_K:.0f} K, oil at {src}"))
        for k, b in enumerate(self.range_bits):
            out.append(dict(name=b, kind="digital_out", port="", unit="-",
                            detail=f"range code bit {k}, lever at {self.range_position}"))
        if self.supply_name:
            out.append(dict(name=self.supply_name, kind="analog_out", port="", unit="V",
                            detail=f"KL30 {self.supply_V:g} V"))
        return out

    def ports(self) -> tuple[set[str], set[str]]:
        """(plant inputs, plant outputs) the map names."""
        outs = {p.shaft for p in self.pulses}
        if self.ntc is not None and self.ntc.temperature_output:
            outs.add(self.ntc.temperature_output)
        return {s.input for s in self.solenoids}, outs


def _pulse(r: ConfigReader) -> PulseMap:
    teeth = r.integer("teeth", 60, lo=1, hi=1000)
    out = PulseMap(r.string("name"), r.string("shaft"), teeth, r.integer("gap", 0, lo=0, hi=teeth - 1),
                   r.number("scale", 1.0), r.number("phase_deg", 0.0, lo=-360.0, hi=360.0),
                   r.integer("max_edges", 32, lo=1, hi=255))
    if out.scale == 0.0:
        raise r.error("scale", "must not be 0")
    r.reject_unknown()
    return out


def _solenoid(r: ConfigReader) -> SolenoidMap:
    out = SolenoidMap(r.string("name"), r.string("input"), r.number("resistance_20C_ohm", 5.0, positive=True),
                      r.number("inductance_H", 0.025, positive=True), r.string("measure", "duty", MEASURES))
    r.reject_unknown()
    return out


def _tables(cfg: ConfigReader, key: str) -> list[ConfigReader]:
    raw = cfg.raw(key, [])
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        raise cfg.error(key, f"must be an array of tables ([[{key}]])")
    return [ConfigReader(t, cfg.source, f"{key}[{i}]") for i, t in enumerate(raw)]


def parse_channel_map(data: dict, source: str) -> ChannelMap:
    """A :class:`ChannelMap` from a parsed TOML table; raises ``ConfigError`` naming the key."""
    cfg = ConfigReader(data, source)
    pulses = tuple(_pulse(r) for r in _tables(cfg, "pulse"))
    solenoids = tuple(_solenoid(r) for r in _tables(cfg, "solenoid"))
    ntc = None
    if cfg.has("ntc"):
        n = cfg.sub("ntc")
        ntc = NtcMap(n.string("name", "ntc_oil"), n.number("r25_ohm", 3500.0, positive=True),
                     n.number("beta_K", DEFAULT_BETA_K, positive=True),
                     n.number("temperature_C", 80.0, lo=-60.0, hi=250.0), n.string("temperature_output", ""))
        n.reject_unknown()
    bits: tuple[str, ...] = ()
    position = ""
    table = RangeTable()
    if cfg.has("range"):
        rg = cfg.sub("range")
        raw_bits = rg.raw("bits")
        if not isinstance(raw_bits, list) or len(raw_bits) != 4 or not all(isinstance(b, str) for b in raw_bits):
            raise rg.error("bits", "must list the names of the 4 range-code contacts, bit 0 first")
        bits = tuple(raw_bits)
        position = rg.string("position", "D", table.positions)
        rg.reject_unknown()
    supply_name, supply_V = "", 13.5
    if cfg.has("supply"):
        sp = cfg.sub("supply")
        supply_name = sp.string("name", "kl30_sense")
        supply_V = sp.number("volts", 13.5, positive=True, hi=40.0)
        sp.reject_unknown()
    cfg.reject_unknown()
    out = ChannelMap(source, pulses, solenoids, ntc, bits, position, supply_name, supply_V, table)
    names = out.pins()
    for name in names:
        if names.count(name) > 1:
            raise ConfigError(source, name, "names two channels; give each channel its own name")
    if not names:
        raise ConfigError(source, "", "names no channel ([[pulse]], [[solenoid]], [ntc], [range], [supply])")
    return out


def channel_map_path(name: str) -> Path:
    """The channel map file of ``name`` (a path, or a file of ``configs/``)."""
    return resolve_config(name)


def load_channel_map(name: str) -> ChannelMap:
    """Read and parse a channel map (a path or a name in ``configs/``)."""
    path = channel_map_path(name)
    return parse_channel_map(load_toml(path), str(path))


__all__ = ["ChannelMap", "PulseMap", "SolenoidMap", "NtcMap", "parse_channel_map", "load_channel_map",
           "channel_map_path", "DEFAULT_BETA_K", "MEASURES"]
