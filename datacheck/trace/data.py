"""The data side of a trace: step -> global row indices (a recorded ledger), those rows read through the
one read path, audited with every check, and exported for a fixed-batch replay.

Anything that gives ``{step: {rank: [global row index, ...]}}`` plugs into :func:`audit_step_rows`:
a recorded ledger (:func:`ledger_rows`, through :func:`datacheck.io.ledger.read_ledger`:
``record_batches``' files or OLMo's ``data-indices/rank{R}.tsv.gz``) or the simulated batch plan
(``datacheck.execute.plan``, :func:`plan_rows`).

Global row index = position in the dataset's shards concatenated in discovery order (sorted
relative paths, :func:`datacheck.formats.discovery.discover`), 0-based, as a map-style dataset over those
shards numbers its samples.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import polars as pl

from datacheck.derive.read import open_for_checks
from datacheck.engine.shard import audit_frame
from datacheck.execute.plan import build_plan, rows_of_step
from datacheck.formats.discovery import discover
from datacheck.io.discover import DiscoveredShard
from datacheck.io.hashing import hash_file, index_hash
from datacheck.io.ledger import Ledger, read_ledger, step_indices
from datacheck.io.outputs import write_bytes_atomic
from datacheck.io.shardbytes import Unreadable
from datacheck.model.config import Config
from datacheck.model.errors import UsageError
from datacheck.model.findings import Finding

__all__ = ["StepRows", "ledger_rows", "ledger_gaps", "plan_rows", "RowAudit", "audit_step_rows", "DatasetIndex", "ROW_COLUMN", "export_rows"]

#: columns added to exported rows
ROW_COLUMN, STEP_COLUMN, RANK_COLUMN = "__dc_row", "__dc_step", "__dc_rank"

#: step -> rank -> global row indices, in batch order
StepRows = dict[int, dict[int, list[int]]]


def ledger_rows(folder: str | Path, steps: Iterable[int]) -> tuple[StepRows, dict[str, Any]]:
    """The rows of ``steps`` from a ledger folder (``record_batches``' format or OLMo's
    ``data-indices/rank{R}.tsv.gz``), read by the one ledger reader
    (:func:`datacheck.io.ledger.read_ledger`, which needs no torch), only the wanted steps kept.
    A step recorded twice (a resume) keeps its last recording; a rank's micro-batches of a step are
    concatenated in micro-batch order. Step numbers are the ledger's own (the log's, when the trainer
    recorded with its own step count).

    Returns:
        (the rows, the source: ``{"kind": "ledger", "folder", "format", "description"}``).

    Raises:
        UsageError: no ``rank*.tsv[.gz]`` file in the folder, or a line that is not a ledger line
            (the message names file and line).
    """
    steps = list(steps)
    led = read_ledger(folder, steps)
    rows = step_indices(led)
    gaps = ledger_gaps(led, steps, rows)
    desc = f"the recorded ledger {led.folder} ({led.format} format)" + "".join(f"; {g}" for g in gaps)
    return rows, {"kind": "ledger", "folder": str(led.folder), "format": led.format, "gaps": gaps,
                  "description": desc}


def ledger_gaps(led: Ledger, steps: list[int], rows: StepRows) -> list[str]:
    """What the ledger lacks for ``steps``, said in words: a torn file (its cut write dropped), a
    rank's last step recorded with fewer micro-batches than ``grad_accum``, asked steps no rank
    recorded, and ranks that did not record an asked step that other ranks did."""
    out = [f"{Path(f).name} ends in a torn write (the run was killed mid-write); its complete lines are read"
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
        lacking = [r for r in led.ranks if s in rows and r not in rows[s]]
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


def plan_rows(paths: list[str], cfg: Config, steps: Iterable[int], first_step: int = 1) -> tuple[StepRows, dict[str, Any]]:
    """The rows of ``steps`` (the log's step numbers) from the simulated batch plan of ``paths`` under
    ``[batch]`` (:func:`datacheck.execute.plan.build_plan`: torch's ``DistributedSampler`` /
    ``BatchSampler``, or the token-budget sampler with ``max_tokens``), for a run that trained from
    scratch with those samplers. The plan counts optimizer steps from 0; log step ``N`` is plan step
    ``N - first_step`` (``first_step`` 1: the step count after the update, as Hugging Face, Megatron
    and OLMo log it; 0 for loops that log from 0). A rank's micro-batches of a step are concatenated.

    Returns:
        (the rows of the steps inside the plan, the source: ``{"kind": "plan", "facts", "first_step",
        "steps_per_epoch", "run_steps", "outside", "description"}``; ``outside`` lists the asked steps
        the plan does not have).

    Raises:
        UsageError: ``[batch]`` has neither ``batch_size`` nor ``max_tokens`` (the message says to set
            them or give ``--ledger``), a shard cannot be read, or no asked step is inside the plan.
        OptionalDependencyError: torch is not installed (the plan is simulated with torch's samplers).
    """
    try:
        plan = build_plan(paths, cfg)
        spe = plan.steps_per_epoch
    except UsageError as exc:
        raise UsageError(f"{exc}; trace without --ledger takes a step's rows from the simulated batch plan "
                         "([batch] facts), or give --ledger DIR (a recorded order)") from None
    total = spe * cfg.batch.epochs
    out: StepRows = {}
    outside: list[int] = []
    for step in steps:
        k = step - first_step
        if not 0 <= k < total:
            outside.append(step)
            continue
        per: dict[int, list[int]] = {}
        for r in rows_of_step(plan, k):
            per.setdefault(r.rank, []).append(r.global_index)
        out[step] = per
    if not out:
        raise UsageError(f"steps {sorted(outside)[0]}..{sorted(outside)[-1]} of the log are outside the simulated "
                         f"plan (log steps {first_step}..{first_step + total - 1}: {spe} per epoch x {cfg.batch.epochs} "
                         "epoch(s), [batch] epochs); check [batch] and --first-step, or give --ledger DIR")
    desc = (f"the simulated batch plan ({_facts_text(cfg)}; {spe} steps per epoch; log step N = plan step "
            f"N - {first_step}; assumes a run from scratch with these samplers: a resumed run or another "
            "sampler needs --ledger)")
    return out, {"kind": "plan", "facts": cfg.batch.model_dump(mode="json"), "first_step": first_step,
                 "steps_per_epoch": spe, "run_steps": total, "outside": sorted(outside), "description": desc}


@dataclass
class DatasetIndex:
    """The dataset's shards, their row counts and the global index of their first row."""

    root: Path
    shards: list[DiscoveredShard]
    starts: list[int]
    rows: list[int]
    cfg: Config

    @classmethod
    def build(cls, paths: list[str], cfg: Config) -> "DatasetIndex":
        """Discover the shards and count their rows (through :func:`open_for_checks`).

        Raises:
            UsageError: no shard found, or a shard cannot be read (its rows cannot be numbered).
        """
        disc = discover(paths, cfg.dataset.format)
        starts, rows, n = [], [], 0
        for ds in disc.shards:
            try:
                k = int(open_for_checks(ds, cfg).lf.select(pl.len()).collect().item())
            except Unreadable as exc:
                raise UsageError(f"{ds.rel}: unreadable ({exc.reason}): its rows cannot be numbered; "
                                 "run datacheck audit on the data first") from None
            starts.append(n)
            rows.append(k)
            n += k
        return cls(root=disc.root, shards=disc.shards, starts=starts, rows=rows, cfg=cfg)

    @property
    def total(self) -> int:
        return sum(self.rows)

    def index_hash(self) -> str:
        """The data's ``index_hash`` (as the audit report records it)."""
        return index_hash([(ds.rel, hash_file(ds.path)[0]) for ds in self.shards])

    def locate(self, rows: Iterable[int]) -> dict[int, list[tuple[int, int]]]:
        """shard number -> ``[(global row, local row)]``.

        Raises:
            UsageError: a row is negative or beyond the dataset's rows.
        """
        out: dict[int, list[tuple[int, int]]] = {}
        for g in rows:
            if not 0 <= g < self.total:
                raise UsageError(f"row index {g} is outside the dataset's {self.total} rows "
                                 "(the ledger belongs to other data, or a different shard order?)")
            i = max(k for k, s in enumerate(self.starts) if s <= g and self.rows[k] > g - s)
            out.setdefault(i, []).append((g, g - self.starts[i]))
        return out


@dataclass
class RowAudit:
    """The audit of exactly the rows of some steps.

    Attributes:
        steps: the steps audited, ``{step: {rank: [global rows]}}``.
        findings: per shard, the findings over its selected rows (``rows`` are global indices).
        row_checks: global row -> the check IDs (``check:column``) that row fails.
        supervised_tokens: ``{step: {rank: tokens}}``: labels that are not ``ignore_index`` (token
            labels), None when the data has no token ``labels`` column.
        skipped: ``[(check, reason)]`` of the checks that could not run on these rows.
        frame: the selected rows with ``__dc_row``, ``__dc_step``, ``__dc_rank`` (for the export).
    """

    steps: StepRows
    findings: list[Finding] = field(default_factory=list)
    row_checks: dict[int, list[str]] = field(default_factory=dict)
    supervised_tokens: dict[int, dict[int, int]] | None = None
    skipped: list[tuple[str, str]] = field(default_factory=list)
    frames: list[pl.DataFrame] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"steps": {str(s): {str(r): v for r, v in rr.items()} for s, rr in sorted(self.steps.items())},
                "findings": [f.to_dict() for f in self.findings],
                "row_checks": {str(k): v for k, v in sorted(self.row_checks.items())},
                "supervised_tokens": None if self.supervised_tokens is None else
                {str(s): {str(r): t for r, t in rr.items()} for s, rr in sorted(self.supervised_tokens.items())},
                "skipped": [{"check": c, "reason": r} for c, r in self.skipped]}


def audit_step_rows(dataset: DatasetIndex, steps: StepRows) -> RowAudit:
    """Read exactly the rows of ``steps`` (each shard through :func:`open_for_checks`) and audit them
    with every check (:func:`datacheck.engine.shard.audit_frame`, one frame per shard).

    Returns:
        The :class:`RowAudit`; finding rows are mapped back to global row indices.
    """
    cfg = dataset.cfg
    where: dict[int, list[tuple[int, int]]] = {}  # global row -> [(step, rank)]
    for step, ranks in steps.items():
        for rank, rows in ranks.items():
            for g in rows:
                where.setdefault(g, []).append((step, rank))
    ra = RowAudit(steps=steps)
    tokens: dict[int, dict[int, int]] = {}
    has_labels = False
    skipped: dict[str, str] = {}
    for i, pairs in sorted(dataset.locate(sorted(where)).items()):
        ds = dataset.shards[i]
        data = open_for_checks(ds, cfg)
        local = [lr for _, lr in pairs]
        globals_ = [g for g, _ in pairs]
        frame = (data.lf.with_row_index("__local").filter(pl.col("__local").is_in(local)).collect()
                 .sort("__local").drop("__local"))
        res = audit_frame(frame, cfg, name=ds.rel, keep_rows=True)
        for f in res.findings:
            ra.findings.append(f.with_(rows=tuple(globals_[r] for r in f.rows if r < len(globals_)), shards=(ds.rel,)))
        for key, rows in res.failing_rows.items():
            for r in rows:
                ra.row_checks.setdefault(globals_[r], []).append(key)
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
        ra.frames.append(frame.with_columns(pl.Series(ROW_COLUMN, globals_, dtype=pl.Int64)))
    ra.supervised_tokens = tokens if has_labels else None
    ra.skipped = sorted(skipped.items())
    return ra


def export_rows(ra: RowAudit, path: str | Path) -> int:
    """Write the rows of the audited steps, in batch order, for a fixed-batch replay: one row per
    (step, rank, position) with ``__dc_step``, ``__dc_rank``, ``__dc_pos`` and ``__dc_row`` (global
    index) added, as Parquet (``.parquet``) or JSON lines (any other suffix), written atomically.
    Replaying them (train mode, eval mode, fp32) needs the user's model: the file is its input.

    Returns:
        The number of rows written.
    """
    order = pl.DataFrame(
        [(s, r, i, g) for s, rr in sorted(ra.steps.items()) for r, rows in sorted(rr.items()) for i, g in enumerate(rows)],
        schema={STEP_COLUMN: pl.Int64, RANK_COLUMN: pl.Int64, "__dc_pos": pl.Int64, ROW_COLUMN: pl.Int64}, orient="row")
    rows = pl.concat(ra.frames, how="diagonal_relaxed") if ra.frames else pl.DataFrame({ROW_COLUMN: []})
    out = order.join(rows, on=ROW_COLUMN, how="left").sort([STEP_COLUMN, RANK_COLUMN, "__dc_pos"])
    buf = io.BytesIO()
    if str(path).endswith(".parquet"):
        out.write_parquet(buf)
    else:
        out.write_ndjson(buf)
    write_bytes_atomic(Path(path), buf.getvalue())
    return out.height
