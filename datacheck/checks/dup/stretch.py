"""dup: repeated stretches of a running text (a ``.txt`` read by line or paragraph:
:attr:`datacheck.checks.spec.ShardContext.running_text`), the one rule ``dup.exact_in_shard``,
``dup.exact_across_shards`` and ``dup.split_overlap`` apply to its rows.

A row of a running text is a copy when it lies in a stretch of consecutive rows that repeats an
earlier stretch in the same order and holds at least the floor's characters together (200: the
shortest repeat Lee et al. 2022 count as duplicated text, :data:`datacheck.checks.spec.RUNNING_TEXT_MIN_CHARS`).
Within a shard the earlier stretch is earlier in the shard (``dup.exact_in_shard``); across shards it
is in an earlier shard (path order, the same split: ``dup.exact_across_shards``); between splits it is
in the training split (``dup.split_overlap``). So a pasted passage of short verse lines is a copy in
one shard and across two alike, and a play's repeated speaker names are a copy in neither.

The rule, over a sequence of rows (one shard, or the shards of a split one after another, a row that
matches nothing between two shards so no stretch runs across their boundary): the copies (rows whose
content occurs earlier) are taken in order. A stretch starts at a copy ``r`` that does not go on the
stretch before it, aligned with ``e``, the first row holding ``r``'s content (shift ``r - e``); it goes
on over the next rows while each equals the row ``shift`` rows before it, and back over the copies just
before ``r`` that do too (a pasted passage whose first line, a speaker name, first occurs elsewhere).
It counts when its rows hold the floor's characters or more together.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["stretch_copies"]


def stretch_copies(rows: np.ndarray, earlier: np.ndarray, same: Callable[[int, int], bool],
                   chars_of: Callable[[np.ndarray], np.ndarray], floor: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The copies that lie in a repeated stretch of ``floor`` characters or more (module docstring).

    Args:
        rows: positions of the copies in the sequence (int64, shape (n,), any order).
        earlier: for each, the position of the first row holding its content (int64, shape (n,)).
        same: ``same(x, y)``: whether the rows at positions ``x`` and ``y`` hold the same content
            (False where ``y`` is no row).
        chars_of: the characters of the rows at the given positions (int array of the same shape).
        floor: the fewest characters of a stretch that counts.

    Returns:
        (the copies kept, their ``earlier``, the row each repeats in its stretch: its position minus
        the stretch's shift), int64, in position order."""
    order = np.argsort(rows, kind="stable")
    rows, earlier = np.asarray(rows, dtype=np.int64)[order], np.asarray(earlier, dtype=np.int64)[order]
    keep = np.zeros(rows.size, dtype=bool)
    shift_of = np.zeros(rows.size, dtype=np.int64)

    def close(a: int, b: int, shift: int) -> None:
        """The stretch of copies ``a .. b - 1`` (shift ``shift``), extended back, kept when long enough."""
        while a > 0 and rows[a - 1] == rows[a] - 1 and rows[a - 1] >= shift and same(int(rows[a - 1]),
                                                                                        int(rows[a - 1]) - shift):
            a -= 1
        if int(np.asarray(chars_of(rows[a:b])).sum()) >= floor:
            shift_of[a:b] = np.where(keep[a:b], shift_of[a:b], shift)  # a row kept twice keeps its first
            keep[a:b] = True

    start, shift = 0, 0
    for k in range(rows.size):
        r = int(rows[k])
        if k and r == rows[k - 1] + 1 and same(r, r - shift):
            continue
        if k:
            close(start, k, shift)
        start, shift = k, r - int(earlier[k])
    if rows.size:
        close(start, rows.size, shift)
    return rows[keep], earlier[keep], rows[keep] - shift_of[keep]
