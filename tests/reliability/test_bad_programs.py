"""Malformed vertex programs and run options: each gives a clear HetGraphError that
names the program and the function, before anything runs."""

import numpy as np
import pytest

import hetgraph as hg

GRAPH = hg.generate.erdos_renyi(50, m=200, seed=1)


class Good(hg.VertexProgram):
    dtype = np.float64
    reduce = "min"

    @staticmethod
    def gather(src, weight, dst):
        return src + weight

    @staticmethod
    def apply(old, acc, aux):
        return min(old, acc)

    @staticmethod
    def activate(new, old):
        return new < old

    def init(self, graph):
        values = np.full(graph.num_vertices, np.inf)
        values[0] = 0
        return values, None


def variant(**members):
    return type("Bad", (Good,), members)()


CASES = {
    "unknown monoid": (variant(reduce="mul"), "reduce='mul' is not a monoid"),
    "bitwise monoid on floats": (variant(reduce="or"), "needs an integer dtype"),
    "unsupported dtype": (variant(dtype=np.complex128), "is not supported"),
    "not a dtype": (variant(dtype="banana"), "is not a dtype"),
    "gather arity": (variant(gather=staticmethod(lambda src, w: src)),
                     "gather takes 2 arguments; it must take 3"),
    "apply arity": (variant(apply=staticmethod(lambda old: old)), "apply takes 1"),
    "activate arity": (variant(activate=staticmethod(lambda a, b, c: True)),
                       "activate takes 3"),
    "varargs": (variant(gather=staticmethod(lambda *args: args[0])),
                "plain positional arguments"),
    "gather not static": (variant(gather=lambda self, s, w, d: s), "must be a @staticmethod"),
    "constant without hook": (variant(apply=staticmethod(lambda o, a, x, c: o)),
                              "no iteration_constant"),
    "hook without constant": (variant(iteration_constant=lambda self, g, v: 1.0),
                              "apply takes 3 arguments"),
    "uncompilable gather": (variant(gather=staticmethod(lambda s, w, d: len(s))),
                            "Bad.gather cannot be compiled"),
    "gather returns nothing": (variant(gather=staticmethod(lambda s, w, d: None)),
                               "Bad.gather returns none"),
    "activate returns a string": (variant(activate=staticmethod(lambda n, o: "yes")),
                                  "Bad.activate"),
    "settled arity": (variant(settled=staticmethod(lambda new, old: True)),
                      "settled takes 2 arguments; it must take 1 (value)"),
    "settled not static": (variant(settled=lambda self, value: True),
                           "settled must be a @staticmethod"),
    "uncompilable settled": (variant(settled=staticmethod(lambda value: len(value))),
                             "Bad.settled cannot be compiled"),
    "priority without incremental": (variant(priority=staticmethod(lambda value: value)),
                                     "priority is set but the program is not incremental"),
    "priority arity": (variant(incremental=True,
                               priority=staticmethod(lambda new, old: new)),
                       "priority takes 2 arguments; it must take 1 (value)"),
    "uncompilable priority": (variant(incremental=True,
                                      priority=staticmethod(lambda value: len(value))),
                              "Bad.priority cannot be compiled"),
    "bucket width zero": (variant(incremental=True, priority=staticmethod(lambda v: v),
                                  bucket_width=lambda self, g: 0),
                          "bucket_width returned 0; it must be a positive number"),
    "bucket width nan": (variant(incremental=True, priority=staticmethod(lambda v: v),
                                 bucket_width=lambda self, g: float("nan")),
                         "bucket_width returned nan"),
    "bucket width text": (variant(incremental=True, priority=staticmethod(lambda v: v),
                                  bucket_width=lambda self, g: "wide"),
                          "bucket_width returned 'wide'"),
    "init returns one array": (variant(init=lambda self, g: np.zeros(g.num_vertices)),
                               "must return (values, active)"),
    "init wrong length": (variant(init=lambda self, g: (np.zeros(3), None)),
                          "values of shape (3,)"),
    "init float values for an int program": (
        variant(dtype=np.int32, init=lambda self, g: (np.zeros(g.num_vertices), None)),
        "float64 values but the program's dtype is int32"),
    "active wrong shape": (variant(init=lambda self, g: (np.zeros(g.num_vertices),
                                                          np.ones(2, bool))),
                           "active of shape (2,)"),
    "aux wrong length": (variant(aux=lambda self, g: np.zeros(7)), "aux must return"),
    "incremental sum": (variant(reduce="add", incremental=True),
                        "incremental is set but reduce='add' is not idempotent"),
    "incremental reading itself": (variant(notify_self=True, incremental=True),
                                   "incremental is set but notify_self"),
    "incremental with a constant": (
        variant(incremental=True, apply=staticmethod(lambda o, a, x, c: o),
                iteration_constant=lambda self, g, v: 1.0),
        "incremental is set but apply takes an iteration constant"),
    "activates on change with a threshold": (
        variant(incremental=True, activates_on_change=True,
                activate=staticmethod(lambda new, old: old - new > 0.5)),
        "activates_on_change is set but activate(2.5, 3.0) is false, not true"),
    "activates on change backwards": (
        variant(incremental=True, activates_on_change=True,
                activate=staticmethod(lambda new, old: new > old)),
        "activates_on_change is set but activate(-1.0, 0.0) is false, not true"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_program(name):
    program, message = CASES[name]
    with pytest.raises(hg.ProgramError) as err:
        hg.run(program, GRAPH)
    assert message.lower() in str(err.value).lower()
    assert isinstance(err.value, hg.HetGraphError)


def test_class_instead_of_instance():
    with pytest.raises(hg.ProgramError, match=r"pass an instance of Good"):
        hg.run(Good, GRAPH)


def test_not_a_program():
    with pytest.raises(hg.ProgramError, match="not a hetgraph.VertexProgram"):
        hg.run(object(), GRAPH)


def test_missing_function():
    class NoGather(hg.VertexProgram):
        pass
    with pytest.raises(hg.ProgramError, match="NoGather.gather is not defined"):
        hg.run(NoGather(), GRAPH)


def test_a_function_replaced_after_a_run_is_checked_again():
    """The checks of a program's functions are kept per function: a class given another
    function is checked anew."""
    cls = type("Changing", (Good,), {})
    hg.run(cls(), GRAPH, devices="cpu")
    cls.gather = staticmethod(lambda src, weight: src)
    with pytest.raises(hg.ProgramError, match="Changing.gather takes 2 arguments"):
        hg.run(cls(), GRAPH, devices="cpu")


OPTIONS = {
    "mode": ({"mode": "eventually"}, "mode='eventually'"),
    "devices": ({"devices": "tpu"}, "devices='tpu'"),
    "cpu_mode": ({"cpu_mode": "sideways"}, "cpu_mode='sideways' is not valid"),
    "push without incremental": ({"cpu_mode": "push"},
                                 "cpu_mode='push' cannot run: Good is not incremental"),
    "negative iterations": ({"max_iterations": -1}, "max_iterations=-1"),
    "threads": ({"threads": 10_000}, "threads=10000 is out of range"),
    "partitions": ({"partitions": 0}, "partitions=0"),
}


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_bad_run_option(name):
    options, message = OPTIONS[name]
    with pytest.raises(hg.HetGraphError, match=message):
        hg.run(Good(), GRAPH, **options)


def test_not_a_graph():
    with pytest.raises(hg.GraphError, match="needs a hetgraph.Graph"):
        hg.run(Good(), [(0, 1)])


@pytest.mark.parametrize("call", [
    lambda g: hg.sssp(g, 10**6), lambda g: hg.bfs(g, -1), lambda g: hg.sssp(g, "x"),
    lambda g: hg.heat(g, [0, 999]), lambda g: hg.circuit(g, {77: 1.0}),
])
def test_unknown_source_vertex(call):
    with pytest.raises(hg.GraphError, match="is not in the graph|not an integer id"):
        call(GRAPH)


def test_missing_source():
    with pytest.raises(hg.GraphError, match="source vertex is required"):
        hg.sssp(GRAPH, None)


def test_negative_weight_for_sssp():
    g = hg.from_arrays([0, 1, 2], [1, 2, 0], weight=[1.0, -2.0, 1.0])
    with pytest.raises(hg.GraphError, match=r"non-negative edge weights; edge 1 -> 2 has "
                                            r"weight -2"):
        hg.sssp(g, 0)


@pytest.mark.parametrize("kwargs, message", [
    ({"damping": 1.5}, "damping=1.5"), ({"tol": -1.0}, "tol=-1.0"),
])
def test_bad_pagerank_parameters(kwargs, message):
    with pytest.raises(hg.GraphError, match=message):
        hg.pagerank(GRAPH, **kwargs)


def test_bad_nn_bias_and_empty_circuit():
    with pytest.raises(hg.GraphError, match="nn bias has shape"):
        hg.nn(GRAPH, bias=np.zeros(3))
    with pytest.raises(hg.GraphError, match="at least one held voltage"):
        hg.circuit(GRAPH, {})
