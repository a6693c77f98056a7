"""Hostile and damaged page stores (issue 50, items 2 and 3): a manifest that escapes
the store, fails its schema or was edited, blocks rewritten with a matching CRC32 but
a broken structure. Each gives a StoreError naming what is wrong (never another
exception, a segfault or a wrong answer), and an overwrite deletes nothing the store
did not create."""

import copy
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, strategies as st

import hetgraph as hg
from hetgraph.io import manifest as manifests
from hetgraph.io.store import PageStore, crc32
from conftest import examples


@pytest.fixture(scope="module")
def graph():
    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, 300, 3000), rng.integers(0, 300, 3000)
    return hg.from_arrays(src, dst, rng.uniform(1, 2, 3000), num_vertices=300)


@pytest.fixture
def store(tmp_path, graph):
    """A weighted store of several pages at tmp_path/s."""
    graph.save(tmp_path / "s", page_bytes=4000)
    return tmp_path / "s"


def read_manifest(path):
    return json.loads((path / "manifest.json").read_text())


def write_manifest(path, manifest, rehash=True):
    """Write ``manifest``; with ``rehash``, its checksum made to match (an edit that
    the schema, not the checksum, must catch)."""
    if rehash:
        manifest = {**manifest, manifests.CHECKSUM: manifests.checksum(manifest)}
    (path / "manifest.json").write_text(json.dumps(manifest))


def edit(path, change, rehash=True):
    manifest = read_manifest(path)
    change(manifest)
    write_manifest(path, manifest, rehash)


def out_of_core(path):
    """The store's graph for an out-of-core run, and a host budget that keeps it so."""
    store = PageStore(path)
    budget = 64 * store.num_vertices + 4 * max(
        e["bytes"] for p in store.manifest["pages"] for e in p["blocks"].values())
    assert store.data_bytes > budget
    return store, budget


def set_item(keys, value):
    def change(m):
        obj = m
        for k in keys[:-1]:
            obj = obj[k]
        obj[keys[-1]] = value
    return change


def del_item(keys):
    def change(m):
        obj = m
        for k in keys[:-1]:
            obj = obj[k]
        del obj[keys[-1]]
    return change


SRC = ("pages", 0, "blocks", "src")
MALFORMED = [
    ("count too big", set_item(SRC + ("count",), 10**30), "count"),
    ("count negative", set_item(SRC + ("count",), -5), "count"),
    ("count zero", set_item(SRC + ("count",), 0), "count"),
    ("count bigger than the page", set_item(SRC + ("count",), 10**6), "count"),
    ("num_vertices too big", set_item(("num_vertices",), 10**30), "num_vertices"),
    ("num_vertices negative", set_item(("num_vertices",), -1), "num_vertices"),
    ("num_vertices zero", set_item(("num_vertices",), 0), "num_vertices|count"),
    ("num_arcs too big", set_item(("num_arcs",), 10**12), "pages"),
    ("bad stripe index", set_item(SRC + ("stripe",), 3), "stripe"),
    ("negative stripe index", set_item(SRC + ("stripe",), -1), "stripe"),
    ("dtype O", set_item(SRC + ("dtype",), "O"), "dtype"),
    ("dtype bogus", set_item(SRC + ("dtype",), "zz9"), "dtype"),
    ("dtype <i2", set_item(SRC + ("dtype",), "<i2"), "dtype"),
    ("index dtype O", set_item(("index_dtype",), "O"), "index_dtype"),
    ("missing num_vertices", del_item(("num_vertices",)), "num_vertices"),
    ("missing pages", del_item(("pages",)), "pages"),
    ("missing src block", del_item(SRC), "blocks"),
    ("missing graph block", del_item(("graph_blocks", "in_indptr")), "graph_blocks"),
    ("missing crc32", del_item(SRC + ("crc32",)), "src"),
    ("string for num_vertices", set_item(("num_vertices",), "300"), "num_vertices"),
    ("string for count", set_item(SRC + ("count",), "34"), "count"),
    ("float for count", set_item(SRC + ("count",), 34.0), "count"),
    ("bool for weighted", set_item(("weighted",), 1), "weighted"),
    ("list for stripe_dirs entry", set_item(("stripe_dirs",), [["data"]]), "stripe_dirs"),
    ("no stripe_dirs", set_item(("stripe_dirs",), []), "stripe_dirs"),
    ("empty pages", set_item(("pages",), []), "pages|page_shard"),
    ("pages not contiguous", set_item(("pages", 1, "vertex_start"), 0), "vertex_start"),
    ("page a string", set_item(("pages", 0), "p"), "pages"),
    ("unknown key", set_item(("extra",), 1), "extra"),
    ("store_id not hex", set_item(("store_id",), "../../x"), "store_id"),
    ("labels kind bogus", set_item(("labels",), "pickle"), "labels"),
    ("partition holds an object", set_item(("partition", "page_bytes"), {"a": 1}), "partition"),
]


