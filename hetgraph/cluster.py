"""Start or join a Dask cluster with CPU and GPU workers (docs/architecture.md).

A hetgraph cluster has worker kinds told apart by Dask resources: CPU workers carry
``CPU=1`` (one task at a time; a page task uses every core through the kernels' thread
pool) and there is one GPU worker per GPU with ``GPU=1``. By default everything runs in
this process (``processes=False``): CPU and GPU tasks then read and write the run's
vertex arrays in this process's memory without copies. With ``processes=True``, or when
joining a running scheduler, a graph is sent to the workers once and kept there for
later runs (:meth:`Cluster.placed`), with a run's large arrays
(:meth:`Cluster.kept_array`); CPU worker processes hold a run's vertex state between
its segments, and send it from worker to worker when several share pull iterations
(:mod:`hetgraph.scheduler.spread`).
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import logging
import re
import threading
import weakref

from . import tuning
from .errors import HetGraphError

log = logging.getLogger("hetgraph.cluster")

LOOPBACK = "127.0.0.1"  # where a local cluster listens unless told otherwise
_CURRENT: list = []  # clusters entered with `with`, innermost last
_SAID_CPU_ONLY = False


class ClusterError(HetGraphError, RuntimeError):
    """The Dask cluster cannot be started, joined or used."""


class WorkerLostError(ClusterError):
    """A worker died during a run and the run could not go on without it: the message
    names the workers that left and the task that was lost with them."""


def gpu_count() -> int:
    """Number of GPUs this process can use (0 without CuPy or a device)."""
    from .kernels.gpu import device as gpu

    if not gpu.available():
        return 0
    import cupy

    return int(cupy.cuda.runtime.getDeviceCount())


def _cpu_only_notice():
    global _SAID_CPU_ONLY
    if not _SAID_CPU_ONLY:
        from .kernels.gpu import device as gpu

        log.warning("hetgraph runs CPU-only: %s", gpu.availability()[1])
        _SAID_CPU_ONLY = True


def _reduce_latency(cluster, client):
    """An iteration waits for its tasks, so Dask's message batching (by default every
    few milliseconds, on each of the four hops of a task's round trip) is pure latency:
    batch for ``tuning.DASK_BATCH_INTERVAL`` seconds instead (0: send at once), on the
    client's stream, the scheduler's streams to its workers (those that join later
    too) and clients, and each worker's stream to the scheduler (in worker processes
    through a worker plugin: :func:`_unbatched_plugins`)."""
    on_workers, on_scheduler = _unbatched_plugins()
    comms = [getattr(client, "scheduler_comm", None)]
    scheduler = getattr(cluster, "scheduler", None)
    if scheduler is not None:  # only when the scheduler lives in this process
        comms += list(getattr(scheduler, "stream_comms", {}).values())
        comms += list(getattr(scheduler, "client_comms", {}).values())
        scheduler.add_plugin(on_scheduler)
    workers = getattr(cluster, "workers", {}).values()
    comms += [getattr(worker, "batched_stream", None) for worker in workers]
    for comm in comms:
        _unbatch(comm)
    if any(not hasattr(worker, "batched_stream") for worker in workers):  # (nannies:
        client.register_plugin(on_workers)  # the workers run in their own processes)


def _unbatch(comm):
    """Let a Dask ``BatchedSend`` batch for ``tuning.DASK_BATCH_INTERVAL`` seconds."""
    if comm is not None and hasattr(comm, "interval"):
        comm.interval = tuning.DASK_BATCH_INTERVAL


def _unbatched_plugins():
    """(worker plugin, scheduler plugin) that unbatch the streams of a worker that
    starts, and the scheduler's stream to a worker that joins (one restarted by its
    nanny): see :func:`_reduce_latency`. Dask is imported on use."""
    from distributed import WorkerPlugin
    from distributed.diagnostics.plugin import SchedulerPlugin

    class UnbatchedWorker(WorkerPlugin):
        name = "hetgraph-unbatched"

        def setup(self, worker):
            _unbatch(getattr(worker, "batched_stream", None))

    class UnbatchedScheduler(SchedulerPlugin):
        name = "hetgraph-unbatched"

        def add_worker(self, scheduler, worker):
            _unbatch(scheduler.stream_comms.get(worker))

    return UnbatchedWorker(), UnbatchedScheduler()


class Cluster:
    """A Dask cluster for hetgraph runs: CPU workers and one GPU worker per GPU.

    Use it as a context manager (``with hg.Cluster() as cluster:``), or call
    :meth:`close` when done. Inside the ``with`` block, runs given no ``cluster`` use
    this one; outside any, runs use the embedded cluster
    (:func:`hetgraph.cluster.embedded_cluster`).

    Parameters
    ----------
    address : str, optional
        Join a running Dask scheduler ("tcp://host:port") instead of starting one. Its
        workers must be started with ``dask worker --resources CPU=1`` (CPU workers)
        and ``dask cuda worker --resources GPU=1`` (GPU workers). The other arguments
        are then ignored. Default None: start a local cluster on this machine.
    cpu_workers : int, default 1
        CPU workers of a local cluster. Each runs one task at a time; a page task uses
        every CPU thread, so one is enough on one machine.
    gpus : int, optional
        GPU workers of a local cluster, one per GPU (default None: every visible GPU;
        0 for none).
    processes : bool, default False
        Run the local workers in their own processes. By default they run in this
        process, where CPU and GPU tasks share the run's vertex arrays without copies.
        Worker processes get each graph once and keep it for later runs
        (:meth:`placed`); several CPU worker processes share a pull iteration's
        vertices, each owning a range and sending its values to the others directly;
        a worker that dies is restarted by its nanny and a run's lost task is sent
        again (a spread segment to the survivors, which take over the dead worker's
        vertices; ``hetgraph.tuning.LOST_TASK_RETRIES`` times, then
        :class:`WorkerLostError`).
    dashboard_address : str or None, default "127.0.0.1:8787"
        Where the local cluster's Dask dashboard listens (a free port on the same host
        when that one is taken). None turns it off. The dashboard needs bokeh
        (``pip install 'hetgraph[dashboard]'``); without it the cluster starts without
        one, with a warning.
    host : str, default "127.0.0.1"
        The address every other socket of a local cluster listens on (scheduler,
        nannies, workers and their HTTP endpoints): loopback only by default. Any client
        or worker that reaches these ports can run code as this user, so naming another
        interface ("0.0.0.0": all of them) exposes the cluster to that network: join
        remote workers over TLS (Dask's ``Security``), never plain TCP.

    Attributes
    ----------
    client : distributed.Client
        The Dask client.
    cpu_workers, gpu_workers : list of str
        The addresses of the CPU and of the GPU workers.
    in_process : bool
        Whether the workers run in this process.

    Raises
    ------
    ClusterError
        When the scheduler at ``address`` cannot be joined or has no worker with
        resource CPU or GPU, when the arguments are out of range (``cpu_workers`` below
        0, more ``gpus`` than visible, no worker at all), or when the local cluster
        does not start.

    See Also
    --------
    hetgraph.run : its ``cluster`` argument.
    hetgraph.cluster.close_embedded_cluster : stop the cluster of runs given none.

    Examples
    --------
    >>> import hetgraph as hg
    >>> graph = hg.generate.grid(3, 3)
    >>> with hg.Cluster(dashboard_address=None) as cluster:
    ...     levels = hg.bfs(graph, 0, cluster=cluster)
    >>> int(levels.values.max())
    4
    """

    def __init__(self, address=None, *, cpu_workers=1, gpus=None, processes=False,
                 dashboard_address="127.0.0.1:8787", host=LOOPBACK):
        from distributed import Client

        self._cluster = None
        self._dashboard = False
        # seconds of a task's round trip to a CPU worker: measured by the first run that
        # places iterations by the cost model, then kept (see _Driver._measure_round_trip)
        self.round_trip = None
        self.calibrations: dict = {}  # the runs' calibrations by what they depend on,
        # the newest last (see keep_calibration)
        self.placement_memory: dict = {}  # the cost model's memory of the runs under a
        # calibration key, the newest last (see remember_placements)
        self._placed: dict = {}  # graph token -> its Dask future on the workers (placed)
        self._arrays: dict = {}  # graph token -> [(array, its future)] (kept_array)
        self._plans: dict = {}  # graph token -> the runs packed for it (plans)
        self._placing = threading.Lock()
        self.spreading = threading.Lock()  # held by a run's spread segment (one at a time)
        self.exchanging = False  # whether the workers take parts from their peers (spread)
        # and take calls (hetgraph.scheduler.calls)
        self.gpu_speeds: dict = {}  # GPU worker address -> edges a second its pulls ran
        # as an owner of a spread run (hetgraph.scheduler.spread: pages shared by them)
        self.gpu_shares: dict = {}  # GPU owners' addresses -> the shares their pages took
        self.holding = set()  # (worker address, key): Dask data a worker was seen to hold
        # (see hold)
        self.ended = collections.deque(maxlen=8)  # ids of the runs that ended last, whose
        # contexts the workers drop (Cluster.run_soon; a later run's tasks make sure)
        if address is not None:
            _check_tls_settings(address)
            try:
                self.client = Client(address, timeout=tuning.CLUSTER_JOIN_TIMEOUT)
            except (OSError, TimeoutError) as exc:
                raise ClusterError(f"cannot join the Dask scheduler at {address}: {exc}; "
                                   f"check the address and that the scheduler runs") from None
            self.in_process = False
        else:
            if not isinstance(cpu_workers, int) or cpu_workers < 0:
                raise ClusterError(f"cpu_workers={cpu_workers!r} must be an integer >= 0")
            available = gpu_count()
            gpus = available if gpus is None else gpus
            if not isinstance(gpus, int) or not 0 <= gpus <= available:
                raise ClusterError(f"gpus={gpus!r}: this machine has {available} usable "
                                   f"GPU(s); pass 0..{available} or None for all")
            if cpu_workers + gpus == 0:
                raise ClusterError("a cluster needs at least one CPU or GPU worker")
            dashboard_address = _dashboard_or_none(dashboard_address)
            self._dashboard = dashboard_address is not None
            self._cluster = _local_cluster(cpu_workers, gpus, processes, dashboard_address,
                                           _checked_host(host))
            # a local cluster's workers are reachable: data goes to and from them
            # directly, not relayed by the scheduler (half the bytes, one hop less)
            self.client = Client(self._cluster, direct_to_workers=processes)
            self.in_process = not processes
            _reduce_latency(self._cluster, self.client)
        self._gone = set()  # addresses a call found gone (see left)
        self.cpu_workers, self.gpu_workers, self.gpu_devices = self._workers()
        if not self.cpu_workers and not self.gpu_workers:
            self.close()
            raise ClusterError(f"the cluster at {address} has no worker with resource CPU "
                               f"or GPU; start workers with --resources CPU=1 or GPU=1")
        if not self.gpu_workers:
            _cpu_only_notice()

    def _workers(self):
        """(CPU worker addresses, GPU worker addresses, the device of each GPU worker
        of an in-process cluster, see :func:`gpu_index`)."""
        workers = {a: w for a, w in self.client.scheduler_info(n_workers=-1)[
            "workers"].items() if a not in self._gone}
        cpu = sorted(a for a, w in workers.items() if w.get("resources", {}).get("CPU"))
        gpu = sorted(a for a, w in workers.items() if w.get("resources", {}).get("GPU"))
        return cpu, gpu, [gpu_index(workers[a].get("name")) for a in gpu]

    @property
    def dashboard_link(self):
        """URL of the Dask dashboard's status page, a str (None when it is off).

        Its **hetgraph** page (``/hetgraph``) follows the runs live.

        Examples
        --------
        >>> import hetgraph as hg
        >>> with hg.Cluster(dashboard_address=None) as cluster:
        ...     print(cluster.dashboard_link)
        None
        """
        if self._cluster is None:  # a joined scheduler
            return self.client.dashboard_link
        if not self._dashboard:
            return None
        return f"http://127.0.0.1:{self._cluster.scheduler.http_server.port}/status"

    @property
    def local(self) -> bool:
        """Whether the workers run on this machine (a local cluster)."""
        return self._cluster is not None

    def running(self) -> bool:
        """Whether the client is connected and, for a local cluster, the cluster runs."""
        return self.client.status == "running" and (
            self._cluster is None or getattr(self._cluster.status, "name", "") == "running")

    def keep_calibration(self, key, calibration):
        """Keep a run's ``calibration`` (the dispatcher's: its reports and the model they
        make) under ``key`` for later runs (the last ``tuning.CALIBRATIONS_KEPT``; see
        the dispatcher's calibration)."""
        _keep_newest(self.calibrations, key, calibration)

    def remember_placements(self, key, memory):
        """Keep the cost model's ``memory`` of a run under calibration ``key`` for the
        later runs under it (the last ``tuning.CALIBRATIONS_KEPT``; see the
        dispatcher's ``_recall``). Kept here, not by the graph: the key holds the
        program's class, which a graph sent to worker processes must not carry."""
        _keep_newest(self.placement_memory, key, memory)

    def placed(self, graph):
        """A Dask future of ``graph`` held by every worker (a cluster of worker
        processes, or a joined scheduler's): scattered to them by the first run of the
        graph on this cluster, then kept there for the later runs while the graph lives,
        so that a warm call sends no edges and the workers keep what they built for the
        graph (engines, GPU page layouts). Sent again when every copy was lost (the
        workers that held it died); a worker that joins later fetches it from another.
        """
        with self._placing:
            future = self._placed.get(graph.token)
            if future is not None and future.status == "finished":
                return future
            if future is None:  # (the workers let go of it when the graph goes)
                weakref.finalize(graph, self._placed.pop, graph.token, None)
            future = self.scatter(graph)
            self._placed[graph.token] = future
            return future

    def hold(self, pairs):
        """Note that the workers hold the data of (worker address, key) ``pairs`` (may
        be empty) in :attr:`holding`, forgetting the pairs whose key the client no
        longer has a future of: released data the workers may have dropped, which
        would otherwise stay in the set run after run."""
        live = self.client.futures
        self.holding = {pair for pair in self.holding | pairs if pair[1] in live}

    def kept_array(self, graph, array, unchanged=False):
        """A Dask future of a copy of ``array`` (C-contiguous, an array a run on
        ``graph`` refers to: its aux, a program's array derived from the graph) held by
        every worker: sent by the first run that refers to it, found again by later runs
        whose array has the same contents (compared byte for byte with the copy kept
        here; an array that nothing writes (``unchanged``: a program's derived array,
        kept by the graph; :func:`_read_only`) that is the same object is not
        compared), let go with the graph (``tuning.ARRAYS_KEPT`` per graph, the oldest
        first)."""
        import numpy as np

        same = unchanged or _read_only(array)  # (the object: its contents)
        with self._placing:
            kept = self._arrays.get(graph.token)
            if kept is None:
                kept = self._arrays[graph.token] = []
                weakref.finalize(graph, self._arrays.pop, graph.token, None)
            for compare in (False, True):  # (the same object first: no compare)
                for i, (held, future) in enumerate(kept):
                    if future.status == "finished" and (
                            held.dtype == array.dtype and held.shape == array.shape and
                            np.array_equal(_as_words(held), _as_words(array)) if compare
                            else held is array and same):
                        # (the newest last; found by identity next time)
                        kept.pop(i)
                        kept.append((array if same else held, future))
                        return future
            future = self.scatter(array)
            kept.append((array if same else array.copy(), future))
            del kept[:-tuning.ARRAYS_KEPT]
            return future

    def plans(self, graph):
        """The list where the runs on ``graph`` packed for this cluster's workers are
        kept for later runs (:func:`hetgraph.scheduler.tasks.pack`), let go with the
        graph."""
        with self._placing:
            plans = self._plans.get(graph.token)
            if plans is None:
                plans = self._plans[graph.token] = []
                weakref.finalize(graph, self._plans.pop, graph.token, None)
            return plans

    def run_soon(self, function, *args):
        """Run ``function(*args)`` on every worker without waiting for it (what a run
        does at its end: nothing waits for it; a later task that needs it done does it
        first itself)."""
        async def run():
            try:
                await self.client._run(function, *args, on_error="ignore")
            except Exception as exc:  # (a closing cluster, a worker gone)
                log.debug("could not run %s on the workers: %s", function.__name__, exc)

        self.client.loop.add_callback(run)

    def scatter(self, data):
        """A Dask future of ``data`` sent to every worker; WorkerLostError when no
        worker took it within ``tuning.WORKER_WAIT_SECONDS`` (all of them died)."""
        try:
            return self.client.scatter(data, broadcast=True, hash=False,
                                       timeout=tuning.WORKER_WAIT_SECONDS)
        except TimeoutError:
            raise WorkerLostError(f"no worker took the run's data within "
                                  f"{tuning.WORKER_WAIT_SECONDS} s; lost: "
                                  f"{', '.join(self.lost_workers()) or 'none known'}; "
                                  f"check that the workers run") from None

    def lost_workers(self):
        """The addresses of the workers that left since the cluster started or was last
        asked. ``cpu_workers`` and ``gpu_workers`` become the workers there now (a
        worker restarted by its nanny comes back at another address), but for a kind
        that has none at the moment, whose list stays as it was until one is back."""
        before = set(self.cpu_workers) | set(self.gpu_workers)
        cpu, gpu, devices = self._workers()
        if cpu:
            self.cpu_workers = cpu
        if gpu:
            self.gpu_workers, self.gpu_devices = gpu, devices
        return sorted(before - set(cpu) - set(gpu))

    def left(self, addresses):
        """The workers at ``addresses``, which a call found gone, leave
        ``cpu_workers`` and ``gpu_workers`` now, though the scheduler may list them a
        moment longer: a later run must not call them (Dask retries a refused
        connection until its connect timeout, 30 s by default). The lists are read
        again as :meth:`lost_workers` reads them (a kind left with none keeps its list
        until one is back: a run then waits for a worker, as after any loss)."""
        self._gone.update(addresses)
        self.lost_workers()

    def close(self):
        """Stop the client and, for a local cluster, its scheduler and workers.

        The graph pages kept on this process's GPUs for later runs are freed, and so
        are those kept by a joined cluster's GPU workers (a worker that is gone is
        skipped). Leaving a ``with hg.Cluster()`` block calls it.

        Examples
        --------
        >>> import hetgraph as hg
        >>> cluster = hg.Cluster(dashboard_address=None)
        >>> cluster.close()
        """
        from .kernels.gpu.kept import release

        try:
            if self.in_process:
                release()
            elif self.gpu_workers and self.client.status == "running":
                self.client.run(release, workers=self.gpu_workers)
        except Exception as exc:  # closing must not fail on a worker that is gone
            log.debug("could not free the GPU pages kept by the workers: %s", exc)
        self._placed.clear()
        self._arrays.clear()
        self._plans.clear()
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None

    def __enter__(self):
        _CURRENT.append(self)
        return self

    def __exit__(self, *exc):
        if self in _CURRENT:
            _CURRENT.remove(self)
        self.close()

    def __repr__(self):
        where = "in-process" if self.in_process else "processes"
        return (f"<hetgraph.Cluster {where}: {len(self.cpu_workers)} CPU worker(s), "
                f"{len(self.gpu_workers)} GPU worker(s), dashboard {self.dashboard_link}>")


def _keep_newest(kept, key, value):
    """``kept[key] = value`` as its newest entry, the oldest dropped beyond
    ``tuning.CALIBRATIONS_KEPT`` (pop: runs in other threads may close at once)."""
    kept.pop(key, None)
    kept[key] = value
    while len(kept) > tuning.CALIBRATIONS_KEPT:
        kept.pop(next(iter(kept)), None)


def _read_only(array) -> bool:
    """Whether ``array`` and every array it views are read-only, down to memory of its
    own or ``bytes``: nothing writes it unless made writable again (a read-only view of
    a writable array, or of a writable buffer, changes with what it views)."""
    import numpy as np

    while isinstance(array, np.ndarray):
        if array.flags.writeable:
            return False
        array = array.base
    return array is None or isinstance(array, bytes)


def _as_words(array):
    """The bytes of C-contiguous ``array`` as unsigned integers, 8 bytes each where its
    size allows (compared bit for bit: NaN equals itself; 8 bytes at a time)."""
    import numpy as np

    flat = array.reshape(-1)
    return flat.view(np.uint64) if array.nbytes % 8 == 0 else flat.view(np.uint8)


def gpu_index(worker_name) -> int:
    """Device of a GPU worker of an in-process cluster (named "gpu-<index>")."""
    match = re.fullmatch(r"gpu-(\d+)", str(worker_name))
    return int(match.group(1)) if match else 0


def _worker_memory_limit(processes, workers):
    """Dask's memory limit for each local worker (bytes; 0: none). Dask's default for a
    one-thread worker is the machine's memory over its cores, and a worker whose process
    passes 80% of that pauses: in process, every worker measures the whole process, so
    a run on a graph of a few GiB would stop for good. In process the run's own
    ``host_budget`` governs memory, so there is no limit; worker processes share the
    machine's memory equally."""
    if not processes:
        return 0
    from distributed.system import MEMORY_LIMIT

    return MEMORY_LIMIT // max(workers, 1)


def _check_tls_settings(address):
    """A ClusterError for a tls:// ``address`` when Dask's configuration holds no TLS
    certificates for a client (Dask itself fails with a TypeError deep in its comms)."""
    if not str(address).startswith("tls://"):
        return
    from distributed.security import Security

    if Security().get_connection_args("client")["ssl_context"] is None:
        raise ClusterError(f"cannot join the Dask scheduler at {address}: a tls:// address "
                           f"needs the client's TLS certificates in Dask's configuration "
                           f"(distributed.comm.tls: export DASK_CONFIG=DIR/dask.yaml as "
                           f"written by deploy/tls/make-certs.sh, see deploy/README.md)")


def _checked_host(host):
    """``host`` when it names an address to listen on (Dask reads "" as every interface:
    that must be asked for as "0.0.0.0")."""
    if not isinstance(host, str) or not host or "://" in host:
        raise ClusterError(f"host={host!r} must be an address to listen on, e.g. "
                           f"{LOOPBACK!r} (this machine only) or '0.0.0.0' (every interface)")
    return host


def _local_cluster(cpu_workers, gpus, processes, dashboard_address, host):
    from distributed import Nanny, Scheduler, SpecCluster, Worker

    dashboard = dashboard_address is not None
    if dashboard:  # (registers the hetgraph page and gauges; it imports all of bokeh)
        from . import dashboard as _  # noqa: F401
    # without a dashboard the scheduler still serves /health and /metrics: on localhost
    dashboard_address = _free_dashboard_address(dashboard_address) if dashboard \
        else "127.0.0.1:0"
    scheduler = {"cls": Scheduler,
                 "options": {"dashboard_address": dashboard_address,
                             "dashboard": dashboard,
                             **({"host": host} if processes else
                                {"protocol": "inproc"})}}
    cls = Nanny if processes else Worker
    memory_limit = _worker_memory_limit(processes, cpu_workers + gpus)
    # else a worker listens on every interface: its port, and its HTTP server in process too
    listen = {"dashboard_address": f"{host}:0", **({"host": host} if processes else {})}
    workers = {}
    for i in range(cpu_workers):
        workers[f"cpu-{i}"] = {"cls": cls, "options": {
            "nthreads": 1, "name": f"cpu-{i}", "resources": {"CPU": 1},
            "memory_limit": memory_limit, **listen}}
    for i in range(gpus):
        options = {"nthreads": 1, "name": f"gpu-{i}", "resources": {"GPU": 1},
                   "memory_limit": memory_limit, **listen}
        if processes:  # as dask-cuda does: the worker's GPU first, seen as device 0
            options["env"] = {"CUDA_VISIBLE_DEVICES": _visible_devices(i)}
        workers[f"gpu-{i}"] = {"cls": cls, "options": options}
    import dask

    try:
        # the active memory manager would drop the replicas that runs scatter to every
        # worker, and a page rerun after a worker dies would lose its inputs; without a
        # dashboard nobody sees the event loop's profile, whose thread wakes every 10 ms
        # Dask's MALLOC_TRIM_THRESHOLD_ for worker processes pins glibc's mmap threshold:
        # every vertex-sized temporary of an iteration would be mapped and faulted anew
        with dask.config.set({"distributed.scheduler.active-memory-manager.start": False,
                              "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_":
                                  None,
                              **({} if dashboard else
                                 {"distributed.worker.profile.enabled": False})}):
            return SpecCluster(workers=workers, scheduler=scheduler,
                               silence_logs=logging.ERROR)
    except Exception as exc:  # Dask raises many kinds on a failed start
        raise ClusterError(f"the local Dask cluster did not start: {exc}") from exc


def _dashboard_or_none(address):
    """``address``, or None (with a warning) when bokeh, which Dask's dashboard needs,
    is missing."""
    if address is None:
        return None
    try:
        import bokeh  # noqa: F401
    except ImportError:
        log.warning("the Dask dashboard needs bokeh: pip install 'hetgraph[dashboard]'")
        return None
    return address


def _visible_devices(i):
    try:
        from dask_cuda.utils import cuda_visible_devices

        return cuda_visible_devices(i)
    except ImportError:
        count = gpu_count()
        return ",".join(str((i + k) % count) for k in range(count))


def _free_dashboard_address(address):
    """``address`` when its port is free, else the same host on a free port."""
    import socket

    host, _, port = address.rpartition(":")
    with contextlib.closing(socket.socket()) as probe:
        try:
            probe.bind((host or "127.0.0.1", int(port)))
        except OSError:
            return f"{host}:0"
    return address


def current_cluster():
    """The innermost ``with hg.Cluster()``, else None (runs then take the embedded one)."""
    return _CURRENT[-1] if _CURRENT else None


@contextlib.contextmanager
def cluster_for(cluster):
    """``cluster``, else the innermost ``with hg.Cluster()``, else the embedded cluster
    (:func:`embedded_cluster`)."""
    if cluster is not None:
        if not isinstance(cluster, Cluster):
            raise ClusterError(f"cluster={cluster!r} is not a hetgraph.Cluster; create one "
                               f"with hg.Cluster() or pass None")
        yield cluster
    elif _CURRENT:
        yield _CURRENT[-1]
    else:
        yield embedded_cluster()


_EMBEDDED = {"cluster": None, "hooked": False}  # the embedded cluster; exit hook set?
_EMBEDDED_LOCK = threading.Lock()


def embedded_cluster() -> Cluster:
    """The local in-process cluster (no dashboard) of the runs given no cluster: started
    by the first such run and kept until the process exits or
    :func:`close_embedded_cluster` (starting and closing one per run would cost more
    than a small graph's whole run). One that stopped is replaced."""
    with _EMBEDDED_LOCK:
        cluster = _EMBEDDED["cluster"]
        if cluster is not None and cluster.running():
            return cluster
        if cluster is not None:
            _close_quietly(cluster)
        if not _EMBEDDED["hooked"]:
            atexit.register(close_embedded_cluster)  # runs before Dask's own exit hooks
            _EMBEDDED["hooked"] = True
        _EMBEDDED["cluster"] = Cluster(dashboard_address=None)
        return _EMBEDDED["cluster"]


def close_embedded_cluster():
    """Stop the embedded cluster, if one runs.

    Runs given no cluster, outside any ``with hg.Cluster()``, share one local
    in-process cluster, started by the first of them and kept until the process exits.
    This stops it now (to free its threads and GPU memory); a later such run starts a
    new one. Does nothing when none runs.

    Examples
    --------
    >>> import hetgraph as hg
    >>> from hetgraph.cluster import close_embedded_cluster
    >>> levels = hg.bfs(hg.generate.grid(3, 3), 0)
    >>> close_embedded_cluster()
    """
    with _EMBEDDED_LOCK:
        cluster, _EMBEDDED["cluster"] = _EMBEDDED["cluster"], None
        if cluster is not None:
            _close_quietly(cluster)


def _close_quietly(cluster):
    try:
        cluster.close()
    except Exception as exc:  # a broken cluster may fail to close in many ways
        log.debug("closing the embedded cluster: %s", exc)


__all__ = ["Cluster", "ClusterError", "WorkerLostError", "close_embedded_cluster", "cluster_for",
           "embedded_cluster", "gpu_count", "gpu_index"]

