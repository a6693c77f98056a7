"""The interface every engine implements: what a segment, a page task and a calibration
call (:mod:`hetgraph.scheduler.tasks`).

An engine runs one program's iterations on one device over the run's vertex state. The
base class documents each call and gives the optional ones a default, so an engine
declares what it can do instead of the scheduler probing for it:

- ``queued`` > 1: :meth:`Engine.launch` queues an iteration and returns at once, and a
  segment keeps up to ``queued`` of them in flight (the GPU). The defaults compute the
  iteration in :meth:`~Engine.launch` itself and :meth:`~Engine.wait` hands its result
  back (``queued`` = 1: the CPU engines).
- ``bursts``: :meth:`Engine.burst` may run several iterations in one call (the CPU
  engine in memory); the default runs none.
- ``reusable``: :meth:`Engine.bind` takes the engine to a later run of the same compiled
  program on the same graph, so that a run's tasks take an idle engine its graph keeps
  instead of building one (the CPU engine in memory); :meth:`Engine.unbind` lets go of
  the finished run.

The GPU engine also keeps its own copy of the vertex state, which the GPU tasks move and
run page by page with its own calls (``load``, ``store``, ``begin``, ``run_pages``,
``counts``, ``finish``, ``count_frontier``): only they build a GPU engine, so they call
it as one.
"""

from __future__ import annotations

import time

_clock = time.perf_counter


class Engine:
    """A program's iterations on one device (see the module's docstring).

    A frontier is (active vertices, sum of their out-degrees). An iteration's result
    is (mode, vertices computed, edges read, vertices activated); waited for, it has
    the seconds the iteration took on the device as a fifth item.
    """

    queued = 1  # iterations a segment may keep in flight (1: launch computes at once)
    bursts = False  # whether :meth:`burst` can run iterations
    reusable = False  # whether :meth:`bind` takes the engine to another run
    values = None  # the current vertex values (host or device array)
    read_bytes = 0  # bytes read from storage so far (0: the graph is in memory)
    h2d_bytes = 0  # the graph's bytes copied to a GPU so far (edges, offsets)
    d2h_bytes = 0  # ... and from it (active vertex lists)
    transfer_seconds = 0.0  # device seconds of those copies to a GPU so far
    generation_seconds = 0.0  # seconds a GPU's active subgraphs took to make so far
    subgraph_share = 0.0  # the share of the arcs a GPU streams as active subgraphs
    front = float("nan")  # the frontier's lowest priority, where the engine tracks it
    tests_change = False  # whether test_change makes convergence tests on the device (a GPU)

    def frontier(self):
        """(active vertices, their out-degree sum) that the next iteration starts from."""
        raise NotImplementedError

    def reset_frontier(self, counted=None):
        """Forget the frontier kept between iterations (the state changed elsewhere);
        ``counted``: the new one when the caller knows it, else None (counted when
        :meth:`frontier` is next asked)."""
        raise NotImplementedError

    def iterate(self, constant, frontier):
        """One iteration from ``frontier`` with the program's iteration ``constant``
        (0.0 for a program without one), computed before it returns; returns its result
        (mode, computed, edges, activated)."""
        raise NotImplementedError

    def launch(self, constant, frontier):
        """Start one iteration as :meth:`iterate` does; returns the ticket that
        :meth:`wait` or :meth:`discard` takes. Here: the iteration computes at once,
        timed, and its ticket is its result."""
        start = _clock()
        return (*self.iterate(constant, frontier), _clock() - start)

    def wait(self, ticket):
        """The result of a launched iteration (mode, computed, edges, activated, device
        seconds), once done; its activated vertices are then the frontier."""
        return ticket

    def discard(self, tickets):
        """Undo iterations launched after one that activated nothing (only an engine
        with ``queued`` > 1 has any)."""

    def keeps_previous(self, frontier) -> bool:
        """Whether the iteration from ``frontier`` leaves the values it started from in
        :attr:`previous` until the next one (a sync pull that writes a second array),
        so that a convergence test needs no copy of them. Here: False."""
        return False

    previous = None  # the values before the last iteration, where keeps_previous said so

    def burst(self, iterations, seconds, max_degree):
        """Run up to ``iterations`` iterations in one call, for about ``seconds`` at most,
        from frontiers of at most ``max_degree`` out-edges; returns (mode, stats,
        fronts), one row of ``stats`` an iteration (see :meth:`CpuEngine.burst`), or
        None when it ran none. Here: None (see ``bursts``)."""
        return None

    def pull_pages(self, ranges, constant):
        """Pull the vertex ``ranges`` [(v0, v1), ...] of one hybrid iteration into the
        state's written values; returns (edges read, vertices activated). Engines that
        take CPU page tasks implement it."""
        raise NotImplementedError

    def bind(self, spec, graph, state, aux):
        """Take a new run (its checked program ``spec``, of the program this engine
        compiled, on the graph it was made for, over ``state`` with ``aux``), as if
        made for it. Only where ``reusable``."""
        raise NotImplementedError

    def unbind(self):
        """Let go of the finished run's program, graph, state and aux, so that the
        engine, kept idle on its graph, does not keep the graph alive. Only where
        ``reusable``."""
        raise NotImplementedError

    def result(self):
        """The current values as a host NumPy array."""
        return self.values

    def close(self):
        """Release what the engine holds beyond its arrays (the run is over)."""

    def describe(self) -> dict:
        """What the engine placed where, for logs and benchmarks."""
        return {}
