"""Tuning constants: every value that trades speed for something else, in one place.

Each constant says what it is and why it has its value, in a line. The measurements
behind the values are in ``docs/tuning.md`` (which cites ``bench/results/*.json``).
Modules read them as ``tuning.NAME`` when they run, so a test or a user can change one
for a process (``hetgraph.tuning.SEGMENT_SECONDS = 0.5``).
"""

# --- reading and building graphs (hetgraph.io) -----------------------------------------------

# --- partition: shards and pages (hetgraph.io.partition) ---------------------------------------

# --- CPU kernels (hetgraph.kernels.cpu, hetgraph.engines.cpu) ---------------------------------

# a notify-pull iteration whose frontier has at most this many out-edges runs in one
# thread from the frontier's id list, with no pass over all vertices
SPARSE_EDGES = 50_000
# passes reading fewer edges run in one thread unless partitions= is given: the CPU mode
# rule was tuned with this bound, and a lower one pulls levels that push faster
SERIAL_EDGES = 150_000

# --- GPU engine (hetgraph.kernels.gpu, hetgraph.engines.gpu) ----------------------------------

# iterations a GPU segment keeps launched ahead of the one it waits for, so that the
# host's work between iterations overlaps the device's (1 when pages are streamed)
QUEUED = 3

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

# a push's seconds per frontier edge (one thread) over a pull's per edge (one thread):
# each push edge is a random read-modify-write of its target's value
PUSH_EDGE_COST = 2.0
# under devices="auto" a graph of at most this many arcs runs on the CPU: the GPU would
# save less per iteration than its calibration costs
SMALL_ARCS = 1 << 20
# in process, a run's segments run in the calling thread until they took this long in
# all, and later ones as tasks: a task's round trip outweighs a short run
INLINE_SECONDS = 1.0
LOST_TASK_RETRIES = 3  # a page task whose inputs died with a worker is sent again

# --- cluster, progress and dashboard ----------------------------------------------------------
