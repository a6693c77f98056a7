"""The page store's manifest: written with its own checksum, read back only when every
key has the type, range and size the store's layout implies.

A store's manifest names the files its blocks are read from and the directories an
overwrite deletes, so nothing in it is trusted: block files are plain names (no
separators, no ``..``), stripe directories are ``data`` inside the store or the
store's own ``<name>-<id>`` directory elsewhere, every count agrees with
``num_vertices`` and ``num_arcs`` and every dtype is the one its block is written
with. A damaged or hand-edited manifest gives a :class:`StoreError` naming the key.

The checksum catches accidents, not an attacker, who can recompute it (and a block's
CRC32). A store from an untrusted place is signed with a user key instead: its
manifest carries an HMAC-SHA256 of itself and a SHA-256 of every block, checked when
the store is opened with the same key.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re

import numpy as np

from ..errors import StoreError, StoreVersionError

FORMAT = "hetgraph-pagestore"
VERSION = 1
MANIFEST = "manifest.json"
CHECKSUM = "manifest_sha256"
SIGNATURE = "manifest_hmac_sha256"  # with a user key: covers the manifest and, through
# each block's sha256, the data

INDEX_DTYPES = ("<i4", "<i8")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}\Z")
_STORE_ID = re.compile(r"[0-9a-f]{32}\Z")
_GRAPH_BLOCKS = ("in_indptr", "out_indptr", "shard_start", "replication", "page_shard")
_LABEL_BLOCKS = {"none": (), "int": ("labels",), "str": ("labels_utf8", "labels_offsets")}
_PAGE_RANGES = ("vertex_start", "vertex_stop", "edge_start", "edge_stop", "out_edge_start",
                "out_edge_stop")
_TOP_KEYS = {"format", "version", "hetgraph_version", "store_id", "name", "num_vertices",
             "num_arcs", "directed", "weighted", "index_dtype", "labels", "partition",
             "stripe_dirs", "graph_blocks", "pages", CHECKSUM, SIGNATURE}
_BLOCK_KEYS = {"stripe", "file", "dtype", "count", "bytes", "crc32"}
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")


def _canonical(manifest, without) -> bytes:
    body = {k: v for k, v in manifest.items() if k not in without}
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def checksum(manifest, name=CHECKSUM) -> str:
    """SHA-256 (hex) of the manifest (or any JSON document) without its checksum key
    ``name``, keys sorted."""
    return hashlib.sha256(_canonical(manifest, (name,))).hexdigest()


def signature(manifest, key, names=(CHECKSUM, SIGNATURE)) -> str:
    """HMAC-SHA256 (hex) with ``key`` (bytes or str) of the manifest (or any JSON
    document) without its checksum and signature keys ``names``, keys sorted."""
    key = key.encode() if isinstance(key, str) else bytes(key)
    return hmac.new(key, _canonical(manifest, names), "sha256").hexdigest()


def signature_matches(document, key, names=(CHECKSUM, SIGNATURE)) -> bool:
    """Whether ``document`` holds (under ``names[1]``) its signature with ``key``;
    compared in constant time."""
    return hmac.compare_digest(str(document.get(names[1])),
                               signature(document, key, names))


def dump(manifest, f, key=None):
    """Write ``manifest`` to the open text file ``f`` with its checksum, and its
    signature when a ``key`` is given."""
    if key is not None:
        manifest = {**manifest, SIGNATURE: signature(manifest, key)}
    json.dump({**manifest, CHECKSUM: checksum(manifest)}, f, indent=1)


def check_signature(path, manifest, key):
    """Refuse (StoreError) a manifest not signed with ``key``."""
    if SIGNATURE not in manifest:
        raise StoreError(f"{path}: the store is not signed, and a key was given; sign it "
                         "when writing (save(..., key=...)) or open it without a key")
    if not signature_matches(manifest, key):
        raise StoreError(f"{path}: the store's signature does not match the key (a "
                         "different key, or the store was altered); do not use it")


def stripe_name(store_path, store_id) -> str:
    """Name of a store's own directory inside each of its external stripe directories."""
    return f"{os.path.basename(store_path)}-{store_id[:8]}"


