"""Checkpoints of a run: vertex values, active flags, the iteration reached and the
history so far, with fingerprints of the program, the graph and the execution mode.

Layout: ``DIR/ckpt-<iteration>/`` holds ``checkpoint.json`` (format, version,
fingerprints, sizes, CRC32 of each array, the history) and ``values.bin`` /
``flags.bin`` (raw little-endian arrays, no pickle). ``checkpoint.json`` carries a
SHA-256 of itself, which covers the arrays through their CRC32s: nothing of a
checkpoint can change unseen by accident. With a key (``HETGRAPH_CHECKPOINT_KEY`` in
the environment, or ``Checkpointer(key=...)``), it also carries an HMAC-SHA256 of
itself and a SHA-256 of each array, which nobody without the key can forge (the
manifest's scheme of :mod:`hetgraph.io.manifest`). A checkpoint that fails these
checks or the schema of ``checkpoint.json`` is skipped for an older one.

A checkpoint is written into a temporary directory, every file fsynced, then renamed
into place and the parent directory fsynced, so a crash or a full disk leaves the
previous checkpoint intact; the newest ``keep`` (default ``tuning.CHECKPOINTS_KEPT``)
are kept. Resuming takes the newest checkpoint that reads back whole; one of another
graph, program or mode is refused. A directory belongs to one run at a time: the
first to write or read it holds ``DIR/hetgraph.lock`` (an exclusive ``flock``, with
the run's process and fingerprints written in it) until it ends, and a second run
meanwhile is refused with a CheckpointError.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import socket
import threading
import time
import uuid
import weakref

import numpy as np

from .. import tuning
from ..errors import CheckpointError, HetGraphError
from ..io import manifest as seals
from ..io.store import crc32, sha256
from ..io.text import open_regular
from ..result import HISTORY_COLUMNS, history_row, row_dict

log = logging.getLogger("hetgraph.checkpoint")

FORMAT = "hetgraph-checkpoint"
VERSION = 2  # 2: checkpoint.json carries its checksum (and, keyed, its signature)
PREFIX = "ckpt-"
LOCK = "hetgraph.lock"
KEY_VARIABLE = "HETGRAPH_CHECKPOINT_KEY"  # the environment variable holding a run's key
CHECKSUM = "checkpoint_sha256"
SIGNATURE = "checkpoint_hmac_sha256"
_SEALS = (CHECKSUM, SIGNATURE)
_KEYS = {"format", "version", "iteration", "converged", "graph", "program", "mode",
         "num_vertices", "dtype", "crc32", "history", CHECKSUM}
_ARRAYS = ("values", "flags")
# history columns a row may lack (checkpoints written before they existed): read as 0
_NEWER_COLUMNS = frozenset({"generation_seconds", "transfer_seconds"})
_DTYPE = re.compile(r"[<>|=][fiub][1248]\Z")
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")


def sealed(meta, key=None) -> dict:
    """``meta`` with its checksum, and its signature when a ``key`` is given."""
    if key is not None:
        meta = {**meta, SIGNATURE: seals.signature(meta, key, _SEALS)}
    return {**meta, CHECKSUM: seals.checksum(meta, CHECKSUM)}


def graph_fingerprint(graph) -> str:
    """Identity of a graph's structure and weights: from its store's block checksums
    when it was read from one (no data read), else from checksums of its arrays."""
    digest = hashlib.sha256()
    store = graph.store
    if store is not None:
        m = store.manifest
        digest.update(repr((m["num_vertices"], m["num_arcs"], m["directed"], m["weighted"],
                            sorted((name, e["crc32"]) for name, e in
                                   m["graph_blocks"].items() if not name.startswith("labels")),
                            [sorted((name, e["crc32"]) for name, e in p["blocks"].items())
                             for p in m["pages"]])).encode())
        return "store:" + digest.hexdigest()
    digest.update(repr((graph.num_vertices, graph.num_arcs, graph.directed)).encode())
    for array in (graph.in_indptr, graph.in_indices, graph.in_weights):
        digest.update(b"-" if array is None else str(crc32(array)).encode())
    return "memory:" + digest.hexdigest()


def sampled_crc32(array, samples=None) -> int:
    """CRC32 of at most ``samples`` (default ``tuning.CALIBRATION_KEY_SAMPLES``) evenly
    spaced elements of ``array`` (all of a smaller one): a cheap stand-in for its
    contents where two arrays taken for one cost speed, never an answer (a calibration
    key), and the CRC32 of every element of a large array would cost each run more."""
    if samples is None:
        samples = tuning.CALIBRATION_KEY_SAMPLES
    flat = np.ravel(array)
    return crc32(flat[::max(1, -(-flat.size // samples))])


def _describe(value, digest=crc32):
    """A stable description of a program attribute (no memory addresses); ``digest``
    stands for an array's contents."""
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, digest(value))
    if isinstance(value, (list, tuple)):
        return tuple(_describe(v, digest) for v in value)
    if isinstance(value, dict):  # (a key not a str described and tagged: 1 and "1" differ)
        return tuple(sorted(((k if isinstance(k, str) else ("key", _describe(k, digest)),
                              _describe(v, digest)) for k, v in value.items()),
                            key=_str_keys_first))
    if isinstance(value, (set, frozenset)):  # (sorted: a set's order is its hashes')
        return ("set",) + tuple(sorted((_describe(v, digest) for v in value), key=repr))
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes, range,
                                           slice, np.generic, np.dtype)):
        return repr(value)
    if hasattr(value, "__array__"):  # (a pandas Series of ranks: by its values too)
        try:
            return (type(value).__qualname__,) + _describe(np.asarray(value), digest)
        except (TypeError, ValueError):  # (a device array: by its type, as before)
            pass
    return type(value).__qualname__


