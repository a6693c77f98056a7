"""The README's quick start runs as written (in a scratch directory) and does what its
comments say."""

import os
import re

import pytest

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def test_quick_start(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    with open(README) as f:
        text = f.read()
    block = re.search(r"## Quick start.*?```python\n(.*?)```", text, re.S).group(1)
    lines = block.strip().splitlines()
    assert lines[0] == "import hetgraph as hg" and len(lines[1:]) == 10
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(block, "README quick start", "exec"), namespace)
    ranks, hops, comps = namespace["ranks"], namespace["hops"], namespace["comps"]
    assert ranks.converged and hops.converged and comps.converged
    assert (tmp_path / "hops.parquet").stat().st_size > 0
    assert (tmp_path / "timeline.png").read_bytes()[:4] == b"\x89PNG"
    import pandas as pd

    saved = pd.read_parquet(tmp_path / "hops.parquet")
    assert saved["vertex"].tolist() == hops.labels.tolist()
