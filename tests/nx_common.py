"""Helpers of the NetworkX backend's tests (test_nx_*.py import them)."""

import warnings

import pytest

from hetgraph import tuning
from hetgraph.nx_backend import NetworkXFallbackWarning


@pytest.fixture(autouse=True)
def every_call_on_hetgraph(monkeypatch):
    """Tiny graphs too (below tuning.NX_MIN_ARCS they would go to NetworkX)."""
    monkeypatch.setattr(tuning, "NX_MIN_ARCS", {})


def no_fallback():
    """A context in which a NetworkXFallbackWarning is an error."""
    return warnings.catch_warnings(action="error", category=NetworkXFallbackWarning)
