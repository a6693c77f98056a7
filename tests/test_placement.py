"""The cost model and the reactive page placement, fed known page times."""

import heapq
import math
import zlib

import numpy as np
import pytest
from hypothesis import given, strategies as st

from hetgraph import tuning
from hetgraph.engines import base
from hetgraph.scheduler.costmodel import CostModel, LinearFit, alpha
from hetgraph.scheduler.placement import PageQueue
from hetgraph.result import COLUMN, history_row
from hetgraph.scheduler.tasks import RunSpec
from conftest import examples


def model(cpu_per_edge, gpu_per_edge, overhead=0.0, cpu_pages=True):
    """A model with these pull rates (seconds an edge); ``cpu_pages``: the CPU's page
    tasks measured at its pull's rate (else its first hybrid batch is one page)."""
    m = CostModel(overhead)
    m.observe("cpu", "pull", 1000, 1000 * cpu_per_edge)
    m.observe("gpu", "pull", 1000, 1000 * gpu_per_edge)
    if cpu_pages:
        m.observe("cpu", "pages", 1000, 1000 * cpu_per_edge)
    return m


def test_alpha_is_garaph_equation_3():
    # alpha = min(2 f rho, 1) * T_pull / T_GPU
    assert alpha(0.1, 1.0, 8.0, 2.0) == pytest.approx(0.2 * 4)
    assert alpha(0.3, 1.0, 8.0, 2.0) == pytest.approx(0.6 * 4)
    assert alpha(0.9, 1.0, 8.0, 2.0) == pytest.approx(4.0)  # min(..., 1)
    assert alpha(0.1, 10.0, 8.0, 2.0) == pytest.approx(4.0)  # out of core: rho = k
    assert alpha(0.01, 1.0, 8.0, 2.0) == pytest.approx(0.08)


def test_cpu_only_when_alpha_below_one():
    m = model(8e-9, 2e-9)  # the GPU pulls 4x faster per edge
    place, a = m.placement(0.1, 1.0, 10**6)  # alpha = 0.8
    assert place == "cpu" and a == pytest.approx(0.8)
    place, a = m.placement(0.2, 1.0, 10**6)  # alpha = 1.6
    assert place != "cpu" and a == pytest.approx(1.6)
    # a slower GPU never gets an iteration
    assert model(1e-9, 2e-9).placement(1.0, 1.0, 10**6)[0] == "cpu"


def test_hybrid_only_when_the_split_beats_the_overhead():
    # full pull: GPU 2 ms, CPU 8 ms; balanced split = 1.6 ms; the gain must exceed the
    # hybrid's prediction error, PREDICTION_ERROR (0.2) of its time before any measured
    assert model(8e-9, 2e-9, overhead=0.0).placement(1.0, 1.0, 10**6)[0] == "hybrid"
    # 1.65 ms: 0.35 ms faster, more than 0.2 * 1.65
    assert model(8e-9, 2e-9, overhead=0.05e-3).placement(1.0, 1.0, 10**6)[0] == "hybrid"
    # 1.7 ms: 0.3 ms faster, less than 0.2 * 1.7 = 0.34 ms
    assert model(8e-9, 2e-9, overhead=0.1e-3).placement(1.0, 1.0, 10**6)[0] == "gpu"
    assert model(8e-9, 2e-9, overhead=0.5e-3).placement(1.0, 1.0, 10**6)[0] == "gpu"


def test_skewed_in_degrees_raise_the_notify_pull_estimate():
    m = model(8e-9, 2e-9, overhead=1.0)
    assert m.placement(0.1, 1.0, 10**6)[0] == "cpu"  # skew 1: 2 f T_pull = 1.6 ms
    m.skew = 3.0  # notified vertices pull 3x the frontier's edges: (0.1 + 0.3) * 8 ms
    place, a = m.placement(0.1, 1.0, 10**6)
    assert place == "gpu" and a == pytest.approx(1.6)
    m.skew = 1000.0  # capped at a full pull
    assert m.cpu_seconds(0.1, 1.0, 10**6) == pytest.approx(8e-3)


def notify_row(f, seconds, **changes):
    return history_row(**{"placement": "cpu", "mode": "notify-pull", "f": f, "rho": 1.0,
                          "edges": 0, "cpu_seconds": seconds, "seconds": seconds, **changes})


def test_measured_notify_pull_cost_replaces_garaphs_estimate():
    m = model(8e-9, 2e-9, overhead=1.0)
    assert m.placement(0.1, 1.0, 10**6)[0] == "cpu"  # 2 f T_pull = 1.6 ms < 2 ms
    # notify-pull measured at 3x the frontier's edges in pulled in-edges: 0.1 * 1e6
    # frontier edges * 24 ns = 2.4 ms > 2 ms on the GPU, and at a tenth as many
    m.observe_rows([notify_row(0.1, 2.4e-3)], 10**6)
    m.observe_rows([notify_row(0.01, 0.24e-3)], 10**6)
    m.observe_rows([notify_row(0.1, 2.4e-3)], 10**6)
    place, a = m.placement(0.1, 1.0, 10**6)
    assert place == "gpu" and a == pytest.approx(1.2)
    assert m.placement(0.05, 1.0, 10**6)[0] == "cpu"  # 1.2 ms


def test_a_small_notify_pull_teaches_its_fixed_cost_not_a_cost_per_edge():
    # 20 frontier edges in 50 us: 2.5 us per edge would predict 250 ms for 1e5 edges;
    # with Garaph's prior slope (2 T_pull = 16 ns per frontier edge) it is ~1.65 ms
    m = model(8e-9, 2e-9, overhead=1.0)
    m.observe_rows([notify_row(20 / 10**6, 50e-6)], 10**6)
    assert m.cpu_seconds(0.1, 1.0, 10**6) == pytest.approx(50e-6 + 10**5 * 16e-9, rel=1e-3)
    assert m.placement(0.1, 1.0, 10**6)[0] == "cpu"
    # measured over a spread of sizes, the fit finds fixed part and slope
    for edges in (10**3, 10**4, 10**5, 10**4, 10**3, 10**5):
        m.observe_rows([notify_row(edges / 10**6, 30e-6 + edges * 40e-9)], 10**6)
    assert m.cpu_seconds(0.05, 1.0, 10**6) == pytest.approx(30e-6 + 5e4 * 40e-9, rel=1e-3)
    assert m.cpu_seconds(0.9, 1.0, 10**6) == pytest.approx(8e-3)  # a pull is cheaper


def test_the_run_moves_once_staying_has_lost_what_a_move_costs():
    m = model(8e-9, 2e-9, overhead=1.0)  # no hybrid; GPU 2 ms per iteration
    m.switch = 1e-3
    # CPU 0.8 ms (f = 0.05): better by 1.2 ms per iteration
    assert m.placement(0.05, 1.0, 10**6)[0] == "cpu"  # from nowhere: no move
    assert m.placement(0.05, 1.0, 10**6, current="cpu")[0] == "cpu"
    assert m.placement(0.05, 1.0, 10**6, current="gpu")[0] == "cpu"  # lost 1.2 >= 1 ms
    m.switch = 3e-3
    assert m.placement(0.05, 1.0, 10**6, current="gpu")[0] == "gpu"  # lost 1.2 ms
    assert m.placement(0.05, 1.0, 10**6, current="gpu")[0] == "gpu"  # lost 2.4 ms
    assert m.placement(0.05, 1.0, 10**6, current="gpu")[0] == "cpu"  # lost 3.6 ms
    assert m.regret == 0.0
    # an iteration where the current side is better again forgets what was lost
    m.placement(0.05, 1.0, 10**6, current="gpu")
    m.placement(0.05, 1.0, 10**6, current="gpu")
    assert m.placement(0.2, 1.0, 10**6, current="gpu")[0] == "gpu"  # CPU 3.2 ms
    assert m.placement(0.05, 1.0, 10**6, current="gpu")[0] == "gpu"
    # and the same from the CPU: 0.2 -> CPU 3.2 ms, 1.2 ms behind the GPU
    m.regret = 0.0
    assert [m.placement(0.2, 1.0, 10**6, current="cpu")[0] for _ in range(3)] == \
        ["cpu", "cpu", "gpu"]


def test_a_later_run_starts_from_the_measured_cost_of_a_move():
    # a run measured its moves at 3 ms (against the calibration's 1 ms): a later run on
    # the same graph, whose calibration says 1 ms again, waits as the first learnt to
    first = model(8e-9, 2e-9, overhead=1.0)
    first.switch = 1e-3
    for _ in range(8):
        first.observe_switch(3e-3)
    later = model(8e-9, 2e-9, overhead=1.0)
    later.switch = 1e-3
    assert later.placement(0.05, 1.0, 10**6, current="gpu")[0] == "cpu"  # lost 1.2 ms
    later.recall(first.remembered())
    assert later.switch == pytest.approx(first.switch) and later.switch > 2.5e-3
    assert [later.placement(0.05, 1.0, 10**6, current="gpu")[0] for _ in range(3)] == \
        ["gpu", "gpu", "cpu"]


def test_a_lead_under_the_margin_never_moves_the_run():
    # GPU 2.5 ms an iteration, the CPU 8% faster (notify-pull measured at 2.3 ms): staying
    # on the GPU loses nothing however long; 32% faster, it loses 0.8 ms an iteration
    m = model(8e-9, 2.5e-9, overhead=1.0)
    m.switch = 1e-3
    m.observe_rows([notify_row(0.1, 2.3e-3)], 10**6)
    assert [m.placement(0.1, 1.0, 10**6, current="gpu")[0] for _ in range(50)] == \
        ["gpu"] * 50
    assert m.regret == 0.0
    assert m.placement(0.1, 1.0, 10**6)[0] == "cpu"  # from nowhere: the faster
    for _ in range(20):
        m.observe_rows([notify_row(0.1, 1.7e-3)], 10**6)
    assert [m.placement(0.1, 1.0, 10**6, current="gpu")[0] for _ in range(2)] == \
        ["gpu", "cpu"]  # lost 0.8, then 1.6 >= 1 ms
    # and from the CPU: the GPU 7% faster than the CPU's 2.7 ms
    for _ in range(30):
        m.observe_rows([notify_row(0.1, 2.7e-3)], 10**6)
    assert [m.placement(0.1, 1.0, 10**6, current="cpu")[0] for _ in range(50)] == \
        ["cpu"] * 50


def test_a_lead_that_ends_before_it_pays_two_moves_is_not_taken():
    # the GPU at 40 us an iteration; the CPU (Garaph's prior, 2 f T_pull) at 25 us, a
    # lead of 15 us that pays a move of 0.3 ms in 20 iterations, if it lasts
    def cpu_ahead():
        m = model(8e-9, 40e-12, overhead=1.0)
        m.switch = 0.3e-3
        return m
    m = cpu_ahead()
    f0 = 25e-6 / 16e-3
    answers = [m.placement(f0, 1.0, 10**6, current="gpu")[0] for _ in range(30)]
    assert answers.index("cpu") == 20
    # a frontier growing 0.2 us of CPU time an iteration: the lead ends after 75
    # iterations, having gained about 15^2 / 0.4 = 560 us, under two moves' 600
    m = cpu_ahead()
    answers, regrets = [], []
    for i in range(80):
        answers.append(m.placement(f0 + i * 0.2e-6 / 16e-3, 1.0, 10**6, current="gpu")[0])
        regrets.append(m.regret)
    assert answers == ["gpu"] * 80
    assert regrets[0] == pytest.approx(15e-6) and max(regrets[1:]) == 0.0  # from the 2nd


def test_a_sparse_notify_pull_is_predicted_on_one_thread():
    m = CostModel(threads=16, sparse_edges=50_000)
    m.observe("cpu", "pull", 10**6, 1e-3)  # 1 ns an edge over 16 threads
    assert m.cpu_seconds(0.01, 1.0, 10**6) == pytest.approx(2 * 10**4 * 16e-9)
    assert m.cpu_seconds(0.1, 1.0, 10**6) == pytest.approx(2 * 10**5 * 1e-9)


def test_the_cpu_is_predicted_in_the_mode_its_engine_runs():
    # a grid (skew 4) on 16 threads: a frontier past the sparse notify-pulls' 50,000
    # edges notify-pulls on the threads (5 f pulls against a push's 32 f, see
    # choose_cpu_mode); predicted as the cheaper push prior, the H100's grid-1000 BFS
    # (4 frontier edges: 0.07 us against 15-30 us measured) left the GPU at once
    m = CostModel(threads=16, sparse_edges=50_000, skew=4.0, push=32.0)
    m.observe("cpu", "pull", 10**6, 1e-3)  # 1 ns an edge over 16 threads
    m.observe_rows([notify_row(0.1, 0.6e-3)], 10**6)
    assert m.cpu_mode_for(0.06, 1.0, 10**6) == "notify-pull"
    # (the measurement fixes the fit's fixed part, 0.1 ms at the prior's slope, 5 ns)
    assert m.cpu_seconds(0.06, 1.0, 10**6) == pytest.approx(0.4e-3)
    # a sparse frontier's notify-pull would run in one thread, as a push: it pushes
    assert m.cpu_mode_for(4 / 10**6, 1.0, 10**6) == "push"
    assert m.cpu_seconds(4 / 10**6, 1.0, 10**6) == pytest.approx(4 * 32e-9)
    # a run's own CPU mode is predicted as such
    m.cpu_mode = "pull"
    assert m.cpu_mode_for(4 / 10**6, 1.0, 10**6) == "pull"
    assert m.cpu_seconds(4 / 10**6, 1.0, 10**6) == pytest.approx(1e-3)


