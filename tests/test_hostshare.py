"""Ranges shared through memory files between the worker processes of one host
(hetgraph.scheduler.hostshare): what one owner writes another reads, slot by slot, the
files private and removed at the run's end. The spread runs over them are in
tests/test_spread.py."""

import os
import stat

import numpy as np
import pytest

from hetgraph.scheduler import hostshare


@pytest.fixture(autouse=True)
def _forget_runs():
    yield
    for run_id in ("run1", "run2"):
        hostshare.forget(run_id)


def _files(directory, run_id):
    return sorted(p for p in os.listdir(directory) if f"-{run_id}-" in p)


def test_a_peer_reads_what_an_owner_wrote_each_exchange(tmp_path):
    channel, address = ("run1", "from-1-try0"), "tcp://127.0.0.1:4001"
    rng = np.random.default_rng(1)
    for k in range(5):  # (slots used in turn: writes 3 and 5 reuse the first)
        values, flags = rng.random(1000), rng.integers(0, 2, 1000).astype(np.uint8)
        word = hostshare.write(str(tmp_path), channel, address, 200, 1200, values, flags)
        assert word["write"] == k + 1
        got, got_flags = np.zeros(1000), np.zeros(1000, np.uint8)
        hostshare.read(channel, word, got, got_flags)
        np.testing.assert_array_equal(got, values)
        np.testing.assert_array_equal(got_flags, flags)
    (name,) = _files(tmp_path, "run1")
    assert name.endswith("-4001-200-1200")
    assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o600  # the user's alone


def test_a_slot_stays_as_written_until_the_write_after_next(tmp_path):
    channel, address = ("run1", "from-1-try0"), "tcp://127.0.0.1:4001"
    first = hostshare.write(str(tmp_path), channel, address, 0, 10, np.full(10, 1.0),
                            np.ones(10, np.uint8))
    hostshare.write(str(tmp_path), channel, address, 0, 10, np.full(10, 2.0),
                    np.zeros(10, np.uint8))
    got, flags = np.zeros(10), np.zeros(10, np.uint8)
    hostshare.read(channel, first, got, flags)  # (a peer late by one write)
    assert (got == 1.0).all() and (flags == 1).all()


def test_a_word_read_out_of_turn_is_an_error(tmp_path):
    channel, address = ("run1", "from-1-try0"), "tcp://127.0.0.1:4001"
    words = [hostshare.write(str(tmp_path), channel, address, 0, 10, np.full(10, float(i)),
                             np.ones(10, np.uint8)) for i in range(2)]
    with pytest.raises(RuntimeError, match="write 2 read as 1"):
        hostshare.read(channel, words[1], np.zeros(10), np.zeros(10, np.uint8))


def test_a_new_segment_drops_the_last_ones_files_and_the_run_end_all(tmp_path):
    directory, address = str(tmp_path), "tcp://127.0.0.1:4001"
    values, flags = np.ones(10), np.ones(10, np.uint8)
    hostshare.write(directory, ("run1", "from-1-try0"), address, 0, 10, values, flags)
    hostshare.write(directory, ("run2", "from-1-try0"), address, 0, 10, values, flags)
    hostshare.write(directory, ("run1", "from-9-try0"), address, 0, 10, values, flags)
    assert _files(tmp_path, "run1") == [f"hetgraph-{os.getuid()}-run1-from-9-try0-4001-0-10"]
    dead = tmp_path / f"hetgraph-{os.getuid()}-run1-from-9-try0-4002-10-20"
    dead.write_bytes(b"x")  # (a peer's that died: its process never removed it)
    hostshare.forget("run1")
    assert _files(tmp_path, "run1") == [] and len(_files(tmp_path, "run2")) == 1


def test_sharing_needs_one_host_and_the_directory(tmp_path):
    same = ["tcp://127.0.0.1:4001", "tcp://127.0.0.1:4002"]
    assert hostshare.usable(same, str(tmp_path))
    assert not hostshare.usable(same, "")  # (turned off)
    assert not hostshare.usable(same, str(tmp_path / "missing"))
    assert not hostshare.usable(["tcp://10.0.0.1:4001", "tcp://10.0.0.2:4001"],
                                str(tmp_path))


def test_a_state_handed_over_is_read_whole_and_its_file_removed(tmp_path):
    rng = np.random.default_rng(2)
    values, flags = rng.random(5000), rng.integers(0, 2, 5000).astype(np.uint8)
    handed = hostshare.hand_over(str(tmp_path), "run1", values, flags)
    assert stat.S_IMODE(os.stat(handed.path).st_mode) == 0o600
    got, got_flags = np.zeros(5000), np.zeros(5000, np.uint8)
    hostshare.take(handed, got, got_flags)
    np.testing.assert_array_equal(got, values)
    np.testing.assert_array_equal(got_flags, flags)
    assert _files(tmp_path, "run1") == []


def test_a_state_handed_over_that_does_not_fit_is_refused(tmp_path):
    handed = hostshare.hand_over(str(tmp_path), "run1", np.ones(10), np.ones(10, np.uint8))
    with pytest.raises(RuntimeError, match="does not fit"):
        hostshare.take(handed, np.zeros(11), np.zeros(11, np.uint8))
    assert _files(tmp_path, "run1") == []  # (removed all the same)
