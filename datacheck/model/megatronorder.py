"""The sample order of a Megatron-LM GPT run, simulated from the indexed dataset's sequence lengths
(numpy only; no data is read here, Megatron is never imported).

Megatron-LM does not hand documents to the model: ``GPTDataset`` (megatron/core/datasets/gpt_dataset.py)
concatenates the sequences of its split, repeated for as many epochs as the run needs, and cuts
samples of ``seq_length`` (+ 1) tokens across them; ``MegatronPretrainingSampler``
(megatron/training/datasets/data_samplers.py; megatron/legacy/data/data_samplers.py before) hands out
those samples in order. Each array below is built as Megatron builds it:

1. the split (``BlendedMegatronDatasetBuilder._build_megatron_dataset_splits``,
   blended_megatron_dataset_builder.py, with ``parse_and_normalize_split`` and
   ``convert_split_vector_to_split_matrix`` of blended_megatron_dataset_config.py): the train
   sequences are ``[round(0 * n), round(w0 / sum(w) * n))`` of the ``n`` sequences of the ``.idx``
   (``GPTDataset.numel_low_level_dataset``: GPT splits by sequence, not by document);
2. the epochs (``GPTDataset._get_num_epochs``): the fewest ``e`` with ``e * tokens_per_epoch >=
   num_samples * seq_length + add_extra_token``, ``num_samples`` the run's train samples
   (``train_iters x global_batch_size`` or ``--train-samples``,
   megatron/training/training.py ``get_train_valid_test_num_samples``), and whether the last epoch
   is shuffled apart (``separate_final_epoch``: its samples below 80% of an epoch's);
3. the document index (``_build_document_index``): the split's sequence ids repeated ``e`` times,
   as int32, shuffled in place by ``numpy.random.RandomState(seed)`` (the first ``e - 1`` epochs and
   the last shuffled apart when ``separate_final_epoch``);
4. the sample index (helpers.cpp ``build_sample_idx``, train split: ``drop_last_partial_sequence``):
   ``(num_epochs * tokens_per_epoch - add_extra_token) // seq_length`` samples; sample ``i`` starts at
   token ``i * seq_length`` of the concatenated document index and reads ``seq_length +
   add_extra_token`` tokens. Row ``i`` (``i >= 1``) of Megatron's ``sample_idx`` is ``(k, i *
   seq_length - start of entry k)``, ``k`` the entry that holds token ``i * seq_length +
   add_extra_token - 1`` (the last token of sample ``i - 1``); row 0 is ``(0, 0)``. Computed here
   with one ``searchsorted`` over the cumulative lengths instead of the C++ loop;
5. the shuffle index (``_build_shuffle_index``): ``arange`` of the samples (uint32, int64 from
   2**32 - 1), shuffled by the same RandomState after the document index (when
   ``separate_final_epoch``: the samples before the last epoch and those of it shuffled apart);
6. the batches (``MegatronPretrainingSampler.__iter__``): micro-step ``k`` takes dataset indices
   ``[k * mbs * dp, (k + 1) * mbs * dp)``, rank ``r`` the slice ``[r * mbs, (r + 1) * mbs)`` of it;
   optimizer step ``s`` is micro-steps ``s * grad_accum .. (s + 1) * grad_accum - 1``, i.e. the
   global batch ``[s * gbs, (s + 1) * gbs)`` with ``gbs = mbs * dp * grad_accum``. Dataset index
   ``idx`` is sample ``shuffle_index[idx]`` (``GPTDataset._query_document_sample_shuffle_indices``).
   With ``--dataloader-type cyclic`` (``MegatronPretrainingRandomSampler`` with its default
   ``data_sharding``, iterated again and again by training.py's ``cyclic_iter``): each pass ``e`` over
   the data gives rank ``r`` the bucket ``[r * bucket, (r + 1) * bucket)``, ``bucket = (len // (mbs *
   dp)) * mbs``, in the order of ``torch.randperm(bucket, generator=torch.Generator().manual_seed(e))``,
   ``mbs`` at a time; micro-step ``k`` is micro-batch ``k % (bucket // mbs)`` of pass ``k // (bucket //
   mbs)`` (torch is imported for it, lazily);
7. a batch-size ramp-up (``--rampup-batch-size START INCR SAMPLES`` with ``--train-samples``;
   :class:`Rampup`): training.py sets each iteration's global batch from the samples consumed before
   it (megatron/core/num_microbatches_calculator.py ``RampupBatchsizeNumMicroBatchesCalculator``:
   ``START + int(consumed / (SAMPLES / increments)) * INCR`` while ``consumed <= SAMPLES``, then
   ``gbs``), so optimizer step ``s`` is the global batch ``[S(s), S(s) + batch(S(s)))``, ``S(s)`` the
   sum of the earlier steps' batches, its micro-batches per rank ``batch / (mbs * dp)``; the run's
   steps are training.py's ``update_train_iters``.

A blend (``--data-path 0.3 A 0.7 B``; :class:`BlendedOrder`, :func:`build_blend`) is megatron-core's
``BlendedMegatronDatasetBuilder._build_blended_dataset_splits`` and ``BlendedDataset``: one
GPTDataset per prefix as above (the same seed), sized by :func:`blend_sizes` (weighted) or one pass
(unweighted), and the blend's position ``idx`` is sample ``dataset_sample_index[idx]`` of prefix
``dataset_index[idx]`` (helpers.cpp ``build_blending_indices``, :func:`blending_indices`); the
samplers hand out blend positions as they hand out a GPTDataset's indices.

**Lineage** (``implementation``; :data:`IMPLEMENTATIONS`): the steps above are megatron-core's
(``megatron-core``, the default). ``legacy`` is the GPT data path megatron-core replaced: Megatron-LM
before megatron-core and its forks Megatron-DeepSpeed / BigScience (bigscience-workshop/Megatron-DeepSpeed
megatron/data/gpt_dataset.py @ 20c48380d94beb67e6c63594a5ca0477482128c1, dataset_utils.py @
006c4e96556cd241f43e91793e8b7fab5ba0546b, data_samplers.py @ 019ed7c95b1faa9ea3c00df7628f986329d41c6c;
helpers.cpp as in deep-spin/Megatron-DeepSpeed @ 8d94512766dff5bfcb1ff5cc777d56775f76157c). Read side
by side, the two differ only in:

- the split (dataset_utils.py ``get_train_valid_test_split_``; :func:`legacy_train_range`): the
  weights are the comma- (else slash-) separated words, each part's size rounded on its own and
  every bookend after the first moved back by the rounding surplus, so 7 sequences in thirds give
  train ``[0, 3)`` where megatron-core gives ``[0, 2)``;
- the blend (dataset_utils.py ``get_datasets_weights_and_num_samples``, blendable_dataset.py
  ``BlendableDataset``; :func:`legacy_blend_sizes`): weights normalised by their Python sum, each
  dataset built for ``ceil(samples * w * 1.005)`` samples (a fixed factor; megatron-core's
  ``ceil(ceil(samples * w) * (1 + surplus))``), the blend as long as its datasets together (megatron-core:
  ``sum(ceil(samples * w))``), weights only (an unweighted ``--data-path A B`` fails there), and a
  single weighted prefix is a blend of one (megatron-core builds it as a plain GPTDataset). Later
  legacy copies (NVIDIA Megatron-LM's megatron/data/blendable_dataset.py @
  01b5adee4494a911405c60e61aef3a9dec5285f9, ``BlendableDataset(datasets, weights, size)``) pass the
  blend a size instead; the positions are the same greedy order either way, only the blend's length
  differs, which moves the cyclic sampler's buckets (not simulated: BigScience's length is used);
- a sample always reads ``seq_length + 1`` tokens (no ``add_extra_token_to_sequence``).

The rest is the same arithmetic: ``_num_epochs`` (its loop stops at the first ``e`` with ``(e *
tokens - 1) // seq_length >= num_samples``: step 2), ``separate_last_epoch`` at 80 % of
``(tokens - 1) // seq_length`` (step 2), ``_build_doc_idx`` (``mgrid`` of the epochs, int32, one
``RandomState(seed)`` shuffle, the last epoch apart: step 3), helpers.cpp ``build_sample_idx``
(``(epochs * tokens - 1) // seq_length`` samples, the same walk: step 4), ``_build_shuffle_idx``
(step 5, after the document index on the same RandomState), ``GPTDataset.__getitem__`` (the same
pieces) and ``MegatronPretrainingSampler`` / ``MegatronPretrainingRandomSampler`` (step 6; the
``--rampup-batch-size`` calculator of megatron/microbatches.py: step 7).
tests/helpers/megatronlegacyref.py holds a plain-Python reference written from that source.

A sample's **pieces** are the ``(sequence, token start, token end)`` ranges it reads, in order: the
first from its start offset, whole sequences between, the last up to its end offset +
add_extra_token (the token whose only role is the last label), as ``_query_document_sample_shuffle_indices``
reads them; a zero-length sequence inside a sample is a piece of 0 tokens, as Megatron lists it.
"""
from __future__ import annotations

