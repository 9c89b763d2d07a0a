"""The data side of a trace: log step -> optimizer step -> global rows (a recorded ledger or the
simulated batch plan), those rows read through the one read path, audited with every check, and
exported for a fixed-batch replay. :func:`trace_data` is the whole leg (the CLI only calls it).

One :class:`DatasetIndex` per trace: the shards are discovered once, each hashed once (the data's
``index_hash``, compared with the identity the run logged) and opened once through
:func:`datacheck.derive.read.open_for_checks` (its row count, and with ``[batch] max_tokens`` its
rows' token counts, in one query); the batch plan is built on that index's row space and the row
audit reads the step's rows from the shards it already opened.

Step numbers: a log numbers steps its trainer's way (:mod:`datacheck.trace.steps`); the plan and
datacheck's ledger number optimizer steps from 0; OLMo's ``data-indices`` from 1 (its
``global_step``). Log step ``N`` is optimizer step ``N - first_step``, the plan's step of that
number, and ledger step ``N - first_step`` (datacheck) or ``N - first_step + 1`` (OLMo).

Global row index = position in the dataset's shards concatenated in discovery order (sorted
relative paths, :func:`datacheck.formats.discovery.discover`; of the ``train`` split when the data
has splits, as the plan orders them), 0-based, as a map-style dataset over those shards numbers
its samples. Every row the output names carries that index, its shard and its row in the shard.
"""
from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import polars as pl
import pyarrow.parquet as pq

from datacheck.checks.batch import tokens_expr
from datacheck.checks.registry import RowsKey
from datacheck.derive.classlabel import DeclaredSource, as_declared, declared_source, with_declared_classes
from datacheck.derive.read import CheckInput, open_for_checks
from datacheck.derive.tokenizer import with_tokenizer_facts
from datacheck.engine.shard import audit_frame
from datacheck.execute.plan import (
    PLAN_EXPORT_COLUMNS,
    SAMPLE_EXPORT_COLUMNS,
    BatchPlan,
    MegatronPlan,
    RowSpace,
    ShardSpan,
    StepRow,
    loader_of,
    megatron_plan,
    rows_of_step,
    sample_columns,
    select_split,
    split_shard_counts,
)
from datacheck.execute.setup import with_declared_splits
from datacheck.formats.discovery import discover
from datacheck.formats.registry import hash_shard
from datacheck.io.discover import DiscoveredShard
from datacheck.io.hashing import hash_file, index_hash
from datacheck.io.ledger import Ledger, read_ledger, step_indices, tear_label
from datacheck.io.outputs import write_frame_atomic
from datacheck.io.shardbytes import Unreadable
from datacheck.model.config import Config
from datacheck.model.errors import OutOfMemory, UsageError
from datacheck.model.findings import Example, Finding, Severity
from datacheck.model.identity import compare_identity
from datacheck.model.megatronorder import MegatronOrder, Rampup, legacy_train_range, lineage_words, train_range
from datacheck.model.order import steps_text
from datacheck.model.roles import is_list
from datacheck.report.policy import apply_policy
from datacheck.trace.readers import HF_SUMMARY, pydict
from datacheck.trace.readers.fields import LIGHTNING_LAYOUT_WHY, LIGHTNING_WHY
from datacheck.trace.readers.hfstate import HF_STATE_WHY
from datacheck.trace.readers.megatron import CORE, LEGACY
from datacheck.trace.record import ReadStats
from datacheck.trace.run import TraceResult
from datacheck.trace.steps import OLMO_LEDGER_FIRST_STEP, StepConvention

__all__ = ["StepRows", "logs_loader", "unlogged_tail", "crash_tail", "crash_texts", "with_in_flight", "micro_batch_rows", "ledger_grad_accum", "ledger_rows", "ledger_gaps", "plan_rows", "ledger_step_rows",
           "RowAudit", "audit_step_rows",
           "DatasetIndex", "export_rows", "trace_data", "plan_steps_per_epoch", "plan_epoch_micro_batches",
           "ledger_epoch_micro_batches",
           "MAX_AUDITED_STEPS", "EXPORT_COLUMNS",
           "KEEP_OPENED"]

#: columns of an export, in front of the data columns: the plan's (and inspect's) export columns,
#: then the log's step number
EXPORT_COLUMNS = (*PLAN_EXPORT_COLUMNS, "_datacheck_log_step")
#: steps one trace audits at most (``--step`` narrows a longer window)
MAX_AUDITED_STEPS = 1000
#: opened shards a dataset index keeps for the row audit (the rest are opened again when needed)
KEEP_OPENED = 256

#: log step -> the step's rows (every rank, micro-batch order, batch order)
StepRows = dict[int, list[StepRow]]


def ledger_rows(folder: str | Path, steps: Iterable[int]) -> tuple[dict[int, dict[int, list[int]]], dict[str, Any]]:
    """The rows of the ledger's own step numbers ``steps`` (``record_batches``' format or OLMo's
    ``data-indices/rank{R}.tsv.gz``), read by the one ledger reader
    (:func:`datacheck.io.ledger.read_ledger`, which needs no torch), as ``{step: {rank: [global
    rows]}}``. A step recorded twice (a resume) keeps its last recording; a rank's micro-batches of
    a step are concatenated in micro-batch order.

    Raises:
        UsageError: no ``rank*.tsv[.gz]`` file in the folder, or a line that is not a ledger line
            (the message names file and line).
    """
    steps = list(steps)
    led = read_ledger(folder, steps)
    rows = {s: {r: ix.tolist() for r, ix in per.items()} for s, per in step_indices(led).items()}
    src = _ledger_source(led)
    gaps = ledger_gaps(led, steps, rows)
    src.update(gaps=gaps, description=src["description"] + "".join(f"; {g}" for g in gaps))
    return rows, src


def _ledger_source(led: Ledger) -> dict[str, Any]:
    return {"kind": "ledger", "folder": str(led.folder), "format": led.format,
            "first_step": OLMO_LEDGER_FIRST_STEP if led.format == "olmo" else 0,
            "truncated": list(led.truncated),
            "description": f"the recorded ledger {led.folder} ({led.format} format)"}


def ledger_gaps(led: Ledger, steps: list[int], rows: Mapping[int, Mapping[int, Sequence[int]]]) -> list[str]:
    """What the ledger lacks for ``steps``, said in words: a torn file (its cut write dropped), a
    rank's last step recorded with fewer micro-batches than ``grad_accum``, asked steps no rank
    recorded, and ranks that did not record an asked step that other ranks did (a rank of the run's
    ``num_replicas`` whose ledger file is absent included)."""
    out = [f"{Path(f).name} {tear_label(led.tears.get(f, 'torn'))}: {led.tears.get(f, 'torn')}"
           for f in led.truncated]
    for rank, (step, got, ga) in sorted(led.partial.items()):
        if step in steps:
            out.append(f"rank {rank} recorded {got} of {_ga_text(ga)} of step {step} (the run stopped mid-step): "
                       "the step's rows are short")
    missing = [s for s in steps if s not in rows]
    if missing:
        out.append(f"step(s) {', '.join(map(str, missing[:10]))}{' ...' if len(missing) > 10 else ''} not recorded "
                   f"(the ledger's steps end at {max(led.steps) if led.steps else 'none'})")
    for s in steps:
        lacking = [r for r in led.world_ranks if s in rows and r not in rows[s]]
        if lacking:
            out.append(f"step {s}: rank(s) {', '.join(map(str, lacking))} recorded no batch of it")
    return out


def _ga_text(ga: int) -> str:
    return f"{ga} micro-batch{'es' if ga != 1 else ''}"


def _facts_text(cfg: Config) -> str:
    b = cfg.batch
    size = (f"max_tokens {b.max_tokens}" + (f" (at most {b.batch_size} rows)" if b.batch_size else "")
            if b.max_tokens is not None else f"batch_size {b.batch_size}")
    return (f"{size} x world_size {b.world_size} x grad_accum {b.grad_accum}, drop_last {str(b.drop_last).lower()}, "
            f"shuffle {str(b.shuffle).lower()}, seed {b.seed}, epochs {b.epochs}")


#: the step counts that mark a log as the Hugging Face Trainer's (its ``trainer_state.json``, its console dicts)
HF_TRAINER_COUNTS = (HF_STATE_WHY, pydict.HF_WHY)
#: why a Hugging Face Trainer's log is planned as accelerate deals batches (the plan's source says it)
HF_TRAINER_LOADER_WHY = ("the Hugging Face Trainer's order: its DataLoader goes through accelerator.prepare "
                         "(Trainer.get_train_dataloader), whose BatchSamplerShard deals whole batches of one seeded "
                         "order, batch k to process k % world_size ([batch] loader = \"accelerate\"; [batch] "
                         "loader = \"torch\" for a Trainer from before transformers moved its DataLoader to "
                         "accelerate in mid-2023, which used torch's DistributedSampler)")


def logs_loader(logs: Iterable[ReadStats], cfg: Config) -> tuple[str | None, str | None]:
    """The loader the logs name when ``[batch] loader`` is ``auto``: ``accelerate`` when every log is
    a Hugging Face Trainer's (a ``trainer_state.json`` or its console dicts: :func:`_hf_trainer_log`)
    and the batches are rows (no ``max_tokens``): transformers' Trainer passes its
    DataLoader to ``accelerator.prepare`` (since mid-2023), so over several processes whole batches are dealt in turn,
    not rows (torch's ``DistributedSampler``). Else ``(None, None)`` (the config's loader rules; also with
    ``[batch] sampler = "random"``: the user named a plain torch DataLoader).

    Returns:
        (the loader, why: :data:`HF_TRAINER_LOADER_WHY`), or ``(None, None)``.
    """
    stats = list(logs)
    if cfg.batch.loader != "auto" or cfg.batch.max_tokens is not None or cfg.batch.sampler != "distributed" or not stats:
        return None, None
    if all(_hf_trainer_log(st) for st in stats):
        return "accelerate", HF_TRAINER_LOADER_WHY
    return None, None


def _hf_trainer_log(st: ReadStats) -> bool:
    """The log is a Hugging Face Trainer's: its step count says so (:data:`HF_TRAINER_COUNTS`), or every
    line read is the Trainer's console dicts (its run summary included), whose records may carry only
    an epoch before they are placed."""
    if st.first_step_why in HF_TRAINER_COUNTS:
        return True
    return pydict.NAME in st.line_formats and set(st.line_formats) <= {pydict.NAME, HF_SUMMARY}


