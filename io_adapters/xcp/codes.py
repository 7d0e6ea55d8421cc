"""The numbers of the XCP standard (ASAM MCD-1 XCP 1.x) this server uses: command codes, error codes, bits.

Names follow the standard's own (``CONNECT``, ``ERR_OUT_OF_RANGE``), so a
reader can look each one up there.
"""

from __future__ import annotations

# -- packet identifiers (first byte of a slave -> master packet) ---------------------------------------------
PID_RES = 0xFF  # positive response
PID_ERR = 0xFE  # error
PID_EV = 0xFD  # event
PID_SERV = 0xFC  # service request

# -- commands (first byte of a master -> slave packet) -------------------------------------------------------
CONNECT = 0xFF
DISCONNECT = 0xFE
GET_STATUS = 0xFD
SYNCH = 0xFC
GET_COMM_MODE_INFO = 0xFB
GET_ID = 0xFA
SET_MTA = 0xF6
UPLOAD = 0xF5
SHORT_UPLOAD = 0xF4
BUILD_CHECKSUM = 0xF3
USER_CMD = 0xF1
DOWNLOAD = 0xF0
DOWNLOAD_NEXT = 0xEF
SHORT_DOWNLOAD = 0xED
SET_CAL_PAGE = 0xEB
GET_CAL_PAGE = 0xEA
GET_PAG_PROCESSOR_INFO = 0xE9
GET_SEGMENT_INFO = 0xE8
GET_PAGE_INFO = 0xE7
COPY_CAL_PAGE = 0xE4
CLEAR_DAQ_LIST = 0xE3
SET_DAQ_PTR = 0xE2
WRITE_DAQ = 0xE1
SET_DAQ_LIST_MODE = 0xE0
GET_DAQ_LIST_MODE = 0xDF
START_STOP_DAQ_LIST = 0xDE
START_STOP_SYNCH = 0xDD
GET_DAQ_CLOCK = 0xDC
GET_DAQ_PROCESSOR_INFO = 0xDA
GET_DAQ_RESOLUTION_INFO = 0xD9
GET_DAQ_EVENT_INFO = 0xD7
FREE_DAQ = 0xD6
ALLOC_DAQ = 0xD5
ALLOC_ODT = 0xD4
ALLOC_ODT_ENTRY = 0xD3
WRITE_DAQ_MULTIPLE = 0xC7
TIME_CORRELATION_PROPERTIES = 0xC6

# USER_CMD sub-commands: a group of calibration writes applied at one tick boundary, all or none
USER_CAL_BEGIN = 0x01
USER_CAL_END = 0x02

# -- error codes ---------------------------------------------------------------------------------------------
ERR_CMD_SYNCH = 0x00
ERR_CMD_BUSY = 0x10
ERR_DAQ_ACTIVE = 0x11
ERR_CMD_UNKNOWN = 0x20
ERR_CMD_SYNTAX = 0x21
ERR_OUT_OF_RANGE = 0x22
ERR_WRITE_PROTECTED = 0x23
ERR_ACCESS_DENIED = 0x24
ERR_PAGE_NOT_VALID = 0x26
ERR_MODE_NOT_VALID = 0x27
ERR_SEGMENT_NOT_VALID = 0x28
ERR_SEQUENCE = 0x29
ERR_DAQ_CONFIG = 0x2A
ERR_MEMORY_OVERFLOW = 0x30
ERR_GENERIC = 0x31

ERROR_NAMES = {v: k for k, v in dict(globals()).items() if k.startswith("ERR_")}
"""error code -> its name (for logs and the status)."""

# -- CONNECT response --------------------------------------------------------------------------------------
RESOURCE_CALPAG = 0x01
RESOURCE_DAQ = 0x04
COMM_MODE_OPTIONAL = 0x80  # GET_COMM_MODE_INFO is available; byte order Intel, byte granularity: bits 0-2 = 0
MASTER_BLOCK_MODE = 0x01  # COMM_MODE_OPTIONAL of GET_COMM_MODE_INFO

# -- session status bits (GET_STATUS) ------------------------------------------------------------------------
SS_DAQ_RUNNING = 0x40

# -- DAQ ----------------------------------------------------------------------------------------------------
DAQ_PROP_DYNAMIC = 0x01
DAQ_PROP_PRESCALER = 0x02
DAQ_PROP_TIMESTAMP = 0x10
DAQ_PROP_OVERLOAD_MSB = 0x40
# DAQ_KEY_BYTE: optimisation default, address extension free per ODT entry, identification absolute ODT number
DAQ_KEY_BYTE = 0x00
OVERLOAD_PID_BIT = 0x80  # set in the PID of the next DTO of an event that lost packets
DAQ_MODE_SELECTED = 0x01
DAQ_MODE_DIRECTION = 0x02  # STIM: not supported
DAQ_MODE_DTO_CTR = 0x08  # not supported
DAQ_MODE_TIMESTAMP = 0x10
DAQ_MODE_PID_OFF = 0x20  # not supported
DAQ_MODE_RUNNING = 0x40
TIMESTAMP_UNIT_1US = 3
TIMESTAMP_SIZE_DWORD = 4
TIMESTAMP_FIXED = 0x08
EVENT_DAQ = 0x04  # DAQ_EVENT_PROPERTIES: the event may carry DAQ lists
# EVENT_CHANNEL_TIME_UNIT: 10 ** unit ns
TIME_UNITS_NS = {0: 1, 1: 10, 2: 100, 3: 1_000, 4: 10_000, 5: 100_000, 6: 1_000_000, 7: 10_000_000,
                 8: 100_000_000, 9: 1_000_000_000}

# -- calibration pages --------------------------------------------------------------------------------------
PAGE_WORKING = 0
PAGE_REFERENCE = 1
CAL_MODE_ECU = 0x01
CAL_MODE_XCP = 0x02
CAL_MODE_ALL = 0x80

CHECKSUM_CRC_32 = 0x09  # XCP_CRC_32: zlib's CRC-32

__all__ = [k for k in dict(globals()) if k.isupper()]
