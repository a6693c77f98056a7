"""Out-of-core benchmark: runs straight from a page store larger than the host budget.

Usage: python bench/outofcore.py [--store DIR] [--scale 25] [--budget-gib 4]
       [--out bench/results/outofcore.json]
       python bench/outofcore.py --gpu [--scale 26] [--budget-fraction 0.25]
       [--out bench/results/outofcore-gpu.json]     (the GPU rows; --smoke: scale 16)

The store (RMAT, undirected, edge factor 8: at scale 25 about 530M arcs, 5.8 GB on
disk) is generated and written once if DIR has none (about 20 GB of memory and 3
minutes at scale 25 on 2 cores). Then, in the same run:

- the disk's own sequential read speed: the store's in-edge blocks read in order in
  8 MiB reads with the OS cache dropped (the peer), and k, the store's sequential /
  random read ratio as the cost model measures it;
- the reader alone: every in-edge block read through the PageCache (one I/O thread
  per stripe, prefetch, CRC32 verified, nothing cached), as a share of the disk's;
- two devices sharing one page cache as a hybrid iteration's do (:func:`shared_pass`):
  the seconds of a pass against the read floor, and each one's wait for reads;
- PageRank, 5 iterations, and connected components, with ``host_budget`` (default
  4 GiB) and with half of it (PageRank then re-reads part of the graph each
  iteration): seconds, bytes read, the read speed of the iterations that read
  (bytes / seconds; bounded by the compute on a small machine), the read floor of an
  iteration (its bytes / the disk's speed), and the same runs with the graph loaded
  in memory (the peer: the in-memory engine).

With ``--gpu`` (issue 60: the store's pages placed on the CPU and the GPU; RMAT-26,
about 11 GB, by default, ``--scale`` picks a smaller one to fit the time at hand):
PageRank (5 iterations) and connected components (label propagation, the vertex
program) out of core with ``host_budget`` a quarter of the store's data beyond the
vertex arrays (which take 42 of the 176 bytes a vertex of an RMAT store), on the CPU
alone, the GPU alone and as the cost model places them ("auto"), the OS cache dropped
before each run; then in memory on each device (the GPU's rows first, the CPU's last:
:func:`gpu_rows`). The page cache's reads alone, as a share of the disk's, with the
checks of the blocks in their own threads and on the I/O thread. Every row reports
the bytes read per iteration and its read floor (those bytes / the disk's sequential
speed); ``targets``:
an out-of-core GPU or auto iteration within 1.15x of max(read floor, the better
device's in-memory iteration), auto at least as fast as the CPU alone out of core,
calibration included (wall seconds; 1.3x on PageRank). ``--smoke``: RMAT-16 with
small pages, written to bench/work/ (a check that every row runs, in about a minute).
Before the timed rows (not with ``--smoke``) every row runs once on a small store, so
that no row's first iteration holds the kernels' compile.

Each out-of-core row also says where every iteration's time went
(``per_iteration_detail``, :mod:`oocprobe`): bytes read from the disk and the I/O
threads' seconds, the GPU's copies in and kernels (CUDA events), the CPU's kernel
steps, each device's waits for pages and which pages each device took; and how much of
the store the OS still cached after the drop (``os_cache``: mincore; the drop is
posix_fadvise DONTNEED on the store's files, which needs no root, then
/proc/sys/vm/drop_caches where writable and pages stayed).

On the GPU machine (600 s a call): a first call ``--gpu --build-only`` writes the store
(under bench/work/, kept while the machine stays warm) and compiles every row's kernels;
a second call ``--gpu --time-limit 400 --out $OUT/outofcore-gpu.json`` runs the rows on
it (``--store`` names another path), writing the results after every row.
"""

import argparse
import collections
import ctypes
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hetgraph as hg  # noqa: E402
from hetgraph import tuning  # noqa: E402
from machine import describe, write_results  # noqa: E402
from oocprobe import Probe  # noqa: E402
from hetgraph.io.pagecache import PageCache  # noqa: E402
from hetgraph.io.store import drop_os_cache  # noqa: E402
from hetgraph.kernels.gpu.device import availability  # noqa: E402

CHUNK = 8 << 20
SMOKE_PAGE_BYTES = 256 << 10  # the smoke store's pages: several to a small graph


