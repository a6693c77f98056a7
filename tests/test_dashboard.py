"""What a run shows while it runs: the scheduler's run events, the hetgraph page of the
Dask dashboard and its Prometheus gauges over HTTP on localhost, the page rendered in
headless Chromium, and the progress bar."""

import io
import math
import re
import time
import types
import urllib.request

import numpy as np
import pytest

import hetgraph as hg
from hetgraph import dashboard
from hetgraph.result import history_row
from hetgraph import events
from hetgraph.scheduler import dispatcher, progress

pytest.importorskip("bokeh")
pytest.importorskip("prometheus_client")


def fetch(url):
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.status, response.read().decode()


def gauges(text):
    """{name{labels}: value} of the hetgraph lines of a Prometheus exposition."""
    found = {}
    for line in text.splitlines():
        match = re.match(r"^(dask_hetgraph_\w+(?:\{[^}]*\})?) (\S+)$", line)
        if match:
            found[match.group(1)] = float(match.group(2))
    return found


def eventually(read, timeout=10.0):
    """``read()`` once it is truthy (events arrive shortly after they are posted)."""
    deadline = time.monotonic() + timeout
    while not (value := read()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return value


def settle(cluster):
    """Wait until every run event ``cluster``'s client posted reached the scheduler (its
    posts arrive in order, so a marker posted now arrives last)."""
    marker = f"marker-{time.monotonic_ns()}"
    progress.SchedulerLog.of(cluster.client)({"run": marker, "event": "marker"})
    assert eventually(lambda: any(m.get("run") == marker for _, m in
                                  cluster.client.get_events(events.TOPIC)))


@pytest.fixture(scope="module")
def served():
    """A CPU-only cluster with its dashboard on a free localhost port, after an SSSP
    run."""
    graph = hg.generate.rmat(scale=12, edge_factor=8, seed=3)
    with hg.Cluster(dashboard_address="127.0.0.1:0", gpus=0) as cluster:
        result = hg.sssp(graph, 0, cluster=cluster)
        settle(cluster)
        base = cluster.dashboard_link.rsplit("/", 1)[0]
        yield cluster, result, base


def test_events_carry_the_history(served):
    cluster, result, _ = served
    start, rows, end = dashboard.latest_run(cluster._cluster.scheduler)
    assert start["program"] == "ShortestPaths" and start["vertices"] == 4096
    assert start["kinds"] == {"cpu": 1} and start["max_iterations"] == 2 * 4096 + 1
    assert [r["iteration"] for r in rows] == result.history["iteration"].tolist()
    for name in ("mode", "active", "cpu_pages", "edges", "activated"):
        assert [r[name] for r in rows] == result.history[name].tolist()
    assert np.allclose([r["f"] for r in rows], result.history["f"])
    assert end == {**end, "iterations": result.iterations, "converged": True,
                   "error": None}
    title = dashboard.run_title(start, rows, end)
    assert f"{result.iterations} iteration(s), converged" in title
    assert "ShortestPaths on 4,096 vertices" in title


def test_page_and_gauges_over_http(served):
    _, result, base = served
    status, html = fetch(base + "/hetgraph")
    assert status == 200 and "bokeh" in html
    assert fetch(base + "/individual-hetgraph")[0] == 200
    from bokeh.client import pull_session
    from bokeh.models import ColumnDataSource, Div

    with pull_session(url=base + "/hetgraph") as session:  # the page's document, as a
        doc = session.document                              # browser gets it
        assert doc.title == "Dask: hetgraph"
        data = [m.data for m in doc.models if isinstance(m, ColumnDataSource) and
                "cpu_pages" in m.data][0]
        assert list(data["iteration"]) == result.history["iteration"].tolist()
        assert list(data["mode"]) == result.history["mode"].tolist()
        assert any("ShortestPaths on 4,096 vertices" in m.text for m in doc.models
                   if isinstance(m, Div))
    status, text = fetch(base + "/metrics")
    found = gauges(text)
    last = result.history.iloc[-1]
    assert found["dask_hetgraph_running"] == 0
    assert found["dask_hetgraph_iteration"] == last["iteration"]
    assert found["dask_hetgraph_active_vertices"] == last["active"]
    assert math.isclose(found["dask_hetgraph_f"], last["f"], rel_tol=1e-9)
    assert math.isnan(found["dask_hetgraph_alpha"])  # no GPU took part
    assert found['dask_hetgraph_pages{device="cpu"}'] == last["cpu_pages"]
    assert found['dask_hetgraph_pages{device="gpu"}'] == 0
    assert found['dask_hetgraph_edges{device="cpu"}'] == last["cpu_edges"]
    assert found[f'dask_hetgraph_cpu_mode{{mode="{last["mode"]}"}}'] == 1
    assert sum(v for k, v in found.items() if "cpu_mode" in k) == 1
    assert found["dask_hetgraph_iterations_total"] >= result.iterations


def test_gauges_follow_the_newest_run(served):
    cluster, _, base = served
    ranks = hg.pagerank(hg.generate.grid(20, 20), cluster=cluster, tol=None,
                        max_iterations=7)
    settle(cluster)
    found = gauges(fetch(base + "/metrics")[1])
    assert found["dask_hetgraph_iteration"] == 7 == ranks.iterations
    assert found['dask_hetgraph_cpu_mode{mode="pull"}'] == 1


def test_page_document_holds_the_rows(served):
    from bokeh.document import Document
    from bokeh.models import ColumnDataSource, Div

    cluster, _, _ = served
    result = hg.bfs(hg.generate.grid(15, 15), 0, cluster=cluster)
    settle(cluster)
    doc = Document()
    dashboard.hetgraph_doc(cluster._cluster.scheduler, {}, doc)
    sources = [m for m in doc.models if isinstance(m, ColumnDataSource) and
               "cpu_pages" in m.data]
    assert sources and sources[0].data["iteration"] == result.history["iteration"].tolist()
    assert sources[0].data["mode"] == result.history["mode"].tolist()
    titles = [m.text for m in doc.models if isinstance(m, Div)]
    assert any("BreadthFirst on 225 vertices" in t and "converged" in t for t in titles)


def test_failed_run_is_reported(served):
    cluster, _, base = served

    from hetgraph.algorithms.pagerank import PageRank

    class Broken(PageRank):
        calls = 0

        def iteration_constant(self, graph, values):
            Broken.calls += 1
            if Broken.calls == 3:
                raise RuntimeError("boom in iteration 3")
            return super().iteration_constant(graph, values)

    with pytest.raises(RuntimeError, match="boom"):
        hg.run(Broken(0.85, None), hg.generate.grid(6, 6), cluster=cluster, devices="cpu",
               max_iterations=10, partitions=1)
    settle(cluster)
    start, rows, end = dashboard.latest_run(cluster._cluster.scheduler)
    assert start["program"] == "Broken" and "boom in iteration 3" in end["error"]
    assert "failed: RuntimeError: boom" in dashboard.run_title(start, rows, end)
    assert gauges(fetch(base + "/metrics")[1])["dask_hetgraph_running"] == 0


def test_no_run_yet():
    class Empty:
        def get_events(self, topic):
            return ()

    assert dashboard.latest_run(Empty()) == (None, [], None)
    assert dashboard.run_title(None, [], None) == "hetgraph: no run yet"


def test_install_is_idempotent():
    from distributed.dashboard.scheduler import applications
    from distributed.http.scheduler.prometheus import core

    assert dashboard.install() == (True, True) == dashboard.install()
    assert applications["/hetgraph"] is dashboard.hetgraph_doc
    assert sum(c.__name__ == "HetGraphCollector" for c in core.COLLECTORS) == 1


@pytest.mark.skipif(not __import__("browser").CHROMIUM, reason="chromium is not installed")
def test_page_renders_in_chromium(served, tmp_path):
    import browser

    cluster, _, base = served
    result = hg.sssp(hg.generate.rmat(scale=13, edge_factor=8, seed=5), 0, cluster=cluster)
    settle(cluster)
    title = dashboard.run_title(*dashboard.latest_run(cluster._cluster.scheduler))
    last_mode = result.history["mode"].iloc[-1]
    text, png = browser.render(base + "/hetgraph", (title, last_mode))
    assert title in text and last_mode in text  # the title line and the table
    (tmp_path / "page.png").write_bytes(png)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 30_000  # drawn, not blank
    assert result.converged


@pytest.mark.gpu
def test_gauges_of_a_hybrid_run():
    """On a GPU machine: a hybrid run's page split, alpha and GPU seconds reach the page
    and the gauges."""
    from bokeh.client import pull_session
    from bokeh.models import ColumnDataSource

    graph = hg.generate.rmat(scale=15, edge_factor=16, seed=1)
    with hg.Cluster(dashboard_address="127.0.0.1:0") as cluster:
        base = cluster.dashboard_link.rsplit("/", 1)[0]
        result = hg.pagerank(graph, cluster=cluster, devices="hybrid", tol=None,
                             max_iterations=5, page_bytes=64 << 10)
        settle(cluster)
        last = result.history.iloc[-1]
        assert last["placement"] == "hybrid" and last["gpu_pages"] > 0
        found = gauges(fetch(base + "/metrics")[1])
        assert found['dask_hetgraph_pages{device="gpu"}'] == last["gpu_pages"]
        assert found['dask_hetgraph_pages{device="cpu"}'] == last["cpu_pages"]
        assert math.isclose(found["dask_hetgraph_alpha"], last["alpha"], rel_tol=1e-9)
        assert math.isclose(found['dask_hetgraph_page_seconds{device="gpu"}'],
                            last["gpu_seconds"], rel_tol=1e-9)
        with pull_session(url=base + "/hetgraph") as session:
            data = [m.data for m in session.document.models
                    if isinstance(m, ColumnDataSource) and "gpu_pages" in m.data][0]
            assert list(data["gpu_pages"]) == result.history["gpu_pages"].tolist()
            assert list(data["placement"]) == ["hybrid"] * 5


# --- the progress bar -------------------------------------------------------------------------

ROW = dict(iteration=3, alpha=float("nan"), f=0.0412, mode="notify-pull", cpu_pages=2,
           gpu_pages=5)


def test_bar_waits_for_its_delay_then_draws():
    stream = io.StringIO()
    bar = progress.ProgressBar("SSSP", 10, stream=stream, delay=3600)
    bar.update([history_row(**ROW)])
    bar.close(3, True)
    assert stream.getvalue() == ""  # a short run shows nothing
    bar = progress.ProgressBar("SSSP", 10, stream=stream, delay=0, interval=0)
    bar.update([history_row(**ROW)])
    line = stream.getvalue()
    assert line.startswith("\rSSSP 3/10 [######..............] alpha - f 0.0412 "
                           "notify-pull pages cpu 2 gpu 5")
    bar.update([history_row(**{**ROW, "iteration": 10, "alpha": 1.5})])
    assert "10/10 [####################] alpha 1.5" in stream.getvalue()
    bar.close(10, False)
    last = stream.getvalue().split("\r")[-1]
    assert last.startswith("SSSP: 10 iterations, stopped, 0.0 s   ") and last.endswith("\n")
    assert len(last) == len(stream.getvalue().split("\r")[-2]) + 1  # covers the bar


def test_bar_shown_only_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert progress.show_progress(None, Tty()) is True
    assert progress.show_progress(None, io.StringIO()) is False
    assert progress.show_progress(False, Tty()) is False
    assert progress.show_progress(True, io.StringIO()) is True


def test_run_draws_its_bar(monkeypatch, capsys):
    monkeypatch.setattr(dispatcher, "ProgressBar",
                        lambda name, total: progress.ProgressBar(name, total, delay=0,
                                                                 interval=0))
    result = hg.pagerank(hg.generate.grid(10, 10), tol=None, max_iterations=6,
                         progress=True, devices="cpu")
    err = capsys.readouterr().err
    assert "\rPageRank 6/6 [####################]" in err
    assert "pages cpu 1 gpu 0" in err
    assert "PageRank: 6 iterations, stopped" in err and result.iterations == 6
    hg.pagerank(hg.generate.grid(10, 10), tol=None, max_iterations=6, progress=False)
    assert capsys.readouterr().err == ""


def test_events_never_stop_a_run():
    def closed(message):
        raise RuntimeError("client closed")

    run_events = progress.RunEvents(closed, "r1", program="P")
    run_events.rows([history_row(iteration=1)])
    run_events.end(1, True)  # nothing raised


def test_scheduler_log_keeps_the_order(served):
    cluster, _, _ = served
    post = progress.SchedulerLog.of(cluster.client)
    assert progress.SchedulerLog.of(cluster.client) is post  # one order per client
    for i in range(30):
        post({"run": "order", "event": "iterations", "i": i})

    def arrived():
        got = [m["i"] for _, m in cluster.client.get_events(events.TOPIC)
               if m.get("run") == "order"]
        return got if len(got) == 30 else None

    assert eventually(arrived) == list(range(30))


def test_a_scheduler_log_error_is_logged_not_raised(served, caplog):
    cluster, _, _ = served

    class Refusing:  # (the client's pool of connections to its scheduler)
        async def connect(self, address):
            raise OSError("scheduler gone")

    scheduler = types.SimpleNamespace(address="tcp://127.0.0.1:1", pool=Refusing(),
                                      serializers=None, deserializers=None)
    client = types.SimpleNamespace(loop=cluster.client.loop, scheduler=scheduler,
                                   status="running")

    def not_sent():
        return " ".join(r.getMessage() for r in caplog.records
                        if "not sent: scheduler gone" in r.getMessage())

    with caplog.at_level("DEBUG", logger="hetgraph.progress"):
        post = progress.SchedulerLog(client)
        post({"run": "x", "event": "start"})
        post({"run": "x", "event": "end"})
        assert "end" in eventually(not_sent)
    assert "start" in not_sent()
    client.status = "closed"  # the sender stops with its client
    assert eventually(lambda: not post._sender.is_running())


def test_log_columns_hide_what_a_log_axis_cannot_show():
    data = dashboard._columns([{**ROW, "iteration": 1, "alpha": float("nan"), "f": 0.0},
                               {**ROW, "iteration": 2, "alpha": 2.5, "f": 1e-7}])
    assert data["iteration"] == [1, 2] and data["f"] == [0.0, 1e-7]
    assert math.isnan(data["log_alpha"][0]) and math.isnan(data["log_f"][0])
    assert data["log_alpha"][1] == 2.5 and data["log_f"][1] == 1e-7


class Recorder:
    def __init__(self):
        self.messages = []

    def __call__(self, message):
        self.messages.append(message)


def test_rows_are_sent_in_batches():
    client = Recorder()
    run_events = progress.RunEvents(client, "r1", interval=3600, program="P")
    for i in range(1, 101):
        run_events.rows([history_row(iteration=i, f=np.float64(0.5))])
    assert [m["event"] for m in client.messages] == ["start"]  # held back
    run_events.end(100, False)
    assert [m["event"] for m in client.messages] == ["start", "iterations", "end"]
    assert isinstance(client.messages[1]["rows_msgpack"], bytes)  # one object for Dask
    assert client.messages[1]["count"] == 100
    rows = events.message_rows(client.messages[1])
    assert [r["iteration"] for r in rows] == list(range(1, 101)) and rows[0]["f"] == 0.5


def test_rows_are_sent_once_the_interval_passed():
    client = Recorder()
    run_events = progress.RunEvents(client, "r1", interval=0, program="P")
    run_events.rows([history_row(iteration=1), history_row(iteration=2)])
    run_events.rows([history_row(iteration=3)])
    run_events.end(3, True)
    assert [m["event"] for m in client.messages] == ["start", "iterations", "iterations",
                                                     "end"]
    assert [[row["iteration"] for row in events.message_rows(m)]
            for m in client.messages[1:3]] == [[1, 2], [3]]
