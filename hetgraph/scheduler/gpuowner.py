"""The GPU side of a run on GPU worker processes that hold its vertex state between
segments (:mod:`.spread` runs the segments): this worker's GPU context of
the run, its engine over every page (the one the graph keeps for later runs, as the
in-process GPU path keeps it) or over an owner's range of the pages, bound to the
device copy this worker keeps of the run's aux, the state copied between that engine
and host arrays (handed back to the client through this worker's map of the client's
file, page-locked once: :func:`hand_back`; the run's result finalized on the device
first: :func:`finalized`), and a spread iteration's exchange of an
owner's range with its peers (:func:`exchange`: GPU to GPU through CUDA IPC between the
processes of one host, :mod:`.gpupeers`; else through host memory, :mod:`.hostshare`, or
the messages).

A GPU worker process sees its own GPU first (:mod:`hetgraph.cluster`): device 0. CuPy is
imported only by the functions that build an engine or copy arrays of one."""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
import time

import numpy as np

from .. import tuning
from ..kernels.arrays import module_of
from . import exchange as comms, gpupeers, hostshare, parts, tasks

log = logging.getLogger("hetgraph.scheduler")

DEVICE = 0  # the GPU of a GPU worker process, as it sees it


def on_device():
    """A context manager that makes this worker's GPU current in this thread."""
    from ..kernels.gpu.device import use_device

    return use_device(DEVICE)


def make_engine(run, pages):
    """A GPU engine of ``run`` on this worker's GPU, its state zero until loaded: over
    every page (``pages`` None, :func:`tasks._gpu_engine`), else over ``pages``, a
    range of the run's partition's pages, which only it lays out and computes."""
    if pages is None:
        return tasks._gpu_engine(run, DEVICE)
    import cupy as cp

    from ..engines.gpu import GpuEngine

    n = run.graph.num_vertices
    return GpuEngine(run.spec, run.graph, cp.zeros(n, run.spec.dtype), cp.zeros(n, cp.uint8),
                     run.aux, sync=run.sync, partition=run.partition, pages=pages,
                     **run.gpu)


def context(run, pages=None):
    """This worker's GPU context of ``run`` (the tasks' own: the run's end drops it),
    its engine over ``pages`` (None: every page; see :func:`make_engine`): the kept
    one of the graph for these options, else built. An engine over other pages (the
    owners changed: a peer left) goes back first, the state it held kept as the
    context's backup; the context then holds no state (``version`` None) but that
    backup."""
    key, owned = (run.run_id, "gpu", DEVICE), None if pages is None else (pages.start,
                                                                          pages.stop)
    with tasks._LOCK:
        ctx = tasks._CONTEXTS.get(key)
        if ctx is not None and getattr(ctx, "owned", ()) == owned:
            return ctx
        # (the engine binds the device copy this worker keeps of the run's aux, not a
        # new copy of the host array each call)
        run = dataclasses.replace(run, aux=kept_on_device(run.aux))
        # (out of the table until its engine is built: the run's end closes engines)
        ctx = tasks._CONTEXTS.pop(key, None) or tasks._Context()
        start = time.perf_counter()
        with on_device():
            if getattr(ctx, "version", None) is not None:  # (the state it holds, kept
                # for the new engine: see spread._own_gpu_state)
                ctx.backup = (ctx.version, ctx.engine.values.copy(),
                              ctx.engine.flags.copy())
            _let_go(ctx)
            kept = tasks._gpu_engine_key(run, DEVICE)
            ctx.engine = make_engine(run, pages) if kept is None else \
                tasks._kept_engine(ctx, run, None, (*kept, owned),
                                   lambda: make_engine(run, pages))
        ctx.device, ctx.owned, ctx.version = DEVICE, owned, None
        ctx.build_seconds += time.perf_counter() - start
        tasks._CONTEXTS[key] = ctx
    return ctx


def _let_go(ctx):
    """Give ``ctx``'s engine back to its graph's idle engines (closed where it cannot
    serve another run), as the run's end would."""
    engine, ctx.engine = getattr(ctx, "engine", None), None
    if engine is None:
        return
    if ctx.idle is None or not engine.reusable:
        engine.close()
    else:
        engine.unbind()
        ctx.idle.setdefault(ctx.idle_key, engine)


