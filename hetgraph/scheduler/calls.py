"""Tasks sent straight to a worker process, not through the Dask scheduler.

A Dask task costs two trips through the scheduler and a third for its result (client
to scheduler to worker, the worker's word back through the scheduler, then the result
fetched): several milliseconds, more than a warm call's iterations on a small graph. A
spread run's segments (:mod:`.spread`) go to their workers directly instead: the
client calls each worker, through its socket on the client's host
(:mod:`.callsocket`), else its ``hetgraph_call`` handler over Dask's comms; either
runs the task in the worker process's call thread (one at a time,
:class:`.callsocket.CallThread`) and answers with its result.
The Dask futures among the task's arguments (the placed graph, the kept arrays, a
scattered state) are read from the worker's own store; a worker that lacks one
answers so (:class:`Missing`), and the caller sends the task through the scheduler,
which fetches it. A call whose worker died ends with :class:`Lost`; the task's own
error is raised on the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
import traceback
import weakref

from . import callsocket

HANDLER = "hetgraph_call"
_THREAD = threading.local()  # .worker: the worker whose call this thread runs; .data:
# the store of the worker whose call it unpickles
# key -> the data a call found under it, while that lives (see _held)
_SEEN = weakref.WeakValueDictionary()


@dataclasses.dataclass(frozen=True)
class _Key:
    """Stands for a Dask future's data in a call's arguments: its key. Unpickled as
    that data where the call's worker is known (:func:`_found`)."""

    key: object

    def __reduce__(self):
        return _found, (self.key,)


def _found(key):
    """The data of ``key`` in the store of the worker whose call this thread unpickles
    (:func:`answerer`; :class:`Missing` where it lacks it): no pass over the arguments
    after; else (Dask's comms unpickle a call) a :class:`_Key`, which
    :func:`_resolved` swaps."""
    data = getattr(_THREAD, "data", None)
    return _Key(key) if data is None else _held(data, key)


def _held(data, key):
    """The data of ``key`` in ``data`` (a worker's store; :class:`Missing` where it
    lacks it): the object found there before while the store still holds the key, not
    looked up again (Dask's store counts its metrics in every lookup; a key's data
    never changes: the client's keys are never used twice)."""
    if key in data:
        found = _SEEN.get(key)
        if found is not None:
            return found
    try:
        found = data[key]
    except KeyError:
        raise Missing(str(key)) from None
    with contextlib.suppress(TypeError):  # (an object no weak reference can hold)
        _SEEN[key] = found
    return found


class Missing(Exception):
    """The worker does not hold the data of a future among a call's arguments."""


class Lost(Exception):
    """The connection to the called worker closed before it answered: it died."""

    def __init__(self, address):
        super().__init__(f"worker {address} left during a call")
        self.address = address


def _swapped(value, swap):
    """``value`` with every leaf ``x`` in its tuples, lists and dicts replaced by
    ``swap(x)``."""
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_swapped(v, swap) for v in value)
    if isinstance(value, list):
        return [_swapped(v, swap) for v in value]
    if isinstance(value, dict):
        return {k: _swapped(v, swap) for k, v in value.items()}
    return swap(value)


def keyed(args):
    """``args`` with their Dask futures replaced by their keys (the client's side)."""
    return keyed_futures(args)[0]


def keyed_futures(args):
    """(:func:`keyed` ``args``, the Dask futures among them), in one pass."""
    from distributed import Future

    found = []

    def swap(value):
        if not isinstance(value, Future):
            return value
        found.append(value)
        return _Key(value.key)

    return _swapped(args, swap), found


def _resolved(args, data):
    """``args`` with their keys replaced by the data of ``data`` (a worker's store);
    :class:`Missing` when it lacks one."""
    def swap(value):
        return _held(data, value.key) if isinstance(value, _Key) else value
    return _swapped(args, swap)


def _as(worker, function, args):
    """``function(*args)`` in the call thread of ``worker`` (see :func:`this_worker`)."""
    _THREAD.worker = worker
    return function(*args)


def this_worker():
    """The Dask worker that runs this task: a call's (:func:`handler`), else Dask's
    ``get_worker()``."""
    worker = getattr(_THREAD, "worker", None)
    if worker is None:
        from distributed import get_worker

        worker = get_worker()
    return worker


