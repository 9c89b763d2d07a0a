"""The blend of datacheck.model.megatronorder (BlendedDataset over one GPTDataset per --data-path
prefix) against the plain-Python reference of Megatron-LM's code (tests/helpers/megatronref.py:
_get_size_per_split_per_dataset, normalize, helpers.cpp's build_blending_indices loop), on random
weights and sequence lengths."""
from __future__ import annotations

import dataclasses
import math

import megatronref as ref
import numpy as np
import pytest
from conftest import examples
from hypothesis import example, given, settings
from hypothesis import strategies as st

from datacheck.model import megatronorder
from datacheck.model.errors import UsageError
from datacheck.model.megatronorder import blend_sizes, blending_indices, build_blend, parse_data_path

WEIGHTS = st.lists(st.one_of(st.integers(1, 9).map(float), st.floats(1e-4, 1e4, allow_nan=False)), min_size=1,
                   max_size=5)


@settings(max_examples=examples(300), deadline=None)
@given(WEIGHTS, st.integers(0, 3000))
@example([0.3, 0.7], 3200)
@example([1.0, 1.0], 1000)  # ties every other position: the first dataset wins them
@example([1.0, 1.0, 1.0], 999)
@example([0.001, 0.999], 6400)
def test_blending_indices_equal_megatrons_loop(weights, size):
    w = ref.normalize(weights)
    ds, dsi, counts = blending_indices(w, size)
    want_ds, want_dsi = ref.blending_indices(w, size)
    assert ds.tolist() == want_ds and dsi.tolist() == want_dsi
    assert counts == [want_ds.count(i) for i in range(len(w))]
    # extended in two goes (as a plan extends it up to the largest position asked), the same indices
    cut = size // 3
    a, ai, c = blending_indices(w, cut)
    b, bi, c2 = blending_indices(w, size, cut, c)
    assert a.tolist() + b.tolist() == want_ds and ai.tolist() + bi.tolist() == want_dsi and c2 == counts


@settings(max_examples=examples(300), deadline=None)
@given(WEIGHTS, st.integers(1, 10**9), st.sampled_from([0.0, 0.005, 0.5]))
@example([0.3, 0.7], 3200, 0.005)
def test_blend_sizes_equal_the_builders(weights, samples, surplus):
    norm, targets, built = blend_sizes(weights, samples, surplus)
    assert norm == ref.normalize(weights)
    assert targets == ref.size_per_dataset(ref.normalize(weights), samples)
    assert built == ref.size_per_dataset(ref.normalize(weights), samples, surplus)
    # the targets cover the run's samples; every dataset is built for at least its target
    assert sum(targets) >= samples and all(b >= t for b, t in zip(built, targets))


def test_blend_sizes_known_values():
    # --data-path 0.3 A 0.7 B, 200 iterations of 16: 3200 samples; ceil(960 * 1.005) = 965 (964.8),
    # ceil(2240 * 1.005) = 2252 (2251.2)
    norm, targets, built = blend_sizes([0.3, 0.7], 3200)
    assert targets == [960, 2240] and built == [math.ceil(960 * 1.005), math.ceil(2240 * 1.005)] == [965, 2252]


@st.composite
def blends(draw):
    n = draw(st.integers(1, 3))
    return dict(sizes=[draw(st.lists(st.integers(0, 30), min_size=4, max_size=20)) for _ in range(n)],
                weights=draw(st.one_of(st.none(), st.lists(st.integers(1, 5).map(float), min_size=n, max_size=n))),
                seq_length=draw(st.integers(2, 12)), seed=draw(st.integers(0, 2**32 - 1)),
                split=draw(st.sampled_from(["1", "969, 30, 1", "9,1"])), extra=draw(st.booleans()),
                mbs=draw(st.integers(1, 3)), dp=draw(st.integers(1, 2)), ga=draw(st.integers(1, 2)),
                iters=draw(st.integers(1, 8)))


@settings(max_examples=examples(150), deadline=None)
@given(blends())
@example(dict(sizes=[[5, 7, 3, 9], [4, 4, 4, 4, 4]], weights=[3.0, 7.0], seq_length=4, seed=1234, split="1",
              extra=True, mbs=1, dp=2, ga=1, iters=6))
@example(dict(sizes=[[5, 7, 3, 9], [4, 4, 4, 4, 4]], weights=None, seq_length=3, seed=9, split="1",
              extra=True, mbs=2, dp=1, ga=2, iters=3))
