"""What any client can post under the run events' topic is untrusted data: a pickle is
never unpickled (by /metrics, the hetgraph page or :func:`message_rows`), malformed
events are left out without breaking either, and every text the page shows is escaped
(a failed run's error holds file paths, which may hold HTML)."""

import html
import pickle
import urllib.request

import numpy as np
import pytest

import hetgraph as hg
from hetgraph import dashboard
from hetgraph.result import HISTORY_COLUMNS, history_row
from hetgraph import events

pytest.importorskip("bokeh")
pytest.importorskip("prometheus_client")

HOSTILE = "<img src=x onerror=alert(1)>"


class Touch:
    """Creates ``path`` when unpickled."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


def get(url):
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.status, response.read().decode()


def page_titles(scheduler):
    """The Div texts of the hetgraph page's document for ``scheduler``."""
    from bokeh.document import Document
    from bokeh.models import Div

    doc = Document()
    dashboard.hetgraph_doc(scheduler, {}, doc)
    return [m.text for m in doc.models if isinstance(m, Div)]


@pytest.fixture(scope="module")
def served():
    """An in-process CPU cluster with its dashboard on a free localhost port."""
    with hg.Cluster(dashboard_address="127.0.0.1:0", gpus=0) as cluster:
        yield cluster, cluster.dashboard_link.rsplit("/", 1)[0]


def settled(cluster):
    """Wait until the run events queued by ``cluster``'s client reached the scheduler: a
    local one logs them before it answers a read of its events, on the client's loop
    (this test then reads the scheduler from its own thread)."""
    cluster.client.get_events(events.TOPIC)


def test_posted_pickles_are_never_unpickled(served, tmp_path):
    cluster, base = served
    touched = [tmp_path / f"touched-{i}" for i in range(3)]
    start = {"run": "evil", "event": "start", "program": "P", "vertices": 1, "arcs": 0,
             "devices": "cpu", "kinds": {"cpu": 1}, "max_iterations": 1, "first": 1}
    for message in (start,
                    {"run": "evil", "event": "iterations", "count": 1,
                     "rows_pickle": pickle.dumps([Touch(touched[0])])},
                    {"run": "evil", "event": "iterations", "count": 1,
                     "rows_msgpack": pickle.dumps([Touch(touched[1])])},
                    {"run": "evil", "event": "iterations", "count": 1,
                     "rows": pickle.dumps([Touch(touched[2])])},
                    {"run": "evil", "event": "end", "iterations": 1, "converged": True,
                     "error": None}):
        cluster.client.log_event(events.TOPIC, message)
    status, metrics = get(base + "/metrics")
    assert status == 200 and "\ndask_hetgraph_running 0.0\n" in metrics
    assert "dask_hetgraph_iteration " not in metrics  # no rows were read
    assert get(base + "/hetgraph")[0] == 200
    titles = page_titles(cluster._cluster.scheduler)
    assert any("P on 1 vertices" in t and "0 iteration(s), converged" in t for t in titles)
    evil = [m for _, m in cluster.client.get_events(events.TOPIC)
            if isinstance(m, dict) and m.get("run") == "evil" and m["event"] == "iterations"]
    assert len(evil) == 3 and [events.message_rows(m) for m in evil] == [[], [], []]
    assert not any(path.exists() for path in touched)


def test_malformed_events_are_left_out(served):
    cluster, base = served
    result = hg.bfs(hg.generate.grid(5, 5), 0, cluster=cluster)
    settled(cluster)
    run = dashboard.latest_run(cluster._cluster.scheduler)[0]["run"]
    for message in ("a string", ["a", "list"], {"event": ["unhashable"]},
                    {"event": "start", "run": "bad", "program": "P", "vertices": "many",
                     "arcs": 0, "devices": "cpu", "kinds": {"cpu": 1},
                     "max_iterations": 1},
                    {"event": "start", "run": "bad", "program": "P", "vertices": 1,
                     "arcs": 0, "devices": "cpu", "kinds": {"cpu": "one"},
                     "max_iterations": 1},
                    {"event": "iterations", "run": run, "count": "3",
                     "rows_msgpack": b""},
                    {"event": "iterations", "run": run, "count": 1,
                     "rows_msgpack": events.encode_rows([("x",) * 3])},
                    {"event": "end", "run": run, "iterations": 1, "converged": "no",
                     "error": None}):
        cluster.client.log_event(events.TOPIC, message)
    start, rows, end = dashboard.latest_run(cluster._cluster.scheduler)
    assert start["run"] == run and len(rows) == result.iterations and end["converged"]
    status, metrics = get(base + "/metrics")
    assert status == 200
    assert f"\ndask_hetgraph_iteration {float(result.iterations)}\n" in metrics


def test_rows_travel_as_msgpack_of_plain_values():
    rows = [history_row(iteration=np.int64(3), f=np.float64(0.5), mode="pull",
                        placement="cpu", active=np.int32(7))]
    data = events.encode_rows(rows)
    (decoded,) = events.decode_rows(data)
    expected = tuple(v.item() if isinstance(v, np.generic) else v for v in rows[0])
    assert decoded[:-1] == expected[:-1] and np.isnan(decoded[-1])  # priority: NaN
    assert [type(v) for v in decoded] == [type(v) for v in expected]
    for bad in (pickle.dumps(rows), b"\xc1", "text", None, events.encode_rows({"a": 1}),
                events.encode_rows([(1, 2)]),
                events.encode_rows([("cpu",) * len(HISTORY_COLUMNS)])):
        with pytest.raises(ValueError):
            events.decode_rows(bad)


def test_a_hostile_error_text_is_shown_escaped(served, tmp_path):
    """A failed run whose error names a directory called like an HTML tag: the page's
    title shows it as text."""
    cluster, _ = served
    from hetgraph.algorithms.pagerank import PageRank

    class Broken(PageRank):
        def iteration_constant(self, graph, values):
            raise OSError(f"cannot read {tmp_path}/{HOSTILE}/g.txt")

    with pytest.raises(OSError, match="cannot read"):
        hg.run(Broken(0.85, None), hg.generate.grid(4, 4), cluster=cluster, devices="cpu",
               max_iterations=3, partitions=1)
    settled(cluster)
    scheduler = cluster._cluster.scheduler
    title = dashboard.run_title(*dashboard.latest_run(scheduler))
    assert HOSTILE in title  # the text itself is kept; only the page escapes it
    shown = [t for t in page_titles(scheduler) if "Broken" in t]
    assert shown and "<" not in shown[0] and ">" not in shown[0]
    assert html.unescape(shown[0]) == title  # read as HTML it is the title's text


def test_a_hostile_program_name_is_shown_escaped():
    class Events:
        def get_events(self, topic):
            return [(0, {"run": "r", "event": "start", "program": "<script>x()</script>",
                         "vertices": 1, "arcs": 0, "devices": "<b>cpu</b>",
                         "kinds": {"<i>cpu</i>": 1}, "max_iterations": 1}),
                    (1, {"run": "r", "event": "end", "iterations": 0, "converged": False,
                         "error": "E: </div><img src=x onerror=alert(1)>"})]

    shown = page_titles(Events())
    assert len(shown) == 1 and "<" not in shown[0]
    assert "&lt;script&gt;x()&lt;/script&gt;" in shown[0]
    assert "&lt;/div&gt;&lt;img src=x onerror=alert(1)&gt;" in shown[0]
