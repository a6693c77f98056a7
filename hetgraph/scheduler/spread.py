"""Iterations on worker processes that hold the run's vertex state between segments
(the design's rule: state exchanged worker to worker, never through the
client).

GPU worker processes alone (``devices="gpu"``) do as the CPU workers below, with the
state on their devices (:mod:`.gpuowner`): one runs whole segments (:func:`gpu_alone`)
and hands the state back only when the client reads it; several run spread segments
(:func:`gpu_spread`), each owning a contiguous range of the run's pages, every
iteration a pull of them and an exchange of its range.

A run on CPU worker processes alone keeps its state on the workers (:class:`Spread`;
the program's initial state is made there, not sent). On one worker its segments run
there (:func:`cpu_alone`), a warm call's one segment as one direct call, whose worker
drops the run's contexts with its report (nothing else is sent at the run's end; the
same on several: each owner of the last segment drops its own). On several they run
as *spread segments*: one task on each CPU worker of the run (its
*owners*), all of them running the same iterations: each worker owns a contiguous
range of the vertices (:func:`.placement.owned_ranges`) and keeps a copy of the whole
state; a pull iteration pulls the owner's range (with its share of its host's cores),
sends its new values and flags to the peers
(:mod:`.exchange`; through shared memory between the processes of one host,
:mod:`.hostshare`) and takes theirs, so that every worker holds the same state after
it. A graph of fewer than ``tuning.SPREAD_ARCS`` arcs runs on one worker: its
exchange would cost more than its pull. A segment's tasks are called on their workers
directly (:mod:`.calls`) once these were seen to hold the Dask data among the
arguments (the placed graph, the kept arrays), else sent as Dask tasks. Each worker
then computes the iteration constant, the convergence test, the next frontier and where the segment ends
(converged; the limit; the first owner's time slice, which its part carries) from
that same state, so they agree without asking the client. The iterations the cost
model does not pull (notify-pull, push: small frontiers) run on the first owner alone,
which then sends the others its rows, and the state when they go on. The client gets
each segment's history rows and frontier, and the whole state with the segment after
which it reads it (the run's end, a checkpoint; a slice on one worker; through a file
of the client's when they share its host, :mod:`.hostshare`), else on demand
(:meth:`Spread.collect`). A segment's round trip is no iteration's: it counts in the
Result's ``round_trip_seconds``, not in a history row.

A worker that dies in a segment: its peers' waits end with
:class:`~.exchange.PeerLostError`, and the segment runs again on the survivors from its
start (each kept a copy of the state it began from, or the client holds it), its
vertices shared among them; with no survivor, on a worker that joined since when the
client holds the state; after ``tuning.LOST_TASK_RETRIES`` attempts, or with no worker
holding the state, :class:`~hetgraph.cluster.WorkerLostError` names the workers that
left.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import logging
import os
import threading
import time
import weakref

import numba
import numpy as np

from .. import tuning
from ..cluster import WorkerLostError
from ..engines.cpu_modes import notify_fraction
from ..kernels import cpu
from ..kernels.arrays import module_of
from ..kernels.cpu.kernel import reads_key
from ..result import SECONDS, history_row
from ..threadcount import numba_threads
from . import calls, callsocket, exchange, gpuowner, hostshare, parts, tasks
from .placement import owned_ranges
from .state import VertexState

log = logging.getLogger("hetgraph.scheduler")


@dataclasses.dataclass(frozen=True)
class Owners:
    """The workers of one attempt of a spread segment: each one's address and (first,
    end) vertex (and page, for GPU owners), the segment's :mod:`.exchange` channel (run
    id, name), and the
    directory where owners of one host share their ranges (:mod:`.hostshare`; the
    client's ``tuning.SHARED_MEMORY_DIR``, "": none)."""

    addresses: tuple
    ranges: tuple
    pages: tuple  # each GPU owner's (first, end) page of the run's pages; CPU: ()
    channel: tuple
    shared_dir: str = ""

    def peers(self, me):
        """{owner index: address} of every owner but ``me``."""
        return {j: a for j, a in enumerate(self.addresses) if j != me}


# --- on the workers -------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Initial:
    """Stands for the program's initial state, which each worker makes itself."""


class _Made:
    """The program's initial state that this worker made for a graph (not to be
    written): ``key`` (:meth:`.ProgramSpec.initial_key`), ``values``, ``flags``;
    ``given``: the host state last made from them for a run; ``spare``: that state
    once its run ended, which the next run fills from them (None: none free)."""

    def __init__(self, key, values, flags):
        self.key, self.values, self.flags = key, values, flags
        self.given = self.spare = None


_MADE = weakref.WeakKeyDictionary()  # graph -> {program class: (key, _Made)}
_MADE_LOCK = threading.Lock()


def _kept(table, run, make):
    """``make(key)`` of ``run``'s program's initial state on its graph, kept in ``table``
    (graph -> {program class: (key, what make gave)}) and given again while the key
    (:meth:`.ProgramSpec.initial_key`) is the run's; made for the run alone when the
    program has none."""
    key = tasks.initial_key(run)
    if key is None:
        return make(None)
    with _MADE_LOCK:
        kinds = table.setdefault(run.graph, {})
        kept = kinds.get(key[0])
    if kept is None or kept[0] != key:
        kept = (key, make(key))
        with _MADE_LOCK:
            kinds[key[0]] = kept
    return kept[1]


def _made(run):
    """The :class:`_Made` of ``run``'s program on its graph (:func:`_kept`)."""
    return _kept(_MADE, run, lambda key: _Made(
        key, *run.spec.initial_state(run.graph, np)[:2]))


def _initial_state(run):
    """A host state of the program's initial one for ``run``: the spare state of its
    last run on this graph filled (no V-sized allocation, nor the program's ``init``),
    else copies of :func:`_made`'s."""
    made = _made(run)
    if made.key is None:  # (made for this run alone)
        return VertexState(made.values, made.flags, sync=run.sync)
    with _MADE_LOCK:
        spare, made.spare = made.spare, None
    if spare is None or spare.sync != run.sync:
        state = VertexState(made.values.copy(), made.flags.copy(), sync=run.sync)
    else:
        np.copyto(spare.values, made.values)
        np.copyto(spare.flags, made.flags)
        state = spare
    made.given = state
    return state


def _spare(run, state):
    """Keep the host ``state`` that :func:`_initial_state` gave ``run``, which ended
    normally and which no one reads any more, for the next run of its program on this
    graph to fill (its marks are zero between iterations)."""
    with _MADE_LOCK:
        kept = _MADE.get(run.graph, {}).get(type(run.spec.program))
        made = None if kept is None else kept[1]
        if made is not None and made.given is state:
            made.spare, made.given = state, None


def _drop_after_answer(run, files=True, spare=None):
    """:func:`tasks.drop_contexts` of ``run`` (``files``: see there), then
    :func:`_spare` of its host state ``spare`` (None: none), once the call's answer is
    sent (:func:`.callsocket.after_answer`): the answer needs neither."""
    def drop():
        tasks.drop_contexts(run.run_id, files)
        if spare is not None:
            _spare(run, spare)
    callsocket.after_answer(drop)


def _own_state(run, ctx, state, version, backup=True):
    """The state this worker runs the segment on, its own copy: of ``state`` (sent by
    the client, or the program's :class:`Initial` one), else the one it holds at
    ``version`` (``backup``: a copy kept as the segment's backup), else that backup (the
    segment runs again after a peer left)."""
    if isinstance(state, Initial):
        return _initial_state(run)
    if state is not None:
        return VertexState(state.values.copy(), state.flags.copy(), sync=state.sync)
    if ctx is not None and ctx.held == version:
        held = ctx.engine.state
        if backup:
            ctx.backup = (version, held.values.copy(), held.flags.copy())
        return held
    kept = ctx.backup if ctx is not None else _FINAL.get(run.run_id)
    if kept is not None and kept[0] == version:  # (a backup, or what a run's last
        # segment left: see cpu_spread)
        _, values, flags = kept
        return VertexState(values.copy(), flags.copy(), sync=run.sync)
    raise _not_held(run, version)


def _not_held(run, version):
    """The error of a segment asked for a state this worker does not hold."""
    return WorkerLostError(f"this worker does not hold the state of run {run.run_id} at "
                           f"version {version}: it was lost with a worker")


@dataclasses.dataclass(frozen=True)
class Finalized:
    """A run's result that its GPU worker finalized (``values``, a host array) where it
    does not fit the client's file: of another dtype or shape than the state's."""

    values: np.ndarray


def _whole(run, state, back, ends=True):
    """The whole ``state`` for the client, sent back by a segment after which the run's
    next step reads it there (the run's end, a checkpoint, or where no peer holds it):
    through the client's file ``back`` (:class:`hostshare.Back`: a client on this host;
    None: none, or where this host lacks it), else as :func:`tasks._out` gives it but
    without a copy (the client takes it before this worker's next task changes it).
    ``state``: a host VertexState, or a GPU engine, whose arrays are copied from the
    device straight into the file. Without its flags where ``back`` says so (the run's
    result) and the segment ``ends`` the run; the Back returned says which, and
    whether a GPU engine's values were finalized on its device first (the run's
    result, :func:`.gpuowner.finalizes`; a :class:`Finalized` where they do not fit
    the file)."""
    if back is not None and os.path.exists(back.path):
        if not (ends or back.flags):  # (the run goes on: the client may need them)
            back = dataclasses.replace(back, flags=True)
        if isinstance(state, VertexState):
            hostshare.hand_back(back, state.values, state.flags)
            return back
        values = state.values
        if not back.flags and gpuowner.finalizes(run.spec):  # (the result: no host pass
            # over it on the client)
            values, back = gpuowner.finalized(run, values), dataclasses.replace(
                back, finalized=True)
            if values.shape != state.values.shape or values.dtype != state.values.dtype:
                return Finalized(gpuowner.host_copy(values))
        # (from the device, into this worker's page-locked map of the file)
        gpuowner.hand_back(back, values, state.flags)
        return back
    values, flags = (state.values, state.flags) if isinstance(state.values, np.ndarray) \
        else (gpuowner.host_copy(state.values), gpuowner.host_copy(state.flags))
    return False, [(0, len(values))], [values], [flags]


def _ends(status, first, rows, last):
    """Whether a segment from iteration ``first`` that ran ``rows`` with ``status`` ran
    iteration ``last``, or converged (one on the run's one worker: a time slice that
    ended at ``last`` ends the run too)."""
    return status in ("converged", "limit") or first + len(rows) > last


@tasks.resolved
def cpu_alone(run, state, version, first, last, frontier, back=None, seconds=None,
              final=False, park=None):
    """A CPU segment (:func:`tasks.cpu_segment`: any CPU mode) on the one worker of a
    run, from ``state`` as :func:`cpu_spread` takes it, without the cost model (one
    device kind: the CPU engine chooses its modes); the worker then holds the state
    after it, which comes back in the report too (a worker lost later would take it
    with it; ``back``: see :func:`_whole`). ``final``: the run ends when this segment
    reaches ``last`` or converges; the worker then drops the run's contexts itself
    (``Report.dropped``), which spares the client a message to every worker at the
    run's end. ``park``: a token under which the worker keeps the run's context
    instead, for the call's repeats (:func:`park_after_answer`; ``Report.parked``
    says whether it did)."""
    with numba_threads(run.threads):
        own = _own_state(run, tasks.cpu_context_of(run.run_id), state, version,
                         backup=False)  # (the client holds the one it began from)
        ctx = tasks._cpu_context(run, own)
        ctx.held = ctx.version = None  # (the engine recounts its frontier)
        if frontier is None and isinstance(state, Initial):
            frontier = _initial_frontier(run, own.flags)
        rows, status, after = tasks.cpu_iterations(run, ctx, version, first, last, None,
                                                   False, False, frontier, seconds)
        ctx.held = version + 1
    ends = _ends(status, first, rows, last)
    dropped = final and ends
    out = _whole(run, own, back, ends)
    # (a run from the initial state whose state came back in the answer)
    parked = dropped and park is not None and isinstance(state, Initial) and \
        isinstance(out, tuple) and park_after_answer(park, run, own, frontier, last)
    if dropped and not parked:  # (its arrays copied out, not sent in the report: spared)
        _drop_after_answer(run, spare=None if isinstance(out, tuple) else own)
    return tasks.Report("cpu", [], rows=rows, status=status,
                        build_seconds=ctx.take_build_seconds(), frontier=after,
                        out=out, dropped=dropped, parked=parked)


@dataclasses.dataclass
class _Parked:
    """A run's CPU context kept for the repeats of its call (:func:`cpu_again`): the
    ``run`` (its RunSpec), its context ``ctx``, the host ``state`` its engine is bound
    to, the program's initial state (``made``, :class:`_Made`) and its frontier, the
    run's last iteration ``last``, what its program read when unpacked (``reads``,
    :func:`.kernel.reads_key`)."""

    run: object
    ctx: object
    state: VertexState
    made: _Made
    frontier: tuple
    last: int
    reads: tuple


_PARKED = collections.OrderedDict()  # token -> _Parked, the newest last
_PARKED_LOCK = threading.Lock()


def park_after_answer(token, run, state, frontier, last):
    """Keep ``run``'s CPU context, bound to its host ``state`` (the program's initial
    state of frontier ``frontier`` when the run began), under ``token`` once the call's
    answer is sent, for :func:`cpu_again` (``tuning.REPEATS_KEPT`` at most, the oldest
    let go); returns whether it will: not where the run changed its program (its
    initial key is not the one it was unpacked with), nor where what it reads has no
    key (:func:`.kernel.reads_key`)."""
    key, reads = tasks.initial_key(run), tasks.unpacked_reads(run)
    if key is None or reads is None or run.spec.initial_key(run.graph) != key:
        return False
    made = _made(run)
    if made.key != key:
        return False

    def keep():
        ctx = tasks.keep_cpu_context(run.run_id)
        if ctx is not None:
            _put_parked(token, _Parked(run, ctx, state, made, frontier, last, reads))
    callsocket.after_answer(keep)
    return True


def _put_parked(token, parked):
    """File ``parked`` under ``token``, the newest; let the oldest go beyond
    ``tuning.REPEATS_KEPT``."""
    with _PARKED_LOCK:
        _PARKED[token] = parked
        gone = [_PARKED.popitem(last=False)[1]
                for _ in range(max(len(_PARKED) - tuning.REPEATS_KEPT, 0))]
    for old in gone:
        tasks.release(old.ctx)


def unpark(*tokens):
    """Let the contexts parked under ``tokens`` go (their calls' keys are gone on the
    client); one a call is using (taken out meanwhile) is filed again after it, and
    goes as the oldest beyond ``tuning.REPEATS_KEPT``."""
    with _PARKED_LOCK:
        gone = [_PARKED.pop(token) for token in tokens if token in _PARKED]
    for parked in gone:
        tasks.release(parked.ctx)


def cpu_again(token):
    """The report of a repeat of the call whose run's context is parked under ``token``
    (:func:`park_after_answer`), as :func:`cpu_alone` gave it for that run's one
    segment: the program's initial state refilled, the engine bound to it again, the
    iterations run to the same last one (every time slice, here), the state after
    them in the report. :class:`.calls.Missing` where no context is parked under
    ``token`` (this worker restarted, or let it go), or where its program's methods
    read other values now (a later run unpacked its class again, rebinding them): the
    client runs the call the whole way. A context whose call failed is let go."""
    with _PARKED_LOCK:  # (taken while in use: a second call of it misses)
        parked = _PARKED.pop(token, None)
    if parked is not None and reads_key(parked.run.spec) != parked.reads:
        tasks.release(parked.ctx)
        parked = None
    if parked is None:
        raise calls.Missing(f"repeat {token}")
    run, ctx, state = parked.run, parked.ctx, parked.state
    try:
        with numba_threads(run.threads):
            np.copyto(state.values, parked.made.values)
            np.copyto(state.flags, parked.made.flags)
            ctx.engine.bind(run.spec, run.graph, state, run.aux)
            ctx.held = ctx.version = None
            rows, status, after = _to_the_end(run, ctx, parked.frontier, parked.last)
    except BaseException:
        tasks.release(ctx)
        raise
    _put_parked(token, parked)
    return tasks.Report("cpu", [], rows=rows, status=status,
                        build_seconds=ctx.take_build_seconds(), frontier=after,
                        out=_whole(run, state, None), dropped=True, parked=True)


def _to_the_end(run, ctx, frontier, last):
    """(rows, status, frontier after) of ``run``'s iterations on the engine of ``ctx``
    from the first to ``last`` or convergence, time slice after time slice."""
    rows, version = [], 0
    while True:
        more, status, frontier = tasks.cpu_iterations(
            run, ctx, version, 1 + len(rows), last, None, False, False, frontier)
        rows += more
        if not more or _ends(status, 1 + len(rows) - len(more), more, last):
            return rows, status, frontier
        version += 1


def _own_gpu_state(run, ctx, state, version, backup=False, count=False):
    """Make the engine of this worker's GPU context ``ctx`` hold the state at
    ``version``, as :func:`_own_state` does for a CPU: ``state`` loaded (the client's),
    the program's :class:`Initial` one made on the device, or (None) the one it holds,
    else its backup of that version; ``backup``: keep a copy (on the device) of the
    state the segment begins from where it is the one this worker held, should the
    segment run again after a peer left (the client sends its state, or the initial
    one, again; a backup loaded stays). Returns,
    with ``count``, the frontier of the whole state made or loaded (active vertices,
    their out-degree sum; an owner's engine counts only its own pages), else None."""
    engine, everything = ctx.engine, [(0, run.graph.num_vertices)]
    if isinstance(state, Initial):
        xp = module_of(engine.values) if run.spec.any_device else np
        values, flags, _ = run.spec.initial_state(run.graph, xp)
        engine.load(values, flags, everything)
    elif state is not None:
        engine.load(state.values, state.flags, everything)
    elif ctx.version != version:
        if ctx.backup is None or ctx.backup[0] != version:
            raise _not_held(run, version)
        engine.load(ctx.backup[1], ctx.backup[2], everything)
    elif backup:
        ctx.backup = (version, engine.values.copy(), engine.flags.copy())
    counted = None
    if count:
        counted = _initial_frontier(run, engine.flags) if isinstance(state, Initial) \
            else _frontier_of(run, engine.flags)
    ctx.version = None  # (changing: held again once the segment ends)
    return counted


def _frontier_of(run, flags):
    """The frontier (active vertices, their out-degree sum) of an engine's ``flags`` of
    the whole state, counted on the host (a GPU's copied there first)."""
    return cpu.frontier_size(flags if isinstance(flags, np.ndarray) else
                             gpuowner.host_copy(flags), run.graph.out_indptr)


_FRONTIERS = weakref.WeakKeyDictionary()  # graph -> {program class: (initial key,
# the frontier of the program's initial state)}


def _initial_frontier(run, flags):
    """:func:`_frontier_of` the program's initial state of ``run`` just made (its
    ``flags``), counted once for a graph and :meth:`.ProgramSpec.initial_key`, then
    kept (:func:`_kept`): a warm call copies and counts no V flags on the host (a GPU
    owner's engine counts only its own pages)."""
    return _kept(_FRONTIERS, run, lambda key: _frontier_of(run, flags))


@tasks.resolved
def gpu_alone(run, state, version, first, last, frontier, back=None, seconds=None,
              final=False):
    """A GPU segment on the one GPU worker process of a run, as :func:`tasks.gpu_segment`
    runs it, from ``state`` as :func:`cpu_alone` takes it (no cost model; the initial
    state made on the device). The worker then holds the state after it on the device
    (:mod:`.gpuowner`), which comes back (``back``: see :func:`_whole`) only when the
    client reads it next: the segment reached ``last`` (the run's end, a checkpoint) or
    converged. ``final``: as :func:`cpu_alone`'s."""
    seconds = tuning.SEGMENT_SECONDS if seconds is None else seconds
    ctx = gpuowner.context(run)
    engine = ctx.engine
    with gpuowner.on_device():
        _own_gpu_state(run, ctx, state, version)
        engine.reset_frontier(frontier)
        rows, status = tasks.run_iterations(
            run, engine, "gpu", first, last, tasks._chooser(None, run, "gpu", False),
            engine.partition.num_pages, None, seconds)
        after = None if status == "converged" else engine.frontier()
        ends = _ends(status, first, rows, last)
        out = _whole(run, engine, back) if ends else None
    tasks._holds(run, ctx, version + 1)
    dropped = final and ends
    if dropped:
        _drop_after_answer(run)
    return tasks.Report("gpu", [], rows=rows, status=status,
                        build_seconds=ctx.take_build_seconds(), frontier=after, out=out,
                        dropped=dropped)


@tasks.resolved
def cpu_spread(run, state, version, first, last, model, owners, me, frontier, back=None,
               seconds=None, final=False):
    """Iterations ``first``..``last`` of a spread segment on owner ``me`` of ``owners``
    (see the module's docstring), from ``state`` (the client's, :class:`Initial`, or
    None: the one this worker holds at ``version``) whose frontier is ``frontier``
    (active vertices, their out-degree sum), for about ``seconds`` (default
    ``tuning.SEGMENT_SECONDS``) as the first owner counts them. Returns a Report with
    the history rows, the status and the frontier after the last iteration (None when
    converged). ``final``: as :func:`cpu_alone`'s, every owner dropping its own
    contexts (they agree on the status); its shared files stay for the peers' reads
    (:func:`.hostshare.forget`), and an owner but the first keeps the state after it
    for the client, should the first owner's report be lost (:func:`held_state`)."""
    worker = _owner(owners, me, first)
    seconds = tuning.SEGMENT_SECONDS if seconds is None else seconds
    with numba_threads(run.threads or cores_of_owner(owners.addresses, me)):
        own = _own_state(run, tasks.cpu_context_of(run.run_id), state, version)
        ctx = tasks._cpu_context(run, own)
        ctx.held = ctx.version = None  # (mid-segment; the engine recounts its frontier)
        iterations = _Iterations(run, ctx.engine, worker, owners, me, model, seconds)
        rows, status, after = _telling_peers(iterations, first, last, frontier)
        ctx.held = version + 1 if iterations.holds else None
    # (the first owner's copy, when the client reads the state next)
    out = _whole(run, own, back) if me == 0 and status in ("converged", "limit") else None
    dropped = final and status in ("converged", "limit")
    if dropped:
        if me != 0:  # (should the first owner's report with the state be lost with it:
            # the state after the segment for the client, else the one it began from)
            _keep_final(run.run_id, (version + 1, own.values, own.flags)
                        if iterations.holds else ctx.backup, version)
        _drop_after_answer(run, files=False)
    return tasks.Report("cpu", [], rows=rows, status=status,
                        build_seconds=ctx.take_build_seconds(), frontier=after, out=out,
                        held=iterations.holds, dropped=dropped)


@tasks.resolved
def gpu_spread(run, state, version, first, last, model, owners, me, frontier, back=None,
               seconds=None, final=False):
    """Iterations ``first``..``last`` of a spread segment on GPU owner ``me`` of
    ``owners``, as :func:`cpu_spread` runs them (same arguments and Report) but each a
    pull of the owner's pages (``owners.pages[me]``) on its GPU, with the state on the
    device, after which its range goes to its peers and theirs come in
    (:func:`.gpuowner.exchange`). Each owner keeps a copy on the device of the state
    the segment began from, should it run again after a peer left; an owner but the
    first keeps the state after the run's last segment for the client, should the
    first owner's report be lost."""
    worker = _owner(owners, me, first)
    seconds = tuning.SEGMENT_SECONDS if seconds is None else seconds
    ctx = gpuowner.context(run, range(*owners.pages[me]))
    engine = ctx.engine
    with gpuowner.on_device():
        counted = _own_gpu_state(run, ctx, state, version, backup=True,
                                 count=frontier is None)
        frontier = counted if frontier is None else frontier
        iterations = _GpuIterations(run, engine, worker, owners, me, model, seconds)
        rows, status, after = _telling_peers(iterations, first, last, frontier)
        ends = status in ("converged", "limit")
        out = _whole(run, engine, back) if me == 0 and ends else None
        dropped = final and ends
        if dropped and me != 0:
            _keep_final(run.run_id, (version + 1, engine.values.copy(),
                                     engine.flags.copy()), version)
    tasks._holds(run, ctx, version + 1)
    if dropped:
        _drop_after_answer(run, files=False)
    return tasks.Report("gpu", [], rows=rows, status=status,
                        build_seconds=ctx.take_build_seconds(), frontier=after, out=out,
                        dropped=dropped, speeds=iterations.speeds() if me == 0 else ())


def _owner(owners, me, first):
    """This worker, owner ``me`` of ``owners`` in a segment from iteration ``first``;
    PeerLostError where it is another (Dask ran the task again elsewhere: its result
    was lost with its worker, and the segment went on without it)."""
    worker = calls.this_worker()
    if worker.address != owners.addresses[me]:
        raise exchange.PeerLostError(owners.addresses[me], (first,))
    return worker


def _telling_peers(iterations, first, last, frontier):
    """``iterations.run(first, last, frontier)`` (an owner's :class:`_Iterations` or
    :class:`_GpuIterations`), its peers told of an error before it is raised: they
    would wait for this owner's parts."""
    owners, me = iterations.owners, iterations.me
    try:
        return iterations.run(first, last, frontier)
    except BaseException:
        exchange.tell_failed(iterations.worker, list(owners.peers(me).values()),
                             owners.channel, me)
        raise


class _GpuIterations:
    """The iterations of GPU owner ``me`` in a spread segment (see :func:`gpu_spread`):
    each a pull of its pages and an exchange of its range, after which every owner
    holds the same state and decides alike where the segment ends (converged, the
    limit, the first owner's time slice)."""

    def __init__(self, run, engine, worker, owners, me, model, seconds):
        self.run_, self.engine, self.worker = run, engine, worker
        self.owners, self.me, self.model, self.seconds = owners, me, model, seconds
        self.began = time.perf_counter()
        self.host_shared = hostshare.usable(owners.addresses, owners.shared_dir)
        self.sending = exchange.Sending()
        self.pulled = np.zeros((len(owners.addresses), 2))  # each owner's (edges, seconds)

    def speeds(self):
        """Each owner's pulls in this segment, edges a second (0: none timed)."""
        edges, seconds = self.pulled.T
        return tuple(float(e / s) if s > 0 else 0.0 for e, s in zip(edges, seconds))

    def run(self, first, last, frontier):
        """(rows, status, frontier after: None when converged) of the iterations from
        ``frontier`` (active vertices, their out-degree sum, of the whole graph)."""
        run, engine = self.run_, self.engine
        graph, spec = run.graph, run.spec
        program, arcs, rows = spec.program, graph.num_arcs, []
        for iteration in itertools.count(first):
            start = time.perf_counter()
            active, f = int(frontier[0]), notify_fraction(frontier[1], arcs)
            constant = program.iteration_constant(graph, engine.values) \
                if spec.uses_constant else 0.0
            previous = engine.values.copy() if spec.has_converged else None
            mode, _, edges, activated, kernel = engine.wait(
                engine.launch(constant, None, chained=False))
            stop = self.me == 0 and time.perf_counter() - self.began > self.seconds
            infos = gpuowner.exchange(self.worker, self.owners, self.me, engine,
                                      (iteration,), (activated, engine.frontier()[1],
                                                     edges, kernel, stop),
                                      self.host_shared, self.sending,
                                      whole=iteration == first)
            frontier = tuple(sum(int(i[k]) for i in infos.values()) for k in (0, 1))
            for j, i in infos.items():
                self.pulled[j] += (int(i[2]), float(i[3]))
            finished = spec.has_converged and bool(program.converged(graph, previous,
                                                                     engine.values))
            status = "converged" if frontier[0] == 0 or finished else "limit" \
                if iteration >= last else "slice" if infos[0][4] else None
            wall = time.perf_counter() - start
            gpu_seconds = max(float(i[3]) for i in infos.values())
            rows.append(history_row(
                iteration=iteration, placement="gpu", mode=mode, f=f, rho=run.rho,
                alpha=self.model.alpha(f, run.rho, arcs), active=active,
                computed=graph.num_vertices, edges=arcs, activated=frontier[0],
                gpu_pages=len(run.page_vertices),
                gpu_edges=sum(int(i[2]) for i in infos.values()), gpu_seconds=gpu_seconds,
                seconds=wall, overhead=max(wall - gpu_seconds, 0.0)))
            if status is not None:
                self.sending.settle()
                return rows, status, None if status == "converged" else frontier


def gpu_shares(cluster, addresses):
    """The shares of a spread run's pages that the GPU owners at ``addresses`` take: the
    ones they took last, until their measured speeds (``cluster.gpu_speeds``) say that
    the slowest would take more than ``1 + tuning.GPU_SHARE_SLACK`` times the fastest's
    time with them: then their speeds (equal until every owner was timed). A change
    of shares lays the owners' pages out again, so small differences keep the shares."""
    shares = cluster.gpu_shares.get(addresses, [1.0] * len(addresses))
    speeds = [cluster.gpu_speeds.get(a, 0.0) for a in addresses]
    if min(speeds) > 0:
        times = [share / speed for share, speed in zip(shares, speeds)]
        if max(times) > (1.0 + tuning.GPU_SHARE_SLACK) * min(times):
            shares = [speed / max(speeds) for speed in speeds]
    cluster.gpu_shares[addresses] = shares
    return shares


def cores_of_owner(addresses, me, cores=None):
    """Threads for owner ``me`` of the workers at ``addresses``: this machine's ``cores``
    (default: Numba's thread count) shared equally by the owners on its host (more
    threads than cores would slow every owner's pull)."""
    from distributed.comm.addressing import get_address_host

    cores = numba.config.NUMBA_NUM_THREADS if cores is None else cores
    host = get_address_host(addresses[me])
    return max(cores // sum(get_address_host(a) == host for a in addresses), 1)


_FINAL: dict = {}  # run id -> (version, values, flags): the state after a run's last
# spread segment, or the one it began from, on an owner but the first, which dropped its
# contexts (the newest run's)


def _keep_final(run_id, kept, version):
    """Keep ``kept`` (version, values, flags) for run ``run_id``, whose last segment
    from ``version`` ended here, in place of the last run's: the state after it, or
    its backup (None, or one of an older version: nothing)."""
    _FINAL.clear()
    if kept is not None and kept[0] >= version:
        _FINAL[run_id] = kept


def held_state(run_id, version):
    """(values, flags) of the state this worker holds for run ``run_id`` at
    ``version`` (None when it holds none): its CPU or GPU context's, or the one it kept
    after the run's last segment, as host arrays."""
    ctx = tasks.cpu_context_of(run_id)
    if ctx is not None and ctx.held == version:
        return ctx.engine.state.values, ctx.engine.state.flags
    on_gpu = gpuowner.of_run(run_id)
    kept = (version, on_gpu.engine.values, on_gpu.engine.flags) \
        if on_gpu is not None and on_gpu.version == version else _FINAL.get(run_id)
    if kept is None or kept[0] != version:
        return None
    if isinstance(kept[1], np.ndarray):
        return kept[1:]
    with gpuowner.on_device():  # (a GPU owner's)
        return gpuowner.host_copy(kept[1]), gpuowner.host_copy(kept[2])


class _Iterations:
    """The iterations of one owner in a spread segment (see :func:`cpu_spread`): pull
    ones together (:meth:`_pull`), the others on the first owner alone
    (:meth:`_alone`). ``holds``: whether this owner holds the state after them."""

    def __init__(self, run, engine, worker, owners, me, model, seconds):
        self.run_, self.engine, self.worker = run, engine, worker
        self.owners, self.me, self.model, self.seconds = owners, me, model, seconds
        self.peers = owners.peers(me)
        self.mine = [owners.ranges[me]] if owners.ranges[me][1] > owners.ranges[me][0] \
            else []
        self.began, self.holds = time.perf_counter(), True
        self.host_shared = bool(self.peers) and hostshare.usable(owners.addresses,
                                                                 owners.shared_dir)
        self.sending = exchange.Sending()

    def run(self, first, last, frontier):
        """(rows, status, frontier after: None when converged) of the iterations from
        ``frontier`` (None: counted here, the same on every owner)."""
        run, rows, iteration, status = self.run_, [], first, None
        arcs = run.graph.num_arcs
        if frontier is None:  # (every owner holds the whole state)
            frontier = cpu.frontier_size(self.engine.state.flags, run.graph.out_indptr)
        while status is None:
            pulls = self.model.cpu_mode_for(notify_fraction(frontier[1], arcs), run.rho,
                                            arcs) == "pull"
            stretch = self._pull if pulls else self._alone
            iteration, status, frontier = stretch(rows, iteration, last, frontier)
        return rows, status, None if status == "converged" else frontier

    def _alone(self, rows, first, last, frontier):
        """Iterations from ``first`` on the first owner alone, until the cost model
        chooses pull again (status None) or the segment ends; its rows go into
        ``rows``, and it sends them to the peers with the state after them when they
        go on (a pull next, or the slice's end: they hold it then), else without (the
        client gets it). Returns (next iteration, status, frontier after)."""
        from distributed.protocol import to_serialize

        owners, tag = self.owners, ("alone", first)
        if self.me != 0:
            part = exchange.receive(self.worker, owners.channel, tag,
                                    {0: owners.addresses[0]})[0]
            rows += part["rows"]
            self.holds = part["values"] is not None
            if self.holds:
                state = self.engine.state
                state.values[:], state.flags[:] = part["values"], part["flags"]
            return part["next"], part["status"], part["frontier"]
        run, engine = self.run_, self.engine
        engine.reset_frontier(frontier)  # (pulls changed the state)
        with numba_threads(run.threads or numba.config.NUMBA_NUM_THREADS):  # (the
            # peers wait meanwhile)
            done, status = tasks.run_iterations(
                run, engine, "cpu", first, last,
                tasks._chooser(self.model, run, "cpu", False, True), len(run.page_vertices),
                None, max(self.seconds - (time.perf_counter() - self.began), 0.0))
        rows += done
        status = None if status == "moved" else status
        after = None if status == "converged" else engine.frontier()
        if self.peers:
            state, goes_on = engine.state, status in (None, "slice")
            exchange.send(self.worker, list(self.peers.values()), owners.channel, tag, 0, {
                "rows": to_serialize(done), "status": status, "next": first + len(done),
                "frontier": None if after is None else [int(x) for x in after],
                "values": to_serialize(state.values) if goes_on else None,
                "flags": to_serialize(state.flags) if goes_on else None}).result()
        return first + len(done), status, after

    def _pull(self, rows, first, last, frontier):
        """Pull iterations from ``first`` together, each owner its range, until the
        cost model leaves pull (status None) or the segment ends; their rows go into
        ``rows``. Returns (next iteration, status, frontier after)."""
        run, graph, spec = self.run_, self.run_.graph, self.run_.spec
        program, state, arcs = spec.program, self.engine.state, graph.num_arcs
        for iteration in itertools.count(first):
            start = time.perf_counter()
            active, f = int(frontier[0]), notify_fraction(frontier[1], arcs)
            constant = float(program.iteration_constant(graph, state.values)) \
                if spec.uses_constant else 0.0
            previous = state.values.copy() if spec.has_converged else None
            edges, activated = self.engine.pull_pages(self.mine, constant) \
                if self.mine else (0, 0)
            pulled = time.perf_counter() - start
            stop = self.me == 0 and time.perf_counter() - self.began > self.seconds
            infos = self._exchange(iteration, (activated, edges, pulled, stop),
                                   whole=iteration == first)
            state.swap()
            finished = spec.has_converged and program.converged(graph, previous,
                                                                state.values)
            total = sum(int(i[0]) for i in infos.values())
            cpu_seconds = sum(float(i[2]) for i in infos.values()) / len(infos)
            frontier = cpu.frontier_size(state.flags, graph.out_indptr)
            status = "converged" if total == 0 or finished else "limit" \
                if iteration >= last else "slice" if infos[0][3] else "moved" \
                if self.model.cpu_mode_for(notify_fraction(frontier[1], arcs), run.rho,
                                           arcs) != "pull" else None
            wall = time.perf_counter() - start
            rows.append(history_row(
                iteration=iteration, placement="cpu", mode="pull", f=f, rho=run.rho,
                alpha=self.model.alpha(f, run.rho, arcs), active=active,
                computed=graph.num_vertices, edges=arcs, activated=total,
                cpu_pages=len(run.page_vertices),
                cpu_edges=sum(int(i[1]) for i in infos.values()), cpu_seconds=cpu_seconds,
                seconds=wall, overhead=max(wall - cpu_seconds, 0.0)))
            if status is not None:
                self.sending.settle()  # (the state changes next: our part must be taken)
                return iteration + 1, None if status == "moved" else status, frontier

    def _exchange(self, iteration, info, whole):
        """Send this owner's new values and flags of ``iteration`` to its peers and
        write theirs into the state; returns {owner: (activated, edges, seconds,
        stop)}. ``whole``: the first exchange of a stretch of pulls (the peers' ranges
        of the array written next are older: sent whole between hosts)."""
        infos = {self.me: info}
        if not self.peers:
            return infos
        state = self.engine.state
        written = tasks.written_values(state)
        (a, b), channel, tag = self.owners.ranges[self.me], self.owners.channel, \
            (iteration,)
        if self.host_shared:  # (a word that the range is written, not the range)
            payload = {"shared": hostshare.write(
                self.owners.shared_dir, channel, self.owners.addresses[self.me], a, b,
                written[a:b], state.flags[a:b], list(self.peers)) if b > a else None}
        else:  # (its changes only, where they are few: see .parts)
            payload = parts.part_of(written[a:b], state.values[a:b], state.flags[a:b],
                                    whole=not state.sync or whole)
        self.sending.start(exchange.send(
            self.worker, list(self.peers.values()), channel, tag, self.me,
            {**payload, "info": list(info)},
            self.owners.shared_dir if self.host_shared else ""))
        for j, part in exchange.receive(self.worker, channel, tag, self.peers).items():
            x, y = self.owners.ranges[j]
            if not self.host_shared:
                parts.take_part(part, written[x:y], state.values[x:y] if state.sync
                                else None, state.flags[x:y])
            elif part["shared"] is not None:
                hostshare.read(channel, part["shared"], written[x:y], state.flags[x:y],
                               self.me)
            infos[j] = tuple(part["info"])
        return infos


# --- on the client ----------------------------------------------------------------------------

def _wait_a_while(futures, **options):
    """``distributed.wait`` for ``futures`` (with ``options``), at most
    4 * ``tuning.PEER_CHECK_SECONDS``; a timeout or a cancelled input (its inputs were
    lost) ends it quietly. The timeout's exception is dropped with its traceback:
    distributed keeps it in a closure that its event loop may hold a while, and its
    frames would keep the caller's locals alive, a result lent a state file among
    them (a later call then makes and page-locks another file)."""
    from distributed import CancelledError, wait

    try:
        wait(futures, timeout=4 * tuning.PEER_CHECK_SECONDS, **options)
    except (TimeoutError, CancelledError) as exc:
        exc.__traceback__ = None


class Spread:
    """The client's side of a run whose state the worker processes of ``kind`` ("cpu" or
    "gpu") of ``cluster`` hold between its segments: spread segments (several workers,
    each owning a range of the vertices of a graph of in-edge offsets ``in_indptr``; a
    GPU owner a range of the run's ``pages``, their (first, end) vertices) and segments
    on one worker (:func:`cpu_alone`, :func:`gpu_alone`); which version of the state
    each worker holds, the state brought back when the client needs it, a segment sent
    again after a worker left. ``initial``: the state at version 0 is the program's
    initial one, which the workers make themselves; ``share()``: the run's reference
    for tasks shared again (after a worker left: the graph and the kept arrays may have
    left with it)."""

    def __init__(self, cluster, run_id, in_indptr, initial, share, kind="cpu", pages=None):
        self.cluster, self.client, self.run_id = cluster, cluster.client, run_id
        self.in_indptr, self.share = in_indptr, share
        self.kind, self.pages = kind, pages
        self.run_ref = None  # the run's reference for the tasks of this segment
        self.addresses = self._workers()
        self.initial = initial
        self.holds = {}  # worker address -> the state's version its CPU context holds
        self.collected = 0  # the version the client's state was last brought to
        self.lost = []  # addresses of the workers that left during the run
        self.touched = set()  # addresses of the workers sent a segment of the run
        self.dropped = set()  # those whose last segment dropped the run's contexts
        self.round_trips = 0.0  # seconds of the segments' calls outside their rows
        # where the workers hand the state over to this process: through a file when
        # they run on this machine (made with the first segment: see _back_for)
        self.shared_dir = tuning.SHARED_MEMORY_DIR if cluster.local else ""
        self.back = None
        self.lent = False  # whether the run's result is an array over self.back's file
        self.parked = None  # the worker that keeps the run's context for its call's
        # repeats (cpu_alone's park)
        self.finalized = False  # whether the client's values are the finalized result
        if not cluster.exchanging:  # (once a cluster)
            exchange.install(self.client)
            cluster.exchanging = True

    def _workers(self):
        """The addresses of the cluster's workers of the run's kind now."""
        return list(self.cluster.gpu_workers if self.kind == "gpu" else
                    self.cluster.cpu_workers)

    def _back_for(self, state, result=False):
        """The file the workers hand ``state`` back through (:func:`_whole`), the run's
        from its first segment on (None where they cannot: see ``shared_dir``, or where
        a state of at most ``tuning.ANSWER_STATE_BYTES`` comes back in the answer, its
        arrays' bytes after the answer's, :mod:`.callsocket`); ``result``: a segment
        after which the client reads only the values, as the run's result: the flags
        stay on the worker."""
        if self.back is None and self.shared_dir and \
                state.values.nbytes + state.flags.nbytes > tuning.ANSWER_STATE_BYTES:
            self.back = hostshare.back_file(self.shared_dir, len(state.values),
                                            state.values.dtype)
        return dataclasses.replace(self.back, flags=False) if result and self.back \
            else self.back

    def close(self):
        """The run ended: its state file goes back to the client's for later runs (once
        its result, lent the file, is gone: :func:`.hostshare.lend`)."""
        if self.back is not None and not self.lent:
            hostshare.free_back(self.back)
        self.back = None

    def _source(self, address, version, state):
        """What a task on the worker at ``address`` starts from at ``version``: None
        (the state it holds), :class:`Initial` or the client's ``state``."""
        if self.holds.get(address) == version:
            return None
        if version == 0 and self.initial:
            return Initial()
        if self.collected == version:
            return state
        raise WorkerLostError(f"the state of run {self.run_id} at version {version} was "
                              f"lost with its workers (workers that left during the run: "
                              f"{', '.join(self.lost) or 'none known'})")

    def segment(self, run_ref, state, version, first, last, model, frontier, final=False,
                result=False, park=None):
        """Run a spread segment from the state at ``version`` whose frontier is
        ``frontier``, whose owners ask the cost model ``model`` where the pull ends;
        returns (rows, status, frontier after, seconds the workers spent building their
        contexts). The owners that do not hold that version get it from the client
        (:meth:`_source`). One segment at a time on a cluster: two of them sharing
        workers would each wait for the other's parts. On one worker (:meth:`owners`),
        or with ``model`` None, it is :meth:`alone`. ``final``: the run ends when the
        segment reaches ``last`` (or converges), and each owner drops the run's
        contexts with its report; ``result``: the client reads the state after it only
        as the run's result (no checkpoint: the values alone come back, see
        :meth:`_ended`); ``park``: see :meth:`alone`."""
        if model is None or len(self.owners(version)) < 2:
            return self.alone(run_ref, state, version, first, last, frontier, final,
                              result, park)
        start, self.run_ref = time.perf_counter(), run_ref
        task = gpu_spread if self.kind == "gpu" else cpu_spread
        with self.cluster.spreading:
            for attempt in itertools.count():
                addresses = self.owners(version)
                owners = Owners(tuple(addresses), *self._shares(addresses),
                                (self.run_id, f"from-{first}-try{attempt}"),
                                tuning.SHARED_MEMORY_DIR)
                sources = [self._source(a, version, state) for a in owners.addresses]
                needing = [a for a, s in zip(owners.addresses, sources) if s is state]
                sent = self.client.scatter(state, workers=needing, broadcast=True,
                                           hash=False) if needing else None
                reports = self._attempt(
                    [(address, task, (self.run_ref, sent if source is state else
                                      source, version, first, last, model, owners, j,
                                      frontier, self._back_for(state, result), None,
                                      final))
                     for j, (address, source) in enumerate(zip(owners.addresses, sources))],
                    f"hetgraph-{self.kind}-spread-{first}-{{}}-{self.run_id}-try{attempt}",
                    owners.channel)
                if reports:
                    break
                self._lost(attempt, version)
        reporting = [a for a in owners.addresses if a not in self.lost]
        self._note_speeds(owners.addresses, reports[0].speeds)
        self.holds = {a: version + 1 for a, r in zip(reporting, reports) if r.held}
        self.dropped.update(a for a, r in zip(reporting, reports) if r.dropped)
        return self._ended(reports, state, version, start)

    def _shares(self, addresses):
        """(vertex ranges, page ranges) of the owners at ``addresses``, each a (first,
        end) pair: CPU owners by equal work (:func:`owned_ranges`; no pages), GPU owners
        by contiguous ranges of the run's pages, of edges and vertices in the shares
        :func:`gpu_shares` keeps for them (as the GPUs of one process share them:
        :func:`.multigpu.page_ranges`)."""
        if self.kind != "gpu":
            return tuple(owned_ranges(self.in_indptr, len(addresses))), ()
        from ..engines.multigpu import page_ranges, pass_work  # (GPU modules: only here)

        bounds = np.asarray(self.pages, np.int64)
        work = pass_work(np.diff(self.in_indptr[bounds], axis=1)[:, 0],
                         np.diff(bounds, axis=1)[:, 0])
        shares = gpu_shares(self.cluster, tuple(addresses))
        pages = [(r.start, r.stop) for r in page_ranges(work, shares)]
        return tuple((int(bounds[a][0]), int(bounds[b - 1][1])) for a, b in pages), \
            tuple(pages)

    def _note_speeds(self, addresses, speeds):
        """Fold a spread GPU segment's ``speeds`` of its owners at ``addresses`` (edges a
        second; 0: not timed) into the cluster's (half the weight to the newest)."""
        known = self.cluster.gpu_speeds
        for address, speed in zip(addresses, speeds):
            if speed > 0:
                known[address] = speed if address not in known else \
                    0.5 * (known[address] + speed)

    def owners(self, version):
        """The workers a spread segment from ``version`` runs on, in the cluster's
        order: every GPU worker (but one a page), or CPU workers: one for a graph of
        fewer than ``tuning.SPREAD_ARCS`` arcs (its pull costs less than an exchange),
        else ``tuning.OWNERS_PER_HOST`` on each host (0: every worker); those holding
        the state at ``version`` chosen first."""
        from distributed.comm.addressing import get_address_host

        first = sorted(self.addresses, key=lambda a: self.holds.get(a) != version)
        if self.kind == "gpu":
            return [a for a in self.addresses if a in first[:len(self.pages)]]
        if self.in_indptr[-1] < tuning.SPREAD_ARCS:
            return first[:1]
        if not tuning.OWNERS_PER_HOST:
            return list(self.addresses)
        taken, chosen = collections.Counter(), set()
        for address in first:
            host = get_address_host(address)
            if taken[host] < tuning.OWNERS_PER_HOST:
                taken[host] += 1
                chosen.add(address)
        return [a for a in self.addresses if a in chosen]

    def alone(self, run_ref, state, version, first, last, frontier, final=False,
              result=False, park=None):
        """A segment on the run's one worker (:func:`cpu_alone`, :func:`gpu_alone`; one
        that holds the state at ``version`` when one does), which asks no cost model
        (none is sent); returns what :meth:`segment` returns.
        ``final``: the run ends when the segment reaches ``last`` (or converges), and
        the worker drops the run's contexts with its last report; ``result``: see
        :meth:`segment`; ``park``: the token under which a CPU worker keeps them
        instead for the call's repeats, where it can (:func:`cpu_alone`; its address
        then in :attr:`parked`)."""
        start, self.run_ref = time.perf_counter(), run_ref
        with self.cluster.spreading:
            for attempt in itertools.count():
                held = [a for a in self.addresses if self.holds.get(a) == version]
                address = (held or self.addresses)[0]
                reports = self._attempt(
                    [(address, gpu_alone if self.kind == "gpu" else cpu_alone, (
                        self.run_ref, self._source(address, version, state), version,
                        first, last, frontier, self._back_for(state, result),
                        None, final) + ((park,) if park and self.kind == "cpu" else ()))],
                    f"hetgraph-{self.kind}-iterations-from-{first}-{{}}-{self.run_id}-"
                    f"try{attempt}")
                if reports:
                    break
                self._lost(attempt, version)
        self.holds[address] = version + 1
        if reports[0].dropped:
            self.dropped.add(address)
        if reports[0].parked:
            self.parked = address
        return self._ended(reports, state, version, start)

    def ended_on_workers(self):
        """Whether every worker sent a segment of the run dropped the run's contexts
        with its last report (nothing is left for the run's end to drop there)."""
        return self.touched <= self.dropped

    def _ended(self, reports, state, version, start):
        """(rows, status, frontier after, build seconds) of a segment's ``reports``, the
        first of them carrying the client's ``state`` after it when it came back, not
        copied where it can be helped: received in a message, the arrays received; at
        the run's end with nothing but its result to read it (a segment's ``result``),
        through the client's file, its values alone, ``state.values`` then an array
        over the file (:func:`.hostshare.lend`), its flags stale, and the program's
        finalized values where its GPU worker finalized them (:attr:`finalized`; a
        :class:`Finalized` result the client's own array). The calls' round
        trips (and the workers' work around the iterations) are no iteration's: they
        count in :attr:`round_trips`, not in the rows, whose seconds are the
        iterations' as in process."""
        report = reports[0]
        rows = report.rows
        if isinstance(report.out, hostshare.Back):
            # (the client's own Back lent: it goes back to the free files as it is)
            lent = None if report.out.flags or self.lent else hostshare.lend(self.back)
            if lent is None:
                hostshare.take(report.out, state.values, state.flags)
            else:
                state.values, self.lent = lent, True
            self.collected, self.finalized = version + 1, report.out.finalized
        elif isinstance(report.out, Finalized):
            state.values, self.collected, self.finalized = report.out.values, version + 1, \
                True
        elif report.out is not None:
            _, _, (values,), (flags,) = report.out
            if values.flags.writeable and flags.flags.writeable and \
                    values.dtype == state.values.dtype:  # (received: the client's own)
                state.values, state.flags = values, flags
            else:
                state.values[:], state.flags[:] = values, flags
            self.collected = version + 1
        built = sum(r.build_seconds for r in reports)
        extra = time.perf_counter() - start - built - sum(row[SECONDS] for row in rows)
        self.round_trips += max(extra, 0.0)
        return rows, report.status, report.frontier, built

    def _attempt(self, work, key, channel=None):
        """The reports of one attempt's ``work`` ((address, task, args), one task per
        worker): called on the workers directly (:mod:`.calls`) when each was seen to
        hold the Dask data among its arguments, else (or when one let go of it since) as
        Dask tasks named ``key`` with the task's index, which fetch it; None when a
        worker left (the attempt runs again). ``channel``: the exchange channel of a
        spread segment, whose owners stop waiting for a task that did not run."""
        addresses = [w[0] for w in work]
        self.touched.update(addresses)
        keyed = [(a, task, calls.keyed_futures(args)) for a, task, args in work]
        needed = {(a, f.key) for a, _, (_, futures) in keyed for f in futures}
        self.cluster.hold(set())  # (forgets the released)
        if needed <= self.cluster.holding:
            async def stop_peers():
                if channel is not None:
                    await exchange.tell_failed_from(self.client.rpc, addresses, channel,
                                                    "client")
            outcomes = calls.call_all(self.client, [(a, task, args) for a, task, (args, _)
                                                    in keyed], stop_peers, keyed_args=True)
            # (again: the client's loop took the releases queued before the call by now)
            self.cluster.hold(set())
            if not any(isinstance(o, calls.Missing) for o in outcomes):
                return self._outcome(outcomes, addresses)
            self.cluster.holding -= needed
            channel = None
        futures = [self.client.submit(task, *args, key=key.format(j), workers=[address],
                                      allow_other_workers=False,
                                      resources={self.kind.upper(): 1},
                                      pure=False)
                   for j, (address, task, args) in enumerate(work)]
        reports = self._waited(futures, addresses)
        if reports and len(reports) == len(work):
            self.cluster.hold(needed)
        return reports

    def _outcome(self, outcomes, addresses):
        """:meth:`_wait`'s answer for the ``outcomes`` of direct calls to the workers at
        ``addresses`` (each a Report or the exception its call ended with)."""
        lost = [a for a, o in zip(addresses, outcomes) if isinstance(o, calls.Lost)]
        if lost:
            self.cluster.left(lost)
        for outcome in outcomes:
            if isinstance(outcome, BaseException) and not isinstance(outcome, calls.Lost):
                self._raise_unless_lost(outcome)
        self.lost += [a for a in lost if a not in self.lost]
        reports = [o for o in outcomes if not isinstance(o, BaseException)]
        if len(reports) == len(outcomes):
            return reports
        if reports and len(reports) + len(lost) == len(outcomes) and \
                all(r.held for r in reports):  # (the survivors hold the whole state)
            self.addresses = [a for a in self.addresses if a not in self.lost]
            return reports
        return None

    def _waited(self, futures, addresses):
        """:meth:`_wait`, the futures cancelled unless they all gave their reports (else
        Dask would compute again a result lost with its worker)."""
        reports = None
        try:
            reports = self._wait(futures, addresses)
        finally:
            if not reports or len(reports) < len(futures):
                self.client.cancel(futures)
        return reports

    def _wait(self, futures, addresses):
        """The reports of a segment's ``futures`` (one per worker of ``addresses``); None
        when a worker left (the segment runs again); the error of a task that failed
        otherwise. The reports of the survivors suffice when every worker that finished
        did so and the others left, if the survivors hold the whole state."""
        while True:
            _wait_a_while([f for f in futures if not f.done()], return_when="FIRST_COMPLETED")
            if any(f.done() and f.status != "finished" for f in futures):
                # (the others end too: told by the one that failed, or its loss)
                _wait_a_while(futures)
                for future in futures:
                    if future.status == "error":
                        self._reraise_unless_lost(future)
                return None
            if all(f.status == "finished" for f in futures):
                return self.client.gather(futures)
            self.lost += self.cluster.lost_workers()
            left = [f for f, a in zip(futures, addresses) if a in self.lost]
            if left and len(left) < len(futures) and all(f.done() or f in left
                                                          for f in futures):
                reports = self.client.gather([f for f in futures if f not in left])
                if not all(r.held for r in reports):  # (the state left with the first)
                    return None
                self.addresses = [a for a in self.addresses if a not in self.lost]
                return reports
            if left and len(left) == len(futures):
                return None

    def _reraise_unless_lost(self, future):
        """Note the peer that a failed task names as lost; raise any other error."""
        from distributed import CancelledError
        from distributed.scheduler import KilledWorker

        if future.status in ("cancelled", "lost"):
            return
        error = future.exception()
        if not isinstance(error, (CancelledError, KilledWorker)):
            self._raise_unless_lost(error, future)

    def _raise_unless_lost(self, error, future=None):
        """Note the peer that a task's ``error`` names as lost; raise any other error
        but a peer's failure (with its traceback: ``future``'s, when a Dask task's)."""
        if isinstance(error, exchange.PeerLostError):
            self.lost += [a for a in error.peer.split(", ") if a not in self.lost]
        elif not isinstance(error, exchange.PeerFailedError):
            if future is not None:
                future.result()
            raise error

    def _lost(self, attempt, version):
        """A worker left during a segment's ``attempt`` from ``version``: go on without
        it (on a worker that joined since, when none is left and the client holds the
        state), or raise WorkerLostError after ``tuning.LOST_TASK_RETRIES`` attempts or
        when no worker is left."""
        self.lost += [a for a in self.cluster.lost_workers() if a not in self.lost]
        for address in self.lost:
            self.holds.pop(address, None)
        survivors = [a for a in self.addresses if a not in self.lost]
        lost = ", ".join(self.lost) or "none known"
        if attempt < tuning.LOST_TASK_RETRIES and not survivors and (
                self.collected == version or version == 0 and self.initial):
            self._await_worker()
            self.run_ref = self.share()  # (waits for a worker to take the graph again)
            self.lost += [a for a in self.cluster.lost_workers() if a not in self.lost]
            survivors = [a for a in self._workers() if a not in self.lost]
        if attempt >= tuning.LOST_TASK_RETRIES or not survivors:
            raise WorkerLostError(f"a spread segment of run {self.run_id} was lost "
                                  f"{attempt + 1} times with its workers (workers that "
                                  f"left during the run: {lost}); check the workers' logs "
                                  f"(memory, crashes) and run again")
        log.warning("a worker left during a segment (workers that left: %s); its work "
                    "goes to %d other(s)", lost, len(survivors))
        self.addresses = survivors

    def _await_worker(self):
        """Wait until the cluster has a CPU worker that did not leave during the run, for
        ``tuning.WORKER_WAIT_SECONDS`` at most: a direct call learns of a death before
        the scheduler does, and a nanny starts another worker after it."""
        deadline = time.monotonic() + tuning.WORKER_WAIT_SECONDS
        while time.monotonic() < deadline:
            self.lost += [a for a in self.cluster.lost_workers() if a not in self.lost]
            if any(a not in self.lost for a in self._workers()):
                return
            time.sleep(tuning.PEER_CHECK_SECONDS / 10)

    def collect(self, state, version):
        """Bring the client's ``state`` to ``version`` when a worker holds that version
        and the client does not: from the first one that answers."""
        if self.collected == version:
            return
        for i, address in enumerate([a for a in self.addresses
                                     if self.holds.get(a) == version]):
            try:  # (a task's result comes straight from its worker, client.run's through
                # the scheduler)
                got = self.client.submit(
                    held_state, self.run_id, version, workers=[address],
                    allow_other_workers=False, pure=False,
                    key=f"hetgraph-state-{version}-{i}-{self.run_id}").result(
                    timeout=tuning.WORKER_WAIT_SECONDS)
            except Exception as exc:  # a worker gone since: ask the next
                log.debug("worker %s did not give the state back: %s", address, exc)
                continue
            if got is not None:
                state.values[:], state.flags[:] = got
                self.collected = version
                return
        left = dict.fromkeys(self.lost + self.cluster.lost_workers())  # (once each)
        raise WorkerLostError(f"the state of run {self.run_id} was lost with its workers "
                              f"(workers that left during the run: {', '.join(left)})")
