"""The core's layout table generates the slot numbers and offsets of the hand-numbered layout it replaced.

``OLD_SLOTS`` and :func:`old_fields` are a frozen copy of that layout (the
constants and the ``_fields`` lists of ``plant_models/core/layout.py`` before
the table): the generated constants must equal them and the allocated
buffers must hold the same offsets, for several sizes.  Fields added to the
table since must be numbered after them and placed after them in their
buffers (only the mi fields move, by the slots added to the header).
"""

from __future__ import annotations

import numpy as np
import pytest

from plant_models.core import layout as L

OLD_SLOTS = {
    "H_N": 0, "H_G": 1, "H_S": 2, "H_P": 3, "H_NY": 4, "H_EVCAP": 5, "H_MAX_EVENTS": 6, "H_MAX_ITER": 7,
    "H_PLANT_NF": 8, "H_PLANT_NI": 9, "H_PLANT_NDF": 10, "H_PLANT_NDI": 11, "H_MAX_LOCATE": 12, "H_REUSE": 13,
    "H_NKIN": 14, "H_FN_STEP": 15, "H_FN_START": 16, "H_NX": 17, "H_HYPER": 18, "H_DENSE": 19, "MF_INERTIA": 20,
    "MF_INV_INERTIA": 21, "MF_DRAG": 22, "MF_COEF_A": 23, "MF_COEF_B": 24, "MF_ACT_LAG": 25, "MF_ACT_GAIN": 26,
    "MF_ACT_PRELOAD": 27, "MF_GAIN_STATIC": 28, "MF_GAIN_KINETIC": 29, "MF_STRIBECK_VS": 30, "MF_STRIBECK_ALPHA": 31,
    "MF_ROW_VISC": 32, "MF_SPRING_CA": 33, "MF_SPRING_CB": 34, "MF_SPRING_K": 35, "MF_SPRING_C": 36,
    "MF_SPRING_TX": 37, "MF_SPRING_TY": 38, "MF_SETTINGS": 39, "MF_PLANT": 40, "MF_KIN_SHIFT": 41, "MF_KIN_CAP": 42,
    "MF_KIN_THRESH": 43, "MI_ROW_A": 50, "MI_ROW_B": 51, "MI_SPRING_A": 52, "MI_SPRING_B": 53, "MI_SPRING_NPTS": 54,
    "MI_PLANT": 55, "DI_DRV_LIST": 56, "DF_TIME": 60, "DF_Y": 61, "DF_COEF_A": 62, "DF_COEF_B": 63, "DF_DIR": 64,
    "DF_U_TAU": 65, "DF_U_TAU_RATE": 66, "DF_U_ACT": 67, "DF_U_ACT_RATE": 68, "DF_DELTA": 69, "DF_MU": 70,
    "DF_CAP_S": 71, "DF_CAP_K": 72, "DF_ACCEL": 73, "DF_SPRING_TQ": 74, "DF_LAMBDA_REQ": 75, "DF_P": 76, "DF_L": 77,
    "DF_RHO": 78, "DF_Y0": 79, "DF_YT": 80, "DF_YS": 81, "DF_K1": 82, "DF_K2": 83, "DF_K3": 84, "DF_K4": 85,
    "DF_DYE": 86, "DF_F": 87, "DF_CAPS_T": 88, "DF_CAPK_T": 89, "DF_A": 90, "DF_W": 91, "DF_CH": 92, "DF_BV": 93,
    "DF_XV": 94, "DF_LAMW": 95, "DF_GRAD": 96, "DF_LO": 97, "DF_HI": 98, "DF_TMPN": 99, "DF_TMPN2": 100,
    "DF_GEV0": 101, "DF_GEV1": 102, "DF_BACKUP": 103, "DF_EV_TIME": 104, "DF_PLANT": 105, "DF_PREV_DIR": 106,
    "DF_XACT": 107, "DF_PROW": 108, "DF_EXP_HALF": 109, "DF_EXP_FULL": 110, "DF_EXP_H": 111, "DF_POW": 112,
    "DF_DT": 113, "DF_GEVC": 114, "DF_SPLIT_C": 115, "DF_SPLIT_G": 116, "DF_REUSE_Y": 117, "DF_REUSE_U": 118,
    "DF_REUSE_MF": 119, "DI_MODE": 120, "DI_BND": 121, "DI_STUCK": 122, "DI_NSTUCK": 123, "DI_ORIENT": 124,
    "DI_TREE_P": 125, "DI_TREE_C": 126, "DI_TREE_R": 127, "DI_NTREE": 128, "DI_LOCKED": 129, "DI_CAND": 130,
    "DI_COMP": 131, "DI_FLAGS": 132, "DI_COUNTERS": 133, "DI_EV_ROW": 134, "DI_EV_KIND": 135, "DI_BACKUP": 136,
    "DI_QUEUE": 137, "DI_PLANT": 138, "DI_IDX": 139, "DI_CBND": 140, "DI_PREV_MODE": 141, "DI_SAVED_MODE": 142,
    "DF_DRIVE_ACC": 143, "DI_DRIVE": 144, "DF_KIN_T0": 145, "DF_KIN_HOLD": 146, "DI_KIN_PHASE": 147,
    "DF_KIN_CMD": 148, "DF_DRV_WS": 149, "MI_ROW_NX": 150, "MI_ROW_XOFF": 151, "MI_ROW_XSHAFT": 152,
    "MF_COEF_X": 153, "DF_COEF_X": 154, "DF_RHO_AB": 155, "DF_RHO_X": 156, "DI_CHILD": 157, "DF_BACKUP_X": 158,
    "MI_ONEWAY": 159, "DI_PEEL": 160, "DF_TMPN3": 161, "MF_MASS": 162, "MF_MINV": 163, "MF_DRAGM": 164, "DF_AM": 165,
    "H_ONEWAY": 170, "DF_KIN_BACKUP": 171, "DI_KIN_BACKUP": 172,
}
OLD_N_SLOTS = 173


