"""Tuning constants: every value that trades speed for something else, in one place.

Each constant says what it is and why it has its value, in a line. The measurements
behind the values are in ``docs/tuning.md`` (which cites ``bench/results/*.json``).
Modules read them as ``tuning.NAME`` when they run, so a test or a user can change one
for a process (``hetgraph.tuning.SEGMENT_SECONDS = 0.5``).
"""

# --- reading and building graphs (hetgraph.io) -----------------------------------------------
BLOCK_BYTES = 32 << 20  # text parsed per task: amortizes a task; 2 per thread are in flight
SEGMENT_CHUNKS = 8  # equal-edge runs per thread in segment sorts: hubs sort slower per edge
CURSOR_BYTES = 256 << 20  # memory the per-chunk cursors of a parallel counting sort may take
TWO_PASS_WORK = 2  # a two-pass counting sort's work per item over a one-pass sort's: two
# passes run when one pass's chunks times this fall short of the threads
DRAW_PART = 1 << 22  # random values a thread draws at a time (a generator's copy each): small
# enough that the parts spread over the threads, large enough that a copy's start is lost
CRC_CHUNK = 64 << 20  # bytes per zlib.crc32 call of a store block's checksum
CHECK_THREADS = 4  # threads of an out-of-core page cache checking the blocks its I/O threads read
# (CRC32, ids, offsets), so that a stripe's thread reads on meanwhile: a thread checks a block
# in about as long as the disk reads it (0: each stripe's I/O thread checks what it reads)
LOAD_THREADS = 8  # threads reading and checking a store's page blocks as it loads (and writing
# them as it is saved): CRC32 and id checks run at about 1-2 GB/s a thread, so one thread made
# loading cost seconds
SKEW_FOR_DEGREE_ORDER = 4.0  # order="auto": degree order when sum(d^2)/|E| >= this * mean degree
RCM_SPAN_GAIN = 4.0  # order="auto", no hubs: RCM's order when it cuts the median arc span this much
SPAN_SAMPLES = 1 << 16  # arcs median_arc_span reads at most: the median is stable long before
ORDER_SERIAL_ARCS = 1 << 20  # fewer arcs: reorder on one Numba thread (its parallel passes
# saved less than waking the pool costs, and a busy core made each wait a time slice)
WEIGHT_SAMPLE = 65_536  # edge weights sssp reads to choose its bucket width (their mean)

# --- input limits (hetgraph.io.limits, hetgraph.scheduler.checkpoint) -------------------------
# bytes a graph needs at least per vertex (its two int64 pointer arrays) and per arc (an
# int32 id each way): a declared size beyond memory at these rates is refused before
# anything is allocated, and the estimate never refuses a graph that would fit
GRAPH_VERTEX_BYTES = 16
GRAPH_ARC_BYTES = 8
# bytes a compressed input may inflate to per compressed byte read: text edge lists
# compress 3-20x, a decompression bomb about 1000x
MAX_INFLATION = 200
INFLATION_ALLOWANCE = 64 << 20  # bytes any compressed input may inflate to regardless
MAX_LINE_BYTES = 256 << 20  # bytes of one text line: a METIS line of a hub's ~20M neighbours
# a save's temporaries (.partial) whose writer left no live process behind are removed
# by the next save to the same place; one without its owner file only after this long
STALE_PARTIAL_SECONDS = 3600.0

# --- partition: shards and pages (hetgraph.partition) ------------------------------------------
PAGE_BYTES = 32 << 20  # edge bytes per page: the unit of transfer, I/O and scheduling
SHARED_BYTES = 48 << 10  # shared memory one GPU block may use for a shard's values (bytes)
MAX_SHARD_EDGES = 1 << 16  # in-edges per shard (one GPU block's work) unless one vertex has more
TARGET_SHARDS = 1024  # small graphs: |E| / this in-edges a shard, ~ the blocks a GPU runs at once
MIN_SHARD_EDGES = 1 << 10  # ... but no fewer in-edges than this per shard
PARTITIONS_KEPT = 4  # partitions a graph keeps (by their options) for later runs

# --- CPU kernels (hetgraph.kernels.cpu, hetgraph.engines.cpu) ---------------------------------

