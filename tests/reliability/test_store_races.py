"""Leftovers and races of page stores (issue 50, item 8): a save killed midway leaves
temporaries that the next save to the same place removes (never those of a save still
running), an overwrite leaves nothing behind, a reader racing a writer gets
StoreError("store changed while reading: retry") instead of a raw error, and a block
swapped for a link after its checks is still not followed."""

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import hetgraph as hg
from hetgraph.io import store as store_mod
from hetgraph.io.store import PageStore

ROOT = os.path.dirname(os.path.dirname(hg.__file__))
RETRY = "store changed while reading: retry"


def make_graph(seed, n=300, m=3000):
    rng = np.random.default_rng(seed)
    return hg.from_arrays(rng.integers(0, n, m), rng.integers(0, n, m),
                          rng.uniform(1, 2, m), num_vertices=n)


@pytest.fixture(scope="module")
def graphs():
    return make_graph(1), make_graph(2), make_graph(3, n=500, m=5000)


def same_graph(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a.edges(), b.edges()))


# killed saves -------------------------------------------------------------------------
KILLED_SAVE = """
import os, signal, sys
import numpy as np
import hetgraph as hg
from hetgraph.io import store
path, where, after = sys.argv[1], sys.argv[2], int(sys.argv[3])
stripes = sys.argv[4:] or None
rng = np.random.default_rng(1)
g = hg.from_arrays(rng.integers(0, 300, 3000), rng.integers(0, 300, 3000),
                   rng.uniform(1, 2, 3000), num_vertices=300)
calls = {"n": 0}
real = getattr(store._Writer, where) if where != "remove" else store._remove_replaced
def dying(*args, **kwargs):
    calls["n"] += 1
    if calls["n"] > after:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(*args, **kwargs)
if where == "remove":
    store._remove_replaced = dying
else:
    setattr(store._Writer, where, dying)
g.save(path, page_bytes=4000, stripes=stripes, overwrite=True)
"""


def killed_save(path, where, after, stripes=()):
    """Run a save of make_graph(1) that kills itself (SIGKILL) after ``after`` calls
    of ``where`` ("write": a block, "commit", "remove": the replaced store's removal)."""
    done = subprocess.run([sys.executable, "-c", KILLED_SAVE, str(path), where, str(after),
                           *map(str, stripes)], cwd=ROOT)
    assert done.returncode == -signal.SIGKILL


def test_a_save_killed_midway_is_cleaned_by_the_next_save(tmp_path, graphs):
    disks = [tmp_path / "d0", tmp_path / "d1"]
    for d in disks:
        d.mkdir()
    killed_save(tmp_path / "s", "write", 6, disks)
    assert any(n.startswith(".s.partial-") for n in os.listdir(tmp_path))
    assert any(n.endswith(".partial") for d in disks for n in os.listdir(d))
    graphs[1].save(tmp_path / "s", page_bytes=4000, stripes=disks)
    assert sorted(os.listdir(tmp_path)) == ["d0", "d1", "s"]
    store = PageStore(tmp_path / "s")
    for d in disks:
        assert os.listdir(d) == [os.path.basename(store.stripe_dirs[0])]
    assert same_graph(store.load(), graphs[1])


def test_a_save_killed_while_replacing_keeps_the_old_store(tmp_path, graphs):
    graphs[1].save(tmp_path / "s", page_bytes=4000)
    killed_save(tmp_path / "s", "commit", 0)  # before it renames anything
    killed_save(tmp_path / "s", "remove", 0)  # after the new store is in place
    assert any(".old-" in n for n in os.listdir(tmp_path))
    assert same_graph(hg.open_store(tmp_path / "s"), graphs[0])
    graphs[2].save(tmp_path / "s", page_bytes=4000, overwrite=True)
    assert sorted(os.listdir(tmp_path)) == ["s"]
    assert same_graph(hg.open_store(tmp_path / "s"), graphs[2])


def test_temporaries_of_a_save_still_running_are_kept(tmp_path, graphs):
    running = tmp_path / ".s.partial-0123abcd"
    running.mkdir()
    (running / ".owner").write_text(json.dumps({"pid": os.getpid(),
                                                "host": os.uname().nodename}))
    graphs[0].save(tmp_path / "s")
    assert sorted(os.listdir(tmp_path)) == [".s.partial-0123abcd", "s"]


def test_overwrite_of_a_file_leaves_nothing_behind(tmp_path, graphs):
    (tmp_path / "s").write_text("old")
    graphs[0].save(tmp_path / "s", overwrite=True)
    assert sorted(os.listdir(tmp_path)) == ["s"]


