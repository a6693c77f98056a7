"""The structures the compiled CPU passes take as arguments: a graph's arrays, a page of
in-edges, the vertex state, a pull's cut into edge ranges, a frontier pass's scratch and
a burst's limits. Numba reads a NamedTuple of arrays as one argument; a pass reads its
fields into locals at its start (by attribute: unpacking copies the tuple, which costs
compile time), so its loops see plain arrays. A compiled entry point takes only the
arrays it reads: each array argument adds its unboxing to the compile. Entry points
called from Python take the structures as plain tuples and make the NamedTuples inside
(``Page(*page)``): Numba types a NamedTuple argument in Python on every call, a plain
tuple through its compiled fast path, microseconds apart a call."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

NO_LIMIT = np.iinfo(np.int64).max  # a burst's degree limits when there are none
FOREVER = 1e9  # seconds: a burst's time limit when there is none
NO_WEIGHTS = np.empty(0, np.float32)  # the weights of a program that reads none
NOT_DEFERRED = np.empty(0, np.uint8)  # a burst's deferred flags when it has no buckets
ALL_VERTICES = np.empty(0, np.int64)  # an empty id list: every vertex of the range


class Graph(NamedTuple):
    """A graph in memory as the frontier passes read it: its out-edges (CSR: a push's
    targets, a notify-pull's notified vertices) and in-edges (CSC: a notify-pull's
    gathers). Weights are empty when the program reads none."""
    out_indptr: np.ndarray
    out_indices: np.ndarray
    out_weights: np.ndarray
    in_indptr: np.ndarray
    in_indices: np.ndarray
    in_weights: np.ndarray


class Page(NamedTuple):
    """The in-edges a pull reads: v's are indices[indptr[v] - base ...] (base: the first
    edge held; a page read from disk holds its own edges only); ``out_indptr`` gives the
    out-degrees of the vertices a pull activates."""
    indptr: np.ndarray
    indices: np.ndarray
    weights: np.ndarray
    base: int
    out_indptr: np.ndarray


class State(NamedTuple):
    """The vertex state a pass reads and writes: ``new_values`` is ``values`` in an async
    run and in a push, a second array in a sync pull (``sync``); ``flags``: uint8, 1 for
    an active vertex; ``aux``: one value for all or one a vertex; ``constant``: the
    program's iteration constant."""
    values: np.ndarray
    new_values: np.ndarray
    flags: np.ndarray
    aux: np.ndarray
    constant: float
    sync: bool


class Cut(NamedTuple):
    """A pull's vertices cut into equal edge ranges: ``vertices`` (ids; empty: the range
    v0..v0+len(prefix)-2), ``prefix`` (their in-degrees' running total); range t reads
    edges bounds[t]..bounds[t+1] and owns vertices owned[t]..owned[t+1]-1; ``head``,
    ``tail``: the partial accumulators (replicas) of the vertex cut at a range's start
    and end (``has_tail``: whether there is one)."""
    vertices: np.ndarray
    prefix: np.ndarray
    v0: int
    bounds: np.ndarray
    owned: np.ndarray
    head: np.ndarray
    tail: np.ndarray
    has_tail: np.ndarray
    ahead: int


class Scratch(NamedTuple):
    """A frontier pass's scratch, left as found: ``marks`` (uint8 zeros, one a vertex: a
    notify-pull's notified vertices), ``seen`` (a push's bit a vertex, see
    ``CpuKernel.push_scratch``), ``deferred`` (uint8 zeros, one a vertex: the vertices
    waiting for their priority bucket; empty without buckets)."""
    marks: np.ndarray
    seen: np.ndarray
    deferred: np.ndarray


class Limits(NamedTuple):
    """Where a burst stops: a frontier's out-degree sum above ``max_degree``, or its
    degree plus its size above ``max_sparse``, or after about ``seconds``."""
    max_degree: int
    max_sparse: int
    seconds: float
