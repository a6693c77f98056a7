"""Run events on the wire: plain types only, checked where they are read.

A run logs its start, its history rows and its end on the Dask scheduler under
:data:`TOPIC` (:class:`hetgraph.scheduler.progress.RunEvents`). Any client of a
scheduler can log a message under that topic, so the dashboard page and the gauges
(:mod:`hetgraph.dashboard`) read untrusted data: history rows travel as msgpack of
numbers and strings (never pickle, which runs code when read), and a message without
the fields and types that :class:`hetgraph.scheduler.progress.RunEvents` sends is left
out (:func:`run_events`).
"""

from __future__ import annotations

import logging

import msgpack

from .result import HISTORY_COLUMNS, row_dict

log = logging.getLogger("hetgraph.events")

TOPIC = "hetgraph"  # the scheduler event-log topic of run events
TEXT_COLUMNS = frozenset({"placement", "mode"})  # the history columns that hold text
_NUMBER = (int, float)
# each column's types: a number, or in a text column text too (history_row fills 0)
_TYPES = tuple((str, *_NUMBER) if name in TEXT_COLUMNS else _NUMBER
               for name in HISTORY_COLUMNS)
# the fields of each event and their types (a message may carry more: "time", "first")
FIELDS = {
    "start": {"run": str, "program": str, "vertices": int, "arcs": int, "devices": str,
              "kinds": dict, "max_iterations": int},
    "iterations": {"run": str, "count": int, "rows_msgpack": bytes},
    "end": {"run": str, "iterations": int, "converged": bool, "error": (str, type(None))},
}


def _plain(value):
    """A numpy scalar as the Python number msgpack can write."""
    return value.item()


def encode_rows(rows) -> bytes:
    """History rows (tuples in HISTORY_COLUMNS' order) as one msgpack bytes object (Dask
    checks every element of a message: one object is cheaper than many)."""
    return msgpack.packb(rows, default=_plain)


def decode_rows(data) -> tuple:
    """The history rows :func:`encode_rows` wrote; ValueError when ``data`` is not
    msgpack of rows with a number or (text columns) a string in each column."""
    if not isinstance(data, bytes):
        raise ValueError(f"history rows are {type(data).__name__}, not msgpack bytes")
    try:
        rows = msgpack.unpackb(data, use_list=False, raw=False)
    except Exception as exc:  # msgpack raises several kinds on malformed bytes
        raise ValueError(f"history rows are not msgpack: {exc}") from None
    if not isinstance(rows, tuple) or not all(_is_row(row) for row in rows):
        raise ValueError("history rows are not rows of numbers and strings")
    return rows


def _is_row(row) -> bool:
    return (isinstance(row, tuple) and len(row) == len(_TYPES) and
            all(isinstance(value, kind) for value, kind in zip(row, _TYPES)))


def run_events(messages) -> list:
    """The run events among ``messages`` (as logged under the topic), in order: dicts
    whose "event" is one of FIELDS, with each field of that event of its type (for
    "start", "kinds" maps strings to integers)."""
    return [message for message in messages if _is_event(message)]


def _is_event(message) -> bool:
    event = message.get("event") if isinstance(message, dict) else None
    fields = FIELDS.get(event) if isinstance(event, str) else None
    if fields is None:  # not a run event (tools may log others under the topic)
        return False
    kinds = message.get("kinds") if event == "start" else {}
    ok = all(isinstance(message.get(name), kind) for name, kind in fields.items()) and \
        all(isinstance(k, str) and isinstance(n, int) for k, n in kinds.items())
    if not ok:
        log.debug("malformed run event ignored: %.200r", message)
    return ok


def message_rows(message) -> list:
    """The history rows of an "iterations" message, as dicts (column name: value); none
    when they are not msgpack of history rows (any client may post to the topic)."""
    try:
        return [row_dict(row) for row in decode_rows(message.get("rows_msgpack"))]
    except ValueError as exc:
        log.debug("run event %s ignored: %s", message.get("run"), exc)
        return []
