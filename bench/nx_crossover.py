"""Where the NetworkX backend starts to beat NetworkX: the crossover, in arcs, of every
function hetgraph.nx_backend answers (issue 57, item 5), for ``tuning.NX_MIN_ARCS``.

Usage: python bench/nx_crossover.py [--out bench/results/nx_crossover.json]
           [--rounds 5] [--scales 4 ... 16]

For each function, on RMAT graphs of 2**scale vertices (edge factor 8; directed,
undirected or weighted as the function needs) of growing scale: the warm wall seconds
of ``nx.<function>(G, backend="hetgraph")`` (every call on hetgraph:
``tuning.NX_MIN_ARCS`` emptied; the graph's conversion done by two untimed calls, as
NetworkX caches it on G) and of NetworkX's own call, ``--rounds`` rounds of the two in
turn; each side's fastest round counts (the machine is shared: a slow round measures
the neighbours), medians are reported too. A function's scales stop two scales after
hetgraph is first faster.

The crossover is where the fastest times cross, interpolated in log-log between the
largest graph hetgraph loses on and the next (where it wins); ``NX_MIN_ARCS`` in
hetgraph/tuning.py holds it rounded to two significant digits. ``targets``: for each
function, hetgraph is faster at every measured size above its crossover.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), ROOT]  # this checkout's hetgraph
from machine import describe, settle  # noqa: E402

EDGE_FACTOR = 8
WINS_AFTER = 2  # scales measured after hetgraph's first win


def hubs(G, count):
    """The ``count`` nodes of largest out-degree (sources that reach most of G)."""
    degree = G.out_degree if G.is_directed() else G.degree
    return [n for n, _ in sorted(degree, key=lambda item: -item[1])[:count]]


def katz_alpha(G):
    """An alpha below 1 / (the largest eigenvalue of A): 1 / (max degree + 1)."""
    degree = G.in_degree if G.is_directed() else G.degree
    return 1.0 / (max(d for _, d in degree) + 1)


# function -> (graph kind: "directed", "undirected" or "weighted"; call(nx, G, **backend))
CALLS = {
    "pagerank": ("weighted", lambda nx, G, **b: nx.pagerank(G, **b)),
    "hits": ("directed", lambda nx, G, **b: nx.hits(G, **b)),
    "eigenvector_centrality": ("undirected", lambda nx, G, **b: nx.eigenvector_centrality(
        G, max_iter=1000, **b)),
    "katz_centrality": ("undirected", lambda nx, G, **b: nx.katz_centrality(
        G, alpha=katz_alpha(G), **b)),
    "single_source_dijkstra_path_length": ("weighted", lambda nx, G, **b:
                                           nx.single_source_dijkstra_path_length(
                                               G, hubs(G, 1)[0], **b)),
    "multi_source_dijkstra_path_length": ("weighted", lambda nx, G, **b:
                                          nx.multi_source_dijkstra_path_length(
                                              G, hubs(G, 3), **b)),
    "single_source_bellman_ford_path_length": ("weighted", lambda nx, G, **b:
                                               nx.single_source_bellman_ford_path_length(
                                                   G, hubs(G, 1)[0], **b)),
    "shortest_path_length": ("directed", lambda nx, G, **b: nx.shortest_path_length(
        G, hubs(G, 1)[0], **b)),
    "single_source_shortest_path_length": ("directed", lambda nx, G, **b:
                                           nx.single_source_shortest_path_length(
                                               G, hubs(G, 1)[0], **b)),
    "bfs_layers": ("directed", lambda nx, G, **b: list(nx.bfs_layers(G, hubs(G, 1)[0],
                                                                     **b))),
    "connected_components": ("undirected", lambda nx, G, **b:
                             list(nx.connected_components(G, **b))),
    "weakly_connected_components": ("directed", lambda nx, G, **b:
                                    list(nx.weakly_connected_components(G, **b))),
    "number_connected_components": ("undirected", lambda nx, G, **b:
                                    nx.number_connected_components(G, **b)),
    "is_connected": ("undirected", lambda nx, G, **b: nx.is_connected(G, **b)),
    "is_weakly_connected": ("directed", lambda nx, G, **b: nx.is_weakly_connected(G, **b)),
    "node_connected_component": ("undirected", lambda nx, G, **b:
                                 nx.node_connected_component(G, hubs(G, 1)[0], **b)),
}


def networkx_graph(kind, scale):
    """The RMAT graph of ``scale`` as NetworkX holds it (integer weights 1..9 when
    weighted: float32 holds them, so Dijkstra does not fall back)."""
    import networkx as nx

    import hetgraph as hg

    g = hg.generate.rmat(scale, EDGE_FACTOR, seed=1, directed=kind != "undirected")
    G = nx.DiGraph() if g.directed else nx.Graph()
    G.add_nodes_from(range(g.num_vertices))
    src, dst, _ = g.edges()
    if kind == "weighted":
        weights = np.random.default_rng(scale).integers(1, 10, len(src))
        G.add_weighted_edges_from(zip(src.tolist(), dst.tolist(), weights.tolist()))
    else:
        G.add_edges_from(zip(src.tolist(), dst.tolist()))
    return G, g.num_arcs


def timed(fn):
    settle()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(name, G, rounds):
    """{side: [seconds of each warm call]} for "hetgraph" and "networkx", in turns."""
    import networkx as nx

    call = CALLS[name][1]
    ours = lambda: call(nx, G, backend="hetgraph")  # noqa: E731
    theirs = lambda: call(nx, G)  # noqa: E731
    ours(), ours(), theirs()  # convert, compile, warm
    times = {"hetgraph": [], "networkx": []}
    for _ in range(rounds):
        times["hetgraph"].append(timed(ours))
        times["networkx"].append(timed(theirs))
    return times


def crossover(points):
    """Arcs where hetgraph's time meets NetworkX's (log-log interpolation between the
    last loss and the following win), from [(arcs, hetgraph s, networkx s)]; 0 when it
    wins from the smallest graph, None when it never wins."""
    last_loss = max((i for i, (_, ours, theirs) in enumerate(points) if ours >= theirs),
                    default=None)
    if last_loss is None:
        return 0
    if last_loss == len(points) - 1:
        return None
    (a0, o0, t0), (a1, o1, t1) = points[last_loss], points[last_loss + 1]
    r0, r1 = math.log(o0 / t0), math.log(o1 / t1)  # >= 0, then < 0
    x = math.log(a0) + (math.log(a1) - math.log(a0)) * r0 / (r0 - r1)
    return int(round(math.exp(x)))


def bench_function(name, scales, rounds, graphs):
    points, medians = [], []
    wins = 0
    for scale in scales:
        kind = CALLS[name][0]
        if (kind, scale) not in graphs:
            graphs[(kind, scale)] = networkx_graph(kind, scale)
        G, arcs = graphs[(kind, scale)]
        times = measure(name, G, rounds)
        ours, theirs = min(times["hetgraph"]), min(times["networkx"])
        points.append((arcs, ours, theirs))
        medians.append({side: statistics.median(t) for side, t in times.items()})
        print(f"{name:40s} scale {scale:2d} arcs {arcs:8d}  hetgraph {ours * 1e3:9.3f} ms"
              f"  networkx {theirs * 1e3:9.3f} ms (fastest)", flush=True)
        wins = wins + 1 if ours < theirs else 0
        if wins > WINS_AFTER:
            break
    return {"function": name, "graph": CALLS[name][0], "crossover_arcs": crossover(points),
            "points": [{"arcs": a, "hetgraph_s": o, "networkx_s": t,
                        "hetgraph_median_s": m["hetgraph"], "networkx_median_s": m["networkx"]}
                       for (a, o, t), m in zip(points, medians)]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "results",
                                                      "nx_crossover.json"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scales", type=int, nargs="*", default=list(range(4, 17)))
    parser.add_argument("--functions", nargs="*", default=list(CALLS))
    args = parser.parse_args()
    from hetgraph import tuning

    tuning.NX_MIN_ARCS = {}  # every backend call on hetgraph
    warnings.simplefilter("ignore")
    graphs = {}
    rows = [bench_function(name, args.scales, args.rounds, graphs) for name in args.functions]
    targets = []
    for row in rows:
        at = row["crossover_arcs"]
        above = [p for p in row["points"] if at is not None and p["arcs"] > at]
        met = at is not None and all(p["hetgraph_s"] < p["networkx_s"] for p in above)
        targets.append({"name": f"{row['function']}: hetgraph faster above the crossover",
                        "value": at, "target": "faster at every measured size above it",
                        "met": met})
    result = {"benchmark": "nx_crossover", "machine": describe(), "rounds": args.rounds,
              "edge_factor": EDGE_FACTOR, "targets": targets, "rows": rows,
              "nx_min_arcs": {row["function"]: row["crossover_arcs"] for row in rows}}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result["nx_min_arcs"], indent=1))
    print("wrote", args.out)


if __name__ == "__main__":
    main()
