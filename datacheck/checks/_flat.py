"""One numpy pass over the flat token buffers of a batch, shared by several position-wise rules.

The shard's flat position view (:func:`datacheck.checks.mask.positions_view`) explodes every
aligned token column into one row per position; rules then compare each position with the one
before it (``prev``). On clean data almost every position passes, so exploding and shifting 50M
positions per rule cost more than the decode of the shard. Here the same rules read the list
columns' own value buffers (``Series.explode`` of a list column without empty lists is zero-copy),
with the rows' offsets from the list lengths: a rule is a few vectorized comparisons over the
whole buffer, after which only the (few) candidate positions are looked at again, and per-row
counts come from ``np.bincount`` of their rows. No Python loop over rows.

:func:`position_counts` computes, in one pass, the per-row counts of ``sft.prompt_supervised``,
``sft.eot_unsupervised``, the ``eos`` stat and the candidate rows of ``labels.shift_mismatch``
(each rule reads its own field; the pass is shared
through :func:`~datacheck.checks.registry.shared_pass`, so the registrations cost one pass), and the
other rules :func:`position_counts` lists, ``content.periodic_tokens``' candidate rows included.
Null elements follow the view's rules exactly (a null never matches, a null label is not
supervised); rows left out of the view (``FlatView.row_ok`` false: list lengths differ, mask not
binary) count 0. Equality with the view's expressions is held by the property tests
(``tests/unit/checks/test_flat.py``, references in ``tests/helpers/refs.py``).

The dense comparisons over the whole buffers (:func:`_dense_scan`: the supervised labels, the real
positions, the positions of the wanted ids and of the rare kinds: convention breaks, padding
leaks, labels out of range) run in the compiled kernel ``datacheck._scan.dense_scan``
(``datacheck/csrc/scan.c``, built at install; :mod:`datacheck.io.native`) when it is built and
takes the buffers' types, else in numpy (:func:`_dense_scan_numpy`, the kernel's reference: the
property tests of ``tests/unit/checks/test_flat_native.py`` compare the two). Everything after the
scan (rows, counts, the rules over the few listed positions) is numpy either way.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
import polars as pl
import pyarrow as pa

from datacheck.checks.registry import shared_column, shared_pass
from datacheck.io import native

__all__ = ["POSITION_COUNTS", "position_counts", "flat_ints", "fast_dtype", "by_chunks", "positions_not_reset",
           "periodic_flat", "periodic_runs", "MIN_PERIOD", "MAX_PERIOD", "MIN_REPEATS"]

#: the per-row fields of :func:`position_counts` (UInt32 each)
POSITION_COUNTS = ("prompt", "eot", "eos_total", "eos_sup", "shift", "pad_id", "pad_label", "pad_att", "trunc",
                   "lab_neg", "lab_high", "lab_kept", "lab_sup", "mask_hole", "periodic")

#: ``content.periodic_tokens``: OLMo-core ``InstanceFilterConfig`` defaults (repetition_min_period,
#: repetition_max_period, repetition_max_count)
MIN_PERIOD, MAX_PERIOD, MIN_REPEATS = 1, 13, 32


def fast_dtype(dtype: pl.DataType, mask: bool = False) -> bool:
    """A list column whose values the numpy pass compares exactly: a list of an integer type Int64
    holds (every integer type but UInt64), or with ``mask`` also of Boolean."""
    if not isinstance(dtype, pl.List):
        return False
    inner = dtype.inner
    return (mask and inner == pl.Boolean) or (inner.is_integer() and inner != pl.UInt64)


def _lens(s: pl.Series) -> np.ndarray:
    """The list lengths of ``s`` (int64 per row; null rows 0). A one-chunk column without null rows:
    the differences of its Arrow offsets (zero-copy export; 0.02 ms for 19,581 rows, 0.14 ms by the
    list kernel)."""
    if s.n_chunks() == 1 and not s.null_count():
        arr = s.to_arrow()
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.chunk(0) if arr.num_chunks == 1 else arr.combine_chunks()
        if pa.types.is_large_list(arr.type) or pa.types.is_list(arr.type):
            width = np.int64 if pa.types.is_large_list(arr.type) else np.int32
            offsets = np.frombuffer(arr.buffers()[1], dtype=width)[arr.offset:arr.offset + len(arr) + 1]
            return np.diff(offsets).astype(np.int64, copy=False)
    return s.list.len().fill_null(0).to_numpy().astype(np.int64, copy=False)


def flat_ints(s: pl.Series) -> tuple[np.ndarray, np.ndarray | None]:
    """(values, valid) of a list column's elements in row order (null rows and empty lists hold no
    element): ``values`` a numpy view of the buffer (nulls as 0), ``valid`` None without null element."""
    flat = s.explode(empty_as_null=False, keep_nulls=False)
    if flat.null_count():
        return flat.fill_null(0).to_numpy(), flat.is_not_null().to_numpy()
    return flat.to_numpy(), None


@dataclass(frozen=True)
class _Rows:
    offsets: np.ndarray  # int64, rows + 1
    ok: np.ndarray       # bool per row: the row is in the view
    width: int = 0       # every row holds this many positions (> 0), else 0 (:meth:`of`)

    @classmethod
    def of(cls, offsets: np.ndarray, ok: np.ndarray) -> _Rows:
        """The rows of ``offsets`` (int64, starting at 0), with :attr:`width` set when every row has
        one length (padded batches): the row of a position is then a division, where a binary
        search over the offsets cost 2.4 ms for the 38,917 eos positions of a 38,917 x 128 batch."""
        lens = np.diff(offsets)
        w = int(lens[0]) if len(lens) else 0
        return cls(offsets, ok, w if w > 0 and int(offsets[0]) == 0 and bool((lens == w).all()) else 0)

    def row_of(self, idx: np.ndarray) -> np.ndarray:
        """The row (int64) of each flat position ``idx`` (int64, in ``[0, offsets[-1])``)."""
        if self.width:
            return idx // self.width
        return np.searchsorted(self.offsets, idx, side="right") - 1

    def has_prev(self, idx: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The flat positions ``idx`` (of rows ``rows``) have a position before them in their row."""
        return idx > self.offsets[rows]

    def counts(self, idx: np.ndarray, rows: np.ndarray) -> np.ndarray:
        n = len(self.ok)
        return np.bincount(rows, minlength=n).astype(np.uint32) if len(idx) else np.zeros(n, dtype=np.uint32)


def _is(values: np.ndarray, valid: np.ndarray | None, x: int) -> np.ndarray:
    out = values == x
    return out if valid is None else (out & valid)


