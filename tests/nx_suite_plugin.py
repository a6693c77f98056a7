"""pytest plugin for the run of NetworkX's own tests with the hetgraph backend
(tests/test_nx_suite.py): every call runs on hetgraph, tiny graphs included, so that
the tests check hetgraph's answers, not NetworkX's."""

import hetgraph.tuning


def pytest_configure(config):
    hetgraph.tuning.NX_MIN_ARCS = {}