def old_fields(sz):
    """The ``(slot name, size)`` lists of the hand-numbered layout, in their buffer order."""
    n, g, s, P, E = sz.n, sz.g, sz.s, sz.P, sz.E
    ny = 2 * n + s + g + 4 + g
    mf = [
        ("MF_INERTIA", n), ("MF_INV_INERTIA", n), ("MF_DRAG", n), ("MF_COEF_A", g), ("MF_COEF_B", g),
        ("MF_ACT_LAG", g), ("MF_ACT_GAIN", g), ("MF_ACT_PRELOAD", g), ("MF_GAIN_STATIC", g), ("MF_GAIN_KINETIC", g),
        ("MF_STRIBECK_VS", g), ("MF_STRIBECK_ALPHA", g), ("MF_ROW_VISC", g),
        ("MF_SPRING_CA", s), ("MF_SPRING_CB", s), ("MF_SPRING_K", s), ("MF_SPRING_C", s),
        ("MF_SPRING_TX", s * P), ("MF_SPRING_TY", s * P), ("MF_SETTINGS", 8), ("MF_PLANT", sz.plant_nf),
        ("MF_KIN_SHIFT", g), ("MF_KIN_CAP", g), ("MF_KIN_THRESH", g),
        ("MF_COEF_X", sz.x), ("MF_MASS", sz.d * sz.d), ("MF_MINV", sz.d * sz.d), ("MF_DRAGM", sz.d * sz.d),
    ]
    mi = [("MI_ROW_A", g), ("MI_ROW_B", g), ("MI_SPRING_A", s), ("MI_SPRING_B", s), ("MI_SPRING_NPTS", s), ("MI_PLANT", sz.plant_ni),
          ("MI_ROW_NX", g), ("MI_ROW_XOFF", g), ("MI_ROW_XSHAFT", sz.x), ("MI_ONEWAY", g)]
    df = [
        ("DF_TIME", 1), ("DF_Y", ny), ("DF_COEF_A", g), ("DF_COEF_B", g), ("DF_DIR", g),
        ("DF_U_TAU", n), ("DF_U_TAU_RATE", n), ("DF_U_ACT", g), ("DF_U_ACT_RATE", g),
        ("DF_DELTA", g), ("DF_MU", g), ("DF_CAP_S", g), ("DF_CAP_K", g), ("DF_ACCEL", n), ("DF_SPRING_TQ", s), ("DF_LAMBDA_REQ", g),
        ("DF_P", n * n), ("DF_L", g * n), ("DF_RHO", g),
        ("DF_Y0", ny), ("DF_YT", ny), ("DF_YS", ny), ("DF_K1", ny), ("DF_K2", ny), ("DF_K3", ny), ("DF_K4", ny), ("DF_DYE", ny),
        ("DF_F", n), ("DF_CAPS_T", 3 * g), ("DF_CAPK_T", 3 * g), ("DF_A", g * n), ("DF_W", g * g), ("DF_CH", g * g),
        ("DF_BV", g), ("DF_XV", g), ("DF_LAMW", g), ("DF_GRAD", g), ("DF_LO", g), ("DF_HI", g), ("DF_TMPN", n), ("DF_TMPN2", n),
        ("DF_GEV0", g), ("DF_GEV1", g), ("DF_BACKUP", ny + 3 * g + 1), ("DF_EV_TIME", E), ("DF_PLANT", sz.plant_ndf),
        ("DF_PREV_DIR", g), ("DF_XACT", 3 * g), ("DF_PROW", g), ("DF_EXP_HALF", g), ("DF_EXP_FULL", g), ("DF_EXP_H", 1),
        ("DF_POW", 3), ("DF_DT", g), ("DF_GEVC", g), ("DF_SPLIT_C", g * g), ("DF_SPLIT_G", g * g),
        ("DF_REUSE_Y", ny), ("DF_REUSE_U", n + g), ("DF_REUSE_MF", 3 * n + 10 * g + 4 * s + 2 * s * P + 8),
        ("DF_DRIVE_ACC", g), ("DF_KIN_T0", g), ("DF_KIN_HOLD", g), ("DF_KIN_CMD", 2 * g), ("DF_DRV_WS", g * n + g * g + g),
        ("DF_KIN_BACKUP", 3 * g),
        ("DF_COEF_X", sz.x), ("DF_RHO_AB", 2 * g), ("DF_RHO_X", sz.x), ("DF_BACKUP_X", sz.x), ("DF_TMPN3", n), ("DF_AM", g * sz.d),
    ]
    di = [
        ("DI_MODE", g), ("DI_BND", g), ("DI_STUCK", g), ("DI_NSTUCK", 1), ("DI_ORIENT", g), ("DI_TREE_P", n), ("DI_TREE_C", n),
        ("DI_TREE_R", n), ("DI_NTREE", 1), ("DI_LOCKED", n), ("DI_CAND", g), ("DI_COMP", n), ("DI_FLAGS", 10), ("DI_COUNTERS", 8),
        ("DI_EV_ROW", E), ("DI_EV_KIND", E), ("DI_BACKUP", 2 * g), ("DI_QUEUE", n), ("DI_PLANT", sz.plant_ndi),
        ("DI_IDX", g), ("DI_CBND", g), ("DI_PREV_MODE", g), ("DI_SAVED_MODE", g),
        ("DI_DRIVE", g), ("DI_KIN_PHASE", g), ("DI_DRV_LIST", g), ("DI_KIN_BACKUP", 2 * g), ("DI_CHILD", g),
        ("DI_PEEL", n + g),
    ]
    return mf, mi, df, di


