"""A plain-Python reference of Megatron-LM's GPT sample order, written line by line from its source
(NVIDIA/Megatron-LM; megatron-core 0.16.1 holds the same code), for the tests of
:mod:`datacheck.model.megatronorder` and the Megatron plan:

- ``train_range``: ``parse_and_normalize_split`` / ``convert_split_vector_to_split_matrix``
  (megatron/core/datasets/blended_megatron_dataset_config.py, line for line, with utils.py
  ``normalize``) and ``BlendedMegatronDatasetBuilder._build_megatron_dataset_splits``
  (``int(round(b * float(n)))``); ``legacy_train_valid_test_split``: legacy Megatron's
  ``get_train_valid_test_split_``, which megatron-core replaced (its rounding differs);
- ``epochs``: ``GPTDataset._get_num_epochs`` (its while loop);
- ``document_index`` / ``shuffle_index``: ``_build_document_index`` (``numpy.mgrid``) and
  ``_build_shuffle_index`` of megatron/core/datasets/gpt_dataset.py (numpy's RandomState is the
  source of the randomness, so it is used here too);
- ``sample_index``: megatron/core/datasets/helpers.cpp ``build_sample_idx``, its C++ loop as Python;
- ``batches``: ``MegatronPretrainingSampler.__iter__`` (megatron/training/datasets/data_samplers.py);
- ``sample_pieces``: ``GPTDataset._query_document_sample_shuffle_indices`` (which sequences, from
  which offset, how many tokens);
- ``RampupCalculator`` / ``rampup_train_iters`` / ``rampup_steps``: megatron-core's
  ``RampupBatchsizeNumMicroBatchesCalculator`` and training.py's ``update_train_iters`` and loop
  (``--rampup-batch-size``);
- ``blend``: a blend's parts as ``BlendedMegatronDatasetBuilder._build_blended_dataset_splits``
  sizes them (``normalize``, ``_get_size_per_split_per_dataset``), ``BlendedDataset`` and
  helpers.cpp ``build_blending_indices`` (its C++ loop as Python).
"""
from __future__ import annotations

import functools
import re

import numpy


def parse_and_normalize_split(split: str) -> list[float]:
    """megatron/core/datasets/blended_megatron_dataset_config.py ``parse_and_normalize_split``."""
    split_ = list(map(float, re.findall(r"[.0-9]+", split)))
    split_ = split_ + [0.0 for _ in range(3 - len(split_))]
    assert len(split_) == 3
    assert all(map(lambda _: _ >= 0.0, split_))
    return normalize(split_)


def convert_split_vector_to_split_matrix(vector_a: list[float], vector_b: list[float] | None = None):
    """blended_megatron_dataset_config.py ``convert_split_vector_to_split_matrix``: the (begin, end)
    bookends of each split, None for an empty one."""
    if vector_b is None:
        vector_b = vector_a
    expansion_a = functools.reduce(lambda a, b: a + [a[len(a) - 1] + b], [[0], *vector_a])
    expansion_b = functools.reduce(lambda a, b: a + [a[len(a) - 1] + b], [[0], *vector_b])
    bookends_a = list(zip(expansion_a[:-1], expansion_a[1:]))
    bookends_b = list(zip(expansion_b[:-1], expansion_b[1:]))
    matrix = []
    for bookend_a, bookend_b in zip(bookends_a, bookends_b):
        if min(bookend_a[1], bookend_b[1]) <= max(bookend_a[0], bookend_b[0]):
            overlap = None
        else:
            overlap = (max(bookend_a[0], bookend_b[0]), min(bookend_a[1], bookend_b[1]))
        matrix.append(overlap)
    return matrix


def split_train_range(num_elements: int, split: str) -> tuple[int, int] | None:
    """The train indices' [beg, end) of ``BlendedMegatronDatasetBuilder._build_megatron_dataset_splits``
    (``beg = int(round(split[i][0] * float(num_elements)))``, the same for ``end``) over the split
    matrix of ``BlendedMegatronDatasetConfig.__post_init__``; None when the matrix has no train split."""
    split_matrix = convert_split_vector_to_split_matrix(parse_and_normalize_split(split))
    if split_matrix[0] is None:
        return None
    beg = int(round(split_matrix[0][0] * float(num_elements)))
    end = int(round(split_matrix[0][1] * float(num_elements)))
    return beg, end