def load(path) -> dict:
    """The manifest at ``path`` (a file), checked: format, version, checksum, schema."""
    if os.path.exists(path) and not os.path.isfile(path):  # a FIFO would block
        raise StoreError(f"{path}: manifest is not a regular file; write the store again")
    try:
        with open(path, "rb") as f:
            text = f.read()
        manifest = json.loads(text)
    except FileNotFoundError as exc:
        raise StoreError(f"{path}: manifest is missing; the store is incomplete, "
                         "write it again") from exc
    except (ValueError, OSError, RecursionError) as exc:
        raise StoreError(f"{path}: manifest is unreadable ({type(exc).__name__}: "
                         f"{str(exc)[:200]}); write the store again") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise StoreError(f"{path}: not a hetgraph page store manifest")
    version = manifest.get("version")
    if type(version) is not int or version < 1:
        raise StoreError(f"{path}: manifest key 'version' is {version!r}, not a format "
                         "version; write the store again")
    if version > VERSION:
        raise StoreVersionError(
            f"{path}: store format version {version!r} is newer than this hetgraph reads "
            f"({VERSION}); upgrade hetgraph or rewrite the store")
    if manifest.get(CHECKSUM) != checksum(manifest):
        raise StoreError(f"{path}: manifest checksum does not match its contents (edited "
                         "or damaged); write the store again")
    _Schema(path, manifest).check()
    return manifest


