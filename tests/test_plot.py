"""Result.plot: the run's timeline drawn from its history."""

import sys

import numpy as np
import pytest

import hetgraph as hg

pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def result():
    return hg.sssp(hg.generate.rmat(scale=12, edge_factor=8, seed=2), 0)


def test_timeline_draws_the_history(result, tmp_path):
    import matplotlib.pyplot as plt

    figure = result.plot(tmp_path / "timeline.png")
    pages, seconds, ratios = figure.axes[:3]
    history = result.history
    cpu_bars = pages.containers[0]
    assert [b.get_height() for b in cpu_bars] == history["cpu_pages"].tolist()
    assert [b.get_x() + b.get_width() / 2 for b in cpu_bars] == \
        history["iteration"].astype(float).tolist()
    marks = [t.get_text() for t in pages.texts]
    assert marks == [{"pull": "P", "notify-pull": "N", "push": "U", "gpu-pull": "G"}[m]
                     for m in history["mode"]]
    assert [b.get_height() for b in seconds.containers[0]] == \
        pytest.approx(history["cpu_seconds"].tolist())
    wall = [line for line in seconds.lines if line.get_label() == "wall"][0]
    assert np.allclose(wall.get_ydata(), history["seconds"])
    f = [line for line in ratios.lines if line.get_label() == "f"][0]
    assert np.allclose(f.get_ydata(), history["f"].where(history["f"] > 0), equal_nan=True)
    assert ratios.get_yscale() == "log"
    assert figure._suptitle.get_text().startswith("ShortestPaths on 4,096 vertices")
    png = (tmp_path / "timeline.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    plt.close(figure)


def test_every_mode_an_engine_writes_has_its_mark(result):
    import matplotlib.pyplot as plt

    modes = ["pull", "notify-pull", "push", "gpu-pull", "gpu-push", "gpu-tocab", "colored",
             "gpu-colored"]
    history = result.history.head(1).loc[[0] * len(modes)].reset_index(drop=True)
    history["iteration"], history["mode"] = np.arange(1, len(modes) + 1), modes
    figure = hg.plot.timeline(history)
    assert [t.get_text() for t in figure.axes[0].texts] == list("PNUGHBCK")
    plt.close(figure)


def test_without_matplotlib(result, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(hg.MissingDependencyError, match=r"pip install 'hetgraph\[plot\]'"):
        result.plot()
