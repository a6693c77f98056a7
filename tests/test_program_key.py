"""The key that tells programs apart within a process (ProgramSpec.key, key_part):
strict where reusing what an equal key found would be an answer (the initial state a
worker keeps, a packed run's plan), loose where it costs speed only (a calibration)."""

import itertools
import zlib

import numpy as np
import pytest

import hetgraph as hg
from hetgraph import tuning
from hetgraph.algorithms.bfs import BreadthFirst
from hetgraph.algorithms.sssp import ShortestPaths
from hetgraph.program import ProgramSpec, kept_apart
from hetgraph.scheduler.checkpoint import sampled_crc32

GRAPH = hg.generate.rmat(8, edge_factor=4, seed=5)
LARGE = tuning.KEPT_ARRAY_BYTES // 8 + 1  # float64 elements of a kept apart array
KINDS = {"strict": None, "loose": zlib.crc32}  # the loose key's digest: every byte


def key(kind, program, **attributes):
    """The ``kind`` key of ``program`` given ``attributes`` besides its own."""
    vars(program).update(attributes)
    return ProgramSpec(program).key(GRAPH, KINDS[kind])


def all_apart(keys):
    """Whether no two of ``keys`` are equal (strict keys may be unhashable)."""
    return all(a != b for a, b in itertools.combinations(keys, 2))


class Opaque:  # (an object of no value semantics, a new one each call)
    pass


@pytest.mark.parametrize("kind", KINDS)
def test_equal_programs_have_equal_keys(kind):
    """Equal for programs of one class and equal parameters, whatever their objects:
    numbers, dtypes, tuples, lists, dicts, small arrays by value, the run's graph."""
    def made():
        return key(kind, ShortestPaths(0), table={"a": [1, (2.5, "x")]},
                   small=np.arange(8.0), on=GRAPH, dtype=np.dtype(np.float32))
    first = made()
    assert first == made()
    assert first[0] is ShortestPaths  # (the class first: the workers keep by it)
    if kind == "loose":
        hash(first)  # (a dict's key: the kept calibrations')


@pytest.mark.parametrize("kind", KINDS)
def test_a_changed_parameter_changes_the_key(kind):
    """Apart for another value of a parameter, its type (1, 1.0 and True are equal in
    Python; a list, a tuple, a dict), the dtype, an item of a list or dict, a new array
    of the same length with other values (small or large), another class."""
    small, large = np.zeros(8), np.zeros(LARGE)
    other_small, other_large = small.copy(), large.copy()
    other_small[3] = other_large[-1] = 1.0
    keys = [key(kind, ShortestPaths(0), note=1, table={"a": [1]}, a=small, b=large),
            key(kind, ShortestPaths(1), note=1, table={"a": [1]}, a=small, b=large),
            key(kind, ShortestPaths(0), note=1.0, table={"a": [1]}, a=small, b=large),
            key(kind, ShortestPaths(0), note=True, table={"a": [1]}, a=small, b=large),
            key(kind, ShortestPaths(0, dtype=np.float32), note=1, table={"a": [1]},
                a=small, b=large),
            key(kind, ShortestPaths(0), note=1, table={"a": [2]}, a=small, b=large),
            key(kind, ShortestPaths(0), note=1, table={"b": [1]}, a=small, b=large),
            key(kind, ShortestPaths(0), note=1, table={"a": (1,)}, a=small, b=large),
            key(kind, ShortestPaths(0), note=1, table=[("a", [1])], a=small, b=large),
            key(kind, ShortestPaths(0), note=1, table={"a": [1]}, a=other_small, b=large),
            key(kind, ShortestPaths(0), note=1, table={"a": [1]}, a=small, b=other_large),
            key(kind, BreadthFirst(0), note=1, table={"a": [1]}, a=small, b=large)]
    assert all_apart(keys)


def test_local_classes_of_one_name_have_keys_apart():
    def local():
        class Local(BreadthFirst):
            pass
        return Local

    first, second = local(), local()
    assert first.__qualname__ == second.__qualname__
    for kind in KINDS:
        assert key(kind, first(0)) == key(kind, first(0))
        assert key(kind, first(0)) != key(kind, second(0))


def test_an_array_changed_in_place_changes_the_strict_key_unless_kept_apart():
    """A small array and a large one not kept apart (a strided view) are keyed by their
    bytes: changed in place, the key changes. An array kept apart is keyed by identity:
    its pack compares its contents before a plan is reused (test_spread's
    test_a_program_array_changed_in_place_is_sent_again runs that)."""
    base = np.zeros(2 * LARGE)
    arrays = {"small": np.zeros(8), "strided": base[::2], "kept": np.zeros(LARGE)}
    assert [kept_apart(a) for a in arrays.values()] == [False, False, True]
    for name, array in arrays.items():
        program = ShortestPaths(0)
        before = key("strict", program, start=array)
        array[1] = 7.0
        after = key("strict", program)
        assert (before == after) == (name == "kept"), name


def test_the_loose_key_sees_the_elements_its_digest_reads():
    """Loose: an array by its digest; the calibration's reads a sample, so that a change
    between samples goes unseen (a calibration reused costs speed, not an answer)."""
    array = np.zeros(4 * tuning.CALIBRATION_KEY_SAMPLES)
    spec = ProgramSpec(ShortestPaths(0))
    spec.program.start = array
    before = spec.key(GRAPH, sampled_crc32)
    array[1] = 1.0  # (between the sampled elements 0 and 4)
    assert spec.key(GRAPH, sampled_crc32) == before
    array[4] = 1.0
    assert spec.key(GRAPH, sampled_crc32) != before


def test_what_has_no_strict_key_has_a_loose_one():
    """An object of no value semantics, an array of objects, another graph: no strict
    key (nothing is reused for the program), a loose one by their class (hashable, as
    a slice, which Python 3.11 does not hash, is made in it)."""
    other = hg.generate.rmat(6, edge_factor=4, seed=1)
    for value in (Opaque(), np.array([None, 1], dtype=object), other, [1, Opaque()]):
        assert key("strict", ShortestPaths(0), note=value) is None
        hash(key("loose", ShortestPaths(0), note=value))
    hash(key("loose", ShortestPaths(0), note=slice(1, 5)))
    assert key("strict", ShortestPaths(0), note=slice(1, 5)) == \
        key("strict", ShortestPaths(0), note=slice(1, 5)) != \
        key("strict", ShortestPaths(0), note=slice(1, 6))


def test_the_initial_key_is_the_strict_key_of_a_program_without_init_side_effects():
    spec = ProgramSpec(ShortestPaths(0))
    assert spec.initial_key(GRAPH) == spec.key(GRAPH)
    program = ShortestPaths(0)
    program.init_side_effects = True
    assert ProgramSpec(program).initial_key(GRAPH) is None
