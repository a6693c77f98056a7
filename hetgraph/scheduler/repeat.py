"""A warm call repeated on a CPU worker process, the worker's run context kept.

A call whose run on CPU worker processes alone took one segment on one worker from the
program's initial state (:func:`.spread.cpu_alone`), its state small enough to come back
in the call's answer (``tuning.ANSWER_STATE_BYTES``), leaves that worker's context parked
under a token (:func:`.spread.park_after_answer`: the RunSpec, the engine bound to its
host state, the program's initial state and its frontier). The client keeps the call's
key with the token and the worker's address (:class:`Repeat`; ``tuning.REPEATS_KEPT``
a cluster, the newest last, let go with the graph). A later call of an equal key sends
the token alone (:func:`.spread.cpu_again`): no driver, pack, plan or state is made on
either side; the worker refills the state, runs the iterations and answers with the
rows and the state, and the client posts the run's events and finalizes its result as
the dispatcher does.

The key: the graph (its token), the program's strict initial key (its class, functions
and parameters: :meth:`.ProgramSpec.initial_key`; an array kept apart by identity, and
by its contents against a copy taken with the key), the values its functions and the
methods a worker calls read (globals and closure cells, frozen in the parked run:
:func:`.kernel.reads_key`; no repeat where one is unhashable), its aux (made again each
call: by identity where it is one of the program's arrays derived from the graph, which
nothing writes, else by its contents), the devices, mode, iteration limit and options,
the tuning constants that place the run, and the cluster's workers (as they were after
the kept call). Where the worker lacks the token (it restarted, or let the context go),
has left, or the repeat failed, the key is dropped and the call runs the whole way (its
errors as ever); a key another thread's call is using is not shared: that call runs the
whole way too.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
import weakref

import numpy as np

from .. import tuning
from ..kernels.cpu.kernel import reads_key
from ..program import kept_apart
from . import calls, spread

_KEPT = weakref.WeakKeyDictionary()  # cluster -> _Kept
_LOCK = threading.Lock()
# the tuning constants that decide where a call's run goes (a repeat goes where it went)
_PLACING = ("SPREAD_SEGMENTS", "SPREAD_ARCS", "OWNERS_PER_HOST", "ANSWER_STATE_BYTES",
            "SMALL_ARCS", "SEGMENT_SECONDS", "SHARED_MEMORY_DIR")


@dataclasses.dataclass(eq=False)
class _Entry:
    """A kept call: its ``key``, (array, copy) of the program's arrays kept apart (by
    identity in the key), its aux (None: none; itself where ``fixed``, one of the
    program's arrays derived from the graph, which nothing writes; else a copy), the
    cluster's ``workers`` after it, the worker ``address`` and ``token`` its context is
    parked under, and ``busy``, held by the call repeating it."""

    key: tuple
    copies: list
    aux: object
    fixed: bool
    workers: tuple
    address: str
    token: str
    busy: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def matches(self, key, aux, workers):
        """Whether a call of ``key`` and ``aux`` on a cluster of ``workers`` repeats this
        one: equal keys and workers, and every array the key holds by identity as it
        was (contents), the aux too."""
        return self.key == key and self.workers == workers and (
            aux is self.aux if self.fixed else _equal(self.aux, aux)) and all(
            _equal(array, copy) for array, copy in self.copies)


@dataclasses.dataclass
class _Kept:
    """A cluster's kept calls (the newest last) and the graphs (tokens) whose end lets
    theirs go."""

    entries: list = dataclasses.field(default_factory=list)
    watched: set = dataclasses.field(default_factory=set)


def _equal(a, b):
    """Whether the arrays ``a`` and ``b`` (or None) have the same dtype, shape and
    elements."""
    if a is None or b is None:
        return a is b
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


def _apart(value):
    """The arrays kept apart (:func:`.program.kept_apart`) in ``value`` and in its
    tuples, lists and dicts, as :func:`.program.key_part` meets them."""
    if kept_apart(value):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _apart(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _apart(item)


class Repeat:
    """A call on ``cluster`` that may repeat a kept one (:attr:`entry`, else None) and
    otherwise may leave one (the worker parks its context under :attr:`token`, then
    :meth:`keep`); ``kinds``: {kind: workers} of its run. Made by :meth:`of`."""

    def __init__(self, cluster, spec, graph, kinds, key, aux):
        self.cluster, self.spec, self.graph, self.kinds, self.key, self.aux = \
            cluster, spec, graph, kinds, key, aux
        self.token = os.urandom(8).hex()
        workers = _workers(cluster)
        with _LOCK:
            kept = _KEPT.get(cluster)
            self.entry = None if kept is None else next(
                (e for e in kept.entries if e.matches(key, aux, workers)), None)

    @classmethod
    def of(cls, cluster, spec, graph, kinds, call):
        """The Repeat of a call of ``spec`` on ``graph`` with ``call`` (its devices,
        mode, iteration limit and options, as a tuple) whose run goes to the workers of
        ``kinds``; None where the program has no strict key
        (:meth:`.ProgramSpec.initial_key`) or reads a value held by identity
        (:func:`.kernel.reads_key`)."""
        program, code = spec.initial_key(graph), reads_key(spec)
        if program is None or code is None:
            return None
        key = (graph.token, program, code, call, tuple(getattr(tuning, n) for n in _PLACING))
        return cls(cluster, spec, graph, kinds, key, spec.initial_aux(graph))

    def answer(self):
        """(the report of the kept call repeated on its worker, its wall in seconds);
        None where it could not be (the key in use by another call, the worker gone,
        its context gone, or the repeat failed: the key is then dropped)."""
        entry = self.entry
        if entry is None or not entry.busy.acquire(blocking=False):
            return None
        try:
            start = time.perf_counter()
            with self.cluster.spreading:  # (one segment at a time on a cluster)
                outcome = calls.call_all(self.cluster.client, [
                    (entry.address, spread.cpu_again, (entry.token,))], keyed_args=True)[0]
            wall = time.perf_counter() - start
        finally:
            entry.busy.release()
        if isinstance(outcome, BaseException):
            self._drop(entry)
            if isinstance(outcome, calls.Lost):
                self.cluster.left([entry.address])
            return None
        return outcome, wall

    def _drop(self, entry):
        """Let ``entry`` go (its context is not parked any more)."""
        with _LOCK:
            kept = _KEPT.get(self.cluster)
            if kept is not None and entry in kept.entries:
                kept.entries.remove(entry)

    def keep(self, address):
        """Keep this call for its repeats: the worker at ``address`` parked its context
        under :attr:`token`. An older call of the same key, and the oldest beyond
        ``tuning.REPEATS_KEPT``, are let go, their contexts too."""
        copies = [(array, array.copy()) for array in _apart(vars(self.spec.program))]
        fixed = any(self.aux is a for a in self.spec.derived_arrays(self.graph))
        entry = _Entry(self.key, copies, self.aux if fixed or self.aux is None else
                       self.aux.copy(), fixed, _workers(self.cluster), address, self.token)
        with _LOCK:
            kept = _KEPT.setdefault(self.cluster, _Kept())
            gone = [e for e in kept.entries if e.key == self.key]
            kept.entries = [e for e in kept.entries if e not in gone] + [entry]
            while len(kept.entries) > tuning.REPEATS_KEPT:
                gone.append(kept.entries.pop(0))
            watch = self.graph.token not in kept.watched
            kept.watched.add(self.graph.token)
        if watch:  # (not at exit: the workers go with the cluster)
            weakref.finalize(self.graph, _graph_gone, weakref.ref(self.cluster),
                             self.graph.token).atexit = False
        _unpark(self.cluster, gone)


def _workers(cluster):
    """The addresses of ``cluster``'s workers now (a restarted one has another)."""
    return tuple(cluster.cpu_workers) + tuple(cluster.gpu_workers)


def _graph_gone(cluster_ref, token):
    """Let go of the kept calls on the graph of ``token`` (it is gone) of the cluster
    ``cluster_ref()`` (if it still lives), and their workers' contexts."""
    cluster = cluster_ref()
    if cluster is None:
        return
    with _LOCK:
        kept = _KEPT.get(cluster)
        if kept is None:
            return
        kept.watched.discard(token)
        gone = [e for e in kept.entries if e.key[0] == token]
        kept.entries = [e for e in kept.entries if e.key[0] != token]
    _unpark(cluster, gone)


def _unpark(cluster, entries):
    """Let the contexts of ``entries`` go on the workers of ``cluster`` while it runs
    (not waited for)."""
    if entries and cluster.running():
        cluster.run_soon(spread.unpark, *[e.token for e in entries])