def kept_on_device(array):
    """A run's aux ``array`` on this worker's GPU where this worker keeps it across runs
    (one of ``tuning.KEPT_ARRAY_BYTES`` or more, held by content:
    :meth:`hetgraph.cluster.Cluster.kept_array`): a copy made once and kept while
    ``array`` lives; a smaller one as it is (sent with each call, copied by the
    engine)."""
    if not isinstance(array, np.ndarray) or array.nbytes < tuning.KEPT_ARRAY_BYTES:
        return array
    from ..kernels.gpu.device import device_copy

    with on_device():
        return device_copy(array)


def of_run(run_id):
    """This worker's GPU context of run ``run_id`` (None: none)."""
    return tasks._CONTEXTS.get((run_id, "gpu", DEVICE))


def to_host(device, host):
    """Copy ``device`` (an engine's array, or a slice of one) into the host array
    ``host`` of its size (waits)."""
    if isinstance(device, np.ndarray):
        host[:] = device
    else:
        device.get(out=host)


def to_device(host, device):
    """Copy the host array ``host`` into ``device`` (an engine's array, or a slice of
    one) of its size."""
    if isinstance(device, np.ndarray):
        device[:] = host
    else:
        device.set(host)


_LOCKED: collections.OrderedDict = collections.OrderedDict()  # back file path ->
# (address of this process's map of it, that address once page-locked (None: it could
# not be), an array over the map that keeps it mapped), the newest last
_LOCKED_LOCK = threading.Lock()


def pin_host(address, nbytes):
    """Page-lock ``nbytes`` of host memory at ``address`` for this worker's GPU
    (cudaHostRegister): copies between it and the device then run at the bus's
    speed."""
    import cupy

    with on_device():
        cupy.cuda.runtime.hostRegister(address, nbytes, 0)


def unpin_host(address):
    """Undo :func:`pin_host` at ``address``."""
    import cupy

    with on_device():
        cupy.cuda.runtime.hostUnregister(address)


def hand_back(back, values, flags):
    """Copy an engine's ``values`` and ``flags`` (device arrays of the whole state) into
    the client's file ``back`` (:class:`.hostshare.Back`) through this worker's map of
    it, page-locked once for every later call that hands a state back through it: a
    copy from the device into pageable memory runs at a fraction of the bus's speed,
    and locking the pages each call would cost more than the copy. The flags only
    where the client reads them (``back.flags``)."""
    into, into_flags = hostshare.back_arrays(back, len(values), values.dtype)
    _locked(back, into)
    to_host(values, into)
    if back.flags:
        to_host(flags, into_flags)


def finalizes(spec):
    """Whether a GPU worker finalizes a run's result on its device before it hands it
    back (the client then reads it as it is, as an in-process GPU run finalizes it
    there): for a program whose hooks take an array module (``spec.any_device``) and
    whose ``init`` sets nothing that ``finalize`` reads (``spec.init_apart``: the
    worker's copy of the program holds all it reads)."""
    return spec.any_device and spec.init_apart


def finalized(run, values):
    """The program's ``finalize`` of ``values`` (an engine's array: changed in place
    where the program's finalize does so) on this worker's GPU."""
    with on_device():
        return run.spec.program.finalize(run.graph, values, xp=module_of(values))


def _locked(back, into):
    """Page-lock this process's map of ``back`` (whose values ``into`` starts), unless
    done for this map; the oldest beyond :func:`.hostshare.files_mapped` let go."""
    address = into.ctypes.data
    with _LOCKED_LOCK:
        kept = _LOCKED.pop(back.path, None)
        if kept is not None and kept[0] == address:
            _LOCKED[back.path] = kept
            return
        if kept is not None:  # (another map of the file: the last one went)
            _unpinned(kept)
        try:
            pin_host(address, back.nbytes)
            pinned = address
        except Exception as exc:  # (a host that limits locked memory): pageable copies
            log.debug("could not page-lock the state file %s: %s", back.path, exc)
            pinned = None
        _LOCKED[back.path] = (address, pinned, into)
        while len(_LOCKED) > hostshare.files_mapped():
            _unpinned(_LOCKED.popitem(last=False)[1])


def _unpinned(kept):
    """Undo :func:`_locked`'s lock of ``kept`` (its array then lets the map go)."""
    if kept[1] is not None:
        try:
            unpin_host(kept[1])
        except Exception as exc:  # (a device gone: nothing left to unlock)
            log.debug("could not unlock a state file's pages: %s", exc)


