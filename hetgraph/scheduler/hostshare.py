"""A spread pull's values shared through memory between the worker processes of one host,
instead of sent over Dask's comms (:mod:`.exchange`), which copy them
through a socket and cost more than the pull on a small machine.

Each owner of a spread segment whose peers all run on its host writes its range's new
values and flags into its own file in a shared memory directory (the client's
``tuning.SHARED_MEMORY_DIR``, which the segment's owners carry), and
sends its peers only a word that it wrote them; a peer copies them from there into its
state. A file has two slots, used in turn by the owner's writes: its k-th write goes to
slot k % 2, which the peers read in their k-th exchange; the owner writes that slot
again (write k + 2) only after every peer's word of exchange k + 1, which a peer sends
after its exchange k, so a slot is never overwritten while a peer reads it. A file
serves one attempt of one segment (a channel of :mod:`.exchange`). Its names are its
readers': the owner makes it, links it once for each peer (``<file>-for-<peer>``) and
removes its own name; a peer removes its name once it mapped the file, at its first
read. So no process removes a name another still opens: an owner whose run ended can
go (:func:`forget` with ``files=False``) while its peers read its last write. A name
is left only by a process that died, or a peer that never read: the next segment's
writes remove those of the last (the client starts a segment after the last one ended
everywhere), and the client's end of a run that lost a worker (:func:`forget`) every
file of the run on the host (from every directory a run of this process shared
through). The files are the worker's user's alone (mode 0600).

The state a segment sends back to a client on its host goes the same way
(:func:`hand_back`, :func:`take`): through a file of an unguessable name that the
client made (:func:`back_file`) and keeps mapped for its later runs of that size, not
a message of the whole state through a socket; a run's result keeps the file its
values came back in, without a copy out of it, until the result dies (:func:`lend`).
"""

from __future__ import annotations

import atexit
import collections
import dataclasses
import glob
import mmap
import os
import secrets
import threading

import numpy as np

from .. import tuning

_LOCK = threading.Lock()
_MINE: dict = {}  # run id -> (channel, {range: _Slots}) this process writes
_THEIRS: dict = {}  # run id -> (channel, {path: _Slots}) this process reads
_DIRECTORIES: set = set()  # where this process's runs shared files


def usable(addresses, directory):
    """Whether the owners at ``addresses`` (Dask addresses) can share memory files in
    ``directory`` (a path; "": no): all on one host, which has that directory."""
    from distributed.comm.addressing import get_address_host

    return bool(directory) and os.path.isdir(directory) and \
        len({get_address_host(a) for a in addresses}) == 1


