"""Result of a run: vertex values keyed by original labels, and the run's history."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from .errors import GraphError, StoreError

HISTORY_COLUMNS = ("iteration", "placement", "mode", "f", "rho", "alpha", "active",
                   "computed", "edges", "activated", "cpu_pages", "gpu_pages", "cpu_edges",
                   "gpu_edges", "cpu_seconds", "gpu_seconds", "read_bytes", "h2d_bytes",
                   "d2h_bytes", "generation_seconds", "transfer_seconds", "seconds",
                   "overhead", "priority")
# a history row is a tuple of the columns' values in this order, not a dict (a segment
# makes one every iteration) nor a list (the garbage collector stops tracking a tuple of
# numbers and strings, so thousands of rows bring on no full collection)
COLUMN = {name: index for index, name in enumerate(HISTORY_COLUMNS)}
SECONDS, OVERHEAD = COLUMN["seconds"], COLUMN["overhead"]


def device_row(kind, iteration, placement, mode, f, rho, alpha, active, computed, edges,
               activated, pages, read_bytes, seconds, overhead, kernel, front, zero=0,
               zero_seconds=0.0, h2d_bytes=None, d2h_bytes=None, generation_seconds=None,
               transfer_seconds=None) -> tuple:
    """The history row of an iteration that ran on one device ``kind`` ("cpu" or "gpu"),
    whose ``pages``, ``edges`` and ``kernel`` seconds are that kind's (the other kind's
    are ``zero`` and ``zero_seconds``), in :data:`HISTORY_COLUMNS`' order; the bytes
    copied to and from a GPU default to ``zero``, the seconds of the active subgraph's
    generation and of the copies in to ``zero_seconds``. Given columns instead
    (iterables, constants as ``itertools.repeat``), the columns of several iterations
    in that order, which ``zip(*...)`` makes rows."""
    h2d_bytes = zero if h2d_bytes is None else h2d_bytes
    d2h_bytes = zero if d2h_bytes is None else d2h_bytes
    generation = zero_seconds if generation_seconds is None else generation_seconds
    transfer = zero_seconds if transfer_seconds is None else transfer_seconds
    if kind == "cpu":
        return (iteration, placement, mode, f, rho, alpha, active, computed, edges,
                activated, pages, zero, edges, zero, kernel, zero_seconds, read_bytes,
                h2d_bytes, d2h_bytes, generation, transfer, seconds, overhead, front)
    return (iteration, placement, mode, f, rho, alpha, active, computed, edges, activated,
            zero, pages, zero, edges, zero_seconds, kernel, read_bytes, h2d_bytes, d2h_bytes,
            generation, transfer, seconds, overhead, front)


def history_row(**values) -> tuple:
    """A history row with ``values`` by column name, zeros for the others (NaN for
    priority: none known)."""
    row = [0] * len(HISTORY_COLUMNS)
    row[COLUMN["priority"]] = float("nan")
    for name, value in values.items():
        row[COLUMN[name]] = value
    return tuple(row)


def with_overhead(row, seconds) -> tuple:
    """``row`` with ``seconds`` more of wall time, all of them overhead."""
    row = list(row)
    row[SECONDS] += seconds
    row[OVERHEAD] += seconds
    return tuple(row)


def row_dict(row) -> dict:
    """A history row as {column name: value}."""
    return dict(zip(HISTORY_COLUMNS, row))


class Result:
    """Values of a finished run.

    ``values``: numpy array indexed by dense vertex id; ``labels``: the original label of
    each id; ``iterations``: iterations run; ``converged``: True when the run stopped
    because no vertex was active or the program's convergence test held; ``history``:
    one row per iteration (see :data:`HISTORY_COLUMNS`: placement "cpu", "gpu" or
    "hybrid", mode ("pull", "notify-pull", "push", "gpu-pull", "gpu-tocab" (a pull by
    GraphCage's cache blocking), "gpu-push"; a colored
    run's "colored", "gpu-colored"), f = active
    out-degree / |E|, rho, alpha (nan when no GPU took part in the decision), vertices
    active at the start, vertices and edges computed, vertices activated, pages / edges
    / seconds on each device kind (a GPU segment's are its device time, measured by CUDA
    events), bytes read from the page store (out-of-core runs), the graph's bytes a GPU
    segment's iteration copied to the device and back (h2d_bytes: streamed pages, or the
    active subgraph's edges and offsets; d2h_bytes: its active vertex list; 0
    elsewhere), the seconds of that iteration's copies in (transfer_seconds: device
    time, the union of the copies' spans on the copy streams; on several GPUs, their
    sum) and of its active
    subgraph's generation (generation_seconds: the device's scan of the active flags
    and the list's copy out, then the host's offsets and gathers into pinned memory,
    which overlap the copies and pushes of the chunks gathered before; 0.0 elsewhere;
    Subway's Fig. 9 compares the two), wall seconds (the time since the previous
    iteration finished, when GPU iterations are queued; the dispatcher's count of the
    frontier and placement before a segment count in its first row), overhead = wall
    seconds beyond the busiest device, and priority: the lowest priority among the
    vertices the iteration ran, for a program with priority buckets (see
    :class:`hetgraph.VertexProgram`; NaN otherwise, and where not tracked: a CPU
    iteration outside a burst, the first of a GPU segment, a hybrid one), whose rise
    per iteration is the run's progress); ``compile_seconds``: time spent compiling
    the program (0 when it was already compiled in this process);
    ``round_trip_seconds``: the wall of a run's segments beyond the iterations they ran
    (their tasks' round trips, the calls to worker processes that held the run's state,
    the workers' work around the iterations, the state's moves between devices), which
    no row counts (0 on the direct path).
    """

    round_trip_seconds = 0.0  # (the class's: a direct run's Result sets no attributes)

    def __init__(self, graph, values, *, program, iterations, converged, history, mode,
                 compile_seconds=0.0, round_trip_seconds=0.0):
        self.graph = graph
        self.values = values
        self.program = program
        self.iterations = iterations
        self.converged = converged
        self.mode = mode
        self.compile_seconds = compile_seconds
        self.round_trip_seconds = round_trip_seconds
        self._rows = history
        self._history = None

    @property
    def history(self) -> pd.DataFrame:
        """The per-iteration DataFrame (built on first use: it takes as long as a small
        graph's whole run)."""
        if self._history is None:
            self._history = pd.DataFrame(self._rows, columns=list(HISTORY_COLUMNS))
        return self._history

    @property
    def labels(self) -> np.ndarray:
        return self.graph.label_of(np.arange(len(self.values)))

    def to_series(self) -> pd.Series:
        """Values as a pandas Series indexed by original label."""
        return pd.Series(self.values, index=pd.Index(self.labels, name="vertex"), name="value")

    def to_pandas(self) -> pd.DataFrame:
        """DataFrame with columns ``vertex`` (original label) and ``value``."""
        return pd.DataFrame({"vertex": self.labels, "value": self.values})

    def top(self, k=10, largest=True) -> pd.DataFrame:
        """The ``k`` vertices with the largest (or smallest) values: columns ``vertex``
        (original label) and ``value``, best first; ties by dense id."""
        order = np.argsort(-self.values if largest else self.values, kind="stable")[:k]
        return pd.DataFrame({"vertex": self.graph.label_of(order), "value": self.values[order]})

    def save(self, path):
        """Write the values with their original labels to ``path``: .parquet or .csv
        (columns vertex, value) or .npy (a structured array with fields vertex, value;
        string labels as fixed-width unicode, no pickle). Written to a temporary file and
        renamed, so a failure leaves nothing behind."""
        path = os.fspath(path)
        kind = os.path.splitext(path)[1].lower()
        if kind not in (".parquet", ".csv", ".npy"):
            raise GraphError(f"{path}: cannot write results as {kind or 'no extension'}; "
                             f"use a .parquet, .csv or .npy file")
        tmp = f"{path}.partial-{os.getpid()}{kind}"
        frame = self.to_pandas()
        try:
            if kind == ".parquet":
                frame.to_parquet(tmp, index=False)
            elif kind == ".csv":
                frame.to_csv(tmp, index=False)
            else:
                labels = np.asarray(frame["vertex"])
                if labels.dtype == object:
                    labels = labels.astype(str)
                table = np.empty(len(frame), [("vertex", labels.dtype),
                                              ("value", self.values.dtype)])
                table["vertex"], table["value"] = labels, self.values
                np.save(tmp, table, allow_pickle=False)
            os.replace(tmp, path)
        except (OSError, ImportError) as exc:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise StoreError(f"{path}: writing the results failed ({exc}); nothing was "
                             f"written") from exc

    def plot(self, path=None):
        """The run's timeline (matplotlib, ``pip install 'hetgraph[plot]'``): pages and
        seconds per device kind, the CPU mode, alpha and f per iteration; ``path``: also
        save it (PNG, SVG, PDF). Returns the Figure (see :func:`hetgraph.plot.timeline`)."""
        from .plot import timeline

        return timeline(self.history, title=repr(self)[len("<hetgraph.Result "):-1],
                        path=path)

    def __getitem__(self, label):
        """Value of one vertex given by its original label."""
        return self.values[self.graph.id_of(label)]

    @property
    def seconds(self) -> float:
        """Wall seconds spent in iterations."""
        return float(sum(row[COLUMN["seconds"]] for row in self._rows))

    def __repr__(self):
        state = "converged" if self.converged else "not converged"
        return (f"<hetgraph.Result {self.program} on {self.graph.num_vertices:,} vertices: "
                f"{self.iterations} iterations ({self.mode}), {state}, {self.seconds:.3f} s>")
