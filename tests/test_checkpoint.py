"""Checkpoints: written atomically every n iterations, resumed to the uninterrupted
answer, refused for another graph, program or mode, damaged ones skipped."""

import json
import logging
import os

import numpy as np
import pytest

import hetgraph as hg
from hetgraph.algorithms.bfs import BreadthFirst
from hetgraph.scheduler import checkpoint as checkpoint_mod


CPU = {"devices": "cpu", "partitions": 1}  # bit-identical PageRank sums


@pytest.fixture(scope="module")
def graph():
    return hg.generate.rmat(11, edge_factor=8, seed=7, weights=(1.0, 4.0))


def _pagerank(graph, directory, iterations, **options):
    return hg.pagerank(graph, max_iterations=iterations, tol=None, checkpoint=directory,
                       **CPU, **options)


def _checkpoints(directory):
    return sorted(n for n in os.listdir(directory) if n.startswith("ckpt-"))


def test_checkpoints_every_n_and_resume_gives_the_uninterrupted_answer(graph, tmp_path):
    expected = hg.pagerank(graph, max_iterations=17, tol=None, **CPU)
    first = _pagerank(graph, tmp_path, 7, checkpoint_every=3)
    assert _checkpoints(tmp_path) == ["ckpt-000000006", "ckpt-000000007"]  # newest two
    resumed = _pagerank(graph, tmp_path, 17, checkpoint_every=3, resume=True)
    np.testing.assert_array_equal(resumed.values, expected.values)
    assert resumed.iterations == 17
    assert resumed.history["iteration"].tolist() == list(range(1, 18))
    assert resumed.history.iloc[:7]["seconds"].tolist() == first.history["seconds"].tolist()
    assert _checkpoints(tmp_path) == ["ckpt-000000015", "ckpt-000000017"]
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_resumed_sssp_and_cc_converge_to_the_reference(graph, tmp_path, mode):
    source = int(np.argmax(graph.out_degree()))
    expected = hg.sssp(graph, source, mode=mode).values
    hg.sssp(graph, source, mode=mode, max_iterations=2, checkpoint=tmp_path / "s",
            checkpoint_every=1)
    got = hg.sssp(graph, source, mode=mode, checkpoint=tmp_path / "s", resume=True)
    np.testing.assert_array_equal(got.values, expected)
    assert got.converged and got.iterations > 2
    cc = hg.connected_components(graph, mode=mode, max_iterations=1,
                                 checkpoint=tmp_path / "c")
    assert not cc.converged
    cc = hg.connected_components(graph, mode=mode, checkpoint=tmp_path / "c", resume=True)
    np.testing.assert_array_equal(cc.values, hg.connected_components(graph).values)


def test_a_converged_run_resumes_without_iterating(graph, tmp_path):
    done = hg.sssp(graph, 0, checkpoint=tmp_path)
    again = hg.sssp(graph, 0, checkpoint=tmp_path, resume=True)
    assert again.converged and again.iterations == done.iterations
    np.testing.assert_array_equal(again.values, done.values)
    assert again.history["seconds"].tolist() == done.history["seconds"].tolist()


def test_resume_without_checkpoints_starts_from_the_beginning(graph, tmp_path):
    got = _pagerank(graph, tmp_path / "new", 4, resume=True)
    np.testing.assert_array_equal(
        got.values, hg.pagerank(graph, max_iterations=4, tol=None, **CPU).values)
    with pytest.raises(hg.GraphError, match="resume=True needs checkpoint=DIR"):
        hg.pagerank(graph, resume=True)


