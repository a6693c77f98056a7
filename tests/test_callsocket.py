"""scheduler/callsocket.py: the client's calls to the worker processes of its host over
Unix stream sockets (here a "worker" of this process listening, then a cluster's)."""

import os
import pickle
import socket
import stat
import struct
import sys
import threading

import cloudpickle
import numpy as np
import pytest

import hetgraph as hg
from hetgraph.scheduler import callsocket, calls

ADDRESS = "tcp://127.0.0.1:2001"
SECRET = b"s" * 32
_DIRECT = calls._called_directly

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # (run on the workers)


class _Client:
    """Stands for a Dask client: the key of its connections."""


class _Marks:
    """Unpickled, it creates the file at ``path``: what a frame must not get to do
    before its connection proved its client's."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


@pytest.fixture
def listening(socket_dir):
    """A socket in ``socket_dir`` answering each frame with its unpickled value doubled;
    a client that trusts it."""
    assert callsocket.listen(str(socket_dir), ADDRESS, SECRET,
                             lambda frame: callsocket.dumps(2 * callsocket.loads(frame)))
    client = _Client()
    callsocket.trust(client, str(socket_dir), SECRET)
    yield client
    callsocket.close(ADDRESS)


def _answers(client, values):
    connections = [callsocket.connect(client, ADDRESS) for _ in values]
    assert all(connections)
    got = {}
    callsocket.call_all(connections, [callsocket.dumps(v) for v in values],
                        lambda i, frame: got.update({i: callsocket.loads(frame)}))
    return [got[i] for i in range(len(values))]


def test_each_call_gets_its_own_answer_small_or_large(listening):
    large = np.arange(1 << 17, dtype=np.float64)  # (more than the socket buffer holds)
    small, big = _answers(listening, [21, large])
    assert small == 42
    np.testing.assert_array_equal(big, 2 * large)


def test_one_call_alone_gets_its_answer(listening):
    """(One connection: its answer read without a selector.)"""
    assert _answers(listening, [21]) == [42]
    assert _answers(listening, [[1, 2]]) == [[1, 2, 1, 2]]


def test_every_call_runs_in_the_one_call_thread(socket_dir):
    """The calls of every connection, and those handed to it (Dask's handler's), run
    in the process's one call thread, not the caller's nor one a connection; an answer
    that fails closes its connection, not the thread."""
    threads, address = [], "tcp://127.0.0.1:2006"

    def answer(frame):
        value = callsocket.loads(frame)
        threads.append(threading.get_ident())
        if value == "fail":
            raise ValueError("a failed answer")
        return callsocket.dumps(value)

    assert callsocket.listen(str(socket_dir), address, SECRET, answer)
    client = _Client()
    callsocket.trust(client, str(socket_dir), SECRET)
    first, second = (callsocket.connect(client, address) for _ in range(2))
    try:
        got = []
        callsocket.call_all([first, second], [callsocket.dumps(1), callsocket.dumps(2)],
                            lambda i, frame: got.append(callsocket.loads(frame)))
        assert sorted(got) == [1, 2]
        handed = callsocket.call_thread().submit(threading.get_ident).result(timeout=10)
        assert threads == [handed, handed] and handed != threading.get_ident()
        callsocket.call_all([first], [callsocket.dumps("fail")],
                            lambda i, frame: got.append(frame))
        callsocket.call_all([second], [callsocket.dumps(3)],
                            lambda i, frame: got.append(callsocket.loads(frame)))
        assert got[2:] == [None, 3] and threads[2:] == [handed, handed]
    finally:
        first.close()
        second.close()
        callsocket.close(address)


def test_the_work_after_an_answer_runs_once_it_is_sent_before_the_next_call(socket_dir):
    """Work an answer queues (``after_answer``) runs after that answer is sent, in the
    call thread, before it takes the next call or handed function; outside a call
    thread, at once."""
    address, sent, done = "tcp://127.0.0.1:2007", threading.Event(), []

    def answer(frame):
        value = callsocket.loads(frame)
        callsocket.after_answer(lambda: done.append((value, sent.wait(10))))
        return callsocket.dumps(list(done))

    assert callsocket.listen(str(socket_dir), address, SECRET, answer)
    client = _Client()
    callsocket.trust(client, str(socket_dir), SECRET)
    sock = callsocket.connect(client, address)
    try:
        got = []

        def take(i, frame):
            got.append(callsocket.loads(frame))
            sent.set()  # (the work after the answer waits for its answer here)

        callsocket.call_all([sock], [callsocket.dumps(1)], take)
        callsocket.call_all([sock], [callsocket.dumps(2)], take)
        handed = callsocket.call_thread().submit(list, done).result(timeout=10)
        assert got == [[], [(1, True)]] and handed == [(1, True), (2, True)]
        callsocket.after_answer(done.append, 3)  # (not in the call thread: now)
        assert done[-1] == 3
    finally:
        sock.close()
        callsocket.close(address)


def _doubled(x):
    return 2 * x


def test_a_frame_is_the_standard_pickle_unless_the_other_process_may_lack_a_name(
        monkeypatch):
    """Library values go as the standard pickle writes them (cloudpickle's writer, in
    Python, costs a call several times more), a contiguous array's bytes out of band
    (a view of the array: not copied), another's in band; a lambda, and a function of
    a module registered with cloudpickle by value (this one), go by value."""
    from hetgraph.scheduler.spread import Initial

    written, dumps = [], cloudpickle.dumps
    monkeypatch.setattr(cloudpickle, "dumps",
                        lambda value, **options: written.append(value) or dumps(value,
                                                                                 **options))
    large = np.arange(1 << 17, dtype=np.float64)
    for plain in (("done", [(1, 2.5, "pull")], Initial()), ("done", large, large[::2])):
        stream, buffers = frame = callsocket.dumps(plain)
        got = pickle.loads(stream, buffers=buffers)  # (the standard pickle reads it)
        assert got[0] == "done" and len(got) == 3
    assert len(buffers) == 1 and np.shares_memory(np.asarray(buffers[0]), large)
    assert len(stream) < large.nbytes  # (large's bytes not in the stream)
    received = callsocket.loads((stream, [bytearray(b) for b in buffers]))
    np.testing.assert_array_equal(received[1], large)
    np.testing.assert_array_equal(received[2], large[::2])
    assert received[1].flags.writeable  # (over the received buffer: the reader's own)
    assert written == []
    for by_value in (lambda x: 3 * x, _doubled):
        frame = callsocket.dumps(by_value)
        assert written.pop() is by_value
        assert callsocket.loads(frame)(2) == by_value(2)


def test_a_connection_is_kept_for_the_next_call(listening):
    first = callsocket.connect(listening, ADDRESS)
    callsocket.done_with(listening, ADDRESS, first)
    assert callsocket.connect(listening, ADDRESS) is first


def test_a_clients_idle_connections_close_when_it_goes(socket_dir):
    """Left idle for the next call, a connection is closed once its client is collected
    (not left to the interpreter's last collection, which warns of it)."""
    import gc

    assert callsocket.listen(str(socket_dir), ADDRESS, SECRET, callsocket.dumps)
    try:
        client = _Client()
        callsocket.trust(client, str(socket_dir), SECRET)
        sock = callsocket.connect(client, ADDRESS)
        callsocket.done_with(client, ADDRESS, sock)
        assert sock.fileno() >= 0
        del client
        gc.collect()
        assert sock.fileno() == -1
    finally:
        callsocket.close(ADDRESS)


def test_the_socket_is_its_users_alone_and_goes_with_its_worker(socket_dir, listening):
    path = callsocket.datagrams.path_of(str(socket_dir), ADDRESS, callsocket.PREFIX)
    assert stat.S_ISSOCK(os.stat(path).st_mode)
    assert stat.S_IMODE(os.stat(path).st_mode) & 0o077 == 0
    callsocket.close(ADDRESS)
    assert not os.path.exists(path)
    assert callsocket.connect(listening, ADDRESS) is None  # (through Dask then)


def test_nothing_is_unpickled_from_a_connection_without_the_secret(socket_dir, listening):
    """A stranger's connection is closed after a wrong secret, its frames unread."""
    path = callsocket.datagrams.path_of(str(socket_dir), ADDRESS, callsocket.PREFIX)
    marked = socket_dir / "unpickled"
    frame = pickle.dumps(_Marks(str(marked)))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stranger:
        stranger.connect(path)
        stranger.settimeout(5)
        try:  # (closed, nothing accepted; reset or broken pipe: the frame it did not
            # read, or the frame sent after it closed)
            for data in (b"w" * 32, frame):
                stranger.sendall(struct.pack("!Q", len(data)) + data)
            assert stranger.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            pass
    assert not marked.exists()
    wrong = _Client()
    callsocket.trust(wrong, str(socket_dir), b"w" * 32)
    assert callsocket.connect(wrong, ADDRESS) is None
    assert _answers(listening, [1]) == [2]  # (the client's own still served)


def test_a_first_frame_longer_than_a_secret_is_not_read(socket_dir, listening):
    """A connection that announces a first frame of a gigabyte is closed unread (no
    buffer of that size is made)."""
    path = callsocket.datagrams.path_of(str(socket_dir), ADDRESS, callsocket.PREFIX)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stranger:
        stranger.connect(path)
        stranger.sendall(struct.pack("!Q", 1 << 30))
        stranger.settimeout(5)
        assert stranger.recv(1) == b""
    assert _answers(listening, [3]) == [6]


def test_a_closed_connection_is_an_answer_of_none(socket_dir):
    """The worker's process died mid-call: its end of the connection closes."""
    def dies(frame):
        raise OSError("the process died")

    assert callsocket.listen(str(socket_dir), "tcp://127.0.0.1:2002", SECRET, dies)
    client = _Client()
    callsocket.trust(client, str(socket_dir), SECRET)
    try:
        sock = callsocket.connect(client, "tcp://127.0.0.1:2002")
        got = []
        callsocket.call_all([sock], [callsocket.dumps(1)],
                            lambda i, frame: got.append((i, frame)))
        assert got == [(0, None)]
    finally:
        callsocket.close("tcp://127.0.0.1:2002")


def test_a_socket_left_by_a_killed_worker_is_swept(socket_dir):
    """A process killed leaves its socket behind, bound by nobody: the next worker to
    listen in the directory removes it."""
    left = callsocket.datagrams.path_of(str(socket_dir), "tcp://127.0.0.1:2004",
                                        callsocket.PREFIX)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(left)
    dead.close()
    assert callsocket.listen(str(socket_dir), "tcp://127.0.0.1:2005", SECRET, print)
    try:
        assert not os.path.exists(left)
    finally:
        callsocket.close("tcp://127.0.0.1:2005")


def test_no_directory_no_socket(socket_dir):
    assert not callsocket.listen(str(socket_dir / "missing"), "tcp://127.0.0.1:2003",
                                 SECRET, print)
    client = _Client()
    callsocket.trust(client, "", SECRET)
    assert callsocket.connect(client, "tcp://127.0.0.1:2003") is None


def _here():
    return os.getpid()


def _fails():
    raise ValueError("the task's own error")


def test_a_local_clusters_calls_go_through_the_sockets(monkeypatch):
    """On worker processes of the client's host a call goes through the worker's socket
    (no ``hetgraph_call`` through Dask), runs in the worker's process and brings back
    its result or its error; a client that has no socket calls through Dask alike."""
    from hetgraph.scheduler import exchange

    with hg.Cluster(cpu_workers=1, gpus=0, processes=True,
                    dashboard_address=None) as cluster:
        exchange.install(cluster.client)
        cluster.exchanging = True
        address = cluster.cpu_workers[0]
        direct = []

        def counted(*args):
            direct.append(1)
            return _DIRECT(*args)

        monkeypatch.setattr(calls, "_called_directly", counted)
        pid, error = calls.call_all(cluster.client, [(address, _here, ()),
                                                     (address, _fails, ())])
        assert direct and pid != os.getpid()
        assert isinstance(error, ValueError) and "own error" in str(error)
        callsocket.trust(cluster.client, "", b"")
        direct.clear()
        assert calls.call_all(cluster.client, [(address, _here, ())]) == [pid]
        assert not direct



class _Worker:
    """Stands for a Dask worker: its address and its store."""

    address = ADDRESS

    def __init__(self, data):
        self.data = data


def _keyed(key):
    """A Dask future of no client: its ``key`` alone."""
    from distributed import Future

    class Keyed(Future):
        def __init__(self, key):
            self._key = key

        key = property(lambda self: self._key)

        def __del__(self):
            pass

    return Keyed(key)


def test_a_calls_futures_are_found_in_its_workers_store_as_it_is_unpickled():
    """A call's Dask futures go as their keys, and the worker's answerer finds each in
    its store while it unpickles the call (what it lacks answers "missing"); Dask's
    comms, which unpickle a call elsewhere, get the keys for the handler to swap."""
    held = np.arange(5)
    answer = calls.answerer(_Worker({"held": held}))
    args = ({"run": (_keyed("held"), 3)}, [_keyed("held")])
    kind, got = callsocket.loads(answer(callsocket.dumps((_echo, calls.keyed(args)))))
    assert kind == "done" and got[0]["run"][1] == 3
    np.testing.assert_array_equal(got[0]["run"][0], held)
    np.testing.assert_array_equal(got[1][0], held)
    kind, key = callsocket.loads(answer(callsocket.dumps((_echo, calls.keyed(
        (_keyed("gone"),))))))
    assert (kind, key) == ("missing", "gone")
    elsewhere = pickle.loads(pickle.dumps(calls.keyed((_keyed("held"),))))
    assert elsewhere == (calls._Key("held"),)
    assert calls._resolved(elsewhere, {"held": held})[0] is held


def _echo(*args):
    return args


class _CountedStore(dict):
    """A worker's store that counts its lookups."""

    looked = 0

    def __getitem__(self, key):
        self.looked += 1
        return super().__getitem__(key)


def test_a_key_found_once_is_not_looked_up_again_while_its_store_holds_it():
    """A key's data that an earlier call found is found again without the store's
    lookup (Dask's counts its metrics each time), but only while the store holds the
    key: once it let go of it, a call answers "missing", though the data still lives,
    and so does Dask's handler."""
    key = f"kept-{os.getpid()}-{id(_CountedStore)}"
    held = np.arange(5)
    store = _CountedStore({key: held})
    answer = calls.answerer(_Worker(store))
    frame = callsocket.dumps((_echo, calls.keyed((_keyed(key),))))
    for _ in range(3):
        kind, got = callsocket.loads(answer(frame))
        assert kind == "done"
        np.testing.assert_array_equal(got[0], held)
    assert store.looked == 1
    assert calls._resolved((calls._Key(key),), store)[0] is held and store.looked == 1
    del store[key]
    assert callsocket.loads(answer(frame)) == ("missing", key)
    with pytest.raises(calls.Missing):
        calls._resolved((calls._Key(key),), store)
