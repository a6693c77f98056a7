"""Checkpoints trusted too much (issue 50, items 4 and 5): a checkpoint edited to say it
converged, padded, emptied or altered history, malformed checkpoint.json shapes, a FIFO
for a values file, and two runs sharing one checkpoint directory. An edited checkpoint
fails its checksum (or, with a key, its signature) and is never resumed from; a
malformed one gives a CheckpointError; a directory is owned by one run at a time."""

import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import hetgraph as hg
from hetgraph import tuning
from hetgraph.scheduler import checkpoint as ckpt

CPU = {"devices": "cpu", "partitions": 1}  # bit-identical PageRank sums


@pytest.fixture(scope="module")
def graph():
    return hg.generate.rmat(9, edge_factor=8, seed=5, weights=(1.0, 3.0))


@pytest.fixture(scope="module")
def expected(graph):
    """PageRank to convergence, uninterrupted: what any resumed run must give."""
    return hg.pagerank(graph, **CPU)


def pagerank(graph, directory, iterations=100, **options):
    return hg.pagerank(graph, max_iterations=iterations, checkpoint=directory, **CPU,
                       **options)


def checkpoints(directory):
    return sorted(n for n in os.listdir(directory) if n.startswith("ckpt-"))


def meta_path(directory, name=None):
    return directory / (name or checkpoints(directory)[-1]) / "checkpoint.json"


def edit(directory, change, name=None, reseal=False, key=None):
    """Apply ``change`` to a checkpoint's metadata; ``reseal`` recomputes its checksum
    (and signature with ``key``), as an attacker who knows the format would."""
    path = meta_path(directory, name)
    meta = json.loads(path.read_text())
    change(meta)
    if reseal:  # (without a key, the old signature stays: the attacker cannot make one)
        meta.pop(ckpt.CHECKSUM)
        if key is not None:
            meta.pop(ckpt.SIGNATURE, None)
        meta = ckpt.sealed(meta, key)
    path.write_text(json.dumps(meta))


def set_key(name, value):
    def change(meta):
        meta[name] = value
    return change


# a whole checkpoint under one checksum ------------------------------------------------
def test_converged_written_into_an_unfinished_checkpoint_is_not_believed(graph, expected,
                                                                         tmp_path, caplog):
    pagerank(graph, tmp_path, 4, checkpoint_every=2)
    edit(tmp_path, set_key("converged", True))
    got = pagerank(graph, tmp_path, checkpoint_every=2, resume=True)
    assert "ckpt-000000004/checkpoint.json: checksum does not match" in caplog.text
    assert got.converged and got.iterations == expected.iterations
    np.testing.assert_array_equal(got.values, expected.values)


HISTORY_EDITS = [
    ("padded", lambda m: m["history"].append(dict(m["history"][-1]))),
    ("emptied", lambda m: m["history"].clear()),
    ("altered", lambda m: m["history"][0].update(seconds=1e9)),
    ("reordered", lambda m: m["history"].reverse()),
]


@pytest.mark.parametrize("case, change", HISTORY_EDITS, ids=[c[0] for c in HISTORY_EDITS])
def test_edited_history_is_refused(graph, tmp_path, monkeypatch, case, change):
    monkeypatch.setattr(tuning, "CHECKPOINTS_KEPT", 1)
    pagerank(graph, tmp_path, 3)
    edit(tmp_path, change)
    with pytest.raises(hg.CheckpointError, match="no checkpoint reads back whole.*(checksum "
                                                 "does not match|history)"):
        pagerank(graph, tmp_path, 6, resume=True)


@pytest.mark.parametrize("case, change", HISTORY_EDITS[:2] + HISTORY_EDITS[3:],
                         ids=[c[0] for c in HISTORY_EDITS[:2] + HISTORY_EDITS[3:]])
def test_history_inconsistent_with_its_iteration_is_refused_even_resealed(
        graph, tmp_path, monkeypatch, case, change):
    monkeypatch.setattr(tuning, "CHECKPOINTS_KEPT", 1)
    pagerank(graph, tmp_path, 3)
    edit(tmp_path, change, reseal=True)
    with pytest.raises(hg.CheckpointError, match="history"):
        pagerank(graph, tmp_path, 6, resume=True)


