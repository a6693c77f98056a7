"""On-disk page store: a directory with a versioned JSON manifest and binary data blocks
spread over one or more stripe directories (one per disk) by a hash of (page, block).

Layout::

    STORE/manifest.json              format, version, sizes, partition, block table
    STRIPE/<store-id>/<block>.bin    raw little-endian arrays (no pickle anywhere)

Without ``stripes`` the only stripe is ``STORE/data``. Every block has a CRC32 that is
verified when it is read (memory-mapped). A store is written into temporary directories
and renamed into place at the end, so a failed write leaves nothing behind.

Nothing read from a store is trusted (:mod:`hetgraph.io.manifest` checks the manifest):
a block is read only from a regular file inside its stripe directory (no link out of
it), an external stripe directory holds a marker with its store's id (an overwrite
deletes only directories that hold it), and every array is checked for the structure
the kernels rely on (pointers, vertex ids, finite weights) before a kernel reads it:
the graph's pointers when the store is opened, a page's blocks when first read.

:func:`save` is the "pagestore" writer of :mod:`hetgraph.registry`, which
:meth:`hetgraph.Graph.save` calls: the graph type cannot import this module, whose
PageStore builds Graphs.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import stat
import threading
import time
import uuid
import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import registry, tuning
from ..csr import ids_error, pointer_error, weights_error
from ..errors import ChecksumError, HetGraphError, OutOfCoreError, StoreError
from ..graph import Graph
from ..partition import Page, Partition, offsets_mismatch, partition
from ..version import __version__
from . import manifest as manifests
from .manifest import FORMAT, MANIFEST, VERSION  # noqa: F401 (the store's format)
from .limits import available_memory
from .readers import read
from .text import open_regular

_MAKING = threading.RLock()  # a store's pointers and partition are made once, by one thread
STRIPE_MARKER = ".hetgraph-stripe"  # in an external stripe directory: its store's id
OWNER = ".owner"  # in a save's temporary root while it writes: its process, host, store id
RETRY = "store changed while reading: retry"


def crc32(array) -> int:
    """CRC32 of an array's bytes (in chunks of ``tuning.CRC_CHUNK`` bytes)."""
    view = memoryview(np.ascontiguousarray(array)).cast("B")
    crc = 0
    chunk = tuning.CRC_CHUNK
    for i in range(0, len(view), chunk):
        crc = zlib.crc32(view[i:i + chunk], crc)
    return crc


def sha256(array) -> str:
    """SHA-256 (hex) of an array's bytes: what a signed store records per block."""
    return hashlib.sha256(memoryview(np.ascontiguousarray(array)).cast("B")).hexdigest()


def stripe_of(page: int, block: str, stripes: int) -> int:
    """Stripe directory index of a block: a stable hash of (page, block)."""
    return zlib.crc32(f"{page}:{block}".encode()) % stripes


def _block_name(page, block):
    return f"graph.{block}.bin" if page < 0 else f"p{page:07d}.{block}.bin"


class _Writer:
    """Writes blocks into temporary stripe directories; ``commit`` renames them in."""

    def __init__(self, path, stripes, key=None):
        self.path = os.path.abspath(os.fspath(path))
        self.key = key
        self.store_id = uuid.uuid4().hex
        parent = os.path.dirname(self.path)
        if not os.path.isdir(parent):
            raise StoreError(f"{parent}: directory does not exist; create it first")
        self.tmp_root = os.path.join(parent, f".{os.path.basename(self.path)}.partial-{self.store_id[:8]}")
        if stripes:
            self.stripes = [os.path.abspath(os.fspath(s)) for s in stripes]
            for s in self.stripes:
                if not os.path.isdir(s):
                    raise StoreError(f"{s}: stripe directory does not exist; create it first")
            self.final_dirs = [os.path.join(s, manifests.stripe_name(self.path, self.store_id))
                               for s in self.stripes]
            self.tmp_dirs = [d + ".partial" for d in self.final_dirs]
        else:
            self.stripes = None
            self.final_dirs = [os.path.join(self.path, "data")]
            self.tmp_dirs = [os.path.join(self.tmp_root, "data")]
        _clean_stale(self.path, self.stripes)
        os.makedirs(self.tmp_root)
        with open(os.path.join(self.tmp_root, OWNER), "w") as f:
            json.dump({"pid": os.getpid(), "host": os.uname().nodename,
                       "store_id": self.store_id}, f)
        for d in self.tmp_dirs:
            os.makedirs(d, exist_ok=True)
            if self.stripes:
                with open(os.path.join(d, STRIPE_MARKER), "w") as f:
                    f.write(self.store_id)
        self.committed = []

    def write(self, page, block, array, fsync=False):
        stripe = stripe_of(page, block, len(self.tmp_dirs))
        name = _block_name(page, block)
        array = np.ascontiguousarray(array)
        with open(os.path.join(self.tmp_dirs[stripe], name), "wb") as f:
            f.write(memoryview(array).cast("B"))
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        entry = {"stripe": stripe, "file": name, "dtype": array.dtype.str,
                 "count": int(array.size), "bytes": int(array.nbytes), "crc32": crc32(array)}
        if self.key is not None:
            entry["sha256"] = sha256(array)
        return entry

    def commit(self, manifest, overwrite):
        with open(os.path.join(self.tmp_root, MANIFEST), "w") as f:
            manifests.dump(manifest, f, self.key)
            f.flush()
            os.fsync(f.fileno())
        old = None
        if os.path.lexists(self.path):
            if not overwrite:
                raise StoreError(f"{self.path}: already exists; pass overwrite=True or "
                                 "choose another path")
            old_stripes = _replaced_stripes(self.path)
            old = self.path + f".old-{self.store_id[:8]}"
            os.rename(self.path, old)
        if self.stripes:
            for tmp, final in zip(self.tmp_dirs, self.final_dirs):
                os.rename(tmp, final)
                self.committed.append(final)
        os.unlink(os.path.join(self.tmp_root, OWNER))
        os.rename(self.tmp_root, self.path)
        if old:
            _remove_replaced(old, old_stripes)

    def abort(self):
        for d in self.tmp_dirs + self.committed + [self.tmp_root]:
            shutil.rmtree(d, ignore_errors=True)


