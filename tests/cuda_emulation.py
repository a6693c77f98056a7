"""The CUDA kernels of a colored GPU pass run on the CPU, for tests on a machine without
a GPU: the kernel text, compiled by g++ (C++20) with a shim for the CUDA built-ins it
uses, each launch's blocks one after the other, a block's threads as fibers of one
thread (ucontext: ``__syncthreads`` waits for the block's fibers, a warp's shuffles
for its 32; a fiber runs until it waits, the next one then), and a stand-in for the
few CuPy calls that ``engines/gpu_colored.py`` and
``kernels/gpu/{launch,replay,swept,source}.py`` make (:func:`fake_cupy`): device arrays
are NumPy arrays in host memory, whose pointers the kernels read and write. Not a
timing model: only the answers mean anything (shared-memory atomics add in the
fibers' order, as a GPU's add in any order)."""

import ctypes
import hashlib
import os
import subprocess
import tempfile
import types

import numpy as np

SHIM = r"""
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <type_traits>
#include <utility>
#include <vector>
#include <ucontext.h>
using namespace std;

struct hg_dim3 { unsigned int x, y, z; };
static hg_dim3 threadIdx = {0, 0, 0}, blockIdx = {0, 0, 0};
static hg_dim3 blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
struct int4 { int x, y, z, w; };
static unsigned char* hg_dynamic_shared;

/* a block's threads as fibers: each runs until it waits at a barrier (the block's, or
   its warp's: 32 fibers), then the scheduler (hg_run_block) runs the next that can */
struct hg_fiber { ucontext_t context; bool done; int group; unsigned generation; };
static vector<hg_fiber> hg_fibers;
static ucontext_t hg_scheduler;
static unsigned hg_generation[33];  /* (groups: the 32 warps, then the block) */
static unsigned hg_arrived[33];
static function<void()> hg_body;

static void hg_wait(int group, unsigned members) {
  hg_fiber& me = hg_fibers[threadIdx.x];
  if (++hg_arrived[group] == members) {
    hg_arrived[group] = 0;
    ++hg_generation[group];
    return;
  }
  me.group = group;
  me.generation = hg_generation[group];
  swapcontext(&me.context, &hg_scheduler);
}

static void hg_fiber_main() {
  hg_body();
  hg_fibers[threadIdx.x].done = true;
  swapcontext(&hg_fibers[threadIdx.x].context, &hg_scheduler);
}

static void hg_run_block(unsigned threads, vector<vector<char>>& stacks) {
  hg_fibers.assign(threads, hg_fiber{});
  for (unsigned t = 0; t < threads; ++t) {
    hg_fiber& f = hg_fibers[t];
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = stacks[t].data();
    f.context.uc_stack.ss_size = stacks[t].size();
    f.context.uc_link = nullptr;
    f.group = -1;
    makecontext(&f.context, hg_fiber_main, 0);
  }
  for (unsigned left = threads; left;) {
    bool ran = false;
    for (unsigned t = 0; t < threads; ++t) {
      hg_fiber& f = hg_fibers[t];
      if (f.done || (f.group >= 0 && hg_generation[f.group] == f.generation)) continue;
      f.group = -1;
      threadIdx = {t, 0, 0};
      swapcontext(&hg_scheduler, &f.context);
      ran = true;
      if (f.done) --left;
    }
    if (!ran) {
      fprintf(stderr, "emulated block %u: its threads wait forever\n", blockIdx.x);
      abort();
    }
  }
}

#define __global__
#define __device__ static inline
#define __forceinline__
#define __noinline__
#define __restrict__ __restrict
#define __shared__ static

static inline void __syncthreads() { hg_wait(32, blockDim.x); }
static inline void __threadfence() {}
template <class T> static inline T hg_load(const T* p) { return *(const volatile T*)p; }
template <class T> static inline T __ldcs(const T* p) { return hg_load(p); }
template <class T> static inline T __ldcg(const T* p) { return hg_load(p); }
template <class T> static inline T __ldca(const T* p) { return hg_load(p); }
static inline int4 __ldca(const int4* p) { return *p; }
static inline float __int_as_float(int x) { float f; memcpy(&f, &x, 4); return f; }
static inline int __float_as_int(float x) { int i; memcpy(&i, &x, 4); return i; }
static inline double __longlong_as_double(long long x) {
  double d; memcpy(&d, &x, 8); return d;
}
static inline long long __double_as_longlong(double x) {
  long long i; memcpy(&i, &x, 8); return i;
}

/* lane `from` of this thread's warp (-1: this thread's own value), every lane calling */
template <class T> static T hg_shuffle(T v, int from) {
  static T slots[1024];
  const int tid = threadIdx.x, warp = tid >> 5;
  slots[tid] = v;
  hg_wait(warp, 32);
  const T r = from < 0 ? v : slots[(warp << 5) + from];
  hg_wait(warp, 32);
  return r;
}
template <class T> static T __shfl_down_sync(unsigned, T v, int d) {
  const int lane = threadIdx.x & 31;
  return hg_shuffle(v, lane + d < 32 ? lane + d : -1);
}
template <class T> static T __shfl_up_sync(unsigned, T v, int d) {
  const int lane = threadIdx.x & 31;
  return hg_shuffle(v, lane - d >= 0 ? lane - d : -1);
}
template <class T> static T __shfl_sync(unsigned, T v, int from) {
  return hg_shuffle(v, from & 31);
}

template <class T> static T atomicAdd(T* p, T v) { return atomic_ref<T>(*p).fetch_add(v); }
template <class T> static T atomicOr(T* p, T v) { return atomic_ref<T>(*p).fetch_or(v); }
template <class T> static T atomicAnd(T* p, T v) { return atomic_ref<T>(*p).fetch_and(v); }
template <class T> static T atomicCAS(T* p, T expected, T desired) {
  atomic_ref<T>(*p).compare_exchange_strong(expected, desired);
  return expected;
}
template <class T> static T atomicMin(T* p, T v) {
  atomic_ref<T> a(*p);
  T old = a.load();
  while (v < old && !a.compare_exchange_weak(old, v)) {}
  return old;
}
template <class T> static T atomicMax(T* p, T v) {
  atomic_ref<T> a(*p);
  T old = a.load();
  while (v > old && !a.compare_exchange_weak(old, v)) {}
  return old;
}
"""