# readers racing a writer --------------------------------------------------------------
@pytest.mark.parametrize("other", [1, 2], ids=["same sizes", "other sizes"])
def test_a_store_replaced_after_opening_is_a_retry_error(tmp_path, graphs, other):
    graphs[0].save(tmp_path / "s", page_bytes=4000)
    store = PageStore(tmp_path / "s")
    graphs[other].save(tmp_path / "s", page_bytes=4000, overwrite=True)
    with pytest.raises(hg.StoreError, match=RETRY):
        store.load()
    with pytest.raises(hg.StoreError, match=RETRY):
        store.page(0)


def test_a_store_removed_after_opening_is_a_retry_error(tmp_path, graphs):
    graphs[0].save(tmp_path / "s", page_bytes=4000)
    store = PageStore(tmp_path / "s")
    os.rename(tmp_path / "s", tmp_path / "s.old-0123abcd")  # a writer between renames
    with pytest.raises(hg.StoreError, match=RETRY):
        store.load()
    with pytest.raises(hg.StoreError, match=RETRY):
        PageStore(tmp_path / "s")


def test_a_store_replaced_while_its_manifest_is_read_is_a_retry_error(tmp_path, graphs,
                                                                       monkeypatch):
    """A save that replaces the store between the reader's finding it and its reading
    the manifest, and is done by the time the reader looks again (no marks left): the
    directory is another one, so the missing manifest is a retry error."""
    import shutil

    graphs[0].save(tmp_path / "s", page_bytes=4000)
    load = store_mod.manifests.load

    def replaced_meanwhile(path):
        monkeypatch.setattr(store_mod.manifests, "load", load)
        os.rename(tmp_path / "s", tmp_path / "gone")
        graphs[2].save(tmp_path / "s", page_bytes=4000)
        shutil.rmtree(tmp_path / "gone")
        return load(os.path.join(tmp_path, "gone", "manifest.json"))  # (as it was)

    monkeypatch.setattr(store_mod.manifests, "load", replaced_meanwhile)
    with pytest.raises(hg.StoreError, match=RETRY):
        PageStore(tmp_path / "s")
    assert PageStore(tmp_path / "s").num_vertices == graphs[2].num_vertices
    # a store whose manifest is missing, not replaced, still says so
    os.remove(tmp_path / "s" / "manifest.json")
    with pytest.raises(hg.StoreError, match="manifest is missing"):
        PageStore(tmp_path / "s")


def test_out_of_core_reads_of_a_replaced_store_are_a_retry_error(tmp_path, graphs):
    graphs[0].save(tmp_path / "s", page_bytes=4000)
    stored = PageStore(tmp_path / "s").stored_graph()
    graphs[2].save(tmp_path / "s", page_bytes=4000, overwrite=True)
    with pytest.raises(hg.StoreError, match=RETRY):
        list(stored.in_edge_blocks())


WRITER = """
import sys
import numpy as np
import hetgraph as hg
path, rounds = sys.argv[1], int(sys.argv[2])
def make(seed, n, m):
    rng = np.random.default_rng(seed)
    return hg.from_arrays(rng.integers(0, n, m), rng.integers(0, n, m),
                          rng.uniform(1, 2, m), num_vertices=n)
graphs = [make(1, 300, 3000), make(3, 500, 5000)]
print("ready", flush=True)
for i in range(rounds):
    graphs[i % 2].save(path, page_bytes=4000, overwrite=True)
"""


def test_readers_racing_a_writer_see_a_graph_or_a_retry_error(tmp_path, graphs):
    graphs[0].save(tmp_path / "s", page_bytes=4000)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / "s"), "60"],
                              stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert writer.stdout.readline() == "ready\n"
    outcomes = {"graph": 0, "retry": 0}
    while writer.poll() is None:
        try:
            g = hg.open_store(tmp_path / "s")
        except hg.StoreError as exc:
            assert RETRY in str(exc), exc
            outcomes["retry"] += 1
            continue
        assert same_graph(g, graphs[0]) or same_graph(g, graphs[2])
        outcomes["graph"] += 1
    assert writer.returncode == 0 and outcomes["graph"] > 0


# a block swapped for a link after its checks -------------------------------------------
def test_a_block_swapped_for_a_link_after_its_checks_is_not_followed(tmp_path, graphs,
                                                                     monkeypatch):
    graphs[0].save(tmp_path / "s", page_bytes=4000)
    store = PageStore(tmp_path / "s")
    entry = store.page_blocks(0)["src"]
    block = os.path.join(store.stripe_dirs[0], entry["file"])
    outside = tmp_path / "outside.bin"
    outside.write_bytes(open(block, "rb").read())
    os.remove(block)
    os.symlink(outside, block)
    real = os.path.realpath
    # the checks of the path ran before the swap: they saw the block inside the store
    monkeypatch.setattr(store_mod.os.path, "realpath",
                        lambda p, **kw: p if os.fspath(p) == block else real(p, **kw))
    with pytest.raises(hg.StoreError, match="link"):
        store.read_block(entry)
    with pytest.raises(hg.StoreError, match="link"):
        store.fetch_block(entry)