@pytest.mark.parametrize("case, change, key", MALFORMED, ids=[c[0] for c in MALFORMED])
def test_malformed_manifest_is_a_store_error_naming_the_key(store, case, change, key):
    edit(store, change)
    with pytest.raises(hg.StoreError, match=f"manifest key .*({key})"):
        hg.open_store(store)


def test_deeply_nested_manifest(store):
    text = (store / "manifest.json").read_text()
    (store / "manifest.json").write_text(text[:-1] + ', "name": ' + "[" * 100_000
                                         + "]" * 100_000 + "}")
    with pytest.raises(hg.StoreError, match="manifest is unreadable"):
        hg.open_store(store)


def test_manifest_that_is_a_fifo_is_refused_without_blocking(store):
    os.remove(store / "manifest.json")
    os.mkfifo(store / "manifest.json")
    with pytest.raises(hg.StoreError, match="not a regular file"):
        hg.open_store(store)


@pytest.mark.parametrize("key, value", [("weighted", False), ("directed", False),
                                        ("num_arcs", 2999)])
def test_an_edited_manifest_fails_its_checksum(store, key, value):
    edit(store, set_item((key,), value), rehash=False)
    with pytest.raises(hg.StoreError, match="checksum"):
        hg.open_store(store)
    with pytest.raises(hg.StoreError, match="checksum"):
        hg.pagerank(PageStore(store))


def test_flipped_weighted_flag_with_matching_checksum_is_refused(store):
    edit(store, set_item(("weighted",), False))
    with pytest.raises(hg.StoreError, match="blocks"):
        hg.open_store(store)


