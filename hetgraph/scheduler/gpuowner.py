"""The GPU side of a run on GPU worker processes that hold its vertex state between
segments (issue 51; :mod:`.spread` runs the segments): this worker's GPU context of
the run, its engine over every page (the one the graph keeps for later runs, as the
in-process GPU path keeps it) or over an owner's range of the pages, the state copied
between that engine and host arrays, and a spread iteration's exchange of an owner's
range with its peers (:func:`exchange`, the one function that GPU-to-GPU copies,
CUDA IPC or NCCL, would replace: today each owner's range goes device to host into its
shared-memory file, :mod:`.hostshare`, and its peers copy it host to device).

A GPU worker process sees its own GPU first (:mod:`hetgraph.cluster`): device 0. CuPy is
imported only by the functions that build an engine or copy arrays of one."""

from __future__ import annotations

import time

import numpy as np

from . import exchange as comms, hostshare, tasks

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


def host_copy(array):
    """A host NumPy copy of an engine's ``array``."""
    host = np.empty(array.shape, array.dtype)
    to_host(array, host)
    return host


def exchange(worker, owners, me, engine, tag, info, host_shared):
    """Send this owner's range (``owners.ranges[me]``) of ``engine``'s current values and
    flags to its peers, and copy theirs into the engine; ``info``: this owner's numbers
    for the peers. Through this owner's shared-memory file where ``host_shared`` (every
    owner on this host, :func:`.hostshare.usable`), else in the messages. Returns
    {owner: info}."""
    from distributed.protocol import to_serialize

    peers = owners.peers(me)
    if not peers:  # (the survivor of a segment run again)
        return {me: info}
    (a, b), channel = owners.ranges[me], owners.channel
    values, flags = engine.values, engine.flags
    if host_shared:
        word = None
        if b > a:
            into, into_flags, word = hostshare.slot_to_write(
                owners.shared_dir, channel, owners.addresses[me], a, b, values.dtype,
                list(peers))
            to_host(values[a:b], into)
            to_host(flags[a:b], into_flags)
        payload = {"shared": word}
    else:
        payload = {"values": to_serialize(host_copy(values[a:b])),
                   "flags": to_serialize(host_copy(flags[a:b]))}
    sending = comms.send(worker, list(peers.values()), channel, tag, me,
                         {**payload, "info": list(info)})
    infos = {me: info}
    for j, part in comms.receive(worker, channel, tag, peers).items():
        x, y = owners.ranges[j]
        if not host_shared:
            got, got_flags = part["values"], part["flags"]
        elif part["shared"] is not None:
            got, got_flags = hostshare.slot_to_read(channel, part["shared"], y - x,
                                                    values.dtype, me)
        else:
            got = None
        if got is not None:
            to_device(got, values[x:y])
            to_device(got_flags, flags[x:y])
        infos[j] = tuple(part["info"])
    sending.result()  # (our slot stays as it is until every peer took it)
    return infos