# a notify-pull iteration whose frontier has at most this many out-edges runs in one
# thread from the frontier's id list, with no pass over all vertices
SPARSE_EDGES = 50_000
# passes reading fewer edges run in one thread unless partitions= is given: the CPU mode
# rule was tuned with this bound, and a lower one pulls levels that push faster
SERIAL_EDGES = 150_000
# edge ranges a thread of a parallel pull claims on average: the threads claim them one at
# a time, so a thread held back by other work on the machine delays the pass by one range
PULL_PARTS_PER_THREAD = 4
# ... while each range keeps this many edges: a range's claim and call hold the GIL,
# which the threads of a pass over short ranges wait for in turn
PULL_PART_EDGES = 1 << 18
# a sync pull that stops reading a vertex once settled (bottom-up BFS) is cut into ranges
# of equal cost, a vertex costing its in-degree up to this many edges: a hub settles
# after a few, while the low-degree end reads all of its own
PULL_STOP_EDGES = 8
# a pull that could run spread over threads runs so or alone by the seconds an edge each
# way took lately (a machine shared with other work may make one thread faster): the
# moving average's weight of a new pass, and after how many passes the other way is
# tried again (doubled after each try that confirms the choice, up to the most)
SPREAD_WEIGHT = 0.3
SPREAD_PROBE = 8
SPREAD_PROBE_MAX = 256
# from this many threads a spread pass may also run on Numba's OpenMP threads (no GIL
# hand-over, but spinning waits), chosen by speed as above; fewer keep the helper
# threads alone and never compile the parallel pull (docs/tuning.md)
OPENMP_MIN_THREADS = 4
# a whole pull of a graph of hostile order (more vertices than DIRECT_CACHED_VERTICES, a
# median arc span above DIRECT_HOSTILE_SPAN) without hubs (in-degree skew at most
# PULL_AHEAD_SKEW) prefetches the source values of the edges this many places ahead:
# each of a vertex's few in-edges reads a value far from the last (docs/tuning.md)
PULL_AHEAD = 64
PULL_AHEAD_SKEW = 8.0

# --- GPU engine (hetgraph.kernels.gpu, hetgraph.engines.gpu) ----------------------------------

GPU_STREAMS = 4  # CUDA streams copying streamed pages, so one page's copy overlaps another's pass
GPU_SHARED_BYTES = 16 << 10  # shared memory a block's replicas may use: more blocks fit an SM
GPU_THREADS_PER_BLOCK = 256  # threads of a shard kernel's block (one block a shard)
GPU_BUDGET_FRACTION = 0.8  # of the free device memory kept for edges when no budget is given
GPU_EDGE_UNROLL = 4  # edges a thread gathers at once: their independent loads overlap
# iterations a GPU segment keeps launched ahead of the one it waits for, so that the
# host's work between iterations overlaps the device's (1 when pages are streamed)
QUEUED = 3
# runs a GPU's resident pages are launched in when several GPUs share a sync run: one
# run's values cross to the other GPUs while the next run computes (the last run's copy
# is the only one the next iteration waits for)
MULTI_GPU_RUNS = 4
# ... but one run a this many bytes of the GPU's own values: a range of a few hubs goes in
# one run (more runs leave the pass a tail each)
MULTI_GPU_RUN_BYTES = 16 << 20
# a destination vertex's cost in a GPU pull pass, in edges: GPUs share pages by it
GPU_VERTEX_EDGES = 1.5

# --- cache blocking of the GPU pull (hetgraph.kernels.gpu.tocab; GraphCage's TOCAB) -------------
# a source range's values take this share of the device's L2 (queried): the share whose
# passes were fastest in bench/graphcage.py's sweep (GraphCage's Fig. 11), see docs/tuning.md
TOCAB_L2_SHARE = 2.0
# passes of each kernel (shard, TOCAB) timed before an engine keeps the faster (fastest
# pass each: the first of a kernel warms it)
TOCAB_CALIBRATION_PASSES = 3
# destination ids moved to launch order at a time when TOCAB's segments are built: bounds
# the build's device scratch (about 40 bytes an id) on graphs of billions of arcs
TOCAB_BUILD_CHUNK = 1 << 26
# in-edges a block of TOCAB's segments kernel takes at least (a tile of one range's
# segments of consecutive shards) before it starts another: about a shard kernel block's
TOCAB_TILE_EDGES = 1 << 12