def test_an_altered_values_file_is_refused(graph, expected, tmp_path, caplog):
    pagerank(graph, tmp_path, 4, checkpoint_every=2)
    values = tmp_path / "ckpt-000000004" / "values.bin"
    data = np.fromfile(values, np.float64)
    data[:] = 1.0 / len(data)
    data.tofile(values)
    got = pagerank(graph, tmp_path, checkpoint_every=2, resume=True)
    assert "ckpt-000000004/values.bin: damaged" in caplog.text
    np.testing.assert_array_equal(got.values, expected.values)


# a key --------------------------------------------------------------------------------
def test_a_keyed_checkpoint_refuses_an_edit_resealed_without_the_key(graph, tmp_path,
                                                                     monkeypatch):
    monkeypatch.setenv("HETGRAPH_CHECKPOINT_KEY", "s3cret")
    monkeypatch.setattr(tuning, "CHECKPOINTS_KEPT", 1)
    pagerank(graph, tmp_path, 3)
    assert ckpt.SIGNATURE in json.loads(meta_path(tmp_path).read_text())
    edit(tmp_path, set_key("converged", True), reseal=True)  # the checksum matches again
    with pytest.raises(hg.CheckpointError, match="signature does not match the key"):
        pagerank(graph, tmp_path, 6, resume=True)


def test_a_keyed_checkpoint_resumes_with_its_key_only(graph, expected, tmp_path,
                                                      monkeypatch):
    monkeypatch.setenv("HETGRAPH_CHECKPOINT_KEY", "s3cret")
    monkeypatch.setattr(tuning, "CHECKPOINTS_KEPT", 1)
    pagerank(graph, tmp_path, 3)
    monkeypatch.setenv("HETGRAPH_CHECKPOINT_KEY", "other")
    with pytest.raises(hg.CheckpointError, match="signature does not match the key"):
        pagerank(graph, tmp_path, resume=True)
    monkeypatch.setenv("HETGRAPH_CHECKPOINT_KEY", "s3cret")
    np.testing.assert_array_equal(pagerank(graph, tmp_path, resume=True).values,
                                  expected.values)


def test_an_unsigned_checkpoint_is_refused_when_a_key_is_set(graph, tmp_path, monkeypatch):
    monkeypatch.setattr(tuning, "CHECKPOINTS_KEPT", 1)
    pagerank(graph, tmp_path, 3)
    monkeypatch.setenv("HETGRAPH_CHECKPOINT_KEY", "s3cret")
    with pytest.raises(hg.CheckpointError, match="not signed"):
        pagerank(graph, tmp_path, resume=True)


# malformed checkpoint.json, resealed: the schema must catch them -----------------------
def deep(meta):
    meta["mode"] = json.loads("[" * 50 + "]" * 50)


MALFORMED = [
    ("missing iteration", lambda m: m.pop("iteration"), "iteration"),
    ("string for num_vertices", set_key("num_vertices", "512"), "num_vertices"),
    ("negative iteration", set_key("iteration", -1), "iteration"),
    ("float iteration", set_key("iteration", 3.0), "iteration"),
    ("dtype object", set_key("dtype", "O"), "dtype"),
    ("dtype bogus", set_key("dtype", "zz9"), "dtype"),
    ("history not a list", set_key("history", {"a": 1}), "history"),
    ("history row not a dict", lambda m: m["history"].__setitem__(0, 7), "history"),
    ("history row with a nested value", lambda m: m["history"][0].update(f=[1]), "history"),
    ("history row without a column", lambda m: m["history"][0].pop("edges"), "history"),
    ("crc32 not a dict", set_key("crc32", 5), "crc32"),
    ("crc32 string", lambda m: m["crc32"].update(values="x"), "crc32"),
    ("converged a string", set_key("converged", "yes"), "converged"),
    ("nested mode", deep, "mode"),
]


@pytest.mark.parametrize("case, change, key", MALFORMED, ids=[c[0] for c in MALFORMED])
def test_malformed_checkpoint_json_is_a_checkpoint_error(graph, tmp_path, monkeypatch,
                                                         case, change, key):
    monkeypatch.setattr(tuning, "CHECKPOINTS_KEPT", 1)
    pagerank(graph, tmp_path, 3)
    edit(tmp_path, change, reseal=True)
    with pytest.raises(hg.CheckpointError, match=key):
        pagerank(graph, tmp_path, 6, resume=True)


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, "[]", "null", '"x"',
                                  '{"format": "hetgraph-checkpoint"}'],
                         ids=["deep nesting", "list", "null", "string", "format only"])