def test_blend_steps_equal_megatrons(r):
    gbs = r["mbs"] * r["dp"] * r["ga"]
    x = int(r["extra"])
    kw = dict(seq_length=r["seq_length"], seed=r["seed"], split=r["split"], extra=r["extra"], micro_batch=r["mbs"],
              data_parallel=r["dp"], grad_accum=r["ga"], train_iters=r["iters"], train_samples=None)
    for sz in r["sizes"]:
        beg, end = ref.train_range(len(sz), r["split"])
        if end <= beg or sum(sz[beg:end]) <= 1:
            with pytest.raises(UsageError):
                build_blend([np.array(s) for s in r["sizes"]], r["weights"], **kw)
            return
    if r["weights"] is None:
        lens = []
        for sz in r["sizes"]:
            beg, end = ref.train_range(len(sz), r["split"])
            lens.append((sum(sz[beg:end]) - x) // r["seq_length"])
        if 0 in lens:  # Megatron's BlendedDataset asserts weights (here the lengths) > 0
            with pytest.raises(UsageError, match="asserts weights > 0"):
                build_blend([np.array(s) for s in r["sizes"]], r["weights"], **kw)
            return
    o = build_blend([np.array(s) for s in r["sizes"]], r["weights"], **kw)
    parts, want_ds, want_dsi = ref.blend(r["sizes"], r["weights"], r["seq_length"], r["seed"], r["split"], x,
                                         r["iters"] * gbs)
    assert len(o) == len(want_ds)
    d, k = o.index(np.arange(len(o)))
    assert d.tolist() == want_ds and k.tolist() == want_dsi
    for od, (di, si, sh) in zip(o.datasets, parts):
        assert od.doc_index.tolist() == di and od.shuffle.tolist() == sh
    assert o.steps == min(r["iters"], len(o) // gbs)
    for step in range(o.steps):
        want = ref.blend_step_reads(r["sizes"], r["weights"], r["seq_length"], r["seed"], r["split"], x, r["mbs"],
                                    r["dp"], r["ga"], r["iters"] * gbs, step)
        mbs = o.step(step)
        idx = np.concatenate([m[2] for m in mbs])
        owner, dataset, seq, start, stop = o.reads(idx)
        rank_mb = [(mbs[j // r["mbs"]][0], mbs[j // r["mbs"]][1]) for j in range(len(idx))]
        got = [(*rank_mb[w], int(idx[w]), int(i), int(q), int(a), int(b))
               for w, i, q, a, b in zip(owner, dataset, seq, start, stop)]
        assert got == want


@pytest.mark.parametrize("words, want", [
    (["0.3", "a", "0.7", "b"], (["a", "b"], [0.3, 0.7])),
    (["a", "b"], (["a", "b"], None)),
    (["a"], (["a"], None)),
    (["1", "a"], (["a"], [1.0])),
    (["a", "b", "c"], (["a", "b", "c"], None)),
    (["30", "a", "70", "b"], (["a", "b"], [30.0, 70.0])),
])
def test_data_path_is_read_as_get_blend_from_list(words, want):
    assert parse_data_path(words) == want


@pytest.mark.parametrize("words, message", [
    ([], "empty"),
    (["0.3", "a", "b", "c"], "WEIGHT PREFIX pairs"),
    (["0", "a", "1", "b"], "above 0"),
    (["-1", "a", "2", "b"], "above 0"),
    (["nan", "a", "1", "b"], "above 0"),
    (["inf", "a", "1", "b"], "infinite"),
    (["1e308", "a", "1e308", "b"], "sum past float64"),  # the sum overflows: normalize gives NaN
])
def test_bad_data_path_is_refused(words, message):
    with pytest.raises(UsageError, match=message):
        parse_data_path(words)


def test_oversampled_dataset_is_refused_as_megatron_does():
    sizes = [np.full(4, 3), np.full(4, 3)]  # 12 tokens each: 5 samples of 2 (+1)
    o = build_blend(sizes, [1.0, 1.0], seq_length=2, seed=1, split="1", extra=True, micro_batch=1,
                    data_parallel=1, grad_accum=1, train_iters=None, train_samples=3, surplus=0.0)
    # targets ceil(1.5) = 2 each, 4 blend positions, dataset 0 at positions 0 and 2 (ties go to it)
    assert o.targets == [2, 2] and len(o) == 4 and all(len(d) == 5 for d in o.datasets)
    d, k = o.index(np.arange(4))
    assert d.tolist() == ref.blending_indices([0.5, 0.5], 4)[0] == [0, 1, 0, 1] and k.tolist() == [0, 0, 1, 1]
    # a dataset of 1 sample asked for its second: Megatron's BlendedDataset raises IndexError
    tiny = build_blend([np.full(1, 3)], None, seq_length=2, seed=1, split="1", extra=True, micro_batch=1,
                       data_parallel=1, grad_accum=1, train_iters=None, train_samples=3).datasets[0]
    assert len(tiny) == 1
    short = dataclasses.replace(o, datasets=(o.datasets[0], tiny))
    assert short.index(np.array([1]))[1].tolist() == [0]
    with pytest.raises(UsageError, match="dataset 1 for sample 1, beyond its 1 samples"):
        short.index(np.array([3]))


def test_blend_positions_in_chunks_in_any_order(monkeypatch):
    # chunks of 8 positions: asked late, then early, then scattered (a cyclic sampler's order), the
    # indices are the greedy loop's from position 0
    monkeypatch.setattr(megatronorder, "_BLEND_CHUNK_BITS", 3)
    o = build_blend([np.full(40, 5), np.full(30, 7), np.full(20, 3)], [0.2, 0.5, 0.3], seq_length=4, seed=3,
                    split="1", extra=True, micro_batch=1, data_parallel=1, grad_accum=1, train_iters=None,
                    train_samples=90)
    want_ds, want_dsi = ref.blending_indices(ref.normalize(ref.normalize([0.2, 0.5, 0.3])), len(o))
    for ask in (np.arange(60, 70), np.arange(0, 5), np.random.default_rng(0).permutation(len(o)), np.arange(len(o))):
        d, k = o.index(ask)
        assert d.tolist() == [want_ds[i] for i in ask] and k.tolist() == [want_dsi[i] for i in ask]


def test_a_blends_indices_past_memory_together_are_refused_before_the_next_is_built(monkeypatch):
    from datacheck.model import megatronorder
    from datacheck.model.megatronorder import build_order, index_bytes, kept_bytes

    sizes = [np.full(10, 5), np.full(10, 5)]
    common = dict(seq_length=4, seed=1, split="1", extra=True, micro_batch=1, data_parallel=1, grad_accum=1)
    one = build_order(sizes[0], train_iters=None, train_samples=500, **common)  # what each dataset is built for
    need, kept = index_bytes(len(one.doc_index), len(one.shuffle)), kept_bytes(one)
    monkeypatch.setattr(megatronorder, "memory_limit", lambda: need + kept // 2)  # one fits, not two
    with pytest.raises(UsageError, match=r"prefix 1 of the blend .*of the blend's earlier datasets"):
        build_blend(sizes, [1.0, 1.0], train_iters=None, train_samples=1000, surplus=0.0, **common)
    monkeypatch.setattr(megatronorder, "memory_limit", lambda: need + kept)
    assert len(build_blend(sizes, [1.0, 1.0], train_iters=None, train_samples=1000, surplus=0.0, **common)) == 1000


@pytest.mark.parametrize("samples", [120, 400])
@pytest.mark.parametrize("weights", [[3.0, 7.0], None])
def test_blend_steps_under_a_rampup(weights, samples):
    # --rampup-batch-size 2 2 20 to 8 (micro-batch 1 x dp 2 x ga 4) over a blend: the sampler hands out
    # blend positions from the sum of the earlier steps' batches (megatronref's calculator and loop),
    # each position the blend's (prefix, sample) as without a ramp
    sizes = [np.full(60, 5), np.full(50, 7)]
    kw = dict(seq_length=4, seed=5, split="1", extra=True, micro_batch=1, data_parallel=2, grad_accum=4,
              train_iters=None, train_samples=samples, rampup_batch_size=(2, 2, 20))
    o = build_blend(sizes, weights, **kw)
    calc = ref.RampupCalculator(8, 1, 2, 2, 2, 20)
    iters = ref.rampup_train_iters(calc, samples, 20)
    want_steps = ref.rampup_step_batches(len(o), 1, 2, ref.RampupCalculator(8, 1, 2, 2, 2, 20), iters)
    # unweighted: the blend holds min(samples, its prefixes' samples); the run's steps end within it
    assert o.steps == (iters if weights is not None else len(want_steps))
    if weights is None and samples == 400:  # 74 + 87 samples of 4 (+1) tokens: the blend ends the run early
        assert len(o) == 74 + 87 and o.steps < iters
    parts, ds, dsi = ref.blend([s.tolist() for s in sizes], weights, 4, 5, "1", 1, samples)
    for s in range(o.steps):
        got = o.step(s)
        assert [(r, m, b.tolist()) for r, m, b in got] == want_steps[s]
        idx = np.concatenate([b for _, _, b in got])
        d, k = o.index(idx)
        assert d.tolist() == [ds[i] for i in idx] and k.tolist() == [dsi[i] for i in idx]
