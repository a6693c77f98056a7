"""Arrays sent from worker to worker, never through the client.

A worker process of a spread run (:mod:`.spread`) sends what it computed to its peers
over Dask's worker-to-worker comms: a message to each peer's ``hetgraph_put`` handler,
which files it in this process's mailbox under (channel, tag, sender), a channel being
one attempt of one segment of a run: (run id, name). The peer's task thread waits there
for the parts it needs. The wait ends with an error instead of a hang when a peer's
process died (:class:`PeerLostError`: a connection to it is refused), when a peer
failed (:class:`PeerFailedError`: it said so before its error went to the client) or
when the run ended (the client dropped its contexts).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import secrets
import socket
import threading
import time

from .. import tuning
from ..cluster import WorkerLostError
from . import calls, callsocket, datagrams, hostshare

HANDLER = "hetgraph_put"
FAILED = ("failed",)  # the tag of a peer's word that it failed
_MAIL = threading.Condition()
_BOX: dict = {}  # (channel, tag) -> {sender: payload}
_ENDED: dict = {}  # channel or run id -> why its waits end (a peer failed, the run ended)
_ENDED_KEPT = 1024  # the newest ends kept (a run's is needed only while it runs)


class PeerLostError(WorkerLostError):
    """A peer of a spread run left while this worker waited for its part: ``peer`` is
    its address."""

    def __init__(self, peer, tag):
        super().__init__(f"worker {peer} left while its part {tag!r} of the run's state "
                         f"was awaited")
        self.peer, self.tag = peer, tag

    def __reduce__(self):  # (sent back to the client as the task's error)
        return PeerLostError, (self.peer, self.tag)


class PeerFailedError(WorkerLostError):
    """A peer of a spread run failed (its own error goes to the client), or the run
    ended, while this worker waited for a part."""


def _end(key, why):
    """End the waits of ``key`` (a channel, or a run id: all its channels)."""
    _ENDED[key] = why
    while len(_ENDED) > _ENDED_KEPT:
        del _ENDED[next(iter(_ENDED))]
    _MAIL.notify_all()


def _put(channel, tag, sender, payload):
    """The comm handler (on the worker's event loop): file a peer's part, or a peer's
    word that it failed (tag ``FAILED``)."""
    channel, tag = tuple(channel), tuple(tag)
    with _MAIL:
        if tag == FAILED:
            _end(channel, f"its peer {sender} failed")
        else:
            _BOX.setdefault((channel, tag), {})[sender] = payload
            _MAIL.notify_all()
    return "OK"


def install(client):
    """Let every worker of ``client``, and every one that joins later (a worker restarted
    by its nanny), take parts from its peers and calls from the client
    (:mod:`.calls`): before the first part is sent to it (a message to a handler it
    lacks would never be answered); the calls of the client's host through sockets in
    its ``tuning.SHARED_MEMORY_DIR`` (:mod:`.callsocket`), with a secret of its own."""
    from distributed import WorkerPlugin

    class Exchange(WorkerPlugin):
        name = "hetgraph-exchange"

        def __init__(self, directory, secret):
            self.directory, self.secret = directory, secret

        def setup(self, worker):
            worker.handlers.setdefault(HANDLER, _put)
            worker.handlers.setdefault(calls.HANDLER, calls.handler(worker))
            datagrams.listen(tuning.SHARED_MEMORY_DIR, worker.address, _put)
            callsocket.listen(self.directory, worker.address, self.secret,
                              calls.answerer(worker))

        def teardown(self, worker):
            datagrams.close(worker.address)
            callsocket.close(worker.address)

    secret = secrets.token_bytes(32)  # (at most callsocket._SECRET_BYTES)
    callsocket.trust(client, tuning.SHARED_MEMORY_DIR, secret)
    client.register_plugin(Exchange(tuning.SHARED_MEMORY_DIR, secret))


def forget(run_id, files=True):
    """Drop the parts this process holds for run ``run_id`` and end its waits (the run
    ended); ``files``: see :func:`.hostshare.forget`."""
    with _MAIL:
        for key in [k for k in _BOX if k[0][0] == run_id]:
            del _BOX[key]
        _end(run_id, "the run ended")
    hostshare.forget(run_id, files)


def send(worker, peers, channel, tag, sender, payload, directory=""):
    """Start sending ``payload`` (wrap its arrays with ``distributed.protocol.
    to_serialize``) to the workers at ``peers`` from ``worker``'s event loop; returns a
    concurrent future done when every peer took it (its error: :class:`PeerLostError`
    naming those that did not). The payload's arrays must not change until then.
    ``directory``: the peers are on this host and listen in that directory
    (:mod:`.datagrams`; a payload of plain MessagePack types): sent from this thread
    at once, through Dask only to a peer without a socket there."""
    if directory:
        try:
            peers = datagrams.send(directory, peers, channel, tag, sender, payload)
        except datagrams.Unreachable as gone:
            return _done(PeerLostError(str(gone), tag))
        if not peers:
            return _done()

    async def everyone():
        answers = await asyncio.gather(*(worker.rpc(peer).hetgraph_put(
            channel=list(channel), tag=list(tag), sender=sender, payload=payload)
            for peer in peers), return_exceptions=True)
        failed = [p for p, a in zip(peers, answers) if isinstance(a, Exception)]
        if failed:  # a connection closed or refused: those peers left
            raise PeerLostError(", ".join(failed), tag)

    return asyncio.run_coroutine_threadsafe(everyone(), worker.loop.asyncio_loop)


def _done(error=None):
    """A concurrent future already done (with ``error``)."""
    future = concurrent.futures.Future()
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
    return future


class Sending:
    """An owner's parts of an exchange still on their way (:func:`send`'s futures).
    An owner need not wait for its peers to take a part before it receives theirs:
    they send their next part only after they took every owner's, and an owner writes
    the arrays (or slot) of a part again two exchanges later, after their next parts
    came. That holds for a part sent as a copy, or in a slot or buffer of two taking
    turns, not for views of arrays the next iteration writes in place (a state's
    flags): settle those at once. :meth:`start` notes a part and settles the one
    before (its peers' error, :class:`PeerLostError`, raised there); :meth:`settle`
    waits for the last, before the owner changes what it sent outside the exchanges'
    turns."""

    def __init__(self):
        self._pending = None

    def start(self, future):
        self.settle()
        self._pending = future

    def settle(self):
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()


async def tell_failed_from(rpc, peers, channel, sender):
    """What :func:`tell_failed` does, from a client (``rpc``: its connection pool)."""
    await asyncio.gather(*(rpc(peer).hetgraph_put(channel=list(channel), tag=list(FAILED),
                                                  sender=sender, payload=None)
                           for peer in peers), return_exceptions=True)


def tell_failed(worker, peers, channel, sender):
    """Tell the workers at ``peers`` that ``sender`` failed, so that they stop waiting
    for its parts (best effort: a peer that left is skipped)."""
    try:
        send(worker, peers, channel, FAILED, sender, None).result(
            timeout=tuning.PEER_CHECK_SECONDS)
    except Exception:  # (a peer gone, or slow: it finds out by itself)
        pass


def receive(worker, channel, tag, senders):
    """{sender: payload} of ``tag`` from every one of ``senders`` ({sender: address}),
    waited for; a sender silent for ``tuning.PEER_CHECK_SECONDS`` is asked whether it
    still runs (:class:`PeerLostError` when its address refuses)."""
    channel, tag = tuple(channel), tuple(tag)
    key = (channel, tag)
    checked = time.monotonic()
    while True:
        with _MAIL:
            got = _BOX.get(key, {})
            if all(s in got for s in senders):
                return _BOX.pop(key)
            why = _ENDED.get(channel) or _ENDED.get(channel[0])
            if why is not None:
                raise PeerFailedError(f"{why} while part {tag!r} of {channel} was awaited")
            _MAIL.wait(tuning.PEER_CHECK_SECONDS)
            missing = [a for s, a in senders.items() if s not in _BOX.get(key, {})]
        if missing and time.monotonic() - checked > tuning.PEER_CHECK_SECONDS:
            for address in missing:
                _check_peer(worker, address, tag)
            checked = time.monotonic()


def _check_peer(worker, address, tag):
    """PeerLostError when nothing listens at ``address`` any more (a connection to it is
    refused: its process died); a peer that is only busy counts as there. A plain
    socket: Dask's own connect retries a refused address for its whole timeout."""
    from distributed.comm.addressing import get_address_host_port

    host, port = get_address_host_port(address)
    try:
        socket.create_connection((host, port), timeout=tuning.PEER_CHECK_SECONDS).close()
    except TimeoutError:
        pass  # (a listener too busy to accept soon is still there)
    except OSError:  # refused, unreachable: the process is gone
        raise PeerLostError(address, tag) from None
