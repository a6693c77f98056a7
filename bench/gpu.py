"""GPU engine benchmark (run on the GPU machine in one call; writes one JSON).

Usage: python bench/gpu.py [--scales 22 24 26] [--real wiki-vote] [--grid 1000]
           [--iterations 20] [--out bench/results/gpu.json] [--append] [--quick]

Per graph (RMAT scales, a real power-law graph and a road-like grid with shuffled ids;
hetgraph runs on it renumbered by ``Graph.reorder("auto")``, cuSPARSE on it as given
and renumbered):
* PageRank (float32) seconds per iteration of ``hg.pagerank(devices="gpu")`` (the
  median of the run's history, hooks included) against cuSPARSE SpMV (cupyx csr @ x,
  float32) measured in the same run, and against the bandwidth floor: the bytes an
  iteration must move over the device copy bandwidth measured here;
* Garaph fig. 9: the same iteration with the customized R_i against every fixed R;
* streamed pages: the budget set to a quarter of the graph's page bytes, against the
  PCIe floor (streamed bytes over the measured pinned host-to-device bandwidth);
* the largest relative difference of the ranks from a float64 cuSPARSE PageRank.
Ratios are peer seconds / hetgraph seconds (> 1: hetgraph faster) and floor / seconds.
Graphs under SMALL_ARCS arcs are timed over SMALL_ITERATIONS iterations at least.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hetgraph as hg  # noqa: E402
from hetgraph.order import auto_reordered, renumber  # noqa: E402
from machine import describe  # noqa: E402

FIXED_R = (1, 2, 4, 8, 16, 32)
SWEEP_MAX_ARCS = 100_000_000  # larger graphs skip the layout sweeps (device time)
# graphs under SMALL_ARCS are timed over at least SMALL_ITERATIONS iterations (both
# hetgraph and cuSPARSE): their iterations take 30-70 us, and a median of 20 moved by
# 25% between runs of the same code (wiki-vote: 54-71 us)
SMALL_ARCS, SMALL_ITERATIONS = 10_000_000, 200


def device_bandwidths(cp, nbytes=1 << 30, repeats=5):
    """(device copy bytes moved per second (read + write), pinned H2D bytes/s, the copy
    rate of each method): the device rate is the best of a cudaMemcpy and elementwise
    copies of 1- and 8-byte items (on one H100 they agreed within 1%: 2958, 2969 and
    2982 GB/s). The H100s lent for calls differ: 2.82-2.98 TB/s between calls, while
    one build of the kernel ran RMAT-26 PageRank in 8.19-8.20 ms on each, so a ratio to
    the floor moves by 5% with the machine."""
    import cupyx

    def elementwise(source, target):
        target[...] = source

    def memcpy(source, target):
        target.data.copy_from_device_async(source.data, source.nbytes)

    def copy_rate(copy, dtype):
        source = cp.zeros(nbytes // np.dtype(dtype).itemsize, dtype)
        target = cp.empty_like(source)
        return 2 * nbytes / min(device_seconds(cp, lambda: copy(source, target), repeats))

    def upload_rate():
        target = cp.empty(nbytes, cp.uint8)
        host = cupyx.empty_pinned(nbytes, np.uint8)
        host[...] = 1
        return nbytes / min(device_seconds(cp, lambda: target.set(host), repeats))

    rates = {"elementwise_uint8": copy_rate(elementwise, np.uint8),
             "elementwise_uint64": copy_rate(elementwise, np.uint64),
             "memcpy": copy_rate(memcpy, np.uint8)}
    upload = upload_rate()
    cp.get_default_memory_pool().free_all_blocks()  # give the 2 GiB back to the runs
    cp.get_default_pinned_memory_pool().free_all_blocks()
    return max(rates.values()), upload, rates


def device_seconds(cp, call, repeats):
    """Seconds of each of ``repeats`` calls of ``call`` after one unmeasured call, the
    device synchronized before and after each."""
    call()
    times = []
    for _ in range(repeats):
        cp.cuda.Device().synchronize()
        start = time.perf_counter()
        call()
        cp.cuda.Device().synchronize()
        times.append(time.perf_counter() - start)
    return times


def cusparse_spmv(cp, g, iterations):
    """Median seconds of y = A^T x (cuSPARSE CSR, float32) and of an equal-size copy."""
    import cupyx.scipy.sparse as csp

    data = cp.ones(g.num_arcs, cp.float32)
    # A^T in CSR = the CSC of A: row v holds the in-edges of v
    AT = csp.csr_matrix((data, cp.asarray(g.in_indices), cp.asarray(g.in_indptr)),
                        shape=(g.num_vertices,) * 2)
    x = cp.full(g.num_vertices, 1.0 / g.num_vertices, cp.float32)
    return float(np.median(device_seconds(cp, lambda: AT @ x, iterations)))


def cusparse_pagerank(cp, g, iterations, damping=0.85):
    """Ranks after ``iterations`` PageRank steps from 1/N, computed independently of
    hetgraph in float64 with cuSPARSE SpMV (dangling rank spread uniformly, as NetworkX):
    the reference of every row (a CPU reference took minutes at scale 26)."""
    import cupyx.scipy.sparse as csp

    n = g.num_vertices
    AT = csp.csr_matrix((cp.ones(g.num_arcs, cp.float64), cp.asarray(g.in_indices),
                         cp.asarray(g.in_indptr)), shape=(n, n))
    out_degree = cp.asarray(g.out_degree()).astype(cp.float64)
    dangling = out_degree == 0
    share = cp.where(dangling, 0.0, 1.0 / cp.maximum(out_degree, 1.0))
    rank = cp.full(n, 1.0 / n)
    for _ in range(iterations):
        rank = (1 - damping) / n + damping * (AT @ (rank * share) + rank[dangling].sum() / n)
    ranks = cp.asnumpy(rank)
    del AT, out_degree, dangling, share, rank
    cp.get_default_memory_pool().free_all_blocks()
    return ranks


def pagerank_seconds(g, iterations, **gpu_options):
    """Median seconds per PageRank iteration (float32, fixed iterations) on the GPU,
    and the result."""
    result = hg.pagerank(g, tol=None, max_iterations=iterations, dtype=np.float32,
                         devices="gpu", gpu=gpu_options or None)
    seconds = result.history["seconds"].to_numpy()
    return float(np.median(seconds[1:] if len(seconds) > 2 else seconds)), result


def floor_bytes(g):
    """Bytes a float32 PageRank iteration must move on the device: every edge's source
    id and 16-bit offset, every value gathered once, old value, aux, out-degree read and
    new value and flag written."""
    return g.num_arcs * (g.index_dtype.itemsize + 2) + g.num_vertices * (4 + 4 + 4 + 4 + 4 + 1)


def engine_profile(g, iterations, **gpu_options):
    """(page placement, median seconds of the engine's pass alone: no program hooks)
    for float32 PageRank."""
    from hetgraph.algorithms.pagerank import PageRank
    from hetgraph.engines.gpu import GpuEngine
    from hetgraph.program import ProgramSpec

    spec = ProgramSpec(PageRank(dtype=np.float32, tol=None))
    values, flags, aux = spec.initial_state(g)
    engine = GpuEngine(spec, g, values, flags, aux, **gpu_options)
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        engine.iterate(1e-9)
        times.append(time.perf_counter() - start)
    described = engine.describe()
    del engine
    return described, float(np.median(times))


_STARTED = time.perf_counter()


def step(what):
    """Log a finished step with the seconds since the benchmark started (a run cut off
    by the device's time limit shows where the time went)."""
    print(f"    [{time.perf_counter() - _STARTED:6.1f} s] {what}", flush=True)


def bench_graph(cp, name, given, iterations, bandwidth, upload, save, sweeps=True):
    """hetgraph on the graph renumbered by ``reorder("auto")`` (as the command line
    runs), cuSPARSE on the graph as given (``ratio_vs_cusparse``) and on the renumbered
    one (``ratio_vs_cusparse_renumbered``: kernel against kernel); every sweep below runs
    on the renumbered graph. Graphs over SWEEP_MAX_ARCS skip the sweeps, the run on the
    given order and the engine's bare pass (device time), as every graph does without
    ``sweeps``. ``save(row)`` is called with the row so far after each measurement (a
    run cut off keeps what it measured)."""
    print(f"{name}: {given.summary()}", flush=True)
    if given.num_arcs < SMALL_ARCS:
        iterations = max(iterations, SMALL_ITERATIONS)
    start = time.perf_counter()
    g, order = auto_reordered(given)
    row = {"graph": name, "date": time.strftime("%Y-%m-%d %H:%M"),  # rows of other runs stay
           "vertices": g.num_vertices, "arcs": g.num_arcs, "iterations": iterations,
           "order": "given" if order == "none" else order,
           "reorder_seconds": time.perf_counter() - start}
    step(f"reordered ({row['order']})")
    ours, result = pagerank_seconds(g, iterations)
    step("PageRank")
    spmv = cusparse_spmv(cp, given, iterations)
    spmv_renumbered = spmv if g is given else cusparse_spmv(cp, g, iterations)
    step("cuSPARSE")
    reference = cusparse_pagerank(cp, g, iterations)
    step("float64 cuSPARSE reference")
    error = float(np.max(np.abs(result.values - reference) / np.maximum(reference, 1e-30)))
    floor = floor_bytes(g) / bandwidth
    row.update(pagerank_seconds=ours, cusparse_spmv_seconds=spmv,
               ratio_vs_cusparse=spmv / ours, cusparse_renumbered_seconds=spmv_renumbered,
               ratio_vs_cusparse_renumbered=spmv_renumbered / ours, floor_seconds=floor,
               times_floor=ours / floor, gteps=g.num_arcs / ours / 1e9,
               max_relative_error_vs_float64=error)
    print(f"  PR {ours * 1e3:.3f} ms/iter, cuSPARSE SpMV {spmv * 1e3:.3f} ms "
          f"({spmv / ours:.2f}x; renumbered {spmv_renumbered * 1e3:.3f} ms, "
          f"{spmv_renumbered / ours:.2f}x), floor {floor * 1e3:.3f} ms "
          f"({ours / floor:.2f}x floor), err {error:.1e}", flush=True)
    save(row)
    if g.num_arcs > SWEEP_MAX_ARCS or not sweeps:
        return streamed_row(g, iterations, upload, result, row, save)
    row["pagerank_given_order_seconds"] = ours if g is given else \
        pagerank_seconds(given, iterations)[0]
    step("PageRank on the given order")
    row["layout"], engine_pass = engine_profile(g, iterations)
    row.update(engine_pass_seconds=engine_pass, pass_ratio_vs_cusparse=spmv / engine_pass)
    step("engine pass")
    print(f"  given order {row['pagerank_given_order_seconds'] * 1e3:.3f} ms; engine pass "
          f"{engine_pass * 1e3:.3f} ms, {row['layout']['source_ranges']} source ranges",
          flush=True)
    save(row)
    fixed = {}
    for r in FIXED_R:
        fixed[str(r)] = pagerank_seconds(g, iterations, replication=r)[0]
    row["fixed_replication_seconds"] = fixed
    row["customized_vs_best_fixed"] = min(fixed.values()) / ours
    print("  fig9 " + " ".join(f"R={r}:{t * 1e3:.2f}" for r, t in fixed.items())
          + f" custom:{ours * 1e3:.2f} ms", flush=True)
    for shared in (8 << 10, 48 << 10):
        row[f"shared_{shared >> 10}k_seconds"] = pagerank_seconds(
            g, iterations, shared_bytes=shared)[0]
    row["destination_order_seconds"] = pagerank_seconds(g, iterations,
                                                        edge_order="destination")[0]
    row["fixed_replication_destination_order_seconds"] = {
        str(r): pagerank_seconds(g, iterations, replication=r, edge_order="destination")[0]
        for r in FIXED_R}
    print("  destination order (warp combine) by R: " + " ".join(
        f"R={r}:{t * 1e3:.2f}" for r, t in
        row["fixed_replication_destination_order_seconds"].items()), flush=True)
    row["source_ranges_seconds"] = {str(k): pagerank_seconds(g, iterations, source_ranges=k)[0]
                                    for k in (1, 2, 4, 8)}
    print("  orders: destination %.3f ms; source ranges %s" % (
        row["destination_order_seconds"] * 1e3, {k: round(v * 1e3, 3) for k, v in
                                                 row["source_ranges_seconds"].items()}),
          flush=True)
    for threads in (128, 512):
        row[f"threads_{threads}_seconds"] = pagerank_seconds(
            g, iterations, threads_per_block=threads)[0]
    return streamed_row(g, iterations, upload, result, row, save)


def streamed_row(g, iterations, upload, result, row, save):
    """``row`` with PageRank at a device budget of a quarter of the page bytes, its
    largest difference from the resident run's ``result``, and its ratio to the PCIe
    floor; saved as soon as the run is measured."""
    quarter = g.num_arcs * (g.index_dtype.itemsize + 2) // 4
    streamed, streamed_result = pagerank_seconds(g, iterations, memory_budget=quarter)
    step("streamed PageRank")
    row.update(streamed_seconds=streamed, streamed_max_relative_difference=float(
        np.max(np.abs(streamed_result.values - result.values)
               / np.maximum(result.values, 1e-30))))
    save(row)
    layout = engine_profile(g, 2, memory_budget=quarter)[0]
    pcie_floor = layout["streamed_edges"] * (g.index_dtype.itemsize + 2) / upload
    row.update(streamed_layout=layout, pcie_floor_seconds=pcie_floor,
               streamed_times_pcie_floor=streamed / pcie_floor)
    print(f"  streamed (budget {quarter:,} B) {streamed * 1e3:.3f} ms/iter, PCIe floor "
          f"{pcie_floor * 1e3:.3f} ms ({streamed / pcie_floor:.2f}x floor), "
          f"{layout['streamed_pages']} pages streamed over {layout['streams']} streams",
          flush=True)
    return row


def shuffled_grid(side):
    """The side x side grid (unweighted: PageRank here, as its references, counts
    edges) with its ids in a random order: a road graph whose ids say nothing of where a
    vertex is ("auto" renumbers it by RCM)."""
    grid = hg.generate.grid(side, side, weights=None)
    return renumber(grid, np.random.default_rng(1).permutation(grid.num_vertices))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=int, nargs="*", default=[22, 24, 26])
    parser.add_argument("--real", default="wiki-vote")
    parser.add_argument("--grid", type=int, default=0,
                        help="side of a grid with shuffled ids to add (0: none)")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--out", default=os.path.join("bench", "results", "gpu.json"))
    parser.add_argument("--append", action="store_true",
                        help="keep the rows of other graphs already in --out")
    parser.add_argument("--quick", action="store_true",
                        help="PageRank, cuSPARSE and streamed rows only (no sweeps)")
    args = parser.parse_args()
    import cupy as cp

    from hetgraph.kernels.gpu import device as gpu

    ok, device = gpu.availability()
    if not ok:
        sys.exit(f"no GPU: {device}")
    bandwidth, upload, copies = device_bandwidths(cp)
    print(f"{device}: device copy {bandwidth / 1e9:.0f} GB/s (" + ", ".join(
        f"{name} {rate / 1e9:.0f}" for name, rate in copies.items()) + "), pinned H2D "
          f"{upload / 1e9:.1f} GB/s", flush=True)
    kept = []
    if args.append and os.path.exists(args.out):
        with open(args.out) as f:
            kept = json.load(f)["results"]
    rows = []
    graphs = [(args.real, lambda: hg.datasets.load(args.real))] if args.real else []
    if args.grid:
        graphs.append((f"grid-{args.grid}-shuffled", lambda: shuffled_grid(args.grid)))
    graphs += [(f"rmat-{s}", lambda s=s: hg.generate.rmat(s, seed=1)) for s in args.scales]
    for name, make in graphs:
        start = time.perf_counter()
        g = make()
        built = time.perf_counter() - start
        step(f"{name} built")
        def save(row):
            row["build_seconds"] = built
            now = rows + [row]
            named = {r["graph"] for r in now}
            os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
            with open(args.out, "w") as f:
                json.dump({"benchmark": "gpu", "date": time.strftime("%Y-%m-%d"),
                           "machine": dict(describe(), gpu=device),
                           "device_copy_bytes_per_second": bandwidth,
                           "device_copy_bytes_per_second_by_method": copies,
                           "pinned_h2d_bytes_per_second": upload,
                           "results": [r for r in kept if r["graph"] not in named] + now},
                          f, indent=1)

        row = bench_graph(cp, name, g, args.iterations, bandwidth, upload, save,
                          sweeps=not args.quick)
        save(row)
        rows.append(row)
        del g
        cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