LAUNCHER = r"""
template <class... A, size_t... I>
static void hg_call(void (*kernel)(A...), void** args, index_sequence<I...>) {
  kernel(*reinterpret_cast<remove_cv_t<A>*>(args[I])...);
}

template <class... A>
static void hg_launch(void (*kernel)(A...), unsigned blocks, unsigned threads,
                      size_t shared, void** args) {
  gridDim = {blocks, 1, 1};
  blockDim = {threads, 1, 1};
  vector<double> dynamic(shared / sizeof(double) + 2);
  hg_dynamic_shared = reinterpret_cast<unsigned char*>(dynamic.data());
  vector<vector<char>> stacks(threads, vector<char>(1 << 16));
  hg_body = [&] { hg_call(kernel, args, index_sequence_for<A...>{}); };
  for (unsigned b = 0; b < blocks; ++b) {  /* (its static shared memory: the next's) */
    blockIdx = {b, 0, 0};
    hg_run_block(threads, stacks);
  }
}
"""

_BUILT = {}  # source digest -> ctypes library
_KERNELS = {}  # fake function pointer -> (its launch entry, the function)


def _build(code, names):
    """The ctypes library of the CUDA ``code`` compiled for the CPU, with an entry
    ``hg_launch_<name>(blocks, threads, shared bytes, void** args)`` per kernel."""
    dynamic = "extern __shared__ __align__(8) unsigned char hg_shared[];"
    source = (SHIM + code.replace(dynamic, "unsigned char* hg_shared = hg_dynamic_shared;")
              + LAUNCHER + "".join(
                  f'extern "C" void hg_launch_{n}(unsigned b, unsigned t, size_t s, '
                  f'void** a) {{ hg_launch(&{n}, b, t, s, a); }}\n' for n in names))
    digest = hashlib.sha256(source.encode()).hexdigest()[:20]
    library = _BUILT.get(digest)
    if library is None:
        folder = os.path.join(tempfile.gettempdir(), "hetgraph-cuda-emulation")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"{digest}.so")
        if not os.path.exists(path):
            mine = f"{path}.{os.getpid()}"  # (another process may build the same)
            with open(mine + ".cpp", "w") as f:
                f.write(source)
            done = subprocess.run(["g++", "-std=c++20", "-O1", "-w", "-shared", "-fPIC",
                                   "-o", mine, mine + ".cpp"],
                                  capture_output=True, text=True)
            os.remove(mine + ".cpp")
            if done.returncode:
                raise RuntimeError(done.stderr[-4000:])
            os.replace(mine, path)
        library = _BUILT[digest] = ctypes.CDLL(path)
    return library


