"""Bytes written to Dask's TCP connections by every process of a cluster: the client's
(with a local cluster's scheduler, which runs in it) and each worker's; and the bytes
through the client's process (those it wrote and those it read). Counted at Dask's TCP
comm itself (``distributed.comm.tcp.TCP.write``, and the reads of ``TCP.read``), below
hetgraph, and at the frames of the client's calls over Unix sockets
(:mod:`hetgraph.scheduler.callsocket`, each call an op ``hetgraph_call`` as through
Dask): what a call really sent, whoever sent it (tests/test_processes.py,
tests/test_spread.py, bench/processes.py).

Usage::

    counter = CommBytes(client)      # installs the count in every process
    before = counter.total()
    ...                              # the call
    sent = counter.total() - before  # bytes the call's messages took (all processes)
    counter.through_client()         # bytes the client's process wrote and read so far
    ops_written()                    # {op: messages} the client's process wrote so far
"""

import sys


def _counts():
    """[written, read] bytes of this process's TCP comms since :func:`install`: kept on
    Dask's TCP module, which every process imports (a list of this module's would be
    sent by value to the workers with the functions, a copy of the client's)."""
    from distributed.comm import tcp

    if not hasattr(tcp, "hetgraph_comm_bytes"):
        tcp.hetgraph_comm_bytes = [0, 0]
    return tcp.hetgraph_comm_bytes


def _ops():
    """{op: messages} this process's TCP comms wrote since :func:`install` (a batched
    message counts each of its ops), kept on Dask's TCP module as :func:`_counts` is."""
    from distributed.comm import tcp

    if not hasattr(tcp, "hetgraph_comm_ops"):
        tcp.hetgraph_comm_ops = {}
    return tcp.hetgraph_comm_ops


def _count_ops(ops, msg):
    for one in msg if isinstance(msg, (list, tuple)) else [msg]:
        op = one.get("op") if isinstance(one, dict) else None
        if op is not None:
            ops[op] = ops.get(op, 0) + 1


def install():
    """Count the bytes and the messages (by op) every TCP comm of this process writes
    (once per process)."""
    from distributed.comm import tcp

    counts, ops = _counts(), _ops()
    if getattr(tcp.TCP.write, "counts_bytes", False):
        return
    original = tcp.TCP.write

    async def write(self, msg, serializers=None, on_error="message"):
        _count_ops(ops, msg)
        n = await original(self, msg, serializers, on_error)
        counts[0] += n
        return n

    write.counts_bytes = True
    tcp.TCP.write = write
    read_frames = tcp.read_bytes_rw  # (TCP.read reads every frame with it)

    async def read_bytes_rw(stream, n):
        counts[1] += n
        return await read_frames(stream, n)

    tcp.read_bytes_rw = read_bytes_rw
    _count_call_sockets(counts, ops)


def _count_call_sockets(counts, ops):
    """Count the frames of :mod:`hetgraph.scheduler.callsocket` too: bytes written and
    read (their headers included), and each call sent as an op ``hetgraph_call``."""
    from hetgraph.scheduler import callsocket

    send, exactly, call_all = callsocket._send, callsocket._exactly, callsocket.call_all

    def counted_send(sock, data):
        counts[0] += callsocket._HEADER.size + len(data)
        return send(sock, data)

    def counted_exactly(sock, size):
        got = exactly(sock, size)
        counts[1] += size if got is not None else 0
        return got

    def counted_call_all(connections, frames, on_answer):
        ops["hetgraph_call"] = ops.get("hetgraph_call", 0) + len(frames)
        return call_all(connections, frames, on_answer)

    callsocket._send, callsocket._exactly = counted_send, counted_exactly
    callsocket.call_all = counted_call_all


def ops_written():
    """A copy of {op: messages} this process wrote to TCP comms since :func:`install`."""
    return dict(_ops())


def written():
    """Bytes this process wrote to TCP comms since :func:`install`."""
    return _counts()[0]


class CommBytes:
    """The TCP bytes written by the client's process and by every worker of ``client``."""

    def __init__(self, client):
        import cloudpickle

        # worker processes cannot import this file: send its functions by value
        cloudpickle.register_pickle_by_value(sys.modules[__name__])
        self.client = client
        install()
        client.run(install)

    def through_client(self):
        """Bytes the client's process (a local cluster's scheduler included) wrote to and
        read from TCP comms so far."""
        return sum(_counts())

    def total(self):
        """Bytes written so far, every process together (a worker that restarted counts
        from its restart)."""
        return written() + sum(self.client.run(written).values())
