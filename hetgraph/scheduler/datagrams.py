"""Small messages between the worker processes of one host over Unix datagram sockets:
the word each spread owner sends its peers every iteration (its range is in
shared memory or staged on its GPU; the message only says so, with a few numbers).

A message through Dask's comms costs hundreds of microseconds each way on a local
cluster (an event-loop hop on each side, a TCP connection, the framing); an
iteration of a spread pull waits for one from every peer. A datagram goes from the
sending thread straight to a thread of the peer's process blocked on its socket.
Each worker process listens on a socket named after its Dask address in the
shared-memory directory (mode 0600: only its user's processes reach it); messages are
MessagePack, never pickles, and one that does not unpack is dropped.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import socket
import threading

import msgpack
import numpy as np

from .. import tuning

log = logging.getLogger("hetgraph.scheduler")

MAX_BYTES = 1 << 16  # a message's size at most (a word and a few numbers: far less)
PREFIX = "hetgraph-mail-"  # the sockets' names in the directory
PROBE = b"\xc1"  # a byte no MessagePack message starts with: a reader drops it
_LISTENING: dict = {}  # Dask address -> (socket, path) this process listens on
_LOCK = threading.Lock()
_SENDER: list = []  # this process's one unbound socket for sending (made on first use)


class Unreachable(Exception):
    """No process listens at the peer's socket any more (its process died)."""


def path_of(directory, address, prefix=PREFIX):
    """The socket of the worker at Dask ``address`` in ``directory`` (``prefix``: of
    its messages; :mod:`.callsocket`'s: of the client's calls)."""
    digest = hashlib.sha1(address.encode()).hexdigest()[:24]
    return os.path.join(directory, f"{prefix}{digest}")


def listen(directory, address, deliver):
    """Receive messages for the worker at ``address`` (this process's) on its socket in
    ``directory``, each passed to ``deliver(channel, tag, sender, payload)`` from a
    thread of its own; returns whether it listens (no: no such directory, or a path
    too long for a socket)."""
    if not directory or not os.path.isdir(directory):
        return False
    with _LOCK:
        if address in _LISTENING:
            return True
        _sweep(directory)
        path = path_of(directory, address)
        sock = private_socket(path, socket.SOCK_DGRAM)
        if sock is None:
            return False
        _LISTENING[address] = (sock, path)
    threading.Thread(target=_serve, args=(sock, deliver), daemon=True,
                     name=f"hetgraph-mail-{address}").start()
    return True


def private_socket(path, kind):
    """A Unix socket of ``kind`` bound at ``path`` for this user alone (mode 0600: the
    umask 077 while it binds; a file a killed process left there removed first; the
    socket removed at this process's exit), a stream socket listening; None where it
    cannot bind (a directory whose paths are too long for a socket)."""
    unlink(path)
    sock = socket.socket(socket.AF_UNIX, kind)
    old = os.umask(0o077)
    try:
        sock.bind(path)
        if kind == socket.SOCK_STREAM:
            sock.listen()
    except OSError as exc:
        sock.close()
        log.debug("no socket at %s: %s", path, exc)
        return None
    finally:
        os.umask(old)
    atexit.register(unlink, path)  # (a process may end without closing it)
    return sock


def _sweep(directory):
    """Remove this user's sockets in ``directory`` that no process reads any more (their
    processes were killed): a probe to each is refused."""
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        try:
            if not name.startswith(PREFIX) or os.stat(path).st_uid != os.getuid():
                continue
            _sender().sendto(PROBE, path)
        except ConnectionRefusedError:
            unlink(path)
        except OSError:  # (gone meanwhile, or a reader too busy: left alone)
            pass


def unlink(path):
    """Remove ``path``, if it is there."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _sender():
    """This process's one unbound socket for sending (made on first use)."""
    if not _SENDER:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.settimeout(tuning.PEER_CHECK_SECONDS)  # (a peer too busy to read)
        atexit.register(sock.close)  # (else collected open at exit: a ResourceWarning)
        _SENDER.append(sock)
    return _SENDER[0]


def listens(address):
    """Whether this process listens for the worker at ``address``."""
    return address in _LISTENING


def close(address):
    """Stop listening for the worker at ``address`` (it closes) and remove its socket."""
    with _LOCK:
        sock, path = _LISTENING.pop(address, (None, None))
    if sock is None:
        return
    unlink(path)
    try:
        sock.shutdown(socket.SHUT_RDWR)  # (wakes the thread blocked on it)
    except OSError:  # (a system that refuses it for a datagram socket: the thread
        pass  # ends at the close's error, or with the process)
    sock.close()


def _serve(sock, deliver):
    while True:
        try:
            data = sock.recv(MAX_BYTES)
        except OSError:
            return
        if not data:  # (shut down)
            return
        try:
            channel, tag, sender, payload = msgpack.unpackb(data, raw=False)
        except Exception as exc:  # (not one of ours: dropped)
            log.debug("dropped a message that did not unpack: %s", exc)
            continue
        deliver(channel, tag, sender, payload)


def _plain(value):
    """A NumPy number (an engine's count) as the Python number MessagePack packs."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot send a {type(value).__name__} in a message")


def send(directory, peers, channel, tag, sender, payload):
    """Send (``channel``, ``tag``, ``sender``, ``payload``: MessagePack types) to the
    workers at Dask addresses ``peers`` through their sockets in ``directory``; returns
    the peers without a socket there, or too busy to take it within
    ``tuning.PEER_CHECK_SECONDS``, or whose socket's path is too long to be one, where
    :func:`listen` does not listen either (send them another way). Raises
    :class:`Unreachable` naming a peer whose socket no process reads any more."""
    data = msgpack.packb([list(channel), list(tag), sender, payload], default=_plain)
    if len(data) > MAX_BYTES:
        raise ValueError(f"a message of {len(data)} bytes is larger than {MAX_BYTES}")
    with _LOCK:
        sock = _sender()
    elsewhere = []
    for peer in peers:
        try:
            sock.sendto(data, path_of(directory, peer))
        except ConnectionRefusedError:
            raise Unreachable(peer) from None
        except OSError:  # (no such file, too busy, or a path too long for a socket)
            elsewhere.append(peer)
    return elsewhere
