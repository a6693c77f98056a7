"""A run's vertex state kept on the GPU from start to end (issue 49): which programs may,
that their hooks then get the device's array module, and (on a GPU) that such a run
gives the answers of a host-state run while its state never crosses to the host."""

import types

import numpy as np
import pytest
import scipy.sparse.csgraph as csgraph

import hetgraph as hg
from hetgraph.algorithms.bfs import BreadthFirst
from hetgraph.algorithms.cc import MinLabel
from hetgraph.algorithms.pagerank import PageRank
from hetgraph.algorithms.sssp import ShortestPaths
from hetgraph.program import ProgramSpec
from hetgraph.scheduler import state as state_module


class Levels(hg.VertexProgram):
    """A BFS written by a user, with an array-module init."""

    dtype = np.int32
    reduce = "min"

    @staticmethod
    def gather(src, weight, dst):
        return src + 1

    @staticmethod
    def apply(old, acc, aux):
        return min(old, acc)

    @staticmethod
    def activate(new, old):
        return new < old

    def init(self, graph, xp=np):
        values = xp.full(graph.num_vertices, 2**30, np.int32)
        values[0] = 0
        return values, None


class HostFinalize(Levels):
    def finalize(self, graph, values):  # no xp: finishes on the host only
        return values


class HostInit(Levels):
    def init(self, graph):  # no xp
        return super().init(graph)


class Scaled(Levels):
    def aux(self, graph, xp=np):
        return xp.ones(graph.num_vertices, np.float32)


def test_a_program_keeps_its_state_on_a_device_only_when_every_hook_takes_xp():
    assert ProgramSpec(Levels()).any_device
    assert ProgramSpec(Scaled()).any_device
    assert not ProgramSpec(HostFinalize()).any_device
    assert not ProgramSpec(HostInit()).any_device
    for program in (BreadthFirst(0), ShortestPaths(0), MinLabel(), PageRank()):
        assert ProgramSpec(program).any_device


def _recording_module(calls):
    """NumPy under another name, recording which of its functions the hooks called."""
    def record(name):
        def call(*args, **kwargs):
            calls.append(name)
            return getattr(np, name)(*args, **kwargs)
        return call

    return types.SimpleNamespace(**{name: record(name) for name in (
        "full", "zeros", "ones", "asarray", "array", "ascontiguousarray", "arange")})


def test_initial_state_builds_with_the_module_it_is_given():
    g = hg.generate.grid(4, 4)
    calls = []
    values, flags, aux = ProgramSpec(Scaled()).initial_state(g, _recording_module(calls))
    assert {"full", "ones", "array"} <= set(calls)
    reference = ProgramSpec(Scaled()).initial_state(g)
    for got, expected in zip((values, flags, aux), reference):
        np.testing.assert_array_equal(got, expected)
    assert values.dtype == np.int32 and flags.dtype == np.uint8


def test_the_built_in_single_source_state_is_the_same_in_any_module():
    g = hg.generate.grid(5, 5)
    for program in (BreadthFirst(7), ShortestPaths(7), MinLabel()):  # (PageRank: GPU test)
        spec = ProgramSpec(program)
        calls = []
        got = spec.initial_state(g, _recording_module(calls))
        assert calls, "the module given was not used"
        for a, b in zip(got, spec.initial_state(g)):
            np.testing.assert_array_equal(a, b)


def test_pinning_copies_the_values_and_flags_but_not_the_array_written_next():
    values, flags = np.arange(5.0), np.array([1, 0, 1, 0, 1], np.uint8)
    state = state_module.VertexState(values, flags, sync=True)
    emptied = []

    def empty(shape, dtype):
        emptied.append((shape, np.dtype(dtype)))
        return np.full(shape, -1, dtype)

    state.pin(np.copy, empty)
    assert state.values is not values and state.flags is not flags
    np.testing.assert_array_equal(state.values, values)
    np.testing.assert_array_equal(state.flags, flags)
    assert emptied == [((5,), np.dtype(np.float64))]
    assert state.new_values is not state.values and (state.new_values == -1).all()
    async_state = state_module.VertexState(values, flags, sync=False)
    async_state.pin(np.copy, empty)
    assert async_state.new_values is async_state.values and len(emptied) == 1


def test_on_the_cpu_the_state_stays_on_the_host():
    g = hg.generate.grid(6, 6)
    result = hg.bfs(g, 0, devices="cpu")
    assert isinstance(result.values, np.ndarray)
    expected = csgraph.shortest_path(g.to_scipy(), method="D", unweighted=True, indices=0)
    np.testing.assert_array_equal(result.values, expected.astype(np.int64))


