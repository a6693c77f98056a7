"""GPU shard-size sweep (run on the GPU machine; writes one JSON).

Usage: python bench/gpu_shards.py [--scales 22 24] [--out bench/results/gpu-shards.json]

Per RMAT scale, in the given order and renumbered by degree (``Graph.reorder``): the
median seconds of the GPU engine's PageRank pass (float32, 16 KiB of shared memory, all
pages resident, no program hooks) with shards bounded by ``max_shard_edges`` in-edges
(None: the shared-memory rule alone), for source- and destination-ordered edges, and
cuSPARSE SpMV on each order. It chose the default bound (65,536): in degree order the
hub shards are few and huge, and few blocks keep the GPU busy.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hetgraph as hg  # noqa: E402
from gpu import cusparse_spmv  # noqa: E402
from machine import describe  # noqa: E402

BOUNDS = (None, 65536, 16384, 4096, 1024)


def pass_seconds(cp, g, bound, iterations=15, **options):
    """(median seconds of one engine pass, shards) with shards of at most ``bound``
    in-edges."""
    from hetgraph.algorithms.pagerank import PageRank
    from hetgraph.engines.gpu import GpuEngine
    from hetgraph.program import ProgramSpec

    spec = ProgramSpec(PageRank(dtype=np.float32, tol=None))
    values, flags, aux = spec.initial_state(g)
    part = g.partition(page_bytes=1 << 40, shared_bytes=16384, vertex_bytes=4,
                       max_shard_edges=bound)
    engine = GpuEngine(spec, g, values, flags, aux, partition=part, **options)
    times = []
    for _ in range(iterations):
        cp.cuda.Device().synchronize()
        start = time.perf_counter()
        engine.iterate(1e-9)
        cp.cuda.Device().synchronize()
        times.append(time.perf_counter() - start)
    del engine
    cp.get_default_memory_pool().free_all_blocks()
    return float(np.median(times)), part.num_shards


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=int, nargs="*", default=[22, 24])
    parser.add_argument("--out", default=os.path.join("bench", "results", "gpu-shards.json"))
    args = parser.parse_args()
    import cupy as cp

    rows = []
    for scale in args.scales:
        g = hg.generate.rmat(scale, seed=1)
        start = time.perf_counter()
        h = g.reorder()
        print(f"rmat-{scale}: reorder {time.perf_counter() - start:.1f} s, max in-degree "
              f"{g.in_degree().max()}", flush=True)
        for order, graph in (("given", g), ("degree", h)):
            spmv = cusparse_spmv(cp, graph, 15)
            print(f"  {order}: cuSPARSE {spmv * 1e3:.3f} ms", flush=True)
            for bound in BOUNDS:
                for options in ({}, {"edge_order": "destination"}):
                    seconds, shards = pass_seconds(cp, graph, bound, **options)
                    print(f"  {order} max_shard_edges={bound} {options} shards {shards}: "
                          f"{seconds * 1e3:.3f} ms", flush=True)
                    rows.append(dict(scale=scale, order=order, max_shard_edges=bound,
                                     edge_order=options.get("edge_order", "source"),
                                     shards=shards, seconds=seconds,
                                     cusparse_seconds=spmv))
        del g, h
    with open(args.out, "w") as f:
        json.dump({"benchmark": "gpu shards", "machine": describe(), "rows": rows}, f,
                  indent=1)


if __name__ == "__main__":
    main()
