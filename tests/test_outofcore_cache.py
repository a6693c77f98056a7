"""The page cache's reads: a pull's next pass read ahead within the reads in flight, the
read-ahead ended by another pass, the owners of a shared cache served in turn, and a
block waited for read before those queued for later (hetgraph.io.pagecache)."""

import threading

import numpy as np
import pytest

import hetgraph as hg
from hetgraph.io.pagecache import PageCache, StripeReader

SRC = ("src",)


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    g = hg.generate.rmat(12, edge_factor=8, seed=3)
    store = g.save(tmp_path_factory.mktemp("cache") / "s", page_bytes=8 << 10)
    assert store.num_pages >= 20
    return store.path


def _sizes(store, block="src"):
    return np.array([p["blocks"][block]["bytes"] for p in store.manifest["pages"]])


def _recorded(store, monkeypatch, hold=None, until=None):
    """The cache's block reads from ``store``, in the order they start; the read of
    block ``hold`` waits for the event ``until``."""
    order, read = [], store.read_page_block

    def read_page_block(p, name):  # (the cache's reads; the test's own map the blocks)
        order.append((p, name))
        if (p, name) == hold:
            until.wait()
        return read(p, name)

    monkeypatch.setattr(store, "read_page_block", read_page_block)
    return order


def _until(condition):
    """Wait for ``condition()`` to hold (what another thread does)."""
    for _ in range(100_000):
        if condition():
            return
        threading.Event().wait(1e-3)
    pytest.fail("the I/O thread did not get there")


def _scans(store, budget, prefetch, scans, ahead):
    """A cache after ``scans`` pulls of every page, each announcing the next or not;
    whether, after each, the next pass's first blocks the cache lacks were being read,
    within the reads in flight."""
    cache = PageCache(store, budget, prefetch_bytes=prefetch)
    pages = list(range(store.num_pages))
    read_ahead = []
    for _ in range(scans):
        cache.plan(pages, SRC, ahead=pages if ahead else None)
        for p in pages:
            (array,) = cache.get(p, SRC)
            assert np.array_equal(array, store.page(p).src)
        lacking = cache.cached_of(pages, SRC) == 0
        reading = lacking & (cache.missing_bytes(pages, SRC) == 0)
        first = np.flatnonzero(lacking)
        # a prefix of what the next pass lacks, within the bytes in flight
        prefix = reading[first][:reading.sum()].all() and reading.sum() > 0
        assert _sizes(store)[reading].sum() <= prefetch
        read_ahead.append(bool(prefix))
    return cache, read_ahead


def test_a_pull_reads_its_next_pass_ahead_and_reads_no_more(path):
    store = hg.PageStore(path)
    src = _sizes(store)
    prefetch = 4 * int(src.max())
    budget = int(src.sum()) // 2 + prefetch
    ahead, read_ahead = _scans(store, budget, prefetch, 3, ahead=True)
    plain, no_read_ahead = _scans(store, budget, prefetch, 3, ahead=False)
    assert all(read_ahead) and not any(no_read_ahead)
    # the same blocks cached, the same bytes taken by the passes
    assert ahead.read_bytes == plain.read_bytes > src.sum()
    assert ahead.cached_bytes == plain.cached_bytes > 0
    for cache in (ahead, plain):
        cache.close()


def test_another_pass_ends_the_read_ahead_before_it_is_read(path, monkeypatch):
    store = hg.PageStore(path)
    src = _sizes(store)
    go = threading.Event()
    order = _recorded(store, monkeypatch, hold=(0, "src"), until=go)
    cache = PageCache(store, int(src.sum()), prefetch_bytes=6 * int(src.max()))
    pages = list(range(store.num_pages))
    cache.plan([0], SRC, owner="cpu", ahead=pages)  # page 0 read, 1... queued ahead
    assert (cache.missing_bytes(pages[:3], SRC) == 0).all()
    _until(lambda: order)  # (the read of page 0 has begun)
    cache.plan([7], ("out_dst",), owner="gpu")  # a new pass, of other blocks
    # the queued read-ahead is dropped; the read of the cpu's plan stays under way
    assert (cache.missing_bytes(pages[1:3], SRC) > 0).all()
    assert cache.missing_bytes([0], SRC)[0] == 0
    go.set()
    cache.get(7, ("out_dst",), owner="gpu")
    cache.get(0, SRC, owner="cpu")
    assert order == [(0, "src"), (7, "out_dst")]
    assert cache.owner_read_bytes["cpu"] == src[0]
    assert cache.owner_read_bytes["gpu"] == store.manifest["pages"][7]["blocks"][
        "out_dst"]["bytes"]
    cache.close()