def _replaced_stripes(path):
    """The external stripe directories of the store at ``path`` that an overwrite
    deletes: each must hold the marker with that store's id. Refuses (StoreError,
    nothing changed) a directory that is not a store, or a store naming a stripe
    directory it did not create."""
    if not os.path.isdir(path) or os.path.islink(path):
        return []  # a file or a link: replaced itself, nothing followed
    manifest_path = os.path.join(path, MANIFEST)
    if not os.path.isfile(manifest_path):
        if os.listdir(path):
            raise StoreError(f"{path}: is a directory with files but no page store "
                             "(no manifest.json); nothing was deleted. Remove it yourself "
                             "or choose another path")
        return []
    try:
        with open(manifest_path, "rb") as f:
            manifest = json.loads(f.read())
        store_id, dirs = manifest["store_id"], manifest["stripe_dirs"]
    except (OSError, ValueError, RecursionError, TypeError, KeyError):
        return []  # unreadable: only the store's own directory goes
    if not isinstance(dirs, list) or dirs == ["data"]:
        return []
    for d in dirs:
        if isinstance(d, str) and not os.path.lexists(d):
            continue  # gone already: nothing to delete
        if not _own_stripe(d, store_id):
            raise StoreError(
                f"{path}: the store being replaced names stripe directory {str(d)[:200]!r}, "
                f"which it did not create (no {STRIPE_MARKER} with its id); nothing was "
                "deleted. Remove the old store yourself or choose another path")
    return dirs


def _own_stripe(directory, store_id) -> bool:
    """Whether ``directory`` is a real directory (not a link) holding the marker of the
    store ``store_id``."""
    if not (isinstance(directory, str) and isinstance(store_id, str) and
            os.path.isabs(directory) and not os.path.islink(directory) and
            os.path.isdir(directory)):
        return False
    try:
        with open(os.path.join(directory, STRIPE_MARKER)) as f:
            return f.read(64) == store_id
    except OSError:
        return False


def _remove_replaced(path, stripes):
    """Remove a replaced store (renamed to ``path``) and its own stripe directories."""
    for d in stripes:
        shutil.rmtree(d, ignore_errors=True)
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):  # (a cleaning save was first)
            os.unlink(path)


def _clean_stale(path, stripes):
    """Remove what earlier saves to ``path``, killed midway, left behind: their
    temporary roots (``.NAME.partial-ID``) and, in ``stripes`` (this save's), their own
    stripe directories; a replaced store (``NAME.old-ID``) is removed when its
    replacement is in place, put back when none is. What a save still running (its
    owner process alive, or another host's) has made is left alone."""
    parent, base = os.path.split(path)
    current = _store_id(path)
    pattern = re.compile(r"(\.?)" + re.escape(base) + r"(\.partial-|\.old-)([0-9a-f]{8})\Z")
    for name in sorted(os.listdir(parent)):  # temporary roots (".") before replaced stores
        match = pattern.match(name)
        full = os.path.join(parent, name)
        if not match or os.path.islink(full) or (match.group(1) == ".") != \
                (match.group(2) == ".partial-"):
            continue
        short = match.group(3)
        owner = _stale_owner(os.path.join(parent, f".{base}.partial-{short}"))
        if owner is None:
            continue
        if match.group(2) == ".partial-":
            store_id = owner.get("store_id")
            for s in stripes or ():
                for d in (f"{base}-{short}.partial", f"{base}-{short}"):
                    if current != store_id and _own_stripe(os.path.join(s, d), store_id):
                        shutil.rmtree(os.path.join(s, d), ignore_errors=True)
            shutil.rmtree(full, ignore_errors=True)
        elif current is not None and current.startswith(short):
            with contextlib.suppress(StoreError):  # (a store naming others' stripes stays)
                _remove_replaced(full, _replaced_stripes(full))
        elif current is None and not os.path.lexists(path):
            os.rename(full, path)
            current = _store_id(path)


