"""A program's functions compiled for the CPU (each alone, so that a failure names it),
the combine monoids, and the per-vertex operations that every pass kind inlines:
accumulate a vertex's in-edges, apply, store a value and its flag."""

from __future__ import annotations

from typing import Callable, NamedTuple

import numba
import numpy as np

from ...program import ProgramError


@numba.njit(nogil=True, inline="always")
def _add(a, b):
    return a + b


@numba.njit(nogil=True, inline="always")
def _min(a, b):
    return b if b < a else a


@numba.njit(nogil=True, inline="always")
def _max(a, b):
    return b if b > a else a


@numba.njit(nogil=True, inline="always")
def _or(a, b):
    return a | b


@numba.njit(nogil=True, inline="always")
def _and(a, b):
    return a & b


COMBINE = {"add": _add, "min": _min, "max": _max, "or": _or, "and": _and}


@numba.njit(nogil=True, inline="always")
def never_settled(value):
    """The settled test of a program without one."""
    return False


@numba.njit(nogil=True, inline="always")
def no_priority(value):
    """The priority of a program without one (its buckets' code is not compiled)."""
    return 0.0


def jit_user(fn):
    """A program's function jitted, compiled when first needed (see
    :func:`check_user`)."""
    return numba.njit(nogil=True)(fn)


def check_user(spec, name, dispatcher, argtypes, returns):
    """Compile one user function (``dispatcher``, from :func:`jit_user`) alone for
    ``argtypes``, so that a failure names it; ``returns``: what it must return, in
    words."""
    try:
        dispatcher.compile(tuple(argtypes))
    except Exception as exc:  # Numba raises many error classes
        first = str(exc).strip().splitlines()
        detail = next((line for line in first if line.strip()), type(exc).__name__)
        raise ProgramError(f"{spec.name}.{name} cannot be compiled for the CPU "
                           f"({', '.join(str(t) for t in argtypes)}): {detail}") from None
    result = dispatcher.nopython_signatures[-1].return_type
    if not isinstance(result, (numba.types.Number, numba.types.Boolean)):
        raise ProgramError(f"{spec.name}.{name} returns {result}; it must return "
                           f"{returns} for every input (is a return statement missing?)")


class VertexOps(NamedTuple):
    """A program's compiled functions and the per-vertex operations built on them, all
    inlined into the passes (called, each took and dropped a reference to every array
    argument per vertex: atomic counters that all threads share). ``cast``: the value
    type; ``on_change``: the program activates every changed vertex; ``buckets``: it
    has a priority, so the passes compile its buckets' code."""
    gather: Callable
    combine: Callable
    apply: Callable       # apply(old, acc, aux, constant), the constant passed or not
    activate: Callable
    settled: Callable
    priority: Callable
    cast: Callable
    identity: object
    on_change: bool
    buckets: bool
    stops: bool           # a sync pull stops reading v's in-edges once v is settled
    accumulate: Callable  # (indices, weights, values, first, last, dst_value, acc) -> acc
    settling: Callable    # accumulate in a pull, stopping once v is settled (see there)
    aux_of: Callable      # (aux, v) -> v's aux value
    finish: Callable      # apply to v's accumulator and store: returns v's flag
    keep: Callable        # store a settled v's value as it is: returns v's flag
    vertex: Callable      # (vertices, v0, i) -> the i-th vertex of a pull


def build_ops(gather, combine, apply, activate, settled, priority, cast, identity,
              uses_constant, on_change, incremental=False) -> VertexOps:
    """The VertexOps of a program's compiled functions (``incremental``: the program's
    flag, which lets a sync pull stop reading a vertex's in-edges once it is settled)."""
    apply_with = _apply_with(apply, uses_constant)
    stops = incremental and settled is not never_settled

    @numba.njit(nogil=True, inline="always")
    def aux_of(aux, v):
        """v's aux value (one value for all when aux has one)."""
        return aux[v] if aux.shape[0] > 1 else aux[0]

    @numba.njit(nogil=True, inline="always")
    def vertex(vertices, v0, i):
        """The i-th vertex of a pull: vertices[i], or v0 + i when ``vertices`` is
        empty."""
        return vertices[i] if vertices.shape[0] > 0 else v0 + i

    @numba.njit(nogil=True, inline="always")
    def accumulate(indices, weights, values, first, last, dst_value, acc):
        weighted = weights.shape[0] > 0
        # unsigned positions: no negative-index wrap-around test on every edge
        for e in range(np.uint64(first), np.uint64(last)):
            w = weights[e] if weighted else np.float32(1.0)
            acc = combine(acc, cast(gather(values[indices[e]], w, dst_value)))
        return acc

    @numba.njit(nogil=True, inline="always")
    def settling(indices, weights, values, first, last, dst_value, acc, aux_v, constant,
                 sync):
        """accumulate; in a ``sync`` pull of a program with a settled test, it stops
        after the first edge that settles v (Beamer's bottom-up BFS): an incremental
        program's apply combines by the monoid, so apply(old, combine(acc, rest)) is
        apply(apply(old, acc), rest), which a settled value absorbs. One exit only (no
        break or early return): Numba then drops the reference counting of the arrays,
        which otherwise cost two atomic operations a vertex."""
        if stops and sync:
            weighted = weights.shape[0] > 0
            e = np.uint64(first)
            end = np.uint64(last)
            while e < end:
                w = weights[e] if weighted else np.float32(1.0)
                acc = combine(acc, cast(gather(values[indices[e]], w, dst_value)))
                e += np.uint64(1)
                if settled(cast(apply_with(dst_value, acc, aux_v, constant))):
                    e = end
        else:
            acc = accumulate(indices, weights, values, first, last, dst_value, acc)
        return acc

    @numba.njit(nogil=True, inline="always")
    def store(new_values, flags, v, new, old):
        """Write v's new value and its flag activate(new, old); returns the flag."""
        new_values[v] = new
        on = activate(new, old)
        flags[v] = 1 if on else 0
        return 1 if on else 0

    @numba.njit(nogil=True, inline="always")
    def finish(values, new_values, flags, aux, constant, v, acc):
        old = values[v]
        new = cast(apply_with(old, acc, aux_of(aux, v), constant))
        return store(new_values, flags, v, new, old)

    @numba.njit(nogil=True, inline="always")
    def keep(values, new_values, flags, v):
        """A settled vertex: its value stays, its flag is activate(old, old)."""
        return store(new_values, flags, v, values[v], values[v])

    return VertexOps(gather, combine, apply_with, activate, settled, priority, cast,
                     identity, on_change, priority is not no_priority, stops, accumulate,
                     settling, aux_of, finish, keep, vertex)


def _apply_with(apply, uses_constant):
    """apply(old, acc, aux, constant), passing the constant only to a program that
    takes one."""
    if uses_constant:
        @numba.njit(nogil=True, inline="always")
        def apply_with(old, acc, aux, constant):
            return apply(old, acc, aux, constant)
    else:
        @numba.njit(nogil=True, inline="always")
        def apply_with(old, acc, aux, constant):
            return apply(old, acc, aux)
    return apply_with
