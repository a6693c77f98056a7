"""Engines: a program's iterations on one device, behind one interface (:mod:`.base`).

- :mod:`.base`: :class:`Engine`, the interface the scheduler's tasks call;
- :mod:`.cpu_modes`: the CPU mode of an iteration (pull, notify-pull, push);
- :mod:`.cpu`: :class:`CpuEngine`, the Numba kernels over a graph in memory;
- :mod:`.store`: :class:`StoreEngine`, the CPU engine on a page store, out of core;
- :mod:`.gpu`: :class:`GpuEngine`, one GPU (CuPy, imported when an engine is made);
- :mod:`.store_gpu`: the GPU engine on a page store, out of core;
- :mod:`.subway`: a GPU engine's streamed iterations over the active subgraph (Subway);
- :mod:`.colored`: colored execution (Frog): the colors' shards, a pass per color on the CPU;
- :mod:`.gpu_colored`: a colored pass on one GPU, replayed as one CUDA graph;
- :mod:`.multigpu`: :class:`MultiGpuEngine`, several GPUs of this process, each its
  range of pages, values copied GPU to GPU.
"""