@dataclass
class DatasetIndex:
    """The dataset of one trace, read once: its shards (of the planned split), each hashed and opened
    once, their row counts and the global index of their first row.

    Attributes:
        root: the folder the shards' relative paths start from.
        shards: the shards in the global order (the ``train`` split's when the data has splits).
        starts, rows: per shard, the global index of its first row and its row count.
        hashes: content hash of every discovered shard (all splits), by relative path.
        opened: per shard, the shard as the checks read it (the row audit reads its rows from it); the
            first :data:`KEEP_OPENED` shards are kept, a later one is None and opened again when a
            step's rows are in it (an opened line-format shard may hold its row -> line table).
        lengths: tokens per global row (int64; with ``[batch] max_tokens``), else None.
        split, other_splits: the split planned (None without splits) and the others' shard counts.
        cfg: the config.
        loader, loader_why: the loader the logs name (:func:`logs_loader`: ``accelerate`` for a Hugging
            Face Trainer's logs while ``[batch] loader`` is ``auto``) and why, else None: the plan then
            follows ``[batch] loader``.
    """

    root: Path
    shards: list[DiscoveredShard]
    starts: list[int]
    rows: list[int]
    hashes: dict[str, str]
    opened: list[CheckInput | None]
    cfg: Config
    lengths: np.ndarray | None = None
    split: str | None = None
    other_splits: dict[str, int] = field(default_factory=dict)
    loader: str | None = None
    loader_why: str | None = None

    @classmethod
    def build(cls, paths: list[str], cfg: Config) -> "DatasetIndex":
        """Discover the shards, hash every one, open the planned split's shards (each once) and count
        their rows (and, with ``[batch] max_tokens``, their rows' tokens) in one query per shard.

        Raises:
            UsageError: no shard found, a shard cannot be read (its rows cannot be numbered), or the
                data has splits and none is ``train`` (:func:`datacheck.execute.plan.select_split`);
                ``[tokens] tokenizer`` cannot be loaded (its facts fill the ``[tokens]`` keys the
                config leaves unset, as the audit's: :func:`datacheck.derive.tokenizer.with_tokenizer_facts`).
                The classes the data declares fill ``[labels] classes`` / ``tag_classes`` as the audit's do
                (:func:`datacheck.derive.classlabel.with_declared_classes`).
        """
        cfg = with_tokenizer_facts(cfg)
        disc = discover(paths, cfg.dataset.format)
        # the splits and classes the data declares (DatasetDict, ClassLabel, Sequence(ClassLabel) tags), as
        # the audit takes them (execute/setup.prepare_audit): a step's rows are judged against the same
        # [labels] classes and tag_classes, and the config's hash is the gate report's config_hash
        cfg = with_declared_classes(with_declared_splits(cfg, disc), disc)
        chosen, split, where = select_split(disc, cfg, None)
        hashes = {ds.rel: (hash_shard(ds.source, ds.format, bytes_only=True)[0] if ds.url is not None
                           else hash_file(ds.path)[0]) for ds in disc.shards}
        want_len = cfg.batch.max_tokens is not None
        starts: list[int] = []
        rows: list[int] = []
        opened: list[CheckInput | None] = []
        lens: list[np.ndarray] = []
        n = 0
        for ds in chosen:
            try:
                data = open_for_checks(ds, cfg)
                ids = data.roles.input_ids
                exprs = [pl.len().alias("n")]
                has_len = want_len and ids is not None and is_list(data.schema[ids])
                if has_len:
                    exprs.append(tokens_expr(cfg, str(ids)).implode().alias("len"))
                known = data.stream.size([])[0] if data.stream is not None and not has_len else None
                df = None if known is not None else data.lf.select(exprs).collect()
            except Unreadable as exc:
                OutOfMemory.check(exc, ds.rel)
                raise UsageError(f"{ds.rel}: unreadable ({exc.reason}): its rows cannot be numbered; "
                                 "run datacheck audit on the data first") from None
            k = int(known) if known is not None else int(df["n"][0])  # type: ignore[index]
            if want_len:
                if not has_len:
                    raise UsageError("[batch] max_tokens: token-budget batching needs each row's token count, and "
                                     f"{ds.rel} has no input_ids list column (set [columns] input_ids)")
                lens.append(np.asarray(df["len"][0].to_numpy(), dtype=np.int64))  # type: ignore[index]
            starts.append(n)
            rows.append(k)
            opened.append(data if len(opened) < KEEP_OPENED else None)
            n += k
        splits = dict(cfg.splits) or disc.declared_splits(cfg.dataset.infer_splits)
        others = {} if split is None else split_shard_counts(disc, cfg, where, [s for s in splits if s != split])
        return cls(root=disc.root, shards=list(chosen), starts=starts, rows=rows, hashes=hashes, opened=opened,
                   cfg=cfg, lengths=(np.concatenate(lens) if lens else np.zeros(0, dtype=np.int64)) if want_len
                   else None, split=split, other_splits=others)

    @property
    def total(self) -> int:
        return sum(self.rows)

    def index_hash(self) -> str:
        """The data's ``index_hash`` over every discovered shard (as the audit report records it)."""
        return index_hash(sorted(self.hashes.items()))

    def space(self) -> RowSpace:
        """The global row order as the plan takes it."""
        return RowSpace(tuple(ShardSpan(ds.rel, self.hashes[ds.rel], k, s, ds.source, ds.format, ds.url)
                              for ds, k, s in zip(self.shards, self.rows, self.starts)),
                        self.root, self.split, dict(self.other_splits))

    def plan(self) -> BatchPlan | MegatronPlan:
        """The simulated batch plan over this index (no shard read again; a Megatron pair's ``.idx``
        is read for its sequence lengths): Megatron's own order over Megatron ``.bin``/``.idx``
        pairs (:func:`datacheck.execute.plan.loader_of`), else torch's samplers.

        Raises:
            UsageError: ``[batch]`` has neither ``batch_size`` nor ``max_tokens``, or a fact of
                Megatron's order is missing (:func:`datacheck.execute.plan.megatron_plan`).

        A loader the logs name (:attr:`loader`) is planned unless the shards are Megatron pairs.
        """
        if self.cfg.batch.batch_size is None and self.cfg.batch.max_tokens is None:
            raise UsageError("[batch] batch_size is not set: give the trainer's per-device batch size in "
                             "datacheck.toml ([batch] batch_size, world_size, grad_accum, ...), or max_tokens "
                             "for token-budget batching")
        space = self.space()
        if loader_of(space, self.cfg) == "megatron":
            return megatron_plan(space, self.cfg)
        cfg = self.cfg
        if self.loader is not None and cfg.batch.loader == "auto":
            cfg = cfg.model_copy(update={"batch": cfg.batch.model_copy(update={"loader": self.loader})})
        return BatchPlan(space=space, cfg=cfg, supervised=None, lengths=self.lengths)


def megatron_consumed(consumed: dict[int, int], log_step: int, optimizer_step: int, global_batch: int,
                      ramp: Rampup | None = None, batches: dict[int, int] | None = None) -> tuple[int, str]:
    """Where Megatron's sampler stands before log step ``log_step`` (an iteration: the samples
    consumed before it), from the ``consumed samples`` a Megatron log reports after some iterations
    (``consumed``, :attr:`TraceResult.consumed`): the report at the nearest iteration ``M`` at or
    before the step (else after it), moved by one global batch per iteration between (``global_batch``;
    under a batch-size ramp-up ``ramp``, the ramp's global batch where each iteration starts:
    :meth:`Rampup.advance`); with no report, the samples before optimizer step ``optimizer_step`` of a
    run from its start (``optimizer_step x global_batch``, or the sum over the ramp). Returns (the
    samples, how they were found, in words).

    Raises:
        UsageError: the log contradicts the config: the two reports nearest the step grow by another
            count than ``global_batch`` (or the ramp) gives over their iterations, or a report's ``global
            batch size`` (``batches``, :attr:`TraceResult.global_batches`) is not the one the config
            gives where that iteration started (``consumed samples`` less it); the step cannot be
            reached from the report under the ramp.
    """
    rule = (f"the config's ramp-up ({ramp.words()})" if ramp is not None
            else f"the config's global batch {global_batch}")
    fix = ("set [megatron] rampup_batch_size and [batch] (batch_size x world_size x grad_accum: the global batch after "
           "the ramp) to the run's --rampup-batch-size and --global-batch-size" if ramp is not None else
           "set [batch] (batch_size x world_size x grad_accum) to the run's global batch there; a batch-size "
           "ramp-up (the log's global batch size grows): set [megatron] rampup_batch_size to the run's "
           "--rampup-batch-size (or give --ledger)")

    def advance(c: int, n: int) -> int | None:
        return c + n * global_batch if ramp is None else ramp.advance(c, n)

    def batch_at(c: int) -> int:
        return global_batch if ramp is None else ramp.batch_at(c)

    if not consumed:
        if ramp is not None:
            return ramp.consumed_before(optimizer_step), (
                "the log reports no consumed samples: the samples before each step summed over the ramp-up "
                f"({ramp.words()}) from the run's start")
        return optimizer_step * global_batch, ("the log reports no consumed samples: assumed optimizer step x global "
                                               "batch before each step (a resumed run whose global batch changed "
                                               "needs a log with them, or --ledger)")
    batches = batches or {}
    points = sorted(consumed)
    at = bisect.bisect_right(points, log_step) - 1
    m = points[at] if at >= 0 else points[0]
    near = [points[j] for j in (at - 1, at, at + 1) if 0 <= j < len(points)]
    pair = sorted(near, key=lambda x: abs(x - log_step))[:2]
    if len(pair) == 2:
        a, b = sorted(pair)
        grew, want = consumed[b] - consumed[a], advance(consumed[a], b - a)
        if want != consumed[b]:
            raise UsageError(f"the log's consumed samples grow by {grew} from iteration {a} to {b} ({consumed[a]} -> "
                             f"{consumed[b]}), not {b - a} x the config's global batch {global_batch}: {fix}"
                             if ramp is None else
                             f"the log's consumed samples grow by {grew} from iteration {a} to {b} ({consumed[a]} -> "
                             f"{consumed[b]}), not the {want - consumed[a]} that {rule} gives over those "
                             f"iterations: {fix}")
    for it in sorted({m, *pair}):
        g = batches.get(it)
        if g is not None and (consumed[it] - g < 0 or batch_at(consumed[it] - g) != g):
            c = consumed[it] - g
            raise UsageError(f"the log's global batch size at iteration {it} is {g} (consumed samples {consumed[it]} "
                             f"after it, {c} before), but {rule} gives {batch_at(max(c, 0))} there: {fix}")
    before = advance(consumed[m], log_step - 1 - m)
    if before is None or before < 0:
        raise UsageError(f"no run under {rule} reaches the log's consumed samples {consumed[m]} after iteration {m} "
                         f"from iteration {log_step}: {fix}")
    return before, (f"the samples before iteration {log_step}: {before}, from the log's consumed samples "
                    f"({consumed[m]} after iteration {m})" + (f" and the ramp-up ({ramp.words()})" if ramp else ""))


def _lineage_of(wording: str) -> str:
    return "legacy Megatron's" if wording == LEGACY else "megatron-core's"


def _same_split(a: str, b: str) -> bool:
    """Whether two ``--split`` strings give the same normalised weights (``949,50,1`` and ``94.9, 5,
    0.1`` alike); a string without weights is no split either names."""
    def norm(x: str) -> list[float] | None:
        try:
            w = ([float(v) for v in re.findall(r"[0-9]*\.?[0-9]+", x)] + [0.0, 0.0, 0.0])[:3]
        except ValueError:
            return None
        return [v / sum(w) for v in w] if sum(w) > 0 else None
    na, nb = norm(a), norm(b)
    return na is not None and nb is not None and all(math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)
                                                      for x, y in zip(na, nb))


def megatron_dataset_check(plan: MegatronPlan, logs: list[tuple[str, Any]]) -> tuple[list[str], list[str]]:
    """Hold the simulated order to the dataset lines the run printed while it built its train
    GPTDataset(s) (``logs``: per log, its name and its
    :class:`~datacheck.trace.readers.megatron.DatasetLines`, None for a log without them): the
    ``.idx``'s sequences (legacy ``number of documents``, megatron-core ``total number of
    sequences``) and documents, the train document range (legacy ``get_train_valid_test_split_``),
    the samples, seq_length and seed of the train index map's file name
    (``..._train_indexmap_<ns>ns_<sl>sl_<s>s_doc_idx.npy``), the train dataset's samples (legacy: its
    sample index's rows, the length + 1; megatron-core: its length) and epochs, the train samples
    asked (``datasets target sizes``), megatron-core's config line (seed, sequence_length, split)
    and the arguments block (seed, seq_length, split, train_iters or train_samples, global and micro
    batch, data-parallel size). Splits are compared as normalised weights; a ``None`` split, and any
    split when ``[megatron] split`` gives train every sequence (a ``--train-data-path`` run, given
    as ``data_path`` with split ``"1"``, prints a ``--split`` it does not use), are not compared. A
    build names its prefix; in a blend it is held to the planned pair whose file name is the
    prefix's (a build of another prefix is passed over); one pair and one prefix are held to each
    other whatever their names. A log of several launches (a run restarted or resumed and appended to
    the same file: :meth:`~datacheck.trace.readers.megatron.DatasetLines.launches`) holds each launch
    to the data and config on its own, by its arguments block and its last build of each prefix: a
    contradiction names its launch (``launch 1 of 2 (from line N)``), and so does each agreement
    (the last launch alone had been held, and an earlier launch that read other data passed unsaid).

    Returns:
        (the contradictions, each naming the log line, what it says, what the data and config give,
        and the likely cause; what agreed, in words): both empty when no log holds dataset lines.
    """
    order = plan.order
    datasets = [order] if isinstance(order, MegatronOrder) else list(order.datasets)
    spans = plan.spans
    names = [Path(sp.path).name.removesuffix(".bin") for sp in spans]
    bad: list[str] = []
    good: list[str] = []
    impl = order.implementation

    for source, all_lines in logs:
        if all_lines is None:
            continue
        launches = all_lines.launches()
        for k, lines in enumerate(launches, 1):
            tag = f"launch {k} of {len(launches)} (from line {lines.first_line}): " if len(launches) > 1 else ""
            bad_l, good_l = _launch_check(plan, source, lines, datasets, spans, names, impl)
            bad += [tag + b for b in bad_l]
            good += [tag + g for g in good_l]
    return bad, good