def test_rates_inflated_while_away_relax_back_to_the_lowest_measured():
    # grid-1000 BFS on the H100: a stretch of slow GPU rows (the host busy) raised the
    # GPU's rate, the run left for the CPU and never measured the GPU again
    m = model(8e-9, 25e-12, overhead=1.0)  # GPU 25 us an iteration
    m.observe_rows([notify_row(0.001, 60e-6)], 10**6)  # the CPU's notify-pull: 60 us
    m.switch = 0.5e-3
    for _ in range(6):
        m.observe_rows([gpu_row(3e-3)], 10**6)
    inflated = m.seconds("gpu", 10**6)
    assert inflated > 200e-6
    assert m.placement(0.001, 1.0, 10**6, current="gpu", weight=10)[0] == "cpu"
    # on the CPU, the GPU's rate decays back: half the excess every RELAX_HALF_LIFE
    # seconds away, however many iterations ran in them
    half_life = tuning.RELAX_HALF_LIFE
    m.placement(0.001, 1.0, 10**6, current="cpu", weight=100, seconds=half_life)
    assert m.seconds("gpu", 10**6) == pytest.approx(25e-6 + (inflated - 25e-6) / 2)
    m.placement(0.001, 1.0, 10**6, current="cpu", weight=1, seconds=half_life)
    assert m.seconds("gpu", 10**6) == pytest.approx(25e-6 + (inflated - 25e-6) / 4)
    m.placement(0.001, 1.0, 10**6, current="cpu", weight=1000)  # (no time: no change)
    assert m.seconds("gpu", 10**6) == pytest.approx(25e-6 + (inflated - 25e-6) / 4)
    answers = [m.placement(0.001, 1.0, 10**6, current="cpu", weight=4, seconds=1e-3)[0]
               for _ in range(40)]
    assert "gpu" in answers  # the run goes back once the GPU is ahead again
    assert m.seconds("gpu", 10**6) < 40e-6
    # a rate measured below its calibration is kept; the CPU's relaxes the same way
    m.observe_rows([gpu_row(10e-6)] * 3, 10**6)
    faster = m.seconds("gpu", 10**6)
    m.placement(0.001, 1.0, 10**6, current="cpu", weight=1000, seconds=1.0)
    assert m.seconds("gpu", 10**6) == faster < 25e-6
    m.observe_rows([notify_row(1.0, 80e-3, mode="pull", edges=10**6)], 10**6)
    assert m.seconds("cpu", 10**6) > 8e-3
    m.placement(0.001, 1.0, 10**6, current="gpu", weight=1000, seconds=1.0)
    assert m.seconds("cpu", 10**6) == pytest.approx(8e-3, rel=1e-3)


def test_an_answer_standing_for_several_iterations_counts_their_loss():
    m = model(8e-9, 2e-9, overhead=1.0)
    m.switch = 3e-3  # staying on the GPU loses 1.2 ms an iteration (see above)
    assert m.placement(0.05, 1.0, 10**6, current="gpu", weight=2)[0] == "gpu"  # 2.4 ms
    assert m.placement(0.05, 1.0, 10**6, current="gpu", weight=2)[0] == "cpu"  # 4.8 ms