def host_copy(array):
    """A host NumPy copy of an engine's ``array``."""
    host = np.empty(array.shape, array.dtype)
    to_host(array, host)
    return host


def exchange(worker, owners, me, engine, tag, info, host_shared, sending, whole=True):
    """Send this owner's range (``owners.ranges[me]``) of ``engine``'s current values and
    flags to its peers, and copy theirs into the engine; ``info``: this owner's numbers
    for the peers. Where every owner is on this host (``host_shared``,
    :func:`.hostshare.usable`): GPU to GPU (:mod:`.gpupeers`, unless
    ``tuning.GPU_PEER_COPIES`` is off or this GPU cannot export memory), else through
    this owner's shared-memory file; between hosts in the messages, each range whole
    where ``whole`` (a segment's first exchange), else only its changes where they are
    few (:mod:`.parts`). ``sending``: the owner's :class:`.exchange.Sending`, which this
    message joins. Returns {owner: info}."""
    peers = owners.peers(me)
    if not peers:  # (the survivor of a segment run again)
        return {me: info}
    (a, b), channel = owners.ranges[me], owners.channel
    values, flags = engine.values, engine.flags
    before = _before(engine)
    if host_shared:
        payload = _payload(owners, me, values[a:b], flags[a:b])
    else:  # (whole, or its changes where few: see .parts)
        new, sparse = host_copy(values[a:b]), before is not None and not whole
        payload = parts.part_of(new, host_copy(before[a:b]) if sparse else new,
                                host_copy(flags[a:b]), whole=not sparse)
    sending.start(comms.send(worker, list(peers.values()), channel, tag, me,
                             {**payload, "info": list(info)},
                             owners.shared_dir if host_shared else ""))
    infos = {me: info}
    for j, part in comms.receive(worker, channel, tag, peers).items():
        x, y = owners.ranges[j]
        if host_shared:
            _take(part, values[x:y], flags[x:y], channel, me)
        else:  # (whole or its changes, into both arrays: see .parts)
            parts.take_part(_on_device_of(part, values), values[x:y],
                            None if before is None else before[x:y], flags[x:y])
        infos[j] = tuple(part["info"])
    return infos


def _payload(owners, me, values, flags):
    """What this owner's message to peers on its host carries of its range ``values``,
    ``flags`` (see :func:`exchange`)."""
    on_gpu = not isinstance(values, np.ndarray)  # (a stand-in engine's are host arrays)
    if on_gpu and len(values) and tuning.GPU_PEER_COPIES and _peer_copies[0]:
        try:
            return {"peer": list(gpupeers.stage(values, flags))}
        except Exception as exc:  # (a GPU that cannot export memory: host copies)
            _peer_copies[0] = False
            log.warning("GPU-to-GPU copies of the run's state are off on this worker "
                        "(%s): its ranges go through host memory", exc)
    word = None
    if len(values):
        (a, b), peers = owners.ranges[me], owners.peers(me)
        into, into_flags, word = hostshare.slot_to_write(
            owners.shared_dir, owners.channel, owners.addresses[me], a, b, values.dtype,
            list(peers))
        to_host(values, into)
        to_host(flags, into_flags)
    return {"shared": word}


_peer_copies = [True]  # whether this worker's GPU exported its staged ranges so far


def _before(engine):
    """The array of ``engine``'s values of the iteration before the last (sync mode), or
    None (async: one array)."""
    before = engine.new_values
    return None if before is engine.values else before


def _on_device_of(part, like):
    """A message's ``part`` (:mod:`.parts` fields, host arrays) as arrays where ``like``
    is (its GPU, or the host)."""
    if isinstance(like, np.ndarray):
        return part
    import cupy

    return {k: cupy.asarray(v) for k, v in part.items() if k != "info"}


def _take(part, values, flags, channel, me):
    """Copy a peer's ``part`` of an exchange on this host (see :func:`_payload`) into
    ``values``, ``flags`` (this engine's slices of the peer's range)."""
    if "peer" in part:
        gpupeers.fetch([bytes(h) for h in part["peer"]], values, flags)
        return
    if part["shared"] is None:  # (an empty range)
        return
    got, got_flags = hostshare.slot_to_read(channel, part["shared"], len(values),
                                            values.dtype, me)
    to_device(got, values)
    to_device(got_flags, flags)