def test_owners_take_turns_within_their_shares(path):
    store = hg.PageStore(path)
    src = _sizes(store)
    # room for pages 0-3 and less than one more: the first to plan fills it
    prefetch = int(src[:4].sum() + min(src[4], src[10]) - 1)
    assert src[10] <= src[0] + prefetch - src[:4].sum()
    cache = PageCache(store, int(src.sum()), prefetch_bytes=prefetch)
    cache.plan(range(10), SRC, owner="cpu")
    cache.plan(range(10, 20), SRC, owner="gpu")
    assert cache.missing_bytes([4, 10], SRC).all()  # no room yet
    cache.get(0, SRC, owner="cpu")
    # the room freed goes to the owner below its share, not to the first to plan
    assert cache.missing_bytes([10], SRC)[0] == 0
    assert cache.missing_bytes([4], SRC)[0] > 0
    for p in range(1, 10):
        cache.get(p, SRC, owner="cpu")
    for p in range(10, 20):
        cache.get(p, SRC, owner="gpu")
    assert cache.owner_read_bytes["cpu"] == src[:10].sum()
    assert cache.owner_read_bytes["gpu"] == src[10:20].sum()
    cache.close()


@pytest.mark.parametrize("wanted, how", [(3, "hurry"), (12, "submit")])
def test_a_block_waited_for_is_read_before_those_queued(path, monkeypatch, wanted, how):
    """Page ``wanted`` is queued (its read hurried) or not yet (read urgently) when
    another owner waits for it: its stripe reads it next."""
    store = hg.PageStore(path)
    src = _sizes(store)
    go = threading.Event()
    order = _recorded(store, monkeypatch, hold=(0, "src"), until=go)
    original = getattr(StripeReader, how)

    def then_go(self, *args, **kwargs):  # the first read is let go once it has
        result = original(self, *args, **kwargs)
        if how == "hurry" or kwargs.get("urgent") or (len(args) > 2 and args[2]):
            go.set()
        return result

    monkeypatch.setattr(StripeReader, how, then_go)
    cache = PageCache(store, int(src.sum()), prefetch_bytes=int(src[:6].sum()))
    cache.plan(range(10), SRC, owner="cpu")  # pages 0-5 in flight
    _until(lambda: order)  # (the read of page 0 has begun)
    (array,) = cache.get(wanted, SRC, owner="gpu")
    assert np.array_equal(array, store.page(wanted).src)
    for p in range(10):
        cache.get(p, SRC, owner="cpu")
    assert order[:3] == [(0, "src"), (wanted, "src"), (1, "src")], order
    assert sorted(order) == sorted({(p, "src") for p in (*range(10), wanted)})
    cache.close()


def test_a_pass_in_any_order_takes_held_pages_while_a_read_is_under_way(path,
                                                                        monkeypatch):
    """in_turn: the pages the cache holds fill the wait for the next read, the pages
    read come as they arrive; what is planned is not evicted for the pages read (the
    held ones come last), and the pass still reads only what the cache lacks."""
    store = hg.PageStore(path)
    src = _sizes(store)
    go = threading.Event()
    order = _recorded(store, monkeypatch, hold=(0, "src"), until=go)
    pages = list(range(8))
    # room for pages 4-7 and nothing more: the pages read pass through
    cache = PageCache(store, int(src[4:8].sum() + 2 * src.max()),
                      prefetch_bytes=2 * int(src.max()))
    cache.plan(pages[4:], SRC)
    for p in pages[4:]:
        cache.get(p, SRC)
    assert order == [(p, "src") for p in pages[4:]]
    cache.plan(pages, SRC)
    _until(lambda: len(order) > 4)  # (the read of page 0 has begun)
    taken = []
    for p in cache.in_turn(pages, SRC):
        taken.append(p)
        if p == 7:
            go.set()  # page 0 arrives once every held page was taken
        (array,) = cache.get(p, SRC)
        assert np.array_equal(array, store.page(p).src)
    assert taken == [4, 5, 6, 7, 0, 1, 2, 3]
    assert sorted(order[4:]) == [(p, "src") for p in range(4)]
    assert cache.cached_of(pages[4:], SRC).tolist() == src[4:8].tolist()
    # a page read before the held ones are taken passes through: they are planned
    cache.plan(pages, SRC)
    cache.get(0, SRC)
    assert cache.cached_of(pages, SRC).tolist() == [0] * 4 + src[4:8].tolist()
    cache.close()


def test_a_stripe_reads_on_while_a_block_is_checked(path, monkeypatch):
    """A block's checks (CRC32, structure) run off its stripe's I/O thread: while page
    0's are held, the thread reads the next pages; page 0 is waited for until they end,
    and a block that fails them fails the get that takes it."""
    store = hg.PageStore(path)
    src = _sizes(store)
    order = _recorded(store, monkeypatch)
    go, verify = threading.Event(), store.verify_page_block

    def held(p, name, array):
        if p == 0:
            go.wait()
        if p == 2:
            array = array.copy()
            array[0] ^= 1  # (the CRC32 no longer matches)
        return verify(p, name, array)

    monkeypatch.setattr(store, "verify_page_block", held)
    cache = PageCache(store, int(src.sum()), prefetch_bytes=int(src[:6].sum()))
    cache.plan(range(6), SRC)
    _until(lambda: len(order) == 6)  # (every planned read done, page 0's check held)
    future = cache._inflight[0, "src"]
    assert not future.done()
    go.set()
    (array,) = cache.get(0, SRC)
    assert np.array_equal(array, store.page(0).src)
    cache.get(1, SRC)
    with pytest.raises(hg.ChecksumError, match="p0000002.src.bin"):
        cache.get(2, SRC)
    cache.close()
