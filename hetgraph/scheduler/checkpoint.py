"""Checkpoints of a run: vertex values, active flags, the iteration reached and the
history so far, with fingerprints of the program, the graph and the execution mode.

Layout: ``DIR/ckpt-<iteration>/`` holds ``checkpoint.json`` (format, version,
fingerprints, sizes, CRC32 of each array) and ``values.bin`` / ``flags.bin`` (raw
little-endian arrays, no pickle). A checkpoint is written into a temporary directory,
every file fsynced, then renamed into place and the parent directory fsynced, so a
crash or a full disk leaves the previous checkpoint intact; the newest ``keep``
(default ``tuning.CHECKPOINTS_KEPT``) are kept. Resuming takes the newest checkpoint
that reads back whole; one of another graph, program or mode is refused.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import uuid

import numpy as np

from .. import tuning
from ..errors import CheckpointError
from ..io.store import crc32
from ..result import history_row, row_dict

log = logging.getLogger("hetgraph.checkpoint")

FORMAT = "hetgraph-checkpoint"
VERSION = 1
PREFIX = "ckpt-"


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
    if isinstance(value, dict):
        return tuple(sorted((str(k), _describe(v, digest)) for k, v in value.items()))
    if value is None or isinstance(value, (bool, int, float, str, np.generic, np.dtype)):
        return repr(value)
    return type(value).__qualname__


def program_fingerprint(spec, array_digest=crc32) -> str:
    """Identity of a program: its class, dtype, monoid, the code of its functions and its
    parameters (instance attributes; an array's contents by ``array_digest``, default
    their CRC32)."""
    program = spec.program
    digest = hashlib.sha256()
    digest.update(repr((type(program).__module__, type(program).__qualname__,
                        spec.dtype.str, spec.reduce)).encode())
    for fn in (spec.gather, spec.apply, spec.activate):
        code = fn.__code__
        digest.update(code.co_code + repr(_describe(list(code.co_consts))).encode())
    digest.update(repr(_describe(vars(program), array_digest)).encode())
    return digest.hexdigest()


class Checkpointer:
    """Writes and reads the checkpoints of one run in ``directory``.

    ``every``: iterations between checkpoints (default 10); ``keep``: how many to keep
    (default ``tuning.CHECKPOINTS_KEPT``). ``graph_fp``/``program_fp``: fingerprints;
    ``mode``: "sync"/"async".
    """

    def __init__(self, directory, *, every=10, keep=None, graph_fp, program_fp, mode):
        if not isinstance(every, (int, np.integer)) or every < 1:
            raise CheckpointError(f"checkpoint_every={every!r} must be an integer >= 1")
        self.directory = os.path.abspath(os.fspath(directory))
        self.every = int(every)
        self.keep = tuning.CHECKPOINTS_KEPT if keep is None else keep
        self.identity = {"graph": graph_fp, "program": program_fp, "mode": mode}
        self.last = None  # the iteration of the last checkpoint written

    def due(self, iteration) -> bool:
        return iteration % self.every == 0

    def next_due(self, iteration) -> int:
        """The first iteration >= ``iteration`` after which a checkpoint is written."""
        return -(-iteration // self.every) * self.every

    # writing ---------------------------------------------------------------------------
    def save(self, iteration, values, flags, history, converged=False):
        """Write the checkpoint of ``iteration`` atomically; CheckpointError (the previous
        checkpoints untouched) if it cannot be written."""
        final = os.path.join(self.directory, f"{PREFIX}{iteration:09d}")
        tmp = os.path.join(self.directory, f".{PREFIX}{iteration:09d}.partial-{uuid.uuid4().hex[:8]}")
        try:
            os.makedirs(tmp)
            arrays = {"values": np.ascontiguousarray(values),
                      "flags": np.ascontiguousarray(flags, dtype=np.uint8)}
            meta = {"format": FORMAT, "version": VERSION, "iteration": int(iteration),
                    "converged": bool(converged), **self.identity,
                    "num_vertices": int(len(values)), "dtype": arrays["values"].dtype.str,
                    "crc32": {name: crc32(a) for name, a in arrays.items()},
                    "history": [{k: _plain(v) for k, v in row_dict(row).items()}
                                for row in history]}
            for name, array in arrays.items():
                _write(os.path.join(tmp, f"{name}.bin"), memoryview(array).cast("B"))
            _write(os.path.join(tmp, "checkpoint.json"), json.dumps(meta).encode())
            _fsync_dir(tmp)
            if os.path.exists(final):
                shutil.rmtree(final)
            os.rename(tmp, final)
            _fsync_dir(self.directory)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
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
        history, values, flags); None when there is none. Damaged checkpoints are
        skipped with a warning; one of another run is refused (CheckpointError)."""
        found = self._checkpoints()
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
        try:
            with open(os.path.join(path, "checkpoint.json")) as f:
                meta = json.load(f)
        except (OSError, ValueError) as exc:
            raise _Damaged(f"{path}: checkpoint.json is unreadable ({exc})") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise _Damaged(f"{path}: not a hetgraph checkpoint")
        if not isinstance(meta.get("version"), int) or meta["version"] > VERSION:
            raise CheckpointError(f"{path}: checkpoint format version {meta.get('version')!r}"
                                  f" is newer than this hetgraph reads ({VERSION}); upgrade "
                                  f"hetgraph or delete the checkpoint")
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
        arrays = {}
        for name, dt in (("values", dtype), ("flags", np.uint8)):
            file = os.path.join(path, f"{name}.bin")
            try:
                array = np.fromfile(file, dtype=dt)
            except (OSError, ValueError) as exc:
                raise _Damaged(f"{file}: unreadable ({exc})") from None
            if len(array) != num_vertices or crc32(array) != meta["crc32"][name]:
                raise _Damaged(f"{file}: damaged (size or CRC32 mismatch)")
            arrays[name] = array
        return {"iteration": meta["iteration"], "converged": meta["converged"],
                "history": [history_row(**row) for row in meta["history"]], **arrays}


class _Damaged(Exception):
    """A checkpoint that does not read back whole (skipped for an older one)."""


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
