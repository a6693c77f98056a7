"""Ranges shared through memory files between the worker processes of one host
(hetgraph.scheduler.hostshare): what one owner writes another reads, slot by slot, the
files private and removed at the run's end; the state handed back to the client through
a file of its own, kept for its later runs. The spread runs over them are in
tests/test_spread.py."""

import os
import stat

import numpy as np
import pytest

from hetgraph import tuning
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
        word = hostshare.write(str(tmp_path), channel, address, 200, 1200, values, flags,
                               [1])
        assert word["write"] == k + 1
        if k == 0:  # (made for its reader, the owner's own name gone)
            (name,) = _files(tmp_path, "run1")
            assert name.endswith("-4001-200-1200-for-1")
            assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o600  # the user's
        got, got_flags = np.zeros(1000), np.zeros(1000, np.uint8)
        hostshare.read(channel, word, got, got_flags, 1)
        np.testing.assert_array_equal(got, values)
        np.testing.assert_array_equal(got_flags, flags)
    assert _files(tmp_path, "run1") == []  # (mapped by its reader: no name needed)


def _as_another_process(run_id):
    """Forget this process's reads of ``run_id`` (the next read maps the file anew, as
    a second peer's process would)."""
    hostshare._THEIRS.pop(run_id, None)


def test_each_peer_removes_its_own_name_once_it_mapped_the_file(tmp_path):
    """An owner's file has a name for each of its peers, which only that peer removes
    (at its first read): no process removes a name another has yet to open."""
    channel, address = ("run1", "from-1-try0"), "tcp://127.0.0.1:4001"
    word = hostshare.write(str(tmp_path), channel, address, 0, 10, np.full(10, 1.0),
                           np.ones(10, np.uint8), [0, 2])
    assert [n.rsplit("-", 2)[1:] for n in _files(tmp_path, "run1")] == [["for", "0"],
                                                                         ["for", "2"]]
    got, flags = np.zeros(10), np.zeros(10, np.uint8)
    hostshare.read(channel, word, got, flags, 2)
    assert [n.rsplit("-", 1)[1] for n in _files(tmp_path, "run1")] == ["0"]
    _as_another_process("run1")
    hostshare.read(channel, word, got, flags, 0)
    assert _files(tmp_path, "run1") == [] and (got == 1.0).all()


def test_an_owner_that_ended_leaves_its_last_write_to_its_peers(tmp_path):
    """An owner of a run's last segment drops its contexts as it ends (a spread run's
    end is no message to the workers): its last write stays readable by a peer that
    has not read it yet, and the peer's read removes the last name."""
    channel, address = ("run1", "from-1-try0"), "tcp://127.0.0.1:4001"
    word = hostshare.write(str(tmp_path), channel, address, 0, 10, np.full(10, 3.0),
                           np.ones(10, np.uint8), [1])
    hostshare.forget("run1", files=False)  # (the owner's end of the run)
    got, flags = np.zeros(10), np.zeros(10, np.uint8)
    hostshare.read(channel, word, got, flags, 1)
    assert (got == 3.0).all() and (flags == 1).all()
    assert _files(tmp_path, "run1") == []


def test_a_slot_stays_as_written_until_the_write_after_next(tmp_path):
    channel, address = ("run1", "from-1-try0"), "tcp://127.0.0.1:4001"
    first = hostshare.write(str(tmp_path), channel, address, 0, 10, np.full(10, 1.0),
                            np.ones(10, np.uint8), [1])
    hostshare.write(str(tmp_path), channel, address, 0, 10, np.full(10, 2.0),
                    np.zeros(10, np.uint8), [1])
    got, flags = np.zeros(10), np.zeros(10, np.uint8)
    hostshare.read(channel, first, got, flags, 1)  # (a peer late by one write)
    assert (got == 1.0).all() and (flags == 1).all()


def test_a_word_read_out_of_turn_is_an_error(tmp_path):
    channel, address = ("run1", "from-1-try0"), "tcp://127.0.0.1:4001"
    words = [hostshare.write(str(tmp_path), channel, address, 0, 10, np.full(10, float(i)),
                             np.ones(10, np.uint8), [1]) for i in range(2)]
    with pytest.raises(RuntimeError, match="write 2 read as 1"):
        hostshare.read(channel, words[1], np.zeros(10), np.zeros(10, np.uint8), 1)


def test_a_new_segment_drops_the_last_ones_files_and_the_run_end_all(tmp_path):
    directory, address = str(tmp_path), "tcp://127.0.0.1:4001"
    values, flags = np.ones(10), np.ones(10, np.uint8)
    for run_id, name in (("run1", "from-1-try0"), ("run2", "from-1-try0"),
                         ("run1", "from-9-try0")):  # (names no peer read)
        hostshare.write(directory, (run_id, name), address, 0, 10, values, flags, [1])
    assert _files(tmp_path, "run1") == [
        f"hetgraph-{os.getuid()}-run1-from-9-try0-4001-0-10-for-1"]
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


def _backs(directory):
    return sorted(p for p in os.listdir(directory) if "-back-" in p)


