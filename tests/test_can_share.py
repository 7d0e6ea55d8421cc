"""Cross-process virtual CAN without vcan: a server process and a TCU process close a shift.

``gearbox-hil serve`` runs the Powershift plant with the CAN adapter on a
virtual bus shared on loopback (python-can-remote, port chosen by the
kernel, reported in the ready file); the ECU emulator runs as a second
process on ``can.Bus(interface="remote")`` and closes a shift on the speeds
it receives.  Nothing but 127.0.0.1 is ever bound.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from can_support import ROOT
from io_adapters.can.share import LoopbackShare, ShareError, is_loopback
from server_support import ServerProcess

CAN_SHARED = """
[watchdog]
timeout_ms = 100.0

[[adapters]]
type = "can"
name = "can"
interface = "virtual"
channel = "gearbox-hil-share-test"
record = "{record}"
[adapters.share]
port = 0
"""


def test_share_binds_loopback_only():
    share = LoopbackShare("share-bind-test", port=0)
    try:
        host, port = share._server.socket.getsockname()
        assert host == "127.0.0.1" and port == share.port > 0
        assert share.url == f"ws://127.0.0.1:{share.port}/"
    finally:
        share.close()
    assert is_loopback("localhost") and is_loopback("127.0.0.2") and not is_loopback("0.0.0.0")
    with pytest.raises(ShareError, match=r"share host '0\.0\.0\.0' is not a loopback address; the bridge has no "
                                         r"authentication \(set allow_non_loopback = true to expose it anyway\)"):
        LoopbackShare("share-bind-test", host="0.0.0.0", port=0)


def test_share_serves_no_files():
    """python-can-remote's trace page would read any file (path traversal); the share answers 404."""
    import http.client

    share = LoopbackShare("share-files-test", port=0)
    try:
        for path in ("/", "/index.html", "/" + "../" * 20 + "etc/hostname"):
            c = http.client.HTTPConnection("127.0.0.1", share.port, timeout=10)
            c.request("GET", path)
            assert c.getresponse().status == 404, path
            c.close()
    finally:
        share.close()


def test_share_needs_a_virtual_interface():
    from io_adapters.can.adapter import CanAdapter
    from plant_models.config import ConfigError

    with pytest.raises(ConfigError, match=r"share: shares a virtual bus only \(interface is 'socketcan'"):
        CanAdapter("can", {"interface": "socketcan", "channel": "vcan0", "share": {"port": 0}})