def test_a_checkpoint_of_another_run_is_refused(graph, tmp_path):
    _pagerank(graph, tmp_path, 3)
    other = hg.generate.rmat(11, edge_factor=8, seed=8, weights=(1.0, 4.0))
    with pytest.raises(hg.CheckpointError, match="another graph"):
        _pagerank(other, tmp_path, 5, resume=True)
    with pytest.raises(hg.CheckpointError, match="another program or other parameters"):
        _pagerank(graph, tmp_path, 5, damping=0.9, resume=True)
    with pytest.raises(hg.CheckpointError, match="mode='sync'"):
        _pagerank(graph, tmp_path, 5, mode="async", resume=True)
    hg.sssp(graph, 0, checkpoint=tmp_path / "s", max_iterations=1)
    with pytest.raises(hg.CheckpointError, match="another program"):
        hg.sssp(graph, 1, checkpoint=tmp_path / "s", resume=True)
    with pytest.raises(hg.CheckpointError, match="another program"):
        hg.bfs(graph, 0, checkpoint=tmp_path / "s", resume=True)


def test_a_damaged_newest_checkpoint_falls_back_to_the_previous(graph, tmp_path, caplog):
    expected = hg.pagerank(graph, max_iterations=9, tol=None, **CPU).values
    _pagerank(graph, tmp_path, 6, checkpoint_every=3)
    newest = tmp_path / "ckpt-000000006" / "values.bin"
    data = bytearray(newest.read_bytes())
    data[100] ^= 0xFF
    newest.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="hetgraph.checkpoint"):
        got = _pagerank(graph, tmp_path, 9, checkpoint_every=3, resume=True)
    assert "ckpt-000000006/values.bin: damaged" in caplog.text
    np.testing.assert_array_equal(got.values, expected)


def test_no_checkpoint_reading_back_is_an_error(graph, tmp_path):
    _pagerank(graph, tmp_path, 2, checkpoint_every=1)
    for name in _checkpoints(tmp_path):
        os.truncate(tmp_path / name / "flags.bin", 10)
    with pytest.raises(hg.CheckpointError, match="no checkpoint reads back whole.*delete"):
        _pagerank(graph, tmp_path, 4, resume=True)


def test_a_newer_checkpoint_format_is_refused(graph, tmp_path):
    _pagerank(graph, tmp_path, 2)
    meta_path = tmp_path / "ckpt-000000002" / "checkpoint.json"
    meta = json.loads(meta_path.read_text())
    meta["version"] = checkpoint_mod.VERSION + 1
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(hg.CheckpointError, match="newer than this hetgraph reads"):
        _pagerank(graph, tmp_path, 4, resume=True)


def test_a_checkpoint_whose_rows_lack_the_newer_history_columns_resumes(graph, tmp_path):
    """Rows written before generation_seconds and transfer_seconds existed read back
    with 0.0 there; a row lacking another column is damaged."""
    from hetgraph.io import manifest as seals

    expected = hg.pagerank(graph, max_iterations=4, tol=None, **CPU)
    _pagerank(graph, tmp_path, 2)
    meta_path = tmp_path / "ckpt-000000002" / "checkpoint.json"
    written = meta_path.read_text()

    def write_without(*columns):
        meta = json.loads(written)
        for row in meta["history"]:
            for column in columns:
                del row[column]
        meta[checkpoint_mod.CHECKSUM] = seals.checksum(meta, checkpoint_mod.CHECKSUM)
        meta_path.write_text(json.dumps(meta))

    write_without("generation_seconds", "h2d_bytes")
    with pytest.raises(hg.CheckpointError, match="no checkpoint reads back whole"):
        _pagerank(graph, tmp_path, 4, resume=True)
    write_without("generation_seconds", "transfer_seconds")
    got = _pagerank(graph, tmp_path, 4, resume=True)
    np.testing.assert_array_equal(got.values, expected.values)
    assert got.history["iteration"].tolist() == [1, 2, 3, 4]
    assert got.history["transfer_seconds"].tolist() == [0.0] * 4


