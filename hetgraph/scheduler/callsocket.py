"""Calls from the client to the worker processes of its own host over Unix stream
sockets, in place of Dask's comms (:mod:`.calls`).

A call through Dask's comms costs about a millisecond on a local cluster: the client's
thread hands it to its event loop, the worker's loop hands it to a thread and back, the
answer goes back to the client's thread the same way. A warm call on a small graph
costs less than that in process. Here the client's thread writes the call to the
worker's socket and reads the answer itself, and the worker's call thread, waiting on
its connections, reads the call and runs it (:class:`CallThread`: one thread a process
runs every call, one at a time, also those Dask's comms bring, :mod:`.calls`).

Each worker process listens on a socket named after its Dask address in the
directory that the client named when it installed the handlers (its
``tuning.SHARED_MEMORY_DIR``), mode 0600. A connection is taken only from a process
of the worker's user (the peer's credentials) that first sends the client's secret,
which went to the workers with the handlers through Dask; the client connects only
to a socket, and a process, of its own user. Only then are calls unpickled, as Dask
unpickles them. Where no socket answers (another host, no such directory) the call
goes through Dask's comms.

A call and its answer are each a frame (:func:`dumps`): a pickle stream and the
buffers it took out of band (arrays' bytes), written after it as they are and read
into buffers of their own that the unpickled arrays then use: no array is copied
into or out of a stream.
"""

from __future__ import annotations

import collections
import concurrent.futures
import copyreg
import hmac
import io
import logging
import os
import pickle
import selectors
import socket
import struct
import threading
import weakref

import cloudpickle
import numpy as np

from . import datagrams

log = logging.getLogger("hetgraph.scheduler")

PREFIX = "hetgraph-call-"  # the sockets' names in the directory
_HEADER = struct.Struct("!Q")  # a secret's length, then its bytes
_FRAME = struct.Struct("!QI")  # a frame's stream length and buffer count, then the
# buffers' lengths (_HEADER each), the stream and the buffers
_GATHERED = 512  # parts of a frame one write takes at most (IOV_MAX is 1024 on Linux)
_CREDENTIALS = struct.Struct("3i")  # SO_PEERCRED: pid, uid, gid
_PROBE_SECONDS = 0.1  # a sweep's wait for a listener to take its connection
ACCEPTED = b"\x01"  # the worker's answer to a connection's secret
_SECRET_BYTES = 64  # a connection's first frame at most (a secret: no more is read)
_LISTENING: dict = {}  # Dask address -> (socket, path) this process listens on
_SECRETS: set = set()  # the secrets of the clients that installed the handlers here
_LOCK = threading.Lock()
_CLIENTS = weakref.WeakKeyDictionary()  # client -> (directory, secret, idle connections)
_CALL_THREAD = None  # see call_thread
_AFTER = threading.local()  # .work: [(function, args)] the call thread runs after its answer


# --- frames -------------------------------------------------------------------------------

def _send(sock, data):
    """Write the bytes ``data`` (a secret) after their length."""
    sock.sendall(_HEADER.pack(len(data)) + data)


def _receive(sock, most):
    """The bytes :func:`_send` wrote; None when the peer closed the connection, or they
    are longer than ``most`` bytes (unread)."""
    header = _exactly(sock, _HEADER.size)
    size = None if header is None else _HEADER.unpack(header)[0]
    return None if size is None or size > most else _exactly(sock, size)


def _send_frame(sock, frame):
    """Write ``frame`` (:func:`dumps`): its header, stream and buffers, from their own
    memory, gathered into as few writes as the socket takes (one where its buffer holds
    them: one wake-up of the reader, which a write a part would wake again)."""
    stream, buffers = frame
    head = _FRAME.pack(len(stream), len(buffers)) + b"".join(
        _HEADER.pack(b.nbytes) for b in buffers)
    parts = [memoryview(head), memoryview(stream), *buffers]
    while parts:
        sent = sock.sendmsg(parts[:_GATHERED])
        while parts and sent >= parts[0].nbytes:
            sent -= parts[0].nbytes
            parts.pop(0)
        if sent:  # (the socket took part of one: the rest goes next)
            parts[0] = parts[0][sent:]