def train_range(n: int, split: str) -> tuple[int, int]:
    got = split_train_range(n, split)
    assert got is not None, "no train split"
    return got


def legacy_train_valid_test_split(splits_string: str, size: int) -> list[int]:
    """Legacy Megatron's ``get_train_valid_test_split_`` (megatron/legacy/data/dataset_utils.py; the
    GPT dataset of Megatron-DeepSpeed and of Megatron-LM before megatron-core): each split's size
    rounded on its own, then every bookend moved by the rounding surplus. NOT what megatron-core does."""
    splits = []
    if splits_string.find(",") != -1:
        splits = [float(s) for s in splits_string.split(",")]
    elif splits_string.find("/") != -1:
        splits = [float(s) for s in splits_string.split("/")]
    else:
        splits = [float(splits_string)]
    while len(splits) < 3:
        splits.append(0.)
    splits = splits[:3]
    splits_sum = sum(splits)
    assert splits_sum > 0.0
    splits = [split / splits_sum for split in splits]
    splits_index = [0]
    for index, split in enumerate(splits):
        splits_index.append(splits_index[index] + int(round(split * float(size))))
    diff = splits_index[-1] - size
    for index in range(1, len(splits_index)):
        splits_index[index] -= diff
    assert len(splits_index) == 4
    assert splits_index[-1] == size
    return splits_index


def epochs(tokens_per_epoch: int, num_samples: int, seq_length: int, extra: int) -> int:
    num_epochs = 1
    num_tokens = tokens_per_epoch
    requested = num_samples * seq_length + extra
    while num_tokens < requested:
        num_epochs += 1
        num_tokens += tokens_per_epoch
    return num_epochs


def document_index(documents: list[int], num_epochs: int, rng: numpy.random.RandomState, separate: bool):
    if not separate or num_epochs == 1:
        di = numpy.mgrid[0:num_epochs, 0:len(documents)][1]
        di[:] = documents
        di = di.reshape(-1).astype(numpy.int32)
        rng.shuffle(di)
        return di
    first = document_index(documents, num_epochs - 1, rng, False)
    last = document_index(documents, 1, rng, False)
    return numpy.concatenate((first, last))


def sample_index(sizes: list[int], doc_idx: list[int], seq_length: int, num_epochs: int, tokens_per_epoch: int,
                 extra: int) -> list[tuple[int, int]]:
    num_samples = (num_epochs * tokens_per_epoch - extra) // seq_length
    out = [(0, 0)]
    di, off = 0, 0
    while len(out) <= num_samples:
        remaining = seq_length + extra
        while remaining != 0:
            length = sizes[doc_idx[di]] - off
            remaining -= length
            if remaining <= 0:
                off += remaining + length - extra
                remaining = 0
            else:
                if di == len(doc_idx) - 1:
                    assert len(out) == num_samples
                    off = sizes[doc_idx[di]] - extra
                    break
                di += 1
                off = 0
        out.append((di, off))
    return out


def shuffle_index(num_samples: int, total: int, rng: numpy.random.RandomState):
    dtype = numpy.uint32 if total < numpy.iinfo(numpy.uint32).max - 1 else numpy.int64
    first = numpy.arange(0, num_samples, 1, dtype=dtype)
    rng.shuffle(first)
    if num_samples == total:
        return first
    last = numpy.arange(num_samples, total, 1, dtype=dtype)
    rng.shuffle(last)
    return numpy.concatenate((first, last))


