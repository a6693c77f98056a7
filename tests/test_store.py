"""Page store: round trip, stripes, verified reads, and damage detected by name."""

import json
import os

import numpy as np
import pytest

import hetgraph as hg
from hetgraph.io import store as store_mod
from conftest import disk_full_after, edge_set


def _same_graph(a, b):
    assert a.num_vertices == b.num_vertices and a.directed == b.directed
    for name in ("in_indptr", "in_indices", "out_indptr", "out_indices"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert (a.in_weights is None) == (b.in_weights is None)
    if a.in_weights is not None:
        assert np.array_equal(a.in_weights, b.in_weights)
    if a.labels is None:
        assert b.labels is None
    else:
        assert list(a.labels) == list(b.labels)


def test_round_trip_real_graph(tmp_path, data):
    g = hg.read(data("wiki-Vote.txt"))
    ps = g.save(tmp_path / "wv", page_bytes=100_000)
    assert ps.num_pages > 3
    h = hg.open_store(tmp_path / "wv")
    _same_graph(g, h)
    assert h.store.num_pages == ps.num_pages
    part = g.partition(page_bytes=100_000)
    for p in range(ps.num_pages):
        a, b = part.page(p, g.in_indices, g.in_weights), ps.page(p)
        assert np.array_equal(a.src, b.src) and np.array_equal(a.dst_offset, b.dst_offset)
        assert np.array_equal(a.replication, b.replication)
    assert not any(n.startswith(".") for n in os.listdir(tmp_path))


def test_round_trip_weighted_string_labels_striped(tmp_path):
    import pandas as pd

    rng = np.random.default_rng(1)
    names = np.array([f"v{i}é" for i in range(300)], dtype=object)
    df = pd.DataFrame({"src": names[rng.integers(0, 300, 3000)],
                       "dst": names[rng.integers(0, 300, 3000)],
                       "w": rng.uniform(0, 1, 3000)})
    g = hg.from_pandas(df, weight="w")
    stripes = [tmp_path / "disk0", tmp_path / "disk1", tmp_path / "disk2"]
    for s in stripes:
        s.mkdir()
    g.save(tmp_path / "st", stripes=stripes, page_bytes=2000)
    used = [len(os.listdir(os.path.join(s, d))) for s in stripes for d in os.listdir(s)]
    assert len(used) == 3 and all(u > 0 for u in used)       # blocks spread over every stripe
    h = hg.open_store(tmp_path / "st")
    _same_graph(g, h)
    assert edge_set(g) == edge_set(h)


def _store_with_block(tmp_path):
    g = hg.generate.rmat(10, seed=2)
    g.save(tmp_path / "s", page_bytes=4000)
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    entry = manifest["pages"][1]["blocks"]["src"]
    return tmp_path / "s" / "data" / entry["file"], manifest


def test_corrupted_block_is_named(tmp_path):
    path, _ = _store_with_block(tmp_path)
    data = bytearray(path.read_bytes())
    data[5] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(hg.ChecksumError, match=rf"{path.name}.*CRC32 mismatch"):
        hg.open_store(tmp_path / "s")
    ps = hg.PageStore(tmp_path / "s")
    ps.page(0)                                   # other pages still read
    with pytest.raises(hg.ChecksumError, match=path.name):
        ps.page(1)


def test_truncated_block_is_named(tmp_path):
    path, _ = _store_with_block(tmp_path)
    path.write_bytes(path.read_bytes()[:-4])
    with pytest.raises(hg.StoreError, match=rf"{path.name}.*truncated"):
        hg.open_store(tmp_path / "s")


def test_missing_block_is_named(tmp_path):
    path, _ = _store_with_block(tmp_path)
    path.unlink()
    with pytest.raises(hg.StoreError, match=rf"{path.name}.*missing"):
        hg.open_store(tmp_path / "s")


def test_newer_version_is_refused(tmp_path):
    _, manifest = _store_with_block(tmp_path)
    manifest["version"] = store_mod.VERSION + 1
    (tmp_path / "s" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(hg.StoreVersionError, match="newer than this hetgraph reads"):
        hg.open_store(tmp_path / "s")


def test_missing_or_garbage_manifest(tmp_path):
    with pytest.raises(hg.StoreError, match="not a directory"):
        hg.open_store(tmp_path / "none")
    (tmp_path / "d").mkdir()
    with pytest.raises(hg.StoreError, match="manifest is missing"):
        hg.open_store(tmp_path / "d")
    (tmp_path / "d" / "manifest.json").write_text("{not json")
    with pytest.raises(hg.StoreError, match="manifest is unreadable"):
        hg.open_store(tmp_path / "d")
    (tmp_path / "d" / "manifest.json").write_text('{"format": "other"}')
    with pytest.raises(hg.StoreError, match="not a hetgraph page store"):
        hg.open_store(tmp_path / "d")


def test_failed_write_leaves_nothing(tmp_path, monkeypatch):
    g = hg.generate.rmat(10, seed=2)
    stripes = [tmp_path / "a", tmp_path / "b"]
    for s in stripes:
        s.mkdir()
    disk_full_after(monkeypatch, 7)
    with pytest.raises(hg.StoreError, match="No space left.*nothing was left behind"):
        g.save(tmp_path / "s", stripes=stripes, page_bytes=4000)
    assert sorted(os.listdir(tmp_path)) == ["a", "b"]
    assert os.listdir(tmp_path / "a") == [] and os.listdir(tmp_path / "b") == []


def test_existing_store_needs_overwrite_and_keeps_old_on_failure(tmp_path, monkeypatch):
    g = hg.generate.rmat(9, seed=1)
    g.save(tmp_path / "s")
    with pytest.raises(hg.StoreError, match="already exists; pass overwrite=True"):
        g.save(tmp_path / "s")
    _same_graph(g, hg.open_store(tmp_path / "s"))       # the old store is intact
    g2 = hg.generate.rmat(9, seed=2)
    g2.save(tmp_path / "s", overwrite=True)
    _same_graph(g2, hg.open_store(tmp_path / "s"))
    assert sorted(os.listdir(tmp_path)) == ["s"]


def test_missing_stripe_directory(tmp_path):
    g = hg.generate.rmat(8)
    with pytest.raises(hg.StoreError, match="stripe directory does not exist"):
        g.save(tmp_path / "s", stripes=[tmp_path / "nodisk"])
    assert os.listdir(tmp_path) == []
