"""The warm-up's time-left profile (server/cli/warmup_profile.json) follows the compile set.

The profile holds a share for every function the first demo's warm-up
compiles (``powershift --serve-only``); when the compile set changes and
nobody records it again, the estimates run short (25-43 % with a stale
profile).  The slow test compiles that set cold, as a first demo does, and
fails with the command that records the profile again when the profile
knows less than 90 % of the functions compiled or lists more than 10 %
that are no longer compiled (``PROFILE_COVERAGE``: a couple of kernels
added by another change pass, a stale profile does not).  The rule itself
is checked on made-up sets, fast.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from plant_models.config import repo_root
from server.cli.warmup_progress import PROFILE_COVERAGE, RECORD_COMMAND, load_profile, profile_key, profile_problem

KEY = profile_key(["powershift"], serve_only=True)  # what ./demo.sh compiles


def _profile(n: int) -> dict:
    return {"totals": {"core": n}, "shares": {f"here:core:k{i}:0": (i + 1) / n for i in range(n)}}


def test_a_couple_of_new_kernels_pass_a_stale_profile_fails_naming_the_command():
    assert PROFILE_COVERAGE == 0.9
    profile = _profile(40)
    same = [f"beside:core:k{i}:0" for i in range(40)]  # the process does not matter
    assert profile_problem(profile, same, KEY) is None
    assert profile_problem(profile, same + ["here:server:new_stage:0", "here:server:new_gate:0"], KEY) is None
    stale = same + [f"here:plant:new{i}:0" for i in range(5)]  # 5 of 45 unknown: 11 %
    problem = profile_problem(profile, stale, KEY)
    assert problem is not None and "knows 40 of the 45 functions" in problem and "plant:new0:0" in problem
    assert problem.endswith(f"Re-record it on a quiet machine: {RECORD_COMMAND}")
    gone = profile_problem(profile, same[:35], KEY)  # 5 of its 40 no longer compiled
    assert gone is not None and "35 of its 40 are still compiled" in gone and "core:k39:0" in gone
    assert "record it" in profile_problem(None, same, KEY)


@pytest.mark.slow
def test_the_profile_covers_the_functions_a_cold_warm_up_compiles(tmp_path):
    """A cold warm-up of the first demo's set into an empty cache (30-120 s on a quiet machine): every function it
    finishes is in its record; the profile must fit it.  NUMBA_OPT=0 spares LLVM's optimisation passes: the
    functions numba compiles (what is compared) are the same at any optimisation level."""
    record = tmp_path / "record.json"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "NUMBA_OPT": "0"}
    r = subprocess.run([sys.executable, "-m", "server.cli.warmup", "powershift", "--serve-only", "--record-progress",
                        str(record)], cwd=repo_root(), env=env, capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, r.stdout + r.stderr
    done = [key for _, key, _ in json.loads(record.read_text())["done"]]
    assert len(done) > 100  # a cold compile (the core alone has 73 functions)
    problem = profile_problem(load_profile(KEY), done, KEY)
    assert problem is None, problem