def order(sizes: list[int], seq_length: int, seed: int, split: str, extra: int, num_samples: int):
    """(document index, sample index, shuffle index, epochs, train range) as GPTDataset builds them
    (``_build_document_sample_shuffle_indices``)."""
    beg, end = train_range(len(sizes), split)
    documents = list(range(beg, end))
    tokens = sum(sizes[d] for d in documents)
    n_epochs = epochs(tokens, num_samples, seq_length, extra)
    separate = False
    sans_final = 0
    if n_epochs > 1:
        sans_final = ((n_epochs - 1) * tokens - extra) // seq_length
        from_final = num_samples - sans_final
        per_epoch = (tokens - extra) // seq_length
        separate = from_final < int(0.80 * per_epoch)
    rng = numpy.random.RandomState(seed)
    di = [int(x) for x in document_index(documents, n_epochs, rng, separate)]
    si = sample_index(sizes, di, seq_length, n_epochs, tokens, extra)
    n = len(si) - 1
    sh = [int(x) for x in shuffle_index(sans_final if separate else n, n, rng)]
    return di, si, sh, n_epochs, (beg, end)


def sample_pieces(sizes: list[int], di: list[int], si: list[tuple[int, int]], sh: list[int], idx: int,
                  extra: int) -> list[tuple[int, int, int]]:
    """(sequence, first token, end token) of each part dataset index ``idx`` reads."""
    j = sh[idx]
    b, bo = si[j]
    e, eo = si[j + 1]
    if b == e:
        return [(di[b], bo, eo - bo + extra + bo)]
    out = []
    for i in range(b, e + 1):
        offset = 0 if i > b else bo
        end = sizes[di[i]] if i < e else eo + extra
        out.append((di[i], offset, end))
    return out


def batches(total_samples: int, micro_batch: int, dp: int, rank: int):
    """``MegatronPretrainingSampler(total_samples, 0, micro_batch, rank, dp)``: the micro-batches of ``rank``."""
    batch = []
    for idx in range(0, total_samples):
        batch.append(idx)
        if len(batch) == micro_batch * dp:
            yield batch[rank * micro_batch:rank * micro_batch + micro_batch]
            batch = []


def step_reads(sizes: list[int], seq_length: int, seed: int, split: str, extra: int, micro_batch: int, dp: int,
               grad_accum: int, num_samples: int, step: int) -> list[tuple[int, int, int, int, int, int]]:
    """(rank, micro-batch, dataset index, sequence, first token, end token) of every part of optimizer
    step ``step``, rank by rank, micro-batch by micro-batch."""
    di, si, sh, _, _ = order(sizes, seq_length, seed, split, extra, num_samples)
    out = []
    for rank in range(dp):
        for k, mb in enumerate(batches(len(si) - 1, micro_batch, dp, rank)):
            if k // grad_accum != step:
                continue
            for idx in mb:
                for seq, a, b in sample_pieces(sizes, di, si, sh, idx, extra):
                    out.append((rank, k % grad_accum, idx, seq, a, b))
    return out


