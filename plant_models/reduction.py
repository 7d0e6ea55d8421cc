"""The reduction of a transmission description to independent speeds, in exact rational arithmetic.

:func:`reduce` checks a :class:`~plant_models.drivetrain.Description` and
writes the members' speeds as ``w = T q`` over independent speeds ``q``
(see :mod:`plant_models.drivetrain` for the method and its sources): exact
linear algebra (row echelon form, nullspace, inverse), the checks that name
a contradicting key, the gears, the choice of the coordinates, the peeling
order of the elements' rows, and the initial state.  Nothing here is
compiled.
"""

from __future__ import annotations

import itertools

import numpy as np

from .drivetrain import Description, DrivetrainError, Exact, Gear, Reduction

MAX_COORDINATE_SEARCH = 5000  # subsets of members tried as independent speeds before a greedy choice


# ----------------------------------------------------------------------------------------------
# exact linear algebra
# ----------------------------------------------------------------------------------------------
def _rref(rows: list[list[Exact]], ncols: int) -> tuple[list[list[Exact]], list[int]]:
    """Reduced row echelon form (exact) and the pivot columns."""
    A = [list(r) for r in rows]
    pivots: list[int] = []
    r = 0
    for c in range(ncols):
        p = next((i for i in range(r, len(A)) if A[i][c] != 0), None)
        if p is None:
            continue
        A[r], A[p] = A[p], A[r]
        piv = A[r][c]
        A[r] = [v / piv for v in A[r]]
        for i in range(len(A)):
            if i != r and A[i][c] != 0:
                f = A[i][c]
                A[i] = [a - f * b for a, b in zip(A[i], A[r])]
        pivots.append(c)
        r += 1
        if r == len(A):
            break
    return A[:r], pivots


def _nullspace(rows: list[list[Exact]], ncols: int) -> list[list[Exact]]:
    """A basis of the nullspace (exact), as column vectors: a list of ncols-long lists."""
    R, piv = _rref(rows, ncols) if rows else ([], [])
    free = [c for c in range(ncols) if c not in piv]
    basis = []
    for f in free:
        v = [Exact(0)] * ncols
        v[f] = Exact(1)
        for i, p in enumerate(piv):
            v[p] = -R[i][f]
        basis.append(v)
    return basis


def _rank(rows: list[list[Exact]], ncols: int) -> int:
    return len(_rref(rows, ncols)[1]) if rows else 0


def _dense(coefs, n: int) -> list[Exact]:
    v = [Exact(0)] * n
    for j, c in coefs:
        v[j] += Exact(c)
    return v