def store_for(path, scale, page_bytes=None):
    if os.path.exists(os.path.join(path, "manifest.json")):
        return hg.PageStore(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    start = time.perf_counter()
    g = hg.generate.rmat(scale, edge_factor=8, directed=False)
    print(f"generated {g} in {time.perf_counter() - start:.0f} s", flush=True)
    start = time.perf_counter()
    store = g.save(path, overwrite=True, page_bytes=page_bytes)
    print(f"saved {store.data_bytes / 1e9:.2f} GB in {time.perf_counter() - start:.0f} s",
          flush=True)
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


def reader_speed(store, blocks=("src",), check_threads=None):
    """Bytes per second of the PageCache reading ``blocks`` of every page once, as a
    fresh process does (:func:`drop_store_cache`: every block verified and checked),
    its checks in ``check_threads`` threads (default ``tuning.CHECK_THREADS``)."""
    drop_store_cache(store)
    kept, tuning.CHECK_THREADS = tuning.CHECK_THREADS, (
        tuning.CHECK_THREADS if check_threads is None else check_threads)
    try:
        cache = PageCache(store, 256 << 20, prefetch_bytes=256 << 20)  # caches nothing
    finally:
        tuning.CHECK_THREADS = kept
    pages = list(range(store.num_pages))
    start = time.perf_counter()
    cache.plan(pages, blocks)
    for p in pages:
        cache.get(p, blocks)
    speed = cache.read_bytes / (time.perf_counter() - start)
    cache.close()
    return speed


def shared_pass(store, disk_speed, cpu_ratio=1.0, passes=3, batch=4):
    """Two devices sharing one PageCache as a hybrid iteration's do: a queue of every
    page's in-edge block, "gpu" taking ``batch`` pages at a time from its front and
    computing nothing, "cpu" one from its back and computing each for ``cpu_ratio``
    times as long as the disk takes to read it; a cache of 16 blocks (it keeps next
    to nothing). Returns the median pass's seconds, the read floor (bytes /
    ``disk_speed``) and each device's seconds waiting for reads in that pass."""
    largest = max(p["blocks"]["src"]["bytes"] for p in store.manifest["pages"])
    rows = []
    for _ in range(passes):
        cache = PageCache(store, 16 * largest)
        queue, lock, waited = collections.deque(range(store.num_pages)), threading.Lock(), {}

        def device(name, count, front, per_byte):
            waited[name] = 0.0
            while True:
                with lock:
                    take = sorted(queue.popleft() if front else queue.pop()
                                  for _ in range(min(count, len(queue))))
                if not take:
                    return
                cache.plan(take, ("src",), owner=name)
                for p in take:
                    start = time.perf_counter()
                    (array,) = cache.get(p, ("src",), owner=name)
                    waited[name] += time.perf_counter() - start
                    time.sleep(array.nbytes * per_byte)

        start = time.perf_counter()
        threads = [threading.Thread(target=device, args=args) for args in (
            ("gpu", batch, True, 0.0), ("cpu", 1, False, cpu_ratio / disk_speed))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - start
        rows.append({"seconds": seconds, "read_floor_seconds": cache.read_bytes / disk_speed,
                     "wait_seconds": dict(waited), "read_bytes": cache.read_bytes})
        cache.close()
    row = sorted(rows, key=lambda r: r["seconds"])[len(rows) // 2]
    row["share_of_floor"] = row["read_floor_seconds"] / row["seconds"]
    row["pass_seconds"] = [round(r["seconds"], 4) for r in rows]
    print("shared cache:", json.dumps(row), flush=True)
    return row


def store_files(store):
    """The paths of every block of ``store``."""
    entries = list(store.manifest["graph_blocks"].values()) + [
        e for page in store.manifest["pages"] for e in page["blocks"].values()]
    return [store.block_path(e) for e in entries]


def cached_fraction(paths):
    """The share of the bytes of ``paths`` that the OS holds in its page cache now
    (mincore of a mapping of each file; Linux), None where it cannot be asked."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t,
                                 ctypes.POINTER(ctypes.c_ubyte)]
    except (OSError, AttributeError):
        return None
    page = os.sysconf("SC_PAGE_SIZE")
    held = total = 0
    for path in paths:
        size = os.path.getsize(path)
        if not size:
            continue
        with open(path, "rb") as f:
            address = libc.mmap(None, size, 1, 1, f.fileno(), 0)  # PROT_READ, MAP_SHARED
        if address in (None, ctypes.c_void_p(-1).value):
            return None
        try:
            pages = (size + page - 1) // page
            vector = (ctypes.c_ubyte * pages)()
            if libc.mincore(address, size, vector):
                return None
            held += sum(v & 1 for v in bytes(vector)) * page
            total += pages * page
        finally:
            libc.munmap(address, size)
    return held / total if total else 0.0


def drop_store_cache(store):
    """Drop the OS's cached pages of every block of ``store``: written back (sync),
    then dropped file by file (posix_fadvise DONTNEED: no root needed); where some stay
    cached, every clean page of the OS (/proc/sys/vm/drop_caches) if writable. The
    store object forgets which blocks it checked, as in a fresh process. Returns
    {"method", "cached_after": the share of the store's bytes still cached}."""
    store._checked.clear()
    paths = store_files(store)
    os.sync()  # (dirty pages, just written, cannot be dropped)
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            drop_os_cache(f.fileno())
    method, left = "fadvise", cached_fraction(paths)
    if left and left > 0.01:
        try:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("1")
            method, left = "fadvise+drop_caches", cached_fraction(paths)
        except OSError:
            pass
    return {"method": method, "cached_after": left}


def measured(name, call, disk_speed, probe=None):
    """A run's row: ``call()`` timed; with a :class:`Probe`, where each iteration's
    time went (``per_iteration_detail``, printed one line an iteration)."""
    start = time.perf_counter()
    if probe is None:
        result = call()
    else:
        with probe:
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
           "read_bytes_per_iteration": float(h["read_bytes"].mean()) if len(h) else 0.0,
           "read_floor_seconds_per_iteration":
               float(h["read_bytes"].mean()) / disk_speed if len(h) else 0.0,
           "steady_seconds_per_iteration":  # (after the first, which also builds)
               float(h["seconds"].iloc[1:].mean()) if len(h) > 1 else None,
           "placements": h["placement"].tolist(),
           "per_iteration_seconds": h["seconds"].round(4).tolist(),
           "per_iteration_read_bytes": h["read_bytes"].astype(int).tolist()}
    print(f"{name}: {row['iterations']} iterations, {row['seconds']:.2f} s ({wall:.1f} s "
          f"wall), read {row['read_bytes'] / 1e9:.2f} GB, modes {sorted(set(row['modes']))}",
          flush=True)
    if probe is not None:
        row["per_iteration_detail"] = detail = probe.report(len(h))
        for i, (seconds, it) in enumerate(zip(row["per_iteration_seconds"], detail or ())):
            print(f"  it {i} {row['placements'][i]:6} {seconds:7.3f} s | "
                  f"{describe_iteration(it)}", flush=True)
    return row


def describe_iteration(it):
    """One line of :meth:`Probe.report`'s dict of an iteration."""
    pages = " ".join(f"{d} {v['count']}" for d, v in sorted(it["pages"].items()))
    waits = " ".join(f"{d} {s:.3f}" for d, s in sorted(it["wait_seconds"].items()))
    return (f"read {it['read_bytes'] / 1e6:.1f} MB {it['read_seconds']:.3f} s (disk busy "
            f"{it['disk_busy_seconds']:.3f}) | h2d {it['h2d_seconds']:.3f} s "
            f"({it['copies']}) | kernel gpu {it['gpu_kernel_seconds']:.3f} cpu "
            f"{it['cpu_kernel_seconds']:.3f} | wait {waits or '-'} | pages {pages or '-'}")


GPU_RUNS = {
    "pagerank": lambda g, **o: hg.pagerank(g, max_iterations=5, tol=None, **o),
    "cc": lambda g, **o: hg.connected_components(g, algorithm="label-propagation", **o),
}


def per_iteration(row):
    return row["seconds"] / max(row["iterations"], 1)


def gpu_targets(rows, disk_speed):
    """The issue's targets from the GPU rows (see the module docstring)."""
    targets = []
    for name in GPU_RUNS:
        of = {(r["devices"], r["out_of_core"]): r for r in rows if r["algorithm"] == name}
        in_memory = [per_iteration(r) for (_, ooc), r in of.items() if not ooc]
        for devices in ("gpu", "auto"):
            row = of.get((devices, True))
            if row is None or not in_memory:
                continue
            floor = max(row["read_bytes_per_iteration"] / disk_speed, min(in_memory))
            value = per_iteration(row) / floor
            targets.append({"name": f"{name} {devices} out of core: seconds an iteration / "
                            f"max(read floor, better in-memory)", "value": value,
                            "target": 1.15, "met": value <= 1.15})
        cpu, auto = of.get(("cpu", True)), of.get(("auto", True))
        if cpu and auto:  # (wall seconds: auto's calibration counts)
            want = 1.3 if name == "pagerank" else 1.0
            value = cpu["wall_seconds"] / auto["wall_seconds"]
            targets.append({"name": f"{name} out of core: auto's speedup over the CPU "
                            f"alone (wall seconds)", "value": value, "target": want,
                            "met": value >= want})
    return targets


def quarter_budget(store, fraction):
    """``host_budget`` for ``fraction`` of the store's data for pages, beyond the
    vertex arrays (pointers; values, two, aux, flags, marks of a float64 program):
    RMAT-26's are 42 bytes a vertex of its 176, and a budget of a quarter in all would
    leave no room for one page."""
    return int(store.data_bytes * fraction) + 16 * store.num_vertices + \
        26 * store.num_vertices


def warm_up(devices, budget_fraction):
    """Every row's kernels compiled before the rows are timed: the runs once on the
    smoke store (RMAT-16, out of core and in memory), so that no row's first iteration
    holds a compile (a user's later processes load them from the caches on disk)."""
    start = time.perf_counter()
    store = store_for("bench/work/rmat-16-store", 16, page_bytes=SMOKE_PAGE_BYTES)
    budget, graph = quarter_budget(store, budget_fraction), store.load()
    for call in GPU_RUNS.values():
        for d in devices:
            call(store, devices=d, host_budget=budget)
            call(graph, devices=d)
    print(f"warm-up (compiles) {time.perf_counter() - start:.1f} s", flush=True)


def gpu_main(args):
    """The GPU rows (``--gpu``); with ``--build-only`` the store and the compiles alone."""
    began = time.perf_counter()
    scale = 16 if args.smoke else args.scale
    path = args.store or f"bench/work/rmat-{scale}-store"
    store = store_for(path, scale, page_bytes=SMOKE_PAGE_BYTES if args.smoke else None)
    print(store, flush=True)
    gpu, why = availability()
    devices = ("cpu", "gpu", "auto") if gpu else ("cpu",)
    if not args.smoke:
        warm_up(devices, budget_fraction=args.budget_fraction)
    if args.build_only:
        return
    budget = quarter_budget(store, args.budget_fraction)
    dropped = drop_store_cache(store)
    print(f"OS cache of the store dropped by {dropped['method']}: "
          f"{dropped['cached_after']} of it left", flush=True)
    disk_speed, disk_bytes = sequential_read_speed(store)
    k = store.read_ratio(seconds=2.0)
    print(f"disk sequential read {disk_speed / 1e9:.2f} GB/s, k = {k:.1f}, host budget "
          f"{budget / 1e9:.2f} GB", flush=True)
    readers = {f"{'+'.join(b)}, {n} check threads": reader_speed(store, b, n) / disk_speed
               for b in (("src",), ("src", "dst_offset"))
               for n in sorted({0, tuning.CHECK_THREADS})}
    print(f"the page cache's reads (checked) as a share of the disk's: {readers}", flush=True)
    result = {"machine": describe(), "gpu": gpu or why, "store": {
        "path": os.path.abspath(path), "scale": scale, "num_vertices": store.num_vertices,
        "num_arcs": store.num_arcs, "data_bytes": store.data_bytes,
        "pages": store.num_pages}, "disk_sequential_read_bytes_per_s": disk_speed,
        "disk_bytes_read_for_speed": disk_bytes, "k": k, "host_budget_bytes": budget,
        "reader_share_of_disk": readers, "os_cache_drop": dropped, "runs": [],
        "skipped": []}
    out = args.out or ("bench/work/outofcore-gpu-smoke.json" if args.smoke
                       else "bench/results/outofcore-gpu.json")
    graph = None
    for name, d, out_of_core in gpu_rows(devices):
        if time.perf_counter() - began > args.time_limit:
            result["skipped"].append({"algorithm": name, "devices": d,
                                      "out_of_core": out_of_core})
            continue
        call = GPU_RUNS[name]
        if out_of_core:
            drop = drop_store_cache(store)
            options = {"devices": d, "host_budget": budget}
            if d == STREAMED:  # (half the GPU's blocks resident, the rest read each pass)
                options.update(devices="gpu", gpu={"memory_budget": gpu_bytes(store) // 2})
            row = measured(name, lambda: call(store, **options), disk_speed, Probe())
            row.update(os_cache=drop, host_budget_bytes=budget, gpu=options.get("gpu"))
        else:
            graph = store.load() if graph is None else graph
            row = {**measured(name, lambda: call(graph, devices=d), disk_speed),
                   "host_budget_bytes": None}
        print(f"  ({name}, devices={d}, {'out of core' if out_of_core else 'in memory'})",
              flush=True)
        result["runs"].append({**row, "devices": d, "out_of_core": out_of_core})
        with open(out, "w") as f:  # (after every row: a call cut short keeps those before)
            json.dump({**result, "targets": gpu_targets(result["runs"], disk_speed)}, f)
    if result["skipped"]:
        print(f"skipped past --time-limit {args.time_limit:.0f} s: {result['skipped']}")
    write_results(out, result, gpu_targets(result["runs"], disk_speed))
    print(f"wrote {out} ({time.perf_counter() - began:.0f} s)")


STREAMED = "gpu-streamed"  # a row's devices: the GPU, its budget for half the pages


def gpu_bytes(store):
    """Bytes of the blocks a GPU pull reads of every page (``memory_budget``'s unit)."""
    return sum(page["blocks"][b]["bytes"] for page in store.manifest["pages"]
               for b in ("src", "dst_offset", "weight") if b in page["blocks"])


def gpu_rows(devices):
    """(algorithm, devices, out of core) of every row, in the order they run (the
    rows of the targets first, should --time-limit cut the run short): each algorithm
    out of core on the GPU, "auto" and the CPU, then in memory on the best device
    (the floor of its targets); then PageRank out of core on a GPU whose budget holds
    half the pages (:data:`STREAMED`: the others read, copied and pulled every pass,
    as on a graph larger than the GPU); the CPU in memory last."""
    order = [d for d in ("gpu", "auto", "cpu") if d in devices]
    for name in GPU_RUNS:
        yield from ((name, d, True) for d in order)
        yield name, order[0], False
    if order[0] != "cpu":
        yield "pagerank", STREAMED, True
        yield from ((name, "cpu", False) for name in GPU_RUNS)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=None)
    parser.add_argument("--scale", type=int, default=None)
    parser.add_argument("--budget-gib", type=float, default=4.0)
    parser.add_argument("--gpu", action="store_true", help="the GPU rows (issue 60)")
    parser.add_argument("--budget-fraction", type=float, default=0.25,
                        help="--gpu: host_budget as a share of the store's data")
    parser.add_argument("--smoke", action="store_true", help="--gpu on RMAT-16")
    parser.add_argument("--out", default=None)
    parser.add_argument("--build-only", action="store_true",
                        help="--gpu: write the store and compile every row's kernels, "
                        "then stop (a first device call; the rows in a second one, "
                        "--store reusing it)")
    parser.add_argument("--time-limit", type=float, default=float("inf"),
                        help="--gpu: seconds from the start after which rows are "
                        "skipped (listed in the results)")
    args = parser.parse_args()
    if args.gpu:
        args.scale = 26 if args.scale is None else args.scale
        return gpu_main(args)
    args.scale = 25 if args.scale is None else args.scale
    args.store = args.store or "bench/work/rmat-25-store"
    args.out = args.out or "bench/results/outofcore.json"
    store = store_for(args.store, args.scale)
    print(store, flush=True)
    disk_speed, disk_bytes = sequential_read_speed(store)
    k = store.read_ratio(seconds=2.0)
    print(f"disk sequential read {disk_speed / 1e9:.2f} GB/s over {disk_bytes / 1e9:.2f} GB, "
          f"k = {k:.1f}", flush=True)
    reader = reader_speed(store)
    print(f"reader {reader / 1e9:.2f} GB/s = {reader / disk_speed:.0%} of the disk", flush=True)
    shared = shared_pass(store, disk_speed)
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
        graph = None  # (the loaded graph's memory back before the next budget)
    result = {"machine": describe(), "store": {
        "path": os.path.abspath(args.store), "num_vertices": store.num_vertices,
        "num_arcs": store.num_arcs, "data_bytes": store.data_bytes,
        "pages": store.num_pages}, "disk_sequential_read_bytes_per_s": disk_speed,
        "disk_bytes_read_for_speed": disk_bytes, "k": k,
        "reader_bytes_per_s": reader, "reader_share_of_disk": reader / disk_speed,
        "shared_cache_pass": shared, "runs": runs}
    with open(args.out, "w") as f:
        json.dump(result, f, separators=(",", ":"))
    print("wrote", args.out)


if __name__ == "__main__":
    main()
