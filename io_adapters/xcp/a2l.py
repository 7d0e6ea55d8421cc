"""The A2L (ASAM MCD-2 MC) description of an :class:`~.memory.AddressMap`, generated at run time.

One MEASUREMENT per ring column (``time_s``, ``y.*``, ``u.*``), one
CHARACTERISTIC (VALUE) per tunable parameter, one COMPU_METHOD per unit
(identical conversions: the values are in the plant's declared units), one
RECORD_LAYOUT for a float64, MOD_PAR with the EPK and the one calibration
MEMORY_SEGMENT (XCP segment 0, pages 0 = working and 1 = reference), and
IF_DATA XCP with the protocol layer, the dynamic DAQ with its events and
timestamps, and the UDP and TCP transport layers.  Written without
``TYPEDEF_*`` and ``INSTANCE`` (ASAP2 1.71 constructs some tools refuse), and
with DAQ address extensions free per ODT entry.

The A2ML that describes IF_DATA XCP's grammar is not embedded; the blocks
follow the XCP 1.x A2ML that CANape and INCA ship (docs/xcp.md).
"""

from __future__ import annotations

from .memory import CAL_BASE, EPK_BASE, AddressMap, Value, a2l_name

MAX_CTO = 252  # command packets, bytes (without the 4-byte Ethernet header)
MAX_DTO = 1400  # data packets, bytes
MAX_ODT_ENTRY_SIZE = 248
MAX_DAQ = 16  # DAQ lists a master may allocate
MAX_ODT_TOTAL = 0x7B  # absolute ODT numbers (PIDs) below the overload bit
MAX_ODT_ENTRIES = 4096  # ODT entries over all lists
PROTOCOL_VERSION = 0x0104


def _q(text: str) -> str:
    """An A2L string literal (quotes and backslashes escaped, one line, at most 255 characters)."""
    text = " ".join(str(text).split())[:255]
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _num(v: float) -> str:
    return repr(float(v)) if abs(v) < 1e15 else f"{v:.6e}"


def _cm(unit: str) -> str:
    return "CM_" + (a2l_name(unit.replace("/", "_per_").replace(" ", "_")) if unit else "none")


def generate(amap: AddressMap, port: int, host: str = "127.0.0.1", udp: bool = True, tcp: bool = True) -> str:
    """The A2L text for ``amap``, served on ``host:port`` (UDP and/or TCP)."""
    out: list[str] = [
        "ASAP2_VERSION 1 71",
        f"/begin PROJECT gearbox_hil {_q('gearbox-hil plant server, XCP on Ethernet')}",
        f"  /begin HEADER {_q('generated at run time from the plant declaration')}",
        f"    VERSION {_q(amap.epk)}",
        "  /end HEADER",
        f"  /begin MODULE {a2l_name(amap.kind)} {_q(f'{amap.kind} plant')}",
    ]
    out += _if_data(amap, port, host, udp, tcp)
    out += [
        "    /begin MOD_COMMON \"\"",
        "      BYTE_ORDER MSB_LAST",
        "      ALIGNMENT_BYTE 1",
        "      ALIGNMENT_WORD 1",
        "      ALIGNMENT_LONG 1",
        "      ALIGNMENT_FLOAT32_IEEE 1",
        "      ALIGNMENT_FLOAT64_IEEE 1",
        "    /end MOD_COMMON",
        "    /begin MOD_PAR \"\"",
        f"      VERSION {_q(amap.epk)}",
        f"      ADDR_EPK 0x{EPK_BASE:08X}",
        f"      EPK {_q(amap.epk)}",
        f"      /begin MEMORY_SEGMENT calibration {_q('tunable parameters (working and reference page)')}",
        f"        DATA FLASH INTERN 0x{CAL_BASE:08X} {max(amap.cal_size, 8)} -1 -1 -1 -1 -1",
        "        /begin IF_DATA XCP",
        "          /begin SEGMENT 0 2 0 0 0",
        "            /begin CHECKSUM XCP_CRC_32 MAX_BLOCK_SIZE 0xFFFF EXTERNAL_FUNCTION \"\" /end CHECKSUM",
        "            /begin PAGE 0 ECU_ACCESS_DONT_CARE XCP_READ_ACCESS_DONT_CARE "
        "XCP_WRITE_ACCESS_WITH_ECU_ONLY 0 /end PAGE",
        "            /begin PAGE 1 ECU_ACCESS_DONT_CARE XCP_READ_ACCESS_DONT_CARE "
        "XCP_WRITE_ACCESS_NOT_ALLOWED 0 /end PAGE",
        "          /end SEGMENT",
        "        /end IF_DATA",
        "      /end MEMORY_SEGMENT",
        "    /end MOD_PAR",
        "    /begin RECORD_LAYOUT RL_FLOAT64 FNC_VALUES 1 FLOAT64_IEEE ROW_DIR DIRECT /end RECORD_LAYOUT",
    ]
    units = sorted({v.unit for v in (*amap.measurements, *amap.calibrations)})
    for u in units:
        out.append(f"    /begin COMPU_METHOD {_cm(u)} {_q(u or 'no unit')} IDENTICAL \"%.6\" {_q(u)} /end COMPU_METHOD")
    for v in amap.measurements:
        out += _measurement(v)
    for v in amap.calibrations:
        out += _characteristic(v)
    out.append(f"    /begin GROUP measurements {_q('plant signals')} ROOT")
    out.append("      /begin REF_MEASUREMENT " + " ".join(v.name for v in amap.measurements) + " /end REF_MEASUREMENT")
    out.append("    /end GROUP")
    if amap.calibrations:
        out.append(f"    /begin GROUP parameters {_q('tunable parameters')} ROOT")
        out.append("      /begin REF_CHARACTERISTIC " + " ".join(v.name for v in amap.calibrations)
                   + " /end REF_CHARACTERISTIC")
        out.append("    /end GROUP")
    out += ["  /end MODULE", "/end PROJECT", ""]
    return "\n".join(out)


