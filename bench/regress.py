"""No-regression check: the same benchmark run on an old and a new tree, compared.

Usage: python bench/regress.py --old A.json [B.json ...] --new C.json [D.json ...]
           [--format gpu|hybrid] [--keys ...] [--tolerance 1.10]
           [--old-rev REV] [--new-rev REV] [--out bench/results/gpu-regression.json]

Each input is a bench JSON with a ``results`` list of rows named by ``graph`` (as
``bench/gpu.py`` writes), or ``bench/hybrid.py``'s (``--format hybrid``: a row for
each graph, algorithm and placement, its key ``seconds_per_iteration``; rows whose
iteration counts differ between the trees are left out: another algorithm ran). Runs of one tree are interleaved with the other's on one
machine; per graph and key, the best (smallest) seconds of each tree's runs are compared,
so that a run slowed by a neighbour does not count as a regression. A target per graph
and key: new seconds / old seconds <= ``--tolerance`` (default 1.10: the spread of
repeated runs of one tree on the small graphs).
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import describe  # noqa: E402


def hybrid_rows(results):
    """``bench/hybrid.py``'s results as rows: one per graph, algorithm and placement."""
    for entry in results:
        for placement, run in entry.get("runs", {}).items():
            if run.get("iterations"):
                yield {"graph": f"{entry['graph']} {entry['algorithm']} {placement}",
                       "seconds_per_iteration": run["seconds"] / run["iterations"],
                       "iterations": run["iterations"]}


def seconds_by_graph(paths, keys, form="gpu"):
    """{graph: {key: [seconds of each run that measured it]}} of the JSON files (their
    iteration counts under the key "iterations")."""
    found = {}
    for path in paths:
        with open(path) as f:
            results = json.load(f)["results"]
            for row in hybrid_rows(results) if form == "hybrid" else results:
                if "iterations" in row:
                    found.setdefault(row["graph"], {}).setdefault(
                        "iterations", set()).add(row["iterations"])
                for key in keys:
                    if isinstance(row.get(key), (int, float)):
                        found.setdefault(row["graph"], {}).setdefault(key, []).append(
                            float(row[key]))
    return found


def compare(old, new, tolerance):
    """(rows, targets) for every graph and key both trees measured."""
    rows, targets = [], []
    for graph in sorted(set(old) & set(new)):
        if old[graph].get("iterations") != new[graph].get("iterations"):
            continue
        for key in sorted(set(old[graph]) & set(new[graph]) - {"iterations"}):
            best_old, best_new = min(old[graph][key]), min(new[graph][key])
            ratio = best_new / best_old
            rows.append({"graph": graph, "key": key, "old_runs": old[graph][key],
                         "new_runs": new[graph][key], "new_over_old": ratio})
            targets.append({"name": f"{graph} {key}: new / old (best of runs)",
                            "value": round(ratio, 4), "target": tolerance,
                            "met": bool(ratio <= tolerance)})
    return rows, targets


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", nargs="+", required=True)
    parser.add_argument("--new", nargs="+", required=True)
    parser.add_argument("--format", choices=("gpu", "hybrid"), default="gpu")
    parser.add_argument("--keys", nargs="+", default=None,
                        help="default: pagerank_seconds streamed_seconds (gpu), "
                             "seconds_per_iteration (hybrid)")
    parser.add_argument("--tolerance", type=float, default=1.10)
    parser.add_argument("--old-rev", default="")
    parser.add_argument("--new-rev", default="")
    parser.add_argument("--out", default=os.path.join("bench", "results",
                                                      "gpu-regression.json"))
    args = parser.parse_args()
    with open(args.new[0]) as f:
        machine = json.load(f).get("machine", describe())
    keys = args.keys or (["seconds_per_iteration"] if args.format == "hybrid" else
                         ["pagerank_seconds", "streamed_seconds"])
    rows, targets = compare(seconds_by_graph(args.old, keys, args.format),
                            seconds_by_graph(args.new, keys, args.format), args.tolerance)
    for t in targets:
        print(f"{t['name']}: {t['value']:.3f} (<= {t['target']}: {t['met']})")
    with open(args.out, "w") as f:
        json.dump({"benchmark": "regress", "date": time.strftime("%Y-%m-%d"),
                   "machine": machine, "old_rev": args.old_rev, "new_rev": args.new_rev,
                   "results": rows, "targets": targets}, f, indent=1)


if __name__ == "__main__":
    main()
