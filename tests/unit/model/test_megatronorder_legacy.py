"""``[megatron] implementation = "legacy"``: the sample order of Megatron-DeepSpeed / BigScience and
Megatron-LM before megatron-core, held to a plain-Python reference written from that source
(tests/helpers/megatronlegacyref.py) and to the facts real BigScience logs print
(../shared/logs/megatron, PROVENANCE.md)."""
from __future__ import annotations

import re

import megatronlegacyref as leg
import megatronref as core
import numpy as np
import pytest
from conftest import SHARED, examples
from hypothesis import example, given, settings
from hypothesis import strategies as st

from datacheck.model.errors import UsageError
from datacheck.model.megatronorder import (
    build_blend,
    build_order,
    legacy_train_range,
    num_epochs,
    sample_index,
    train_range,
)

LOGS = SHARED / "logs" / "megatron"
LEGACY_SPLITS = ["969, 30, 1", "949,50,1", "1,1,1", "100,0,0", "1", "9,1", "98/2/0", "0.7,0.2,0.1", "3,3,3", "50,50",
                 "1,2", "0.5"]


@st.composite
def runs(draw):
    sizes = draw(st.lists(st.integers(0, 40), min_size=1, max_size=30))
    return dict(sizes=sizes, seq_length=draw(st.integers(2, 25)), seed=draw(st.integers(0, 2**32 - 1)),
                split=draw(st.sampled_from(LEGACY_SPLITS)), mbs=draw(st.integers(1, 3)), dp=draw(st.integers(1, 3)),
                ga=draw(st.integers(1, 3)), iters=draw(st.integers(1, 12)))


def _build(r):
    return build_order(np.array(r["sizes"]), seq_length=r["seq_length"], seed=r["seed"], split=r["split"], extra=True,
                       micro_batch=r["mbs"], data_parallel=r["dp"], grad_accum=r["ga"], train_iters=r["iters"],
                       train_samples=None, implementation="legacy")


def _step_reads(sizes, ds, total, mbs, dp, ga, step):
    """(rank, micro-batch, dataset index, sequence, start, end) of every read of optimizer step
    ``step``: the legacy sampler's micro-batches of each rank, GPTDataset.__getitem__'s reads."""
    out = []
    for rank in range(dp):
        for k, mb in enumerate(leg.micro_batches(total, 0, mbs, dp, rank)):
            if k // ga == step:
                out += [(rank, k % ga, idx, *p) for idx in mb for p in leg.pieces(sizes, ds, idx)]
    return out