def test_two_processes_close_a_shift_over_the_loopback_share(tmp_path):
    """... and the server's BLF recording, closed at its shutdown, holds every frame of both directions."""
    import can

    record = tmp_path / "can.blf"
    with ServerProcess(tmp_path, "powershift", extra=CAN_SHARED.format(record=record.as_posix())) as srv:
        url = srv.info["endpoints"]["can.share"]
        assert url.startswith("ws://127.0.0.1:")
        ecu = subprocess.run([sys.executable, str(ROOT / "examples" / "ecu_emulator.py"), "--interface", "remote",
                              "--channel", url, "--duration", "2.0", "--shift-at", "0.4", "--json"],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert ecu.returncode == 0, ecu.stdout + ecu.stderr
        r = json.loads(ecu.stdout.strip().splitlines()[-1])
        with srv.client() as c:
            st = c.status()
        final = srv.shutdown()
    # the TCU closed the shift on the speeds it received from the other process
    assert [p for _, p in r["phases"]] == ["hold", "torque", "inertia", "lock"]
    assert r["closed_at_s"] is not None
    assert r["gear_actual"] == 3 and r["stuck"] == {"1": 0, "2": 1, "3": 1, "4": 0, "5": 0, "6": 1, "7": 0, "8": 0}
    assert r["shaft2_rpm"] == pytest.approx(-r["engine_rpm"] / 2.0, abs=1.0)
    assert r["e2e_errors"] == 0 and r["frames_received"] > 0
    assert r["watchdog_state"] == 0 and r["commands_fresh"] == 1
    # the server's receive diagnostics as the TCU read them: no frame corrupted, out of sequence, too short,
    # unknown or out of range (a message's timeouts count gaps on the wall clock, which a loaded machine makes by
    # starving either process: not an error of the bus; the shift above closed, the watchdog is quiet)
    errors = {k: v for k, v in r["rx_diag"].items() if k != "Timeouts"}
    assert errors and all(v == 0 for v in errors.values()), r["rx_diag"]
    # the server accepted every command the TCU sent; the share put every one of them on the bus and relayed
    # to the TCU (its only client) every frame the TCU read, and more (those still queued when it stopped)
    can_status = next(a for a in st["adapters"].values() if a.get("type") == "can") \
        if isinstance(st.get("adapters"), dict) else next(a for a in st["adapters"] if a.get("type") == "can")
    assert can_status["rx"]["accepted"] == r["commands_sent"]
    assert can_status["rx"]["rejected_total"] == 0
    share = can_status["share"]
    assert share["from_clients"] == r["commands_sent"] and share["relay_errors"] == 0 and share["dropped"] == 0
    assert share["to_clients"] >= r["frames_received"]
    # the recording, written by the server and closed at its shutdown, holds every frame it sent and received
    end = final["adapters"]["can"]
    frames = list(can.BLFReader(str(record)))
    assert sum(1 for m in frames if m.is_rx) == end["rx"]["frames"] == r["commands_sent"]
    assert sum(1 for m in frames if not m.is_rx) == end["tx"]["frames"] > 100


def test_the_share_relays_the_local_virtual_bus(tmp_path, monkeypatch):
    """A python-can-remote client on a share of a vbus channel reaches a vbus member, both ways."""
    import tempfile

    import can

    from io_adapters.vbus import LocalBus

    monkeypatch.setenv("GEARBOX_VBUS_DIR", tempfile.mkdtemp(prefix="vb"))
    share = LoopbackShare("share-vbus", port=0, interface="vbus")
    member = LocalBus("share-vbus")
    client = can.Bus(interface="remote", channel=share.url)
    try:
        fd = can.Message(arbitration_id=0x18FEF100, is_extended_id=True, is_fd=True, data=bytes(range(12)))
        client.send(fd)
        got = member.recv(10.0)
        assert got is not None and got.arbitration_id == 0x18FEF100 and bytes(got.data) == bytes(range(12))
        assert got.is_fd and got.is_extended_id
        deadline = 50
        back = None
        while back is None and deadline:  # the share's member joins when its client connects
            member.send(can.Message(arbitration_id=0x123, is_extended_id=False, data=b"\x01\x02"))
            back = client.recv(0.2)
            deadline -= 1
        assert back is not None and back.arbitration_id == 0x123 and bytes(back.data) == b"\x01\x02"
    finally:
        client.shutdown()
        member.shutdown()
        share.close()


def test_the_share_counts_what_it_relays_each_way_and_how_late():
    """The share's own counters: frames relayed to and from its clients, the relay's delay, its queue."""
    import can

    share = LoopbackShare("share-meter", port=0)
    member = can.Bus(interface="virtual", channel="share-meter", receive_own_messages=False)
    client = can.Bus(interface="remote", channel=share.url)
    try:
        for i in range(5):
            client.send(can.Message(arbitration_id=0x100 + i, is_extended_id=False, data=bytes([i])))
        got = [member.recv(10.0) for _ in range(5)]
        assert [m.arbitration_id for m in got] == [0x100, 0x101, 0x102, 0x103, 0x104]
        for i in range(3):
            member.send(can.Message(arbitration_id=0x200 + i, is_extended_id=False, data=bytes([i])))
        back = [client.recv(10.0) for _ in range(3)]
        assert [m.arbitration_id for m in back] == [0x200, 0x201, 0x202]
        # the relay thread counts a frame after its websocket write, so the client may hold it a moment before
        from can_support import wait_until

        wait_until(lambda: share.status()["to_clients"] >= 3, what="the relay's count of the frames it wrote")
        st = share.status()
        assert (st["clients"], st["from_clients"], st["to_clients"], st["relay_errors"]) == (1, 5, 3, 0)
        assert st["delay_max_us"] >= st["delay_last_us"] > 0.0 and 0 <= st["late_1ms"] <= 3
        assert st["queued"] == 0  # the relay thread took every frame of the bus off the client's queue
    finally:
        client.shutdown()
        member.shutdown()
        share.close()


def test_frames_a_full_queue_refused_are_the_shares_dropped_count():
    """A member of the shared virtual bus that never reads: its full queue refuses the plant's frames, counted."""
    import can

    from can_support import Harness

    h = Harness("powershift", {"interface": "virtual", "channel": "share-drops", "share": {"port": 0}})
    stalled = can.Bus(interface="virtual", channel="share-drops", rx_queue_size=2)
    try:
        h.run(50)
        st = h.adapter.status()
        assert st["share"]["dropped"] == st["tx"]["errors"] > 0
        assert st["tx"]["frames"] == 2  # after the two frames its queue holds, every frame is refused (and counted)
        assert stalled.recv(0.0) is not None  # the two frames its queue holds are the first ones
    finally:
        stalled.shutdown()
        h.adapter.close()


def test_a_client_that_drops_its_connection_is_a_reset_not_a_relay_error():
    from io_adapters.can.share import RelayMeter, _metered_protocol

    class Base:
        def terminate(self, exc):
            self.closed_with = exc

    meter = RelayMeter()
    protocol = _metered_protocol(Base, meter)()
    protocol.terminate(ConnectionResetError(104, "Connection reset by peer"))
    protocol.terminate(BrokenPipeError(32, "Broken pipe"))
    assert (meter.counts()["client_resets"], meter.counts()["relay_errors"]) == (2, 0)
    protocol.terminate(ValueError("a malformed event"))
    assert (meter.counts()["client_resets"], meter.counts()["relay_errors"]) == (2, 1)
    assert isinstance(protocol.closed_with, ValueError)
