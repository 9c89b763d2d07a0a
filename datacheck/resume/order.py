"""``datacheck order verify RUN/``: which rows a run actually trained on, across resumes and ranks
(``order.*``), from its recorded ledger (:mod:`datacheck.io.ledger`: datacheck's ``data-indices/``
written by ``datacheck.torch.record_batches``, or OLMo's) against the plan of ``[batch]``
(:func:`datacheck.model.order.epoch_order`: torch's ``DistributedSampler`` + ``BatchSampler``, or, for a
ledger that ``record_batches`` wrote around a loader ``accelerator.prepare`` returned, accelerate's one
order whose batches ``BatchSamplerShard`` deals whole to the processes: ``[batch] loader = "accelerate"``;
or, with ``[batch] sampler = "random"`` in the config, one process's seeded ``DataLoader(shuffle=True)``,
its RandomSampler's order: the ledger's loader is then never taken for accelerate's).

**The plan.** ``[batch]`` of the config when it sets ``batch_size``; else the sampler settings the
ledger's first ``#state`` line recorded (``batch_size``, ``num_replicas``, ``seed``, ``shuffle``,
``drop_last``, ``grad_accum``; for accelerate also ``loader``, ``even_batches``, ``split_batches``): the
order the run set out to follow. A config whose ``[batch] loader`` is ``auto`` takes the loader (and
accelerate's ``even_batches`` and ``split_batches``) from the ledger: a ledger of an accelerate-prepared
loader is planned as accelerate deals it, never as ``DistributedSampler`` deals rows. The dataset's row count comes
from ``rows`` (``--rows N``), else from the data (``--data PATH``), else it is the largest recorded
index + 1 (a note says so: rows past it, never seen, cannot be told apart from rows that do not exist).
Global step ``s`` of the ledger (``first_step`` is the ledger's first step number: 0 for
``record_batches``, 1 for OLMo's 1-based ``global_step``) is in-epoch step ``(s - first_step) %
steps_per_epoch`` of plan epoch ``(s - first_step) // steps_per_epoch``.

**A run resumed with other settings** (a ledger whose ranks count their own steps: DatacheckCallback's): a
``#state`` line that records a ``batch_size``, ``grad_accum`` or ``num_replicas`` other than the first one's
starts a launch with those settings. Each epoch is planned with the settings of the launch that began it
(``plan.epoch_settings``), each step with those of the launch that recorded it, and a launch's step is placed
in its own segment: the epoch the ledger records it trained, from in-epoch step ``skipped // grad_accum`` (the
resumed Hugging Face Trainer counts ``ceil(len(loader) / grad_accum)`` updates an epoch with the new
settings, so global step G re-reads epoch ``G // that`` after ``(G % that) x grad_accum`` skipped
micro-batches, not where the run was). Such a resume whose rows are where its loop put them is then judged
by where the run was (the epoch in progress and the rows every rank had trained of it): later is
``skip_ahead`` (the rows between are never trained), earlier ``rewind`` or ``restart_of_epoch``; that step
is the first divergent one, ``divergence.run_position`` says where the run was, and a note gives the
Trainer's arithmetic.

**A ``record_batches`` run resumed with other settings** (its steps counted over every rank): a segment whose
``#state`` line records a ``batch_size``, ``grad_accum`` or ``num_replicas`` other than the first one's is
planned with its launch's own settings (:func:`_launch_offsets`, ``plan.launches``): its first step at the
first micro-batch of its own order past the rows every rank had trained of its epoch before it (torch's
``DistributedSampler`` orders an epoch as one permutation whatever the world size, accelerate deals the
batches of one order: the rows trained are the first rows of every launch's order), its later epochs from
their start; each epoch's visits are counted with the settings of the last launch that trained it (its
padding and ``drop_last``). A resume that skipped a batch more or fewer is then ``skip_ahead``, ``rewind`` or
``restart_of_epoch`` at its first step.

**Datasets whose size changes between epochs.** Each ``#state`` line that starts an epoch records the
rows its sampler's dataset held (``dataset_rows``; older ledgers: a ``RandomSampler``'s ``num_samples``).
When an epoch's size is not ``n_rows``, every epoch is planned over its own size, and a step's in-epoch step
is counted from the step the ledger says the epoch started at (not ``steps_per_epoch`` arithmetic). An epoch
whose size is not recorded and whose recorded length (``batches``) is not the plan's, or whose
``DistributedSampler`` kept the ``num_samples`` of another size, is not judged (``plan.epochs_not_judged``
and a note say so). Under the Hugging Face Trainer (``trainer_epoch_batches``, its ``steps_in_epoch``) an
epoch that grew is planned up to that many micro-batches (the rest are never trained:
``plan.rows_past_trainer_epoch``). Micro-batches an ``#untrained`` line names (no optimizer update took
them: the training ended first) are neither trained nor never seen: ``untrained`` and a note list them.

**Visits.** Each row's visits are counted per epoch over every rank's recorded batches of that epoch and
compared with the plan's own count. A batch's epoch is that of the segment (``#state`` line) that
recorded it, not its step number: a resume trains the epoch in progress (whatever order it restarted,
whatever steps it is numbered), a segment after an iteration that ran to its end trains the next epoch,
and a segment whose recorded epoch is later trains that one; an epoch is completed when a later one was
trained, its last segment iterated to its end, or a rank recorded an epoch's worth of micro-batches in it
(``_visit_epochs``) (the sampler's wraparound repeats are planned
twice, rows ``drop_last`` drops are planned zero times):

- ``order.seen_twice``: a row visited more often than planned in one epoch (and at least twice);
- ``order.never_seen``: a row planned in an epoch whose last step was recorded, never visited.

**Where the order left the plan.** For each step and rank the recorded rows (the rank's micro-batches
of the step, concatenated) are compared with the plan's; ``first_divergent_step`` is the first step
where any rank's differ (``order.divergent_step``). Each segment of the ledger (a ``#state`` line: a
start, an epoch, a resume) is classified by locating its first recorded step in the plan:
``continuation`` (the planned step), ``restart_of_epoch`` (the epoch's step 0: the position was
lost), ``rewind`` (an earlier step of the epoch), ``skip_ahead`` (a later one: batches skipped), ``another_epoch`` (the same position in another
epoch's permutation: the sampler's epoch was lost, ``set_epoch`` not called), ``world_size_changed``
(the step of a plan with the segment's own ``num_replicas``, where its launch is not planned with its own
settings), or ``unknown``.

**torch's RandomSampler with its draws recorded** (one process, ``record_batches`` of this datacheck: each
``#state`` line records ``sampler_seed`` or ``sampler_generator_state``, :func:`_recorded_draws`): each epoch
is planned from the draw of the ``#state`` line that began it
(:func:`~datacheck.model.order.recorded_random_order`), exactly, and judged as any simulated order; a later
iteration of the epoch (a resume) whose draw is another is judged against the epoch's (a note names both).

**An unseeded RandomSampler**: accelerate's (``DataLoader(shuffle=True)`` prepared without
``use_seedable_sampler``: accelerate seeds its generator from the process's torch RNG, and the ledger records
no seed), or torch's own ``DataLoader(shuffle=True)`` planned without ``[batch] sampler = "random"`` (its
permutations come from its generator or from the process's global torch RNG, whose state the ledger does not
record: a ledger of an older datacheck, without ``sampler_seed`` / ``sampler_generator_state``): the
permutation is not simulated, so no segment is located and no divergent step is judged; the
visits of an epoch are judged by count (:func:`_unplaced_visits`): more rows visited twice than the plan's
``even_batches`` padding repeats, or more rows unseen than its ``drop_last`` drops.

**OLMo's ledgers** (``<step>\t<index>...`` per rank, the step OLMo's 1-based ``global_step``; its order
is OLMo's own global permutation, which datacheck does not simulate): without ``[batch]``, only the
visit counts are judged (every row at most once per epoch of ``n_rows // global batch`` steps; up to
``n_rows % global batch`` unseen rows per epoch are what OLMo's dropped last batch leaves).

**Ranks.** After a resume, every rank's first recorded step is located in the plan; ranks at different
plan positions, or whose resume records start at different steps, are ``order.rank_skew``.
"""
from __future__ import annotations

import bisect
import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from datacheck.io.ledger import Ledger, step_indices
from datacheck.model import catalog
from datacheck.model.config import BatchSection
from datacheck.model.errors import UsageError
from datacheck.model.findings import Finding
from datacheck.model.order import EpochOrder, epoch_order, generator_state_bytes, recorded_random_order
from datacheck.model.torchdep import require_torch

__all__ = ["OrderVerdict", "verify_order", "plan_from_ledger", "recorded_loader", "summary_lines", "ORDER_KINDS", "FIRST_IDS"]

#: how a segment's recorded order relates to the plan
#: the loader settings a ledger's ``#state`` line records, compared between a rank's segments
_SETTINGS = ("num_replicas", "batch_size", "seed", "shuffle", "grad_accum")
ORDER_KINDS = ("start", "continuation", "restart_of_epoch", "rewind", "skip_ahead", "another_epoch", "world_size_changed",
               "unknown")
#: row ids listed in a finding (the count is always complete)
FIRST_IDS = 20


