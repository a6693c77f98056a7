"""Where an out-of-core run's time goes, iteration by iteration (bench/outofcore.py).

:class:`Probe` wraps, for the runs inside its ``with`` block (an in-process cluster:
the engines run in this process), the calls that read, copy and compute a store's
pages, and records each with its time:

- a block read from the disk by the page cache's I/O threads (``PageCache._read``):
  its bytes and seconds;
- a page taken from the cache by an engine (``PageCache.get``): the device that took
  it (the owner: a CPU or a GPU store engine) and how long it waited for it;
- a GPU pass's pages (``StoreGpuEngine.run_pages``: those already on the device too);
- a copy to the GPU (``StoreGpuEngine._copy_in``) and a shard kernel launch
  (``StoreGpuEngine._launch``), timed by CUDA events on their stream;
- a CPU kernel step over a page (``StoreEngine._step``).

An iteration ends when its history row is made (``tasks.device_row`` in a segment,
``dispatcher.history_row`` in a hybrid iteration); what was recorded since the row
before is its share (the first row's share includes the calibration, and a read ahead
for the next iteration counts in the one it ran in). :meth:`Probe.report` turns a run's
records into one dict per iteration.

Nothing here changes what the engines do; wrapping only adds the records (and, on the
GPU, two CUDA events a copy or a launch).
"""

import bisect
import threading
import time

from gputrace import _union as _busy  # (seconds covered by the union of intervals)

from hetgraph.engines import store_gpu
from hetgraph.engines.store import StoreEngine
from hetgraph.io.pagecache import PageCache
from hetgraph.scheduler import dispatcher, tasks


def _device_of(owner):
    if isinstance(owner, store_gpu.StoreGpuEngine):
        return "gpu"
    return "cpu" if isinstance(owner, StoreEngine) else "other"


def _ranges(pages):
    """Sorted distinct ``pages`` as [[first, last], ...] runs (Python ints: JSON)."""
    runs = []
    for p in sorted({int(p) for p in pages}):
        if runs and runs[-1][1] == p - 1:
            runs[-1][1] = p
        else:
            runs.append([p, p])
    return runs


class Probe:
    """Records of the out-of-core calls made inside ``with probe:`` (see the module
    docstring); one probe at a time."""

    def __init__(self):
        self.records = []  # (kind, end time, data...)
        self._saved = []
        self._lock = threading.Lock()

    def _add(self, *record):
        with self._lock:
            self.records.append(record)

    def _wrap(self, owner, name, make):
        original = getattr(owner, name)
        # (a class's inherited method: its own attribute is removed again on exit)
        own = vars(owner).get(name, _INHERITED)
        self._saved.append((owner, name, own))
        setattr(owner, name, make(original))

    def __enter__(self):
        self.records.clear()
        probe = self

        def read(original):
            def _read(self, key):
                start = time.perf_counter()
                array = original(self, key)
                probe._add("read", time.perf_counter(), start, array.nbytes)
                return array
            return _read

        def get(original):
            def get(self, page, blocks, owner=None):
                start = time.perf_counter()
                arrays = original(self, page, blocks, owner)
                probe._add("get", time.perf_counter(), start, _device_of(owner), page)
                return arrays
            return get

        def run_pages(original):
            def run_pages(self, pages=None, stream=None):
                every = self.plan.pages if pages is None else pages
                probe._add("gpu_pages", time.perf_counter(), [int(p) for p in every])
                return original(self, pages, stream)
            return run_pages

        def on_stream(kind, stream_of):
            def wrap(original):
                def call(self, *args, **kwargs):
                    stream = stream_of(self, args, kwargs)
                    if stream is None:  # (a call this probe does not know: untimed)
                        return original(self, *args, **kwargs)
                    before = stream.record()
                    original(self, *args, **kwargs)
                    probe._add(kind, time.perf_counter(), before, stream.record())
                return call
            return wrap

        def step(original):
            def _step(self, *args):
                start = time.perf_counter()
                counted = original(self, *args)
                probe._add("cpu_kernel", time.perf_counter(), start)
                return counted
            return _step

        def row(original):
            def make_row(*args, **kwargs):
                probe._add("row", time.perf_counter())
                return original(*args, **kwargs)
            return make_row

        self._wrap(PageCache, "_read", read)
        self._wrap(PageCache, "get", get)
        self._wrap(store_gpu.StoreGpuEngine, "run_pages", run_pages)
        self._wrap(store_gpu.StoreGpuEngine, "_copy_in", on_stream(
            "h2d", lambda engine, args, kwargs: engine.streams[args[0]]))
        self._wrap(store_gpu.StoreGpuEngine, "_launch", on_stream(
            "gpu_kernel", lambda engine, args, kwargs: kwargs.get(
                "stream", args[4] if len(args) > 4 else None)))
        self._wrap(StoreEngine, "_step", step)
        self._wrap(tasks, "device_row", row)
        self._wrap(dispatcher, "history_row", row)
        return self

    def __exit__(self, *exc):
        while self._saved:
            owner, name, own = self._saved.pop()
            if own is _INHERITED:
                delattr(owner, name)
            else:
                setattr(owner, name, own)

    def report(self, rows):
        """One dict per iteration of a run of ``rows`` history rows, from its records:
        disk reads (bytes, seconds of the I/O threads, seconds the disk was busy), each
        device's waits for pages, its pages (runs of page numbers) and kernel seconds,
        and the GPU's copies in (seconds, on the copy streams together). None when the
        records hold another count of rows (a run that made rows elsewhere)."""
        marks = [r[1] for r in self.records if r[0] == "row"]
        if len(marks) != rows:
            return None
        out = [{"read_bytes": 0, "read_seconds": 0.0, "reads": [], "h2d_seconds": 0.0,
                "copies": 0, "gpu_kernel_seconds": 0.0, "cpu_kernel_seconds": 0.0,
                "wait_seconds": {}, "pages": {}} for _ in marks]
        for kind, end, *data in self.records:
            it = out[min(bisect.bisect_left(marks, end), len(out) - 1)]
            if kind == "read":
                it["read_bytes"] += data[1]
                it["read_seconds"] += end - data[0]
                it["reads"].append((data[0], end))
            elif kind == "get":
                start, device, page = data
                it["wait_seconds"][device] = it["wait_seconds"].get(device, 0.0) + end - start
                it["pages"].setdefault(device, []).append(page)
            elif kind == "gpu_pages":
                it["pages"].setdefault("gpu", []).extend(data[0])
            elif kind in ("h2d", "gpu_kernel"):
                seconds = _elapsed(*data)
                if kind == "h2d":
                    it["h2d_seconds"] += seconds
                    it["copies"] += 1
                else:
                    it["gpu_kernel_seconds"] += seconds
            elif kind == "cpu_kernel":
                it["cpu_kernel_seconds"] += end - data[0]
        for it in out:
            it["disk_busy_seconds"] = _busy(it.pop("reads"))
            it["pages"] = {d: {"count": len(set(p)), "ranges": _ranges(p)}
                           for d, p in it["pages"].items()}
            for key, value in list(it.items()):
                if isinstance(value, float):
                    it[key] = round(value, 5)
            it["wait_seconds"] = {d: round(s, 5) for d, s in it["wait_seconds"].items()}
        return out


_INHERITED = object()


def _elapsed(start, end):
    """Seconds between two CUDA events (both done: the run has ended)."""
    import cupy

    return cupy.cuda.get_elapsed_time(start, end) / 1e3
