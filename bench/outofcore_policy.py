"""The page cache's policy on a simulated disk: how close an out-of-core pass comes to
its read floor when neither the machine's load nor its disk blurs it.

Usage: PYTHONPATH=. python bench/outofcore_policy.py [--store DIR] [--scale 20]
       [--speed-mb 200] [--out bench/results/outofcore-policy.json]

Every block read sleeps its bytes / ``--speed-mb`` (no real I/O; a block of zeros
comes back) and every page's compute sleeps a multiple of its read time, so the
seconds measure the cache's order of reads and pages alone (run it with the code
before a change and after, on the same store). Two cases, each the median of its
passes:

- one device pulling every page, 6 passes, with an iteration boundary (the host's
  work between passes) of nothing or half the time the reads in flight take (what
  reading ahead can cover within the budget), compute 0.5x or 1x the reads, a cache of
  1 or 12 blocks beside 4 in flight (issue 60 (a): the next pass read ahead, held
  pages taken while a read is under way);
- two devices sharing the cache over a hybrid iteration's page queue
  (bench/outofcore.py's ``shared_pass``): "gpu" taking 4 pages from the front
  (computing nothing), "cpu" 1 from the back (1x or 4x the reads), 5 passes (issue 60
  (c)).

``targets``: every disk-bound case (compute below the reads) within 1.05x of its floor,
max(the bytes the pass read / the disk's speed, its compute and boundary).
"""

import argparse
import inspect
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hetgraph as hg  # noqa: E402
from machine import describe, write_results  # noqa: E402
from outofcore import shared_pass  # noqa: E402
from hetgraph.io.pagecache import PageCache  # noqa: E402

SRC = ("src",)


def simulated(store, speed):
    """Make ``store``'s block reads sleep bytes / ``speed`` and return zeros; returns
    {(page, block): bytes}."""
    sizes = {(p, b): e["bytes"] for p, page in enumerate(store.manifest["pages"])
             for b, e in page["blocks"].items()}

    def page_block(p, name, fetch=False):
        time.sleep(sizes[p, name] / speed)
        return np.zeros(sizes[p, name] // 4, np.int32)

    store.page_block = page_block
    return sizes


def one_device(store, sizes, speed, ratio, boundary, cached_blocks, passes=6):
    """Seconds a pass and its read floor (the median and the mean of the passes after
    the first), one device pulling every page."""
    largest = max(sizes.values())
    cache = PageCache(store, (cached_blocks + 4) * largest, prefetch_bytes=4 * largest)
    pages = list(range(store.num_pages))
    ahead = {"ahead": pages} if "ahead" in inspect.signature(cache.plan).parameters else {}
    seconds, first = [], 0
    for n in range(passes):
        first = cache.read_bytes if n == 1 else first  # (the first pass: cold)
        start = time.perf_counter()
        cache.plan(pages, SRC, **ahead)
        for p in cache.in_turn(pages, SRC) if hasattr(cache, "in_turn") else pages:
            cache.get(p, SRC)
            time.sleep(sizes[p, "src"] / speed * ratio)
        time.sleep(boundary)
        seconds.append(time.perf_counter() - start)
    read = (cache.read_bytes - first) / (passes - 1)
    cache.close()
    compute = sum(sizes[p, "src"] for p in pages) / speed * ratio
    return statistics.median(seconds[1:]), max(read / speed, compute + boundary)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=None)
    parser.add_argument("--scale", type=int, default=20)
    parser.add_argument("--speed-mb", type=float, default=200.0)
    parser.add_argument("--out", default="bench/results/outofcore-policy.json")
    args = parser.parse_args()
    path = args.store or f"bench/work/rmat-{args.scale}-policy-store"
    if not os.path.exists(os.path.join(path, "manifest.json")):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        hg.generate.rmat(args.scale, edge_factor=8, directed=False).save(
            path, overwrite=True, page_bytes=2 << 20)
    store = hg.PageStore(path)
    speed = args.speed_mb * 1e6
    sizes = simulated(store, speed)
    rows, targets = [], []
    room = 4 * max(sizes.values()) / speed  # seconds of the reads in flight
    for cached in (1, 12):
        for ratio in (0.5, 1.0):
            for boundary in (0.0, room / 2):
                seconds, floor = one_device(store, sizes, speed, ratio, boundary, cached)
                rows.append({"case": "one device", "cached_blocks": cached,
                             "compute_per_read": ratio, "boundary_seconds": boundary,
                             "pass_seconds": seconds, "floor_seconds": floor,
                             "over_floor": seconds / floor})
                print(rows[-1], flush=True)
                if ratio < 1.0:
                    targets.append({"name": f"one device, {cached} cached blocks, "
                                    f"boundary {boundary:.3f} s: pass / floor",
                                    "value": seconds / floor, "target": 1.05,
                                    "met": seconds / floor <= 1.05})
    for ratio in (1.0, 4.0):
        shared = shared_pass(store, speed, cpu_ratio=ratio, passes=5)
        rows.append({"case": "two devices", "cpu_compute_per_read": ratio,
                     "pass_seconds": shared["seconds"],
                     "floor_seconds": shared["read_floor_seconds"],
                     "over_floor": 1 / shared["share_of_floor"],
                     "wait_seconds": shared["wait_seconds"]})
    write_results(args.out, {"machine": describe(), "code": os.path.dirname(hg.__file__),
                             "store": {"path": os.path.abspath(path),
                                       "pages": store.num_pages},
                             "disk_bytes_per_s": speed, "rows": rows}, targets)


if __name__ == "__main__":
    main()