@dataclass
class OrderVerdict:
    """What ``order verify`` found.

    Attributes:
        plan: the plan's settings (``batch_size``, ``world_size``, ``grad_accum``, ``drop_last``, ``seed``,
            ``shuffle``), ``n_rows``, ``steps_per_epoch``, ``first_step`` and where they came from.
        ledger: folder, format, ranks, recorded steps.
        segments: one per ``#state`` line per rank: ``rank``, ``start_step``, ``epoch`` (recorded), ``kind``
            (``start`` | ``epoch`` | ``resume``), ``order`` (one of :data:`ORDER_KINDS`), ``located`` (the plan
            position of its first step: ``epoch``, ``step``, ``world_size``) and the settings that changed.
        seen_twice: ``count`` (rows), ``extra_visits``, ``rows`` (the first ids), ``by_epoch``.
        never_seen: ``count``, ``rows`` (the first ids), ``by_epoch``, ``completed_epochs``.
        untrained: the rows of micro-batches the ledger says no optimizer update took (``#untrained``):
            ``count``, ``rows`` (the first ids), ``by_epoch``, ``steps``; empty when there are none (and
            then absent from :meth:`to_dict`).
        first_divergent_step: the first step whose recorded rows differ from the plan's on some rank, or None.
        divergence: at that step: ``rank``, ``order`` kind and where the recorded rows are in the plan.
        rank_skew: per resume point where ranks disagree: the ranks' plan positions.
        findings: the ``order.*`` findings.
        notes: what could not be judged.
    """

    plan: dict[str, Any]
    ledger: dict[str, Any]
    segments: list[dict[str, Any]] = field(default_factory=list)
    seen_twice: dict[str, Any] = field(default_factory=dict)
    never_seen: dict[str, Any] = field(default_factory=dict)
    untrained: dict[str, Any] = field(default_factory=dict)
    first_divergent_step: int | None = None
    divergence: dict[str, Any] | None = None
    rank_skew: list[dict[str, Any]] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"plan": self.plan, "ledger": self.ledger, "segments": self.segments, "seen_twice": self.seen_twice,
                "never_seen": self.never_seen, **({"untrained": self.untrained} if self.untrained else {}),
                "first_divergent_step": self.first_divergent_step,
                "divergence": self.divergence, "rank_skew": self.rank_skew,
                "findings": [f.to_dict() for f in self.findings], "notes": self.notes}


def _finding(cid: str, message: str, count: int, rows: list[int] | tuple[int, ...] = (), **details: Any) -> Finding:
    sev = catalog.info(cid).severity
    return Finding(check=cid, severity=sev, message=message, count=count, rows=tuple(rows[:FIRST_IDS]),
                   details=details, fails_policy=sev == "error", rows_truncated=len(rows) > FIRST_IDS)


def _first_state(led: Ledger) -> dict[str, Any] | None:
    """The ledger's first ``#state`` line (rank 0's, else the lowest rank's), or None (an OLMo ledger)."""
    for r in led.ranks:
        states = led.states.get(r) or []
        if states:
            return states[0]
    return None


def recorded_loader(led: Ledger) -> dict[str, Any]:
    """The ``[batch]`` loader settings the ledger's first ``#state`` line recorded: ``{"loader":
    "accelerate", "even_batches": ..., "split_batches": ...}`` for a loader ``accelerator.prepare``
    returned (``record_batches`` writes ``"loader": "accelerate"``), else ``{}`` (torch's samplers)."""
    st = _first_state(led)
    if st is None or st.get("loader") != "accelerate":
        return {}
    return {"loader": "accelerate", "even_batches": bool(st.get("even_batches", True)),
            "split_batches": bool(st.get("split_batches", False))}


def plan_from_ledger(led: Ledger) -> BatchSection | None:
    """The ``[batch]`` settings the ledger's first ``#state`` line recorded (rank 0's, else the lowest
    rank's; :func:`recorded_loader`), or None when it has none (an OLMo ledger)."""
    st = _first_state(led)
    if st is None:
        return None
    bs = st.get("batch_size")
    if not isinstance(bs, int) or bs < 1:
        return None
    return BatchSection(batch_size=bs, world_size=int(st.get("num_replicas") or 1),
                        grad_accum=int(st.get("grad_accum") or 1), drop_last=bool(st.get("drop_last")),
                        seed=int(st.get("seed") or 0), shuffle=bool(st.get("shuffle", True)), **recorded_loader(led))


