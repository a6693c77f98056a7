"""User-defined programs that are not built in, run through the public API only: the
code blocks of docs/vertex-programs.md are executed as written and checked against
independent oracles."""

import linecache
import os
import re

import numpy as np
import pytest
import scipy.sparse.csgraph as csgraph

import hetgraph as hg
from conftest import widest_paths

DOC = os.path.join(os.path.dirname(__file__), "..", "docs", "vertex-programs.md")


@pytest.fixture(scope="module")
def doc():
    """The namespace left by running every python block of the guide in order."""
    with open(DOC) as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    assert len(blocks) == 3
    namespace = {}
    for number, block in enumerate(blocks):
        # registered in linecache so that inspect (the GPU translation) finds the source
        name = f"<{DOC} block {number}>"
        linecache.cache[name] = (len(block), None, block.splitlines(True), name)
        exec(compile(block, name, "exec"), namespace)
    return namespace


def test_guide_oracle_agrees(doc):
    """The guide's own test block ran (its asserts passed); its oracle agrees with
    this one."""
    small, expected = doc["small"], doc["expected"]
    width = widest_paths(small, 0)
    assert expected == {v: width[v] for v in np.flatnonzero(width > 0)}
    assert len(expected) == small.num_vertices  # a connected grid: every vertex reached


def test_widest_path_from_the_guide(doc):
    roads, widest = doc["roads"], doc["widest"]
    assert widest.converged
    np.testing.assert_array_equal(widest.values, widest_paths(roads, 0))


@pytest.mark.parametrize("config", [{"cpu_mode": "pull"}, {"cpu_mode": "notify-pull"},
                                    {"cpu_mode": "push"}, {"cpu_mode": "push", "mode": "async"},
                                    {"mode": "async"}, {"partitions": 9}])
def test_widest_path_on_a_power_law_graph(doc, config):
    g = hg.generate.rmat(10, seed=4, weights=(1.0, 50.0))
    result = hg.run(doc["WidestPath"](source=g.label_of(3)), g, **config)
    np.testing.assert_array_equal(result.values, widest_paths(g, 3))


def test_reachability_bits_from_the_guide(doc):
    web, sources, reach = doc["web"], doc["sources"], doc["reach"]
    assert reach.values.dtype == np.uint32
    A = web.to_scipy()
    for i, s in enumerate(sources):
        order = csgraph.breadth_first_order(A, web.id_of(s), directed=True,
                                            return_predecessors=False)
        expected = np.zeros(web.num_vertices, bool)
        expected[order] = True
        np.testing.assert_array_equal((reach.values >> i) & 1 == 1, expected)
    assert not np.any(reach.values >> len(sources))
    for cpu_mode in ("pull", "push"):  # the guide's run chose its modes itself
        forced = hg.run(doc["Reachability"](sources), web, cpu_mode=cpu_mode,
                        max_iterations=web.num_vertices)
        np.testing.assert_array_equal(forced.values, reach.values)
