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
        """Only the compiles' ends are counted."""

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


def _library(cls, name: str, ir_text: str):
    """A code library of numba's codegen holding ``ir_text``, made of class ``cls``, finalized."""
    from llvmlite import binding as ll
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.registry import cpu_target

    with global_compiler_lock:
        codegen = cpu_target.target_context.codegen()
        library = codegen.create_library(name)
        library.__class__ = cls
        module = ll.parse_assembly(ir_text)
        module.triple = ll.get_process_triple()
        library.add_llvm_module(module)
        library.finalize()
    return library


def test_an_entry_point_calls_its_own_optimised_copies_of_the_kernels():
    """A kernel linked into an entry point is a weak (linkonce_odr) copy, and the loader bound the entry's calls
    to a definition of that name loaded before it: the kernel's own, cheaply optimised module (the step called
    the -O0 copy of its force evaluation nine times a sub-step).  The entry's copies are now internal, under
    names of their own: a definition of the same name elsewhere (here one that adds 100) is never called."""
    import ctypes
    import re

    from numba.core.codegen import JITCodeLibrary

    from plant_models.core.jit import _EntryLibrary

    _library(JITCodeLibrary, "probe_kernel_own", """
define i64 @probe_kernel(i64 %x) noinline {
  %y = add i64 %x, 100
  ret i64 %y
}""")
    entry = _library(_EntryLibrary, "probe_entry", """
define linkonce_odr i64 @probe_kernel(i64 %x) noinline {
  %y = add i64 %x, 1
  ret i64 %y
}
define i64 @probe_entry(i64 %x) {
  %r = call i64 @probe_kernel(i64 %x)
  ret i64 %r
}""")
    text = entry.get_llvm_str()
    assert "linkonce_odr" not in text
    assert re.search(r'define internal [^@]*@"?probe_kernel\.entry\.[0-9a-f]{12}', text)
    call = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(entry.get_pointer_to_function("probe_entry"))
    assert call(41) == 42


def test_kernel_count_counts_every_entry_point_a_cold_compile_goes_through():
    """kernel_count added two entry points of three (the mode solver's was missing): a cold compile of the
    core went through one function more than a progress display's total said.  Its count is the stages'
    kernels plus one per entry point entry_addresses compiles, and equals the core's total recorded from a
    real cold compile (server/cli/warmup_profile.json, bench/bench_warmup_eta.py --record)."""
    from plant_models.core import api, entry

    stage_kernels = api.kernel_count() - len(entry.entry_points())
    names = {f.__name__ for f, _ in entry.entry_points()}
    assert names == {"step_entry", "start_entry", "solve_entry"}
    assert len(entry.entry_addresses()) == len(entry.entry_points())
    from server.cli.warmup_progress import PROFILE_PATH

    profiles = json.loads(PROFILE_PATH.read_text())
    for profile in profiles.values():
        recorded = {key.split(":")[2] for key in profile["shares"] if key.split(":")[1] == "core"}
        assert names <= recorded  # each entry point was compiled in the recorded cold compile
        assert profile["totals"]["core"] == stage_kernels + len(names) == api.kernel_count()