import bisect
import functools
import math
import os
import re
import resource
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from datacheck.model.errors import UsageError
from datacheck.model.torchdep import require_torch

__all__ = ["MegatronOrder", "BlendedOrder", "parse_data_path", "blend_sizes", "blending_indices", "build_blend",
           "MID_LEVEL_DATASET_SURPLUS", "uses_megatron_loader", "train_range", "num_epochs", "document_index", "sample_index", "shuffle_index",
           "build_order", "SEPARATE_FINAL_EPOCH_THRESHOLD", "index_bytes", "kept_bytes", "memory_limit",
           "Rampup", "rampup", "ramp_batch", "MAX_RAMP_INCREMENTS", "IMPLEMENTATIONS", "legacy_train_range", "legacy_split_weights",
           "legacy_blend_sizes", "LEGACY_BLEND_FACTOR", "lineage_words"]

#: ``_build_document_sample_shuffle_indices``: the last epoch is shuffled apart when it would give
#: fewer than this fraction of an epoch's samples (``threshold = 0.80``)
SEPARATE_FINAL_EPOCH_THRESHOLD = 0.80
#: ``BlendedMegatronDatasetConfig.mid_level_dataset_surplus`` (megatron-core 0.16.1): each dataset of
#: a weighted blend is built with this share of samples above its target
MID_LEVEL_DATASET_SURPLUS = 0.005
#: the lineages simulated (``[megatron] implementation``): megatron-core's GPT data path, or the one it
#: replaced (Megatron-LM before megatron-core, Megatron-DeepSpeed / BigScience): module docstring
IMPLEMENTATIONS = ("megatron-core", "legacy")
#: legacy ``get_datasets_weights_and_num_samples``: each dataset of a blend is built for
#: ``ceil(samples * weight * 1.005)`` samples ("Add 0.5% (the 1.005 factor)")
LEGACY_BLEND_FACTOR = 1.005
#: the blending indices are computed and kept in chunks of ``2**bits`` positions (about 10 MB each)
_BLEND_CHUNK_BITS = 20


def uses_megatron_loader(formats: list[str | None], loader: str) -> bool:
    """Whether a run over shards of ``formats`` reads them with Megatron's loader: ``[batch] loader``
    ``megatron``, or ``auto`` over shards that are all Megatron ``.bin``/``.idx`` pairs (format
    ``megatron``; none is not all)."""
    return loader == "megatron" or (loader == "auto" and bool(formats) and all(f == "megatron" for f in formats))


def train_range(n_sequences: int, split: str) -> tuple[int, int]:
    """``[begin, end)`` of the train sequences under Megatron's ``--split`` ``split`` over
    ``n_sequences`` sequences: ``parse_and_normalize_split`` (every run of digits and dots a weight,
    padded with zeros to 3, divided by their float64 sum), ``convert_split_vector_to_split_matrix``
    (cumulative bookends) and ``int(round(bookend * float(n)))`` as
    ``_build_megatron_dataset_splits`` rounds them.

    Raises:
        UsageError: more than 3 weights, none, a negative or zero sum, or a train weight of 0 (the
            run has no train split).
    """
    weights = [float(x) for x in re.findall(r"[.0-9]+", split)]
    if not weights or len(weights) > 3 or sum(weights) <= 0:
        raise UsageError(f"[megatron] split {split!r}: expected 1 to 3 weights (train, valid, test) with a "
                         "positive sum, e.g. \"969, 30, 1\"")
    weights += [0.0] * (3 - len(weights))
    w = np.array(weights, dtype=np.float64)
    norm = (w / np.sum(w)).tolist()
    bookends = functools.reduce(lambda a, b: a + [a[len(a) - 1] + b], [[0], *norm])
    lo, hi = bookends[0], bookends[1]
    if hi <= lo:
        raise UsageError(f"[megatron] split {split!r} gives the train split no sequence (its weight is 0): "
                         "Megatron builds no train dataset")
    return int(round(lo * float(n_sequences))), int(round(hi * float(n_sequences)))


def lineage_words(implementation: str) -> str:
    """The lineage in the words plan and trace print: ``megatron-core`` or ``legacy Megatron-LM /
    Megatron-DeepSpeed`` (the GPT data path before megatron-core)."""
    return "legacy Megatron-LM / Megatron-DeepSpeed" if implementation == "legacy" else "megatron-core"


def legacy_split_weights(split: str) -> list[float]:
    """The three weights legacy ``get_train_valid_test_split_`` reads from ``--split`` (see
    :func:`legacy_train_range`), not yet normalised.

    Raises:
        UsageError: a word ``float`` cannot read, or a sum not above 0 (legacy asserts it).
    """
    sep = "," if "," in split else "/" if "/" in split else None
    words = split.split(sep) if sep else [split]
    try:
        w = [float(x) for x in words]
    except ValueError:
        raise UsageError(f"[megatron] split {split!r}: legacy Megatron reads each word between commas (or slashes) "
                         "with float(); give the run's --split, e.g. \"949,50,1\"") from None
    w = (w + [0.0, 0.0, 0.0])[:3]
    if not sum(w) > 0:
        raise UsageError(f"[megatron] split {split!r}: legacy Megatron asserts the weights sum above 0")
    return w


def legacy_train_range(n_sequences: int, split: str) -> tuple[int, int]:
    """``[begin, end)`` of the train sequences under ``--split split`` as the legacy lineage cuts them
    (bigscience-workshop/Megatron-DeepSpeed megatron/data/dataset_utils.py
    ``get_train_valid_test_split_`` @ 006c4e96556cd241f43e91793e8b7fab5ba0546b): the words between
    commas (else slashes; else the whole string) are the weights, each read by Python's ``float``,
    padded with zeros to 3 and cut to 3, divided by their sum; each part's size is
    ``int(round(w * float(n)))`` on its own, the bookends are their running sums, and every bookend but
    the first is then moved back by (last bookend - ``n``). Integers only (no float bookends).

    Raises:
        UsageError: a word that is no number for ``float``, a sum not above 0 (legacy asserts it), or
            an empty train range (legacy builds no train dataset then).
    """
    w = legacy_split_weights(split)
    total = sum(w)
    bookends = [0]
    for x in w:
        bookends.append(bookends[-1] + int(round(x / total * float(n_sequences))))
    surplus = bookends[-1] - n_sequences
    bookends = [bookends[0]] + [b - surplus for b in bookends[1:]]
    lo, hi = bookends[0], bookends[1]
    if hi <= lo:
        raise UsageError(f"[megatron] split {split!r} over {n_sequences} sequences gives the train split no sequence "
                         f"under legacy Megatron's rounding ([{lo}, {hi})): it builds no train dataset")
    return lo, hi


