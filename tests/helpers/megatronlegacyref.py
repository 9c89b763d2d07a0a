"""A plain-Python reference of the LEGACY Megatron GPT sample order (Megatron-DeepSpeed / BigScience,
Megatron-LM before megatron-core), written from its source for the tests of
``[megatron] implementation = "legacy"`` (:mod:`datacheck.model.megatronorder`). It shares nothing
with datacheck's numpy version and nothing with ``megatronref`` (megatron-core's):

- ``split``: bigscience-workshop/Megatron-DeepSpeed megatron/data/dataset_utils.py
  ``get_train_valid_test_split_`` @ 006c4e96556cd241f43e91793e8b7fab5ba0546b;
- ``epochs``, ``doc_idx``, ``sample_idx``, ``shuffle_idx``, ``gpt_dataset``, ``pieces``:
  megatron/data/gpt_dataset.py ``_num_epochs``, ``_build_index_mappings`` (separate_last_epoch),
  ``_build_doc_idx``, ``_build_sample_idx`` (the Python twin of helpers.cpp ``build_sample_idx``),
  ``_build_shuffle_idx`` and ``GPTDataset.__getitem__`` @ 20c48380d94beb67e6c63594a5ca0477482128c1;
- ``blend``: dataset_utils.py ``analyze_data_prefix`` / ``get_datasets_weights_and_num_samples``
  (the 1.005 factor), gpt_dataset.py ``build_train_valid_test_datasets`` (a blend whenever
  ``len(data_prefix) != 1``), blendable_dataset.py ``BlendableDataset(datasets, weights)`` (its size
  the datasets' lengths added up, the weights normalised again) and helpers.cpp
  ``build_blending_indices`` (deep-spin/Megatron-DeepSpeed @ 8d94512766dff5bfcb1ff5cc777d56775f76157c);
- ``micro_batches``: megatron/data/data_samplers.py ``MegatronPretrainingSampler.__iter__`` @
  019ed7c95b1faa9ea3c00df7628f986329d41c6c.

Slow on purpose (token-by-token where the source walks documents): small inputs only.
"""
from __future__ import annotations

import math

import numpy


def split(splits_string: str, n: int) -> list[int]:
    """The four bookends [0, train end, valid end, n] legacy cuts ``n`` sequences into."""
    if "," in splits_string:
        words = splits_string.split(",")
    elif "/" in splits_string:
        words = splits_string.split("/")
    else:
        words = [splits_string]
    weights = [float(w) for w in words]
    while len(weights) < 3:
        weights.append(0.0)
    weights = weights[:3]
    total = sum(weights)
    assert total > 0.0
    ends = [0]
    for w in weights:
        ends.append(ends[-1] + int(round(w / total * float(n))))
    over = ends[-1] - n
    ends = [ends[0]] + [e - over for e in ends[1:]]
    assert ends[-1] == n
    return ends


def epochs(tokens_per_epoch: int, seq_length: int, num_samples: int) -> int:
    """``_num_epochs``: add epochs until ``(tokens - 1) // seq_length`` reaches ``num_samples``."""
    e, tokens = 0, 0
    while True:
        e += 1
        tokens += tokens_per_epoch
        if (tokens - 1) // seq_length >= num_samples:
            return e


def doc_idx(documents: list[int], n_epochs: int, rng: numpy.random.RandomState, separate_last: bool) -> numpy.ndarray:
    """``_build_doc_idx``: the documents repeated per epoch (int32), shuffled; the last epoch apart."""
    if separate_last and n_epochs > 1:
        head = doc_idx(documents, n_epochs - 1, rng, False)
        tail = doc_idx(documents, 1, rng, False)
        return numpy.concatenate((head, tail))
    flat = numpy.array([d for _ in range(n_epochs) for d in documents], dtype=numpy.int32)
    rng.shuffle(flat)
    return flat


def sample_idx(sizes: list[int], di: list[int], seq_length: int, n_epochs: int, tokens_per_epoch: int) -> list[tuple[int, int]]:
    """``_build_sample_idx``: (doc_idx position, offset) where each sample starts; a sample spans
    seq_length + 1 tokens and the next one starts on its last token."""
    n = (n_epochs * tokens_per_epoch - 1) // seq_length
    out = [(0, 0)]
    pos, off = 0, 0
    while len(out) <= n:
        need = seq_length + 1
        while need != 0:
            have = sizes[di[pos]] - off
            need -= have
            if need <= 0:
                off += need + have - 1
                need = 0
            else:
                pos += 1
                off = 0
        out.append((pos, off))
    return out


