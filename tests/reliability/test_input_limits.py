"""Inputs that would exhaust memory or block (issue 50, item 4): declared sizes beyond
the memory available, decompression bombs, endless lines, FIFOs, devices, unreadable
files and compressed files that are not what their name says. Each is refused with a
HetGraphError naming the file, the size and the limit, before anything large is
allocated or a read blocks."""

import bz2
import errno
import gzip
import os
import threading

import numpy as np
import pytest

import hetgraph as hg
from hetgraph import tuning
from hetgraph.io import limits

GiB = 1 << 30


@pytest.fixture
def small_host(monkeypatch):
    """A host with 16 GiB of memory available, whatever this machine has: the limits
    are then the same everywhere."""
    monkeypatch.setattr(limits, "available_memory", lambda: 16 * GiB)


def write(path, text):
    path.write_text(text)
    return path


# declared sizes ----------------------------------------------------------------------
HEADERS = [
    ("mtx 10^12 rows", "a.mtx", "%%MatrixMarket matrix coordinate pattern general\n"
     "1000000000000 1000000000000 1\n1 2\n", "1,000,000,000,000 vertices"),
    ("mtx 3e9 rows", "a.mtx", "%%MatrixMarket matrix coordinate pattern general\n"
     "3000000000 3000000000 1\n1 2\n", "3,000,000,000 vertices"),
    ("mtx 10^12 entries", "a.mtx", "%%MatrixMarket matrix coordinate pattern general\n"
     "3 3 1000000000000\n1 2\n", "1,000,000,000,000 arcs"),
    ("gr 10^12 vertices", "r.gr", "p sp 1000000000000 1\na 1 2 1\n",
     "1,000,000,000,000 vertices"),
    ("gr 3e9 vertices", "r.gr", "p sp 3000000000 1\na 1 2 1\n", "3,000,000,000 vertices"),
    ("metis 3e9 vertices", "m.graph", "3000000000 1\n2\n1\n", "3,000,000,000 vertices"),
]


@pytest.mark.parametrize("case, name, text, size", HEADERS, ids=[h[0] for h in HEADERS])
def test_declared_size_beyond_memory_is_refused_before_allocating(tmp_path, small_host,
                                                                  case, name, text, size):
    path = write(tmp_path / name, text)
    with pytest.raises(hg.ResourceLimitError, match=rf"{name}.*declares .*{size}.*needs at least "
                                                    r".* GiB.*16.0 GiB available") as info:
        hg.read(path)
    assert isinstance(info.value, MemoryError)


def test_npz_id_of_2_to_the_40_is_refused(tmp_path):
    np.savez(tmp_path / "e.npz", src=np.array([0]), dst=np.array([2**40]))
    with pytest.raises(hg.ResourceLimitError, match=r"e.npz.*1,099,511,627,777 vertices"):
        hg.read(tmp_path / "e.npz")


def test_from_arrays_id_of_2_to_the_31_is_refused(small_host):
    with pytest.raises(hg.ResourceLimitError, match=r"2,147,483,649 vertices.*needs at least .*GiB.*available"):
        hg.from_arrays([0], [2**31])


def test_a_graph_that_fits_is_built(small_host):
    g = hg.from_arrays([0], [2**20])
    assert g.num_vertices == 2**20 + 1 and g.num_edges == 1


# decompression -----------------------------------------------------------------------
def test_decompression_bomb_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(tuning, "INFLATION_ALLOWANCE", 1 << 20)
    path = tmp_path / "bomb.txt.gz"
    path.write_bytes(gzip.compress(b"1 2\n" * (8 << 20)))  # 32 MiB in ~32 KiB
    assert os.path.getsize(path) * tuning.MAX_INFLATION < 32 << 20
    with pytest.raises(hg.ResourceLimitError, match=r"bomb.txt.gz.*inflates to more than "
                                                    r"\d+ times .*MAX_INFLATION"):
        hg.read(path)


def test_ordinary_compressed_file_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(tuning, "INFLATION_ALLOWANCE", 1 << 16)
    rng = np.random.default_rng(0)
    lines = b"".join(b"%d %d\n" % (u, v) for u, v in rng.integers(0, 10**6, (20000, 2)))
    (tmp_path / "g.txt").write_bytes(lines)
    (tmp_path / "g.txt.gz").write_bytes(gzip.compress(lines))
    plain, packed = hg.read(tmp_path / "g.txt"), hg.read(tmp_path / "g.txt.gz")
    assert all(np.array_equal(a, b) for a, b in zip(plain.edges(), packed.edges()))
    assert plain.num_edges > 19000


@pytest.mark.parametrize("fill", [b" ", b"\0"])
@pytest.mark.parametrize("compress", [False, True])
def test_a_line_without_end_is_stopped(tmp_path, monkeypatch, fill, compress):
    monkeypatch.setattr(tuning, "MAX_LINE_BYTES", 1 << 20)
    monkeypatch.setattr(tuning, "BLOCK_BYTES", 1 << 18)
    data = b"1 2\n" + fill * (3 << 20)
    path = tmp_path / ("g.txt.gz" if compress else "g.txt")
    path.write_bytes(gzip.compress(data) if compress else data)
    with pytest.raises(hg.ResourceLimitError, match=r"g.txt(.gz)?.*line 2.*longer than "
                                                    r"1,048,576 bytes.*MAX_LINE_BYTES"):
        hg.read(path)


