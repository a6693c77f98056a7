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
CRC_CHUNK = 64 << 20  # bytes per zlib.crc32 call of a store block's checksum
SKEW_FOR_DEGREE_ORDER = 4.0  # order="auto": degree order when sum(d^2)/|E| >= this * mean degree
RCM_SPAN_GAIN = 4.0  # order="auto", no hubs: RCM's order when it cuts the median arc span this much
SPAN_SAMPLES = 1 << 20  # arcs median_arc_span reads at most: the median is stable long before
WEIGHT_SAMPLE = 65_536  # edge weights sssp reads to choose its bucket width (their mean)

# --- partition: shards and pages (hetgraph.partition) ------------------------------------------
PAGE_BYTES = 32 << 20  # edge bytes per page: the unit of transfer, I/O and scheduling
SHARED_BYTES = 48 << 10  # shared memory one GPU block may use for a shard's values (bytes)
MAX_SHARD_EDGES = 1 << 16  # in-edges per shard (one GPU block's work) unless one vertex has more
TARGET_SHARDS = 1024  # small graphs: |E| / this in-edges a shard, ~ the blocks a GPU runs at once
MIN_SHARD_EDGES = 1 << 10  # ... but no fewer in-edges than this per shard
PARTITIONS_KEPT = 4  # partitions a graph keeps (by their options) for later runs

# --- CPU kernels (hetgraph.kernels.cpu, hetgraph.engines.cpu) ---------------------------------

# --- GPU engine (hetgraph.kernels.gpu, hetgraph.engines.gpu) ----------------------------------

# --- segments and calibration (hetgraph.scheduler.tasks) --------------------------------------

# --- cost model and dispatcher (hetgraph.scheduler) -------------------------------------------

# --- cluster, progress and dashboard ----------------------------------------------------------
