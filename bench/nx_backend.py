"""The NetworkX backend against NetworkX itself (issue 57, item 4): every function the
backend runs natively, on the bundled graphs and an RMAT-20.

Usage: python bench/nx_backend.py [--out bench/results/networkx.json] [--rounds 5]
           [--scale 20] [--graphs wiki-vote power rmat] [--functions ...] [--append]

Graphs: hg.datasets "wiki-vote" (directed) and "power" (undirected), and
``hg.generate.rmat(scale, seed=1)`` (directed, edge factor 16, as bench/cpu.py builds
RMAT-20), each as a NetworkX graph without edge weights (Dijkstra and Bellman-Ford
then weigh every edge 1). A function runs on the graphs of the direction it accepts
(connected_components and its kin on undirected graphs, weakly_* on directed ones).

For each function and graph: ``nx.<function>(G, ..., backend="hetgraph")`` warm (two
untimed calls first: NetworkX caches the converted graph on G; the first call's
seconds, conversion and compilation, are reported as ``first_call_s``) and NetworkX's
own call, ``--rounds`` rounds in turn (one on graphs over ``BIG_ARCS`` arcs); each
side's fastest round counts (the machine is shared: a slow round measures the
neighbours), medians are reported too; the speedup is NetworkX's fastest over
hetgraph's. Every answer is checked against NetworkX's (the same nodes; equal values,
within 1e-5 relative for the iterative methods), and every call must run natively (no
NetworkXFallbackWarning). ``--append`` merges the rows into those of ``--out`` (one row
per graph and function), so that a long run can be split.

(Named nx_backend.py, not networkx.py: a script's folder comes first on sys.path, and
that name would shadow the networkx package for every script in bench/.)

``targets``: on each graph of at least ``TARGET_ARCS`` arcs, the backend is faster
than NetworkX for every function.
"""

import argparse
import json
import os
import statistics
import sys
import time
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), ROOT]  # this checkout's hetgraph
from machine import describe, settle  # noqa: E402

BIG_ARCS = 5_000_000  # one round above this: a NetworkX call takes minutes
QUICK_SECONDS = 0.05  # ... unless both calls are quicker: one round would time noise
TARGET_ARCS = 100_000


def arguments(G):
    """What the calls take besides G, computed once a graph (outside the timings): the
    node of largest out-degree, the three largest, a Katz alpha below 1 / (the largest
    eigenvalue of A), i.e. 1 / (max in-degree + 1), a personalization on ten hubs and
    dangling weights on five of them (other than the personalization)."""
    degree = G.out_degree if G.is_directed() else G.degree
    ranked = [n for n, _ in sorted(degree, key=lambda item: -item[1])[:10]]
    in_degree = G.in_degree if G.is_directed() else G.degree
    return {"hub": ranked[0], "hubs": ranked[:3],
            "alpha": 1.0 / (max(d for _, d in in_degree) + 1),
            "personalization": dict.fromkeys(ranked, 1.0),
            "dangling": dict.fromkeys(ranked[:5], 1.0)}


# label -> (graphs it runs on: "directed", "undirected" or "both";
#           call(nx, G, a, **backend), a: the graph's arguments())
CALLS = {
    "pagerank": ("both", lambda nx, G, a, **b: nx.pagerank(G, **b)),
    "pagerank (personalization)": ("both", lambda nx, G, a, **b: nx.pagerank(
        G, personalization=a["personalization"], **b)),
    "pagerank (dangling)": ("both", lambda nx, G, a, **b: nx.pagerank(
        G, personalization=a["personalization"], dangling=a["dangling"], **b)),
    "hits": ("directed", lambda nx, G, a, **b: nx.hits(G, **b)),
    "eigenvector_centrality": ("both", lambda nx, G, a, **b: nx.eigenvector_centrality(
        G, max_iter=1000, **b)),
    "katz_centrality": ("both", lambda nx, G, a, **b: nx.katz_centrality(
        G, alpha=a["alpha"], **b)),
    "single_source_dijkstra_path_length": ("both", lambda nx, G, a, **b:
                                           nx.single_source_dijkstra_path_length(
                                               G, a["hub"], **b)),
    "multi_source_dijkstra_path_length": ("both", lambda nx, G, a, **b:
                                          nx.multi_source_dijkstra_path_length(
                                              G, a["hubs"], **b)),
    "single_source_bellman_ford_path_length": ("both", lambda nx, G, a, **b:
                                               nx.single_source_bellman_ford_path_length(
                                                   G, a["hub"], **b)),
    "shortest_path_length (source)": ("both", lambda nx, G, a, **b:
                                      nx.shortest_path_length(G, a["hub"], **b)),
    "shortest_path_length (target)": ("both", lambda nx, G, a, **b:
                                      nx.shortest_path_length(G, target=a["hub"], **b)),
    "single_source_shortest_path_length": ("both", lambda nx, G, a, **b:
                                           nx.single_source_shortest_path_length(
                                               G, a["hub"], **b)),
    "bfs_layers": ("both", lambda nx, G, a, **b: [set(layer) for layer in nx.bfs_layers(
        G, a["hub"], **b)]),
    "connected_components": ("undirected", lambda nx, G, a, **b: sorted(
        map(sorted, nx.connected_components(G, **b)))),
    "number_connected_components": ("undirected", lambda nx, G, a, **b:
                                    nx.number_connected_components(G, **b)),
    "is_connected": ("undirected", lambda nx, G, a, **b: nx.is_connected(G, **b)),
    "node_connected_component": ("undirected", lambda nx, G, a, **b:
                                 nx.node_connected_component(G, a["hub"], **b)),
    "weakly_connected_components": ("directed", lambda nx, G, a, **b: sorted(
        map(sorted, nx.weakly_connected_components(G, **b)))),
    "is_weakly_connected": ("directed", lambda nx, G, a, **b:
                            nx.is_weakly_connected(G, **b)),
}
APPROXIMATE = ("pagerank", "hits", "eigenvector", "katz")  # iterative: within 1e-5


