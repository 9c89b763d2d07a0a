"""The compiled scan of the shared token pass (datacheck._scan.dense_scan, datacheck/csrc/scan.c)
against its numpy reference (datacheck.checks._flat._dense_scan_numpy): the same ``sup0``, ``real``
and position lists (values, dtypes, order) for every argument combination, on random buffers of every
integer type the kernel takes (nulls, segments with label and mask shifts, both label conventions,
0..3 wanted ids, a pad id wanted or not, a label bound inside, below or above the label type's range,
lengths around the kernel's block and numpy's step); and the kernel's checks of its buffers."""
from __future__ import annotations

from unittest.mock import patch

import numpy as np
import pytest
from conftest import examples
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from datacheck.checks import _flat
from datacheck.io import native

kernel = getattr(native.scan, "dense_scan", None)
pytestmark = pytest.mark.skipif(kernel is None, reason="datacheck._scan is not built or DATACHECK_NATIVE=0")

#: every integer type the kernel takes for ids and labels, and for the mask (bool besides)
INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32"]
MASKS = [*INTS, "bool"]
#: the kernel works by blocks of this many positions (scan.c BLOCK)
BLOCK = 2048
SETTINGS = settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _values(rng: np.random.Generator, n: int, dtype: str, pool: list[int], wild: float = 0.1) -> np.ndarray:
    """``n`` values of ``dtype``, from ``pool`` (wrapped into the type) but a fraction ``wild`` at random."""
    out = rng.choice(np.array(pool, dtype=np.int64), size=n).astype(dtype)
    info = np.iinfo(dtype) if dtype != "bool" else None
    if info is not None and n:
        wild = rng.random(n) < wild
        out[wild] = rng.integers(info.min, info.max, size=int(wild.sum()), endpoint=True, dtype=dtype)
    return out