# ----------------------------------------------------------------------------------------------
# the reduction
# ----------------------------------------------------------------------------------------------
def reduce(d: Description) -> Reduction:
    """Check a description and reduce it to independent speeds (see the module docstring).

    Raises :class:`DrivetrainError` for relations that contradict each
    other, members that nothing fixes or moves, gears that do not couple
    the output to the input, and initial speeds that do not fit the engaged
    elements.
    """
    N = len(d.members)
    G = [_dense(r.coefs, N) for r in d.relations]
    _check_relations(d, G)
    Z = _nullspace(G, N)  # members' speeds = Z z: the motions the rigid relations allow
    n = len(Z)
    _check_connected(d)
    gears = _number_gears([_gear(d, G, g) for g in d.gears])
    coords = _choose_coordinates(d, Z, gears)
    Zs = [[Z[k][coords[i]] for k in range(n)] for i in range(n)]  # Z restricted to the coordinates (n x n)
    Zs_inv = _inverse(Zs)
    # T = Z^T-style: w_m = sum_k Z[k][m] z_k, z = Zs_inv q  ->  T[m][i] = sum_k Z[k][m] Zs_inv[k][i]
    T = [[sum((Z[k][m] * Zs_inv[k][i] for k in range(n)), Exact(0)) for i in range(n)] for m in range(N)]
    J = [Exact(m.inertia) for m in d.members]
    B = [Exact(m.drag) for m in d.members]
    M = [[sum((T[m][a] * J[m] * T[m][b] for m in range(N)), Exact(0)) for b in range(n)] for a in range(n)]
    D = [[sum((T[m][a] * B[m] * T[m][b] for m in range(N)), Exact(0)) for b in range(n)] for a in range(n)]
    _check_inertia(d, M, T, coords)
    dense = bool(d.relations)
    rows = []
    for e in d.elements:
        c = _dense(e.coefs, N)
        row = [sum((c[m] * T[m][i] for m in range(N)), Exact(0)) for i in range(n)]
        entries = tuple((i, float(v)) for i, v in enumerate(row) if v != 0)
        if not entries:
            raise DrivetrainError(e.key, f"{e.kind} {e.name!r} couples nothing: the gears already hold its "
                                  "members at the same speed (or both to the housing)")
        rows.append(entries)
    for s in d.selectors:
        for m in (s.member, s.to):
            if m not in coords:
                raise DrivetrainError(s.key, f"selector {s.name!r}: member {d.members[m].name!r} is geared to "
                                      "others; a selector must couple two independent speeds")
    Gind, names = _independent_relations(G, N)
    Gf = np.array([[float(v) for v in r] for r in Gind]) if Gind else np.zeros((0, N))
    Lam = np.linalg.solve(Gf @ Gf.T, Gf) if len(Gind) else np.zeros((0, N))
    red = Reduction(
        coordinates=tuple(coords), T=tuple(tuple(float(v) for v in r) for r in T),
        T_exact=tuple(tuple(r) for r in T),
        mass=tuple(tuple(float(v) for v in r) for r in M), drag=tuple(tuple(float(v) for v in r) for r in D),
        dense=dense, rows=tuple(rows), gears=gears,
        relation_map=tuple(tuple(float(v) for v in r) for r in Lam),
        relation_rows=tuple(tuple(float(v) for v in r) for r in Gf), relation_names=tuple(names),
        initial_q=())
    q0 = _initial_q(d, red)
    return Reduction(**{**red.__dict__, "initial_q": tuple(q0)})


def _inverse(A: list[list[Exact]]) -> list[list[Exact]]:
    n = len(A)
    aug = [list(A[i]) + [Exact(1 if i == j else 0) for j in range(n)] for i in range(n)]
    R, piv = _rref(aug, 2 * n)
    if piv[:n] != list(range(n)):
        raise ValueError("singular")
    return [r[n:] for r in R]


def _independent_relations(G: list[list[Exact]], N: int) -> tuple[list[list[Exact]], list[int]]:
    """The relations that are independent of the ones before them (redundant ones add nothing)."""
    out, names = [], []
    for k, g in enumerate(G):
        if _rank(out + [g], N) > len(out):
            out.append(g)
            names.append(k)
    return out, names


def _held(rows: list[list[Exact]], N: int) -> set[int]:
    """Members (columns) that these rows hold at zero: no motion they allow moves them."""
    Z = _nullspace(rows, N)
    return {m for m in range(N) if all(z[m] == 0 for z in Z)}


def _check_relations(d: Description, G: list[list[Exact]]) -> None:
    """Relations that only allow standing still contradict each other: name them."""
    N = len(d.members)
    held: set[int] = set()
    for k in range(len(G)):
        now = _held(G[:k + 1], N)
        if now - held:
            names = ", ".join(repr(d.members[m].name) for m in sorted(now))
            others = [d.relations[j] for j in range(k)
                      if any(m in now for m, _ in d.relations[j].coefs)]
            r = d.relations[k]
            if others:
                what = ", ".join(f"{o.kind} {o.name!r}" for o in others)
                msg = f"{r.kind} {r.name!r} contradicts {what}: together they let members {names} only stand still"
            else:
                msg = f"{r.kind} {r.name!r} lets members {names} only stand still"
            raise DrivetrainError(r.key, msg)


