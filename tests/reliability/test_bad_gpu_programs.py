"""Programs the CPU accepts but the GPU translation cannot take, and GPU run options:
each is a clear HetGraphError naming the program, the function and the line. These run
without a GPU: the translation happens before any device is touched."""

import linecache

import numpy as np
import pytest

import hetgraph as hg
from hetgraph.kernels.gpu import device as gpu
from hetgraph.kernels.gpu.source import kernel_source
from hetgraph.program import ProgramSpec

from .test_bad_programs import GRAPH, Good


def translate(program):
    return kernel_source(ProgramSpec(program), np.float32, np.int32, np.uint32,
                         weighted=True, sync=True)


class Loop(Good):
    @staticmethod
    def gather(src, weight, dst):
        total = src
        for _ in range(3):
            total = total + weight
        return total


def helper(x):
    return x + 1


class CallsHelper(Good):
    @staticmethod
    def gather(src, weight, dst):
        return helper(src)


class StringConstant(Good):
    @staticmethod
    def activate(new, old):
        return "yes" if new < old else old > new


class ObjectAttribute(Good):
    @staticmethod
    def apply(old, acc, aux):
        return old.real


class MissingReturn(Good):
    @staticmethod
    def apply(old, acc, aux):
        if acc < old:
            return acc


class TupleAssign(Good):
    @staticmethod
    def gather(src, weight, dst):
        a, b = src, weight
        return a + b


class NumberLogic(Good):
    @staticmethod
    def activate(new, old):
        return new and old


class WidenParameter(Good):
    dtype = np.int32
    reduce = "min"

    @staticmethod
    def gather(src, weight, dst):
        src = src + 0.5
        return src

    def init(self, graph):
        return np.zeros(graph.num_vertices, np.int32), None


CASES = {
    "for loop": (Loop(), "Loop.gather (line", "'For'"),
    "call of another function": (CallsHelper(), "CallsHelper.gather", "calling 'helper'"),
    "string constant": (StringConstant(), "StringConstant.activate", "the constant 'yes'"),
    "attribute of a value": (ObjectAttribute(), "ObjectAttribute.apply", "attribute"),
    "path without return": (MissingReturn(), "MissingReturn.apply",
                            "can end without a return"),
    "tuple assignment": (TupleAssign(), "TupleAssign.gather", "one plain name"),
    "and/or on numbers": (NumberLogic(), "NumberLogic.activate", "non-boolean"),
    "float into an int parameter": (WidenParameter(), "WidenParameter.gather",
                                    "to parameter 'src'"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_untranslatable_program(name):
    program, where, what = CASES[name]
    with pytest.raises(hg.ProgramError) as err:
        translate(program)
    assert where in str(err.value) and what in str(err.value)


def test_source_not_available():
    namespace = {"hg": hg, "np": np, "Good": Good}
    exec(compile("class Hidden(Good):\n    @staticmethod\n    def gather(s, w, d):\n"
                 "        return s + w\n", "<nowhere>", "exec"), namespace)
    assert "<nowhere>" not in linecache.cache
    with pytest.raises(hg.ProgramError, match="Hidden.gather: its source code cannot be "
                                              "found"):
        translate(namespace["Hidden"]())


def test_gpu_options_are_checked():
    with pytest.raises(hg.GraphError, match="unknown options"):
        hg.run(Good(), GRAPH, devices="gpu", gpu={"budget": 1})
    with pytest.raises(hg.GraphError, match="devices='cpu'"):
        hg.run(Good(), GRAPH, devices="cpu", gpu={"streams": 2})


@pytest.mark.skipif(gpu.available(), reason="a GPU is present")
def test_gpu_requested_without_one():
    with pytest.raises(gpu.GpuUnavailableError, match="no GPU worker.*devices='cpu'") as err:
        hg.run(Good(), GRAPH, devices="gpu")
    assert isinstance(err.value, hg.HetGraphError)
