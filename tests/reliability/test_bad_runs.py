"""Catalogue of bad run-time inputs beyond programs and files: stores, budgets,
checkpoints and the GPU's memory. Each raises a HetGraphError subclass that says what
and where, before anything is written."""

import json
import os

import numpy as np
import pytest

import hetgraph as hg


@pytest.fixture(scope="module")
def graph():
    return hg.generate.rmat(10, edge_factor=8, seed=6, weights=(1.0, 2.0))


def test_store_of_a_newer_format_at_run_time(graph, tmp_path):
    graph.save(tmp_path / "s")
    manifest = tmp_path / "s" / "manifest.json"
    data = json.loads(manifest.read_text())
    data["version"] += 1
    manifest.write_text(json.dumps(data))
    with pytest.raises(hg.StoreVersionError, match="manifest.json: store format version .* "
                                                   "newer than this hetgraph reads"):
        hg.pagerank(hg.PageStore(tmp_path / "s"))


@pytest.mark.parametrize("budget", [0, -5, 1.5, "4GB"])
def test_bad_host_budget(graph, budget):
    with pytest.raises(hg.GraphError, match=f"host_budget={budget!r} must be a positive "
                                            f"integer"):
        hg.pagerank(graph, host_budget=budget)


def test_checkpoint_directory_is_a_file(graph, tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(hg.CheckpointError, match="file/ckpt-000000002: writing the "
                                                 "checkpoint of iteration 2 failed"):
        hg.pagerank(graph, max_iterations=2, checkpoint=tmp_path / "file")
    assert (tmp_path / "file").read_text() == "x"


def test_checkpoint_of_another_size_or_dtype(graph, tmp_path):
    hg.bfs(graph, 0, checkpoint=tmp_path, max_iterations=1)
    meta_path = tmp_path / "ckpt-000000001" / "checkpoint.json"
    meta = json.loads(meta_path.read_text())
    meta["num_vertices"] += 1
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(hg.CheckpointError, match=r"holds 1025 values of <i4, the run has 1024"):
        hg.bfs(graph, 0, checkpoint=tmp_path, resume=True)


def test_unreadable_checkpoint_json(graph, tmp_path):
    hg.bfs(graph, 0, checkpoint=tmp_path, max_iterations=1)
    (tmp_path / "ckpt-000000001" / "checkpoint.json").write_text("{not json")
    with pytest.raises(hg.CheckpointError, match="checkpoint.json is unreadable"):
        hg.bfs(graph, 0, checkpoint=tmp_path, resume=True)


def test_out_of_core_source_label_unknown(graph, tmp_path):
    store = graph.save(tmp_path / "s", page_bytes=4 << 10, shared_bytes=4096)
    budget = store.data_bytes // 2
    with pytest.raises(hg.GraphError, match="source: vertex 5000 is not in the graph"):
        hg.sssp(store, 5000, host_budget=budget)
    assert os.listdir(tmp_path) == ["s"]


def test_out_of_core_negative_weight_is_named(tmp_path):
    src, dst = np.array([0, 1, 2, 3]), np.array([1, 2, 3, 0])
    g = hg.from_arrays(src, dst, weight=np.array([1.0, 2.0, -3.0, 1.0]))
    store = g.save(tmp_path / "s")
    with pytest.raises(hg.GraphError, match="edge 2 -> 3 has weight -3.0"):
        hg.sssp(store.stored_graph(), 0)


@pytest.mark.gpu
def test_gpu_out_of_memory_is_a_clear_error(graph):
    from hetgraph.kernels.gpu.device import GpuMemoryError

    with pytest.raises(GpuMemoryError, match="does not fit the GPU budget"):
        hg.sssp(graph, 0, devices="gpu", gpu={"memory_budget": 64})