def _check_connected(d: Description) -> None:
    """A member that nothing touches (no relation, element, selector, spring or torque) is a mistake."""
    used = {d.input_member, d.output_member}
    for r in d.relations:
        used |= {m for m, _ in r.coefs}
    for e in d.elements:
        used |= {m for m, _ in e.coefs}
    for s in d.selectors:
        used |= {s.member, s.to}
    for s in d.springs:
        used |= set(s.members)
    for t in d.torques:
        used.add(t.member)
    for m, mem in enumerate(d.members):
        if m not in used:
            raise DrivetrainError(f"member[{m}]", f"member {mem.name!r} is free: no gear, element, spring or "
                                  "torque connects it to the rest")


def _check_inertia(d: Description, M: list[list[Exact]], T, coords) -> None:
    """The reduced inertia must be positive definite: a motion without inertia has no dynamics."""
    n = len(M)
    Z = _nullspace(M, n)
    if Z:
        moving = sorted({m for z in Z for m in range(len(d.members))
                         if sum((T[m][i] * z[i] for i in range(n)), Exact(0)) != 0})
        names = ", ".join(repr(d.members[m].name) for m in moving)
        raise DrivetrainError("member", f"members {names} can move without any inertia (all of them have "
                              "inertia_kg_m2 = 0): give one of them an inertia")


def _gear_rows(d: Description, G: list[list[Exact]], elements, positions) -> list[list[Exact]]:
    N = len(d.members)
    rows = list(G) + [_dense(d.elements[e].coefs, N) for e in elements]
    for s, value in positions:
        sel = d.selectors[s]
        pos = next(p for p in sel.positions if p.value == value)
        rows.append(_dense(((sel.member, 1), (sel.to, -Exact(pos.ratio))), N))
    return rows


def _gear(d: Description, G, g) -> Gear:
    """A gear of the shift table: it must couple the output to the input at one ratio.

    Springs count as rigid here (the ratio is the steady one); members the
    gear leaves free without affecting that ratio (the other input shaft of
    a dual-clutch transmission) are allowed.
    """
    name, elements, positions, key = g
    N = len(d.members)
    rows = _gear_rows(d, G, elements, positions)
    rows += [_dense(((a, 1), (b, -1)), N) for a, b in (s.members for s in d.springs)]
    Z = _nullspace(rows, N)
    what = ", ".join([d.elements[e].name for e in elements] + [f"{d.selectors[s].name}:{v}" for s, v in positions])
    turning = [z for z in Z if z[d.input_member] != 0]
    if not turning:
        raise DrivetrainError(key, f"gear {name!r} ({what}) holds the input member "
                              f"{d.members[d.input_member].name!r} still")
    if _rank([[z[d.input_member], z[d.output_member]] for z in Z], 2) > 1:
        free = sorted(_free_members(d, rows + [_dense(((d.input_member, 1),), N)]))
        names = ", ".join(repr(d.members[m].name) for m in free)
        raise DrivetrainError(key, f"gear {name!r} ({what}) leaves members {names} free of the input: "
                              "it needs one more engaged element")
    z = turning[0]
    w_in, w_out = z[d.input_member], z[d.output_member]
    if w_out == 0:
        raise DrivetrainError(key, f"gear {name!r} ({what}) holds the output member "
                              f"{d.members[d.output_member].name!r} still while the input turns")
    number = int(name) if name.lstrip("-").isdigit() else 0
    return Gear(name, number, tuple(elements), tuple(positions), w_in / (w_out * Exact(d.output_sign)))


def _number_gears(gears: list[Gear]) -> tuple[Gear, ...]:
    """A gear named by a whole number reports that number; the others (reverse gears) -1, -2, ... in order."""
    out, k = [], 0
    for g in gears:
        if g.name.lstrip("-").isdigit():
            out.append(g)
        else:
            k += 1
            out.append(Gear(g.name, -k, g.elements, g.positions, g.ratio))
    return tuple(out)


def _free_members(d: Description, rows) -> set[int]:
    N = len(d.members)
    return {m for z in _nullspace(rows, N) for m in range(N) if z[m] != 0}