def cyclic_batches(total_samples: int, micro_batch: int, dp: int, rank: int, n: int) -> list[list[int]]:
    """The first ``n`` micro-batches of ``rank`` under ``MegatronPretrainingRandomSampler(data_sharding=True)``
    iterated again and again as training.py's ``cyclic_iter`` does, its ``consumed_samples`` carried
    from pass to pass (torch is imported)."""
    import torch

    consumed = 0
    out: list[list[int]] = []
    mbdp = micro_batch * dp
    last_batch_size = total_samples % mbdp
    while len(out) < n:
        active_total_samples = total_samples - last_batch_size
        epoch = consumed // active_total_samples
        current_epoch_samples = consumed % active_total_samples
        assert current_epoch_samples % mbdp == 0
        bucket_size = (total_samples // mbdp) * micro_batch
        bucket_offset = current_epoch_samples // dp
        start_idx = rank * bucket_size
        g = torch.Generator()
        g.manual_seed(epoch)
        random_idx = torch.randperm(bucket_size, generator=g).tolist()
        idx_range = [start_idx + x for x in random_idx[bucket_offset:]]
        batch: list[int] = []
        for idx in idx_range:
            batch.append(idx)
            if len(batch) == micro_batch:
                consumed += mbdp
                out.append(batch)
                batch = []
    return out[:n]


# --- blends (megatron/core/datasets/blended_megatron_dataset_builder.py, blended_dataset.py, helpers.cpp) ---

def normalize(weights):
    """utils.py ``normalize``."""
    w = numpy.array(weights, dtype=numpy.float64)
    w_sum = numpy.sum(w)
    return (w / w_sum).tolist()


def size_per_dataset(normalized_weights: list[float], target_size: int, surplus: float = 0.0) -> list[int]:
    """``_get_size_per_split_per_dataset`` for the train split."""
    import math

    return [int(math.ceil(math.ceil(target_size * weight) * (1 + surplus))) for weight in normalized_weights]


def blending_indices(weights: list[float], size: int) -> tuple[list[int], list[int]]:
    """helpers.cpp ``build_blending_indices``, its C++ loop as Python."""
    current_samples = [0 for _ in weights]
    dataset_index, dataset_sample_index = [], []
    for sample_idx in range(size):
        sample_idx_double = max(float(sample_idx), 1.0)
        max_error_index = 0
        max_error = weights[0] * sample_idx_double - float(current_samples[0])
        for dataset_idx in range(1, len(weights)):
            error = weights[dataset_idx] * sample_idx_double - float(current_samples[dataset_idx])
            if error > max_error:
                max_error = error
                max_error_index = dataset_idx
        dataset_index.append(max_error_index)
        dataset_sample_index.append(current_samples[max_error_index])
        current_samples[max_error_index] += 1
    return dataset_index, dataset_sample_index


def blend(sizes: list[list[int]], weights: list[float] | None, seq_length: int, seed: int, split: str, extra: int,
          num_samples: int, surplus: float = 0.005):
    """The train BlendedDataset of ``_build_blended_dataset_splits`` (one distribution): per prefix
    its GPTDataset's (document index, sample index, shuffle index), and the blend's (dataset index,
    dataset sample index)."""
    if weights is not None:
        weights = normalize(weights)
        target = size_per_dataset(weights, num_samples)
        buffer = size_per_dataset(weights, num_samples, surplus)
        parts = [order(sz, seq_length, seed, split, extra, n)[:3] for sz, n in zip(sizes, buffer)]
        size = sum(target)
        weights_i = normalize(weights)  # BlendedDataset normalises again
    else:
        parts = []
        for sz in sizes:  # num_samples=None: one epoch, nothing shuffled apart
            beg, end = train_range(len(sz), split)
            documents = list(range(beg, end))
            tokens = sum(sz[d] for d in documents)
            rng = numpy.random.RandomState(seed)
            di = [int(x) for x in document_index(documents, 1, rng, False)]
            si = sample_index(sz, di, seq_length, 1, tokens, extra)
            sh = [int(x) for x in shuffle_index(len(si) - 1, len(si) - 1, rng)]
            parts.append((di, si, sh))
        lengths = [len(p[1]) - 1 for p in parts]
        size = min(num_samples, sum(lengths))
        weights_i = normalize(lengths)
    ds, dsi = blending_indices(weights_i, size)
    return parts, ds, dsi


def blend_step_reads(sizes: list[list[int]], weights: list[float] | None, seq_length: int, seed: int, split: str,
                     extra: int, micro_batch: int, dp: int, grad_accum: int, num_samples: int,
                     step: int) -> list[tuple[int, int, int, int, int, int, int]]:
    """(rank, micro-batch, blend index, prefix, sequence, first token, end token) of every part of
    optimizer step ``step`` of a blended run (MegatronPretrainingSampler over the BlendedDataset)."""
    parts, ds, dsi = blend(sizes, weights, seq_length, seed, split, extra, num_samples)
    out = []
    for rank in range(dp):
        for k, mb in enumerate(batches(len(ds), micro_batch, dp, rank)):
            if k // grad_accum != step:
                continue
            for idx in mb:
                d = ds[idx]
                di, si, sh = parts[d]
                for seq, a, b in sample_pieces(sizes[d], di, si, sh, dsi[idx], extra):
                    out.append((rank, k % grad_accum, idx, d, seq, a, b))
    return out


# --- batch-size ramp-up (megatron/core/num_microbatches_calculator.py, megatron/training/training.py) ---

class RampupCalculator:
    """``RampupBatchsizeNumMicroBatchesCalculator`` (megatron-core 0.16.1), its ``__init__`` and
    ``update`` line by line (``decrease_batch_size_if_needed=False``; logging left out)."""

    def __init__(self, global_batch_size: int, micro_batch_size: int, data_parallel_size: int,
                 start_global_batch_size: int, batch_size_increment: int, ramup_samples: int):
        assert global_batch_size > 0
        assert start_global_batch_size > 0
        assert batch_size_increment > 0
        assert ramup_samples >= 0
        self.global_batch_size = global_batch_size
        self.micro_batch_size = micro_batch_size
        self.data_parallel_size = data_parallel_size
        self.start_global_batch_size = start_global_batch_size
        self.batch_size_increment = batch_size_increment
        self.ramup_samples = ramup_samples
        self.micro_batch_times_data_parallel_size = self.micro_batch_size * self.data_parallel_size
        assert self.micro_batch_times_data_parallel_size > 0
        self.current_global_batch_size = None
        diff_batch_size = self.global_batch_size - self.start_global_batch_size
        assert diff_batch_size >= 0
        assert diff_batch_size % batch_size_increment == 0
        num_increments = diff_batch_size // self.batch_size_increment
        self.rampup_samples_per_increment = self.ramup_samples / num_increments
        self.update(0, consistency_check=False)

    def update(self, consumed_samples: int, consistency_check: bool) -> None:
        if consumed_samples > self.ramup_samples:
            self.current_global_batch_size = self.global_batch_size
        else:
            steps = int(consumed_samples / self.rampup_samples_per_increment)
            self.current_global_batch_size = self.start_global_batch_size + steps * self.batch_size_increment
            assert self.current_global_batch_size <= self.global_batch_size
        if consistency_check:
            assert self.current_global_batch_size % self.micro_batch_times_data_parallel_size == 0
        self.current_running_global_batch_size = self.current_global_batch_size
        self.num_micro_batches = self.current_running_global_batch_size // self.micro_batch_times_data_parallel_size


def rampup_train_iters(calc: RampupCalculator, train_samples: int, rampup_samples: int) -> int:
    """training.py ``update_train_iters`` with ``--train-samples`` and ``--rampup-batch-size``."""
    iterations = 0
    consumed_samples = 0
    while consumed_samples <= int(rampup_samples):
        calc.update(consumed_samples, consistency_check=False)
        consumed_samples += calc.current_global_batch_size
        iterations += 1
    calc.update(0, consistency_check=False)
    iterations += (train_samples - consumed_samples) // calc.global_batch_size
    return iterations


def rampup_steps(calc: RampupCalculator, train_iters: int) -> list[tuple[int, int]]:
    """training.py ``train``'s loop: per iteration (samples consumed before it, its global batch):
    ``update_num_microbatches(args.consumed_train_samples, consistency_check=True)`` at its start,
    ``args.consumed_train_samples += dp x micro_batch x get_num_microbatches()`` after it."""
    consumed_train_samples = 0
    out = []
    for _ in range(train_iters):
        calc.update(consumed_train_samples, consistency_check=True)
        batch_size = calc.data_parallel_size * calc.micro_batch_size * calc.num_micro_batches
        out.append((consumed_train_samples, batch_size))
        consumed_train_samples += batch_size
    return out


def rampup_step_batches(total_samples: int, micro_batch: int, dp: int, calc: RampupCalculator,
                        train_iters: int) -> list[list[tuple[int, int, list[int]]]]:
    """Per iteration, (rank, micro-batch, dataset indices) of each micro-batch it pulls from
    ``MegatronPretrainingSampler`` (every rank's sampler yields its slice of each run of micro_batch x
    dp indices; an iteration pulls ``get_num_microbatches()`` of them), rank by rank; the iterations
    the samples last for."""
    per_rank = [list(batches(total_samples, micro_batch, dp, r)) for r in range(dp)]
    out = []
    pulled = 0
    for _, gbs in rampup_steps(calc, train_iters):
        n = gbs // (micro_batch * dp)
        if pulled + n > len(per_rank[0]):  # the sampler runs out: the data loader stops the run there
            break
        out.append([(r, m, per_rank[r][pulled + m]) for r in range(dp) for m in range(n)])
        pulled += n
    return out