def test_disk_full_while_checkpointing_keeps_the_previous_one(graph, tmp_path, monkeypatch):
    _pagerank(graph, tmp_path, 4, checkpoint_every=2)
    real_write = checkpoint_mod._write
    calls = {"n": 0}

    def failing_write(path, data):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(28, "No space left on device")
        return real_write(path, data)

    monkeypatch.setattr(checkpoint_mod, "_write", failing_write)
    with pytest.raises(hg.CheckpointError, match="No space left.*previous checkpoints are "
                                                 "intact"):
        _pagerank(graph, tmp_path, 8, checkpoint_every=2, resume=True)
    monkeypatch.setattr(checkpoint_mod, "_write", real_write)
    assert _checkpoints(tmp_path) == ["ckpt-000000002", "ckpt-000000004"]
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]
    got = _pagerank(graph, tmp_path, 8, checkpoint_every=2, resume=True)
    np.testing.assert_array_equal(
        got.values, hg.pagerank(graph, max_iterations=8, tol=None, **CPU).values)


def test_a_sampled_digest_reads_every_element_of_a_small_array_and_a_sample_of_a_large():
    """The calibration key's digest of a program's arrays (sampled_crc32): all of an
    array of up to 4,096 elements, then evenly spaced ones (every 16th of 65,536)."""
    from hetgraph.io.store import crc32

    small = np.arange(4096, dtype=np.float64)
    assert checkpoint_mod.sampled_crc32(small) == crc32(small)
    large = np.arange(65536, dtype=np.int32)
    assert checkpoint_mod.sampled_crc32(large) == crc32(large[::16])
    changed = large.copy()
    changed[32] = -1  # a sampled element
    assert checkpoint_mod.sampled_crc32(changed) != checkpoint_mod.sampled_crc32(large)
    changed = large.copy()
    changed[33] = -1  # not sampled: the same digest (a calibration may be shared)
    assert checkpoint_mod.sampled_crc32(changed) == checkpoint_mod.sampled_crc32(large)


def test_a_fingerprint_is_the_one_earlier_checkpoints_carry():
    """A program's code is described once per code object (a warm call's calibration
    key takes its fingerprint), and its fingerprint is still the SHA-256 of its class,
    dtype, monoid, code (bytecode and constants) and parameters, which checkpoints
    written before carry; programs whose code differs in a constant differ."""
    import hashlib

    from hetgraph.algorithms.sssp import ShortestPaths
    from hetgraph.program import ProgramSpec

    spec = ProgramSpec(ShortestPaths(3))
    expected = hashlib.sha256()
    expected.update(repr(("hetgraph.algorithms.sssp", "ShortestPaths", "<f8", "min")).encode())
    for fn in (spec.gather, spec.apply, spec.activate):
        code = fn.__code__
        expected.update(code.co_code + repr(tuple(
            repr(c) if c is None or isinstance(c, (bool, int, float, str)) else
            type(c).__qualname__ for c in code.co_consts)).encode())
    expected.update(repr((("delta", "None"), ("dtype", "dtype('float64')"),
                          ("source", "3"))).encode())
    for _ in range(2):  # (the second from the described code)
        assert checkpoint_mod.program_fingerprint(spec) == expected.hexdigest()

    def plus(gather):  # (the same class name: the constant alone tells them apart)
        return type("Plus", (ShortestPaths,), {"gather": staticmethod(gather)})

    One = plus(lambda src, weight, dst: src + weight + 1.0)
    Two = plus(lambda src, weight, dst: src + weight + 2.0)
    fingerprints = [checkpoint_mod.program_fingerprint(ProgramSpec(program(3)))
                    for program in (One, Two, One, Two)]
    assert fingerprints[:2] == fingerprints[2:] and len(set(fingerprints)) == 2