@st.composite
def scans(draw):
    """The arguments of one ``_dense_scan`` call (drawn so that every rule has positions)."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n = draw(st.one_of(st.integers(0, 40), st.integers(BLOCK - 3, BLOCK + 3), st.integers(0, 3 * BLOCK + 5)))
    # constants and values beyond int32 that equal a small one in their low 32 bits (2**32 + 7 is 7
    # to an int32 cut): the kernel compares int64 buffers as int32 only where every value fits
    big = 2**32
    ign = draw(st.sampled_from([-100, 0, 3, 255, big - 100]))
    pad = draw(st.sampled_from([None, 7, 2, big + 7]))
    wanted = tuple(draw(st.lists(st.sampled_from([2, 5, 7, 9, 300, -1, 3, 0, big + 2]),
                                 max_size=draw(st.sampled_from([3, 6])),
                                 unique=True)))  # 0..3 ids; more: the kernel's loop past its fourth
    if pad is not None and draw(st.booleans()):
        wanted = (pad,)  # GPT-2 style: the pad id is the eos id, the only wanted one
    bound = draw(st.sampled_from([None, 6, 0, -5, 127, 200, 40000, 2**40, big + 6]))
    pool = [0, 1, 2, 3, 5, 7, 9, 300, -1, -100, 255, 6, 127, 128]
    if draw(st.booleans()):
        pool += [big + 7, big + 2, big - 100, -big - 100, big + 6]
    ids_t, lab_t = draw(st.sampled_from(INTS)), draw(st.sampled_from(INTS))
    att_t = draw(st.sampled_from([None, *MASKS]))
    shifted = draw(st.booleans())
    # segments: ascending runs of positions, apart or adjacent, each with its label and mask shifts
    if draw(st.booleans()) or n == 0:
        segs = None
        n_lab = n_att = n
    else:
        cuts = sorted(rng.integers(0, n, size=2 * draw(st.integers(1, 4)), endpoint=True).tolist())
        pairs = [(cuts[i], cuts[i + 1]) for i in range(0, len(cuts), 2)]
        n_lab, n_att = n + draw(st.integers(0, 5)), n + draw(st.integers(0, 5))
        segs = [(a, b, int(rng.integers(-a, n_lab - b, endpoint=True)), int(rng.integers(-a, n_att - b, endpoint=True)))
                for a, b in pairs]
    wild = draw(st.sampled_from([0.0, 0.0, 0.1]))  # none: int64 blocks whose every value fits int32
    ids = _values(rng, n, ids_t, pool, wild)
    lab = _values(rng, n_lab, lab_t, pool, wild)
    if n_lab and draw(st.booleans()):  # labels mostly copies of the ids (either convention)
        src = np.resize(ids.astype(np.int64), n_lab) if n else np.zeros(n_lab, np.int64)
        copy = rng.random(n_lab) < 0.8
        lab[copy] = np.roll(src, -1 if shifted else 0)[copy].astype(lab_t)
    att = None if att_t is None else _values(rng, n_att, att_t, [0, 0, 1, 1, 1, 2, -1])

    def valid(m: int) -> np.ndarray | None:
        return rng.random(m) < 0.85 if draw(st.booleans()) else None
    ids_ok, lab_ok = valid(n), valid(n_lab)
    att_ok = valid(n_att) if att is not None else None
    return (ids, ids_ok, lab, lab_ok, att, att_ok, ign, shifted, wanted, pad, bound, segs)


def _same(want: tuple, got: tuple) -> None:
    sup_w, real_w, at_w = want
    sup_g, real_g, at_g = got
    assert sup_g.dtype == np.bool_ and np.array_equal(sup_w, sup_g)
    assert (real_w is None) == (real_g is None)
    if real_w is not None:
        assert real_g.dtype == np.bool_ and np.array_equal(real_w, real_g)
    assert list(at_w) == list(at_g)
    for name in at_w:
        assert at_g[name].dtype == np.int64, name
        assert np.array_equal(at_w[name], at_g[name]), (name, at_w[name], at_g[name])


@SETTINGS
@given(args=scans(), step=st.sampled_from([3, 7, 65536]))
def test_native_scan_equals_numpy(args, step):
    assert _flat._native_takes(*args[:7], args[8], args[9], args[10])
    with patch.object(_flat, "SCAN_STEP", step):  # numpy's steps end anywhere against the kernel's blocks
        want = _flat._dense_scan_numpy(*args)
    _same(want, _flat._dense_scan_native(*args))
    _same(_flat._dense_scan_numpy(*args), _flat._dense_scan(*args))  # the dispatch takes the kernel


@pytest.mark.parametrize("n", [_flat.SCAN_STEP - 1, _flat.SCAN_STEP, _flat.SCAN_STEP + 1, 2 * _flat.SCAN_STEP + 7])
@pytest.mark.parametrize("shifted", [False, True])
def test_native_scan_equals_numpy_around_the_numpy_step(n, shifted):
    rng = np.random.default_rng(n)
    ids = _values(rng, n, "int32", [0, 1, 2, 7, 9, 50256])
    lab = np.where(rng.random(n) < 0.5, -100, np.roll(ids, -1 if shifted else 0)).astype(np.int64)
    lab[rng.random(n) < 0.001] = 60000
    att = (rng.random(n) < 0.7).astype(np.int8)
    ok = rng.random(n) < 0.99
    for args in [(ids, None, lab, None, att, None, -100, shifted, (50256,), 50256, 50257),
                 (ids, ok, lab, ok, att, ok, -100, shifted, (2, 7, 50256), 50256, 50257),
                 (ids, None, lab, None, None, None, -100, shifted, (), None, None)]:
        _same(_flat._dense_scan_numpy(*args), _flat._dense_scan_native(*args))


@given(n=st.integers(0, 5))
@example(n=0)
def test_native_scan_of_empty_and_tiny_buffers(n):
    ids = np.arange(n, dtype=np.int32)
    lab = np.arange(n, dtype=np.int64) - 1
    args = (ids, None, lab, None, np.ones(n, np.int8), None, -100, True, (1,), 1, 2)
    _same(_flat._dense_scan_numpy(*args), _flat._dense_scan_native(*args))


def test_types_the_kernel_does_not_take_go_to_numpy():
    ids = np.array([1, 2, 3], dtype=np.uint64)
    lab = np.array([1, -100, 3], dtype=np.int64)
    assert not _flat._native_takes(ids, None, lab, None, None, None, -100, (2,), None, None)
    assert not _flat._native_takes(ids.astype(">i4"), None, lab, None, None, None, -100, (2,), None, None)
    assert not _flat._native_takes(ids.astype(np.int32)[::-1][::2], None, lab[:2], None, None, None, -100, (2,),
                                   None, None)
    assert not _flat._native_takes(ids.astype(np.int32), None, lab, None, None, None, -100, (2**64,), None, None)
    assert not _flat._native_takes(ids.astype(np.int32), None, lab.astype(np.float32), None, None, None, -100, (2,),
                                   None, None)
    assert _flat._native_takes(ids.astype(np.uint32), None, lab, None, np.ones(3, bool), None, -100, (2,), None, 2**63 - 1)
    _same(_flat._dense_scan_numpy(ids, None, lab, None, None, None, -100, False, (2,)),
          _flat._dense_scan(ids, None, lab, None, None, None, -100, False, (2,)))


def _call(ids=None, ids_ok=None, lab=None, lab_ok=None, att=None, att_ok=None, sup0=None, real=None, segs=None,
          consts=(-100, False, (2,), None, None)):
    n = 6
    ids = np.arange(n, dtype=np.int32) if ids is None else ids
    lab = np.arange(n, dtype=np.int64) if lab is None else None if isinstance(lab, str) else lab
    sup0 = np.zeros(len(ids), bool) if sup0 is None else sup0
    segs = [(0, len(ids), 0, 0)] if segs is None else segs
    ign, shifted, wanted, pad, bound = consts
    return kernel(ids, ids_ok, lab, lab_ok, att, att_ok, sup0, real, ign, shifted, wanted, pad, bound, segs)


@pytest.mark.parametrize("kwargs, match", [
    ({"segs": [(0, 7, 0, 0)]}, "segment 0"),                                   # past the ids
    ({"segs": [(0, 6, 1, 0)]}, "label shift"),                                 # past the labels
    ({"segs": [(1, 6, -2, 0)]}, "label shift"),                                # before the labels
    ({"segs": [(3, 6, 0, 0), (0, 2, 0, 0)]}, "ascending"),                     # not ascending
    ({"segs": [(0, 4, 0, 0), (3, 6, 0, 0)]}, "ascending"),                     # overlapping
    ({"segs": [(4, 2, 0, 0)]}, "ascending"),                                   # end before start
    ({"segs": [(0, 6, 2**62 + 1, 0)]}, "out of range"),
    ({"segs": [(0, 6, 2**64, 0)]}, "64-bit"),
    ({"segs": [(0, 6, 0)]}, "tuple"),
    ({"att": np.ones(6, np.int8), "real": np.zeros(6, bool), "segs": [(0, 6, 0, 1)]}, "mask shift"),
    ({"att": np.ones(5, np.int8), "real": np.zeros(6, bool)}, "mask shift"),
    ({"att": np.ones(6, np.int8)}, "real"),                                     # a mask without real
    ({"real": np.zeros(6, bool)}, "real"),                                      # real without a mask
    ({"sup0": np.zeros(5, bool)}, "sup0"),
    ({"sup0": np.zeros(6, np.int8)}, "bool"),
    ({"ids_ok": np.ones(5, bool)}, "validity"),
    ({"lab_ok": np.ones(7, bool)}, "validity"),
    ({"ids_ok": np.ones(6, np.uint8)}, "bool"),
    ({"ids": np.arange(6, dtype=np.uint64)}, "unsupported"),
    ({"ids": np.arange(6, dtype=">i4")}, "unsupported"),
    ({"lab": np.arange(6, dtype=np.float64)}, "unsupported"),
    ({"ids": np.arange(12, dtype=np.int32)[::2]}, "contiguous"),
    ({"ids": np.arange(12, dtype=np.int32).reshape(2, 6)}, "dimension"),
    ({"lab": "none"}, "None"),
    ({"ids": [1, 2, 3]}, "buffer"),
    ({"consts": (2**63, False, (2,), None, None)}, "64-bit"),
    ({"consts": (-100, False, (2, "x"), None, None)}, "int"),
    ({"consts": (-100, False, (2,), None, 1.5)}, "int"),
])
def test_kernel_rejects_buffers_that_do_not_hold_the_segments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        _call(**kwargs)


def test_kernel_writes_only_the_segments_and_reads_no_gap():
    """Positions outside every segment keep the caller's values; the segments' shifted slices are
    read (here the labels of the segment [2, 4) sit at [0, 2) of their buffer)."""
    ids = np.array([9, 9, 1, 2, 9, 9], dtype=np.int32)
    lab = np.array([1, 2], dtype=np.int64)
    sup0 = np.full(6, True)
    got = kernel(ids, None, lab, None, None, None, sup0, None, -100, False, (9,), None, None, [(2, 4, -2, 0)])
    assert sup0.tolist() == [True, True, True, True, True, True]
    assert [np.frombuffer(b, np.int64).tolist() for b in got] == [[], [], [], [], [], []]
    lab2 = np.array([1, 5], dtype=np.int64)
    got = kernel(ids, None, lab2, None, None, None, sup0, None, -100, False, (9,), None, None, [(2, 4, -2, 0)])
    assert np.frombuffer(got[1], np.int64).tolist() == [3]  # label 5 against id 2 at position 3


@st.composite
def periodic_buffers(draw):
    """(vals, ok, offsets) of random rows (lengths about what a run of the drawn period needs), some
    holding runs of that period one comparison short of, at or past the length that makes a row
    periodic, placed anywhere, against a row's end or from a row's start (continuing into the next or
    from the previous row); with ``ok``, sometimes one position inside a run not ok."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dtype = draw(st.sampled_from([*INTS, "bool"]))
    p = draw(st.integers(_flat.MIN_PERIOD, _flat.MAX_PERIOD))
    win = (_flat.MIN_REPEATS - 1) * p  # comparisons of a run: W + p positions
    lens = draw(st.lists(st.one_of(st.integers(0, 12), st.integers(win + p - 3, win + p + 3),
                                   st.integers(0, 3 * (win + p))), min_size=1, max_size=10))
    total = sum(lens)
    vals = rng.integers(0, 3 if draw(st.booleans()) else 50, size=total)
    offsets = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    holes = []
    for _ in range(draw(st.integers(0, 4)) if total > 1 else 0):
        q = p if draw(st.booleans()) else draw(st.integers(_flat.MIN_PERIOD, _flat.MAX_PERIOD))
        length = (_flat.MIN_REPEATS - 1) * q + q + draw(st.integers(-1, 1))
        edge = int(offsets[draw(st.integers(0, len(lens)))])
        start = draw(st.sampled_from(["any", "end", "start"]))
        a = {"any": int(rng.integers(0, total)), "end": edge - length + draw(st.integers(-1, 1)),
             "start": edge + draw(st.integers(-1, 1))}[start]
        a = min(max(a, 0), total - 1)
        b = min(total, a + length)
        vals[a:b] = np.resize(rng.integers(0, 50, size=q), b - a)
        holes.append(int(rng.integers(a, b)))
    vals = vals.astype(dtype)
    ok = None
    if draw(st.booleans()):
        ok = rng.random(total) < draw(st.sampled_from([0.9, 0.999, 1.0]))
        if holes and draw(st.booleans()):  # one null or padded position inside a planted run
            ok[holes[draw(st.integers(0, len(holes) - 1))]] = False
    return vals, ok, offsets


