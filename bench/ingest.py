"""Ingest benchmark: text edge list -> Graph -> page store, in edges/s, against
pandas.read_csv and pyarrow.csv.read_csv + scipy.sparse COO->CSC on the same file.

Usage: python bench/ingest.py [--scale 20] [--out bench/results/ingest.json]
Files are written under bench/work/ (ignored by git).
"""

import argparse
import json
import os
import shutil
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hetgraph as hg  # noqa: E402
from machine import describe  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(ROOT, "bench", "work")


def write_edge_list(path, scale):
    """RMAT edges (ids as generated, duplicates kept) as a tab-separated text file."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    g = hg.generate.rmat(scale, seed=7, dedup=None, self_loops=True)
    src, dst, _ = g.edges()
    order = np.random.default_rng(0).permutation(len(src))   # file order is not sorted
    table = pa.table({"s": src[order], "d": dst[order]})
    pacsv.write_csv(table, path, pacsv.WriteOptions(include_header=False, delimiter="\t"))


def best_of(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def bench_file(path, repeat, skip_rows):
    import pandas as pd
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import scipy.sparse as sp

    size = os.path.getsize(path)
    store = os.path.join(WORK, "store")

    def hetgraph_read():
        return hg.read(path, format="snap")

    def hetgraph_read_raw():
        return hg.read(path, format="snap", relabel=False, dedup=None)

    def hetgraph_save(g):
        shutil.rmtree(store, ignore_errors=True)
        g.save(store)

    def to_csc(s, d):
        n = int(max(s.max(), d.max())) + 1
        return sp.coo_matrix((np.ones(len(s), np.float32), (s, d)), shape=(n, n)).tocsc()

    def pandas_csc():
        df = pd.read_csv(path, sep="\t", header=None, comment="#", dtype=np.int64,
                         engine="c", skiprows=skip_rows)
        return to_csc(df[0].to_numpy(), df[1].to_numpy())

    def pyarrow_csc():
        t = pacsv.read_csv(path, read_options=pacsv.ReadOptions(autogenerate_column_names=True,
                                                                 skip_rows=skip_rows),
                           parse_options=pacsv.ParseOptions(delimiter="\t"),
                           convert_options=pacsv.ConvertOptions(column_types={
                               "f0": pa.int64(), "f1": pa.int64()}))
        return to_csc(t.column(0).to_numpy(), t.column(1).to_numpy())

    hetgraph_read()  # compile / warm the page cache
    t_read, g = best_of(hetgraph_read, repeat)
    t_raw, _ = best_of(hetgraph_read_raw, repeat)
    t_save, _ = best_of(lambda: hetgraph_save(g), repeat)
    t_pandas, _ = best_of(pandas_csc, repeat)
    t_arrow, ref = best_of(pyarrow_csc, repeat)
    m_in = int(sum(1 for _ in open(path, "rb")) - skip_rows)
    result = {
        "file": os.path.basename(path), "bytes": size, "edge_lines": m_in,
        "graph": g.summary(),
        "seconds": {"hetgraph_read": t_read, "hetgraph_read_no_relabel_no_dedup": t_raw,
                    "hetgraph_save_store": t_save, "pandas_read_csv+scipy_csc": t_pandas,
                    "pyarrow_read_csv+scipy_csc": t_arrow},
        "edges_per_second": {"hetgraph_read": m_in / t_read,
                             "hetgraph_read_no_relabel_no_dedup": m_in / t_raw,
                             "hetgraph_read+save": m_in / (t_read + t_save),
                             "pandas_read_csv+scipy_csc": m_in / t_pandas,
                             "pyarrow_read_csv+scipy_csc": m_in / t_arrow},
        "ratio_vs_pandas": t_pandas / t_read,
        "ratio_vs_pyarrow": t_arrow / t_read,
        "ratio_no_relabel_vs_pyarrow": t_arrow / t_raw,
        "scipy_csc_nnz": int(ref.nnz),
    }
    shutil.rmtree(store, ignore_errors=True)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--real", default=os.path.join(ROOT, "..", "shared", "data", "wiki-Vote.txt"))
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "ingest.json"))
    args = parser.parse_args()
    os.makedirs(WORK, exist_ok=True)
    results = []
    if os.path.exists(args.real):
        results.append(bench_file(args.real, args.repeat, skip_rows=4))
    path = os.path.join(WORK, f"rmat{args.scale}.tsv")
    if not os.path.exists(path):
        write_edge_list(path, args.scale)
    results.append(bench_file(path, args.repeat, skip_rows=0))
    out = {"benchmark": "ingest", "date": time.strftime("%Y-%m-%d"), "machine": describe(),
           "note": "best of --repeat runs; edges/s counts edge lines of the text file; "
                   "hetgraph_read builds CSC+CSR with relabel and de-duplication, "
                   "the peers build a scipy CSC (duplicates summed)",
           "results": results}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    for r in results:
        print(r["file"], {k: f"{v / 1e6:.1f} M/s" for k, v in r["edges_per_second"].items()},
              f"vs pandas {r['ratio_vs_pandas']:.2f}x, vs pyarrow {r['ratio_vs_pyarrow']:.2f}x")


if __name__ == "__main__":
    main()