def _as(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``x`` in ``dtype`` when that holds every value of ``x``'s dtype (a copy), else ``x``."""
    return x.astype(dtype) if x.dtype != dtype and np.can_cast(x.dtype, dtype, casting="safe") else x


@dataclass(frozen=True)
class _Aligned:
    """Flat buffers of several list columns read in one coordinate system: position ``k`` of the
    pass is element ``k + shift`` of each column's buffer, where ``shift`` is that column's shift in
    the segment holding ``k`` (:attr:`segs`). Positions outside every segment (the elements of
    :attr:`gaps` rows in the first column) are never scanned and no column element is read there."""

    lens: np.ndarray        # int64 per row: the row's positions (the first column's lengths, or 0)
    cols: list[tuple[np.ndarray, np.ndarray | None]]  # (values, valid) of each column
    segs: list[tuple[int, int, tuple[int, ...]]]      # (start, end, shift of each column), ascending
    gaps: np.ndarray        # int64: rows whose lists differ in length (their positions are not scanned)
    whole: bool             # every column's every element is at a scanned position (labels included)

    def take(self, c: int, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """(values, valid) of column ``c`` at the positions ``idx`` (int64, inside segments)."""
        values, valid = self.cols[c]
        if len(self.segs) == 1:
            j = idx + self.segs[0][2][c] if self.segs[0][2][c] else idx
        else:
            starts = np.fromiter((a for a, _, _ in self.segs), dtype=np.int64, count=len(self.segs))
            shifts = np.fromiter((sh[c] for _, _, sh in self.segs), dtype=np.int64, count=len(self.segs))
            j = idx + shifts[np.searchsorted(starts, idx, side="right") - 1]
        return values[j], None if valid is None else valid[j]

    def dense(self, c: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Column ``c`` at every position (a copy when the column's buffer is not in the pass's
        coordinates; positions of :attr:`gaps` rows hold 0 / not valid)."""
        values, valid = self.cols[c]
        if all(sh[c] == 0 for _, _, sh in self.segs) and len(values) == int(self.lens.sum()):
            return values, valid
        n = int(self.lens.sum())
        out = np.zeros(n, dtype=values.dtype)
        ok = None if valid is None else np.zeros(n, dtype=bool)
        for a, b, sh in self.segs:
            out[a:b] = values[a + sh[c]:b + sh[c]]
            if ok is not None and valid is not None:
                ok[a:b] = valid[a + sh[c]:b + sh[c]]
        return out, ok


def _aligned_flat(cols: list[pl.Series], ok: pl.Series) -> _Aligned:
    """The flat buffers of ``cols`` (:func:`flat_ints`) sharing one offset per row.

    When the list lengths differ on some rows (never rows of the view: ``ok`` is the view's row
    condition, which requires one length), the pass must not compare elements of different rows.
    Few such rows (at most one per :data:`ELEMENTS_PER_SLICE` elements): no column is copied; the
    positions are the first column's, and the runs of rows between two such rows are segments in
    which each other column's elements sit at a constant shift (the positions of the rows that
    differ are skipped). Copying the columns without those rows cost 24 ms a batch of 19,581 x 256
    rows with 206 such rows (benchmarks/bench_peers.py's shard: int64 labels, int32 ids, int8 mask),
    the segments nothing. Many such rows: the rows outside the view are taken out of every column
    (one boolean selection a column; their length becomes 0), and the segment is the whole."""
    lens = [_lens(c) for c in cols]
    flats = [flat_ints(c) for c in cols]
    n = int(lens[0].sum())
    zero = (0,) * len(cols)
    differ = np.zeros(len(lens[0]), dtype=bool)
    for x in lens[1:]:
        differ |= x != lens[0]
    gaps = np.flatnonzero(differ)
    if not len(gaps):
        return _Aligned(lens[0], flats, [(0, n, zero)] if n else [], gaps, True)
    if len(gaps) * ELEMENTS_PER_SLICE > max(n, 1):
        keep = ok.fill_null(False).to_numpy() & ~differ
        out = [(values[np.repeat(keep, n_c)], None if valid is None else valid[np.repeat(keep, n_c)])
               for n_c, (values, valid) in zip(lens, flats)]
        kept = np.where(keep, lens[0], 0)
        total = int(kept.sum())
        return _Aligned(kept, out, [(0, total, zero)] if total else [], np.zeros(0, dtype=np.int64), False)
    offs = []
    for x in lens:
        o = np.zeros(len(x) + 1, dtype=np.int64)
        np.cumsum(x, out=o[1:])
        offs.append(o)
    first = np.concatenate([[0], gaps + 1])   # segments of rows: [first[i], last[i])
    last = np.concatenate([gaps, [len(lens[0])]])
    segs = []
    for r0, r1 in zip(first.tolist(), last.tolist()):
        a, b = int(offs[0][r0]), int(offs[0][r1])
        if b > a:
            segs.append((a, b, tuple(int(o[r0]) - a for o in offs)))
    return _Aligned(lens[0], flats, segs, gaps, False)


#: :func:`_aligned_flat` keeps the columns' own buffers (segments between the rows whose lists differ
#: in length) when the buffers hold at least this many elements per such row; else it copies the
#: columns without the rows outside the view (a segment costs about 30 numpy calls of the scan, a
#: boolean selection about 1 ns an element)
ELEMENTS_PER_SLICE = 2000


def _pass(inputs: list[pl.Series], ign: int, shifted: bool, stop: tuple[int, ...], eos: int | None,
          with_am: bool, with_att: bool, pad: int | None = None, bound: int | None = None,
          keep_len: int | None = None, keep_side: str = "right", padding_side: str = "right") -> pl.Series:
    """:func:`_chunk_pass` over each chunk of the inputs when they are cut alike (rows never span
    chunks; exploding a column of several chunks would copy it), else over the rechunked inputs."""
    return by_chunks(inputs, lambda parts: _chunk_pass(parts, ign, shifted, stop, eos, with_am, with_att, pad,
                                                       bound, keep_len, keep_side, padding_side))


def by_chunks(inputs: list[pl.Series], fn: Callable[[list[pl.Series]], pl.Series]) -> pl.Series:
    """``fn`` over each chunk of ``inputs`` (Series of one length) when they are cut alike (rows never
    span chunks; exploding a column of several chunks would copy it), else over the rechunked inputs;
    the per-row results concatenated."""
    cuts = [s.chunk_lengths() for s in inputs]
    if len(cuts[0]) > 1 and all(c == cuts[0] for c in cuts[1:]):
        parts = [s.get_chunks() for s in inputs]
        return pl.concat([fn([p[k] for p in parts]) for k in range(len(cuts[0]))])
    return fn([s.rechunk() for s in inputs])


#: elements of the flat buffers one step of :func:`_dense_scan_numpy` works on: the label and id slices
#: (int64: 512 KiB) and the masks made from them stay in the CPU cache between the comparisons of
#: one step, where whole-buffer comparisons read the labels from memory once per comparison (on
#: 19,528 x 256 rows with int64 labels and int32 ids: 15.7 ms by steps of 65,536, 27.5 ms whole)
SCAN_STEP = 65536


def _dense_scan(ids: np.ndarray, ids_ok: np.ndarray | None, lab: np.ndarray, lab_ok: np.ndarray | None,
                att: np.ndarray | None, att_ok: np.ndarray | None, ign: int, shifted: bool,
                wanted: tuple[int, ...], pad: int | None = None, bound: int | None = None,
                segs: list[tuple[int, int, int, int]] | None = None
                ) -> tuple[np.ndarray, np.ndarray | None, dict[str, np.ndarray]]:
    """The comparisons of :func:`_chunk_pass` over the whole flat buffers, by steps of
    :data:`SCAN_STEP` elements: ``sup0`` (bool per position: the label is neither ``ign`` nor null),
    ``real`` (with a mask ``att``, bool per position: the mask is 1 and not null; else None) and the
    positions (int64, ascending) of

    - ``off``: labels that break the convention, the shift candidates before the row-end and
      row-view rules: unshifted ``sup0[k] & ~(lab[k] == ids[k] & ids_ok[k])``, shifted
      ``sup0[k] & lab[k] != ids[k+1] & ids_ok[k+1]`` for ``k + 1 < len``;
    - ``hits``: real content (attention mask ``att`` 1 and not null; every position without a
      mask) holding a non-null id of ``wanted``;
    - ``pad_id`` / ``pad_label`` (with a mask): positions of mask 0 holding a non-null id other than
      ``pad`` (none when ``pad`` is None) / a label where ``sup0``;
    - ``neg`` / ``high``: labels where ``sup0`` that are negative / at least ``bound`` (none when
      ``bound`` is None). Both come from one comparison where ``0 <= bound <=`` the label type's
      maximum: the labels read as unsigned integers of their width are ``>= bound`` exactly when
      negative or at least ``bound``.

    The four lists of rare positions (``off``, ``pad_id``, ``pad_label`` and the labels out of
    range) are gathered as one: each step ORs their masks into one buffer and lists its positions
    only when it holds one (``any`` first: on clean data none does); the positions are then sorted
    into the four lists by evaluating each rule again at them (a few values gathered), so a step
    costs one ``any`` and at most one ``flatnonzero`` for the four of them (benchmarks/bench_peers.py's
    shard, whose planted defects leave one of each kind in most steps: about four before).

    Positions are the ids' (``ids[k]``); ``segs`` lists the ranges ``[start, end)`` of positions
    scanned with, for each, the shift of the labels' and the mask's buffers (position ``k`` is
    ``lab[k + lab_shift]``, ``att[k + att_shift]``; :class:`_Aligned`); None: every position, no
    shift. ``sup0`` and ``real`` are False at positions outside the ranges, and no position there is
    listed.

    The compiled kernel ``datacheck._scan.dense_scan`` (``datacheck/csrc/scan.c``,
    :mod:`datacheck.io.native`) computes exactly these arrays and lists (same values, dtypes and
    order) in one pass over the buffers, by blocks of 2,048 positions in the CPU cache (branch-free
    comparisons flag the positions, then each flagged one is sorted into its lists), the GIL released,
    when it is built and takes the arguments (:func:`_native_takes`); else :func:`_dense_scan_numpy`,
    its reference, does (on an ``f100`` shard 1.8 against 3.7 CPU ms: docs/benchmarks.md). Raises
    ValueError (the kernel) when a buffer's type, layout or length does not hold the segments."""
    if native.scan is not None and _native_takes(ids, ids_ok, lab, lab_ok, att, att_ok, ign, wanted, pad, bound):
        return _dense_scan_native(ids, ids_ok, lab, lab_ok, att, att_ok, ign, shifted, wanted, pad, bound, segs)
    return _dense_scan_numpy(ids, ids_ok, lab, lab_ok, att, att_ok, ign, shifted, wanted, pad, bound, segs)


#: the names of the position lists of :func:`_dense_scan`, in the order the kernel returns them
SCAN_LISTS = ("hits", "off", "pad_id", "pad_label", "neg", "high")
_I64 = (-(1 << 63), (1 << 63) - 1)


def _native_takes(ids: np.ndarray, ids_ok: np.ndarray | None, lab: np.ndarray, lab_ok: np.ndarray | None,
                  att: np.ndarray | None, att_ok: np.ndarray | None, ign: int, wanted: tuple[int, ...],
                  pad: int | None, bound: int | None) -> bool:
    """The compiled ``dense_scan`` takes these arguments: ids and labels of int8..int64 or
    uint8..uint32, a mask of those or bool, bool validity arrays, every array 1-D, C-contiguous and
    in the machine's byte order, and integer constants that fit int64 (each comparison, made in int64
    by the kernel, is then numpy's: NumPy >= 2 compares integer arrays with Python ints exactly)."""
    if getattr(native.scan, "dense_scan", None) is None:
        return False
    for x, kinds in ((ids, "iu"), (lab, "iu"), (att, "iub"), (ids_ok, "b"), (lab_ok, "b"), (att_ok, "b")):
        if x is None:
            continue
        dt = x.dtype
        if (dt.kind not in kinds or not dt.isnative or (dt.kind == "u" and dt.itemsize > 4) or x.ndim != 1
                or not x.flags.c_contiguous):
            return False
    consts = (ign, *wanted, *(() if pad is None else (pad,)), *(() if bound is None else (bound,)))
    return all(_I64[0] <= int(c) <= _I64[1] for c in consts)


def _dense_scan_native(ids: np.ndarray, ids_ok: np.ndarray | None, lab: np.ndarray, lab_ok: np.ndarray | None,
                       att: np.ndarray | None, att_ok: np.ndarray | None, ign: int, shifted: bool,
                       wanted: tuple[int, ...], pad: int | None = None, bound: int | None = None,
                       segs: list[tuple[int, int, int, int]] | None = None
                       ) -> tuple[np.ndarray, np.ndarray | None, dict[str, np.ndarray]]:
    """:func:`_dense_scan` by the compiled kernel (arguments :func:`_native_takes` accepts; ValueError
    from the kernel when the buffers do not hold the segments, RuntimeError when it is not built)."""
    kernel = getattr(native.scan, "dense_scan", None)
    if kernel is None:
        raise RuntimeError("datacheck._scan.dense_scan is not built (datacheck/io/native.py)")
    n = len(ids)
    if segs is None:
        segs = [(0, n, 0, 0)] if n else []
    covered = sum(b - a for a, b, _, _ in segs) == n
    sup0 = (np.empty if covered else np.zeros)(n, dtype=bool)
    real = (np.empty if covered else np.zeros)(n, dtype=bool) if att is not None else None
    got = kernel(ids, ids_ok, lab, lab_ok, att, att_ok, sup0, real, int(ign), bool(shifted),
                 tuple(int(w) for w in wanted), None if pad is None else int(pad),
                 None if bound is None else int(bound), [tuple(int(v) for v in g) for g in segs])
    return sup0, real, {name: np.frombuffer(b, dtype=np.int64) for name, b in zip(SCAN_LISTS, got)}


def _dense_scan_numpy(ids: np.ndarray, ids_ok: np.ndarray | None, lab: np.ndarray, lab_ok: np.ndarray | None,
                      att: np.ndarray | None, att_ok: np.ndarray | None, ign: int, shifted: bool,
                      wanted: tuple[int, ...], pad: int | None = None, bound: int | None = None,
                      segs: list[tuple[int, int, int, int]] | None = None
                      ) -> tuple[np.ndarray, np.ndarray | None, dict[str, np.ndarray]]:
    """:func:`_dense_scan` by numpy: the reference of the compiled kernel, and its fallback."""
    n = len(ids)
    if segs is None:
        segs = [(0, n, 0, 0)] if n else []
    covered = sum(b - a for a, b, _, _ in segs) == n
    sup0 = (np.empty if covered else np.zeros)(n, dtype=bool)
    parts: dict[str, list[np.ndarray]] = {"hits": [], "rare": []}
    step = min(n, SCAN_STEP)
    buf, hit, more = np.empty(step, dtype=bool), np.empty(step, dtype=bool), np.empty(step, dtype=bool)
    masked = np.empty(step, dtype=bool)
    real = (np.empty if covered else np.zeros)(n, dtype=bool) if att is not None else None
    # the pad id is the only wanted id (GPT-2 style: pad = eos): padding.token_not_pad reuses the
    # comparison with it (a masked position holding a non-null id that is not the pad)
    pad_is_wanted = pad is not None and wanted == (pad,)
    unsigned = None  # labels read as unsigned: one comparison finds the negative and the high ones
    if bound is not None and lab.dtype.kind == "i" and 0 <= bound <= np.iinfo(lab.dtype).max:
        unsigned = lab.view(np.dtype(f"u{lab.dtype.itemsize}"))

    def where(name: str, mask: np.ndarray, a: int) -> None:
        if mask.any():
            parts[name].append(np.flatnonzero(mask) + a)

    for a, b, sl, sa in _steps(segs):
        k = b - a
        lab_a, ids_a, sup_a = lab[a + sl:b + sl], ids[a:b], sup0[a:b]
        np.not_equal(lab_a, ign, out=sup_a)
        if lab_ok is not None:
            sup_a &= lab_ok[a + sl:b + sl]
        rare = buf[:k]  # off | pad_id | pad_label | out of range, sorted out after the scan
        if not shifted:
            np.not_equal(lab_a, ids_a, out=rare)
            if ids_ok is not None:
                rare |= ~ids_ok[a:b]
            rare &= sup_a
        else:  # position k against the id at k + 1 (the last position of the buffers has none)
            e = min(b, n - 1)
            t = rare[:e - a]
            np.not_equal(lab[a + sl:e + sl], ids[a + 1:e + 1], out=t)
            if ids_ok is not None:
                t &= ids_ok[a + 1:e + 1]
            t &= sup_a[:e - a]
            rare[e - a:] = False
        h, x = hit[:k], more[:k]
        if real is not None and att is not None:
            r_a, m_a = real[a:b], masked[:k]
            np.equal(att[a + sa:b + sa], 1, out=r_a)
            np.equal(att[a + sa:b + sa], 0, out=m_a)
            if att_ok is not None:
                r_a &= att_ok[a + sa:b + sa]
                m_a &= att_ok[a + sa:b + sa]
        if wanted:
            np.equal(ids_a, wanted[0], out=h)
            for w in wanted[1:]:
                h |= ids_a == w
            if pad_is_wanted and att is not None:  # masked and not the pad: m_a > (ids == pad)
                np.greater(m_a, h, out=x)
                if ids_ok is not None:
                    x &= ids_ok[a:b]
                rare |= x
            if ids_ok is not None:
                h &= ids_ok[a:b]
            if att is not None:
                h &= r_a
            where("hits", h, a)
        if att is not None:
            if pad is not None and not pad_is_wanted:
                np.not_equal(ids_a, pad, out=x)
                x &= m_a
                if ids_ok is not None:
                    x &= ids_ok[a:b]
                rare |= x
            np.logical_and(m_a, sup_a, out=x)
            rare |= x
        if unsigned is not None:
            np.greater_equal(unsigned[a + sl:b + sl], bound, out=x)
        else:
            np.less(lab_a, 0, out=x)
            if bound is not None:
                x |= lab_a >= bound
        x &= sup_a
        rare |= x
        where("rare", rare, a)
    empty = np.zeros(0, dtype=np.int64)
    at = {"hits": np.concatenate(parts["hits"]) if parts["hits"] else empty}
    p = np.concatenate(parts["rare"]) if parts["rare"] else empty
    sup_p = sup0[p]
    vals = lab[p + _shift_at(segs, p, 2)]
    if not shifted:
        off = ids[p] != vals
        if ids_ok is not None:
            off |= ~ids_ok[p]
    else:
        nxt = np.minimum(p + 1, n - 1)
        off = (p + 1 < n) & (ids[nxt] != vals)
        if ids_ok is not None:
            off &= ids_ok[nxt]
    at["off"] = p[off & sup_p]
    if att is not None:
        pa_ = p + _shift_at(segs, p, 3)
        m_p = att[pa_] == 0
        if att_ok is not None:
            m_p &= att_ok[pa_]
        if pad is not None:
            bad_id = m_p & (ids[p] != pad)
            if ids_ok is not None:
                bad_id &= ids_ok[p]
            at["pad_id"] = p[bad_id]
        else:
            at["pad_id"] = empty
        at["pad_label"] = p[m_p & sup_p]
    else:
        at["pad_id"] = at["pad_label"] = empty
    at["neg"] = p[sup_p & (vals < 0)]
    at["high"] = p[sup_p & (vals >= bound)] if bound is not None else empty
    return sup0, real, at


def _steps(segs: list[tuple[int, int, int, int]]) -> Iterator[tuple[int, int, int, int]]:
    """The steps of :func:`_dense_scan`: ``(start, end, lab_shift, att_shift)``, at most
    :data:`SCAN_STEP` positions each, none crossing a segment's end."""
    for a0, b0, sl, sa in segs:
        for a in range(a0, b0, SCAN_STEP):
            yield a, min(b0, a + SCAN_STEP), sl, sa


def _shift_at(segs: list[tuple[int, int, int, int]], idx: np.ndarray, field: int) -> np.ndarray | int:
    """The shift (``segs`` tuple item ``field``) of the segment holding each position ``idx``."""
    if len(segs) <= 1:
        return segs[0][field] if segs else 0
    starts = np.fromiter((s[0] for s in segs), dtype=np.int64, count=len(segs))
    shifts = np.fromiter((s[field] for s in segs), dtype=np.int64, count=len(segs))
    return shifts[np.searchsorted(starts, idx, side="right") - 1]


#: at most this many window cells (candidates x window width) are held at once by :func:`periodic_flat`
_CELLS = 1 << 22
#: positions of the flat buffers :func:`_periodic_flat_numpy` samples for every period while they are in the
#: CPU cache (512 Ki: 2 MiB of int32 ids and their 512 KiB of flags), where sampling the whole buffer
#: once per period read its cache lines from memory 13 times: on 10,000 x 1,024 int32 ids 5.3 ms
#: against 9.3 (65,536: 11.3 ms, the numpy calls' own cost; 1 Mi: 6.7 ms; the 2-core development machine)
PERIODIC_BLOCK = 1 << 19


def periodic_flat(vals: np.ndarray, ok: np.ndarray | None, offsets: np.ndarray) -> np.ndarray:
    """Per row (bool, ``len(offsets) - 1`` rows): the row holds a run of ``content.periodic_tokens``:
    for some period ``p`` in ``MIN_PERIOD..MAX_PERIOD``, ``L = (MIN_REPEATS - 1) p`` consecutive
    positions ``j`` of the row with ``vals[j] == vals[j + p]``, ``j + p`` in the row and, with ``ok``
    (bool per position: the id is not null and the position is real content), both positions ok.

    ``vals``: the flat id buffer (integers, rows in order, nulls as any value); ``offsets``: int64,
    each row's first position, then the total. One pass over the buffer, no loop over rows: any ``L``
    consecutive flat positions contain exactly one multiple of ``L``, so a run of length ``>= L``
    holds a true comparison at a sampled position ``s = kL``. Only those samples (``N / L`` per
    period) are compared first, block of :data:`PERIODIC_BLOCK` positions by block, every period
    while a block is in the cache; around each true one, the ``2L - 1`` positions centred on it give
    the exact length of its run. On ordinary tokens almost no sample matches, so the cost is a few
    strided comparisons per period; on degenerate data (every sample true) it is about ``2N``
    comparisons per period.

    The compiled kernel ``datacheck._scan.periodic_rows`` (``datacheck/csrc/scan.c``) runs the same
    algorithm (the samples, then the run around each true one, measured in its row) when it is built
    and takes the buffers (integer ``vals`` of a type other than uint64, bool ``ok``, int64
    ``offsets`` from 0, all contiguous); else :func:`_periodic_flat_numpy`, its reference, does."""
    kernel = getattr(native.scan, "periodic_rows", None)
    if kernel is not None and _periodic_takes(vals, ok, offsets):
        out = np.zeros(len(offsets) - 1, dtype=bool)
        kernel(vals, ok, offsets, out)
        return out
    return _periodic_flat_numpy(vals, ok, offsets)


def _periodic_takes(vals: np.ndarray, ok: np.ndarray | None, offsets: np.ndarray) -> bool:
    """``datacheck._scan.periodic_rows`` takes these buffers (see :func:`periodic_flat`)."""
    for x, kinds in ((vals, "iub"), (ok, "b"), (offsets, "i")):
        if x is None:
            continue
        dt = x.dtype
        if dt.kind not in kinds or not dt.isnative or x.ndim != 1 or not x.flags.c_contiguous:
            return False
    return (not (vals.dtype.kind == "u" and vals.dtype.itemsize > 4) and offsets.dtype.itemsize == 8
            and len(offsets) > 0 and int(offsets[0]) == 0 and int(offsets[-1]) <= len(vals)
            and (ok is None or len(ok) == len(vals)))


def _periodic_flat_numpy(vals: np.ndarray, ok: np.ndarray | None, offsets: np.ndarray) -> np.ndarray:
    """:func:`periodic_flat` by numpy: the reference of the compiled kernel, and its fallback."""

    n = len(offsets) - 1
    out = np.zeros(n, dtype=bool)
    total = int(offsets[-1])
    # a run of period p spans MIN_REPEATS * p positions of one row: periods longer than the longest
    # row allows are not searched (on rows of 128 ids, periods 5 to 13)
    longest = int((offsets[1:] - offsets[:-1]).max()) if n else 0
    periods = [p for p in range(MIN_PERIOD, MAX_PERIOD + 1) if total > p and MIN_REPEATS * p <= longest]
    found: dict[int, list[np.ndarray]] = {p: [] for p in periods}
    for b0 in range(0, total, PERIODIC_BLOCK):  # the samples s = k win in [b0, b1) of each period
        b1 = min(total, b0 + PERIODIC_BLOCK)
        for p in periods:
            win = (MIN_REPEATS - 1) * p
            lo, hi = -(-b0 // win) * win, min(b1, total - p)
            if lo >= hi:
                continue
            s_ok = vals[lo:hi:win] == vals[lo + p:hi + p:win]  # strided views, no copies
            if ok is not None:
                s_ok &= ok[lo:hi:win] & ok[lo + p:hi + p:win]
            if s_ok.any():
                found[p].append(np.flatnonzero(s_ok).astype(np.int64) * win + lo)
    for p in periods:
        if not found[p]:
            continue
        win = (MIN_REPEATS - 1) * p
        cand = np.concatenate(found[p])
        crow = np.searchsorted(offsets, cand, side="right") - 1
        keep = (cand + p < offsets[crow + 1]) & ~out[crow]  # the compared position in the same row
        cand, crow = cand[keep], crow[keep]
        step = max(1, _CELLS // (2 * win))
        for c0 in range(0, len(cand), step):  # bounded memory: chunks of candidates, not rows
            c, r = cand[c0:c0 + step], crow[c0:c0 + step]
            live = ~out[r]  # a row found by an earlier chunk is not looked at again (a row of one id: one chunk)
            c, r = c[live], r[live]
            if not len(c):
                continue
            j = c[:, None] + np.arange(-(win - 1), win, dtype=np.int64)[None, :]
            inside = (j >= offsets[r][:, None]) & (j + p < offsets[r + 1][:, None])
            jc = np.clip(j, 0, total - 1 - p)
            eq = inside & (vals[jc] == vals[jc + p])
            if ok is not None:
                eq &= ok[jc] & ok[jc + p]
            left = eq[:, : win - 1][:, ::-1]  # positions c-1, c-2, ... (c itself is true)
            right = eq[:, win:]
            n_left = np.where(left.all(axis=1), win - 1, left.argmin(axis=1))
            n_right = np.where(right.all(axis=1), win - 1, right.argmin(axis=1))
            out[r[n_left + 1 + n_right >= win]] = True
    return out


#: positions of one row :func:`periodic_runs` compares at once for one period (1 Mi: 1 MiB of flags,
#: at most 8 MiB of run boundaries), so its memory does not grow with the row
RUN_CHUNK = 1 << 20


def _first_run(vals: np.ndarray, ok: np.ndarray | None, a: int, b: int, p: int, before: int) -> tuple[int, int] | None:
    """The first run of row ``[a, b)`` of the flat buffer for period ``p``: (start, length) of the first
    maximal stretch of ``(MIN_REPEATS - 1) p`` or more consecutive positions ``j`` (``j + p < b``) with
    ``vals[j] == vals[j + p]`` and both positions ok; None when there is none starting before flat
    position ``before`` (the search stops there). Chunks of :data:`RUN_CHUNK` positions."""
    need = (MIN_REPEATS - 1) * p
    end = b - p  # the positions compared: [a, end)
    run_start = a  # where the current stretch of true comparisons began
    for c0 in range(a, end, RUN_CHUNK):
        if run_start >= before:
            return None
        c1 = min(end, c0 + RUN_CHUNK)
        eq = vals[c0:c1] == vals[c0 + p:c1 + p]
        if ok is not None:
            eq &= ok[c0:c1] & ok[c0 + p:c1 + p]
        false = np.flatnonzero(~eq) + c0
        if not len(false):
            continue
        starts = np.concatenate(([run_start], false[:-1] + 1))
        long = np.flatnonzero(false - starts >= need)  # stretches ended in this chunk by a false comparison
        if len(long):
            k = int(long[0])
            return (int(starts[k]), int(false[k] - starts[k])) if starts[k] < before else None
        run_start = int(false[-1]) + 1
    if end - run_start >= need and run_start < before:
        return run_start, end - run_start
    return None


def periodic_runs(vals: np.ndarray, ok: np.ndarray | None, offsets: np.ndarray, limit: int) -> list[tuple[int, int, int, int]]:
    """The details of ``content.periodic_tokens``: for the first ``limit`` rows (in order) holding a
    run (:func:`periodic_flat`, same arguments), (row index, start, period, repeats): the row's
    first position covered by a run of any period ``p`` (a stretch of at least ``(MIN_REPEATS - 1) p``
    consecutive positions ``j`` with ``vals[j] == vals[j + p]``, both ok, ``j + p`` in the row), as a
    0-based position in the row; the smallest period with a run starting there; its repeats
    ``length // p + 1`` (``length``: the stretch's full number of true comparisons).

    Memory: :func:`periodic_flat` over the buffer, then per row and period one chunk of
    :data:`RUN_CHUNK` positions at a time: a row of 4 million ids of one value costs a few MiB
    beyond its own buffer (the per-position expressions it replaces held about 700 bytes a position)."""
    rows = np.flatnonzero(periodic_flat(vals, ok, offsets))[:limit]
    out = []
    for r in rows.tolist():
        a, b = int(offsets[r]), int(offsets[r + 1])
        best: tuple[int, int, int] | None = None  # (start, period, length)
        for p in range(MIN_PERIOD, MAX_PERIOD + 1):
            if b - a < MIN_REPEATS * p:
                break
            got = _first_run(vals, ok, a, b, p, b if best is None else best[0])
            if got is not None:  # starts before the best so far (a tie keeps the smaller period)
                best = (got[0], p, got[1])
        if best is not None:
            out.append((r, best[0] - a, best[1], best[2] // best[1] + 1))
    return out


#: the widest window (positions per row) :func:`_last_true` compares at once
LAST_WINDOW = 512


def _last_true(flags: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per segment ``[starts[i], ends[i])`` of ``flags`` (bool), the index of its last True, -1 when
    it has none. Searched from the end by windows of 8, 64, then :data:`LAST_WINDOW` positions: a
    response's last supervised label lies near the row's end, so most segments cost one window of 8."""
    out = np.full(len(starts), -1, dtype=np.int64)
    todo = np.flatnonzero(ends > starts)
    hi = ends.astype(np.int64, copy=True)
    width = 8
    while len(todo):
        lo_s, h = starts[todo], hi[todo]
        lo = np.maximum(lo_s, h - width)
        at = h[:, None] - 1 - np.arange(width, dtype=np.int64)[None, :]  # h-1, h-2, ... h-width
        hit = (at >= lo[:, None]) & flags[np.maximum(at, 0)]
        anyhit = hit.any(axis=1)
        out[todo[anyhit]] = (h - 1 - hit.argmax(axis=1))[anyhit]
        hi[todo] = lo
        todo = todo[~anyhit & (lo > lo_s)]
        width = min(width * 8, LAST_WINDOW)
    return out


def _mask_holes(att_s: pl.Series, side: str) -> np.ndarray:
    """Per row of the attention mask ``att_s`` (list of int or bool; every row, whatever the view),
    UInt32: 1 when the mask is binary (no null element, every value 0 or 1) and its 1s are not one
    block against ``side`` (``"right"``: a 1 after a 0; ``"left"``: a 0 after a 1; ``"either"``:
    one block at neither end, i.e. two or more steps, up or down, within the row), else 0 (null and
    empty rows: 0). Over the mask's own flat buffer read as unsigned integers of its width: a value
    above 1 (a negative one included) is not binary, and a step up (right) or down (left) between
    two positions of one row is a hole."""
    n = att_s.len()
    out = np.zeros(n, dtype=np.uint32)
    vals, valid = flat_ints(att_s)
    if len(vals) < 2:
        return out
    lens = _lens(att_s)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    u = vals.view(np.dtype(f"u{vals.dtype.itemsize}"))
    d = u[1:] > u[:-1] if side == "right" else u[1:] < u[:-1] if side == "left" else u[1:] != u[:-1]
    # d[i]: a step from position i to i + 1
    cut = offsets[1:-1] - 1  # steps onto a row's first position lie between rows: not holes
    d[cut[(cut >= 0) & (cut < len(d))]] = False
    if not d.any():  # right-padded rows step up at every row start only: no position is listed
        return out
    step = np.flatnonzero(d) + 1
    rows = np.searchsorted(offsets, step, side="right") - 1
    rows = rows[step > offsets[rows]]  # both positions in one row
    if side == "either":  # a row padded on one side steps once; two steps: a hole or both ends padded
        rows = np.flatnonzero(np.bincount(rows, minlength=n) >= 2)
    bad = np.flatnonzero(u > 1) if u.max() > 1 else np.zeros(0, dtype=np.int64)  # max: one read, no mask
    if valid is not None:
        bad = np.union1d(bad, np.flatnonzero(~valid))
    out[rows] = 1
    if len(bad):
        out[np.searchsorted(offsets, bad, side="right") - 1] = 0
    return out


def _label_rows(lab_s: pl.Series, ign: int, bound: int | None, keep_len: int | None, keep_side: str,
                scanned: tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]] | None) -> dict[str, np.ndarray]:
    """Per row of the labels ``lab_s`` (every row, whatever the view), UInt32:

    - ``lab_neg`` / ``lab_high``: labels other than ``ign`` and null that are negative / at least
      ``bound`` (0 when ``bound`` is None);
    - ``lab_kept``: 1 when a label other than ``ign`` and null lies in the part of the row kept by
      truncation to ``keep_len`` labels on ``keep_side`` (``"right"``: the first ones; else the last
      ones; the whole row when ``keep_len`` is None), else 0 (null and empty rows: 0);
    - ``lab_sup``: the row's labels other than ``ign`` and null (the ``supervised_fraction`` stat's
      numerator; null and empty rows: 0). Rows of one width: one sum over the ``(rows, width)``
      matrix of ``sup0`` (1.7-2.1 ms for 10,000 x 1,024 labels, where polars' comparison over the
      exploded labels took 5.5-7.3 ms); else one ``np.add.reduceat`` over the rows that hold labels.

    ``scanned``: (offsets, ``sup0``, positions) of :func:`_dense_scan` over buffers holding every
    label of ``lab_s`` (rows of equal lengths in every column); None: the labels' own buffer is
    compared here (rows whose lists differ in length left the scanned buffers)."""
    n = lab_s.len()
    if scanned is not None:
        offsets, sup0, at = scanned
        neg, high = at["neg"], at["high"]
    else:
        lens = _lens(lab_s)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lens, out=offsets[1:])
        lab, lab_ok = flat_ints(lab_s)
        sup0 = lab != ign
        if lab_ok is not None:
            sup0 &= lab_ok
        neg = np.flatnonzero(sup0 & (lab < 0))
        high = np.flatnonzero(sup0 & (lab >= bound)) if bound is not None else np.zeros(0, dtype=np.int64)
    rows = _Rows.of(offsets, np.ones(n, dtype=bool))
    out = {"lab_neg": np.zeros(n, dtype=np.uint32), "lab_high": np.zeros(n, dtype=np.uint32),
           "lab_kept": np.zeros(n, dtype=np.uint32), "lab_sup": np.zeros(n, dtype=np.uint32)}
    for name, at_pos in (("lab_neg", neg), ("lab_high", high)):
        if len(at_pos):
            out[name] = rows.counts(at_pos, rows.row_of(at_pos))
    lens = offsets[1:] - offsets[:-1]
    keep = lens if keep_len is None else np.minimum(lens, keep_len)
    lo = offsets[:-1] if keep_len is None or keep_side == "right" else offsets[1:] - keep
    full = np.flatnonzero(keep > 0)
    if len(full):  # any(sup0) over each kept run [lo, lo + keep): runs ascending, apart or adjacent
        starts, ends = lo[full], lo[full] + keep[full]
        cut = np.empty(2 * len(full), dtype=np.int64)
        cut[0::2], cut[1::2] = starts, ends
        inner = cut[:-1] if ends[-1] == len(sup0) else cut  # reduceat takes indices below the length
        anyrun = np.logical_or.reduceat(sup0, inner)[0::2] if len(sup0) else np.zeros(len(full), dtype=bool)
        out["lab_kept"][full] = anyrun
    total = int(offsets[-1]) if n else 0
    if rows.width and total == n * rows.width:  # rows of one width: the rows of a matrix
        out["lab_sup"] = sup0[:total].reshape(n, rows.width).sum(axis=1, dtype=np.uint32)
    elif total:
        held = np.flatnonzero(lens > 0)  # ascending starts: each row's sum ends where the next row starts
        out["lab_sup"][held] = np.add.reduceat(sup0[:total].view(np.uint8), offsets[:-1][held], dtype=np.uint32)
    return out


def _chunk_pass(inputs: list[pl.Series], ign: int, shifted: bool, stop: tuple[int, ...], eos: int | None,
                with_am: bool, with_att: bool, pad: int | None = None, bound: int | None = None,
                keep_len: int | None = None, keep_side: str = "right", padding_side: str = "right") -> pl.Series:
    """:func:`position_counts` over one chunk of each input (see there). The label and id buffers
    are read once, by steps (:func:`_dense_scan`); every rule then works on the few positions it
    concerns (ids of ``stop``/``eos``, shift candidates), mapped to their rows by ``searchsorted``
    over the offsets; only the rule over assistant spans (``prompt``) reads dense masks."""
    ids_s, lab_s, ok_s = inputs[0], inputs[1], inputs[2]
    extra = inputs[3:]
    am_s = extra.pop(0) if with_am else None
    att_s = extra.pop(0) if with_att else None
    real_s = extra.pop(0) if extra else None  # the mask's sum per row (sft.truncated_response)
    al = _aligned_flat([c for c in (ids_s, lab_s, am_s, att_s) if c is not None], ok_s)
    lens = al.lens
    n = ids_s.len()
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    in_view = ok_s.fill_null(False).to_numpy()
    if len(al.gaps):  # a row whose lists differ in length is never in the view
        in_view = in_view.copy()
        in_view[al.gaps] = False
    rows = _Rows.of(offsets, in_view)
    ids, ids_ok = al.cols[0]
    lab, lab_ok = al.cols[1]
    asst = None
    if am_s is not None:
        asst = _is(*al.dense(2), 1)
    att = att_ok = None
    c_att = len(al.cols) - 1
    if att_s is not None:
        att, att_ok = al.cols[c_att]
    # the positions of real content (attention_mask 1) holding a stop id (end-of-turn/eos) or the
    # eos id: both rules below read only real positions (in a row of the view, whose mask is binary,
    # ``att != 0`` is ``real``); with a pad id equal to the eos id (GPT-2 style) half the positions
    # of right-padded rows hold it, so padding is masked out before the positions are listed
    # with a mask, the pad id of real content is padding.pad_attended (a defect: padding is masked)
    pad_att = pad is not None and att_s is not None
    wanted = tuple(dict.fromkeys((*stop, *(() if eos is None else (eos,)), *((pad,) if pad_att else ()))))
    segs = [(a, b, sh[1], sh[c_att] if att_s is not None else 0) for a, b, sh in al.segs]
    sup0, real, at = _dense_scan(ids, ids_ok, lab, lab_ok, att, att_ok, ign, shifted, wanted, pad, bound, segs)
    off, at_id = at["off"], at["hits"]
    if shifted:                             # token k is supervised by labels[k-1] (same row)
        sup = np.empty_like(sup0)
        sup[1:] = sup0[:-1]
        if len(sup):
            sup[0] = False
        starts = offsets[:-1][offsets[1:] > offsets[:-1]]
        sup[starts] = False
    else:
        sup = sup0
    out = {k: np.zeros(n, dtype=np.uint32) for k in POSITION_COUNTS}
    at_row = rows.row_of(at_id)
    at_stop, stop_row = at_id, at_row
    if set(wanted) != set(stop):  # eos or pad ids are in the positions too
        sel = np.isin(ids[at_id], stop)
        at_stop, stop_row = at_id[sel], at_row[sel]

    every = bool(in_view.all())  # every row in the view (a clean batch): nothing to leave out

    def keep(idx: np.ndarray, r: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        r = rows.row_of(idx) if r is None else r
        if every:
            return idx, r
        sel = rows.ok[r]
        return idx[sel], r[sel]

    # sft.prompt_supervised: supervised, real, outside the spans, not the end-of-turn right after a span
    if asst is not None:
        idx, r = keep(np.flatnonzero(np.greater(sup, asst)))  # sup & ~asst
        if len(idx):
            good = np.ones(len(idx), dtype=bool) if att is None else _is(*al.take(c_att, idx), 1)
            if stop:
                st = np.isin(idx, at_stop, assume_unique=True)
                hp = rows.has_prev(idx, r)
                good &= ~(st & hp & asst[np.where(hp, idx - 1, idx)])
            out["prompt"] = rows.counts(idx[good], r[good])
    # sft.eot_unsupervised: a closing end-of-turn of real content that is not supervised
    # (judged on the positions holding a stop id; only the failing ones count for their rows)
    if stop and len(at_stop):
        idx, r = at_stop, stop_row
        hp = rows.has_prev(idx, r)             # a position before it in its row
        before = idx - hp                      # that position (idx itself at a row start)
        closing = (asst[idx] | (hp & asst[before])) if asst is not None else (hp & sup[before])
        sel = closing & ~sup[idx]
        idx, r = keep(idx[sel], r[sel])
        out["eot"] = rows.counts(idx, r)
    # the eos stat: eos ids inside real content (attention_mask not 0), and how many are supervised
    if eos is not None and len(at_id):
        if wanted == (eos,):
            idx, r = at_id, at_row
        else:
            sel = ids[at_id] == eos
            idx, r = at_id[sel], at_row[sel]
        idx, r = keep(idx, r)
        if len(idx):
            out["eos_total"] = rows.counts(idx, r)
            s = sup[idx]
            out["eos_sup"] = rows.counts(idx[s], r[s])
    # padding.pad_attended: real content (mask 1) holding the pad id
    if pad_att and len(at_id):
        sel = ids[at_id] == pad
        if sel.any():
            idx, r = keep(at_id[sel], at_row[sel])
            out["pad_att"] = rows.counts(idx, r)
    # labels.shift_mismatch candidates: supervised labels that break the configured convention
    # (unshifted: labels[i] != input_ids[i]; shifted: labels[i] != input_ids[i+1] in the same row)
    if len(off):
        r = rows.row_of(off)
        idx = off
        if shifted:  # the last position of each row has no next id in the row
            sel = off < offsets[r + 1] - 1
            idx, r = off[sel], r[sel]
        idx, r = keep(idx, r)
        if len(idx):
            out["shift"] = rows.counts(idx, r)
    # padding.token_not_pad / padding.label_not_ignored: masked positions holding a non-pad id / a
    # label other than ignore_index (neither null)
    for name in ("pad_id", "pad_label"):
        if len(at[name]):
            idx, r = keep(at[name])
            out[name] = rows.counts(idx, r)
    # sft.truncated_response: rows of the view whose real content (the mask's sum, else the length)
    # reaches keep_len and whose last label other than ign (and null) is not a stop id
    if keep_len is not None and stop:
        size = real_s.fill_null(0).to_numpy() if real_s is not None else lens
        judged = np.flatnonzero(rows.ok & (size >= keep_len))
        if len(judged):
            last = _last_true(sup0, offsets[judged], offsets[judged + 1])
            found = last >= 0
            bad = np.zeros(len(judged), dtype=bool)
            bad[found] = ~np.isin(al.take(1, last[found])[0], stop)
            out["trunc"][judged[bad]] = 1
    # every row, in the view or not: labels.unexpected_sentinel, labels.out_of_range and
    # empty.no_supervised_tokens (from the scanned buffers when they hold every label)
    if al.whole:
        out.update(_label_rows(lab_s, ign, bound, keep_len, keep_side, (offsets, sup0, at)))
    elif len(al.gaps):  # the scanned positions hold every row's labels but those of the rows that differ
        out.update(_label_rows(lab_s, ign, bound, keep_len, keep_side, (offsets, sup0, at)))
        sub = _label_rows(lab_s.gather(al.gaps), ign, bound, keep_len, keep_side, None)
        for k, v in sub.items():
            out[k][al.gaps] = v
    else:
        out.update(_label_rows(lab_s, ign, bound, keep_len, keep_side, None))
    if att_s is not None:  # mask.not_contiguous, every row
        out["mask_hole"] = _mask_holes(att_s, padding_side)
    # content.periodic_tokens candidates: rows of the view holding a run of non-null real ids
    if real is None and pad is not None:  # no attention mask: ids equal to the pad id are the padding
        real = ids != pad
    ok_ids = ids_ok if real is None else (real if ids_ok is None else real & ids_ok)
    out["periodic"] = (periodic_flat(ids, ok_ids, offsets) & rows.ok).astype(np.uint32)
    return pl.DataFrame({k: out[k] for k in POSITION_COUNTS}).to_struct("__positions")


def position_counts(ids: str, labels: str, row_ok: pl.Expr, view_key: str, ign: int, shifted: bool,
                    stop: tuple[int, ...], eos: int | None, assistant_mask: str | None,
                    attention_mask: str | None, pad: int | None = None, bound: int | None = None,
                    keep_len: int | None = None, keep_side: str = "right", padding_side: str = "right") -> pl.Expr:
    """Per row (a struct of UInt32 fields :data:`POSITION_COUNTS`), from one shared numpy pass over
    the flat buffers of ``ids``, ``labels`` (lists of int, shape (rows, seq_len)) and the optional
    ``assistant_mask`` / ``attention_mask`` (lists of 0/1 int or bool):

    - ``prompt``: positions of ``sft.prompt_supervised`` (supervised target, real content, outside
      the assistant mask, not a ``stop`` id right after an assistant position);
    - ``eot``: positions of ``sft.eot_unsupervised`` (a ``stop`` id of real content inside or right
      after an assistant position, or without an assistant mask right after a supervised token,
      that is not supervised);
    - ``eos_total`` / ``eos_sup``: ``eos`` ids of real content (attention_mask not 0), and those
      supervised (the ``eos`` stat of :func:`datacheck.checks.padding.padding_stats`);
    - ``shift``: positions whose label is not ``ign`` (nor null) and breaks the configured
      convention: unshifted ``labels[i] != input_ids[i]``, shifted ``labels[i] != input_ids[i+1]``
      (``i+1`` in the row, its id not null). A row can fail ``labels.shift_mismatch`` only if it
      has one (the candidates of that check);
    - ``pad_id`` / ``pad_label`` (with ``attention_mask``): positions of ``padding.token_not_pad``
      (mask 0, a non-null id other than ``pad``; none when ``pad`` is None) and of
      ``padding.label_not_ignored`` (mask 0, a non-null label other than ``ign``); ``pad_att``:
      positions of ``padding.pad_attended`` (mask 1, the id ``pad``);
    - ``trunc`` (with ``keep_len`` and ``stop``): 1 for a row of ``sft.truncated_response``: its
      real content (the attention mask's sum; without a mask, its length) is at least ``keep_len``
      and its last label other than ``ign`` and null is not a ``stop`` id, else 0;
    - over every row, in the view or not: ``lab_neg`` / ``lab_high``, labels other than ``ign``
      and null that are negative (``labels.unexpected_sentinel``) / at least ``bound``
      (``labels.out_of_range``; 0 when ``bound`` is None); ``lab_kept``, 1 when a label other than
      ``ign`` and null lies in the part of the row kept by truncation to ``keep_len`` on
      ``keep_side`` (``empty.no_supervised_tokens``), else 0; ``lab_sup``, the row's labels other
      than ``ign`` and null (the ``supervised_fraction`` stat); ``mask_hole`` (with
      ``attention_mask``), 1 for a row of ``mask.not_contiguous`` against ``padding_side``;
    - ``periodic``: 1 for a row of the view holding a run of ``content.periodic_tokens``
      (:func:`periodic_flat` over the ids, positions of a null id or, with ``attention_mask``, of a
      mask other than 1, without it of the id ``pad`` (when not None), never part of a run), else 0.

    A token ``k`` is supervised when ``labels[k] != ign`` (``shifted``: ``labels[k-1]`` in the same
    row); null labels are not. Rows where ``row_ok`` (the view's per-row condition) is not true
    count 0 in every field but ``lab_neg``, ``lab_high``, ``lab_kept``, ``lab_sup`` and ``mask_hole``. Columns must pass :func:`fast_dtype`. ``view_key``
    identifies ``row_ok`` in the shared-pass key (equal keys, equal conditions)."""
    inputs = [pl.col(ids), pl.col(labels), row_ok]
    if assistant_mask is not None:
        inputs.append(pl.col(assistant_mask))
    if attention_mask is not None:
        inputs.append(pl.col(attention_mask))
        if keep_len is not None and stop:  # derived from the mask: not part of the shared-pass key's data
            inputs.append(pl.col(attention_mask).list.sum())
    key = ("positions", ids, labels, view_key, ign, shifted, stop, eos, assistant_mask, attention_mask, pad, bound,
           keep_len, keep_side, padding_side)
    dtype = pl.Struct({k: pl.UInt32 for k in POSITION_COUNTS})

    masks = (assistant_mask is not None) + (attention_mask is not None)

    def run(series: list[pl.Series]) -> pl.Series:
        # the columns only: the row condition (and the mask's sum) derive from them and the key
        data = [series[0], series[1], *series[3:3 + masks]]
        return shared_pass(key, data, lambda: _pass(list(series), ign, shifted, stop, eos,
                                                    assistant_mask is not None, attention_mask is not None, pad,
                                                    bound, keep_len, keep_side, padding_side))

    # one column per frame, however many checks read its fields (see shared_column)
    return shared_column(key, pl.map_batches(inputs, run, return_dtype=dtype))


#: seq_lens values above this are left to the list kernels (the row-local cumulative sums stay exact)
_MAX_SEQ_LEN_VALUE = 1 << 31


def positions_not_reset(pos: str, seq_lens: str, exact: pl.Expr) -> pl.Expr:
    """Per row (Boolean) ``packing.position_ids_not_reset`` with documents from ``seq_lens``: the
    row ``position_ids`` (list of int, not UInt64) is not empty and its first id is not 0, an id is
    negative, an id at a document start (running sums of ``seq_lens``, list of int, but the last) is
    not 0 or past the row, or the steps of +1 number other than ``len - documents`` (documents =
    ``max(len(seq_lens), 1)``). One numpy pass over the flat buffers: the steps other than +1 are
    few (one per document), so they are counted from their positions. Rows with a null (row or
    element) or a ``seq_lens`` value that is negative or above 2**31 are judged by ``exact`` (the
    list-kernel rule, evaluated on those rows only): the same answer as ``exact`` on every row."""

    def chunk(parts: list[pl.Series]) -> pl.Series:
        p_s, sl_s = parts
        n = p_s.len()
        plen, slen = _lens(p_s), _lens(sl_s)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(plen, out=offsets[1:])
        so = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(slen, out=so[1:])
        p, p_ok = flat_ints(p_s)
        s, s_ok = flat_ints(sl_s)
        s = s.astype(np.int64, copy=False)
        odd = (p_s.is_null() | sl_s.is_null()).to_numpy().copy()
        if p_ok is not None:
            odd[np.searchsorted(offsets, np.flatnonzero(~p_ok), side="right") - 1] = True
        wild = (s < 0) | (s > _MAX_SEQ_LEN_VALUE)
        if s_ok is not None:
            wild |= ~s_ok
        if wild.any():
            odd[np.searchsorted(so, np.flatnonzero(wild), side="right") - 1] = True
        bad = np.zeros(n, dtype=bool)
        if len(p):
            if p.dtype.kind == "u":
                p = p.astype(np.int64)
            nonempty = plen > 0
            bad[nonempty] = p[offsets[:-1][nonempty]] != 0
            if p.min() < 0:
                bad[np.searchsorted(offsets, np.flatnonzero(p < 0), side="right") - 1] = True
            # document starts: the row-local running sums of seq_lens but each row's last
            srow = np.repeat(np.arange(n, dtype=np.int64), slen)
            cs = np.cumsum(s)
            local = cs - (cs[so[:-1] - 1] * (so[:-1] > 0))[srow] if len(s) else cs
            last = np.zeros(len(s), dtype=bool)
            last[so[1:][slen > 0] - 1] = True
            use = ~last & ~odd[srow]  # the starts of the rows judged here (odd rows: by ``exact``)
            st_row, st_at = srow[use], local[use]
            past = st_at >= plen[st_row]
            bad[st_row[past]] = True
            inside = ~past
            bad[st_row[inside][p[offsets[st_row[inside]] + st_at[inside]] != 0]] = True
            # the steps other than +1 inside each row: exactly documents - 1 of them
            k = np.flatnonzero(p[1:] - p[:-1] != 1)
            kr = np.searchsorted(offsets, k, side="right") - 1
            within = k < offsets[kr + 1] - 1
            non1 = np.bincount(kr[within], minlength=n)
            docs = np.maximum(slen, 1)
            bad |= nonempty & (non1 != docs - 1)
            bad &= nonempty  # an empty row never fails (the list rule's ``n > 0``), whatever its seq_lens
        if odd.any():
            rows = np.flatnonzero(odd)
            sub = pl.DataFrame([p_s.gather(rows), sl_s.gather(rows)]).select(exact.fill_null(False)).to_series()
            bad[rows] = sub.to_numpy()
        return pl.Series(p_s.name, bad, dtype=pl.Boolean)

    return pl.map_batches([pl.col(pos), pl.col(seq_lens)], lambda s: by_chunks(list(s), chunk), return_dtype=pl.Boolean)
