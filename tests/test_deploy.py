"""deploy/'s one-node recipe run for real, as deploy/README.md says: deploy/local/start.sh
starts a scheduler and two CPU worker processes, `hetgraph run bfs --scheduler` gives
NetworkX's levels, deploy/local/stop.sh leaves none of the processes behind; and the
same recipe with TLS from deploy/tls/make-certs.sh's Dask configuration."""

import contextlib
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

import hetgraph as hg
from hetgraph.cluster import ClusterError

nx = pytest.importorskip("networkx")
psutil = pytest.importorskip("psutil")
yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[1]
LOCAL = ROOT / "deploy" / "local"
HANG = 600  # seconds before a stuck recipe fails the test instead of hanging CI

needs_recipe = pytest.mark.skipif(
    shutil.which("setsid") is None or shutil.which("dask") is None,
    reason="the recipe needs util-linux's setsid and Dask's `dask` command")


def _env(tmp_path, **settings):
    """The environment of a recipe run: this checkout's hetgraph, no GPU, free ports."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, PYTHONPATH=path, PYTHON=sys.executable,
               HETGRAPH_RUN_DIR=str(tmp_path / "cluster"), HETGRAPH_GPUS="none",
               HETGRAPH_PORT="0", HETGRAPH_DASHBOARD="", HETGRAPH_CPU_WORKERS="1")
    env.pop("DASK_CONFIG", None)
    env.update(settings)
    return env


def _recorded_groups(env):
    with open(Path(env["HETGRAPH_RUN_DIR"]) / "pids") as f:
        return {int(line.split()[1]) for line in f if line.strip()}


def _processes(groups):
    """Every live process of the process groups start.sh recorded (nannies' workers too)."""
    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            if os.getpgid(process.pid) in groups:
                found.append(process)
    return found


def _alive(process):
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@contextlib.contextmanager
def _recipe(env):
    """Run start.sh; yield (its output, the processes it started); stop.sh at the end,
    then check that none of them is left."""
    started = subprocess.run([str(LOCAL / "start.sh")], env=env, capture_output=True,
                             text=True, timeout=HANG)
    processes = []
    try:
        logs = Path(env["HETGRAPH_RUN_DIR"])
        assert started.returncode == 0, started.stderr + "".join(
            p.read_text()[-2000:] for p in logs.glob("*.log"))
        groups = _recorded_groups(env)
        processes = _processes(groups)
        assert len(processes) > len(groups)  # the nannies' worker processes are found too
        yield started.stdout, processes
    finally:
        stopped = subprocess.run([str(LOCAL / "stop.sh")], env=env, capture_output=True,
                                 text=True, timeout=HANG)
        assert stopped.returncode == 0, stopped.stderr
        left = [p.pid for p in processes if _alive(p)]
        assert not left, f"processes left after stop.sh: {left}"
        assert not (Path(env["HETGRAPH_RUN_DIR"]) / "pids").exists()


def _listening(processes):
    """(ip, port) of every listening TCP socket of ``processes``."""
    sockets = []
    for process in processes:
        connections = getattr(process, "net_connections", None) or process.connections
        sockets += [c.laddr for c in connections(kind="inet")
                    if c.status == psutil.CONN_LISTEN]
    return sockets


def _dotted(tree, prefix=""):
    """{"a.b": leaf} of a nested configuration (dask.config.set replaces whole subtrees
    given as dicts)."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(_dotted(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = value
    return flat


def _address(output):
    return re.search(r"^scheduler (\S+)$", output, re.M).group(1)


def _graph_file(tmp_path):
    """A directed graph with unreachable vertices, as an edge list, and NetworkX's BFS
    levels from vertex 0."""
    graph = nx.gnm_random_graph(150, 400, seed=11, directed=True)
    path = tmp_path / "graph.txt"
    nx.write_edgelist(graph, path, data=False)
    return path, graph, nx.single_source_shortest_path_length(graph, 0)


def _check_levels(labels, values, graph, levels):
    """``values`` (per label) are NetworkX's ``levels``; unreached vertices are not."""
    got = dict(zip((int(v) for v in labels), values))
    assert set(got) == {v for v in graph if graph.degree(v)}  # the file's vertices
    reached = {v for v, x in got.items() if 0 <= x < float("inf")}
    assert reached == set(levels) and len(reached) < len(got)
    assert all(got[v] == levels[v] for v in reached)


@needs_recipe
@pytest.mark.slow
def test_local_recipe_runs_bfs_on_two_cpu_workers_and_stops(tmp_path):
    pytest.importorskip("bokeh")
    path, graph, levels = _graph_file(tmp_path)
    env = _env(tmp_path, HETGRAPH_CPU_WORKERS="2", HETGRAPH_DASHBOARD="127.0.0.1:0")
    with _recipe(env) as (output, processes):
        address = _address(output)
        assert address.startswith("tcp://127.0.0.1:")
        sockets = _listening(processes)
        # the scheduler's comm and HTTP ports and at least each worker's comm port
        assert len(sockets) >= 4 and {ip for ip, _ in sockets} == {"127.0.0.1"}
        page = re.search(r"^dashboard (http://\S+)/status", output, re.M).group(1)
        with urllib.request.urlopen(f"{page}/hetgraph", timeout=60) as response:
            assert response.status == 200  # the preload's page
        with hg.Cluster(address=address) as cluster:  # the resources hetgraph looks for
            assert len(cluster.cpu_workers) == 2 and cluster.gpu_workers == []
            workers = cluster.client.scheduler_info(n_workers=-1)["workers"].values()
            assert all(w["nthreads"] == 1 and w["resources"] == {"CPU": 1} for w in workers)
        out = tmp_path / "levels.csv"
        run = subprocess.run([sys.executable, "-m", "hetgraph", "run", "bfs", str(path),
                              "--source", "0", "--scheduler", address, "--out", str(out),
                              "--top", "0"], env=env, capture_output=True, text=True,
                             timeout=HANG)
        assert run.returncode == 0, run.stderr
        import pandas as pd

        frame = pd.read_csv(out)
        _check_levels(frame["vertex"], frame["value"], graph, levels)


def test_tls_address_without_tls_settings_is_a_clear_error():
    with pytest.raises(ClusterError, match="needs the client's TLS certificates"):
        hg.Cluster(address="tls://127.0.0.1:9")


@needs_recipe
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("openssl") is None, reason="make-certs.sh needs openssl")
def test_local_recipe_with_tls_runs_bfs(tmp_path):
    import dask

    tls = tmp_path / "tls"
    made = subprocess.run([str(ROOT / "deploy" / "tls" / "make-certs.sh"), str(tls)],
                          capture_output=True, text=True, timeout=HANG)
    assert made.returncode == 0, made.stderr
    assert oct((tls / "ca-key.pem").stat().st_mode & 0o777) == "0o600"
    path, graph, levels = _graph_file(tmp_path)
    env = _env(tmp_path, HETGRAPH_TLS_DIR=str(tls))
    with _recipe(env) as (output, processes):
        address = _address(output)
        assert address.startswith("tls://127.0.0.1:")
        assert {ip for ip, _ in _listening(processes)} == {"127.0.0.1"}
        with pytest.raises(ClusterError):  # plain TCP is refused
            hg.Cluster(address=address.replace("tls://", "tcp://"))
        with open(tls / "dask.yaml") as f:
            settings = _dotted(yaml.safe_load(f))
        with dask.config.set(settings), hg.Cluster(address=address) as cluster:
            result = hg.bfs(hg.read(str(path)), 0, cluster=cluster)
        _check_levels(result.labels, result.values, graph, levels)
