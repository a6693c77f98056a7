"""An owner's range of a sync iteration as it goes to its peers in a message:
whole, or where few of its vertices changed, only those (:func:`part_of`), and how a
peer takes either (:func:`take_part`).

A sparse frontier changes few values: a BFS or SSSP wave, the last iterations of a
connected components run. Between hosts (no shared memory) each owner's whole range
crossed the network every iteration; a part of its changes costs what they are. The
changes are found by comparing the range's two arrays (the iteration's new values
and the ones before it): exact for any program. A peer writes a part into both of its
arrays for the sender's range, so that either is current when the next part comes
(the arrays take turns), and the first part of a stretch of pulls is whole (the other
array of a peer's range is then of an older iteration).
"""

from __future__ import annotations

import numpy as np

from .. import tuning


def part_of(new, old, flags, whole=False):
    """The message fields of an owner's range: its ``new`` values (this iteration's),
    ``old`` ones (the iteration before's, the same length) and ``flags``: only the
    vertices whose value changed and those flagged, where they take less than
    ``tuning.SPARSE_PART_SHARE`` of the whole range's bytes and not ``whole``. Copies:
    the owner may write its arrays once the message is started."""
    from distributed.protocol import to_serialize

    if not whole:
        changed = np.flatnonzero(new != old)
        flagged = np.flatnonzero(flags)
        index = np.dtype(np.int32 if len(new) < 2 ** 31 else np.int64)
        cost = len(changed) * (index.itemsize + new.itemsize) + \
            len(flagged) * (index.itemsize + flags.itemsize)
        if cost < tuning.SPARSE_PART_SHARE * len(new) * (new.itemsize + flags.itemsize):
            return {"changed": to_serialize(changed.astype(index)),
                    "values": to_serialize(new[changed]),
                    "flagged": to_serialize(flagged.astype(index)),
                    "flags": to_serialize(flags[flagged])}
    return {"values": to_serialize(new.copy()), "flags": to_serialize(flags.copy())}


def take_part(part, written, other, flags):
    """Write a peer's ``part`` (:func:`part_of`'s fields) into this owner's arrays of
    the peer's range: ``written`` (the iteration's) and ``other`` (the iteration
    before's; None: one array, async mode) and ``flags``."""
    if "changed" not in part:
        written[:] = part["values"]
        if other is not None:
            other[:] = part["values"]
        flags[:] = part["flags"]
        return
    for into in (written, other):
        if into is not None:
            into[part["changed"]] = part["values"]
    flags[:] = 0
    flags[part["flagged"]] = part["flags"]
