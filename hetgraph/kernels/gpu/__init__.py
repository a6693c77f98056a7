"""The GPU side of the kernels (CuPy), one concern a module; the engine that drives
them is :class:`hetgraph.engines.gpu.GpuEngine`. Import from the module itself:

- :mod:`.device`: whether a GPU can run (``availability``, ``require_gpu``), its errors,
  the current device (``use_device``), device copies of host arrays and page-locked
  host memory (``pinned_empty``, ``pinned_copy``).
- :mod:`.layout`: a page's edges as the shard kernel reads them (``page_layout``), which
  pages stay on the device (``PagePlan``) and a graph's pages on it (``DevicePages``).
- :mod:`.kept`: the layout kept on each device for later runs (``device_pages``,
  ``release``).
- :mod:`.source`: the shard kernel's CUDA source for a program, in named pieces
  (``kernel_source``), and its compilation (``compile_kernel``).
- :mod:`.launch`: raw launches with their arguments packed once (``PackedLaunch``).
- :mod:`.replay`: a fixed sequence of launches and copies replayed as one CUDA graph
  (``GraphReplay``).
- :mod:`.swept`: a colored run's constant summed again after each color (``SweptSums``).
- :mod:`.reduce`: small device reductions (a hook's ``indexed_sum``, ``normalize``, a
  convergence test's ``WeightedChange``, the frontier's count).
- :mod:`.tocab`: GraphCage's cache blocking of the pull (TOCAB): source ranges sized
  from the L2, segments, per-range partial sums merged per shard.
- :mod:`.components`: connected components on one GPU (ECL-CC style union-find).
- :mod:`.subgraph`: the active subgraph of a streamed iteration, on the host (Subway):
  active list, offsets, chunks, gather, bytes.
- :mod:`.spans`: an iteration's copies in and active-subgraph generation, timed by
  events (``IterationTimes``).
- :mod:`.push`: the push kernels of incremental programs over such a subgraph
  (``compile_push``).

No module here imports cupy when it is imported: the package imports without a GPU.
"""
