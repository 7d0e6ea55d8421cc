"""How the core's kernels are compiled: optimised once on their own, fully in the entry points that link them."""

from __future__ import annotations

from numba import float64, njit

from plant_models.core.jit import JIT, _LinkedOnlyLibrary, kernel


@kernel(**dict(JIT, cache=False))
def _inner(x):
    return x * 2.0 + 1.0


@njit(cache=False)
def _outer(x):
    return _inner(x) - 0.5


def test_a_kernel_is_optimised_once_and_its_caller_fully():
    """numba optimised every kernel's own module twice and again in each caller: a cold compile of the core
    did the LLVM work about twice; the code that runs (the caller's) still gets the full pipeline."""
    assert _outer(3.0) == 6.5 and _inner(3.0) == 7.0
    inner = _inner.overloads[(float64,)].library
    outer = _outer.overloads[(float64,)].library
    assert type(inner) is _LinkedOnlyLibrary
    assert not isinstance(outer, _LinkedOnlyLibrary)


def test_a_kernel_has_no_c_callable_wrapper():
    """Nothing takes a kernel's address: numba built, optimised and emitted a C wrapper for every one."""
    _outer(1.0)
    assert 'cfunc._' not in _inner.overloads[(float64,)].library.get_llvm_str()
    assert 'cfunc._' in _outer.overloads[(float64,)].library.get_llvm_str()  # the check can see one