def test_empty_pages_never_reach_a_kernel(store):
    edit(store, set_item(("pages",), []))
    with pytest.raises(hg.StoreError):
        hg.pagerank(PageStore(store))
    result = subprocess.run([sys.executable, "-m", "hetgraph", "run", "pagerank", str(store)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


# paths ----------------------------------------------------------------------------
def _outside_copy(store, tmp_path, where):
    """A copy of page 0's src block at ``where`` (outside the store), and its entry."""
    entry = read_manifest(store)["pages"][0]["blocks"]["src"]
    where.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(store / "data" / entry["file"], where)
    return entry


@pytest.mark.parametrize("name", ["../../x", "ABS", "sub/x", ".hidden"])
def test_block_file_that_is_not_a_plain_name_is_refused(store, tmp_path, name):
    """Each file exists and holds the right block: only its name is wrong."""
    _outside_copy(store, tmp_path, tmp_path / "x")
    _outside_copy(store, tmp_path, store / "data" / "sub" / "x")
    _outside_copy(store, tmp_path, store / "data" / ".hidden")
    name = str(tmp_path / "x") if name == "ABS" else name
    edit(store, set_item(SRC + ("file",), name))
    with pytest.raises(hg.StoreError, match="file"):
        hg.open_store(store)


def test_block_symlinked_out_of_the_store_is_refused(store, tmp_path):
    entry = _outside_copy(store, tmp_path, tmp_path / "outside" / "block.bin")
    block = store / "data" / entry["file"]
    block.unlink()
    block.symlink_to(tmp_path / "outside" / "block.bin")
    with pytest.raises(hg.StoreError, match="links out"):
        hg.open_store(store)
    store_obj, budget = out_of_core(store)
    with pytest.raises(hg.StoreError, match="links out"):
        hg.pagerank(store_obj, host_budget=budget)


def test_data_directory_symlinked_out_of_the_store_is_refused(store, tmp_path):
    shutil.move(store / "data", tmp_path / "elsewhere")
    (store / "data").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(hg.StoreError, match="links out of the store"):
        hg.open_store(store)


def test_stripe_directory_outside_the_store_is_not_read(store, tmp_path):
    manifest = read_manifest(store)
    victim = tmp_path / f"victim-{manifest['store_id'][:8]}"
    shutil.copytree(store / "data", victim)
    edit(store, set_item(("stripe_dirs",), [str(victim)]))
    with pytest.raises(hg.StoreError, match="not this store's"):
        hg.open_store(store)
    edit(store, set_item(("stripe_dirs",), [str(tmp_path / "plain")]))
    with pytest.raises(hg.StoreError, match="stripe_dirs"):
        hg.open_store(store)


def _victim(tmp_path, name="victim"):
    victim = tmp_path / name
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me")
    return victim


@pytest.mark.parametrize("named_like_a_stripe", [False, True])
def test_overwrite_deletes_nothing_outside_the_store(store, tmp_path, graph,
                                                     named_like_a_stripe):
    store_id = read_manifest(store)["store_id"]
    victim = _victim(tmp_path, f"s-{store_id[:8]}" if named_like_a_stripe else "victim")
    edit(store, set_item(("stripe_dirs",), ["data", str(victim)]), rehash=False)
    with pytest.raises(hg.StoreError, match="did not create.*nothing was deleted"):
        graph.save(store, overwrite=True)
    assert (victim / "precious.txt").read_text() == "keep me"
    assert (store / "manifest.json").exists()
    edges = tmp_path / "g.txt"
    edges.write_text("1 2\n2 3\n")
    result = subprocess.run([sys.executable, "-m", "hetgraph", "convert", str(edges),
                             str(store), "--overwrite"], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 1 and "nothing was deleted" in result.stderr
    assert (victim / "precious.txt").read_text() == "keep me"


def test_overwrite_refuses_a_directory_that_is_not_a_store(tmp_path, graph):
    victim = _victim(tmp_path)
    with pytest.raises(hg.StoreError, match="no page store.*nothing was deleted"):
        graph.save(victim, overwrite=True)
    assert (victim / "precious.txt").read_text() == "keep me"


def test_overwrite_removes_the_old_stores_own_stripes(tmp_path, graph):
    disks = [tmp_path / "d0", tmp_path / "d1"]
    for d in disks:
        _victim(tmp_path, d.name)
    graph.save(tmp_path / "s", stripes=disks, page_bytes=4000)
    old = read_manifest(tmp_path / "s")["stripe_dirs"]
    graph.save(tmp_path / "s", stripes=disks, page_bytes=4000, overwrite=True)
    new = read_manifest(tmp_path / "s")["stripe_dirs"]
    assert not any(os.path.exists(d) for d in old) and all(os.path.isdir(d) for d in new)
    for d in disks:
        assert (d / "precious.txt").read_text() == "keep me"
        assert sorted(os.listdir(d)) == sorted(["precious.txt", os.path.basename(new[0])])
    assert sorted(os.listdir(tmp_path)) == ["d0", "d1", "s"]


def test_overwrite_of_a_plain_file_leaves_nothing_behind(tmp_path, graph):
    (tmp_path / "s").write_text("old")
    graph.save(tmp_path / "s", overwrite=True)
    assert sorted(os.listdir(tmp_path)) == ["s"]


# structure --------------------------------------------------------------------------
def tamper(path, locate, change):
    """Rewrite the block that ``locate(manifest)`` names with ``change(array)`` and
    record its new CRC32 (and the manifest's checksum): damage CRC32 cannot catch."""
    manifest = read_manifest(path)
    entry = locate(manifest)
    file = path / "data" / entry["file"]
    array = np.fromfile(file, np.dtype(entry["dtype"]))
    change(array)
    array.tofile(file)
    entry["crc32"] = crc32(array)
    write_manifest(path, manifest)


def page_block(p, name):
    return lambda m: m["pages"][p]["blocks"][name]


def graph_block(name):
    return lambda m: m["graph_blocks"][name]


def _set(i, value):
    def change(a):
        a[i] = value
    return change


def _swap(a):
    a[5], a[6] = a[6], a[5]


TAMPERED = [
    ("src id beyond N", page_block(1, "src"), _set(3, 300), "src.*vertex 300"),
    ("src id far beyond N", page_block(1, "src"), _set(0, 2**30), "src.*outside"),
    ("negative src id", page_block(0, "src"), _set(0, -7), "src.*outside"),
    ("out_dst id beyond N", page_block(1, "out_dst"), _set(2, 301), "out_dst.*outside"),
    ("weight inf", page_block(1, "weight"), _set(0, np.inf), "weight.*not finite"),
    ("weight NaN", page_block(0, "weight"), _set(4, np.nan), "weight.*not finite"),
    ("in_indptr not monotone", graph_block("in_indptr"), _swap, "in_indptr.*decreases"),
    ("in_indptr not ending at the arcs", graph_block("in_indptr"), _set(-1, 2999),
     "in_indptr.*ends at 2999"),
    ("out_indptr not monotone", graph_block("out_indptr"), _swap, "out_indptr.*decreases"),
    ("shard_start beyond N", graph_block("shard_start"), _set(-1, 10**9), "shard_start"),
    ("page_shard not monotone", graph_block("page_shard"), _set(1, 0), r"page_shard|page \d"),
    ("replication zero", graph_block("replication"), _set(0, 0), "replication"),
]


@pytest.mark.parametrize("case, locate, change, message", TAMPERED,
                         ids=[c[0] for c in TAMPERED])
def test_tampered_block_with_matching_crc_in_memory(store, case, locate, change, message):
    tamper(store, locate, change)
    with pytest.raises(hg.StoreError, match=message):
        hg.pagerank(hg.open_store(store))


OUT_OF_CORE = [(algorithm, *case) for algorithm in ("pagerank", "sssp") for case in TAMPERED
               if algorithm == "sssp" or "out_dst" not in case[0]]  # pagerank: in-edges only


@pytest.mark.parametrize("algorithm, case, locate, change, message", OUT_OF_CORE,
                         ids=[f"{c[0]}-{c[1]}" for c in OUT_OF_CORE])
def test_tampered_block_with_matching_crc_out_of_core(store, algorithm, case, locate, change,
                                                      message):
    tamper(store, locate, change)
    store_obj, budget = out_of_core(store)
    with pytest.raises(hg.StoreError, match=message):
        if algorithm == "pagerank":
            hg.pagerank(store_obj, host_budget=budget, max_iterations=5, tol=None)
        else:
            hg.sssp(store_obj, 0, cpu_mode="notify-pull", host_budget=budget)


def test_tampered_destination_offsets_are_refused(store):
    tamper(store, page_block(1, "dst_offset"), _set(0, 60000))
    with pytest.raises(hg.StoreError, match="dst_offset.*differs"):
        PageStore(store).page(1)


# hetgraph verify ----------------------------------------------------------------------
def verify(path):
    return subprocess.run([sys.executable, "-m", "hetgraph", "verify", str(path)],
                          capture_output=True, text=True, timeout=300)


def test_verify_a_good_store(store, tmp_path, graph):
    result = verify(store)
    assert result.returncode == 0 and result.stdout.count("\n") == 1, result.stderr
    assert f"{store}: ok (300 vertices, " in result.stdout
    disks = [tmp_path / "d0", tmp_path / "d1"]
    for d in disks:
        d.mkdir()
    labelled = hg.from_pandas(__import__("pandas").DataFrame(
        {"src": ["a", "b", "c"], "dst": ["b", "c", "a"]}))
    labelled.save(tmp_path / "l", stripes=disks)
    assert verify(tmp_path / "l").returncode == 0


@pytest.mark.parametrize("damage", ["tampered", "flipped", "corrupt", "missing"])
def test_verify_a_bad_store(store, damage):
    entry = read_manifest(store)["pages"][2]["blocks"]["dst_offset"]
    if damage == "tampered":
        tamper(store, page_block(2, "dst_offset"), _set(1, 999))
    elif damage == "flipped":
        edit(store, set_item(("weighted",), False), rehash=False)
    elif damage == "corrupt":
        with open(store / "data" / entry["file"], "r+b") as f:
            f.write(b"\xff\xff")
    else:
        os.remove(store / "data" / entry["file"])
    result = verify(store)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert str(store) in result.stderr


# properties ------------------------------------------------------------------------------
def _paths(obj, prefix=()):
    """Every key path of a JSON object (to pick a place to mutate)."""
    yield prefix
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) \
        else ()
    for k, v in items:
        yield from _paths(v, prefix + (k,))


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats()
    | st.text(max_size=12) | st.sampled_from(["data", "..", "/", "/a\x00b/s-0", "<i4", "<i8",
                                              "O", "|u1"]),
    lambda children: st.lists(children, min_size=1, max_size=3)
    | st.dictionaries(st.text(max_size=6), children, min_size=1, max_size=3), max_leaves=6)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, graph):
    path = tmp_path_factory.mktemp("pristine") / "s"
    graph.save(path, page_bytes=4000)
    return path