def _receive_frame(sock):
    """The next frame of ``sock`` (a stream, its buffers, each a bytearray of its own);
    None when the peer closed the connection first."""
    header = _exactly(sock, _FRAME.size)
    if header is None:
        return None
    size, count = _FRAME.unpack(header)
    lengths = _exactly(sock, _HEADER.size * count) if count else b""
    if lengths is None:
        return None
    sizes = [size] + [n for (n,) in _HEADER.iter_unpack(lengths)]
    parts = [_exactly(sock, n) for n in sizes]
    return None if any(p is None for p in parts) else (parts[0], parts[1:])


def _exactly(sock, size):
    """The next ``size`` bytes of ``sock`` (a bytearray); None when the peer closed it
    first."""
    buffer, got = bytearray(size), 0
    view = memoryview(buffer)
    while got < size:
        n = sock.recv_into(view[got:])
        if n == 0:
            return None
        got += n
    return buffer


def _same_user(sock):
    """Whether the process at the other end of ``sock`` runs as this process's user."""
    _, uid, _ = _CREDENTIALS.unpack(sock.getsockopt(
        socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDENTIALS.size))
    return uid == os.getuid()


# --- on the workers -------------------------------------------------------------------------

def listen(directory, address, secret, answer):
    """Take calls for the worker at ``address`` (this process's) on its socket in
    ``directory`` from the clients that know ``secret``, each call's frame
    (:func:`dumps`) passed to ``answer(frame)`` (its answer's frame goes back) in the
    process's call thread (:func:`call_thread`); returns whether it listens (no: no
    such directory, or a path too long)."""
    with _LOCK:
        _SECRETS.add(secret)
        if address in _LISTENING or not directory or not os.path.isdir(directory):
            return address in _LISTENING
        _sweep(directory)
        path = datagrams.path_of(directory, address, PREFIX)
        sock = datagrams.private_socket(path, socket.SOCK_STREAM)
        if sock is None:
            return False
        _LISTENING[address] = (sock, path)
    threading.Thread(target=_accept, args=(sock, answer), daemon=True,
                     name=f"hetgraph-calls-{address}").start()
    return True


def _sweep(directory):
    """Remove this user's call sockets in ``directory`` that no process listens on any
    more (their processes were killed): a connection to each is refused."""
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        try:
            if not name.startswith(PREFIX) or os.stat(path).st_uid != os.getuid():
                continue
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                probe.settimeout(_PROBE_SECONDS)
                probe.connect(path)
        except ConnectionRefusedError:
            datagrams.unlink(path)
        except OSError:  # (gone meanwhile, or a listener too busy: left alone)
            pass


def close(address):
    """Stop taking new connections for the worker at ``address``; remove its socket."""
    with _LOCK:
        sock, path = _LISTENING.pop(address, (None, None))
    if sock is not None:
        datagrams.unlink(path)
        sock.close()


def _accept(sock, answer):
    while True:
        try:
            connection, _ = sock.accept()
        except OSError:  # (closed)
            return
        threading.Thread(target=_admit, args=(connection, answer), daemon=True,
                         name="hetgraph-call-connection").start()


def _admit(connection, answer):
    """Hand ``connection`` to the call thread once it proved its client's (see the
    module's docstring); else close it. In a thread of its own: a stranger may send
    nothing."""
    try:
        secret = _receive(connection, _SECRET_BYTES) if _same_user(connection) else None
        if secret is not None and any(hmac.compare_digest(bytes(secret), s)
                                      for s in list(_SECRETS)):
            connection.sendall(ACCEPTED)
            call_thread().serve(connection, answer)
            return
    except OSError as exc:  # (the client went away)
        log.debug("a call connection ended: %s", exc)
    connection.close()


