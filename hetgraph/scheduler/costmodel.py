"""The cost model: which CPU mode an iteration uses (Garaph 4.2).

f is the fraction of the edges that notify-pull would touch: the out-degrees of the
vertices active last iteration over |E|. Notify-pull costs rho * (f + min(f * skew, 1))
pull passes: notify over the frontier's f |E| out-edges, then pull the in-edges of the
vertices they reached, skew = sum(d_in^2) / |E| in-edges each on average (an edge's
destination is a vertex of in-degree d with probability d / |E|), all of them at most;
rho = 1 in memory and rho = k (sequential over random read speed) out of core.
Notify-pull is chosen when that is at most one pull pass. With skew = 1 (Garaph's
assumption: one in-edge pulled per notification) this is Garaph's f <= 1 / (2 * rho);
on power-law graphs the vertices a frontier reaches are hubs with many in-edges, and on
a grid each pulls four.

Beyond Garaph, an incremental program (:class:`hetgraph.VertexProgram`) may push: the
active vertices combine into their out-neighbours' values, f |E| edges in one
thread, with no pull of the in-edges of the vertices reached.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from .. import tuning
from ..engines.cpu_modes import choose_cpu_mode, notify_fraction
from ..result import COLUMN

CPU_MODES = ("pull", "notify-pull", "push")
_ITERATION, _PLACEMENT, _PRIORITY = (COLUMN[name] for name in
                                     ("iteration", "placement", "priority"))
_ROW_FIELDS = operator.itemgetter(*(COLUMN[name] for name in (
    "placement", "mode", "seconds", "gpu_seconds", "cpu_seconds", "edges", "f", "rho",
    "h2d_bytes")))
_MODE, _SECONDS = COLUMN["mode"], COLUMN["seconds"]
_NO_GPU_ROWS = (0.0,) * 6  # (the GPU's totals of rows that hold none: see _row_totals)


def frontier_growth(in_degree, out_degree) -> float:
    """sum(d_in d_out) / |E|: the out-degree of the destination of an average edge (at
    least 1; 4 on a grid, thousands on RMAT, whose hubs have both)."""
    arcs = float(np.sum(in_degree))
    if not arcs:
        return 1.0
    # einsum, not np.dot: after a float dot, OpenBLAS's threads (one per core) spin
    # for a while, slowing whatever runs next
    return max(1.0, float(np.einsum("i,i->", in_degree, out_degree, dtype=np.int64)) / arcs)


def alpha(f: float, rho: float, t_pull: float, t_gpu: float) -> float:
    """Garaph eq. 3: alpha = min(2 * f * rho, 1) * T_pull / T_GPU, with T_pull and T_GPU
    the CPU pull and GPU seconds per edge. alpha < 1: the CPU alone is faster."""
    return min(2.0 * f * rho, 1.0) * t_pull / t_gpu




def _smoothed(old, measured):
    """The running mean ``old`` moved towards ``measured`` by ``tuning.COST_SMOOTHING``
    (``measured`` itself when there is no ``old``)."""
    if old is None:
        return measured
    weight = tuning.COST_SMOOTHING
    return (1 - weight) * old + weight * measured


def _priority_ends(rows):
    """kind -> [first iteration, its priority, last iteration, its priority] of the
    history ``rows`` with a finite priority, per device kind (a CPU's moves by
    buckets)."""
    ends = {}
    for row in rows:
        front = row[_PRIORITY]
        if math.isfinite(front):
            known = ends.get(row[_PLACEMENT])
            if known is None:
                ends[row[_PLACEMENT]] = [row[_ITERATION], front, row[_ITERATION], front]
            else:
                known[2], known[3] = row[_ITERATION], front
    return ends


class LinearFit:
    """seconds = fixed + slope * size, fitted by least squares to the measurements with
    exponential forgetting (the newest weighs ``tuning.COST_SMOOTHING``).

    A small iteration costs its fixed part (a call, a sort) more than its edges: a cost
    per edge alone, learnt from one, would predict a large one many times too slow.
    Until the sizes measured spread enough to tell the two apart (coefficient of
    variation ``tuning.FIT_SPREAD``), the fit goes through their mean with the fixed
    part that the caller's prior slope leaves, between 0 (a prior slope above the
    measured rate must not make large iterations look dear) and
    ``tuning.FIT_FIXED_MOST`` (one large measurement must not make tiny ones look dear).
    """

    def __init__(self):
        self.sums = (0.0,) * 5  # weight, size, seconds, size^2, size * seconds

    def copy(self):
        """A fit with this one's measurements that learns apart from it."""
        twin = LinearFit()
        twin.sums = self.sums
        return twin

    def observe(self, size, seconds, prior_slope):
        """Fold in one measurement (``seconds`` trimmed to ``tuning.COST_OUTLIER`` times
        the fit's prediction for ``size``, see :meth:`predict`)."""
        expected = self.predict(size, prior_slope)
        if expected:
            seconds = min(seconds, tuning.COST_OUTLIER * expected)
        weight, sx, sy, sxx, sxy = self.sums
        new = tuning.COST_SMOOTHING
        keep = 1.0 - new
        self.sums = (keep * weight + new, keep * sx + new * size, keep * sy + new * seconds,
                     keep * sxx + new * size * size, keep * sxy + new * size * seconds)

    def predict(self, size, prior_slope):
        """Predicted seconds for ``size`` (None before any measurement)."""
        weight, sx, sy, sxx, sxy = self.sums
        if weight == 0.0:
            return None
        mx, my = sx / weight, sy / weight
        var = sxx / weight - mx * mx
        if var > (tuning.FIT_SPREAD * mx) ** 2:
            slope = max((sxy / weight - mx * my) / var, 0.0)
            return max(my - slope * mx, 0.0) + slope * size
        if mx <= 0:
            return my + prior_slope * size
        fixed = min(max(my - prior_slope * mx, 0.0), tuning.FIT_FIXED_MOST)
        return fixed + (my - fixed) / mx * size