# on a GPU ------------------------------------------------------------------------------

@pytest.fixture
def states(monkeypatch):
    """The VertexStates the runs make."""
    made = []
    original = state_module.VertexState.__init__

    def spy(self, values, flags, *, sync):
        original(self, values, flags, sync=sync)
        self.made_on_host = self.on_host  # (a state on the GPU may come to the host)
        made.append(self)

    monkeypatch.setattr(state_module.VertexState, "__init__", spy)
    return made


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_gpu_run_keeps_its_state_on_the_device_and_answers_as_the_cpu(states, mode):
    g = hg.generate.rmat(12, seed=3, weights=(1.0, 5.0))
    source = int(np.argmax(g.out_degree()))
    with hg.Cluster(gpus=1):
        runs = {"bfs": lambda **o: hg.bfs(g, source, mode=mode, **o),
                "sssp": lambda **o: hg.sssp(g, source, mode=mode, **o),
                "cc": lambda **o: hg.connected_components(
                    g, algorithm="label-propagation", mode=mode, **o)}
        for name, call in runs.items():
            states.clear()
            on_gpu = call(devices="gpu")
            assert states and not states[0].on_host, name
            assert isinstance(on_gpu.values, np.ndarray)
            np.testing.assert_array_equal(on_gpu.values, call(devices="cpu").values)
        if mode == "sync":  # (async sums in each device's own order)
            states.clear()
            ranks = hg.pagerank(g, tol=None, max_iterations=30, devices="gpu")
            assert states and not states[0].on_host
            reference = hg.pagerank(g, tol=None, max_iterations=30, devices="cpu")
            assert np.abs(ranks.values - reference.values).sum() < 1e-9


@pytest.mark.gpu
def test_a_user_program_without_xp_keeps_its_state_on_the_host(states):
    g = hg.generate.grid(20, 20)
    with hg.Cluster(gpus=1):
        host = hg.run(HostFinalize(), g, devices="gpu")
        assert states[-1].on_host
        device = hg.run(Levels(), g, devices="gpu")
        assert not states[-1].on_host
    np.testing.assert_array_equal(host.values, device.values)
    expected = csgraph.shortest_path(g.to_scipy(), method="D", unweighted=True, indices=0)
    np.testing.assert_array_equal(device.values, expected)


@pytest.mark.gpu
def test_a_checkpointed_gpu_run_keeps_its_state_on_the_host(states, tmp_path):
    g = hg.generate.grid(10, 10)
    with hg.Cluster(gpus=1):
        result = hg.bfs(g, 0, devices="gpu", checkpoint=tmp_path / "ck")
    assert states[-1].on_host
    assert result.values.max() == 18


@pytest.mark.gpu
def test_an_auto_run_keeps_its_state_on_the_gpu_until_an_iteration_needs_the_host(
        states, monkeypatch):
    from hetgraph import tuning
    from hetgraph.scheduler.dispatcher import wait_for_gpu_layouts

    monkeypatch.setattr(tuning, "SMALL_ARCS", 0)  # (the cost model places these graphs)
    rmat = hg.generate.rmat(14, seed=5, weights=(1.0, 5.0))
    grid = hg.generate.grid(80, 80)
    with hg.Cluster(dashboard_address=None) as cluster:
        for g in (rmat, grid):
            source = g.label_of(int(np.argmax(g.out_degree())))
            runs = {"bfs": lambda **o: hg.bfs(g, source, **o),
                    "sssp": lambda **o: hg.sssp(g, source, **o),
                    "cc": lambda **o: hg.connected_components(
                        g, algorithm="label-propagation", **o)}
            for name, call in runs.items():
                hg.pagerank(g, tol=None, max_iterations=1, cluster=cluster,
                            devices="gpu")  # (the GPU keeps its pages: auto places)
                for run in range(3):  # (the last finds the calibration kept)
                    states.clear()
                    auto = call(cluster=cluster, devices="auto")
                    wait_for_gpu_layouts()  # (a first run may end before its layout)
                    assert not states[0].made_on_host, name
                    placed = set(auto.history["placement"])
                    if run == 2:  # (a calibration of the CPU took it to the host)
                        assert states[0].on_host == bool(placed & {"cpu", "hybrid"}), \
                            (name, placed)
                    np.testing.assert_array_equal(auto.values,
                                                  call(devices="cpu").values)
        states.clear()
        ranks = hg.pagerank(rmat, tol=None, max_iterations=20, cluster=cluster,
                            devices="auto")
        assert not states[0].made_on_host
        reference = hg.pagerank(rmat, tol=None, max_iterations=20, devices="cpu")
        assert np.abs(ranks.values - reference.values).sum() < 1e-9
