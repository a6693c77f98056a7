"""scheduler/datagrams.py: the exchange's words between the worker processes of one host
over Unix datagram sockets (here two "workers" of this process, each listening)."""

import os
import queue
import socket
import stat

import numpy as np
import pytest

from hetgraph.scheduler import datagrams


@pytest.fixture
def mailboxes(socket_dir):
    """Two listening addresses in ``socket_dir``; their deliveries in queues."""
    boxes = {}
    for address in ("tcp://127.0.0.1:1001", "tcp://127.0.0.1:1002"):
        boxes[address] = queue.Queue()
        assert datagrams.listen(str(socket_dir), address,
                                lambda *message, q=boxes[address]: q.put(message))
    yield boxes
    for address in boxes:
        datagrams.close(address)


def test_a_message_reaches_each_peer_as_sent(socket_dir, mailboxes):
    peers = list(mailboxes)
    payload = {"shared": {"path": "/dev/shm/x", "write": 7}, "peer": [b"\x00\x01" * 32],
               "info": [np.int64(5), 12, 0.25, np.bool_(True)]}
    assert datagrams.send(str(socket_dir), peers, ("run", "from-0-try0"), (3,), 1,
                          payload) == []
    for address in peers:
        channel, tag, sender, got = mailboxes[address].get(timeout=5)
        assert (channel, tag, sender) == (["run", "from-0-try0"], [3], 1)
        assert got == {**payload, "info": [5, 12, 0.25, True]}


def test_each_socket_is_its_users_alone_and_goes_with_its_worker(socket_dir, mailboxes):
    path = datagrams.path_of(str(socket_dir), "tcp://127.0.0.1:1001")
    assert stat.S_ISSOCK(os.stat(path).st_mode)
    assert stat.S_IMODE(os.stat(path).st_mode) & 0o077 == 0
    datagrams.close("tcp://127.0.0.1:1001")
    assert not os.path.exists(path) and not datagrams.listens("tcp://127.0.0.1:1001")


def test_a_peer_without_a_socket_is_sent_another_way(socket_dir, mailboxes):
    elsewhere = datagrams.send(str(socket_dir), ["tcp://127.0.0.1:1001", "tcp://10.0.0.9:7"],
                               ("c",), (0,), 0, None)
    assert elsewhere == ["tcp://10.0.0.9:7"]
    assert mailboxes["tcp://127.0.0.1:1001"].get(timeout=5)[3] is None


def test_a_socket_nobody_reads_is_a_peer_gone(socket_dir):
    """A process that died leaves its socket file behind, bound by nobody: refused."""
    path = datagrams.path_of(str(socket_dir), "tcp://127.0.0.1:1003")
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    dead.bind(path)
    dead.close()
    with pytest.raises(datagrams.Unreachable, match="1003"):
        datagrams.send(str(socket_dir), ["tcp://127.0.0.1:1003"], ("c",), (0,), 0, None)


def test_what_does_not_unpack_is_dropped_and_what_cannot_pack_is_refused(socket_dir,
                                                                          mailboxes):
    address = "tcp://127.0.0.1:1002"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as stranger:
        stranger.sendto(b"\xc1 not msgpack", datagrams.path_of(str(socket_dir), address))
    datagrams.send(str(socket_dir), [address], ("c",), (1,), 0, "after")
    assert mailboxes[address].get(timeout=5)[3] == "after"  # (the stranger's: dropped)
    with pytest.raises(TypeError, match="ndarray"):
        datagrams.send(str(socket_dir), [address], ("c",), (2,), 0, np.zeros(3))
    with pytest.raises(ValueError, match="larger"):
        datagrams.send(str(socket_dir), [address], ("c",), (2,), 0, b"x" * (1 << 17))


def test_no_directory_no_listening(socket_dir):
    assert not datagrams.listen(str(socket_dir / "missing"), "tcp://127.0.0.1:1004", print)
    assert not datagrams.listen("", "tcp://127.0.0.1:1004", print)
    long = socket_dir / ("d" * 100)  # (a socket's path holds 107 bytes at most)
    long.mkdir()
    assert not datagrams.listen(str(long), "tcp://127.0.0.1:1004", print)
    # (nor can a message go there: the peer is sent another way, no OSError)
    assert datagrams.send(str(long), ["tcp://127.0.0.1:1004"], ("c",), (0,), 0,
                          None) == ["tcp://127.0.0.1:1004"]


def test_sockets_of_killed_processes_are_swept_live_ones_kept(socket_dir, mailboxes):
    """A worker starting to listen removes the sockets no process reads (a killed
    worker's), not the live ones, whose readers drop the probe."""
    dead = datagrams.path_of(str(socket_dir), "tcp://127.0.0.1:1005")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(dead)
    sock.close()
    other = socket_dir / "not-ours"
    other.write_text("")
    assert datagrams.listen(str(socket_dir), "tcp://127.0.0.1:1006", print)
    try:
        assert not os.path.exists(dead) and other.exists()
        live = "tcp://127.0.0.1:1001"
        assert os.path.exists(datagrams.path_of(str(socket_dir), live))
        datagrams.send(str(socket_dir), [live], ("c",), (9,), 0, "still here")
        assert mailboxes[live].get(timeout=5)[3] == "still here"
    finally:
        datagrams.close("tcp://127.0.0.1:1006")
