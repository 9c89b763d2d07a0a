"""datacheck's Megatron order (datacheck.model.megatronorder, datacheck.execute.plan.MegatronPlan)
against megatron-core's own GPTDataset and BlendedDataset (BlendedMegatronDatasetBuilder), on the
real Megatron pairs of ../shared/realdata, blends of them (``--data-path`` weighted, unweighted, a
prefix twice; ``--train-data-path``), and a generated pair whose documents hold several sequences
(preprocess_data.py --split-sentences).

megatron-core is never a dependency of datacheck: put it beside, not into, datacheck's environment::

    python -m pip download megatron-core --no-deps -d /tmp/mcore && cd /tmp/mcore && unzip -q megatron_core-*.whl -d x
    PYTHONPATH=/tmp/mcore/x:. .venv/bin/python benchmarks/megatron_peer.py [REALDATA]

(the wheel ships the compiled ``helpers_cpp``; its package imports torch, which the torch extra
installs). Compared, per case: the train split's sequence ids, the document index, the sample index
(helpers.cpp ``build_sample_idx``), the shuffle index, ``len(GPTDataset)``; then, for whole steps of
the plan, every sample's tokens (the slices of the documents the plan names) and its document ids
against ``GPTDataset._query_document_sample_shuffle_indices``. MegatronPretrainingSampler lives in
megatron/training, outside the wheel: the batches are held to its code by
tests/helpers/megatronref.py instead. Prints one line per case; exit 1 on the first difference, 0
with a note when megatron-core cannot be imported. Blends: the blend's length, its dataset and
dataset-sample indices (helpers.cpp ``build_blending_indices``), each prefix's GPTDataset (its
num_samples, document and shuffle indices, length), and every sample's prefix, tokens and documents
of 4 whole steps. ``--rampup-batch-size`` runs: every step's start and global batch against
megatron-core's RampupBatchsizeNumMicroBatchesCalculator, and the samples of 6 steps. ``--split``: the
train range over awkward sequence counts against megatron-core's split matrix and the train
GPTDataset's indices.
"""
from __future__ import annotations

import struct
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from datacheck.execute.plan import MegatronPlan, build_plan, rows_of_step  # noqa: E402
from datacheck.formats.megatron import read_megatron  # noqa: E402
from datacheck.model.config import config_from_dict  # noqa: E402
from datacheck.model.megatronorder import BlendedOrder, build_order, sample_index, train_range  # noqa: E402

