"""The Python -> CUDA translation of program functions (kernels/transpile.py), checked
without a GPU: each translated function is compiled as C++ (g++, with the CUDA
intrinsics shimmed) and run on a grid of inputs against the same function compiled by
Numba, which is what the CPU engine runs. The whole shard kernel of every built-in and
documented program must also compile with nvcc when it is installed."""

import math
import shutil
import subprocess

import numba
import numpy as np
import pytest

from hetgraph.kernels.gpu.source import kernel_source
from hetgraph.kernels.transpile import PRELUDE, device_function, literal
from hetgraph.program import ProgramSpec

GXX = shutil.which("g++")
NVCC = shutil.which("nvcc")
SCALE = 7
HALF = np.float32(0.5)

SHIM = r"""
#include <cmath>
#include <cstdio>
#include <cstring>
using namespace std;
#define __device__
#define __forceinline__ inline
static inline float __int_as_float(int x) { float f; memcpy(&f, &x, 4); return f; }
static inline double __longlong_as_double(long long x) { double d; memcpy(&d, &x, 8); return d; }
"""


def floor_and_mod(a, b):
    return a // b * 1000 + a % b


def true_division(a, b):
    return a / b


def unified_local(a, b):
    x = a * 2
    if x > b:
        x = x - b
    elif x == b:
        x = 0.25
    else:
        pass
    return x + 1


def min_max_abs(a, b):
    return max(min(a, b), -3) + abs(a - b) + min(a, b, 2)


def math_functions(a, b):
    return math.exp(-abs(a)) + math.sqrt(abs(b)) + np.tanh(a) + math.log1p(abs(a * b))


def chained(a, b):
    return 1 if 0 <= a < b else (2 if a == b else 3)


def logic(a, b):
    return (a > 0 and b > 0) or not (a < b)


def bitwise(a, b):
    return (a & b) | (a ^ 5) + (b << 1)


def powers(a, b):
    return a ** 2 + abs(b) ** 0.5


def scalar_types(a, b):
    return np.float32(a) / np.float32(3) + int(b * 1.7) + np.int32(a) // 2


def globals_and_constants(a, b):
    big = np.inf if a > 100 else 0.0
    return a + SCALE + math.pi * float(b) + big + HALF


def float_floor_mod(a, b):
    return a // b + a % b + math.floor(a / b)


def augmented(a, b):
    t = a
    t += b
    t *= 3
    t -= 1
    return t


def make_scaled(k):
    def scaled(a, b):
        return a * k + b
    return scaled


def predicates(a, b):
    return math.isnan(a * b) or (math.isinf(a) and b > 0)


def np_minimum(a, b):
    return np.minimum(a, b) + np.maximum(a, -b)


INTS = [-7, -3, -1, 0, 1, 2, 5, 9]
NONZERO = [-7, -3, -1, 1, 2, 5, 9]
FLOATS = [-2.5, -1.0, -0.25, 0.0, 0.5, 1.5, 3.75, 1e3]
NONZERO_F = [-2.5, -1.0, -0.25, 0.5, 1.5, 3.75]
i64, i32, u32, f32, f64 = (np.dtype(t) for t in (np.int64, np.int32, np.uint32, np.float32,
                                                 np.float64))
CASES = [
    (floor_and_mod, (i64, i64), INTS, NONZERO),
    (floor_and_mod, (i32, i64), INTS, NONZERO),
    (true_division, (i32, i32), INTS, NONZERO),
    (true_division, (f32, f32), FLOATS, NONZERO_F),
    (true_division, (f32, i32), FLOATS, NONZERO),
    (unified_local, (i64, i64), INTS, INTS),
    (unified_local, (f32, f32), FLOATS, FLOATS),
    (min_max_abs, (i32, i64), INTS, INTS),
    (min_max_abs, (f64, i32), FLOATS, INTS),
    (min_max_abs, (u32, u32), [0, 1, 5, 9], [0, 2, 7]),
    (math_functions, (f64, f64), FLOATS, FLOATS),
    (math_functions, (f32, f32), FLOATS, FLOATS),
    (chained, (i64, i64), INTS, INTS),
    (chained, (f64, i32), FLOATS, INTS),
    (logic, (i64, f64), INTS, FLOATS),
    (bitwise, (i64, i64), INTS, [0, 1, 3, 6]),
    (bitwise, (u32, u32), [0, 1, 5, 9, 2**31], [0, 1, 3, 6]),
    (powers, (i64, f64), INTS, FLOATS),
    (powers, (f32, f32), FLOATS, FLOATS),
    (scalar_types, (f64, f64), FLOATS, FLOATS),
    (globals_and_constants, (f64, i64), FLOATS, INTS),
    (float_floor_mod, (f64, f64), FLOATS, NONZERO_F),
    (augmented, (i32, f32), INTS, FLOATS),
    (make_scaled(3.5), (f64, f64), FLOATS, FLOATS),
    (predicates, (f64, f64), FLOATS + [math.inf], NONZERO_F + [0.0]),
    (np_minimum, (f64, f64), FLOATS, FLOATS),
]