def old_allocate(sz):
    """The hand-numbered layout's header values, field offsets (mi's own fields counted from the end of the
    header) and buffer lengths, by name."""
    mf_f, mi_f, df_f, di_f = old_fields(sz)
    header = {"H_N": sz.n, "H_G": sz.g, "H_S": sz.s, "H_P": sz.P, "H_EVCAP": sz.E,
              "H_NY": 2 * sz.n + sz.s + 2 * sz.g + 4, "H_PLANT_NF": sz.plant_nf, "H_PLANT_NI": sz.plant_ni,
              "H_PLANT_NDF": sz.plant_ndf, "H_PLANT_NDI": sz.plant_ndi, "H_NX": sz.x, "H_DENSE": 1 if sz.d else 0}
    offsets, lengths = {}, {}
    for buf, fields in (("mf", mf_f), ("mi", mi_f), ("df", df_f), ("di", di_f)):
        off = 0
        for name, size in fields:
            offsets[name] = off
            off += size
        lengths[buf] = off
    return header, offsets, lengths


SIZES = [
    L.Sizes(n=4, g=8, s=0, P=0, E=64),  # the Powershift
    L.Sizes(n=5, g=4, s=1, P=2, E=32, plant_nf=40, plant_ni=12, plant_ndf=90, plant_ndi=6),  # a DCT-like plant
    L.Sizes(n=3, g=7, s=2, P=5, E=16, plant_nf=3, plant_ni=5, plant_ndf=7, plant_ndi=11, x=9, d=3),  # reduced
    L.Sizes(n=1, g=0, s=0, P=0, E=1),
    L.Sizes(n=2, g=3, s=5, P=7, E=11, plant_nf=13, plant_ni=17, plant_ndf=19, plant_ndi=23, x=29, d=2),
]


def test_the_generated_slot_constants_are_the_hand_numbered_ones():
    generated = {name: getattr(L, name) for name in dir(L)
                 if name.split("_")[0] in ("H", "MF", "MI", "DF", "DI") and name.isupper()}
    assert generated == L.SLOTS
    assert {name: L.SLOTS[name] for name in OLD_SLOTS} == OLD_SLOTS
    added = sorted(L.SLOTS[name] for name in L.SLOTS if name not in OLD_SLOTS)  # fields added since: after them
    assert added == list(range(OLD_N_SLOTS, L.N_SLOTS))
    assert all(type(v) is int for v in generated.values())  # plain ints: numba folds them as constants