class _Slots:
    """A file of two slots, each the values (``dtype``) and flags (uint8) of ``size``
    vertices, mapped in this process; ``writes``: the slots written or read so far.
    ``readers``: the owner indices of the peers it is made for (an owner's file, named
    ``path`` for each of them: :func:`_reader_path`); None: a peer's, opened by the
    name ``path`` and that name removed once mapped."""

    def __init__(self, path, size, dtype, readers=None):
        dtype = np.dtype(dtype)
        slot = -(-(size * (dtype.itemsize + 1)) // 64) * 64  # (each slot 64-byte aligned)
        create = readers is not None
        self.names = [_reader_path(path, j) for j in readers] if create else []
        if create:  # (one left by a process that died: made again)
            _unlink(path)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        else:
            fd = os.open(path, os.O_RDONLY)
        try:
            if create:
                os.ftruncate(fd, 2 * slot)
            self.map = mmap.mmap(fd, 2 * slot, access=mmap.ACCESS_WRITE if create
                                 else mmap.ACCESS_READ)
        finally:
            os.close(fd)
        for name in self.names:
            _unlink(name)
            os.link(path, name)
        _unlink(path)  # (the readers' names keep it; the maps keep it after them)
        whole = np.frombuffer(self.map, np.uint8)
        end = size * dtype.itemsize
        self.values = [whole[k * slot:k * slot + end].view(dtype) for k in (0, 1)]
        self.flags = [whole[k * slot + end:k * slot + end + size] for k in (0, 1)]
        self.path, self.writes = path, 0


def _path(directory, channel, address, first, end):
    """The file in ``directory`` of the owner at ``address`` for vertices
    ``first``..``end`` in ``channel`` (run id, name)."""
    port = address.rsplit(":", 1)[-1]
    name = "-".join(str(x) for x in channel[1:])
    return os.path.join(directory,
                        f"hetgraph-{os.getuid()}-{channel[0]}-{name}-{port}-{first}-{end}")


def _reader_path(path, reader):
    """The name of the file ``path`` that owner index ``reader`` opens."""
    return f"{path}-for-{reader}"


def _of(table, run_id, channel):
    """The {key: _Slots} of ``run_id`` in ``table`` for ``channel``: those of an older
    channel of the run dropped, with the names of them that a peer left (their segment
    ended everywhere: a peer that did not read them never will)."""
    kept = table.get(run_id)
    if kept is None or kept[0] != channel:
        if kept is not None and table is _MINE:
            for slots in kept[1].values():
                for name in slots.names:
                    _unlink(name)
        kept = table[run_id] = (channel, {})
    return kept[1]


def write(directory, channel, address, first, end, values, flags, readers):
    """Write this owner's new ``values`` and ``flags`` of vertices ``first``..``end``
    (at ``address``) into its file of ``channel`` in ``directory``, made on the first
    write for the peers of owner indices ``readers``; returns the word for them."""
    into, into_flags, word = slot_to_write(directory, channel, address, first, end,
                                           values.dtype, readers)
    into[:] = values
    into_flags[:] = flags
    return word


def slot_to_write(directory, channel, address, first, end, dtype, readers):
    """(values, flags, word): the arrays of this owner's next slot for vertices
    ``first``..``end`` of ``dtype`` (see :func:`write`), which the caller fills before
    it sends its peers the word (a GPU owner copies its range there from the device)."""
    with _LOCK:
        _DIRECTORIES.add(directory)
        mine = _of(_MINE, channel[0], channel)
        slots = mine.get((first, end))
        if slots is None:
            slots = mine[(first, end)] = _Slots(
                _path(directory, channel, address, first, end), end - first, dtype,
                readers=list(readers))
    k = slots.writes % 2
    slots.writes += 1
    return slots.values[k], slots.flags[k], {"path": slots.path, "write": slots.writes}


def read(channel, word, values, flags, me):
    """Copy the values and flags that a peer's ``word`` (:func:`write`'s) says it wrote
    into ``values`` and ``flags`` (its range of the state of this owner, of index
    ``me``)."""
    got, got_flags = slot_to_read(channel, word, len(values), values.dtype, me)
    values[:] = got
    flags[:] = got_flags


def slot_to_read(channel, word, size, dtype, me):
    """(values, flags): the arrays of ``size`` vertices of ``dtype`` that a peer's
    ``word`` says it wrote, for owner index ``me`` to copy from (see :func:`read`)."""
    with _LOCK:
        _DIRECTORIES.add(os.path.dirname(word["path"]))
        theirs = _of(_THEIRS, channel[0], channel)
        slots = theirs.get(word["path"])
        if slots is None:
            slots = theirs[word["path"]] = _Slots(_reader_path(word["path"], me), size,
                                                  dtype)
            _unlink(slots.path)  # (mapped: this reader's name is needed no more)
    slots.writes += 1
    if slots.writes != word["write"]:  # (would be a broken exchange, never a race)
        raise RuntimeError(f"shared range {word['path']}: write {word['write']} read as "
                           f"{slots.writes}")
    k = (slots.writes - 1) % 2
    return slots.values[k], slots.flags[k]


@dataclasses.dataclass(frozen=True)
class Back:
    """A file that the client made on its host for a run's state to come back through
    from a worker of that host: ``path``, the vertices and the values' dtype (the flags
    follow the values); ``flags``: whether a hand-back writes the flags too (False: the
    run's result, values alone, which the client then :func:`lend` s); ``finalized``:
    the values handed back are the program's finalized ones (the worker ran its
    ``finalize``)."""

    path: str
    size: int
    dtype: str
    flags: bool = True
    finalized: bool = False

    @property
    def nbytes(self):
        return self.size * (np.dtype(self.dtype).itemsize + 1)


_FREE: list = []  # the Backs of this process (a client's) that no run uses, newest last
_RETURNED: list = []  # the Backs whose lent arrays died (see lend), for _FREE; appended
# by a finalizer, which may run anywhere (a lock held): no lock taken there
_LENT: collections.Counter = collections.Counter()  # (directory, size, dtype) -> Backs
# of that kind lent now (see lend)
_MADE: set = set()  # the paths of this process's back files (removed at its exit)
_MAPS: collections.OrderedDict = collections.OrderedDict()  # (path, writable) -> mmap
# of a back file in this process, the newest last


def back_file(directory, size, dtype):
    """A :class:`Back` in ``directory`` for one run at a time (:func:`free_back` when
    it ends): a free one of this size and dtype, else a new file (mode 0600, a name
    nobody can guess); None where ``directory`` is no directory (the state then comes
    in the worker's report). Kept for later runs, its pages made once: a new file a
    call cost the worker its pages' faults and the client their release."""
    kind = (directory, size, np.dtype(dtype).str)
    _returned()
    with _LOCK:
        for i, back in enumerate(_FREE):
            if _kind(back) == kind:
                return _FREE.pop(i)
    if not os.path.isdir(directory):  # (checked only here: a free file's is one)
        return None
    back = Back(os.path.join(directory, f"hetgraph-{os.getuid()}-back-"
                                        f"{secrets.token_hex(8)}"), size, kind[2])
    fd = os.open(back.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.ftruncate(fd, back.nbytes)
    finally:
        os.close(fd)
    with _LOCK:
        if not _MADE:
            atexit.register(_remove_made)
        _MADE.add(back.path)
    return back


def free_back(back):
    """Keep ``back`` (its run ended) for a later run, the newest
    ``tuning.BACK_FILES_KEPT`` of them: older ones are removed."""
    if not back.flags or back.finalized:  # (as the next run takes it)
        back = dataclasses.replace(back, flags=True, finalized=False)
    with _LOCK:
        _FREE.append(back)
        dropped = _FREE[:-tuning.BACK_FILES_KEPT] if tuning.BACK_FILES_KEPT else _FREE[:]
        del _FREE[:len(dropped)]
        for old in dropped:
            _MADE.discard(old.path)
            _unmap(old.path)
    for old in dropped:
        _unlink(old.path)


def _remove_made():
    """Remove this process's back files (at its exit)."""
    with _LOCK:
        paths = list(_MADE)
        _MADE.clear()
        _FREE.clear()
        for path in paths:
            _unmap(path)
    for path in paths:
        _unlink(path)


def _unmap(path):
    """Let go of this process's maps of ``path`` (callers hold ``_LOCK``)."""
    for key in [(path, False), (path, True)]:
        kept = _MAPS.pop(key, None)
        if kept is not None:
            _close(kept)


def _close(mapped):
    try:
        mapped.close()
    except BufferError:  # (an array over it still lives: unmapped when it goes)
        pass


def _views(back, values, writable):
    """(values, flags) arrays over ``back``'s file mapped in this process (kept mapped:
    the ``tuning.BACK_FILES_KEPT`` newest); RuntimeError when the state ``values`` (an
    array, or (size, dtype)) or the file does not fit ``back``."""
    return _split(back, np.frombuffer(_mapped(back, values, writable), np.uint8))


def _split(back, whole):
    """(values, flags) of the bytes ``whole`` of ``back``'s file."""
    end = back.size * np.dtype(back.dtype).itemsize
    return whole[:end].view(back.dtype), whole[end:]


def _mapped(back, values, writable):
    """This process's map of ``back``'s file (see :func:`_views`)."""
    size, dtype = (len(values), values.dtype) if hasattr(values, "dtype") else values
    if size != back.size or np.dtype(dtype) != np.dtype(back.dtype):
        raise RuntimeError(f"a state of {size} vertices of {np.dtype(dtype)} does not "
                           f"fit the state file {back.path}")
    key = (back.path, writable)
    with _LOCK:
        mapped = _MAPS.pop(key, None)
        if mapped is None:
            with open(back.path, "r+b" if writable else "rb") as f:
                if os.fstat(f.fileno()).st_size != back.nbytes:
                    raise RuntimeError(f"the state file {back.path} does not fit the "
                                       f"run's ({back.size} vertices of {back.dtype})")
                mapped = mmap.mmap(f.fileno(), back.nbytes, access=mmap.ACCESS_WRITE
                                   if writable else mmap.ACCESS_READ)
        _MAPS[key] = mapped
        while len(_MAPS) > files_mapped():
            _close(_MAPS.popitem(last=False)[1])
    return mapped


def hand_back(back, values, flags):
    """Write a run's ``values`` and ``flags`` into the client's file ``back`` (on a
    worker of the client's host), for the client to :func:`take`."""
    into, into_flags = _views(back, values, writable=True)
    into[:] = values
    if back.flags:
        into_flags[:] = flags


def back_arrays(back, size, dtype):
    """Writable (values, flags) arrays over the client's file ``back`` for a state of
    ``size`` vertices of ``dtype`` (on a worker of the client's host), which a GPU
    fills from the device itself, for the client to :func:`take`."""
    return _views(back, (size, dtype), writable=True)


def take(back, values, flags):
    """Read the state that a worker handed back through ``back`` into ``values`` and
    ``flags`` (arrays of its size and dtype; the flags where ``back.flags``)."""
    got, got_flags = _views(back, values, writable=False)
    values[:] = got
    if back.flags:
        flags[:] = got_flags


def _kind(back):
    return os.path.dirname(back.path), back.size, back.dtype


def _returned():
    """Free the Backs whose lent arrays died since."""
    while _RETURNED:
        back = _RETURNED.pop()
        with _LOCK:
            _LENT[_kind(back)] -= 1
        free_back(back)


def files_mapped():
    """How many state files a process keeps mapped (a GPU worker page-locked): those a
    client keeps free and, for two sizes, those it lends."""
    return max(tuning.BACK_FILES_KEPT + 2 * tuning.BACK_FILES_LENT, 1)


def lend(back):
    """The values that a worker handed back through ``back`` as the run's result, an
    array over the client's map of the file (writable), not a copy: a copy into new
    memory cost its page faults, more than the copy itself. The file is lent to that
    array: it goes back to the free files (:func:`free_back`) once nothing refers to
    the array, its views included, so no later run writes it meanwhile. None where
    ``tuning.BACK_FILES_LENT`` files of its size are lent already (the caller copies
    the values out: :func:`take`)."""
    import weakref

    _returned()
    kind = _kind(back)
    with _LOCK:
        if _LENT[kind] >= tuning.BACK_FILES_LENT:
            return None
        _LENT[kind] += 1
    whole = np.frombuffer(_mapped(back, (back.size, back.dtype), True), np.uint8)
    # (whole's base: a buffer of the map made for it alone, which every view of it keeps)
    weakref.finalize(whole.base, _RETURNED.append, back)
    return _split(back, whole)[0]


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:  # (another process of the host removed it first)
        pass


def forget(run_id, files=True):
    """Let go of run ``run_id``'s files in this process and, with ``files``, remove
    every file of the run on this host (a dead peer's too: where no owner of the run
    still runs, at the client's end of the run). Without: the run's last segment ended
    here, its peers may still read this owner's last write (their names do not go)."""
    with _LOCK:
        _MINE.pop(run_id, None)
        _THEIRS.pop(run_id, None)
        directories = sorted(_DIRECTORIES) if files else []
    for directory in directories:
        for path in glob.glob(os.path.join(directory,
                                           f"hetgraph-{os.getuid()}-{run_id}-*")):
            _unlink(path)
