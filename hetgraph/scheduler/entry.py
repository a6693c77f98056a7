"""The dispatcher as the algorithms call it, imported on first use: it brings Dask
with it, which a run on the direct path (:mod:`.direct`) never needs, and a new
process's first call would wait for."""

from __future__ import annotations


_DISPATCH: dict = {}  # "run": the dispatcher's, once imported


def run(program, graph, **options):
    """:func:`hetgraph.scheduler.dispatcher.run` (see there), imported on first use."""
    dispatch = _DISPATCH.get("run")
    if dispatch is None:
        dispatch = _import_dispatcher(program, graph, options)
    return dispatch(program, graph, **options)


def _import_dispatcher(program, graph, options):
    """The dispatcher's ``run``, imported while the GPU's check (CUDA's start), the
    program's derived arrays and a GPU run's page layout go on in threads
    (:mod:`.ahead`): the first run of a process waits for the import, not for them."""
    from ..kernels.gpu.device import probe_in_background
    from . import ahead

    probe_in_background()
    derived, _ = ahead.start(program, graph, options)
    from .dispatcher import run as dispatch

    derived.wait()  # (the run would make them again: not in two threads at once)
    _DISPATCH["run"] = dispatch
    return dispatch