def num_epochs(tokens_per_epoch: int, num_samples: int, seq_length: int, extra: int) -> int:
    """``GPTDataset._get_num_epochs``: the fewest epochs whose tokens cover ``num_samples *
    seq_length + extra`` (at least 1)."""
    need = num_samples * seq_length + extra
    return max(1, -(-need // tokens_per_epoch))


def _separate_final_epoch(epochs: int, tokens_per_epoch: int, num_samples: int, seq_length: int,
                          extra: int) -> tuple[bool, int]:
    """(``separate_final_epoch``, ``num_samples_sans_final_epoch``) of
    ``_build_document_sample_shuffle_indices``."""
    if epochs == 1:
        return False, 0
    sans_final = ((epochs - 1) * tokens_per_epoch - extra) // seq_length
    from_final = num_samples - sans_final
    per_epoch = (tokens_per_epoch - extra) // seq_length
    return from_final < int(SEPARATE_FINAL_EPOCH_THRESHOLD * per_epoch), sans_final


def document_index(documents: np.ndarray, epochs: int, rng: np.random.RandomState,
                   separate_final_epoch: bool) -> np.ndarray:
    """``_build_document_index``: ``documents`` (the split's sequence ids) repeated ``epochs`` times,
    int32, shuffled in place by ``rng`` (with ``separate_final_epoch``: the first ``epochs - 1``
    epochs, then the last, each shuffled apart, in that order of draws)."""
    if not separate_final_epoch or epochs == 1:
        out = np.tile(np.asarray(documents), epochs).astype(np.int32)
        rng.shuffle(out)
        return out
    first = document_index(documents, epochs - 1, rng, False)
    last = document_index(documents, 1, rng, False)
    return np.concatenate((first, last))


def _entry_starts(sizes: np.ndarray, doc_index: np.ndarray) -> np.ndarray:
    """Token position of each document-index entry in the concatenated stream (int64, len + 1)."""
    cum = np.zeros(len(doc_index) + 1, dtype=np.int64)
    np.cumsum(np.asarray(sizes)[doc_index].astype(np.int64), out=cum[1:])
    return cum


def _bounds(cum: np.ndarray, rows: np.ndarray, seq_length: int, extra: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``rows`` of the sample index as (entry, offset) int64 arrays (module docstring, step 4)."""
    rows = np.asarray(rows, dtype=np.int64)
    pos = rows * seq_length
    entry = np.searchsorted(cum, pos + extra - 1, side="right") - 1
    entry = np.where(rows == 0, 0, entry)
    return entry, np.where(rows == 0, 0, pos - cum[entry])


def sample_index(sizes: np.ndarray, doc_index: np.ndarray, seq_length: int, epochs: int, tokens_per_epoch: int,
                 extra: int) -> np.ndarray:
    """helpers.cpp ``build_sample_idx`` with ``drop_last_partial_sequence`` (the train split): int64
    ``(num_samples + 1, 2)``, row ``i`` = (document-index entry, token offset in it) where sample ``i``
    starts (module docstring, step 4).

    Args:
        sizes: token count of every sequence of the indexed dataset (int, ``n_sequences``).
        doc_index: the document index (sequence ids, :func:`document_index`).
        seq_length: tokens per sample (> 1).
        epochs, tokens_per_epoch: as :func:`num_epochs` took them.
        extra: ``add_extra_token_to_sequence`` as 0 or 1.
    """
    n = (epochs * tokens_per_epoch - extra) // seq_length
    entry, off = _bounds(_entry_starts(sizes, doc_index), np.arange(n + 1, dtype=np.int64), seq_length, extra)
    return np.stack([entry, off], axis=1)


def shuffle_index(num_samples: int, total_size: int, rng: np.random.RandomState) -> np.ndarray:
    """``_build_shuffle_index``: ``arange(num_samples)`` shuffled, then (when ``total_size`` is larger)
    ``arange(num_samples, total_size)`` shuffled apart; uint32, int64 from ``2**32 - 2`` samples."""
    dtype = np.uint32 if total_size < np.iinfo(np.uint32).max - 1 else np.int64
    first = np.arange(0, num_samples, 1, dtype=dtype)
    rng.shuffle(first)
    if num_samples == total_size:
        return first
    last = np.arange(num_samples, total_size, 1, dtype=dtype)
    rng.shuffle(last)
    return np.concatenate((first, last))


#: the most batch-size increments of a ramp simulated (each is a segment of :class:`Rampup`)
MAX_RAMP_INCREMENTS = 1 << 16


def ramp_batch(consumed: int, start: int, increment: int, samples: int, per_increment: float,
               global_batch: int) -> int:
    """The global batch of the iteration that starts after ``consumed`` samples under
    ``--rampup-batch-size start increment samples`` (megatron/core/num_microbatches_calculator.py
    ``RampupBatchsizeNumMicroBatchesCalculator.update``, its float arithmetic kept):
    ``global_batch`` once ``consumed > samples``, else ``start + int(consumed / per_increment) *
    increment``, ``per_increment = samples / ((global_batch - start) // increment)`` (a float)."""
    if consumed > samples:
        return global_batch
    return start + int(consumed / per_increment) * increment


@dataclass(frozen=True)
class Rampup:
    """A run's batch-size ramp-up (Megatron's ``--rampup-batch-size START INCR SAMPLES``;
    :func:`rampup`): the global batch of an iteration is :func:`ramp_batch` of the samples consumed
    before it (training.py ``train``: ``update_num_microbatches(args.consumed_train_samples)`` at the
    start of every iteration, ``consumed_train_samples += `` its global batch after it), so optimizer
    step ``s`` reads the samples ``[S(s), S(s) + batch(S(s)))`` with ``S(s)`` the sum of the earlier
    steps' global batches, not ``s x global batch``.

    Attributes:
        start, increment, samples: the three numbers of ``--rampup-batch-size``.
        global_batch: the global batch after the ramp (``--global-batch-size``).
        per_increment: ``samples / number of increments`` (float64, as Megatron divides).
        segments: ``(first step, samples consumed before it, global batch)`` of each run of steps
            with one global batch, in step order; the last holds ``global_batch`` for every later step.
    """

    start: int
    increment: int
    samples: int
    global_batch: int
    per_increment: float
    segments: tuple[tuple[int, int, int], ...]
    _firsts: tuple[int, ...] = field(default=(), repr=False, compare=False)
    _starts: tuple[int, ...] = field(default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_firsts", tuple(s for s, _, _ in self.segments))
        object.__setattr__(self, "_starts", tuple(c for _, c, _ in self.segments))

    def batch_at(self, consumed: int) -> int:
        """The global batch of the iteration that starts after ``consumed`` samples (:func:`ramp_batch`)."""
        return ramp_batch(consumed, self.start, self.increment, self.samples, self.per_increment, self.global_batch)

    def _segment(self, step: int) -> tuple[int, int, int]:
        i = bisect.bisect_right(self._firsts, step) - 1
        return self.segments[max(i, 0)]

    def consumed_before(self, step: int) -> int:
        """Samples consumed before optimizer step ``step`` (0-based) of a run from its start."""
        s0, c0, g = self._segment(step)
        return c0 + (step - s0) * g

    def step_at(self, consumed: int) -> int | None:
        """The step a run from its start begins after exactly ``consumed`` samples; None when no step does."""
        i = bisect.bisect_right(self._starts, consumed) - 1
        if i < 0:
            return None
        s0, c0, g = self.segments[i]
        if (consumed - c0) % g:
            return None
        k = s0 + (consumed - c0) // g
        return k if i + 1 == len(self.segments) or k < self.segments[i + 1][0] else None

    def advance(self, consumed: int, n: int) -> int | None:
        """The samples consumed ``n`` iterations after (``n < 0``: before) a point where ``consumed``
        had been consumed, each iteration taking :meth:`batch_at` of where it starts; None when no
        point ``-n`` iterations back reaches ``consumed`` (the ramp cannot have led there)."""
        k = self.step_at(consumed)
        if k is not None and k + n >= 0:
            return self.consumed_before(k + n)
        c, g_max = consumed, self.global_batch
        while n > 0:  # off the run's own schedule (a run resumed under other batch facts): walk it
            if c > self.samples:
                return c + n * g_max
            g = self.batch_at(c)
            t = min(n, _same_batch_steps(self, c, g))
            c, n = c + t * g, n - t
        sizes = range(self.start, g_max + 1, self.increment)
        while n < 0:
            if c - g_max > self.samples:  # every earlier point past the ramp took the whole global batch
                t = min(-n, (c - self.samples - 1) // g_max)
                if t > 0:
                    c, n = c - t * g_max, n + t
                    continue
            prev = next((c - g for g in sizes if c - g >= 0 and self.batch_at(c - g) == g), None)
            if prev is None:
                return None
            c, n = prev, n + 1
        return c

    def train_iters(self, train_samples: int) -> int:
        """training.py ``update_train_iters`` for ``--train-samples train_samples``: the iterations
        while the samples consumed are at most ``samples`` (the ramp), then ``(train_samples -
        consumed) // global_batch`` more (Python's floor division, as Megatron computes it)."""
        k = None
        for i, (s0, c0, g) in enumerate(self.segments):
            cand = s0 + max(0, (self.samples - c0) // g + 1)
            if i + 1 == len(self.segments) or cand < self.segments[i + 1][0]:
                k = cand
                break
        assert k is not None
        return k + (train_samples - self.consumed_before(k)) // self.global_batch

    def words(self) -> str:
        return (f"--rampup-batch-size {self.start} {self.increment} {self.samples} to global batch "
                f"{self.global_batch}")


def _same_batch_steps(r: Rampup, consumed: int, g: int) -> int:
    """How many iterations from ``consumed`` take global batch ``g`` (``g`` the batch at
    ``consumed``, below the ramp's end): the first ``n >= 1`` with ``batch_at(consumed + n * g) !=
    g``, by bisection (the batch never falls as samples are consumed)."""
    lo, hi = 1, (r.samples - consumed) // g + 1  # consumed + hi * g > samples: the whole global batch there
    while lo < hi:
        mid = (lo + hi) // 2
        if r.batch_at(consumed + mid * g) != g:
            hi = mid
        else:
            lo = mid + 1
    return lo


def rampup(start: int, increment: int, samples: int, global_batch: int) -> Rampup:
    """The ramp of ``--rampup-batch-size start increment samples`` up to ``global_batch``
    (:class:`Rampup`), its segments computed from :func:`ramp_batch` as Megatron steps through it.

    Raises:
        UsageError: what Megatron asserts or divides by zero on: ``start`` or ``increment`` not above 0,
            ``samples`` not above 0 (0 divides by zero in ``update``), ``global_batch`` below ``start``,
            equal to it (no increment: ``samples / 0``) or not ``start`` plus whole increments; more
            than :data:`MAX_RAMP_INCREMENTS` increments.
    """
    what = f"[megatron] rampup_batch_size [{start}, {increment}, {samples}]"
    if start <= 0 or increment <= 0 or samples <= 0:
        raise UsageError(f"{what}: start batch, increment and ramp-up samples must be above 0 (Megatron asserts "
                         "start and increment > 0, and divides by the ramp-up samples)")
    diff = global_batch - start
    if diff <= 0 or diff % increment:
        raise UsageError(f"{what}: the global batch [batch] batch_size x world_size x grad_accum = {global_batch} "
                         f"must be above the start batch {start} by whole increments of {increment} (Megatron's "
                         "RampupBatchsizeNumMicroBatchesCalculator asserts it, and divides by the number of increments)")
    if diff // increment > MAX_RAMP_INCREMENTS:
        raise UsageError(f"{what}: {diff // increment:,} increments to global batch {global_batch}; more than "
                         f"{MAX_RAMP_INCREMENTS:,} are not simulated")
    per = samples / (diff // increment)
    segs: list[tuple[int, int, int]] = []
    proto = Rampup(start, increment, samples, global_batch, per, ())
    c = s = 0
    while True:
        g = proto.batch_at(c)
        segs.append((s, c, g))
        if g == global_batch:
            break
        n = _same_batch_steps(proto, c, g)
        c, s = c + n * g, s + n
    return Rampup(start, increment, samples, global_batch, per, tuple(segs))


class _Sampler:
    """Megatron's samplers over a dataset of ``len(self)`` samples (module docstring, step 6); the
    class that mixes it in holds ``micro_batch``, ``data_parallel``, ``grad_accum``, ``steps``,
    ``dataloader``, ``rampup`` and ``_perms``."""

    micro_batch: int
    data_parallel: int
    grad_accum: int
    steps: int
    dataloader: str
    rampup: Rampup | None
    _perms: dict[int, np.ndarray]

    def consumed_before(self, s: int) -> int:
        """Samples consumed before optimizer step ``s`` of a run from its start: ``s x global batch``,
        or under a ramp-up the sum of the earlier steps' global batches (:meth:`Rampup.consumed_before`)."""
        gbs = self.micro_batch * self.data_parallel * self.grad_accum
        return s * gbs if self.rampup is None else self.rampup.consumed_before(s)

    def batch_at(self, consumed: int) -> int:
        """The global batch of the step that starts after ``consumed`` samples (the config's, or the
        ramp-up's there: :meth:`Rampup.batch_at`)."""
        gbs = self.micro_batch * self.data_parallel * self.grad_accum
        return gbs if self.rampup is None else self.rampup.batch_at(consumed)

    def __len__(self) -> int:
        raise NotImplementedError

    def step(self, s: int, consumed: int | None = None) -> list[tuple[int, int, np.ndarray]]:
        """``(rank, micro_batch, dataset indices)`` of every micro-batch of optimizer step ``s``, rank
        order then micro-batch order (``MegatronPretrainingSampler``; module docstring, step 6).

        ``consumed``: the samples the run had consumed before the step (Megatron's
        ``consumed_train_samples``, where its sampler starts after a resume); default
        :meth:`consumed_before` (``s x global batch``, or the sum over a ramp-up). The step takes
        :meth:`batch_at` ``consumed`` samples: under a ramp-up its micro-batches per rank are that
        global batch / (micro-batch x data-parallel), not ``grad_accum``.

        Raises:
            UsageError: ``s`` is outside ``0 .. steps - 1``; ``consumed`` is negative, leaves less than
                the step's global batch in the dataset, or (cyclic) is not a whole number of
                micro-batches x data-parallel size (Megatron's RandomSampler asserts it); the ramp's
                global batch there is not a multiple of micro-batch x data-parallel (Megatron's
                consistency check asserts it).
        """
        if not 0 <= s < self.steps:
            raise UsageError(f"--step {s}: the Megatron run has steps 0..{self.steps - 1}")
        mbs, dp = self.micro_batch, self.data_parallel
        if consumed is None:
            consumed = self.consumed_before(s)
        elif consumed < 0:
            raise UsageError(f"consumed samples {consumed}: a count of samples is not negative")
        gbs = self.batch_at(consumed)
        if gbs % (mbs * dp):
            raise UsageError(f"the global batch after {consumed} consumed samples is {gbs} under "
                             f"{self.rampup.words() if self.rampup else 'the config'}, not a multiple of micro-batch x "
                             f"data-parallel ({mbs} x {dp}): Megatron's consistency check asserts it "
                             "(--decrease-batch-size-if-needed is not simulated)")
        if consumed + gbs > len(self):
            raise UsageError(f"consumed samples {consumed}: the step's {gbs} samples would pass the dataset's "
                             f"{len(self)} samples")
        if self.dataloader == "cyclic" and consumed % (mbs * dp):
            raise UsageError(f"consumed samples {consumed} is not a multiple of micro-batch x data-parallel "
                             f"({mbs} x {dp}): Megatron's cyclic sampler asserts it")
        out = []
        for r in range(dp):
            for m in range(gbs // (mbs * dp)):
                if self.dataloader == "cyclic":
                    out.append((r, m, self._cyclic(consumed // (mbs * dp) + m, r)))
                    continue
                lo = consumed + m * mbs * dp + r * mbs
                out.append((r, m, np.arange(lo, lo + mbs, dtype=np.int64)))
        return out

    def _cyclic(self, k: int, rank: int) -> np.ndarray:
        """Dataset indices of micro-step ``k`` on ``rank`` under ``MegatronPretrainingRandomSampler``
        (module docstring, step 6)."""
        mbs = self.micro_batch
        bucket = (len(self) // (mbs * self.data_parallel)) * mbs
        if bucket == 0:
            raise UsageError(f"the dataset's {len(self)} samples are fewer than one micro-batch per rank "
                             f"({mbs} x {self.data_parallel}): Megatron's cyclic sampler yields no batch")
        passes, j = divmod(k, bucket // mbs)
        if passes not in self._perms:
            torch = require_torch("Megatron's cyclic sampler (torch.randperm)")
            g = torch.Generator()
            g.manual_seed(passes)
            self._perms[passes] = torch.randperm(bucket, generator=g).numpy().astype(np.int64)
        return rank * bucket + self._perms[passes][j * mbs:(j + 1) * mbs]


@dataclass(frozen=True)
class MegatronOrder(_Sampler):
    """A Megatron GPT run's train order (module docstring).

    Attributes:
        sizes: token count of every sequence of the ``.idx`` (int32, ``n_sequences``).
        train: ``[begin, end)`` of the train sequences (``[megatron] split``).
        seq_length, extra: tokens per sample and ``add_extra_token_to_sequence`` (0 or 1).
        seed: the RandomState seed.
        requested: the train samples the run asks for (``train_iters x global batch`` or ``train_samples``).
        epochs: how many times the document index repeats the train sequences.
        separate_final_epoch: the last epoch was shuffled apart.
        tokens_per_epoch: tokens of the train sequences.
        doc_index: the document index (int32 sequence ids, ``epochs x train sequences``).
        shuffle: the shuffle index (``len(self)`` entries).
        micro_batch, data_parallel, grad_accum: ``[batch] batch_size``, ``world_size``, ``grad_accum``.
        steps: optimizer steps of the run (``train_iters``, or ``train_samples // global batch``;
            under a ramp-up training.py's ``update_train_iters``: :meth:`Rampup.train_iters`).
        dataloader: ``single`` (MegatronPretrainingSampler) or ``cyclic`` (MegatronPretrainingRandomSampler
            with data sharding).
        rampup: the batch-size ramp-up (``--rampup-batch-size``; :class:`Rampup`), None without one
            (every step one global batch, ``micro_batch x data_parallel x grad_accum``).
        implementation: the lineage whose rules built it (:data:`IMPLEMENTATIONS`).
    """

    sizes: np.ndarray
    train: tuple[int, int]
    seq_length: int
    extra: int
    seed: int
    requested: int
    epochs: int
    separate_final_epoch: bool
    tokens_per_epoch: int
    doc_index: np.ndarray
    shuffle: np.ndarray
    cum: np.ndarray
    micro_batch: int
    data_parallel: int
    grad_accum: int
    steps: int
    dataloader: str = "single"
    rampup: Rampup | None = None
    implementation: str = "megatron-core"
    _perms: dict[int, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    def __len__(self) -> int:
        """Samples of the dataset (``GPTDataset.__len__``: sample index rows - 1)."""
        return len(self.shuffle)

    @property
    def global_batch(self) -> int:
        return self.micro_batch * self.data_parallel * self.grad_accum

    def sample_bounds(self, samples: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(first entry, its start offset, last entry, its end offset) of samples ``samples`` (sample
        index rows ``samples`` and ``samples + 1``; int64 arrays)."""
        s = np.asarray(samples, dtype=np.int64)
        b, bo = _bounds(self.cum, s, self.seq_length, self.extra)
        e, eo = _bounds(self.cum, s + 1, self.seq_length, self.extra)
        return b, bo, e, eo

    def pieces(self, dataset_indices: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The pieces of the samples at ``dataset_indices`` (positions the sampler hands out, before
        the shuffle index), in order: (which of ``dataset_indices`` each piece belongs to, sequence id,
        token start, token end in that sequence); int64 arrays of one length."""
        idx = np.asarray(dataset_indices, dtype=np.int64)
        b, bo, e, eo = self.sample_bounds(self.shuffle[idx].astype(np.int64))
        counts = e - b + 1
        owner = np.repeat(np.arange(len(idx), dtype=np.int64), counts)
        first = np.repeat(np.cumsum(counts) - counts, counts)
        k = np.arange(int(counts.sum()), dtype=np.int64) - first
        entry = b[owner] + k
        seq = self.doc_index[entry].astype(np.int64)
        start = np.where(k == 0, bo[owner], 0)
        end = np.where(entry == e[owner], eo[owner] + self.extra, self.sizes[seq].astype(np.int64))
        return owner, seq, start, end

    def reads(self, dataset_indices: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`pieces` with the blend's dataset of each piece in second place (always 0: one
        dataset), as :meth:`BlendedOrder.reads` gives them."""
        owner, seq, start, end = self.pieces(dataset_indices)
        return owner, np.zeros(len(owner), dtype=np.int64), seq, start, end


def memory_limit() -> int | None:
    """Bytes this process may still allocate: the smaller of the memory the machine has available
    (``MemAvailable`` of ``/proc/meminfo``; else its physical memory, ``sysconf``) and, under a soft
    ``RLIMIT_AS`` (an address-space limit the user or a job scheduler set), that limit less the
    address space the process maps already (``/proc/self/statm``); None when neither is known."""
    found = []
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            found += [int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:")]
    except (OSError, ValueError, IndexError):
        pass
    if not found:
        try:
            found.append(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError, AttributeError):
            pass
    try:
        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY and soft > 0:
            mapped = 0
            try:
                with open("/proc/self/statm", encoding="ascii") as f:
                    mapped = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            except (OSError, ValueError, IndexError):
                pass
            found.append(max(0, int(soft) - mapped))
    except (ValueError, OSError):
        pass
    return min(found) if found else None


def index_bytes(entries: int, samples: int, cyclic: bool = False) -> int:
    """Bytes the indices of one GPTDataset take at their peak while :func:`build_order` builds them:
    the document index (``entries`` int32, made by ``np.tile`` and a cast: 8 bytes an entry), its
    token offsets (int64, with the int32 lengths and int64 copy ``np.cumsum`` reads: 20 bytes an
    entry), the shuffle index (``samples`` uint32, int64 from ``2**32 - 2``; two parts and their
    concatenation: twice that), and for ``cyclic`` torch.randperm of the samples (int64) and its
    numpy copy (16 bytes a sample)."""
    width = 4 if samples < np.iinfo(np.uint32).max - 1 else 8
    return 28 * entries + 2 * width * samples + (16 * samples if cyclic else 0)


def kept_bytes(order: "MegatronOrder") -> int:
    """Bytes a built GPTDataset's indices keep (its document index, token offsets and shuffle index)."""
    return int(order.doc_index.nbytes + order.cum.nbytes + order.shuffle.nbytes)


def _gib(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB" if n < 2**70 else f"{n:.3g} bytes"


def build_order(sizes: np.ndarray, *, seq_length: int, seed: int, split: str, extra: bool, micro_batch: int,
                data_parallel: int, grad_accum: int, train_iters: int | None,
                train_samples: int | None, dataloader: str = "single", one_epoch: bool = False,
                held: int = 0, rampup_batch_size: tuple[int, int, int] | None = None,
                implementation: str = "megatron-core") -> MegatronOrder:
    """The train order of a Megatron GPT run over an indexed dataset whose sequences have ``sizes``
    tokens (module docstring: the split, epochs, document, sample and shuffle indices, the sampler).

    Args:
        sizes: tokens per sequence of the ``.idx`` (int, ``n_sequences``).
        seq_length: Megatron's ``--seq-length`` (> 1).
        seed: ``--seed`` (RandomState, 0 .. 2**32 - 1).
        split: ``--split``.
        extra: ``add_extra_token_to_sequence``.
        micro_batch, data_parallel, grad_accum: ``--micro-batch-size``, the data-parallel size and the
            micro-batches per step (``--global-batch-size`` = their product).
        train_iters, train_samples: the run's length (exactly one is given).
        dataloader: ``--dataloader-type``: ``single`` or ``cyclic`` (with data sharding).
        one_epoch: GPTDataset built with ``num_samples=None`` (one pass over the train sequences, as
            an unweighted blend builds each of its datasets) instead of the run's samples.
        held: bytes already held by the indices of earlier datasets of a blend (:func:`kept_bytes`),
            counted against :func:`memory_limit` with this dataset's.
        rampup_batch_size: ``--rampup-batch-size START INCR SAMPLES`` (with ``train_samples``; the
            global batch above is the one after the ramp): :func:`rampup`, the run's steps from
            :meth:`Rampup.train_iters`.
        implementation: the lineage (:data:`IMPLEMENTATIONS`): ``legacy`` takes the train range of
            :func:`legacy_train_range` and always the extra token; every index after it is built as
            megatron-core builds it (the same arithmetic: module docstring, Lineage).

    Raises:
        UsageError: an unknown ``implementation``, ``extra`` false under ``legacy`` (its GPTDataset
            always reads ``seq_length + 1`` tokens), a last epoch of more samples than an epoch's under
            ``legacy`` (its ``_build_index_mappings`` asserts fewer; megatron-core allows one more); neither
            or both of ``train_iters`` /
            ``train_samples``, a ramp-up with
            ``train_iters`` or one Megatron refuses (:func:`rampup`), a split without train sequences or
            tokens, or indices that would take more memory than this process may use
            (:func:`index_bytes` against :func:`memory_limit`: refused before any is allocated).
    """
    if (train_iters is None) == (train_samples is None):
        raise UsageError("[megatron] train_iters (--train-iters) or train_samples (--train-samples) is needed, and "
                         "only one: the run's sample count decides how often GPTDataset repeats the documents, "
                         "and so the whole shuffle")
    if implementation not in IMPLEMENTATIONS:
        raise UsageError(f"[megatron] implementation {implementation!r}: expected one of {', '.join(IMPLEMENTATIONS)}")
    if implementation == "legacy" and not extra:
        raise UsageError("[megatron] add_extra_token_to_sequence = false under implementation = \"legacy\": legacy "
                         "Megatron's GPTDataset always reads seq_length + 1 tokens (the option is megatron-core's)")
    sizes = np.asarray(sizes, dtype=np.int32)
    gbs = micro_batch * data_parallel * grad_accum
    requested, steps, ramp = _run_length(gbs, train_iters, train_samples, rampup_batch_size)
    beg, end = (legacy_train_range if implementation == "legacy" else train_range)(len(sizes), split)
    documents = np.arange(beg, end, 1, dtype=np.int32)
    tokens = int(np.sum(sizes[documents].astype(np.int64)))
    x = 1 if extra else 0
    if tokens <= 1:
        raise UsageError(f"the train split (sequences {beg}..{end - 1} of {len(sizes)}) holds {tokens} token(s): "
                         "Megatron cannot cut a sample from it")
    epochs = 1 if one_epoch else num_epochs(tokens, requested, seq_length, x)
    entries = epochs * len(documents)
    n = (epochs * tokens - x) // seq_length
    need, limit = index_bytes(entries, n, dataloader == "cyclic"), memory_limit()
    if limit is not None and held + need > limit:
        before = f" (with the {_gib(held)} of the blend's earlier datasets)" if held else ""
        raise UsageError(f"the run's {requested:,} samples of seq_length {seq_length} need {epochs:,} epochs of the "
                         f"train split's {tokens:,} tokens ({len(documents):,} sequences): GPTDataset's indices "
                         f"({entries:,} document-index entries, {n:,} samples) would take {_gib(need)}{before}, "
                         f"more than the {_gib(limit)} this process may still use; check [megatron] train_iters / "
                         "train_samples and seq_length against the run's --train-iters / --train-samples and "
                         "--seq-length")
    separate, sans_final = _separate_final_epoch(epochs, tokens, requested, seq_length, x)
    if implementation == "legacy" and epochs > 1 and requested - sans_final >= (tokens - x) // seq_length + 1:
        # gpt_dataset.py _build_index_mappings asserts last_epoch_num_samples < num_samples_per_epoch + 1
        # (megatron-core's check allows equality): the legacy run stops there
        raise UsageError(f"the run's {requested:,} samples of seq_length {seq_length} leave {requested - sans_final:,} "
                         f"sample(s) to the last of {epochs} epochs of the train split's {tokens:,} tokens, more than the "
                         f"{(tokens - x) // seq_length:,} of one epoch: legacy Megatron's _build_index_mappings asserts "
                         "'last epoch number of samples exceeded max value' and builds no dataset")
    rng = np.random.RandomState(seed)
    doc_index = document_index(documents, epochs, rng, separate)
    cum = _entry_starts(sizes, doc_index)
    shuffle = shuffle_index(sans_final if separate else n, n, rng)
    return MegatronOrder(sizes=sizes, train=(beg, end), seq_length=seq_length, extra=x, seed=seed,
                         requested=requested, epochs=epochs, separate_final_epoch=separate, tokens_per_epoch=tokens,
                         doc_index=doc_index, shuffle=shuffle, cum=cum, micro_batch=micro_batch,
                         data_parallel=data_parallel, grad_accum=grad_accum, steps=steps, dataloader=dataloader,
                         rampup=ramp, implementation=implementation)


def _run_length(gbs: int, train_iters: int | None, train_samples: int | None,
                rampup_batch_size: tuple[int, int, int] | None) -> tuple[int, int, Rampup | None]:
    """(the train samples the run asks for, its optimizer steps, its ramp-up) as training.py's
    ``get_train_valid_test_num_samples`` and ``update_train_iters`` compute them.

    Raises:
        UsageError: a ramp-up with ``train_iters`` (Megatron asserts "expected no batch-size rampup for
            iteration-based training"), or one :func:`rampup` refuses.
    """
    if rampup_batch_size is None:
        requested = train_samples if train_samples is not None else int(train_iters or 0) * gbs
        return requested, train_iters if train_iters is not None else int(train_samples or 0) // gbs, None
    if train_samples is None:
        raise UsageError("[megatron] rampup_batch_size with train_iters: Megatron asserts \"expected no batch-size "
                         "rampup for iteration-based training\"; a ramp-up run gives --train-samples ([megatron] "
                         "train_samples)")
    ramp = rampup(*rampup_batch_size, global_batch=gbs)
    return train_samples, ramp.train_iters(train_samples), ramp


def parse_data_path(words: list[str]) -> tuple[list[str], list[float] | None]:
    """Megatron's ``--data-path`` words as ``get_blend_from_list`` (megatron/core/datasets/utils.py)
    reads them: an odd count is prefixes only; an even count is ``weight prefix`` pairs when every
    weight parses as a float, prefixes only when none does.

    Raises:
        UsageError: no word, some weights parse and some do not, a weight is not above 0
            (``BlendedDataset`` asserts weights > 0), or the weights are infinite or their sum is
            (normalising them would give NaN).
    """
    if not words:
        raise UsageError("[megatron] data_path is empty: give the run's --data-path words, e.g. "
                         "[\"0.3\", \"/data/a_text_document\", \"0.7\", \"/data/b_text_document\"]")
    if len(words) % 2 == 1:
        return list(words), None
    weights: list[float | None] = []
    for w in words[0::2]:
        try:
            weights.append(float(w))
        except ValueError:
            weights.append(None)
    if all(w is None for w in weights):
        return list(words), None
    if any(w is None for w in weights):
        raise UsageError(f"[megatron] data_path {' '.join(words)[:120]!r}: expected WEIGHT PREFIX pairs (every "
                         "even word a number) or prefixes only")
    if any(w is None or not w > 0 for w in weights):
        raise UsageError(f"[megatron] data_path: every weight must be above 0 (Megatron's BlendedDataset asserts "
                         f"it), got {words[0::2]}")
    with np.errstate(over="ignore"):
        total = float(np.sum(np.array(weights, dtype=np.float64)))
    if not math.isfinite(total):
        raise UsageError(f"[megatron] data_path: the weights {words[0::2][:8]} are infinite or sum past float64's "
                         "largest value (1.8e308): Megatron's normalize divides them by their sum and gets NaN; "
                         "give the run's weights (only their ratios count)")
    return list(words[1::2]), [float(w or 0) for w in weights]


def _normalize(weights: list[float]) -> list[float]:
    """megatron/core/datasets/utils.py ``normalize``: float64 weights over their numpy sum."""
    w = np.array(weights, dtype=np.float64)
    return [float(x) for x in (w / np.sum(w)).tolist()]


def blend_sizes(weights: list[float], train_samples: int,
                surplus: float = MID_LEVEL_DATASET_SURPLUS) -> tuple[list[float], list[int], list[int]]:
    """How a weighted blend sizes its parts (blended_megatron_dataset_builder.py
    ``_build_blended_dataset_splits`` and ``_get_size_per_split_per_dataset``): the normalised
    weights, each dataset's target ``ceil(train_samples * w)`` and the samples its GPTDataset is built
    for, ``ceil(ceil(train_samples * w) * (1 + surplus))``. The blend holds ``sum(targets)`` samples.
    """
    w = _normalize(weights)
    targets = [int(math.ceil(train_samples * x)) for x in w]
    built = [int(math.ceil(math.ceil(train_samples * x) * (1 + surplus))) for x in w]
    return w, targets, built


def legacy_blend_sizes(weights: list[float], train_samples: int) -> tuple[list[float], list[int]]:
    """How the legacy lineage sizes a blend's datasets (bigscience-workshop/Megatron-DeepSpeed
    megatron/data/dataset_utils.py ``analyze_data_prefix`` and ``get_datasets_weights_and_num_samples``
    @ 006c4e96556cd241f43e91793e8b7fab5ba0546b): the weights divided by their sum added up in order
    (Python floats), and each dataset's GPTDataset built for ``int(math.ceil(train_samples * w *
    1.005))`` samples (:data:`LEGACY_BLEND_FACTOR`, multiplied in that order). Returns (the normalised
    weights, the samples each dataset is built for)."""
    total = 0.0
    for x in weights:
        total += float(x)
    norm = [float(x) / total for x in weights]
    return norm, [int(math.ceil(train_samples * x * LEGACY_BLEND_FACTOR)) for x in norm]


def blending_indices(weights: list[float], size: int, begin: int = 0,
                     counts: list[int] | None = None) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """helpers.cpp ``build_blending_indices`` from blend position ``begin`` (``counts``: the samples
    each dataset gave before it; zeros from 0) up to ``size``: at position ``t`` the dataset ``i``
    with the largest error ``weights[i] * max(t, 1) - counts[i]`` (float64; the first on ties) gives
    its next sample. Returns (dataset of each position int16, its sample in that dataset int64, the
    counts after ``size``). A Python loop (the greedy choice depends on every earlier one): about a
    microsecond per position and dataset."""
    c = [0] * len(weights) if counts is None else list(counts)
    w = [float(x) for x in weights]
    n = len(w)
    ds = np.zeros(max(size - begin, 0), dtype=np.int16)
    dsi = np.zeros(max(size - begin, 0), dtype=np.int64)
    rng = range(1, n)
    for t in range(begin, size):
        td = max(float(t), 1.0)
        best = 0
        err = w[0] * td - float(c[0])
        for i in rng:
            e = w[i] * td - float(c[i])
            if e > err:
                err, best = e, i
        ds[t - begin] = best
        dsi[t - begin] = c[best]
        c[best] += 1
    return ds, dsi, c


@dataclass(frozen=True)
class BlendedOrder(_Sampler):
    """The train order of a Megatron GPT run over a blend of prefixes (``--data-path [W] P [W] P
    ...``; megatron/core/datasets/blended_dataset.py ``BlendedDataset`` over one GPTDataset per
    prefix, each a :class:`MegatronOrder` with the run's seed, split and seq_length). Blend position
    ``idx`` (what the sampler hands out) is sample ``dataset_sample[idx]`` of dataset
    ``dataset[idx]`` (:func:`blending_indices`, computed up to the largest position asked).

    Attributes:
        datasets: the GPTDataset of each prefix, in ``--data-path`` order.
        weights: the weights the blending indices use (float64; the normalised ``--data-path``
            weights normalised again, as BlendedDataset does; for an unweighted blend the datasets'
            lengths normalised).
        given_weights: the ``--data-path`` weights, None for an unweighted blend.
        targets: samples each dataset is meant to give (weighted: ``ceil(samples * w)``; unweighted:
            its length).
        size: samples of the blend (weighted: ``sum(targets)``; unweighted: ``min(samples, sum of
            lengths)``).
        seq_length, extra, seed, requested: as :class:`MegatronOrder`.
        micro_batch, data_parallel, grad_accum, steps, dataloader, rampup: the sampler (:class:`MegatronOrder`).
        implementation: the lineage whose rules built it (:data:`IMPLEMENTATIONS`; legacy: weighted only,
            ``targets`` the samples each GPTDataset is built for, ``size`` their lengths added up).
    """

    datasets: tuple[MegatronOrder, ...]
    weights: list[float]
    given_weights: list[float] | None
    targets: list[int]
    size: int
    seq_length: int
    extra: int
    seed: int
    requested: int
    micro_batch: int
    data_parallel: int
    grad_accum: int
    steps: int
    dataloader: str = "single"
    rampup: Rampup | None = None
    implementation: str = "megatron-core"
    _perms: dict[int, np.ndarray] = field(default_factory=dict, repr=False, compare=False)
    _index: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __len__(self) -> int:
        """Samples of the blend (``BlendedDataset.__len__``)."""
        return self.size

    @property
    def global_batch(self) -> int:
        return self.micro_batch * self.data_parallel * self.grad_accum

    def index(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(dataset, sample in it) of blend positions ``positions`` (int64 arrays; the blending
        indices run from the start of the blend, or the nearest chunk already computed, to the chunks
        of the positions: time grows with the largest position, memory does not).

        Raises:
            UsageError: a position is outside the blend, or a dataset is asked for a sample beyond its
                length (Megatron raises ``IndexError`` there: the blend oversamples it).
        """
        pos = np.asarray(positions, dtype=np.int64)
        if pos.size == 0:
            return pos.copy(), pos.copy()
        top = int(pos.max()) + 1
        if int(pos.min()) < 0 or top > self.size:
            raise UsageError(f"blend position {int(pos.max())} is outside the blend's {self.size} samples")
        d = np.zeros(len(pos), dtype=np.int64)
        k = np.zeros(len(pos), dtype=np.int64)
        chunk = pos >> _BLEND_CHUNK_BITS
        for c in np.unique(chunk).tolist():
            ds, dsi = self._chunk(int(c))
            sel = chunk == c
            local = pos[sel] - (int(c) << _BLEND_CHUNK_BITS)
            d[sel] = ds[local]
            k[sel] = dsi[local]
        for i, o in enumerate(self.datasets):
            over = k[d == i]
            if over.size and int(over.max()) >= len(o):
                raise UsageError(f"the blend asks dataset {i} for sample {int(over.max())}, beyond its {len(o)} "
                                 "samples: Megatron's BlendedDataset raises IndexError (raise "
                                 "mid_level_dataset_surplus)")
        return d, k

    def _chunk(self, c: int) -> tuple[np.ndarray, np.ndarray]:
        """The blending indices of positions ``[c << bits, (c + 1) << bits)`` (cut at the blend's
        size), from the counts kept at the start of every chunk computed so far (the greedy choice
        runs from the nearest of them); the last few chunks are kept."""
        marks: dict[int, list[int]] = self._index.setdefault("marks", {0: [0] * len(self.datasets)})
        cache: dict[int, tuple[np.ndarray, np.ndarray]] = self._index.setdefault("chunks", {})
        if c in cache:
            return cache[c]
        start = max(m for m in marks if m <= c)
        for j in range(start, c + 1):
            lo = j << _BLEND_CHUNK_BITS
            hi = min(self.size, (j + 1) << _BLEND_CHUNK_BITS)
            ds, dsi, counts = blending_indices(self.weights, hi, lo, marks[j])
            marks[j + 1] = counts
        if len(cache) >= 4:
            del cache[next(iter(cache))]
        cache[c] = (ds, dsi)
        return ds, dsi

    def reads(self, dataset_indices: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The pieces of the samples at blend positions ``dataset_indices``, in order: (which of
        ``dataset_indices`` each piece belongs to, the dataset (prefix) it reads, sequence id, token
        start, token end); int64 arrays of one length."""
        idx = np.asarray(dataset_indices, dtype=np.int64)
        d, k = self.index(idx)
        parts = []
        for i, o in enumerate(self.datasets):
            where = np.flatnonzero(d == i)
            if where.size == 0:
                continue
            owner, seq, start, end = o.pieces(k[where])
            parts.append((where[owner], np.full(len(owner), i, dtype=np.int64), seq, start, end))
        if not parts:
            z = np.zeros(0, dtype=np.int64)
            return z, z, z, z, z
        cat = [np.concatenate([p[j] for p in parts]) for j in range(5)]
        order = np.argsort(cat[0], kind="stable")
        return cat[0][order], cat[1][order], cat[2][order], cat[3][order], cat[4][order]


def build_blend(sizes: list[np.ndarray], weights: list[float] | None, *, seq_length: int, seed: int, split: str,
                extra: bool, micro_batch: int, data_parallel: int, grad_accum: int, train_iters: int | None,
                train_samples: int | None, dataloader: str = "single",
                surplus: float = MID_LEVEL_DATASET_SURPLUS,
                rampup_batch_size: tuple[int, int, int] | None = None,
                implementation: str = "megatron-core") -> BlendedOrder:
    """The train order of a Megatron GPT run over the prefixes of ``--data-path`` (their ``.idx``
    sequence lengths ``sizes``, in order) as BlendedMegatronDatasetBuilder builds it (megatron-core
    0.16.1, ``_build_blended_dataset_splits``, one distribution for all splits):

    - weighted (``weights`` given): each prefix's GPTDataset is built for
      ``ceil(ceil(samples * w) * (1 + surplus))`` samples, ``w`` the normalised weight; the blend
      holds ``sum(ceil(samples * w))`` samples (:func:`blend_sizes`);
    - unweighted (``weights`` None, ``--data-path A B``): each GPTDataset is one pass over its train
      sequences (``num_samples=None``); the blend weighs them by their lengths and holds
      ``min(samples, sum of lengths)`` samples;

    every GPTDataset with the run's seed, split and seq_length (the same RandomState seed for every
    prefix); the blending indices are :func:`blending_indices`. ``samples`` is ``train_samples`` or
    ``train_iters x global batch``.

    ``implementation="legacy"`` (module docstring, Lineage): each prefix's GPTDataset is built for
    :func:`legacy_blend_sizes` samples (``surplus`` is not read: the factor is 1.005) with the legacy
    split, and the blend (BlendableDataset(datasets, weights)) holds all their samples; the weights
    used are those normalised again by numpy, as BlendableDataset does.

    Raises:
        UsageError: as :func:`build_order`, for any prefix; neither or both of ``train_iters`` /
            ``train_samples``; weights not one per prefix; a prefix of an unweighted blend with no
            train sample (weight 0); an unweighted blend under ``legacy`` (its
            ``get_datasets_weights_and_num_samples`` reads every even word as a weight).
    """
    if (train_iters is None) == (train_samples is None):
        raise UsageError("[megatron] train_iters (--train-iters) or train_samples (--train-samples) is needed, and "
                         "only one: the run's sample count sizes every dataset of the blend")
    if weights is not None and len(weights) != len(sizes):
        raise UsageError(f"{len(weights)} weights for {len(sizes)} prefixes: Megatron needs one weight per prefix")
    gbs = micro_batch * data_parallel * grad_accum
    requested, steps, ramp = _run_length(gbs, train_iters, train_samples, rampup_batch_size)
    common: dict[str, Any] = dict(seq_length=seq_length, seed=seed, split=split, extra=extra, micro_batch=micro_batch,
                  data_parallel=data_parallel, grad_accum=grad_accum, train_iters=None, implementation=implementation)
    if implementation == "legacy":
        if weights is None:
            raise UsageError("[megatron] data_path without weights under implementation = \"legacy\": legacy Megatron's "
                             "get_datasets_weights_and_num_samples reads every even word as a weight (float) and "
                             "fails on a prefix; give the run's WEIGHT PREFIX pairs")
        norm, built = legacy_blend_sizes(weights, requested)
        legacy_parts: list[MegatronOrder] = []
        for i, (sz, n) in enumerate(zip(sizes, built)):
            try:
                legacy_parts.append(build_order(sz, train_samples=n, held=sum(kept_bytes(o) for o in legacy_parts),
                                                **common))
            except UsageError as exc:
                raise UsageError(f"prefix {i} of the blend ({n:,} samples: ceil({requested:,} x weight {norm[i]:.6g} "
                                 f"x 1.005)): {exc}") from None
        return BlendedOrder(datasets=tuple(legacy_parts), weights=_normalize(norm), given_weights=list(weights),
                            targets=built, size=sum(len(o) for o in legacy_parts), seq_length=seq_length,
                            extra=1 if extra else 0, seed=seed, requested=requested, micro_batch=micro_batch,
                            data_parallel=data_parallel, grad_accum=grad_accum, steps=steps, dataloader=dataloader,
                            rampup=ramp, implementation=implementation)
    if weights is not None:
        norm, targets, built = blend_sizes(weights, requested, surplus)
        parts: list[MegatronOrder] = []
        for i, (sz, n) in enumerate(zip(sizes, built)):
            try:
                parts.append(build_order(sz, train_samples=n, held=sum(kept_bytes(o) for o in parts), **common))
            except UsageError as exc:
                raise UsageError(f"prefix {i} of the blend ({n:,} samples: ceil(ceil({requested:,} x weight "
                                 f"{norm[i]:.6g}) x (1 + mid_level_dataset_surplus {surplus:g}))): {exc}") from None
        datasets = tuple(parts)
        size = sum(targets)
        used = _normalize(norm)
    else:
        unweighted: list[MegatronOrder] = []
        for sz in sizes:
            unweighted.append(build_order(sz, train_samples=requested, one_epoch=True,
                                          held=sum(kept_bytes(o) for o in unweighted), **common))
        datasets = tuple(unweighted)
        targets = [len(o) for o in datasets]
        if 0 in targets:
            raise UsageError(f"prefix {targets.index(0)} of the unweighted blend gives 0 train samples of seq_length "
                             f"{seq_length}: its weight (its sample count) is 0 and Megatron's BlendedDataset "
                             "asserts weights > 0")
        size = min(requested, sum(targets))
        used = _normalize([float(t) for t in targets])
        steps = min(steps, size // gbs if ramp is None else _steps_within(ramp, size))
    return BlendedOrder(datasets=datasets, weights=used, given_weights=None if weights is None else list(weights),
                        targets=targets, size=size, seq_length=seq_length, extra=1 if extra else 0, seed=seed,
                        requested=requested, micro_batch=micro_batch, data_parallel=data_parallel,
                        grad_accum=grad_accum, steps=steps, dataloader=dataloader, rampup=ramp)


def _steps_within(ramp: Rampup, size: int) -> int:
    """The steps of a run from its start under ``ramp`` whose samples all lie in the first ``size``."""
    lo, hi = 0, size // ramp.start + 1  # every step takes at least the start batch
    while lo < hi:  # the most steps k with consumed_before(k) <= size
        mid = (lo + hi + 1) // 2
        if ramp.consumed_before(mid) <= size:
            lo = mid
        else:
            hi = mid - 1
    return lo
