"""CPU kernels (Numba): a VertexProgram's gather / apply / activate over the graph, one
module per pass kind.

The pass kinds (Garaph section 4, and beyond it): a pull (:mod:`.pull`) computes a
contiguous range or a sorted list of vertices from their in-edges, cut into equal edge
ranges run in parallel; a sparse notify-pull (:mod:`.sparse`) and a push (:mod:`.push`)
run one whole iteration in one thread from a small frontier's ids; a burst
(:mod:`.burst`) runs many of those in one compiled call, optionally over priority
buckets (:mod:`.buckets`). Writing to a second array gives sync execution; writing to
the values themselves async execution (values visible at once); a push writes in place
either way. :mod:`.kernel` assembles a program's passes into a :class:`CpuKernel`,
compiled once per program and kept for the process; the program-independent helpers of
:mod:`.frontier` are cached on disk. The passes share :mod:`.vertexops` (the program's
functions and the per-vertex operations they inline), :mod:`.structs` (the NamedTuples
they take as arguments) and :mod:`.clock` (a clock compiled code can read).
Beside them: :mod:`.threads` (helper threads claiming a pass's parts),
:mod:`.direct` (whole algorithms in one compiled call, for small graphs),
:mod:`.components` (connected components by Afforest) and :mod:`.diskcache` (the
compiled passes kept on disk).
"""

from ...program import ProgramError
from .frontier import (active_ids, commit, compact, edge_prefix, frontier_size,
                       mark_changed, notify, replace_value, weighted_change)
from .kernel import CpuKernel, compile_program
from .structs import ALL_VERTICES, NO_LIMIT

__all__ = ["ALL_VERTICES", "NO_LIMIT", "CpuKernel", "compile_program", "frontier_size",
           "notify", "mark_changed", "compact", "commit", "edge_prefix", "active_ids",
           "replace_value", "weighted_change", "ProgramError"]