def _stale_owner(tmp_root):
    """The owner record of a save's temporary root when that save is over (its process
    gone from this host, or no record and older than ``tuning.STALE_PARTIAL_SECONDS``;
    {} for a root that no longer exists), None while it may still run."""
    if not os.path.isdir(tmp_root):
        return {}
    try:
        with open(os.path.join(tmp_root, OWNER)) as f:
            owner = json.loads(f.read(4096))
        pid, host = int(owner["pid"]), str(owner["host"])
    except (OSError, ValueError, TypeError, KeyError):
        old = time.time() - os.stat(tmp_root).st_mtime > tuning.STALE_PARTIAL_SECONDS
        return {} if old else None
    if host != os.uname().nodename:
        return None  # another machine's save on a shared disk: its process is unknown here
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return owner
    except OSError:
        pass  # alive, another user's
    return None


def _store_id(path):
    """The store id in the manifest at ``path``, None when there is none to read."""
    try:
        with open_regular(os.path.join(path, MANIFEST)) as f:
            store_id = json.loads(f.read()).get("store_id")
    except (OSError, ValueError, AttributeError, RecursionError, HetGraphError):
        return None
    return store_id if isinstance(store_id, str) else None


def _identity(path):
    """(device, inode) of the directory at ``path``; None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None


def _save_under_way(path) -> bool:
    """Whether a save to ``path`` has left its marks beside it (a temporary root or a
    replaced store): a reader that found no store may have come between its renames."""
    parent, base = os.path.split(path)
    try:
        names = os.listdir(parent)
    except OSError:
        return False
    return any(n.startswith((f".{base}.partial-", f"{base}.old-")) for n in names)


def _label_blocks(labels):
    """Labels as blocks: int64 array, or UTF-8 bytes + int64 offsets for strings."""
    if labels is None:
        return "none", {}
    if labels.dtype.kind in "iu":
        return "int", {"labels": labels.astype(np.int64)}
    encoded = [str(x).encode("utf-8") for x in labels]
    offsets = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return "str", {"labels_utf8": np.frombuffer(b"".join(encoded), np.uint8),
                   "labels_offsets": offsets}


def _write_page(writer, graph, part, p, fsync):
    """Write page ``p`` of ``graph`` (its partition ``part``); returns its manifest
    entry."""
    page = part.page(p, graph.in_indices, graph.in_weights)
    v0, v1 = page.vertex_start, page.vertex_stop
    o0, o1 = int(graph.out_indptr[v0]), int(graph.out_indptr[v1])
    blocks = {
        "src": writer.write(p, "src", page.src, fsync),
        "dst_offset": writer.write(p, "dst_offset", page.dst_offset, fsync),
        "out_dst": writer.write(p, "out_dst", graph.out_indices[o0:o1], fsync),
    }
    if graph.weighted:
        blocks["weight"] = writer.write(p, "weight", page.weight, fsync)
    return {"vertex_start": v0, "vertex_stop": v1, "edge_start": page.edge_start,
            "edge_stop": page.edge_stop, "out_edge_start": o0, "out_edge_stop": o1,
            "blocks": blocks}


@registry.writer("pagestore")
def save(graph: Graph, path, *, stripes=None, page_bytes=None, overwrite=False,
         fsync=False, key=None, **partition_options):
    """Write ``graph`` as a page store at ``path`` (what :meth:`hetgraph.Graph.save`
    does).

    Parameters
    ----------
    graph : Graph
    path : str or os.PathLike
        The store's directory; its parent must exist.
    stripes : list of paths, optional
        Directories (one per disk) to spread the data blocks over; default
        ``path/data``.
    page_bytes : int, optional
        Edge bytes per page; default ``tuning.PAGE_BYTES`` (32 MiB).
    overwrite : bool
        Replace a store already at ``path``. Default False.
    fsync : bool
        Flush every block to disk. Default False.
    key : bytes or str, optional
        Sign the store with this secret (HMAC-SHA256 of the manifest, SHA-256 of every
        block), for a store that travels through untrusted hands: open it with
        ``PageStore(path, key=...)`` or ``open_store(path, key=...)``. Default: unsigned
        (a checksum and CRC32s catch accidents only).
    **partition_options
        Go to :func:`hetgraph.partition.partition`.

    Returns
    -------
    PageStore
        The written store, opened. Its pages are written in ``tuning.LOAD_THREADS``
        threads.

    Raises
    ------
    StoreError
        When ``path`` exists (without ``overwrite``), a directory is missing or a write
        fails; nothing is left behind.

    Examples
    --------
    >>> import tempfile, os
    >>> import hetgraph as hg
    >>> g = hg.datasets.load("wiki-vote")
    >>> store = g.save(os.path.join(tempfile.mkdtemp(), "wiki"), page_bytes=256 << 10)
    >>> store.num_vertices, store.num_pages > 1
    (7115, True)
    """
    part = partition(graph, page_bytes=page_bytes, **partition_options)
    writer = _Writer(path, stripes, key)
    try:
        label_kind, label_arrays = _label_blocks(graph.labels)
        graph_blocks = {
            "in_indptr": writer.write(-1, "in_indptr", graph.in_indptr, fsync),
            "out_indptr": writer.write(-1, "out_indptr", graph.out_indptr, fsync),
            "shard_start": writer.write(-1, "shard_start", part.shard_start, fsync),
            "replication": writer.write(-1, "replication", part.replication, fsync),
            "page_shard": writer.write(-1, "page_shard", part.page_shard, fsync),
        }
        for name, arr in label_arrays.items():
            graph_blocks[name] = writer.write(-1, name, arr, fsync)
        threads = max(1, min(tuning.LOAD_THREADS, os.cpu_count() or 1, part.num_pages))
        with ThreadPoolExecutor(threads) as pool:  # (offsets, CRC32 and writes: no GIL)
            pages = list(pool.map(lambda p: _write_page(writer, graph, part, p, fsync),
                                  range(part.num_pages)))
        manifest = {
            "format": FORMAT, "version": VERSION, "hetgraph_version": __version__,
            "store_id": writer.store_id, "name": graph.name,
            "num_vertices": graph.num_vertices, "num_arcs": graph.num_arcs,
            "directed": graph.directed, "weighted": graph.weighted,
            "index_dtype": graph.index_dtype.str, "labels": label_kind,
            "partition": part.options,
            "stripe_dirs": writer.final_dirs if stripes else ["data"],
            "graph_blocks": graph_blocks, "pages": pages,
        }
        writer.commit(manifest, overwrite)
    except OSError as exc:
        writer.abort()
        if isinstance(exc, StoreError):
            raise
        raise StoreError(f"{path}: writing the page store failed ({exc}); nothing was "
                         "left behind. Free space or choose another directory") from exc
    except BaseException:
        writer.abort()
        raise
    return PageStore(path, key=key)


class PageStore:
    """An opened page store: verified, memory-mapped reads of its blocks and pages.

    ``key`` (bytes or str, optional): the secret the store was signed with; given, the
    manifest's signature and every block's SHA-256 are checked (StoreError if the store
    is unsigned or altered)."""

    def __init__(self, path, key=None):
        self.path = os.path.abspath(os.fspath(path))
        found = _identity(self.path)
        try:
            if found is None:
                # between a save's two renames: its marks beside it, or a store by now
                if _save_under_way(self.path) or os.path.isdir(self.path):
                    raise StoreError(f"{self.path}: {RETRY} (a save is replacing it)")
                raise StoreError(f"{self.path}: no page store here (not a directory); "
                                 "write one with Graph.save or `hetgraph convert`")
            m = manifests.load(os.path.join(self.path, MANIFEST))
        except StoreError as exc:
            # (a save may have replaced the directory since it was found: its marks
            # gone by now, the path a new store)
            if found is not None and (_identity(self.path) != found or
                                      _save_under_way(self.path)):
                raise StoreError(f"{self.path}: {RETRY} (a save is replacing it)") from exc
            raise
        if key is not None:
            manifests.check_signature(os.path.join(self.path, MANIFEST), m, key)
        self.signed = key is not None
        self.manifest = m
        self.stripe_dirs = [os.path.join(self.path, d) if d == "data" else d
                            for d in m["stripe_dirs"]]
        self._real_stripes = [self._stripe_root(d) for d in self.stripe_dirs]
        self.num_vertices = m["num_vertices"]
        self.num_arcs = m["num_arcs"]
        self.directed = m["directed"]
        self.weighted = m["weighted"]
        self.index_dtype = np.dtype(m["index_dtype"])
        self._partition = None
        self._pointers = None
        self._checked = set()  # (page, block) whose structure was checked
        self._read_ratio = None

    def _stripe_root(self, directory):
        """The real path of a stripe directory: ``data`` must resolve inside the store,
        an external one must hold this store's marker."""
        real = os.path.realpath(directory)
        if directory == os.path.join(self.path, "data"):
            inside = real.startswith(os.path.realpath(self.path) + os.sep)
            if os.path.lexists(directory) and not inside:
                raise StoreError(f"{directory}: the store's data directory links out of the "
                                 "store; write the store again")
        elif os.path.lexists(directory) and not _own_stripe(directory, self.manifest["store_id"]):
            raise StoreError(f"{directory}: stripe directory of {self.path} is not this "
                             f"store's (a link, or no {STRIPE_MARKER} with its id); restore "
                             "it or write the store again")
        return real

    @property
    def num_pages(self) -> int:
        return len(self.manifest["pages"])

    def block_path(self, entry):
        """Path of a block's file, checked to be a regular file inside its stripe
        directory (links out of it refused) with the manifest's size."""
        path = os.path.join(self.stripe_dirs[entry["stripe"]], entry["file"])
        if not os.path.lexists(path):
            raise StoreError(f"{path}: data block is missing; restore it or rewrite the store")
        if not os.path.realpath(path).startswith(self._real_stripes[entry["stripe"]] + os.sep):
            raise StoreError(f"{path}: data block links out of its stripe directory; "
                             "restore the file or rewrite the store")
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise StoreError(f"{path}: data block is not a regular file; restore it or "
                             "rewrite the store")
        size = info.st_size
        if size != entry["bytes"]:
            raise StoreError(f"{path}: data block has {size} bytes, the manifest says "
                             f"{entry['bytes']} (truncated?); rewrite the store")
        return path

    def _verified(self, path, array, entry):
        if crc32(array) != entry["crc32"]:
            raise ChecksumError(f"{path}: data block is corrupt (CRC32 mismatch); "
                                "restore it or rewrite the store")
        if self.signed and sha256(array) != entry["sha256"]:
            raise ChecksumError(f"{path}: data block does not match the signed store's "
                                "SHA-256 (altered); do not use the store")
        return array

    def _open_block(self, entry):
        """(path, open file) of a block: :meth:`block_path`'s checks, then the file opened
        without following a link (one swapped in after those checks is refused) and
        checked again on the open descriptor: a regular file of the manifest's size,
        inside its stripe directory."""
        path = self.block_path(entry)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK |
                         getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise StoreError(f"{path}: data block is a link (it was swapped in while "
                                 "reading); restore the file or rewrite the store") from exc
            raise
        f = os.fdopen(fd, "rb", buffering=0)
        try:
            info = os.fstat(fd)
            where = f"/proc/self/fd/{fd}"
            real = os.readlink(where) if os.path.exists(where) else os.path.realpath(path)
            if not real.startswith(self._real_stripes[entry["stripe"]] + os.sep):
                raise StoreError(f"{path}: data block links out of its stripe directory; "
                                 "restore the file or rewrite the store")
            if not stat.S_ISREG(info.st_mode) or info.st_size != entry["bytes"]:
                raise StoreError(f"{path}: data block is not a regular file of "
                                 f"{entry['bytes']} bytes; rewrite the store")
        except BaseException:
            f.close()
            raise
        return path, f

    @contextlib.contextmanager
    def _retry_if_replaced(self):
        """Errors of a read inside, as StoreError: "store changed while reading: retry"
        when the store at this path is no longer the one opened (another process
        replaced or removed it meanwhile)."""
        try:
            yield
        except (OSError, ValueError) as exc:
            if _store_id(self.path) != self.manifest["store_id"]:
                raise StoreError(f"{self.path}: {RETRY} (another process replaced or "
                                 "removed the store)") from exc
            if isinstance(exc, StoreError):
                raise
            raise StoreError(f"{self.path}: reading a data block failed ({exc}); check "
                             "the disk, or rewrite the store") from exc

    def read_block(self, entry, verify=True):
        """Memory-map one block and verify its size and CRC32; errors name the file."""
        with self._retry_if_replaced():
            path, f = self._open_block(entry)
            with f:
                dtype = np.dtype(entry["dtype"])
                if entry["count"] == 0:
                    return np.empty(0, dtype)
                array = np.memmap(f, dtype=dtype, mode="r", shape=(entry["count"],))
            return self._verified(path, array, entry) if verify else array

    def fetch_block(self, entry, verify=True):
        """Read one block into a new array (not memory-mapped) and verify it (unless not
        ``verify``: see :meth:`verify_page_block`). The block is then dropped from the
        OS page cache: an out-of-core run's own page cache is what keeps data in
        memory, within its budget."""
        with self._retry_if_replaced():
            path, f = self._open_block(entry)
            array = np.empty(entry["count"], np.dtype(entry["dtype"]))
            view = memoryview(array).cast("B")
            with f:
                done = 0
                while done < len(view):
                    got = f.readinto(view[done:])
                    if not got:
                        raise StoreError(f"{path}: data block ended after {done} bytes, "
                                         f"the manifest says {len(view)}; rewrite the store")
                    done += got
                drop_os_cache(f.fileno())
            return self._verified(path, array, entry) if verify else array

    def page_block(self, p, name, fetch=False):
        """Block ``name`` of page ``p``, verified and its structure checked (the first
        time this process reads it): memory-mapped, or read into a new array when
        ``fetch`` (see :meth:`fetch_block`)."""
        if fetch:
            return self.verify_page_block(p, name, self.read_page_block(p, name))
        return self._checked_once(p, name, self.read_block(self.page_blocks(p)[name]))

    def read_page_block(self, p, name):
        """Block ``name`` of page ``p`` read into a new array, not yet verified: what
        :meth:`verify_page_block` takes (see :meth:`fetch_block`)."""
        return self.fetch_block(self.page_blocks(p)[name], verify=False)

    def verify_page_block(self, p, name, array):
        """``array``, block ``name`` of page ``p`` as :meth:`read_page_block` read it,
        once its CRC32 (and SHA-256 if signed) and structure are checked: a reader
        can go on reading while another thread checks."""
        entry = self.page_blocks(p)[name]
        with self._retry_if_replaced():
            path = os.path.join(self.stripe_dirs[entry["stripe"]], entry["file"])
            return self._checked_once(p, name, self._verified(path, array, entry))

    def _checked_once(self, p, name, array):
        """``array`` (block ``name`` of page ``p``), its structure checked the first time
        this process reads it."""
        if (p, name) not in self._checked:
            self._check_block(p, name, array)
            self._checked.add((p, name))
        return array

    def _check_block(self, p, name, array):
        """Vertex ids in [0, N), finite weights, destination offsets as the pointers
        imply: what the kernels index with."""
        if name in ("src", "out_dst"):
            error = ids_error(array, self.num_vertices)
        elif name == "weight":
            error = weights_error(array)
        else:
            part = self.partition()
            starts = part.shard_start[part.page_shard[p]:part.page_shard[p + 1] + 1]
            bad = offsets_mismatch(part.in_indptr, starts, array)
            error = None if bad < 0 else f"differs from the pointers at edge {bad} of the page"
        if error:
            raise StoreError(f"{self.block_path(self.page_blocks(p)[name])}: block {name} "
                             f"of page {p}: {error}; the store is damaged or was edited: "
                             "write it again")

    def pointers(self):
        """(in_indptr, out_indptr) in memory, checked with the shard and page tables
        against each other and the manifest (once per store object)."""
        with _MAKING:  # (a page cache's checking threads may ask at once)
            if self._pointers is None:
                arrays = {name: np.array(self.graph_block(name)) for name in
                          ("in_indptr", "out_indptr", "shard_start", "page_shard")}
                error = self._pointers_error(arrays)
                if error:
                    raise StoreError(f"{self.path}: {error}; the store is damaged or was "
                                     "edited: write it again")
                self._pointers = arrays["in_indptr"], arrays["out_indptr"]
        return self._pointers

    def _pointers_error(self, arrays):
        """What is wrong with the graph's pointer and shard arrays, None if nothing."""
        n, pages = self.num_vertices, self.manifest["pages"]
        shards = len(arrays["shard_start"]) - 1
        for name, total in (("in_indptr", self.num_arcs), ("out_indptr", self.num_arcs),
                            ("shard_start", n), ("page_shard", shards)):
            error = pointer_error(arrays[name], total)
            if error:
                return f"block {name} {error}"
        replication = self.graph_block("replication")
        if len(replication) and replication.min() < 1:
            return "block replication holds a factor below 1"
        starts = arrays["shard_start"][arrays["page_shard"]]
        for p, page in enumerate(pages):
            v0 = int(starts[p])
            expected = (v0, int(starts[p + 1]), int(arrays["in_indptr"][v0]),
                        int(arrays["out_indptr"][v0]))
            if expected != (page["vertex_start"], page["vertex_stop"], page["edge_start"],
                            page["out_edge_start"]):
                return f"page {p}'s ranges in the manifest disagree with the pointer blocks"
        return None

    def page_blocks(self, p):
        """{block name: manifest entry} of page ``p``."""
        if not 0 <= p < self.num_pages:
            raise StoreError(f"{self.path}: page {p} does not exist "
                             f"(the store has {self.num_pages} pages)")
        return self.manifest["pages"][p]["blocks"]

    @property
    def data_bytes(self) -> int:
        """Bytes of every data block (the graph's size on disk)."""
        entries = list(self.manifest["graph_blocks"].values())
        entries += [e for page in self.manifest["pages"] for e in page["blocks"].values()]
        return sum(e["bytes"] for e in entries)

    def read_ratio(self, seconds=0.5):
        """k: sequential over random read speed of this store's disk(s) (Garaph 4.2),
        measured once (about ``seconds``) on its largest blocks with the OS cache
        dropped: 4 MiB sequential reads vs 4 KiB reads at random offsets."""
        if self._read_ratio is None:
            entries = sorted((e for page in self.manifest["pages"]
                              for e in page["blocks"].values()), key=lambda e: -e["bytes"])
            paths = [self.block_path(e) for e in entries[:64] if e["bytes"]]
            self._read_ratio = measure_read_ratio(paths, seconds) if paths else 1.0
        return self._read_ratio

    def graph_block(self, name):
        return self.read_block(self.manifest["graph_blocks"][name])

    def partition(self) -> Partition:
        """The stored shard and page tables (checked, see :meth:`pointers`)."""
        with _MAKING:
            if self._partition is None:
                self._partition = Partition(
                    self.pointers()[0], self.graph_block("shard_start"),
                    self.graph_block("replication"), self.graph_block("page_shard"),
                    weighted=self.weighted, index_dtype=self.index_dtype,
                    options=self.manifest["partition"])
        return self._partition

    def page(self, p) -> Page:
        """Read page ``p`` (verified, memory-mapped)."""
        part = self.partition()
        return part.page_from_arrays(p, self.page_block(p, "src"),
                                     self.page_block(p, "dst_offset"),
                                     self.page_block(p, "weight") if self.weighted else None)

    def labels(self):
        kind = self.manifest["labels"]
        if kind == "none":
            return None
        if kind == "int":
            return np.array(self.graph_block("labels"))
        data = bytes(self.graph_block("labels_utf8"))
        off = self.graph_block("labels_offsets")
        error = pointer_error(off, len(data))
        out = np.empty(len(off) - 1, dtype=object)
        try:
            out[:] = [data[off[i]:off[i + 1]].decode("utf-8") for i in range(len(off) - 1)]
        except UnicodeDecodeError as exc:
            error = error or f"holds a label that is not UTF-8 ({exc})"
        if error:
            raise StoreError(f"{self.path}: block labels_offsets {error}; the store is "
                             "damaged or was edited: write it again")
        return out

    def load(self) -> Graph:
        """The whole graph in memory (every block verified; the pages' blocks read and
        checked in ``tuning.LOAD_THREADS`` threads: CRC32 and the id checks release the
        interpreter)."""
        pages = range(self.num_pages)
        in_indptr, out_indptr = self.pointers()
        self.partition()  # (made once, before the threads need it)
        threads = max(1, min(tuning.LOAD_THREADS, os.cpu_count() or 1, len(pages)))
        with ThreadPoolExecutor(threads) as pool:
            def cat(name, dtype):
                return np.concatenate(list(pool.map(lambda p: self.page_block(p, name),
                                                    pages))) if pages else np.empty(0, dtype)

            g = Graph(in_indptr.copy(), cat("src", self.index_dtype),
                      cat("weight", np.float32) if self.weighted else None,
                      out_indptr.copy(), cat("out_dst", self.index_dtype),
                      directed=self.directed, labels=self.labels(),
                      name=self.manifest.get("name"))
        g.store = self
        return g

    def verify(self) -> int:
        """Check the whole store without running anything: every block's size and
        CRC32, the pointers, shard and page tables, labels, and every page's vertex
        ids, weights and destination offsets. Returns the bytes checked; raises
        StoreError (or ChecksumError) naming what is wrong."""
        self.pointers()
        for entry in self.manifest["graph_blocks"].values():
            self.read_block(entry)
        self.labels()
        for p in range(self.num_pages):
            for name in self.page_blocks(p):
                self._check_block(p, name, self.read_block(self.page_blocks(p)[name]))
        return self.data_bytes

    def page_vertices(self) -> np.ndarray:
        """(pages, 2) int64: first and end vertex of every page."""
        pages = self.manifest["pages"]
        return np.array([[p["vertex_start"], p["vertex_stop"]] for p in pages],
                        np.int64).reshape(-1, 2)

    def stored_graph(self) -> "StoredGraph":
        """The graph with only its per-vertex arrays in memory; edges stay on disk and
        are read page by page by an out-of-core run."""
        return StoredGraph(self)

    def __repr__(self):
        return (f"<hetgraph.PageStore {self.path}: {self.num_vertices:,} vertices, "
                f"{self.num_arcs:,} arcs, {self.num_pages} pages over "
                f"{len(self.stripe_dirs)} stripe(s)>")