def _sendable(error, address):
    """``error`` with the traceback of the call on the worker at ``address`` as a note,
    or, when it cannot be pickled, a RuntimeError that says what it was."""
    import pickle

    note = f"(in a call on worker {address}:\n{traceback.format_exc()})"
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        error = RuntimeError(f"{type(error).__name__}: {error}")
    error.add_note(note)
    return error


def _failed(exc, worker):
    """The answer of a call that ended with ``exc`` on ``worker``: ("missing", key) or
    ("error", the exception, raised on the client, which decides)."""
    if isinstance(exc, Missing):
        return ("missing", str(exc))
    return ("error", _sendable(exc, worker.address))


def handler(worker):
    """The ``hetgraph_call`` handler of ``worker``: runs ``task`` = (function, keyed
    arguments) in this process's call thread; answers ("done", result), ("missing",
    key) or ("error", the exception)."""
    from distributed.protocol import to_serialize

    async def call(task):
        function, args = task
        try:
            args = _resolved(args, worker.data)
            result = await asyncio.get_running_loop().run_in_executor(
                callsocket.call_thread(), _as, worker, function, args)
        except Exception as exc:
            kind, value = _failed(exc, worker)
            return (kind, to_serialize(value))
        return ("done", to_serialize(result))

    return call


def answerer(worker):
    """What answers a frame of (function, keyed arguments) on ``worker``'s socket
    (:func:`.callsocket.listen`), as :func:`handler` answers a task, in the call
    thread."""
    def answer(frame):
        try:
            _THREAD.data = worker.data  # (the keys found as the frame is unpickled)
            try:
                function, args = callsocket.loads(frame)
            finally:
                _THREAD.data = None
            reply = ("done", _as(worker, function, args))
        except Exception as exc:
            reply = _failed(exc, worker)
        try:
            return callsocket.dumps(reply)
        except Exception as exc:  # (a result that does not pickle)
            return callsocket.dumps(_failed(exc, worker))

    return answer


def call_all(client, calls, on_missing=None, keyed_args=False):
    """Call each (address, function, args) of ``calls`` at once, directly on its worker;
    returns, in order, each one's result, or the exception it ended with (the task's own
    error, :class:`Missing`, :class:`Lost`). ``on_missing``: awaited when a worker
    answers :class:`Missing` (the others may wait for the task it did not run).
    ``keyed_args``: each ``args`` is :func:`keyed` already (no pass over it here)."""
    if not keyed_args:
        calls = [(address, function, keyed(args)) for address, function, args in calls]
    connections = [callsocket.connect(client, address) for address, _, _ in calls]
    if all(connections):
        return _called_directly(client, calls, connections, on_missing)
    for (address, _, _), connection in zip(calls, connections):
        if connection is not None:
            callsocket.done_with(client, address, connection)
    return _called_through_dask(client, calls, on_missing)


def _called_directly(client, calls, connections, on_missing):
    """:func:`call_all` through the workers' ``connections`` (:mod:`.callsocket`)."""
    outcomes = [None] * len(calls)

    def take(i, frame):
        address = calls[i][0]
        if frame is None:
            connections[i].close()
            outcomes[i] = Lost(address)
            return
        callsocket.done_with(client, address, connections[i])
        kind, value = callsocket.loads(frame)
        if kind == "missing":
            if on_missing is not None:
                client.sync(on_missing)
            value = Missing(value)
        outcomes[i] = value

    callsocket.call_all(connections, [callsocket.dumps((function, args))
                                      for _, function, args in calls], take)
    return outcomes


def _called_through_dask(client, calls, on_missing):
    """:func:`call_all` through the workers' ``hetgraph_call`` handlers."""
    from distributed.comm import CommClosedError
    from distributed.protocol import to_serialize

    async def one(address, function, args):
        try:
            kind, value = await client.rpc(address).hetgraph_call(
                task=to_serialize((function, args)))
        except (CommClosedError, OSError):
            return Lost(address)
        if kind == "missing":
            if on_missing is not None:
                await on_missing()
            return Missing(value)
        return value

    async def every():
        return await asyncio.gather(*(one(*c) for c in calls))

    return client.sync(every)