# ----------------------------------------------------------------------------------------------
# which members are the independent speeds
# ----------------------------------------------------------------------------------------------
def _choose_coordinates(d: Description, Z: list[list[Exact]], gears: tuple[Gear, ...]) -> list[int]:
    """Members whose speeds serve as the independent ones.

    Springs and selectors couple two independent speeds, so their members
    must be among them.  Among the valid choices the one is taken whose
    element rows let the core's substitution order reach every stuck set a
    gear (or part of one) makes, that keeps no independent speed at zero in
    a gear (a braked member), has the fewest row entries, and has the input
    and output among them; ties go to the members listed first.
    """
    N, n = len(d.members), len(Z)
    required = {m for s in d.springs for m in s.members} | {m for s in d.selectors for m in (s.member, s.to)}

    def valid(S) -> bool:
        try:
            _inverse([[Z[k][S[i]] for k in range(n)] for i in range(n)])
            return True
        except ValueError:
            return False

    if d.independent:
        S = list(d.independent)
        if len(S) != n:
            raise DrivetrainError("independent_speeds", f"the gears leave {n} independent speeds; "
                                  f"{len(S)} members are listed")
        if not valid(S):
            raise DrivetrainError("independent_speeds", "the listed members are not independent: the gears "
                                  "fix some of them from the others")
        return S
    if n == 0:
        return []
    cands = [S for S in itertools.combinations(range(N), n) if required <= set(S)]
    if len(cands) > MAX_COORDINATE_SEARCH:
        return _greedy_coordinates(d, Z, required, valid)
    sets = _stuck_sets_of_interest(d, gears)
    best, best_score = None, None
    for S in cands:
        if not valid(S):
            continue
        score = _score(d, Z, list(S), sets)
        if best_score is None or score < best_score:
            best, best_score = list(S), score
    if best is None:
        missing = ", ".join(repr(d.members[m].name) for m in sorted(required))
        raise DrivetrainError("spring", f"members {missing} carry springs or selectors, which couple independent "
                              "speeds, but the gears fix some of them from the others")
    return best


def _greedy_coordinates(d, Z, required, valid) -> list[int]:
    n = len(Z)
    order = sorted(required) + [d.input_member, d.output_member] + list(range(len(d.members)))
    S: list[int] = []
    for m in order:
        if m in S or len(S) == n:
            continue
        trial = S + [m]
        sub = [[Z[k][trial[i]] for k in range(n)] for i in range(len(trial))]
        if _rank(sub, n) == len(trial):
            S = trial
    if len(S) != n or not valid(S):
        raise DrivetrainError("independent_speeds", "no set of independent speeds found: list them")
    return S


def _stuck_sets_of_interest(d: Description, gears) -> list[tuple[int, ...]]:
    """Element sets a shift sequence holds stuck: each gear's elements and every part of them."""
    out = set()
    for g in gears:
        els = g.elements
        for k in range(1, len(els) + 1):
            out.update(itertools.combinations(els, k))
    return sorted(out)


def _score(d: Description, Z, S: list[int], sets) -> tuple:
    n = len(S)
    N = len(d.members)
    Zs_inv = _inverse([[Z[k][S[i]] for k in range(n)] for i in range(n)])
    T = [[sum((Z[k][m] * Zs_inv[k][i] for k in range(n)), Exact(0)) for i in range(n)] for m in range(N)]
    rows = []
    for e in d.elements:
        c = _dense(e.coefs, N)
        rows.append([sum((c[m] * T[m][i] for m in range(N)), Exact(0)) for i in range(n)])
    unreached = 0
    held = 0
    for els in sets:
        R = [rows[e] for e in els]
        ok, locked = peel([[(i, v) for i, v in enumerate(r) if v != 0] for r in R], n)
        unreached += 0 if ok else 1
        held += 1 if locked else 0
    nnz = sum(1 for r in rows for v in r if v != 0)
    ends = -(d.input_member in S) - (d.output_member in S)
    return (unreached, held, nnz, ends, tuple(S))


