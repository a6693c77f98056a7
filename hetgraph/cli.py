"""`hetgraph` command line: `run` an algorithm on a graph file or page store, `convert` a
graph file into a page store, `info` about either, `verify` a page store (every check,
no algorithm), `cluster` (start a local CPU + GPU Dask cluster), and `demo` (PageRank
and SSSP on the bundled real graph).

Exit codes: 0 done, 1 a hetgraph error (one line; the traceback with --debug), 2 bad
usage."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time

from . import tuning
from .errors import GraphError, HetGraphError, StoreError


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
    """The bundled wiki-vote graph: layout, then PageRank and shortest paths (SSSP)
    from its top vertex, with original labels."""
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


def _is_store(path):
    return os.path.isdir(path) and os.path.exists(os.path.join(path, "manifest.json"))


def _load(path):
    from .io.readers import read
    from .io.store import open_store

    return open_store(path) if _is_store(path) else read(path)


ORDER_OPTION = dict(choices=("auto", "degree", "rcm", "none"), default="auto",
                    help="renumber the vertices for cache locality (results keep the "
                         "original labels): auto (by degree when a few hubs carry most "
                         "edges, else reverse Cuthill-McKee where the ids lack locality), "
                         "degree, rcm, none")


def _algorithms():
    """{command-line name: Algorithm} of the registered algorithms the CLI runs."""
    from . import algorithms  # noqa: F401 (importing the package registers them)
    from .registry import algorithms as registered

    return {a.name: a for a in registered() if a.cli}


def _source(graph, text):
    """The original label ``text`` names: an integer when the graph's labels are."""
    labels = graph.labels
    if labels is None or labels.dtype.kind in "iu":
        try:
            return int(text)
        except ValueError:
            pass
    return text


def _run(args):
    from .cluster import Cluster
    from .io.store import PageStore, as_graph

    algorithm = _algorithms()[args.algorithm]
    if algorithm.needs_source and args.source is None:
        raise GraphError(f"{args.algorithm} needs --source VERTEX (an original label)")
    graph = PageStore(args.input) if _is_store(args.input) else \
        _load(args.input).reorder(args.order)
    options = {"devices": args.devices, "mode": args.mode, "checkpoint": args.checkpoint,
               "resume": args.resume, "host_budget": args.host_budget,
               "progress": False if args.quiet else None}
    if args.iterations is not None:
        options[algorithm.iterations_option] = args.iterations
    arguments = (graph,)
    if algorithm.needs_source:
        graph = as_graph(graph, args.host_budget)
        arguments = (graph, _source(graph, args.source))
    with Cluster(address=args.scheduler, dashboard_address=None) if args.scheduler \
            else contextlib.nullcontext():
        result = algorithm.function(*arguments, **options)
    if args.out:
        result.save(args.out)
    state = "converged" if result.converged else "not converged"
    lines = [f"{args.algorithm}: {result.iterations} iterations ({result.mode}, {state}), "
             f"{result.seconds:.3f} s" + (f"; values written to {args.out}" if args.out else "")]
    if args.top:
        lines += [f"  {v!s:>12}  {x:g}" for v, x in _top(result, args.top, algorithm)]
    return "\n".join(lines)


def _top(result, k, algorithm):
    """(vertex, value) of the ``k`` vertices --top lists: the nearest reached ones for
    distances and levels, else the largest values."""
    if algorithm.smallest_first:
        frame = result.to_pandas()
        reached = (frame.value >= 0) & (frame.value < float("inf"))
        best = frame[reached].sort_values("value", kind="stable").head(k)
    else:
        best = result.top(k)
    return zip(best["vertex"], best["value"])


def _convert(args):
    from .io.store import convert

    store = convert(args.input, args.store, stripes=args.stripes or None,
                    overwrite=args.overwrite, page_bytes=args.page_bytes, order=args.order)
    return repr(store)


def _verify(args):
    from .io.store import PageStore

    key = None
    if args.key_file:
        try:
            with open(args.key_file, "rb") as f:
                key = f.read().strip()
        except OSError as exc:
            raise StoreError(f"{args.key_file}: cannot read the key ({exc.strerror})") from exc
    store = PageStore(args.store, key=key)
    checked = store.verify()
    return (f"{store.path}: ok{', signature matches' if key else ''} ({store.num_vertices:,} vertices, {store.num_arcs:,} arcs, "
            f"{store.num_pages} pages, {checked:,} bytes checked)")