@examples(60,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), rehash=st.booleans())
def test_any_manifest_mutation_is_a_store_error_or_the_same_graph(pristine, graph,
                                                                  tmp_path_factory, data,
                                                                  rehash):
    path = tmp_path_factory.mktemp("mutated") / "s"
    shutil.copytree(pristine, path)
    manifest = read_manifest(path)
    mutated = copy.deepcopy(manifest)
    where = data.draw(st.sampled_from(list(_paths(manifest))[1:]))
    obj = mutated
    for k in where[:-1]:
        obj = obj[k]
    if data.draw(st.booleans()):
        del obj[where[-1]]
    else:
        obj[where[-1]] = data.draw(JSON_VALUES)
    write_manifest(path, mutated, rehash)
    try:
        loaded = hg.open_store(path)
    except hg.StoreError:
        return
    for name in ("in_indptr", "in_indices", "in_weights", "out_indptr", "out_indices"):
        assert np.array_equal(getattr(loaded, name), getattr(graph, name)), name


# signed stores ---------------------------------------------------------------------------
def test_signed_store_opens_only_with_its_key(tmp_path, graph):
    graph.save(tmp_path / "s", page_bytes=4000, key=b"secret")
    loaded = hg.open_store(tmp_path / "s", key=b"secret")
    assert np.array_equal(loaded.in_indices, graph.in_indices)
    assert hg.open_store(tmp_path / "s", key="secret").num_arcs == graph.num_arcs
    with pytest.raises(hg.StoreError, match="signature does not match"):
        hg.open_store(tmp_path / "s", key=b"other")
    hg.open_store(tmp_path / "s")  # no key: checked as any store (checksum, CRC32)
    graph.save(tmp_path / "u", page_bytes=4000)
    with pytest.raises(hg.StoreError, match="not signed"):
        hg.open_store(tmp_path / "u", key=b"secret")