#: (prefix under realdata, seq_length, seed, split, train samples, add_extra_token)
INDEX_CASES = [
    ("megatron_gpt2_openwebtext/meg-gpt2-openwebtext_text_document", 1024, 1234, "969, 30, 1", 640, True),
    ("megatron_gpt2_openwebtext/meg-gpt2-openwebtext_text_document", 512, 7, "100,0,0", 24_000, True),
    ("megatron_gpt2_openwebtext/meg-gpt2-openwebtext_text_document", 2048, 1234, "98,2,0", 1400, True),
    ("megatron_gpt2_openwebtext/meg-gpt2-openwebtext_text_document", 128, 99, "9,1", 10_000, False),
    ("megatron_toy_duplicates/my-gpt2_text_document", 64, 1234, "969, 30, 1", 16_000, True),
    ("megatron_toy_duplicates/my-gpt2_text_document", 7, 3, "1", 50_000, True),
]
OWT = "megatron_gpt2_openwebtext/meg-gpt2-openwebtext_text_document"
TOY = "megatron_toy_duplicates/my-gpt2_text_document"
#: blends: (--data-path words, prefixes under realdata; seq_length, seed, split, train_iters, micro-batch,
#: data-parallel, grad_accum)
BLEND_CASES = [
    (["0.3", OWT, "0.7", TOY], 64, 1234, "969, 30, 1", 200, 4, 2, 2),
    (["2", TOY, "1", OWT, "1", TOY], 128, 5, "98,2,0", 150, 2, 4, 3),
    ([OWT, TOY], 256, 1234, "98,2,0", 300, 2, 2, 2),
    (["1.0", OWT], 1024, 99, "100,0,0", 100, 2, 2, 1),
    (["0.001", TOY, "0.999", OWT], 32, 3, "9,1", 400, 4, 2, 2),
]
#: --train-data-path blends (blend_per_split): datacheck's data_path with split "1" (the split is ignored)
PER_SPLIT_CASES = [
    (["0.3", OWT, "0.7", TOY], 64, 1234, "", 200, 4, 2, 2),
    ([OWT, TOY], 256, 9, "", 300, 2, 2, 2),
]
#: (prefix, seq_length, seed, split, train_iters, micro-batch, data-parallel, grad_accum)
#: --rampup-batch-size runs: (prefix, seq_length, seed, split, train_samples, micro-batch, data-parallel,
#: grad_accum, (start, increment, ramp-up samples))
RAMP_CASES = [
    ("megatron_gpt2_openwebtext/meg-gpt2-openwebtext_text_document", 64, 7, "969, 30, 1", 400, 2, 2, 4, (4, 4, 60)),
    ("megatron_toy_duplicates/my-gpt2_text_document", 32, 1234, "98,2,0", 3000, 1, 2, 12, (2, 2, 500)),
    ("megatron_gpt2_openwebtext/meg-gpt2-openwebtext_text_document", 128, 3, "1", 2000, 4, 1, 6, (4, 4, 333)),
]
#: --split strings for the train-range comparison over awkward sequence counts
SPLITS = ["969, 30, 1", "1,1,1", "0.7 0.2 0.1", "2,1", "98,2,0", "949,50,1", "1", "33.3,33.3,33.4", "5/3/2"]
PLAN_CASES = [
    ("megatron_gpt2_openwebtext/meg-gpt2-openwebtext_text_document", 1024, 1234, "969, 30, 1", 400, 2, 2, 2),
    ("megatron_toy_duplicates/my-gpt2_text_document", 64, 1234, "98,2,0", 300, 4, 2, 4),
]


class _Tokenizer:
    """What GPTDatasetConfig reads of a tokenizer."""

    eod = 0
    pad = 0
    vocab_size = 60_000
    unique_identifiers = {"class": "_Tokenizer"}


def _megatron_train(mc, prefix: str, seq_length: int, seed: int, split: str, samples: int, extra: bool):
    cfg = mc.GPTDatasetConfig(random_seed=seed, sequence_length=seq_length, blend=([prefix], None), split=split,
                              tokenizer=_Tokenizer(), reset_position_ids=False, reset_attention_mask=False,
                              eod_mask_loss=False, path_to_cache=tempfile.mkdtemp(),
                              add_extra_token_to_sequence=extra)
    train, _, _ = mc.BlendedMegatronDatasetBuilder(mc.GPTDataset, [samples, None, None], lambda: True, cfg).build()
    return train


def _indices(mc, prefix: str, seq_length: int, seed: int, split: str, samples: int, extra: bool) -> str:
    train = _megatron_train(mc, prefix, seq_length, seed, split, samples, extra)
    ds = mc.IndexedDataset(prefix)
    o = build_order(np.array(ds.sequence_lengths), seq_length=seq_length, seed=seed, split=split, extra=extra,
                    micro_batch=1, data_parallel=1, grad_accum=1, train_iters=None, train_samples=samples)
    x = int(extra)
    si = sample_index(o.sizes, o.doc_index, seq_length, o.epochs, o.tokens_per_epoch, x)
    assert np.array_equal(np.asarray(train.indices), np.arange(*o.train)), "train split"
    assert np.array_equal(np.asarray(train.document_index), o.doc_index), "document index"
    assert np.array_equal(np.asarray(train.sample_index).astype(np.int64), si), "sample index"
    assert np.array_equal(np.asarray(train.shuffle_index).astype(np.int64), o.shuffle.astype(np.int64)), "shuffle"
    assert len(train) == len(o), "samples"
    return (f"epochs {o.epochs}, separate final epoch {o.separate_final_epoch}, train sequences {o.train}, "
            f"{len(o)} samples: document, sample and shuffle indices equal")