class CallThread(concurrent.futures.Executor):
    """The one thread of this process that runs calls, one at a time: the frames of
    the connections it serves, each answered by ``answer(frame)`` in this thread as it
    comes (no hop to another thread), and the functions :meth:`submit` hands it."""

    def __init__(self):
        self._selector = selectors.DefaultSelector()
        self._wake, self._woken = socket.socketpair()
        self._woken.setblocking(False)
        self._selector.register(self._woken, selectors.EVENT_READ, None)
        self._queue = collections.deque()  # (future, function, args)
        threading.Thread(target=self._loop, daemon=True, name="hetgraph-call").start()

    def submit(self, function, /, *args, **kwargs):
        future = concurrent.futures.Future()
        self._queue.append((future, function, args, kwargs))
        self._wake.send(b"\0")
        return future

    def serve(self, connection, answer):
        """Answer the calls of ``connection`` (closed at its first fault)."""
        self.submit(self._selector.register, connection, selectors.EVENT_READ, answer)

    def _loop(self):
        _AFTER.work = []
        while True:
            for key, _ in self._selector.select():
                if key.data is None:
                    self._run_queued()
                else:
                    self._answer(key.fileobj, key.data)
                    _run_after()

    def _run_queued(self):
        try:
            self._woken.recv(1 << 12)  # (before the queue: a later item wakes it again)
        except BlockingIOError:
            pass
        while self._queue:
            future, function, args, kwargs = self._queue.popleft()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(function(*args, **kwargs))
                except BaseException as exc:
                    future.set_exception(exc)
                _run_after()

    def _answer(self, connection, answer):
        try:
            frame = _receive_frame(connection)
            if frame is not None:
                _send_frame(connection, answer(frame))
                return
        except OSError as exc:  # (the client went away)
            log.debug("a call connection ended: %s", exc)
        except Exception:  # (an answer that failed: its connection ends, not the thread)
            log.exception("a call's answer failed; its connection is closed")
        self._selector.unregister(connection)
        connection.close()


def after_answer(function, *args):
    """Run ``function(*args)``, work that a call's answer does not need, once that
    answer is sent (or handed to Dask's handler) when called in the call thread, before
    the thread takes any other call or function (a next call finds it done); elsewhere
    at once."""
    work = getattr(_AFTER, "work", None)
    if work is None:
        function(*args)
    else:
        work.append((function, args))


def _run_after():
    """Run the call thread's work queued by :func:`after_answer` (a fault logged: the
    answer is gone)."""
    work = _AFTER.work
    while work:
        function, args = work.pop(0)
        try:
            function(*args)
        except Exception:
            log.exception("the work after a call's answer failed")


def call_thread():
    """This process's :class:`CallThread`, started on first use."""
    global _CALL_THREAD
    with _LOCK:
        if _CALL_THREAD is None:
            _CALL_THREAD = CallThread()
        return _CALL_THREAD


# --- on the client ------------------------------------------------------------------------

def trust(client, directory, secret):
    """Call the workers of ``client`` through their sockets in ``directory`` with
    ``secret`` (see :func:`listen`); the connections it leaves idle are closed when the
    client is collected or the process exits."""
    idle = {}
    _CLIENTS[client] = (directory, secret, idle)
    weakref.finalize(client, _close_idle, idle)


def _close_idle(idle):
    """Close the connections in ``idle`` (address -> sockets), a client's that is gone."""
    with _LOCK:
        for socks in idle.values():
            for sock in socks:
                sock.close()
        idle.clear()


def connect(client, address):
    """A connection to the worker at ``address`` that took ``client``'s secret (one left
    idle by an earlier call, else a new one), or None where it has no socket of this
    user or refused it: call it through Dask."""
    directory, secret, idle = _CLIENTS.get(client, ("", b"", {}))
    if not directory:
        return None
    with _LOCK:
        if idle.get(address):
            return idle[address].pop()
    path = datagrams.path_of(directory, address, PREFIX)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if os.stat(path).st_uid != os.getuid():
            raise PermissionError(f"{path} is not this user's")
        sock.connect(path)
        if not _same_user(sock):
            raise PermissionError(f"the process at {path} is not this user's")
        _send(sock, secret)
        if _exactly(sock, len(ACCEPTED)) != ACCEPTED:
            raise ConnectionError(f"the worker at {path} refused the secret")
    except OSError as exc:
        sock.close()
        log.debug("no call socket for %s: %s", address, exc)
        return None
    return sock