# --- active subgraphs and the GPU push (hetgraph.kernels.gpu.subgraph, .push; Subway) -----------
# a streamed GPU iteration of an incremental program copies only its active vertices'
# out-edges into the streamed pages (Subway's SubCSR) while their out-degree sum is under
# this share of the arcs (Subway's 80%): beyond it, building the subgraph costs more than
# streaming the pages saves
SUBGRAPH_ACTIVE_EDGES = 0.8
# streamed iterations under that threshold, streamed because a subgraph iteration was
# predicted slower, before one is tried again (twice as many after each try it loses, up
# to the most): a prediction from one slow push must not hold for the engine's life
SUBGRAPH_PROBE = 4
SUBGRAPH_PROBE_MAX = 64
# a due try waits for a frontier of at most this many chunks' edges (a staging buffer's
# each): a try that loses then costs a few chunks' gathers, not a whole graph's
SUBGRAPH_PROBE_CHUNKS = 2
# async-subgraph mode: pushes over one loaded subgraph at most, however long its
# vertices keep changing each other (a bound on a chunk's stay, not a tuned speed)
SUBGRAPH_INNER_PASSES = 10_000
PUSH_THREAD_DEGREE = 16  # out-edges up to which a GPU push gives a vertex one thread (ECL-CC's)
PUSH_WARP_DEGREE = 1024  # ... up to which one warp; beyond, the whole grid a vertex (hubs)
PUSH_THREADS_PER_BLOCK = 256  # threads of a push kernel's block
PUSH_MAX_BLOCKS = 1 << 12  # blocks of a push launch at most; the kernels loop over the rest

# --- segments and calibration (hetgraph.scheduler.tasks) --------------------------------------

# a segment returns to the driver after this long, for progress and the dashboard
SEGMENT_SECONDS = 1.0
# a segment asks the cost model where to go, and folds its rows into it, at most this
# often: a question costs several microseconds, as much as a short GPU iteration
CHOOSE_SECONDS = 1e-3
# a GPU segment of short iterations far ahead (alpha > 2) asks again only after
# CHOOSE_SECONDS * alpha / 2, at most this many times CHOOSE_SECONDS
CHOOSE_BACKOFF = 8
# a CPU burst placed by the model while the CPU leads runs while its frontier stays
# within the lead, for this long at most: a burst's start and end cost tens of us
LEAD_SECONDS = 64e-3
BURST_ROWS = 4096  # iterations of one burst at most (the size of its table of counts)
# pulls that calibrate a device: the first warms up, the fastest of the others counts
CALIBRATION_PULLS = 4
# pages the CPU's pull is calibrated on, spread evenly (a page's rate varies along a
# graph renumbered hubs first)
CALIBRATION_PAGES = 4
# a GPU's timed pull is a stretch of paced passes of about this many seconds ...
CALIBRATION_SECONDS = 1e-3
CALIBRATION_PASSES = 16  # ... and at most this many passes
CALIBRATION_ITERATIONS = 4  # first iterations of a run that its calibration times
# ... on the CPU while their frontier has at most this many out-edges (its fixed part,
# which the model cannot know before it measured one)
CALIBRATION_EDGES = SPARSE_EDGES

# --- cost model and dispatcher (hetgraph.scheduler) -------------------------------------------
# cost model (hetgraph.scheduler.costmodel) and page queue (hetgraph.scheduler.placement)
COST_SMOOTHING = 0.3  # weight of a new measurement in the model's running means: follows a
# change of speed within a few folds; with COST_OUTLIER, one batch raises a rate 1.6x at most
COST_OUTLIER = 3.0  # a measurement counts at most this many times what the model predicted
# for it: one stalled row must not send a run off a device it then never measures again
FIT_SPREAD = 0.5  # coefficient of variation the sizes measured need before a LinearFit
# fits a slope: sizes too alike cannot tell a fixed cost from a cost per edge
FIT_FIXED_MOST = 100e-6  # seconds: the largest fixed part a fit takes before its sizes
# spread, so that one large measurement does not price tiny iterations at milliseconds
LEAD_PRECISION = 64  # lead_degree's bisection stops within 1/64 of its answer: a burst
# limit needs no more, and each step costs a prediction
SWITCH_MARGIN = 0.2  # staying counts as a loss only while the other side is predicted
# this much faster: devices within each other's noise would otherwise trade the run
SETTLED_MARGIN = 0.2  # a call that runs on one device alone, as the model placed the call
# like it before, may be this much slower than that call before the model is asked again
# (or the model's measured error there, if more): as SWITCH_MARGIN, noise is no loss
PREDICTION_ERROR = 0.2  # relative error of a prediction before any of its kind was measured:
# a placement not measured yet is tried only for a gain above this share of its time
PREDICTION_ERROR_MOST = 1.0  # a measured error counts at most this much (100%): one stalled
# iteration must not lock a placement out for good
FOLD_ROWS = 16  # rows of a batch that fold into the model, the newest: their mean is its
# pace, and a fold row by row cost the host time in proportion to short iterations
RELAX_HALF_LIFE = 2e-3  # seconds away from a device in which its inflated rates move half
# the way back to their lowest: slowdowns last milliseconds, however many iterations
CPU_BATCH_OVERHEAD_SHARE = 0.05  # a hybrid CPU batch holds up to round trip / this much
# work: the round trip costs it at most 5%, and small batches still follow measured times