def test_a_programs_arrays_derived_from_the_graph_leave_its_fingerprint_alone(graph):
    """A program whose graph-derived arrays an earlier call made (PageRank's dangling
    vertices and scales, set on it by ``derived``) has the fingerprint of one without
    them: else a checkpoint of the one refuses to resume in the other (as on the GPU
    machine, where an earlier run had made them)."""
    from hetgraph.algorithms.pagerank import PageRank
    from hetgraph.program import ProgramSpec

    made, fresh = (PageRank(0.85, None, np.float64, True, None) for _ in range(2))
    made.derived(graph)
    assert checkpoint_mod.program_fingerprint(ProgramSpec(made)) != \
        checkpoint_mod.program_fingerprint(ProgramSpec(fresh))  # (the arrays differ)
    prints = {checkpoint_mod.program_fingerprint(spec, checkpoint_mod.graph_blind_digest(
        spec, graph)) for spec in (ProgramSpec(made), ProgramSpec(fresh))}
    assert len(prints) == 1
    other = PageRank(0.5, None, np.float64, True, None)  # (parameters still tell apart)
    spec = ProgramSpec(other)
    assert checkpoint_mod.program_fingerprint(
        spec, checkpoint_mod.graph_blind_digest(spec, graph)) not in prints


def test_fingerprints_are_stable_and_discriminating(graph, tmp_path):
    from hetgraph.program import ProgramSpec
    from hetgraph.algorithms.pagerank import PageRank

    fp = checkpoint_mod.program_fingerprint
    assert fp(ProgramSpec(PageRank(0.85, None, np.float64, True))) == \
        fp(ProgramSpec(PageRank(0.85, None, np.float64, True)))
    assert fp(ProgramSpec(PageRank(0.85, None, np.float64, True))) != \
        fp(ProgramSpec(PageRank(0.85, None, np.float32, True)))
    sampled = checkpoint_mod.sampled_crc32  # (the calibration key's)
    first, second = (ProgramSpec(PageRank(0.85, None, np.float64, True)) for _ in range(2))
    first.initial_state(graph)
    second.initial_state(graph)
    assert fp(first, sampled) == fp(second, sampled)
    second.program._scale = second.program._scale * 2  # its arrays count, sampled
    assert fp(first, sampled) != fp(second, sampled)
    gf = checkpoint_mod.graph_fingerprint
    store = graph.save(tmp_path / "s")
    assert gf(hg.open_store(tmp_path / "s")) == gf(store.stored_graph())
    assert gf(graph) != gf(hg.generate.rmat(11, edge_factor=8, seed=7))  # no weights
    with pytest.raises(hg.CheckpointError, match="checkpoint_every=0"):
        hg.pagerank(graph, checkpoint=tmp_path / "c", checkpoint_every=0)


def test_a_checkpoint_of_other_seeds_in_a_set_is_refused(tmp_path):
    """A program parameter held in a set (or bytes, a complex number) is part of the
    fingerprint by its elements, not its type alone: a run from other seeds does not
    resume from the checkpoint of another's (it would finish that run's levels)."""
    from hetgraph.program import ProgramSpec
    from seeded import FromSeeds, levels_from

    graph = hg.generate.grid(12, 12)
    hg.run(FromSeeds({0}), graph, devices="cpu", max_iterations=3, checkpoint=tmp_path)
    with pytest.raises(hg.CheckpointError, match="another program"):
        hg.run(FromSeeds({143}), graph, devices="cpu", checkpoint=tmp_path, resume=True)
    resumed = hg.run(FromSeeds({0}), graph, devices="cpu", checkpoint=tmp_path,
                     resume=True)
    np.testing.assert_array_equal(resumed.values, levels_from(graph, [0]))
    fp = checkpoint_mod.program_fingerprint
    prints = [fp(ProgramSpec(FromSeeds(seeds))) for seeds in (
        {1, 2}, frozenset((2, 1)), {1, 3}, b"\x01", b"\x02", 1j, 2j)]
    assert prints[0] == prints[1] and len(set(prints[1:])) == 6


def test_dict_parameters_differ_by_their_keys_types():
    """A dict parameter is fingerprinted by its keys as they are, not as strings: a
    program of weights {1: ...} is not the program of weights {"1": ...}; the items'
    order does not matter."""
    from hetgraph.program import ProgramSpec
    from seeded import FromSeeds

    fp = checkpoint_mod.program_fingerprint
    prints = [fp(ProgramSpec(FromSeeds(seeds))) for seeds in (
        {1: 0.5, 2: 1.0}, {2: 1.0, 1: 0.5}, {"1": 0.5, 2: 1.0}, {1: 0.5, 2.0: 1.0},
        {1: 0.5, 2: 2.0})]
    assert prints[0] == prints[1] and len(set(prints[1:])) == 4


