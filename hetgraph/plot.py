"""A run's timeline as a matplotlib figure (``pip install 'hetgraph[plot]'``): per
iteration, the pages and seconds on each device kind, the CPU mode, alpha and f."""

from __future__ import annotations

import numpy as np

from .errors import MissingDependencyError

COLORS = {"cpu": "#2ca02c", "gpu": "#ff7f0e", "wall": "#7f7f7f", "alpha": "#d62728",
          "f": "#1f77b4"}
MODE_MARKS = {"pull": "P", "notify-pull": "N", "push": "U", "gpu-pull": "G", "gpu-push": "H",
              "gpu-tocab": "B", "colored": "C", "gpu-colored": "K"}


def timeline(history, title=None, path=None):
    """Figure of a run's timeline, in three panels sharing the iteration axis.

    The panels: pages per device kind (stacked bars, each labelled with its mode: P
    pull, N notify-pull, U push, G the GPU's pull, H its push, B its TOCAB pull, C and K
    colored passes); seconds per device kind with the wall time; alpha (CPU time / GPU time, the GPU takes part from 1) with f (active
    out-degree / |E|) on a log scale.

    Parameters
    ----------
    history : pandas.DataFrame
        A run's :attr:`hetgraph.Result.history`.
    title : str, optional
        The figure's title (default None: none).
    path : str or path-like, optional
        Also write the figure there: PNG, SVG or PDF by extension, at 120 dpi
        (default None: only return it).

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    MissingDependencyError
        When matplotlib is not installed (``pip install 'hetgraph[plot]'``).
    """
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise MissingDependencyError("Result.plot needs matplotlib: pip install "
                                     "'hetgraph[plot]'") from exc
    it = history["iteration"].to_numpy()
    figure, (pages, seconds, ratios) = plt.subplots(3, 1, sharex=True, figsize=(9, 7.5),
                                                   constrained_layout=True)
    _pages_panel(pages, it, history)
    _seconds_panel(seconds, it, history)
    _ratios_panel(ratios, it, history)
    if title:
        figure.suptitle(title)
    if path is not None:
        figure.savefig(path, dpi=120)
    return figure


def _pages_panel(axes, it, history):
    """Pages per device kind, stacked, each iteration's bar marked with its CPU mode."""
    cpu, gpu = history["cpu_pages"].to_numpy(), history["gpu_pages"].to_numpy()
    axes.bar(it, cpu, color=COLORS["cpu"], label="CPU pages")
    axes.bar(it, gpu, bottom=cpu, color=COLORS["gpu"], label="GPU pages")
    for x, top, mode in zip(it, cpu + gpu, history["mode"]):
        axes.annotate(MODE_MARKS.get(mode, "?"), (x, top), ha="center", va="bottom",
                      fontsize=7, xytext=(0, 1), textcoords="offset points")
    axes.set_ylabel("pages")
    axes.margins(y=0.15)
    axes.legend(loc="upper right", fontsize=8,
                title="P pull, N notify-pull, U push, G/H/B GPU pull/push/TOCAB, "
                      "C/K colored", title_fontsize=7)


def _seconds_panel(axes, it, history):
    """Seconds per device kind, side by side, and the iteration's wall time."""
    cpu_s, gpu_s = history["cpu_seconds"].to_numpy(), history["gpu_seconds"].to_numpy()
    width = 0.4
    axes.bar(it - width / 2, cpu_s, width, color=COLORS["cpu"], label="CPU")
    axes.bar(it + width / 2, gpu_s, width, color=COLORS["gpu"], label="GPU")
    axes.plot(it, history["seconds"], color=COLORS["wall"], marker=".", label="wall")
    axes.set_ylabel("seconds")
    axes.legend(loc="upper right", fontsize=8)


def _ratios_panel(axes, it, history):
    """alpha and f, on a log scale when some are positive, with a line at 1."""
    positive = history[["alpha", "f"]].to_numpy(float) > 0  # what a log axis can show
    for column, name in enumerate(("alpha", "f")):
        shown = np.where(positive[:, column], history[name].to_numpy(float), np.nan)
        axes.plot(it, shown, color=COLORS[name], marker=".", label=name)
    axes.axhline(1.0, color=COLORS["wall"], linestyle="--", linewidth=0.8)
    if positive.any():
        axes.set_yscale("log")
    axes.set_ylabel("alpha, f")
    axes.set_xlabel("iteration")
    axes.legend(loc="upper right", fontsize=8)