class _Schema:
    """The checks of one manifest; each failure names the key and what it must be."""

    def __init__(self, path, manifest):
        self.path, self.m = path, manifest

    def fail(self, key, what):
        raise StoreError(f"{self.path}: manifest key {key!r} {what}; the manifest is "
                         "damaged or was edited: write the store again")

    def integer(self, obj, key, where, low=0, high=2**62):
        value = obj.get(key) if isinstance(obj, dict) else None
        if type(value) is not int or not low <= value <= high:
            self.fail(where + key, f"is {value!r}, not an integer in [{low}, {high}]")
        return value

    def typed(self, key, kinds):
        """The value of top-level ``key``, whose exact type is one of ``kinds``."""
        if key not in self.m:
            self.fail(key, "is missing")
        value = self.m[key]
        if type(value) not in kinds:
            self.fail(key, f"is {str(value)[:80]!r}, not of type "
                           f"{' or '.join(k.__name__ for k in kinds)}")
        return value

    def check(self):
        m = self.m
        unknown = set(m) - _TOP_KEYS
        if unknown:
            self.fail(sorted(unknown)[0], "is not a manifest key")
        if not _STORE_ID.match(self.typed("store_id", (str,))):
            self.fail("store_id", "is not 32 hex digits")
        self.typed("hetgraph_version", (str,))
        self.typed("name", (str, type(None)))
        self.typed("directed", (bool,))
        self.typed("weighted", (bool,))
        self.partition()
        self.index_dtype = self.typed("index_dtype", (str,))
        if self.index_dtype not in INDEX_DTYPES:
            self.fail("index_dtype", f"is {self.index_dtype!r}, not one of {INDEX_DTYPES}")
        self.n = self.integer(m, "num_vertices", "",
                              high=int(np.iinfo(np.dtype(self.index_dtype)).max))
        self.arcs = self.integer(m, "num_arcs", "")
        labels = self.typed("labels", (str,))
        if labels not in _LABEL_BLOCKS:
            self.fail("labels", f"is {labels!r}, not one of {tuple(_LABEL_BLOCKS)}")
        self.stripes()
        self.graph_blocks(labels)
        self.pages()

    def partition(self):
        """Partition options: names to plain scalars (they only describe the layout)."""
        for key, value in self.typed("partition", (dict,)).items():
            if type(value) not in (int, float, str, bool, type(None)):
                self.fail(f"partition.{key}", f"is {str(value)[:80]!r}, not a scalar")

    def stripes(self):
        dirs = self.typed("stripe_dirs", (list,))
        if dirs == ["data"]:
            return
        own = stripe_name(os.path.dirname(self.path), self.m["store_id"])
        if not dirs:
            self.fail("stripe_dirs", "is empty")
        for i, d in enumerate(dirs):
            # an external stripe is the store's own directory, named after it
            if not (isinstance(d, str) and os.path.isabs(d) and "\x00" not in d and
                    os.path.basename(d).endswith(own[-9:]) and
                    _NAME.match(os.path.basename(d)) and os.path.normpath(d) == d):
                self.fail(f"stripe_dirs[{i}]", f"is {str(d)[:200]!r}, neither 'data' nor "
                          f"an absolute directory named like {own!r}")

    def block(self, entry, where, dtype, count):
        """Check one block entry: its stripe, file name, dtype, count and bytes."""
        signed = SIGNATURE in self.m
        if not isinstance(entry, dict) or set(entry) != _BLOCK_KEYS | ({"sha256"} if signed
                                                                       else set()):
            self.fail(where, "is not a block entry (stripe, file, dtype, count, bytes, crc32"
                             f"{', sha256' if signed else ''})")
        if signed and not (isinstance(entry["sha256"], str) and _HEX64.match(entry["sha256"])):
            self.fail(where + ".sha256", "is not 64 hex digits")
        self.integer(entry, "stripe", where + ".", high=len(self.m["stripe_dirs"]) - 1)
        name = entry["file"]
        if not isinstance(name, str) or not _NAME.match(name):
            self.fail(where + ".file", f"is {str(name)[:200]!r}, not a plain file name")
        if entry["dtype"] != dtype:
            self.fail(where + ".dtype", f"is {str(entry['dtype'])[:40]!r}, not {dtype!r}")
        if count is None:
            count = self.integer(entry, "count", where + ".")
        elif entry["count"] != count or type(entry["count"]) is not int:
            self.fail(where + ".count", f"is {str(entry['count'])[:40]!r}, not {count}")
        if entry["bytes"] != count * np.dtype(dtype).itemsize or type(entry["bytes"]) is not int:
            self.fail(where + ".bytes", f"is {str(entry['bytes'])[:40]!r}, not "
                                        f"{count * np.dtype(dtype).itemsize}")
        self.integer(entry, "crc32", where + ".", high=2**32 - 1)
        return count

    def graph_blocks(self, labels):
        blocks = self.typed("graph_blocks", (dict,))
        names = _GRAPH_BLOCKS + _LABEL_BLOCKS[labels]
        if set(blocks) != set(names):
            self.fail("graph_blocks", f"has blocks {sorted(blocks)[:8]}, not {sorted(names)}")
        n = self.n
        pages = self.m.get("pages")
        counts = {"in_indptr": n + 1, "out_indptr": n + 1, "shard_start": None,
                  "replication": None, "labels": n, "labels_utf8": None,
                  "labels_offsets": n + 1,
                  "page_shard": len(pages) + 1 if isinstance(pages, list) else None}
        shards = {}
        for name in names:
            dtype = "|u1" if name == "labels_utf8" else "<i8"
            shards[name] = self.block(blocks[name], f"graph_blocks.{name}", dtype, counts[name])
        if shards["shard_start"] != shards["replication"] + 1:
            self.fail("graph_blocks.shard_start.count", "is not the shard count + 1")

    def pages(self):
        pages = self.typed("pages", (list,))
        ends = {"vertex": 0, "edge": 0, "out_edge": 0}
        for p, page in enumerate(pages):
            where = f"pages[{p}]"
            if not isinstance(page, dict) or set(page) != set(_PAGE_RANGES) | {"blocks"}:
                self.fail(where, f"is not a page entry ({', '.join(_PAGE_RANGES)}, blocks)")
            for kind in ends:  # pages are contiguous and cover every vertex and arc
                start = self.integer(page, kind + "_start", where + ".")
                stop = self.integer(page, kind + "_stop", where + ".")
                if start != ends[kind] or stop < start:
                    self.fail(f"{where}.{kind}_start", f"is {start} (stop {stop}), the "
                              f"previous page ends at {ends[kind]}")
                ends[kind] = stop
            self.page_blocks(page, where)
        for kind, total in (("vertex", self.n), ("edge", self.arcs), ("out_edge", self.arcs)):
            if ends[kind] != total:
                self.fail("pages", f"cover {kind}s [0, {ends[kind]}), not [0, {total})")

    def page_blocks(self, page, where):
        blocks = page["blocks"]
        names = {"src", "dst_offset", "out_dst"} | ({"weight"} if self.m["weighted"] else set())
        if not isinstance(blocks, dict) or set(blocks) != names:
            self.fail(where + ".blocks", f"is not the blocks {sorted(names)}")
        edges = page["edge_stop"] - page["edge_start"]
        out_edges = page["out_edge_stop"] - page["out_edge_start"]
        for name, dtype, count in (("src", self.index_dtype, edges),
                                   ("dst_offset", "<u2", edges),
                                   ("out_dst", self.index_dtype, out_edges),
                                   ("weight", "<f4", edges)):
            if name in names:
                self.block(blocks[name], f"{where}.blocks.{name}", dtype, count)
