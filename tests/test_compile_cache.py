"""The compile cache (hetgraph.kernels.cpu.diskcache): a program's CPU passes compiled in
one process load in the next (counted by Numba's compile events, not by time), a
changed program (bytecode or a global constant) compiles again, a corrupt or tampered
entry is compiled again without an error, and the cache directory and its files are
private. Each process's answer is checked against SciPy's shortest paths."""

import json
import os
import shutil
import stat
import subprocess
import sys

import numpy as np
import pytest

from hetgraph import cachedir
from hetgraph.kernels.cpu import diskcache
from hetgraph.program import ProgramSpec, function_digest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# a user's program in a module of its own: hops from vertex 0, each STEP long
PROGRAM = '''
import numpy as np
import hetgraph as hg

STEP = {step}


class Hops(hg.VertexProgram):
    dtype = np.float64
    reduce = "min"

    @staticmethod
    def gather(src, weight, dst):
        return {gather}

    @staticmethod
    def apply(old, acc, aux):
        return min(old, acc)

    @staticmethod
    def activate(new, old):
        return new < old

    def init(self, graph):
        values = np.full(graph.num_vertices, np.inf)
        values[0] = 0.0
        return values, values == 0.0
'''

# one process: the program's run on a grid, what Numba compiled and what the cache did
RUN = '''
import json
import numpy as np
from numba.core import event
import hetgraph as hg
from hetgraph.kernels.cpu import kernel
import hops

compiled = []


class Listener(event.Listener):
    def on_start(self, ev):
        compiled.append(ev.data["dispatcher"].py_func.__module__)

    def on_end(self, ev):
        pass


event.register("numba:compile", Listener())
graph = hg.generate.grid(6, 7)
values = hg.run(hops.Hops(), graph, devices="cpu").values
caches = [c for k in kernel._CACHE.values() for c in k.caches.values()]
print(json.dumps({"values": [float(v) for v in values],
                  "compiled": [m for m in compiled
                               if m == "hops" or m.startswith("hetgraph.kernels.cpu")],
                  "loaded": sum(c.loaded for c in caches),
                  "saved": sum(c.saved for c in caches)}))
'''