def networkx_graph(g):
    import networkx as nx

    G = nx.DiGraph() if g.directed else nx.Graph()
    labels = g.label_of(np.arange(g.num_vertices)).tolist()
    G.add_nodes_from(labels)
    src, dst, _ = g.edges()
    G.add_edges_from((labels[u], labels[v]) for u, v in zip(src.tolist(), dst.tolist()))
    return G


def same(label, ours, theirs):
    """Whether the backend's answer equals NetworkX's (iterative methods to 1e-5)."""
    if isinstance(theirs, tuple):
        return all(same(label, a, b) for a, b in zip(ours, theirs))
    if isinstance(theirs, dict) and label.startswith(APPROXIMATE):
        return set(ours) == set(theirs) and all(
            abs(ours[k] - theirs[k]) <= 1e-5 * abs(theirs[k]) + 1e-12 for k in theirs)
    return ours == theirs


def timed(fn):
    settle()
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def bench(label, G, given, arcs, rounds, quick_rounds):
    """One function's row: ``rounds`` rounds in turn, ``quick_rounds`` when both calls
    take under ``QUICK_SECONDS`` (a big graph's one round would time noise)."""
    import networkx as nx

    from hetgraph.nx_backend import NetworkXFallbackWarning

    call = CALLS[label][1]
    with warnings.catch_warnings():
        warnings.simplefilter("error", NetworkXFallbackWarning)
        _, first = timed(lambda: call(nx, G, given, backend="hetgraph"))  # converts
        call(nx, G, given, backend="hetgraph")
        ours, theirs = [], []
        while len(ours) < rounds:
            answer, seconds = timed(lambda: call(nx, G, given, backend="hetgraph"))
            ours.append(seconds)
            expected, seconds = timed(lambda: call(nx, G, given))
            theirs.append(seconds)
            if max(ours[0], theirs[0]) < QUICK_SECONDS:
                rounds = max(rounds, quick_rounds)
    row = {"function": label, "arcs": arcs, "rounds": rounds, "first_call_s": first,
           "hetgraph_s": min(ours), "networkx_s": min(theirs),
           "hetgraph_median_s": statistics.median(ours),
           "networkx_median_s": statistics.median(theirs),
           "same_answer": same(label, answer, expected)}
    row["speedup"] = row["networkx_s"] / row["hetgraph_s"]
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "results",
                                                      "networkx.json"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scale", type=int, default=20)
    parser.add_argument("--graphs", nargs="*", default=["wiki-vote", "power", "rmat"])
    parser.add_argument("--functions", nargs="*", default=list(CALLS))
    parser.add_argument("--append", action="store_true",
                        help="keep the rows of --out of other graphs or functions")
    args = parser.parse_args()
    import networkx as nx

    import hetgraph as hg
    from hetgraph import tuning

    nx.config.warnings_to_ignore.add("cache")  # (the cached conversion is what is timed)
    nx_min_arcs = dict(tuning.NX_MIN_ARCS)
    rows = []
    for name in args.graphs:
        g = hg.generate.rmat(args.scale, seed=1) if name == "rmat" else hg.datasets.load(name)
        label = f"rmat-{args.scale}" if name == "rmat" else name
        start = time.perf_counter()
        G = networkx_graph(g)
        print(f"{label}: {g.num_vertices} vertices, {g.num_arcs} arcs; NetworkX graph in "
              f"{time.perf_counter() - start:.1f} s", flush=True)
        rounds = 1 if g.num_arcs > BIG_ARCS else args.rounds
        given = arguments(G)
        for function in args.functions:
            if CALLS[function][0] not in ("both", "directed" if g.directed else "undirected"):
                continue
            row = {"graph": label, **bench(function, G, given, g.num_arcs, rounds,
                                           args.rounds)}
            row["below_crossover"] = g.num_arcs < nx_min_arcs.get(function.split(" ")[0], 0)
            rows.append(row)
            write(args, rows)
            print(f"{label:>10} {function:<40} hetgraph {row['hetgraph_s']:9.4f} s  "
                  f"networkx {row['networkx_s']:9.4f} s  {row['speedup']:8.1f}x  "
                  f"first {row['first_call_s']:7.2f} s  same {row['same_answer']}",
                  flush=True)
        del G, g
    write(args, rows, final=True)


def write(args, rows, final=False):
    """Write the rows so far (with --append, after the other graphs' rows of --out) and
    their targets: a long run keeps what it measured if it is stopped."""
    kept = []
    if args.append and os.path.exists(args.out):
        with open(args.out) as f:
            measured = {(row["graph"], row["function"]) for row in rows}
            kept = [row for row in json.load(f)["rows"]
                    if (row["graph"], row["function"]) not in measured]
    rows = kept + rows
    targets = [{"name": f"{r['graph']} {r['function']}: faster than NetworkX",
                "value": round(r["speedup"], 2), "target": "> 1",
                "met": r["speedup"] > 1 and r["same_answer"]}
               for r in rows if r["arcs"] >= TARGET_ARCS]
    result = {"benchmark": "networkx", "machine": describe(), "targets": targets,
              "rows": rows}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".tmp", "w") as f:
        json.dump(result, f, indent=1)
    os.replace(args.out + ".tmp", args.out)
    if final:
        print(f"targets met: {sum(t['met'] for t in targets)} of {len(targets)}")
        print("wrote", args.out)


if __name__ == "__main__":
    main()