def _plan(mc, prefix: Path, seq_length: int, seed: int, split: str, iters: int, mbs: int, dp: int, ga: int,
          steps: list[int]) -> str:
    gbs = mbs * dp * ga
    train = _megatron_train(mc, str(prefix), seq_length, seed, split, iters * gbs, True)
    plan = build_plan([str(prefix) + ".bin"], config_from_dict({
        "batch": {"batch_size": mbs, "world_size": dp, "grad_accum": ga},
        "megatron": {"seq_length": seq_length, "train_iters": iters, "seed": seed, "split": split}}))
    assert isinstance(plan, MegatronPlan)
    rows_tokens = read_megatron(Path(str(prefix) + ".bin"))["input_ids"].to_list()
    n = 0
    for step in steps:
        rows = rows_of_step(plan, step)
        for idx in range(step * gbs, (step + 1) * gbs):
            text, seq_ids = train._query_document_sample_shuffle_indices(idx)
            mine = [r for r in rows if r.sample == idx]
            got = [t for r in mine for t in rows_tokens[r.row][r.tokens[0]:r.tokens[1]]]
            assert got == text.tolist(), f"step {step} sample {idx}: tokens"
            assert [r.row for r in mine] == plan.seq_doc[0][seq_ids].tolist(), f"step {step} sample {idx}: documents"
            n += 1
    return f"{n} samples of {len(steps)} step(s): tokens and documents equal GPTDataset's"


