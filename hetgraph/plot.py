"""A run's timeline as a matplotlib figure (``pip install 'hetgraph[plot]'``): per
iteration, the pages and seconds on each device kind, the CPU mode, alpha and f."""

from __future__ import annotations

import numpy as np

from .errors import MissingDependencyError

COLORS = {"cpu": "#2ca02c", "gpu": "#ff7f0e", "wall": "#7f7f7f", "alpha": "#d62728",
          "f": "#1f77b4"}
MODE_MARKS = {"pull": "P", "notify-pull": "N", "push": "U", "gpu-pull": "G"}


def timeline(history, title=None, path=None):
    """Figure of a run's ``history`` (a Result.history DataFrame) in three panels sharing
    the iteration axis: pages per device kind (stacked bars, each labelled with its CPU
    mode: P pull, N notify-pull, U push, G the GPU's pull), seconds per device kind with the
    wall time, and alpha (CPU time / GPU time, the GPU takes part from 1) with f
    (active out-degree / |E|) on a log scale. ``path``: also write it there (PNG, SVG or
    PDF by extension, 120 dpi). Returns the matplotlib Figure."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise MissingDependencyError("Result.plot needs matplotlib: pip install "
                                     "'hetgraph[plot]'") from exc
    it = history["iteration"].to_numpy()
    figure, (pages, seconds, ratios) = plt.subplots(3, 1, sharex=True, figsize=(9, 7.5),
                                                   constrained_layout=True)
    cpu, gpu = history["cpu_pages"].to_numpy(), history["gpu_pages"].to_numpy()
    pages.bar(it, cpu, color=COLORS["cpu"], label="CPU pages")
    pages.bar(it, gpu, bottom=cpu, color=COLORS["gpu"], label="GPU pages")
    for x, top, mode in zip(it, cpu + gpu, history["mode"]):
        pages.annotate(MODE_MARKS.get(mode, "?"), (x, top), ha="center", va="bottom",
                       fontsize=7, xytext=(0, 1), textcoords="offset points")
    pages.set_ylabel("pages")
    pages.margins(y=0.15)
    pages.legend(loc="upper right", fontsize=8, title="P pull, N notify-pull, U push, G GPU pull",
                 title_fontsize=7)
    cpu_s, gpu_s = history["cpu_seconds"].to_numpy(), history["gpu_seconds"].to_numpy()
    width = 0.4
    seconds.bar(it - width / 2, cpu_s, width, color=COLORS["cpu"], label="CPU")
    seconds.bar(it + width / 2, gpu_s, width, color=COLORS["gpu"], label="GPU")
    seconds.plot(it, history["seconds"], color=COLORS["wall"], marker=".", label="wall")
    seconds.set_ylabel("seconds")
    seconds.legend(loc="upper right", fontsize=8)
    positive = history[["alpha", "f"]].to_numpy(float) > 0  # what a log axis can show
    for column, name in enumerate(("alpha", "f")):
        shown = np.where(positive[:, column], history[name].to_numpy(float), np.nan)
        ratios.plot(it, shown, color=COLORS[name], marker=".", label=name)
    ratios.axhline(1.0, color=COLORS["wall"], linestyle="--", linewidth=0.8)
    if positive.any():
        ratios.set_yscale("log")
    ratios.set_ylabel("alpha, f")
    ratios.set_xlabel("iteration")
    ratios.legend(loc="upper right", fontsize=8)
    if title:
        figure.suptitle(title)
    if path is not None:
        figure.savefig(path, dpi=120)
    return figure