class StoredGraph(Graph):
    """A graph whose edges stay in its page store: degrees, labels and the CSC/CSR
    pointers are in memory (about 16 bytes per vertex), the edges are read page by
    page. Runs on it go out of core (:mod:`hetgraph.engines.store`); operations
    that need every edge in memory raise OutOfCoreError."""

    def __init__(self, store: PageStore):
        in_indptr, out_indptr = store.pointers()
        super().__init__(in_indptr.copy(), None, None, out_indptr.copy(), None,
                         directed=store.directed, labels=store.labels(),
                         name=store.manifest.get("name"))
        self.store = store

    @property
    def num_arcs(self) -> int:
        return self.store.num_arcs

    @property
    def weighted(self) -> bool:
        return self.store.weighted

    @property
    def index_dtype(self) -> np.dtype:
        return self.store.index_dtype

    @property
    def nbytes(self) -> int:
        return self.in_indptr.nbytes + self.out_indptr.nbytes + \
            (0 if self.labels is None else self.labels.nbytes)

    def in_edge_blocks(self):
        for p, page in enumerate(self.store.manifest["pages"]):
            yield (page["edge_start"], self.store.page_block(p, "src", fetch=True),
                   self.store.page_block(p, "weight", fetch=True) if self.weighted else None)

    def _needs_memory(self, what):
        raise OutOfCoreError(f"{self.store.path}: {what} needs the whole graph in memory "
                             f"and this graph is read from its store page by page; load "
                             f"it with hg.open_store(path) if it fits in memory")

    @property
    def num_self_loops(self) -> int:
        return self._needs_memory("counting self-loops")

    def to_scipy(self):
        return self._needs_memory("to_scipy")

    def edges(self):
        return self._needs_memory("edges()")

    def to_undirected(self):
        if not self.directed:
            return self
        return self._needs_memory("the undirected version of a directed graph (e.g. for "
                                  "weakly connected components)")

    def partition(self, **options):
        return self._needs_memory("a new partition")

    def out_weights(self):
        return self._needs_memory("the out-edges' weights")

    def reorder(self, order="degree"):
        return self._needs_memory("renumbering the vertices (reorder before saving)")

    def save(self, path, stripes=None, **options):
        return self._needs_memory("saving")

    def summary(self) -> str:
        kind = "directed" if self.directed else "undirected"
        w = "weighted" if self.weighted else "unweighted"
        return (f"{self.name + ': ' if self.name else ''}{kind} {w} graph on disk, "
                f"{self.num_vertices:,} vertices, {self.num_arcs:,} arcs, "
                f"{self.store.data_bytes / 2**20:.1f} MiB in {self.store.num_pages} pages")