class CostModel:
    """Seconds per edge for each (device kind, mode), from a calibration then smoothed
    over measured times, and the placement of each iteration.

    Parameters
    ----------
    overhead : float, default 0.0
        Prior seconds a hybrid iteration spends beyond its busiest device (task round
        trips, vertex copies); smoothed over measured ones (:meth:`observe_overhead`).
    switch : float, default 0.0
        Prior seconds to move the run between the CPU and the GPU (the state's copies
        and the round trips of ending one segment and starting the next); smoothed over
        measured segment boundaries (:meth:`observe_switch`).
    skew : float, default 1.0
        The in-degree of the destination of an average edge, sum(d_in^2) / |E| (1 in
        Garaph's model): a notified vertex is reached through one of its in-edges, so
        before any measurement a notify-pull is predicted to pull min(f |E| skew, |E|)
        edges.
    push : float, default 0.0
        The program's :func:`push_factor` (0: it cannot push).
    growth : float, default 1.0
        The out-degree of an average edge's destination, sum(d_in d_out) / |E|
        (:func:`frontier_growth`): a frontier of f |E| out-edges reaches vertices with
        about f |E| growth out-edges, the next frontier's at most (:meth:`placement`).
    threads : int, default 1
        Threads of a CPU pull.
    sparse_edges : int, default 0
        Frontier edges up to which the CPU engine runs a notify-pull in one thread.
    cpu_mode : str, default "auto"
        The run's CPU mode ("auto": :func:`choose_cpu_mode`'s, as the CPU engine
        chooses it).
    buckets : bool, default False
        The CPU runs the program's priority buckets (delta-stepping), so a CPU
        iteration does less than a GPU one, which runs every active vertex: the two are
        compared by the time they take for one GPU iteration's progress
        (:meth:`progress_ratio`).

    Attributes
    ----------
    per_edge : dict
        Seconds per edge by (device kind, mode): ("cpu", "pull") and ("gpu", "pull") of
        a pull, (kind, "pages") of a hybrid iteration's page task (:meth:`page_seconds`).
    fits : dict
        By CPU mode, "notify-pull" and "push", a :class:`LinearFit` of an iteration's
        seconds against its frontier's edges (f |E|). Before it has measurements the
        prior is Garaph's (with the skew) for a notify-pull, the push factor's for a
        push (:meth:`_prior`). Measured, a notify-pull also counts the in-edges of the
        notified vertices, many times the frontier's out-edges on power-law graphs, and
        a push has a fixed part (the burst's row) that a rate per edge cannot carry.
        "gpu-push": the GPU's iterations over an active subgraph (rows "gpu-push"), their
        seconds against the subgraph's bytes copied in (the rows' ``h2d_bytes``): a
        fixed part (the resident pages' pull, the active list, the launches) and the
        host's gather and copy per byte (:meth:`gpu_seconds`).
    push_bytes : float or None
        The bytes a GPU push of an active subgraph copies in per out-edge of its
        frontier (index and weight of the edges into the streamed pages, the offsets),
        smoothed over the "gpu-push" rows; None before any.
    regret : float
        Seconds the current placement has lost so far against the other, by the
        model's predictions.
    progress : dict
        By device kind, the rise of the history's priority column per iteration,
        smoothed (with ``buckets``).
    shares : dict
        With ``buckets``, by CPU frontier mode ("push", "notify-pull"), the edges its
        iterations read over their frontier's out-edges, smoothed: an iteration of
        priority buckets reads only the lowest bucket's part of its frontier (a push
        the bucket's out-edges, a notify-pull the in-edges of the vertices the bucket
        notified), so it is fitted against the edges it read and predicted from
        shares[mode] f |E| of them, not from its frontier's out-degree
        (:meth:`cpu_seconds`). ``share`` is the push's: the bucket's part itself.
    errors : dict
        By (placement, mode), the relative error of the model's predictions of such
        iterations, |measured - predicted| / predicted, smoothed from
        ``tuning.PREDICTION_ERROR`` (see :meth:`error`): a placement is tried only when
        its predicted gain exceeds it.
    expected : dict
        By placement, the seconds the model expected of the last iteration it placed
        there, the prediction that estimate rests on and the graph's arcs (see
        :meth:`observe_iteration`).
    basis : dict
        By placement, the prediction that its measured iteration time in ``iteration``
        stands against, made from the inputs that iteration measured: the estimate is
        the measurement scaled by how the prediction moved since (the model's inputs
        changed), see :meth:`_estimate`.
    waiting : object or None
        What says (its ``done()``) whether the GPU's page layout, which a run's
        calibration of the GPU waits for and its CPU does not, is there (None: none;
        see the dispatcher's calibration).
    """

    def __init__(self, overhead=0.0, switch=0.0, skew=1.0, push=0.0, growth=1.0,
                 threads=1, sparse_edges=0, cpu_mode="auto", buckets=False):
        self.cpu_mode = cpu_mode
        self.buckets = bool(buckets)
        self.progress: dict = {}
        self.shares: dict = {}
        self.skew = float(skew)
        self.threads = threads
        self.sparse_edges = sparse_edges
        self.push = float(push)
        self.growth = float(growth)
        self.per_edge: dict = {}
        self.best: dict = {}  # the lowest rate each (kind, mode) has had: see relax()
        self.calibrated: set = set()  # the (kind, mode) whose rate is a calibration's
        self.fits = {"notify-pull": LinearFit(), "push": LinearFit(),
                     "gpu-push": LinearFit()}
        self.push_bytes = None
        self.iteration: dict = {}  # measured seconds of a full pull, per placement
        self.basis: dict = {}
        self.expected: dict = {}
        self.errors: dict = {}
        self.overhead = float(overhead)
        self.switch = float(switch)
        self.regret = 0.0
        self.lead = None  # (current, the other side's lead at the last call, its trend)
        self.waiting = None

    def copy(self):
        """A model in this one's state that learns apart from it (its dicts, sets and
        fits copied): what each later run under a kept calibration starts from."""
        twin = type(self).__new__(type(self))
        for name, value in vars(self).items():
            setattr(twin, name, value.copy() if isinstance(value, (dict, set)) else value)
        twin.fits = {mode: fit.copy() for mode, fit in self.fits.items()}
        return twin

    @property
    def share(self):
        """The CPU pushes' edges relaxed over their frontier's out-edges (the lowest
        bucket's part), smoothed; None before any (see ``shares``)."""
        return self.shares.get("push")

    def observe_iteration(self, placement, seconds):
        """Fold the measured seconds of a full-pull iteration placed on "gpu" or
        "hybrid" into the model; placement then compares measurements. A hybrid
        iteration also measures the error of what the model expected of it, and its
        time is kept against the prediction that the inputs it measured (its page
        tasks' rates and overhead, folded in before this call) make (``basis``): the
        inputs change from there on."""
        expected = self.expected.pop(placement, None)
        if expected is not None:
            self._observe_error(placement, "pull", expected[0], seconds)
            self.basis[placement] = self._hybrid_prediction(expected[2])
        self.iteration[placement] = _smoothed(self.iteration.get(placement), seconds)

    def observe_gpu_segment(self, rows):
        """Fold a GPU segment's history ``rows`` into the GPU alone's measured iteration
        (:meth:`observe_iteration`): the mean seconds of the newest ``tuning.FOLD_ROWS``
        of them that pulled every page (what a hybrid iteration must beat), none where
        they all pushed active subgraphs (a segment may have thousands of short
        rows). Never the first row, as the segment's own measurements: it carries the
        segment's start and, out of core, the reads of the pages the GPU keeps from then
        on (a one-time cost that a hybrid iteration, measured against it, would seem to
        beat for good)."""
        pulls = [row[_SECONDS] for row in rows[max(1, len(rows) - tuning.FOLD_ROWS):]
                 if row[_MODE] != "gpu-push"]
        if pulls:
            self.observe_iteration("gpu", sum(pulls) / len(pulls))

    def error(self, placement, mode):
        """The measured relative error of the model's predictions of iterations placed
        on ``placement`` in ``mode`` (``tuning.PREDICTION_ERROR`` before any)."""
        return self.errors.get((placement, mode), tuning.PREDICTION_ERROR)

    def deviation(self, kind):
        """The share by which ``kind``'s measured times may exceed what they were before
        the model is asked again about a call it placed there alone:
        ``tuning.SETTLED_MARGIN``, or the largest measured error of its predictions on
        ``kind`` (any mode) if more."""
        return max([tuning.SETTLED_MARGIN] + [error for (placement, _), error in
                                              self.errors.items() if placement == kind])

    def _observe_error(self, placement, mode, predicted, measured):
        """Fold the error of ``predicted`` seconds against ``measured`` ones into
        ``errors`` (nothing without a prediction), at most
        ``tuning.PREDICTION_ERROR_MOST``: one stalled iteration must not lock a
        placement out for good."""
        if not predicted or predicted <= 0:
            return
        key = (placement, mode)
        error = min(abs(measured - predicted) / predicted, tuning.PREDICTION_ERROR_MOST)
        self.errors[key] = _smoothed(self.errors.get(key, tuning.PREDICTION_ERROR), error)

    def _estimate(self, placement, predicted):
        """Seconds of an iteration on ``placement`` whose prediction is ``predicted``
        now: its measured time, scaled by how the prediction moved since that
        measurement's (``basis``: the model's inputs changed), else the prediction.

        The inputs of a hybrid iteration's prediction are the rates of both devices'
        page tasks (their pulls' until measured), the hybrid overhead, and, for what
        it must beat, the GPU alone's measured iteration; they are kept, with the
        measurement, per graph, program, options and workers (the dispatcher's
        calibration key: the GPU's budget and page size among the options;
        :meth:`remembered`). "The inputs changed" means that the prediction made from
        them now differs from ``basis``, the one they made right after the measured
        iteration (its page tasks' rates and overhead folded in); the measurement
        counts scaled by their ratio. So a hybrid iteration that took ``measured``
        seconds against a GPU alone of ``gpu`` seconds is tried again only once
        ``gpu`` exceeds ``measured * predicted / basis`` by more than the hybrid's
        error (:meth:`_gpu_or_hybrid`): the prediction fell below ``basis * gpu /
        (measured * (1 + error))``, or the GPU alone became slower by as much; with
        the inputs as they were, never, in this run and in later runs that
        :meth:`recall` it. (The CPU's and GPU's pull rates are not among the inputs
        once page tasks were measured: a hybrid iteration runs page tasks.)"""
        measured = self.iteration.get(placement)
        if measured is None:
            return predicted
        basis = self.basis.get(placement)
        return measured * predicted / basis if basis else measured

    def remembered(self) -> dict:
        """What later runs on the same graph, program and budget start from
        (:meth:`recall`): the hybrid iterations' measured time and its basis, with the
        inputs it was measured with (the page tasks' rates, the hybrid overhead), the
        prediction errors, the cost of a move between devices (``switch``) and the
        GPU's pushes of active subgraphs (their fit and ``push_bytes``: measured only in
        GPU segments, they would otherwise start every run from the prior)."""
        kept = {p: self.iteration[p] for p in ("hybrid",) if p in self.iteration}
        pages = {key: self.per_edge[key] for key in (("cpu", "pages"), ("gpu", "pages"))
                 if key in self.per_edge}
        return {"iteration": kept, "basis": {p: self.basis[p] for p in kept
                                             if p in self.basis},
                "pages": pages, "overhead": self.overhead if kept else None,
                "errors": dict(self.errors), "switch": self.switch,
                "gpu_push": (self.fits["gpu-push"].sums, self.push_bytes)}

    def recall(self, memory):
        """Start from what an earlier run left (:meth:`remembered`; None: nothing)."""
        if memory:
            self.iteration.update(memory["iteration"])
            self.basis.update(memory["basis"])
            self.per_edge.update(memory["pages"])
            if memory["overhead"] is not None:
                self.overhead = memory["overhead"]
            self.errors.update(memory["errors"])
            self.switch = memory["switch"]
            sums, push_bytes = memory["gpu_push"]
            if push_bytes is not None:  # (a run that pushed nothing keeps what it found)
                self.fits["gpu-push"].sums, self.push_bytes = sums, push_bytes

    def observe(self, kind, mode, edges, seconds, calibration=False):
        """Fold a measured time (``edges`` edges in ``seconds``) into the model (at most
        ``tuning.COST_OUTLIER`` times the rate so far). A ``calibration``'s rate stands
        until the first measurement replaces it (up to COST_OUTLIER times it), and is
        not one that :meth:`relax` returns to: timed without a run's work between its
        passes, it is faster than the run's own iterations will be."""
        if edges <= 0 or seconds <= 0:
            return
        key = (kind, mode)
        measured = seconds / edges
        old = self.per_edge.get(key)
        if old is None:
            rate = measured
        elif key in self.calibrated:
            rate = min(measured, tuning.COST_OUTLIER * old)
        else:
            rate = _smoothed(old, min(measured, tuning.COST_OUTLIER * old))
        self.per_edge[key] = rate
        if calibration:
            self.calibrated.add(key)
        else:
            self.calibrated.discard(key)
            self.best[key] = min(rate, self.best.get(key, rate))

    def relax(self, kind, seconds):
        """The run spent ``seconds`` away from ``kind``: its rates above the lowest they
        have had move back towards it, half the way every ``tuning.RELAX_HALF_LIFE``
        seconds (not towards the calibration, which a slow moment can inflate too), and
        so do its prediction errors above ``tuning.PREDICTION_ERROR`` towards it."""
        keep = 0.5 ** (seconds / tuning.RELAX_HALF_LIFE)
        for key, best in self.best.items():
            if key[0] == kind and self.per_edge[key] > best:
                self.per_edge[key] = best + keep * (self.per_edge[key] - best)
        prior = tuning.PREDICTION_ERROR
        for key, error in self.errors.items():
            if key[0] == kind and error > prior:
                self.errors[key] = prior + keep * (error - prior)

    def observe_rows(self, rows, num_arcs, progress=True):
        """Fold history rows of single-device iterations into the model.

        Each row counts by its wall seconds, what the iteration cost the run, on both
        device kinds (a GPU row's ``gpu_seconds`` are the device's alone: queued
        iterations hide the Python work between them only in part). The rows are one
        measurement per device kind and mode: the GPU's rows their edges in their
        seconds, the CPU's notify-pull and push rows their mean frontier edges in their
        mean seconds, its pull rows as the GPU's. A segment folds its rows a batch at a
        time (:func:`.tasks.run_iterations`), so that a slow row weighs on the model as
        it weighs on the run before the ``tuning.COST_OUTLIER`` cap: capped row by row,
        a few slow rows among many short ones would be all but ignored. With
        ``progress`` (and ``buckets``), the rows' priority measures each kind's
        progress (:meth:`progress_ratio`); not from a calibration's first iterations
        from a source, whose rise is not the run's. Of a batch of more than
        ``tuning.FOLD_ROWS`` rows, the newest that many stand for it: folded row by row,
        a batch of short iterations costs the run's host time in proportion to them."""
        if len(rows) > tuning.FOLD_ROWS:
            rows = rows[-tuning.FOLD_ROWS:]
        fitted, other, gpu = self._row_totals(rows, num_arcs)
        ends = _priority_ends(rows) if self.buckets and progress else None
        self._fold(fitted, other, gpu, ends, num_arcs)

    def _row_totals(self, rows, num_arcs):
        """(fitted, other, gpu) of history ``rows``: ``fitted`` maps a CPU mode of
        ``fits`` to [rows, frontier edges, seconds, rho, edges], ``other`` the other
        CPU modes to [edges, seconds]; ``gpu`` is (edges, seconds) of the GPU rows that
        pulled pages, then (rows, frontier edges, seconds, bytes copied in) of those that
        pushed an active subgraph ("gpu-push")."""
        gpu_edges = gpu_seconds = pushes = pushed = push_seconds = moved = 0.0
        fitted = {}
        other = {}
        # (the columns by one itemgetter, max() inline, a GPU row first: the loop runs
        # for every iteration of a run placed by the model)
        for placement, mode, seconds, on_gpu, on_cpu, edges, f, rho, h2d in map(
                _ROW_FIELDS, rows):
            if placement == "gpu":
                if on_gpu > seconds:
                    seconds = on_gpu
                if mode == "gpu-push":
                    pushes += 1
                    pushed += f * num_arcs
                    push_seconds += seconds
                    moved += h2d
                else:
                    gpu_edges += edges
                    gpu_seconds += seconds
                continue
            if on_cpu > seconds:
                seconds = on_cpu
            if mode in self.fits:
                totals = fitted.setdefault(mode, [0, 0.0, 0.0, 1.0, 0])
                totals[0] += 1
                totals[1] += f * num_arcs
                totals[2] += seconds
                totals[3] = rho
                totals[4] += edges
            else:
                totals = other.setdefault(mode, [0, 0.0])
                totals[0] += edges
                totals[1] += seconds
        return fitted, other, (gpu_edges, gpu_seconds, pushes, pushed, push_seconds, moved)

    def observe_burst(self, burst, first, rho, seconds, num_arcs):
        """Fold a CPU burst (mode, stats, fronts) of :meth:`.CpuEngine.burst` whose
        iterations begin at ``first`` and whose call took ``seconds`` into the model as
        :meth:`observe_rows` folds its history rows (:func:`.tasks.burst_rows`), from
        its counts at once: a burst runs many iterations a millisecond, and folding
        them row by row would cost more than running them."""
        mode, stats, fronts = burst
        wall = max(seconds, float(stats[:, 6].sum()) * 1e-9)  # (as the rows count it)
        fitted = {mode: [len(stats), float(stats[:, 1].sum()), wall, rho,
                         float(stats[:, 3].sum())]}
        ends = None  # (as _priority_ends finds them in the rows)
        if self.buckets:
            ends, finite = {}, np.flatnonzero(np.isfinite(fronts))
            if len(finite):
                a, b = finite[0], finite[-1]
                ends["cpu"] = [first + a, float(fronts[a]), first + b, float(fronts[b])]
        self._fold(fitted, {}, _NO_GPU_ROWS, ends, num_arcs)

    def _fold(self, fitted, other, gpu, ends, num_arcs):
        """Fold the totals of :meth:`observe_rows` into the rates, the fits and, with
        ``ends`` (:func:`_priority_ends`; None: none measured), the progress and the
        bucketed modes' shares; first, the error of what the model predicted of them,
        per mode (the GPU's: its pulls, by its rate, and its pushes of active
        subgraphs, by their fit: :meth:`_fold_pushes`)."""
        if ends is not None:
            self._observe_progress(ends, fitted)
        for mode, (count, edges, seconds, rho, relaxed) in fitted.items():
            size = (relaxed if self._relaxes(mode) else edges) / count
            part = relaxed / edges if mode == "push" and edges else None  # (measured)
            prior = self._bucket_prior(mode, edges / count / num_arcs, rho, num_arcs,
                                       part) / size if size else 0.0
            fit = self.fits[mode]
            self._observe_error("cpu", mode, fit.predict(size, prior), seconds / count)
            fit.observe(size, seconds / count, prior)
        for mode, (edges, seconds) in other.items():
            self._observe_error("cpu", mode, self._measured_seconds("cpu", mode, edges),
                                seconds)
            self.observe("cpu", mode, edges, seconds)
        edges, seconds, pushes, pushed, push_seconds, moved = gpu
        if edges:
            self._observe_error("gpu", "pull", self._measured_seconds("gpu", "pull", edges),
                                seconds)
            self.observe("gpu", "pull", edges, seconds)
        if pushes:
            self._fold_pushes(pushes, pushed, push_seconds, moved, num_arcs)

    def _fold_pushes(self, count, frontier, seconds, moved, num_arcs):
        """Fold ``count`` GPU pushes of active subgraphs, from frontiers of ``frontier``
        out-edges in all, that took ``seconds`` and copied ``moved`` bytes in, into the
        "gpu-push" fit (their mean bytes in their mean seconds) and ``push_bytes``;
        first, the error of what the model predicted of them from their frontier (none
        before a push was measured: the prior's error is not the fit's). The first
        counts at most ``tuning.COST_OUTLIER`` times the prior (:meth:`_push_prior`), as
        later ones count at most that many times the fit: an engine's first push also
        compiles it."""
        mean, edges = seconds / count, frontier / count
        predicted = self._push_seconds(edges)
        self._observe_error("gpu", "push", predicted, mean)
        if predicted is None:
            mean = min(mean, tuning.COST_OUTLIER * self._push_prior(edges, num_arcs))
        if frontier:
            self.push_bytes = _smoothed(self.push_bytes, moved / frontier)
        self.fits["gpu-push"].observe(moved / count, mean, self._push_slope())

    def _push_prior(self, edges, num_arcs):
        """A GPU push's seconds from a frontier of ``edges`` out-edges before any was
        measured: its pull's, less the streamed edges that are not active (a share
        ``edges / num_arcs`` of them are), (1 - subgraph (1 - f)) of it."""
        return self.seconds("gpu", num_arcs) * (
            1.0 - self.subgraph * (1.0 - edges / num_arcs))

    def _push_seconds(self, edges):
        """Predicted seconds of a GPU push of the active subgraph of a frontier of
        ``edges`` out-edges: the "gpu-push" fit at ``push_bytes`` bytes an edge (None
        before a push was measured)."""
        if self.push_bytes is None:
            return None
        return self.fits["gpu-push"].predict(self.push_bytes * edges, self._push_slope())

    def _push_slope(self):
        """Seconds per byte of a GPU push before its fit can tell its slope from its
        fixed part: the prior's (:meth:`_push_prior`: the pull's rate per streamed
        edge) over ``push_bytes`` (0 before they were measured)."""
        if not self.push_bytes:
            return 0.0
        return self.per_edge.get(("gpu", "pull"), 0.0) * self.subgraph / self.push_bytes

    def _relaxes(self, mode):
        """Whether the CPU's ``mode`` is fitted against the edges it reads, not its
        frontier's out-edges: with priority buckets, a push or notify-pull runs the
        lowest bucket's part of its frontier (see ``shares``)."""
        return self.buckets and mode in self.fits

    def _measured_seconds(self, kind, mode, edges):
        """Predicted seconds of ``edges`` at a measured rate (None: none, or the
        calibration's, which the first measurement replaces and whose error is not the
        model's)."""
        key = (kind, mode)
        if key not in self.per_edge or key in self.calibrated:
            return None
        return edges * self.per_edge[key]

    def _observe_progress(self, ends, fitted):
        """Fold into ``progress`` each device kind's rise of the priority per iteration
        between its ``ends`` (see :func:`_priority_ends`), and into ``shares`` each
        bucketed mode's edges read over its frontier's out-edges (``fitted``: the rows'
        totals by mode, see :meth:`_row_totals`; a push's at most 1: it reads no more
        than its frontier's out-edges, a notify-pull's as measured: the in-edges of
        the vertices notified)."""
        for kind, (first, low, last, high) in ends.items():
            if last > first:
                rise = max(high - low, 0.0) / (last - first)
                self.progress[kind] = _smoothed(self.progress.get(kind), rise)
        for mode, totals in fitted.items():
            if totals[1]:
                share = totals[4] / totals[1]
                self.shares[mode] = _smoothed(self.shares.get(mode),
                                              min(share, 1.0) if mode == "push" else share)

    def progress_ratio(self):
        """How many CPU iterations one GPU iteration's progress takes (1 without
        ``buckets``: their iterations do the same): the GPU's rise of the priority per
        iteration over the CPU's once both were measured, else 1 / ``share`` (as if
        progress went with the edges relaxed), 1 before any push. At least 1: a GPU
        iteration runs every vertex that the CPU's runs, and more."""
        if not self.buckets:
            return 1.0
        cpu, gpu = self.progress.get("cpu"), self.progress.get("gpu")
        if cpu and gpu:
            return max(gpu / cpu, 1.0)
        return 1.0 / self.share if self.share else 1.0

    def _lead(self, current, behind, weight):
        """Seconds the other side is predicted to gain over ``current``, which is
        ``behind`` seconds an iteration slower now, while that lasts: infinite unless
        it shrinks (measured between calls ``weight`` iterations apart, then smoothed
        from its first measurement, not from 0, which would read as a lead that lasts),
        else what it gains until it ends, behind^2 / (2 * shrink per iteration). A BFS
        on a grid has a CPU ahead for small frontiers, by less as they grow."""
        last = self.lead
        trend = None  # (until two calls on one side measured it)
        if last is not None and last[0] == current:
            trend = (behind - last[1]) / max(weight, 1)
            if last[2] is not None:  # (_smoothed inline: called every iteration)
                smoothing = tuning.COST_SMOOTHING
                trend = (1 - smoothing) * last[2] + smoothing * trend
        self.lead = (current, behind, trend)
        if trend is None or trend >= 0 or behind <= 0:
            return float("inf")
        return behind * behind / (-2 * trend)

    def observe_switch(self, seconds):
        """Fold the measured cost of a segment boundary into ``switch``."""
        self.switch = _smoothed(self.switch, max(seconds, 0.0))

    def observe_overhead(self, seconds):
        """Fold the measured seconds of a hybrid iteration beyond its busiest device
        into ``overhead``."""
        self.overhead = _smoothed(self.overhead, max(seconds, 0.0))

    def seconds(self, kind, edges, mode="pull"):
        """Predicted seconds for ``edges`` edges (0 when the model has no measurement)."""
        return edges * self.per_edge.get((kind, mode), 0.0)

    subgraph = 0.0  # the GPU's streamed share of the arcs, which its active subgraphs
    # replace by their active edges (0: none; set from the GPU's calibration)

    def gpu_seconds(self, f, num_arcs):
        """Predicted seconds of a GPU iteration of notify fraction ``f``, as its engine
        runs it: a pull of every page, but with active subgraphs, while f is under
        ``tuning.SUBGRAPH_ACTIVE_EDGES``, a push of the active subgraph where that is
        predicted faster (the engine's ``SubgraphChoice`` pushes so): the "gpu-push" fit
        at the bytes a frontier of f |E| out-edges copies in (``push_bytes`` an edge);
        before any push was measured, :meth:`_push_prior`."""
        pull = self.seconds("gpu", num_arcs)
        if not self.subgraph or f >= tuning.SUBGRAPH_ACTIVE_EDGES:
            return pull
        push = self._push_seconds(f * num_arcs)
        if push is None:
            push = self._push_prior(f * num_arcs, num_arcs)
        return push if push < pull else pull

    def page_seconds(self, kind, edges):
        """Predicted seconds of a hybrid iteration's page task of ``edges`` edges on
        ``kind``: its measured rate on page tasks ("pages"), before any, its pull's. A
        GPU page task also brings the device state up to date and copies its pages'
        values back, so it is kept apart from the GPU's pull, which predicts whole
        iterations on the GPU: counted as a pull, it would make the GPU alone look
        slower than it is."""
        rates = self.per_edge  # (as seconds(): its pages' rate, else its pull's)
        return edges * rates.get((kind, "pages"), rates.get((kind, "pull"), 0.0))

    def has_rate(self, kind, mode):
        """Whether ``kind`` has a rate in ``mode`` (measured or calibrated)."""
        return (kind, mode) in self.per_edge

    def _prior(self, mode, f, rho, num_arcs):
        """A CPU push's or notify-pull's seconds before any was measured: rho f push
        pulls for a push; Garaph's notify-pull estimate, with the skew, rho (f + min(f
        skew, 1)) pulls, on one thread for a frontier of at most ``sparse_edges`` edges
        (the pull's rate is that of ``threads``: priced at it, a one-thread notify-pull
        would look ``threads`` times too cheap)."""
        pull = self.seconds("cpu", num_arcs)
        if mode == "push":
            return rho * f * self.push * pull
        pulls = rho * (f + min(f * self.skew, 1.0))
        threads = self.threads if f * num_arcs <= self.sparse_edges else 1
        return pulls * threads * pull

    def cpu_mode_for(self, f, rho, num_arcs):
        """The CPU mode the engine runs an iteration of notify fraction ``f`` in."""
        return choose_cpu_mode(f, rho, self.skew, self.push, self.cpu_mode,
                               notify_fraction(self.sparse_edges, num_arcs),
                               self.threads)

    def cpu_seconds(self, f, rho, num_arcs):
        """Predicted seconds of the CPU's iteration in the mode the engine will run it
        in (:meth:`cpu_mode_for`), not the cheapest of the modes predicted: a mode the
        engine does not run may be predicted far cheaper than the one it runs."""
        mode = self.cpu_mode_for(f, rho, num_arcs)
        if mode == "pull":
            return self.seconds("cpu", num_arcs)
        prior = self._bucket_prior(mode, f, rho, num_arcs)
        size = f * num_arcs
        if self._relaxes(mode):  # (the edges it reads: of the lowest bucket)
            size *= self.shares.get(mode, self.share or 1.0)
        fitted = self.fits[mode].predict(size, prior / size if size else 0.0)
        return prior if fitted is None else fitted

    def _bucket_prior(self, mode, f, rho, num_arcs, part=None):
        """:meth:`_prior` of a frontier of notify fraction ``f`` of which, with
        ``buckets``, the lowest bucket's ``part`` runs (default ``share``, once
        measured, else all)."""
        if self._relaxes(mode):
            f *= part if part is not None else self.share or 1.0
        return self._prior(mode, f, rho, num_arcs)

    def alpha(self, f, rho, num_arcs):
        """The CPU's predicted iteration time over the GPU's pull: Garaph's eq. 3,
        min(2 f rho, 1) T_pull / T_GPU with skew 1, until a notify-pull was measured;
        the CPU's for a GPU iteration's progress (:meth:`progress_ratio`); nan until
        both devices were measured."""
        t_pull, t_gpu = self.per_edge.get(("cpu", "pull")), self.per_edge.get(("gpu", "pull"))
        if not t_pull or not t_gpu or not num_arcs:
            return float("nan")
        return self.cpu_seconds(f, rho, num_arcs) * self.progress_ratio() / \
            self.gpu_seconds(f, num_arcs)

    def lead_degree(self, rho, num_arcs):
        """The largest frontier (its out-degree sum, edges) whose CPU iteration is
        predicted faster than the GPU's (:meth:`alpha` below 1), found by bisection over
        f, since the CPU's time grows with its frontier: ``num_arcs`` when the CPU wins
        even a whole pass, 0 when it wins none or the model is not calibrated. A CPU
        burst that the model placed runs while its frontier stays within it."""
        if not self.alpha(0.0, rho, num_arcs) < 1.0:  # (nan: not calibrated)
            return 0
        if self.alpha(1.0, rho, num_arcs) < 1.0:
            return num_arcs
        low, high = 0, num_arcs  # (alpha below one at low, not at high)
        precision = tuning.LEAD_PRECISION
        while high - low > max(1, low // precision):
            middle = (low + high) // 2
            if self.alpha(middle / num_arcs, rho, num_arcs) < 1.0:
                low = middle
            else:
                high = middle
        return low

    def _gpu_or_hybrid(self, gpu, num_arcs):
        """"hybrid" when a hybrid iteration's estimate (:meth:`_estimate` of the balanced
        split of its ``num_arcs`` edges at the rates of both devices' page tasks, what
        a hybrid iteration runs (:meth:`page_seconds`), plus the overhead) beats the
        GPU alone (its measured iteration, else ``gpu`` seconds) by more than the
        hybrid's measured error (:meth:`error`), else "gpu"; the estimate is then what
        the model expects of it (``expected``)."""
        predicted = self._hybrid_prediction(num_arcs)
        hybrid = self._estimate("hybrid", predicted)
        if self.iteration.get("gpu", gpu) - hybrid <= self.error("hybrid", "pull") * hybrid:
            self.expected.pop("hybrid", None)
            return "gpu"
        self.expected["hybrid"] = (hybrid, predicted, num_arcs)
        return "hybrid"

    def _hybrid_prediction(self, num_arcs):
        """Seconds of a hybrid iteration over ``num_arcs`` edges: their balanced split
        at the rates of both devices' page tasks (:meth:`page_seconds`), plus the
        overhead."""
        on_gpu, on_cpu = self.page_seconds("gpu", num_arcs), self.page_seconds("cpu", num_arcs)
        return on_gpu * on_cpu / (on_gpu + on_cpu) + self.overhead

    def _margin(self, best, f, rho, num_arcs):
        """How much faster ``best`` ("cpu" or the GPU's) must be predicted, as a share of
        the slower side's time, for staying to count as a loss: ``tuning.SWITCH_MARGIN``,
        or the measured error of its predictions in the mode it would run in
        (:meth:`error`; the GPU's: a push of its active subgraph or a pull) if more."""
        if best == "cpu":
            mode = self.cpu_mode_for(f, rho, num_arcs)
        else:
            mode = "push" if self._pushes(f, num_arcs) else "pull"
        return max(tuning.SWITCH_MARGIN, self.error("cpu" if best == "cpu" else "gpu", mode))

    def _pushes(self, f, num_arcs):
        """Whether a GPU iteration of notify fraction ``f`` is predicted to push its
        active subgraph (:meth:`gpu_seconds`), not pull every page."""
        return self.gpu_seconds(f, num_arcs) < self.seconds("gpu", num_arcs)

    def placement(self, f, rho, num_arcs, current=None, start=False, weight=1, seconds=0.0):
        """Where an iteration with both device kinds available runs.

        "cpu" when the CPU alone is predicted faster (alpha < 1, Garaph), else "hybrid"
        when the balanced split of a pull over CPU and GPU page tasks (at their rates)
        plus the hybrid overhead beats the GPU alone by more than the hybrid's
        measured prediction error (measured iteration times replace both predictions
        once there are some, a hybrid's scaled by how its prediction moved since: one
        that lost is not tried again until the model's inputs change, as
        :meth:`_estimate` defines), else "gpu". The CPU's times are for a
        GPU iteration's progress (:meth:`progress_ratio` of its iterations), and so
        are the iterations ``weight`` counts on the CPU.

        Leaving the ``current`` placement for the other side of the CPU/GPU line moves
        the vertex state, a cost that predictions cannot be trusted to recoup (a run
        may end the next iteration): the run moves only once staying has lost, summed
        over the iterations since the other side became faster by
        ``tuning.SWITCH_MARGIN`` or by the measured error of its predictions
        (:meth:`error`), whichever is more, as much as a move costs (``switch``; the
        ski-rental rule: never worse than twice the best choice in hindsight). While away from a
        device, its inflated rates relax back towards the lowest they had
        (:meth:`relax`).

        The run's first iteration (``start``) goes to the CPU when it wins that
        iteration and the next, looking one iteration ahead to a frontier ``growth``
        times larger, where the CPU may instead pay a move to the GPU (a BFS from a hub
        would otherwise start on the CPU, then move for a second iteration that the
        GPU would have run with the first). A first iteration the CPU loses runs on the
        GPU alone, not hybrid: the GPU's rate, calibrated outside page tasks, cannot yet
        tell a hybrid split's worth.

        Parameters
        ----------
        f : float
            The iteration's notify fraction (active out-degree over |E|).
        rho : float
            Sequential over random read speed (1 in memory).
        num_arcs : int
            |E|, the graph's arcs.
        current : str or None, default None
            Where the run is now ("cpu", "gpu" or "hybrid"; None: nowhere yet).
        start : bool, default False
            The run's first iteration.
        weight : int, default 1
            The iterations this answer stands for (what staying loses counts that many
            times).
        seconds : float, default 0.0
            The wall seconds those iterations took (the other side's rates relax by
            them).

        Returns
        -------
        (str, float)
            The placement ("cpu", "gpu", "hybrid", or "calibrate" when the GPU's pages
            are laid out and it is not calibrated yet) and alpha (nan before both
            devices are calibrated).
        """
        if current in ("cpu", "gpu"):
            self.relax("gpu" if current == "cpu" else "cpu", seconds)
        pull, gpu = self.seconds("cpu", num_arcs), self.gpu_seconds(f, num_arcs)
        if not pull or not gpu:  # not calibrated: the CPU alone, until the GPU's pages
            # are laid out ("calibrate": the driver then measures the GPU)
            ready = self.waiting is not None and self.waiting.done()
            return ("calibrate" if ready else "cpu"), float("nan")
        ratio = self.progress_ratio()
        cpu = self.cpu_seconds(f, rho, num_arcs) * ratio
        a = cpu / gpu  # as alpha()
        # (a hybrid iteration pulls every page: against active subgraphs, the GPU alone)
        device = self._gpu_or_hybrid(gpu, num_arcs) \
            if gpu == self.seconds("gpu", num_arcs) else "gpu"
        if start:  # the CPU must win this iteration and the next, or move; else the GPU
            ahead = self.cpu_seconds(min(f * self.growth, 1.0), rho, num_arcs) * ratio
            return ("cpu" if cpu + min(ahead, self.switch + gpu) < 2 * gpu else "gpu"), a
        if current == "cpu":
            weight /= ratio
        best = "cpu" if cpu < gpu else device
        stay = "cpu" if current == "cpu" else device
        lead = self._lead(current, (cpu - gpu) if current == "cpu" else (gpu - cpu), weight)
        if current is None or best == stay or lead < 2 * self.switch or \
                abs(cpu - gpu) < self._margin(best, f, rho, num_arcs) * max(cpu, gpu):
            self.regret = 0.0  # (the other side is not faster by the margin, or not for
            return (best if current is None else stay), a  # long enough: no loss)
        self.regret += weight * abs(cpu - gpu)
        if self.regret < self.switch:
            return stay, a
        self.regret = 0.0
        return best, a
