"""scheduler/parts.py: an owner's range sent whole or as its changes; a peer's copy of
the range follows the owner's exactly over a run of sync iterations (its two arrays
taking turns), whatever the share of changes, flags and values alike."""

import numpy as np
from hypothesis import given, strategies as st

from hetgraph import tuning
from hetgraph.scheduler import parts
from conftest import examples


def _fields(part):
    """The message's fields as a peer receives them (to_serialize unwrapped)."""
    return {k: getattr(v, "data", v) for k, v in part.items()}


@examples(60)
@given(size=st.integers(1, 300), iterations=st.integers(1, 8), seed=st.integers(0, 2**31),
       share=st.sampled_from([0.0, 0.01, 0.2, 1.0]))
def test_a_peer_follows_the_owners_range_over_sync_iterations(size, iterations, seed,
                                                              share):
    rng = np.random.default_rng(seed)
    owner = [rng.random(size), np.empty(size)]  # (values, new values: turns)
    peer = [owner[0].copy(), np.full(size, np.nan)]  # (its second array: never written)
    flags = np.zeros(size, np.uint8)
    for k in range(iterations):
        new, old = owner[1], owner[0]
        new[:] = old
        changed = rng.random(size) < share
        new[changed] = rng.random(int(changed.sum()))
        flags[:] = rng.random(size) < share
        part = _fields(parts.part_of(new, old, flags, whole=k == 0))
        peer_flags = rng.integers(0, 2, size).astype(np.uint8)  # (stale)
        parts.take_part(part, peer[1], peer[0], peer_flags)
        np.testing.assert_array_equal(peer[1], new)
        np.testing.assert_array_equal(peer_flags, flags)
        owner.reverse()
        peer.reverse()


def test_few_changes_go_alone_and_a_whole_part_when_asked():
    old = np.arange(1000, dtype=np.float64)
    new = old.copy()
    new[[3, 500]] = -1.0
    flags = np.zeros(1000, np.uint8)
    flags[500] = 1
    sparse = _fields(parts.part_of(new, old, flags))
    assert sparse["changed"].tolist() == [3, 500] and sparse["flagged"].tolist() == [500]
    assert sparse["changed"].dtype == np.int32
    whole = _fields(parts.part_of(new, old, flags, whole=True))
    assert "changed" not in whole and np.array_equal(whole["values"], new)
    new[:300] += 1.0  # (30% changed: more bytes than a quarter of the whole)
    assert "changed" not in _fields(parts.part_of(new, old, flags))


def test_a_whole_part_is_a_copy_and_async_has_one_array(monkeypatch):
    monkeypatch.setattr(tuning, "SPARSE_PART_SHARE", 0.0)
    new, flags = np.ones(8), np.ones(8, np.uint8)
    part = _fields(parts.part_of(new, new, flags))
    new[:], flags[:] = 5.0, 0
    assert part["values"].tolist() == [1.0] * 8 and part["flags"].tolist() == [1] * 8
    written, peer_flags = np.zeros(8), np.zeros(8, np.uint8)
    parts.take_part(part, written, None, peer_flags)
    assert written.tolist() == [1.0] * 8 and peer_flags.tolist() == [1] * 8