# a push's seconds per frontier edge (one thread) over a pull's per edge (one thread):
# each push edge is a random read-modify-write of its target's value
PUSH_EDGE_COST = 2.0
# under devices="auto" a graph of at most this many arcs runs on the CPU: the GPU would
# save less per iteration than its calibration costs
SMALL_ARCS = 1 << 20
# a built-in algorithm's in-process CPU run on a graph of at most this many arcs runs
# whole as one compiled call (scheduler/direct.py): below SERIAL_EDGES the engine's
# passes are serial too, so one serial call loses nothing and saves the machinery
DIRECT_ARCS = 150_000
# a BFS (levels) runs whole as one compiled call on a graph of at most this many arcs: a
# serial queue reads each arc once and pays nothing per level, where the engine's
# levels cost a pass each (a grid's 2,000); the engine's threads win only above
DIRECT_LEVELS_ARCS = 1 << 22
# PageRank runs whole as one compiled call on a graph of at most this many arcs: above,
# the ranks no longer fit one thread's cache and the engine's threads win (docs/tuning.md)
DIRECT_PAGERANK_ARCS = 1 << 18
# the engine's threads those two bounds were measured against: a machine with more
# scales them down (scheduler/direct.py), never below DIRECT_ARCS
DIRECT_BOUND_THREADS = 2
# a direct traversal (BFS levels, components) of a graph of more vertices whose median
# arc spans more ids marks the vertices it reached in bits and prefetches the rows its
# queue names: N bytes or ints no longer stay in a core's cache, and the rows of a
# hostile order are scattered; an order of shorter spans keeps its reads near
DIRECT_CACHED_VERTICES = 1 << 17
DIRECT_HOSTILE_SPAN = 1 << 15  # (ids: 128 KB of int32 values)
DIRECT_SPAN_SAMPLES = 1024  # arcs read to find that median: a hostile order shows in a few
DIRECT_AHEAD = 64  # queue places ahead whose rows such a traversal prefetches
# the direct PageRank sums 4 vertices' in-edges side by side, the vertices sorted by
# in-degree within runs of this many ids: alike degrees pad a group's shorter ones little
DIRECT_LANES_WINDOW = 256
# in process, a run's segments run in the calling thread until they took this long in
# all, and later ones as tasks: a task's round trip outweighs a short run
INLINE_SECONDS = 1.0
LOST_TASK_RETRIES = 3  # a page task whose inputs died with a worker is sent again