def _str_keys_first(item):
    """The order of a described dict's items: str keys first, in their order (as
    checkpoints written before carry them), then the others by their descriptions."""
    key = item[0]
    return (0, key) if isinstance(key, str) else (1, repr(key))


def graph_blind_digest(spec, graph, array_digest=crc32):
    """``array_digest``, but 0 for the arrays that the program derives from ``graph``
    (:meth:`ProgramSpec.derived_arrays`, which sets them on the program, so that every
    identity of it describes them alike, whether or not a run made them before): the
    graph and the parameters say them, and reading them would cost a run time."""
    derived = {id(a) for a in spec.derived_arrays(graph)}

    def digest(array):
        return 0 if id(array) in derived else array_digest(array)
    return digest


def program_fingerprint(spec, array_digest=crc32) -> str:
    """Identity of a program: its class, dtype, monoid, the code of its functions and its
    parameters (instance attributes; an array's contents by ``array_digest``, default
    their CRC32), as a SHA-256 hex digest of :func:`program_identity`."""
    head, code, parameters = program_identity(spec, array_digest)
    digest = hashlib.sha256(repr(head).encode())
    for part in code:
        digest.update(part)
    digest.update(repr(parameters).encode())
    return digest.hexdigest()


def program_identity(spec, array_digest=crc32) -> tuple:
    """What :func:`program_fingerprint` digests, as a hashable tuple: (class, dtype,
    monoid), the digests of its functions' code, its described parameters."""
    program = spec.program
    return ((type(program).__module__, type(program).__qualname__, spec.dtype.str,
             spec.reduce),
            tuple(_code_digest(fn.__code__) for fn in (spec.gather, spec.apply,
                                                       spec.activate)),
            _describe(vars(program), array_digest))


_CODE_DIGESTS: dict = {}  # id(code) -> (code, its digest): a class's code, once a process
_CODE_DIGESTS_KEPT = 1024  # (programs made in a loop must not grow it without bound)


def _code_digest(code) -> bytes:
    """The bytes that stand for a function's ``code`` in a fingerprint (its bytecode,
    constants and the names it reads: ``min`` and ``max`` differ in them alone),
    described once per code object, not again for every checkpointed run's
    fingerprint."""
    kept = _CODE_DIGESTS.get(id(code))
    if kept is None or kept[0] is not code:
        if len(_CODE_DIGESTS) >= _CODE_DIGESTS_KEPT:
            _CODE_DIGESTS.clear()
        # (no names: the bytes of the fingerprints that earlier checkpoints carry)
        names = repr(code.co_names).encode() if code.co_names else b""
        kept = _CODE_DIGESTS[id(code)] = (
            code, code.co_code + repr(_describe(list(code.co_consts))).encode() + names)
    return kept[1]


