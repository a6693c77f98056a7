"""Faults during a run: the process killed and resumed, a damaged or missing page
block read out of core, a full disk while writing a store. (A worker process killed
mid-iteration: tests/test_cluster.py::test_killed_worker_page_is_rerun.)"""

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import hetgraph as hg
from conftest import disk_full_after

# PageRank whose iteration hook kills its own process (SIGKILL, no clean-up) in the
# iteration named by HETGRAPH_KILL_AT, in the middle of the run
SCRIPT = textwrap.dedent("""
    import os, signal, sys
    import numpy as np
    import hetgraph as hg
    from hetgraph.algorithms.pagerank import PageRank

    class Killable(PageRank):
        calls = 0

        def iteration_constant(self, graph, values):
            Killable.calls += 1
            if str(Killable.calls) == os.environ.get("HETGRAPH_KILL_AT"):
                os.kill(os.getpid(), signal.SIGKILL)
            return super().iteration_constant(graph, values)

    store, checkpoints, out = sys.argv[1:4]
    result = hg.run(Killable(0.85, None), hg.PageStore(store), max_iterations=12,
                    checkpoint=checkpoints, checkpoint_every=3, resume=True, partitions=1,
                    devices="cpu",
                    host_budget=int(sys.argv[4]))
    np.save(out, result.values)
    print(result.iterations, result.history["read_bytes"].sum())
""")


def _small_budget(store):
    g = store.stored_graph()
    largest = max(e["bytes"] for p in store.manifest["pages"] for e in p["blocks"].values())
    return 2 * g.in_indptr.nbytes + 48 * g.num_vertices + 4 * largest


def test_killed_process_resumes_to_the_uninterrupted_result(tmp_path):
    graph = hg.generate.rmat(13, edge_factor=8, seed=11)
    store = graph.save(tmp_path / "store", page_bytes=8 << 10, shared_bytes=4096)
    budget = _small_budget(store)
    assert budget < store.data_bytes  # the runs go out of core
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    args = [sys.executable, str(script), str(tmp_path / "store"), str(tmp_path / "ckpt"),
            str(tmp_path / "out.npy"), str(budget)]
    env = dict(os.environ, HETGRAPH_KILL_AT="8")
    killed = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not (tmp_path / "out.npy").exists()
    # (the killed run's lock file stays; its lock went with the process)
    assert sorted(os.listdir(tmp_path / "ckpt")) == ["ckpt-000000003", "ckpt-000000006",
                                                      "hetgraph.lock"]
    env.pop("HETGRAPH_KILL_AT")
    resumed = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.split()[0] == "12"
    expected = hg.pagerank(graph, max_iterations=12, tol=None, partitions=1, devices="cpu")
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), expected.values)


def _out_of_core_store(tmp_path):
    graph = hg.generate.rmat(13, edge_factor=8, seed=3)
    store = graph.save(tmp_path / "s", page_bytes=8 << 10, shared_bytes=4096)
    return store, _small_budget(store)


def test_a_corrupted_block_read_out_of_core_is_named(tmp_path):
    store, budget = _out_of_core_store(tmp_path)
    entry = store.manifest["pages"][store.num_pages // 2]["blocks"]["src"]
    path = store.block_path(entry)
    with open(path, "r+b") as f:
        f.seek(entry["bytes"] // 2)
        byte = f.read(1)
        f.seek(entry["bytes"] // 2)
        f.write(bytes([byte[0] ^ 0x55]))
    with pytest.raises(hg.ChecksumError, match=f"{path}: data block is corrupt"):
        hg.pagerank(store, host_budget=budget)


def test_a_block_lost_during_a_run_is_named(tmp_path):
    store, budget = _out_of_core_store(tmp_path)
    entry = store.manifest["pages"][-1]["blocks"]["src"]
    os.remove(store.block_path(entry))
    with pytest.raises(hg.StoreError, match="data block is missing"):
        hg.pagerank(store, host_budget=budget)


def test_disk_full_while_writing_a_store_keeps_the_old_one(tmp_path, monkeypatch):
    old = hg.generate.rmat(9, seed=1)
    old.save(tmp_path / "s")
    disk_full_after(monkeypatch, 4)
    with pytest.raises(hg.StoreError, match="No space left on device"):
        hg.generate.rmat(9, seed=2).save(tmp_path / "s", overwrite=True, page_bytes=2000)
    assert sorted(os.listdir(tmp_path)) == ["s"]
    kept = hg.open_store(tmp_path / "s")
    assert np.array_equal(kept.in_indices, old.in_indices)