def shuffle_idx(first: int, total: int, rng: numpy.random.RandomState) -> list[int]:
    """``_build_shuffle_idx``: [0, first) shuffled, then [first, total) shuffled apart."""
    kind = numpy.uint32 if total < numpy.iinfo(numpy.uint32).max - 1 else numpy.int64
    a = numpy.arange(0, first, dtype=kind)
    rng.shuffle(a)
    if first == total:
        return [int(x) for x in a]
    b = numpy.arange(first, total, dtype=kind)
    rng.shuffle(b)
    return [int(x) for x in a] + [int(x) for x in b]


def gpt_dataset(sizes: list[int], documents: list[int], num_samples: int, seq_length: int, seed: int) -> dict:
    """``GPTDataset`` / ``_build_index_mappings`` over ``documents``: its doc_idx, sample_idx,
    shuffle_idx, epochs, separate_last_epoch and length."""
    tokens = sum(sizes[d] for d in documents)
    n_epochs = epochs(tokens, seq_length, num_samples)
    rng = numpy.random.RandomState(seed=seed)
    separate = False
    before_last = 0
    if n_epochs > 1:
        before_last = ((n_epochs - 1) * tokens - 1) // seq_length
        last = num_samples - before_last
        per_epoch = (tokens - 1) // seq_length
        assert 0 <= last < per_epoch + 1
        separate = last < int(0.80 * per_epoch)
    di = [int(x) for x in doc_idx(documents, n_epochs, rng, separate)]
    si = sample_idx(sizes, di, seq_length, n_epochs, tokens)
    sh = shuffle_idx(before_last if separate else len(si) - 1, len(si) - 1, rng)
    return {"doc_idx": di, "sample_idx": si, "shuffle_idx": sh, "epochs": n_epochs, "separate": separate,
            "tokens": tokens, "len": len(si) - 1}


def pieces(sizes: list[int], ds: dict, idx: int) -> list[tuple[int, int, int]]:
    """``GPTDataset.__getitem__(idx)``: (sequence, first token, end token) of every read, in order."""
    j = ds["shuffle_idx"][idx]
    (f, fo), (last, lo) = ds["sample_idx"][j], ds["sample_idx"][j + 1]
    di = ds["doc_idx"]
    if f == last:
        return [(di[f], fo, lo + 1)]
    out = [(di[f], fo, sizes[di[f]])]
    out += [(di[i], 0, sizes[di[i]]) for i in range(f + 1, last)]
    out.append((di[last], 0, lo + 1))
    return out


def train_dataset(sizes: list[int], splits_string: str, num_samples: int, seq_length: int, seed: int) -> dict:
    """The train GPTDataset of ``_build_train_valid_test_datasets`` (None-free: the split must hold
    sequences)."""
    ends = split(splits_string, len(sizes))
    assert ends[1] > ends[0]
    ds = gpt_dataset(sizes, list(range(ends[0], ends[1])), num_samples, seq_length, seed)
    ds["train"] = (ends[0], ends[1])
    return ds


def blend(all_sizes: list[list[int]], weights: list[float], splits_string: str, num_samples: int, seq_length: int,
          seed: int) -> dict:
    """The train BlendableDataset of a weighted ``--data-path``: its datasets, the samples each was
    built for, its size and its (dataset index, dataset sample index) per position."""
    total = 0.0
    for w in weights:
        total += w
    norm = [w / total for w in weights]
    built = [int(math.ceil(num_samples * w * 1.005)) for w in norm]
    parts = [train_dataset(sz, splits_string, n, seq_length, seed) for sz, n in zip(all_sizes, built)]
    size = sum(p["len"] for p in parts)
    w2 = numpy.array(norm, dtype=numpy.float64)
    w2 /= numpy.sum(w2)
    counts = [0] * len(parts)
    d_index, d_sample = [], []
    for t in range(size):
        at = max(float(t), 1.0)
        best, err = 0, float(w2[0]) * at - float(counts[0])
        for k in range(1, len(parts)):
            e = float(w2[k]) * at - float(counts[k])
            if e > err:
                best, err = k, e
        d_index.append(best)
        d_sample.append(counts[best])
        counts[best] += 1
    return {"parts": parts, "built": built, "size": size, "dataset_index": d_index, "dataset_sample_index": d_sample}


def micro_batches(total: int, consumed: int, micro_batch: int, dp: int, rank: int):
    """``MegatronPretrainingSampler(total, consumed, micro_batch, rank, dp)``: rank's micro-batches."""
    group: list[int] = []
    for idx in range(consumed, total):
        group.append(idx)
        if len(group) == micro_batch * dp:
            yield group[rank * micro_batch:(rank + 1) * micro_batch]
            group = []