def _launch_check(plan: MegatronPlan, source: str, lines: Any, datasets: list[MegatronOrder], spans: list[ShardSpan],
                  names: list[str], impl: str) -> tuple[list[str], list[str]]:
    """One launch's dataset lines against the plan (:func:`megatron_dataset_check`): (contradictions, agreements)."""
    order = plan.order
    bad: list[str] = []
    good: list[str] = []

    def said(f: Any, source: str = source) -> str:
        return f"{source}:{f[1]} {f[2]!r}"

    run = lines.run
    whole_split = all(float(w) == 0 for w in re.findall(r"[.0-9]+", plan.cfg.megatron.split)[1:])
    if "target" in run and run["target"][0] != order.requested:
        bad.append(f"{said(run['target'])}: the run asked for {run['target'][0]} train samples, the config "
                   f"gives {order.requested} ([megatron] train_iters x global batch {order.global_batch}, or "
                   "train_samples): wrong train_iters / train_samples or global batch")
    elif "target" in run:
        good.append(f"{order.requested} train samples asked")
    for key, want, what in (("seed", order.seed, "[megatron] seed"), ("seq_length", order.seq_length,
                                                                      "[megatron] seq_length"),
                            ("split", plan.cfg.megatron.split, "[megatron] split")):
        if key in run and not (key == "split" and whole_split):
            got = run[key][0]
            same = _same_split(str(got), str(want)) if key == "split" else got == want
            (good if same else bad).append(
                f"{key} {got}" if same else
                f"{said(run[key])}: the run's {key} is {got}, {what} is {want}: wrong {key}")
    args, m = lines.args, plan.cfg.megatron
    for key, want, what, cause in (
            ("seed", order.seed, "[megatron] seed", "wrong [megatron] seed"),
            ("seq_length", order.seq_length, "[megatron] seq_length", "wrong [megatron] seq_length"),
            ("split", m.split, "[megatron] split", "wrong split"),
            ("train_iters", m.train_iters, "[megatron] train_iters", "wrong train_iters"),
            ("train_samples", m.train_samples, "[megatron] train_samples", "wrong train_iters / train_samples"),
            ("global_batch_size", order.global_batch, "the global batch ([batch] batch_size x world_size x "
             "grad_accum)", "wrong [batch] (global batch)"),
            ("micro_batch_size", order.micro_batch, "[batch] batch_size", "wrong [batch] batch_size"),
            ("data_parallel_size", order.data_parallel, "[batch] world_size", "wrong [batch] world_size")):
        if key not in args or (key == "train_iters" and (args.get("train_samples") or (None,))[0] is not None):
            continue  # a --train-samples run's train_iters are computed from them
        if key == "split" and whole_split:
            continue  # a --train-data-path run (given as data_path with split "1") prints --split unused
        got = args[key][0]
        if got is None and key not in ("train_iters", "train_samples"):
            continue  # printed as None: not set (Megatron fills these in before it prints them)
        same = (got is None or _same_split(str(got), str(want))) if key == "split" else got == want
        if not same:
            bad.append(f"{said(args[key])}: the run's --{key.replace('_', '-')} is {got}, {what} is {want}: {cause}")
        elif got is not None and key in ("seed", "seq_length", "global_batch_size"):
            good.append(f"--{key.replace('_', '-')} {got}")
    builds = lines.train_builds()
    for b in builds:
        if len(datasets) == 1 and len(builds) == 1:
            i = 0
        else:
            base = Path(b.prefix).name if b.prefix else None
            i = names.index(base) if base in names else -1
            if i < 0:
                continue
        bad_b, good_b = _build_check(b, datasets[i], spans[i], impl, plan.cfg.megatron.split, said)
        bad += bad_b
        good += good_b
    return bad, good


#: the causes a contradiction names, most fundamental first: another shard explains every other count
_CAUSES = ("wrong shard", "wrong implementation", "wrong split", "wrong [megatron] seq_length", "wrong seq_length",
           "wrong [megatron] seed", "wrong seed", "wrong [batch]", "wrong train_iters")


def _likely_cause(contradicts: list[str]) -> str:
    """The headline cause of :func:`megatron_dataset_check`'s contradictions: the most fundamental
    cause one of them names alone (:data:`_CAUSES`), else the first one's."""
    tails = [part for c in contradicts for part in re.split(r", (?=wrong )", c.rsplit(": ", 1)[-1])]
    for cause in _CAUSES:
        for part in tails:
            if part.startswith(cause) and "," not in part.split("(")[0]:
                return part
    return tails[0]


def _build_check(b: Any, o: MegatronOrder, span: ShardSpan, impl: str, split: str,
                 said: Any) -> tuple[list[str], list[str]]:
    """One build's facts against one prefix's simulated GPTDataset (:func:`megatron_dataset_check`)."""
    bad: list[str] = []
    good: list[str] = []
    f = b.facts
    shard = f"{span.path} ({len(o.sizes)} sequences, {span.rows} documents)"
    wrong_impl = ("; the log's wording is " + _lineage_of(b.wording) + f" and [megatron] implementation is {impl!r}: "
                  "wrong implementation" if (b.wording == LEGACY) != (impl == "legacy") else "")
    if "sequences" in f:
        n = f["sequences"][0]
        if n != len(o.sizes):
            bad.append(f"{said(f['sequences'])}: the run's indexed dataset held {n} sequences, the planned pair "
                       f"{shard} holds {len(o.sizes)}: wrong shard (the run read another .bin/.idx)")
        else:
            good.append(f"{n} sequences" + (" (documents)" if b.wording == LEGACY else ""))
    if "documents" in f:
        n = f["documents"][0]
        if n != span.rows:
            bad.append(f"{said(f['documents'])}: the run's indexed dataset held {n} documents, the planned pair "
                       f"{shard} holds {span.rows}: wrong shard")
        else:
            good.append(f"{n} documents")
    if "train_range" in f:
        got = f["train_range"][0]
        if got != o.train:
            n = f["sequences"][0] if "sequences" in f else len(o.sizes)
            other = (train_range if impl == "legacy" else legacy_train_range)(len(o.sizes), split)
            cause = ("wrong implementation (the other lineage's rounding gives the log's range)" if other == got else
                     "wrong shard (another sequence count)" if n != len(o.sizes) else
                     f"wrong split ([megatron] split {split!r})")
            bad.append(f"{said(f['train_range'])}: the run trained on sequences [{got[0]}, {got[1]}), the data and "
                       f"config give [{o.train[0]}, {o.train[1]}) ({_lineage_of('legacy' if impl == 'legacy' else CORE)} "
                       f"split of {len(o.sizes)} sequences by {split!r}): {cause}")
        else:
            good.append(f"train sequences [{got[0]}, {got[1]})")
    if "index_name" in f:
        ns, sl, seed = f["index_name"][0]
        off: list[tuple[str, str]] = []
        for got, want, what, cause in ((ns, o.requested, "train samples asked",
                                        "wrong train_iters / train_samples or global batch"),
                                       (sl, o.seq_length, "seq_length", "wrong [megatron] seq_length"),
                                       (seed, o.seed, "seed", "wrong [megatron] seed")):
            if got != want:
                off.append((f"{what} {got}, the config gives {want}", cause))
        if off:
            bad.append(f"{said(f['index_name'])}: the run's index map names " + "; ".join(t for t, _ in off) + ": "
                       + ", ".join(c for _, c in off))
        else:
            good.append(f"index map {ns} samples asked, seq_length {sl}, seed {seed}")
    if "samples" in f:
        got = f["samples"][0]
        want = len(o) + 1 if b.wording == LEGACY else len(o)
        unit = "sample-index rows (the dataset's length + 1)" if b.wording == LEGACY else "samples"
        if got != want:
            bad.append(f"{said(f['samples'])}: the run's train dataset held {got} {unit}, the data and config give "
                       f"{want} (seq_length {o.seq_length}, {o.requested} samples asked, {o.tokens_per_epoch} tokens "
                       f"an epoch): wrong shard, split, seq_length or train_iters{wrong_impl}")
        else:
            good.append(f"{got} {unit}")
    if "epochs" in f:
        got = f["epochs"][0]
        if got != o.epochs:
            bad.append(f"{said(f['epochs'])}: the run's train dataset repeated its sequences {got} time(s), the data "
                       f"and config give {o.epochs} epoch(s): wrong shard, split, seq_length or train_iters{wrong_impl}")
        else:
            good.append(f"{got} epoch(s)")
    return bad, good


def trainer_epoch_check(plan: BatchPlan, conv: StepConvention, epochs: Mapping[int, float]) -> str | None:
    """The first logged step whose epoch a Hugging Face Trainer would not have logged over the plan, in
    words, or None when every one agrees.

    The Trainer logs ``epoch + (micro-batch + 1) / steps_in_epoch`` after an update, ``steps_in_epoch``
    being the main process's micro-batches of the FIRST epoch (``len(train_dataloader)``, computed once
    in ``_inner_training_loop``), and runs ``ceil(steps_in_epoch / grad_accum)`` updates an epoch (the
    last on the remainder) whatever a later epoch holds: over the plan, 0-based update ``k`` is in-epoch
    update ``k % U`` of epoch ``k // U`` (``U`` the plan's steps per epoch), its last micro-batch
    ``min((k % U + 1) x grad_accum, M) - 1`` (``M``: rank 0's micro-batches an epoch). A logged epoch
    further from that than the log's rounding (``round(epoch, 2)`` in transformers 4, 4 significant
    digits on the console: 0.005 + 0.05 % of the value) says the run's first epoch held another number
    of micro-batches than the plan's rows give: another dataset (one whose length changes between
    epochs is built at its first epoch's length), or other ``[batch]`` facts. Only the counting is held
    to the log: a run whose epoch 0 matches and whose later epochs changed length logs nothing that
    shows it (the fractions keep the first epoch's count)."""
    o = plan.order(0)
    m = len(o.ranks[0]) if o.ranks else 0
    ga = plan.cfg.batch.grad_accum
    spe = plan.steps_per_epoch
    if m == 0 or spe == 0 or conv.micro_batches > 1:
        return None
    for step in sorted(epochs):
        got = epochs[step]
        k = conv.optimizer_step(step)
        if k < 0:
            continue
        e, u = divmod(k, spe)
        want = e + min((u + 1) * ga, m) / m
        if abs(got - want) > 0.005 + 0.0005 * abs(got) + 1e-9:
            return (f"the log's epoch at log step {step} is {got:g}; the Hugging Face Trainer over the plan would log "
                    f"{want:.4g} (optimizer step {k}: update {u} of epoch {e}, {spe} updates an epoch over {m} "
                    f"micro-batches of {plan.space.n_rows} rows): the run's first epoch held another number of "
                    "micro-batches than the data and [batch] give, so the plan's rows are not the run's (a dataset "
                    "whose length changes between epochs, another dataset, or other [batch] facts)")
    return None