def numba_results(fn, types, xs, ys):
    compiled = numba.njit(fn)
    sig = tuple(numba.from_dtype(t) for t in types)
    compiled.compile(sig)
    returns = compiled.nopython_signatures[-1].return_type
    pairs = [(types[0].type(x), types[1].type(y)) for x in xs for y in ys]
    with np.errstate(all="ignore"):
        return np.dtype(str(returns)), pairs, [compiled(x, y) for x, y in pairs]


def run_cpp(source, tmp_path):
    path = tmp_path / "case.cpp"
    path.write_text(source)
    exe = tmp_path / "case"
    done = subprocess.run([GXX, "-std=c++17", "-O1", "-o", str(exe), str(path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return subprocess.run([str(exe)], check=True, capture_output=True,
                          text=True).stdout.split()


@pytest.mark.skipif(GXX is None, reason="needs g++")
@pytest.mark.parametrize("fn, types, xs, ys", CASES,
                         ids=[f"{c[0].__name__}-{c[1][0]}-{c[1][1]}" for c in CASES])
def test_translation_matches_numba(fn, types, xs, ys, tmp_path):
    returns, pairs, expected = numba_results(fn, types, xs, ys)
    code = device_function("Case", fn.__name__, fn, "translated", types, returns)
    fmt = "%.17g" if returns.kind == "f" else ("%llu" if returns.kind == "u" else "%lld")
    cast = "(double)" if returns.kind == "f" else (
        "(unsigned long long)" if returns.kind == "u" else "(long long)")
    calls = "\n".join(f'  printf("{fmt}\\n", {cast}translated({literal(x, types[0])}, '
                      f'{literal(y, types[1])}));' for x, y in pairs)
    source = SHIM + PRELUDE + code + "\nint main() {\n" + calls + "\n  return 0;\n}\n"
    got = run_cpp(source, tmp_path)
    assert len(got) == len(expected)
    for (x, y), want, text in zip(pairs, expected, got):
        if returns.kind == "f":
            value = float(text)
            assert (math.isnan(value) and math.isnan(want)) or \
                value == pytest.approx(float(want), rel=1e-6 if returns == f32 else 1e-13,
                                       abs=1e-30), (x, y, code)
        elif returns.kind == "b":
            assert int(text) == int(want), (x, y, code)
        else:
            assert int(text) == int(want), (x, y, code)


def compile_for_sm90(source, tmp_path):
    """nvcc must compile the CUDA ``source`` to PTX for an H100 (sm_90)."""
    path = tmp_path / "k.cu"
    path.write_text(source)
    done = subprocess.run([NVCC, "-arch=sm_90", "-std=c++17", "--ptx", "-o",
                           str(tmp_path / "k.ptx"), str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def builtin_programs():
    from hetgraph.algorithms.bfs import BreadthFirst
    from hetgraph.algorithms.cc import MinLabel
    from hetgraph.algorithms.circuit import Circuit
    from hetgraph.algorithms.heat import HeatDiffusion
    from hetgraph.algorithms.nn import NeuralNetwork
    from hetgraph.algorithms.pagerank import PageRank
    from hetgraph.algorithms.sssp import ShortestPaths

    return [PageRank(), PageRank(dtype=np.float32), ShortestPaths(0), BreadthFirst(0),
            MinLabel(), MinLabel(np.int32), NeuralNetwork(), HeatDiffusion(np.array([0])),
            Circuit({0: 1.0})]


@pytest.mark.parametrize("sync", [True, False])
@pytest.mark.parametrize("index", [np.int32, np.int64])
@pytest.mark.parametrize("warp_combine", [False, True])
def test_builtin_kernels_compile(sync, index, warp_combine, tmp_path):
    """Every built-in program's shard kernel translates; with nvcc it compiles for sm_90."""
    for program in builtin_programs():
        spec = ProgramSpec(program)
        aux = np.float32 if program.dtype != np.float64 else np.float64
        source = kernel_source(spec, aux, index, np.uint32, weighted=True, sync=sync,
                               warp_combine=warp_combine)
        assert "shard_pass" in source and "hg_gather" in source
        if NVCC and sync and index is np.int32:
            compile_for_sm90(source, tmp_path)


def test_swept_kernels_compile(tmp_path):
    """A colored pass's kernels: the shard kernel's swept variant (its tail after the
    epilogue, its parameters after go) and the first sums of SweptSums translate; with
    nvcc they compile for sm_90. The plain kernel has no swept tail."""
    from hetgraph.algorithms.bfs import BreadthFirst
    from hetgraph.algorithms.pagerank import PageRank
    from hetgraph.kernels.gpu.swept import _SWEPT

    for program in (PageRank(rescale=True), PageRank(dtype=np.float32), BreadthFirst(0)):
        spec = ProgramSpec(program)
        swept = kernel_source(spec, np.float64, np.int32, np.uint32, weighted=True,
                              sync=False, swept=True)
        plain = kernel_source(spec, np.float64, np.int32, np.uint32, weighted=True,
                              sync=False)
        assert "#define HG_SWEPT 1" in swept and "#define HG_SWEPT 0" in plain
        assert swept.index("hg_swept_part(swept,") > swept.index("atomicAdd(&counters[0]")
        # (the launch before's sums added before the block's apply)
        assert swept.index("two-way reduction") < swept.index("hg_prior_constant(prior_partial") < \
            swept.index("hg_apply(old")
        if NVCC:
            compile_for_sm90(swept, tmp_path)
    if NVCC:
        for value in ("double", "float"):
            compile_for_sm90(_SWEPT.replace("VALUE", value), tmp_path)


@pytest.mark.parametrize("swept", [False, True])
def test_split_kernels_compile(swept, tmp_path):
    """A colored pass's split variant (its blocks jobs, parts of a hub's shard combined
    by the last part) translates for every built-in program, its job read before the
    shard and its combine between the merge and the apply; with nvcc it compiles for
    sm_90. The kernel without ``split`` is the text it was before but the switch."""
    for program in builtin_programs():
        spec = ProgramSpec(program)
        aux = np.float32 if program.dtype != np.float64 else np.float64
        options = dict(weighted=True, sync=False, swept=swept)
        split = kernel_source(spec, aux, np.int32, np.uint32, split=True, **options)
        plain = kernel_source(spec, aux, np.int32, np.uint32, **options)
        assert "#define HG_SPLIT 1" in split and "#define HG_SPLIT 0" in plain
        assert split.index("split_jobs[blockIdx.x]") < split.index("shard_start[s]")
        assert split.index("two-way reduction") < split.index("split_done[part.w]") < \
            split.index("hg_apply(old")
        if NVCC:
            compile_for_sm90(split, tmp_path)


@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
@pytest.mark.parametrize("reduce, dtype", [(r, d) for r in ("add", "min", "max")
                                           for d in (np.float32, np.float64, np.int32,
                                                     np.int64, np.uint32)]
                         + [(r, d) for r in ("or", "and")
                            for d in (np.int32, np.int64, np.uint32)])
def test_every_monoid_atomic_compiles(reduce, dtype, tmp_path):
    """The shared-memory atomic of every monoid and dtype exists on sm_90."""
    import hetgraph as hg

    class Program(hg.VertexProgram):
        @staticmethod
        def gather(src, weight, dst):
            return src

        @staticmethod
        def apply(old, acc, aux):
            return acc

        @staticmethod
        def activate(new, old):
            return new != old

    Program.reduce, Program.dtype = reduce, dtype
    for warp_combine in (False, True):
        source = kernel_source(ProgramSpec(Program()), np.float32, np.int32, np.uint32,
                               weighted=False, sync=True, warp_combine=warp_combine)
        compile_for_sm90(source, tmp_path)