class Checkpointer:
    """Writes and reads the checkpoints of one run in ``directory``.

    ``every``: iterations between checkpoints (default 10); ``keep``: how many to keep
    (default ``tuning.CHECKPOINTS_KEPT``). ``graph_fp``/``program_fp``: fingerprints;
    ``mode``: "sync"/"async". ``key`` (bytes or str): signs what is written and is
    required of what is read; default the environment's ``HETGRAPH_CHECKPOINT_KEY``,
    none when unset.
    """

    def __init__(self, directory, *, every=10, keep=None, graph_fp, program_fp, mode,
                 key=None):
        if not isinstance(every, (int, np.integer)) or every < 1:
            raise CheckpointError(f"checkpoint_every={every!r} must be an integer >= 1")
        self.directory = os.path.abspath(os.fspath(directory))
        self.every = int(every)
        self.keep = tuning.CHECKPOINTS_KEPT if keep is None else keep
        self.identity = {"graph": graph_fp, "program": program_fp, "mode": mode}
        if key is None:
            key = os.environ.get(KEY_VARIABLE) or None
        self.key = key
        self.last = None  # the iteration of the last checkpoint written
        self._token = uuid.uuid4().hex  # this run's hold on its directory, once taken

    def due(self, iteration) -> bool:
        return iteration % self.every == 0

    def next_due(self, iteration) -> int:
        """The first iteration >= ``iteration`` after which a checkpoint is written."""
        return -(-iteration // self.every) * self.every

    # writing ---------------------------------------------------------------------------
    def save(self, iteration, values, flags, history, converged=False):
        """Write the checkpoint of ``iteration`` atomically; CheckpointError (the previous
        checkpoints untouched) if it cannot be written or another run holds the
        directory."""
        final = os.path.join(self.directory, f"{PREFIX}{iteration:09d}")
        tmp = os.path.join(self.directory, f".{PREFIX}{iteration:09d}.partial-{uuid.uuid4().hex[:8]}")
        try:
            os.makedirs(self.directory, exist_ok=True)
            _hold(self)
            os.makedirs(tmp)
            arrays = {"values": np.ascontiguousarray(values),
                      "flags": np.ascontiguousarray(flags, dtype=np.uint8)}
            meta = {"format": FORMAT, "version": VERSION, "iteration": int(iteration),
                    "converged": bool(converged), **self.identity,
                    "num_vertices": int(len(values)), "dtype": arrays["values"].dtype.str,
                    "crc32": {name: crc32(a) for name, a in arrays.items()},
                    "history": [{k: _plain(v) for k, v in row_dict(row).items()}
                                for row in history]}
            if self.key is not None:
                meta["sha256"] = {name: sha256(a) for name, a in arrays.items()}
            for name, array in arrays.items():
                _write(os.path.join(tmp, f"{name}.bin"), memoryview(array).cast("B"))
            _write(os.path.join(tmp, "checkpoint.json"),
                   json.dumps(sealed(meta, self.key)).encode())
            _fsync_dir(tmp)
            if os.path.exists(final):
                shutil.rmtree(final)
            os.rename(tmp, final)
            _fsync_dir(self.directory)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            if isinstance(exc, CheckpointError):
                raise
            raise CheckpointError(f"{final}: writing the checkpoint of iteration {iteration} "
                                  f"failed ({exc}); the previous checkpoints are intact. "
                                  f"Free space or choose another directory") from exc
        self.last = iteration
        for old in self._checkpoints()[self.keep:]:
            shutil.rmtree(old, ignore_errors=True)
        log.info("checkpoint of iteration %d written to %s", iteration, final)

    # reading ---------------------------------------------------------------------------
    def _checkpoints(self):
        """Checkpoint directories, newest first."""
        if not os.path.isdir(self.directory):
            return []
        names = sorted((n for n in os.listdir(self.directory) if n.startswith(PREFIX)),
                       reverse=True)
        return [os.path.join(self.directory, n) for n in names]

    def load(self, num_vertices, dtype):
        """The newest checkpoint that reads back whole, as a dict (iteration, converged,
        history, values, flags); None when there is none. Damaged or edited checkpoints
        are skipped with a warning; one of another run is refused (CheckpointError), as
        is a directory another run holds."""
        found = self._checkpoints()
        if found:
            try:
                _hold(self)
            except CheckpointError:
                raise
            except OSError as exc:
                raise CheckpointError(f"{self.directory}: cannot take its lock file ({exc}); "
                                      "check the directory's permissions") from exc
        damaged = []
        for path in found:
            try:
                return self._read(path, num_vertices, np.dtype(dtype))
            except _Damaged as exc:
                log.warning("%s", exc)
                damaged.append(str(exc))
        if damaged:
            raise CheckpointError(f"{self.directory}: no checkpoint reads back whole "
                                  f"({'; '.join(damaged)}); delete the directory to start "
                                  f"over")
        return None

    def _read(self, path, num_vertices, dtype):
        meta = _load_json(os.path.join(path, "checkpoint.json"))
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise _Damaged(f"{path}: not a hetgraph checkpoint")
        version = meta.get("version")
        if type(version) is not int or version > VERSION:
            raise CheckpointError(f"{path}: checkpoint format version {version!r}"
                                  f" is newer than this hetgraph reads ({VERSION}); upgrade "
                                  f"hetgraph or delete the checkpoint")
        if version < VERSION:
            raise _Damaged(f"{path}: written in checkpoint format {version}, without the "
                           f"checksum of format {VERSION}")
        _Schema(path, meta).check()
        for key, what in (("graph", "another graph"), ("program", "another program or "
                                                       "other parameters"),
                          ("mode", f"mode={meta.get('mode')!r}")):
            if meta.get(key) != self.identity[key]:
                raise CheckpointError(f"{path}: this checkpoint belongs to a run of {what}; "
                                      f"resume with the same graph, program and mode, or "
                                      f"use another checkpoint directory")
        if meta["num_vertices"] != num_vertices or np.dtype(meta["dtype"]) != dtype:
            raise CheckpointError(f"{path}: checkpoint holds {meta['num_vertices']} values of "
                                  f"{meta['dtype']}, the run has {num_vertices} of {dtype}")
        self._check_seal(path, meta)
        arrays = {name: _read_array(os.path.join(path, f"{name}.bin"), dt, num_vertices,
                                    meta, self.key is not None)
                  for name, dt in (("values", dtype), ("flags", np.dtype(np.uint8)))}
        return {"iteration": meta["iteration"], "converged": meta["converged"],
                "history": [history_row(**row) for row in meta["history"]], **arrays}

    def _check_seal(self, path, meta):
        """_Damaged unless ``meta`` matches its checksum, and with a key its signature."""
        file = os.path.join(path, "checkpoint.json")
        if meta.get(CHECKSUM) != seals.checksum(meta, CHECKSUM):
            raise _Damaged(f"{file}: checksum does not match its contents (edited or "
                           "damaged)")
        if self.key is None:
            return
        if SIGNATURE not in meta or "sha256" not in meta:
            raise _Damaged(f"{file}: not signed, and {KEY_VARIABLE} (a key) is set")
        if not seals.signature_matches(meta, self.key, _SEALS):
            raise _Damaged(f"{file}: signature does not match the key (another key, or "
                           "the checkpoint was altered)")


class _Damaged(Exception):
    """A checkpoint that does not read back whole (skipped for an older one)."""


class _Schema:
    """The checks of one checkpoint.json; each failure names the key (_Damaged)."""

    def __init__(self, path, meta):
        self.path, self.m = path, meta

    def fail(self, key, what):
        raise _Damaged(f"{self.path}: checkpoint.json key {key!r} {what}")

    def check(self):
        m = self.m
        for key in sorted(_KEYS - set(m)):
            self.fail(key, "is missing")
        for key in sorted(set(m) - _KEYS - {"sha256", SIGNATURE}):
            self.fail(key, "is not a checkpoint key")
        for key, kinds in (("iteration", (int,)), ("num_vertices", (int,)),
                           ("converged", (bool,)), ("graph", (str,)), ("program", (str,)),
                           ("mode", (str,)), ("dtype", (str,)), ("history", (list,))):
            if type(m[key]) not in kinds or (kinds == (int,) and m[key] < 0):
                self.fail(key, f"is {str(m[key])[:80]!r}, not "
                               f"{'a count' if kinds == (int,) else kinds[0].__name__}")
        if not _DTYPE.match(m["dtype"]):
            self.fail("dtype", f"is {m['dtype'][:40]!r}, not a numeric dtype")
        self.digests("crc32", lambda v: type(v) is int and 0 <= v < 2**32)
        if "sha256" in m:
            self.digests("sha256", lambda v: isinstance(v, str) and _HEX64.match(v))
        self.history()

    def digests(self, key, valid):
        value = self.m[key]
        if not isinstance(value, dict) or set(value) != set(_ARRAYS) or \
                not all(valid(v) for v in value.values()):
            self.fail(key, f"is {str(value)[:80]!r}, not a digest of each of {_ARRAYS}")

    def history(self):
        rows = self.m["history"]
        if len(rows) != self.m["iteration"]:
            self.fail("history", f"has {len(rows)} rows for {self.m['iteration']} iterations")
        scalars = (int, float, str, bool, type(None))
        for i, row in enumerate(rows):
            if not isinstance(row, dict) or not set(row) <= set(HISTORY_COLUMNS) or \
                    not set(HISTORY_COLUMNS) - set(row) <= _NEWER_COLUMNS or \
                    not all(type(v) in scalars for v in row.values()):
                self.fail("history", f"row {i} is not a history row of plain values")
            if row["iteration"] != i + 1:
                self.fail("history", f"row {i} is of iteration {str(row['iteration'])[:20]}, "
                                     f"not {i + 1}")


def _load_json(file):
    """checkpoint.json's contents; _Damaged when it cannot be read or parsed."""
    try:
        with open_regular(file) as f:
            return json.loads(f.read())
    except HetGraphError as exc:
        raise _Damaged(f"{file}: {exc.what if hasattr(exc, 'what') else exc}") from None
    except (OSError, ValueError, RecursionError) as exc:
        raise _Damaged(f"{file}: checkpoint.json is unreadable ({type(exc).__name__}: "
                       f"{str(exc)[:200]})") from None


def _read_array(file, dtype, count, meta, keyed):
    """The array in ``file``: a regular file of ``count`` values, matching its digests in
    ``meta`` (_Damaged otherwise)."""
    name = os.path.basename(file)[:-len(".bin")]
    try:
        with open_regular(file) as f:
            if os.fstat(f.fileno()).st_size != count * dtype.itemsize:
                raise _Damaged(f"{file}: damaged (size mismatch)")
            array = np.fromfile(f, dtype=dtype, count=count)
    except HetGraphError as exc:
        raise _Damaged(f"{file}: {getattr(exc, 'what', exc)}") from None
    except (OSError, ValueError) as exc:
        raise _Damaged(f"{file}: unreadable ({exc})") from None
    if len(array) != count or crc32(array) != meta["crc32"][name] or \
            (keyed and sha256(array) != meta["sha256"][name]):
        raise _Damaged(f"{file}: damaged (size, CRC32 or SHA-256 mismatch)")
    return array


# one run per directory ---------------------------------------------------------------------
_HELD = {}  # real directory -> {"fd", "thread", "token", "owner": weakref to a Checkpointer}
_HELD_LOCK = threading.Lock()


def _hold(checkpointer):
    """Make ``checkpointer``'s run the holder of its directory, or raise CheckpointError
    when another run holds it: a process by the lock file's ``flock``; in this process,
    a Checkpointer still alive in another live thread (a thread runs one run at a
    time, so one of its own earlier runs has ended, even if its frames are kept)."""
    import fcntl

    directory = os.path.realpath(checkpointer.directory)
    me = threading.get_ident()
    with _HELD_LOCK:
        held = _HELD.get(directory)
        if held is not None and held["token"] == checkpointer._token:
            return
        if held is not None:
            owner = held["owner"]()
            alive = {t.ident for t in threading.enumerate()}
            if owner is not None and held["thread"] != me and held["thread"] in alive:
                raise _in_use(checkpointer.directory, f"thread {held['thread']} of this "
                                                      "process")
            fd = held["fd"]
        else:
            fd = os.open(os.path.join(directory, LOCK),
                         os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # (other errors: the lock cannot be taken at all)
                holder = os.pread(fd, 4096, 0).decode("utf-8", "replace")
                os.close(fd)
                raise _in_use(checkpointer.directory, _describe_holder(holder)) from None
        _HELD[directory] = {"fd": fd, "thread": me, "token": checkpointer._token,
                            "owner": weakref.ref(checkpointer)}
        weakref.finalize(checkpointer, _release, directory, checkpointer._token)
    record = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                         "since": time.strftime("%Y-%m-%d %H:%M:%S"),
                         **checkpointer.identity}).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, record, 0)


def _release(directory, token):
    """Give up the directory held by the run of ``token`` (its Checkpointer is gone)."""
    with _HELD_LOCK:
        held = _HELD.get(directory)
        if held is not None and held["token"] == token:
            del _HELD[directory]
            os.close(held["fd"])  # ends the flock


def _describe_holder(text):
    try:
        holder = json.loads(text)
        return f"process {int(holder['pid'])} on {str(holder['host'])[:80]} since " \
               f"{str(holder['since'])[:40]}"
    except (ValueError, TypeError, KeyError):
        return "a process that left no details"


def _in_use(directory, holder):
    return CheckpointError(f"{directory}: checkpoint directory is in use by another run "
                           f"({holder}); wait for it to end, or give this run another "
                           "checkpoint directory")


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
