"""Shifts are named by their gears wherever a user reads them, the swapped clutches in brackets.

The closed-loop example's figure said "swap clutch 1 -> 2" while the terminal said "gear 1 -> gear 3";
scenario and campaign descriptions (the titles of their figures) said "swap 1 -> 2" of clutches.
"""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest

from plant_models.config import load_toml
from plant_models.registry import describe_config

from server_support import ROOT


def _example():
    spec = importlib.util.spec_from_file_location("closed_loop_swap", ROOT / "examples" / "closed_loop_swap.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_the_closed_loop_figure_title_names_the_gears_and_the_clutches():
    ex = _example()
    assert ex.shift_name(describe_config("powershift"), ex.SwapPlan()) == "gear 1 -> gear 3 (C1 -> C2)"
    plan = ex.SwapPlan(off_clutch=2, on_clutch=1, held_clutches=(5, 6))
    assert ex.shift_name(describe_config("powershift"), plan) == "gear 9 -> gear 5 (C2 -> C1)"


FILES = sorted([*(ROOT / "scenarios").glob("powershift*.toml"), *(ROOT / "scenarios").glob("dct*.toml"),
                *(ROOT / "campaigns").glob("*.toml")])


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_shift_descriptions_name_gears(path):
    """A description that names a shift (an arrow) names it by gears: it titles the run's figures."""
    desc = load_toml(path).get("description", "")
    for arrow in re.finditer(r"(\S+ \S+) -> (\S+ \S+)", desc):
        by_gears = re.fullmatch(r"gear \d+", arrow.group(1)) and arrow.group(2).startswith("gear ")
        by_clutches = re.search(r"C\d+$", arrow.group(1)) and re.match(r"C\d+", arrow.group(2))
        assert by_gears or by_clutches, f"{path.name}: {arrow.group(0)!r} in {desc!r}"
    assert not re.search(r"\bswap \d -> \d", desc) and "pairs" not in desc, desc
