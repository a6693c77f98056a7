"""Result of a run: vertex values keyed by original labels, and the run's history."""

from __future__ import annotations

import numpy as np
import pandas as pd

HISTORY_COLUMNS = ("iteration", "placement", "mode", "f", "rho", "alpha", "active",
                   "computed", "edges", "activated", "cpu_pages", "gpu_pages", "cpu_edges",
                   "gpu_edges", "cpu_seconds", "gpu_seconds", "seconds", "overhead")



class Result:
    """Values of a finished run.

    ``values``: numpy array indexed by dense vertex id; ``labels``: the original label of
    each id; ``iterations``: iterations run; ``converged``: True when the run stopped
    because no vertex was active or the program's convergence test held; ``history``:
    one row per iteration (see :data:`HISTORY_COLUMNS`: placement "cpu", "gpu" or
    "hybrid", mode ("pull", "notify-pull", "gpu-pull"), f = active out-degree / |E|,
    rho, alpha (nan when no GPU took part in the decision), vertices active at the
    start, vertices and edges computed, vertices activated, pages / edges / seconds on
    each device kind, wall seconds, and overhead = wall seconds beyond the busiest
    device); ``compile_seconds``: time spent compiling the
    program (0 when it was already compiled in this process).
    """

    def __init__(self, graph, values, *, program, iterations, converged, history, mode,
                 compile_seconds=0.0):
        self.graph = graph
        self.values = values
        self.program = program
        self.iterations = iterations
        self.converged = converged
        self.mode = mode
        self.compile_seconds = compile_seconds
        self.history = pd.DataFrame(history, columns=list(HISTORY_COLUMNS))

    @property
    def labels(self) -> np.ndarray:
        return self.graph.label_of(np.arange(len(self.values)))

    def to_series(self) -> pd.Series:
        """Values as a pandas Series indexed by original label."""
        return pd.Series(self.values, index=pd.Index(self.labels, name="vertex"), name="value")

    def to_pandas(self) -> pd.DataFrame:
        """DataFrame with columns ``vertex`` (original label) and ``value``."""
        return pd.DataFrame({"vertex": self.labels, "value": self.values})

    def __getitem__(self, label):
        """Value of one vertex given by its original label."""
        return self.values[self.graph.id_of(label)]

    @property
    def seconds(self) -> float:
        """Wall seconds spent in iterations."""
        return float(self.history["seconds"].sum())

    def __repr__(self):
        state = "converged" if self.converged else "not converged"
        return (f"<hetgraph.Result {self.program} on {self.graph.num_vertices:,} vertices: "
                f"{self.iterations} iterations ({self.mode}), {state}, {self.seconds:.3f} s>")
