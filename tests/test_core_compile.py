"""How the core's kernels are compiled: optimised once on their own, fully in the entry points that link them."""

from __future__ import annotations

import json

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


KERNEL = '''
from plant_models.core.jit import JIT, kernel


@kernel(**JIT)
def halve(x):
    return 0.5 * x
'''

PROBE = '''
import json, sys
sys.path.insert(0, sys.argv[1])
from numba import float64
from numba.core import event
from numba.core.registry import CPUDispatcher
import halving

compiled = []


class Listener(event.Listener):
    def on_start(self, ev):
        pass

    def on_end(self, ev):
        compiled.append(ev.data["dispatcher"].py_func.__name__)


event.register("numba:compile", Listener())
print("started", flush=True)
if sys.argv[2] == "kernel":
    halving.halve.compile((float64,))
else:  # numba's own compile, which takes no lock: the other process's compiling, in the test
    CPUDispatcher.compile(halving.halve, (float64,))
print(json.dumps(compiled), flush=True)
'''


def test_a_kernel_another_process_compiles_is_waited_for_and_loaded_not_compiled_twice(tmp_path):
    """The warm-up's two processes compile the core's kernels at once: a kernel one of them is compiling
    is loaded by the other when it is done, not compiled a second time (a lock file beside its cache)."""
    import fcntl
    import os
    import subprocess
    import sys
    import time

    (tmp_path / "halving.py").write_text(KERNEL)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))

    def start(how):
        proc = subprocess.Popen([sys.executable, "-c", PROBE, str(tmp_path), how], env=env, stdout=subprocess.PIPE,
                                text=True)
        assert proc.stdout.readline() == "started\n"
        return proc

    first = start("kernel")  # creates the cache folder and the lock file; compiles and caches the kernel
    assert json.loads(first.communicate(timeout=60)[0]) == ["halve"]
    for f in (tmp_path / "cache").rglob("*.nbi"):
        f.unlink()  # forgotten again: the next one must compile or load what another process compiles
    (index,) = {str(f)[: -len(".lock")] for f in (tmp_path / "cache").rglob("*.lock")} or {None}
    assert index is not None  # the lock file the kernel's compile took
    with open(index + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # as another process does while it compiles the kernel
        waiter = start("kernel")
        time.sleep(0.5)
        assert waiter.poll() is None  # it waits
        compiler = start("numba")
        assert json.loads(compiler.communicate(timeout=60)[0]) == ["halve"]
    assert json.loads(waiter.communicate(timeout=60)[0]) == []  # loaded from the cache, nothing compiled
