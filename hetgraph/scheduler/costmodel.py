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