def peel(rows: list[list[tuple[int, Exact]]], n: int) -> tuple[bool, set[int]]:
    """The core's substitution order for a stuck set (``modes._build_tree_hyper``), in exact arithmetic.

    Returns whether every independent row is reached and the shafts the
    rows lock at zero (held at zero other than by a row to the housing on
    that shaft alone, a brake on an independent speed, which the core does
    not report as locked).
    """
    dense = [_dense(r, n) for r in rows]
    held = _held(dense, n) if dense else set()
    braked = {r[0][0] for r in rows if len(r) == 1}
    locked = held - braked
    indep: list[list[tuple[int, Exact]]] = []
    acc: list[list[Exact]] = []
    for r, dr in zip(rows, dense):
        if _rank(acc + [dr], n) > len(acc):
            acc.append(dr)
            indep.append(r)
    active = [[j for j, _ in r if j not in held] for r in indep]
    left = set(range(len(active)))
    while True:
        cnt = [0] * n
        for i in left:
            for j in active[i]:
                cnt[j] += 1
        child = next((j for j in range(n - 1, -1, -1) if cnt[j] == 1), None)
        if child is None:
            break
        row = next(i for i in left if child in active[i])
        left.discard(row)
    return all(not active[i] for i in left), locked


# ----------------------------------------------------------------------------------------------
# the initial state
# ----------------------------------------------------------------------------------------------
def speed_constraints(d: Description, red: Reduction, positions) -> tuple[np.ndarray, list, list]:
    """Rows and right-hand sides on the independent speeds at the start: each engaged element slips
    at zero, each selected gear (non-zero position in ``positions``) turns its member at the gear's
    ratio, each listed member has its listed speed (rad/s).  Returns also T (members x coordinates)."""
    n = len(red.coordinates)
    T = np.asarray(red.T, dtype=float).reshape(len(d.members), n)
    rows, rhs = [], []
    for e in d.initial_engaged:
        r = np.zeros(n)
        for i, c in red.rows[e]:
            r[i] += c
        rows.append(r)
        rhs.append(0.0)
    for s, value in positions:
        if value == 0:
            continue
        sel = d.selectors[s]
        pos = next(p for p in sel.positions if p.value == value)
        rows.append(T[sel.member] - pos.ratio * T[sel.to])
        rhs.append(0.0)
    for m, v in d.initial_speeds:
        rows.append(T[m])
        rhs.append(v)
    return T, rows, rhs


def _initial_q(d: Description, red: Reduction) -> np.ndarray:
    """Independent speeds that give the listed members their speeds and hold the engaged elements.

    The engaged elements (and selected positions) fix some speeds from
    others; the listed member speeds must fix the rest, and must not
    contradict each other through them.  Without any listed speed
    everything starts at rest.
    """
    n = len(red.coordinates)
    if not d.initial_speeds:
        return np.zeros(n)  # no speeds listed: everything at rest, whatever is engaged
    T, rows, rhs = speed_constraints(d, red, d.initial_positions)
    if n == 0:
        return np.zeros(0)
    A = np.array(rows) if rows else np.zeros((0, n))
    b = np.array(rhs)
    rank = np.linalg.matrix_rank(A, tol=1e-10 * (np.abs(A).max() if A.size else 1.0)) if A.size else 0
    if rank < n:
        _, _, Vt = np.linalg.svd(A if A.size else np.zeros((1, n)))
        null = Vt[rank:].T
        moving = [m for m in range(len(d.members)) if np.abs(T[m] @ null).max() > 1e-9]
        names = ", ".join(repr(d.members[m].name) for m in moving)
        raise DrivetrainError("initial.speeds_rad_s", f"leaves members {names} without a speed: give one of "
                              "them (the engaged elements fix the others)")
    q, *_ = np.linalg.lstsq(A, b, rcond=None)
    res = A @ q - b
    if np.abs(res).max(initial=0.0) > 1e-9 * (1.0 + np.abs(b).max(initial=0.0)):
        raise DrivetrainError("initial.speeds_rad_s", "the listed speeds contradict each other through the "
                              "engaged elements")
    return q


__all__ = ["MAX_COORDINATE_SEARCH", "peel", "reduce", "speed_constraints"]
