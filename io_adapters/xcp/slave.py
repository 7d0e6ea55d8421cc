"""The XCP slave: one command packet in, one response (or none) out; pure Python, run by the adapter's thread.

:meth:`Slave.handle` takes a CTO without its Ethernet header and returns
the response packet, ``None`` (no response: not connected, or a
DOWNLOAD_NEXT block that is not complete), or :data:`PENDING`: a
calibration change waits for the loop, which applies it between two ticks
through the server's parameter table (the same checks as ``set_params``);
the adapter then calls :meth:`Slave.calibration_done` for the response.

Rules that are choices of this server (docs/xcp.md):

* before CONNECT every command is ignored (no response), as the standard
  allows;
* a command shorter than its fields is answered ERR_CMD_SYNTAX; bytes after
  its fields are ignored;
* a read or write that starts in an area and runs past its end is
  ERR_OUT_OF_RANGE; an address in no area, ERR_ACCESS_DENIED; a write into
  the measurement area, the EPK or a text, ERR_WRITE_PROTECTED, and into the
  reference page too;
* a write of the working page while the plant runs on the reference page
  is ERR_ACCESS_DENIED (switch back first);
* USER_CMD 0x01 opens a calibration group, USER_CMD 0x02 applies it whole
  at one tick boundary, or refuses it whole (ERR_OUT_OF_RANGE) with nothing
  changed; a refused single write changes nothing either;
* while a change waits for the loop, every other command is ERR_CMD_BUSY.
"""

from __future__ import annotations

import struct
import zlib
from typing import Callable

import numpy as np

from . import codes as C
from .a2l import MAX_CTO, MAX_DAQ, MAX_ODT_ENTRY_SIZE, MAX_DTO
from .daq import Daq
from .memory import CAL_BASE, CAL_SEGMENT, EPK_BASE, MEAS_BASE, TEXT_BASE, TEXT_STRIDE, AddressMap

PENDING = object()
""":meth:`Slave.handle`'s answer when a calibration change waits for the loop."""

ID_TYPES = (0, 1, 4)  # GET_ID: ASCII text, the A2L's name without extension, the A2L to upload
EVENT_NAMES = 0x08  # text area of the event names (0xF800_0000, one per 0x100 bytes)
MAX_DOWNLOAD = MAX_CTO - 2
MAX_SHORT_DOWNLOAD = MAX_CTO - 8
MAX_BS = 255  # DOWNLOAD_NEXT packets in one block