def done_with(client, address, sock):
    """Keep ``sock``, its call answered, for the next call to ``address``."""
    idle = _CLIENTS.get(client, ("", b"", {}))[2]
    with _LOCK:
        idle.setdefault(address, []).append(sock)


def call_all(connections, frames, on_answer):
    """Send each frame of ``frames`` on its connection of ``connections``, then pass
    each answer to ``on_answer(index, frame)`` as it comes (frame None: the connection
    closed before it answered: the worker died)."""
    if len(connections) == 1:  # (its answer read straight: no selector's system calls)
        try:
            _send_frame(connections[0], frames[0])
            answer = _receive_frame(connections[0])
        except OSError:
            answer = None
        on_answer(0, answer)
        return
    selector = selectors.DefaultSelector()
    try:
        for i, (sock, frame) in enumerate(zip(connections, frames)):
            try:
                _send_frame(sock, frame)
            except OSError:
                on_answer(i, None)
                continue
            selector.register(sock, selectors.EVENT_READ, i)
        while selector.get_map():
            for key, _ in selector.select():
                selector.unregister(key.fileobj)
                try:
                    answer = _receive_frame(key.fileobj)
                except OSError:
                    answer = None
                on_answer(key.data, answer)
    finally:
        selector.close()


def dumps(value):
    """The frame of ``value``: (a pickle stream, the buffers it took out of band: the
    bytes of its contiguous arrays, as memoryviews of them). The stream as the standard
    pickle writes it (several times faster than cloudpickle's writer, in Python),
    unless it cannot or it names this process's ``__main__`` or a module registered
    with cloudpickle by value, which the other process may lack: then by cloudpickle
    (Dask's rule; the names are never searched for in an array's bytes)."""
    buffers = []
    try:
        out = io.BytesIO()
        writer = pickle.Pickler(out, protocol=pickle.HIGHEST_PROTOCOL,
                                buffer_callback=buffers.append)
        writer.dispatch_table = _DISPATCH
        writer.dump(value)
        stream = out.getvalue()
    except Exception:  # (a lambda, a local class: what only cloudpickle writes)
        stream = None
    if stream is None or not by_reference(stream):
        buffers = []
        stream = cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL,
                                   buffer_callback=buffers.append)
    return stream, [b.raw() for b in buffers]


def _array(buffer, dtype, shape):
    """The array of ``dtype`` and ``shape`` over ``buffer`` (see :func:`_reduced`)."""
    return np.frombuffer(buffer, dtype).reshape(shape)


def _reduced(array):
    """How a frame's standard pickle writes ``array``: a contiguous array of numbers by
    its bytes (out of band) and its dtype's string (NumPy's own reduce writes a dtype
    object: several times the cost of a small answer's other fields), else as NumPy
    writes it."""
    if array.flags.c_contiguous and array.dtype.kind in "biufc":
        return _array, (pickle.PickleBuffer(array), array.dtype.str, array.shape)
    return array.__reduce_ex__(pickle.HIGHEST_PROTOCOL)


_DISPATCH = copyreg.dispatch_table | {np.ndarray: _reduced}


def by_reference(stream):
    """Whether the standard pickle ``stream`` names nothing another process may lack:
    neither this process's ``__main__`` nor a module registered with cloudpickle by
    value (Dask's rule; bytes of an array that happen to match only cost cloudpickle)."""
    return b"__main__" not in stream and not any(
        name.encode() in stream for name in cloudpickle.list_registry_pickle_by_value())


def loads(frame):
    """The value of ``frame`` (:func:`dumps`, or as :func:`_receive_frame` read it: its
    arrays then over the frame's own buffers, writable)."""
    stream, buffers = frame
    return pickle.loads(stream, buffers=buffers)