class _Plans:
    """Epoch orders of the plan (and of other world sizes), built on demand and cached."""

    def __init__(self, n_rows: int, batch: BatchSection, sizes: dict[int, int] | None = None,
                 cut: dict[tuple[int, int], int] | None = None, launches: dict[int, BatchSection] | None = None,
                 tails: dict[int, BatchSection] | None = None, draws: dict[int, dict[str, Any]] | None = None):
        self.n_rows, self.batch = n_rows, batch
        #: epoch -> what its RandomSampler drew its permutation from, as the ledger recorded it when the epoch
        #: began (:func:`_recorded_draws`: ``seed`` or ``generator_state``, ``num_samples``): planned so on one rank
        self.draws = draws or {}
        #: epoch -> the rows its dataset held (an epoch not named: ``n_rows``)
        self.sizes = sizes or {}
        #: (epoch, rank) -> the most micro-batches the training loop trains of the epoch (the Hugging Face
        #: Trainer's ``steps_in_epoch``: the batches an epoch that grew holds past it are never trained)
        self.cut = cut or {}
        #: epoch -> the settings of the launch that began it, where they are not ``batch``'s (a run resumed
        #: with another batch size, grad_accum or world size: :func:`_launch_settings`)
        self.launches = launches or {}
        #: epoch -> the settings of the last launch that trained it, where its visits are counted with them (a
        #: ``record_batches`` run resumed with other settings: the rows the launches before it trained are the
        #: first rows of every launch's order, the padding and the rows ``drop_last`` drops are the last one's)
        self.tails = tails or {}
        self._orders: dict[tuple[int, int, int, int], EpochOrder] = {}
        self._index: dict[tuple[int, int, int, int], dict[tuple[int, ...], tuple[int, int]]] = {}

    def batch_of(self, epoch: int) -> BatchSection:
        """The settings ``epoch`` is planned with: those of the launch that began it."""
        return self.launches.get(epoch, self.batch)

    def _key(self, epoch: int, world_size: int | None, batch: BatchSection | None) -> tuple[tuple[int, int, int, int],
                                                                                              BatchSection]:
        b = self.batch_of(epoch) if batch is None else batch
        ws = world_size or b.world_size
        if ws != b.world_size:
            b = b.model_copy(update={"world_size": ws})
        return (epoch, ws, int(b.batch_size or 0), b.grad_accum), b

    def order(self, epoch: int, world_size: int | None = None, batch: BatchSection | None = None) -> EpochOrder:
        """``epoch``'s order under its own settings (:meth:`batch_of`), or ``batch``'s, with ``world_size``
        ranks; the Trainer's cut (``cut``) applies to the epoch's own settings only."""
        key, b = self._key(epoch, world_size, batch)
        if key not in self._orders:
            draw = self.draws.get(epoch)
            if draw is not None and b.world_size == 1:
                o = recorded_random_order(self.sizes.get(epoch, self.n_rows), b, epoch, **draw)
            else:
                o = epoch_order(self.sizes.get(epoch, self.n_rows), b, epoch)
            if key == self._key(epoch, None, None)[0] and any(k[0] == epoch for k in self.cut):
                o = dataclasses.replace(o, ranks=tuple(mbs[: self.cut.get((epoch, r), len(mbs))]
                                                       for r, mbs in enumerate(o.ranks)))
            self._orders[key] = o
        return self._orders[key]

    def step_rows(self, epoch: int, step: int, rank: int, world_size: int | None = None,
                  batch: BatchSection | None = None) -> tuple[int, ...] | None:
        """The rows of in-epoch ``step`` on ``rank`` (micro-batches concatenated), or None past the epoch."""
        o = self.order(epoch, world_size, batch)
        if not 0 <= step < o.steps or rank >= len(o.ranks):
            return None
        mbs = o.ranks[rank]
        lo, hi = step * o.grad_accum, min((step + 1) * o.grad_accum, len(mbs))
        return tuple(int(g) for m in range(lo, hi) for g in mbs[m])

    def locate(self, rows: tuple[int, ...], epoch: int, world_size: int | None = None,
               batch: BatchSection | None = None) -> tuple[int, int] | None:
        """(rank, in-epoch step) of ``rows`` in ``epoch``'s plan (or ``batch``'s), or None."""
        key, b = self._key(epoch, world_size, batch)
        if self.draws and epoch not in self.draws:  # an epoch whose draw no #state records: no order to locate in
            return None
        if key not in self._index:
            o = self.order(epoch, batch=b)
            self._index[key] = {self.step_rows(epoch, s, r, batch=b) or (): (r, s)
                                for r in range(len(o.ranks)) for s in range(o.steps)}
        return self._index[key].get(rows)

    def own_pos(self, n: int, rank: int) -> tuple[int, int] | None:
        """(epoch, in-epoch step) of ``rank``'s ``n``-th step when each rank counts its own steps over its
        own epochs (``ceil(its micro-batches / grad_accum)`` each: the Hugging Face Trainer), or None when
        the plan gives the rank no step."""
        epoch = 0
        while True:
            o = self.order(epoch)
            if rank >= len(o.ranks):
                return None
            steps = -(-len(o.ranks[rank]) // o.grad_accum)
            if steps == 0:
                return None
            if n < steps:
                return epoch, n
            epoch, n = epoch + 1, n - steps

    def counts(self, epoch: int) -> np.ndarray:
        """Each row's planned visits in ``epoch`` (int64, shape ``(n_rows,)``): under the settings of the
        launch that ended it (``tails``), else its own (:meth:`batch_of`)."""
        o = self.order(epoch, batch=self.tails.get(epoch))
        parts = [mb for mbs in o.ranks for mb in mbs]
        idx = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        return np.bincount(idx, minlength=self.n_rows)[: self.n_rows]


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _launch_settings(led: Ledger, batch: BatchSection,
                     segments: dict[int, list[dict[str, Any]]]) -> dict[int, list[BatchSection | None]]:
    """Per rank, per segment (:func:`_rank_segments`): the settings of the launch that recorded it, where its
    ``#state`` line records a ``batch_size``, ``grad_accum`` or ``num_replicas`` other than the ledger's first
    ``#state`` line (a run resumed with other settings), else None (the plan's). A setting a ``#state`` line
    leaves null is the last one the rank recorded."""
    st0 = _first_state(led) or {}
    base = {k: _int(st0.get(k)) for k in ("batch_size", "grad_accum", "num_replicas")}
    field_of = {"batch_size": "batch_size", "grad_accum": "grad_accum", "num_replicas": "world_size"}
    out: dict[int, list[BatchSection | None]] = {}
    for r, segs in segments.items():
        known = dict(base)
        got: list[BatchSection | None] = []
        for sg in segs:
            known.update({k: v for k in base if (v := _int(sg["state"].get(k))) is not None and v > 0})
            upd = {field_of[k]: v for k, v in known.items() if v is not None and base[k] is not None and v != base[k]}
            got.append(batch.model_copy(update=upd) if upd else None)
        out[r] = got
    return out


def _launch_offsets(plans: _Plans, segments: dict[int, list[dict[str, Any]]],
                    seg_batch: dict[int, list[BatchSection | None]], batch: BatchSection) -> dict[int, list[tuple[int, int]]]:
    """Per rank, per segment (:func:`_rank_segments`) of a ``record_batches`` ledger resumed with other settings:
    ``(micro_batch, rows_before)``: the micro-batch of the rank's order under the segment's own launch settings
    (``seg_batch``, else ``batch``) its first step begins at, and the rows every rank recorded of the segment's
    epoch before its start step (the rows the launches before it trained).

    The launch continues the samples already consumed: torch's ``DistributedSampler`` orders an epoch as one
    permutation of its seed whatever the world size (rank ``r`` takes positions ``r, r + W, ...``) and accelerate
    deals the batches of one order, so the rows the run trained of the epoch are the first rows of the new
    launch's order too, and its first step is the first micro-batch past them: the most micro-batches per rank
    whose rows over every rank of the new plan are at most ``rows_before`` (a resume whose rows do not end on a
    batch of the new size starts at the batch holding the cut: its consumed rows are trained again, counted
    by the visits). A segment after its rank's iteration that ran to its end begins its epoch at micro-batch 0
    (a rank that began the epoch sooner is ``order.rank_skew``, not this rank's position)."""
    out: dict[int, list[tuple[int, int]]] = {}
    for r, segs in segments.items():
        got: list[tuple[int, int]] = []
        for k, sg in enumerate(segs):
            e = sg["epoch"]
            # a rank's iteration after one that ran to its end begins the epoch: nothing of it is trained before
            began = k > 0 and segs[k - 1]["ran_out"] and segs[k - 1]["epoch"] < e
            before = 0 if began else sum(len(m) for other in segments.values() for x in other
                                         if x["epoch"] == e and x["start"] < sg["start"] for m in x["mbs"])
            mb = 0
            if before:
                o = plans.order(e, batch=seg_batch[r][k] or batch)
                acc, most = 0, max((len(x) for x in o.ranks), default=0)
                while mb < most:
                    rows = sum(len(x[mb]) for x in o.ranks if mb < len(x))
                    if acc + rows > before:
                        break
                    acc, mb = acc + rows, mb + 1
            got.append((mb, before))
        out[r] = got
    return out


def _landing(plans: _Plans, segments: dict[int, list[dict[str, Any]]], seg_batch: dict[int, list[BatchSection | None]],
             batch: BatchSection, r: int, k: int) -> dict[str, Any]:
    """Where rank ``r``'s segment ``k`` (a resume of a launch with other settings, its first step holding the
    rows of its own position) took the run: its epoch and the rows its skipped micro-batches (``skipped``)
    hold over every rank of its launch, against where the run was (the epoch in progress before it and the
    rows every rank's earlier segments trained of it). ``order``: ``continuation`` (the same place),
    ``skip_ahead`` (later: rows in between never trained), ``restart_of_epoch`` or ``rewind`` (earlier)."""
    sg, before = segments[r][k], segments[r][k - 1]
    b = seg_batch[r][k] or batch
    skipped = _int(sg["state"].get("skipped")) or 0
    epoch = sg["epoch"]
    rows = sum(len(m) for mbs in plans.order(epoch, batch=b).ranks for m in mbs[:skipped])
    run_epoch = before["epoch"]
    total = int(plans.counts(run_epoch).sum())
    run_rows = sum(len(m) for segs in segments.values() for x in segs
                   if x["epoch"] == run_epoch and x["start"] < sg["start"] for m in x["mbs"])
    if before["ran_out"] or run_rows >= total:
        run_epoch, run_rows = run_epoch + 1, 0
    order = ("continuation" if (epoch, rows) == (run_epoch, run_rows) else "skip_ahead"
             if (epoch, rows) > (run_epoch, run_rows) else "restart_of_epoch" if (epoch, rows) == (run_epoch, 0)
             else "rewind")
    return {"order": order, "rank": r, "epoch": epoch, "skipped": skipped, "rows_skipped": rows, "batch": b,
            "trainer_epoch_batches": _int(sg["state"].get("trainer_epoch_batches")), "run_epoch": run_epoch,
            "run_rows": run_rows}


def _landing_note(step: int, j: dict[str, Any]) -> str:
    """The note on a relaunch that did not resume where the run was: the Hugging Face Trainer's arithmetic
    (``_init_training_state``: epoch ``global_step // num_update_steps_per_epoch``, skipping ``(global_step %
    num_update_steps_per_epoch) x grad_accum`` micro-batches, ``num_update_steps_per_epoch`` =
    ``ceil(len(loader) / grad_accum)`` of the resumed launch's loader) and what it trained."""
    b: BatchSection = j["batch"]
    t = j["trainer_epoch_batches"]
    text = (f"rank {j['rank']}: the launch resumed at step {step} trains with batch_size {b.batch_size} x world_size "
            f"{b.world_size} x grad_accum {b.grad_accum}")
    if t:
        per = max(-(-t // b.grad_accum), 1)
        text += (f"; the Hugging Face Trainer counts {per} steps an epoch (ceil({t} micro-batches / grad_accum "
                 f"{b.grad_accum})), so global step {step} is epoch {step // per} ({step} // {per}) after "
                 f"{(step % per) * b.grad_accum} micro-batches (({step} % {per}) x {b.grad_accum})")
    text += (f": it trained epoch {j['epoch']} from micro-batch {j['skipped']} ({j['rows_skipped']} rows skipped), "
             f"where the run had trained {j['run_rows']} rows of epoch {j['run_epoch']}: ")
    return text + ("the rows in between are never trained (order.never_seen counts them by epoch)"
                   if j["order"] == "skip_ahead" else "rows are trained again (order.seen_twice counts them by epoch)")


def _epoch_starts(segments: dict[int, list[dict[str, Any]]]) -> dict[int, list[tuple[int, int, dict[str, Any]]]]:
    """Per rank, ``(start_step, plan epoch, #state)`` of each segment that starts a plan epoch (the first
    segment of each epoch :func:`_rank_segments` places); a resume continues the epoch in progress."""
    out: dict[int, list[tuple[int, int, dict[str, Any]]]] = {}
    for r, segs in segments.items():
        got: list[tuple[int, int, dict[str, Any]]] = []
        for sg in segs:
            if not got or sg["epoch"] != got[-1][1]:
                got.append((sg["start"], sg["epoch"], sg["state"]))
        out[r] = got
    return out


def _epoch_sizes(segments: dict[int, list[dict[str, Any]]], plans: _Plans,
                 starts: dict[int, list[tuple[int, int, dict[str, Any]]]]) -> tuple[dict[int, int], set[int], list[str]]:
    """Each plan epoch's dataset size, from the ``#state`` line that started it (:func:`_epoch_starts`):
    ``dataset_rows`` (what ``record_batches`` reads from the sampler's dataset when the epoch's iteration
    starts), else the ``num_samples`` of a ``RandomSampler`` / ``SeedableRandomSampler`` (its dataset's
    length unless given).

    Returns ``(sizes, unknown, notes)``: ``sizes`` maps the epochs whose size is recorded; ``unknown`` holds
    the epochs with none whose iteration's recorded length (``batches``) is not the one ``plans`` gives
    with ``n_rows`` rows (their dataset is not the planned one, and how many rows it held is not known), or
    whose ranks record different sizes."""
    sizes: dict[int, int] = {}
    unknown: set[int] = set()
    notes: list[str] = []
    for _r, got in sorted(starts.items()):
        for _start, e, st in got:
            n = _int(st.get("dataset_rows"))
            if n is None and st.get("sampler") in ("RandomSampler", "SeedableRandomSampler"):
                n = _int(st.get("num_samples"))
            if n is None or n < 0:
                continue
            ns, nr = _int(st.get("num_samples")), _int(st.get("num_replicas"))
            if st.get("sampler") == "DistributedSampler" and ns is not None and nr and ns != (
                    n // nr if st.get("sampler_drop_last") else -(-n // nr)) and e not in unknown:
                # a DistributedSampler reused over a dataset that changed size keeps the num_samples it computed
                # when built: it pads (or cuts) randperm(new size) to that, an order not simulated
                unknown.add(e)
                notes.append(f"epoch {e}: the DistributedSampler's num_samples {ns} is not the share of the "
                             f"{n} rows its dataset held (it was built for another size): its rows and steps are "
                             "not judged; build the sampler anew when the dataset changes")
                continue
            if e in sizes and sizes[e] != n and e not in unknown:
                unknown.add(e)
                notes.append(f"epoch {e}: the ranks' #state lines record dataset sizes {sizes[e]} and {n}: its "
                             "rows and steps are not judged")
            sizes.setdefault(e, n)
    for r, got in sorted(starts.items()):
        for _start, e, st in got:
            b = _int(st.get("batches"))
            if e in sizes or e in unknown or b is None:
                continue
            o = plans.order(e)
            planned = len(o.ranks[r]) if r < len(o.ranks) else 0
            b += _int(st.get("skip_batches")) or 0
            if b != planned:
                unknown.add(e)
                notes.append(f"epoch {e}: its iteration yielded {b} micro-batch(es) on rank {r} where the plan of "
                             f"{plans.n_rows} rows gives {planned}, and the ledger records no dataset size for it (a "
                             "dataset whose size changed, recorded by an older datacheck): its rows and steps are "
                             "not judged; record with this datacheck's record_batches / DatacheckCallback")
    # a resume that iterated another dataset size than its epoch began with (accelerate's DataLoaderShard.set_epoch
    # does not call a dataset's set_epoch on the loader skip_first_batches builds): its rows are not the epoch's
    for r, segs in segments.items():
        for sg in segs:
            n = _int(sg["state"].get("dataset_rows"))
            e = sg["epoch"]
            if n is not None and e in sizes and e not in unknown and n != sizes[e]:
                notes.append(f"rank {r}: the iteration that began at step {sg['start']} trained epoch {e} over a "
                             f"dataset of {n} rows, where the epoch began with {sizes[e]}: its rows are not the "
                             "epoch's (judged against the epoch's plan)")
    return sizes, unknown, notes


def _classify(plans: _Plans, rows: tuple[int, ...], epoch: int, step: int, world_size: int,
              epochs_seen: int, batch: BatchSection | None = None) -> tuple[str, dict[str, Any] | None]:
    """Where ``rows`` (recorded at plan ``epoch``, in-epoch ``step``) are in the plan (``batch``: the settings
    of the launch that recorded them, else the epoch's own): (order kind, position)."""
    hit = plans.locate(rows, epoch, batch=batch)
    if hit is not None:
        r, s = hit
        if s == step:
            return "continuation", {"epoch": epoch, "step": s, "rank": r}
        if s == 0:
            return "restart_of_epoch", {"epoch": epoch, "step": s, "rank": r}
        return ("rewind" if s < step else "skip_ahead"), {"epoch": epoch, "step": s, "rank": r}
    for e in range(max(epochs_seen, epoch + 2)):
        if e == epoch:
            continue
        hit = plans.locate(rows, e, batch=batch)
        if hit is not None:
            return "another_epoch", {"epoch": e, "step": hit[1], "rank": hit[0]}
    if world_size != (batch or plans.batch_of(epoch)).world_size:
        hit = plans.locate(rows, epoch, world_size)
        if hit is not None:
            return "world_size_changed", {"epoch": epoch, "step": hit[1], "rank": hit[0], "world_size": world_size}
    return "unknown", None



def verify_order(led: Ledger, batch: BatchSection | None, n_rows: int | None, *, first_step: int | None = None,
                 plan_source: str = "config") -> OrderVerdict:
    """Compare the recorded order of ``led`` with the plan (see the module docstring).

    Args:
        led: the ledger (:func:`datacheck.io.ledger.read_ledger`).
        batch: the plan's ``[batch]`` settings; None: those the ledger recorded (:func:`plan_from_ledger`).
        n_rows: rows of the dataset; None: the largest recorded index + 1 (noted).
        first_step: the ledger's step number of the run's first step (default 0, OLMo's ledgers 1).
        plan_source: where ``batch`` came from, for the output.

    Raises:
        UsageError: no ``[batch] batch_size`` and none recorded (an OLMo ledger: give a config), an empty
            ledger, token-budget batching (``max_tokens``: not verified), a recorded index outside
            ``n_rows``, or a recorded epoch dataset size (``dataset_rows``) above the ``n_rows`` given.
    """
    notes: list[str] = []
    if batch is None or batch.batch_size is None:
        batch = plan_from_ledger(led)
        plan_source = "ledger"
        if batch is None and led.format == "olmo":
            return _verify_counts(led, n_rows, 1 if first_step is None else first_step)
        if batch is None:
            raise UsageError("order verify needs the plan: give --config with [batch] batch_size (and world_size, "
                             "grad_accum, seed, shuffle, drop_last as trained); this ledger records no sampler settings")
    elif batch.loader == "auto" and batch.sampler == "distributed" and recorded_loader(led):
        batch = batch.model_copy(update=recorded_loader(led))
        notes.append("[batch] loader is auto and the ledger recorded an accelerate-prepared loader: planned as "
                     "accelerate deals batches (loader accelerate, even_batches "
                     f"{str(batch.even_batches).lower()}, split_batches {str(batch.split_batches).lower()} as recorded)")
    if batch.max_tokens is not None:
        raise UsageError("[batch] max_tokens: token-budget batching is not verified by order verify")
    steps = step_indices(led)
    if not steps:
        raise UsageError(f"the ledger {led.folder} records no batch")
    top = max((int(v.array.max()) for per in steps.values() for v in per.values() if v), default=-1)
    top = max([top] + [int(b.indices.array.max()) for per in led.untrained.values() for bs in per.values()
                       for b in bs if b.indices])
    given_rows = n_rows is not None
    if n_rows is None:
        n_rows = top + 1
        notes.append(f"the dataset's row count is not given (--rows N or --data PATH): taken as the largest recorded "
                     f"index + 1 = {n_rows}; rows past it are not judged")
    elif top >= n_rows:
        raise UsageError(f"the ledger records row {top}, but the dataset has {n_rows} rows: was it recorded over "
                         "other data?")
    first = (1 if led.format == "olmo" else 0) if first_step is None else first_step
    # a ledger whose ranks count their own steps over their own epochs (the Hugging Face Trainer's, and any
    # accelerate loop's with even_batches=False a rank with a batch fewer starts its next epoch sooner): each rank placed by its own
    own = any(st.get("epoch_steps") == "own" for sts in led.states.values() for st in sts)
    # a dataset whose size changed between epochs: each epoch planned with its own recorded size, its steps
    # placed where the ledger says the epoch started; an epoch whose size is not known is not judged
    segments = {r: _rank_segments(led, r, first) for r in led.ranks} if led.format == "datacheck" else {}
    starts = _epoch_starts(segments)
    # a run resumed with another batch size, grad_accum or world size (own step counting: the Trainer's
    # arithmetic): each launch's epochs planned with its settings, its steps placed where its loop put them
    seg_batch = _launch_settings(led, batch, segments) if led.format == "datacheck" else {}
    # a record_batches ledger (its steps counted over every rank) resumed with other settings: each launch
    # planned with its own, from the rows the run had trained of the epoch (:func:`_launch_offsets`)
    per_launch = not own and any(b is not None for bs in seg_batch.values() for b in bs)
    if not (own or per_launch):
        seg_batch = {}
    launches: dict[int, BatchSection] = {}  # epoch -> the settings of the launch that began it (not the plan's)
    for r in sorted(seg_batch) if own else ():
        begun: set[int] = set()
        for k, sg in enumerate(segments[r]):
            if sg["epoch"] not in begun:
                begun.add(sg["epoch"])
                if (b := seg_batch[r][k]) is not None:
                    launches.setdefault(sg["epoch"], b)
    relaunched = own and any(b is not None for bs in seg_batch.values() for b in bs)
    # per_launch: an epoch's visits are counted with the settings of the last launch that trained it
    last_launch: dict[int, tuple[int, BatchSection | None]] = {}
    for r, segs in segments.items() if per_launch else ():
        for k, sg in enumerate(segs):
            if sg["mbs"] and (sg["epoch"] not in last_launch or sg["start"] >= last_launch[sg["epoch"]][0]):
                last_launch[sg["epoch"]] = (sg["start"], seg_batch[r][k])
    tails = {e: b for e, (_s, b) in last_launch.items() if b is not None}
    # torch's RandomSampler with its draw recorded each epoch (record_batches): each epoch's permutation replayed
    draws, draw_notes = _recorded_draws(led, batch, segments) if led.format == "datacheck" else (None, [])
    notes.extend(draw_notes)
    plans = _Plans(n_rows, batch, launches=launches, tails=tails, draws=draws)
    cut_rows: dict[str, int] = {}
    sizes, unknown, size_notes = _epoch_sizes(segments, plans, starts)
    if sizes and max(sizes.values()) > n_rows:
        if given_rows:
            raise UsageError(f"the ledger records an epoch over {max(sizes.values())} rows, but the dataset has "
                             f"{n_rows} rows: was it recorded over other data?")
        n_rows = max(sizes.values())
        notes[-1] = (f"the dataset's row count is not given (--rows N or --data PATH): taken as the largest dataset "
                     f"size the ledger records, {n_rows}")
    varying = bool(unknown) or any(n != n_rows for n in sizes.values())
    # the Hugging Face Trainer trains at most its first epoch's micro-batches an epoch (``steps_in_epoch``)
    cut = {(e, r): c for r, got in starts.items() for _s, e, st in got
           if (c := _int(st.get("trainer_epoch_batches"))) is not None and c > 0}
    notes.extend(size_notes)
    if varying or cut:
        full = _Plans(n_rows, batch, sizes if varying else None, launches=launches, tails=tails, draws=draws)
        plans = _Plans(n_rows, batch, sizes if varying else None, cut, launches=launches, tails=tails, draws=draws)
        cut_rows: dict[str, int] = {}
        for (e, r), c in sorted(cut.items()):
            if e in unknown:
                continue
            o = full.order(e)
            mbs = o.ranks[r] if r < len(o.ranks) else ()
            if len(mbs) > c:
                cut_rows[str(e)] = cut_rows.get(str(e), 0) + sum(len(m) for m in mbs[c:])
                notes.append(f"epoch {e} on rank {r}: its loader yields {len(mbs)} micro-batches, the Hugging Face "
                             f"Trainer trains the first {c} (its steps_in_epoch, the length of its first epoch in "
                             f"this train()): micro-batches {c}..{len(mbs) - 1} "
                             f"({sum(len(m) for m in mbs[c:])} rows) are never trained, nor planned")
    spe = plans.order(0).steps
    if spe == 0:
        raise UsageError(f"the plan has no step: {n_rows} rows under batch_size {batch.batch_size}")
    ws = batch.world_size
    simulated = draws is not None or not _unseeded_shuffle(led, batch)
    if not simulated and batch.loader == "accelerate":
        notes.append("the ledger's accelerate loader shuffles with a RandomSampler whose generator accelerate seeds "
                     "from the process's torch RNG (no seed recorded): its order is not simulated, so no divergent "
                     "step is judged; visits are judged by count (the even_batches padding repeats, and drop_last "
                     "drops, as many rows as planned, which ones is not known); use_seedable_sampler=True with a "
                     "data_seed, or a DistributedSampler(num_replicas=1, seed=...), makes the order checkable")
    elif not simulated:
        notes.append("the ledger's loader shuffles with torch's RandomSampler (DataLoader(shuffle=True)), whose "
                     "permutations come from the DataLoader's generator, or from the process's global torch RNG when "
                     "it has none (no draw recorded: a ledger of an older datacheck): its order is not simulated, so "
                     "no divergent step is judged; visits are judged by count (drop_last drops as many rows as "
                     "planned, which ones is not known); recording with this datacheck's record_batches (it records "
                     "each epoch's draw) makes the order checkable with no config, and so does, with "
                     "DataLoader(..., generator=torch.Generator().manual_seed(SEED)), [batch] sampler = \"random\" "
                     "with seed = SEED in datacheck.toml")
    plan_info = {"source": plan_source, "n_rows": n_rows, "batch_size": batch.batch_size, "world_size": ws,
                 "grad_accum": batch.grad_accum, "drop_last": batch.drop_last, "seed": batch.seed,
                 "shuffle": batch.shuffle, "steps_per_epoch": spe, "first_step": first,
                 "loader": "accelerate" if batch.loader == "accelerate" else "torch"}
    if batch.loader == "accelerate":
        plan_info.update(even_batches=batch.even_batches, split_batches=batch.split_batches)
    if not simulated:  # an unseeded RandomSampler: the plan's seed is none the run used
        plan_info.update(simulated=False, seed=None)
    if draws is not None:  # each epoch's RandomSampler draw, as recorded: no plan seed
        plan_info.update(seed=None, sampler="random_recorded", epoch_draws={
            str(e): ({"seed": d["seed"]} if d.get("seed") is not None else {"generator_state": "recorded"})
            for e, d in sorted(draws.items())})
    if batch.sampler == "random":
        plan_info.update(sampler="random", persistent_workers=batch.persistent_workers)
    ledger_info = {"folder": str(led.folder), "format": led.format, "ranks": led.ranks,
                   "steps": len(steps), "first": min(steps), "last": max(steps), "truncated": led.truncated}
    v = OrderVerdict(plan=plan_info, ledger=ledger_info, notes=notes)
    if varying:
        plan_info["epoch_rows"] = {str(e): (None if e in unknown else sizes.get(e, n_rows))
                                   for e in sorted({e for got in starts.values() for _s, e, _st in got})}
    if cut_rows:
        plan_info["rows_past_trainer_epoch"] = cut_rows
    for r, rs in sorted(led.restarts.items()):
        for rs1 in rs:
            notes.append(f"rank {r}: the run started over at step {rs1['start_step']} (ledger line {rs1['line']}): the "
                         f"{rs1['superseded']} step(s) recorded before it ({rs1['first']}..{rs1['last']}: an earlier "
                         "run recorded into the same folder) are superseded; the run after it is judged")
    if launches:
        plan_info["epoch_settings"] = {str(e): {"batch_size": b.batch_size, "grad_accum": b.grad_accum,
                                                "world_size": b.world_size} for e, b in sorted(launches.items())}
    if led.truncated:
        notes.append("torn ledger file(s): " + "; ".join(f"{f} {led.tears.get(f, 'torn')}" for f in led.truncated))
    silent = [r for r in range(ws) if not led.batches.get(r)]
    if silent:
        notes.append(f"rank(s) {silent[:16]}{' ...' if len(silent) > 16 else ''} of world size {ws} recorded no batch "
                     "(no rank<r>.tsv.gz file, or one with no complete line): the rows planned for them count as "
                     "never seen; copy their ledger files, or the run lost them")

    if own:
        notes.append("the ledger's ranks count their own steps over their own epochs (the Hugging Face Trainer's "
                     "numbering, and accelerate's with even_batches=False): each rank's step is placed in its own "
                     "epochs")

    if varying:
        notes.append("the dataset's size changed between epochs (" + ", ".join(
            f"epoch {e}: " + ("not known" if e in unknown else f"{sizes.get(e, n_rows)} rows")
            for e in sorted({e for got in starts.values() for _s, e, _st in got})) + "): each epoch is planned "
            "with its own size, its steps counted from the step the ledger records it started at")
    bounds = {r: sorted((st0, e) for st0, e, _st in got) for r, got in starts.items()}
    # a relaunch with other settings: each step placed in its segment, which begins at in-epoch step
    # ``skipped // grad_accum`` (the resumed Trainer's updates already taken in the epoch it re-reads)
    seg_firsts = ({r: [sg["start"] for sg in segs] for r, segs in segments.items()} if relaunched or per_launch
                  else {})
    offsets = _launch_offsets(plans, segments, seg_batch, batch) if per_launch else {}
    if per_launch:
        # each segment that begins a launch on its rank (its first, or one whose settings are not the one's before)
        plan_info["launches"] = []
        for r, segs in sorted(segments.items()):
            for k, sg in enumerate(segs):
                if k == 0 or seg_batch[r][k] != seg_batch[r][k - 1]:
                    b = seg_batch[r][k] or batch
                    plan_info["launches"].append(
                        {"rank": r, "start_step": sg["start"], "epoch": sg["epoch"], "batch_size": b.batch_size,
                         "world_size": b.world_size, "grad_accum": b.grad_accum, "micro_batch": offsets[r][k][0],
                         "rows_before": offsets[r][k][1]})
        notes.append("the run was resumed with another batch size, grad_accum or world size: each launch is planned "
                     "with its own settings (plan.launches), its first step at the first micro-batch of its order past "
                     "the rows the run had trained of the epoch, and each epoch's visits with the settings of the last "
                     "launch that trained it")
    seg_monotone = {r: all(a <= b for a, b in zip(f, f[1:])) for r, f in seg_firsts.items()}

    def seg_at(step: int, rank: int) -> int | None:
        """Index of the segment of ``rank`` that holds ``step`` (the last one in file order starting at or
        before it, as :func:`_rank_segments` assigns batches), or None."""
        firsts = seg_firsts.get(rank) or []
        if seg_monotone.get(rank, True):
            k = bisect.bisect_right(firsts, step) - 1
            return k if k >= 0 else None
        return next((k for k in range(len(firsts) - 1, -1, -1) if firsts[k] <= step), None)

    def seg_offset(rank: int, k: int) -> int:
        sg = segments[rank][k]
        return (_int(sg["state"].get("skipped")) or 0) // (seg_batch[rank][k] or batch).grad_accum

    def sbatch(step: int, rank: int) -> BatchSection | None:
        """The settings of the launch that recorded ``step`` on ``rank`` (None: the epoch's own)."""
        k = seg_at(step, rank) if relaunched or per_launch else None
        return None if k is None else (seg_batch[rank][k] or batch)

    def pos(step: int, rank: int | None = None) -> tuple[int, int]:
        if per_launch and rank is not None:
            k = seg_at(step, rank)
            if k is not None:
                sg = segments[rank][k]
                return sg["epoch"], step - sg["start"] + offsets[rank][k][0] // (seg_batch[rank][k] or batch).grad_accum
        if relaunched and rank is not None:
            k = seg_at(step, rank)
            if k is not None:
                return segments[rank][k]["epoch"], step - segments[rank][k]["start"] + seg_offset(rank, k)
        if varying:
            b = bounds.get(rank if rank is not None else min(bounds, default=0)) or []
            at = next(((st0, e) for st0, e in reversed(b) if st0 <= step), None)
            if at is not None:
                return at[1], step - at[0]
        if own and rank is not None and step >= first:
            got = plans.own_pos(step - first, rank)
            if got is not None:
                return got
        return divmod(step - first, spe)

    def planned_rows(step: int, rank: int) -> tuple[int, ...] | None:
        """The plan's rows of ``step`` on ``rank`` (micro-batches concatenated), or None past its epoch: with
        ``per_launch``, the micro-batches of the rank's order under its launch's settings from the micro-batch
        its segment begins at (:func:`_launch_offsets`), ``grad_accum`` of them a step."""
        k = seg_at(step, rank) if per_launch else None
        if k is None:
            return plans.step_rows(*pos(step, rank), rank, batch=sbatch(step, rank))
        sg, b = segments[rank][k], seg_batch[rank][k] or batch
        o = plans.order(sg["epoch"], batch=b)
        mbs = o.ranks[rank] if rank < len(o.ranks) else ()
        lo = offsets[rank][k][0] + (step - sg["start"]) * b.grad_accum
        if not 0 <= lo < len(mbs):
            return None
        return tuple(int(g) for m in mbs[lo:lo + b.grad_accum] for g in m)

    # the micro-batches a #state line says its first step holds from the epoch before (``carried``: the
    # Hugging Face Trainer's shrunk epoch) are that epoch's, not the step's own: compared without them
    carried = {(r, st0): c for r in led.ranks for st in led.states.get(r) or []
               if (st0 := _int(st.get("start_step"))) is not None and (c := _int(st.get("carried"))) and c > 0}

    def own_rows(step: int, rank: int) -> tuple[int, ...]:
        c = carried.get((rank, step), 0)
        if not c:
            return tuple(steps.get(step, {}).get(rank, ()))
        return tuple(int(i) for b in led.batches[rank].get(step, [])[c:] for i in b.indices)

    # --- segments: each #state line of each rank
    seg_ws: dict[tuple[int, int], int] = {}  # (rank, start_step) -> the segment's world size
    resumes: dict[int, dict[int, dict[str, Any]]] = {}  # start step of a resume -> rank -> segment
    # a rank whose ledger starts after the run's first step joined the run at a resume (the resumed world is
    # larger): its first segment is its part of that resume, whose position the other ranks' must match
    firsts = {r: st0 for r in led.ranks
              if (st0 := next((_int(st.get("start_step")) for st in led.states.get(r) or []
                               if _int(st.get("start_step")) is not None), None)) is not None}
    run_start = min(firsts.values(), default=None)
    joined = {r: st0 for r, st0 in firsts.items() if run_start is not None and st0 > run_start}
    epochs_seen = max(pos(s, r)[0] for s in steps for r in steps[s]) + 1
    jumps: dict[int, dict[int, dict[str, Any]]] = {}  # a relaunch's start step -> rank -> where it landed
    for r in led.ranks:
        states = led.states.get(r) or []
        prev: dict[str, Any] | None = None
        known: dict[str, Any] = {}  # setting -> the last value a state line of this rank recorded
        k_seg = -1
        for i, st in enumerate(states):
            start = st.get("start_step")
            if not isinstance(start, int):
                continue
            k_seg += 1
            sws = int(st.get("num_replicas") or ws)
            seg_ws[(r, start)] = sws
            # a setting a state line does not record (null: a resumed loader's SkipBatchSampler hides its
            # sampler) is not a change; it is compared with the last state that recorded it
            changed = {k: [known[k], st.get(k)] for k in _SETTINGS
                       if prev is not None and st.get(k) is not None and known.get(k) is not None
                       and known[k] != st.get(k)}
            known.update({k: st.get(k) for k in _SETTINGS if st.get(k) is not None})
            e_plan, s_plan = pos(start, r)
            kind = "start" if i == 0 else ("epoch" if (s_plan == 0 and not changed and prev is not None
                                                       and st.get("epoch") == (prev.get("epoch") or 0) + 1)
                                           else "resume")
            seg: dict[str, Any] = {"rank": r, "start_step": start, "epoch": st.get("epoch"), "kind": kind,
                                   "changed": changed, "order": None, "located": None}
            rows = tuple(own_rows(start, r))
            if pos(start, r)[0] in unknown:
                seg["order"] = "unknown"
            elif rows and simulated:
                if start - first < 0:
                    seg["order"] = "unknown"
                else:
                    planned = planned_rows(start, r)
                    if planned == rows:
                        seg["order"] = "start" if kind == "start" else "continuation"
                        seg["located"] = {"epoch": e_plan, "step": s_plan, "rank": r}
                        if per_launch and (b := sbatch(start, r)) is not None and b.world_size != ws:
                            seg["located"]["world_size"] = b.world_size
                    else:
                        seg["order"], seg["located"] = _classify(plans, rows, e_plan, s_plan, sws, epochs_seen,
                                                                 sbatch(start, r))
            if relaunched and kind == "resume" and seg["order"] == "continuation" and k_seg > 0:
                # the rows are where the resumed loop put them: is that where the run was?
                jump = _landing(plans, segments, seg_batch, batch, r, k_seg)
                if jump["order"] != "continuation":
                    seg["order"] = jump["order"]
                    jumps.setdefault(start, {})[r] = jump
            v.segments.append(seg)
            if kind == "resume" or (i == 0 and joined.get(r) == start):
                resumes.setdefault(start, {})[r] = seg
            prev = st
    notes.extend(_landing_note(start, per[min(per)]) for start, per in sorted(jumps.items()))

    # --- the first step leaving the plan
    for s in sorted(steps) if simulated else ():
        if s < first:
            continue
        if s in jumps:
            r = min(jumps[s])
            j = jumps[s][r]
            e, k = pos(s, r)
            v.first_divergent_step = s
            v.divergence = {"step": s, "rank": r, "ranks": sorted(jumps[s]), "epoch": e, "epoch_step": k,
                            "order": j["order"], "located": {"epoch": e, "step": k, "rank": r},
                            "run_position": {"epoch": j["run_epoch"], "rows_trained": j["run_rows"]}}
            what = {"skip_ahead": "the rows in between are never trained", "rewind": "rows are trained again",
                    "restart_of_epoch": "rows are trained again"}[j["order"]]
            v.findings.append(_finding(
                "order.divergent_step", f"step {s} on rank(s) {sorted(jumps[s])}: the launch resumed there with "
                f"other settings trained epoch {e} from its step {k} (micro-batch {j['skipped']}), where the run had "
                f"trained {j['run_rows']} rows of epoch {j['run_epoch']}: {what}", count=len(jumps[s]), **v.divergence))
            break
        bad = [r for r in sorted(steps[s]) if pos(s, r)[0] not in unknown
               and planned_rows(s, r) != tuple(own_rows(s, r))]
        if bad:
            r = bad[0]
            e, k = pos(s, r)
            rows = tuple(own_rows(s, r))
            sws = next((w for (rr, st0), w in sorted(seg_ws.items(), reverse=True) if rr == r and st0 <= s), ws)
            kind, where = _classify(plans, rows, e, k, sws, epochs_seen, sbatch(s, r))
            v.first_divergent_step = s
            v.divergence = {"step": s, "rank": r, "ranks": bad, "epoch": e, "epoch_step": k, "order": kind,
                            "located": where}
            what = {"restart_of_epoch": "the epoch's first batches again (the data position was lost at a resume)",
                    "rewind": f"the rows of an earlier step of the epoch (step {where and where['step']})",
                    "skip_ahead": f"the rows of a later step of the epoch (step {where and where['step']}): "
                                  "batches were skipped",
                    "another_epoch": f"the rows of epoch {where and where['epoch']}'s permutation (the sampler's "
                                     "epoch was lost: set_epoch not called or reset)",
                    "world_size_changed": f"the rows of a plan with {sws} rank(s) instead of {ws}",
                    "continuation": "the planned rows of another rank",
                    "unknown": "rows the plan does not hold at any step of this epoch"}[kind]
            v.findings.append(_finding(
                "order.divergent_step", f"step {s} (epoch {e}, step {k} of the epoch) on rank(s) {bad} trained on "
                f"{what}, not the planned rows", count=len(bad), **v.divergence))
            break

    # --- visits per epoch: each segment's batches belong to the epoch its iteration trained
    per_epoch, done_epochs = _visit_epochs(led, plans, first, spe, every_rank=own, segments=segments)
    twice_rows: list[int] = []
    never_rows: list[int] = []
    extra = 0
    by_twice: dict[str, int] = {}
    by_never: dict[str, int] = {}
    completed: list[int] = []
    # micro-batches no optimizer update took (the ledger's #untrained lines: the training ended first), by
    # the epoch that yielded them: not trained, and not counted as never seen (the loop never meant to)
    untrained: dict[int, set[int]] = {}
    for r, per in led.untrained.items():
        for bs in per.values():
            for b in bs:
                if b.indices:
                    untrained.setdefault(b.epoch or 0, set()).update(int(i) for i in b.indices)
    if untrained:
        n_un = sum(len(x) for x in untrained.values())
        un_rows = sorted(i for x in untrained.values() for i in x)
        v.untrained = {"count": n_un, "rows": un_rows[:FIRST_IDS], "by_epoch": {str(e): len(x) for e, x in
                                                                              sorted(untrained.items())},
                       "steps": sorted({s for per in led.untrained.values() for s in per})}
        notes.append(f"{n_un} row(s) (by epoch {v.untrained['by_epoch']}) were run forward and backward at step(s) "
                     f"{v.untrained['steps']} with no optimizer update after them: the training ended first (the "
                     "Hugging Face Trainer's epoch that shrank, its last micro-batches waiting for a next epoch's "
                     "first update, or a stop between micro-batches of a step); they are not counted as trained, "
                     f"nor as never seen; first ids {un_rows[:10]}")
    skipped = sorted(e for e in unknown if e in per_epoch)
    if skipped:
        v.plan["epochs_not_judged"] = skipped
    for e in sorted(per_epoch):
        if e in unknown:
            continue
        got = np.bincount(np.concatenate(per_epoch[e]), minlength=n_rows)[:n_rows]
        want = plans.counts(e)
        if e in untrained:
            want = want.copy()
            want[[i for i in untrained[e] if i < n_rows]] = 0
        if not simulated:  # how many rows are repeated or dropped is known, not which: count them
            more, never = _unplaced_visits(got, want)
            if more:
                by_twice[str(e)] = more
                extra += max(0, int(np.maximum(got - 1, 0).sum() - np.maximum(want - 1, 0).sum()))
                twice_rows.extend(int(x) for x in np.flatnonzero(got >= 2)[:FIRST_IDS])
            if e in done_epochs:
                completed.append(e)
                if never:
                    by_never[str(e)] = never
                    never_rows.extend(int(x) for x in np.flatnonzero(got == 0)[:FIRST_IDS])
            continue
        over = np.flatnonzero((got > want) & (got >= 2))
        if over.size:
            by_twice[str(e)] = int(over.size)
            extra += int((got[over] - np.maximum(want[over], 1)).sum())
            twice_rows.extend(int(x) for x in over[: FIRST_IDS])
        if e in done_epochs:
            completed.append(e)
            miss = np.flatnonzero((got == 0) & (want > 0))
            if miss.size:
                by_never[str(e)] = int(miss.size)
                never_rows.extend(int(x) for x in miss[: FIRST_IDS])
    n_twice, n_never = sum(by_twice.values()), sum(by_never.values())
    v.seen_twice = {"count": n_twice, "extra_visits": extra, "rows": twice_rows[:FIRST_IDS], "by_epoch": by_twice}
    v.never_seen = {"count": n_never, "rows": never_rows[:FIRST_IDS], "by_epoch": by_never,
                    "completed_epochs": completed}
    if n_twice:
        v.findings.append(_finding(
            "order.seen_twice", f"{n_twice} row(s) trained on more often than planned within one epoch "
            f"({extra} extra visit(s); by epoch {by_twice}); first ids {twice_rows[:10]}", n_twice, twice_rows,
            by_epoch=by_twice, extra_visits=extra))
    if n_never:
        v.findings.append(_finding(
            "order.never_seen", f"{n_never} row(s) of completed epoch(s) never trained on (by epoch {by_never}); "
            f"first ids {never_rows[:10]}", n_never, never_rows, by_epoch=by_never))

    # --- rank skew after each resume
    for start, segs in sorted(resumes.items()):
        located = {r: sg["located"] for r, sg in segs.items()}
        key = {r: (None if p is None else (p["epoch"], p["step"])) for r, p in located.items()}
        # a rank that recorded before and not at this resume, and that the resumed world still holds
        # (a rank past the new world size is a world-size change, judged by the divergent step)
        new_ws = min(seg_ws[(r, start)] for r in segs)
        missing = [r for r in led.ranks if r not in segs and r < new_ws
                   and any(st0 <= start for (rr, st0) in seg_ws if rr == r)]
        if len(set(key.values())) > 1 or missing:
            v.rank_skew.append({"step": start, "positions": {str(r): located[r] for r in sorted(located)},
                                "ranks_without_resume": missing})
    # ranks whose resume starts differ (a resume recorded at different steps on different ranks)
    starts_by_rank: dict[int, list[int]] = {}
    for sg in v.segments:
        if sg["kind"] == "resume" or (sg["kind"] == "start" and joined.get(sg["rank"]) == sg["start_step"]):
            starts_by_rank.setdefault(sg["rank"], []).append(sg["start_step"])
    if len(starts_by_rank) > 1 and len({tuple(x) for x in starts_by_rank.values()}) > 1:
        v.rank_skew.append({"step": min(s for x in starts_by_rank.values() for s in x),
                            "resume_steps": {str(r): x for r, x in sorted(starts_by_rank.items())}})
    if v.rank_skew:
        first_skew = v.rank_skew[0]
        v.findings.append(_finding(
            "order.rank_skew", f"after the resume at step {first_skew['step']} the ranks are at different loader "
            f"positions ({_skew_text(first_skew)}): they train on rows the plan gives other steps",
            len(v.rank_skew), skew=v.rank_skew))
    return v



def _draw_of(st: dict[str, Any]) -> dict[str, Any] | None:
    """The RandomSampler draw a ``#state`` line records (``sampler_seed``, or ``sampler_generator_state``
    that this torch's CPU generator takes) as :func:`~datacheck.model.order.recorded_random_order`'s keywords
    (``seed`` or ``generator_state``, and ``num_samples``), or None."""
    ns = _int(st.get("num_samples"))
    seed = _int(st.get("sampler_seed"))
    if seed is not None:
        return {"seed": seed, "num_samples": ns}
    text = st.get("sampler_generator_state")
    if not isinstance(text, str):
        return None
    try:
        raw = generator_state_bytes(text)
        torch = require_torch("the batch plan")
        torch.Generator().set_state(torch.frombuffer(bytearray(raw), dtype=torch.uint8))
    except (ValueError, RuntimeError):
        return None
    return {"generator_state": raw, "num_samples": ns}


def _same_draw(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return (a.get("seed"), a.get("generator_state")) == (b.get("seed"), b.get("generator_state"))


def _recorded_draws(led: Ledger, batch: BatchSection,
                    segments: dict[int, list[dict[str, Any]]]) -> tuple[dict[int, dict[str, Any]] | None, list[str]]:
    """``(epoch -> draw, notes)``: what each plan epoch's torch ``RandomSampler`` drew its permutation from, as
    ``record_batches`` recorded it on the ``#state`` line that began the epoch (:func:`_draw_of`), when the
    ledger is one process's (rank 0 alone) ``DataLoader(shuffle=True)`` (its first ``#state``: a
    ``RandomSampler`` under torch's ``BatchSampler``, not accelerate's loader) and the plan is one process's
    shuffled torch order (not ``[batch] sampler = "random"``, which replays the config's seed). None when an
    epoch's first ``#state`` records no draw (a ledger of an older datacheck, a generator state this torch does
    not take): the order is then not simulated (:func:`_unseeded_shuffle`). A note names each later iteration
    of an epoch (a resume) whose draw is not the epoch's: its rows are judged against the epoch's permutation."""
    st0 = _first_state(led)
    if (st0 is None or st0.get("sampler") != "RandomSampler" or st0.get("batch_sampler") != "BatchSampler"
            or st0.get("loader") == "accelerate" or batch.loader == "accelerate" or batch.sampler == "random"
            or not batch.shuffle or batch.world_size != 1 or led.ranks != [0]):
        return None, []
    draws: dict[int, dict[str, Any]] = {}
    notes: list[str] = []
    for sg in segments.get(0) or []:
        d = _draw_of(sg["state"])
        e = sg["epoch"]
        if e not in draws:
            if d is None:
                bad = isinstance(sg["state"].get("sampler_generator_state"), str)
                return None, [f"rank 0: the #state line that began epoch {e} (step {sg['start']}) records a "
                              "sampler_generator_state this torch's CPU generator does not take (recorded by another "
                              "torch version, or an edited line): the RandomSampler's order is not replayed"] if bad \
                    else []
            draws[e] = d
        elif d is not None and not _same_draw(d, draws[e]):
            what = (f"seed {d['seed']}, not {draws[e]['seed']}" if d.get("seed") is not None
                    and draws[e].get("seed") is not None else "another generator state")
            notes.append(f"rank 0: the iteration that began at step {sg['start']} (in epoch {e}) drew another "
                         f"RandomSampler permutation than the epoch's first iteration ({what}): its rows are judged "
                         f"against the permutation epoch {e} began with")
    return (draws or None), notes


def _unseeded_shuffle(led: Ledger, batch: BatchSection) -> bool:
    """Whether the ledger's first ``#state`` records a shuffling ``RandomSampler`` without a seed that the
    plan cannot replay, with a shuffling plan: ``accelerator.prepare`` of ``DataLoader(shuffle=True)`` without
    ``use_seedable_sampler`` (a plan of accelerate's loader) gives it a generator seeded from the process's
    torch RNG; torch's own ``DataLoader(shuffle=True)`` (any other plan but ``[batch] sampler = "random"``,
    which replays a generator seeded ``seed``) draws each epoch's seed from its generator, the process's
    global torch RNG when it has none, whose state no ledger records. Either way its permutation is not the
    plan's (a ``DistributedSampler`` of an invented seed 0 would call every step divergent)."""
    st = _first_state(led)
    if st is None or st.get("sampler") != "RandomSampler" or st.get("seed") is not None or not batch.shuffle:
        return False
    if st.get("loader") == "accelerate":
        return batch.loader == "accelerate"
    return batch.loader != "accelerate" and batch.sampler != "random"


def _unplaced_visits(got: np.ndarray, want: np.ndarray) -> tuple[int, int]:
    """(rows visited more often than any order could plan, rows left unseen beyond what any order leaves)
    of one epoch whose permutation is unknown: the plan under any permutation repeats ``#(want >= 2)`` rows
    (the even_batches padding, at most ``max(want)`` visits each) and leaves ``#(want == 0)`` unseen
    (drop_last); which rows those are depends on the permutation, how many does not."""
    cap = int(want.max()) if want.size else 1
    over = max(int((got >= 2).sum()) - int((want >= 2).sum()), int((got > max(cap, 1)).sum()), 0)
    never = max(int((got == 0).sum()) - int((want == 0).sum()), 0)
    return over, never


def _rank_segments(led: Ledger, r: int, first: int) -> list[dict[str, Any]]:
    """Rank ``r``'s segments (its ``#state`` lines with a ``start_step``, file order), each a dict: ``start``,
    ``state``, ``mbs`` (its micro-batches' int64 arrays: those recorded at or after its start and before the
    next one's, less the first ``carried`` of its start step, which are the segment's before), ``ran_out``
    (its iteration yielded ``batches`` micro-batches, or the ``batches`` its ``#end`` line observed:
    recorded, run with no update after them (``#untrained``), or skipped by a resumed Trainer (``skipped``)) and ``epoch``, the plan epoch it trains (see :func:`_visit_epochs`)."""
    segs = [st for st in led.states.get(r) or [] if _int(st.get("start_step")) is not None]
    # a resumed Trainer's iteration skipped its first ``skipped`` micro-batches (yielded, not trained)
    out: list[dict[str, Any]] = [{"start": st["start_step"], "state": st, "mbs": [], "n": _int(st.get("skipped")) or 0}
                                 for st in segs]

    # start steps never go down in the read ledger (a #state supersedes those with a later start_step)
    firsts = [st["start_step"] for st in segs]
    monotone = all(a <= b for a, b in zip(firsts, firsts[1:]))

    def seg_of(s: int) -> int | None:
        if monotone:
            k = bisect.bisect_right(firsts, s) - 1
            return k if k >= 0 else None
        return next((k for k in range(len(segs) - 1, -1, -1) if segs[k]["start_step"] <= s), None)

    for source, counted_only in ((led.batches.get(r) or {}, False), (led.untrained.get(r) or {}, True)):
        for s, bs in source.items():
            k = seg_of(s) if s >= first else None
            if k is None:
                continue
            # a segment's first step may begin with micro-batches the segment before trained (``carried``: the
            # Hugging Face Trainer takes a shrunk epoch's last micro-batch in the next epoch's first update)
            c = _int(segs[k].get("carried")) if k > 0 and s == segs[k]["start_step"] else None
            c = c if c is not None and c > 0 else 0
            for kk, part in ((k - 1, bs[:c]), (k, bs[c:])):
                out[kk]["n"] += len(part)
                if not counted_only:
                    out[kk]["mbs"].extend(np.asarray(b.indices, dtype=np.int64) for b in part if b.indices)
    # the micro-batches an iteration observed when it ran to its epoch's end (its #end line): fewer than its
    # #state's ``batches`` where the sampler's length overstates the rank's share (accelerate's
    # BatchSamplerShard with split_batches and even_batches=False gives a process past a short last batch's
    # rows nothing, yet the same length)
    states = led.states.get(r) or []
    # less those a resumed loop received again and skipped (``replayed``: resume_skips), trained before the resume
    observed = {id(states[n - 1]): b - (_int(end.get("replayed")) or 0) for n, end in led.ends.get(r) or []
                if 0 < n <= len(states) and (b := _int(end.get("batches"))) is not None}
    for k, sg in enumerate(out):
        st = sg["state"]
        rec = _int(st.get("epoch")) or 0
        batches = _int(st.get("batches"))
        seen = observed.get(id(st))
        sg["ran_out"] = ((batches is not None and sg["n"] >= batches > 0)
                         or (seen is not None and sg["n"] >= seen > 0))
        if k == 0 or rec > out[k - 1]["epoch"]:
            sg["epoch"] = rec
        elif out[k - 1]["ran_out"]:
            sg["epoch"] = out[k - 1]["epoch"] + 1
        else:
            sg["epoch"] = out[k - 1]["epoch"]
    return out


def _visit_epochs(led: Ledger, plans: _Plans, first: int, spe: int,
                  every_rank: bool = False, segments: dict[int, list[dict[str, Any]]] | None = None) -> tuple[dict[int, list[np.ndarray]], set[int]]:
    """Each epoch's recorded batches (all ranks) and the epochs the run completed.

    A datacheck ledger's batches belong to the segment (``#state`` line) that recorded them: on each rank,
    the last ``#state`` in file order whose ``start_step`` is at or before the batch's step (a later
    ``#state`` supersedes what was recorded at or after its ``start_step``), except the first ``carried``
    micro-batches of a ``#state``'s ``start_step``, the segment's before it. A segment trains:

    - the first segment: its recorded epoch;
    - a segment whose recorded epoch is past the epoch in progress: that epoch;
    - a segment after one whose iteration ran to its end (its micro-batches reached its ``#state``'s
      ``batches``): the next epoch (a new pass over the data, even when the sampler's epoch was not
      advanced);
    - any other segment (a resume, whatever order it restarted): the epoch in progress.

    An epoch is completed when, on some rank, a later epoch was trained, or the epoch's last segment
    iterated to its end, or the rank recorded at least the plan's micro-batches of one epoch in it;
    with ``every_rank`` (ranks that count their own epochs: one may be an epoch ahead of another), when
    that holds on every rank.
    Ledgers without ``#state`` start steps (OLMo's) take plan epoch ``(step - first) // spe``, completed
    once the last recorded step reaches its last step.
    """
    per_epoch: dict[int, list[np.ndarray]] = {}
    done: set[int] = set()
    starts = {r: [(i, st) for i, st in enumerate(led.states.get(r) or []) if isinstance(st.get("start_step"), int)]
              for r in led.ranks}
    if led.format != "datacheck" or not all(starts.values()):
        last = max(led.steps)
        for r in led.ranks:
            for s, bs in led.batches[r].items():
                if s >= first:
                    e = (s - first) // spe
                    per_epoch.setdefault(e, []).extend(np.asarray(b.indices, dtype=np.int64) for b in bs if b.indices)
                    if last >= first + (e + 1) * spe - 1:
                        done.add(e)
        return per_epoch, done
    per_rank: list[set[int]] = []
    for r in led.ranks:
        done = set()
        per_rank.append(done)
        segs = segments[r] if segments and r in segments else _rank_segments(led, r, first)
        mbs = {k: sg["mbs"] for k, sg in enumerate(segs)}
        seg_epoch = [sg["epoch"] for sg in segs]
        ran_out = [sg["ran_out"] for sg in segs]
        by_e: dict[int, int] = {}
        for k, e in enumerate(seg_epoch):
            got = mbs.get(k, [])
            per_epoch.setdefault(e, []).extend(got)
            by_e[e] = by_e.get(e, 0) + len(got)
        for e, n in by_e.items():
            last_k = max(k for k, ek in enumerate(seg_epoch) if ek == e)
            later = any(ek > e and mbs.get(k) for k, ek in enumerate(seg_epoch))
            planned = plans.order(e).micro_batches if r < len(plans.order(e).ranks) else 0
            if later or ran_out[last_k] or (planned and n >= planned):
                done.add(e)
    done = set.intersection(*per_rank) if every_rank and per_rank else set().union(*per_rank)
    return {e: v for e, v in per_epoch.items() if v}, done


def _verify_counts(led: Ledger, n_rows: int | None, first: int) -> OrderVerdict:
    """Visit counts of a ledger whose order datacheck cannot simulate (OLMo's: its own global permutation,
    no sampler settings recorded): every row at most once per epoch, an epoch being ``n_rows // global
    batch`` steps (OLMo drops the last partial global batch, so up to ``n_rows % global batch`` rows of an
    epoch are legitimately unseen: fewer unseen rows than that are no finding)."""
    steps = step_indices(led)
    if not steps:
        raise UsageError(f"the ledger {led.folder} records no batch")
    top = max((int(v.array.max()) for per in steps.values() for v in per.values() if v), default=-1)
    notes = ["OLMo ledger without [batch]: its order is OLMo's own permutation, not simulated; only visit counts "
             "are judged (every row at most once per epoch)"]
    if n_rows is None:
        n_rows = top + 1
        notes.append(f"the dataset's row count is not given (--rows N or --data PATH): taken as {n_rows}")
    elif top >= n_rows:
        raise UsageError(f"the ledger records row {top}, but the dataset has {n_rows} rows")
    s0 = min(s for s in steps if s >= first) if any(s >= first for s in steps) else min(steps)
    global_batch = sum(len(v) for v in steps[s0].values())
    spe = max(1, n_rows // max(1, global_batch))
    dropped = n_rows - spe * global_batch
    v = OrderVerdict(plan={"source": "counts", "n_rows": n_rows, "global_batch": global_batch, "steps_per_epoch": spe,
                           "first_step": first, "dropped_per_epoch": dropped},
                     ledger={"folder": str(led.folder), "format": led.format, "ranks": led.ranks, "steps": len(steps),
                             "first": min(steps), "last": max(steps), "truncated": led.truncated}, notes=notes)
    per_epoch: dict[int, list[np.ndarray]] = {}  # each step's int64 arrays (never one Python int a row)
    for s, per in steps.items():
        if s >= first:
            per_epoch.setdefault((s - first) // spe, []).extend(ix.array for ix in per.values())
    last = max(steps)
    by_twice, by_never, twice_rows, never_rows, completed = {}, {}, [], [], []
    extra = 0
    for e in sorted(per_epoch):
        got = np.bincount(np.concatenate(per_epoch[e]) if per_epoch[e] else np.zeros(0, np.int64),
                          minlength=n_rows)[:n_rows]
        over = np.flatnonzero(got >= 2)
        if over.size:
            by_twice[str(e)] = int(over.size)
            extra += int((got[over] - 1).sum())
            twice_rows.extend(int(x) for x in over[:FIRST_IDS])
        if last >= first + (e + 1) * spe - 1:
            completed.append(e)
            miss = np.flatnonzero(got == 0)
            if miss.size > dropped:
                by_never[str(e)] = int(miss.size)
                never_rows.extend(int(x) for x in miss[:FIRST_IDS])
    n_twice, n_never = sum(by_twice.values()), sum(by_never.values())
    v.seen_twice = {"count": n_twice, "extra_visits": extra, "rows": twice_rows[:FIRST_IDS], "by_epoch": by_twice}
    v.never_seen = {"count": n_never, "rows": never_rows[:FIRST_IDS], "by_epoch": by_never, "completed_epochs": completed}
    if n_twice:
        v.findings.append(_finding("order.seen_twice", f"{n_twice} row(s) trained on more than once within one epoch "
                                   f"({extra} extra visit(s); by epoch {by_twice}); first ids {twice_rows[:10]}",
                                   n_twice, twice_rows, by_epoch=by_twice, extra_visits=extra))
    if n_never:
        v.findings.append(_finding("order.never_seen", f"{n_never} row(s) of completed epoch(s) never trained on, more "
                                   f"than the {dropped} the last partial global batch drops (by epoch {by_never}); "
                                   f"first ids {never_rows[:10]}", n_never, never_rows, by_epoch=by_never))
    return v


def _skew_text(sk: dict[str, Any]) -> str:
    if "resume_steps" in sk:
        return "resumed at steps " + ", ".join(f"rank {r}: {s}" for r, s in sk["resume_steps"].items())
    parts = [f"rank {r}: " + ("not in the plan" if p is None else f"epoch {p['epoch']} step {p['step']}")
             for r, p in sk["positions"].items()]
    if sk.get("ranks_without_resume"):
        parts.append(f"rank(s) {sk['ranks_without_resume']} recorded no resume")
    return "; ".join(parts)


def summary_lines(v: OrderVerdict) -> list[str]:
    """The text report."""
    p, lg = v.plan, v.ledger
    out = [f"ledger {lg['folder']} ({lg['format']}): ranks {lg['ranks']}, steps {lg['first']}..{lg['last']} "
           f"({lg['steps']} recorded)"]
    if p["source"] == "counts":
        out.append(f"no plan (visit counts only): {p['n_rows']} rows, global batch {p['global_batch']}, "
                   f"{p['steps_per_epoch']} steps per epoch")
    else:
        acc = (f"accelerate's dealing of batches (even_batches {str(p['even_batches']).lower()}, split_batches "
               f"{str(p['split_batches']).lower()}), " if p.get("loader") == "accelerate" else "")
        seed = ("unknown (a RandomSampler's order, not simulated)" if p.get("simulated") is False
                else "as recorded each epoch (torch's RandomSampler: " + ", ".join(
                    f"epoch {e}: " + (f"seed {d['seed']}" if "seed" in d else "its generator's state")
                    for e, d in list(p["epoch_draws"].items())[:4]) + (", ..." if len(p["epoch_draws"]) > 4 else "")
                + ")" if p.get("epoch_draws") else p["seed"])
        out.append(f"plan ({p['source']}): {acc}{p['n_rows']} rows, batch_size {p['batch_size']} x world_size "
                   f"{p['world_size']} x grad_accum {p['grad_accum']}, {p['steps_per_epoch']} steps per epoch, seed "
                   f"{seed}, shuffle {str(p['shuffle']).lower()}, drop_last {str(p['drop_last']).lower()}")
    by_settings: dict[tuple[int, int, int], list[int]] = {}
    for e, st in (p.get("epoch_settings") or {}).items():
        by_settings.setdefault((st["batch_size"], st["world_size"], st["grad_accum"]), []).append(int(e))
    for (bs, ws, ga), es in by_settings.items():
        out.append(f"  epoch(s) {es} planned with the settings of the launch that began them: batch_size {bs} x "
                   f"world_size {ws} x grad_accum {ga}")
    for ln in p.get("launches") or ():
        out.append(f"  rank {ln['rank']}: launch at step {ln['start_step']} planned with batch_size {ln['batch_size']} "
                   f"x world_size {ln['world_size']} x grad_accum {ln['grad_accum']}: epoch {ln['epoch']} from "
                   f"micro-batch {ln['micro_batch']} ({ln['rows_before']} rows of it trained before)")
    for sg in v.segments:
        if sg["kind"] == "epoch":
            continue
        loc = sg["located"]
        where = "" if loc is None else f" (recorded rows at plan epoch {loc['epoch']} step {loc['step']})"
        order = "not located (the order is not simulated)" if sg["order"] is None else sg["order"]
        out.append(f"  rank {sg['rank']}: {sg['kind']} at step {sg['start_step']}: {order}{where}"
                   + (f"; changed {sg['changed']}" if sg["changed"] else ""))
    out.append("first divergent step: " + ("not judged (the order is not simulated)" if p.get("simulated") is False
                                           else "none (the recorded order is the plan's)"
                                           if v.first_divergent_step is None else str(v.first_divergent_step)))
    out.append(f"seen more often than planned: {v.seen_twice['count']} row(s)"
               + (f", first ids {v.seen_twice['rows'][:10]}" if v.seen_twice["count"] else ""))
    out.append(f"never seen in completed epochs {v.never_seen['completed_epochs']}: {v.never_seen['count']} row(s)"
               + (f", first ids {v.never_seen['rows'][:10]}" if v.never_seen["count"] else ""))
    for f in v.findings:
        out.append(f"{f.severity}: {f.check}: {f.message}")
    for n in v.notes:
        out.append(f"note: {n}")
    return out
