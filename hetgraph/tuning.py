"""Tuning constants: every value that trades speed for something else, in one place.

Each constant says what it is and why it has its value, in a line. The measurements
behind the values are in ``docs/tuning.md`` (which cites ``bench/results/*.json``).
Modules read them as ``tuning.NAME`` when they run, so a test or a user can change one
for a process (``hetgraph.tuning.SEGMENT_SECONDS = 0.5``).
"""

# --- reading and building graphs (hetgraph.io) -----------------------------------------------

# --- partition: shards and pages (hetgraph.io.partition) ---------------------------------------

# --- CPU kernels (hetgraph.kernels.cpu, hetgraph.engines.cpu) ---------------------------------

# --- GPU engine (hetgraph.kernels.gpu, hetgraph.engines.gpu) ----------------------------------

GPU_STREAMS = 4  # CUDA streams copying streamed pages, so one page's copy overlaps another's pass
GPU_SHARED_BYTES = 16 << 10  # shared memory a block's replicas may use: more blocks fit an SM
GPU_THREADS_PER_BLOCK = 256  # threads of a shard kernel's block (one block a shard)
GPU_BUDGET_FRACTION = 0.8  # of the free device memory kept for edges when no budget is given
GPU_EDGE_UNROLL = 4  # edges a thread gathers at once: their independent loads overlap

# --- segments and calibration (hetgraph.scheduler.tasks) --------------------------------------

# --- cost model and dispatcher (hetgraph.scheduler) -------------------------------------------

# --- cluster, progress and dashboard ----------------------------------------------------------
