"""``datacheck plan PATH``: what the trainer's batching makes of the data, and step -> rows.

Data with splits (``[splits]``, a ``DatasetDict`` folder or the Hub's split file names) is planned over the split a trainer
iterates: ``train`` unless ``--split NAME``; the output names it. Simulates the order with torch's own ``DistributedSampler`` and ``BatchSampler`` under ``[batch]``
(:mod:`datacheck.model.order`), or reads a recorded order (``--ledger DIR``: a ``record_batches``
folder or OLMo's ``data-indices``). Without ``--step``: the plan's numbers (global batch, steps per
epoch, last batch per rank, wraparound repeats, supervised tokens per micro-batch). With
``--step N``: the rows of that optimizer step (every rank and micro-batch, or ``--rank`` /
``--micro-batch``); ``--export FILE`` writes them as ``inspect --export`` does, for replay. Megatron
``.bin``/``.idx`` pairs are planned with Megatron-LM's own order instead (``[megatron]``;
:class:`datacheck.execute.plan.MegatronPlan`): each row of a step is a document one of its samples
reads, with the token range read and the sample's dataset index.

Exit codes: 0 answered; 2 usage or config error (no ``[batch] batch_size``, a step outside the run,
torch missing: the message names the ``datacheck[torch]`` extra and ``pip install "torch>=2.2"``); 3 internal error.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from datacheck.cli.envelope import write_envelope
from datacheck.cli.progress import Ticker, activity
from datacheck.execute.plan import (
    BatchPlan,
    MegatronPlan,
    RowSpace,
    StepRow,
    build_plan,
    export_step,
    row_space,
    rows_of_step,
)
from datacheck.execute.setup import resolve_config_path
from datacheck.io.ledger import read_ledger, tear_label
from datacheck.io.outputs import check_outputs
from datacheck.model.config import MAX_EPOCHS, Config, describe_config, load_config
from datacheck.model.constants import EXIT_OK
from datacheck.model.errors import UsageError
from datacheck.model.megatronorder import lineage_words
from datacheck.render.text import terminal_lines

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    a = sub.add_parser(
        "plan", help="simulate the trainer's batches (torch samplers) or read a recorded ledger; step -> rows",
        description="The batch plan of PATH under [batch] (batch_size per device, world_size, grad_accum, "
                    "drop_last, shuffle, seed, epochs), simulated with torch's DistributedSampler and "
                    "BatchSampler over the shards in index order (with max_tokens: datacheck.torch."
                    "TokenBudgetBatchSampler, fairseq's batch_by_size, sharded by DistributedSampler; with [batch] sampler = "
                    "\"random\": one process's DataLoader(shuffle=True, generator=torch.Generator().manual_seed(seed)), "
                    "its RandomSampler); or the recorded order of --ledger DIR. "
                    "Megatron .bin/.idx pairs: Megatron-LM's own order (GPTDataset + MegatronPretrainingSampler under "
                    "[megatron] seq_length, train_iters, seed, split), each sample cut across documents. "
                    "--step N lists the rows of optimizer step N (0-based over the run for a simulated plan; "
                    "the ledger's own numbering with --ledger). Needs torch for the simulation: "
                    'the datacheck[torch] extra (pip install "torch>=2.2").')
    a.add_argument("paths", nargs="*", metavar="PATH", help="shard files, folders or globs (optional with --ledger: "
                                                           "without them indices are not mapped to shard rows)")
    a.add_argument("--config", help="datacheck.toml (default: as for audit)")
    a.add_argument("--split", metavar="NAME", help="data with splits ([splits], a DatasetDict folder or the Hub's "
                                                   "split file names such as data/train-*): the split the trainer "
                                                   "iterates (default train)")
    a.add_argument("--epoch", type=int, default=0, metavar="E", help="the epoch whose numbers are shown (default 0)")
    a.add_argument("--step", type=int, metavar="N", help="list the rows of optimizer step N")
    a.add_argument("--rank", type=int, metavar="R", help="with --step: only rank R")
    a.add_argument("--micro-batch", type=int, metavar="M", help="with --step: only micro-batch M of the step")
    a.add_argument("--consumed-samples", type=int, metavar="K",
                   help="with --step on Megatron data: the samples the run had consumed before the step (its log's "
                        "'consumed samples' at the iteration before: a resumed run whose global batch changed); "
                        "default step x global batch, or under [megatron] rampup_batch_size the sum of the earlier "
                        "steps' global batches; the step takes the ramp's global batch at K")
    a.add_argument("--ledger", metavar="DIR", help="answer from a recorded ledger (record_batches or OLMo data-indices)")
    a.add_argument("--export", metavar="FILE", help="with --step: write the step's rows to FILE.parquet or FILE.jsonl")
    a.add_argument("--limit", type=int, default=50, metavar="N", help="rows listed in text output (default 50)")
    a.add_argument("--format", choices=["text", "json"], default="text", help="what to print (default text)")
    a.add_argument("--no-progress", action="store_true",
                   help="never show the progress bar (drawn on stderr when stderr is a terminal)")
    return a


def _rank_positions(plan: BatchPlan, step: int, rank: int | None, rows: list[StepRow]) -> dict[str, Any]:
    """Where optimizer step ``step`` falls for each process of a simulated torch plan (or ``rank`` alone):
    ``ranks``: ``{"R": {"epoch", "epoch_step", "rows"}}`` (``rows``: the step's rows of that process; with
    accelerate's ``even_batches = false`` each process counts its own steps over its own epochs
    (:meth:`BatchPlan.own_position`), so one process's step 4 can be another's epoch 1; ``epoch`` and
    ``epoch_step`` None, ``rows`` 0, for a process whose ``[batch] epochs`` are done before its step
    ``step``); ``epoch`` and ``epoch_step``: the processes' common place, None when they differ.

    Raises:
        UsageError: the step is outside the run (:meth:`BatchPlan.split_step`).
    """
    epoch, s = plan.split_step(step)
    counts: dict[int, int] = {}
    for r in rows:
        counts[r.rank] = counts.get(r.rank, 0) + 1
    ranks: dict[str, dict[str, Any]] = {}
    for p in ([rank] if rank is not None else range(plan.cfg.batch.world_size)):
        e, k = plan.own_position(step, p) if plan.own_steps else (epoch, s)
        done = e >= plan.cfg.batch.epochs
        ranks[str(p)] = {"epoch": None if done else e, "epoch_step": None if done else k, "rows": counts.get(p, 0)}
    places = {(v["epoch"], v["epoch_step"]) for v in ranks.values()}
    common = places.pop() if len(places) == 1 else (None, None)
    return {"epoch": common[0], "epoch_step": common[1], "ranks": ranks}


def _row_dict(r: StepRow) -> dict[str, Any]:
    out = {"rank": r.rank, "micro_batch": r.micro_batch, "global_index": r.global_index, "shard": r.shard, "row": r.row}
    if r.sample is not None:  # a Megatron sample: its dataset index and the row's tokens it reads
        out.update(sample=r.sample, tokens=list(r.tokens) if r.tokens is not None else None)
    return out


def _megatron_text(s: dict[str, Any]) -> list[str]:
    where = ""
    if s.get("split") is not None:
        where = f" of split {s['split']!r}"
    if "blend" in s:
        return _blend_text(s, where)
    lo, hi = s["train_sequences"]
    sampler = "MegatronPretrainingRandomSampler" if s["dataloader_type"] == "cyclic" else "MegatronPretrainingSampler"
    out = [f"Megatron-LM order ({_lineage(s)} GPTDataset + {sampler}): {s['rows']} document(s), {s['sequences']} "
           f"sequence(s) in {s['shards']} shard(s){where}; --split {s['megatron_split']!r}: train sequences {lo}..{hi - 1}",
           _batch_line(s),
           f"{s['steps']} optimizer steps = {s['train_samples']} samples asked; GPTDataset holds {s['samples']} samples "
           f"over {s['data_epochs']} pass(es) of the train documents ({s['tokens_per_epoch']} tokens each)"
           + ("; the last pass shuffled apart" if s["separate_final_epoch"] else "")]
    out += _ramp_text(s)
    if s["ignored"]:
        out.append(f"note: [batch] {', '.join(s['ignored'])} are torch sampler keys; Megatron's order does not read "
                   "them ([megatron] seed shuffles)")
    return out


def _lineage(s: dict[str, Any]) -> str:
    """The lineage a Megatron plan summary assumed, in words (``[megatron] implementation``)."""
    return lineage_words(s.get("implementation", "megatron-core")) + "'s"


def _ramp_text(s: dict[str, Any]) -> list[str]:
    """The ramp-up lines of a Megatron plan summary ``s`` (none without one)."""
    if "rampup_batch_size" not in s:
        return []
    a, b, c = s["rampup_batch_size"]
    runs = s["rampup_steps"]
    shown = ", ".join(f"from step {r['first_step']} ({r['consumed_samples']} samples consumed) {r['global_batch']}"
                      for r in runs[:6]) + (f", ... ({len(runs)} runs)" if len(runs) > 6 else "")
    return [f"--rampup-batch-size {a} {b} {c}: the global batch grows from {a} by {b} over {c} samples to "
            f"{s['global_batch']}; step N starts at the sum of the earlier steps' batches: {shown}"]


def _batch_line(s: dict[str, Any]) -> str:
    """The global batch of a Megatron plan summary ``s``, in words, with its sample length and seed."""
    return (f"micro-batch {s['batch_size']} x data-parallel {s['world_size']} x grad_accum {s['grad_accum']} = global "
            f"batch {s['global_batch']} samples of seq_length {s['seq_length']}"
            + (" + 1" if s["add_extra_token_to_sequence"] else "") + f" tokens; seed {s['seed']}")


def _blend_text(s: dict[str, Any], where: str) -> list[str]:
    sampler = "MegatronPretrainingRandomSampler" if s["dataloader_type"] == "cyclic" else "MegatronPretrainingSampler"
    weighted = s["mid_level_dataset_surplus"] is not None
    legacy = s.get("implementation") == "legacy"
    out = [f"Megatron-LM order ({_lineage(s)} {'BlendableDataset' if legacy else 'BlendedDataset'} of "
           f"{len(s['blend'])} GPTDataset(s) + {sampler}): {s['rows']} document(s) "
           f"in {s['shards']} shard(s){where}; --split {s['megatron_split']!r} per prefix",
           _batch_line(s) + " (every prefix)",
           f"{s['steps']} optimizer steps = {s['train_samples']} samples asked; the blend holds {s['samples']} samples "
           + ("(weighted; each GPTDataset built for ceil(samples x weight x 1.005), the blend all their samples)"
              if legacy else
              f"(weighted; each GPTDataset built with a {s['mid_level_dataset_surplus']} surplus)" if weighted
              else "(weighed by the prefixes' sample counts)")]
    for b in s["blend"]:
        lo, hi = b["train_sequences"]
        out.append(f"  {b['prefix']} -> {b['shard']}" + (f": weight {b['weight']}," if b["weight"] is not None else ":")
                   + (f" GPTDataset built for {b['target_samples']} samples holds {b['samples']} over " if legacy else
                      f" {b['target_samples']} samples meant, GPTDataset of {b['samples']} samples over ")
                   + f"{b['data_epochs']} pass(es) of train sequences {lo}..{hi - 1} ({b['tokens_per_epoch']} tokens each)"
                   + ("; the last pass shuffled apart" if b["separate_final_epoch"] else ""))
    out += _ramp_text(s)
    if s["ignored"]:
        out.append(f"note: [batch] {', '.join(s['ignored'])} are torch sampler keys; Megatron's order does not read "
                   "them ([megatron] seed shuffles)")
    return out


def _summary_text(s: dict[str, Any]) -> list[str]:
    if s.get("loader") == "megatron":
        return _megatron_text(s)
    tb = s.get("token_budget")
    if tb is None:
        size = (f"batch_size {s['batch_size']} x world_size {s['world_size']} x grad_accum {s['grad_accum']} = "
                f"global batch {s['global_batch']}")
    else:
        size = (f"max_tokens {s['max_tokens']}" + (f" (at most {s['batch_size']} rows)" if s["batch_size"] else "")
                + f" x world_size {s['world_size']} x grad_accum {s['grad_accum']} = at most "
                f"{tb['global_batch_tokens']} padded tokens per step; {tb['batches_per_epoch']} token batches per epoch")
    where = ""
    if s.get("split") is not None:
        left = ", ".join(f"{k} ({v} shard(s))" for k, v in s["other_splits"].items())
        where = f" of split {s['split']!r}" + (f" (not planned: {left}; --split NAME plans another)" if left else "")
    out = [f"rows {s['rows']} in {s['shards']} shard(s){where}; {size}"
           + (f"; accelerate deals the batches (even_batches {str(s['even_batches']).lower()}, split_batches "
              f"{str(s['split_batches']).lower()})" if s.get("loader") == "accelerate" else "")
           + ("; one process's DataLoader(shuffle=True, generator=torch.Generator().manual_seed(seed)): RandomSampler, "
              "its generator drawing each epoch's base seed then permutation"
              + (" (persistent_workers: the base seed in epoch 0 only)" if s.get("persistent_workers") else "")
              if s.get("sampler") == "random" else ""),
           f"epoch {s['epoch']} of {s['epochs']}: {s['rows_per_rank']} rows per rank, {s['micro_batches_per_rank']} "
           f"micro-batches per rank, {s['steps_per_epoch']} optimizer steps (the last with "
           f"{s['last_step_micro_batches']} micro-batch(es))",
           f"last micro-batch per rank: {s['last_batch_rows']} rows; wraparound repeats per epoch: "
           f"{s['wraparound_repeats']} (drop_last {str(s['drop_last']).lower()}, shuffle {str(s['shuffle']).lower()}, "
           f"seed {s['seed']})"]
    if tb is not None:
        pt, rw = tb["padded_tokens"], tb["rows_per_micro_batch"]
        if pt is not None:
            out.append(f"padded tokens per micro-batch: min {pt['min']}, median {pt['median']:g}, max {pt['max']}; "
                       f"rows per micro-batch: {rw['min']}..{rw['max']}; batches repeated to even the ranks: "
                       f"{tb['repeated_batches']}")
        if tb["over_budget_rows"]:
            out.append(f"warning: {tb['over_budget_rows']} row(s) are longer than max_tokens {s['max_tokens']}; each "
                       f"is a micro-batch of its own (global indices {tb['over_budget_examples'][:10]})")
    sup = s.get("supervised")
    if sup is None:
        out.append("supervised tokens per micro-batch: unknown (no token labels list, no assistant mask, and not a "
                   "language-model layout whose labels are the ids: causal_lm, packed_lm)")
    else:
        out.append(f"supervised tokens per (step, rank, micro-batch): min {sup['min']}, p1 {sup['p1']}, "
                   f"{sup['zero']} of {sup['count']} are 0")
        out += [f"  counted as: {rule}" for rule in sup.get("rule") or ()]
        for e, st, r, m in sup["zero_micro_batches"][:10]:
            out.append(f"  0 supervised tokens: epoch {e} step {st} rank {r} micro-batch {m}")
    return out


def run(args: argparse.Namespace) -> int:
    with activity("planning", no_progress=args.no_progress) as tick:
        return _run(args, tick)


def _run(args: argparse.Namespace, tick: Ticker) -> int:
    check_outputs({"--export": args.export}, list(args.paths))
    if args.export and args.step is None:
        raise UsageError("--export writes the rows of one step: give --step N")
    if (args.rank is not None or args.micro_batch is not None) and args.step is None:
        raise UsageError("--rank and --micro-batch select within a step: give --step N")
    if args.consumed_samples is not None and (args.step is None or args.ledger):
        raise UsageError("--consumed-samples places one step of a simulated Megatron plan: give --step N and the "
                         "dataset PATH, without --ledger (a ledger records its own steps)")
    if args.split is not None and not args.paths:
        raise UsageError("--split chooses the split of the dataset PATH: give the PATH")
    if not args.paths and not args.ledger:
        raise UsageError("give the dataset PATH (a simulated plan), or --ledger DIR (a recorded order)")
    cfg_path = resolve_config_path(args.config, args.paths) if args.paths or args.config else None
    # a config found next to the data (not named with --config) names no code and no file outside its folder
    cfg: Config = load_config(cfg_path, allow_python_schema=args.config is not None) if cfg_path else Config()
    if not 0 <= args.epoch < MAX_EPOCHS:
        raise UsageError(f"--epoch {str(args.epoch)[:30]}: expected 0 .. {MAX_EPOCHS - 1}")
    header = describe_config(cfg_path)
    source: BatchPlan | MegatronPlan | Any
    space: RowSpace | None = None
    result: dict[str, Any] = {"config": cfg_path, "plan": None, "ledger": None, "step": None}
    if args.ledger:
        tick.stage("reading the ledger")
        source = read_ledger(args.ledger)
        if args.paths:
            space, _ = row_space(list(args.paths), cfg, split=args.split, progress=tick)
        result["ledger"] = {"folder": str(source.folder), "format": source.format, "ranks": source.ranks,
                            "steps": len(source.steps), "truncated": source.truncated, "tears": source.tears,
                            "partial": {str(r): {"step": st, "recorded": got, "micro_batches": want}
                                        for r, (st, got, want) in sorted(source.partial.items())}}
        if source.steps:
            result["ledger"]["first_step"], result["ledger"]["last_step"] = source.steps[0], source.steps[-1]
    else:
        source = build_plan(list(args.paths), cfg, args.split, progress=tick)
        tick.stage("simulating the batch order")
        space = source.space
        result["plan"] = source.summary(args.epoch)
    rows: list[StepRow] = []
    if args.step is not None:
        rows = rows_of_step(source, args.step, rank=args.rank, micro_batch=args.micro_batch, space=space,
                            consumed=args.consumed_samples)
        result["step"] = {"step": args.step, "rows": [_row_dict(r) for r in rows]}
        if isinstance(source, MegatronPlan):
            result["step"]["samples"] = len({r.sample for r in rows})
            result["step"]["consumed_samples"] = (args.consumed_samples if args.consumed_samples is not None
                                                  else source.order.consumed_before(args.step))
        elif isinstance(source, BatchPlan):
            result["step"].update(_rank_positions(source, args.step, args.rank, rows))
            if source.supervised is not None:
                result["step"]["supervised_tokens"] = int(sum(int(source.supervised[r.global_index]) for r in rows))
        if args.export:
            if space is None:
                raise UsageError("--export needs the data: pass the dataset PATH with --ledger")
            tick.stage(f"exporting the rows of step {args.step}")
            path, n = export_step(rows, space, cfg, args.step, args.export)
            result["step"]["export"] = {"path": str(path), "rows": n}
    if args.format == "json":
        write_envelope("datacheck.plan", result)
        return EXIT_OK
    out = [header]
    if result["plan"] is not None:
        out += _summary_text(result["plan"])
    if result["ledger"] is not None:
        led = result["ledger"]
        out.append(f"ledger {led['folder']} ({led['format']} format): ranks {led['ranks']}, {led['steps']} step(s) "
                   f"recorded" + (f" ({led['first_step']}..{led['last_step']})" if led["steps"] else ""))
        for t in led["truncated"]:
            out.append(f"  {t} {tear_label(led['tears'].get(t, 'torn'))}: {led['tears'].get(t, 'torn')}")
        for r, p in led["partial"].items():
            out.append(f"  rank {r}: its last step {p['step']} has {p['recorded']} of {p['micro_batches']} micro-batches "
                       "recorded (the run stopped mid-step)")
    if args.step is not None:
        st = result["step"]
        extra: list[str] = []
        where = f" (epoch {st['epoch']}, step {st['epoch_step']} of the epoch)" if st.get("epoch") is not None else ""
        if "ranks" in st and st.get("epoch") is None:  # the processes count their own steps: each its own place
            where = " (each process counts its own steps, accelerate's even_batches = false: " + "; ".join(
                f"rank {r} epoch {p['epoch']}, step {p['epoch_step']} of its epoch" if p["epoch"] is not None
                else f"rank {r} none: its epochs are done" for r, p in st["ranks"].items()) + ")"
        if isinstance(source, BatchPlan) and source.own_steps and source.cfg.batch.world_size > 1:
            extra.append("  each process's step is its own N-th update, as its log and ledger count it; a loop that "
                         "enters DDP's join (accelerate's join_uneven_inputs) at each epoch met another process's "
                         "earlier step in the all-reduce from the second epoch on (docs/torch.md, uneven inputs joined)")
        if "samples" in st:
            where = (f": {st['samples']} Megatron sample(s) after {st['consumed_samples']} consumed, each cut across "
                     "the documents below")
        out.append(f"step {args.step}{where}: {len(rows)} row(s)"
                   + (f", {st['supervised_tokens']} supervised tokens" if "supervised_tokens" in st else ""))
        out += extra
        if args.ledger and args.rank is None:
            lacking = [r for r in source.world_ranks if not source.batches.get(r, {}).get(args.step)]
            if lacking and rows:
                out.append(f"  rank(s) {lacking} of the run recorded no batch of step {args.step}: the step's rows "
                           "are short (a ledger file absent or cut)")
        for r in rows[: args.limit]:
            mb = "-" if r.micro_batch is None else r.micro_batch
            loc = f"{r.shard} row {r.row}" if r.shard is not None else "(shard unknown: pass PATH)"
            if r.sample is not None and r.tokens is not None:
                loc += f" tokens {r.tokens[0]}..{r.tokens[1] - 1} (sample {r.sample})"
            out.append(f"  rank {r.rank} micro-batch {mb} global {r.global_index}: {loc}")
        if len(rows) > args.limit:
            out.append(f"  ... {len(rows) - args.limit} more (--limit, --format json, or --export)")
        if "export" in st:
            out.append(f"exported {st['export']['rows']} row(s) to {st['export']['path']}")
    sys.stdout.write(terminal_lines(out))  # shard names from the data: escaped, one line each
    return EXIT_OK
