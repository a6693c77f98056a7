"""History rows: result.device_row writes each column where HISTORY_COLUMNS says."""

import itertools

from hetgraph.result import HISTORY_COLUMNS, device_row, history_row, row_dict

NAMED = dict(iteration=7, mode="push", f=0.25, rho=1.5, alpha=3.0, active=11, computed=12,
             edges=13, activated=14, read_bytes=15, seconds=0.5, overhead=0.125,
             priority=2.0)
MOVED = dict(h2d_bytes=16, d2h_bytes=17, generation_seconds=0.0625, transfer_seconds=0.75)


def _row(kind, **moved):
    return device_row(kind, NAMED["iteration"], kind, NAMED["mode"], NAMED["f"], NAMED["rho"],
                      NAMED["alpha"], NAMED["active"], NAMED["computed"], NAMED["edges"],
                      NAMED["activated"], 3, NAMED["read_bytes"], NAMED["seconds"],
                      NAMED["overhead"], 0.25, NAMED["priority"], **moved)


def test_device_rows_follow_the_named_columns():
    for kind in ("cpu", "gpu"):
        for moved in ({}, MOVED):  # (what a GPU copies and generates: 0 unless given)
            expected = history_row(placement=kind, **NAMED, **moved,
                                   **{f"{kind}_pages": 3, f"{kind}_edges": NAMED["edges"],
                                      f"{kind}_seconds": 0.25})
            assert row_dict(_row(kind, **moved)) == row_dict(expected)
            assert len(_row(kind, **moved)) == len(HISTORY_COLUMNS)


def test_device_rows_of_columns_are_rows():
    same = itertools.repeat
    columns = device_row("gpu", range(1, 4), same("gpu"), same("pull"), [0.1, 0.2, 0.3],
                         same(1.0), same(2.0), [5, 6, 7], [8, 9, 10], [1, 2, 3], [4, 5, 0],
                         same(2), same(0), [0.1, 0.2, 0.3], same(0.0), [0.05, 0.1, 0.2],
                         [1.0, 2.0, 3.0], same(0), same(0.0))
    rows = [row_dict(row) for row in zip(*columns)]
    assert [r["iteration"] for r in rows] == [1, 2, 3]
    assert [r["gpu_edges"] for r in rows] == [1, 2, 3] and {r["cpu_edges"] for r in rows} == {0}
    assert [r["gpu_seconds"] for r in rows] == [0.05, 0.1, 0.2]
