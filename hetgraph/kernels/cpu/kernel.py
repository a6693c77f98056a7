"""A program compiled for the CPU: :class:`CpuKernel` assembles one pass of each kind
(pull, sparse notify-pull, push, and the bursts of the last two) from the program's
functions, and :func:`compile_program` keeps it for the process."""

from __future__ import annotations

import types
import weakref
from typing import Callable, NamedTuple

import numba
import numpy as np

from ...program import ProgramSpec, VertexProgram
from .buckets import build_buckets
from .burst import build_burst
from .clock import HAS_CLOCK
from .diskcache import attach
from .pull import PullPass, build_pull, cut_ranges
from .push import build_push
from .sparse import build_sparse
from .structs import (ALL_VERTICES, FOREVER, NO_LIMIT, NO_WEIGHTS, NOT_DEFERRED, Graph,
                      Limits, Scratch, State)
from .vertexops import (COMBINE, VertexOps, build_ops, check_user, jit_user,
                        never_settled, no_priority)

_UNSIGNED = {4: np.uint32, 8: np.uint64}


class Passes(NamedTuple):
    """A program's compiled passes, one of each kind (see each kind's module)."""
    pull: PullPass
    sparse_burst: Callable
    push_burst: Callable


def build_passes(ops: VertexOps) -> Passes:
    """Every pass kind of a program's VertexOps. Without a priority, its buckets' code
    is never compiled (``ops.buckets`` is a constant in the bursts)."""
    buckets = build_buckets(ops.priority)
    return Passes(build_pull(ops), build_burst(ops, build_sparse(ops), buckets, False),
                  build_burst(ops, build_push(ops), buckets, True))


def _user_signatures(spec: ProgramSpec, aux_dtype) -> dict:
    """{name: (argument types, what it must return)} of the program's functions."""
    value = numba.from_dtype(spec.dtype)
    aux_args = (numba.from_dtype(aux_dtype),) + ((numba.float64,) if spec.uses_constant
                                                 else ())
    signatures = {"gather": ((value, numba.float32, value), "a number"),
                  "apply": ((value, value) + aux_args, "a number"),
                  "activate": ((value, value), "a bool"),
                  "settled": ((value,), "a bool"),
                  "priority": ((value,), "a number")}
    return {name: signature for name, signature in signatures.items()
            if getattr(spec, name) is not None}


def compile_ops(spec: ProgramSpec, aux_dtype):
    """(the program's VertexOps for its value type and ``aux_dtype``, the check of its
    functions): the check compiles each function alone and raises a ProgramError
    naming the one that fails; it is needed only where a pass is compiled (a pass
    loaded from the compile cache was built from functions that passed it)."""
    signatures = _user_signatures(spec, aux_dtype)
    jitted = {name: jit_user(getattr(spec, name)) for name in signatures}
    checked = []

    def check():
        if not checked:
            for name, (argtypes, returns) in signatures.items():
                check_user(spec, name, jitted[name], argtypes, returns)
            checked.append(True)

    ops = build_ops(jitted["gather"], COMBINE[spec.reduce], jitted["apply"],
                    jitted["activate"], jitted.get("settled", never_settled),
                    jitted.get("priority", no_priority), numba.from_dtype(spec.dtype),
                    spec.identity().item(), spec.uses_constant, spec.activates_on_change,
                    spec.incremental)
    return ops, check


