"""datacheck.model.megatronorder against a plain-Python reference of Megatron-LM's own code
(tests/helpers/megatronref.py: helpers.cpp's build_sample_idx loop, GPTDataset's epochs, document and
shuffle indices, MegatronPretrainingSampler), on random sequence lengths."""
from __future__ import annotations

import re

import megatronref as ref
import numpy as np
import pytest
from conftest import examples
from hypothesis import example, given, settings
from hypothesis import strategies as st

from datacheck.model import megatronorder
from datacheck.model.errors import UsageError
from datacheck.model.megatronorder import build_order, index_bytes, sample_index, train_range

SPLITS = ["969, 30, 1", "100,0,0", "1", "9,1", "98,2,0", "0.7 0.2 0.1", "3,3,3", "50,50"]


@st.composite
def runs(draw):
    sizes = draw(st.lists(st.integers(0, 40), min_size=1, max_size=30))
    return dict(sizes=sizes, seq_length=draw(st.integers(2, 25)), seed=draw(st.integers(0, 2**32 - 1)),
                split=draw(st.sampled_from(SPLITS)), extra=draw(st.booleans()), mbs=draw(st.integers(1, 3)),
                dp=draw(st.integers(1, 3)), ga=draw(st.integers(1, 3)), iters=draw(st.integers(1, 12)))


def _build(r):
    return build_order(np.array(r["sizes"]), seq_length=r["seq_length"], seed=r["seed"], split=r["split"],
                       extra=r["extra"], micro_batch=r["mbs"], data_parallel=r["dp"], grad_accum=r["ga"],
                       train_iters=r["iters"], train_samples=None)