def test_a_state_handed_back_is_read_whole_its_file_kept_for_the_next_run(tmp_path):
    rng = np.random.default_rng(2)
    values, flags = rng.random(5000), rng.integers(0, 2, 5000).astype(np.uint8)
    back = hostshare.back_file(str(tmp_path), 5000, np.float64)
    assert stat.S_IMODE(os.stat(back.path).st_mode) == 0o600
    for k in range(2):  # (the second time through the maps kept)
        hostshare.hand_back(back, values + k, flags ^ k)
        got, got_flags = np.zeros(5000), np.zeros(5000, np.uint8)
        hostshare.take(back, got, got_flags)
        np.testing.assert_array_equal(got, values + k)
        np.testing.assert_array_equal(got_flags, flags ^ k)
    other = hostshare.back_file(str(tmp_path), 5000, np.float64)  # (in use: a new one)
    assert other.path != back.path
    hostshare.free_back(back)
    assert hostshare.back_file(str(tmp_path), 5000, np.float64) == back  # reused
    assert hostshare.back_file(str(tmp_path), 5000, np.float32) != back  # (its size)
    assert hostshare.back_file(str(tmp_path / "gone"), 5000, np.float64) is None
    hostshare._remove_made()  # (at the process's exit)
    assert _backs(tmp_path) == []


def test_a_device_fills_its_slot_and_the_clients_file_itself(tmp_path):
    """A GPU owner copies its range from the device into the slot that
    :func:`slot_to_write` gives, and a peer copies it from :func:`slot_to_read`'s
    arrays to its device; a GPU worker hands the state back into
    :func:`back_arrays`."""
    channel, address = ("run2", "from-1-try0"), "tcp://127.0.0.1:4002"
    rng = np.random.default_rng(3)
    for k in range(3):
        values, flags = rng.random(300).astype(np.float32), \
            rng.integers(0, 2, 300).astype(np.uint8)
        into, into_flags, word = hostshare.slot_to_write(str(tmp_path), channel, address,
                                                         10, 310, np.float32, [1])
        into[:], into_flags[:] = values, flags
        got, got_flags = hostshare.slot_to_read(channel, word, 300, np.float32, 1)
        np.testing.assert_array_equal(got, values)
        np.testing.assert_array_equal(got_flags, flags)
    back = hostshare.back_file(str(tmp_path), 300, np.float32)
    into, into_flags = hostshare.back_arrays(back, 300, np.float32)
    into[:], into_flags[:] = values, flags
    got, got_flags = np.zeros(300, np.float32), np.zeros(300, np.uint8)
    hostshare.take(back, got, got_flags)
    np.testing.assert_array_equal(got, values)
    np.testing.assert_array_equal(got_flags, flags)
    with pytest.raises(RuntimeError, match="does not fit"):
        hostshare.back_arrays(back, 300, np.float64)
    hostshare._remove_made()


def test_a_state_that_does_not_fit_its_file_is_refused(tmp_path):
    back = hostshare.back_file(str(tmp_path), 10, np.float64)
    with pytest.raises(RuntimeError, match="does not fit"):
        hostshare.hand_back(back, np.ones(11), np.ones(11, np.uint8))
    with pytest.raises(RuntimeError, match="does not fit"):
        hostshare.take(back, np.zeros(10, np.float32), np.zeros(10, np.uint8))
    os.truncate(back.path, 5)  # (a file changed under it)
    with pytest.raises(RuntimeError, match="does not fit"):
        hostshare.take(back, np.zeros(10), np.zeros(10, np.uint8))
    hostshare._remove_made()


def test_the_client_keeps_its_newest_free_state_files(tmp_path, monkeypatch):
    monkeypatch.setattr(tuning, "BACK_FILES_KEPT", 2)
    backs = [hostshare.back_file(str(tmp_path), n, np.float64) for n in (10, 20, 30)]
    for back in backs:
        hostshare.free_back(back)
    assert _backs(tmp_path) == sorted(os.path.basename(b.path) for b in backs[1:])
    hostshare._remove_made()


def test_a_result_is_lent_the_file_its_values_came_back_in(tmp_path, monkeypatch):
    """The run's result handed back without its flags, its values an array over the
    client's file (no copy out of it): the file is not handed to another run while the
    array or a view of it lives, and goes back to the free files after; at most
    ``tuning.BACK_FILES_LENT`` files of one size are lent at once."""
    import dataclasses
    import gc

    monkeypatch.setattr(tuning, "BACK_FILES_LENT", 2)
    rng = np.random.default_rng(4)
    values = rng.random(3000)
    back = hostshare.back_file(str(tmp_path), 3000, np.float64)
    hostshare.hand_back(back, np.zeros(3000), np.full(3000, 7, np.uint8))
    hostshare.hand_back(dataclasses.replace(back, flags=False), values,
                        np.ones(3000, np.uint8))
    got, got_flags = np.empty(3000), np.empty(3000, np.uint8)
    hostshare.take(back, got, got_flags)
    assert (got_flags == 7).all()  # (the flags were not written)
    lent = hostshare.lend(back)
    np.testing.assert_array_equal(lent, values)
    assert lent.flags.writeable and not lent.flags.owndata
    view = lent[::7]
    del lent
    gc.collect()
    other = hostshare.back_file(str(tmp_path), 3000, np.float64)
    assert other.path != back.path  # (a view of the lent values still lives)
    second = hostshare.lend(other)
    third = hostshare.back_file(str(tmp_path), 3000, np.float64)
    assert hostshare.lend(third) is None  # (two of its size lent: BACK_FILES_LENT)
    assert hostshare.lend(hostshare.back_file(str(tmp_path), 30, np.float64)) is not None
    np.testing.assert_array_equal(view, values[::7])
    del view, second
    assert hostshare.lend(third) is not None  # (both returned)
    assert {hostshare.back_file(str(tmp_path), 3000, np.float64).path for _ in range(2)} \
        == {back.path, other.path}
    hostshare._remove_made()
