"""Numba's thread count for a block of code: Numba keeps the count per calling thread,
so a block sets it and puts back the one it found."""

from __future__ import annotations

import contextlib

import numba


@contextlib.contextmanager
def numba_threads(threads):
    """Numba's thread count for this thread while the block runs: ``threads`` (None:
    as it is); yields the count the block runs with."""
    if threads is None:
        yield numba.get_num_threads()
        return
    before = numba.get_num_threads()
    numba.set_num_threads(int(threads))
    try:
        yield int(threads)
    finally:
        numba.set_num_threads(before)