@SETTINGS
@given(buf=periodic_buffers(), block=st.sampled_from([64, 1 << 19]))
def test_native_periodic_rows_equal_numpy(buf, block):
    vals, ok, offsets = buf
    assert _flat._periodic_takes(vals, ok, offsets)
    with patch.object(_flat, "PERIODIC_BLOCK", block):  # numpy's blocks end anywhere against the kernel's
        want = _flat._periodic_flat_numpy(vals, ok, offsets)
    got = _flat.periodic_flat(vals, ok, offsets)
    assert got.dtype == np.bool_ and got.tolist() == want.tolist()


@pytest.mark.parametrize("p", [1, 4, 13])
def test_native_periodic_rows_across_the_kernels_block(p):
    """Runs around the kernel's block end (1 << 19 positions), one position short or long enough."""
    rng = np.random.default_rng(p)
    width = 4096
    rows = (1 << 20) // width
    vals = rng.integers(0, 50_000, size=rows * width).astype(np.int32)
    win = (_flat.MIN_REPEATS - 1) * p
    for start, length in [((1 << 19) - win // 2, win + p), ((1 << 19) + 3 * width - win // 2, win + p - 1),
                          (5 * width - 7, win + p), (9 * width - win - p, win + p)]:
        vals[start:start + length] = np.resize(np.arange(100_000, 100_000 + p), length)
    offsets = np.arange(rows + 1, dtype=np.int64) * width
    want = _flat._periodic_flat_numpy(vals, None, offsets)
    assert 1 <= want.sum() < rows
    assert _flat.periodic_flat(vals, None, offsets).tolist() == want.tolist()


def test_periodic_buffers_the_kernel_does_not_take_go_to_numpy():
    vals = np.zeros(70, dtype=np.uint64)
    offsets = np.array([0, 70], dtype=np.int64)
    assert not _flat._periodic_takes(vals, None, offsets)
    assert not _flat._periodic_takes(vals.astype(np.int32), None, offsets.astype(np.int32))
    assert not _flat._periodic_takes(vals.astype(np.int32), None, np.array([1, 70], dtype=np.int64))
    assert _flat.periodic_flat(vals, None, offsets).tolist() == [True]


@pytest.mark.parametrize("args, match", [
    ((np.zeros(5, np.int32), None, np.array([0, 6], np.int64), np.zeros(1, bool)), "end at most"),
    ((np.zeros(5, np.int32), None, np.array([1, 5], np.int64), np.zeros(1, bool)), "start at 0"),
    ((np.zeros(5, np.int32), None, np.array([0, 3, 2, 5], np.int64), np.zeros(3, bool)), "decrease"),
    ((np.zeros(5, np.int32), None, np.array([0, 5], np.int32), np.zeros(1, bool)), "int64"),
    ((np.zeros(5, np.int32), None, np.zeros(0, np.int64), np.zeros(0, bool)), "int64"),
    ((np.zeros(5, np.int32), np.ones(4, bool), np.array([0, 5], np.int64), np.zeros(1, bool)), "ok"),
    ((np.zeros(5, np.int32), None, np.array([0, 5], np.int64), np.zeros(2, bool)), "out"),
    ((np.zeros(5, np.float32), None, np.array([0, 5], np.int64), np.zeros(1, bool)), "unsupported"),
    ((np.zeros(10, np.int32)[::2], None, np.array([0, 5], np.int64), np.zeros(1, bool)), "contiguous"),
])
def test_periodic_kernel_rejects_buffers_it_cannot_read(args, match):
    with pytest.raises(ValueError, match=match):
        native.scan.periodic_rows(*args)


def _rows_with_run(p: int, shift: int, length_delta: int, hole: str | None, width: int = 0):
    """Two rows of ``width`` (40p by default) positions; a run of period ``p`` of ``(MIN_REPEATS - 1) p + length_delta``
    comparisons inside row 0 ending ``shift`` positions before its end, continuing one position into
    row 1 (whose first id repeats the pattern); ``hole``: a position of the run not ok."""
    width = width or 40 * p
    win = (_flat.MIN_REPEATS - 1) * p
    vals = np.arange(10_000, 10_000 + 2 * width, dtype=np.int64)  # no repeat anywhere
    n_pos = win + length_delta + p  # positions of the run inside row 0
    a = width - shift - n_pos
    vals[a:width + 1] = np.resize(np.arange(p), width + 1 - a)
    if shift:  # the run stops before the row's end
        vals[width - shift:width + 1] = np.arange(50_000, 50_000 + shift + 1)
    ok = None
    if hole is not None:
        ok = np.ones(2 * width, dtype=bool)
        ok[{"first": a, "last": width - shift - 1}[hole]] = False
    return vals, ok, np.array([0, width, 2 * width], dtype=np.int64)


@pytest.mark.parametrize("p", [1, 2, 13])
@pytest.mark.parametrize("shift, length_delta, hole, want", [
    (0, 0, None, True),       # W comparisons ending at the row's end
    (0, -1, None, False),     # W - 1 inside the row; the one across the row's end does not count
    (3, 0, None, True),
    (3, -1, None, False),
    (0, 0, "first", False),   # the run's first position not ok: W - 1 comparisons left
    (0, 1, "first", True),
    (0, 0, "last", False),    # the run's last position not ok (it is j + p of the last comparison)
    (0, 1, "last", True),
])
def test_periodic_rows_at_a_rows_end(p, shift, length_delta, hole, want):
    vals, ok, offsets = _rows_with_run(p, shift, length_delta, hole)
    assert _flat._periodic_flat_numpy(vals, ok, offsets).tolist() == [want, False]
    assert _flat.periodic_flat(vals, ok, offsets).tolist() == [want, False]
    # the same run read from the next row's start: row 1's ids reversed into row 0's place
    rev, rev_ok = vals[::-1].copy(), None if ok is None else ok[::-1].copy()
    assert _flat._periodic_flat_numpy(rev, rev_ok, offsets).tolist() == [False, want]
    assert _flat.periodic_flat(rev, rev_ok, offsets).tolist() == [False, want]


@pytest.mark.parametrize("p", [1, 2, 13])
@pytest.mark.parametrize("length_delta, want", [(0, True), (-1, False)])
def test_periodic_rows_of_the_shortest_length(p, length_delta, want):
    """Rows of MIN_REPEATS * p positions: the sample at position W = (MIN_REPEATS - 1) p of row 0 is
    compared with the next row's first id (which repeats the pattern), a comparison that never counts."""
    vals, ok, offsets = _rows_with_run(p, 0, length_delta, None, width=_flat.MIN_REPEATS * p)
    assert _flat._periodic_flat_numpy(vals, ok, offsets).tolist() == [want, False]
    assert _flat.periodic_flat(vals, ok, offsets).tolist() == [want, False]


@pytest.mark.parametrize("lab_t", ["int64", "int32", "uint32"])
@pytest.mark.parametrize("ids_t", ["int64", "int32", "uint32"])
def test_constants_beyond_int32_against_buffers_that_fit_it(lab_t, ids_t):
    """ign, pad, a wanted id and the bound 2**32 above small values: no label or id equals them (an
    int32 cut of the constants would make -100, 7 and 2 equal); the values are computed here."""
    big = 2**32
    ids = np.array([7, 2, 7, 5, 2, 9], dtype=ids_t)
    lab = np.array([-100, 7, 2, 5, 6, -100], dtype=np.int64).astype(lab_t)  # -100 wraps in uint32
    att = np.array([1, 1, 0, 0, 1, 1], dtype=np.int8)
    args = (ids, None, lab, None, att, None, big - 100, False, (big + 2,), big + 7, big + 6)
    sup0, real, at = _flat._dense_scan_native(*args)
    lv, iv, av = lab.astype(np.int64).tolist(), ids.astype(np.int64).tolist(), att.tolist()
    sup = [v != big - 100 for v in lv]  # uint32 labels: -100 wrapped is 2**32 - 100, the ign
    assert sup0.tolist() == sup
    assert real.tolist() == [a == 1 for a in av]
    assert at["hits"].tolist() == []
    assert at["pad_id"].tolist() == [k for k in range(6) if av[k] == 0 and iv[k] != big + 7] == [2, 3]
    assert at["pad_label"].tolist() == [k for k in range(6) if av[k] == 0 and sup[k]]
    assert at["off"].tolist() == [k for k in range(6) if sup[k] and lv[k] != iv[k]]
    assert at["neg"].tolist() == [k for k in range(6) if sup[k] and lv[k] < 0]
    assert at["high"].tolist() == [k for k in range(6) if sup[k] and lv[k] >= big + 6]
    _same(_flat._dense_scan_numpy(*args), (sup0, real, at))
