"""End-to-end protection for the other side of the bus (TCU emulators, tests, tools).

Plain Python with cantools, independent of the compiled codec the plant
server uses (:mod:`io_adapters.can.frames`), so the two check each other.
The protection is the one documented there: CRC-8 SAE J1850 (poly 0x1D,
init 0xFF, final XOR 0xFF) over the data ID (low byte, high byte) and the
payload without the checksum byte, plus an alive counter; for CAN FD sets
(``crc_variant = "autosar_p05"``) AUTOSAR E2E profile 5: CRC-16/CCITT-FALSE
over the payload without its two CRC bytes, then the data ID (low, high
byte), the CRC stored low byte first.

Example::

    db = cantools.database.load_file("configs/powershift.dbc")
    tx = E2EEncoder(db.get_message_by_name("TCU_ClutchCmdA"), "ClutchCmdA_CRC", "ClutchCmdA_Counter", 0x0100)
    frame = tx.encode({"PressureCmd_C1": 16.0, ...})   # counter advanced, CRC set
"""

from __future__ import annotations


def _table() -> list[int]:
    out = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1D) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
        out.append(crc)
    return out


_TABLE = _table()


CRC_VARIANTS = {"sae_j1850": (0xFF, 0xFF), "autosar_p01": (0x00, 0x00),  # (initial value, final XOR)
                "autosar_p05": (0xFFFF, 0x0000)}


def _table16() -> list[int]:
    out = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
        out.append(crc)
    return out


_TABLE16 = _table16()


def crc16_ccitt_false(data: bytes, init: int = 0xFFFF) -> int:
    """CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, no reflection, no final XOR; check 0x29B1)."""
    crc = init
    for b in data:
        crc = ((crc << 8) & 0xFFFF) ^ _TABLE16[(crc >> 8) ^ b]
    return crc


def e2e_p05_crc(data: bytes, data_id: int, crc_byte: int = 0) -> int:
    """AUTOSAR E2E profile 5 CRC: the payload without its two CRC bytes, then the data ID low and high byte."""
    body = bytes(data[:crc_byte]) + bytes(data[crc_byte + 2:])
    return crc16_ccitt_false(body + bytes((data_id & 0xFF, (data_id >> 8) & 0xFF)))


def crc8_sae_j1850(data: bytes, data_id: int | None = None, skip_byte: int | None = None, init: int = 0xFF,
                   xorout: int = 0xFF) -> int:
    """CRC-8 (poly 0x1D) of ``data`` (without ``skip_byte``), preceded by the 16-bit data ID if given.

    The defaults are CRC-8 SAE J1850; ``init = xorout = 0`` is what AUTOSAR E2E profile 1 computes.
    """
    crc = init
    prefix = b"" if data_id is None else bytes((data_id & 0xFF, (data_id >> 8) & 0xFF))
    for b in prefix:
        crc = _TABLE[crc ^ b]
    for i, b in enumerate(data):
        if i != skip_byte:
            crc = _TABLE[crc ^ b]
    return crc ^ xorout


def _byte_of(signal, bits: int = 8) -> int:
    if signal.length != bits or signal.start % 8 != (0 if signal.byte_order == "little_endian" else 7):
        raise ValueError(f"{signal.name} is not a whole-byte {bits}-bit checksum signal")
    return signal.start // 8


class E2EEncoder:
    """Encodes one DBC message with cantools and protects it (alive counter, then CRC)."""

    def __init__(self, message, crc_signal: str, counter_signal: str, data_id: int | None = None,
                 crc_variant: str = "sae_j1850"):
        self.message = message
        self.crc_init, self.crc_xor = CRC_VARIANTS[crc_variant]
        self.crc_bits = 16 if crc_variant == "autosar_p05" else 8
        self.crc_signal = crc_signal
        self.counter_signal = counter_signal
        self.data_id = message.frame_id & 0xFFFF if data_id is None else data_id
        cs = message.get_signal_by_name(counter_signal)
        self.modulus = int(cs.maximum if cs.maximum is not None else (1 << cs.length) - 1) + 1
        self.crc_byte = _byte_of(message.get_signal_by_name(crc_signal), self.crc_bits)
        self.counter = 0

    def encode(self, values: dict, counter: int | None = None, corrupt_crc: bool = False) -> bytes:
        """Payload with the next (or the given) alive counter and a correct (or deliberately wrong) CRC."""
        c = self.counter if counter is None else counter
        self.counter = (c + 1) % self.modulus
        full = dict(values)
        full[self.counter_signal] = c
        full[self.crc_signal] = 0
        data = bytearray(self.message.encode(full, scaling=True, strict=False))
        crc = _crc(self, bytes(data))
        if corrupt_crc:
            crc ^= 0x5A
        data[self.crc_byte] = crc & 0xFF
        if self.crc_bits == 16:
            data[self.crc_byte + 1] = crc >> 8
        return bytes(data)


class E2EDecoder:
    """Checks and decodes one protected DBC message (the receiving side of :class:`E2EEncoder`)."""

    def __init__(self, message, crc_signal: str, counter_signal: str, data_id: int | None = None,
                 crc_variant: str = "sae_j1850"):
        self.message = message
        self.crc_init, self.crc_xor = CRC_VARIANTS[crc_variant]
        self.crc_bits = 16 if crc_variant == "autosar_p05" else 8
        self.crc_signal = crc_signal
        self.counter_signal = counter_signal
        self.data_id = message.frame_id & 0xFFFF if data_id is None else data_id
        self.crc_byte = _byte_of(message.get_signal_by_name(crc_signal), self.crc_bits)
        cs = message.get_signal_by_name(counter_signal)
        self.modulus = int(cs.maximum if cs.maximum is not None else (1 << cs.length) - 1) + 1
        self.last: int | None = None
        self.crc_errors = 0
        self.counter_errors = 0

    def decode(self, data: bytes) -> dict | None:
        """Decoded signals, or None if the CRC is wrong or the counter did not advance by 1."""
        crc = _crc(self, bytes(data))
        got = data[self.crc_byte] if self.crc_bits == 8 else data[self.crc_byte] | (data[self.crc_byte + 1] << 8)
        if crc != got:
            self.crc_errors += 1
            return None
        values = self.message.decode(bytes(data), decode_choices=False)
        c = int(values[self.counter_signal])
        ok = self.last is None or (c - self.last) % self.modulus == 1
        self.last = c
        if not ok:
            self.counter_errors += 1
            return None
        return values


def _crc(coder, data: bytes) -> int:
    """The checksum an encoder or decoder's message needs (CRC-8 variants, or profile 5's CRC-16)."""
    if coder.crc_bits == 16:
        return e2e_p05_crc(data, coder.data_id, coder.crc_byte)
    return crc8_sae_j1850(data, coder.data_id, coder.crc_byte, coder.crc_init, coder.crc_xor)
