"""The dispatcher as the algorithms call it, imported on first use: it brings Dask
with it, which a run on the direct path (:mod:`.direct`) never needs, and a new
process's first call would wait for."""

from __future__ import annotations


def run(program, graph, **options):
    """:func:`hetgraph.scheduler.dispatcher.run` (see there), imported on first use; the
    GPU's check starts in a thread first, so that CUDA's start overlaps the import, and
    so does a GPU run's page layout (:mod:`.ahead`)."""
    from ..kernels.gpu.device import probe_in_background
    from .ahead import lay_out_ahead

    probe_in_background()
    lay_out_ahead(program, graph, options)
    from .dispatcher import run as dispatch

    return dispatch(program, graph, **options)