class _Function:
    """A compiled kernel as CuPy's RawKernel shows it to hetgraph (``kernel.ptr``,
    ``max_dynamic_shared_size_bytes``)."""

    def __init__(self, library, name):
        entry = getattr(library, f"hg_launch_{name}")
        entry.argtypes = (ctypes.c_uint, ctypes.c_uint, ctypes.c_size_t, ctypes.c_void_p)
        self.kernel = types.SimpleNamespace(ptr=id(self))
        self.max_dynamic_shared_size_bytes = 0
        _KERNELS[id(self)] = (entry, self)  # (kept: the id stays this object's)


class DeviceArray(np.ndarray):
    """A "device" array: host memory, with CuPy's ``data.ptr``, ``set`` and ``get``."""

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.ctypes.data)

    def set(self, host, stream=None):
        self[...] = host

    def get(self, stream=None, out=None):
        if out is None:
            return np.array(self)
        out[...] = self
        return out


def device(array):
    """A DeviceArray copy of ``array``."""
    return np.array(array).view(DeviceArray)


class _Stream:
    ptr = 0

    def begin_capture(self):
        raise RuntimeError("no graph capture in the emulation")


def fake_cupy():
    """A stand-in module for the CuPy calls of a colored pass."""
    def made(f):
        return lambda *a, **k: f(*a, **k).view(DeviceArray)

    class Module:
        def __init__(self, code, options=()):
            self.code = code

        def get_function(self, name):
            return _Function(_build(self.code, [name]), name)

    def launch(function, gx, gy, gz, bx, by, bz, shared, stream, args, extra):
        _KERNELS[function][0](gx, bx, shared, args)

    runtime = types.SimpleNamespace(
        memcpyDeviceToDevice=3, memcpyDeviceToHost=2, memcpyDefault=4,
        memcpyAsync=lambda dst, src, size, kind, stream: ctypes.memmove(dst, src, size),
        memsetAsync=lambda ptr, value, size, stream: ctypes.memset(ptr, value, size),
        getDevice=lambda: 0, CUDARuntimeError=RuntimeError)
    cuda = types.SimpleNamespace(runtime=runtime,
                                 driver=types.SimpleNamespace(launchKernel=launch),
                                 compiler=types.SimpleNamespace(
                                     CompileException=RuntimeError),
                                 Stream=lambda non_blocking=False: _Stream(),
                                 get_current_stream=_Stream)
    return types.SimpleNamespace(
        ndarray=DeviceArray, cuda=cuda, RawModule=Module,
        RawKernel=lambda code, name: Module(code).get_function(name),
        empty=made(np.empty), zeros=made(np.zeros), ones=made(np.ones),
        empty_like=made(np.empty_like), asarray=made(np.array),
        uint8=np.uint8, uint32=np.uint32, uint64=np.uint64, int32=np.int32,
        int64=np.int64, float32=np.float32, float64=np.float64)