def test_checkpoint_json_of_another_shape(graph, tmp_path, monkeypatch, text):
    monkeypatch.setattr(tuning, "CHECKPOINTS_KEPT", 1)
    pagerank(graph, tmp_path, 3)
    meta_path(tmp_path).write_text(text)
    with pytest.raises(hg.CheckpointError):
        pagerank(graph, tmp_path, 6, resume=True)


@pytest.mark.parametrize("name", ["values.bin", "flags.bin", "checkpoint.json"])
def test_a_fifo_in_a_checkpoint_is_refused_without_blocking(graph, tmp_path, monkeypatch,
                                                            name):
    monkeypatch.setattr(tuning, "CHECKPOINTS_KEPT", 1)
    pagerank(graph, tmp_path, 3)
    fifo = tmp_path / checkpoints(tmp_path)[-1] / name
    os.remove(fifo)
    os.mkfifo(fifo)
    outcome = []
    thread = threading.Thread(target=lambda: outcome.append(_resume_outcome(graph, tmp_path)),
                              daemon=True)
    thread.start()
    thread.join(30)
    if thread.is_alive():  # blocked on the FIFO: open and close its other end
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join()
        pytest.fail("resuming blocked on a FIFO")
    assert isinstance(outcome[0], hg.CheckpointError)
    assert "not a regular file" in str(outcome[0])


def _resume_outcome(graph, directory):
    try:
        return pagerank(graph, directory, 6, resume=True)
    except Exception as exc:  # noqa: BLE001 (the outcome is what is checked)
        return exc


# one run per checkpoint directory -----------------------------------------------------
HOLDER = """
import sys
from hetgraph.scheduler.checkpoint import Checkpointer
import numpy as np
c = Checkpointer(sys.argv[1], graph_fp="g", program_fp="p", mode="sync")
c.save(1, np.zeros(4), np.zeros(4, np.uint8), [])
print("holding", flush=True)
sys.stdin.read()
"""


def test_a_second_process_sharing_the_directory_is_refused(graph, expected, tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              cwd=os.path.dirname(os.path.dirname(hg.__file__)))
    try:
        assert holder.stdout.readline() == "holding\n"
        with pytest.raises(hg.CheckpointError, match=rf"in use by another run \(process "
                                                     rf"{holder.pid} on "):
            pagerank(graph, tmp_path)
        assert checkpoints(tmp_path) == ["ckpt-000000001"]  # nothing of ours written
    finally:
        holder.stdin.close()
        holder.wait()
    got = pagerank(graph, tmp_path)  # the holder is gone: the directory is free
    np.testing.assert_array_equal(got.values, expected.values)


def test_a_second_thread_sharing_the_directory_is_refused(graph, tmp_path):
    started, release = threading.Event(), threading.Event()

    def hold():
        c = ckpt.Checkpointer(tmp_path, graph_fp="g", program_fp="p", mode="sync")
        c.save(1, np.zeros(4), np.zeros(4, np.uint8), [])
        started.set()
        release.wait()

    thread = threading.Thread(target=hold)
    thread.start()
    started.wait()
    try:
        with pytest.raises(hg.CheckpointError, match=r"in use by another run \(thread"):
            pagerank(graph, tmp_path)
    finally:
        release.set()
        thread.join()
    assert pagerank(graph, tmp_path).converged


def test_an_interrupted_run_does_not_keep_the_directory(graph, expected, tmp_path,
                                                       monkeypatch):
    real = ckpt.Checkpointer.save

    def interrupted(self, iteration, *args, **kwargs):
        real(self, iteration, *args, **kwargs)
        if iteration == 2:
            raise KeyboardInterrupt("stopped by the user")

    monkeypatch.setattr(ckpt.Checkpointer, "save", interrupted)
    with pytest.raises(KeyboardInterrupt) as stopped:  # kept: its frames hold the run
        pagerank(graph, tmp_path, checkpoint_every=1)
    monkeypatch.setattr(ckpt.Checkpointer, "save", real)
    got = pagerank(graph, tmp_path, resume=True)  # the same thread: that run ended
    np.testing.assert_array_equal(got.values, expected.values)
    assert stopped.value is not None