def test_a_header_line_without_end_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(tuning, "MAX_LINE_BYTES", 1 << 16)
    path = tmp_path / "a.mtx"
    path.write_bytes(b"%%MatrixMarket matrix coordinate pattern general\n" + b"%" * (1 << 20))
    with pytest.raises(hg.ResourceLimitError, match=r"a.mtx.*longer than 65,536 bytes"):
        hg.read(path)


@pytest.mark.parametrize("name", ["g.mtx.gz", "r.gr.gz", "m.graph.gz", "g.txt.gz"])
def test_gz_that_is_really_bz2(tmp_path, name):
    text = {"g.mtx.gz": "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 2\n",
            "r.gr.gz": "p sp 2 1\na 1 2 1\n", "m.graph.gz": "2 1\n2\n1\n",
            "g.txt.gz": "1 2\n"}[name]
    (tmp_path / name).write_bytes(bz2.compress(text.encode()))
    with pytest.raises(hg.InputFormatError, match=rf"{name}.*not gzip data.*\.bz2"):
        hg.read(tmp_path / name)


@pytest.mark.parametrize("name, text", [
    ("g.mtx.gz", "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 2\n"),
    ("r.gr.gz", "p sp 2 1\na 1 2 1\n"), ("m.graph.gz", "2 1\n2\n1\n")])
@pytest.mark.parametrize("keep", [5, 12, 20])
def test_gz_truncated_in_its_header(tmp_path, name, text, keep):
    (tmp_path / name).write_bytes(gzip.compress(text.encode())[:keep])
    with pytest.raises(hg.InputFormatError, match=rf"{name}.*truncated or corrupt"):
        hg.read(tmp_path / name)


# file types and permissions ----------------------------------------------------------
def read_in_thread(path, **options):
    """Read ``path`` in a daemon thread: what it raised, or 'blocked' when it still runs
    once a FIFO's writer has opened and closed the other end (so a blocked open or read
    returns and the test never hangs)."""
    outcome = []

    def target():
        try:
            hg.read(path, **options)
            outcome.append("read")
        except Exception as exc:  # noqa: BLE001 (the outcome is what is checked)
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(5)
    if thread.is_alive():  # unblock it: a writer opens and closes the FIFO
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        thread.join()
        return "blocked"
    return outcome[0]


@pytest.mark.parametrize("name, options", [("g.txt", {}), ("a.mtx", {}), ("r.gr", {}),
                                           ("e.npz", {}), ("e.csv", {}),
                                           ("x", {"format": "snap"})])
def test_fifo_input_is_refused_without_blocking(tmp_path, name, options):
    os.mkfifo(tmp_path / name)
    outcome = read_in_thread(tmp_path / name, **options)
    assert isinstance(outcome, hg.InputFormatError), outcome
    assert "is a FIFO, not a regular file" in str(outcome)


def test_device_input_is_refused():
    with pytest.raises(hg.InputFormatError, match=r"/dev/zero: is a character device, "
                                                  r"not a regular file"):
        hg.read("/dev/zero", format="snap")


def test_directory_input_is_refused(tmp_path):
    (tmp_path / "d.txt").mkdir()
    with pytest.raises(hg.InputFormatError, match=r"is a directory"):
        hg.read(tmp_path / "d.txt")


def deny(monkeypatch, path):
    """Opening ``path`` fails as a file without read permission does (tests run as
    root, whom permissions do not stop)."""
    real_open = os.open

    def fake_open(name, *args, **kwargs):
        if os.fspath(name) == os.fspath(path):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(name))
        return real_open(name, *args, **kwargs)
    monkeypatch.setattr(os, "open", fake_open)


@pytest.mark.parametrize("name", ["g.txt", "g.txt.gz", "a.mtx"])
def test_unreadable_file_is_an_input_format_error(tmp_path, monkeypatch, name):
    path = write(tmp_path / name, "1 2\n")
    deny(monkeypatch, path)
    with pytest.raises(hg.InputFormatError, match=rf"{name}: cannot be read \(permission "
                                                  r"denied\)"):
        hg.read(path)


def test_cli_prints_one_line_for_an_unreadable_file(tmp_path, monkeypatch, capsys):
    from hetgraph import cli

    path = write(tmp_path / "g.txt", "1 2\n")
    deny(monkeypatch, path)
    assert cli.main(["info", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "permission denied" in err and "Traceback" not in err
    with pytest.raises(hg.InputFormatError):
        cli.main(["--debug", "info", str(path)])


def test_cli_prints_one_line_for_an_os_error_of_its_own(tmp_path, capsys):
    from hetgraph import cli

    path = write(tmp_path / "g.txt", "1 2\n2 3\n")
    out = tmp_path / "no-such-dir" / "values.npy"
    assert cli.main(["run", "bfs", str(path), "--source", "1", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no-such-dir" in err and "Traceback" not in err
