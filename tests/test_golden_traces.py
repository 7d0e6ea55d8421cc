"""Every shipped scenario gives, bit for bit, the trace and events it gave before the renovation.

The fingerprints in ``tests/data/golden_traces.json`` were computed by
``python tests/golden.py --write`` on the code before the core was split
into a package; any change in any bit of any output at any step, or in any
event time, fails here.  Regenerate only for an intended, explained change
of the numbers.
"""

from __future__ import annotations

import json

import pytest

from golden import CASES, GOLDEN_FILE, case_id, fingerprint

GOLDEN = json.loads(GOLDEN_FILE.read_text())


def test_every_case_has_a_fingerprint():
    assert sorted(GOLDEN) == sorted(case_id(*c) for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[case_id(*c) for c in CASES])
def test_trace_and_events_are_bit_identical_to_the_golden_run(case):
    want = GOLDEN[case_id(*case)]
    got = fingerprint(*case)
    assert got["columns"] == want["columns"]
    assert got["rows"] == want["rows"]
    assert got["last_row"] == want["last_row"]  # the first thing to read when a fingerprint differs
    assert got["events"] == want["events"]
    assert got["status_or"] == want["status_or"]
    assert got["trace_sha256"] == want["trace_sha256"]
    assert got["events_sha256"] == want["events_sha256"]
