"""The compile cache: a program's compiled CPU passes kept on disk, so that a new
process loads them instead of compiling them again.

Numba's own cache (``cache=True``) keys a function by its closure's captured values,
pickled; a pass built from a program's functions captures jitted functions, which
pickle differently in every process, so it never hits. Here each entry point of a
program's passes gets a :class:`DiskCache` keyed by a digest that is stable across
processes: hetgraph's CPU kernel sources, Numba's, llvmlite's, NumPy's and Python's
versions, the program's code key (``ProgramSpec.code_key``), the entry point, its
argument types and the target CPU.

Where: ``$HETGRAPH_CACHE`` (``off``: no disk cache), else ``$XDG_CACHE_HOME/hetgraph``,
else ``~/.cache/hetgraph``, a directory of the user's own with mode 0700. An entry is a
Numba compile result, which is a pickle; it is unpickled only when it is a regular file
owned by the user, writable by no one else, and signed (HMAC-SHA256) with the cache's
key, 32 random bytes in a file of the user's (mode 0600) in that directory: a corrupt,
truncated, foreign or renamed entry fails the check and is compiled again. Anything that
fails (a check, the unpickling, Numba's rebuild) is a miss, never an error.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import hmac
import logging
import os
import pickle
import stat
import sys
import tempfile
import warnings

import llvmlite
import numba
import numpy as np
from numba.core.caching import _Cache
from numba.core.compiler import CompileResult
from numba.core.serialize import dumps

log = logging.getLogger("hetgraph.kernels")

_MAGIC = b"hetgraph-numba-1\n"
_KEY_BYTES = 32
_MAC_BYTES = hashlib.sha256().digest_size
_OFF = "off"


def cache_directory():
    """The compile cache's directory (see the module docstring), or None when
    ``$HETGRAPH_CACHE`` is ``off``."""
    given = os.environ.get("HETGRAPH_CACHE")
    if given:
        return None if given.strip().lower() == _OFF else os.path.abspath(given)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                           ".cache")
    return os.path.join(base, "hetgraph")


@functools.lru_cache(maxsize=1)
def kernel_digest() -> str:
    """A digest of what every compiled pass depends on beyond its program: the CPU
    kernels' sources and the versions of Python, NumPy, Numba and llvmlite."""
    digest = hashlib.sha256(repr((sys.version, np.__version__, numba.__version__,
                                  llvmlite.__version__)).encode())
    for path in sorted(glob.glob(os.path.join(os.path.dirname(__file__), "*.py"))):
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()


class _Store:
    """One cache directory, checked: the user's own, mode 0700, with its signing key."""

    def __init__(self, directory):
        self.directory = directory
        os.makedirs(directory, mode=0o700, exist_ok=True)
        info = os.stat(directory)
        if not stat.S_ISDIR(info.st_mode) or not _owned(info):
            raise PermissionError(f"{directory} is not a directory of this user's")
        if stat.S_IMODE(info.st_mode) & 0o077:  # ours: made private, as documented
            os.chmod(directory, 0o700)
        self.key = self._key()

    def _key(self) -> bytes:
        """The signing key: read, or made once (linked into place, so that processes
        starting together agree on one)."""
        path = os.path.join(self.directory, "key")
        key = _read_private(path)
        if key is None:
            self._write(path, os.urandom(_KEY_BYTES), replace=False)
            key = _read_private(path)
        if key is None or len(key) != _KEY_BYTES:
            raise PermissionError(f"{path} is not a private key file of this user's")
        return key

    def _write(self, path, data, replace=True):
        """Write ``data`` to ``path`` through a private temporary file: an entry
        appears whole or not at all; ``replace``: over an existing one."""
        fd, temporary = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            if replace:
                os.replace(temporary, path)
            else:
                try:
                    os.link(temporary, path)
                except FileExistsError:
                    pass
        finally:
            if not replace or os.path.exists(temporary):
                _remove(temporary)

    def path(self, name):
        return os.path.join(self.directory, name + ".nbc")

    def load(self, name):
        """The payload of entry ``name``, or None (missing, or failing a check)."""
        data = _read_private(self.path(name))
        if data is None or not data.startswith(_MAGIC):
            return None
        mac = data[len(_MAGIC):len(_MAGIC) + _MAC_BYTES]
        payload = data[len(_MAGIC) + _MAC_BYTES:]
        if not hmac.compare_digest(mac, self._sign(name, payload)):
            log.warning("compile cache: %s fails its signature; compiling again",
                        self.path(name))
            return None
        return payload

    def save(self, name, payload):
        self._write(self.path(name), _MAGIC + self._sign(name, payload) + payload)

    def _sign(self, name, payload):
        return hmac.new(self.key, name.encode() + b"\0" + payload, hashlib.sha256).digest()


def _owned(info) -> bool:
    """Whether a file is the user's own (where the system has owners)."""
    return not hasattr(os, "getuid") or info.st_uid == os.getuid()


def _read_private(path):
    """The bytes of ``path`` when it is a regular file of the user's that no one else
    can write, else None."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or not _owned(info) or \
                (hasattr(os, "getuid") and info.st_mode & 0o022):
            log.warning("compile cache: %s is not a private file of this user's; "
                        "ignored", path)
            return None
        return f.read()


def _remove(path):
    try:
        os.unlink(path)
    except OSError:
        pass


@functools.lru_cache(maxsize=4)
def _store(directory):
    """The checked store of ``directory``, or None when it cannot be used (warned once
    per process: runs then compile in memory, as without a cache)."""
    try:
        return _Store(directory)
    except OSError as exc:
        warnings.warn(f"hetgraph's compile cache is off in this process: {exc} (set "
                      f"HETGRAPH_CACHE to a directory of your own, or to off)",
                      RuntimeWarning, stacklevel=2)
        return None


class DiskCache(_Cache):
    """Numba's cache interface for one jitted entry point, keyed by ``key`` (a digest
    of the program and the entry point) and each compile's signature; ``on_miss`` is
    called before Numba compiles a signature that was not loaded (the program's own
    checks)."""

    def __init__(self, store: _Store, key: str, on_miss=None):
        self._store, self._key, self._on_miss = store, key, on_miss
        self.loaded = self.saved = 0  # entries loaded and written by this process

    @property
    def cache_path(self):
        return self._store.directory

    def _name(self, sig, codegen):
        return hashlib.sha256(repr((kernel_digest(), self._key, str(sig),
                                    codegen.magic_tuple())).encode()).hexdigest()

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
            return CompileResult._rebuild(target_context, *pickle.loads(payload))
        except Exception as exc:  # a signed entry that does not load: compiled again
            log.warning("compile cache: entry %s does not load (%s: %s); compiling again",
                        name, type(exc).__name__, exc)
            return None

    def save_overload(self, sig, data):
        if data.lifted or data.library.has_dynamic_globals:  # code that holds addresses
            return
        try:
            self._store.save(self._name(sig, data.codegen), dumps(data._reduce()))
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


def attach(dispatchers: dict, key: str, on_miss=None) -> dict:
    """Give each jitted entry point of ``dispatchers`` ({label: dispatcher}) a
    DiskCache keyed by ``key`` and its label; returns {label: DiskCache}, empty when
    the cache is off or cannot be used."""
    directory = cache_directory()
    store = None if directory is None else _store(directory)
    if store is None:
        return {}
    caches = {}
    for label, dispatcher in dispatchers.items():
        caches[label] = dispatcher._cache = DiskCache(store, f"{key}:{label}", on_miss)
    return caches
