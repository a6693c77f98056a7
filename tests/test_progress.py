"""Run events from a cluster joined by address (hetgraph.scheduler.progress): what is
queued goes to the scheduler in one round trip, in order, not one a message. The
events' content and the dashboard are tested in tests/test_dashboard.py."""

import numpy as np
import pytest

import hetgraph as hg
from hetgraph import events, tuning

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _count_log_events(monkeypatch):
    """[messages of op log_event this process writes, those that ask for an answer]."""
    from distributed.comm import tcp

    counts = [0, 0]
    original = tcp.TCP.write

    async def write(self, msg, *args, **kwargs):
        for one in msg if isinstance(msg, (list, tuple)) else [msg]:
            if isinstance(one, dict) and one.get("op") == "log_event":
                counts[0] += 1
                counts[1] += bool(one.get("reply", True))
        return await original(self, msg, *args, **kwargs)

    monkeypatch.setattr(tcp.TCP, "write", write)
    return counts


def test_a_joined_clusters_events_go_in_one_round_trip(monkeypatch):
    from distributed import LocalCluster

    monkeypatch.setattr(tuning, "EVENT_SEND_PERIOD", 3600.0)  # (all sent by the end's flush)
    monkeypatch.setattr(tuning, "EVENT_INTERVAL", 0.0)  # (a message each segment's rows)
    monkeypatch.setattr(tuning, "SEGMENT_SECONDS", 0.0)  # (a segment an iteration)
    graph = hg.generate.rmat(10, edge_factor=8, seed=5)
    counts = _count_log_events(monkeypatch)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp://",
                      resources={"CPU": 1}, dashboard_address=None) as dask_cluster:
        with hg.Cluster(address=dask_cluster.scheduler_address) as cluster:
            assert not cluster.in_process
            result = hg.pagerank(graph, tol=None, max_iterations=5, cluster=cluster,
                                 devices="cpu")
            got = [m for _, m in cluster.client.get_events(events.TOPIC)]
    assert [m["event"] for m in got][0] == "start" and got[-1]["event"] == "end"
    rows = [row for m in got if m["event"] == "iterations" for row in events.message_rows(m)]
    assert [row["iteration"] for row in rows] == list(range(1, 6))  # all, in order
    assert [row["seconds"] for row in rows] == result.history["seconds"].tolist()
    assert counts[0] == len(got) > 3  # (start, several of rows, end)
    assert counts[1] == 1  # one answer, to the last: one round trip
    np.testing.assert_allclose(result.values, hg.pagerank(graph, tol=None,
                                                          max_iterations=5).values)



def test_a_local_schedulers_events_are_there_for_a_read_without_a_wake(monkeypatch):
    """A scheduler in this process logs the queued events before it answers a read of
    them: a read right after a run sees its end, though no periodic send came, and a
    flush hands nothing to the client's loop (no wake-up)."""
    from hetgraph.scheduler import progress

    monkeypatch.setattr(tuning, "EVENT_SEND_PERIOD", 3600.0)  # (no periodic send)
    graph = hg.generate.rmat(8, edge_factor=4, seed=3)
    with hg.Cluster(cpu_workers=1, gpus=0, dashboard_address=None) as cluster:
        post = progress.SchedulerLog.of(cluster.client)
        post({"run": "first", "event": "marker"})  # (starts the sender and the reads' hook)
        assert cluster.client.get_events(events.TOPIC)[-1][1]["run"] == "first"
        loop, handed = cluster.client.loop, []
        with monkeypatch.context() as patch:
            patch.setattr(loop, "add_callback", lambda *a, **k: handed.append(a))
            post({"run": "second", "event": "marker"})
            post.flush()
        assert handed == []
        result = hg.bfs(graph, 0, devices="cpu", cluster=cluster)
        got = [m for _, m in cluster.client.get_events(events.TOPIC)]
    assert [m["run"] for m in got[:2]] == ["first", "second"]
    assert got[2]["event"] == "start" and got[-1]["event"] == "end"
    assert got[-1]["run"] == got[2]["run"] and got[-1]["iterations"] == result.iterations