class CpuKernel:
    """A program compiled for the CPU; :meth:`step` runs one pull or notify-pull pass,
    :meth:`sparse_step`, :meth:`push_step` and :meth:`burst` frontier passes."""

    def __init__(self, spec: ProgramSpec, aux_dtype):
        ops, check = compile_ops(spec, aux_dtype)
        self.spec = spec
        self.identity = ops.identity
        self.stops = ops.stops  # (a sync pull's work is then not its edges: see _whole_cut)
        self._warmed = set()  # the kinds of arrays warm_up compiled for
        # (the last graph, weakly; {push: its frontier passes' arrays}), see _graph
        self._arrays_of = (lambda: None, {})
        self._passes = build_passes(ops)
        key = spec.code_key()
        #: {entry point: its DiskCache}, empty when the compile cache is off
        self.caches = {} if key is None else attach(
            self._entry_points(), f"{key}:{np.dtype(aux_dtype).str}", check)
        if not self.caches:  # every pass is compiled: check the functions now
            check()

    def _entry_points(self) -> dict:
        """{label: jitted function} of the passes that Python calls."""
        pull = self._passes.pull
        return {"pull.range": pull.gather_range, "pull.merge": pull.merge,
                "pull.colors": pull.sweep_colors, "pull.all": pull.gather_all,
                "sparse_burst": self._passes.sparse_burst,
                "push_burst": self._passes.push_burst}

    def warm_up(self, edges, values, flags, aux, graph=None, parallel=False):
        """Compile for these array types now (a pass over no vertex), so that the first
        iteration's time is not compile time: :meth:`step` reading ``edges`` (with
        ``parallel``, its helper threads started too), and with ``graph`` (in memory)
        :meth:`sparse_step` and :meth:`push_step` too. Done once per kind of arrays."""
        arrays = (*edges[:3], values, flags, aux) + (() if graph is None else (
            graph.out_indptr, graph.out_indices, graph.in_indptr, graph.in_indices))
        kinds = tuple((a.dtype, a.ndim, a.flags.c_contiguous, a.flags.writeable)
                      for a in arrays) + (parallel,)
        if kinds in self._warmed:
            return
        self.step(edges, np.zeros(1, np.int64), values, values, flags, aux, 0.0,
                  ALL_VERTICES, np.zeros(1, np.int64), 0, 2, True, parallel)  # (a merge)
        if graph is not None:
            self.sparse_step(graph, ALL_VERTICES, values, values, flags, flags, aux, 0.0,
                             True)
        if graph is not None and self.spec.incremental:
            self.push_step(graph, ALL_VERTICES, values, flags, flags, flags, aux, 0.0, True)
        self._warmed.add(kinds)

    @property
    def bursts(self) -> bool:
        """Whether :meth:`burst` can run: a program without an iteration constant or a
        converged test (both are Python), where Numba can read a clock."""
        return HAS_CLOCK and not (self.spec.uses_constant or self.spec.has_converged)

    def burst(self, graph, frontier, degree, push, max_degree, max_sparse, rows, seconds,
              values, new_values, flags, marks, seen, aux, sync, constant=0.0,
              delta=0.0, deferred=None):
        """Push (``push``) or sparse notify-pull iterations (see :meth:`push_step`,
        :meth:`sparse_step`) one after the other in one compiled call, with no Python
        between them, from the active ids ``frontier`` whose out-degree sum is
        ``degree``, while the frontier is not empty, its degree at most ``max_degree``
        and its degree plus its size at most ``max_sparse``: ``rows`` iterations and
        about ``seconds`` at most; ``constant``: the program's iteration constant (a
        burst of one iteration only); ``seen``: a push's (see :meth:`push_step`).
        ``delta`` > 0: each iteration runs the active vertices of the lowest bucket of
        the program's priority only, the limits applying to them (delta-stepping;
        ``deferred``: uint8 zeros of length N, scratch). Returns (stats, fronts, the
        next frontier, its degree); stats (int64), a row an iteration: active vertices,
        the out-degree sum of those run, vertices computed, edges read, vertices active
        after it, nanoseconds of the pass, nanoseconds since the pass before ended (the
        first: since the call began); fronts (float64), an iteration's lowest priority
        among the vertices it ran (NaN without buckets: ``delta`` = 0)."""
        stats = np.empty((rows, 7), np.int64)
        fronts = np.empty(rows, np.float64)
        delta = float(delta)
        if delta > 0.0 and (deferred is None or deferred.shape != values.shape):
            raise ValueError("a burst with delta > 0 needs deferred: uint8 zeros, one a "
                             "vertex")
        run = self._passes.push_burst if push else self._passes.sparse_burst
        count, following, degree = run(
            frontier, degree, tuple(Limits(max_degree, max_sparse, min(float(seconds), FOREVER))),
            self._graph(graph, push),
            tuple(State(values, new_values, flags, aux, float(constant), sync)),
            tuple(Scratch(marks, seen, NOT_DEFERRED if deferred is None else deferred)),
            stats, fronts, self.spec.notify_self, delta)
        return stats[:count], fronts[:count], following, int(degree)

    def sparse_step(self, graph, frontier, values, new_values, flags, marks, aux, constant,
                    sync, delta=0.0, deferred=None):
        """Notify-pull from the active ids ``frontier`` in this thread, touching only
        the frontier's neighbourhood (``delta``, ``deferred``: see :meth:`burst`);
        returns (vertices computed, edges read, next frontier, its out-degree sum)."""
        return self._one(graph, frontier, False, values, new_values, flags, marks, marks,
                         aux, sync, constant, delta, deferred)

    def push_step(self, graph, frontier, values, flags, marks, seen, aux, constant, sync,
                  delta=0.0, deferred=None):
        """Push from the active ids ``frontier`` in this thread, writing in place (see
        :mod:`.push`); ``seen``: from :meth:`push_scratch`, which every push leaves as
        it found it (``delta``, ``deferred``: see :meth:`burst`). Returns (vertices
        changed, edges read, next frontier, its out-degree sum)."""
        return self._one(graph, frontier, True, values, values, flags, marks, seen, aux,
                         sync, constant, delta, deferred)

    @staticmethod
    def push_scratch(num_vertices):
        """A push's scratch for ``num_vertices`` vertices: one clear bit each."""
        return np.zeros((num_vertices + 7) // 8, np.uint8)

    def _one(self, graph, frontier, push, *arrays):
        """One push or sparse notify-pull: a burst of one, without limits; ``arrays``:
        :meth:`burst`'s from ``values`` on."""
        stats, _, following, degree = self.burst(graph, frontier, 0, push, NO_LIMIT,
                                                 NO_LIMIT, 1, FOREVER, *arrays)
        if not len(stats):  # an empty frontier
            return 0, 0, following, 0
        return int(stats[0, 2]), int(stats[0, 3]), following, degree

    def _graph(self, graph, push):
        """A graph in memory as a push (``push``) or a sparse notify-pull reads it: a
        Graph's fields as a plain tuple, kept for the last graph (weakly; the calls of
        a small graph's run cost as much as its passes)."""
        ref, kept = self._arrays_of
        if ref() is not graph:
            ref, kept = weakref.ref(graph), {}
            self._arrays_of = (ref, kept)  # (one tuple: runs in threads may race)
        arrays = kept.get(push)
        if arrays is None:
            out_indices, out_weights = self._out_edges(graph) if push else \
                (graph.out_indices, NO_WEIGHTS)
            arrays = kept[push] = tuple(Graph(graph.out_indptr, out_indices, out_weights,
                                              graph.in_indptr, *self.edges(graph)[1:3]))
        return arrays

    def _out_edges(self, graph):
        """(out_indices, weights) as a push reads them: unsigned ids, and no weights
        unless the program needs them."""
        weights = graph.out_weights() if self.spec.needs_weights and graph.weighted \
            else NO_WEIGHTS
        return self._unsigned(graph.out_indices), weights

    def edges(self, graph):
        """(in_indptr, in_indices, weights, 0): the in-edges of a graph in memory, as
        :meth:`step` reads them."""
        return graph.in_indptr, *self.page_edges(graph.in_indices, graph.in_weights), 0

    def page_edges(self, indices, weights):
        """(indices, weights) as the kernels read them: unsigned ids (they spare Numba's
        negative-index check on every gathered value), and no weights unless the program
        needs them."""
        weights = weights if (self.spec.needs_weights and weights is not None) \
            else NO_WEIGHTS
        return self._unsigned(indices), weights

    @staticmethod
    def _unsigned(indices):
        return indices.view(_UNSIGNED[indices.dtype.itemsize])

    def step(self, edges, out_indptr, values, new_values, flags, aux, constant, vertices,
             prefix, v0, parts, sync, parallel=False, cut=None, openmp=False):
        """Compute the vertices ``vertices`` (ids; empty = the range v0..v0+len(prefix)-2)
        whose in-edges are counted by ``prefix``, reading ``edges`` = (in_indptr, indices,
        weights, base): v's in-edges are indices[in_indptr[v] - base ...] (see
        :meth:`edges`; a page read from disk holds its own edges only). The in-edges are
        cut into ``parts`` equal ranges, claimed by Numba's thread count of threads (see
        :mod:`.threads`) when ``parallel``, or run on Numba's OpenMP threads when also
        ``openmp`` (see :meth:`PullPass.run`), else one after the other in this thread.
        ``sync``: new_values is not values (a sync run), where the program's settled
        vertices are skipped. Writes new_values and flags; returns (vertices activated,
        the sum of their out-degrees by ``out_indptr``). ``cut``: these vertices'
        :func:`cut_ranges` into ``parts``, when the caller keeps it (a whole graph's pull
        cuts the same ranges every time)."""
        in_indptr, indices, weights, base = edges
        # a Page's and a State's fields, as the compiled pull takes them (see .structs)
        page = (in_indptr, indices, weights, int(base), out_indptr)
        state = (values, new_values, flags, aux, float(constant), bool(sync))
        if cut is None:
            cut = cut_ranges(vertices, prefix, v0, parts, values.dtype)
        return self._passes.pull.run(page, state, cut,
                                     numba.get_num_threads() if parallel else 1, openmp)

    def colors(self, edges, out_indptr, values, flags, aux, constant, bounds, scratch,
               swept, first=0):
        """A colored iteration's passes in one call, in this thread: color c is the
        vertices ``bounds[c]`` .. ``bounds[c + 1]`` - 1 (int64), each pulled in one
        range (as :meth:`step` with one part pulls it): the last (the hybrid
        partition) first, into ``scratch`` and then copied into ``values``, then the
        others from the last to the first, in place. ``edges``: as :meth:`step` reads
        them. ``constant``: the first pass's; ``swept``: the constant after each pass
        (:func:`hetgraph.kernels.cpu.direct.swept_pass`, color ``first`` + c for the
        pair c). Returns (vertices activated, the sum of their out-degrees)."""
        in_indptr, indices, weights, base = edges
        page = (in_indptr, indices, weights, int(base), out_indptr)
        state = (values, values, flags, aux, float(constant), False)
        return self._passes.pull.sweep_colors(page, state, bounds, scratch, swept,
                                              int(first))


def functions_key(spec: ProgramSpec):
    """What the compiled code of ``spec``'s functions (gather, apply, activate, settled,
    priority; None for one it lacks) depends on in this process (:func:`_function_key`)."""
    return tuple(fn and _function_key(fn) for fn in (
        spec.gather, spec.apply, spec.activate, spec.settled, spec.priority))


# the program's methods that a worker process calls (with the globals it unpickled)
_HOOKS = ("init", "iteration_constant", "converged", "change_test", "finalize",
          "bucket_width")


def reads_key(spec: ProgramSpec):
    """What a run of ``spec`` on worker processes reads beyond the program's attributes:
    the values its compiled functions (:func:`functions_key`) and the methods a worker
    calls (``_HOOKS``: plain functions, not VertexProgram's own) read, globals and
    closure cells (one bound to another value makes another run). None where a value
    is held by identity (unhashable: an array changed in place would not be seen) or a
    cell is empty."""
    cls = type(spec.program)
    methods = [getattr(cls, name, None) for name in _HOOKS]
    methods = [getattr(fn, "__func__", fn) for fn, name in zip(methods, _HOOKS)
               if fn is not getattr(VertexProgram, name, None)]  # (a classmethod's too)
    key = functions_key(spec) + tuple(_function_key(fn) for fn in methods
                                      if isinstance(fn, types.FunctionType))
    if any(isinstance(k, _Identity) or k is not None and any(
            isinstance(v, _Identity) for _, v in k[2]) for k in key):
        return None
    return key


def _function_key(fn):
    """What a program's compiled ``fn`` depends on in this process: its code, module,
    and the values of its closure cells and of the globals it names (Numba compiles
    both in: a global bound to another value compiles again), each with its type, an
    unhashable one by identity (:class:`_Identity`); ``fn`` by identity where a cell
    is empty."""
    scope = fn.__globals__
    try:
        values = [c.cell_contents for c in fn.__closure__ or ()]
    except ValueError:
        return _Identity(fn)
    values += [scope[name] for name in fn.__code__.co_names if name in scope]
    return fn.__code__, fn.__module__, tuple((type(v), _hashable(v)) for v in values)


def _hashable(value):
    """``value``, or an :class:`_Identity` of it where it cannot be hashed."""
    try:
        hash(value)
    except TypeError:
        return _Identity(value)
    return value


class _Identity:
    """Equal to an _Identity of the same object only, which it keeps alive (a key's
    object: its id is nobody else's while the key is kept)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other):
        return isinstance(other, _Identity) and other.obj is self.obj

    def __hash__(self):
        return id(self.obj)


_CACHE: dict = {}


def compile_program(spec: ProgramSpec, aux_dtype=np.float32) -> CpuKernel:
    """The CpuKernel of a checked program, compiled on first use and kept for the process
    (keyed by the program's functions, the values they read, its dtype and every flag
    the kernel reads of its ``spec``: instances of one class may differ in them)."""
    key = (functions_key(spec), spec.dtype, spec.reduce, spec.uses_constant,
           spec.activates_on_change, spec.incremental, spec.needs_weights,
           spec.has_converged, spec.notify_self, np.dtype(aux_dtype))
    kernel = _CACHE.get(key)
    if kernel is None:
        kernel = _CACHE[key] = CpuKernel(spec, np.dtype(aux_dtype))
    return kernel