def test_a_segment_asks_the_model_at_most_every_choose_seconds(monkeypatch):
    from types import SimpleNamespace

    from hetgraph.scheduler import tasks

    asked = []

    class Model:
        def placement(self, f, rho, num_arcs, current, weight, seconds):
            asked.append((f, weight))
            waited.append(seconds)
            return ("cpu" if f < 0.5 else "gpu"), f

    now, waited = [5.0], []
    monkeypatch.setattr(tasks, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    run = SimpleNamespace(rho=1.0, graph=SimpleNamespace(num_arcs=100), cpu_mode="auto")
    choose = tasks._chooser(Model(), run, "cpu", others=True)
    step = 0.3 * tuning.CHOOSE_SECONDS  # short iterations: asked every fourth call

    def call(f):
        answer = choose(f)
        now[0] += step
        return answer

    answers = [call(0.01 * i) for i in range(9)]
    assert asked == [(0.0, 1), (0.04, 4), (0.08, 4)]
    assert [a[0] for a in answers] == ["cpu"] * 9 and answers[3] == ("cpu", 0.0)
    step = 3 * tuning.CHOOSE_SECONDS  # long iterations: every call asks, for itself
    # (but the first: it comes 0.3 CHOOSE_SECONDS after the last question)
    assert [call(f)[0] for f in (0.1, 0.2, 0.3, 0.9)] == ["cpu", "cpu", "cpu", "gpu"]
    assert asked[3:] == [(0.2, 2), (0.3, 1), (0.9, 1)]
    # each question also gives the seconds since the one before (the first: since the
    # segment began), by which the other side's rates relax
    assert waited == pytest.approx([0.0, 4 * 0.3e-3, 4 * 0.3e-3, 0.3e-3 + 3e-3, 3e-3, 3e-3])
    # a call after a burst stands for the burst's iterations too
    assert choose(0.2, ran=31)[0] == "cpu" and asked[-1] == (0.2, 31)
    one = tasks._chooser(Model(), run, "cpu", others=False)
    assert one(0.9)[0] == "cpu" and one(0.9, ran=5)[0] == "cpu"
    assert len(asked) == 7  # one device kind: never asked


def test_a_segment_calls_its_chooser_only_once_the_last_answer_is_due(monkeypatch):
    """Between the model's questions a segment does not call its chooser (the answer to
    stay stands until ``choose.due``): an iteration of a run placed by the model pays
    what one of a run on one device kind pays (issue 59). The same iterations and
    weights reach the model as when every iteration called it."""
    from types import SimpleNamespace

    from hetgraph.scheduler import tasks

    step = tuning.CHOOSE_SECONDS / 10  # clock reads: 2 an iteration, 5 iterations a ms
    now = [0.0]

    def clock():
        now[0] += step
        return now[0]

    class Engine(base.Engine):
        queued, read_bytes, front, values = 1, 0, float("nan"), None

        def frontier(self):
            return 10, 100

        def launch(self, constant, frontier=None):
            return 0

        def wait(self, ticket):
            return "gpu-pull", 10, 100, 10, step

    class Model:
        def alpha(self, f, rho, num_arcs):
            return 1.5

        def placement(self, f, rho, num_arcs, current, weight, seconds):
            asked.append(weight)
            return "gpu", 1.5

        def observe_rows(self, rows, num_arcs):
            pass

    monkeypatch.setattr(tasks, "time", SimpleNamespace(perf_counter=clock))
    run = SimpleNamespace(spec=SimpleNamespace(program=None, uses_constant=False,
                                               has_converged=False),
                          graph=SimpleNamespace(num_arcs=100), rho=1.0, cpu_mode="auto")
    for others in (True, False):
        asked, calls = [], []
        choose = tasks._chooser(Model(), run, "gpu", others)

        def counted(f, ran=1):
            calls.append(ran)
            return choose(f, ran)

        counted.__dict__ = choose.__dict__  # (its due: the chooser's)
        rows, status = tasks.run_iterations(run, Engine(), "gpu", 1, 100, counted, 1,
                                            Model() if others else None, float("inf"))
        assert status == "limit" and len(rows) == 100
        if others:  # asked about every 5th iteration, each call a question whose
            # weight is the iterations since the last (the first: the driver's)
            assert calls == asked and 15 <= len(asked) <= 25
            assert 99 - 6 < sum(asked) <= 99
        else:
            assert calls == [] and asked == []


def test_a_gpu_segment_far_ahead_asks_less_often_while_its_iterations_are_short(
        monkeypatch):
    """A GPU segment whose answer to stay had alpha > 2 (the GPU that much faster) asks
    again after CHOOSE_SECONDS * alpha / 2 (CHOOSE_BACKOFF times at most) while its
    iterations are short; near the CPU (alpha <= 2), with long iterations, or in a CPU
    segment, every CHOOSE_SECONDS. A GPU segment first asks after CHOOSE_SECONDS (the
    driver's answer that placed it stands that long), a CPU segment at once."""
    from types import SimpleNamespace

    from hetgraph.scheduler import tasks

    asked, alpha = [], [50.0]

    class Model:
        def placement(self, f, rho, num_arcs, current, weight, seconds):
            asked.append(now[0])
            return current, alpha[0]

    now = [0.0]
    monkeypatch.setattr(tasks, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    run = SimpleNamespace(rho=1.0, graph=SimpleNamespace(num_arcs=100), cpu_mode="auto")
    ms = tuning.CHOOSE_SECONDS

    def segment(kind, step, calls):
        now[0] = 0.0
        choose = tasks._chooser(Model(), run, kind, others=True)
        asked.clear()
        for _ in range(calls):
            now[0] += step
            choose(0.5)
        return [round(t / ms, 3) for t in asked], choose.interval / ms

    # 40 us iterations: the first question after CHOOSE_SECONDS (the driver's answer
    # stands that long), the next wait 8 ms (alpha 50: capped), or 3 ms (alpha 6)
    times, interval = segment("gpu", 0.04 * ms, 500)
    assert times == pytest.approx([1.0, 9.0, 17.0], abs=0.05) and interval == 8
    alpha[0] = 6.0
    times, interval = segment("gpu", 0.04 * ms, 200)
    assert times == pytest.approx([1.0, 4.0, 7.0], abs=0.05) and interval == 3
    alpha[0] = 1.5  # close: every CHOOSE_SECONDS
    assert segment("gpu", 0.04 * ms, 100)[1] == 1
    alpha[0] = 50.0
    times, interval = segment("gpu", 0.5 * ms, 20)  # long iterations: every 1 ms
    assert times[:3] == pytest.approx([1.0, 2.0, 3.0], abs=0.05) and interval == 1
    times, interval = segment("cpu", 0.04 * ms, 100)  # (alpha < 1 would keep the CPU)
    assert interval == 1 and len(times) == 4 and times[0] == pytest.approx(0.04)  # (a
    # CPU segment asks at its first call)


def test_the_gpu_is_calibrated_once_its_pages_are_laid_out(monkeypatch):
    """A model whose GPU waits for its pages places on the CPU; once they are laid out
    it answers "calibrate", and a CPU segment asking it then ends, moved (the driver
    calibrates the GPU); calibrated, it places as ever."""
    import concurrent.futures
    from types import SimpleNamespace

    import hetgraph as hg
    from hetgraph.algorithms.bfs import BreadthFirst
    from hetgraph.program import ProgramSpec
    from hetgraph.scheduler import tasks
    from hetgraph.engines.cpu import CpuEngine
    from hetgraph.scheduler.state import VertexState

    m = CostModel()
    m.observe("cpu", "pull", 1000, 1000 * 8e-9)
    m.waiting = layout = concurrent.futures.Future()
    assert m.placement(1.0, 1.0, 10**6)[0] == "cpu"
    g = hg.generate.grid(30, 30, seed=1)
    spec = ProgramSpec(BreadthFirst(0))
    run = SimpleNamespace(spec=spec, graph=g, rho=1.0)
    monkeypatch.setattr(tuning, "CHOOSE_SECONDS", 1e-9)  # asked after every burst

    def segment():
        values, flags, _ = spec.initial_state(g)
        engine = CpuEngine(spec, g, VertexState(values, flags, sync=True),
                           np.zeros(1, np.float32), threads=1)
        return tasks.run_iterations(run, engine, "cpu", 1, 1000,
                                    tasks._chooser(m, run, "cpu", True), 1, m, float("inf"))

    rows, status = segment()
    assert status == "converged" and len(rows) == 59  # (corner to corner, and one more)
    layout.set_result(None)
    assert m.placement(1.0, 1.0, 10**6)[0] == "calibrate"
    rows, status = segment()
    assert status == "moved" and 1 <= len(rows) < 59
    m.observe("gpu", "pull", 1000, 1000 * 2e-9)
    m.waiting = None
    assert m.placement(1.0, 1.0, 10**6) == pytest.approx(("hybrid", 4.0))


def test_a_pickled_model_still_sees_the_layout_it_waits_for():
    """A segment task's copy of the cost model (Dask pickles an in-process task's
    arguments once segments go through its scheduler) answers "calibrate" once the
    GPU's layout is done, as the driver's does; a layout gone with its run is not done."""
    import concurrent.futures
    import gc
    import pickle

    from hetgraph.scheduler.dispatcher import _LayoutHandle

    m = CostModel()
    m.observe("cpu", "pull", 1000, 1000 * 8e-9)
    layout = concurrent.futures.Future()
    m.waiting = _LayoutHandle(layout)
    copy = pickle.loads(pickle.dumps(m))
    assert copy.placement(1.0, 1.0, 10**6)[0] == "cpu"
    layout.set_result(None)
    assert copy.placement(1.0, 1.0, 10**6)[0] == "calibrate"
    assert pickle.loads(pickle.dumps(m)).placement(1.0, 1.0, 10**6)[0] == "calibrate"
    del layout, m
    gc.collect()
    assert copy.placement(1.0, 1.0, 10**6)[0] == "cpu"


def test_a_gpu_segment_folds_its_rows_every_choose_seconds_however_rarely_it_asks(
        monkeypatch):
    """Rows make a batch for the model every CHOOSE_SECONDS while the question waits
    CHOOSE_BACKOFF times longer (a fold of 8 ms of rows outlasted the queue); the
    batches fold in, oldest first, when the model is next asked: it then holds every
    row but those of the last CHOOSE_SECONDS, as if each batch had folded in at once."""
    from types import SimpleNamespace

    from hetgraph.scheduler import tasks

    step = tuning.CHOOSE_SECONDS / 20  # clock reads: about 2 an iteration
    now = [0.0]

    def clock():
        now[0] += step
        return now[0]

    class Engine(base.Engine):  # a GPU engine's queue of passes over 100 arcs, all active
        queued, read_bytes, front, values = 3, 0, float("nan"), None

        def frontier(self):
            return 10, 100

        def launch(self, constant, frontier=None):
            return 0

        def wait(self, ticket):
            return "gpu-pull", 10, 100, 10, step / 2

    class Model:
        def alpha(self, f, rho, num_arcs):
            return 50.0

        def observe_rows(self, rows, num_arcs):
            folds.append([row[COLUMN["iteration"]] for row in rows])

    def choose(f, ran=1):  # (as _chooser's: not called again before ``due``)
        launched[0] += ran
        asked.append((launched[0], sum(map(len, folds))))
        choose.due = now[0] + choose.interval
        return "gpu", 50.0

    choose.interval = tuning.CHOOSE_BACKOFF * tuning.CHOOSE_SECONDS
    choose.due = -math.inf
    folds, asked, launched = [], [], [1]  # (the first iteration: the driver's)
    monkeypatch.setattr(tasks, "time", SimpleNamespace(perf_counter=clock))
    run = SimpleNamespace(spec=SimpleNamespace(program=None, uses_constant=False,
                                               has_converged=False),
                          graph=SimpleNamespace(num_arcs=100), rho=1.0)
    rows, status = tasks.run_iterations(run, Engine(), "gpu", 1, 400, choose, 1, Model(),
                                        float("inf"))
    assert status == "limit" and len(rows) == 400
    # every row once, in order, never the first
    assert [i for fold in folds for i in fold] == list(range(2, 401))
    assert len(folds) >= 30 and max(map(len, folds)) <= 12  # every ~10 iterations
    assert 3 <= len(asked) <= 6  # every ~80 iterations
    for count, folded in asked:  # launched before the question, rows folded by it:
        assert count - 3 - 12 <= folded <= max(count - 3, 0)  # all but the last batch's


@pytest.mark.parametrize("first, above, folded", [(1, 1, 3), (1, 0, 2), (2, 1, 2)])
def test_a_runs_first_cpu_iteration_from_a_frontier_not_calibrated_is_measured(
        first, above, folded):
    """A segment's first row stays out of the model (it carries the segment's start),
    but for the run's first CPU iteration from a frontier of more out-edges than the
    CPU's calibration times (CALIBRATION_EDGES): nothing else measures the CPU there."""
    from types import SimpleNamespace

    from hetgraph.scheduler import tasks

    degree = tuning.CALIBRATION_EDGES + above

    class Engine(base.Engine):  # pushes from a frontier of ``degree`` out-edges, one at a time
        queued, read_bytes, front, values = 1, 0, float("nan"), None

        def frontier(self):
            return 10, degree

        def launch(self, constant, frontier=None):
            return 0

        def wait(self, ticket):
            return "push", 10, degree, 10, 1e-3

    class Model:
        def alpha(self, f, rho, num_arcs):
            return 0.5

        def observe_rows(self, rows, num_arcs):
            measured.extend(row[COLUMN["iteration"]] for row in rows)

    measured = []
    run = SimpleNamespace(spec=SimpleNamespace(program=None, uses_constant=False,
                                               has_converged=False),
                          graph=SimpleNamespace(num_arcs=10**7), rho=1.0)
    rows, status = tasks.run_iterations(run, Engine(), "cpu", first, first + 2,
                                        lambda f, ran=1: ("cpu", 0.5), 1, Model(),
                                        float("inf"))
    assert status == "limit" and len(rows) == 3
    assert measured == [row[COLUMN["iteration"]] for row in rows][3 - folded:]


def test_cpu_bursts_follow_one_another_while_the_model_says_stay(monkeypatch):
    """With a cost model, a CPU segment asks it after each burst (of CHOOSE_SECONDS at
    most: here one iteration) and bursts on while it says stay: no single iteration
    between the bursts; then it ends, moved."""
    from types import SimpleNamespace

    import hetgraph as hg
    from hetgraph.algorithms.bfs import BreadthFirst
    from hetgraph.program import ProgramSpec
    from hetgraph.scheduler import tasks
    from hetgraph.engines.cpu import CpuEngine
    from hetgraph.scheduler.state import VertexState

    g = hg.generate.grid(30, 30, seed=1)
    spec = ProgramSpec(BreadthFirst(0))
    values, flags, _ = spec.initial_state(g)
    engine = CpuEngine(spec, g, VertexState(values, flags, sync=True),
                       np.zeros(1, np.float32), threads=1)
    assert engine.bursts
    ran = []

    def choose(f, count=1):
        ran.append(count)
        return ("cpu" if len(ran) < 6 else "gpu"), 0.5

    monkeypatch.setattr(tuning, "CHOOSE_SECONDS", 1e-9)  # a burst of one iteration
    run = SimpleNamespace(spec=spec, graph=g, rho=1.0)
    rows, status = tasks.run_iterations(run, engine, "cpu", 1, 1000, choose, 1,
                                        CostModel(), float("inf"))
    assert status == "moved" and ran == [1] * 6
    assert len(rows) == 7 and [r[0] for r in rows] == list(range(1, 8))
    assert [r[COLUMN["mode"]] for r in rows] == ["push"] * 7


def test_a_cpu_burst_runs_within_the_cpus_lead(monkeypatch):
    """After an answer that the CPU leads (alpha below 1), the next burst runs
    LEAD_SECONDS at most, while its frontier stays within the model's lead_degree;
    after any other answer (none yet, alpha 1 or more, nan), CHOOSE_SECONDS at most,
    whatever its frontier."""
    from types import SimpleNamespace

    import hetgraph as hg
    from hetgraph.algorithms.bfs import BreadthFirst
    from hetgraph.kernels.cpu import NO_LIMIT
    from hetgraph.program import ProgramSpec
    from hetgraph.scheduler import tasks
    from hetgraph.engines.cpu import CpuEngine
    from hetgraph.scheduler.state import VertexState

    g = hg.generate.grid(30, 30, seed=1)
    spec = ProgramSpec(BreadthFirst(0))
    values, flags, _ = spec.initial_state(g)
    engine = CpuEngine(spec, g, VertexState(values, flags, sync=True),
                       np.zeros(1, np.float32), threads=1)
    asked, limits = [], []
    burst = engine.burst

    def one_iteration(iterations, seconds, max_degree):
        limits.append((seconds, max_degree))
        return burst(1, seconds, max_degree)

    monkeypatch.setattr(engine, "burst", one_iteration)
    answers = [0.5, 0.1, float("nan"), 2.0, 1.0, 0.25]  # alphas: then the run moves

    def choose(f, ran=1):
        asked.append(ran)
        if len(asked) > len(answers):
            return "gpu", 0.5
        return "cpu", answers[len(asked) - 1]

    class Model(CostModel):
        def lead_degree(self, rho, num_arcs):
            return 100 + len(asked)  # (the answers so far)

    run = SimpleNamespace(spec=spec, graph=g, rho=1.0)
    rows, status = tasks.run_iterations(run, engine, "cpu", 1, 1000, choose, 1, Model(),
                                        float("inf"))
    assert status == "moved" and len(rows) == 8  # (the first iteration alone, 7 bursts)
    lead, choose_seconds = tuning.LEAD_SECONDS, tuning.CHOOSE_SECONDS
    assert limits == [(choose_seconds, NO_LIMIT),  # the first iteration's alpha: nan
                      (lead, 101), (lead, 102), (choose_seconds, NO_LIMIT),
                      (choose_seconds, NO_LIMIT), (choose_seconds, NO_LIMIT), (lead, 106)]


def test_a_burst_stops_where_its_frontier_passes_its_degree_limit():
    """A CPU burst stops before an iteration whose frontier has more out-edges than its
    ``max_degree``; a frontier already past it runs none (None)."""
    import hetgraph as hg
    from hetgraph.algorithms.bfs import BreadthFirst
    from hetgraph.program import ProgramSpec
    from hetgraph.engines.cpu import CpuEngine
    from hetgraph.scheduler.state import VertexState

    g = hg.generate.grid(30, 30, seed=1)
    spec = ProgramSpec(BreadthFirst(0))
    values, flags, _ = spec.initial_state(g)
    engine = CpuEngine(spec, g, VertexState(values, flags, sync=True),
                       np.zeros(1, np.float32), threads=1)
    # from a corner, hop k's frontier is a diagonal of k + 1 vertices, two of them on
    # the border (3 edges each), the others inside (4 each): 4 k + 2 out-edges
    mode, stats, _ = engine.burst(1000, float("inf"), max_degree=40)
    assert mode == "push"
    assert stats[:, :2].tolist() == [[k + 1, 4 * k + 2] for k in range(10)]
    assert engine.frontier() == (11, 42)
    assert engine.burst(1000, float("inf"), max_degree=40) is None
    assert engine.burst(1000, float("inf"), max_degree=42) is not None


def test_the_lead_degree_is_where_the_cpu_stops_winning():
    """lead_degree: the largest frontier (out-edges) whose CPU iteration the model
    predicts faster than the GPU's; whole or none at the ends; 0 uncalibrated."""
    arcs = 4 * 10**6
    m = CostModel(threads=16, sparse_edges=50_000, skew=4.0, push=32.0)
    assert m.lead_degree(1.0, arcs) == 0  # not calibrated
    m.observe("cpu", "pull", arcs, 2e-3)
    m.observe("gpu", "pull", arcs, 25e-6)
    for sizes in ((6, 10, 14), (100,), (1000,), (3000,)):  # 1 us + 6 ns an edge
        m.observe_rows([history_row(placement="cpu", mode="push", f=e / arcs, edges=e,
                                    cpu_seconds=1e-6 + 6e-9 * e, seconds=1e-6 + 6e-9 * e)
                        for e in sizes], arcs)
    lead = m.lead_degree(1.0, arcs)
    assert m.alpha(lead / arcs, 1.0, arcs) < 1.0
    assert m.alpha(lead * (1 + 2 / tuning.LEAD_PRECISION) / arcs, 1.0, arcs) >= 1.0
    assert 2000 < lead < 8000  # (25 us at about 6 ns an edge: 4,000 edges)
    m.per_edge[("gpu", "pull")] = 1.0 / arcs  # a pass of 1 s: slower than any CPU's
    assert m.lead_degree(1.0, arcs) == arcs
    m.per_edge[("gpu", "pull")] = 0.1e-6 / arcs  # 0.1 us: faster than the push's 1 us
    assert m.lead_degree(1.0, arcs) == 0


def test_the_first_iteration_looks_one_iteration_ahead():
    # GPU 2 ms per iteration; CPU pull 8 ms; a push of f costs f * 8 ms * 2 (factor 2)
    m = model(8e-9, 2e-9, overhead=1.0)
    m.push = 2.0
    # f = 0.01: the CPU pushes in 0.16 ms, far ahead of the GPU's 2 ms
    assert m.placement(0.01, 1.0, 10**6)[0] == "cpu"
    m.growth = 4.0  # a grid: the next frontier 0.04, still 0.64 ms on the CPU
    assert m.placement(0.01, 1.0, 10**6, start=True)[0] == "cpu"
    m.switch = 1.0  # the CPU wins both: no move to pay for, however dear
    assert m.placement(0.01, 1.0, 10**6, start=True)[0] == "cpu"
    # a hub: the next frontier is the whole graph, a pull of 8 ms on the CPU; the CPU
    # can win the first (0.16 ms) then move to the GPU (2 ms) if the move costs under
    # 1.84 ms, the GPU's lead in the first
    m.growth = 1000.0
    m.switch = 1.8e-3
    assert m.placement(0.01, 1.0, 10**6, start=True)[0] == "cpu"
    m.switch = 1.9e-3
    assert m.placement(0.01, 1.0, 10**6, start=True)[0] == "gpu"
    assert m.placement(0.01, 1.0, 10**6, current="cpu")[0] == "cpu"  # later: no look
    m.overhead = 0.0  # a split would beat the GPU, but a run starts on one device
    assert m.placement(1.0, 1.0, 10**6)[0] == "hybrid"
    assert m.placement(1.0, 1.0, 10**6, start=True)[0] == "gpu"


def progress_rows(kind, first, count, rise, **changes):
    """``count`` rows of ``kind`` from iteration ``first`` whose priority rises by
    ``rise`` an iteration."""
    mode = "push" if kind == "cpu" else "gpu-pull"
    return [history_row(**{"iteration": first + i, "placement": kind, "mode": mode,
                           "f": 0.001, "rho": 1.0, "edges": 1000, "seconds": 40e-6,
                           f"{kind}_seconds": 40e-6, "priority": 5.0 + rise * i,
                           **changes}) for i in range(count)]


def test_priority_buckets_compare_the_devices_by_progress():
    """With buckets a CPU iteration runs part of the frontier: the CPU's time is taken
    for the GPU's progress in one iteration, from the rise of the rows' priority on
    each (before the GPU's is measured, one over the share of the frontier's edges the
    CPU pushes); without buckets their iterations count alike."""
    m = CostModel(buckets=True)
    assert m.progress_ratio() == 1.0  # nothing measured
    # pushes of a quarter of their frontier's edges (f 0.001 of 1e6 arcs: 1000)
    m.observe_rows(progress_rows("cpu", 10, 20, 0.5, edges=250), 10**6)
    assert m.share == pytest.approx(0.25) and m.progress_ratio() == pytest.approx(4.0)
    assert m.progress["cpu"] == pytest.approx(0.5)
    m.observe_rows(progress_rows("gpu", 30, 20, 1.5), 10**6, progress=False)  # (ignored)
    assert "gpu" not in m.progress
    m.observe_rows(progress_rows("gpu", 30, 20, 1.5), 10**6)  # 3 times the CPU's
    assert m.progress_ratio() == pytest.approx(3.0)
    m.observe_rows(progress_rows("gpu", 50, 20, 0.1), 10**6)  # (smoothed; at least 1)
    assert m.progress["gpu"] == pytest.approx(0.7 * 1.5 + 0.3 * 0.1)
    m.progress["gpu"] = 0.2
    assert m.progress_ratio() == 1.0
    # rows without a priority (NaN: not tracked) measure nothing
    m.observe_rows(progress_rows("gpu", 70, 5, 1.0, priority=float("nan")), 10**6)
    assert m.progress["gpu"] == 0.2
    plain = CostModel()  # no buckets
    plain.observe_rows(progress_rows("cpu", 10, 20, 0.5, edges=250), 10**6)
    assert plain.progress_ratio() == 1.0 and not plain.progress


@pytest.mark.parametrize("buckets", [True, False])
def test_a_burst_folds_as_its_rows_fold(buckets, monkeypatch):
    """observe_burst takes a CPU burst by its counts as observe_rows takes its rows:
    the fit of its mode, the progress and the pushes' share alike."""
    from hetgraph.scheduler.tasks import burst_rows

    monkeypatch.setattr(tuning, "FOLD_ROWS", 10**6)  # (every row, as the counts)
    rng = np.random.default_rng(3)
    count = 40
    stats = np.zeros((count, 7), np.int64)
    stats[:, 0] = rng.integers(1, 500, count)  # active
    stats[:, 1] = rng.integers(500, 5000, count)  # their out-degree sum
    stats[:, 2] = rng.integers(1, 300, count)  # computed
    stats[:, 3] = stats[:, 1] // rng.integers(1, 5, count)  # edges pushed
    stats[:, 4] = rng.integers(1, 500, count)
    stats[:, 5] = rng.integers(1000, 20000, count)  # ns of the pass
    stats[:, 6] = stats[:, 5] + rng.integers(0, 3000, count)  # ns since the one before
    fronts = np.sort(rng.uniform(0, 100, count)) if buckets else np.full(count, np.nan)
    fronts[:3] = np.nan  # (not tracked)
    for seconds in (0.2e-3, 5e-3):  # less than the passes' sum, and more
        burst = ("push", stats, fronts)
        by_rows, by_counts = CostModel(buckets=buckets), CostModel(buckets=buckets)
        for m in (by_rows, by_counts):
            m.observe("cpu", "pull", 10**6, 8e-3)
        by_rows.observe_rows(burst_rows(burst, 7, "cpu", 1.0, 0.5, 10**6, 1, seconds),
                             10**6)
        by_counts.observe_burst(burst, 7, 1.0, seconds, 10**6)
        np.testing.assert_allclose(by_counts.fits["push"].sums, by_rows.fits["push"].sums,
                                   rtol=1e-12)
        assert by_counts.progress == pytest.approx(by_rows.progress)
        assert (by_counts.share is None) == (by_rows.share is None) == (not buckets)
        if buckets:
            assert by_counts.share == pytest.approx(by_rows.share)
            assert by_rows.progress["cpu"] == pytest.approx(
                (fronts[-1] - fronts[3]) / (count - 4))


def test_a_cpu_iteration_counts_its_share_of_a_gpu_iterations_progress():
    # a CPU push of a frontier of 0.2: 0.2 x a 7 ms pull (push factor 1), 1.4 ms; a GPU
    # pull 2 ms. The CPU wins an iteration, but with buckets it needs 2 for a GPU
    # iteration's progress: 2.8 ms against 2
    def fresh(buckets):
        m = model(7e-9, 2e-9, overhead=1.0)
        m.push, m.buckets = 1.0, buckets
        m.progress = {"cpu": 1.0, "gpu": 2.0}
        return m

    assert fresh(False).placement(0.2, 1.0, 10**6)[0] == "cpu"
    m = fresh(True)
    place, a = m.placement(0.2, 1.0, 10**6)
    assert place == "gpu" and a == pytest.approx(1.4)
    # from the CPU, each iteration loses half a GPU iteration's 0.8 ms
    m.switch = 1.0e-3
    assert [m.placement(0.2, 1.0, 10**6, current="cpu")[0] for _ in range(3)] == \
        ["cpu", "cpu", "gpu"]
    # the first iteration too: the CPU loses it
    assert fresh(True).placement(0.2, 1.0, 10**6, start=True)[0] == "gpu"
    assert fresh(False).placement(0.2, 1.0, 10**6, start=True)[0] == "cpu"


def test_frontier_growth_is_the_out_degree_at_an_average_edges_end():
    from hetgraph.io.generate import grid
    from hetgraph.scheduler.costmodel import frontier_growth

    g = grid(30, 30, seed=1)  # inner vertices have 4 neighbours, the rim 2 or 3
    growth = frontier_growth(g.in_degree(), g.out_degree())
    d = g.out_degree().astype(float)
    assert growth == pytest.approx((d * d).sum() / d.sum()) and 3.5 < growth < 4.0
    star_in = np.array([0, 1, 1, 1]), np.array([3, 0, 0, 0])  # 0 -> 1, 2, 3: leaves
    assert frontier_growth(*star_in) == 1.0  # at least 1
    assert frontier_growth(np.zeros(3, np.int64), np.zeros(3, np.int64)) == 1.0


def test_segment_boundaries_measure_the_switch():
    m = CostModel(switch=1e-3)
    m.observe_switch(11e-3)
    assert m.switch == pytest.approx(0.7 * 1e-3 + 0.3 * 11e-3)


def test_measured_iterations_replace_the_hybrid_prediction():
    m = model(8e-9, 2e-9)
    assert m.placement(1.0, 1.0, 10**6)[0] == "hybrid"  # predicted 1.6 ms < 2 ms
    m.observe_iteration("hybrid", 5e-3)  # measured: the copies cost more than the split
    assert m.placement(1.0, 1.0, 10**6)[0] == "gpu"
    m.observe_iteration("gpu", 9e-3)  # and the GPU alone measured slower still
    assert m.placement(1.0, 1.0, 10**6)[0] == "hybrid"


def test_history_rows_feed_the_model():
    m = CostModel()
    m.observe_rows([notify_row(0.01, 1e-3)], 10**5)
    notify = m.fits["notify-pull"]
    assert notify.predict(1000, 0.0) == pytest.approx(1e-3)  # 1000 frontier edges
    m.observe_rows([history_row(placement="cpu", mode="pull", f=0.9, edges=10**5,
                                cpu_seconds=1e-3, seconds=1e-3)], 10**5)
    assert m.per_edge[("cpu", "pull")] == pytest.approx(1e-8)
    m.observe_rows([history_row(placement="gpu", mode="gpu-pull", f=1.0, edges=10**5,
                                gpu_seconds=1e-4, seconds=0.5e-4)], 10**5)
    assert m.per_edge[("gpu", "pull")] == pytest.approx(1e-9)
    m = CostModel()  # a row counts its wall seconds when the host took longer
    m.observe_rows([history_row(placement="gpu", mode="gpu-pull", f=1.0, edges=10**5,
                                gpu_seconds=1e-4, seconds=3e-4)], 10**5)
    m.observe_rows([history_row(placement="cpu", mode="push", f=0.1, edges=10**4,
                                cpu_seconds=1e-4, seconds=2e-4)], 10**5)
    assert m.per_edge[("gpu", "pull")] == pytest.approx(3e-9)
    assert m.fits["push"].predict(10**4, 0.0) == pytest.approx(2e-4)


def test_a_push_is_predicted_by_its_fixed_part_and_its_slope():
    # the grid-1000 BFS's first pushes (6 to 14 frontier edges, about 1 us a row, the
    # row's own cost) against the GPU's 25 us pass: the CPU's later pushes of 2,000
    # edges cost 1 us and 6 ns an edge, not 2,000 times the first rows' 100 ns an edge
    m = CostModel(threads=16, sparse_edges=50_000, skew=4.0, push=32.0)
    arcs = 4 * 10**6
    m.observe("cpu", "pull", arcs, 2e-3)  # 0.5 ns an edge over 16 threads: push prior 16 ns
    m.observe("gpu", "pull", arcs, 25e-6)
    m.observe_rows([history_row(placement="cpu", mode="push", f=e / arcs, edges=e,
                                cpu_seconds=1e-6, seconds=1e-6) for e in (6, 10, 14)],
                   arcs)
    # sizes too alike to fit a slope: the measured fixed part and the prior's slope
    assert m.cpu_seconds(2000 / arcs, 1.0, arcs) == pytest.approx(1e-6 + 1990 * 16e-9)
    assert m.placement(200 / arcs, 1.0, arcs)[0] == "cpu"
    for e in (100, 1000, 3000):  # pushes measured at 1 us + 6 ns an edge
        m.observe_rows([history_row(placement="cpu", mode="push", f=e / arcs, edges=e,
                                    cpu_seconds=1e-6 + 6e-9 * e, seconds=1e-6 + 6e-9 * e)],
                       arcs)
    assert m.cpu_seconds(2000 / arcs, 1.0, arcs) == pytest.approx(13e-6, rel=0.25)
    assert m.placement(2000 / arcs, 1.0, arcs)[0] == "cpu"


def test_a_fit_without_spread_takes_the_mean_rate_when_below_the_prior():
    fit = LinearFit()
    for _ in range(5):  # frontiers alike, 2,000 edges in 12 us: 6 ns an edge at most
        fit.observe(2000, 12e-6, 16e-9)
    assert fit.predict(4000, 16e-9) == pytest.approx(24e-6)  # not 0 + 16 ns an edge
    assert fit.predict(4000, 2e-9) == pytest.approx(12e-6 + 2000 * 2e-9)  # the prior
    # one large push (RMAT-22's BFS: 200,000 frontier edges in 20 ms, a prior of 35 ns
    # an edge): its mean rate, not a fixed part of 13 ms, tells a small one's time
    fit = LinearFit()
    fit.observe(200_000, 20e-3, 35e-9)
    assert fit.predict(200_000, 35e-9) == pytest.approx(20e-3)
    fixed = tuning.FIT_FIXED_MOST
    assert fit.predict(2000, 35e-9) == pytest.approx(fixed + 2000 * (20e-3 - fixed) / 2e5)


def test_gpu_rows_fold_as_one_measurement():
    m = CostModel()
    m.observe("gpu", "pull", 10**5, 1e-4)
    m.observe_rows([gpu_row(1e-4, 10**5), notify_row(0.01, 1e-3), gpu_row(3e-4, 10**5)],
                   10**5)
    assert m.per_edge[("gpu", "pull")] == pytest.approx(0.7 * 1e-9 + 0.3 * 2e-9)
    notify = m.fits["notify-pull"]
    assert notify.predict(1000, 0.0) == pytest.approx(1e-3)  # the CPU's row by itself


def test_cpu_rows_fold_as_one_measurement_per_mode():
    """A batch's rows weigh as the run pays them: a hiccup among short notify-pull rows
    raises the fit by its share of the batch's mean (capped at OUTLIER times the
    prediction), not by one capped row among many."""
    m = model(8e-9, 2e-9)
    m.observe_rows([notify_row(0.001, 30e-6)], 10**6)
    batch = [notify_row(0.001, 1e-3)] + [notify_row(0.001, 30e-6)] * 9  # mean 127 us
    m.observe_rows(batch, 10**6)
    # (the fit's weights: 0.3 for the newest measurement, 0.7 * 0.3 for the one before)
    assert m.cpu_seconds(0.001, 1.0, 10**6) == pytest.approx(
        (0.21 * 30e-6 + 0.3 * 90e-6) / 0.51)
    m.observe_rows([notify_row(0.001, 40e-6), notify_row(0.003, 60e-6)], 10**6)
    weight, size, seconds = m.fits["notify-pull"].sums[:3]  # one measurement: 2000 edges in 50 us
    assert weight == pytest.approx(0.147 + 0.21 + 0.3)
    assert size == pytest.approx(0.147 * 1000 + 0.21 * 1000 + 0.3 * 2000)
    assert seconds == pytest.approx(0.147 * 30e-6 + 0.21 * 90e-6 + 0.3 * 50e-6)
    pulls = [notify_row(0.9, s, mode="pull", edges=10**6) for s in (8e-3, 10e-3)]
    m.observe_rows(pulls, 10**6)  # 18 ms for 2e6 edges: one measurement of 9 ns an edge
    assert m.per_edge[("cpu", "pull")] == pytest.approx(0.7 * 8e-9 + 0.3 * 9e-9)


def test_uncalibrated_model_keeps_the_cpu():
    m = CostModel()
    assert math.isnan(m.alpha(1.0, 1.0, 100))
    assert m.placement(1.0, 1.0, 100)[0] == "cpu"
    assert math.isnan(model(8e-9, 2e-9).alpha(0.0, 1.0, 0))  # no edge: nothing to compare


def test_observations_are_smoothed():
    m = CostModel()
    m.observe("cpu", "pull", 100, 1.0)
    assert m.per_edge[("cpu", "pull")] == pytest.approx(0.01)
    m.observe("cpu", "pull", 100, 2.0)
    assert m.per_edge[("cpu", "pull")] == pytest.approx(0.7 * 0.01 + 0.3 * 0.02)
    m.observe("cpu", "pull", 0, 1.0)  # ignored: no edges
    assert m.per_edge[("cpu", "pull")] == pytest.approx(0.013)
    m.observe_overhead(1.0)
    assert m.overhead == pytest.approx(0.3)


def gpu_row(seconds, edges=10**6):
    return history_row(placement="gpu", mode="gpu-pull", f=0.001, rho=1.0, edges=edges,
                       gpu_seconds=seconds, seconds=seconds)


def test_rates_relax_to_the_lowest_they_had_not_to_a_slow_calibration():
    # grid-1000 BFS on the H100: the GPU's calibration took 200 us a pass (the host
    # busy), its rows then 30 us; a stretch of slow rows later sent the run to the CPU
    m = model(8e-9, 200e-12, overhead=1.0)
    for _ in range(20):
        m.observe_rows([gpu_row(30e-6)], 10**6)
    lowest = m.seconds("gpu", 10**6)
    assert lowest < 31e-6
    for _ in range(6):
        m.observe_rows([gpu_row(3e-3)], 10**6)
    assert m.seconds("gpu", 10**6) > 200e-6
    m.placement(0.001, 1.0, 10**6, current="cpu", weight=10, seconds=1.0)
    assert m.seconds("gpu", 10**6) == pytest.approx(lowest)


def test_rates_do_not_relax_to_a_fast_calibration():
    # grid-1000 BFS on the H100: the GPU's calibration (paced passes, no host work
    # between them) 20 us a pass, its rows 40 us; away from the GPU, its rate went back
    # to 20 us and the run left a CPU at 30 us for a GPU at 40
    m = CostModel(overhead=1.0)
    m.observe("cpu", "pull", 10**6, 8e-3, calibration=True)
    m.observe("gpu", "pull", 10**6, 20e-6, calibration=True)
    assert m.seconds("gpu", 10**6) == pytest.approx(20e-6)  # the run starts from it
    for _ in range(20):
        m.observe_rows([gpu_row(40e-6)], 10**6)
    rows = m.seconds("gpu", 10**6)
    assert rows > 39e-6
    m.placement(0.001, 1.0, 10**6, current="cpu", weight=10, seconds=1.0)
    assert m.seconds("gpu", 10**6) == pytest.approx(rows)  # the lowest measured in rows


def test_one_slow_iteration_does_not_drive_the_run_off_a_device():
    # the H100's grid-1000 BFS: GPU passes of 25 us, one of 8 ms (a preempted thread);
    # the CPU's notify-pull at 40 us. Taken whole, the 8 ms row made the GPU's rate
    # 2.4 ms a pass and the run left it for good
    m = model(8e-9, 25e-12, overhead=1.0)
    m.observe_rows([notify_row(0.001, 40e-6)], 10**6)
    m.switch = 0.5e-3
    m.observe_rows([gpu_row(8e-3)], 10**6)
    assert m.seconds("gpu", 10**6) == pytest.approx(0.7 * 25e-6 + 0.3 * 75e-6)  # 3x cap
    assert [m.placement(0.001, 1.0, 10**6, current="gpu")[0] for _ in range(20)] == \
        ["gpu"] * 20
    # a real change of speed is followed, by up to 1.6x a measurement
    for _ in range(12):
        m.observe_rows([gpu_row(200e-6)], 10**6)
    assert m.seconds("gpu", 10**6) == pytest.approx(200e-6, rel=0.02)
    # and the same for the CPU's notify-pull fit
    m.observe_rows([notify_row(0.001, 8e-3)], 10**6)
    assert m.cpu_seconds(0.001, 1.0, 10**6) < 3 * 40e-6
    for _ in range(12):
        m.observe_rows([notify_row(0.001, 400e-6)], 10**6)
    assert m.cpu_seconds(0.001, 1.0, 10**6) == pytest.approx(400e-6, rel=0.02)


def test_gpu_takes_its_share_from_the_front_cpu_the_back():
    m = model(2e-9, 1e-9)  # pages of 1 ms on the GPU, 2 ms on the CPU
    q = PageQueue(np.full(10, 10**6), m, round_trip=0.0, gpu_workers=1)
    # the fewest front pages with which the GPU finishes no earlier than the CPU: 7 ms
    # against 3 pages of 2 ms
    assert q.take_gpu() == list(range(7))
    assert q.take_cpu() == [9]  # no overhead to amortize: one page at a time
    assert q.take_cpu() == [8]
    assert len(q) == 1


def test_one_gpu_batch_takes_what_the_cpu_cannot_finish_sooner():
    m = model(1e-6, 1e-9)  # GPU page of 1e6 edges: 1 ms; CPU: 1 s
    q = PageQueue(np.full(100, 10**6), m, round_trip=0.002, gpu_workers=1)
    assert q.take_gpu() == list(range(100))  # one round trip, not log2(100)
    assert q.take_cpu() == []


def test_gpu_workers_split_the_queue_evenly():
    m = model(1e-6, 1e-9)
    q = PageQueue(np.full(100, 10**6), m, round_trip=0.002, gpu_workers=2, cpu_workers=0)
    assert q.take_gpu() == list(range(50))
    assert q.take_gpu() == list(range(50, 100))


def test_shares_count_round_trips_and_running_batches():
    m = model(1e-9, 1e-9)  # equal speeds, pages of 0.1 ms
    q = PageQueue(np.full(100, 10**5), m, round_trip=0.001, gpu_workers=1)
    assert q.take_gpu() == list(range(50))  # both pay one round trip: half each
    q = PageQueue(np.full(100, 10**5), m, round_trip=0.002, gpu_workers=1)
    # the CPU takes pages while it finishes first: 2 + 0.1 k <= 2 + 0.1 (100 - k + 1)
    assert q.take_cpu() == list(range(99, 49, -1))
    # its 5 ms running: the GPU takes the rest, which it finishes at the same time
    assert q.take_gpu() == list(range(50))
    q.done("cpu", list(range(99, 49, -1)))
    assert q.pending == {"gpu": pytest.approx(5e-3), "cpu": 0.0}


def test_cpu_refuses_a_page_the_gpu_would_finish_sooner():
    m = model(100e-9, 1e-9)  # CPU 100x slower
    q = PageQueue(np.full(4, 10**6), m, round_trip=0.0, gpu_workers=1)
    assert q.take_cpu() == []  # 100 ms on the CPU vs 4 ms for the GPU to do all
    assert len(q) == 4
    q = PageQueue(np.full(400, 10**6), m, round_trip=0.0, gpu_workers=1)
    assert q.take_cpu() == [399]  # 100 ms vs 400 ms of GPU work


def test_cpu_batches_amortize_the_round_trip():
    m = model(4e-9, 1e-9)  # pages of 6e5 edges: 2.4 ms on the CPU, 0.6 ms on the GPU
    q = PageQueue(np.full(110, 6 * 10**5), m, round_trip=0.001, gpu_workers=1)
    batch = q.take_cpu()  # 1 ms round trip / 5%: 20 ms of CPU work, 9 pages
    assert batch == list(range(109, 100, -1))
    assert 0.001 / (len(batch) * 2.4e-3) <= tuning.CPU_BATCH_OVERHEAD_SHARE


def test_a_cpu_batch_ends_before_the_gpu_would_finish_the_rest():
    m = model(4e-9, 1e-9)
    q = PageQueue(np.full(110, 6 * 10**5), m, round_trip=0.01, gpu_workers=1)
    batch = q.take_cpu()  # a 200 ms target: the balance with the GPU ends it
    k = len(batch)
    gpu_rest = 0.01 + (110 - k) * 0.6e-3  # a round trip and the pages left
    assert 0.01 + k * 2.4e-3 <= gpu_rest + 1e-12  # the CPU finishes first
    assert 0.01 + (k + 1) * 2.4e-3 > gpu_rest - 0.6e-3  # with one more page it would not


def test_hybrid_iterations_are_predicted_from_their_page_tasks_rates():
    """A hybrid iteration runs page tasks: its split is predicted at their rates (their
    pulls' until measured), the GPU alone at its pull's (issue 59: what each device
    actually does)."""
    m = model(8e-9, 2e-9, cpu_pages=False)
    # split of 8 and 2 ms: 1.6 ms, 0.4 faster than the GPU's 2, above 0.2 * 1.6
    assert [m.placement(f, 1.0, 10**6)[0] for f in (0.05, 1.0)] == ["cpu", "hybrid"]
    # GPU page tasks of a hybrid iteration also load and store the state: slower
    m.observe("gpu", "pages", 1000, 1000 * 40e-9)  # split 40 * 8 / 48 = 6.7 ms
    assert [m.placement(f, 1.0, 10**6)[0] for f in (0.05, 1.0)] == ["cpu", "gpu"]
    assert m.seconds("gpu", 10**6) == pytest.approx(2e-3)  # (the GPU alone's: its pull)
    m.per_edge["gpu", "pages"] = 2.2e-9  # split 2.2 * 8 / 10.2 = 1.725 ms: 0.275 faster,
    assert m.placement(1.0, 1.0, 10**6)[0] == "gpu"  # under 0.2 * 1.725 = 0.345
    m.per_edge["cpu", "pages"] = 4e-9  # split 2.2 * 4 / 6.2 = 1.42 ms: 0.58 faster
    assert m.placement(1.0, 1.0, 10**6)[0] == "hybrid"
    assert m.expected["hybrid"][1] == pytest.approx(2.2e-3 * 4 / 6.2)
    m.per_edge["gpu", "pages"] = 40e-9
    del m.per_edge["cpu", "pages"]
    assert m.page_seconds("gpu", 1000) == pytest.approx(40e-6)
    assert m.page_seconds("cpu", 1000) == pytest.approx(8e-6)  # its pull until measured
    # with the GPU's page rate, the CPU takes a page it would refuse at the pull rate
    q = PageQueue(np.full(3, 10**6), model(8e-9, 2e-9, cpu_pages=False), round_trip=0.0,
                  gpu_workers=1)
    assert q.take_cpu() == []  # 8 ms against 6 ms for the GPU to do all three
    q = PageQueue(np.full(3, 10**6), m, round_trip=0.0, gpu_workers=1)
    assert q.take_cpu() == [2]


def test_the_cpu_takes_one_page_until_its_page_tasks_are_measured():
    """Its pull's rate can be many times off on the pages it takes first (the last): one
    page, then batches by the rate its page tasks measured."""
    m = model(4e-9, 1e-9, cpu_pages=False)  # pages: 2.4 ms on the CPU, 0.6 on the GPU
    q = PageQueue(np.full(110, 6 * 10**5), m, round_trip=0.001, gpu_workers=1)
    assert q.take_cpu() == [109]
    m.observe("cpu", "pages", 6 * 10**5, 2.4e-3)  # (the page took what was predicted)
    assert q.take_cpu() == list(range(108, 99, -1))  # as test_cpu_batches_amortize...
    q = PageQueue(np.full(4, 10**6), model(100e-9, 1e-9, cpu_pages=False),
                  round_trip=0.0, gpu_workers=1)
    assert q.take_cpu() == []  # 100 ms against the GPU's 4 ms for all: not even one


def test_a_batch_of_adjacent_pages_is_one_vertex_range():
    run = RunSpec("r", None, None, None, True, True, np.array([[0, 5], [5, 9], [9, 12],
                                                               [12, 20]]),
                  None, None, None, "auto", 1.0, {})
    assert run.ranges([3, 1, 0]) == [(0, 9), (12, 20)]  # a CPU batch counts down
    assert run.ranges([2]) == [(9, 12)]
    assert run.ranges(range(4)) == [(0, 20)]


def test_cpu_alone_takes_every_page():
    q = PageQueue(np.full(3, 10), CostModel(), round_trip=0.0, gpu_workers=0)
    assert [q.take_cpu() for _ in range(4)] == [[2], [1], [0], []]


def simulate(page_edges, cpu_per_edge, gpu_per_edge, round_trip, cpu_workers=1,
             gpu_workers=1):
    """Event simulation of the dispatcher's reactive loop with exact page times;
    returns (makespan, pages taken per kind)."""
    m = model(cpu_per_edge, gpu_per_edge)
    q = PageQueue(np.asarray(page_edges), m, round_trip, gpu_workers, cpu_workers)
    events, taken, now = [], {"cpu": [], "gpu": []}, 0.0
    idle = {"cpu": cpu_workers, "gpu": gpu_workers}
    per_edge = {"cpu": cpu_per_edge, "gpu": gpu_per_edge}

    def fill(now):
        for kind in ("gpu", "cpu"):
            while idle[kind]:
                pages = q.take_gpu() if kind == "gpu" else q.take_cpu()
                if not pages:
                    break
                idle[kind] -= 1
                taken[kind] += pages
                busy = sum(page_edges[p] for p in pages) * per_edge[kind] + round_trip
                heapq.heappush(events, (now + busy, kind, pages))

    fill(0.0)
    while events:
        now, kind, pages = heapq.heappop(events)
        idle[kind] += 1
        q.done(kind, pages)
        fill(now)
    assert len(q) == 0
    return now, taken


@examples(60)
@given(st.lists(st.integers(1, 10**6), min_size=1, max_size=60),
       st.floats(1e-9, 1e-7), st.floats(1e-10, 1e-7), st.sampled_from([0.0, 1e-4, 1e-3]))
def test_reactive_placement_is_never_much_slower_than_the_best_device(
        pages, cpu_per_edge, gpu_per_edge, round_trip):
    makespan, taken = simulate(pages, cpu_per_edge, gpu_per_edge, round_trip)
    assert sorted(taken["cpu"] + taken["gpu"]) == list(range(len(pages)))
    total = sum(pages)
    gpu_alone = total * gpu_per_edge + round_trip * len(pages)
    # the CPU only takes a page it finishes before the GPU finishes the rest, so the
    # iteration ends at most one GPU batch's overhead and one page after the GPU alone
    slack = max(pages) * gpu_per_edge + round_trip
    assert makespan <= gpu_alone + slack + 1e-12


@pytest.mark.parametrize("round_trip", [0.0, 1e-3])
def test_reactive_split_follows_the_speed_ratio(round_trip):
    # CPU 3x slower: about a quarter of the pages, also when a task's round trip
    # (1 ms) is 3x a CPU page's work (0.3 ms): the CPU takes batches
    makespan, taken = simulate([10**5] * 200, 3e-9, 1e-9, round_trip)
    gpu_alone, _ = simulate([10**5] * 200, 3e-9, 1e-9, round_trip, cpu_workers=0)
    assert 40 <= len(taken["cpu"]) <= 60
    assert makespan < gpu_alone * 0.8


# --- prediction errors, hybrid iterations that lost, edges relaxed (issue 59) ----------------

def test_a_gain_below_the_measured_error_is_not_tried():
    """The hybrid's prediction error, measured by the hybrid iterations it placed, is
    the gain a hybrid iteration must be predicted to bring."""
    m = model(8e-9, 2e-9)  # GPU 2 ms, balanced split 1.6 ms
    assert m.placement(1.0, 1.0, 10**6)[0] == "hybrid"
    assert m.expected["hybrid"] == (pytest.approx(1.6e-3), pytest.approx(1.6e-3), 10**6)
    m.observe_iteration("hybrid", 1.6e-3 * 1.5)  # 50% over what it expected
    assert m.error("hybrid", "pull") == pytest.approx(0.7 * 0.2 + 0.3 * 0.5)
    # measured 2.4 ms; the GPU alone measured at 2.8 ms: 0.4 ms faster, under the
    # error's 0.29 * 2.4 = 0.70 ms
    m.observe_iteration("gpu", 2.8e-3)
    assert m.placement(1.0, 1.0, 10**6)[0] == "gpu"
    m.iteration["gpu"] = 3.2e-3  # 0.8 ms faster: above it
    assert m.placement(1.0, 1.0, 10**6)[0] == "hybrid"
    # errors are capped at PREDICTION_ERROR_MOST a measurement
    m.observe_iteration("hybrid", 100.0)
    assert m.error("hybrid", "pull") <= tuning.PREDICTION_ERROR_MOST


def test_measured_errors_of_a_device_widen_the_margin_of_a_move_to_it():
    m = model(8e-9, 2e-9, overhead=1.0)  # GPU 2 ms a pull, no hybrid
    m.switch = 0.0
    # CPU notify-pulls measured: 1.5 ms at f = 0.1, the GPU 2 ms: 25% faster, above
    # SWITCH_MARGIN: the run moves
    m.observe_rows([notify_row(0.1, 1.5e-3)], 10**6)
    assert m.placement(0.1, 1.0, 10**6, current="gpu")[0] == "cpu"
    # the CPU's next notify-pulls measured at half and twice their prediction: its
    # error grows past the 25%, and a move to it is no longer tried
    for seconds in (0.75e-3, 3e-3, 0.75e-3, 3e-3):
        m.observe_rows([notify_row(0.1, seconds)], 10**6)
        m.fits["notify-pull"] = LinearFit()  # (the prediction stays 1.5 ms)
        m.observe_rows([notify_row(0.1, 1.5e-3)], 10**6)
    assert m.error("cpu", "notify-pull") > 0.25
    assert m.cpu_seconds(0.1, 1.0, 10**6) == pytest.approx(1.5e-3)
    assert m.placement(0.1, 1.0, 10**6, current="gpu")[0] == "gpu"
    # the GPU's error is measured by its rows at a measured rate (not the calibration's)
    m = CostModel()
    m.observe("gpu", "pull", 10**6, 1e-3, calibration=True)
    m.observe_rows([gpu_row(2e-3)], 10**6)
    assert ("gpu", "pull") not in m.errors  # (predicted by the calibration's rate)
    assert m.error("gpu", "pull") == tuning.PREDICTION_ERROR
    m.observe_rows([gpu_row(3e-3)], 10**6)
    assert m.error("gpu", "pull") == pytest.approx(0.7 * 0.2 + 0.3 * 0.5)


def test_a_hybrid_iteration_that_lost_is_not_tried_again_until_the_inputs_change():
    """A later run on the same graph and budget starts from what the earlier ones left
    (recall): the hybrid's measured time, scaled by how its prediction moved since."""
    first = model(8e-9, 2e-9)
    assert first.placement(1.0, 1.0, 10**6)[0] == "hybrid"  # predicted 1.6 ms
    first.observe_iteration("hybrid", 2.2e-3)  # lost to the GPU's 2 ms
    assert first.placement(1.0, 1.0, 10**6)[0] == "gpu"
    memory = first.remembered()
    later = model(8e-9, 2e-9)  # the same calibration
    assert later.placement(1.0, 1.0, 10**6)[0] == "hybrid"  # (without the memory)
    later = model(8e-9, 2e-9)
    later.recall(memory)
    assert [later.placement(1.0, 1.0, 10**6, current="gpu")[0] for _ in range(5)] == \
        ["gpu"] * 5
    later.recall(None)  # (nothing to recall: nothing changes)
    assert later.placement(1.0, 1.0, 10**6)[0] == "gpu"
    # a CPU whose pull calibrates 3.6 times as fast is not an input: the memory keeps
    # the page tasks' rates that the lost iteration measured (8 ns an edge)
    faster = model(2.2e-9, 2e-9)
    faster.recall(memory)
    assert faster.placement(1.0, 1.0, 10**6)[0] == "gpu"
    # the inputs changed: the CPU's page tasks 3.6 times as fast predict a split of
    # 1.05 ms against the 1.6 it lost by: 2.2 * 1.05 / 1.6 = 1.44 ms against 2
    faster.per_edge["cpu", "pages"] = 2.2e-9
    assert faster.placement(1.0, 1.0, 10**6)[0] == "hybrid"
    split = 2.2 * 2 / 4.2 * 1e-3
    assert faster.expected["hybrid"] == (pytest.approx(2.2e-3 * split / 1.6e-3),
                                         pytest.approx(split), 10**6)
    # and so did the GPU alone's, measured slower than the hybrid iteration was
    later.observe_iteration("gpu", 3e-3)
    assert later.placement(1.0, 1.0, 10**6)[0] == "hybrid"


def test_the_driver_keeps_the_models_memory_on_the_cluster_by_its_key(monkeypatch):
    """The memory is the cluster's, not the graph's: a key holds the program's class,
    and a graph that carried one (a local class, a lock in it) could no longer be sent
    to worker processes."""
    import pickle
    import threading
    from types import SimpleNamespace

    from hetgraph.cluster import Cluster
    from hetgraph.io.generate import grid
    from hetgraph.scheduler.dispatcher import _Driver

    class Local:  # (a program's class made in a function: not picklable by name)
        lock = threading.Lock()

    g = grid(4, 4, seed=1)
    cluster = SimpleNamespace(placement_memory={})
    cluster.remember_placements = lambda key, memory: Cluster.remember_placements(
        cluster, key, memory)
    lost = model(8e-9, 2e-9)
    lost.placement(1.0, 1.0, 10**6)
    lost.observe_iteration("hybrid", 2.2e-3)
    driver = SimpleNamespace(graph=g, cluster=cluster, model=lost, _memory_key=(Local, 1))
    _Driver._remember(driver)
    pickle.dumps(g)  # (raised with the memory on the graph)
    fresh = SimpleNamespace(graph=g, cluster=cluster, model=model(8e-9, 2e-9))
    _Driver._recall(fresh, ("b", 1))  # another key: nothing recalled
    assert fresh.model.placement(1.0, 1.0, 10**6)[0] == "hybrid"
    fresh = SimpleNamespace(graph=g, cluster=cluster, model=model(8e-9, 2e-9))
    _Driver._recall(fresh, (Local, 1))
    assert fresh._memory_key == (Local, 1)
    assert fresh.model.placement(1.0, 1.0, 10**6)[0] == "gpu"
    monkeypatch.setattr(tuning, "CALIBRATIONS_KEPT", 2)  # the newest kept
    for key in (("b", 1), ("c", 1)):
        _Driver._remember(SimpleNamespace(graph=g, cluster=cluster, model=CostModel(),
                                          _memory_key=key))
    assert list(cluster.placement_memory) == [("b", 1), ("c", 1)]


def model_state(m):
    """Everything a cost model holds, its fits by their sums."""
    return {name: {mode: fit.sums for mode, fit in value.items()} if name == "fits"
            else value for name, value in vars(m).items()}


def test_a_warm_call_starts_from_a_copy_of_the_model_its_kept_calibration_made():
    """A run under a kept calibration starts from the cost model that the calibration's
    reports make (rates, fits, errors, switch, overhead, the GPU's subgraph share):
    the first such run makes it and keeps a copy, the later ones copy that, each
    learning apart from it."""
    from types import SimpleNamespace

    from hetgraph.io.generate import grid
    from hetgraph.scheduler.dispatcher import _Calibration, _Driver
    from hetgraph.scheduler.tasks import Report

    class Driver(_Driver):  # the fields the calibration's methods use, a cluster that
        # keeps ``kept`` under ("key",)
        def __init__(self):
            self.graph, self.spec = grid(4, 4, seed=1), SimpleNamespace(
                dtype=np.dtype(np.float32))
            self.inline_left, self.round_trip = 1.0, 1e-3
            self.cluster = SimpleNamespace(calibrations={("key",): kept})
            self.model = CostModel(skew=4.0, push=2.0, growth=4.0, threads=2,
                                   sparse_edges=10_000)

        def _share_state(self):
            pass

        def _measure_round_trip(self):
            pass

    cpu = Report("cpu", [0, 2], 10**6, seconds=2e-3, takeover=1e-4, frontier=(1, 4),
                 rows=[notify_row(1e-5, 40e-6, iteration=i) for i in (2, 3)] +
                 [history_row(placement="cpu", mode="push", f=1e-4, rho=1.0, edges=100,
                              cpu_seconds=20e-6, seconds=20e-6, iteration=4)])
    gpu = Report("gpu", [0, 1, 2], 10**6, seconds=3e-4, copy_per_byte=1e-10,
                 subgraph=0.25, rows=[gpu_row(s, 10**6) for s in (5e-4, 4e-4, 4.5e-4)])
    kept = _Calibration([cpu, gpu])
    before = Driver()  # as every warm call started: the reports taken again
    before._take_calibration([cpu, gpu])
    first, later = Driver(), Driver()
    first._calibrate(("key",))
    later._calibrate(("key",))
    reference = model_state(before.model)
    assert reference["fits"]["notify-pull"][0] > 0 and reference["fits"]["push"][0] > 0
    assert reference["subgraph"] == 0.25 and reference["switch"] > 0
    for driver in (first, later):
        assert model_state(driver.model) == reference
        # (the frontier the run counts itself: its initial state may be another's)
        assert (driver.frontier, driver._takeover) == (None, 1e-4)
    assert later.model is not kept.model and first.model is not kept.model
    # a run's measurements change its model alone
    later.model.observe_rows([gpu_row(9e-4), notify_row(1e-3, 1e-3)], 10**6)
    later.model.observe_iteration("gpu", 1e-3)
    later.model.placement(1e-3, 1.0, 10**6, current="gpu", weight=3, seconds=1e-3)
    later.model.recall({"iteration": {"hybrid": 1e-3}, "basis": {"hybrid": 2e-3},
                        "pages": {("cpu", "pages"): 1e-8}, "overhead": 1e-4,
                        "errors": {("gpu", "pull"): 0.5}, "switch": 1.0,
                        "gpu_push": ((1.0, 1e6, 1e-3, 1e12, 1e3), 4.0)})
    assert model_state(later.model) != reference
    assert model_state(kept.model) == model_state(first.model) == reference
    again = Driver()
    again._calibrate(("key",))
    assert model_state(again.model) == reference


def test_a_bucketed_push_is_predicted_from_the_edges_it_relaxes():
    """With buckets, a push relaxes a share of its frontier's out-edges, which changes
    over a run: the fit is of seconds against edges relaxed (here 1 us + 10 ns an
    edge), and a frontier's are its out-edges times the measured share. Fitted against
    the frontier's out-edges, the pushes below (small frontiers relaxing much of
    theirs, large ones little) would make a slope of 0.87 ns a frontier edge, and a
    frontier of 20,000 edges relaxing half would be predicted at 24 us, not 101."""
    def push(frontier, share, i):
        relaxed = int(frontier * share)
        return history_row(iteration=i, placement="cpu", mode="push", f=frontier / 10**6,
                           rho=1.0, edges=relaxed, cpu_seconds=1e-6 + 10e-9 * relaxed,
                           seconds=1e-6 + 10e-9 * relaxed, priority=float(i))

    m = CostModel(buckets=True, push=2.0)
    m.observe("cpu", "pull", 10**6, 1e-3)
    m.observe("gpu", "pull", 10**6, 1e-4)
    for i in range(0, 40, 4):
        m.observe_rows([push(1000, 0.6, i), push(1000, 0.6, i + 1)], 10**6)
        m.observe_rows([push(40000, 0.1, i + 2), push(40000, 0.1, i + 3)], 10**6)
    assert 0.1 < m.share < 0.6  # (the pushes' edges over their frontiers', smoothed)
    m.shares["push"] = 0.5
    assert m.cpu_seconds(0.02, 1.0, 10**6) == pytest.approx(1e-6 + 10e-9 * 10000, rel=0.01)
    # a GPU iteration runs the whole frontier: the CPU's time for its progress is
    # 1 / share CPU iterations
    assert m.progress_ratio() == pytest.approx(2.0)


def test_a_batch_of_many_rows_folds_as_its_newest(monkeypatch):
    monkeypatch.setattr(tuning, "FOLD_ROWS", 4)
    sampled, newest = CostModel(), CostModel()
    rows = [gpu_row(9e-3)] * 10 + [gpu_row(1e-3)] * 4
    sampled.observe_rows(rows, 10**6)
    newest.observe_rows(rows[-4:], 10**6)
    assert sampled.per_edge == newest.per_edge
    assert sampled.seconds("gpu", 10**6) == pytest.approx(1e-3)


def test_a_lost_hybrid_is_tried_again_exactly_when_its_inputs_moved_past_the_loss():
    """Hand-checked: a hybrid placed by a prediction of 1.6 ms took 2.2 against the
    GPU alone's 2 ms; its error is then 0.7 * 0.2 + 0.3 * 0.6 / 1.6 = 0.2525. It is
    tried again only once its prediction (the split of the page tasks' rates plus the
    overhead) falls below 1.6 * 2 / (2.2 * 1.2525) = 1.161 ms, or the GPU alone
    becomes slower by as much; a rate that drifts by 5% either way changes nothing."""
    def lost():
        m = model(8e-9, 2e-9)
        assert m.placement(1.0, 1.0, 10**6)[0] == "hybrid"
        m.observe_iteration("hybrid", 2.2e-3)
        assert m.error("hybrid", "pull") == pytest.approx(0.2525)
        return m

    for cpu, gpu in ((8e-9 * 0.95, 2e-9), (8e-9 * 1.05, 2e-9), (8e-9, 2e-9 * 0.95),
                     (8e-9, 2e-9 * 1.05)):
        m = lost()
        m.per_edge["cpu", "pages"], m.per_edge["gpu", "pull"] = cpu, gpu
        assert m.placement(1.0, 1.0, 10**6, current="gpu")[0] == "gpu"
    # the CPU's page tasks measured faster: a split of 2 c / (2 + c) ms
    for c, placed in ((2.878, "gpu"), (2.651, "hybrid")):  # split 1.18, 1.14 ms
        m = lost()
        m.per_edge["cpu", "pages"] = c * 1e-9
        assert m.placement(1.0, 1.0, 10**6, current="gpu")[0] == placed
    # placed with an overhead of 0.45 ms (a prediction of 2.05 ms), the line is
    # 2.05 * 2 / (2.2 * 1.2525) = 1.488 ms: the overhead measured at 0 (1.6 ms) is not
    # enough, with the CPU's page tasks at 6 ns an edge (1.5 ms) neither, at 5.5 it is
    m = model(8e-9, 2e-9, overhead=0.45e-3)
    m.iteration["hybrid"], m.basis["hybrid"] = 2.2e-3, 1.6e-3 + 0.45e-3
    m.errors["hybrid", "pull"] = 0.2525
    assert m.placement(1.0, 1.0, 10**6, current="gpu")[0] == "gpu"
    m.overhead = 0.0
    assert m.placement(1.0, 1.0, 10**6, current="gpu")[0] == "gpu"
    m.per_edge["cpu", "pages"] = 6e-9
    assert m.placement(1.0, 1.0, 10**6, current="gpu")[0] == "gpu"
    m.per_edge["cpu", "pages"] = 5.5e-9
    assert m.placement(1.0, 1.0, 10**6, current="gpu")[0] == "hybrid"
    # the GPU alone measured slower: 2.2 * 1.2525 = 2.756 ms is the line
    for seconds, placed in ((2.74e-3, "gpu"), (2.78e-3, "hybrid")):
        m = lost()
        m.iteration["gpu"] = seconds
        assert m.placement(1.0, 1.0, 10**6, current="gpu")[0] == placed


def test_the_models_memory_is_kept_apart_per_budget_and_options():
    """A hybrid that lost with one GPU budget is not remembered for another: the
    memory's key (the calibration's) holds the GPU options, the page size, the
    program's parameters and the workers."""
    from types import SimpleNamespace

    from hetgraph.algorithms.bfs import BreadthFirst
    from hetgraph.io.generate import grid
    from hetgraph.program import ProgramSpec
    from hetgraph.scheduler.dispatcher import _calibration_key

    g = grid(4, 4, seed=1)
    cluster = SimpleNamespace(cpu_workers=["a"], gpu_workers=["b"])

    def key(source=0, **options):
        given = dict(coloring=None, threads=None, partitions=None, cpu_mode="auto",
                     rho=1.0, page_bytes=None, gpu={}) | options
        return _calibration_key(cluster, ProgramSpec(BreadthFirst(source)), g, True,
                                given)

    assert key() == key()
    assert len({key(), key(gpu={"memory_budget": 1 << 20}),
                key(gpu={"memory_budget": 1 << 21}), key(page_bytes=1 << 16),
                key(source=3)}) == 5


def test_a_calibration_key_samples_no_array_the_program_derives_from_the_graph(
        monkeypatch):
    """The arrays a program derives from the graph are said by the graph and the
    parameters: the key samples none of them (a sample of PageRank's two cost a warm
    call 0.3 ms), only the arrays a user gives, such as a start vector."""
    from types import SimpleNamespace

    from hetgraph.algorithms.pagerank import PageRank
    from hetgraph.io.generate import grid
    from hetgraph.program import ProgramSpec
    from hetgraph.scheduler import dispatcher

    g = grid(30, 30, seed=1)
    sampled = []
    monkeypatch.setattr(dispatcher, "sampled_crc32",
                        lambda a: sampled.append(a.size) or zlib.crc32(a.tobytes()))
    given = dict(coloring=None, threads=None, partitions=None, cpu_mode="auto", rho=1.0,
                 page_bytes=None, gpu={})

    def key(**parameters):
        spec = ProgramSpec(PageRank(**parameters))
        spec.initial_state(g)  # (the program takes its derived arrays)
        return dispatcher._calibration_key(
            SimpleNamespace(cpu_workers=["a"], gpu_workers=["b"]), spec, g, True, given)

    assert key() == key() and sampled == []
    assert key(damping=0.9) != key()
    start = np.full(g.num_vertices, 1.0 / g.num_vertices)
    tilted = start.copy()
    tilted[:2] = [0.0, 2.0 / g.num_vertices]
    assert key(start=start) != key(start=tilted) and sampled == [g.num_vertices] * 2


def test_a_bucketed_notify_pull_is_predicted_from_the_edges_it_reads():
    """With buckets, a notify-pull runs the lowest bucket's part of its frontier and
    pulls the in-edges of the vertices that part notified: it is fitted against the
    edges it read (here 2 us + 5 ns an edge) and predicted from shares["notify-pull"]
    f |E| of them. Small frontiers below read 2.4 times their out-edges, large ones 0.3
    times: fitted against the frontier's out-edges, 2,000 of them reading 1,000 would
    be predicted at 14 + 48 / 39,000 * 1,000 = 15.2 us, not 7."""
    def notify(frontier, ratio, i):
        read = int(frontier * ratio)
        return history_row(iteration=i, placement="cpu", mode="notify-pull",
                           f=frontier / 10**6, rho=1.0, edges=read,
                           cpu_seconds=2e-6 + 5e-9 * read, seconds=2e-6 + 5e-9 * read,
                           priority=float(i))

    m = CostModel(buckets=True, skew=4.0)  # (push 0: an out-of-core run's notify-pull)
    m.observe("cpu", "pull", 10**6, 1e-3)
    m.observe("gpu", "pull", 10**6, 1e-4)
    for i in range(0, 40, 4):
        m.observe_rows([notify(1000, 2.4, i), notify(1000, 2.4, i + 1)], 10**6)
        m.observe_rows([notify(40000, 0.3, i + 2), notify(40000, 0.3, i + 3)], 10**6)
    assert 0.3 < m.shares["notify-pull"] < 2.4  # (smoothed over both)
    assert m.share is None  # (the push's: none ran)
    assert m.cpu_mode_for(0.002, 1.0, 10**6) == "notify-pull"
    m.shares["notify-pull"] = 0.5
    assert m.cpu_seconds(0.002, 1.0, 10**6) == pytest.approx(2e-6 + 5e-9 * 1000, rel=0.01)
    unbucketed = CostModel(skew=4.0)  # (its fit: seconds against the frontier's edges)
    unbucketed.observe("cpu", "pull", 10**6, 1e-3)
    for i in range(0, 40, 4):
        unbucketed.observe_rows([notify(1000, 2.4, i)], 10**6)
        unbucketed.observe_rows([notify(40000, 0.3, i + 2)], 10**6)
    assert unbucketed.cpu_seconds(0.002, 1.0, 10**6) > 15e-6


def test_auto_on_cpu_workers_alone_runs_as_the_cpu_alone(dispatcher_only, monkeypatch):
    """With no GPU worker, devices="auto" is devices="cpu": the cost model is neither
    calibrated nor asked where to go nor fed rows, its calls those of the CPU alone
    (issue 59: no bookkeeping that the CPU alone does not pay), and the answers are
    SciPy's."""
    import hetgraph as hg
    from scipy.sparse.csgraph import dijkstra

    from hetgraph.io.generate import grid
    from hetgraph.scheduler import costmodel

    calls = []
    for name in ("placement", "alpha", "observe", "observe_rows", "observe_burst",
                 "observe_iteration", "lead_degree"):
        def counted(self, *args, name=name, **kwargs):
            calls.append(name)

        monkeypatch.setattr(costmodel.CostModel, name, counted)
    g = grid(30, 30, seed=4)
    source = 17
    with hg.Cluster(gpus=0, dashboard_address=None) as cluster:
        if cluster.gpu_workers:
            pytest.skip("a GPU worker")
        runs, made = {}, {}
        for devices in ("cpu", "auto"):
            calls.clear()
            runs[devices] = hg.sssp(g, source, cluster=cluster, devices=devices)
            made[devices] = list(calls)
    assert made["auto"] == made["cpu"]
    assert set(made["auto"]) <= {"alpha"}  # (nan: a run's one kind has nothing to weigh)
    expected = dijkstra(g.to_scipy(), indices=source)
    for result in runs.values():
        assert np.allclose(result.values, expected)
        assert set(result.history["placement"]) == {"cpu"}
    assert runs["auto"].history["mode"].tolist() == runs["cpu"].history["mode"].tolist()


def push_row(f, h2d_bytes, seconds, arcs=10**6):
    """A GPU row that pushed the active subgraph of a frontier of f |E| out-edges,
    copying ``h2d_bytes`` in (its edges: the resident pages' and those pushed)."""
    return history_row(placement="gpu", mode="gpu-push", f=f, rho=1.0,
                       edges=arcs // 4 + h2d_bytes // 4, h2d_bytes=h2d_bytes,
                       gpu_seconds=seconds, seconds=seconds)


def test_the_gpus_errors_are_kept_per_mode_and_guard_a_move_in_that_mode():
    """The GPU's pulls are predicted by its rate, its pushes of active subgraphs (rows
    "gpu-push") by their fit; their errors are kept apart, and a move to the GPU
    needs the error of the mode it is predicted to run (a push while f is under
    SUBGRAPH_ACTIVE_EDGES with active subgraphs and the push predicted faster)."""
    m = CostModel()
    m.observe("cpu", "pull", 10**6, 80e-3)
    m.observe("gpu", "pull", 10**6, 10e-3)  # measured: 10 ns an edge
    m.subgraph = 0.5
    m.observe_rows([gpu_row(10e-3)], 10**6)  # as predicted
    assert m.error("gpu", "pull") == pytest.approx(0.7 * 0.2)
    # the first push, 10,000 frontier edges copying 40,000 bytes in 1 ms: no error (the
    # prior predicted it, not the fit), the pull's rate and error untouched
    m.observe_rows([push_row(0.01, 40_000, 1e-3)], 10**6)
    assert m.error("gpu", "push") == tuning.PREDICTION_ERROR
    assert m.per_edge["gpu", "pull"] == pytest.approx(1e-8)
    assert m.push_bytes == pytest.approx(4.0)
    # the same push again in 3 ms, predicted at 1: 200% over, capped at 100%
    m.observe_rows([push_row(0.01, 40_000, 3e-3)], 10**6)
    assert m.error("gpu", "push") == pytest.approx(0.7 * 0.2 + 0.3 * 1.0)
    assert m.error("gpu", "pull") == pytest.approx(0.7 * 0.2)
    # both in one batch, each against its own prediction: the pull 12.5 ms for 10 (25%
    # over), the push 1.6 ms for the fit's mean of 1 and 3 ms, weighed 0.21 and 0.3
    m.observe_rows([gpu_row(12.5e-3), push_row(0.01, 40_000, 1.6e-3)], 10**6)
    assert m.error("gpu", "pull") == pytest.approx(0.7 * 0.14 + 0.3 * 0.25)
    fitted = (0.21 * 1e-3 + 0.3 * 3e-3) / 0.51
    assert m.error("gpu", "push") == pytest.approx(
        0.7 * 0.44 + 0.3 * (fitted - 1.6e-3) / fitted)
    # a move's margin: the push's error at a small frontier, the pull's where the pull
    # is predicted (a large frontier, past the threshold, or no active subgraphs)
    m.errors["gpu", "push"], m.errors["gpu", "pull"] = 0.6, 0.1
    assert m._margin("gpu", 0.01, 1.0, 10**6) == pytest.approx(0.6)
    assert m._margin("gpu", 0.5, 1.0, 10**6) == pytest.approx(0.2)  # (pushed: 80 ms)
    assert m._margin("gpu", 0.9, 1.0, 10**6) == pytest.approx(0.2)
    m.subgraph = 0.0
    assert m._margin("gpu", 0.01, 1.0, 10**6) == pytest.approx(0.2)


def test_a_streamed_gpu_iteration_is_predicted_from_its_active_subgraphs_bytes():
    """Hand-checked: a GPU pull of 10 ms, 80% of the edges streamed. Before a push was
    measured, a small frontier's iteration is the pull less its streamed edges that
    are not active (f = 0.001: 10 * (1 - 0.8 * 0.999) = 2.008 ms). Measured pushes of
    400 and 40,000 bytes (4 an edge of their frontiers) in 0.505 and 1 ms: the fit is
    the line through them, 0.5 ms and 12.5 ns a byte, so f = 0.001 (1,000 edges,
    4,000 bytes) is 0.55 ms; a frontier whose push the fit prices over the pull (f =
    0.5: 25.5 ms) pulls, as the engine's SubgraphChoice then does, and so does one
    past SUBGRAPH_ACTIVE_EDGES. A later run on the same graph and budget starts from
    the fit (:meth:`CostModel.recall`); one that pushed nothing leaves it as it was."""
    def calibrated():
        m = CostModel()
        m.observe("cpu", "pull", 10**6, 80e-3, calibration=True)
        m.observe("gpu", "pull", 10**6, 10e-3, calibration=True)
        m.subgraph = 0.8
        return m

    m = calibrated()
    assert m.gpu_seconds(0.001, 10**6) == pytest.approx(2.008e-3)
    m.observe_rows([push_row(0.0001, 400, 0.505e-3)], 10**6)
    m.observe_rows([push_row(0.01, 40_000, 1e-3)], 10**6)
    assert m.push_bytes == pytest.approx(4.0)
    assert m.fits["gpu-push"].predict(0, 0.0) == pytest.approx(0.5e-3)
    assert m.gpu_seconds(0.001, 10**6) == pytest.approx(0.55e-3)
    assert m.gpu_seconds(0.5, 10**6) == pytest.approx(10e-3)
    assert m.gpu_seconds(0.9, 10**6) == pytest.approx(10e-3)
    assert m.per_edge["gpu", "pull"] == pytest.approx(1e-8)  # (the pushes are not pulls)
    assert m.alpha(0.001, 1.0, 10**6) == pytest.approx(
        m.cpu_seconds(0.001, 1.0, 10**6) / 0.55e-3)
    later = calibrated()
    later.recall(m.remembered())
    assert later.gpu_seconds(0.001, 10**6) == pytest.approx(0.55e-3)
    later.recall(calibrated().remembered())  # (a run that pushed nothing)
    assert later.gpu_seconds(0.001, 10**6) == pytest.approx(0.55e-3)
    # a first push that took 100 times the prior's 2.008 ms (the push's compile) counts
    # as three times it, as a later one counts at most three times the fit
    stalled = calibrated()
    stalled.observe_rows([push_row(0.001, 4000, 0.2008)], 10**6)
    assert stalled.fits["gpu-push"].predict(4000, 0.0) == pytest.approx(
        tuning.COST_OUTLIER * 2.008e-3)


def test_the_gpu_alone_a_hybrid_must_beat_is_its_segments_pulls():
    """A GPU segment's measured iteration (what a hybrid iteration must beat) is the
    mean of its newest FOLD_ROWS rows that pulled every page, never of its pushes of
    active subgraphs, which a hybrid iteration does not replace."""
    m = model(8e-9, 2e-9)
    m.observe_gpu_segment([push_row(0.001, 4000, 0.5e-3), gpu_row(2e-3),
                           push_row(0.001, 4000, 0.5e-3), gpu_row(3e-3)])
    assert m.iteration["gpu"] == pytest.approx(2.5e-3)
    m.observe_gpu_segment([push_row(0.001, 4000, 0.5e-3)] * 3)  # nothing to measure
    assert m.iteration["gpu"] == pytest.approx(2.5e-3)
    m.observe_gpu_segment([gpu_row(1e-3)] + [gpu_row(4e-3)] * tuning.FOLD_ROWS)
    assert m.iteration["gpu"] == pytest.approx(0.7 * 2.5e-3 + 0.3 * 4e-3)


def test_a_gpu_segments_first_row_is_not_its_iteration():
    """A GPU segment's first row carries its start (out of core, the reads of every page
    the GPU keeps from then on): a segment of one row measures nothing, a longer one
    is measured by the rows after it."""
    m = model(8e-9, 2e-9)
    m.observe_gpu_segment([gpu_row(4.1)])
    assert "gpu" not in m.iteration
    m.observe_gpu_segment([gpu_row(4.1), gpu_row(0.027), gpu_row(0.029)])
    assert m.iteration["gpu"] == pytest.approx(0.028)


# RMAT-24 (263,437,329 arcs, a quarter of its unweighted page bytes the GPU's budget),
# BFS from its largest out-degree vertex, on one H200: the GPU alone's iterations with
# active subgraphs (bench/results/subway.json, "subgraph": mode, seconds, h2d bytes),
# its streamed pull (25 ms, 1,257,141,906 bytes of 6 an edge), and the CPU alone's
# (bench/results/hybrid-rmat24.json, the quarter-resident row's fastest CPU run)
RMAT24_ARCS = 263_437_329
RMAT24_BFS_F = (0.00090918, 0.52112259, 0.46429194, 0.00554489, 3.27e-05, 2.1e-07, 0.0)
RMAT24_BFS_GPU = (("gpu-push", 0.9696e-3, 926_320),
                  ("gpu-pull", 24.83174e-3, 1_257_141_906),
                  ("gpu-pull", 24.91875e-3, 1_257_141_906),
                  ("gpu-push", 9.08186e-3, 6_684_000), ("gpu-push", 0.93386e-3, 40_956),
                  ("gpu-push", 0.83894e-3, 252), ("gpu-push", 0.83136e-3, 12))
RMAT24_BFS_CPU = (("push", 17.98e-3), ("pull", 481.08e-3), ("pull", 405.84e-3),
                  ("push", 102.17e-3), ("push", 0.48e-3), ("push", 0.0), ("push", 0.51e-3))
RMAT24_STREAMED_EDGES = 1_257_141_906 // 6


def rmat24_bfs_row(kind, i):
    """The history row of iteration ``i`` (from 0) of the recorded RMAT-24 BFS on
    ``kind`` alone, and its seconds."""
    f = RMAT24_BFS_F[i]
    if kind == "gpu":
        mode, seconds, h2d = RMAT24_BFS_GPU[i]
        edges = RMAT24_ARCS if mode == "gpu-pull" else \
            RMAT24_ARCS - RMAT24_STREAMED_EDGES + h2d // 4
        return history_row(iteration=i + 1, placement="gpu", mode=mode, f=f, rho=1.0,
                           edges=edges, gpu_seconds=seconds, seconds=seconds,
                           h2d_bytes=h2d), seconds
    mode, seconds = RMAT24_BFS_CPU[i]
    edges = RMAT24_ARCS if mode == "pull" else int(f * RMAT24_ARCS)
    return history_row(iteration=i + 1, placement="cpu", mode=mode, f=f, rho=1.0,
                       edges=edges, cpu_seconds=seconds, seconds=seconds), seconds


def replay_rmat24_bfs(switch):
    """(seconds, placements) of auto on the recorded RMAT-24 BFS, as the dispatcher
    asks: the first iteration placed with ``start``, each later one by the model with
    the run where it is, every row but a segment's first folded in, a move charged
    ``switch`` seconds (the model's ``switch`` too). The model is calibrated by both
    pulls, knows the GPU's streamed share, and knows the CPU's pushes as the CPU
    alone measured them."""
    arcs = RMAT24_ARCS
    m = CostModel(skew=300.0, push=32.0, growth=500.0, threads=16, sparse_edges=50_000)
    m.observe("cpu", "pull", arcs, 405.84e-3, calibration=True)
    m.observe("gpu", "pull", arcs, 25e-3, calibration=True)
    m.subgraph, m.switch = RMAT24_STREAMED_EDGES / arcs, switch
    for i in (0, 3, 4, 5, 6):
        m.observe_rows([rmat24_bfs_row("cpu", i)[0]], arcs)
    total, placed, last = 0.0, [], 0.0
    for i, f in enumerate(RMAT24_BFS_F):
        where = m.placement(f, 1.0, arcs, start=True)[0] if not placed else \
            m.placement(f, 1.0, arcs, current=placed[-1], seconds=last)[0]
        first = not placed or where != placed[-1]
        if placed and first:
            total += switch
        row, last = rmat24_bfs_row(where, i)
        total += last
        if not first:
            m.observe_rows([row], arcs)
        placed.append(where)
    return total, placed


@pytest.mark.parametrize("switch", [2e-3, 5e-3])
def test_auto_runs_a_recorded_quarter_resident_bfs_as_fast_as_the_gpu_alone(switch):
    """Issue 59 on recorded timings: the GPU's last iterations push their active
    subgraphs in about a millisecond; priced as the streamed pull's resident share
    (about 5 ms), they sent the run to the CPU, which gained less than the move cost
    (auto 0.95x the GPU alone with a 5 ms move)."""
    alone = sum(seconds for _, seconds, _ in RMAT24_BFS_GPU)
    seconds, placed = replay_rmat24_bfs(switch)
    assert placed == ["gpu"] * len(RMAT24_BFS_F)
    assert seconds <= alone * 1.01


def test_a_hybrids_basis_is_what_the_inputs_it_measured_predict():
    """Hand-checked: placed by 1.6 ms (page tasks at 8 and 2 ns an edge, no overhead),
    the iteration measured the GPU's page tasks at 4 ns, the CPU's at 12 (smoothed to
    9.2), an overhead of 0.5 ms (smoothed to 0.15) and took 3.5 ms. Its basis is what
    those inputs predict, 4 * 9.2 / 13.2 + 0.15 = 2.938 ms, so the estimate is the
    measurement until they move; a later run that recalls it starts from the same
    inputs and the same 3.5 ms."""
    m = model(8e-9, 2e-9)
    assert m.placement(1.0, 1.0, 10**6)[0] == "hybrid"
    m.observe("gpu", "pages", 10**6, 4e-3)
    m.observe("cpu", "pages", 10**6, 12e-3)
    m.observe_overhead(0.5e-3)
    m.observe_iteration("hybrid", 3.5e-3)
    assert m.basis["hybrid"] == pytest.approx(4 * 9.2 / 13.2 * 1e-3 + 0.15e-3)
    assert m.error("hybrid", "pull") == pytest.approx(0.7 * 0.2 + 0.3 * 1.0)  # (capped)
    assert m._estimate("hybrid", m._hybrid_prediction(10**6)) == pytest.approx(3.5e-3)
    assert m.placement(1.0, 1.0, 10**6, current="gpu")[0] == "gpu"
    later = model(8e-9, 2e-9)
    later.recall(m.remembered())
    assert later.overhead == pytest.approx(0.15e-3)
    assert later._estimate("hybrid", later._hybrid_prediction(10**6)) == pytest.approx(3.5e-3)
    assert later.placement(1.0, 1.0, 10**6)[0] == "gpu"
    # a run that never ran a hybrid iteration leaves the overhead as it found it
    assert CostModel(overhead=1e-3).remembered()["overhead"] is None


def test_a_device_may_slow_by_the_settled_margin_or_its_measured_error():
    m = CostModel()
    assert m.deviation("gpu") == tuning.SETTLED_MARGIN
    m.errors[("gpu", "pull")], m.errors[("gpu", "push")] = 0.1, 0.7
    m.errors[("cpu", "pull")] = 0.9  # (the other device's error is not this one's)
    assert m.deviation("gpu") == 0.7 and m.deviation("cpu") == 0.9
    assert CostModel().deviation("cpu") == tuning.SETTLED_MARGIN


def test_a_call_settles_on_the_one_device_the_model_placed_it_on_and_is_checked():
    """A call placed by the model settles its key and iteration limit on the device of
    all its iterations (none when it used two, or hybrid iterations, or failed); a call
    that followed that answer keeps it while it ran as many iterations in at most
    (1 + margin) times the settling call's seconds (or CHOOSE_SECONDS more), and drops
    it otherwise."""
    from types import SimpleNamespace

    from hetgraph.scheduler.dispatcher import _Calibration, _Driver, _Settled

    kept = _Calibration(["the CPU's report", "the GPU's"])  # (_settle reads neither)

    class Driver(_Driver):  # the fields _settle reads, a cluster keeping ``kept``
        def __init__(self, settled=None, limit=10, devices="auto"):
            self._key, self._kept, self._limit, self.devices = ("k",), kept, limit, devices
            self.settled, self.model = settled, CostModel()
            self.model.errors[("gpu", "pull")] = 0.5
            self.cluster = SimpleNamespace(calibrations={("k",): kept})

    def rows(*placements, seconds=1e-3):
        return [history_row(placement=p, mode="pull", seconds=seconds) for p in placements]

    Driver()._settle(rows("gpu", "gpu", "gpu"))
    assert kept.settled == {10: _Settled("gpu", 3, 3e-3, 0.5)}
    Driver(limit=4)._settle(rows("cpu", "cpu"))
    assert kept.settled[4] == _Settled("cpu", 2, 2e-3, tuning.SETTLED_MARGIN)
    for other in (rows("cpu", "gpu"), rows("hybrid"), None, []):
        Driver(limit=4)._settle(other)
        assert list(kept.settled) == [10]
    Driver(devices="hybrid")._settle(rows("hybrid"))  # (not placed by the model)
    assert list(kept.settled) == [10]
    settled = kept.settled[10]
    for seconds, kept_after in ((1.4e-3, True), (0.2e-3, True), (1.6e-3, False)):
        Driver(settled)._settle(rows("gpu", "gpu", "gpu", seconds=seconds))
        assert kept.settled == ({10: settled} if kept_after else {})
        kept.settled[10] = settled
    Driver(settled)._settle(rows("gpu", "gpu"))  # (another count of iterations)
    assert kept.settled == {}
    assert settled.after(3, 4.5e-3) is settled and settled.after(3, 4.6e-3) is None
    short = _Settled("gpu", 3, 1e-4, 0.2)  # a delay below CHOOSE_SECONDS: no answer moves
    assert short.after(3, 1e-4 + 0.9 * tuning.CHOOSE_SECONDS) is short
    assert short.after(3, 1e-4 + 1.1 * tuning.CHOOSE_SECONDS) is None