def _got_reads(o, step):
    """(rank, micro-batch, dataset index, prefix, sequence, start, end) of step ``step`` as datacheck reads it."""
    mbs = o.step(step)
    idx = np.concatenate([m[2] for m in mbs])
    owner, dataset, seq, start, stop = o.reads(idx)
    per = len(mbs[0][2])
    return [(mbs[w // per][0], mbs[w // per][1], int(idx[w]), int(d), int(q), int(a), int(b))
            for w, d, q, a, b in zip(owner, dataset, seq, start, stop)]


@settings(max_examples=examples(300), deadline=None)
@given(runs())
@example(dict(sizes=[5, 7, 3, 9, 4, 4, 6], seq_length=4, seed=1234, split="1,1,1", mbs=1, dp=1, ga=1, iters=20))
@example(dict(sizes=[0, 6, 0, 0, 4], seq_length=3, seed=0, split="1", mbs=2, dp=2, ga=1, iters=9))
@example(dict(sizes=[2, 2], seq_length=2, seed=7, split="1", mbs=1, dp=1, ga=1, iters=1))
@example(dict(sizes=[3], seq_length=2, seed=0, split="1", mbs=1, dp=1, ga=1, iters=4))  # legacy asserts, core runs
def test_legacy_indices_equal_the_legacy_source(r):
    gbs = r["mbs"] * r["dp"] * r["ga"]
    ends = leg.split(r["split"], len(r["sizes"]))
    if ends[1] <= ends[0] or sum(r["sizes"][ends[0]:ends[1]]) <= 1:
        with pytest.raises(UsageError):
            _build(r)
        return
    try:
        ds = leg.train_dataset(r["sizes"], r["split"], r["iters"] * gbs, r["seq_length"], r["seed"])
    except AssertionError:  # 'last epoch number of samples exceeded max value': legacy builds no dataset
        with pytest.raises(UsageError, match="exceeded max value"):
            _build(r)
        return
    o = _build(r)
    assert o.implementation == "legacy" and o.train == ds["train"]
    assert (o.epochs, o.separate_final_epoch, o.tokens_per_epoch) == (ds["epochs"], ds["separate"], ds["tokens"])
    assert o.doc_index.tolist() == ds["doc_idx"]
    got = sample_index(o.sizes, o.doc_index, r["seq_length"], o.epochs, o.tokens_per_epoch, 1)
    assert [tuple(p) for p in got.tolist()] == ds["sample_idx"]
    assert o.shuffle.tolist() == ds["shuffle_idx"] and len(o) == ds["len"]
    for step in range(r["iters"]):
        want = _step_reads(r["sizes"], ds, ds["len"], r["mbs"], r["dp"], r["ga"], step)
        assert [g[:3] + g[4:] for g in _got_reads(o, step)] == want


@st.composite
def legacy_split_strings(draw):
    weight = st.one_of(st.integers(0, 1000).map(str), st.sampled_from(["969", "30", "1", "0", "0.1", "0.7", " 2 "]),
                       st.tuples(st.integers(0, 99), st.integers(0, 999_999)).map(lambda t: f"{t[0]}.{t[1]}"))
    words = draw(st.lists(weight, min_size=1, max_size=4))
    return draw(st.sampled_from([",", ", ", "/"])).join(words)


@settings(max_examples=examples(1000), deadline=None)
@given(legacy_split_strings(), st.one_of(st.integers(0, 3000), st.integers(0, 10**12)))
@example("1,1,1", 7)        # thirds: [0, 3) legacy, [0, 2) megatron-core
@example("1,1,1", 1000)     # [0, 334) legacy, [0, 333) megatron-core: the real shard below
@example("949,50,1", 10000)  # the BigScience logs' split: [0, 9490)
@example("2,2,1", 2)
def test_legacy_split_is_get_train_valid_test_split(split, n):
    try:
        ends = leg.split(split, n)
    except AssertionError:  # the weights sum to 0: legacy asserts
        with pytest.raises(UsageError):
            legacy_train_range(n, split)
        return
    if ends[1] <= ends[0]:
        with pytest.raises(UsageError, match="no train dataset"):
            legacy_train_range(n, split)
        return
    assert legacy_train_range(n, split) == (ends[0], ends[1])


def test_the_lineages_cut_the_split_differently():
    # 7 sequences in thirds: legacy rounds each part (2.33 -> 2, three times) and moves the bookends by
    # the missing one: [0, 3); megatron-core rounds the bookend 7/3: [0, 2)
    assert legacy_train_range(7, "1,1,1") == (0, 3) and train_range(7, "1,1,1") == core.train_range(7, "1,1,1") == (0, 2)
    sizes = np.full(7, 9)
    orders = [build_order(sizes, seq_length=4, seed=3, split="1,1,1", extra=True, micro_batch=1, data_parallel=1,
                          grad_accum=1, train_iters=4, train_samples=None, implementation=impl)
              for impl in ("megatron-core", "legacy")]
    assert [o.train for o in orders] == [(0, 2), (0, 3)]
    assert sorted(set(orders[1].doc_index.tolist())) == [0, 1, 2]


def test_legacy_refuses_what_legacy_megatron_cannot_run():
    with pytest.raises(UsageError, match="always reads seq_length"):
        build_order(np.full(9, 5), seq_length=3, seed=1, split="1", extra=False, micro_batch=1, data_parallel=1,
                    grad_accum=1, train_iters=2, train_samples=None, implementation="legacy")
    with pytest.raises(UsageError, match="float"):
        legacy_train_range(10, "1:1")
    with pytest.raises(UsageError, match="reads every even word as a weight"):
        build_blend([np.full(9, 5), np.full(9, 5)], None, seq_length=3, seed=1, split="1", extra=True, micro_batch=1,
                    data_parallel=1, grad_accum=1, train_iters=2, train_samples=None, implementation="legacy")


@st.composite
def blends(draw):
    k = draw(st.integers(1, 3))
    return dict(sizes=[draw(st.lists(st.integers(0, 30), min_size=1, max_size=12)) for _ in range(k)],
                weights=[draw(st.sampled_from([0.1, 0.3, 0.5, 1.0, 2.0, 7.0])) for _ in range(k)],
                seq_length=draw(st.integers(2, 12)), seed=draw(st.integers(0, 2**32 - 1)),
                split=draw(st.sampled_from(["1", "9,1", "1,1,1", "98,2,0"])), mbs=draw(st.integers(1, 2)),
                dp=draw(st.integers(1, 2)), ga=draw(st.integers(1, 2)), iters=draw(st.integers(1, 8)))


@settings(max_examples=examples(150), deadline=None)
@given(blends())
@example(dict(sizes=[[5, 7, 3, 9], [4, 4, 4]], weights=[0.3, 0.7], seq_length=4, seed=1234, split="1", mbs=1, dp=2,
              ga=2, iters=5))
def test_legacy_blend_equals_blendable_dataset(r):
    gbs = r["mbs"] * r["dp"] * r["ga"]
    kw = dict(seq_length=r["seq_length"], seed=r["seed"], split=r["split"], extra=True, micro_batch=r["mbs"],
              data_parallel=r["dp"], grad_accum=r["ga"], train_iters=r["iters"], train_samples=None,
              implementation="legacy")
    for sz in r["sizes"]:
        ends = leg.split(r["split"], len(sz))
        if ends[1] <= ends[0] or sum(sz[ends[0]:ends[1]]) <= 1:
            with pytest.raises(UsageError):
                build_blend([np.array(s) for s in r["sizes"]], r["weights"], **kw)
            return
    try:
        b = leg.blend(r["sizes"], r["weights"], r["split"], r["iters"] * gbs, r["seq_length"], r["seed"])
    except AssertionError:  # a dataset's last epoch exceeds an epoch: legacy asserts
        with pytest.raises(UsageError, match="exceeded max value"):
            build_blend([np.array(s) for s in r["sizes"]], r["weights"], **kw)
        return
    o = build_blend([np.array(s) for s in r["sizes"]], r["weights"], **kw)
    assert o.implementation == "legacy" and o.targets == b["built"] and len(o) == b["size"]
    assert [len(d) for d in o.datasets] == [p["len"] for p in b["parts"]]
    for step in range(r["iters"]):
        want = []
        for rank in range(r["dp"]):
            for k, mb in enumerate(leg.micro_batches(b["size"], 0, r["mbs"], r["dp"], rank)):
                if k // r["ga"] != step:
                    continue
                for idx in mb:
                    d = b["dataset_index"][idx]
                    want += [(rank, k % r["ga"], idx, d, *p)
                             for p in leg.pieces(r["sizes"][d], b["parts"][d], b["dataset_sample_index"][idx])]
        try:
            got = _got_reads(o, step)
        except UsageError as exc:  # the blend asks a dataset beyond its length: legacy raises IndexError there too
            assert "beyond its" in str(exc)
            assert any(b["dataset_sample_index"][i] >= b["parts"][b["dataset_index"][i]]["len"]
                       for i in range(step * gbs, (step + 1) * gbs))
            return
        assert got == want


# --- facts the BigScience logs print (../shared/logs/megatron, PROVENANCE.md) ---

def _log_facts(name: str) -> dict:
    text = (LOGS / name).read_text(errors="replace")
    arg = {k: v for k, v in re.findall(r"^  (\w+) \.+ (.*?)\s*$", text, re.M)}
    split_at = text.index(" > dataset split:")
    train = re.search(r"train:\s+document indices in \[(\d+), (\d+)\)", text[split_at:])
    assert train is not None
    built = re.search(r"_train_indexmap_(\d+)ns_(\d+)sl_(\d+)s_shuffle_idx\.npy\s+loaded indexed file.*?\s+"
                      r"total number of samples: (\d+)\s+total number of epochs: (\d+)", text, re.S)
    assert built is not None
    return dict(train_iters=int(arg["train_iters"]), global_batch=int(arg["global_batch_size"]),
                micro_batch=int(arg["micro_batch_size"]), dp=int(arg["data_parallel_size"]),
                seq_length=int(arg["seq_length"]), seed=int(arg["seed"]), split=arg["split"],
                documents=int(re.search(r"number of documents: (\d+)", text).group(1)),  # type: ignore[union-attr]
                target=int(re.search(r"datasets target sizes.*?train:\s+(\d+)", text, re.S).group(1)),  # type: ignore[union-attr]
                train=(int(train.group(1)), int(train.group(2))), ns=int(built.group(1)), sl=int(built.group(2)),
                s=int(built.group(3)), sample_idx_rows=int(built.group(4)), epochs=int(built.group(5)),
                consumed=[(int(i), int(c), int(g)) for i, c, g in re.findall(
                    r"iteration\s+(\d+)/\s*\d+ \| consumed samples:\s+(\d+) \|.*?global batch size:\s+(\d+)", text)])


def test_bigscience_logs_show_what_the_legacy_lineage_predicts():
    if not LOGS.is_dir():
        pytest.skip("../shared/logs is not present")
    # two runs of BigScience's Megatron-LM over the same openwebtext-10k prefix (the same path):
    # 1000 iterations of global batch 4 (one epoch) and of global batch 1024 (99 epochs)
    small, big = _log_facts("meg_gpt2_base_n4-1809579.out"), _log_facts("meg_gpt2_perf_n16.out")
    for f in (small, big):
        # the train target is train_iters x global batch, and GPTDataset's file name says so
        assert f["target"] == f["ns"] == f["train_iters"] * f["global_batch"]
        assert (f["sl"], f["s"]) == (f["seq_length"], f["seed"])
        # get_train_valid_test_split_ over the logged document count gives the logged train range
        assert legacy_train_range(f["documents"], f["split"]) == f["train"] == (0, 9490)
        # consumed samples after iteration N are N x global batch: the sampler's position of step N
        o = build_order(np.full(100, 4000), seq_length=f["seq_length"], seed=f["seed"], split=f["split"], extra=True,
                        micro_batch=f["micro_batch"], data_parallel=f["dp"],
                        grad_accum=f["global_batch"] // (f["micro_batch"] * f["dp"]), train_iters=f["train_iters"],
                        train_samples=None, implementation="legacy")
        assert f["consumed"] and all(c == o.consumed_before(i) and g == o.global_batch for i, c, g in f["consumed"])
    # the one-epoch run bounds the train split's tokens T: its sample_idx has (T - 1) // 1024 + 1 rows
    assert small["epochs"] == 1
    rows, sl = small["sample_idx_rows"], small["seq_length"]
    candidates = range((rows - 1) * sl + 1, rows * sl + 1)  # every T with (T - 1) // sl == rows - 1
    # for every such T the legacy lineage predicts the 1024000-sample run's 99 epochs, and for some of
    # them exactly its logged sample_idx rows ((epochs x T - 1) // sl + 1)
    assert {num_epochs(t, big["target"], sl, 1) for t in candidates} == {big["epochs"]} == {99}
    fits = [t for t in candidates if (big["epochs"] * t - 1) // sl + 1 == big["sample_idx_rows"]]
    assert fits and all(leg.epochs(t, sl, big["target"]) == 99 for t in fits)
    # datacheck's legacy GPTDataset over 10,000 documents whose train split holds such a T tokens builds
    # exactly the logged sample_idx rows (its length + 1) and epochs for both runs
    t = fits[0]
    sizes = np.full(10_000, 1000)
    sizes[:9490] = t // 9490
    sizes[: t % 9490] += 1
    for f in (small, big):
        o = build_order(sizes, seq_length=sl, seed=f["seed"], split=f["split"], extra=True, micro_batch=f["micro_batch"],
                        data_parallel=f["dp"], grad_accum=f["global_batch"] // (f["micro_batch"] * f["dp"]),
                        train_iters=f["train_iters"], train_samples=None, implementation="legacy")
        assert (o.train, o.tokens_per_epoch, o.epochs, len(o) + 1) == ((0, 9490), t, f["epochs"], f["sample_idx_rows"])
    # the printed count is sample_idx's rows (samples + 1): read as the sample count, no T fits both logs
    assert not [t for t in range(rows * sl + 1, (rows + 1) * sl + 1)
                if (big["epochs"] * t - 1) // sl == big["sample_idx_rows"]]