class Slave:
    """One XCP slave over an :class:`~.memory.AddressMap`.

    Parameters
    ----------
    amap
        The address space.
    a2l_text
        What GET_ID type 4 uploads.
    row_bytes
        ``row_bytes()``: the measurement area, the float64 bytes of the
        newest state-ring row.
    newest_tick
        ``newest_tick()``: the tick of that row (GET_DAQ_CLOCK).
    """

    def __init__(self, amap: AddressMap, a2l_text: str, row_bytes: Callable[[], bytes],
                 newest_tick: Callable[[], int]):
        self.amap = amap
        self.row_bytes = row_bytes
        self.newest_tick = newest_tick
        self.daq = Daq(amap)
        self.reference = np.array([p.get() for p in amap.params], dtype=np.float64)
        self.texts = {TEXT_BASE + TEXT_STRIDE * 0: f"gearbox-hil {amap.kind} plant".encode(),
                      TEXT_BASE + TEXT_STRIDE * 1: f"gearbox_hil_{amap.kind}".encode(),
                      TEXT_BASE + TEXT_STRIDE * 4: a2l_text.encode("latin-1", "replace")}
        for e in amap.events:
            self.texts[TEXT_BASE + TEXT_STRIDE * EVENT_NAMES + 0x100 * e.number] = e.name.encode()
        self.connected = False
        self.errors: dict[str, int] = {}
        self._reset_session()
        self._handlers = {
            C.CONNECT: self._connect, C.DISCONNECT: self._disconnect, C.GET_STATUS: self._get_status,
            C.SYNCH: lambda p: self._err(C.ERR_CMD_SYNCH), C.GET_COMM_MODE_INFO: self._comm_mode_info,
            C.GET_ID: self._get_id, C.SET_MTA: self._set_mta, C.UPLOAD: self._upload,
            C.SHORT_UPLOAD: self._short_upload, C.BUILD_CHECKSUM: self._build_checksum,
            C.USER_CMD: self._user_cmd, C.DOWNLOAD: self._download, C.DOWNLOAD_NEXT: self._download_next,
            C.SHORT_DOWNLOAD: self._short_download, C.SET_CAL_PAGE: self._set_cal_page,
            C.GET_CAL_PAGE: self._get_cal_page, C.GET_PAG_PROCESSOR_INFO: self._pag_info,
            C.GET_SEGMENT_INFO: self._segment_info, C.GET_PAGE_INFO: self._page_info,
            C.COPY_CAL_PAGE: self._copy_cal_page, C.GET_DAQ_PROCESSOR_INFO: self._daq_info,
            C.GET_DAQ_RESOLUTION_INFO: self._daq_resolution, C.GET_DAQ_EVENT_INFO: self._event_info,
            C.FREE_DAQ: lambda p: self._ok_or(self.daq.free()), C.ALLOC_DAQ: self._alloc_daq,
            C.ALLOC_ODT: self._alloc_odt, C.ALLOC_ODT_ENTRY: self._alloc_odt_entry,
            C.SET_DAQ_PTR: self._set_daq_ptr, C.WRITE_DAQ: self._write_daq,
            C.WRITE_DAQ_MULTIPLE: self._write_daq_multiple, C.SET_DAQ_LIST_MODE: self._set_daq_list_mode,
            C.GET_DAQ_LIST_MODE: self._get_daq_list_mode, C.START_STOP_DAQ_LIST: self._start_stop_daq_list,
            C.START_STOP_SYNCH: self._start_stop_synch, C.GET_DAQ_CLOCK: self._daq_clock,
            C.TIME_CORRELATION_PROPERTIES: self._time_correlation, C.CLEAR_DAQ_LIST: self._clear_daq_list,
        }
        # minimum packet length of each command (its fields)
        self._min_len = {C.GET_ID: 2, C.SET_MTA: 8, C.UPLOAD: 2, C.SHORT_UPLOAD: 8, C.BUILD_CHECKSUM: 8,
                         C.USER_CMD: 2, C.DOWNLOAD: 2, C.DOWNLOAD_NEXT: 2, C.SHORT_DOWNLOAD: 8,
                         C.SET_CAL_PAGE: 4, C.GET_CAL_PAGE: 3, C.GET_SEGMENT_INFO: 5, C.GET_PAGE_INFO: 4,
                         C.COPY_CAL_PAGE: 5, C.GET_DAQ_EVENT_INFO: 4, C.ALLOC_DAQ: 4, C.ALLOC_ODT: 5,
                         C.ALLOC_ODT_ENTRY: 6, C.SET_DAQ_PTR: 6, C.WRITE_DAQ: 8, C.WRITE_DAQ_MULTIPLE: 2,
                         C.SET_DAQ_LIST_MODE: 8, C.GET_DAQ_LIST_MODE: 4, C.START_STOP_DAQ_LIST: 4,
                         C.START_STOP_SYNCH: 2, C.TIME_CORRELATION_PROPERTIES: 6, C.CLEAR_DAQ_LIST: 4}

    def _reset_session(self) -> None:
        self.mta = (0, 0)
        self.ecu_page = C.PAGE_WORKING
        self.xcp_page = C.PAGE_WORKING
        self.saved_working: np.ndarray | None = None  # the working page while the plant runs on the reference
        self.group: bytearray | None = None  # the working page of an open calibration group
        self.block: bytearray | None = None  # a DOWNLOAD block being received
        self.block_left = 0
        self.pending: dict | None = None  # {index: value} waiting for the loop
        self._on_done: Callable[[], None] | None = None
        self.daq.free()

    # ------------------------------------------------------------------ dispatch
    def handle(self, packet: bytes):
        """The response to ``packet`` (bytes), ``None`` (no response) or :data:`PENDING`."""
        if not packet:
            return None
        cmd = packet[0]
        if not self.connected and cmd != C.CONNECT:
            return None
        if self.pending is not None:
            return self._err(C.ERR_CMD_BUSY)
        handler = self._handlers.get(cmd)
        if handler is None:
            return self._err(C.ERR_CMD_UNKNOWN)
        if len(packet) < self._min_len.get(cmd, 1):
            return self._err(C.ERR_CMD_SYNTAX)
        if self.block is not None and cmd != C.DOWNLOAD_NEXT:
            self.block = None  # another command ends an unfinished block (its data is dropped)
        return handler(packet)

    def _err(self, code: int, *extra: int) -> bytes:
        name = C.ERROR_NAMES.get(code, hex(code))
        self.errors[name] = self.errors.get(name, 0) + 1
        return bytes((C.PID_ERR, code, *extra))

    def _ok_or(self, err: int, payload: bytes = b"") -> bytes:
        return self._err(err) if err else b"\xff" + payload

    # ------------------------------------------------------------------ session
    def _connect(self, p: bytes) -> bytes:
        if p[1:2] not in (b"", b"\x00"):
            return self._err(C.ERR_OUT_OF_RANGE)  # only the normal mode
        if not self.connected:
            self._reset_session()
        self.connected = True
        return struct.pack("<BBBBHBB", C.PID_RES, C.RESOURCE_CALPAG | C.RESOURCE_DAQ, C.COMM_MODE_OPTIONAL,
                           MAX_CTO, MAX_DTO, 1, 1)

    def _disconnect(self, p: bytes) -> bytes:
        self.drop()
        return b"\xff"

    def drop(self) -> None:
        """End the session (DISCONNECT, or the master's TCP connection closed): DAQ stops and is freed.

        A change that waits for the loop still completes; its answer goes nowhere.
        """
        self.connected = False
        self.daq.free()
        self.group = None
        self.block = None

    def _get_status(self, p: bytes) -> bytes:
        return bytes((C.PID_RES, C.SS_DAQ_RUNNING if self.daq.running else 0, 0, 0, 0, 0))

    def _comm_mode_info(self, p: bytes) -> bytes:
        return bytes((C.PID_RES, 0, C.MASTER_BLOCK_MODE, 0, MAX_BS, 0, 0, 0x10))

    def _get_id(self, p: bytes) -> bytes:
        kind = p[1]
        text = self.texts.get(TEXT_BASE + TEXT_STRIDE * kind) if kind in ID_TYPES else None
        if text is None:
            return struct.pack("<BBHI", C.PID_RES, 0, 0, 0)
        self.mta = (0, TEXT_BASE + TEXT_STRIDE * kind)
        return struct.pack("<BBHI", C.PID_RES, 0, 0, len(text))

    # ------------------------------------------------------------------ memory
    def _area(self, addr: int) -> tuple[int, int, bool] | None:
        """(base, size, writable) of the area holding ``addr``."""
        am = self.amap
        if MEAS_BASE <= addr < MEAS_BASE + am.meas_size:
            return MEAS_BASE, am.meas_size, False
        if EPK_BASE <= addr < EPK_BASE + len(am.epk_bytes):
            return EPK_BASE, len(am.epk_bytes), False
        if CAL_BASE <= addr < CAL_BASE + am.cal_size:
            return CAL_BASE, am.cal_size, True
        base = addr - (addr - TEXT_BASE) % 0x100 if addr >= TEXT_BASE + TEXT_STRIDE * EVENT_NAMES else \
            addr - (addr - TEXT_BASE) % TEXT_STRIDE if addr >= TEXT_BASE else -1
        text = self.texts.get(base)
        if text is not None and addr < base + len(text):
            return base, len(text), False
        return None

    def working_values(self) -> np.ndarray:
        """The working page as the plant runs it (or as saved while it runs on the reference)."""
        if self.saved_working is not None:
            return self.saved_working
        return np.array([p.get() for p in self.amap.params], dtype=np.float64)

    def _page_bytes(self, page: int) -> bytes:
        if page == C.PAGE_REFERENCE:
            return self.reference.tobytes()
        if self.group is not None:
            return bytes(self.group)
        return self.working_values().tobytes()

    def read(self, ext: int, addr: int, n: int) -> tuple[int, bytes]:
        """(0, bytes) or (error, b"")."""
        if ext != 0:
            return C.ERR_OUT_OF_RANGE, b""
        if n == 0:
            return 0, b""
        area = self._area(addr)
        if area is None:
            return C.ERR_ACCESS_DENIED, b""
        base, size, _ = area
        if addr + n > base + size:
            return C.ERR_OUT_OF_RANGE, b""
        off = addr - base
        if base == MEAS_BASE:
            data = self.row_bytes()
        elif base == EPK_BASE:
            data = self.amap.epk_bytes
        elif base == CAL_BASE:
            data = self._page_bytes(self.xcp_page)
        else:
            data = self.texts[base]
        return 0, bytes(data[off:off + n])

    def write(self, ext: int, addr: int, data: bytes):
        """0, an error code, or :data:`PENDING` (the change waits for the loop)."""
        if ext != 0:
            return C.ERR_OUT_OF_RANGE
        if not data:
            return 0
        area = self._area(addr)
        if area is None:
            return C.ERR_ACCESS_DENIED
        base, size, writable = area
        if addr + len(data) > base + size:
            return C.ERR_OUT_OF_RANGE
        if not writable or self.xcp_page == C.PAGE_REFERENCE:
            return C.ERR_WRITE_PROTECTED
        if self.ecu_page != C.PAGE_WORKING:
            return C.ERR_ACCESS_DENIED
        old = bytearray(self._page_bytes(C.PAGE_WORKING))
        new = bytearray(old)
        off = addr - base
        new[off:off + len(data)] = data
        changes, err = self._changes(old, new)
        if err:
            return err
        if self.group is not None:
            self.group = new
            return 0
        return self._submit(changes) if changes else 0

    def _changes(self, old: bytes, new: bytes) -> tuple[dict, int]:
        """{parameter index: new value} between two page images; ERR_OUT_OF_RANGE for a non-number or a bad flag."""
        a = np.frombuffer(bytes(old), dtype="<f8")
        b = np.frombuffer(bytes(new), dtype="<f8")
        out = {}
        for i in np.flatnonzero(a.view(np.uint64) != b.view(np.uint64)):
            v = float(b[i])
            if not np.isfinite(v) or (self.amap.params[i].kind == "bool" and v not in (0.0, 1.0)):
                return {}, C.ERR_OUT_OF_RANGE
            out[int(i)] = v
        return out, 0

    def _submit(self, changes: dict, on_done: Callable[[], None] | None = None):
        self.pending = changes
        self._on_done = on_done
        return PENDING

    def calibration_request(self) -> dict:
        """The waiting change as a ``set_params`` map (parameter name -> value)."""
        params = self.amap.params
        return {params[i].name: (v == 1.0 if params[i].kind == "bool" else v) for i, v in self.pending.items()}

    def calibration_done(self, ok: bool) -> bytes:
        """The response once the loop applied (``ok``) or refused the waiting change."""
        on_done = self._on_done
        self.pending = None
        self._on_done = None
        if not ok:
            return self._err(C.ERR_OUT_OF_RANGE)
        if on_done is not None:
            on_done()
        return b"\xff"

    def _mem_result(self, res, advance: int) -> object:
        a_ext, a_addr = self.mta
        if res is PENDING or res == 0:
            self.mta = (a_ext, (a_addr + advance) & 0xFFFF_FFFF)
        return res if res is PENDING else self._ok_or(res)

    def _set_mta(self, p: bytes) -> bytes:
        ext, addr = p[3], struct.unpack_from("<I", p, 4)[0]
        self.mta = (ext, addr)
        return b"\xff"

    def _upload(self, p: bytes) -> bytes:
        n = p[1]
        if not 1 <= n <= MAX_CTO - 1:
            return self._err(C.ERR_OUT_OF_RANGE)
        err, data = self.read(*self.mta, n)
        if err:
            return self._err(err)
        self.mta = (self.mta[0], (self.mta[1] + n) & 0xFFFF_FFFF)
        return b"\xff" + data

    def _short_upload(self, p: bytes) -> bytes:
        n, ext, addr = p[1], p[3], struct.unpack_from("<I", p, 4)[0]
        if not 1 <= n <= MAX_CTO - 1:
            return self._err(C.ERR_OUT_OF_RANGE)
        err, data = self.read(ext, addr, n)
        if err:
            return self._err(err)
        self.mta = (ext, (addr + n) & 0xFFFF_FFFF)
        return b"\xff" + data

    def _build_checksum(self, p: bytes) -> bytes:
        size = struct.unpack_from("<I", p, 4)[0]
        err, data = self.read(*self.mta, size)
        if err or size == 0:
            return self._err(err or C.ERR_OUT_OF_RANGE)
        self.mta = (self.mta[0], (self.mta[1] + size) & 0xFFFF_FFFF)
        return struct.pack("<BBHI", C.PID_RES, C.CHECKSUM_CRC_32, 0, zlib.crc32(data) & 0xFFFF_FFFF)

    def _download(self, p: bytes):
        n = p[1]
        if n == 0:
            return self._err(C.ERR_OUT_OF_RANGE)
        first = min(n, MAX_DOWNLOAD)
        if len(p) < 2 + first:
            return self._err(C.ERR_CMD_SYNTAX)
        if n > MAX_DOWNLOAD:  # master block mode: the rest follows in DOWNLOAD_NEXT packets
            if (n - first + MAX_DOWNLOAD - 1) // MAX_DOWNLOAD > MAX_BS:
                return self._err(C.ERR_OUT_OF_RANGE)
            self.block = bytearray(p[2:2 + first])
            self.block_left = n - first
            return None
        return self._mem_result(self.write(*self.mta, bytes(p[2:2 + n])), n)

    def _download_next(self, p: bytes):
        left = p[1]
        if self.block is None or left != self.block_left:
            expected = self.block_left if self.block is not None else 0
            self.block = None
            return self._err(C.ERR_SEQUENCE, expected)
        chunk = min(left, MAX_DOWNLOAD)
        if len(p) < 2 + chunk:
            self.block = None
            return self._err(C.ERR_CMD_SYNTAX)
        self.block += p[2:2 + chunk]
        self.block_left -= chunk
        if self.block_left:
            return None
        data, self.block = bytes(self.block), None
        return self._mem_result(self.write(*self.mta, data), len(data))

    def _short_download(self, p: bytes):
        n, ext, addr = p[1], p[3], struct.unpack_from("<I", p, 4)[0]
        if not 1 <= n <= MAX_SHORT_DOWNLOAD:
            return self._err(C.ERR_OUT_OF_RANGE)
        if len(p) < 8 + n:
            return self._err(C.ERR_CMD_SYNTAX)
        self.mta = (ext, addr)
        return self._mem_result(self.write(ext, addr, bytes(p[8:8 + n])), n)

    def _user_cmd(self, p: bytes):
        sub = p[1]
        if sub == C.USER_CAL_BEGIN:
            if self.group is not None:
                return self._err(C.ERR_SEQUENCE)
            if self.ecu_page != C.PAGE_WORKING:
                return self._err(C.ERR_ACCESS_DENIED)
            self.group = bytearray(self.working_values().tobytes())
            return b"\xff"
        if sub == C.USER_CAL_END:
            if self.group is None:
                return self._err(C.ERR_SEQUENCE)
            new, self.group = self.group, None
            changes, err = self._changes(self.working_values().tobytes(), new)
            if err:
                return self._err(err)
            return self._submit(changes) if changes else b"\xff"
        return self._err(C.ERR_OUT_OF_RANGE)

    # ------------------------------------------------------------------ pages
    def _segment_ok(self, seg: int) -> bool:
        return seg == CAL_SEGMENT and self.amap.cal_size > 0

    def _set_cal_page(self, p: bytes):
        mode, seg, page = p[1], p[2], p[3]
        if not mode & (C.CAL_MODE_ECU | C.CAL_MODE_XCP) or mode & ~(C.CAL_MODE_ECU | C.CAL_MODE_XCP | C.CAL_MODE_ALL):
            return self._err(C.ERR_MODE_NOT_VALID)
        if not mode & C.CAL_MODE_ALL and not self._segment_ok(seg):
            return self._err(C.ERR_SEGMENT_NOT_VALID)
        if page not in (C.PAGE_WORKING, C.PAGE_REFERENCE):
            return self._err(C.ERR_PAGE_NOT_VALID)
        if mode & C.CAL_MODE_ECU and page != self.ecu_page:
            if self.group is not None:
                return self._err(C.ERR_SEQUENCE)
            xcp = page if mode & C.CAL_MODE_XCP else self.xcp_page
            if page == C.PAGE_REFERENCE:
                working = self.working_values().copy()
                target = self.reference
            else:
                working = None
                target = self.saved_working

            def switched():
                self.ecu_page, self.xcp_page, self.saved_working = page, xcp, working

            changes = {i: float(v) for i, v in enumerate(target)}
            if not changes:
                switched()
                return b"\xff"
            return self._submit(changes, switched)
        if mode & C.CAL_MODE_XCP:
            self.xcp_page = page
        return b"\xff"

    def _get_cal_page(self, p: bytes) -> bytes:
        mode, seg = p[1], p[2]
        if mode not in (C.CAL_MODE_ECU, C.CAL_MODE_XCP):
            return self._err(C.ERR_MODE_NOT_VALID)
        if not self._segment_ok(seg):
            return self._err(C.ERR_SEGMENT_NOT_VALID)
        return bytes((C.PID_RES, 0, 0, self.ecu_page if mode == C.CAL_MODE_ECU else self.xcp_page))

    def _pag_info(self, p: bytes) -> bytes:
        return bytes((C.PID_RES, 1 if self.amap.cal_size else 0, 0))

    def _segment_info(self, p: bytes) -> bytes:
        mode, seg, info = p[1], p[2], p[3]
        if not self._segment_ok(seg):
            return self._err(C.ERR_SEGMENT_NOT_VALID)
        if mode == 0 and info in (0, 1):
            return struct.pack("<BBBBI", C.PID_RES, 0, 0, 0, CAL_BASE if info == 0 else self.amap.cal_size)
        if mode == 1:
            return bytes((C.PID_RES, 2, 0, 0, 0, 0))
        return self._err(C.ERR_OUT_OF_RANGE)

    def _page_info(self, p: bytes) -> bytes:
        seg, page = p[2], p[3]
        if not self._segment_ok(seg):
            return self._err(C.ERR_SEGMENT_NOT_VALID)
        if page not in (C.PAGE_WORKING, C.PAGE_REFERENCE):
            return self._err(C.ERR_PAGE_NOT_VALID)
        return bytes((C.PID_RES, 0x2F if page == C.PAGE_WORKING else 0x0F, 0))

    def _copy_cal_page(self, p: bytes):
        sseg, spage, dseg, dpage = p[1], p[2], p[3], p[4]
        if not self._segment_ok(sseg) or not self._segment_ok(dseg):
            return self._err(C.ERR_SEGMENT_NOT_VALID)
        if spage not in (0, 1) or dpage not in (0, 1):
            return self._err(C.ERR_PAGE_NOT_VALID)
        if spage == dpage:
            return b"\xff"
        if dpage == C.PAGE_REFERENCE:
            return self._err(C.ERR_WRITE_PROTECTED)
        if self.group is not None:
            return self._err(C.ERR_SEQUENCE)
        if self.saved_working is not None:  # the plant runs on the reference: the copy waits in the working page
            self.saved_working = self.reference.copy()
            return b"\xff"
        changes, _ = self._changes(self.working_values().tobytes(), self.reference.tobytes())
        return self._submit(changes) if changes else b"\xff"

    # ------------------------------------------------------------------ DAQ
    def _daq_info(self, p: bytes) -> bytes:
        props = C.DAQ_PROP_DYNAMIC | C.DAQ_PROP_PRESCALER | C.DAQ_PROP_TIMESTAMP | C.DAQ_PROP_OVERLOAD_MSB
        return struct.pack("<BBHHBB", C.PID_RES, props, MAX_DAQ, len(self.amap.events), 0, C.DAQ_KEY_BYTE)

    def _daq_resolution(self, p: bytes) -> bytes:
        ts_mode = C.TIMESTAMP_SIZE_DWORD | C.TIMESTAMP_FIXED | (C.TIMESTAMP_UNIT_1US << 4)
        return struct.pack("<BBBBBBH", C.PID_RES, 1, MAX_ODT_ENTRY_SIZE, 1, 0, ts_mode, 1)

    def _event_info(self, p: bytes) -> bytes:
        e = struct.unpack_from("<H", p, 2)[0]
        if e >= len(self.amap.events):
            return self._err(C.ERR_OUT_OF_RANGE)
        ev = self.amap.events[e]
        self.mta = (0, TEXT_BASE + TEXT_STRIDE * EVENT_NAMES + 0x100 * e)
        return bytes((C.PID_RES, C.EVENT_DAQ, 0xFF, len(ev.name), ev.cycle, ev.unit, 0))

    def _alloc_daq(self, p: bytes) -> bytes:
        if self.daq.running:
            return self._err(C.ERR_DAQ_ACTIVE)
        return self._ok_or(self.daq.alloc_daq(struct.unpack_from("<H", p, 2)[0]))

    def _alloc_odt(self, p: bytes) -> bytes:
        if self.daq.running:
            return self._err(C.ERR_DAQ_ACTIVE)
        return self._ok_or(self.daq.alloc_odt(struct.unpack_from("<H", p, 2)[0], p[4]))

    def _alloc_odt_entry(self, p: bytes) -> bytes:
        if self.daq.running:
            return self._err(C.ERR_DAQ_ACTIVE)
        return self._ok_or(self.daq.alloc_odt_entry(struct.unpack_from("<H", p, 2)[0], p[4], p[5]))

    def _set_daq_ptr(self, p: bytes) -> bytes:
        return self._ok_or(self.daq.set_ptr(struct.unpack_from("<H", p, 2)[0], p[4], p[5]))

    def _write_daq(self, p: bytes) -> bytes:
        return self._ok_or(self.daq.write(p[1], p[2], p[3], struct.unpack_from("<I", p, 4)[0]))

    def _write_daq_multiple(self, p: bytes) -> bytes:
        n = p[1]
        if n == 0 or 2 + 8 * n > MAX_CTO:
            return self._err(C.ERR_OUT_OF_RANGE)
        if len(p) < 2 + 8 * n:
            return self._err(C.ERR_CMD_SYNTAX)
        for i in range(n):
            bit, size, addr, ext = struct.unpack_from("<BBIB", p, 2 + 8 * i)
            err = self.daq.write(bit, size, ext, addr)
            if err:
                return self._err(err)
        return b"\xff"

    def _set_daq_list_mode(self, p: bytes) -> bytes:
        mode, daq, event, prescaler, priority = struct.unpack_from("<BHHBB", p, 1)
        return self._ok_or(self.daq.set_mode(mode, daq, event, prescaler, priority))

    def _get_daq_list_mode(self, p: bytes) -> bytes:
        err, d = self.daq.get_mode(struct.unpack_from("<H", p, 2)[0])
        if err:
            return self._err(err)
        mode = d.mode | (C.DAQ_MODE_SELECTED if d.selected else 0) | (C.DAQ_MODE_RUNNING if d.running else 0)
        return struct.pack("<BBHHBB", C.PID_RES, mode, 0, d.event, d.prescaler, d.priority)

    def _start_stop_daq_list(self, p: bytes) -> bytes:
        err, pid = self.daq.start_stop(p[1], struct.unpack_from("<H", p, 2)[0])
        return self._err(err) if err else bytes((C.PID_RES, pid))

    def _start_stop_synch(self, p: bytes) -> bytes:
        return self._ok_or(self.daq.synch(p[1]))

    def _clear_daq_list(self, p: bytes) -> bytes:
        daq = struct.unpack_from("<H", p, 2)[0]
        if daq >= len(self.daq.lists):
            return self._err(C.ERR_OUT_OF_RANGE)
        d = self.daq.lists[daq]
        if d.running:
            return self._err(C.ERR_DAQ_ACTIVE)
        for entries in d.odts:
            for e in entries:
                e[:] = [0, 0]
        return b"\xff"

    def _daq_clock(self, p: bytes) -> bytes:
        ts = (self.newest_tick() * self.amap.timestamp_us) & 0xFFFF_FFFF
        return struct.pack("<BBBBI", C.PID_RES, 0, 0, 0, ts)

    def _time_correlation(self, p: bytes) -> bytes:
        if p[1] != 0 or p[2] != 0:
            return self._err(C.ERR_OUT_OF_RANGE)  # no clock to configure: the DAQ clock is plant time
        return bytes((C.PID_RES, 0, 0, 0, 0, 0, 0, 0))


__all__ = ["Slave", "PENDING"]
