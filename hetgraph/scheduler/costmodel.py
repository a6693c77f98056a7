"""The cost model: which CPU mode an iteration uses (Garaph 4.2).

f is the fraction of the edges that notify-pull would touch: the out-degrees of the
vertices active last iteration over |E|. Notify-pull costs about 2*f*rho times a pull
pass (notify, then pull), where rho = 1 in memory and rho = k (sequential over random
read speed) out of core, so notify-pull is chosen when f <= 1 / (2 * rho).
"""

from __future__ import annotations

CPU_MODES = ("pull", "notify-pull")


def notify_fraction(active_out_degree: int, num_arcs: int) -> float:
    """f = sum of the out-degrees of active vertices / |E| (0 on a graph with no edge)."""
    return active_out_degree / num_arcs if num_arcs else 0.0


def choose_cpu_mode(f: float, rho: float = 1.0) -> str:
    """"notify-pull" when f <= 1 / (2 * rho), else "pull"."""
    return "notify-pull" if f <= 1.0 / (2.0 * rho) else "pull"


def alpha(f: float, rho: float, t_pull: float, t_gpu: float) -> float:
    """Garaph eq. 3: alpha = min(2 * f * rho, 1) * T_pull / T_GPU, with T_pull and T_GPU
    the CPU pull and GPU seconds per edge. alpha < 1: the CPU alone is faster."""
    return min(2.0 * f * rho, 1.0) * t_pull / t_gpu


SMOOTHING = 0.3  # weight of a new measurement in the running per-edge times


class CostModel:
    """Seconds per edge for each (device kind, mode), from a calibration then smoothed
    over measured page times, and the placement of each iteration.

    Kinds are "cpu" and "gpu"; modes "pull" and "notify-pull" (the GPU only pulls).
    ``overhead``: seconds a hybrid iteration spends beyond its busiest device (task
    round trips, vertex copies between host and GPU), also smoothed.
    """

    def __init__(self, overhead=0.0):
        self.per_edge: dict = {}
        self.overhead = float(overhead)

    def observe(self, kind, mode, edges, seconds):
        """Fold a measured page time (``edges`` edges in ``seconds``) into the model."""
        if edges <= 0 or seconds <= 0:
            return
        measured = seconds / edges
        old = self.per_edge.get((kind, mode))
        self.per_edge[(kind, mode)] = measured if old is None else \
            (1 - SMOOTHING) * old + SMOOTHING * measured

    def observe_overhead(self, seconds):
        self.overhead = (1 - SMOOTHING) * self.overhead + SMOOTHING * max(seconds, 0.0)

    def seconds(self, kind, edges, mode="pull"):
        """Predicted seconds for ``edges`` edges (0 when the model has no measurement)."""
        return edges * self.per_edge.get((kind, mode), 0.0)

    def alpha(self, f, rho=1.0):
        """Garaph's alpha for this frontier; nan until both devices were measured."""
        t_pull, t_gpu = self.per_edge.get(("cpu", "pull")), self.per_edge.get(("gpu", "pull"))
        if not t_pull or not t_gpu:
            return float("nan")
        return alpha(f, rho, t_pull, t_gpu)

    def placement(self, f, rho, num_arcs):
        """(placement, alpha) for an iteration with both device kinds available:
        "cpu" when alpha < 1 (Garaph); otherwise "hybrid" when the balanced split of a
        pull over CPU and GPU plus the hybrid overhead beats the GPU alone, else "gpu"."""
        a = self.alpha(f, rho)
        if not a >= 1.0:  # alpha < 1, or nan (not calibrated): the CPU alone
            return "cpu", a
        gpu = self.seconds("gpu", num_arcs)
        cpu = self.seconds("cpu", num_arcs)
        balanced = gpu * cpu / (gpu + cpu)
        return ("hybrid" if balanced + self.overhead < gpu else "gpu"), a