def test_signed_store_detects_a_tampered_block_with_matching_crc(tmp_path, graph):
    graph.save(tmp_path / "s", page_bytes=4000, key=b"secret")
    tamper(tmp_path / "s", page_block(1, "src"), _set(0, 1))  # CRC32 and checksum redone
    hg.open_store(tmp_path / "s")  # a valid graph: only the key can tell
    with pytest.raises(hg.StoreError, match="signature does not match"):
        hg.open_store(tmp_path / "s", key=b"secret")


def test_signed_store_checks_every_block_sha256(tmp_path, graph):
    graph.save(tmp_path / "s", page_bytes=4000, key=b"secret")
    store = PageStore(tmp_path / "s", key=b"secret")
    store.manifest["pages"][1]["blocks"]["src"]["sha256"] = "0" * 64  # as if data changed
    with pytest.raises(hg.ChecksumError, match="SHA-256"):
        store.load()


def test_verify_a_signed_store(tmp_path, graph):
    graph.save(tmp_path / "s", page_bytes=4000, key=b"secret")
    (tmp_path / "key").write_bytes(b"secret\n")
    (tmp_path / "bad").write_bytes(b"guess\n")
    good = subprocess.run([sys.executable, "-m", "hetgraph", "verify", str(tmp_path / "s"),
                           "--key-file", str(tmp_path / "key")], capture_output=True,
                          text=True, timeout=300)
    assert good.returncode == 0 and "signature matches" in good.stdout, good.stderr
    bad = subprocess.run([sys.executable, "-m", "hetgraph", "verify", str(tmp_path / "s"),
                          "--key-file", str(tmp_path / "bad")], capture_output=True,
                         text=True, timeout=300)
    assert bad.returncode == 1 and "signature does not match" in bad.stderr
