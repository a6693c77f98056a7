"""Every socket a hetgraph cluster listens on is on loopback unless the user names an
interface: whoever reaches a Dask scheduler's, nanny's or worker's port can run code as
this user. Lists the listening sockets of this process and its children (psutil) for
``hg.Cluster(processes=True)``, the in-process ``hg.Cluster()``, the embedded cluster
of runs given none, and ``hetgraph cluster`` in a subprocess."""

import ipaddress
import os
import signal
import socket
import subprocess
import sys

import psutil
import pytest

import hetgraph as hg
from hetgraph import cli
from hetgraph.cluster import ClusterError, close_embedded_cluster, embedded_cluster
from hetgraph.errors import HetGraphError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def listening(process) -> set:
    """{(pid, address, port)} of the TCP sockets ``process`` and its descendants
    listen on."""
    found = set()
    for p in [process] + process.children(recursive=True):
        try:
            connections = getattr(p, "net_connections", None) or p.connections
            found |= {(p.pid, c.laddr.ip, c.laddr.port) for c in connections(kind="inet")
                      if c.status == psutil.CONN_LISTEN}
        except psutil.NoSuchProcess:  # a helper process that just ended
            pass
    return found


def exposed(sockets) -> list:
    """The sockets of ``sockets`` that listen beyond loopback (0.0.0.0 and :: too)."""
    return sorted(s for s in sockets if not ipaddress.ip_address(s[1]).is_loopback)


def opened_by(start):
    """The listening sockets of this process and its children that appear while the
    cluster ``start()`` returns is up (it is closed after)."""
    me = psutil.Process()
    before = listening(me)
    with start():
        return listening(me) - before


def test_worker_processes_listen_on_loopback_only():
    opened = opened_by(lambda: hg.Cluster(processes=True, gpus=0,
                                          dashboard_address="127.0.0.1:0"))
    # scheduler, its dashboard, the nanny (here); the worker's port and HTTP (child)
    assert len(opened) >= 5 and len({pid for pid, _, _ in opened}) >= 2, opened
    assert exposed(opened) == []


def test_in_process_cluster_listens_on_loopback_only():
    opened = opened_by(lambda: hg.Cluster(dashboard_address="127.0.0.1:0"))
    assert len(opened) >= 2, opened  # the dashboard and each worker's HTTP server
    assert exposed(opened) == []


def test_embedded_cluster_listens_on_loopback_only():
    close_embedded_cluster()
    me = psutil.Process()
    before = listening(me)
    embedded_cluster()  # what a run given no cluster starts
    opened = listening(me) - before
    assert len(opened) >= 2, opened  # the scheduler's /metrics and a worker's HTTP
    assert exposed(opened) == []


def test_cli_cluster_listens_on_loopback_only():
    process = subprocess.Popen([sys.executable, "-m", "hetgraph", "cluster", "--dashboard",
                                "127.0.0.1:0"], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        lines = [process.stdout.readline() for _ in range(3)]
        assert "workers: 1 CPU" in lines[2], lines
        sockets = listening(psutil.Process(process.pid))
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    assert len(sockets) >= 5 and len({pid for pid, _, _ in sockets}) >= 2, sockets
    assert exposed(sockets) == []
    assert process.returncode == 0 and "cluster stopped" in out, err


def _bindable(address):
    with socket.socket() as probe:
        try:
            probe.bind((address, 0))
        except OSError:
            return False
    return True


@pytest.mark.skipif(not _bindable("127.0.0.2"), reason="127.0.0.2 is not a local address")
def test_a_named_host_is_where_the_cluster_listens():
    """Another loopback address stands for a named interface (a test opens nothing to a
    network): everything but the dashboard, which dashboard_address names, listens
    there."""
    opened = opened_by(lambda: hg.Cluster(processes=True, gpus=0, host="127.0.0.2",
                                          dashboard_address="127.0.0.1:0"))
    assert len(opened) >= 5, opened
    assert [address for _, address, _ in opened if address != "127.0.0.2"] == ["127.0.0.1"]


@pytest.mark.parametrize("host", ["", "tcp://0.0.0.0", None, 8786])
def test_host_must_name_an_address(host):
    with pytest.raises(ClusterError, match="must be an address to listen on"):
        hg.Cluster(host=host)


def test_cli_cluster_passes_its_host(monkeypatch):
    seen = {}

    def recording(**options):
        seen.update(options)
        raise HetGraphError("stopped before starting")

    monkeypatch.setattr("hetgraph.cluster.Cluster", recording)
    assert cli.main(["cluster"]) == 1 and seen["host"] == "127.0.0.1"
    assert cli.main(["cluster", "--host", "0.0.0.0"]) == 1 and seen["host"] == "0.0.0.0"