@settings(max_examples=examples(300), deadline=None)
@given(runs())
@example(dict(sizes=[5, 7, 3, 9], seq_length=4, seed=1234, split="1", extra=True, mbs=1, dp=1, ga=1, iters=20))
@example(dict(sizes=[0, 6, 0, 0, 4], seq_length=3, seed=0, split="1", extra=False, mbs=2, dp=2, ga=1, iters=9))
@example(dict(sizes=[2, 2], seq_length=2, seed=7, split="1", extra=True, mbs=1, dp=1, ga=1, iters=1))
def test_indices_equal_megatrons_own_loops(r):
    gbs = r["mbs"] * r["dp"] * r["ga"]
    beg, end = ref.train_range(len(r["sizes"]), r["split"])
    tokens = sum(r["sizes"][beg:end])
    if end <= beg or tokens <= 1:
        with pytest.raises(UsageError):
            _build(r)
        return
    o = _build(r)
    x = int(r["extra"])
    di, si, sh, epochs, train = ref.order(r["sizes"], r["seq_length"], r["seed"], r["split"], x, r["iters"] * gbs)
    assert o.train == train and o.epochs == epochs
    assert o.doc_index.tolist() == di
    got = sample_index(o.sizes, o.doc_index, r["seq_length"], o.epochs, o.tokens_per_epoch, x)
    assert [tuple(p) for p in got.tolist()] == si
    assert o.shuffle.tolist() == sh and len(o) == len(si) - 1 >= r["iters"] * gbs
    # every step's (rank, micro-batch, dataset index, sequence, token range), as the sampler and
    # _query_document_sample_shuffle_indices give them
    for step in range(r["iters"]):
        want = ref.step_reads(r["sizes"], r["seq_length"], r["seed"], r["split"], x, r["mbs"], r["dp"], r["ga"],
                              r["iters"] * gbs, step)
        mbs = o.step(step)
        idx = np.concatenate([m[2] for m in mbs])
        owner, seq, start, stop = o.pieces(idx)
        rank_mb = [(mbs[k // r["mbs"]][0], mbs[k // r["mbs"]][1]) for k in range(len(idx))]
        got_reads = [(*rank_mb[w], int(idx[w]), int(q), int(a), int(b))
                     for w, q, a, b in zip(owner, seq, start, stop)]
        assert got_reads == want
        # a sample reads seq_length + extra tokens, wholly inside its sequences
        for w in range(len(idx)):
            sel = owner == w
            assert int((stop[sel] - start[sel]).sum()) == r["seq_length"] + x
            assert np.all(start[sel] >= 0) and np.all(stop[sel] <= o.sizes[seq[sel]])


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("n", [0, 1, 7, 1000, 10_001])
def test_train_range_rounds_as_megatron(split, n):
    assert train_range(n, split) == ref.train_range(n, split)


def test_train_range_known_values():
    # 969 / 1000 of 1000 sequences: [0, 969); of 10,000: [0, 9690)
    assert train_range(1000, "969, 30, 1") == (0, 969)
    assert train_range(10_000, "969, 30, 1") == (0, 9690)
    with pytest.raises(UsageError, match="weight is 0"):
        train_range(10, "0,1,0")


def test_train_samples_or_iters_needed():
    with pytest.raises(UsageError, match="train_iters .* or train_samples"):
        build_order(np.array([5, 5]), seq_length=2, seed=1, split="1", extra=True, micro_batch=1, data_parallel=1,
                    grad_accum=1, train_iters=None, train_samples=None)


def test_train_samples_sets_steps_and_epochs():
    sizes = np.array([10] * 10)  # 100 tokens a pass; 120 samples of 4 (+1) tokens need 481 tokens: 5 passes
    o = build_order(sizes, seq_length=4, seed=3, split="1", extra=True, micro_batch=2, data_parallel=2, grad_accum=1,
                    train_iters=None, train_samples=120)
    assert o.epochs == 5 and o.steps == 120 // 4 and len(o) == (5 * 100 - 1) // 4
    with pytest.raises(UsageError, match="steps 0..29"):
        o.step(30)


@settings(max_examples=examples(100), deadline=None)
@given(runs())
def test_cyclic_batches_equal_megatrons_random_sampler(r):
    pytest.importorskip("torch")
    beg, end = ref.train_range(len(r["sizes"]), r["split"])
    if end <= beg or sum(r["sizes"][beg:end]) <= 1:
        return
    o = build_order(np.array(r["sizes"]), seq_length=r["seq_length"], seed=r["seed"], split=r["split"],
                    extra=r["extra"], micro_batch=r["mbs"], data_parallel=r["dp"], grad_accum=r["ga"],
                    train_iters=r["iters"], train_samples=None, dataloader="cyclic")
    steps = [o.step(s) for s in range(r["iters"])]
    for rank in range(r["dp"]):
        want = ref.cyclic_batches(len(o), r["mbs"], r["dp"], rank, r["iters"] * r["ga"])
        got = [b[2].tolist() for st in steps for b in st if b[0] == rank]
        assert got == want


def test_a_step_starts_where_the_sampler_stands():
    # MegatronPretrainingSampler(consumed_samples=c) hands out c, c + 1, ... (a resumed run's sampler)
    o = build_order(np.full(50, 9), seq_length=4, seed=1, split="1", extra=True, micro_batch=2, data_parallel=2,
                    grad_accum=2, train_iters=10, train_samples=None)
    assert [(r, m, b.tolist()) for r, m, b in o.step(3)] == [(0, 0, [24, 25]), (0, 1, [28, 29]), (1, 0, [26, 27]),
                                                             (1, 1, [30, 31])]
    assert [(r, m, b.tolist()) for r, m, b in o.step(3, consumed=13)] == [
        (0, 0, [13, 14]), (0, 1, [17, 18]), (1, 0, [15, 16]), (1, 1, [19, 20])]
    with pytest.raises(UsageError, match="pass the dataset's"):
        o.step(3, consumed=len(o) - 7)


def test_a_cyclic_step_starts_where_the_sampler_stands():
    pytest.importorskip("torch")
    kw = dict(seq_length=4, seed=1, split="1", extra=True, micro_batch=2, data_parallel=2, grad_accum=2,
              train_iters=10, train_samples=None, dataloader="cyclic")
    o = build_order(np.full(50, 9), **kw)
    # consumed 12 = 3 micro-batches x data-parallel: micro-steps 3 and 4, as step 1 of a run from 0 holds 2, 3
    mine = o.step(0, consumed=12)
    assert [b.tolist() for _, _, b in mine] == [b.tolist() for _, _, b in [
        (0, 0, o._cyclic(3, 0)), (0, 1, o._cyclic(4, 0)), (1, 0, o._cyclic(3, 1)), (1, 1, o._cyclic(4, 1))]]
    for r in range(2):
        want = ref.cyclic_batches(len(o), 2, 2, r, 5)[3:5]
        assert [b.tolist() for rr, _, b in mine if rr == r] == want
    with pytest.raises(UsageError, match="not a multiple of micro-batch x data-parallel"):
        o.step(0, consumed=13)


def test_indices_past_memory_are_refused_before_they_are_allocated(monkeypatch):
    # 10 sequences of 5 tokens (50 a pass), 10**12 iterations of 2 samples of 8 (+1): epochs =
    # ceil((2e12 x 8 + 1) / 50), each of 10 entries, and (epochs x 50 - 1) // 8 samples
    epochs = -(-(2 * 10**12 * 8 + 1) // 50)
    entries, samples = epochs * 10, (epochs * 50 - 1) // 8
    need = 28 * entries + 2 * 8 * samples  # int64 shuffle index: past 2**32 - 2 samples
    assert index_bytes(entries, samples) == need
    monkeypatch.setattr(megatronorder, "memory_limit", lambda: 8 << 30)
    with pytest.raises(UsageError, match=f"would take {need / 2**30:,.1f} GiB, more than the 8.0 GiB") as exc:
        build_order(np.full(10, 5), seq_length=8, seed=1, split="1", extra=True, micro_batch=2, data_parallel=1,
                    grad_accum=1, train_iters=10**12, train_samples=None)
    assert f"{epochs:,} epochs" in str(exc.value)
    # the same run with room for its indices is built
    monkeypatch.setattr(megatronorder, "memory_limit", lambda: None)
    o = build_order(np.full(10, 5), seq_length=8, seed=1, split="1", extra=True, micro_batch=2, data_parallel=1,
                    grad_accum=1, train_iters=10, train_samples=None)
    assert len(o) >= 20


@st.composite
def ramps(draw):
    mbs, dp = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    unit = mbs * dp
    # start and increment whole micro-batch x dp multiples, or (rarely) not: Megatron asserts at the step
    start = draw(st.one_of(st.integers(1, 5).map(lambda k: k * unit), st.integers(1, 12)))
    inc = draw(st.one_of(st.integers(1, 4).map(lambda k: k * unit), st.integers(1, 12)))
    ga = draw(st.integers(1, 6))
    samples = draw(st.integers(1, 400))
    return dict(mbs=mbs, dp=dp, ga=ga, start=start, inc=inc, samples=samples,
                train_samples=draw(st.integers(1, 900)), seed=draw(st.integers(0, 2**32 - 1)))


def _valid_ramp(r):
    gbs = r["mbs"] * r["dp"] * r["ga"]
    return gbs - r["start"] > 0 and (gbs - r["start"]) % r["inc"] == 0


@settings(max_examples=examples(300), deadline=None)
@given(ramps())
@example(dict(mbs=1, dp=2, ga=8, start=4, inc=4, samples=40, train_samples=200, seed=1))
@example(dict(mbs=2, dp=1, ga=3, start=2, inc=2, samples=7, train_samples=5, seed=3))  # ends inside the ramp
def test_rampup_steps_equal_megatrons_calculator_and_sampler(r):
    # --rampup-batch-size START INCR SAMPLES: step s starts at the sum of the earlier steps' global
    # batches (RampupBatchsizeNumMicroBatchesCalculator.update at consumed_train_samples), takes that
    # many samples, and the run has update_train_iters' steps: all from tests/helpers/megatronref.py
    gbs = r["mbs"] * r["dp"] * r["ga"]
    kw = dict(seq_length=3, seed=r["seed"], split="1", extra=True, micro_batch=r["mbs"], data_parallel=r["dp"],
              grad_accum=r["ga"], train_iters=None, train_samples=r["train_samples"],
              rampup_batch_size=(r["start"], r["inc"], r["samples"]))
    sizes = np.full(40, 7)
    if not _valid_ramp(r):
        with pytest.raises(UsageError, match="rampup_batch_size"):
            build_order(sizes, **kw)
        return
    o = build_order(sizes, **kw)
    iters = ref.rampup_train_iters(ref.RampupCalculator(gbs, r["mbs"], r["dp"], r["start"], r["inc"], r["samples"]),
                                   r["train_samples"], r["samples"])
    assert o.steps == iters and len(o) >= r["train_samples"]
    calc = ref.RampupCalculator(gbs, r["mbs"], r["dp"], r["start"], r["inc"], r["samples"])
    walked = 0
    for s in range(max(iters, 0)):
        calc.update(walked, consistency_check=False)
        want_gbs = calc.current_global_batch_size
        assert (o.consumed_before(s), o.batch_at(walked)) == (walked, want_gbs)
        if want_gbs % (r["mbs"] * r["dp"]):  # Megatron's consistency check fails at this iteration
            with pytest.raises(UsageError, match="not a multiple of micro-batch x data-parallel"):
                o.step(s)
            return
        if walked + want_gbs > len(o):
            break
        assert [(a, b, c.tolist()) for a, b, c in o.step(s)] == ref.rampup_step_batches(
            len(o), r["mbs"], r["dp"], ref.RampupCalculator(gbs, r["mbs"], r["dp"], r["start"], r["inc"], r["samples"]),
            s + 1)[s]
        walked += want_gbs


@settings(max_examples=examples(200), deadline=None)
@given(ramps(), st.integers(0, 60), st.integers(-60, 60), st.integers(0, 50))
def test_rampup_advance_walks_the_calculator(r, k, n, off):
    # advance(c, n): n iterations on from c samples (back for n < 0), each taking the batch where it
    # starts; from a point off the run's own schedule too (a run resumed at another count)
    if not _valid_ramp(r):
        return
    gbs = r["mbs"] * r["dp"] * r["ga"]
    ramp = megatronorder.rampup(r["start"], r["inc"], r["samples"], gbs)
    calc = ref.RampupCalculator(gbs, r["mbs"], r["dp"], r["start"], r["inc"], r["samples"])

    def batch(c):
        calc.update(c, consistency_check=False)
        return calc.current_global_batch_size

    c0 = ramp.consumed_before(k) + off
    c = c0
    for _ in range(max(n, 0)):
        c += batch(c)
    if n >= 0:
        assert ramp.advance(c0, n) == c
        return
    # backwards: the unique earlier point p with p + batch(p) = the later one, or None where none is
    want: int | None = c0
    for _ in range(-n):
        assert want is not None
        prev = [p for p in range(max(0, want - gbs), want) if p + batch(p) == want]
        want = prev[0] if prev else None
        if want is None:
            break
    assert ramp.advance(c0, n) == want


def test_rampup_known_values():
    # start 4, +4 every 40 / 2 = 20.0 samples, to 12 (mbs 1 x dp 2 x ga 6): consumed 0 -> 4, 4 -> 8 ...
    # batches 4 (c 0, 4, 8, 12, 16), 8 (c 20, 28, 36), then 12 from 44 (44 > 40), ...
    o = build_order(np.full(40, 7), seq_length=3, seed=1, split="1", extra=True, micro_batch=1, data_parallel=2,
                    grad_accum=6, train_iters=None, train_samples=200, rampup_batch_size=(4, 4, 40))
    assert [o.consumed_before(s) for s in range(10)] == [0, 4, 8, 12, 16, 20, 28, 36, 44, 56]
    # update_train_iters: 8 iterations reach 44 > 40, then (200 - 44) // 12 = 13 more
    assert o.steps == 8 + (200 - 44) // 12
    assert [(r, m, b.tolist()) for r, m, b in o.step(5)] == [(0, 0, [20]), (0, 1, [22]), (0, 2, [24]),
                                                             (0, 3, [26]), (1, 0, [21]), (1, 1, [23]),
                                                             (1, 2, [25]), (1, 3, [27])]
    with pytest.raises(UsageError, match="iteration-based training"):
        build_order(np.full(40, 7), seq_length=3, seed=1, split="1", extra=True, micro_batch=1, data_parallel=2,
                    grad_accum=6, train_iters=10, train_samples=None, rampup_batch_size=(4, 4, 40))


@st.composite
def split_strings(draw):
    # 1 to 3 weights as a run would write them: integers, decimals, zeros, joined by commas, blanks or slashes
    weight = st.one_of(st.integers(0, 1000).map(str), st.sampled_from(["969", "30", "1", "0", "0.1", "0.7", "0.2"]),
                       st.tuples(st.integers(0, 99), st.integers(0, 999_999)).map(lambda t: f"{t[0]}.{t[1]}"))
    words = draw(st.lists(weight, min_size=1, max_size=3))
    return draw(st.sampled_from([",", ", ", " ", "/"])).join(words)


@settings(max_examples=examples(1000), deadline=None)
@given(split_strings(), st.one_of(st.integers(0, 3000), st.integers(0, 10**12),
                                  st.integers(1, 12).flatmap(lambda k: st.integers(10**k - 5, 10**k + 5))))
@example("1,1,1", 7)        # thirds: 2.33 -> [0, 2)
@example("969, 30, 1", 1001)
@example("33.3,33.3,33.4", 3)
@example("0.7 0.2 0.1", 5)  # 3.5 rounds to even: [0, 4)
@example("2,1", 3)
def test_train_range_is_megatron_cores_split_matrix(split, n):
    # the train range over awkward sequence counts is megatron-core's own: parse_and_normalize_split,
    # convert_split_vector_to_split_matrix and int(round(bookend * float(n))) (tests/helpers/megatronref.py,
    # their lines copied; benchmarks/megatron_peer.py holds the same against megatron-core itself)
    weights = [float(w) for w in re.findall(r"[.0-9]+", split)]
    if sum(weights) <= 0:
        with pytest.raises(UsageError):
            train_range(n, split)
        return
    want = ref.split_train_range(n, split)
    if want is None:  # megatron-core's matrix has no train split: no train dataset is built
        with pytest.raises(UsageError, match="weight is 0"):
            train_range(n, split)
        return
    assert train_range(n, split) == want
    assert 0 == want[0] <= want[1] <= n


def test_legacy_split_rounding_is_not_megatron_cores():
    # legacy get_train_valid_test_split_ (Megatron-DeepSpeed, Megatron-LM before megatron-core) rounds
    # each part and moves the bookends by the surplus: 7 sequences in thirds are [0, 3) there, [0, 2)
    # in megatron-core, whose arithmetic datacheck follows (a legacy run's train range can differ by one)
    assert ref.legacy_train_valid_test_split("1,1,1", 7)[:2] == [0, 3]
    assert train_range(7, "1,1,1") == ref.train_range(7, "1,1,1") == (0, 2)


@pytest.mark.parametrize("args, message", [
    ((8, 4, 100, 8), "above the start batch 8"),        # no increment: Megatron divides the samples by 0
    ((4, 3, 100, 8), "whole increments of 3"),           # (8 - 4) % 3: Megatron asserts it
    ((12, 4, 100, 8), "above the start batch 12"),       # the global batch below the start
    ((4, 4, 0, 8), "above 0"),                          # 0 samples: int(0 / 0.0) divides by zero
    ((1, 1, 10, megatronorder.MAX_RAMP_INCREMENTS + 2), "not simulated"),
])
def test_a_ramp_megatron_refuses_is_refused(args, message):
    start, inc, samples, gbs = args
    with pytest.raises(UsageError, match=message):
        megatronorder.rampup(start, inc, samples, gbs)