def _blend(mc, real: Path, words: list[str], seq_length: int, seed: int, split: str, iters: int, mbs: int, dp: int,
           ga: int, per_split: bool = False) -> str:
    """megatron-core's BlendedMegatronDatasetBuilder over ``--data-path words`` against datacheck's
    plan with ``[megatron] data_path = words``: the blending indices, every GPTDataset's indices, and
    every sample's tokens and documents of 4 whole steps. ``per_split``: megatron-core is given the
    words as ``--train-data-path`` (``blend_per_split``, no ``--split``) and datacheck ``split = "1"``."""
    gbs = mbs * dp * ga
    weighted = words[0].replace(".", "", 1).isdigit()
    named = words[1::2] if weighted else words
    paths = [w if weighted and i % 2 == 0 else str(real / w) for i, w in enumerate(words)]
    blend = mc.get_blend_from_list(paths)
    where = dict(blend_per_split=[blend, None, None]) if per_split else dict(blend=blend, split=split)
    cfg = mc.GPTDatasetConfig(random_seed=seed, sequence_length=seq_length, **where,
                              tokenizer=_Tokenizer(), reset_position_ids=False, reset_attention_mask=False,
                              eod_mask_loss=False, path_to_cache=None, add_extra_token_to_sequence=True)
    if per_split:
        split = "1"
    train, _, _ = mc.BlendedMegatronDatasetBuilder(mc.GPTDataset, [iters * gbs, 8, 8], lambda: True, cfg).build()
    bins = sorted({str(real / w) + ".bin" for w in named})
    plan = build_plan(bins, config_from_dict({
        "batch": {"batch_size": mbs, "world_size": dp, "grad_accum": ga},
        "megatron": {"seq_length": seq_length, "train_iters": iters, "seed": seed, "split": split, "data_path": paths}}))
    assert isinstance(plan, MegatronPlan)
    o = plan.order
    parts = train.datasets if isinstance(train, mc.BlendedDataset) else [train]
    if isinstance(train, mc.BlendedDataset):
        assert isinstance(o, BlendedOrder), "a BlendedDataset where datacheck built one GPTDataset"
        assert len(train) == len(o), f"blend length {len(train)} != {len(o)}"
        d, k = o.index(np.arange(len(o)))
        assert np.array_equal(np.asarray(train.dataset_index).astype(np.int64), d), "dataset index"
        assert np.array_equal(np.asarray(train.dataset_sample_index).astype(np.int64), k), "dataset sample index"
        mine = list(o.datasets)
    else:
        assert not isinstance(o, BlendedOrder), "one GPTDataset where datacheck built a blend"
        mine = [o]
    for i, (ds, od) in enumerate(zip(parts, mine)):
        assert ds.num_samples == od.requested or ds.num_samples is None, f"dataset {i}: num_samples {ds.num_samples}"
        assert np.array_equal(np.asarray(ds.document_index), od.doc_index), f"dataset {i}: document index"
        assert np.array_equal(np.asarray(ds.shuffle_index).astype(np.int64), od.shuffle.astype(np.int64)), \
            f"dataset {i}: shuffle index"
        assert len(ds) == len(od), f"dataset {i}: samples"
    tokens = {sp.path: read_megatron(Path(str(sp.abs_path)))["input_ids"].to_list() for sp in plan.spans}
    n = 0
    for step in sorted({0, 1, o.steps // 2, o.steps - 1}):
        rows = rows_of_step(plan, step)
        for idx in range(step * gbs, (step + 1) * gbs):
            if isinstance(train, mc.BlendedDataset):
                di, dsi = int(train.dataset_index[idx]), int(train.dataset_sample_index[idx])
            else:
                di, dsi = 0, idx
            text, seq_ids = parts[di]._query_document_sample_shuffle_indices(dsi)
            got_rows = [r for r in rows if r.sample == idx]
            assert {r.shard for r in got_rows} == {plan.spans[di].path}, f"step {step} sample {idx}: prefix"
            got = [t for r in got_rows for t in tokens[r.shard][r.row][r.tokens[0]:r.tokens[1]]]
            assert got == text.tolist(), f"step {step} sample {idx}: tokens"
            assert [r.row for r in got_rows] == plan.seq_doc[di][seq_ids].tolist(), f"step {step} sample {idx}: documents"
            n += 1
    per = ", ".join(f"{len(od)}" for od in mine)
    return (f"blend of {len(mine)} GPTDataset(s) ({per} samples), {len(train)} blend samples: blending "
            f"and GPTDataset indices equal; {n} samples of whole steps: tokens and documents equal")


def _ramp(mc, prefix: Path, seq_length: int, seed: int, split: str, samples: int, mbs: int, dp: int, ga: int,
          ramp: tuple[int, int, int]) -> str:
    """A ``--rampup-batch-size`` run: megatron-core's RampupBatchsizeNumMicroBatchesCalculator walked
    through training.py's loop (``update_num_microbatches(consumed_train_samples)`` at each iteration's
    start, ``consumed_train_samples += dp x mbs x get_num_microbatches()`` after it; training.py is
    outside the wheel, its three lines are copied here) against datacheck's plan under ``[megatron]
    rampup_batch_size``: every step's start and global batch, ``update_train_iters``' step count, and
    every sample's tokens and documents of 6 whole steps (in and after the ramp) against GPTDataset."""
    gbs = mbs * dp * ga
    calc = mc.RampupCalculator(gbs, mbs, dp, False, 0, *ramp)
    iterations, consumed = 0, 0  # training.py update_train_iters
    while consumed <= int(ramp[2]):
        calc.update(consumed, consistency_check=False)
        consumed += calc.get_current_global_batch_size()
        iterations += 1
    calc.update(0, consistency_check=False)
    iterations += (samples - consumed) // gbs
    train = _megatron_train(mc, str(prefix), seq_length, seed, split, samples, True)
    plan = build_plan([str(prefix) + ".bin"], config_from_dict({
        "batch": {"batch_size": mbs, "world_size": dp, "grad_accum": ga},
        "megatron": {"seq_length": seq_length, "train_samples": samples, "seed": seed, "split": split,
                     "rampup_batch_size": list(ramp)}}))
    assert isinstance(plan, MegatronPlan)
    assert plan.order.steps == iterations, f"steps {plan.order.steps} != update_train_iters' {iterations}"
    starts, consumed = [], 0
    for step in range(iterations):  # training.py train()'s loop
        calc.update(consumed, consistency_check=True)
        batch = dp * mbs * calc.get()
        assert (plan.order.consumed_before(step), plan.order.batch_at(consumed)) == (consumed, batch), f"step {step}"
        starts.append((consumed, batch))
        consumed += batch
    rows_tokens = read_megatron(Path(str(prefix) + ".bin"))["input_ids"].to_list()
    ramp_end = next(k for k, (_, b) in enumerate(starts) if b == gbs)
    n = 0
    for step in sorted({0, 1, ramp_end // 2, ramp_end - 1, ramp_end, iterations - 1}):
        rows = rows_of_step(plan, step)
        lo, batch = starts[step]
        assert sorted({r.sample for r in rows}) == list(range(lo, lo + batch)), f"step {step}: samples"
        for idx in range(lo, lo + batch):
            text, seq_ids = train._query_document_sample_shuffle_indices(idx)
            mine = [r for r in rows if r.sample == idx]
            assert [t for r in mine for t in rows_tokens[r.row][r.tokens[0]:r.tokens[1]]] == text.tolist(), \
                f"step {step} sample {idx}: tokens"
            assert [r.row for r in mine] == plan.seq_doc[0][seq_ids].tolist(), f"step {step} sample {idx}: documents"
            n += 1
    return (f"{iterations} steps, the ramp over by step {ramp_end}: every step's start and global batch equal the "
            f"calculator's; {n} samples of 6 steps: tokens and documents equal GPTDataset's")


def _splits(mc, folder: Path) -> str:
    """``--split`` over awkward sequence counts: datacheck's train range against megatron-core's
    ``parse_and_normalize_split``, ``convert_split_vector_to_split_matrix`` and the builder's
    ``int(round(bookend * float(n)))`` for a grid of counts and splits, and against the train
    GPTDataset's ``indices`` that BlendedMegatronDatasetBuilder builds over generated pairs of
    awkward counts."""
    grid = 0
    for split in SPLITS:
        matrix = mc.convert_split_vector_to_split_matrix(mc.parse_and_normalize_split(split))
        for n in list(range(0, 2000)) + [10**k + d for k in range(4, 10) for d in (-3, -1, 0, 1, 3)]:
            want = (int(round(matrix[0][0] * float(n))), int(round(matrix[0][1] * float(n))))
            assert train_range(n, split) == want, f"--split {split!r} over {n} sequences: {train_range(n, split)} != {want}"
            grid += 1
    built = 0
    for n in (3, 7, 13, 101, 333):
        prefix = _pair(folder / f"n{n}", [5 + (i * 7) % 11 for i in range(n)])
        for split in SPLITS:
            try:
                train = _megatron_train(mc, str(prefix), 4, 1234, split, 8, True)
            except Exception as exc:  # noqa: BLE001 - a split megatron-core builds no train dataset of
                assert train_range(n, split)[1] - train_range(n, split)[0] <= 0 or "token" in str(exc), str(exc)
                continue
            assert np.array_equal(np.asarray(train.indices), np.arange(*train_range(n, split))), f"{n}, {split!r}"
            built += 1
    return f"{grid} (count, split) pairs equal megatron-core's split matrix; {built} built train datasets' indices equal"


def _pair(folder: Path, lengths: list[int]) -> Path:
    """A pair of one sequence per document with ``lengths`` tokens."""
    folder.mkdir(parents=True, exist_ok=True)
    lens = np.array(lengths, dtype=np.int32)
    ptrs = np.concatenate([[0], np.cumsum(lens[:-1].astype(np.int64) * 2)]).astype(np.int64)
    di = np.arange(len(lens) + 1, dtype=np.int64)
    (folder / "x.idx").write_bytes(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(lens), len(di))
                                   + lens.tobytes() + ptrs.tobytes() + di.tobytes())
    (folder / "x.bin").write_bytes((np.arange(int(lens.sum())) % 60_000).astype(np.uint16).tobytes())
    return folder / "x"


def _sentences_pair(folder: Path) -> Path:
    """A pair of 300 documents of 1..5 sequences (0..39 tokens each)."""
    rng = np.random.default_rng(0)
    seqs, doc_idx, t = [], [0], 1
    for _ in range(300):
        for _ in range(int(rng.integers(1, 6))):
            k = int(rng.integers(0, 40))
            seqs.append(np.arange(t, t + k) % 60_000)
            t += k
        doc_idx.append(len(seqs))
    lens = np.array([len(s) for s in seqs], dtype=np.int32)
    ptrs = np.concatenate([[0], np.cumsum(lens[:-1].astype(np.int64) * 2)]).astype(np.int64)
    di = np.array(doc_idx, dtype=np.int64)
    (folder / "x.idx").write_bytes(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(seqs), len(di))
                                   + lens.tobytes() + ptrs.tobytes() + di.tobytes())
    (folder / "x.bin").write_bytes(np.concatenate(seqs).astype(np.uint16).tobytes())
    return folder / "x"


def main(argv: list[str]) -> int:
    try:
        from megatron.core.datasets import gpt_dataset, indexed_dataset
        from megatron.core.datasets.blended_dataset import BlendedDataset
        from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
        from megatron.core.datasets.blended_megatron_dataset_config import (
            convert_split_vector_to_split_matrix,
            parse_and_normalize_split,
        )
        from megatron.core.datasets.utils import get_blend_from_list
        from megatron.core.num_microbatches_calculator import RampupBatchsizeNumMicroBatchesCalculator
    except ImportError as exc:
        print(f"megatron-core cannot be imported ({exc}); see this script's docstring")
        return 0

    class mc:  # noqa: N801 - the names megatron-core gives them
        GPTDataset = gpt_dataset.GPTDataset
        GPTDatasetConfig = gpt_dataset.GPTDatasetConfig
        IndexedDataset = indexed_dataset.IndexedDataset

    mc.BlendedMegatronDatasetBuilder = BlendedMegatronDatasetBuilder  # type: ignore[attr-defined]
    mc.BlendedDataset = BlendedDataset  # type: ignore[attr-defined]
    mc.get_blend_from_list = staticmethod(get_blend_from_list)  # type: ignore[attr-defined]
    mc.RampupCalculator = RampupBatchsizeNumMicroBatchesCalculator  # type: ignore[attr-defined]
    mc.parse_and_normalize_split = staticmethod(parse_and_normalize_split)  # type: ignore[attr-defined]
    mc.convert_split_vector_to_split_matrix = staticmethod(convert_split_vector_to_split_matrix)  # type: ignore[attr-defined]
    real = Path(argv[0]) if argv else ROOT.parent / "shared" / "realdata"
    try:
        for words, *args in BLEND_CASES:
            print(f"blend {words} {args}: {_blend(mc, real, words, *args)}")
        for words, *args in PER_SPLIT_CASES:
            print(f"--train-data-path {words} {args}: {_blend(mc, real, words, *args, per_split=True)}")
        for prefix, *args in INDEX_CASES:
            print(f"{prefix} {args}: {_indices(mc, str(real / prefix), *args)}")
        for prefix, seq_length, seed, split, iters, mbs, dp, ga in PLAN_CASES:
            print(f"plan {prefix}: {_plan(mc, real / prefix, seq_length, seed, split, iters, mbs, dp, ga, [0, 1, iters // 2, iters - 1])}")
        for prefix, *rargs in RAMP_CASES:
            print(f"--rampup-batch-size {prefix} {rargs}: {_ramp(mc, real / prefix, *rargs)}")
        with tempfile.TemporaryDirectory() as tmp:
            print(f"--split over awkward counts: {_splits(mc, Path(tmp))}")
        with tempfile.TemporaryDirectory() as tmp:
            print(f"plan of a --split-sentences pair: {_plan(mc, _sentences_pair(Path(tmp)), 50, 77, '90,10', 120, 2, 3, 2, list(range(120)))}")
    except AssertionError as exc:
        print(f"DIFFERENT: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
