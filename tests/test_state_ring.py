"""The state ring and the command rows: what the tick writes is what every consumer reads, losses are counted.

Exact checks on small rings: row contents bit for bit, sequence numbers,
independent cursors, a slow consumer's lost rows counted exactly (also under
decimation), torn rows of a reader in another process dropped, and the
command rows applied in order with their ack, dropped while a scenario
drives the inputs, never overfilled.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from io_adapters.base import TI_OVERRUNS, TI_SCENARIO, TI_STATUS, TI_WATCHDOG, new_tick_info
from io_adapters.handover import CommandRows
from plant_models.run.ring import (F_TIME, I_AUX, I_OVERRUNS, I_SCENARIO, I_SEQ, I_STATUS, I_TICK, I_WALL_NS, I_WATCHDOG,
                              StateRing, ring_check, ring_take)

from server_support import ROOT

N_OUT, N_IN, Y_OFF, U_OFF = 3, 2, 7, 2  # a df of 10 floats: inputs at 2..3, outputs at 7..9


def make_ring(capacity: int = 8, shared: bool = False) -> StateRing:
    return StateRing(N_OUT, N_IN, Y_OFF, U_OFF, capacity, ("a", "b", "c"), ("u0", "u1"), shared=shared)


def push(ring: StateRing, tick: int, df: np.ndarray | None = None, ti: np.ndarray | None = None) -> np.ndarray:
    """Push a row whose values are derived from ``tick``; returns the df it was pushed from."""
    if df is None:
        df = np.arange(10, dtype=float) + 1000.0 * tick
    if ti is None:
        ti = new_tick_info()
        ti[TI_STATUS] = tick % 5
    ring.push(ti, df, tick, 10_000 * tick, 1e-3 * tick)
    return df


def test_a_row_holds_exactly_the_tick_the_time_the_flags_the_aux_values_the_outputs_and_inputs():
    ring = make_ring()
    k = ring.claim_aux("zmq.ack")
    assert ring.claim_aux("zmq.ack") == k  # claiming again returns the same column
    ring.aux[k] = -2  # uint64 2**64 - 2 as int64 bits
    ti = new_tick_info()
    ti[TI_WATCHDOG], ti[TI_STATUS], ti[TI_SCENARIO], ti[TI_OVERRUNS] = 1, 16, 1, 7
    df = np.array([9.0, 9.0, 0.25, -3.5, 9.0, 9.0, 9.0, 104.2, -0.0, 5e-324])
    cur = ring.cursor()
    ring.push(ti, df, 42, 123_456_789, 0.042)
    assert cur.take() == 1
    row, f = cur.ints[0], cur.floats[0]
    assert (row[I_SEQ], row[I_TICK], row[I_WALL_NS]) == (1, 42, 123_456_789)
    assert (row[I_WATCHDOG], row[I_STATUS], row[I_SCENARIO], row[I_OVERRUNS]) == (1, 16, 1, 7)
    assert row[I_AUX + k] == -2
    assert f[F_TIME] == 0.042
    assert np.array_equal(f[ring.f_y:ring.f_y + N_OUT].view(np.int64), df[Y_OFF:].view(np.int64))  # bit for bit
    assert np.array_equal(f[ring.f_u:ring.f_u + N_IN], df[U_OFF:U_OFF + N_IN])
    assert cur.take() == 0 and cur.lost == 0 and ring.written == 1


def test_every_consumer_reads_at_its_own_pace_and_a_slow_one_counts_exactly_what_it_lost():
    ring = make_ring(capacity=8)
    fast, slow = ring.cursor(batch=4), ring.cursor(batch=64)
    seen = []
    for tick in range(1, 31):
        push(ring, tick)
        n = fast.take()
        seen += [int(fast.ints[j, I_TICK]) for j in range(n)]
    assert seen == list(range(1, 31)) and fast.lost == 0
    n = slow.take()
    # one slot stays free for the writer, so 7 of the 8 rows are readable: ticks 24..30; 1..23 were lost
    assert n == 7 and [int(slow.ints[j, I_TICK]) for j in range(n)] == list(range(24, 31))
    assert slow.lost == 23 and slow.selected == 30 and slow.read == 7
    # sequence numbers of the kept rows: selected - n + j + 1, the same as their row numbers here
    assert [slow.selected - n + j + 1 for j in range(n)] == [int(slow.ints[j, I_SEQ]) for j in range(n)]
    # values came through intact
    assert slow.floats[0, F_TIME] == pytest.approx(0.024) and slow.floats[0, ring.f_y] == 24_007.0


def test_a_decimated_consumer_takes_every_nth_tick_and_counts_its_losses_in_its_own_rows():
    ring = make_ring(capacity=8)
    cur = ring.cursor(every=3)
    for tick in range(1, 7):
        push(ring, tick)
    n = cur.take()
    assert [int(cur.ints[j, I_TICK]) for j in range(n)] == [3, 6] and cur.selected == 2
    for tick in range(7, 41):  # the consumer sleeps: ticks 7..33 are overwritten, 34..40 remain
        push(ring, tick)
    n = cur.take()
    assert [int(cur.ints[j, I_TICK]) for j in range(n)] == [36, 39]
    assert cur.lost == 9  # 9, 12, ..., 33: exactly the multiples of 3 among the lost ticks
    assert cur.selected == 13  # 3, 6, 9, ..., 39: message numbers stay those of the undecimated stream


def test_lost_rows_across_a_reset_are_counted_rounded_up():
    ring = make_ring(capacity=8)
    cur = ring.cursor(every=4)
    push(ring, 1)
    cur.take()
    for tick in list(range(2, 6)) + list(range(1, 13)):  # a reset after tick 5: ticks restart at 1
        push(ring, tick)
    n = cur.take()
    assert [int(cur.ints[j, I_TICK]) for j in range(n)] == [8, 12]
    # rows 2..10 (ticks 2..5, 1..5) were lost, with the reset among them: the ticks cannot say how many were
    # multiples of 4 (two), so the count is rounded up from the row count: ceil(9 / 4)
    assert cur.lost == 3


def test_a_reader_in_another_process_drops_rows_the_writer_overwrote_during_its_copy():
    ring = make_ring(capacity=8, shared=True)
    try:
        reader = StateRing.attach(ring.shm_name)
        assert (reader.capacity, reader.n_out, reader.n_in) == (8, N_OUT, N_IN)
        cur = reader.cursor(from_now=False)
        for tick in range(1, 6):
            push(ring, tick)
        # the copy and the check of Cursor.take, with the writer running in between
        n = ring_take(reader.head, reader.ints, reader.floats, cur.state, cur.ints, cur.floats, 64)
        assert n == 5
        for tick in range(6, 11):
            push(ring, tick)
        kept = ring_check(reader.head, cur.state, cur.ints, n)
        # rows 1..3 may have been overwritten (their slots were reused by rows 9..11); 4 and 5 are whole
        assert kept == 2 and [int(cur.ints[j, I_TICK]) for j in range(kept)] == [4, 5] and cur.lost == 3
        reader.close()
    finally:
        ring.close(unlink=True)


def test_a_shared_ring_is_read_by_a_separate_process():
    ring = make_ring(capacity=16, shared=True)
    try:
        for tick in range(1, 4):
            push(ring, tick)
        code = ("import sys; from plant_models.run.ring import StateRing, I_TICK; r = StateRing.attach(sys.argv[1]); "
                "c = r.cursor(from_now=False); n = c.take(); "
                "print([int(c.ints[j, I_TICK]) for j in range(n)], float(c.floats[n - 1, r.f_y])); r.close()")
        out = subprocess.run([sys.executable, "-c", code, ring.shm_name], capture_output=True, text=True, timeout=300,
                             check=True, cwd=ROOT).stdout
        assert out.split() == ["[1,", "2,", "3]", "3007.0"]
    finally:
        ring.close(unlink=True)


def test_aux_columns_are_limited_and_rings_too_small_are_refused():
    ring = make_ring()
    for k in range(8):
        ring.claim_aux(f"x{k}")
    with pytest.raises(ValueError, match="8 aux columns"):
        ring.claim_aux("one more")
    with pytest.raises(ValueError, match="at least 4 rows"):
        make_ring(capacity=3)


# -- command rows --------------------------------------------------------------------------------------------
def rows_with_ack(capacity: int = 4) -> tuple[CommandRows, np.ndarray]:
    ack = np.zeros(3, dtype=np.int64)
    return CommandRows(n_in=4, capacity=capacity, ack=ack, ack_at=1), ack


def test_commands_are_applied_in_arrival_order_with_rates_held_and_the_last_seq_acked():
    rows, ack = rows_with_ack()
    assert rows.put(5, np.array([0, 2]), np.array([1.0, 2.0]), 2)
    assert rows.put(0, np.array([2]), np.array([7.0]), 1)  # no seq given: the ack stays at the last seq
    assert rows.put(6, np.array([3, 0]), np.array([4.0, 9.0]), 2)
    u, u_rate = np.zeros(4), np.ones(4)
    assert rows.waiting()
    assert rows.apply(u, u_rate, True, 64) == 3
    assert list(u) == [9.0, 0.0, 7.0, 4.0] and list(u_rate) == [0.0, 1.0, 0.0, 0.0]
    assert ack[1] == 6 and rows.applied == 3 and not rows.waiting()


def test_the_tick_applies_at_most_its_share_and_a_full_queue_refuses_more():
    rows, ack = rows_with_ack(capacity=3)
    for s in (1, 2, 3):
        assert rows.put(s, np.array([0]), np.array([float(s)]), 1)
    assert not rows.put(4, np.array([0]), np.array([4.0]), 1) and rows.free() == 0
    u, u_rate = np.zeros(4), np.zeros(4)
    assert rows.apply(u, u_rate, True, 2) == 2 and u[0] == 2.0 and ack[1] == 2
    assert rows.free() == 2 and rows.put(4, np.array([0]), np.array([4.0]), 1)
    assert rows.apply(u, u_rate, True, 2) == 2 and u[0] == 4.0 and ack[1] == 4


def test_while_a_scenario_drives_the_inputs_rows_are_taken_counted_and_not_applied():
    rows, ack = rows_with_ack()
    rows.put(9, np.array([1]), np.array([3.0]), 1)
    rows.put(10, np.array([1]), np.array([4.0]), 1)
    u, u_rate = np.zeros(4), np.zeros(4)
    assert rows.apply(u, u_rate, False, 64) == 0
    assert not u.any() and ack[1] == 0 and rows.scenario_rejected() == 2 and not rows.waiting()
