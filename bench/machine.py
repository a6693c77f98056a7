"""The machine a benchmark runs on: its description, written into every result JSON,
and :func:`settle`, called before every timed call."""

import gc
import os
import platform
import time


def settle():
    """Collect Python's garbage, then freeze what is left out of later collections
    (gc.freeze): a timed call then pays for no full collection of the 300,000-600,000
    objects that the process's imports and earlier calls made (200-400 ms each on the
    2-core VM, where one landed in about every 40 grid-1000 runs). 0.2 ms after the
    first (0.16 s)."""
    gc.collect()
    gc.freeze()


def settled_call(fn):
    """(``fn()``, its wall seconds), timed after :func:`settle`."""
    settle()
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def describe():
    """CPU model, cores, memory (GiB), OS and library versions."""
    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        mem = None
    versions = {}
    for name in ("numpy", "numba", "scipy", "pandas", "pyarrow", "dask", "hetgraph"):
        try:
            versions[name] = __import__(name).__version__
        except ImportError:
            pass
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(mem, 1) if mem else None,
            "os": platform.platform(), "python": platform.python_version(), "versions": versions,
            "gpus": _gpus()}


def _gpus():
    """The names of the GPUs CuPy sees (empty without CuPy or a GPU)."""
    try:
        import cupy

        runtime = cupy.cuda.runtime
        return [runtime.getDeviceProperties(i)["name"].decode()
                for i in range(runtime.getDeviceCount())]
    except Exception:  # no CuPy, no driver, no device: a machine without GPUs
        return []


def write_results(path, out, targets):
    """Write the bench result ``out`` with its ``targets`` list ({name, value, target,
    met}) as JSON to ``path`` (its folder made), and print the targets."""
    import json

    out["targets"] = targets
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print_targets(targets)


def print_targets(targets):
    """Print each target of a ``targets`` list, met or MISSED, one a line."""
    for target in targets:
        print(f"  target {'met' if target['met'] else 'MISSED'}: {target['name']} = "
              f"{target['value']} (target {target['target']})")


def built_or_stored(build, store=None):
    """(graph, seconds): ``build()``'s graph, or with ``store`` (a path) the graph saved
    there by an earlier run, else built and saved there (a large RMAT takes minutes to
    build: a second benchmark on the same machine reads it instead)."""
    import hetgraph as hg

    start = time.perf_counter()
    if store and os.path.exists(store):
        graph = hg.open_store(store)
    else:
        graph = build()
        if store:
            graph.save(store, overwrite=True)
    return graph, time.perf_counter() - start


def placement_graphs(kinds, scale, grid):
    """{name: graph} of the graphs bench/hybrid and bench/subway place, of ``kinds``
    ("rmat", "grid"): weighted RMAT-``scale`` (seed 1, weights 1-9) and the
    ``grid`` x ``grid`` grid, each renumbered by ``reorder("auto")`` as the command line
    runs them."""
    import hetgraph as hg

    graphs = {}
    if "rmat" in kinds:
        graphs[f"rmat-{scale}"] = \
            hg.generate.rmat(scale, seed=1, weights=(1.0, 9.0)).reorder("auto")
    if "grid" in kinds:
        graphs[f"grid-{grid}"] = hg.generate.grid(grid, grid, seed=1).reorder("auto")
    return graphs
