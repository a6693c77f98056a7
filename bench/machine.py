"""Description of the machine a benchmark ran on, written into every result JSON."""

import os
import platform


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
            "os": platform.platform(), "python": platform.python_version(), "versions": versions}
