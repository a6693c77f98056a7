"""The Examples of the reading, building and graph docstrings run as written (the
algorithms' examples are run by hand: each starts a run)."""

import doctest
import importlib

import pytest

MODULES = ["hetgraph.registry", "hetgraph.graph", "hetgraph.partition", "hetgraph.datasets",
           "hetgraph.io.readers", "hetgraph.io.objects", "hetgraph.io.textformats",
           "hetgraph.io.tables", "hetgraph.io.generate", "hetgraph.io.store"]


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted and not result.failed
