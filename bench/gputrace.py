"""A CUPTI trace of a call on this process's GPUs (PyTorch's profiler, where installed),
summed per device and stream: where a multi-GPU iteration's time goes (its kernels, the
peer copies, and how busy each GPU is). Used by ``bench/multigpu.py --trace``."""

import collections
import json
import os
import tempfile

from hetgraph.kernels.gpu.spans import union_seconds

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def trace_events(call):
    """The GPU events of ``call()`` (chrome-trace dicts: ``ts`` and ``dur`` in
    microseconds, ``args`` naming the device and stream; a peer copy names no device);
    None where PyTorch is not installed."""
    try:
        from torch.profiler import ProfilerActivity, profile
    except ImportError:
        return None
    with tempfile.TemporaryDirectory() as directory:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as profiler:
            call()
        path = os.path.join(directory, "trace.json")
        profiler.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    return [e for e in events if e.get("cat") in GPU_CATEGORIES]


def summarize(events, iterations, rows=12):
    """Of GPU ``events`` over ``iterations`` iterations: the ``rows`` largest (device,
    stream, category, name) totals in microseconds an iteration, and each device's
    kernel busy time an iteration (the union of its kernels' intervals) beside the
    trace's span."""
    totals = collections.defaultdict(lambda: [0, 0.0])
    busy = collections.defaultdict(list)
    for e in events:
        device = e["args"].get("device")
        key = (device, e["args"].get("stream"), e["cat"], e["name"][:60])
        totals[key][0] += 1
        totals[key][1] += e["dur"]
        if e["cat"] == "kernel":
            busy[device].append((e["ts"], e["ts"] + e["dur"]))
    span = max(e["ts"] + e["dur"] for e in events) - min(e["ts"] for e in events) \
        if events else 0.0
    largest = sorted(totals.items(), key=lambda item: -item[1][1])[:rows]
    return {"span_us": round(span, 1), "iterations": iterations,
            "per_iteration_us": [dict(device=d, stream=s, category=c, name=n, count=k,
                                      us=round(t / iterations, 1))
                                 for (d, s, c, n), (k, t) in largest],
            "kernel_busy_us": {str(d): round(union_seconds(v) / iterations, 1)
                               for d, v in sorted(busy.items(), key=lambda kv: str(kv[0]))}}
