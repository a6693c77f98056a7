"""The multi-GPU check of the local recipe (deploy/local/check-gpus.sh runs it).

    python check_gpus.py make STORE --scale 24          RMAT graph, weighted, as a page store
    python check_gpus.py run ADDRESS STORE OUT.npz      PageRank and SSSP through a running
                                                        scheduler (hg.Cluster(address=...))
    python check_gpus.py compare MANY.npz ONE.npz       one JSON line: same answers?

``run`` keeps each run's values, seconds and iterations, and the tasks each kind of worker
ran (Dask's task stream), so the JSON line shows which GPU workers took part.
"""

import argparse
import json
import sys
import time

import numpy as np

import hetgraph as hg
from hetgraph.io.store import PageStore, as_graph

ALGORITHMS = ("pagerank", "sssp")
# NetworkX's stop (change < N * tol) ends a large graph's PageRank after one iteration;
# a tiny tol makes every run do the same MAX iterations
PAGERANK_TOL, PAGERANK_MAX = 1e-15, 30
PAGERANK_RTOL = 1e-4  # float32 sums in another order differ in the last digits
PAGERANK_ATOL = 1e-7


def make(store, scale):
    graph = hg.generate.rmat(scale, edge_factor=16, seed=1, weights=(1.0, 10.0))
    graph.reorder("auto").save(store)
    print(json.dumps({"store": store, "vertices": graph.num_vertices,
                      "arcs": graph.num_arcs}))


def _run_one(algorithm, graph, devices):
    if algorithm == "pagerank":
        return hg.pagerank(graph, max_iterations=PAGERANK_MAX, tol=PAGERANK_TOL,
                           devices=devices, progress=False)
    source = 0 if graph.labels is None else graph.labels[0].item()  # the top hub
    return hg.sssp(graph, source, devices=devices, progress=False)


def run(address, store, out, devices):
    from distributed import get_task_stream

    graph = as_graph(PageStore(store))
    arrays, stats = {}, {}
    with hg.Cluster(address=address) as cluster:
        kind = {**{a: "cpu" for a in cluster.cpu_workers},
                **{a: f"gpu{i}" for i, a in enumerate(cluster.gpu_workers)}}
        for algorithm in ALGORITHMS:
            for device in devices:
                with get_task_stream(client=cluster.client) as stream:
                    start = time.perf_counter()
                    result = _run_one(algorithm, graph, device)
                    seconds = time.perf_counter() - start
                tasks = {}
                for task in stream.data:
                    who = kind.get(task.get("worker"), "other")
                    tasks[who] = tasks.get(who, 0) + 1
                key = f"{algorithm}-{device}"
                arrays[key] = np.asarray(result.values)
                stats[key] = {"seconds": round(seconds, 3), "iterations": result.iterations,
                              "converged": bool(result.converged), "tasks": tasks}
        workers = {"cpu": len(cluster.cpu_workers), "gpu": len(cluster.gpu_workers)}
    np.savez(out, **arrays)
    with open(out + ".json", "w") as f:
        json.dump({"workers": workers, "runs": stats}, f)


def _same(key, many, one):
    if key.startswith("pagerank"):
        return bool(np.allclose(many, one, rtol=PAGERANK_RTOL, atol=PAGERANK_ATOL))
    reached = np.isfinite(many) & (many >= 0)
    return bool(np.array_equal(reached, np.isfinite(one) & (one >= 0))
                and np.allclose(many[reached], one[reached], rtol=1e-6))


def compare(many_path, one_path):
    with np.load(many_path) as many, np.load(one_path) as one:
        with open(many_path + ".json") as f:
            many_stats = json.load(f)
        with open(one_path + ".json") as f:
            one_stats = json.load(f)
        runs = {}
        for key in many.files:
            a, b = many[key], one[key]
            finite = np.isfinite(a) & np.isfinite(b)
            runs[key] = {"same": _same(key, a, b),
                         "max_abs_diff": float(np.max(np.abs(a[finite] - b[finite]),
                                                      initial=0.0)),
                         "many": many_stats["runs"][key], "one": one_stats["runs"][key]}
    line = {"check": "multi-gpu", "ok": all(r["same"] for r in runs.values()),
            "many_workers": many_stats["workers"], "one_workers": one_stats["workers"],
            "runs": runs}
    print(json.dumps(line))
    return 0 if line["ok"] else 1


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("make")
    p.add_argument("store")
    p.add_argument("--scale", type=int, default=24)
    p = sub.add_parser("run")
    p.add_argument("address")
    p.add_argument("store")
    p.add_argument("out")
    p.add_argument("--devices", default="gpu,auto", help="comma-separated devices values")
    p = sub.add_parser("compare")
    p.add_argument("many")
    p.add_argument("one")
    args = parser.parse_args(argv)
    if args.command == "make":
        make(args.store, args.scale)
    elif args.command == "run":
        run(args.address, args.store, args.out, args.devices.split(","))
    else:
        return compare(args.many, args.one)
    return 0


if __name__ == "__main__":
    sys.exit(main())