def test_a_checkpoint_of_another_series_of_seeds_is_refused(tmp_path):
    """An array-like parameter (a pandas Series mask) is part of the fingerprint by its
    values, as an array is, not by its type alone."""
    import pandas as pd

    from seeded import FromSeeds, levels_from

    graph = hg.generate.grid(12, 12)

    def mask(seed):
        return pd.Series(np.arange(graph.num_vertices) == seed, dtype=np.uint8)

    hg.run(FromSeeds(mask(0)), graph, devices="cpu", max_iterations=3, checkpoint=tmp_path)
    with pytest.raises(hg.CheckpointError, match="another program"):
        hg.run(FromSeeds(mask(143)), graph, devices="cpu", checkpoint=tmp_path,
               resume=True)
    resumed = hg.run(FromSeeds(mask(0)), graph, devices="cpu", checkpoint=tmp_path,
                     resume=True)
    np.testing.assert_array_equal(resumed.values, levels_from(graph, [0]))


def test_a_checkpoint_of_a_program_calling_another_function_is_refused(graph, tmp_path):
    """Programs of one class name whose code differs only in the names it reads (``min``
    where the other has ``max``: the same bytecode and constants) are other programs:
    a run of the one does not resume from the other's checkpoint (as after an edit of
    the program between two processes)."""
    from hetgraph.algorithms.sssp import ShortestPaths
    from hetgraph.program import ProgramSpec

    def picking(gather):  # (the same class name: the names alone tell them apart)
        return type("Picking", (ShortestPaths,), {"gather": staticmethod(gather)})

    low = picking(lambda src, weight, dst: min(src + weight, src))
    high = picking(lambda src, weight, dst: max(src + weight, src))
    assert checkpoint_mod.program_fingerprint(ProgramSpec(low(0))) != \
        checkpoint_mod.program_fingerprint(ProgramSpec(high(0)))
    spec = ProgramSpec(low(0))  # (its checkpoint as its run writes it: no compile)
    values, flags, _ = spec.initial_state(graph)
    checkpoint_mod.Checkpointer(
        tmp_path, graph_fp=checkpoint_mod.graph_fingerprint(graph), mode="sync",
        program_fp=checkpoint_mod.program_fingerprint(
            spec, checkpoint_mod.graph_blind_digest(spec, graph))).save(0, values, flags, [])
    with pytest.raises(hg.CheckpointError, match="another program"):
        hg.run(high(0), graph, checkpoint=tmp_path, resume=True, **CPU)


class _Noted(BreadthFirst):
    """BFS whose init notes the graph's size on the program (a side effect)."""

    init_side_effects = True

    def init(self, graph, xp=np):
        self.size = graph.num_vertices
        return super().init(graph, xp)


def test_the_program_that_wrote_a_checkpoint_resumes_from_it(tmp_path):
    """A program whose init sets an attribute resumes from its checkpoint when the same
    object runs again (its attributes now those its init left, as a new object's are
    once its init ran), as a new object of the same parameters does; a new object of
    other parameters is refused. Answers against SciPy."""
    from seeded import levels_from

    graph = hg.generate.grid(10, 10)
    options = dict(devices="cpu", checkpoint=tmp_path, checkpoint_every=1)
    program = _Noted(0)
    hg.run(program, graph, max_iterations=3, **options)
    for again in (program, _Noted(0)):
        resumed = hg.run(again, graph, resume=True, **options)
        np.testing.assert_array_equal(resumed.values, levels_from(graph, [0]))
    with pytest.raises(hg.CheckpointError, match="another program"):
        hg.run(_Noted(5), graph, resume=True, **options)
