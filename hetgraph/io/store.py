"""On-disk page store: a directory with a versioned JSON manifest and binary data blocks
spread over one or more stripe directories (one per disk) by a hash of (page, block).

Layout::

    STORE/manifest.json              format, version, sizes, partition, block table
    STRIPE/<store-id>/<block>.bin    raw little-endian arrays (no pickle anywhere)

Without ``stripes`` the only stripe is ``STORE/data``. Every block has a CRC32 that is
verified when it is read (memory-mapped). A store is written into temporary directories
and renamed into place at the end, so a failed write leaves nothing behind.

:func:`save` is the "pagestore" writer of :mod:`hetgraph.registry`, which
:meth:`hetgraph.Graph.save` calls: the graph type cannot import this module, whose
PageStore builds Graphs.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
import zlib

import numpy as np

from .. import registry, tuning
from ..errors import ChecksumError, OutOfCoreError, StoreError, StoreVersionError
from ..graph import Graph
from ..partition import Page, Partition, partition
from ..version import __version__
from .readers import read

FORMAT = "hetgraph-pagestore"
VERSION = 1
MANIFEST = "manifest.json"


def crc32(array) -> int:
    """CRC32 of an array's bytes (in chunks of ``tuning.CRC_CHUNK`` bytes)."""
    view = memoryview(np.ascontiguousarray(array)).cast("B")
    crc = 0
    chunk = tuning.CRC_CHUNK
    for i in range(0, len(view), chunk):
        crc = zlib.crc32(view[i:i + chunk], crc)
    return crc


def stripe_of(page: int, block: str, stripes: int) -> int:
    """Stripe directory index of a block: a stable hash of (page, block)."""
    return zlib.crc32(f"{page}:{block}".encode()) % stripes


def _block_name(page, block):
    return f"graph.{block}.bin" if page < 0 else f"p{page:07d}.{block}.bin"


