"""The compile cache: a program's compiled CPU passes kept on disk, so that a new
process loads them instead of compiling them again.

Numba's own cache (``cache=True``) keys a function by its closure's captured values,
pickled; a pass built from a program's functions captures jitted functions, which
pickle differently in every process, so it never hits. Here each entry point of a
program's passes gets a :class:`DiskCache` keyed by a digest that is stable across
processes: hetgraph's sources, Numba's, llvmlite's, NumPy's and Python's
versions, the program's code key (``ProgramSpec.code_key``), the entry point, its
argument types and the target CPU.

An entry holds, beside the entry point's own compiled code, the code of every
function it calls that Numba compiled on its own (its linked libraries), loaded first:
Numba links a copy of each callee into the caller's code, optimized again there, and
a process that compiles the caller calls the callee's own first-compiled code instead
(the first definition of a symbol wins); the copy can run slower (docs/tuning.md,
"Compile cache"), so a loaded entry point runs the same code as a compiled one.

The entries live in hetgraph's cache directory (:mod:`hetgraph.cachedir`: private
to the user, every file signed). An entry is a Numba compile result, which is a pickle:
it is unpickled only once the cache directory vouched for it (a private file of the
user's, signed with the cache's key). Anything that fails (a check, the unpickling,
Numba's rebuild) is a miss, compiled again, never an error.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import itertools
import logging
import os
import pickle
import secrets
import sys

import llvmlite
import numba
import numpy as np
from numba.core.caching import _Cache
from numba.core.compiler import CompileResult
from numba.core.serialize import dumps

from ...cachedir import PrivateStore, private_store

log = logging.getLogger("hetgraph.kernels")


def _unique_names_across_processes():
    """Start Numba's per-process counter of compiled functions at a random point.

    Numba names a compiled function, and the environment holding its constants, by its
    qualified name, argument types and that counter. A program's passes are closures
    that share their names with every other program's, and a fresh process counts from
    1: two programs compiled each in a process of its own could get the same names, and
    a process loading both then found the first one's environment for the second
    (Numba reuses a live environment of the same name), which read the wrong constants.
    """
    from numba.core.bytecode import FunctionIdentity

    FunctionIdentity._unique_ids = itertools.count(secrets.randbits(62) + 1)


_unique_names_across_processes()


@functools.lru_cache(maxsize=1)
def kernel_digest() -> str:
    """A digest of what every compiled pass depends on beyond its program: hetgraph's
    sources (all of them: an entry written by another version of the package is never
    read, whatever changed) and the versions of Python, NumPy, Numba and llvmlite."""
    digest = hashlib.sha256(repr((sys.version, np.__version__, numba.__version__,
                                  llvmlite.__version__)).encode())
    package = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    for path in sorted(glob.glob(os.path.join(package, "**", "*.py"), recursive=True)):
        digest.update(os.path.relpath(path, package).encode())
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()


class DiskCache(_Cache):
    """Numba's cache interface for one jitted entry point, keyed by ``key`` (a digest
    of the program and the entry point) and each compile's signature; ``on_miss`` is
    called before Numba compiles a signature that was not loaded (the program's own
    checks)."""

    def __init__(self, store: PrivateStore, key: str, on_miss=None):
        self._store, self._key, self._on_miss = store, key, on_miss
        self.loaded = self.saved = 0  # entries loaded and written by this process

    @property
    def cache_path(self):
        return self._store.directory

    def _name(self, sig, codegen):
        return hashlib.sha256(repr((kernel_digest(), self._key, str(sig),
                                    codegen.magic_tuple())).encode()).hexdigest() + ".nbc"

    def load_overload(self, sig, target_context):
        target_context.refresh()
        name = self._name(sig, target_context.codegen())
        payload = self._store.load(name)
        result = None if payload is None else self._rebuild(target_context, name, payload)
        if result is None and self._on_miss is not None:
            self._on_miss()
        elif result is not None:
            self.loaded += 1
        return result

    def _rebuild(self, target_context, name, payload):
        try:  # the payload is signed by this user's key: written by this cache
            reduced, callees = pickle.loads(payload)
            codegen = target_context.codegen()
            for state in callees:
                _load_callee(codegen, state)
            return CompileResult._rebuild(target_context, *reduced)
        except Exception as exc:  # a signed entry that does not load: compiled again
            log.warning("compile cache: entry %s does not load (%s: %s); compiling again",
                        name, type(exc).__name__, exc)
            return None

    def save_overload(self, sig, data):
        if data.lifted or data.library.has_dynamic_globals:  # code that holds addresses
            return
        try:
            payload = dumps((data._reduce(), _callee_states(data.library)))
            self._store.save(self._name(sig, data.codegen), payload)
            self.saved += 1
        except OSError as exc:  # a full disk: the run goes on, compiled in memory
            log.warning("compile cache: cannot write to %s (%s)", self._store.directory,
                        exc)

    def enable(self):
        pass

    def disable(self):
        pass

    def flush(self):
        pass


# callee libraries loaded by this process, by a digest of their object code: kept for
# the process's life (a library's code leaves the JIT when the library is collected,
# and the entry points loaded after it call into it)
_CALLEES: dict = {}


def _callee_states(library) -> tuple:
    """The serialized libraries ``library`` links in, each after those it links in
    itself (the order of their compiles); without those whose object code this process
    does not hold (Numba's runtime, which every process has; a library loaded from a
    cache: the entry's own copy then serves)."""
    states, seen = [], set()

    def visit(lib):
        for callee in lib._linking_libraries:
            if id(callee) not in seen:
                seen.add(id(callee))
                visit(callee)
                try:
                    states.append(callee.serialize_using_object_code())
                except (RuntimeError, ValueError):  # ("no compiled object", "not enabled")
                    pass

    visit(library)
    return tuple(states)


def _load_callee(codegen, state):
    """Add the serialized callee library ``state`` to Numba's JIT, once a process:
    defined first, its functions are those the entry point loaded next calls."""
    key = hashlib.sha256(state[2][0]).digest()
    if key not in _CALLEES:
        _CALLEES[key] = codegen.unserialize_library(state)


def attach(dispatchers: dict, key: str, on_miss=None) -> dict:
    """Give each jitted entry point of ``dispatchers`` ({label: dispatcher}) a
    DiskCache keyed by ``key`` and its label; returns {label: DiskCache}, empty when
    the cache is off or cannot be used."""
    store = private_store()
    if store is None:
        return {}
    caches = {}
    for label, dispatcher in dispatchers.items():
        caches[label] = dispatcher._cache = DiskCache(store, f"{key}:{label}", on_miss)
    return caches