def _measurement(v: Value) -> list[str]:
    return [f"    /begin MEASUREMENT {v.name} {_q(v.doc or v.name)}",
            f"      FLOAT64_IEEE {_cm(v.unit)} 0 0 {_num(v.lo)} {_num(v.hi)}",
            f"      ECU_ADDRESS 0x{v.address:08X}",
            f"      PHYS_UNIT {_q(v.unit)}",
            "    /end MEASUREMENT"]


def _characteristic(v: Value) -> list[str]:
    return [f"    /begin CHARACTERISTIC {v.name} {_q(v.doc or v.name)}",
            f"      VALUE 0x{v.address:08X} RL_FLOAT64 0 {_cm(v.unit)} {_num(v.lo)} {_num(v.hi)}",
            f"      PHYS_UNIT {_q(v.unit)}",
            "    /end CHARACTERISTIC"]


def _if_data(amap: AddressMap, port: int, host: str, udp: bool, tcp: bool) -> list[str]:
    out = ["    /begin IF_DATA XCP",
           f"      /begin PROTOCOL_LAYER 0x{PROTOCOL_VERSION:04X} 1000 2000 0 0 0 0 0 {MAX_CTO} {MAX_DTO} "
           "BYTE_ORDER_MSB_LAST ADDRESS_GRANULARITY_BYTE",
           "        OPTIONAL_CMD GET_COMM_MODE_INFO OPTIONAL_CMD GET_ID OPTIONAL_CMD SET_MTA OPTIONAL_CMD UPLOAD",
           "        OPTIONAL_CMD SHORT_UPLOAD OPTIONAL_CMD BUILD_CHECKSUM OPTIONAL_CMD USER_CMD",
           "        OPTIONAL_CMD DOWNLOAD OPTIONAL_CMD DOWNLOAD_NEXT OPTIONAL_CMD SHORT_DOWNLOAD",
           "        OPTIONAL_CMD SET_CAL_PAGE OPTIONAL_CMD GET_CAL_PAGE OPTIONAL_CMD GET_PAG_PROCESSOR_INFO",
           "        OPTIONAL_CMD GET_SEGMENT_INFO OPTIONAL_CMD GET_PAGE_INFO OPTIONAL_CMD COPY_CAL_PAGE",
           "        OPTIONAL_CMD CLEAR_DAQ_LIST OPTIONAL_CMD SET_DAQ_PTR OPTIONAL_CMD WRITE_DAQ",
           "        OPTIONAL_CMD SET_DAQ_LIST_MODE OPTIONAL_CMD GET_DAQ_LIST_MODE OPTIONAL_CMD START_STOP_DAQ_LIST",
           "        OPTIONAL_CMD START_STOP_SYNCH OPTIONAL_CMD GET_DAQ_CLOCK OPTIONAL_CMD GET_DAQ_PROCESSOR_INFO",
           "        OPTIONAL_CMD GET_DAQ_RESOLUTION_INFO OPTIONAL_CMD GET_DAQ_EVENT_INFO OPTIONAL_CMD FREE_DAQ",
           "        OPTIONAL_CMD ALLOC_DAQ OPTIONAL_CMD ALLOC_ODT OPTIONAL_CMD ALLOC_ODT_ENTRY",
           "        OPTIONAL_CMD WRITE_DAQ_MULTIPLE OPTIONAL_CMD TIME_CORRELATION_PROPERTIES",
           "        COMMUNICATION_MODE_SUPPORTED BLOCK MASTER 255 0",
           "      /end PROTOCOL_LAYER",
           f"      /begin DAQ DYNAMIC {MAX_DAQ} {len(amap.events)} 0 OPTIMISATION_TYPE_DEFAULT ADDRESS_EXTENSION_FREE "
           f"IDENTIFICATION_FIELD_TYPE_ABSOLUTE GRANULARITY_ODT_ENTRY_SIZE_DAQ_BYTE {MAX_ODT_ENTRY_SIZE} "
           "OVERLOAD_INDICATION_PID",
           "        PRESCALER_SUPPORTED",
           "        /begin TIMESTAMP_SUPPORTED 1 SIZE_DWORD UNIT_1US TIMESTAMP_FIXED /end TIMESTAMP_SUPPORTED"]
    for e in amap.events:
        out.append(f"        /begin EVENT {_q(e.name)} {_q(e.short)} {e.number} DAQ 255 {e.cycle} {e.unit} 0 "
                   "/end EVENT")
    out.append("      /end DAQ")
    for flag, block in ((udp, "XCP_ON_UDP_IP"), (tcp, "XCP_ON_TCP_IP")):
        if flag:
            out.append(f"      /begin {block} 0x0104 {int(port)} ADDRESS {_q(host)} /end {block}")
    out.append("    /end IF_DATA")
    return out


__all__ = ["generate", "MAX_CTO", "MAX_DTO", "MAX_ODT_ENTRY_SIZE", "MAX_DAQ", "MAX_ODT_TOTAL", "MAX_ODT_ENTRIES"]