def plan_rows(index: DatasetIndex, steps: Iterable[int], conv: StepConvention,
              consumed: dict[int, int] | None = None,
              global_batches: dict[int, int] | None = None, dataset_lines: list[tuple[str, Any]] | None = None,
              allow_mismatch: bool = False, trainer: bool = False,
              epochs: Mapping[int, float] | None = None,
              relaunches: Sequence[tuple[int, int, str]] = ()) -> tuple[StepRows, dict[str, Any]]:
    """The rows of log steps ``steps`` from the simulated batch plan over ``index`` under ``[batch]``
    (:class:`datacheck.execute.plan.BatchPlan`: torch's ``DistributedSampler`` / ``BatchSampler``, or
    the token-budget sampler with ``max_tokens``; over Megatron ``.bin``/``.idx`` pairs
    :class:`datacheck.execute.plan.MegatronPlan`: Megatron's own samples, each row a document a sample
    reads, with its token range), for a run that trained from scratch with those samplers: log step
    ``N`` is plan step ``conv.optimizer_step(N)``. A Megatron plan's step starts at the samples the
    run had consumed before it (:func:`megatron_consumed`, from the log's ``consumed samples``,
    ``consumed``, checked against the log's ``global batch size``, ``global_batches``, and under
    ``[megatron] rampup_batch_size`` moved by the ramp's global batches), so a resumed run's
    iterations, and a ramp-up run's, are named where its sampler stood. A Megatron plan is held to the
    dataset lines the run printed (``dataset_lines``, per log; :func:`megatron_dataset_check`): what
    agreed is said in the description (and ``source["dataset_lines"]``), a contradiction stops the
    trace unless ``allow_mismatch`` (then ``source["dataset_mismatch"]`` says it). ``trainer``: the logs
    are a Hugging Face Trainer's, whose processes each count their own steps over their own epochs
    (``rows_of_step(own_epochs=True)``: with accelerate's ``even_batches=False`` a process with a batch
    fewer starts its next epoch sooner; the description says so when the ranks' counts differ), held to
    the epochs the log reports at its steps (``epochs``: :func:`trainer_epoch_check`): a contradiction
    stops the trace unless ``allow_mismatch`` (then ``source["dataset_mismatch"]`` says it). A plan of
    accelerate's loader with ``even_batches = false`` (:attr:`~datacheck.execute.plan.BatchPlan.own_steps`) counts each rank's own
    steps over its own epochs too (a loop's processes each count their own, and DDP pairs the ``k``-th
    backward of every process), a rank past ``[batch] epochs`` in its own count having no rows.
    ``relaunches``: a Lightning Trainer's resume points (:func:`lightning_relaunches`); a step a launch
    resumed mid-epoch trained holds another plan step's batch (:func:`lightning_resumed_step`), said in
    the description and ``source["relaunched"]``.

    Returns:
        (the rows of the steps inside the plan, the source: ``{"kind": "plan", "facts",
        "steps_per_epoch", "run_steps", "outside", "description"}``; ``outside`` lists the asked log
        steps the plan does not have; a Megatron plan's ``facts`` add ``megatron``, the ``[megatron]`` keys).

    Raises:
        UsageError: ``[batch]`` has neither ``batch_size`` nor ``max_tokens`` (the message says to set
            them or give ``--ledger``), a fact of Megatron's order is missing (named), no asked step
            is inside the plan, or the log's consumed samples or global batch sizes contradict the
            config's global batch or ramp-up (:func:`megatron_consumed`), or the log's dataset lines
            contradict the data and config (:func:`megatron_dataset_check`; not with ``allow_mismatch``),
            or a Hugging Face Trainer's logged epochs contradict the plan (:func:`trainer_epoch_check`;
            not with ``allow_mismatch``).
        OptionalDependencyError: torch is not installed (the plan is simulated with torch's samplers).
    """
    cfg = index.cfg
    try:
        plan = index.plan()
        spe = plan.steps_per_epoch
    except UsageError as exc:
        raise UsageError(f"{exc}; trace without --ledger takes a step's rows from the simulated batch plan "
                         "([batch] facts), or give --ledger DIR (a recorded order)") from None
    total = plan.run_steps
    megatron = isinstance(plan, MegatronPlan)
    agreed: list[str] = []
    mismatch = None
    if isinstance(plan, MegatronPlan) and dataset_lines:
        contradicts, agreed = megatron_dataset_check(plan, dataset_lines)
        if contradicts:
            mismatch = ("the log's dataset lines contradict the data and config (" + lineage_words(plan.order.implementation)
                        + "'s order over " + ", ".join(sp.path for sp in plan.spans) + "; likely cause: "
                        + _likely_cause(contradicts) + "): " + "; ".join(contradicts))
            if not allow_mismatch:
                raise UsageError(mismatch + "; give the run's data and its [megatron] / [batch] facts, or "
                                 "--allow-data-mismatch to trace anyway")
    if trainer and isinstance(plan, BatchPlan) and epochs and spe:
        said = trainer_epoch_check(plan, conv, epochs)
        if said is not None:
            mismatch = said
            if not allow_mismatch:
                raise UsageError(said + "; give --ledger DIR (DatacheckCallback records each epoch as the Trainer "
                                 "trained it), or --allow-data-mismatch to trace from the plan anyway")
    # accelerate's even_batches=False loop (no Trainer): nothing joins the processes at an epoch's end either;
    # each counts its own steps (its own log's) and DDP pairs the k-th backward of every process
    uneven = isinstance(plan, BatchPlan) and plan.own_steps
    out: StepRows = {}
    outside: list[int] = []
    placed: list[str] = []
    relaunched: dict[str, list[str]] = {}  # per Lightning launch resumed mid-epoch: its steps, said
    for step in steps:
        k = conv.optimizer_step(step)
        if not 0 <= k < total:
            outside.append(step)
            continue
        if isinstance(plan, MegatronPlan):
            o = plan.order
            before, how = megatron_consumed(consumed or {}, step, k, o.global_batch, o.rampup, global_batches)
            if before != o.consumed_before(k):
                how += (f", not optimizer step {k} x global batch {o.global_batch} = {k * o.global_batch}"
                        if o.rampup is None else
                        f", not the {o.consumed_before(k)} of optimizer step {k} of a run from its start under the "
                        "ramp-up") + " (a resumed run whose global batch changed)"
            placed.append(how)
            out[step] = plan.step_rows(k, consumed=before)
        else:
            if relaunches:
                was = k
                k, launch = lightning_resumed_step(k, relaunches, spe, conv)
                if launch is not None:
                    relaunched.setdefault(launch, []).append(f"log step {step} = the plan's optimizer step {k}, not {was}")
            out[step] = rows_of_step(plan, k, own_epochs=trainer)  # an uneven accelerate plan: own steps
    beyond = None  # the asked steps the plan does not have, said with the plan's steps and the data's rows
    if outside:
        length = ("[megatron] train_iters, or train_samples // global batch" if megatron else
                  f"{spe} per epoch x {cfg.batch.epochs} epoch(s), [batch] epochs")
        if conv.micro_batches > 1 and isinstance(plan, BatchPlan):  # the log counts micro-batches: the data's
            mbs = plan.order(0).micro_batches
            length += (f"; {index.total} rows make {mbs} micro-batch(es) per epoch, "
                       f"{conv.micro_batches} per optimizer step")
        asked = steps_text(min(outside), max(outside), "log step")
        last = conv.log_step(total) - 1
        if conv.micro_batches > 1 and total > 0 and not megatron:  # the last step may hold fewer micro-batches
            last = conv.log_step(total - 1) + max((r.micro_batch or 0 for r in rows_of_step(plan, total - 1)), default=0)
        beyond = (f"{asked} {'is' if len(set(outside)) == 1 else 'are'} outside the simulated plan (it has "
                  f"{steps_text(conv.log_step(0), last, 'log step')}: {length}"
                  + ("; 0 steps per epoch: fewer rows than one micro-batch with drop_last, or no rows"
                     if spe == 0 and not megatron else "") + ")")
    if not out:
        raise UsageError(f"{beyond}; check [batch] and --first-step, or give --ledger DIR")
    if isinstance(plan, MegatronPlan):
        o = plan.order
        sampler = "MegatronPretrainingRandomSampler" if o.dataloader == "cyclic" else "MegatronPretrainingSampler"
        passes = (f"{o.epochs} pass(es) over the train documents" if isinstance(o, MegatronOrder) else
                  f"a BlendedDataset of {len(o.datasets)} prefixes, {len(o)} samples")
        desc = (f"Megatron-LM's own order ({lineage_words(o.implementation)}'s rules: GPTDataset's document, sample "
                "and shuffle indices, "
                f"{sampler}: micro-batch {o.micro_batch} x data-parallel {o.data_parallel} x "
                f"grad_accum {o.grad_accum}, seq_length {o.seq_length}, seed {o.seed}, split {cfg.megatron.split!r}, "
                f"{o.requested} train samples, {passes}); each sample is cut "
                f"across documents: a step's rows are the documents its samples read; {conv.formula()}; "
                f"{placed[-1] if placed else ''}; [megatron] train_iters and [batch] are the "
                "facts of the run that logged these steps (a resumed run builds its dataset from its own): other "
                "facts need --ledger)")
        facts = {**cfg.batch.model_dump(mode="json"), "megatron": cfg.megatron.model_dump(mode="json")}
        if agreed and mismatch is None:
            desc += "; the log's dataset lines agree: " + ", ".join(dict.fromkeys(agreed))
    else:
        pcfg = plan.cfg
        spes = [-(-len(mbs) // pcfg.batch.grad_accum) for mbs in plan.order(0).ranks]
        if (trainer or uneven) and len(set(spes)) > 1:
            who = "the Hugging Face Trainer" if trainer else "accelerate's loop with even_batches = false"
            spe_text = (f"{spe} steps per epoch on rank 0; each rank counts its own ({who} joins no "
                        f"process at an epoch's end): {', '.join(f'rank {r}: {x}' for r, x in enumerate(spes))}, "
                        "so a rank with fewer starts its next epoch sooner"
                        + ("" if trainer else "; a loop that enters DDP's join (accelerate's join_uneven_inputs) at "
                           "each epoch's end pairs another rank's earlier step from the second epoch on, which no "
                           "log nor plan shows: read each rank's own rows (docs/torch.md, uneven inputs joined)"))
        else:
            spe_text = f"{spe} steps per epoch"
        desc = (f"the simulated batch plan ({_facts_text(pcfg)}; {spe_text}; {conv.formula()}; "
                f"{_loader_text(pcfg, index.loader_why)}; assumes a run from scratch with these samplers: a resumed "
                "run or another sampler needs --ledger)")
        facts = pcfg.batch.model_dump(mode="json")
        if relaunched:
            desc += "".join(f"; {', '.join(said)}: {launch}" for launch, said in relaunched.items())
    return out, {"kind": "plan", "facts": facts, "steps_per_epoch": spe, "run_steps": total,
                 "outside": sorted(outside), "description": desc + (f"; {beyond}" if beyond else ""),
                 **({"past_end": beyond} if beyond else {}),
                 **({"dataset_lines": list(dict.fromkeys(agreed))} if agreed and mismatch is None else {}),
                 **({"relaunched": [f"{', '.join(said)}: {launch}" for launch, said in relaunched.items()]}
                    if relaunched else {}),
                 **({"dataset_mismatch": mismatch} if mismatch else {})}


def _loader_text(cfg: Config, why: str | None) -> str:
    """The samplers a torch-style plan simulated, in words (``why``: the logs named the loader)."""
    b = cfg.batch
    if b.max_tokens is not None:
        return "TokenBudgetBatchSampler's batches sharded by torch's DistributedSampler"
    if b.sampler == "random":
        return ("loader torch: one process's DataLoader(shuffle=True, generator=torch.Generator().manual_seed(seed)), "
                "RandomSampler drawing each epoch's permutation from the generator after the iterator's base seed"
                + (" (persistent_workers: base seed in epoch 0 only)" if b.persistent_workers else ""))
    if b.loader == "accelerate":
        return (f"loader accelerate ({why})" if why else
                "loader accelerate: one seeded order cut into batches, dealt whole to the processes")
    return ("loader torch: DistributedSampler dealing rows to the ranks in turn, then BatchSampler"
            + (" ([batch] loader = \"accelerate\" for a DataLoader passed to accelerator.prepare, the Hugging "
               "Face Trainer's included)" if b.world_size > 1 else
               " ([batch] sampler = \"random\" for one process's DataLoader(shuffle=True, generator=...), whose "
               "RandomSampler is another order)" if b.shuffle else ""))


def ledger_step_rows(folder: str | Path, index: DatasetIndex, steps: Iterable[int],
                     conv: StepConvention, world_size: int | None = None,
                     in_flight: bool = False) -> tuple[StepRows, dict[str, Any]]:
    """The rows of log steps ``steps`` from a recorded ledger: log step ``N`` is optimizer step
    ``conv.optimizer_step(N)``, recorded as that number in datacheck's ledger (``record_batches``
    numbers optimizer steps from 0) and as that number + 1 in OLMo's (its ``global_step``). With
    ``in_flight``, the micro-batches the ledger's ``#in_flight`` lines name (received by the training loop,
    not trained to the end when its process stopped: :attr:`Ledger.in_flight`) are the rows of their steps
    too, after the step's recorded ones.

    Raises:
        UsageError: the ledger cannot be read, or holds none of the steps (the message gives the
            recorded range and the join used), or it records a rank at or above ``world_size`` (a rank
            file, or a ``#state`` line's ``num_replicas``; the message names the ranks).
    """
    steps = list(steps)
    led = read_ledger(folder)
    over = [r for r in led.world_ranks if world_size and r >= world_size]
    if over:
        raise UsageError(f"--world-size is {world_size} (ranks 0 .. {world_size - 1}), but the ledger {folder} "
                         f"records rank(s) {', '.join(map(str, over[:10]))}{' ...' if len(over) > 10 else ''} (ranks "
                         f"recorded: {', '.join(map(str, led.world_ranks[:10]))}"
                         f"{' ...' if len(led.world_ranks) > 10 else ''}): give the run's world size (at least "
                         f"{max(over) + 1}), or drop --world-size")
    src = _ledger_source(led)
    base = src["first_step"]
    flying = {s for per in led.in_flight.values() for s in per} & {conv.optimizer_step(s) + base for s in steps}
    if in_flight and flying:
        led = with_in_flight(led)
        src["description"] += (f"; with the micro-batches in flight at {steps_text(min(flying), max(flying), 'ledger step')} "
                               "when the process stopped (its #in_flight line: received, not trained to the end; the "
                               "first was being trained)")
    space = index.space()
    out: StepRows = {}
    missing = []
    recorded = set(led.steps)
    for step in steps:
        ls = conv.optimizer_step(step) + base
        if ls not in recorded:
            missing.append(step)
            continue
        out[step] = rows_of_step(led, ls, space=space)
    if not out:
        have = led.steps
        span = f"{have[0]}..{have[-1]}" if have else "none"
        raise UsageError(f"the ledger {led.folder} has no rows for log steps {steps[0]}..{steps[-1]} (= ledger steps "
                         f"{conv.optimizer_step(steps[0]) + base}..{conv.optimizer_step(steps[-1]) + base}; "
                         f"recorded: {span}); check --first-step"
                         + (f", and --step-unit micro-batch when the log counts micro-batches (the ledger records up "
                            f"to {_most_micro_batches(led)} per step)" if conv.micro_batches == 1
                            and _most_micro_batches(led) > 1 else ""))
    asked = [conv.optimizer_step(step) + base for step in steps]
    gaps = ledger_gaps(led, asked, step_indices(led))
    src.update(outside=missing, gaps=gaps, description=f"{src['description']}; ledger step = optimizer step"
               + (" + 1 (OLMo's global_step)" if base else "") + "".join(f"; {g}" for g in gaps))
    return out, src


def with_in_flight(led: Ledger) -> Ledger:
    """``led`` with its in-flight micro-batches (:attr:`Ledger.in_flight`) among its steps' batches, after
    each step's recorded ones (a copy; ``led`` is not changed)."""
    batches = {r: {s: list(bs) for s, bs in per.items()} for r, per in led.batches.items()}
    for r, per in led.in_flight.items():
        for s, bs in per.items():
            batches.setdefault(r, {}).setdefault(s, []).extend(bs)
    return replace(led, batches=batches)


def unlogged_tail(res: TraceResult, folder: str | Path, conv: StepConvention) -> tuple[int, int, str] | None:
    """The log steps the ledger recorded past the log's end, for a log without an anomaly: a run that
    stopped with an error (a crash such as an embedding's ``IndexError`` on an out-of-vocabulary id, a
    kill) logged no value at the step it stopped in, but ``record_batches`` wrote that step's batches
    as the loop received them, before training them. ``(first, last, why)``: the log steps after the
    last one logged (every log's last training record, :attr:`ReadStats.last_step`) that the ledger
    records, at most :data:`MAX_AUDITED_STEPS` of them, and the reason in words; None when the ledger
    records none past the log's end, cannot be read (the data leg says why when asked), the log counts
    micro-batches or holds records without a step.

    A run that logs every ``N`` steps and ended normally has up to ``N - 1`` steps recorded and never
    logged: the reason says both readings. The Hugging Face callback records a micro-batch only once
    the Trainer trained it, so the step a crash stopped in is not among its records: the ledger's
    ``#in_flight`` line names the micro-batches the Trainer held when its process stopped without
    ending the training (:attr:`Ledger.in_flight`); their steps past the log's end are the stop's, said
    so (their rows are read with :func:`ledger_step_rows` ``in_flight``)."""
    lasts = [st.last_step for st in res.logs]
    if conv.micro_batches > 1 or conv.unplaced or not lasts or any(x is None for x in lasts):
        return None
    end = max(x for x in lasts if x is not None)
    try:
        led = read_ledger(folder)
    except UsageError:
        return None
    base = _ledger_source(led)["first_step"]
    done = conv.optimizer_step(end)
    after = sorted(s - base for s in led.steps if s - base > done)
    flying = sorted({s - base for per in led.in_flight.values() for s in per if s - base > done})
    if flying:  # the micro-batches the Trainer held when its process stopped: the stop's step is known
        first, last = min(after[:1] + flying), min(max(after[-1:] + flying), min(after[:1] + flying)
                                                   + MAX_AUDITED_STEPS - 1)
        lo, hi = conv.log_step(first), conv.log_step(last)
        return lo, hi, (f"no anomaly in the log, but it ends at log step {end} (optimizer step {done}) and the ledger "
                        f"names the micro-batch(es) in flight when the process stopped without ending the training "
                        f"(its #in_flight line: received by the training loop, not trained to the end; a crash, an "
                        f"interrupt) at {steps_text(flying[0], flying[-1], 'optimizer step')}: the run stopped there"
                        + (f"; {steps_text(after[0], after[-1], 'optimizer step')} recorded after the log's last step "
                           "too" if after else ""))
    if not after:
        return None
    first, last = after[0], min(after[-1], after[0] + MAX_AUDITED_STEPS - 1)
    lo, hi = conv.log_step(first), conv.log_step(last)
    return lo, hi, (f"no anomaly in the log, but it ends at log step {end} (optimizer step {done}) "
                    f"and the ledger records {steps_text(first, last, 'optimizer step')} after it: a run that stopped "
                    f"with an error (a crash, a kill) stopped in {'it' if first == last else 'one of them'}, whose "
                    "batches the loop had received; a run that ended normally did not log its last steps")


def crash_texts(res: TraceResult) -> list[str]:
    """Each log's crash in words (:meth:`ReadStats.crash_text`: the Python traceback it ends with)."""
    return [t for st in res.logs if (t := st.crash_text()) is not None]


def crash_tail(res: TraceResult, conv: StepConvention) -> tuple[int, int, str] | None:
    """The log steps a crashed run stopped in, for a log without an anomaly whose console ends in a Python
    traceback (:attr:`ReadStats.crash`) and no ledger: the steps after the last one logged (every log's
    last training record, :attr:`ReadStats.last_step`) up to the next step it would have logged (its
    logging interval ``k``, :attr:`ReadStats.interval`; for a log that logged one step, that step counted
    from the log's first step), at most :data:`MAX_AUDITED_STEPS`, their rows from the plan. ``(first, last,
    why)``; None when no log ends in a traceback, no training record was logged, or the log counts
    micro-batches or holds records without a step."""
    crashed = [st for st in res.logs if st.crash is not None]
    lasts = [st for st in res.logs if st.last_step is not None]
    if not crashed or not lasts or conv.micro_batches > 1 or conv.unplaced:
        return None
    end = max(st.last_step for st in lasts if st.last_step is not None)
    end_log = next(st for st in lasts if st.last_step == end)
    k, said = end_log.interval, ""
    if k is None:  # one step logged: the steps from the log's first step up to it were one interval
        k = max(1, end - conv.first_step + 1)
        said = f" (its only logged step, counted from the first step, {conv.first_step})"
    lo, hi = end + 1, min(end + k, end + MAX_AUDITED_STEPS)
    where = "; ".join(crash_texts(res))
    return lo, hi, (f"no anomaly in the log, but it ends in a Python traceback ({where}): the run crashed after "
                    f"its last logged step, log step {end} (optimizer step {conv.optimizer_step(end)}), logged every "
                    f"{k} step(s){said}, so the run stopped in "
                    + (f"log step {lo}" if lo == hi else f"one of log steps {lo}..{hi}")
                    + " (unlogged), whose rows the plan names")


def ledger_grad_accum(folder: str | Path) -> int:
    """The micro-batches per optimizer step a ledger records: the largest ``grad_accum`` of its
    ``#state`` lines (``record_batches`` writes one per epoch); 1 for a ledger without them (OLMo's)
    or one that cannot be read here (the data leg reads it again and says why)."""
    try:
        led = read_ledger(folder, steps=())
    except UsageError:
        return 1
    stated = [st["grad_accum"] for sts in led.states.values() for st in sts if isinstance(st.get("grad_accum"), int)]
    return max(stated, default=1)


def ledger_epoch_micro_batches(folder: str | Path, grad_accum: int) -> tuple[int, ...] | None:
    """Micro-batches per rank of each epoch as the ledger's ``#state`` lines record them (``batches``;
    ``record_batches`` writes one line per epoch and rank, again on a resume), for a log that counts
    micro-batches across epochs: ``(M,)`` when every line gives the same count ``M`` (one epoch length:
    :attr:`datacheck.trace.steps.StepConvention.epoch_micro_batches`), the counts of epochs 0, 1, ...
    when they differ (a loader whose length changes per epoch:
    :attr:`~datacheck.trace.steps.StepConvention.epoch_counts`); None when every count is a multiple
    of ``grad_accum`` (no epoch ends inside an optimizer step: the plain count joins), for a ledger
    without them (OLMo's) or one that cannot be read here (the data leg reads it again and says why),
    or when one rank's own lines of an epoch disagree.

    When the ranks' counts of an epoch differ (accelerate's ``even_batches=False``: ``BatchSamplerShard``
    deals batch ``k`` to process ``k % world_size``, so the processes after the last short round get one
    batch fewer), the epoch's length in the log's count is the main process's (rank 0's, the most): the
    process that logs (``accelerator.log`` and the Trainer log on the main process only); each other
    rank's rows of the optimizer step it maps to are those of its own step of that number (each rank
    counts its own steps over its own epochs, ``#state`` ``"epoch_steps": "own"``).

    Raises:
        UsageError: the epochs' counts differ, some is not a multiple of ``grad_accum``, and an epoch
            before the last recorded one is missing (its length, and so where the later epochs start
            in the log's count, is unknown); or an epoch's ranks' counts differ and rank 0's (the
            logging process's) is not recorded for it.
    """
    try:
        led = read_ledger(folder, steps=())
    except UsageError:
        return None
    per: dict[int, dict[int, set[int]]] = {}  # epoch -> rank -> its counts
    for rank, sts in led.states.items():
        for st in sts:
            if isinstance(st.get("batches"), int) and isinstance(st.get("epoch"), int):
                per.setdefault(st["epoch"], {}).setdefault(rank, set()).add(st["batches"])
    if not per or grad_accum < 2 or any(len(v) > 1 for ranks in per.values() for v in ranks.values()):
        return None
    counts: dict[int, int] = {}
    for e, ranks in sorted(per.items()):
        got = {r: min(v) for r, v in ranks.items()}
        if len(set(got.values())) > 1 and 0 not in got:
            raise UsageError(
                f"the ledger's ranks hold different numbers of micro-batches in epoch {e} ("
                + ", ".join(f"rank {r}: {m}" for r, m in sorted(got.items())) + ") and rank 0's, the main process "
                "that logs, is not recorded: where a log that counts micro-batches across epochs enters the next "
                "epoch is unknown; give the ledger of every rank, or trace a log that counts optimizer steps "
                "(--step-unit optimizer)")
        counts[e] = got.get(0, next(iter(got.values())))
    if all(m % grad_accum == 0 for m in counts.values()):
        return None
    if len(set(counts.values())) == 1:
        return (next(iter(counts.values())),)
    missing = sorted(set(range(max(counts))) - set(counts))
    if missing:
        raise UsageError(
            "the ledger's epochs hold different numbers of micro-batches per rank ("
            + ", ".join(f"epoch {e}: {m}" for e, m in counts.items()) + f") and epoch(s) {missing} are not "
            "recorded: where a log that counts micro-batches across epochs enters each epoch is unknown; trace a "
            "log that counts optimizer steps (--step-unit optimizer), or the ledger of the whole run")
    return tuple(counts.values())


def _most_micro_batches(led: Ledger) -> int:
    """The most micro-batches one rank recorded for one step (1 for OLMo's ledger, which records none)."""
    return max((len(bs) for steps in led.batches.values() for bs in steps.values()), default=1)


def micro_batch_rows(rows: StepRows, conv: StepConvention) -> StepRows:
    """Each log step's own micro-batch of its optimizer step's rows, for a log that counts
    micro-batches (``conv.micro_batches`` > 1): log step ``N`` holds micro-batch
    ``conv.micro_batch(N)`` of every rank. Rows whose micro-batch is not recorded (OLMo's ledger)
    are kept: the whole step then stands for the micro-batch."""
    out: StepRows = {}
    for step, got in rows.items():
        mb = conv.micro_batch(step)
        out[step] = [r for r in got if r.micro_batch is None or r.micro_batch == mb]
    return out


@dataclass
class RowAudit:
    """The audit of exactly the rows of some steps.

    Attributes:
        steps: log step -> its rows (:class:`~datacheck.execute.plan.StepRow`: rank, micro-batch,
            global index, shard, shard row; from a Megatron plan also the sample and its token range).
        conv: how log steps map to optimizer steps.
        findings: per shard, the findings over its selected rows, most severe first: ``rows`` and
            ``examples[].row`` are global indices; ``details["locations"]`` gives each example row's
            ``shard``, ``shard_row`` and ``line``; ``ratio`` is ``count`` over the audited rows.
        row_checks: global row -> the check IDs (``check:column``) that row fails.
        row_severity: global row -> the most severe severity among its failing checks.
        supervised_tokens: ``{log step: {rank: tokens}}``: labels that are not ``ignore_index``
            (token labels), None when the data has no token ``labels`` column.
        skipped: ``[(check, reason)]`` of the checks that could not run on these rows.
        frames: the selected rows of each shard, with ``_datacheck_global_index`` (for the export).
        sources: what each of those shards' files declares (column types, schema metadata:
            :func:`~datacheck.derive.classlabel.declared_source`), for a ``.parquet`` export.
        hashes: shard -> content hash.
    """

    steps: StepRows
    conv: StepConvention
    findings: list[Finding] = field(default_factory=list)
    row_checks: dict[int, list[str]] = field(default_factory=dict)
    row_severity: dict[int, str] = field(default_factory=dict)
    supervised_tokens: dict[int, dict[int, int]] | None = None
    skipped: list[tuple[str, str]] = field(default_factory=list)
    frames: list[pl.DataFrame] = field(default_factory=list)
    sources: list[DeclaredSource] = field(default_factory=list)
    hashes: dict[str, str] = field(default_factory=dict)
    where: dict[int, tuple[str, int]] = field(default_factory=dict)

    @property
    def audited(self) -> int:
        """Distinct rows audited."""
        return len({r.global_index for rows in self.steps.values() for r in rows})

    def consumed_at(self, g: int) -> list[dict[str, Any]]:
        """Where global row ``g`` was loaded in the audited steps: ``{"step" (log step), "rank",
        "micro_batch"}`` per place (step, then rank, then micro-batch order; a row the sampler repeated
        is listed at each place; ``micro_batch`` None where the source does not say)."""
        seen = sorted({(s, r.rank, r.micro_batch if r.micro_batch is not None else -1)
                       for s, rows in self.steps.items() for r in rows if r.global_index == g})
        return [{"step": s, "rank": rk, "micro_batch": None if mb < 0 else mb} for s, rk, mb in seen]

    def failing(self) -> list[int]:
        """Failing global rows, errors first, then warnings, then info; each group in row order."""
        return sorted(self.row_checks, key=lambda g: (-Severity(self.row_severity[g]).rank, g))

    def to_dict(self) -> dict[str, Any]:
        def rank_rows(rows: list[StepRow]) -> dict[str, list[int]]:
            out: dict[str, list[int]] = {}
            for r in rows:
                out.setdefault(str(r.rank), []).append(r.global_index)
            return out
        def rank_samples(rows: list[StepRow]) -> dict[str, list[dict[str, Any]]]:
            out: dict[str, list[dict[str, Any]]] = {}
            for r in rows:
                got = out.setdefault(str(r.rank), [])
                if not got or got[-1]["sample"] != r.sample:
                    got.append({"sample": r.sample, "micro_batch": r.micro_batch, "reads": []})
                got[-1]["reads"].append([r.global_index, *(r.tokens or (None, None))])
            return out
        megatron = any(r.sample is not None for rows in self.steps.values() for r in rows)
        extra = {"samples": {str(s): rank_samples(rows) for s, rows in sorted(self.steps.items())}} if megatron else {}
        return {**extra, "steps": {str(s): rank_rows(rows) for s, rows in sorted(self.steps.items())},
                "optimizer_steps": {str(s): self.conv.optimizer_step(s) for s in sorted(self.steps)},
                "audited_rows": self.audited,
                "findings": [f.to_dict() for f in self.findings],
                "row_checks": {str(g): self.row_checks[g] for g in self.failing()},
                "failing_rows": [{"row": g, "shard": self.where[g][0], "shard_row": self.where[g][1],
                                  "severity": self.row_severity[g], "checks": self.row_checks[g],
                                  "at": self.consumed_at(g)}
                                 for g in self.failing()],
                "supervised_tokens": None if self.supervised_tokens is None else
                {str(s): {str(r): t for r, t in rr.items()} for s, rr in sorted(self.supervised_tokens.items())},
                "skipped": [{"check": c, "reason": r} for c, r in self.skipped],
                **({"micro_batches": {str(s): self.conv.micro_batch(s) for s in sorted(self.steps)}}
                   if self.conv.micro_batches > 1 else {})}


def audit_step_rows(index: DatasetIndex, steps: StepRows, conv: StepConvention, fail_on: str = "error") -> RowAudit:
    """Read exactly the rows of ``steps`` from the shards ``index`` opened and audit them with every
    check (:func:`datacheck.engine.shard.audit_frame`, one frame per shard), the config's policy and
    ``fail_on`` applied (``fails_policy``).

    Returns:
        The :class:`RowAudit`; finding rows and examples are global indices (see its attributes).
    """
    cfg = index.cfg
    where: dict[int, list[tuple[int, int]]] = {}  # global row -> [(log step, rank)]
    for step, rows in steps.items():
        for r in rows:
            where.setdefault(r.global_index, []).append((step, r.rank))
    ra = RowAudit(steps=steps, conv=conv, hashes=dict(index.hashes))
    total = ra.audited
    tokens: dict[int, dict[int, int]] = {}
    has_labels = False
    skipped: dict[str, str] = {}
    found: list[Finding] = []
    for i, pairs in sorted(_locate(index, sorted(where)).items()):
        ds = index.shards[i]
        data = index.opened[i] or open_for_checks(ds, cfg)
        local = [lr for _, lr in pairs]
        globals_ = [g for g, _ in pairs]
        for g, lr in pairs:
            ra.where[g] = (ds.rel, lr)
        frame = (data.lf.with_row_index("__local").filter(pl.col("__local").is_in(local)).collect()
                 .sort("__local").drop("__local"))
        lines = data.lines_of(local) or [None] * len(local)
        res = audit_frame(frame, cfg, name=ds.rel, keep_rows=True, read_as=ds.format)
        sev: dict[str, str] = {}
        sev_of_check: dict[str, str] = {}
        for f in res.findings:
            f = apply_policy(f, cfg, fail_on, total)
            if f is None:
                continue
            sev[str(RowsKey(f.check, f.column))] = f.severity
            sev_of_check.setdefault(f.check, f.severity)
            pos = [r for r in f.rows if r < len(globals_)]
            exs = tuple(Example(row=globals_[e.row], value=e.value, line=lines[e.row], byte_offset=e.byte_offset)
                        if e.row is not None and e.row < len(globals_) else e for e in f.examples)
            locs = [{"row": globals_[r], "shard": ds.rel, "shard_row": local[r], "line": lines[r]} for r in pos]
            found.append(f.with_(rows=tuple(globals_[r] for r in pos),
                                 lines=tuple(x for x in (lines[r] for r in pos) if x is not None),
                                 examples=exs, shards=(ds.rel,), ratio=f.count / total if total else None,
                                 details={**f.details, "locations": locs}))
        for key, rows in res.failing_rows.items():
            s_key = sev.get(key) or sev_of_check.get(key.split(":")[0])
            if s_key is None:  # ignored by the policy
                continue
            for r in rows:
                g = globals_[r]
                ra.row_checks.setdefault(g, []).append(key)
                if g not in ra.row_severity or Severity(s_key).rank > Severity(ra.row_severity[g]).rank:
                    ra.row_severity[g] = s_key
        for s in res.skipped:
            skipped.setdefault(s.check, s.reason)
        labels = data.roles.labels
        if labels is not None and isinstance(data.schema.get(labels), pl.List):
            has_labels = True
            ign = cfg.labels.ignore
            expr = pl.col(labels).list.eval(pl.element() != ign if ign is not None else pl.element().is_not_null()).list.sum()
            counts = frame.select(expr.alias("n"))["n"].to_list()
            for g, n in zip(globals_, counts):
                for step, rank in where[g]:
                    tokens.setdefault(step, {}).setdefault(rank, 0)
                    tokens[step][rank] += int(n or 0)
        ra.sources.append(declared_source(ds, data.clipped))
        ra.frames.append(frame.with_columns(
            pl.Series("_datacheck_global_index", globals_, dtype=pl.Int64),
            pl.Series("_datacheck_row", local, dtype=pl.Int64),
            pl.Series("_datacheck_line", lines, dtype=pl.Int64),
            pl.lit(ds.rel, dtype=pl.String).alias("_datacheck_shard"),
            pl.lit(index.hashes[ds.rel], dtype=pl.String).alias("_datacheck_shard_hash")))
    ra.findings = sorted(found, key=lambda f: (-Severity(f.severity).rank, f.check, f.rows[:1]))
    ra.supervised_tokens = tokens if has_labels else None
    ra.skipped = sorted(skipped.items())
    return ra


def _locate(index: DatasetIndex, rows: Iterable[int]) -> dict[int, list[tuple[int, int]]]:
    """shard number -> ``[(global row, shard row)]``.

    Raises:
        UsageError: a row is negative or beyond the dataset's rows.
    """
    out: dict[int, list[tuple[int, int]]] = {}
    total = index.total
    for g in rows:
        if not 0 <= g < total:
            raise UsageError(f"row index {g} is outside the dataset's {total} rows "
                             "(the ledger belongs to other data, or a different shard order?)")
        i = max(k for k, s in enumerate(index.starts) if s <= g and index.rows[k] > g - s)
        out.setdefault(i, []).append((g, g - index.starts[i]))
    return out


def export_rows(ra: RowAudit, path: str | Path) -> int:
    """Write the rows of the audited steps in batch order, for a fixed-batch replay, with the columns
    ``datacheck plan --export`` and ``inspect --export`` write (:data:`EXPORT_COLUMNS`:
    ``_datacheck_row`` (the row in its shard), ``_datacheck_line``, ``_datacheck_shard``,
    ``_datacheck_shard_hash``, ``_datacheck_checks`` (the checks the row fails),
    ``_datacheck_step`` (the 0-based optimizer step), ``_datacheck_rank``, ``_datacheck_micro_batch``,
    ``_datacheck_global_index``, and ``_datacheck_log_step``; rows of a Megatron plan then
    ``_datacheck_sample``, ``_datacheck_token_start`` and ``_datacheck_token_end``) in front of the data
    columns, one row per (step, rank, micro-batch, position), as Parquet (``.parquet``) or JSON lines (``.jsonl``), written
    atomically. A ``.parquet`` keeps the column types and schema metadata the shards' files declare
    (:func:`datacheck.derive.classlabel.as_declared`: a ``ClassLabel``'s names, int32 ids), so the
    export audited alone reads as its shards do. Replaying them needs the user's model: the file is
    its input.

    Returns:
        The number of rows written.

    Raises:
        UsageError: another extension, or the target cannot be written.
    """
    order = pl.DataFrame(
        [(ra.conv.optimizer_step(s), s, r.rank, r.micro_batch, i, r.global_index)
         for s, rows in sorted(ra.steps.items()) for i, r in enumerate(rows)],
        schema={"_datacheck_step": pl.Int64, "_datacheck_log_step": pl.Int64, "_datacheck_rank": pl.Int64,
                "_datacheck_micro_batch": pl.Int64, "__pos": pl.Int64, "_datacheck_global_index": pl.Int64},
        orient="row").with_columns(**sample_columns([r for _, rows in sorted(ra.steps.items()) for r in rows]))
    checks = pl.DataFrame({"_datacheck_global_index": list(ra.row_checks), "_datacheck_checks": list(ra.row_checks.values())},
                          schema={"_datacheck_global_index": pl.Int64, "_datacheck_checks": pl.List(pl.String)})
    rows = (pl.concat(ra.frames, how="diagonal_relaxed") if ra.frames
            else pl.DataFrame({"_datacheck_global_index": []}, schema={"_datacheck_global_index": pl.Int64}))
    out = (order.join(rows, on="_datacheck_global_index", how="left")
           .join(checks, on="_datacheck_global_index", how="left")
           .with_columns(pl.col("_datacheck_checks").fill_null(pl.lit([], dtype=pl.List(pl.String))))
           .sort(["_datacheck_log_step", "_datacheck_rank", "__pos"]).drop("__pos"))
    lead = [c for c in (*EXPORT_COLUMNS, *SAMPLE_EXPORT_COLUMNS) if c in out.columns]
    out = out.select([*lead, *[c for c in out.columns if c not in lead]])

    def write_parquet(f: Any) -> None:  # a .parquet keeps the shards' types and metadata
        table = as_declared(out, ra.sources)
        if table is not None:
            pq.write_table(table, f)
        else:
            out.write_parquet(f)

    write_frame_atomic(out, path, write_parquet)
    return out.height


def plan_steps_per_epoch(index: DatasetIndex) -> int | None:
    """Optimizer steps per epoch of the simulated plan over ``index`` (what places Hugging Face console
    records that carry only an epoch), or None when ``[batch]`` sets neither ``batch_size`` nor
    ``max_tokens``, or when the shards are Megatron pairs (Megatron's order has no torch epochs).

    Raises:
        OptionalDependencyError: torch is not installed.
    """
    b = index.cfg.batch
    if b.batch_size is None and b.max_tokens is None:
        return None
    try:
        megatron = loader_of(index.space(), index.cfg) == "megatron"
    except UsageError:  # shards no loader reads as one: the plan says so when it is asked for
        return None
    if megatron:
        return None  # a Megatron run has no torch epochs (its log numbers iterations)
    return index.plan().steps_per_epoch


def plan_epoch_micro_batches(index: DatasetIndex) -> int | None:
    """Micro-batches per rank in one epoch of the simulated plan over ``index`` when they are not a
    multiple of ``[batch] grad_accum`` (each epoch's last optimizer step then holds fewer, and a log
    that counts micro-batches across epochs starts the next epoch after them:
    :attr:`datacheck.trace.steps.StepConvention.epoch_micro_batches`), else None; None too without
    ``batch_size`` / ``max_tokens`` or over Megatron pairs (no torch epochs). Epoch 0's count stands
    for every epoch: the plan's samplers deal each rank a count that the epoch's shuffle does not change
    (``ceil(rows / world_size)`` rows in fixed batches; with ``max_tokens``, batches filled once and
    only reordered per epoch, ``ceil(batches / world_size)`` each: :mod:`datacheck.model.budget`).

    Raises:
        OptionalDependencyError: torch is not installed.
    """
    b = index.cfg.batch
    if (b.batch_size is None and b.max_tokens is None) or b.grad_accum < 2:
        return None
    try:
        plan = index.plan()
    except UsageError:  # the data leg says why when it asks for the plan
        return None
    if not isinstance(plan, BatchPlan):
        return None
    m = plan.order(0).micro_batches
    return m if m and m % b.grad_accum else None


#: the step counts of the Lightning Trainer's logs (:mod:`datacheck.trace.readers.fields`)
LIGHTNING_COUNTS = (LIGHTNING_WHY, LIGHTNING_LAYOUT_WHY)


def _update_before(res: TraceResult, conv: StepConvention) -> int | None:
    """The log step before the first anomaly whose rows are audited too, or None: when every log is
    a Lightning Trainer's (:data:`LIGHTNING_COUNTS`), the anomaly is a non-finite loss
    (``log.non_finite``, metric ``loss``) logged right after a finite one (the previous log step, no
    gap), and no finite grad norm was logged at that previous step.

    The loss at step ``s`` is the first computed with the weights step ``s - 1``'s update wrote, and
    the loss Lightning logged at ``s - 1`` covered only part of that update's rows: ``self.log(on_step)``
    keeps the last value, that of the step's last micro-batch (``_LoggerConnector.update_train_step_metrics``
    returns early while accumulating), and its loggers write rank 0's value unless ``sync_dist``. A row
    of another micro-batch or rank of step ``s - 1`` that made the gradients non-finite is first seen
    at ``s`` (the caller keeps ``s - 1`` only when its rows span several ranks or micro-batches). A
    finite grad norm at ``s - 1`` (every rank's and micro-batch's gradients) shows that update finite.

    Lightning's alone: the Hugging Face Trainer logs the sum of every micro-batch's loss of the
    interval, gathered over every process, and the whole update's grad norm at every optimizer step
    (clipped or not), so its first non-finite value is at the step whose batch holds the row (real runs
    with gradient accumulation: tests/e2e/trace/test_real_runs_hf_accum.py); accelerate and plain
    loops log what the user's loop writes, under no convention their logs name."""
    fb = res.first_bad
    if fb is None or fb.get("check") != "log.non_finite" or fb.get("metric") != "loss":
        return None
    if not res.logs or any(st.first_step_why not in LIGHTNING_COUNTS for st in res.logs):
        return None  # a log whose logged loss is known to cover a step's rows partly: Lightning's (only)
    lo, hi = fb["window"]
    good = fb.get("last_good_step")
    if good is None or lo != hi or good != hi - 1 or conv.micro_batches > 1 or good < conv.first_step:
        return None
    curve = (res.curves.get(fb.get("rank")) or {}).get("grad_norm")
    if curve is not None and curve.points and good not in curve.bad:
        return None  # the log carries the grad norm, finite at the last good step (its definition)
    return int(good)


def lightning_relaunches(res: TraceResult) -> list[tuple[int, int, str]]:
    """The resume points of a Lightning Trainer's log, as (log step the resumed launch logged first, the
    log step the launch before logged last, how the log shows it), in log order; empty unless every log is
    a Lightning Trainer's (:data:`LIGHTNING_COUNTS`). Taken from ``log.step_regression`` of the first
    anomaly's stream (every stream's when there is none): the step going back in the log (TensorBoard
    event files are read launch by launch, an appended CSV or JSONL line by line). A single log with no
    step going back that logs every step once from a step ``f`` > 0 (its training records are ``last - f
    + 1``) begins with a launch resumed at ``f``: Lightning logs at ``(global_step + 1) %
    log_every_n_steps == 0``, so a run from scratch that logs every step logs step 0 first (a resumed
    run's ``CSVLogger`` of the same version rewrites ``metrics.csv`` from its first step; a new version
    folder holds the resumed launch alone)."""
    if not res.logs or any(st.first_step_why not in LIGHTNING_COUNTS for st in res.logs):
        return []
    rank = res.first_bad.get("rank") if res.first_bad else None
    out = [(int(r["to_step"]), int(r["from_step"]), f"the step back from {r['from_step']}")
           for f in res.findings if f.check == "log.step_regression"
           and (rank is None or f.details.get("rank") == rank) for r in f.details.get("resumes", [])]
    if out or len(res.logs) != 1 or len(res.streams) != 1:
        return out
    st, n = res.logs[0], next(iter(res.streams.values()))
    if st.min_step is not None and st.last_step is not None and st.min_step > 0 \
            and st.last_step - st.min_step + 1 == n:
        return [(st.min_step, st.min_step - 1, "the log begins there, logging every step: a launch from scratch "
                 "logs step 0 first")]
    return []


def lightning_resumed_step(k: int, relaunches: Sequence[tuple[int, int, str]], spe: int,
                           conv: StepConvention) -> tuple[int, str | None]:
    """The plan's optimizer step whose batch a Lightning Trainer trained at optimizer step ``k`` of a launch
    resumed mid-epoch, and that launch in words, or ``(k, None)``.

    Lightning (2.x) restores the step count from a checkpoint but not a plain ``DataLoader``'s position
    (it warns "You're resuming from a checkpoint that ended before the epoch ended and your dataloader is
    not resumable"): the resumed launch iterates the epoch's order again from its first batch, and ends
    the epoch when the restored batch count reaches the epoch's length. A launch resumed at optimizer
    step ``R = e x spe + j`` (``0 < j < spe``; ``spe`` the plan's steps per epoch) trains at step
    ``R + i`` (``i < spe - j``) the plan's step ``e x spe + i``; the epoch's last ``j`` batches are not
    trained, and epoch ``e + 1`` begins at step ``(e + 1) x spe`` as in the plan (a real run:
    tests/e2e/trace/test_real_runs_lightning_resumed.py). Steps logged by both launches (from ``R`` to the
    last step the launch before logged) are left to the plan: the log does not say which launch's value
    the anomaly is. A loader with ``state_dict`` (torchdata's ``StatefulDataLoader``) resumes in place:
    its rows need ``--ledger``."""
    for to_step, from_step, shown in reversed(relaunches):
        r, last = conv.optimizer_step(to_step), conv.optimizer_step(from_step)
        if r > k:
            continue
        e, j = divmod(r, spe) if spe else (0, 0)
        if k <= last or j == 0 or k >= (e + 1) * spe:
            return k, None
        return e * spe + (k - r), (
            f"trained by the launch resumed at log step {to_step} ({shown}), mid-epoch {e}: "
            "Lightning restarts a DataLoader without state_dict at the epoch's first batch and keeps the step "
            f"count, so optimizer step {e * spe + j} + i holds the plan's optimizer step {e * spe} + i (the epoch's "
            f"batch i) and the epoch's last {j} batch(es) are not trained")
    return k, None


def _past_end_text(past: list[int], whole: StepRows, conv: StepConvention, index: DatasetIndex,
                   source: dict[str, Any]) -> str:
    """Why log steps ``past`` (counting micro-batches) have no rows: their optimizer step holds fewer
    micro-batches than ``conv.micro_batches`` (the ledger recorded fewer: a run stopped mid-step; or
    a plan epoch whose micro-batches differ from the first epoch's), said with the micro-batches it
    holds and the data's rows and epochs (a plan) or the ledger."""
    s = past[0]
    k, mb = conv.optimizer_step(s), conv.micro_batch(s)
    held = sorted({r.micro_batch for r in whole.get(s, []) if r.micro_batch is not None})
    others = f" (and log step(s) {', '.join(map(str, past[1:10]))}{' ...' if len(past) > 10 else ''})" \
        if len(past) > 1 else ""
    if source.get("kind") == "ledger":
        return (f"{conv.describe(s)}{others} lies past what the ledger {source.get('folder')} recorded: it holds "
                f"{len(held)} micro-batch(es) of optimizer step {k} ({', '.join(map(str, held)) or 'none'}), not "
                f"micro-batch {mb}")
    return (f"{conv.describe(s)}{others} lies past the end of the data: optimizer step {k} holds "
            f"{len(held)} micro-batch(es) ({', '.join(map(str, held)) or 'none'}), not micro-batch {mb}, in the "
            f"data's {index.total} rows over {index.cfg.batch.epochs} epoch(s) ({_facts_text(index.cfg)})")


def _spread_text(groups: set[tuple[int, int | None]]) -> str:
    ranks = len({r for r, _ in groups})
    micro = len({m for _, m in groups})
    parts = ([f"{ranks} ranks"] if ranks > 1 else []) + ([f"{micro} micro-batches per rank"] if micro > 1 else [])
    return " x ".join(parts)


def trace_data(res: TraceResult, paths: list[str], cfg: Config, conv: StepConvention, *, ledger: str | None = None,
               step: int | None = None, window: int = 0, export: str | None = None,
               allow_data_mismatch: bool = False, fail_on: str = "error",
               index: DatasetIndex | None = None, world_size: int | None = None) -> dict[str, Any]:
    """The data leg of a trace: the log steps to audit (``step``, else the first anomaly's window;
    ``window`` steps before it), their rows (from ``ledger`` or the simulated plan, joined through
    ``conv``), those rows audited and optionally exported.

    Returns:
        ``{"message", "rows" (:meth:`RowAudit.to_dict`, None when nothing to audit), "audited_steps"
        ([first, last] log steps), "audited_optimizer_steps", "step_map" (the join, e.g. "log step 50 =
        optimizer step 49"), "convention", "warning", "source", "export", "anomaly_step" (the log step
        asked: ``step`` or the anomaly's last), "failing_steps" (the audited log steps whose batch holds a
        failing row), "replay_step" (the log step whose fixed batch to replay: the anomaly's when it holds
        a failing row, else the first that does, else the update before a Lightning log's first
        non-finite loss when its rows were kept, else the anomaly's), "replay_why" (why it is not the
        anomaly's step, None when it is), "unlogged_tail" (no anomaly: the steps the ledger recorded past the
        log's end were audited, :func:`unlogged_tail`) and "crash_tail" (no anomaly, no ledger: the steps
        after the last logged one of a log ending in a traceback, :func:`crash_tail`)}``; ``source["outside"]`` lists the asked steps without rows,
        and ``source["past_end"]`` says why (outside the plan, past what the ledger recorded).

    Raises:
        UsageError: the data's index_hash differs from the one the log records (unless
            ``allow_data_mismatch``), a log's records carry no step, ``window`` < 0, too many steps,
            the steps are outside the ledger or plan, the ledger records a rank at or above
            ``world_size`` (``--world-size``), or a shard cannot be read.

    ``index``: the dataset index when the caller built it already (of ``paths`` under ``cfg``).
    """
    if window < 0:
        raise UsageError(f"--window must be >= 0, got {window}")
    stopped = None  # why the ledger's unlogged steps are audited (no anomaly, no --step)
    if index is None:
        index = DatasetIndex.build(paths, cfg)
    idents = {st.identity for st in res.logs if st.identity is not None}
    # the config the rows are audited under: the gate's, with the facts it took from the data
    mismatch, config_warning = compare_identity(idents, index.index_hash(), index.cfg.hash()) if idents else (None, None)
    if mismatch and not allow_data_mismatch:
        raise UsageError(mismatch + "; give the training data, or --allow-data-mismatch to trace anyway")
    warning = "; ".join(w for w in (mismatch, config_warning) if w) or None
    if step is not None:
        lo, hi = step, step
    elif res.first_bad is not None:
        lo, hi = res.first_bad["window"]
    elif any(f.check == "log.periodic_spikes" for f in res.findings):  # the first spike's rows, matched to the plan
        lo = hi = next(f for f in res.findings if f.check == "log.periodic_spikes").details["spike_steps"][0]
    elif ledger is not None and (tail := unlogged_tail(res, ledger, conv)) is not None:
        lo, hi, stopped = tail  # no anomaly, but the loop received steps the log never logged: a crash's step
        if crashed := crash_texts(res):
            stopped = f"the log ends in a Python traceback ({'; '.join(crashed)}); {stopped}"
    elif ledger is None and (tail := crash_tail(res, conv)) is not None:
        lo, hi, stopped = tail  # no anomaly, the console ends in a traceback: the steps after the last logged one
    elif crashed := crash_texts(res):
        return {"message": f"the log ends in a Python traceback ({'; '.join(crashed)}) but names no step to audit "
                "after its last logged one (no training record, a ledger that recorded none past it, or a log "
                "counting micro-batches): give --step N", "rows": None, "warning": warning, "source": None,
                "convention": conv.to_dict()}
    else:
        return {"message": "no anomaly and no --step: no rows to audit", "rows": None, "warning": warning,
                "source": None, "convention": conv.to_dict()}
    conv.require_placed()
    before = _update_before(res, conv) if step is None and window == 0 else None
    steps = list(range(max(conv.first_step, lo - window), hi + 1))
    if before is not None:
        steps.insert(0, before)
    if not steps:
        raise UsageError(f"log step {hi} is before the log's first optimizer step, {conv.first_step} ({conv.source})")
    if len(steps) > MAX_AUDITED_STEPS:
        raise UsageError(f"{len(steps)} steps to audit (window {lo}..{hi} + {window} before); give --step N")
    if ledger is not None:
        rows, source = ledger_step_rows(ledger, index, steps, conv, world_size, in_flight=True)
    else:
        try:
            rows, source = plan_rows(index, steps, conv, res.consumed, res.global_batches,
                                     [(st.source, st.dataset_lines) for st in res.logs], allow_data_mismatch,
                                     trainer=bool(res.logs) and all(_hf_trainer_log(st) for st in res.logs),
                                     epochs=res.epochs, relaunches=lightning_relaunches(res))
        except UsageError as exc:
            if stopped is None or step is not None:
                raise
            # the crash came after the plan's last step (saving, evaluating): no rows of a step to name
            return {"message": f"{stopped}: {exc}", "rows": None, "warning": warning, "source": None,
                    "convention": conv.to_dict()}
        if source.get("dataset_mismatch"):
            warning = "; ".join(w for w in (warning, source["dataset_mismatch"]) if w)
    if conv.micro_batches > 1:
        whole = rows
        rows = micro_batch_rows(rows, conv)
        past = [s for s, got in rows.items() if not got]
        if past:  # an optimizer step that holds fewer micro-batches than grad_accum: its last one ends the data
            for s in past:
                rows.pop(s)
            source["outside"] = sorted({*source.get("outside", []), *past})
            text = _past_end_text(past, whole, conv, index, source)
            source["past_end"] = "; ".join(x for x in (source.get("past_end"), text) if x)
            source["description"] += f"; {text}"
            if not rows:
                raise UsageError(text + ": no rows to audit; check --step, [batch] and --first-step")
    also = None
    if before is not None:
        groups = {(r.rank, r.micro_batch) for r in rows.get(before, [])}
        if len(groups) > 1:  # more than one rank or micro-batch: a logged loss may have seen only one of them
            also = (f"also log step {before}, the update before the first non-finite loss: the loss Lightning logged "
                    f"at it covers part of its rows ({_spread_text(groups)}; Lightning logs the last micro-batch's "
                    "loss, and rank 0's alone without sync_dist) and no grad norm was logged finite there; a row of "
                    f"step {before} that made its gradients non-finite shows first in step {hi}'s loss")
        else:
            rows.pop(before, None)
    ra = audit_step_rows(index, rows, conv, fail_on)
    exported = export_rows(ra, export) if export else None
    bad = ra.failing()
    a, b = min(rows), max(rows)
    names = [f"{ra.where[g][0]} row {ra.where[g][1]} (global {g})" for g in bad[:20]]
    msg = (f"log steps {a}..{b} (optimizer steps {conv.optimizer_step(a)}..{conv.optimizer_step(b)}): {ra.audited} "
           f"row(s) audited, {len(bad)} failing a check" + (f": {', '.join(names)}" if bad else ""))
    msg += f"; {source['past_end']}" if source.get("past_end") else ""
    holding = sorted({s for s, got in ra.steps.items() for r in got if r.global_index in ra.row_checks})
    replay_step, replay_why = hi, None  # the step whose fixed batch to replay, and why it is not the anomaly's
    if holding and hi not in holding:
        replay_step = holding[0]
        replay_why = (f"its batch holds the failing rows; the log shows them first at step {hi}"
                      + (": the update before, whose loss Lightning logged covers part of its rows"
                         if replay_step == before else ""))
    elif not holding and also is not None and before is not None:
        replay_step = before
        replay_why = (f"the update before step {hi}: the loss Lightning logged at step {before} covers part of its "
                      f"rows; then step {hi}'s")
    if stopped is not None:
        msg = f"{stopped}: {msg}"
    return {"message": msg + (f"; {also}" if also else ""), "rows": ra.to_dict(), "audited_steps": [a, b],
            "audited_optimizer_steps": [conv.optimizer_step(a), conv.optimizer_step(b)],
            "step_map": conv.describe(hi), "convention": conv.to_dict(), "warning": warning, "source": source,
            "anomaly_step": hi, "replay_step": replay_step, "replay_why": replay_why, "failing_steps": holding,
            "unlogged_tail": stopped is not None and ledger is not None,
            "crash_tail": stopped is not None and ledger is None,
            "export": None if exported is None else {"path": export, "rows": exported}}