# --- cluster, progress and dashboard ----------------------------------------------------------
# cluster (hetgraph.cluster)
CALIBRATIONS_KEPT = 16  # auto runs' calibrations a Cluster keeps for later runs (a few
# hundred bytes each): a later run of the same graph and program skips its calibration
DASK_BATCH_INTERVAL = 0.0  # seconds a local cluster's Dask comms batch messages (Dask's
# defaults: 2-10 ms a hop, four hops a task): an iteration waits for its tasks
CLUSTER_JOIN_TIMEOUT = 10.0  # seconds Cluster(address) waits for the scheduler before
# ClusterError: a scheduler that does not answer in that time is taken as not running
WORKER_WAIT_SECONDS = 60.0  # seconds a run waits for a worker to hold its graph again
# after its workers died (a nanny restarts one in seconds) before WorkerLostError
KEPT_ARRAY_BYTES = 16 << 10  # a run's arrays of at least this size (aux, a program's
# arrays derived from the graph) are kept on worker processes by content, not sent with
# each call: smaller ones cost less to send than to compare with the kept copy
ARRAYS_KEPT = 16  # such arrays a Cluster keeps per graph (the oldest let go first)
PLANS_KEPT = 8  # packed runs a Cluster, and a worker process its unpacked copies, keeps
# per graph for later runs of the same program and options (scheduler/tasks.py: pack)
# spread runs on worker processes (hetgraph.scheduler.spread, .exchange)
SPREAD_SEGMENTS = True  # a run on CPU (or GPU) worker processes alone keeps its state
# on the workers, pulls on several as spread segments, the state exchanged worker to worker
# (False: page tasks, the state through the client every iteration: the way before, which
# bench/processes.py measures beside)
SPREAD_ARCS = 1 << 20  # a graph of fewer arcs runs on one CPU worker process, not spread:
# its pull costs less than the owners' exchange of an iteration (docs/tuning.md)
OWNERS_PER_HOST = 1  # CPU worker processes of one host that a spread segment pulls on
# (0: every one): one with all the host's cores pulled faster than several exchanging
# their ranges (docs/tuning.md); spread segments then span hosts
SHARED_MEMORY_DIR = "/dev/shm"  # where spread owners of one host share their ranges
# (hetgraph.scheduler.hostshare): a copy through memory, not a socket; "" sends them
# over Dask's comms instead
SPARSE_PART_SHARE = 0.25  # an owner's range goes to its peers in a message as its
# changed values alone where they take less than this share of its bytes (between hosts)
GPU_SHARE_SLACK = 0.2  # GPU owners keep their shares of a spread run's pages until the
# slowest, by its measured speed, takes this much longer than the fastest (a new share
# lays its pages out again)
GPU_PEER_COPIES = True  # GPU worker processes of one host exchange their ranges GPU to
# GPU (CUDA IPC, hetgraph.scheduler.gpupeers); False: through host memory as CPU owners do
GPU_PEER_STAGES = 4  # range sizes whose staging buffers a GPU worker keeps for later runs
GPU_PEER_MAPPINGS = 64  # peers' staging buffers a GPU worker keeps mapped (the oldest unmapped)
BACK_FILES_KEPT = 4  # files a client keeps in SHARED_MEMORY_DIR for states handed back
# by its host's workers (hetgraph.scheduler.hostshare), each a state's size: made once,
# not a new file a call
ANSWER_STATE_BYTES = 1 << 18  # a state (values and flags) of at most this many bytes
# comes back from a worker of the client's host in the call's answer, not a file
REPEATS_KEPT = 4  # repeated calls whose worker contexts a cluster's client, and a worker
# process, keeps (hetgraph.scheduler.repeat; the oldest let go): each holds a small state
BACK_FILES_LENT = 2  # such files of one size a client lends to results at once (their
# values not copied out, the file kept by the result): beyond, the values are copied
PEER_CHECK_SECONDS = 0.5  # seconds a worker waits for a peer's part before it asks
# whether the peer still runs: a dead peer ends the wait within about this, a slow one
# is asked again
# checkpoints and calibration keys (hetgraph.scheduler.checkpoint)
CHECKPOINTS_KEPT = 2  # checkpoints a run keeps on disk: the newest, and one to resume
# from when the newest does not read back whole
CALIBRATION_KEY_SAMPLES = 1 << 12  # elements of a program's array that the calibration
# key's CRC32 reads: all of a large array cost milliseconds a run; a key that misses a
# change only reuses a calibration, which costs speed, never an answer
# progress bar and run events (hetgraph.scheduler.progress)
PROGRESS_DELAY = 2.0  # seconds a run runs before it draws a progress bar: short runs stay
# quiet
PROGRESS_REDRAW = 0.1  # seconds between two redraws of the bar, at least: a terminal
# write an iteration would cost more than a small iteration
EVENT_INTERVAL = 0.25  # seconds between two messages of history rows to the scheduler:
# Dask checks and sends each message, which costs more than a small iteration
EVENT_SEND_PERIOD = 0.05  # seconds between two sends of the queued run events by the
# client's event loop: waking the loop for every post costs as much as a small run
# dashboard (hetgraph.dashboard)
DASHBOARD_REFRESH_MS = 500  # milliseconds between two reads of the run events by the
# dashboard's hetgraph page

