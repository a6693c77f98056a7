"""The README's figures, from real runs.

    python docs/figures.py run runs.json    # on a GPU machine: SSSP (devices="auto") and
                                            # PageRank (devices="hybrid") on RMAT-22,
                                            # their history and dashboard events -> JSON
    python docs/figures.py draw runs.json   # here: docs/timeline-*.png with Result.plot's
                                            # code, and docs/dashboard.png: the events
                                            # replayed into a local scheduler, its
                                            # hetgraph page shot in headless Chromium

Needs matplotlib and chromium for ``draw`` (apt install chromium).
"""

from __future__ import annotations

import json
import os
import sys

import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
RUNS = (("sssp-auto", "sssp", {"devices": "auto"}),
        ("pagerank-hybrid", "pagerank", {"devices": "hybrid", "tol": None,
                                         "max_iterations": 12}))


def _readable(message):
    """A run event with its history rows as a list (JSON can hold it)."""
    from hetgraph.events import message_rows

    if message["event"] != "iterations":
        return message
    readable = {k: v for k, v in message.items() if k != "rows_msgpack"}
    return readable | {"rows": message_rows(message)}


def _loggable(message):
    """The run event :func:`_readable` read, as a run logs it."""
    from hetgraph.result import history_row
    from hetgraph.events import encode_rows

    if message["event"] != "iterations":
        return message
    loggable = {k: v for k, v in message.items() if k != "rows"}
    return loggable | {"count": len(message["rows"]),
                       "rows_msgpack": encode_rows([history_row(**row) for row in message["rows"]])}


def run(path, scale=22):
    sys.path.insert(0, os.path.join(HERE, "..", "bench"))
    import hetgraph as hg
    from hetgraph.kernels.gpu import device as gpu
    from machine import describe

    ok, device = gpu.availability()
    if not ok:
        sys.exit(f"docs/figures.py run needs a GPU: {device}")
    graph = hg.generate.rmat(scale, seed=1, weights=(1.0, 9.0))
    out = {"machine": describe() | {"gpu": device}, "graph": graph.summary(), "runs": []}
    with hg.Cluster() as cluster:
        for name, algorithm, options in RUNS:
            args = (graph, 0) if algorithm == "sssp" else (graph,)
            getattr(hg, algorithm)(*args, cluster=cluster, **options)  # compiled, warm
            result = getattr(hg, algorithm)(*args, cluster=cluster, **options)
            events = [m for _, m in cluster.client.get_events("hetgraph")]
            start = max(i for i, m in enumerate(events) if m["event"] == "start")
            out["runs"].append({"name": name, "title": repr(result)[len("<hetgraph.Result "):-1],
                                "history": result.history.to_dict("list"),
                                "events": [_readable(m) for m in events[start:]]})
            print(result, result.history[["placement", "mode", "alpha", "cpu_pages",
                                          "gpu_pages", "seconds"]].to_string(), sep="\n")
    with open(path, "w") as f:
        json.dump(out, f, indent=1, default=float)


def draw(path):
    import hetgraph as hg
    from hetgraph.dashboard import latest_run, run_title
    from hetgraph.plot import timeline

    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    import browser

    with open(path) as f:
        saved = json.load(f)
    for entry in saved["runs"]:
        figure = timeline(pd.DataFrame(entry["history"]),
                          title=f"{entry['title']}\n{saved['machine']['gpu']}",
                          path=os.path.join(HERE, f"timeline-{entry['name']}.png"))
        print("wrote", f"timeline-{entry['name']}.png", figure)
    shown = saved["runs"][-1]
    with hg.Cluster(dashboard_address="127.0.0.1:0") as cluster:
        for message in shown["events"]:
            cluster.client.log_event("hetgraph", _loggable(message))
        scheduler = cluster._cluster.scheduler
        while latest_run(scheduler)[2] is None:  # the events arrive asynchronously
            cluster.client.run_on_scheduler(lambda: None)
        title = run_title(*latest_run(scheduler))
        _, png = browser.render(cluster.dashboard_link.rsplit("/", 1)[0] + "/hetgraph",
                                (title, "hybrid"), height=1000)
    with open(os.path.join(HERE, "dashboard.png"), "wb") as f:
        f.write(png)
    print("wrote dashboard.png:", title)


if __name__ == "__main__":
    {"run": run, "draw": draw}[sys.argv[1]](sys.argv[2])