def run_process(folder, cache, step=1.0, gather="src + STEP"):
    """One fresh process running Hops (written to ``folder``) with the compile cache in
    ``cache``; returns its report."""
    with open(os.path.join(folder, "hops.py"), "w") as f:
        f.write(PROGRAM.format(step=step, gather=gather))
    env = dict(os.environ, HETGRAPH_CACHE=str(cache), PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=os.pathsep.join([str(folder), ROOT]))
    done = subprocess.run([sys.executable, "-c", RUN], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def hops_oracle(step):
    """SciPy's hop counts from vertex 0 on the 6 x 7 grid, times ``step``."""
    import scipy.sparse.csgraph as csgraph

    import hetgraph as hg

    matrix = hg.generate.grid(6, 7).to_scipy()
    return step * csgraph.shortest_path(matrix, unweighted=True, indices=0)


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """(folder, cache, first report, second report): two processes, the second after
    the first filled the cache."""
    folder = tmp_path_factory.mktemp("program")
    cache = tmp_path_factory.mktemp("cache") / "hetgraph"
    return folder, cache, run_process(folder, cache), run_process(folder, cache)


def test_second_process_loads_the_passes_instead_of_compiling(warm):
    _, _, first, second = warm
    assert first["compiled"] and first["saved"] > 0 and first["loaded"] == 0
    assert second["compiled"] == []  # neither the passes nor the program's functions
    assert second["loaded"] == first["saved"] and second["saved"] == 0
    for report in (first, second):
        np.testing.assert_array_equal(report["values"], hops_oracle(1.0))


@pytest.mark.parametrize("change", [{"step": 2.0}, {"gather": "src + 2 * STEP"}],
                         ids=["constant", "bytecode"])
def test_a_changed_program_compiles_again(warm, tmp_path, change):
    folder, cache, _, _ = warm
    copy = tmp_path / "cache"
    shutil.copytree(cache, copy)
    report = run_process(folder, copy, **change)
    assert report["loaded"] == 0 and report["saved"] > 0 and "hops" in report["compiled"]
    np.testing.assert_array_equal(report["values"], hops_oracle(2.0))


def entries(cache):
    return sorted(p for p in cache.iterdir() if p.suffix == ".nbc")


def test_a_corrupt_or_tampered_entry_is_compiled_again(warm, tmp_path):
    folder, cache, first, _ = warm
    copy = tmp_path / "cache"
    shutil.copytree(cache, copy)
    store = cachedir.PrivateStore(str(copy))
    files = entries(copy)
    assert len(files) == first["saved"]
    truncated, flipped, unpicklable = files[0], files[1], files[2:]
    truncated.write_bytes(truncated.read_bytes()[:100])
    data = bytearray(flipped.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one byte changed: the signature no longer holds
    flipped.write_bytes(bytes(data))
    for path in unpicklable:  # signed with the right key, but not a compile result
        store.save(path.name, b"not a pickle")
    report = run_process(folder, copy)
    assert report["loaded"] == 0 and report["saved"] == len(files)
    np.testing.assert_array_equal(report["values"], hops_oracle(1.0))


def test_the_cache_directory_and_its_files_are_private(warm):
    _, cache, _, _ = warm
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    for path in [cache / "key", *entries(cache)]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert path.stat().st_uid == os.getuid()


def test_a_shared_directory_is_made_private(tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o777)
    os.chmod(folder, 0o777)
    store = cachedir.PrivateStore(str(folder))
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    store.save("entry.nbc", b"payload")
    assert store.load("entry.nbc") == b"payload"


def test_an_entry_others_can_write_or_signed_elsewhere_is_refused(tmp_path):
    store = cachedir.PrivateStore(str(tmp_path / "cache"))
    store.save("entry.nbc", b"payload")
    path = tmp_path / "cache" / "entry.nbc"
    os.chmod(path, 0o664)
    assert store.load("entry.nbc") is None
    os.chmod(path, 0o600)
    assert store.load("entry.nbc") == b"payload"
    other = cachedir.PrivateStore(str(tmp_path / "other"))  # another cache: another key
    shutil.copy(path, tmp_path / "other" / "entry.nbc")
    os.chmod(tmp_path / "other" / "entry.nbc", 0o600)
    assert other.load("entry.nbc") is None
    os.rename(path, tmp_path / "cache" / "renamed.nbc")  # signed for its own name only
    assert store.load("renamed.nbc") is None


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0,
                    reason="giving a file to another user needs root")
def test_an_entry_of_another_user_is_refused(tmp_path):
    store = cachedir.PrivateStore(str(tmp_path / "cache"))
    store.save("entry.nbc", b"payload")
    os.chown(tmp_path / "cache" / "entry.nbc", 12345, -1)
    assert store.load("entry.nbc") is None


def test_a_cache_off_or_unusable_compiles_in_memory(tmp_path, monkeypatch):
    import numba

    jitted = {"f": numba.njit(lambda x: x)}
    monkeypatch.setenv("HETGRAPH_CACHE", "off")
    assert cachedir.cache_directory() is None and diskcache.attach(jitted, "k") == {}
    blocker = tmp_path / "file"
    blocker.write_text("a file where the directory would be")
    monkeypatch.setenv("HETGRAPH_CACHE", str(blocker))
    with pytest.warns(RuntimeWarning, match="cache is off"):
        assert diskcache.attach(jitted, "k") == {}


def test_the_program_key_follows_code_constants_and_globals():
    from hetgraph.algorithms.bfs import BreadthFirst
    from hetgraph.algorithms.sssp import ShortestPaths

    bfs, sssp = ProgramSpec(BreadthFirst(0)), ProgramSpec(ShortestPaths(0))
    assert bfs.code_key() == ProgramSpec(BreadthFirst(5)).code_key()  # (not compiled in)
    assert bfs.code_key() != sssp.code_key()
    assert sssp.code_key() != ProgramSpec(ShortestPaths(0, dtype=np.float32)).code_key()
    scope = {"LIMIT": 3}
    exec("def f(x):\n    return min(x, LIMIT)", scope)
    before = function_digest(scope["f"])
    scope["LIMIT"] = 4
    assert function_digest(scope["f"]) != before
    scope["LIMIT"] = object()  # a value with no stable description: not kept on disk
    with pytest.raises(Exception, match="object"):
        function_digest(scope["f"])


def test_a_global_bound_again_in_the_process_takes_another_kernel():
    """The kernel this process keeps for a program is the one compiled for the values
    of the globals its functions read (Numba compiles them in, as the compile cache's
    key knows): bound to another value (or type), the program takes another kernel,
    not the one that gave the earlier value's answers; bound back, the first again."""
    from hetgraph.algorithms.sssp import ShortestPaths
    from hetgraph.kernels.cpu.kernel import compile_program

    scope = {"STEP": 1.0, "ShortestPaths": ShortestPaths}
    exec("class Stepped(ShortestPaths):\n    @staticmethod\n"
         "    def gather(src, weight, dst):\n        return src + STEP", scope)

    def kernel():
        return compile_program(ProgramSpec(scope["Stepped"](0)))

    first = kernel()
    assert kernel() is first
    kernels = [first]
    for step in (2.0, 1):
        scope["STEP"] = step
        kernels.append(kernel())
    assert len({id(k) for k in kernels}) == 3
    scope["STEP"] = 1.0
    assert kernel() is first


def test_a_bundled_graph_is_kept_and_loads_as_read(tmp_path, monkeypatch):
    import hetgraph as hg
    from hetgraph import datasets

    monkeypatch.setenv("HETGRAPH_CACHE", str(tmp_path / "cache"))
    read = hg.read(datasets.path("power"), format="metis")
    first = datasets.load("power")  # parsed, then kept
    (kept,) = (tmp_path / "cache").glob("dataset-power-*.npz")
    calls = []
    monkeypatch.setattr("hetgraph.io.readers.read", lambda *a, **k: calls.append(a))
    second = datasets.load("power")  # from the kept arrays: no reader
    assert calls == []
    for graph in (first, second):
        assert (graph.name, graph.directed, graph.in_weights) == ("power", False, None)
        for name in ("in_indptr", "in_indices", "out_indptr", "out_indices", "labels"):
            np.testing.assert_array_equal(getattr(graph, name), getattr(read, name))
            assert getattr(graph, name).dtype == getattr(read, name).dtype
    kept.write_bytes(kept.read_bytes()[:-10])  # truncated: read again, no error
    monkeypatch.undo()
    monkeypatch.setenv("HETGRAPH_CACHE", str(tmp_path / "cache"))
    third = datasets.load("power")
    np.testing.assert_array_equal(third.in_indices, read.in_indices)


# programs run from modules in one process, each by its module name on the command line
RUN_MODULES = '''
import importlib, json, sys
import hetgraph as hg

graph = hg.generate.grid(6, 7)
print(json.dumps({name: [float(v) for v in
                         hg.run(importlib.import_module(name).Hops(), graph,
                                devices="cpu").values]
                  for name in sys.argv[1:]}))
'''


def test_programs_compiled_in_different_processes_load_together(tmp_path):
    # Numba names compiled code, and the environment of its constants, by the
    # function's name and a per-process counter: the passes of two programs, compiled
    # each in a fresh process, got the same names, and a process loading both ran the
    # first one's code for the second (its distances were the first one's)
    cache = tmp_path / "cache"
    for name, step in (("hops_a", 1.0), ("hops_b", 2.0)):
        (tmp_path / f"{name}.py").write_text(PROGRAM.format(step=step, gather="src + STEP"))
    env = dict(os.environ, HETGRAPH_CACHE=str(cache), PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT]))

    def run(*modules):
        done = subprocess.run([sys.executable, "-c", RUN_MODULES, *modules], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    run("hops_a")
    run("hops_b")  # (each compiled alone, then kept)
    both = run("hops_a", "hops_b")
    np.testing.assert_array_equal(both["hops_a"], hops_oracle(1.0))
    np.testing.assert_array_equal(both["hops_b"], hops_oracle(2.0))


# the direct path's PageRank, whose iterations call a pass compiled on its own (_pull)
CALLEES = '''
import json
import hetgraph as hg
from hetgraph.kernels.cpu import diskcache, direct
ranks = hg.pagerank(hg.generate.grid(5, 6), tol=None, max_iterations=7).values
print(json.dumps({"ranks": ranks.tolist(), "loaded": direct.CACHES["pagerank"].loaded,
                  "callees": [lib.name for lib in diskcache._CALLEES.values()]}))
'''


def test_an_entry_loads_its_callees_code_first(tmp_path):
    # Numba links a copy of each callee into the caller, optimized again there; the
    # process that compiles the caller runs the callee's own code (defined first), and
    # a process that loaded the caller alone ran the copy (PageRank's pass 7% slower)
    env = dict(os.environ, HETGRAPH_CACHE=str(tmp_path / "cache"),
               PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=ROOT)

    def run():
        done = subprocess.run([sys.executable, "-c", CALLEES], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    first, second = run(), run()
    assert first["loaded"] == 0 and first["callees"] == []
    assert second["loaded"] == 1 and "_pull" in second["callees"]
    assert second["ranks"] == first["ranks"]
