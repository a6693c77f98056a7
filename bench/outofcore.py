"""Out-of-core benchmark: runs straight from a page store larger than the host budget.

Usage: python bench/outofcore.py [--store DIR] [--scale 25] [--budget-gib 4]
       [--out bench/results/outofcore.json]

The store (RMAT, undirected, edge factor 8: at scale 25 about 530M arcs, 5.8 GB on
disk) is generated and written once if DIR has none (about 20 GB of memory and 3
minutes at scale 25 on 2 cores). Then, in the same run:

- the disk's own sequential read speed: the store's in-edge blocks read in order in
  8 MiB reads with the OS cache dropped (the peer), and k, the store's sequential /
  random read ratio as the cost model measures it;
- the reader alone: every in-edge block read through the PageCache (one I/O thread
  per stripe, prefetch, CRC32 verified, nothing cached), as a share of the disk's;
- PageRank, 5 iterations, and connected components, with ``host_budget`` (default
  4 GiB) and with half of it (PageRank then re-reads part of the graph each
  iteration): seconds, bytes read, the read speed of the iterations that read
  (bytes / seconds; bounded by the compute on a small machine), and the same runs
  with the graph loaded in memory (the peer: the in-memory engine).
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hetgraph as hg  # noqa: E402
from machine import describe  # noqa: E402
from hetgraph.io.pagecache import PageCache  # noqa: E402
from hetgraph.io.store import drop_os_cache  # noqa: E402

CHUNK = 8 << 20


def store_for(path, scale):
    if os.path.exists(os.path.join(path, "manifest.json")):
        return hg.PageStore(path)
    start = time.perf_counter()
    g = hg.generate.rmat(scale, edge_factor=8, directed=False)
    print(f"generated {g} in {time.perf_counter() - start:.0f} s", flush=True)
    store = g.save(path, overwrite=True)
    del g
    return store


def sequential_read_speed(store):
    """Bytes per second reading every in-edge block in order, OS cache dropped."""
    total, start = 0, time.perf_counter()
    for page in store.manifest["pages"]:
        with open(store.block_path(page["blocks"]["src"]), "rb", buffering=0) as f:
            drop_os_cache(f.fileno())
            while True:
                data = f.read(CHUNK)
                if not data:
                    break
                total += len(data)
            drop_os_cache(f.fileno())
    return total / (time.perf_counter() - start), total


def reader_speed(store):
    """Bytes per second of the PageCache reading every in-edge block once (verified)."""
    cache = PageCache(store, 256 << 20, prefetch_bytes=256 << 20)  # caches nothing
    pages = list(range(store.num_pages))
    start = time.perf_counter()
    cache.plan(pages, ("src",))
    for p in pages:
        cache.get(p, ("src",))
    speed = cache.read_bytes / (time.perf_counter() - start)
    cache.close()
    return speed


def measured(name, call, disk_speed):
    start = time.perf_counter()
    result = call()
    wall = time.perf_counter() - start
    h = result.history
    reading = h[h["read_bytes"] > 0]
    achieved = float(reading["read_bytes"].sum() / reading["seconds"].sum()) \
        if len(reading) else None  # in memory: nothing read
    row = {"algorithm": name, "iterations": int(result.iterations),
           "seconds": float(h["seconds"].sum()), "wall_seconds": wall,
           "read_bytes": int(h["read_bytes"].sum()),
           "achieved_read_bytes_per_s": achieved,
           "achieved_share_of_disk": achieved and achieved / disk_speed,
           "modes": h["mode"].tolist(), "rho": float(h["rho"].iloc[0]),
           "per_iteration_seconds": h["seconds"].round(4).tolist(),
           "per_iteration_read_bytes": h["read_bytes"].astype(int).tolist()}
    print(json.dumps({k: v for k, v in row.items() if not k.startswith("per_")}), flush=True)
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default="bench/work/rmat-25-store")
    parser.add_argument("--scale", type=int, default=25)
    parser.add_argument("--budget-gib", type=float, default=4.0)
    parser.add_argument("--out", default="bench/results/outofcore.json")
    args = parser.parse_args()
    store = store_for(args.store, args.scale)
    print(store, flush=True)
    disk_speed, disk_bytes = sequential_read_speed(store)
    k = store.read_ratio(seconds=2.0)
    print(f"disk sequential read {disk_speed / 1e9:.2f} GB/s over {disk_bytes / 1e9:.2f} GB, "
          f"k = {k:.1f}", flush=True)
    reader = reader_speed(store)
    print(f"reader {reader / 1e9:.2f} GB/s = {reader / disk_speed:.0%} of the disk", flush=True)
    runs = []
    for fraction in (1.0, 0.5, None):  # None: the graph loaded in memory
        budget = None if fraction is None else int(args.budget_gib * fraction * 2**30)
        graph = store.load() if fraction is None else store
        for name, call in (
                ("pagerank", lambda: hg.pagerank(graph, max_iterations=5, tol=None,
                                                 host_budget=budget)),
                ("cc", lambda: hg.connected_components(graph, host_budget=budget))):
            row = measured(name, call, disk_speed)
            row["host_budget_bytes"] = budget
            runs.append(row)
        del graph
    result = {"machine": describe(), "store": {
        "path": os.path.abspath(args.store), "num_vertices": store.num_vertices,
        "num_arcs": store.num_arcs, "data_bytes": store.data_bytes,
        "pages": store.num_pages}, "disk_sequential_read_bytes_per_s": disk_speed,
        "disk_bytes_read_for_speed": disk_bytes, "k": k,
        "reader_bytes_per_s": reader, "reader_share_of_disk": reader / disk_speed,
        "runs": runs}
    with open(args.out, "w") as f:
        json.dump(result, f, separators=(",", ":"))
    print("wrote", args.out)


if __name__ == "__main__":
    main()
