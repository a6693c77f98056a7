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

# --- segments and calibration (hetgraph.scheduler.tasks) --------------------------------------

# --- cost model and dispatcher (hetgraph.scheduler) -------------------------------------------

# --- cluster, progress and dashboard ----------------------------------------------------------
