"""Configuration: one frozen, typed tree loaded from ``datacheck.toml`` and validated before any
shard is read. Parsing is TOML (stdlib ``tomllib``); validation is pydantic (unknown keys and wrong
types are errors that name the key). Every key is optional.
"""
from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from datacheck.model import catalog
from datacheck.model.constants import DEFAULT_CONFIG_NAME, DEFAULT_MAX_EXAMPLES, MAX_ROW_BYTES, PYTHON_SCHEMA
from datacheck.model.errors import ConfigError, UsageError
from datacheck.model.layouts import LAYOUTS
from datacheck.model.megatronorder import legacy_split_weights, parse_data_path


def special_kind(path: Path) -> str | None:
    """What ``path`` is when it is not a regular file (a FIFO would block the read); None otherwise."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    return "a FIFO" if stat.S_ISFIFO(mode) else "a folder" if stat.S_ISDIR(mode) else "a device or socket"


__all__ = ["Config", "TraceSection", "random_sampler_problem", "MegatronSection", "PrefSection", "load_config", "config_from_bytes", "config_from_dict", "DEFAULT_CONFIG_NAME"]



#: default ``[dataset] max_member_bytes``: 256 MiB (a tar member, an MDS value, a litdata field)
MAX_MEMBER_BYTES = 256 << 20
#: default ``[dataset] max_record_bytes``: 512 MiB (an MDS sample, a litdata item, a WebDataset sample)
MAX_RECORD_BYTES = 512 << 20
#: default ``[dataset] max_file_bytes``: 4 GiB inflated (a whole-file shard: MDS, WebDataset, litdata)
MAX_FILE_BYTES = 4 << 30
#: the keys that bound reads: part of the config hash only when set to another value than the default
#: (a report made with the defaults keeps the hash it had before they existed)
_LIMIT_KEYS = {"max_member_bytes": MAX_MEMBER_BYTES, "max_record_bytes": MAX_RECORD_BYTES,
               "max_file_bytes": MAX_FILE_BYTES, "max_row_bytes": MAX_ROW_BYTES}
#: the ``[dataset]`` keys left out of the config hash at their default: the reader limits,
#: ``infer_splits`` (the splits it infers enter the hash as ``[splits]``) and ``sample_by`` (added later)
_OUT_OF_HASH_AT_DEFAULT: dict[str, object] = {**_LIMIT_KEYS, "infer_splits": True, "sample_by": "line"}
#: the ``[batch]`` keys added after config hashes were first recorded: at their default they stay out of it
_BATCH_OUT_OF_HASH_AT_DEFAULT: dict[str, object] = {"loader": "auto", "even_batches": True, "split_batches": False,
                                                     "sampler": "distributed", "persistent_workers": False}


#: how many of a declared ClassLabel's names the report's ``label_facts`` lists (the count is always whole)
LABEL_FACT_NAMES = 50
#: the most ids a list of token ids in the config may hold (a response template or the end-of-turn
#: ids are a handful of tokens; a longer list is a mistake, and each id is matched per position)
MAX_ID_LIST = 1024
#: the largest ``[batch]`` sizes: rows per micro-batch and micro-batches per step (2**31 - 1, the
#: int32 bound of samplers' indices), ranks (2**20: beyond any data-parallel run), epochs (the plan
#: and ``batch.*`` simulate each epoch)
MAX_BATCH_ROWS = 2**31 - 1
MAX_WORLD_SIZE = 2**20
MAX_EPOCHS = 100_000


def _path_value(v: str | None) -> str | None:
    """A path written in the config: no NUL character (no file system takes one), not blank."""
    if v is not None and ("\0" in v or not v.strip()):
        raise ValueError("must be a file path (no NUL character, not blank)")
    return v


def _int64_ids(v: list[int] | None) -> list[int] | None:
    """Token ids of the config: each a 64-bit integer (the dtype of every id column)."""
    if v is not None:
        bad = next((x for x in v if not -(2**63) <= x <= 2**63 - 1), None)
        if bad is not None:
            raise ValueError(f"{str(bad)[:30]} is not a 64-bit token id")
    return v


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


Format = Literal["auto", "parquet", "arrow", "jsonl", "json", "csv", "tsv", "text"]


class DatasetSection(_Section):
    """``[dataset]``: how shards are found and parsed."""

    format: Format = "auto"
    index: str | None = None
    separator: str | None = Field(default=None, description="csv/tsv field separator (one character)")
    header: bool = True
    names: list[str] | None = Field(default=None, max_length=1_000_000)
    quote_char: str | None = '"'
    schema_: str | None = Field(default=None, alias="schema")
    layout: str | None = Field(default=None, description="the rows' layout (datacheck checks --layout lists "
                               "each layout's checks); unset: the built-in schema's layout, else recognized")

    @field_validator("layout")
    @classmethod
    def _layout(cls, v: str | None) -> str | None:
        if v is not None and v not in LAYOUTS:
            raise ValueError(f"unknown layout {v!r}; layouts: {', '.join(LAYOUTS)}")
        return v
    max_member_bytes: int = Field(default=MAX_MEMBER_BYTES, gt=0, le=2**40, description=(
        "largest single value a binary-layout reader takes (a tar member, an MDS column value, a litdata "
        "field): a larger one is a decode finding naming it, never read"))
    max_record_bytes: int = Field(default=MAX_RECORD_BYTES, gt=0, le=2**40, description=(
        "largest record (an MDS sample, a litdata item, a WebDataset sample's members together)"))
    max_file_bytes: int = Field(default=MAX_FILE_BYTES, gt=0, le=2**44, description=(
        "largest shard a whole-file reader holds (MDS, WebDataset, litdata; after decompression)"))
    max_row_bytes: int = Field(default=MAX_ROW_BYTES, gt=0, le=2**40, description=(
        "largest row, in bytes, the audit decodes: a parquet row group whose rows hold more on average (its "
        "footer's uncompressed bytes over its rows, all columns, or what a one-entry dictionary expands to), a "
        "longer parquet text value, a parquet list row whose values decode to more, or a longer JSON array element "
        "is decode.unreadable, never decoded; a longer JSONL line is decode.bad_record (clean refuses its shard), "
        "and so is a JSONL line of more JSON values than the bound at 8 bytes a value; a longer CSV/TSV line or "
        "record makes the shard decode.unreadable, never held nor parsed"))
    sample_by: Literal["line", "paragraph", "document"] = Field(default="line", description=(
        "plain-text shards (.txt): what a row is, as Hugging Face datasets' text builder's sample_by: `line` "
        "(a row per line; a blank line is no row: it separates paragraphs and adds no token to packed text), "
        "`paragraph` (the text split on blank lines) or `document` (a row per file); by line and paragraph "
        "the rows are a running text: dup.exact_in_shard, dup.exact_across_shards and dup.split_overlap count a "
        "row only in a stretch of rows, 200 characters or more together, that repeats an earlier stretch in "
        "order (in the shard, in an earlier shard of the split, in the training split); against --against only "
        "rows of 200 characters or more are compared"))
    infer_splits: bool = Field(default=True, description=(
        "with no [splits] and no --against: the splits datasets.load_dataset gives the folder: its dataset card's "
        "configs (data_files), else the Hugging Face Hub's file names (train-*, data/test-*, validation/ ...); "
        "false: the files are one dataset"))

    @field_validator("index", "schema_")
    @classmethod
    def _index_path(cls, v: str | None) -> str | None:
        return _path_value(v)

    @field_validator("separator")
    @classmethod
    def _one_char(cls, v: str | None) -> str | None:
        if v is not None and len(v) != 1:
            raise ValueError(f"must be exactly one character, got {v!r} (use '\\t' for tab)")
        return v

    @field_validator("quote_char")
    @classmethod
    def _quote(cls, v: str | None) -> str | None:
        if v is not None and len(v) > 1:
            raise ValueError(f"must be one character or \"\" (quoting off), got {v!r}")
        return v


StrList = Union[str, list[str]]


class ColumnsSection(_Section):
    """``[columns]``: role = column(s). A role left out is inferred from Hugging Face column names."""

    text: StrList | None = None
    label: str | None = None
    target: StrList | None = None
    features: StrList | None = None
    input_ids: str | None = None
    attention_mask: str | None = None
    labels: str | None = None
    token_type_ids: str | None = None
    aligned: list[list[str]] | None = None
    messages: str | None = None
    assistant_mask: str | None = None
    position_ids: str | None = None
    document_ids: str | None = None
    seq_lens: str | None = None
    cu_seqlens: str | None = None
    chosen: str | None = None
    rejected: str | None = None
    input_lengths: str | None = None


class TokensSection(_Section):
    """``[tokens]``: tokenizer facts. ``vocab_size`` is the embedding rows (ids in ``[0, vocab_size)``).
    With ``tokenizer`` set, ``vocab_size`` and ``pad_token_id`` / ``eos_token_id`` / ``bos_token_id``
    left unset are taken from it before any shard is read (:meth:`Config.with_tokenizer_facts`)."""

    vocab_size: int | None = Field(default=None, gt=0, le=2**63 - 1)
    pad_token_id: int | None = Field(default=None, ge=-(2**63), le=2**63 - 1)
    eos_token_id: int | None = Field(default=None, ge=-(2**63), le=2**63 - 1)
    max_seq_len: int | None = Field(default=None, gt=0, le=2**63 - 1)
    #: unset (None): each shard's side is recognized from its first rows' attention_mask
    #: (:func:`datacheck.derive.layout.padding_side_of`), right when they show both sides, each row
    #: on its own side when none of them is padded
    padding_side: Literal["right", "left"] | None = None
    truncation_side: Literal["right", "left"] = "right"
    type_vocab_size: int | None = Field(default=None, gt=0, le=2**63 - 1, description="token_type_ids range (BERT: 2, RoBERTa: 1)")
    max_position_embeddings: int | None = Field(default=None, gt=0, le=2**63 - 1, description="position_ids range [0, n)")
    bos_token_id: int | None = Field(default=None, ge=-(2**63), le=2**63 - 1)
    eot_token_ids: list[int] | None = Field(default=None, max_length=MAX_ID_LIST,
                                            description="end-of-turn ids (default: [eos_token_id])")
    tokenizer: str | None = Field(default=None, description="a tokenizer file or folder, found as inspect --tokenizer finds it: "
                                  "vocab_size (its ids, added tokens included) and pad/eos/bos_token_id (the tokens its "
                                  "tokenizer_config.json / special_tokens_map.json declare; an eos they name none of from "
                                  "generation_config.json, else config.json) when unset here; a vocab_size "
                                  "below its count is an error; its chat template renders messages and preference pairs")

    @field_validator("tokenizer")
    @classmethod
    def _tokenizer_path(cls, v: str | None) -> str | None:
        return _path_value(v)

    @field_validator("eot_token_ids")
    @classmethod
    def _ids64(cls, v: list[int] | None) -> list[int] | None:
        return _int64_ids(v)

    @property
    def stop_ids(self) -> tuple[int, ...]:
        """The ids that end a turn or a response: ``eot_token_ids`` plus ``eos_token_id`` (either may be unset)."""
        ids = list(self.eot_token_ids or ())
        if self.eos_token_id is not None and self.eos_token_id not in ids:
            ids.append(self.eos_token_id)
        return tuple(ids)


class LabelsSection(_Section):
    """``[labels]``: the label domain. ``ignore_index = false`` unsets the default -100.
    ``shifted`` (bool, default false) says how token labels line up with ``input_ids``: false (the
    Hugging Face convention) ``labels[i]`` belongs to token ``i`` and the model shifts; true
    (nanoGPT, Megatron) ``labels[i]`` is the target predicted at position ``i`` (token ``i+1``), so
    the token at position ``i`` is supervised by ``labels[i-1]``."""

    num_classes: int | None = Field(default=None, gt=0, le=2**31 - 1, description=(
        "class count; at most 2**31 - 1 (no output layer is wider; the check never enumerates it)"))
    classes: list[Union[int, str]] | None = Field(default=None, max_length=2**31 - 1)
    tag_classes: dict[str, list[str]] | None = Field(default=None, description=(
        "token tag column -> its tag names (CoNLL's pos_tags, chunk_tags, ner_tags): each such column's "
        "ids index its own names (labels.out_of_range, labels.unseen_class name the column); filled from "
        "the data's Sequence(ClassLabel) declarations"))
    ignore_index: int | Literal[False] | None = Field(default=-100, ge=-(2**63), le=2**63 - 1)
    shifted: bool = Field(default=False, description=(
        "false: the model shifts labels itself (Hugging Face: labels[i] is the label of input_ids[i]); "
        "true: labels[i] is already the target of position i, i.e. input_ids[i+1] (nanoGPT, Megatron)"))
    target_kind: Literal["regression", "binary"] = "regression"
    ctc_downsample: int = Field(default=1, gt=0, le=2**31 - 1, description="encoder frames per CTC output step")

    @model_validator(mode="after")
    def _one_domain(self) -> "LabelsSection":
        if self.classes is not None and len(set(self.classes)) != len(self.classes):
            raise ValueError("classes: values must be distinct")
        for col, names in (self.tag_classes or {}).items():
            if not names or len(set(names)) != len(names):
                raise ValueError(f"tag_classes.{col}: give at least one tag name, each once")
        if self.classes is not None and self.num_classes is not None and self.num_classes != len(self.classes):
            raise ValueError(f"num_classes = {self.num_classes} but classes names {len(self.classes)} class(es); "
                             "give one of them, or make them agree")
        return self

    @property
    def ignore(self) -> int | None:
        return None if self.ignore_index is False else self.ignore_index


class NumericSection(_Section):
    """``[numeric]``: ``compute_dtype`` decides the overflow threshold of ``finite.fp16_overflow``
    (fp16 65504, IEEE 754 binary16; bf16 3.39e38; fp32 3.40e38). Values above
    ``overflow_warn_fraction`` x that maximum (and not above it) are reported as a warning."""

    compute_dtype: Literal["fp32", "bf16", "fp16"] = "fp32"
    overflow_warn_fraction: float = Field(default=0.5, gt=0, le=1)
    target_scale_warn: float = Field(default=1000.0, gt=0, description="dist.target_scale: |mean| or std above it")


class SftSection(_Section):
    """``[sft]``: supervised fine-tuning. ``response_template_ids`` are the token ids that open an
    assistant turn (TRL's response template); with ``[tokens] eot_token_ids`` they delimit the
    assistant spans when the data has no ``assistant_mask``."""

    response_template_ids: list[int] | None = Field(default=None, min_length=1, max_length=MAX_ID_LIST)

    @field_validator("response_template_ids")
    @classmethod
    def _ids64(cls, v: list[int] | None) -> list[int] | None:
        return _int64_ids(v)


class PrefSection(_Section):
    """``[pref]``: how the preference trainer cuts prompt + response to ``[tokens] max_seq_len``
    (TRL's ``max_length``, LLaMA-Factory's ``cutoff_len``), for the rendered pairs the ``pref.*``
    rules judge (:class:`datacheck.derive.pairs.PairCut`). The keys mirror the trainers' names:

    - ``trainer = "trl"``: TRL's DPOTrainer. Each of prompt + chosen and prompt + rejected is cut at
      ``max_seq_len`` on ``[tokens] truncation_side`` (``right`` = TRL's ``truncation_mode =
      "keep_start"``, the default of TRL >= 0.29; ``left`` = ``"keep_end"``, the default of TRL
      <= 0.28), after TRL <= 0.28's ``max_prompt_length`` (the prompt's last tokens kept; 512 by
      default there, gone in 0.29) and ``max_completion_length`` (each response's first tokens).
    - ``trainer = "llamafactory"``: LLaMA-Factory's pairwise preprocessing: ``infer_seqlen(prompt,
      max(chosen, rejected), cutoff_len)`` splits ``max_seq_len`` between the prompt (its first
      tokens kept) and the responses (their first tokens kept, both to one length);
      ``truncation_side``, ``max_prompt_length`` and ``max_completion_length`` do not apply.

    Not part of ``config_hash`` while every key is at its default."""

    trainer: Literal["trl", "llamafactory"] = Field(default="trl", description=(
        "whose truncation the rendered pairs follow: \"trl\" (DPOTrainer: each sequence cut at max_seq_len on "
        "[tokens] truncation_side, right = truncation_mode keep_start, the TRL >= 0.29 default; left = keep_end, "
        "the TRL <= 0.28 default) or \"llamafactory\" (infer_seqlen splits max_seq_len = cutoff_len between "
        "prompt and responses in proportion to their lengths)"))
    max_prompt_length: int | None = Field(default=None, gt=0, le=2**63 - 1, description=(
        "TRL <= 0.28's DPOConfig.max_prompt_length (its default there: 512; TRL 0.29 removed it): the prompt's "
        "last tokens kept before the sequence is cut at max_seq_len; unset: the prompt is not cut on its own "
        "(TRL >= 0.29)"))
    max_completion_length: int | None = Field(default=None, gt=0, le=2**63 - 1, description=(
        "TRL <= 0.28's DPOConfig.max_completion_length: each response's first tokens kept before the sequence "
        "is cut at max_seq_len; unset: not cut on its own"))

    @model_validator(mode="after")
    def _trl_only(self) -> "PrefSection":
        if self.trainer == "llamafactory":
            given = [k for k in ("max_prompt_length", "max_completion_length") if getattr(self, k) is not None]
            if given:
                raise ValueError(f"{', '.join(given)}: TRL's DPOConfig keys; LLaMA-Factory's infer_seqlen splits "
                                 "[tokens] max_seq_len (its cutoff_len) itself: remove them or set trainer = \"trl\"")
        return self


class ReportSection(_Section):
    """``[report]``: how much of each finding the report keeps."""

    max_examples: int = Field(default=DEFAULT_MAX_EXAMPLES, ge=1, le=10_000)


class PolicyEntry(_Section):
    """One ``[policy]`` entry: severity override, and thresholds under which the finding does not fail."""

    severity: Literal["error", "warn", "info"] | None = None
    max_count: int | None = Field(default=None, ge=0, le=2**63 - 1)
    max_ratio: float | None = Field(default=None, ge=0, le=1)
    ignore: bool = False


class BatchSection(_Section):
    """``[batch]``: the trainer's batching, for the ``batch.*`` checks and ``datacheck plan``.

    The plan is torch's ``DistributedSampler(num_replicas=world_size, rank=r, shuffle=shuffle,
    seed=seed, drop_last=False)`` (the sampler pads by repeating rows: ``batch.wraparound``) under
    ``BatchSampler(batch_size, drop_last=drop_last)`` (the DataLoader's ``drop_last``); one optimizer
    step is ``grad_accum`` micro-batches per rank. ``epochs``: how many epochs the run trains (the
    plan covers epochs ``0 .. epochs-1``; ``set_epoch(e)`` reseeds the shuffle). ``max_tokens``:
    token-budget batching (a micro-batch holds rows until their tokens would exceed it). ``loader``:
    whose order the plan follows; Megatron's (``[megatron]``, :class:`MegatronSection`) reads
    ``batch_size``, ``world_size`` and ``grad_accum`` only; accelerate's (``accelerator.prepare`` of a
    DataLoader: one order of the whole dataset whose batches ``BatchSamplerShard`` deals to the
    ``world_size`` processes, :func:`datacheck.model.order.accelerate_shards`) reads ``even_batches`` and
    ``split_batches`` too. ``sampler = "random"``: a single-process ``DataLoader(shuffle=True,
    generator=torch.Generator().manual_seed(seed))`` (torch's ``RandomSampler``; ``world_size`` 1 only),
    whose generator each epoch's iterator draws its workers' base seed from before the permutation
    (``persistent_workers``: only the first epoch's iterator does; :mod:`datacheck.model.order`).
    """

    batch_size: int | None = Field(default=None, gt=0, le=MAX_BATCH_ROWS, description="rows per micro-batch per device")
    world_size: int = Field(default=1, gt=0, le=MAX_WORLD_SIZE, description="data-parallel ranks")
    grad_accum: int = Field(default=1, gt=0, le=MAX_BATCH_ROWS,
                            description="micro-batches per optimizer step per rank")
    drop_last: bool = False
    seed: int = Field(default=0, ge=-(2**63), le=2**63 - 1, description=(
        "the sampler's seed (64 bits: torch seeds epoch e with seed + e); with `sampler = \"random\"` the seed "
        "of the DataLoader's generator (`torch.Generator().manual_seed(seed)`)"))
    shuffle: bool = True
    epochs: int = Field(default=1, gt=0, le=MAX_EPOCHS)
    max_tokens: int | None = Field(default=None, gt=0, le=2**63 - 1, description="token budget per micro-batch")
    loader: Literal["auto", "torch", "megatron", "accelerate"] = Field(default="auto", description=(
        "whose order `datacheck plan`, `trace` and `order verify` simulate: `torch` (DistributedSampler + "
        "BatchSampler over the rows, dealt row by row to the ranks), `megatron` (Megatron-LM's GPTDataset "
        "samples cut across documents, handed out by MegatronPretrainingSampler: `[megatron]`; `batch_size` is "
        "the micro-batch size, `world_size` the data-parallel size), `accelerate` (a DataLoader passed to "
        "`accelerator.prepare`: one order of all rows, seeded as DistributedSampler(num_replicas=1) or "
        "accelerate's seedable sampler with `seed`, cut into batches that accelerate's BatchSamplerShard deals "
        "whole to the `world_size` processes, batch k to process k % world_size; `even_batches`, "
        "`split_batches`), or `auto`: `megatron` when the planned shards are Megatron .bin/.idx pairs, "
        "`accelerate` in `order verify` when the ledger recorded an accelerate-prepared loader and in `trace` "
        "over a Hugging Face Trainer's log (the Trainer prepares its DataLoader with accelerate), else `torch`"))
    even_batches: bool = Field(default=True, description=(
        "loader `accelerate`: accelerate's `even_batches` (DataLoaderConfiguration; default true): the last "
        "round of batches is completed with rows from the epoch's start, so every process gets as many full "
        "batches (those rows are trained twice in the epoch); false: the last batch stays short and some "
        "processes get one batch fewer"))
    split_batches: bool = Field(default=False, description=(
        "loader `accelerate`: accelerate's `split_batches` (DataLoaderConfiguration; default false): each batch "
        "of the DataLoader (`batch_size` x `world_size` rows) is cut into `world_size` slices of `batch_size`, "
        "slice p to process p, instead of whole batches dealt in turn"))
    sampler: Literal["distributed", "random"] = Field(default="distributed", description=(
        "loader `torch`: the DataLoader's sampler. `distributed` (torch's DistributedSampler, seeded `seed + "
        "epoch` per epoch); `random`: a single-process loop's `DataLoader(ds, batch_size=..., shuffle=True, "
        "generator=torch.Generator().manual_seed(seed))` (torch's RandomSampler over the DataLoader's generator: "
        "each epoch's iterator first draws its workers' base seed from the generator, then the sampler draws "
        "`torch.randperm(rows)` from it and, at the epoch's end, its tail's (empty-sliced) second one, epoch after "
        "epoch); needs `world_size = 1`, `shuffle = true` and no "
        "`max_tokens`. A DataLoader(shuffle=True) without a generator seeds its RandomSampler from torch's "
        "global RNG, which no config can give: record a ledger (`datacheck.torch.record_batches`), which records "
        "each epoch's draw, and `order verify` replays it with no config"))
    persistent_workers: bool = Field(default=False, description=(
        "`sampler = \"random\"`: the DataLoader's `persistent_workers` (with num_workers > 0): its one iterator "
        "is reused, so only the first epoch draws a base seed from the generator before its permutation"))

    @model_validator(mode="after")
    def _accelerate_batches(self) -> "BatchSection":
        if self.loader == "accelerate" and self.max_tokens is not None:
            raise ValueError("loader = \"accelerate\" with max_tokens: accelerate's dealing of token-budget batches "
                             "is not simulated; give batch_size without max_tokens, or loader = \"torch\"")
        problem = random_sampler_problem(self)
        if problem:
            raise ValueError(problem)
        return self


def random_sampler_problem(batch: "BatchSection") -> str | None:
    """Why ``[batch] sampler = "random"`` cannot be simulated with these settings, or None (also None
    for ``sampler = "distributed"``): a RandomSampler DataLoader is one process's (``world_size`` 1),
    shuffles (``shuffle`` true), draws row by row (no ``max_tokens``) and is torch's own (not
    accelerate's: ``loader`` torch, or auto)."""
    if batch.sampler != "random":
        return None
    if batch.world_size != 1:
        return (f"[batch] sampler = \"random\" with world_size = {batch.world_size}: a DataLoader(shuffle=True, "
                "generator=...) is a single process's loader (RandomSampler gives every process all the rows); "
                "for a data-parallel run set sampler = \"distributed\" (DistributedSampler), or record a ledger "
                "(datacheck.torch.record_batches)")
    if not batch.shuffle:
        return ("[batch] sampler = \"random\" with shuffle = false: DataLoader(shuffle=False) uses a "
                "SequentialSampler (the rows in order); leave sampler at \"distributed\" with shuffle = false")
    if batch.max_tokens is not None:
        return ("[batch] sampler = \"random\" with max_tokens: token-budget batching has its own sampler; "
                "leave max_tokens out, or sampler at \"distributed\"")
    if batch.loader in ("accelerate", "megatron"):
        return (f"[batch] sampler = \"random\" with loader = \"{batch.loader}\": the RandomSampler plan is torch's "
                "single-process DataLoader; set loader = \"torch\" (or auto)")
    return None


#: Megatron-LM's ``--split`` when a run gives ``--data-path`` without one (megatron/training/arguments.py,
#: ``validate_args``: ``args.split = "969, 30, 1"``)
MEGATRON_DEFAULT_SPLIT = "969, 30, 1"
#: Megatron-LM's ``--seed`` default (megatron/training/arguments.py, ``_add_initialization_args``)
MEGATRON_DEFAULT_SEED = 1234


class MegatronSection(_Section):
    """``[megatron]``: the facts of a Megatron-LM run that decide its sample order (``[batch] loader``
    ``megatron``; :mod:`datacheck.model.megatronorder`), named as Megatron's arguments. Left out of
    :meth:`Config.hash` while every key is at its default."""

    seq_length: int | None = Field(default=None, gt=1, le=2**31 - 1, description=(
        "Megatron's `--seq-length`: tokens per sample (a sample reads seq_length + 1 tokens when "
        "add_extra_token_to_sequence is true); the plan of a Megatron run needs it"))
    seed: int = Field(default=MEGATRON_DEFAULT_SEED, ge=0, le=2**32 - 1, description=(
        "Megatron's `--seed` (its default 1234): numpy RandomState(seed) shuffles the document and sample "
        "indices of GPTDataset"))
    implementation: Literal["megatron-core", "legacy"] = Field(default="megatron-core", description=(
        "Whose GPT data path the run used: `megatron-core` (Megatron-LM with megatron/core/datasets, the default) "
        "or `legacy` (Megatron-DeepSpeed, BigScience, and Megatron-LM before megatron-core: megatron/data/gpt_dataset.py). "
        "Legacy rounds each --split part on its own (7 sequences in thirds: train 0..2, megatron-core 0..1), always "
        "reads seq_length + 1 tokens, and builds each dataset of a weighted blend for ceil(samples x weight x 1.005) "
        "samples (mid_level_dataset_surplus is megatron-core's); plan and trace say which was assumed"))
    split: str = Field(default=MEGATRON_DEFAULT_SPLIT, min_length=1, max_length=200, description=(
        "Megatron's `--split` (train, valid, test weights; its default \"969, 30, 1\"): the train samples "
        "come from the first train / total of the sequences"))
    train_iters: int | None = Field(default=None, gt=0, le=2**40, description=(
        "Megatron's `--train-iters`: the run's samples are train_iters x global batch, which sets how many "
        "times GPTDataset repeats the documents (its epochs) and so the whole shuffle"))
    train_samples: int | None = Field(default=None, gt=0, le=2**50, description=(
        "Megatron's `--train-samples` (instead of train_iters; the run's steps are train_samples // global batch)"))
    add_extra_token_to_sequence: bool = Field(default=True, description=(
        "GPTDatasetConfig's add_extra_token_to_sequence (default true): a sample reads seq_length + 1 tokens "
        "(inputs and shifted labels) and the next sample starts at its last token"))
    dataloader_type: Literal["single", "cyclic"] = Field(default="single", description=(
        "Megatron's `--dataloader-type`: `single` (MegatronPretrainingSampler, the samples in order) or "
        "`cyclic` (MegatronPretrainingRandomSampler: each pass over the data in torch.randperm order seeded "
        "with the pass number; needs torch)"))
    data_sharding: bool = Field(default=True, description=(
        "Megatron's data sharding of the cyclic sampler (true unless the run passes `--no-data-sharding`, "
        "whose order is not simulated)"))
    data_path: list[str] | None = Field(default=None, min_length=1, max_length=2 * 32766, description=(
        "Megatron's `--data-path` words, as the run gave them: a blend `[\"0.3\", \"/data/a_text_document\", "
        "\"0.7\", \"/data/b_text_document\"]` (weight, prefix pairs) or prefixes only (`[\"/data/a_text_document\", "
        "\"/data/b_text_document\"]`: weighed by their sample counts). Needed when the plan holds several "
        "Megatron pairs; each prefix names the planned pair whose path (without .bin) it ends with"))
    rampup_batch_size: list[int] | None = Field(default=None, min_length=3, max_length=3, description=(
        "Megatron's `--rampup-batch-size START INCR SAMPLES` (with train_samples): the global batch starts at START "
        "and grows by INCR over SAMPLES consumed samples to [batch] batch_size x world_size x grad_accum "
        "(RampupBatchsizeNumMicroBatchesCalculator), so a step's samples start at the sum of the earlier steps' "
        "global batches; trace checks it against the log's consumed samples and global batch size"))
    mid_level_dataset_surplus: float = Field(default=0.005, ge=0, le=1000, description=(
        "Megatron's `--mid-level-dataset-surplus` (megatron-core's default 0.005): each dataset of a weighted "
        "blend is built for ceil(ceil(samples x weight) x (1 + surplus)) samples, which sets its shuffle"))

    @field_validator("split")
    @classmethod
    def _split_weights(cls, v: str, info: ValidationInfo) -> str:
        if info.data.get("implementation") == "legacy":
            # legacy get_train_valid_test_split_: float() of each word between commas (or slashes), cut to 3
            try:
                legacy_split_weights(v)
            except UsageError as exc:
                raise ValueError(f"{str(exc).removeprefix('[megatron] split ')} (implementation = \"legacy\")") from None
            return v
        # Megatron's parse_and_normalize_split: every run of digits and dots is a weight, at most 3
        found = re.findall(r"[.0-9]+", v)
        try:
            weights = [float(x) for x in found]
        except ValueError:
            raise ValueError(f"{v[:60]!r}: expected up to 3 weights, e.g. \"969, 30, 1\"") from None
        if not weights or len(weights) > 3 or sum(weights) <= 0:
            raise ValueError(f"{v[:60]!r}: expected 1 to 3 weights (train, valid, test) with a positive sum, "
                             "e.g. \"969, 30, 1\"")
        return v

    @field_validator("data_path")
    @classmethod
    def _data_path_words(cls, v: list[str] | None) -> list[str] | None:
        # Megatron's get_blend_from_list, checked before any shard is read
        if v is not None:
            try:
                parse_data_path(v)
            except UsageError as exc:
                raise ValueError(str(exc).removeprefix("[megatron] ")) from None
        return v

    @field_validator("rampup_batch_size")
    @classmethod
    def _rampup_numbers(cls, v: list[int] | None) -> list[int] | None:
        # RampupBatchsizeNumMicroBatchesCalculator asserts start and increment > 0; 0 samples divide by zero
        if v is not None and (min(v) <= 0 or max(v) > 2**50):
            raise ValueError(f"{v}: expected [START, INCR, SAMPLES], each above 0 (and at most 2**50), as the run's "
                             "--rampup-batch-size")
        return v

    @model_validator(mode="after")
    def _iters_or_samples(self) -> "MegatronSection":
        if self.train_iters is not None and self.train_samples is not None:
            raise ValueError("give train_iters or train_samples, not both (Megatron refuses both)")
        if self.implementation == "legacy":
            if not self.add_extra_token_to_sequence:
                raise ValueError("add_extra_token_to_sequence = false with implementation = \"legacy\": legacy "
                                 "Megatron's GPTDataset always reads seq_length + 1 tokens (the option is megatron-core's)")
            if self.mid_level_dataset_surplus != 0.005:
                raise ValueError("mid_level_dataset_surplus with implementation = \"legacy\": legacy Megatron builds "
                                 "each dataset of a blend for ceil(samples x weight x 1.005) samples, a fixed factor")
        if self.rampup_batch_size is not None and self.train_iters is not None:
            raise ValueError("rampup_batch_size with train_iters: Megatron asserts \"expected no batch-size rampup for "
                             "iteration-based training\" (a ramp-up run gives train_samples)")
        return self


class DupSection(_Section):
    """``[dup]``: ``dup.near_duplicate`` (MinHash LSH, :mod:`datacheck.checks.dup.near`) runs when
    ``near`` is true (off by default: the costliest pass); rows whose estimated Jaccard similarity of
    5-gram shingles is at or above ``near_threshold`` (default 0.8, CHECKS.md) are near-duplicates."""

    near: bool | None = None
    near_threshold: float = Field(default=0.8, gt=0, le=1)


class TraceSection(_Section):
    """``[trace]``: the thresholds of ``datacheck trace``'s training-dynamics and spike rules
    (:mod:`datacheck.trace.dynamics`, :mod:`datacheck.trace.spikes`). They change what a log is judged
    by, never an audit, so they are left out of :meth:`Config.hash` (the report's ``config_hash``)."""

    spike: str = Field(default="robust", description=(
        "the spike rule when `--spike` is not given: `robust` (2x the median of the last 64 values and "
        "k robust sigmas above it, sigma from the window's residuals (each value minus the median of the 3 before it), "
        "k for a 1% family-wise false alarm rate over the values judged under gaussian or Student-t(4) noise as "
        "the log's residuals show; "
        "judged from the second value, 10x the first, then 2x the largest earlier value until 8 are seen), "
        "`megatron`, `foundry`, `olmo` or `ratio:F:W`"))
    grad_spike_factor: float = Field(default=5.0, gt=1, le=1e6, description=(
        "the robust spike rule's factor over the median for the grad norm (the loss uses 2): the grad norm "
        "swings several-fold in clean runs (gradsnitch flags 8x, trainproof 10x its median)"))
    divergence_factor: float = Field(default=1.5, gt=1, le=100, description=(
        "`log.divergence`: the smoothed loss above this multiple of its best level so far (the lowest smoothed "
        "value plus its expected min-bias under the noise), plus two sigmas of the level (a smoothed value: the "
        "smoothed curve's sigma, of the fewer points the running median holds near the log's start), is diverged (trainproof's MAX_LOSS_DIVERGENCE_RATIO 1.5); not applied to "
        "the first loss (one value is no level)"))
    divergence_sigmas: float = Field(default=3.0, gt=0, le=100, description=(
        "`log.divergence`: or this many robust sigmas of the smoothed loss above its best level, whichever "
        "margin is smaller, but at least `divergence_floor` of the best (the smoothed curve's sigma: the noise "
        "before the point judged, 1.4826 MAD of the loss's second differences / sqrt 6, never under the whole "
        "log's noise relative to the level (the same of log(loss), raised to its one-sided 95% upper bound, "
        "1 + 1.645 x 1.39 / sqrt(n - 2) for n values) times the best, times sqrt(pi / (2w + 1)) "
        "for a running median of w points; against the first loss, the raw noise at the level it is held under)"))
    divergence_floor: float = Field(default=0.1, gt=0, le=10, description=(
        "`log.divergence`: the least margin, relative to the best smoothed loss (a noiseless curve has "
        "0 sigma); gradsnitch's sustained-rise gate is 0.15, losslint's 0.25"))
    divergence_window: float = Field(default=0.1, gt=0, le=1, description=(
        "`log.divergence`: the smoothed loss must stay above its band for this fraction of the logged "
        "points (at least 3) and on 80% of the points to the end of the log, which must hold at least "
        "twice that window"))
    stagnation_improvement: float = Field(default=0.01, gt=0, lt=1, description=(
        "`log.stagnation`: relative improvement of the loss over the window under which the run stalls "
        "(the catalog: 1%; losslint's stagnation_min_improvement)"))
    stagnation_window: float = Field(default=0.2, gt=0, le=1, description=(
        "`log.stagnation`: the window, a fraction of the run's logged points (the catalog: 20%; gradsnitch's frac); "
        "longer where the loss's noise needs it: the medians of its first and last fifths, of f values each, "
        "tell the improvement only when the noise x sqrt 2 x sqrt(pi / (2f + 1)) is at most "
        "`stagnation_improvement` (a run shorter than that window is not judged)"))
    overfit_margin: float = Field(default=0.05, gt=0, le=10, description=(
        "`log.overfit_onset`: the eval loss above its minimum by this fraction (the catalog: 5%)"))
    overfit_evals: int = Field(default=3, ge=1, le=1000, description=(
        "`log.overfit_onset`: consecutive evals above the margin (the catalog: 3; losslint's overfit_min_worsen)"))
    vanishing_ratio: float = Field(default=1e-3, gt=0, lt=1, description=(
        "`log.vanishing_grad`: the grad norm below this fraction of its early median (the catalog: 1e-3; "
        "a grad norm that levels off on a noise floor above it, e.g. 0.5% of its early median, needs a looser "
        "ratio: gradsnitch's GS007 uses 0.05, late over early median)"))
    post_warmup_records: int = Field(default=5, ge=1, le=10_000, description=(
        "`log.post_warmup_spike`: logged records after the learning rate reaches its peak that are watched"))
    warmup_steps: int | None = Field(default=None, ge=1, description=(
        "the run's configured warmup in optimizer steps (`log.lr_per_micro_batch` compares the logged "
        "peak with it and with warmup / `[batch] grad_accum`)"))


class Config(_Section):
    """The whole validated configuration (frozen). Build with :func:`load_config` or :func:`config_from_dict`."""

    dataset: DatasetSection = DatasetSection()
    columns: ColumnsSection = ColumnsSection()
    tokens: TokensSection = TokensSection()
    labels: LabelsSection = LabelsSection()
    numeric: NumericSection = NumericSection()
    #: split name -> a glob, or a list of globs (:func:`datacheck.io.hubsplits.glob_matches`)
    splits: dict[str, str | Annotated[list[str], Field(min_length=1, max_length=MAX_ID_LIST)]] = Field(default_factory=dict)
    policy: dict[str, PolicyEntry] = Field(default_factory=dict)
    batch: BatchSection = BatchSection()
    megatron: MegatronSection = MegatronSection()
    sft: SftSection = SftSection()
    pref: PrefSection = PrefSection()
    report: ReportSection = ReportSection()
    dup: DupSection = DupSection()
    trace: TraceSection = TraceSection()

    @field_validator("policy", mode="before")
    @classmethod
    def _entry_shapes(cls, v: Any) -> Any:
        """Refuse the two shapes TOML reads otherwise than meant, naming the shape to write: an entry
        that is not a table (``"ID" = "warn"``), and a check ID left unquoted (``tokens.out_of_vocab.severity
        = "warn"`` and ``[policy.tokens.out_of_vocab]`` are nested tables ``tokens`` > ``out_of_vocab``
        to TOML: the dot inside an ID must be quoted)."""
        if not isinstance(v, dict):
            return v
        keys = ", ".join(PolicyEntry.model_fields)
        for key, entry in v.items():
            if isinstance(entry, dict):
                # an entry's own values are never tables: a table inside one is the rest of an unquoted ID
                sub, inner = next(((k, x) for k, x in entry.items() if isinstance(x, dict)), (None, None))
                if sub is not None and inner is not None and not catalog.is_known(key):
                    cid = f"{key}.{sub}"
                    example = ", ".join(f"{k} = {json.dumps(x)}" for k, x in inner.items()
                                        if not isinstance(x, dict)) or 'severity = "warn"'
                    hint = "" if catalog.is_known(cid) else f" ({cid!r} is no check ID{catalog.unknown_hint(cid)})"
                    raise ValueError(
                        f"check ID {cid!r} is unquoted, so TOML reads it as nested tables {key!r} > "
                        f"{sub!r}; quote it: \"{cid}\" = {{ {example} }} under [policy], "
                        f"or the header [policy.\"{cid}\"]{hint}")
            elif entry is not None:
                shape = (f"\"{key}\" = {{ severity = {json.dumps(entry)} }}" if entry in ("error", "warn", "info")
                         else f"\"{key}\" = {{ max_ratio = 0.01 }}")
                raise ValueError(
                    f"[policy] \"{key}\" = {json.dumps(entry)}: each entry is a table of {keys}; write {shape}")
        return v

    @field_validator("policy")
    @classmethod
    def _known_ids(cls, v: dict[str, PolicyEntry]) -> dict[str, PolicyEntry]:
        for key in v:
            if not catalog.is_known(key):
                raise ValueError(f"unknown check ID {key!r}{catalog.unknown_hint(key)}")
        return v

    #: the folder of the file this config was loaded from (absolute), or None (built in memory). Not a
    #: key: it is not part of :meth:`hash`, so moving a checkout does not change the config hash.
    _folder: str | None = PrivateAttr(default=None)
    #: the ``[tokens]`` facts :meth:`with_tokenizer_facts` took from the tokenizer (None: none). Not a
    #: key: the values themselves are in ``tokens`` (and in :meth:`hash`).
    _from_tokenizer: dict[str, Any] | None = PrivateAttr(default=None)
    #: the ``[labels]`` facts :meth:`with_declared_classes` took from the data's declared features, or
    #: the note of a declaration it did not take (None: none). Not a key: a filled value is in ``labels``.
    _from_data: dict[str, Any] | None = PrivateAttr(default=None)
    #: whether :meth:`with_declared_classes` filled ``[labels] classes`` from token tags (a
    #: ``Sequence(ClassLabel)``): the data is token classification, its token labels are tag ids
    _classes_of_tags: bool = PrivateAttr(default=False)
    #: (the number of names of the largest declared tag set, the fact's name) bounding a ``labels``
    #: column beside two or more declared tag columns (:meth:`with_declared_tag_classes`); None: none
    _tag_ceiling: tuple[int, str] | None = PrivateAttr(default=None)
    #: where ``[dataset] schema`` was given when not in the config file: ``"--schema"`` (:meth:`with_schema`)
    _schema_flag: str | None = PrivateAttr(default=None)
    #: what gave ``[splits]`` when the config names none (:meth:`with_data_splits`): one of
    #: :data:`SPLIT_SOURCES`' values; None: the config's own (or none)
    _split_source: str | None = PrivateAttr(default=None)

    def with_data_splits(self, splits: dict[str, str | list[str]], source: str, card_note: str | None = None) -> Config:
        """This config with ``[splits] = splits`` the data gave (``source``: ``"dataset_dict"``, a
        ``DatasetDict``'s ``dataset_dict.json``, ``"card_configs"``, the dataset card's ``configs``, or
        ``"hub_names"``, the Hub's file names), which is kept for the config line
        (:meth:`default_changes`), with ``card_note``: why a dataset card's ``configs`` were not used
        (:attr:`datacheck.io.hubsplits.HubSplits.card_note`; the file names gave the splits)."""
        out = self.model_copy(update={"splits": splits})
        out._split_source = SPLIT_SOURCES[source] + (f" (the dataset card set aside: {card_note})"
                                                     if card_note else "")
        return out

    @property
    def split_source(self) -> str | None:
        """What gave ``[splits]`` when the config names none (:meth:`with_data_splits`): a key of
        :data:`SPLIT_SOURCES` (``"dataset_dict"``, ``"card_configs"``, ``"hub_names"``); None when the
        config names them itself, or none."""
        return next((k for k, v in SPLIT_SOURCES.items() if v == self._split_source), None)

    def set_beyond_defaults(self) -> bool:
        """Whether this config sets a key other than by ``--schema`` (:meth:`with_schema`): for a config
        given by no file, one a caller built in memory (a dict or :class:`Config` given to
        :func:`datacheck.audit`)."""
        base = self
        if self._schema_flag is not None:
            base = self.model_copy(update={"dataset": self.dataset.model_copy(update={"schema_": None})})
        return base.hash() != Config().hash()

    def default_changes(self, in_memory: bool = False) -> tuple[str, ...]:
        """What changed the defaults of a config given by no file, as the config line names it
        (:func:`describe_config`): ``--schema``, the splits a ``DatasetDict`` declares or the Hub's file
        names give, the classes a ``ClassLabel`` of the data declares (filled), and ``in_memory``: a
        :class:`Config` or dict given to :func:`datacheck.audit`."""
        out = ["--schema"] if self._schema_flag is not None else []
        if self._split_source is not None:
            out.append(self._split_source)
        if self._from_data is not None and self._from_data.get("filled"):
            out.append("the classes the data's ClassLabel declares")
        if in_memory:
            out.append("a config given in memory")
        return tuple(out)

    @property
    def folder(self) -> str | None:
        """The absolute folder of the config file, or None for a config built in memory."""
        return self._folder

    @property
    def tokenizer_facts(self) -> dict[str, Any] | None:
        """The ``[tokens]`` facts taken from ``[tokens] tokenizer`` (:meth:`with_tokenizer_facts`):
        ``{"tokenizer": the path as written, "facts": {key: value}}`` (only the keys it filled), or
        None when it filled none; the report's ``tokenizer_facts``."""
        return self._from_tokenizer

    def with_tokenizer_facts(self, vocab_size: int | None, ids: dict[str, int], read_from: str) -> Config:
        """This config with the facts of its ``[tokens] tokenizer`` filled where ``[tokens]`` leaves
        them unset: ``vocab_size`` (the ids the tokenizer can produce, added tokens included; None: not known) and the
        ``ids`` of ``pad_token_id`` / ``eos_token_id`` / ``bos_token_id`` the tokenizer declares. A
        value written in the config always wins; which keys were filled is kept
        (:attr:`tokenizer_facts`). ``read_from`` names the tokenizer's file(s) in the message.

        Raises:
            ConfigError: ``[tokens] vocab_size`` is smaller than ``vocab_size``: the tokenizer emits
                ids the embedding has no row for (key ``tokens.vocab_size``; both numbers named). A
                larger one is common (embeddings padded to a multiple of 64) and kept.
        """
        t = self.tokens
        if t.vocab_size is not None and vocab_size is not None and t.vocab_size < vocab_size:
            gap = str(t.vocab_size) if vocab_size - t.vocab_size == 1 else f"{t.vocab_size}..{vocab_size - 1}"
            raise ConfigError(
                f"[tokens] vocab_size = {t.vocab_size} is smaller than the {vocab_size} ids the tokenizer "
                f"{t.tokenizer!r} can produce ({read_from}: its vocabulary plus added tokens): id(s) {gap} would have no "
                f"embedding row. Set [tokens] vocab_size to the model's embedding size (at least {vocab_size}), or "
                "remove it to take the tokenizer's", key="tokens.vocab_size")
        filled: dict[str, int] = {}
        if t.vocab_size is None and vocab_size is not None:
            filled["vocab_size"] = vocab_size
        for key in ("pad_token_id", "eos_token_id", "bos_token_id"):
            if key in ids and getattr(t, key) is None:
                filled[key] = ids[key]
        if not filled:
            return self
        out = self.model_copy(update={"tokens": t.model_copy(update=filled)})
        out._from_tokenizer = {"tokenizer": t.tokenizer, "facts": filled}
        return out

    @property
    def label_facts(self) -> dict[str, Any] | None:
        """The classes the data's own declared features gave (:meth:`with_declared_classes`):
        ``{"column", "num_classes" (the number of names), "names" (the first :data:`LABEL_FACT_NAMES`),
        "source", "filled"}`` (``filled``: taken as ``[labels] classes``) plus ``"note"`` when the config's
        value was kept against a different declaration or the shards disagree; ``"tag_classes"`` and
        ``"tag_notes"`` for the token tag columns declared as ``Sequence(ClassLabel)``
        (:meth:`with_declared_tag_classes`); None when the data declares no ``ClassLabel``; the report's
        ``label_facts``."""
        return self._from_data

    @property
    def classes_of_tags(self) -> bool:
        """True when ``[labels] classes`` holds the tag names a token tag column declares as
        ``Sequence(ClassLabel)`` (:meth:`with_declared_classes` with ``tags=True``): the data's token
        labels are tag ids (token classification)."""
        return self._classes_of_tags

    def with_declared_classes(self, column: str, names: tuple[str, ...] | None, source: str,
                              note: str | None = None, tags: bool = False) -> Config:
        """This config with ``[labels] classes = names`` (so ``len(names)`` classes) when ``[labels]``
        gives neither ``num_classes`` nor ``classes``: the classes a Hugging Face ``ClassLabel(names=[...])``
        declaration of the label ``column`` states (``source``: the shard and the metadata it was read
        from). ``classes`` rather than ``num_classes``: integer labels index into the names, as
        ``datasets`` stores them, and a column holding the names themselves (a CSV the card declares,
        which ``load_dataset`` encodes with ``str2int``) is checked against them, never a
        ``schema.dtype`` finding for not being integers. A value written in the config always wins (it is the model's head; the data may declare
        more or fewer classes on purpose): a different count is kept, and the report's ``label_facts``
        carries a ``note`` naming both numbers (rows past the config's count are still
        ``labels.out_of_range``, declared classes no row has still ``labels.unseen_class``).
        ``names`` None: the shards declared no one set of names; ``note`` says why, nothing is filled.
        Which fact was filled, or why not, is kept (:attr:`label_facts`); ``tags``: the names are a
        token tag column's (:attr:`classes_of_tags`)."""
        if names is None:
            out = self.model_copy()
            out._from_data = {"column": column, "source": source, "filled": False, "note": note or ""}
            return out
        lab = self.labels
        k = len(names)
        given = lab.num_classes if lab.num_classes is not None else len(lab.classes) if lab.classes is not None else None
        facts: dict[str, Any] = {"column": column, "num_classes": k, "names": list(names[:LABEL_FACT_NAMES]),
                                 "source": source, "filled": given is None}
        if given is None:
            out = self.model_copy(update={"labels": lab.model_copy(update={"classes": list(names)})})
            out._classes_of_tags = tags
        else:
            out = self.model_copy()
            if given != k:
                key = "num_classes" if lab.num_classes is not None else "classes"
                facts["note"] = (f"[labels] {key} gives {given} class(es) but {source} declares {column!r} as "
                                 f"ClassLabel with {k} names: the config's {given} is used (labels >= {given} are "
                                 f"labels.out_of_range); make them agree if the model's head has {k} outputs")
        out._from_data = facts
        return out

    def with_declared_tag_classes(self, declared: dict[str, tuple[tuple[str, ...], str]],
                                  notes: list[str] | None = None, ceiling: tuple[int, str] | None = None) -> Config:
        """This config with ``[labels] tag_classes[column] = names`` for each token tag column the data
        declares as ``Sequence(ClassLabel(names=[...]))`` (``declared``: column -> (names, where it was
        read)) that ``tag_classes`` does not give: CoNLL-2003's ``pos_tags`` (47 names), ``chunk_tags``
        (23) and ``ner_tags`` (9), each bounding its own column. A column the config gives keeps the
        config's names (a different count is a note). ``notes``: the declarations not taken (the shards
        disagree). What was taken is kept in :attr:`label_facts` under ``"tag_classes"`` (column ->
        ``{"num_classes", "names" (the first :data:`LABEL_FACT_NAMES`), "source", "filled"}``) and
        ``"tag_notes"``; ``self`` when there is nothing to say. ``ceiling``: (a bound, its name) of a
        ``labels`` column beside two or more declared tag columns, the largest set's number of names (a
        label past every declared set is out of range whichever set it was aligned from;
        :meth:`token_label_bound` takes it when ``[labels]`` gives no class count)."""
        if not declared and not notes:
            return self
        lab = self.labels
        given = dict(lab.tag_classes or {})
        tags: dict[str, dict[str, Any]] = {}
        out_notes = list(notes or [])
        for col, (names, where) in sorted(declared.items()):
            mine = given.get(col)
            tags[col] = {"num_classes": len(names), "names": list(names[:LABEL_FACT_NAMES]), "source": where,
                         "filled": mine is None}
            if mine is None:
                given[col] = list(names)
            elif len(mine) != len(names):
                out_notes.append(f"[labels] tag_classes gives {col!r} {len(mine)} name(s) but {where} declares "
                                 f"{len(names)}: the config's {len(mine)} is used")
        out = self.model_copy(update={"labels": lab.model_copy(update={"tag_classes": given or None})})
        facts = dict(self._from_data or {})
        if tags:
            facts["tag_classes"] = tags
        if out_notes:
            facts["tag_notes"] = out_notes
        out._from_data = facts
        out._tag_ceiling = ceiling
        return out

    def tag_column_classes(self, column: str, labels_role: str | None) -> tuple[str, ...] | None:
        """The tag names bounding the token tag ``column`` on its own (``[labels] tag_classes``), or None:
        not given, or ``column`` is the token ``labels`` role (``labels_role``), which ``[labels]
        num_classes`` / ``classes`` bound (:meth:`token_label_bound`)."""
        tc = self.labels.tag_classes
        if not tc or column == labels_role or column not in tc:
            return None
        return tuple(tc[column])

    def class_label_bound(self) -> int | None:
        """The exclusive bound of class label (scalar) values as integer class indices: ``[labels]
        num_classes``, else the number of ``classes`` when they are names (Hugging Face ``ClassLabel``:
        an integer label indexes into them); None when unset or the classes are values (a label must
        then be one of them). The audit's ``labels.out_of_range`` and :class:`datacheck.torch.BatchGuard`
        both use it."""
        lab = self.labels
        if lab.num_classes is not None:
            return lab.num_classes
        if lab.classes and any(isinstance(x, str) for x in lab.classes):
            return len(lab.classes)
        return None

    def token_label_bound(self, layout: str | None) -> tuple[int | None, str]:
        """(the exclusive bound of token label values, the fact it comes from) for rows of ``layout``:
        in ``token_classification`` rows the labels are class ids (NER/POS tags), bounded by
        ``[labels] num_classes`` or the number of ``[labels] classes`` (the ids index the tag names),
        never by the vocabulary; in the other layouts they are token ids, bounded by ``[tokens]
        vocab_size``, else ``num_classes``; the fact's name is ``"the number of classes"`` when the bound is
        ``len(classes)`` (set, or the tag names a ``Sequence(ClassLabel)`` declares). In
        ``token_classification`` rows with neither given, a ``labels`` column beside two or more declared
        tag columns (CoNLL-2003's ``pos_tags`` 47, ``chunk_tags`` 23, ``ner_tags`` 9) is bounded by the
        largest set's number of names, the fact naming that column (:meth:`with_declared_tag_classes`).
        ``(None, name)`` when that fact is unset. The audit's
        ``labels.out_of_range`` and :class:`datacheck.torch.BatchGuard` both use it."""
        lab, tok = self.labels, self.tokens
        if layout == "token_classification":
            if lab.num_classes is None and not lab.classes and self._tag_ceiling is not None:
                return self._tag_ceiling
            if lab.num_classes is not None or not lab.classes:
                return lab.num_classes, "num_classes"
            return len(lab.classes), "the number of classes"
        if tok.vocab_size is not None:
            return tok.vocab_size, "vocab_size"
        return lab.num_classes, "num_classes"

    def anchored(self, value: str) -> str:
        """A path written in the config, resolved as the config file's folder sees it: an absolute path
        or a config built in memory (no file) gives ``value`` unchanged; a relative path is joined to
        the config file's folder (never the working folder: a config travels with its data)."""
        if self._folder is None or Path(value).is_absolute():
            return value
        return str(Path(self._folder) / value)

    def schema_spec(self) -> str | None:
        """``[dataset] schema`` ready to load: a file (``x.yaml``/``.yml``/``.json``, ``x.py:Model``, or
        any value with a ``/`` or ``\\``) anchored at the config file's folder (:meth:`anchored`); a
        built-in layout name (a bare name without a suffix, e.g. ``seq2seq``) as written; None when unset."""
        spec = self.dataset.schema_
        if spec is None:
            return None
        m = PYTHON_SCHEMA.match(spec)
        if m:
            return f"{self.anchored(m.group(1))}:{spec[m.end(1) + 1:]}"
        if Path(spec).suffix.lower() in (".yaml", ".yml", ".json") or "/" in spec or "\\" in spec:
            return self.anchored(spec)
        return spec

    def with_schema(self, spec: str) -> Config:
        """This config with ``[dataset] schema = spec`` given on the command line (``--schema``): a
        relative file there is relative to the working folder, where the user typed it, so it is
        stored absolute; a layout name as given. The config file's folder still anchors ``index``."""
        probe = Config.model_validate({"dataset": {"schema": spec}})
        probe._folder = str(Path.cwd())
        dataset = self.dataset.model_copy(update={"schema_": probe.schema_spec()})
        out = self.model_copy(update={"dataset": dataset})
        out._schema_flag = "--schema"
        return out

    def schema_source(self, config_path: str | None = None) -> str:
        """Where the data contract was given, as an error message names it: ``--schema``, else
        ``<config file>: key 'dataset.schema'`` (``config_path``; "[dataset] schema" without one)."""
        if self._schema_flag is not None:
            return self._schema_flag
        return f"{config_path}: key 'dataset.schema'" if config_path else "[dataset] schema"

    def tokenizer_path(self) -> str | None:
        """``[tokens] tokenizer`` (a tokenizer file or folder) anchored at the config file's folder
        (:meth:`anchored`); None when unset."""
        return None if self.tokens.tokenizer is None else self.anchored(self.tokens.tokenizer)

    def index_file(self) -> str | None:
        """``[dataset] index`` anchored at the config file's folder (:meth:`anchored`); None when unset."""
        return None if self.dataset.index is None else self.anchored(self.dataset.index)

    def hash(self) -> str:
        """sha256 of the canonical JSON of the validated config (sorted keys): the report's ``config_hash``.
        ``[trace]`` is left out: it sets how training logs are judged, not how data is audited; the
        reader limits of ``[dataset]``, ``infer_splits``, ``sample_by``, ``[batch] loader``, ``even_batches``,
        ``split_batches`` and ``[megatron]`` enter only when set to a value other than their default;
        ``[tokens] padding_side`` and ``[labels] tag_classes`` only when set; ``[pref]`` only when a key is not at its default."""
        doc = self.model_dump(mode="json", by_alias=True, exclude={"trace"})
        for key, default in _OUT_OF_HASH_AT_DEFAULT.items():
            if doc["dataset"].get(key) == default:
                del doc["dataset"][key]
        for key, default in _BATCH_OUT_OF_HASH_AT_DEFAULT.items():  # keys added later: a config that leaves
            if doc["batch"].get(key) == default:                      # them at their default keeps its hash
                del doc["batch"][key]
        if doc["labels"].get("tag_classes") is None:  # added later: a config without it keeps its hash
            del doc["labels"]["tag_classes"]
        if doc["tokens"].get("padding_side") is None:  # unset (recognized per shard): not the same audit as "right"
            del doc["tokens"]["padding_side"]
        if doc.get("megatron") == MegatronSection().model_dump(mode="json", by_alias=True):
            del doc["megatron"]
        else:  # keys added later: at their default a config keeps its hash
            if doc.get("megatron", {}).get("rampup_batch_size", 0) is None:
                del doc["megatron"]["rampup_batch_size"]
            if doc.get("megatron", {}).get("implementation") == "megatron-core":
                del doc["megatron"]["implementation"]
        if doc.get("pref") == PrefSection().model_dump(mode="json", by_alias=True):  # added later: a config
            del doc["pref"]                                                             # without it keeps its hash
        blob = json.dumps(doc, sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


def _key_of(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if not (isinstance(p, str) and p in ("str", "list[str]", "int", "function-after"))]
    # pydantic puts union-member names into loc; keep only the user's key path
    keep = []
    for p in parts:
        if p.startswith(("tuple[", "literal[", "bool", "int", "str", "function")):
            continue
        keep.append(p)
    return ".".join(keep) or "(top level)"


def _close_key(section: str | None, name: str) -> str | None:
    """The key of ``section`` (a dotted path of sections; None: the top level) closest in spelling to
    ``name`` (``difflib``, ratio >= 0.75), as written in the file (its alias when it has one); None
    when no key is close or the section is not a fixed set of keys."""
    model: Any = Config
    for part in section.split(".") if section else ():
        field = next((f for n, f in model.model_fields.items() if (f.alias or n) == part), None)
        ann = getattr(field, "annotation", None)
        if get_origin(ann) is dict:  # a table of free names ([policy]: check IDs, dots and all): the rest
            ann = get_args(ann)[1]   # of the section is the name, the keys are those of its values
            if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
                return None
            model = ann
            break
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return None
        model = ann
    keys = [f.alias or n for n, f in model.model_fields.items()]
    near = difflib.get_close_matches(name, keys, n=1, cutoff=0.75)
    return near[0] if near else None


def _union_error(errs: list[Any]) -> Any:
    """The one error to show for a key from its pydantic errors: a value that fits no member of a union
    gives one error per member. The error of a member whose type the value has (an empty list for
    ``str | list[str]``: the list's own rule) when there is one, else every member's message joined
    ("Input should be a valid string or Input should be a valid list")."""
    if len(errs) == 1:
        return errs[0]
    own = [e for e in errs if not str(e["type"]).endswith("_type")]
    if own:
        return own[0]
    return {**errs[0], "msg": " or ".join(dict.fromkeys(str(e["msg"]) for e in errs))}


def config_from_dict(data: dict[str, Any], source: str | None = None) -> Config:
    """Validate a parsed config mapping. Raises :class:`ConfigError` naming the first bad key."""
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        msgs = []
        by_key: dict[str, list[Any]] = {}
        for err in exc.errors():  # a union ([splits]: a glob or a list of globs) gives one error a member
            by_key.setdefault(_key_of(err["loc"]), []).append(err)
        for key, errs in by_key.items():
            err = _union_error(errs)
            if err["type"] == "extra_forbidden":
                section = key.rsplit(".", 1)[0] if "." in key else None
                where = f"in [{section}]" if section else "at the top level"
                near = _close_key(section, key.rsplit(".", 1)[-1])
                msgs.append(f"unknown key {key!r} {where}: remove it or fix its spelling"
                            + (f" (did you mean {near!r}?)" if near else ""))
            else:
                got = repr(err.get("input"))
                msgs.append(f"key {key!r}: {err['msg']} (got {got[:120]}{' ...' if len(got) > 120 else ''})")
        first = _key_of(exc.errors()[0]["loc"])
        raise ConfigError("; ".join(msgs), key=first, path=source) from None


def refuse_python_schema(cfg: Config, source: str) -> None:
    """The rule on code execution: a Python schema file runs only when the user named it
    (``--schema``, a config given with ``--config`` or to the API, ``--allow-python-schema``). A config
    datacheck found by itself (``./datacheck.toml``, next to the data or in its parent) may come with a
    downloaded dataset, so its ``schema = "x.py:M"`` is refused before anything is imported.

    Raises:
        ConfigError: ``dataset.schema`` names a Python file.
    """
    spec = cfg.dataset.schema_
    if spec is not None and PYTHON_SCHEMA.match(spec):
        raise ConfigError(
            f"dataset.schema = {spec!r} is a Python file, and Python schema files execute code; datacheck "
            "never runs code named by a config it found by itself (it may have come with the data). Pass "
            f"this config explicitly with --config {source}, name the schema with --schema, or add "
            "--allow-python-schema if you trust this file", key="dataset.schema", path=source)


def refuse_outside_paths(cfg: Config, source: str) -> None:
    """The rule on files a found config names: a config datacheck found by itself may have come with
    the data, so every file it names (``[tokens] tokenizer``, ``[dataset] schema`` and ``index``)
    must lie inside the config file's own folder once links are resolved; a path outside it (``..``,
    an absolute path elsewhere, a link out) is refused before anything is read.

    Raises:
        ConfigError: a named file lies outside the config's folder (the key is named).
    """
    if cfg.folder is None:
        return
    root = Path(os.path.realpath(cfg.folder))
    for key, value in (("tokens.tokenizer", cfg.tokenizer_path()), ("dataset.index", cfg.index_file()),
                       ("dataset.schema", cfg.schema_spec() if _is_schema_file(cfg.dataset.schema_) else None)):
        if value is None:
            continue
        real = Path(os.path.realpath(value.rpartition(":")[0] if key == "dataset.schema" and PYTHON_SCHEMA.match(value)
                                     else value))
        if real != root and not real.is_relative_to(root):
            raise ConfigError(
                f"{key} names {value!r}, outside the folder of this config ({root}); datacheck reads no file "
                "outside it for a config it found by itself (it may have come with the data). Pass this config "
                f"explicitly with --config {source} if you trust it", key=key, path=source)


def _is_schema_file(spec: str | None) -> bool:
    return spec is not None and (bool(PYTHON_SCHEMA.match(spec)) or Path(spec).suffix.lower() in (".yaml", ".yml", ".json")
                                 or "/" in spec or "\\" in spec)


def load_config(path: str | Path | None = None, *, allow_python_schema: bool = True) -> Config:
    """Load and validate ``datacheck.toml``.

    Args:
        path: the TOML file. None: ``./datacheck.toml`` when present, else the defaults.
        allow_python_schema: False for a config datacheck found by itself (not named by the user):
            a ``dataset.schema`` naming a Python file is then refused (:func:`refuse_python_schema`),
            and so is any file it names outside its own folder (:func:`refuse_outside_paths`).
            A config found for ``path=None`` is always treated so.

    Paths written in the file (``[dataset] schema`` and ``index``) are relative to the file's folder:
    :meth:`Config.schema_spec` and :meth:`Config.index_file` give them resolved.

    Raises:
        ConfigError: the file is missing, is not TOML (or nested too deep), has an unknown key or a
            wrong type, or names a Python schema it may not run.
    """
    if path is None:
        default = Path(DEFAULT_CONFIG_NAME)
        if not default.is_file():
            return Config()
        path = default
        allow_python_schema = False
    path = Path(path)
    if special_kind(path) is not None:
        raise ConfigError(f"not a regular file ({special_kind(path)}): a config is a TOML file", path=str(path))
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError("config file not found; pass an existing file to --config", path=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file: {exc.strerror}", path=str(path)) from None
    return config_from_bytes(raw, path, allow_python_schema=allow_python_schema)


def config_from_bytes(raw: bytes, path: str | Path, *, allow_python_schema: bool = True) -> Config:
    """The config :func:`load_config` gives for a file at ``path`` holding the bytes ``raw`` (the
    whole-audit memo checks that the config an audit ran with is the one whose bytes its key holds).

    Raises:
        ConfigError: as :func:`load_config`.
    """
    path = Path(path)
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"not valid TOML: {exc}", path=str(path)) from None
    except RecursionError:
        raise ConfigError("not a usable TOML file: nested too deep", path=str(path)) from None
    except ValueError as exc:  # tomllib's int() of a number past Python's 4,300-digit limit
        raise ConfigError(f"not a usable TOML file: {str(exc).splitlines()[0]}", path=str(path)) from None
    cfg = config_from_dict(data, source=str(path))
    cfg._folder = str(path.parent.absolute())  # relative paths in the file are relative to its folder
    if not allow_python_schema:
        refuse_python_schema(cfg, str(path))
        refuse_outside_paths(cfg, str(path))
    return cfg


#: :meth:`Config.with_data_splits`'s sources, as the config line names them
SPLIT_SOURCES = {"dataset_dict": "a DatasetDict's declared splits", "card_configs": "the splits the dataset card's configs declare",
                 "hub_names": "the splits the Hub's file names give"}

#: the config line of a report made without a config file under settings other than the defaults,
#: when what changed them is not known (a report read back from JSON, a merged report)
CONFIG_CHANGED_LINE = ("config: none (the defaults changed by --schema, a DatasetDict's declared splits, "
                       "the splits the dataset card's configs declare or the Hub's file names give, the classes the data's ClassLabel declares "
                       "or a config given in memory)")


def describe_tokenizer_facts(facts: dict[str, Any] | None) -> str:
    """The facts a report's ``tokenizer_facts`` says came from the tokenizer, as one phrase:
    ``"[tokens] vocab_size = 49153, pad_token_id = 49152 from the tokenizer 'tok'"``; ``""`` for None."""
    if not facts:
        return ""
    keys = ", ".join(f"{k} = {v}" for k, v in facts.get("facts", {}).items())
    return f"[tokens] {keys} from the tokenizer {facts.get('tokenizer')!r}"


def describe_label_facts(facts: dict[str, Any] | None) -> str:
    """The class count a report's ``label_facts`` says came from the data, as one phrase:
    ``"[labels] classes = the 2 ClassLabel names of 'label' in train.parquet (...)"``, or its note
    when the config's value was kept or nothing was taken; ``""`` for None."""
    if not facts:
        return ""
    tags = facts.get("tag_classes") or {}
    filled = [f"{c!r} {t.get('num_classes')}" for c, t in tags.items() if t.get("filled")]
    tag_text = "; ".join(
        ([f"[labels] tag_classes = the Sequence(ClassLabel) names of {', '.join(filled)}"] if filled else [])
        + [str(n) for n in facts.get("tag_notes") or ()])
    if facts.get("note"):
        head = str(facts["note"])
    elif facts.get("filled"):
        head = (f"[labels] classes = the {facts.get('num_classes')} ClassLabel names of {facts.get('column')!r} "
                f"in {facts.get('source')}")
    else:
        head = ""
    return "; ".join(t for t in (head, tag_text) if t)


def describe_config(source: str | None, config_hash: str | None = None,
                    changes: tuple[str, ...] | None = None) -> str:
    """The line each command prints at the top of its output: ``"config: <file>"``; without a file
    ``"config: none (defaults)"``, or :data:`CONFIG_CHANGED_LINE` when ``config_hash`` (a report's) is not that
    of the defaults: without a file the defaults were changed by ``--schema``, by the splits a Hugging Face
    ``DatasetDict`` folder declares or the shards' names give (``[dataset] infer_splits``), by the classes
    a ``ClassLabel`` of the data declares (the report's ``label_facts``), or a :class:`Config`
    or dict was passed to :func:`datacheck.audit` (the report
    does not say which; it was "given in memory", which misled a CLI user who had given none).
    ``changes`` (:meth:`Config.default_changes`, the report's in-memory ``config_changes``) names
    those that did: ``"config: none (the defaults changed by the splits the Hub's file names give)"``;
    None: not known, every possibility is named."""
    if source:
        return f"config: {source}"
    if config_hash is not None and config_hash != Config().hash():
        if changes:
            said = changes[0] if len(changes) == 1 else f"{', '.join(changes[:-1])} and {changes[-1]}"
            return f"config: none (the defaults changed by {said})"
        return CONFIG_CHANGED_LINE
    return "config: none (defaults)"