# --- networkx backend (hetgraph.nx_backend) ---------------------------------------------------
# a call on a graph with fewer arcs (undirected edges twice) than its function's entry
# runs NetworkX's own: below it a warm NetworkX call is faster than hetgraph's (measured
# by bench/nx_crossover.py; docs/tuning.md); a function not listed always runs on hetgraph
NX_MIN_ARCS = {
    "pagerank": 0,
    "hits": 0,
    "eigenvector_centrality": 310,
    "katz_centrality": 0,
    "single_source_dijkstra_path_length": 1_900,
    "multi_source_dijkstra_path_length": 2_000,
    "single_source_bellman_ford_path_length": 1_200,
    "shortest_path_length": 25_000,
    "single_source_shortest_path_length": 33_000,
    "bfs_layers": 6_500,
    "connected_components": 7_000,
    "weakly_connected_components": 2_100,
    "number_connected_components": 1_000,
    "is_connected": 8_000,
    "is_weakly_connected": 3_700,
    "node_connected_component": 12_000,
}

# --- connected components (hetgraph.algorithms.cc, hetgraph.kernels.*.components) -----------
CC_SAMPLE_NEIGHBOURS = 2  # in-neighbours Afforest links per vertex before the finish: the
# GAP benchmark's k; two already join most of a large component's vertices in one tree
CC_SAMPLE_ARCS = 1 << 16  # fewer arcs: plain union-find, one pass linking every edge
# (sampling's extra passes cost more than the edges they save; docs/tuning.md)
CC_PREFETCH_VERTICES = 16  # vertices ahead whose neighbours' parents a CPU pass
# prefetches: its reads are random, a cache miss each on an ordering-hostile graph
CC_FREQUENT_SAMPLES = 1024  # random vertices whose roots pick the large component (GAP's)
CC_PARALLEL_ARCS = 1 << 18  # fewer arcs: the serial passes (a parallel pass's thread
# start-up costs more than linking them; docs/tuning.md)
CC_PARALLEL_MIN_THREADS = 4  # fewer Numba threads (and no threads= given): the serial
# passes, whose union-find reads less than the threaded one's (two threads lost to one)
CC_TRAVERSE_DEGREE = 5.0  # edges read per vertex (in and out if directed) up to which a
# large graph of hostile order (DIRECT_HOSTILE_SPAN) takes the direct path's traversal
# over serial union-find: beyond, union-find skips more edges than its misses cost
CC_GPU_MIN_ARCS = 1 << 22  # fewer arcs: devices="auto" stays on the CPU (copying the
# edges to the GPU costs more than the CPU's whole run)
CC_GPU_MEMORY_FRACTION = 0.8  # of the GPU's free memory the edges and labels may take
# under devices="auto" (the rest for CuPy's pool and other runs)
CC_GPU_THREAD_DEGREE = 16  # in-degree up to which a vertex is one GPU thread's (ECL-CC's)
CC_GPU_WARP_DEGREE = 352  # ... up to which one warp's, beyond one block's (ECL-CC's)
CC_GPU_MAX_BLOCKS = 1 << 16  # blocks of a launch at most; kernels loop over the rest

# --- colored execution (hetgraph.coloring, mode="colored") ------------------------------------
FROG_COLORS = 5  # colors of a hybrid coloring, the last the hybrid partition: Frog's 5, whose
# first four hold most vertices of real graphs (DBLP 82.8%); more add passes of few vertices
FROG_LEVELS = 8  # times the coloring pass colors what the last left in the hybrid partition
# (whose Jacobi pass holds Gauss-Seidel back on power-law graphs: docs/tuning.md)
COLORED_SPARSE_SHARE = 0.25  # a color's marked vertices from which its pass computes it whole
# (an id list's pass costs its gather and its prefix: docs/tuning.md, "Colored execution")
GPU_COLORED_GRAPH = True  # a colored GPU pass (a launch a color) replays one CUDA graph,
# captured once per engine, instead of queuing its launches from Python every pass
GPU_COLORED_SPLIT = True  # a colored launch cuts a hub's shard (more in-edges than its
# color's shard bound) into parts run by several blocks: a color lasts its shards, not
# its largest hub (engines/gpu_colored.split_jobs)
