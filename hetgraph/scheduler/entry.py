"""The dispatcher as the algorithms call it, imported on first use: it brings Dask
with it, which a run on the direct path (:mod:`.direct`) never needs, and a new
process's first call would wait for."""

from __future__ import annotations


def run(program, graph, **options):
    """:func:`hetgraph.scheduler.dispatcher.run` (see there), imported on first use; the
    GPU's check starts in a thread first, so that CUDA's start overlaps the import."""
    from ..kernels.gpu.device import probe_in_background

    probe_in_background()
    from .dispatcher import run as dispatch

    return dispatch(program, graph, **options)
