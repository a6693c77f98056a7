"""Bytes written to Dask's TCP connections by every process of a cluster: the client's
(with a local cluster's scheduler, which runs in it) and each worker's. Counted at
Dask's TCP comm itself (``distributed.comm.tcp.TCP.write``), below hetgraph: what a
call really sent, whoever sent it (tests/test_processes.py, bench/processes.py).

Usage::

    counter = CommBytes(client)      # installs the count in every process
    before = counter.total()
    ...                              # the call
    sent = counter.total() - before  # bytes the call's messages took (all processes)
"""

import sys

_WRITTEN = [0]  # bytes this process wrote to TCP comms since install()


def install():
    """Count the bytes every TCP comm of this process writes (once per process)."""
    from distributed.comm import tcp

    if getattr(tcp.TCP.write, "counts_bytes", False):
        return
    original = tcp.TCP.write

    async def write(self, msg, serializers=None, on_error="message"):
        n = await original(self, msg, serializers, on_error)
        _WRITTEN[0] += n
        return n

    write.counts_bytes = True
    tcp.TCP.write = write


def written():
    """Bytes this process wrote to TCP comms since :func:`install`."""
    return _WRITTEN[0]


class CommBytes:
    """The TCP bytes written by the client's process and by every worker of ``client``."""

    def __init__(self, client):
        import cloudpickle

        # worker processes cannot import this file: send its functions by value
        cloudpickle.register_pickle_by_value(sys.modules[__name__])
        self.client = client
        install()
        client.run(install)

    def total(self):
        """Bytes written so far, every process together (a worker that restarted counts
        from its restart)."""
        return written() + sum(self.client.run(written).values())
