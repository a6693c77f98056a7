"""The CPU mode of an iteration (Garaph 4.2): pull, notify-pull or push, by its frontier.

A pull reads every in-edge. A notify-pull reads the frontier's out-edges (f |E|, f the
frontier's out-degree sum over |E|), then the in-edges of the vertices they reached:
skew = sum(d_in^2) / |E| each on average, |E| at most; both at rho times the cost of a
sequential read (rho = 1 in memory, the store's sequential over random read speed out
of core). With skew = 1 the rule below is Garaph's f <= 1 / (2 * rho). An incremental
program (:class:`hetgraph.VertexProgram`) may instead push: the frontier's vertices
combine into their out-neighbours' values, f |E| edges in one thread, with no pull.

The engines choose their mode by these rules; the cost model
(:mod:`hetgraph.scheduler.costmodel`) predicts with the same ones.
"""

from __future__ import annotations

from .. import tuning


ALONE, HELPERS, OPENMP = "alone", "helpers", "openmp"  # the ways a pull pass runs


class SpreadChoice:
    """Which of two ways of running a pull pass, ``ways`` (the first tried first;
    default: spread over threads, True, or in the calling thread alone, False), by the
    seconds an edge each took lately: where other work holds the cores, threads wait
    for each other and one thread is faster. Each way is tried first once; then the
    way not taken is tried again after ``tuning.SPREAD_PROBE`` passes, so that a change
    of the machine's load is seen, and after twice as many each time a try confirms the
    choice (up to ``tuning.SPREAD_PROBE_MAX``): a try of the slower way costs a pass's
    time. The way taken keeps a moving average of its rate (weight
    ``tuning.SPREAD_WEIGHT``); a try replaces the other way's rate with what it
    measured, so that one slow first pass (threads starting, pages first touched, a
    first compile) is forgotten at the next try, not averaged away over hundreds of
    passes."""

    def __init__(self, ways=(True, False)):
        self.ways = tuple(ways)
        self.rates = {way: None for way in self.ways}  # {way: seconds an edge}
        self.interval = self.wait = tuning.SPREAD_PROBE  # passes until the next try

    def _other(self, way):
        return self.ways[self.ways[0] == way]

    def way(self):
        """The way of the next pass."""
        first, second = self.ways
        if self.rates[first] is None or self.rates[second] is None:
            return first if self.rates[first] is None else second
        better = first if self.rates[first] <= self.rates[second] else second
        self.wait -= 1
        if self.wait > 0:
            return better
        self.wait = self.interval
        return self._other(better)

    def record(self, way, seconds: float, edges: int):
        """A pass ran ``way`` over ``edges`` edges in ``seconds``."""
        rate, old = seconds / max(edges, 1), self.rates[way]
        other = self.rates[self._other(way)]
        if old is None or other is None or old <= other:  # the way taken (or a first)
            self.rates[way] = rate if old is None else \
                old + tuning.SPREAD_WEIGHT * (rate - old)
            return
        self.rates[way] = rate  # a try of the other way: back off while it stays slower
        self.interval = min(2 * self.interval, tuning.SPREAD_PROBE_MAX) \
            if rate > other else tuning.SPREAD_PROBE
        self.wait = self.interval


class SpreadBySize:
    """How pull passes run, for each size of pass in powers of 4 edges: alone, or
    spread over threads, their ranges claimed by helper threads (:mod:`hetgraph.kernels.
    cpu.threads`) or, with ``openmp``, run on Numba's OpenMP threads, each choice a
    :class:`SpreadChoice` (spread or alone, and among spread passes OpenMP or helpers).
    A spread pass pays a fixed cost for waking its threads, so its seconds an edge
    depend on its edges, and a whole pull must not learn from a notify-pull over a few
    vertices (whose spread passes are dear) to run alone. The helpers hand a pass over
    through the GIL, a thread at a time; OpenMP's threads start without it but wait
    spinning, which loses on a machine busy with other work."""

    def __init__(self, openmp: bool = False):
        self.openmp = openmp
        self._choices = {}  # {edges' bit length // 2: (spread or alone, OpenMP or helpers)}

    def choices(self, edges: int) -> tuple:
        """(spread or alone, OpenMP or helpers: None without ``openmp``), the
        SpreadChoices of passes over ``edges`` edges."""
        size = int(edges).bit_length() // 2
        choice = self._choices.get(size)
        if choice is None:
            choice = self._choices[size] = (
                SpreadChoice(), SpreadChoice(ways=(False, True)) if self.openmp else None)
        return choice

    def way(self, edges: int) -> str:
        """How the next pass over ``edges`` edges runs: ALONE, HELPERS or OPENMP."""
        spread, team = self.choices(edges)
        if not spread.way():
            return ALONE
        return OPENMP if team is not None and team.way() else HELPERS

    def record(self, way: str, seconds: float, edges: int):
        """A pass over ``edges`` edges ran ``way`` in ``seconds``."""
        spread, team = self.choices(edges)
        spread.record(way != ALONE, seconds, edges)
        if way != ALONE and team is not None:
            team.record(way == OPENMP, seconds, edges)


def push_factor(incremental: bool, threads: int) -> float:
    """A push's cost per frontier edge in pull passes over |E| edges, for a program
    that can push (0: it cannot). The push runs in one thread, the pull on ``threads``
    (see :data:`hetgraph.tuning.PUSH_EDGE_COST`)."""
    return tuning.PUSH_EDGE_COST * threads if incremental else 0.0


def notify_fraction(active_out_degree: int, num_arcs: int) -> float:
    """f = sum of the out-degrees of active vertices / |E| (0 on a graph with no edge)."""
    return active_out_degree / num_arcs if num_arcs else 0.0


def choose_cpu_mode(f: float, rho: float = 1.0, skew: float = 1.0, push: float = 0.0,
                    cpu_mode: str = "auto", sparse: float = 0.0, threads: int = 1) -> str:
    """"notify-pull" when rho * (f + min(f * skew, 1)) <= 1 (see above; f <= 1 / (2 *
    rho) when skew = 1), else "pull"; but "push" when the program can (``push``: its
    :func:`push_factor`) and rho * f * push is at most the cheaper of the two. Up to f
    = ``sparse`` a notify-pull runs in one thread, as a push does, not on the
    ``threads`` of a pull: against a push it then costs ``threads`` times its pull
    passes. A run's own ``cpu_mode`` (not "auto") is its every iteration's."""
    if cpu_mode != "auto":
        return cpu_mode
    notify = rho * (f + min(f * skew, 1.0))
    alone = threads if f <= sparse else 1
    if push and rho * f * push <= min(notify * alone, 1.0):
        return "push"
    return "notify-pull" if notify <= 1.0 else "pull"
