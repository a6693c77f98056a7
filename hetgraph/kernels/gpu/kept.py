"""The page layout kept on each device for later runs.

Laying a graph's pages out on a device (the edges sorted inside each shard, copied in,
the streamed pages' pinned host copies) can cost more than a short run: the last layout
built on each device is kept, and a later run of the same graph with the same layout
options finds it in place (:func:`device_pages`; :func:`release` frees it).
"""

from __future__ import annotations

import contextlib
import threading
import weakref
import zlib

import numpy as np

_KEPT: dict = {}  # device -> (key, weighted, DevicePages): the last layout built there
_KEPT_LOCK = threading.Lock()
_DEVICE_LOCKS: dict = {}  # device -> the lock of its builds
_RELEASE_HOOKS: list = []  # called with each device whose layout is dropped


_PARTITION_KEYS = weakref.WeakKeyDictionary()  # partition -> its partition_key


def partition_key(partition):
    """What tells a partition's pages apart from another's, for :func:`device_pages`
    (a partition sent to a worker process is a new object every run), computed once
    per partition object (a graph keeps its partitions: an in-process run's warm calls
    find theirs)."""
    if partition is None:
        return None
    key = _PARTITION_KEYS.get(partition)
    if key is None:
        key = _PARTITION_KEYS[partition] = (partition.num_pages, *(
            zlib.crc32(np.ascontiguousarray(a)) for a in (
                partition.shard_start, partition.page_shard, partition.replication)))
    return key


def device_pages(key, weighted, build):
    """The DevicePages kept on the current device under ``key`` (a tuple naming the
    graph's ``token``, the partition and every layout option) with edge weights when
    ``weighted`` (a run without weights also takes pages with them when every page is
    resident: it does not read them), else ``build()``'s, kept instead of the
    device's previous layout, which is dropped before the build (its memory returned
    to the device)."""
    with _device_lock() as device:
        kept = _KEPT.get(device)
        if kept is not None and kept[0] == key and (kept[1] == weighted or (
                kept[1] and not kept[2].plan.streams)):
            return kept[2]
        release(device)
        pages = build()
        _KEPT[device] = (key, weighted, pages)
        return pages


def first_pages(key, weighted, build):
    """Keep ``build()``'s DevicePages on the current device under ``key`` (see
    :func:`device_pages`) when no layout is kept there yet; returns whether it did. It
    drops nothing, so it never waits for what a dropped layout's holders hold (a run's
    engine making its own layout meanwhile waits for this one and takes it if it fits)."""
    with _device_lock() as device:
        if device in _KEPT:
            return False
        _KEPT[device] = (key, weighted, build())
        return True


@contextlib.contextmanager
def _device_lock():
    """Hold the current device's build lock; yields the device's number."""
    import cupy as cp

    device = cp.cuda.runtime.getDevice()
    with _KEPT_LOCK:
        lock = _DEVICE_LOCKS.setdefault(device, threading.Lock())
    with lock:
        yield device


def keeps_pages_of(graph, device):
    """Whether ``device`` keeps a layout of ``graph``'s pages (see :func:`device_pages`;
    one made for other options may still be laid out again)."""
    kept = _KEPT.get(device)
    return kept is not None and kept[0][0] == graph.token


def is_kept(pages):
    """Whether the DevicePages ``pages`` are the layout kept on their device."""
    return any(entry[2] is pages for entry in list(_KEPT.values()))


def on_release(hook):
    """Call ``hook(device)`` whenever the layout kept on a device is dropped, before its
    memory goes back to the device: what else holds the layout (an idle engine) lets
    go of it there."""
    _RELEASE_HOOKS.append(hook)


def kept_bytes(device):
    """Device bytes of the pages kept on ``device`` (0: none)."""
    kept = _KEPT.get(device)
    return 0 if kept is None else kept[2].nbytes


def release(device=None):
    """Drop the layout kept on ``device`` (default: on every device) and return the
    device memory that was cached for it to the device."""
    with _KEPT_LOCK:
        devices = [d for d in list(_KEPT) if device is None or d == device]
        for d in devices:
            del _KEPT[d]
    for d in devices:
        for hook in _RELEASE_HOOKS:
            hook(d)
    if devices:
        import cupy as cp

        for d in devices:
            with cp.cuda.Device(d):
                cp.get_default_memory_pool().free_all_blocks()
        cp.get_default_pinned_memory_pool().free_all_blocks()
