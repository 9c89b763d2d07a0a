"""Step -> rows: the batch plan of a dataset, and the rows of any optimizer step.

The **global row order** is the rows of the dataset's shards in index order (the shards' relative
paths sorted, as ``datacheck audit`` discovers them and as Hugging Face / MosaicML shard names sort),
each shard's rows in file order: global index ``g`` is row ``g - start`` of the shard whose span
``[start, start + rows)`` holds it (:class:`RowSpace`). A trainer's ``ConcatDataset`` /
``datasets.concatenate_datasets`` over the same shard list in the same order has the same indices.

Data with splits (``[splits]``, or a Hugging Face ``DatasetDict`` folder's ``dataset_dict.json``)
is planned over ONE split, the one a trainer iterates: ``train`` unless another is named
(``datacheck plan --split NAME``); :attr:`RowSpace.split` says which, and the shards of the other
splits are not in the row order (:func:`select_split`). The split's shards are then in the order
``datasets.load_dataset`` concatenates its files (``DataFilesList.from_patterns``: pattern by
pattern, each pattern's files sorted): for the splits ``load_dataset`` of the folder gives (a dataset
card's ``configs``, the Hub's file names) exactly that order
(:attr:`datacheck.io.hubsplits.HubSplits.order`; a file two of the split's patterns match is there
twice), for ``[splits]`` glob by glob of the entry (:func:`datacheck.io.hubsplits.split_order`).

Megatron ``.bin``/``.idx`` pairs are planned with Megatron-LM's own order (:class:`MegatronPlan`,
:func:`loader_of`): GPTDataset cuts samples of ``seq_length`` (+ 1) tokens across the documents, so a
step's :class:`StepRow` s are the documents its samples read, each with the sample and token range.

Stable interface (used by ``datacheck trace``)::

    rows_of_step(plan_or_ledger, step, *, rank=None, micro_batch=None, space=None) -> list[StepRow]
    read_ledger(folder) -> Ledger

A :class:`StepRow` is ``(rank, micro_batch, global_index, shard, row)``. Step numbers: a
:class:`BatchPlan` numbers optimizer steps from 0 over the whole run (global step ``N`` = in-epoch step
``N % steps_per_epoch`` of epoch ``N // steps_per_epoch``, see :mod:`datacheck.model.order`); a
:class:`~datacheck.io.ledger.Ledger` uses the numbers recorded in it (``record_batches``: from 0
unless the trainer passed its own ``start_step``; OLMo: its 1-based ``global_step``).
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable, NamedTuple

import numpy as np
import polars as pl
import pyarrow.parquet as pq

from datacheck.checks.batch import supervision, tokens_expr, zero_micro_batches
from datacheck.checks.dup.cross import assign_splits
from datacheck.derive.classlabel import as_declared, declared_source
from datacheck.derive.layout import SAMPLE_ROWS, shard_layout
from datacheck.derive.read import CheckInput, open_for_checks
from datacheck.formats.base import FormatError
from datacheck.formats.discovery import discover
from datacheck.formats.megatron import read_index
from datacheck.formats.registry import hash_shard
from datacheck.io.discover import DiscoveredShard, Discovery
from datacheck.io.hashing import hash_file
from datacheck.io.hubsplits import HubSplits, SplitGlobs, split_order
from datacheck.io.ledger import Ledger, LedgerBatch, read_ledger
from datacheck.io.outputs import write_frame_atomic
from datacheck.io.shardbytes import Unreadable
from datacheck.model.config import Config
from datacheck.model.errors import OutOfMemory, UsageError
from datacheck.model.megatronorder import (
    LEGACY_BLEND_FACTOR,
    BlendedOrder,
    MegatronOrder,
    build_blend,
    build_order,
    parse_data_path,
    uses_megatron_loader,
)
from datacheck.model.order import EpochOrder, epoch_order, steps_text
from datacheck.model.roles import is_list

__all__ = ["StepRow", "ShardSpan", "RowSpace", "BatchPlan", "MegatronPlan", "megatron_plan", "loader_of",
           "row_space", "build_plan", "rows_of_step",
           "read_ledger", "export_step", "PLAN_EXPORT_COLUMNS", "SAMPLE_EXPORT_COLUMNS", "sample_columns",
           "select_split", "split_shard_counts", "TRAIN_SPLIT"]

#: the split a trainer iterates, planned by default when the data has splits
TRAIN_SPLIT = "train"


class StepRow(NamedTuple):
    """One row of one optimizer step.

    Attributes:
        rank: the data-parallel rank that loads it.
        micro_batch: its micro-batch within the step on that rank (0 .. grad_accum-1); None when a
            ledger did not record micro-batches (OLMo).
        global_index: its index in the global row order.
        shard: the shard's path relative to the dataset root (None when no :class:`RowSpace` is known).
        row: its 0-based row in that shard (None likewise).
        sample: for a Megatron plan, the dataset index of the sample (the position
            ``MegatronPretrainingSampler`` hands out) that reads this row; None otherwise.
        tokens: for a Megatron plan, ``(start, end)``: the tokens ``[start, end)`` of the row (the
            document's tokens as datacheck reads the row) that the sample reads; None otherwise.
    """

    rank: int
    micro_batch: int | None
    global_index: int
    shard: str | None
    row: int | None
    sample: int | None = None
    tokens: tuple[int, int] | None = None


@dataclass(frozen=True)
class ShardSpan:
    """One shard in the global order: its relative path, content hash, rows and first global index,
    where it is read from, and its format (``megatron``, ``parquet``, ...; None when not known)."""

    path: str
    content_hash: str
    rows: int
    start: int
    abs_path: Path | str | None = None  # a local path, or the URL of a shard in an object store
    format: str | None = None
    url: str | None = None  # the URL of a shard in an object store, None for a local file


@dataclass(frozen=True)
class RowSpace:
    """The global row order: shards in index order, each a span of global indices.

    Attributes:
        shards: the shards planned, in index order.
        root: the folder their relative paths start from.
        split: the split planned (data with splits), else None (every shard).
        other_splits: the splits not planned (``{name: shards it holds among the PATHs}``; empty
            without splits), so the plan can say what it left out.
    """

    shards: tuple[ShardSpan, ...]
    root: Path | None = None
    split: str | None = None
    other_splits: dict[str, int] = field(default_factory=dict)

    @property
    def n_rows(self) -> int:
        return self.shards[-1].start + self.shards[-1].rows if self.shards else 0

    def locate(self, g: int) -> tuple[ShardSpan, int]:
        """(the shard, the 0-based row in it) of global index ``g``.

        Raises:
            UsageError: ``g`` is outside ``[0, n_rows)`` (a ledger recorded over other data?).
        """
        if not 0 <= g < self.n_rows:
            raise UsageError(f"global index {g} is outside the dataset's {self.n_rows} rows: was the ledger "
                             "recorded over other data, or are shards missing?")
        starts = [s.start for s in self.shards]
        i = bisect.bisect_right(starts, g) - 1
        while self.shards[i].rows == 0:  # empty shards share a start with the next
            i += 1
        return self.shards[i], g - self.shards[i].start


def select_split(disc: Discovery, cfg: Config, split: str | None) -> tuple[list[DiscoveredShard], str | None, dict[str, str]]:
    """The shards of the split a trainer iterates: (those shards, the split's name or None, the
    split of each shard's relative path).

    The splits are ``[splits]`` (config order) or, when the config names none, those a Hugging Face
    ``DatasetDict`` folder among the PATHs declares or the shards' names give by the Hub's split
    naming (``[dataset] infer_splits``; :meth:`Discovery.declared_splits`); a shard
    belongs to the first split whose glob matches (:func:`datacheck.checks.dup.cross.assign_splits`),
    and a shard whose name names several splits by the Hub's naming (splits inferred, not the config's:
    :attr:`datacheck.io.hubsplits.HubSplits.shared`) to each of them, as ``datasets`` loads it. Without splits every shard is planned (None). With splits, ``split`` (default
    :data:`TRAIN_SPLIT`) names the one planned, its shards in ``load_dataset``'s order (the module
    docstring; a shard may be there twice).

    Raises:
        UsageError: ``split`` is given but the data has no splits, or the split is not one of them
            (the message lists them), or it holds no shard.
    """
    splits, loaded = _splits_of(disc, cfg)
    if not splits:
        if split is not None:
            raise UsageError(f"--split {split}: the data has no splits (no [splits] in the config, no DatasetDict "
                             "dataset_dict.json among the PATHs and no split named by the Hub's file names); drop "
                             "--split, or name the splits under [splits]")
        return list(disc.shards), None, {}
    name = split or TRAIN_SPLIT
    where = assign_splits([ds.rel for ds in disc.shards], splits)
    if name not in splits:
        raise UsageError(f"{'--split ' + name if split else 'the data has splits but none named ' + repr(name)}: "
                         f"the splits are {', '.join(splits)}; give the one the trainer iterates with --split NAME")
    shared = loaded.shared  # in each split its name names, as datasets loads it
    by_rel = {ds.rel: ds for ds in disc.shards}
    held = [rel for rel in by_rel if where.get(rel) == name or name in shared.get(rel, ())]
    if not held:
        raise UsageError(f"split {name!r} ({splits[name]}) holds no shard among the PATHs; the splits are "
                         f"{', '.join(splits)}")
    order = loaded.order.get(name)
    if order is None or set(order) != set(held):  # the config's [splits] (or a DatasetDict's): glob by glob
        order = tuple(split_order(held, splits[name]))
        order += tuple(sorted(set(held) - set(order)))  # none: each is in the split by one of its globs
    return [by_rel[rel] for rel in order], name, where


def _splits_of(disc: Discovery, cfg: Config) -> tuple[dict[str, SplitGlobs], HubSplits]:
    """(the splits in use: ``[splits]``, else those the data gives, :meth:`Discovery.declared_splits`;
    what ``load_dataset`` of the folder makes of them, :meth:`Discovery.hub_splits`, when they are
    those (a dataset card's ``configs`` or the Hub's file names, also once
    :func:`datacheck.execute.setup.with_declared_splits` put them in the config), else no
    :class:`~datacheck.io.hubsplits.HubSplits`: a split's shards are then those its globs match,
    in the order of :func:`datacheck.io.hubsplits.split_order`)."""
    if cfg.splits:
        loaded = cfg.split_source in _LOADED
        return dict(cfg.splits), disc.hub_splits() if loaded else HubSplits()
    splits, source = disc.splits_given(cfg.dataset.infer_splits)
    return splits, disc.hub_splits() if source in _LOADED else HubSplits()


#: the sources of splits that are ``load_dataset``'s (:attr:`datacheck.io.hubsplits.HubSplits.source`)
_LOADED = ("card_configs", "hub_names")


def split_shard_counts(disc: Discovery, cfg: Config, where: dict[str, str], names: list[str]) -> dict[str, int]:
    """``{split: shards it holds}`` for the splits ``names``: the shards ``where`` (:func:`select_split`)
    puts in it, and with inferred splits each shard whose name names it among others (as ``datasets``
    loads such a shard into each split it names; :attr:`datacheck.io.hubsplits.HubSplits.shared`)."""
    shared = _splits_of(disc, cfg)[1].shared
    return {s: sum(1 for p, r in where.items() if r == s or s in shared.get(p, ())) for s in names}


def row_space(paths: list[str], cfg: Config, *, supervised: bool = False,
              split: str | None = None,
              progress: Callable[[str, int, int], None] | None = None) -> tuple[RowSpace, np.ndarray | None]:
    """Discover the shards of ``paths`` and count their rows (through the one read path). Data with
    splits gives the row order of one split (:func:`select_split`: ``train`` unless ``split``).

    Args:
        paths: shard files, folders or globs (as ``datacheck audit`` takes them).
        cfg: the config (reader settings, roles, ``[tokens]``/``[labels]`` facts).
        supervised: also compute each row's supervised-token count (needs a token ``labels`` list).
        split: the split to plan (data with splits; default ``train``).
        progress: called as ``progress(shard path, shards done, shards)`` before each shard is read.

    Returns:
        (the row space, the supervised counts as an int64 array of ``n_rows`` or None when not asked
        for or when a shard has no token labels list).

    Raises:
        UsageError: no shard found, a shard cannot be read (its rows are unknown; the message
            names it), or the split cannot be chosen (:func:`select_split`).
    """
    space, sup, _, _ = _scan(paths, cfg, supervised=supervised, lengths=False, split=split, progress=progress)
    return space, sup


def _sample(data: CheckInput) -> Callable[[list[str]], "pl.DataFrame | None"]:
    """The layout recognizer's sample of an opened shard: the first :data:`SAMPLE_ROWS` rows of the
    given columns (None when they cannot be read)."""
    def read(cols: list[str]) -> pl.DataFrame | None:
        try:
            return data.lf.select(cols).head(SAMPLE_ROWS).collect()
        except (Unreadable, pl.exceptions.PolarsError):
            return None
    return read


def _scan(paths: list[str], cfg: Config, *, supervised: bool, lengths: bool, split: str | None = None,
          progress: Callable[[str, int, int], None] | None = None
          ) -> tuple[RowSpace, np.ndarray | None, np.ndarray | None, tuple[str, ...]]:
    """:func:`row_space`, plus with ``lengths`` each row's token count (``input_ids`` list length capped
    at ``max_seq_len``; None when a shard has no ``input_ids`` list), and the rules by which the
    supervised counts were made (:func:`datacheck.checks.batch.supervision`: each shard's layout as the
    audit decides it, :func:`datacheck.derive.layout.shard_layout`; distinct, in shard order).

    Raises:
        UsageError: no shard found, or a shard cannot be read (its rows are unknown; the message
            names it).
    """
    disc = discover(paths, cfg.dataset.format)
    shards, name, where = select_split(disc, cfg, split)
    spans: list[ShardSpan] = []
    sup_parts: list[np.ndarray] | None = [] if supervised else None
    len_parts: list[np.ndarray] | None = [] if lengths else None
    rules: list[str] = []
    start = 0
    for k, ds in enumerate(shards):
        if progress is not None:
            progress(ds.rel, k, len(shards))
        chash = hash_shard(ds.source, ds.format, bytes_only=True)[0] if ds.url is not None else hash_file(ds.path)[0]
        try:
            data = open_for_checks(ds, cfg)
            ids = data.roles.input_ids
            exprs = [pl.len().alias("n")]
            how = None
            if sup_parts is not None:
                layout = shard_layout(cfg.dataset.layout, cfg.dataset.schema_, dict(data.schema), data.roles,
                                      _sample(data), cfg.labels.ignore, spans=cfg.sft.response_template_ids is not None,
                                      pad=cfg.tokens.pad_token_id, eos=cfg.tokens.eos_token_id)
                how = supervision(cfg, layout.name, data.roles, dict(data.schema))
            want = how is not None
            if how is not None:
                exprs.append(how[0].implode().alias("sup"))
                if how[1] not in rules:
                    rules.append(how[1])
            want_len = len_parts is not None and ids is not None and is_list(data.schema[ids])
            if want_len:
                exprs.append(tokens_expr(cfg, ids).implode().alias("len"))  # type: ignore[arg-type]
            df = data.lf.select(exprs).collect()
        except Unreadable as exc:
            OutOfMemory.check(exc, ds.rel)
            raise UsageError(f"{ds.rel}: cannot be read ({exc.reason}); the plan needs every shard's row count") from None
        n = int(df["n"][0])
        if sup_parts is not None:
            if want:
                sup_parts.append(np.asarray(df["sup"][0].to_numpy(), dtype=np.int64))
            else:
                sup_parts = None
        if len_parts is not None:
            if want_len:
                len_parts.append(np.asarray(df["len"][0].to_numpy(), dtype=np.int64))
            else:
                len_parts = None
        spans.append(ShardSpan(ds.rel, chash, n, start, ds.source, ds.format, ds.url))
        start += n

    def cat(parts: list[np.ndarray] | None) -> np.ndarray | None:
        return None if parts is None else np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    splits = dict(cfg.splits) or disc.declared_splits(cfg.dataset.infer_splits)
    others = {} if name is None else split_shard_counts(disc, cfg, where, [s for s in splits if s != name])
    sup = cat(sup_parts)
    return RowSpace(tuple(spans), disc.root, name, others), sup, cat(len_parts), tuple(rules) if sup is not None else ()


@dataclass
class BatchPlan:
    """The simulated batch order of a dataset under ``[batch]`` (torch's samplers; see
    :mod:`datacheck.model.order`).

    Attributes:
        space: the global row order.
        cfg: the config (``cfg.batch`` holds the facts).
        supervised: supervised tokens per global row (int64, ``n_rows``), or None when unknown.
        lengths: tokens per global row (int64, ``n_rows``; with ``[batch] max_tokens``), or None.
        supervision: how ``supervised`` was counted, in words, one rule per kind of shard
            (:func:`datacheck.checks.batch.supervision_rule`: the token labels, or without them the
            labels ``DataCollatorForLanguageModeling(mlm=False)`` makes); empty when unknown.
    """

    space: RowSpace
    cfg: Config
    supervised: np.ndarray | None = None
    lengths: np.ndarray | None = None
    supervision: tuple[str, ...] = ()
    _orders: dict[int, EpochOrder] = field(default_factory=dict, repr=False)

    def order(self, epoch: int = 0) -> EpochOrder:
        """The batches of every rank in ``epoch`` (cached)."""
        if epoch not in self._orders:
            self._orders[epoch] = epoch_order(self.space.n_rows, self.cfg.batch, epoch, self.lengths)
        return self._orders[epoch]

    @property
    def steps_per_epoch(self) -> int:
        return self.order(0).steps

    @property
    def run_steps(self) -> int:
        """Steps of the whole run: steps per epoch x ``[batch] epochs``."""
        return self.steps_per_epoch * self.cfg.batch.epochs

    @property
    def own_steps(self) -> bool:
        """Whether each rank counts its own steps over its own epochs: accelerate's loader with
        ``even_batches = false``, whose ``BatchSamplerShard`` gives the processes after the last batch's
        one batch fewer (with ``split_batches``, those past a short last batch's rows); nothing joins them
        at an epoch's end, each counts its own steps (its own log's) and DDP pairs the ``k``-th backward of
        every process, so a process with fewer starts its next epoch sooner (:func:`rows_of_step` places
        each rank's step so)."""
        b = self.cfg.batch
        return b.loader == "accelerate" and not b.even_batches

    def own_position(self, step: int, rank: int) -> tuple[int, int]:
        """(epoch, in-epoch step) of ``rank``'s own step ``step`` when each rank counts its own steps over
        its own epochs (``ceil(its micro-batches / grad_accum)`` each, epoch after epoch, not bounded by
        ``[batch] epochs``; an epoch that gives the rank no step ends the count there)."""
        ga = self.cfg.batch.grad_accum
        epoch, k = 0, step
        while True:
            steps = -(-len(self.order(epoch).ranks[rank]) // ga)
            if steps == 0 or k < steps:
                return epoch, k
            epoch, k = epoch + 1, k - steps

    def split_step(self, step: int) -> tuple[int, int]:
        """(epoch, in-epoch step) of global step ``step``.

        Raises:
            UsageError: the step is negative or beyond ``[batch] epochs`` x steps per epoch.
        """
        spe = self.steps_per_epoch
        total = spe * self.cfg.batch.epochs
        if spe == 0:
            raise UsageError(f"--step {step}: the plan has no step: 0 steps per epoch (fewer rows than one "
                             "micro-batch with drop_last, or no rows); check [batch] batch_size, world_size and "
                             "drop_last against the data's rows")
        if not 0 <= step < total:
            raise UsageError(f"--step {step}: the run has {steps_text(0, total - 1)} ({spe} per epoch x "
                             f"{self.cfg.batch.epochs} epoch(s) from [batch] epochs)")
        return step // spe, step % spe

    def summary(self, epoch: int = 0) -> dict[str, Any]:
        """The plan's numbers for ``epoch`` as plain values (what ``datacheck plan`` prints).

        Keys: ``rows``, ``shards``, ``split`` (the split planned, None without splits),
        ``other_splits`` (``{name: shards}`` of the splits left out), ``world_size``, ``batch_size``, ``grad_accum``, ``global_batch``
        (batch_size x world_size x grad_accum, rows per full optimizer step), ``drop_last``,
        ``shuffle``, ``seed``, ``epoch``, ``epochs``, ``loader`` (``torch`` or ``accelerate``, with
        ``even_batches`` and ``split_batches``; ``sampler`` = ``random`` and ``persistent_workers`` with
        ``[batch] sampler = "random"``), ``rows_per_rank``, ``micro_batches_per_rank``,
        ``steps_per_epoch``, ``last_step_micro_batches`` (micro-batches of the last step per rank),
        ``last_batch_rows`` (per rank), ``wraparound_repeats`` (per epoch), and ``supervised``
        (tokens per (step, rank, micro-batch): ``min``, ``p1``, ``zero`` = how many are 0, ``count``,
        ``rule``: how they were counted, :attr:`supervision`; None when unknown). ``max_tokens`` (None: fixed batch size); with it,
        ``token_budget``: ``batches_per_epoch`` (before sharding), ``repeated_batches``,
        ``global_batch_tokens`` (max_tokens x world_size x grad_accum, the padded-token ceiling of a
        step), ``padded_tokens`` per micro-batch (``min``, ``median``, ``max``), ``rows_per_micro_batch``
        (``min``, ``max``), ``over_budget_rows`` (how many rows exceed max_tokens, each alone in a
        micro-batch) and ``over_budget_examples`` (their first 20 global indices).
        """
        b = self.cfg.batch
        o = self.order(epoch)
        mbs = o.micro_batches
        out: dict[str, Any] = {
            "rows": self.space.n_rows, "shards": len(self.space.shards), "split": self.space.split,
            "other_splits": dict(self.space.other_splits), "world_size": b.world_size,
            "batch_size": b.batch_size, "grad_accum": b.grad_accum,
            "global_batch": int(b.batch_size or 0) * b.world_size * b.grad_accum, "drop_last": b.drop_last,
            "shuffle": b.shuffle, "seed": b.seed, "epoch": epoch, "epochs": b.epochs,
            "rows_per_rank": o.per_rank, "micro_batches_per_rank": mbs, "steps_per_epoch": o.steps,
            "last_step_micro_batches": (mbs - (o.steps - 1) * b.grad_accum) if mbs else 0,
            "last_batch_rows": [len(m[-1]) if m else 0 for m in o.ranks], "wraparound_repeats": o.repeats,
            "supervised": None, "max_tokens": b.max_tokens, "token_budget": None,
            "loader": "accelerate" if b.loader == "accelerate" else "torch",
        }
        if b.loader == "accelerate":
            out.update(even_batches=b.even_batches, split_batches=b.split_batches)
        if b.sampler == "random":
            out.update(sampler="random", persistent_workers=b.persistent_workers)
        if o.max_tokens is not None and self.lengths is not None:
            lens = self.lengths
            padded = np.array([len(idx) * int(lens[idx].max()) for m in o.ranks for idx in m if len(idx)],
                              dtype=np.int64)
            rows = np.array([len(idx) for m in o.ranks for idx in m], dtype=np.int64)
            out["global_batch"] = None
            out["token_budget"] = {
                "batches_per_epoch": o.n_batches, "repeated_batches": o.repeated_batches,
                "global_batch_tokens": o.max_tokens * b.world_size * b.grad_accum,
                "padded_tokens": None if not padded.size else {
                    "min": int(padded.min()), "median": float(np.median(padded)), "max": int(padded.max())},
                "rows_per_micro_batch": None if not rows.size else {"min": int(rows.min()), "max": int(rows.max())},
                "over_budget_rows": len(o.over_budget), "over_budget_examples": list(o.over_budget[:20]),
            }
        if self.supervised is not None:
            tokens = np.array([int(self.supervised[idx].sum()) for m in o.ranks for idx in m], dtype=np.int64)
            out["supervised"] = {
                "count": int(tokens.size), "min": int(tokens.min()) if tokens.size else None,
                "p1": float(np.percentile(tokens, 1, method="lower")) if tokens.size else None,
                "zero": int((tokens == 0).sum()),
                "zero_micro_batches": [list(z) for z in zero_micro_batches(o, self.supervised)[:20]],
                "rule": list(self.supervision),
            }
        return out


#: the ``[batch]`` keys of torch's samplers that a Megatron plan does not read (Megatron's
#: GPTDataset shuffles with ``[megatron] seed`` and its sampler never drops or pads)
_TORCH_ONLY_KEYS = ("seed", "shuffle", "drop_last", "epochs", "sampler", "persistent_workers")


@dataclass
class MegatronPlan:
    """The sample order of a Megatron-LM GPT run over one Megatron ``.bin``/``.idx`` pair, or a blend
    of several (``[megatron] data_path``) (:mod:`datacheck.model.megatronorder`: Megatron's own
    document, sample and shuffle indices, BlendedDataset's blending indices and
    ``MegatronPretrainingSampler``), joined to the shards' rows.

    A step's rows are the documents its samples read: each sample of ``seq_length`` (+ 1) tokens is
    cut across documents (of one prefix), so one sample names one or more rows, each with the token
    range it reads (:attr:`StepRow.tokens`, in the row's tokens as datacheck reads the document) and
    the sample's dataset index (:attr:`StepRow.sample`; in a blend, the BlendedDataset position).
    Steps are numbered from 0 over the whole run (Megatron's iteration ``N`` logged after its update
    is step ``N - 1``); the run is ``[megatron] train_iters`` steps (or ``train_samples // global
    batch``), one pass over the sample order: no torch epochs.

    Attributes:
        space: the global row order (its rows the documents of the ``.idx`` files).
        cfg: the config.
        order: the simulated order (one pair: :class:`MegatronOrder`; a blend: :class:`BlendedOrder`).
        seq_doc: per dataset of the order (prefix), per sequence of its ``.idx``, its document (the
            shard's row; int64).
        seq_offset: per dataset, per sequence, its first token's position in its document (int64).
        spans: per dataset, the planned shard it reads.
        prefixes: the ``[megatron] data_path`` prefixes, one per dataset (None without data_path).
    """

    space: RowSpace
    cfg: Config
    order: MegatronOrder | BlendedOrder
    seq_doc: list[np.ndarray]
    seq_offset: list[np.ndarray]
    spans: list[ShardSpan]
    prefixes: list[str] | None = None
    supervised: np.ndarray | None = None  # Megatron pairs hold no labels column

    @property
    def steps_per_epoch(self) -> int:
        """The run's steps (a Megatron run is one pass over its sample order)."""
        return self.order.steps

    @property
    def run_steps(self) -> int:
        return self.order.steps

    def split_step(self, step: int) -> tuple[int, int]:
        """``(0, step)``: a Megatron run has no torch epochs.

        Raises:
            UsageError: the step is outside ``0 .. run_steps - 1``.
        """
        if not 0 <= step < self.order.steps:
            raise UsageError(f"--step {step}: the Megatron run has {steps_text(0, self.order.steps - 1)} ([megatron] "
                             "train_iters, or train_samples // global batch)")
        return 0, step

    def step_rows(self, step: int, rank: int | None = None, micro_batch: int | None = None,
                  consumed: int | None = None) -> list[StepRow]:
        """The rows of optimizer step ``step``: for every rank (or ``rank``) and micro-batch (or
        ``micro_batch``) in that order, each sample in batch order, each document it reads in reading
        order (a document read by two samples is listed for each). ``consumed``: the samples consumed
        before the step (a resumed run's, from its log); default ``step x global batch``.

        Raises:
            UsageError: the step, rank or micro-batch is outside the run, or ``consumed`` is (see
                :meth:`MegatronOrder.step`).
        """
        self.split_step(step)
        batches = self.order.step(step, consumed)
        if rank is not None:
            if not 0 <= rank < self.order.data_parallel:
                raise UsageError(f"--rank {rank}: step {step} has ranks 0..{self.order.data_parallel - 1}")
            batches = [b for b in batches if b[0] == rank]
        if micro_batch is not None:
            accum = 1 + max((b[1] for b in batches), default=-1)  # under a ramp-up: the step's own count
            if not 0 <= micro_batch < accum:
                raise UsageError(f"--micro-batch {micro_batch}: step {step} has micro-batches "
                                 f"0..{accum - 1}")
            batches = [b for b in batches if b[1] == micro_batch]
        if not batches:
            return []
        idx = np.concatenate([b[2] for b in batches])
        who = np.concatenate([np.full(len(b[2]), k, dtype=np.int64) for k, b in enumerate(batches)])
        owner, dataset, seq, start, end = self.order.reads(idx)
        out = []
        for o, i, q, a, b in zip(owner.tolist(), dataset.tolist(), seq.tolist(), start.tolist(), end.tolist()):
            r, m, _ = batches[int(who[o])]
            span = self.spans[i]
            d = int(self.seq_doc[i][q])
            base = int(self.seq_offset[i][q])
            out.append(StepRow(r, m, span.start + d, span.path, d, int(idx[o]), (base + a, base + b)))
        return out

    def summary(self, epoch: int = 0) -> dict[str, Any]:
        """The plan's numbers as plain values (what ``datacheck plan`` prints). ``epoch`` is ignored
        (no torch epochs).

        Keys: ``loader`` (``megatron``), ``implementation`` (the lineage assumed: ``megatron-core`` or
        ``legacy``, ``[megatron] implementation``), ``rows`` (documents), ``sequences``, ``shards``, ``split``,
        ``other_splits``, ``world_size`` (data-parallel size), ``batch_size`` (micro-batch size),
        ``grad_accum``, ``global_batch``, ``seq_length``, ``seed``, ``megatron_split``,
        ``train_sequences`` ([begin, end)), ``tokens_per_epoch``, ``train_samples`` (the run asks for),
        ``samples`` (GPTDataset's length), ``data_epochs`` (times the documents repeat),
        ``separate_final_epoch``, ``steps``, ``add_extra_token_to_sequence``, ``dataloader_type``, ``ignored`` (the
        ``[batch]`` keys set in the config that Megatron's order does not read), ``supervised`` (None).
        A blend has no ``sequences``, ``train_sequences``, ``tokens_per_epoch``, ``data_epochs`` or
        ``separate_final_epoch`` of its own: ``blend`` lists them per prefix (with ``prefix``, ``shard``,
        ``weight`` (None unweighted), ``target_samples``, ``samples``), and ``mid_level_dataset_surplus``
        (None unweighted) is added. A run with a batch-size ramp-up adds ``rampup_batch_size`` and
        ``rampup_steps`` (:func:`_ramp_summary`); ``global_batch`` is then the one after the ramp.
        """
        o, b, m = self.order, self.cfg.batch, self.cfg.megatron
        if isinstance(o, BlendedOrder):
            return {
                "loader": "megatron", "implementation": o.implementation, "rows": self.space.n_rows, "shards": len(self.space.shards),
                "split": self.space.split, "other_splits": dict(self.space.other_splits),
                "world_size": b.world_size, "batch_size": b.batch_size, "grad_accum": b.grad_accum,
                "global_batch": o.global_batch, "seq_length": o.seq_length, "seed": o.seed, "megatron_split": m.split,
                "train_samples": o.requested, "samples": len(o), "steps": o.steps, "steps_per_epoch": o.steps,
                "add_extra_token_to_sequence": bool(o.extra), "dataloader_type": o.dataloader,
                "blend": [{"prefix": (self.prefixes or [""])[i], "shard": self.spans[i].path,
                           "weight": None if o.given_weights is None else o.given_weights[i],
                           "target_samples": o.targets[i], "sequences": int(len(d.sizes)),
                           "train_sequences": list(d.train), "tokens_per_epoch": d.tokens_per_epoch,
                           "samples": len(d), "data_epochs": d.epochs, "separate_final_epoch": d.separate_final_epoch}
                          for i, d in enumerate(o.datasets)],
                "mid_level_dataset_surplus": (None if o.given_weights is None else round(LEGACY_BLEND_FACTOR - 1, 12)
                                              if o.implementation == "legacy" else m.mid_level_dataset_surplus),
                "ignored": [k for k in _TORCH_ONLY_KEYS if k in b.model_fields_set], "supervised": None,
                **_ramp_summary(o),
            }
        return {
            "loader": "megatron", "implementation": o.implementation, "rows": self.space.n_rows,
            "sequences": int(len(o.sizes)),
            "shards": len(self.space.shards), "split": self.space.split, "other_splits": dict(self.space.other_splits),
            "world_size": b.world_size, "batch_size": b.batch_size, "grad_accum": b.grad_accum,
            "global_batch": o.global_batch, "seq_length": o.seq_length, "seed": o.seed, "megatron_split": m.split,
            "train_sequences": list(o.train), "tokens_per_epoch": o.tokens_per_epoch, "train_samples": o.requested,
            "samples": len(o), "data_epochs": o.epochs, "separate_final_epoch": o.separate_final_epoch,
            "steps": o.steps, "steps_per_epoch": o.steps, "add_extra_token_to_sequence": bool(o.extra),
            "dataloader_type": o.dataloader,
            "ignored": [k for k in _TORCH_ONLY_KEYS if k in b.model_fields_set], "supervised": None,
            **_ramp_summary(o),
        }


def _ramp_summary(o: MegatronOrder | BlendedOrder) -> dict[str, Any]:
    """A ramp-up's keys of a Megatron plan summary (none without one): ``rampup_batch_size`` ([start,
    increment, samples]) and ``rampup_steps``: per run of steps with one global batch, ``{"first_step",
    "consumed_samples"`` (before it), ``"global_batch"}`` (the last holds for every later step)."""
    r = o.rampup
    if r is None:
        return {}
    return {"rampup_batch_size": [r.start, r.increment, r.samples],
            "rampup_steps": [{"first_step": s, "consumed_samples": c, "global_batch": g} for s, c, g in r.segments]}


def megatron_plan(space: RowSpace, cfg: Config) -> MegatronPlan:
    """Megatron's order (:mod:`datacheck.model.megatronorder`) over the one Megatron pair of ``space``,
    from its ``.idx`` (sequence lengths and document index) and ``[megatron]`` / ``[batch]``.

    Raises:
        UsageError: a fact the order needs is missing (``[megatron] seq_length``, ``train_iters`` or
            ``train_samples``, ``[batch] batch_size``), ``[batch] max_tokens`` is set (Megatron cuts
            fixed-length samples), ``cyclic`` without data sharding, the space holds more
            than one pair and ``[megatron] data_path`` is unset (a blend needs its prefixes and
            weights), a data_path prefix names no planned pair or a planned pair is in no prefix, a
            pair is in an object store, or an ``.idx`` is unreadable.
    """
    m, b = cfg.megatron, cfg.batch
    missing = [k for k, v in (("[megatron] seq_length (--seq-length)", m.seq_length),
                              ("[batch] batch_size (--micro-batch-size)", b.batch_size)) if v is None]
    if m.train_iters is None and m.train_samples is None:
        missing.append("[megatron] train_iters (--train-iters) or train_samples (--train-samples)")
    if missing:
        raise UsageError("the shards are Megatron .bin/.idx pairs, whose step -> rows is Megatron's own order "
                         "(GPTDataset's document, sample and shuffle indices; MegatronPretrainingSampler), and it "
                         f"needs {', '.join(missing)}: set them as the run set them (a torch sampler over the "
                         "documents would name other rows; set [batch] loader = \"torch\" only if the run read the "
                         "documents through torch's samplers)")
    if b.max_tokens is not None:
        raise UsageError("[batch] max_tokens: Megatron's GPTDataset cuts samples of [megatron] seq_length tokens, "
                         "never token budgets; drop max_tokens (or set [batch] loader = \"torch\")")
    if m.dataloader_type == "cyclic" and not m.data_sharding:
        raise UsageError("[megatron] data_sharding = false (--no-data-sharding) with dataloader_type = \"cyclic\": "
                         "that order of MegatronPretrainingRandomSampler is not simulated (with data sharding, "
                         "Megatron's default, it is)")
    prefixes, weights = (None, None) if m.data_path is None else parse_data_path(m.data_path)
    if prefixes is None and len(space.shards) != 1:
        raise UsageError(f"{len(space.shards)} Megatron pairs planned: a run over several prefixes blends them "
                         "(BlendedDataset), and which pairs with which weights is the run's --data-path: set "
                         "[megatron] data_path to its words (e.g. [\"0.3\", \"/data/a_text_document\", \"0.7\", "
                         "\"/data/b_text_document\"]), or plan one .bin/.idx pair")
    spans = list(space.shards) if prefixes is None else _spans_of_prefixes(prefixes, space)
    for span in spans:
        if span.url is not None or span.abs_path is None:
            raise UsageError(f"{span.path}: a Megatron pair in an object store; copy the .bin/.idx locally to plan it")
    read: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for span in spans:
        if span.path in read:
            continue
        try:
            sizes, docs = read_index(Path(span.abs_path or ""))
        except FormatError as exc:
            raise UsageError(f"{span.path}: {exc}") from None
        read[span.path] = (sizes, *_sequence_documents(sizes, docs))
    common = dict(seq_length=int(m.seq_length or 0), seed=m.seed, split=m.split, extra=m.add_extra_token_to_sequence,
                  micro_batch=int(b.batch_size or 0), data_parallel=b.world_size, grad_accum=b.grad_accum,
                  train_iters=m.train_iters, train_samples=m.train_samples, dataloader=m.dataloader_type,
                  rampup_batch_size=None if m.rampup_batch_size is None else tuple(m.rampup_batch_size),
                  implementation=m.implementation)
    order: MegatronOrder | BlendedOrder
    if prefixes is None or (len(prefixes) == 1 and weights is None):
        # Megatron builds a plain GPTDataset for one prefix without a weight (no BlendedDataset); legacy
        # Megatron blends a single weighted prefix too (gpt_dataset.py: only len(data_prefix) == 1 is plain)
        order = build_order(read[spans[0].path][0], **common)  # type: ignore[arg-type]
    else:
        order = build_blend([read[sp.path][0] for sp in spans], weights, surplus=m.mid_level_dataset_surplus,
                            **common)  # type: ignore[arg-type]
    return MegatronPlan(space=space, cfg=cfg, order=order, seq_doc=[read[sp.path][1] for sp in spans],
                        seq_offset=[read[sp.path][2] for sp in spans], spans=spans, prefixes=prefixes)


def _sequence_documents(sizes: np.ndarray, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per sequence of an ``.idx`` (``sizes``, document index ``docs``): its document and its first
    token's position in that document (int64 arrays)."""
    seqs = np.arange(len(sizes), dtype=np.int64)
    seq_doc = np.searchsorted(docs, seqs, side="right") - 1
    cum = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes.astype(np.int64), out=cum[1:])
    return seq_doc, cum[:-1] - cum[docs[seq_doc]]


def _spans_of_prefixes(prefixes: list[str], space: RowSpace) -> list[ShardSpan]:
    """The planned pair of each ``--data-path`` prefix: the shard whose path without ``.bin`` ends
    as the prefix ends, compared component by component from the file name up (the run's folders
    need not be the planned ones: the file name must match, and the most matching components win; a
    prefix may name a pair twice).

    Raises:
        UsageError: a prefix names no planned pair (no file name matches), names two equally well
            (plan fewer pairs or give more of their path), or a planned pair is in no prefix (the run
            does not read it: plan only the blend's pairs).
    """
    keys = {sp.path: PurePosixPath(sp.path[:-4] if sp.path.endswith(".bin") else sp.path).parts for sp in space.shards}

    def common(a: tuple[str, ...], b: tuple[str, ...]) -> int:
        n = 0
        while n < min(len(a), len(b)) and a[len(a) - 1 - n] == b[len(b) - 1 - n]:
            n += 1
        return n

    out: list[ShardSpan] = []
    for prefix in prefixes:
        parts = PurePosixPath(prefix.replace("\\", "/")).parts
        scored = [(common(parts, keys[sp.path]), sp) for sp in space.shards]
        best = max((n for n, _ in scored), default=0)
        hits = [sp for n, sp in scored if n == best]
        if best == 0:
            raise UsageError(f"[megatron] data_path prefix {prefix!r} names none of the planned Megatron pairs "
                             f"({', '.join(sp.path for sp in space.shards[:5])}{' ...' if len(space.shards) > 5 else ''}): "
                             "plan the folder (or the .bin files) of every prefix of the blend")
        if len(hits) > 1:
            raise UsageError(f"[megatron] data_path prefix {prefix!r} names {hits[0].path} and {hits[1].path} equally "
                             "well: give the prefix as more of their path, or plan only the blend's pairs")
        out.append(hits[0])
    unused = [sp.path for sp in space.shards if sp not in out]
    if unused:
        raise UsageError(f"{unused[0]}{f' and {len(unused) - 1} more' if len(unused) > 1 else ''}: planned, but in no "
                         "prefix of [megatron] data_path, so the run does not read it; plan only the blend's pairs")
    return out


def loader_of(space: RowSpace, cfg: Config) -> str:
    """Whose order the plan simulates: ``megatron``, ``accelerate`` or ``torch`` (``[batch] loader``; ``auto``:
    ``megatron`` when every planned shard is a Megatron ``.bin``/``.idx`` pair, ``torch`` when none is).

    Raises:
        UsageError: ``auto`` over a mix of Megatron pairs and other shards (which loader reads them
            cannot be told: set ``[batch] loader``), or ``megatron`` over shards that are not Megatron
            pairs (Megatron's GPTDataset reads only those).
    """
    formats = [sp.format for sp in space.shards]
    meg = [sp.path for sp, f in zip(space.shards, formats) if f == "megatron"]
    other = [sp.path for sp, f in zip(space.shards, formats) if f != "megatron"]
    if cfg.batch.loader in ("torch", "accelerate"):
        return cfg.batch.loader
    if cfg.batch.loader == "megatron":
        if other:
            raise UsageError(f"[batch] loader = \"megatron\", but {other[0]}{f' and {len(other) - 1} more' if len(other) > 1 else ''} "
                             "is not a Megatron .bin/.idx pair: Megatron's GPTDataset reads only indexed datasets")
        return "megatron"
    if meg and other:
        raise UsageError(f"the planned shards mix Megatron .bin/.idx pairs ({meg[0]}) and other shards ({other[0]}): "
                         "set [batch] loader to \"megatron\" or \"torch\" to say which loader the run used")
    return "megatron" if uses_megatron_loader(formats, cfg.batch.loader) else "torch"


def build_plan(paths: list[str], cfg: Config, split: str | None = None, *,
               progress: Callable[[str, int, int], None] | None = None) -> BatchPlan | MegatronPlan:
    """Read the shards' row counts (and supervised tokens per row) and set up the plan: of the split
    ``split`` (default ``train``) when the data has splits (:func:`select_split`). ``progress(shard
    path, shards done, shards)`` is called before each shard is read. Megatron ``.bin``/``.idx`` pairs
    (:func:`loader_of`) get Megatron's own order (:class:`MegatronPlan`), never torch's samplers.

    Raises:
        UsageError: ``[batch] batch_size`` is unset, a shard cannot be read, the split cannot be
            chosen, or a fact of Megatron's order is missing (:func:`megatron_plan`).
        OptionalDependencyError: torch is not installed (when the torch order is first asked for).
    """
    if cfg.batch.batch_size is None and cfg.batch.max_tokens is None:
        raise UsageError("[batch] batch_size is not set: give the trainer's per-device batch size in "
                         "datacheck.toml ([batch] batch_size, world_size, grad_accum, ...), or max_tokens "
                         "for token-budget batching")
    tokens = cfg.batch.max_tokens is not None
    space, sup, lengths, rules = _scan(paths, cfg, supervised=True, lengths=tokens, split=split, progress=progress)
    if loader_of(space, cfg) == "megatron":
        return megatron_plan(space, cfg)
    if tokens and lengths is None:
        raise UsageError("[batch] max_tokens: token-budget batching needs each row's token count, and a shard "
                         "has no input_ids list column (set [columns] input_ids)")
    return BatchPlan(space=space, cfg=cfg, supervised=sup, lengths=lengths, supervision=rules)


def _rows(batches: list[tuple[int, int | None, Any]], space: RowSpace | None) -> list[StepRow]:
    out = []
    for rank, mb, idx in batches:
        for g in (int(x) for x in idx):
            if space is None:
                out.append(StepRow(rank, mb, g, None, None))
            else:
                span, row = space.locate(g)
                out.append(StepRow(rank, mb, g, span.path, row))
    return out


def rows_of_step(plan_or_ledger: BatchPlan | MegatronPlan | Ledger, step: int, *, rank: int | None = None,
                 micro_batch: int | None = None, space: RowSpace | None = None,
                 consumed: int | None = None, own_epochs: bool = False, own_bound: bool = False) -> list[StepRow]:
    """The rows of optimizer step ``step``: every rank and micro-batch (or only ``rank`` /
    ``micro_batch``), in rank order, then micro-batch order, then batch order. A row the sampler
    repeated (wraparound) appears as often as it is loaded.

    Args:
        plan_or_ledger: a :class:`BatchPlan` or :class:`MegatronPlan` (simulated order; global step
            numbers from 0; a Megatron plan's rows carry their sample and token range) or a
            :class:`~datacheck.io.ledger.Ledger` (recorded order; its own step numbers).
        step: the optimizer step.
        rank: only this rank.
        micro_batch: only this micro-batch of the step.
        space: for a ledger, the row space mapping global indices to (shard, row) (a plan has its own);
            without it ``shard`` and ``row`` are None.
        consumed: a Megatron plan only: the samples consumed before the step (its sampler starts
            there: a resumed run whose global batch changed); default ``step x global batch``.

    Raises:
        UsageError: the step (or rank, micro-batch) is not in the plan or ledger; a recorded index is
            outside the row space; ``consumed`` given for another plan or a ledger, or outside the
            Megatron dataset (:meth:`MegatronPlan.step_rows`).
        own_epochs: a :class:`BatchPlan` only: each rank counts its own steps, epoch after epoch (the
            Hugging Face Trainer: nothing joins the processes at an epoch's end; each process's
            ``global_step`` counts its own updates and DDP pairs the ``k``-th of every process): rank
            ``r``'s step ``step`` is in-epoch step ``step - (its steps of the epochs before)`` of the
            epoch its own ``ceil(micro-batches / grad_accum)`` per epoch reach, which differs from the
            plan's epoch when ranks get different counts (accelerate's ``even_batches=False``); no
            ``[batch] epochs`` bound on a rank (a logged step was all-reduced by every rank). False:
            every rank's epoch ``e`` starts at ``e x steps_per_epoch`` (a loop whose processes end an
            epoch together).
        own_bound: with ``own_epochs``, a rank whose own count has passed ``[batch] epochs`` at ``step``
            has no rows there (accelerate's ``even_batches=False`` loop: process 0's last steps have no
            counterpart on a process with fewer; it trained nothing more). A plan whose ranks count their
            own steps (:attr:`BatchPlan.own_steps`) is placed so without either (``own_epochs`` given:
            as it says).
    """
    if isinstance(plan_or_ledger, MegatronPlan):
        return plan_or_ledger.step_rows(step, rank, micro_batch, consumed=consumed)
    if consumed is not None:
        raise UsageError("--consumed-samples applies to Megatron data ([batch] loader = megatron): a torch sampler's "
                         "step is placed by its epoch and step alone")
    if isinstance(plan_or_ledger, BatchPlan):
        if not own_epochs and plan_or_ledger.own_steps:
            own_epochs = own_bound = True
        epoch, s = plan_or_ledger.split_step(step)
        batches: list[tuple[int, int | None, Any]] = (
            _own_epoch_batches(plan_or_ledger, step, own_bound) if own_epochs
            else list(plan_or_ledger.order(epoch).step(s)))
        space = plan_or_ledger.space
    else:
        recorded: list[LedgerBatch] = plan_or_ledger.step(step)
        batches = [(b.rank, b.micro_batch, b.indices) for b in recorded]
    if rank is not None:
        ranks = sorted({b[0] for b in batches})
        batches = [b for b in batches if b[0] == rank]
        if not batches:
            raise UsageError(f"--rank {rank}: step {step} has ranks {ranks[0]}..{ranks[-1]}")
    if micro_batch is not None:
        got = sorted({b[1] for b in batches if b[1] is not None})
        batches = [b for b in batches if b[1] == micro_batch]
        if not batches:
            raise UsageError(f"--micro-batch {micro_batch}: step {step} has micro-batches {got or 'unrecorded'}")
    return _rows(batches, space)


def _own_epoch_batches(plan: BatchPlan, step: int, bound: bool = False) -> list[tuple[int, int | None, Any]]:
    """``(rank, micro_batch, indices)`` of optimizer ``step`` when each rank counts its own steps over its
    own epochs (``rows_of_step(own_epochs=True)``); ``bound``: none of a rank whose own epoch there is
    past ``[batch] epochs``."""
    ga = plan.cfg.batch.grad_accum
    out: list[tuple[int, int | None, Any]] = []
    for r in range(len(plan.order(0).ranks)):
        epoch, k = plan.own_position(step, r)
        if bound and epoch >= plan.cfg.batch.epochs:
            continue
        mbs = plan.order(epoch).ranks[r]
        lo = k * ga
        out.extend((r, m - lo, mbs[m]) for m in range(lo, min(lo + ga, len(mbs))))
    return out


#: the columns ``export_step`` adds in front of the data columns (inspect's export columns, then the plan's)
PLAN_EXPORT_COLUMNS = ("_datacheck_row", "_datacheck_line", "_datacheck_shard", "_datacheck_shard_hash",
                       "_datacheck_checks", "_datacheck_step", "_datacheck_rank", "_datacheck_micro_batch",
                       "_datacheck_global_index")
#: the columns a Megatron plan's export adds after them: the sample's dataset index and the row's
#: tokens ``[start, end)`` it reads (:attr:`StepRow.sample`, :attr:`StepRow.tokens`)
SAMPLE_EXPORT_COLUMNS = ("_datacheck_sample", "_datacheck_token_start", "_datacheck_token_end")


def sample_columns(rows: list[StepRow]) -> dict[str, pl.Series]:
    """The :data:`SAMPLE_EXPORT_COLUMNS` of ``rows`` (Int64, one value per row), or none when no row
    comes from a Megatron plan."""
    if all(r.sample is None for r in rows):
        return {}
    return {"_datacheck_sample": pl.Series([r.sample for r in rows], dtype=pl.Int64),
            "_datacheck_token_start": pl.Series([r.tokens[0] if r.tokens else None for r in rows], dtype=pl.Int64),
            "_datacheck_token_end": pl.Series([r.tokens[1] if r.tokens else None for r in rows], dtype=pl.Int64)}


def export_step(rows: list[StepRow], space: RowSpace, cfg: Config, step: int, out: str | Path) -> tuple[Path, int]:
    """Write the rows of a step to ``out`` (.parquet or .jsonl), in step order, as ``inspect --export``
    writes rows (every data column as read, ``_datacheck_row``, ``_datacheck_line``,
    ``_datacheck_shard``, ``_datacheck_shard_hash``, ``_datacheck_checks`` (empty: not judged here)),
    plus ``_datacheck_step``, ``_datacheck_rank``, ``_datacheck_micro_batch`` and
    ``_datacheck_global_index`` (int64), so the step can be replayed on a fixed batch; rows of a
    :class:`MegatronPlan` add :data:`SAMPLE_EXPORT_COLUMNS` (a document read by two samples is two
    rows, each with its sample and token range). A ``.parquet`` keeps the column types and schema
    metadata the shards' files declare (:func:`datacheck.derive.classlabel.as_declared`).

    Raises:
        UsageError: bad extension, unwritable path, or shards whose columns cannot be combined.
    """
    by_shard: dict[str, list[int]] = {}
    for pos, r in enumerate(rows):
        if r.shard is None or r.row is None:
            raise UsageError("--export needs the data: pass the dataset PATH with --ledger")
        by_shard.setdefault(r.shard, []).append(pos)
    spans = {s.path: s for s in space.shards}
    frames = []
    sources = []
    for shard, positions in by_shard.items():
        span = spans[shard]
        disc = discover([str(span.abs_path)], cfg.dataset.format)
        data = open_for_checks(disc.shards[0], cfg)  # the rows with the dtypes the audit judges
        sources.append(declared_source(disc.shards[0], data.clipped))
        want = pl.DataFrame({
            "__pos": pl.Series(positions, dtype=pl.Int64),
            "_datacheck_row": pl.Series([rows[p].row for p in positions], dtype=pl.Int64),
            "_datacheck_step": pl.Series([step] * len(positions), dtype=pl.Int64),
            "_datacheck_rank": pl.Series([rows[p].rank for p in positions], dtype=pl.Int64),
            "_datacheck_micro_batch": pl.Series([rows[p].micro_batch for p in positions], dtype=pl.Int64),
            "_datacheck_global_index": pl.Series([rows[p].global_index for p in positions], dtype=pl.Int64),
            **sample_columns([rows[p] for p in positions]),
        })
        got = (data.lf.with_row_index("_datacheck_row").with_columns(pl.col("_datacheck_row").cast(pl.Int64))
               .filter(pl.col("_datacheck_row").is_in(want["_datacheck_row"].unique().to_list())).collect())
        lines = data.lines_of(got["_datacheck_row"].to_list())
        got = got.with_columns(
            pl.Series("_datacheck_line", lines if lines else [None] * got.height, dtype=pl.Int64),
            pl.lit(shard, dtype=pl.String).alias("_datacheck_shard"),
            pl.lit(span.content_hash, dtype=pl.String).alias("_datacheck_shard_hash"),
            pl.lit([], dtype=pl.List(pl.String)).alias("_datacheck_checks"),
        )
        frames.append(want.join(got, on="_datacheck_row", how="left"))
    try:
        df = pl.concat(frames, how="diagonal_relaxed").sort("__pos").drop("__pos") if frames else pl.DataFrame()
    except Exception as exc:
        raise UsageError(f"--export: the step's rows cannot go into one file ({str(exc).splitlines()[0]}); "
                         "export one rank at a time (--rank)") from None
    lead = [c for c in (*PLAN_EXPORT_COLUMNS, *SAMPLE_EXPORT_COLUMNS) if c in df.columns]
    df = df.select([*lead, *[c for c in df.columns if c not in lead]])
    table = as_declared(df, sources) if df.width else None  # a .parquet keeps the shards' types and metadata
    return (write_frame_atomic(df, out, (lambda f: pq.write_table(table, f)) if table is not None else None),
            df.height)