def _cluster(args):
    from .cluster import Cluster

    with Cluster(cpu_workers=args.cpu_workers, processes=True,
                 dashboard_address=args.dashboard, host=args.host) as cluster:
        print(f"scheduler {cluster.client.scheduler.address} (hetgraph run --scheduler ...)",
              flush=True)
        link = cluster.dashboard_link
        print(f"dashboard {link} (hetgraph page {link.rsplit('/', 1)[0]}/hetgraph)" if link
              else "dashboard off (pip install 'hetgraph[dashboard]')", flush=True)
        print(f"workers: {len(cluster.cpu_workers)} CPU, {len(cluster.gpu_workers)} GPU; "
              f"Ctrl-C stops", flush=True)
        with _stopped_by_signals():
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                pass
    return "cluster stopped"


@contextlib.contextmanager
def _stopped_by_signals():
    """SIGINT and SIGTERM raise KeyboardInterrupt here, even in a process started where
    SIGINT is ignored (a background job of a script inherits that), then the previous
    handlers come back."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in previous:
        signal.signal(s, signal.default_int_handler)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def build_parser():
    """The argument parser; ``run``'s choices are the registered algorithms."""
    parser = argparse.ArgumentParser(prog="hetgraph", description=__doc__)
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="PageRank and SSSP on the bundled wiki-vote graph")
    demo.add_argument("--page-bytes", type=int, default=256 << 10)
    info = sub.add_parser("info", help="describe a graph file or page store")
    info.add_argument("input")
    info.add_argument("--page-bytes", type=int, default=tuning.PAGE_BYTES)
    run = sub.add_parser("run", help="run an algorithm on a graph file or page store")
    run.add_argument("algorithm", choices=list(_algorithms()))
    run.add_argument("input", help="graph file (any format hetgraph reads) or page store")
    run.add_argument("--source", help="source vertex (original label) for " + ", ".join(
        name for name, a in _algorithms().items() if a.needs_source))
    run.add_argument("--iterations", type=int, help="maximum iterations")
    run.add_argument("--devices", choices=("auto", "cpu", "gpu", "hybrid"), default="auto")
    run.add_argument("--mode", choices=("sync", "async", "colored"), default="sync")
    run.add_argument("--scheduler", help="address of a running Dask scheduler: tcp://host:port, or tls://host:port with Dask's TLS settings (see deploy/README.md)")
    run.add_argument("--out", help="write the values: FILE.parquet, .csv or .npy")
    run.add_argument("--checkpoint", help="checkpoint directory")
    run.add_argument("--resume", action="store_true", help="continue from --checkpoint")
    run.add_argument("--host-budget", type=int, help="host memory bytes for a page store")
    run.add_argument("--top", type=int, default=10, help="print the top K vertices (0: none)")
    run.add_argument("--order", **ORDER_OPTION)
    run.add_argument("--quiet", action="store_true",
                     help="no progress bar (there is none when stderr is not a terminal)")
    convert = sub.add_parser("convert", help="write a graph file as a page store")
    convert.add_argument("input")
    convert.add_argument("store")
    convert.add_argument("--stripes", nargs="*", help="one directory per disk")
    convert.add_argument("--page-bytes", type=int, default=tuning.PAGE_BYTES)
    convert.add_argument("--overwrite", action="store_true")
    convert.add_argument("--order", **ORDER_OPTION)
    verify = sub.add_parser("verify", help="check a page store (manifest, every block's "
                                           "checksum, structure) without running anything")
    verify.add_argument("store")
    verify.add_argument("--key-file", help="file holding the key the store was signed with "
                                           "(its signature and every block's SHA-256 are "
                                           "checked too)")
    cluster = sub.add_parser("cluster", help="start a local CPU + GPU Dask cluster (worker "
                                             "processes) and wait")
    cluster.add_argument("--cpu-workers", type=int, default=1)
    cluster.add_argument("--dashboard", default="127.0.0.1:8787", help="host:port")
    cluster.add_argument("--host", default="127.0.0.1",
                         help="address the scheduler and workers listen on (default: this "
                              "machine only; another exposes them to that network: whoever "
                              "reaches them runs code as you, so join remote workers over "
                              "TLS)")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        if args.command == "demo":
            print(_demo(args.page_bytes))
        elif args.command == "info":
            print(_describe(_load(args.input), args.page_bytes))
        else:
            print({"run": _run, "convert": _convert, "verify": _verify,
                   "cluster": _cluster}[args.command](args))
    except HetGraphError as exc:
        if args.debug:
            raise
        print(f"hetgraph: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
