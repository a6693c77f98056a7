"""`hetgraph` command line: `demo` (PageRank and SSSP on the bundled real graph) and
`info INPUT|STORE`."""

from __future__ import annotations

import argparse
import os
import sys

from .errors import HetGraphError


def _describe(graph, page_bytes):
    part = graph.partition(page_bytes=page_bytes)
    lines = [graph.summary(),
             f"in-degree max {graph.in_degree().max():,}, out-degree max "
             f"{graph.out_degree().max():,}",
             f"{part.num_shards:,} shards, {part.num_pages:,} pages of <= "
             f"{page_bytes / 2**20:g} MiB"]
    table = part.page_table()
    lines.append(table.to_string(index=False, max_rows=12))
    return "\n".join(lines)


def _demo(page_bytes, top=5):
    """The bundled wiki-vote graph: layout, then PageRank and BFS hops from its top
    vertex, with original labels."""
    from . import datasets
    from .algorithms import pagerank, sssp

    graph = datasets.load("wiki-vote")
    lines = [_describe(graph, page_bytes), ""]
    ranks = pagerank(graph)
    best = ranks.to_series().nlargest(top)
    lines.append(f"PageRank ({ranks.iterations} iterations, "
                 f"{'converged' if ranks.converged else 'not converged'}, "
                 f"{ranks.seconds * 1e3:.1f} ms): top {top} voters by rank")
    lines += [f"  {label:>8}  {value:.6f}" for label, value in best.items()]
    source = best.index[0]
    hops = sssp(graph, source)
    reached = hops.values[hops.values < float("inf")]
    modes = hops.history["mode"].value_counts().to_dict()
    lines.append(f"SSSP from {source} ({hops.iterations} iterations, modes {modes}): "
                 f"{len(reached):,} vertices reached, farthest {reached.max():g} hops, "
                 f"mean {reached.mean():.2f}")
    return "\n".join(lines)


def _load(path):
    from .io.readers import read
    from .io.store import open_store

    if os.path.isdir(path) and os.path.exists(os.path.join(path, "manifest.json")):
        return open_store(path)
    return read(path)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="hetgraph", description=__doc__)
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="PageRank and SSSP on the bundled wiki-vote graph")
    demo.add_argument("--page-bytes", type=int, default=256 << 10)
    info = sub.add_parser("info", help="describe a graph file or page store")
    info.add_argument("input")
    info.add_argument("--page-bytes", type=int, default=32 << 20)
    args = parser.parse_args(argv)
    try:
        if args.command == "demo":
            print(_demo(args.page_bytes))
        else:
            print(_describe(_load(args.input), args.page_bytes))
    except HetGraphError as exc:
        if args.debug:
            raise
        print(f"hetgraph: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