@pytest.mark.parametrize("sz", SIZES, ids=lambda sz: f"n{sz.n}g{sz.g}s{sz.s}x{sz.x}d{sz.d}")
def test_the_allocated_offsets_are_the_hand_numbered_ones(sz):
    """Every field of the frozen layout keeps its offset (mi's own fields follow the header, which grows by
    the slots added since); fields added since come after them in their buffers."""
    bufs = dict(zip(("mf", "mi", "df", "di"), L.allocate(sz)))
    mi = bufs["mi"]
    header, offsets, lengths = old_allocate(sz)
    assert {name: int(mi[L.SLOTS[name]]) for name in header} == header
    new_sizes = {b: 0 for b in bufs}
    for slot, size in (pair for fields in L._fields(sz) for pair in fields):
        f = L.TABLE[slot]
        if f.name in offsets:
            assert mi[slot] - (L.N_SLOTS if f.buf == "mi" else 0) == offsets[f.name], f.name
        else:
            assert mi[slot] - (L.N_SLOTS if f.buf == "mi" else 0) >= lengths[f.buf], f.name
            new_sizes[f.buf] += size
    for b, arr in bufs.items():
        start = L.N_SLOTS if b == "mi" else 0
        assert len(arr) == max(start + lengths[b] + new_sizes[b], 1), b
    assert L.model_block_len(sz) == 3 * sz.n + 10 * sz.g + 4 * sz.s + 2 * sz.s * sz.P + 8


def test_a_field_added_at_the_end_takes_the_next_slot_and_the_end_of_its_buffer():
    table = L.TABLE + (L.F("DF_NEW", "df", "2*g + n", "work", "a new workspace"),
                       L.F("H_NEW", "hdr", "", "hdr", "a new header int"))
    slots, placement = L._generate(table)
    assert slots["DF_NEW"] == L.N_SLOTS and slots["H_NEW"] == L.N_SLOTS + 1
    assert placement["df"] == L.PLACEMENT["df"] + (L.N_SLOTS,)
    assert {k: v for k, v in slots.items() if k not in ("DF_NEW", "H_NEW")} == L.SLOTS
    assert all(placement[b] == L.PLACEMENT[b] for b in ("mf", "mi", "di"))


@pytest.mark.parametrize("row, message", [
    (L.F("DF_BAD", "df", "g**2", "work", ""), "not a sum or product"),
    (L.F("DF_BAD", "df", "__import__('os')", "work", ""), "not a sum or product"),
    (L.F("DF_BAD", "df", "m", "work", ""), "not a sum or product"),
    (L.F("DF_BAD", "df", "", "work", ""), "has no size"),
    (L.F("DF_Y", "df", "g", "work", ""), "repeated name"),
    (L.F("DF_BAD", "dx", "g", "work", ""), "unknown buffer"),
    (L.F("DF_BAD", "df", "g", "work", "", after="MI_ROW_A"), "not a placed field of buffer df"),
])
def test_a_malformed_row_is_refused(row, message):
    with pytest.raises(ValueError, match=message):
        slots, _ = L._generate(L.TABLE + (row,))
        L._compile_size(row)


def test_describe_lists_every_field_once():
    text = L.describe()
    for name, slot in L.SLOTS.items():
        assert sum(1 for line in text.splitlines() if line.split()[:2] == [str(slot), name]) == 1


# -- the door's named offsets of the integrated state vector --------------------------------------------------------
def test_the_state_block_accessors_give_the_offsets_of_y_offsets():
    from numba import njit

    from plant_models.core import api

    @njit(cache=False)
    def offsets(mi):
        return (api.y_omega(mi), api.y_theta(mi), api.y_twist(mi), api.y_act(mi), api.y_work(mi),
                api.y_row_work(mi))

    for sz in SIZES:
        mi = L.allocate(sz)[1]
        yo = L.y_offsets(sz.n, sz.g, sz.s)
        oy = int(mi[L.DF_Y])
        assert offsets(mi) == (oy + yo["omega"], oy + yo["theta"], oy + yo["twist"], oy + yo["act"], oy + yo["work"],
                               oy + yo["work"] + L.W_ROW0)
        assert yo["ny"] == yo["work"] + L.W_ROW0 + sz.g == sz.ny  # the row work ends the state vector


def test_no_plant_computes_an_offset_in_the_state_vector_by_hand():
    """The plants reach y through the door's accessors: no ``L.DF_Y`` and no ``L.W_*`` in a plant module."""
    import ast
    from pathlib import Path

    import plant_models.plants as plants

    found = []
    for path in sorted(Path(plants.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("L", "LL") \
                    and (node.attr == "DF_Y" or node.attr.startswith("W_")):
                found.append(f"{path.name}:{node.lineno} {node.attr}")
    assert found == []