class _Writer:
    """Writes blocks into temporary stripe directories; ``commit`` renames them in."""

    def __init__(self, path, stripes):
        self.path = os.path.abspath(os.fspath(path))
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
            self.final_dirs = [os.path.join(s, f"{os.path.basename(self.path)}-{self.store_id[:8]}")
                               for s in self.stripes]
            self.tmp_dirs = [d + ".partial" for d in self.final_dirs]
        else:
            self.stripes = None
            self.final_dirs = [os.path.join(self.path, "data")]
            self.tmp_dirs = [os.path.join(self.tmp_root, "data")]
        os.makedirs(self.tmp_root)
        for d in self.tmp_dirs:
            os.makedirs(d, exist_ok=True)
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
        return {"stripe": stripe, "file": name, "dtype": array.dtype.str,
                "count": int(array.size), "bytes": int(array.nbytes), "crc32": crc32(array)}

    def commit(self, manifest, overwrite):
        with open(os.path.join(self.tmp_root, MANIFEST), "w") as f:
            json.dump(manifest, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        old = None
        if os.path.exists(self.path):
            if not overwrite:
                raise StoreError(f"{self.path}: already exists; pass overwrite=True or "
                                 "choose another path")
            old = self.path + f".old-{self.store_id[:8]}"
            os.rename(self.path, old)
        if self.stripes:
            for tmp, final in zip(self.tmp_dirs, self.final_dirs):
                os.rename(tmp, final)
                self.committed.append(final)
        os.rename(self.tmp_root, self.path)
        if old:
            _remove_store_dir(old)

    def abort(self):
        for d in self.tmp_dirs + self.committed + [self.tmp_root]:
            shutil.rmtree(d, ignore_errors=True)


def _remove_store_dir(path):
    """Remove a store directory and its external stripe directories."""
    try:
        with open(os.path.join(path, MANIFEST)) as f:
            manifest = json.load(f)
        for d in manifest.get("stripe_dirs", []):
            if os.path.isabs(d):
                shutil.rmtree(d, ignore_errors=True)
    except (OSError, ValueError):
        pass
    shutil.rmtree(path, ignore_errors=True)


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


@registry.writer("pagestore")
def save(graph: Graph, path, *, stripes=None, page_bytes=None, overwrite=False,
         fsync=False, **partition_options):
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
    **partition_options
        Go to :func:`hetgraph.partition.partition`.

    Returns
    -------
    PageStore
        The written store, opened.

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
    writer = _Writer(path, stripes)
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
        pages = []
        for page in part.pages(graph.in_indices, graph.in_weights):
            p, v0, v1, e0, e1 = (page.index, page.vertex_start, page.vertex_stop,
                                 page.edge_start, page.edge_stop)
            o0, o1 = int(graph.out_indptr[v0]), int(graph.out_indptr[v1])
            blocks = {
                "src": writer.write(p, "src", page.src, fsync),
                "dst_offset": writer.write(p, "dst_offset", page.dst_offset, fsync),
                "out_dst": writer.write(p, "out_dst", graph.out_indices[o0:o1], fsync),
            }
            if graph.weighted:
                blocks["weight"] = writer.write(p, "weight", page.weight, fsync)
            pages.append({"vertex_start": v0, "vertex_stop": v1, "edge_start": e0,
                          "edge_stop": e1, "out_edge_start": o0, "out_edge_stop": o1,
                          "blocks": blocks})
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
    return PageStore(path)


class PageStore:
    """An opened page store: verified, memory-mapped reads of its blocks and pages."""

    def __init__(self, path):
        self.path = os.path.abspath(os.fspath(path))
        manifest_path = os.path.join(self.path, MANIFEST)
        if not os.path.isdir(self.path):
            raise StoreError(f"{self.path}: no page store here (not a directory); "
                             "write one with Graph.save or `hetgraph convert`")
        try:
            with open(manifest_path) as f:
                m = json.load(f)
        except FileNotFoundError as exc:
            raise StoreError(f"{manifest_path}: manifest is missing; the store is incomplete, "
                             "write it again") from exc
        except (ValueError, OSError) as exc:
            raise StoreError(f"{manifest_path}: manifest is unreadable ({exc}); "
                             "write the store again") from exc
        if not isinstance(m, dict) or m.get("format") != FORMAT:
            raise StoreError(f"{manifest_path}: not a hetgraph page store manifest")
        if not isinstance(m.get("version"), int) or m["version"] > VERSION:
            raise StoreVersionError(
                f"{manifest_path}: store format version {m.get('version')!r} is newer than "
                f"this hetgraph reads ({VERSION}); upgrade hetgraph or rewrite the store")
        self.manifest = m
        self.stripe_dirs = [d if os.path.isabs(d) else os.path.join(self.path, d)
                            for d in m["stripe_dirs"]]
        self.num_vertices = m["num_vertices"]
        self.num_arcs = m["num_arcs"]
        self.directed = m["directed"]
        self.weighted = m["weighted"]
        self.index_dtype = np.dtype(m["index_dtype"])
        self._partition = None
        self._read_ratio = None

    @property
    def num_pages(self) -> int:
        return len(self.manifest["pages"])

    def block_path(self, entry):
        """Path of a block's file, checked to exist with the manifest's size."""
        path = os.path.join(self.stripe_dirs[entry["stripe"]], entry["file"])
        if not os.path.exists(path):
            raise StoreError(f"{path}: data block is missing; restore it or rewrite the store")
        size = os.path.getsize(path)
        if size != entry["bytes"]:
            raise StoreError(f"{path}: data block has {size} bytes, the manifest says "
                             f"{entry['bytes']} (truncated?); rewrite the store")
        return path

    @staticmethod
    def _verified(path, array, entry):
        if crc32(array) != entry["crc32"]:
            raise ChecksumError(f"{path}: data block is corrupt (CRC32 mismatch); "
                                "restore it or rewrite the store")
        return array

    def read_block(self, entry, verify=True):
        """Memory-map one block and verify its size and CRC32; errors name the file."""
        path = self.block_path(entry)
        dtype = np.dtype(entry["dtype"])
        if entry["count"] == 0:
            return np.empty(0, dtype)
        array = np.memmap(path, dtype=dtype, mode="r", shape=(entry["count"],))
        return self._verified(path, array, entry) if verify else array

    def fetch_block(self, entry):
        """Read one block into a new array (not memory-mapped) and verify it. The block
        is then dropped from the OS page cache: an out-of-core run's own page cache is
        what keeps data in memory, within its budget."""
        path = self.block_path(entry)
        array = np.empty(entry["count"], np.dtype(entry["dtype"]))
        view = memoryview(array).cast("B")
        with open(path, "rb", buffering=0) as f:
            done = 0
            while done < len(view):
                got = f.readinto(view[done:])
                if not got:
                    raise StoreError(f"{path}: data block ended after {done} bytes, the "
                                     f"manifest says {len(view)}; rewrite the store")
                done += got
            drop_os_cache(f.fileno())
        return self._verified(path, array, entry)

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
        """The stored shard and page tables."""
        if self._partition is None:
            self._partition = Partition(
                self.graph_block("in_indptr"), self.graph_block("shard_start"),
                self.graph_block("replication"), self.graph_block("page_shard"),
                weighted=self.weighted, index_dtype=self.index_dtype,
                options=self.manifest["partition"])
        return self._partition

    def page(self, p) -> Page:
        """Read page ``p`` (verified, memory-mapped)."""
        part = self.partition()
        blocks = self.page_blocks(p)
        return part.page_from_arrays(p, self.read_block(blocks["src"]),
                                     self.read_block(blocks["dst_offset"]),
                                     self.read_block(blocks["weight"]) if self.weighted else None)

    def labels(self):
        kind = self.manifest["labels"]
        if kind == "none":
            return None
        if kind == "int":
            return np.array(self.graph_block("labels"))
        data = bytes(self.graph_block("labels_utf8"))
        off = self.graph_block("labels_offsets")
        out = np.empty(len(off) - 1, dtype=object)
        out[:] = [data[off[i]:off[i + 1]].decode("utf-8") for i in range(len(off) - 1)]
        return out

    def load(self) -> Graph:
        """The whole graph in memory (every block verified)."""
        pages = self.manifest["pages"]
        cat = lambda name, dt: (np.concatenate([self.read_block(p["blocks"][name]) for p in pages])  # noqa: E731
                                if pages else np.empty(0, dt))
        g = Graph(np.array(self.graph_block("in_indptr")), cat("src", self.index_dtype),
                  cat("weight", np.float32) if self.weighted else None,
                  np.array(self.graph_block("out_indptr")), cat("out_dst", self.index_dtype),
                  directed=self.directed, labels=self.labels(), name=self.manifest.get("name"))
        g.store = self
        return g

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
        super().__init__(np.array(store.graph_block("in_indptr")), None, None,
                         np.array(store.graph_block("out_indptr")), None,
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
            blocks = self.store.page_blocks(p)
            yield (page["edge_start"], self.store.fetch_block(blocks["src"]),
                   self.store.fetch_block(blocks["weight"]) if self.weighted else None)

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


def available_memory() -> int:
    """Bytes of host memory available now (psutil)."""
    import psutil

    return int(psutil.virtual_memory().available)


def open_store(path) -> Graph:
    """Open the page store at ``path`` and load its graph into memory.

    Parameters
    ----------
    path : str or os.PathLike
        A directory written by :meth:`Graph.save` or ``hetgraph convert``.

    Returns
    -------
    Graph
        Every block verified; ``graph.store`` keeps the PageStore for page-wise access.

    Raises
    ------
    StoreError
        When there is no store, or a block is missing or truncated.
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
    return PageStore(path).load()


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