def drop_os_cache(fd):
    """Tell the OS to drop its cached pages of the file open as ``fd`` (Linux)."""
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


def measure_read_ratio(paths, seconds=0.5, chunk=4 << 20, small=4096, seed=0):
    """Sequential / random read speed (bytes per second) over ``paths`` with their OS
    cache dropped first: ``chunk``-byte reads in order, then ``small``-byte reads at
    random aligned offsets, each for about half of ``seconds``. At least 1."""
    def timed(reads):
        total, start = 0, time.perf_counter()
        for fd, offset, size in reads:
            total += len(os.pread(fd, size, offset))
            if time.perf_counter() - start > seconds / 2:
                break
        return total / max(time.perf_counter() - start, 1e-9)

    fds = [os.open(p, os.O_RDONLY) for p in paths]
    try:
        for fd in fds:
            drop_os_cache(fd)
        sizes = [os.fstat(fd).st_size for fd in fds]
        sequential = timed((fd, off, chunk) for fd, size in zip(fds, sizes)
                           for off in range(0, size, chunk))
        for fd in fds:
            drop_os_cache(fd)
        rng = np.random.default_rng(seed)
        pick = rng.integers(0, len(fds), 1 << 16)
        random = timed((fds[i], int(rng.integers(0, max(sizes[i] // small, 1))) * small, small)
                       for i in pick)
        for fd in fds:
            drop_os_cache(fd)
    finally:
        for fd in fds:
            os.close(fd)
    return max(1.0, sequential / max(random, 1.0))


def as_graph(graph, host_budget=None):
    """A Graph for a run: ``graph`` itself, or a PageStore loaded into memory when its
    data fits ``host_budget`` bytes (default: half the memory available now), else
    its :class:`StoredGraph` (out of core)."""
    if not isinstance(graph, PageStore):
        return graph
    if host_budget is None:
        host_budget = available_memory() // 2
    return graph.load() if graph.data_bytes <= host_budget else graph.stored_graph()


def open_store(path, key=None) -> Graph:
    """Open the page store at ``path`` and load its graph into memory.

    Parameters
    ----------
    path : str or os.PathLike
        A directory written by :meth:`Graph.save` or ``hetgraph convert``.
    key : bytes or str, optional
        The secret a signed store was written with (see :func:`save`); given, its
        signature and every block's SHA-256 are checked.

    Returns
    -------
    Graph
        Every block verified; ``graph.store`` keeps the PageStore for page-wise access.

    Raises
    ------
    StoreError
        When there is no store, its manifest is damaged or edited, a block is missing,
        truncated, outside the store or breaks the graph's structure, or (with ``key``)
        the store is unsigned or its signature does not match.
    ChecksumError
        When a block's CRC32 does not match.
    StoreVersionError
        When the store was written by a newer format version.

    Examples
    --------
    >>> import tempfile, os
    >>> import hetgraph as hg
    >>> path = os.path.join(tempfile.mkdtemp(), "grid")
    >>> _ = hg.generate.grid(3, 4).save(path)
    >>> hg.open_store(path).num_vertices
    12
    """
    return PageStore(path, key=key).load()


def convert(source, path, *, stripes=None, overwrite=False, format=None, page_bytes=None,
            order="none", **read_options):
    """Read the graph file ``source`` and write it as a page store at ``path``, its
    vertices renumbered by ``order`` first ("none", "auto" or "degree"; see
    :meth:`hetgraph.Graph.reorder`).

    Reading finishes (and validates) before anything is written, and writing is atomic,
    so a bad input or a failed write leaves no store behind.
    """
    graph = read(source, format=format, **read_options).reorder(order)
    return save(graph, path, stripes=stripes, overwrite=overwrite, page_bytes=page_bytes)
