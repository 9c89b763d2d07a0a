"""``datacheck trace LOG...``: the training log's timeline (first anomaly, resumes, loss-scale events)
and, with ``--data``, the rows of the first bad step audited with every check. The rows come from
``--ledger DIR`` (the recorded order) or, without it, from the simulated batch plan of the data under
the config's ``[batch]`` facts; the output names the source and the step join ("log step 50 =
optimizer step 49"). The data leg is :func:`datacheck.trace.data.trace_data`."""
from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from datacheck.cli.envelope import write_envelope
from datacheck.cli.progress import activity
from datacheck.cli.tracereplay import run_replay
from datacheck.execute.setup import config_and_source
from datacheck.io.outputs import check_outputs, write_atomic
from datacheck.model.config import MAX_WORLD_SIZE, Config
from datacheck.model.constants import EXIT_OK, EXIT_POLICY_FAILED, FAIL_ON
from datacheck.model.errors import UsageError
from datacheck.model.findings import Severity
from datacheck.resume.join import resume_checkpoints
from datacheck.resume.join import summary_lines as checkpoint_lines
from datacheck.trace.data import (
    DatasetIndex,
    ledger_epoch_micro_batches,
    ledger_grad_accum,
    logs_loader,
    plan_epoch_micro_batches,
    plan_steps_per_epoch,
    trace_data,
)
from datacheck.trace.readers import FORMATS, open_log, pydict
from datacheck.trace.render import render_html, render_text
from datacheck.trace.rules import TraceOptions
from datacheck.trace.run import jsonable, trace_logs
from datacheck.trace.rundir import expand_run_dirs
from datacheck.trace.spikes import PRESETS, parse_spike_rule
from datacheck.trace.steps import STEP_UNITS, resolve_convention
from datacheck.trace.verdict import build_verdict

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    a = sub.add_parser(
        "trace", help="training-log triage: the first bad step, its rows and their findings",
        description="Read training logs (Hugging Face trainer_state.json, JSONL, CSV, TensorBoard, Megatron, "
                    "DeepSpeed, nanoGPT-style text; sniffed), run the log.* checks and print the timeline. With "
                    "--data, audit exactly the rows of the first bad step (and --window K steps before it): "
                    "from --ledger DIR when given, else from the batch plan simulated under the config's [batch] "
                    "facts (torch's samplers; needs torch). Exit 0 pass, 1 findings at or above --fail-on, "
                    "2 usage, 3 internal.")
    a.add_argument("logs", nargs="+", metavar="LOG",
                   help="log files (per-rank logs: several files, or a rank field), or a Hugging Face Trainer "
                        "output folder (its trainer_state.json, and its data-indices/ ledger as --ledger)")
    a.add_argument("--log-format", choices=FORMATS, default="auto", help="force the log format (default: sniff)")
    a.add_argument("--regex", default=None, metavar="PATTERN",
                   help="parse text lines with this regex: named groups step (required), loss, lr, grad_norm, ...")
    a.add_argument("--spike", default=None, metavar="RULE",
                   help=f"spike rule: {', '.join(PRESETS)} or ratio:F:W (default: [trace] spike, robust)")
    a.add_argument("--world-size", type=int, default=None, metavar="N", help="ranks the run had (finds unseen ranks)")
    a.add_argument("--data", nargs="+", default=None, metavar="PATH", help="the dataset the run trained on")
    a.add_argument("--config", default=None,
                   help="datacheck.toml: [policy] of the log and data findings, the data's roles and [batch] facts "
                        "(default: looked up as for audit when --data is given)")
    a.add_argument("--ledger", default=None, metavar="DIR",
                   help="per-rank step -> row indices (rank<R>.tsv.gz: record_batches, optimizer steps from 0; OLMo "
                        "data-indices, from 1)")
    a.add_argument("--first-step", type=int, default=None, metavar="K",
                   help="the log's number of the first optimizer step: log step N is optimizer step N-K of the plan "
                        "and of the ledger (default: the trainer's count when the log names it: Hugging Face and "
                        "Megatron 1, Lightning, nanoGPT and llm.c 0; else assumed 1, and the output says so)")
    a.add_argument("--step-unit", choices=STEP_UNITS, default="optimizer",
                   help="what the log's step counts: optimizer steps (default), or micro-batch for a loop that logs "
                        "every micro-batch with its own counter (log step N is micro-batch N-K of the run; needs "
                        "[batch] grad_accum)")
    a.add_argument("--steps-per-epoch", type=int, default=None, metavar="N",
                   help="optimizer steps per epoch, to place Hugging Face console records that carry only an epoch "
                        "(the Trainer's header 'Num update steps per epoch' gives it when the log has it)")
    a.add_argument("--step", type=int, default=None, metavar="N", help="the step to look at (default: the first anomaly)")
    a.add_argument("--window", type=int, default=0, metavar="K", help="also the K steps before it (default 0)")
    a.add_argument("--export", default=None, metavar="FILE", help="write those rows (.parquet or .jsonl) for a replay")
    a.add_argument("--allow-data-mismatch", action="store_true",
                   help="warn, instead of refusing, when the data's index_hash differs from the one the log records")
    a.add_argument("--checkpoints", default=None, metavar="DIR",
                   help="the run's checkpoints: at each resume point, the checkpoint resumed from and what it lacked")
    a.add_argument("--replay", default=None, metavar="MODULE:FN",
                   help="replay the first bad step's rows (needs --data) on FN()'s (model, per-row loss_fn) in train, "
                        "eval and fp32 and fold the result into the verdict (runs your code; needs torch)")
    a.add_argument("--checkpoint", default=None, metavar="PATH",
                   help="with --replay: a state dict to load into the model first (torch.load weights_only=True)")
    a.add_argument("--replay-dtype", choices=["float16", "bfloat16"], default=None,
                   help="with --replay: the run's autocast dtype for train and eval (default: the model's own)")
    a.add_argument("--format", choices=["text", "json", "html"], default="text", help="output (default text)")
    a.add_argument("--output", default=None, metavar="FILE", help="write the output to FILE instead of stdout")
    a.add_argument("--fail-on", choices=FAIL_ON, default="error", help="severity that fails (default error)")
    a.add_argument("--no-progress", action="store_true",
                   help="never show the progress bar of --data (drawn on stderr when stderr is a terminal)")
    return a


def run(args: argparse.Namespace) -> int:
    rd = expand_run_dirs(args.logs, args.ledger, args.data is not None)  # a Trainer OUTPUT_DIR: its state and ledger
    args.logs, args.ledger = rd.logs, rd.ledger
    for line in rd.found:  # what was taken from a folder, said (stderr: the output stays one document)
        print(f"datacheck trace: {line}", file=sys.stderr)
    if args.data is None:
        given = [f for f, v in (("--ledger", args.ledger), ("--export", args.export), ("--step", args.step),
                                ("--window", args.window or None),
                                ("--allow-data-mismatch", args.allow_data_mismatch or None)) if v is not None]
        if given:  # no option is silently ignored
            names = given[0] if len(given) == 1 else f"{', '.join(given[:-1])} and {given[-1]}"
            raise UsageError(f"{names} {'needs' if len(given) == 1 else 'need'} --data PATH "
                             "(the dataset the run trained on)")
    if args.steps_per_epoch is not None and args.steps_per_epoch < 1:
        raise UsageError(f"--steps-per-epoch must be >= 1, got {args.steps_per_epoch}")
    logs = [open_log(p, args.log_format, args.regex, steps_per_epoch=args.steps_per_epoch) for p in args.logs]
    outputs = {"--export": args.export, "--output": args.output}
    check_outputs(outputs, args.data or [])  # never among the audited data
    logs_given = {Path(p).resolve() for p in args.logs}
    for flag, out in outputs.items():  # a log is an input, not data: only the file itself is off limits
        if out is not None and Path(out).resolve() in logs_given:
            raise UsageError(f"{flag} {out} is one of the logs being read; write the output to another file")
    if args.world_size is not None and not 1 <= args.world_size <= MAX_WORLD_SIZE:
        raise UsageError(f"--world-size must be 1 .. {MAX_WORLD_SIZE}, got {str(args.world_size)[:40]}")
    cfg = config_and_source(args.config, args.data)[0] if args.data is not None or args.config else Config()
    opts = TraceOptions(spike=parse_spike_rule(args.spike or cfg.trace.spike, cfg.trace.grad_spike_factor),
                        world_size=args.world_size, limits=cfg.trace,
                        grad_accum=cfg.batch.grad_accum if cfg.batch.grad_accum > 1 else None)
    if (args.replay is not None or args.checkpoint is not None) and (args.replay is None or args.data is None):
        raise UsageError("--replay MODULE:FN needs --data (the rows to replay); --checkpoint needs --replay")
    res = trace_logs(logs, opts)
    # the run's micro-batches per optimizer step: [batch] grad_accum, else what the ledger recorded
    run_ga = cfg.batch.grad_accum if cfg.batch.grad_accum > 1 or args.ledger is None or args.data is None \
        else ledger_grad_accum(args.ledger)
    if args.step_unit == "micro-batch" and run_ga < 2:
        raise UsageError("--step-unit micro-batch needs the run's micro-batches per optimizer step: set [batch] "
                         f"grad_accum (> 1) in the config (it is {cfg.batch.grad_accum}), or give the --ledger the run "
                         "recorded with its grad_accum")
    micro = run_ga if args.step_unit == "micro-batch" else 1
    conv = resolve_convention(res.logs, args.first_step, micro_batches=micro, grad_accum=run_ga)
    replay = None
    with activity("tracing", no_progress=args.no_progress or args.data is None) as tick:
        tick.stage("counting the rows of the data")
        index = DatasetIndex.build(args.data, cfg) if args.data is not None else None
        if index is not None:  # a Hugging Face Trainer's logs: its batches are accelerate's, not torch's rows
            index.loader, index.loader_why = logs_loader(res.logs, cfg)
        if conv.unplaced and index is not None and args.steps_per_epoch is None:
            spe = plan_steps_per_epoch(index)  # the config's [batch] facts place records that carry only an epoch
            if spe is not None:
                logs = [open_log(p, args.log_format, args.regex, steps_per_epoch=spe,
                                 steps_per_epoch_from="the [batch] plan's") for p in args.logs]
                res = trace_logs(logs, opts)
                conv = resolve_convention(res.logs, args.first_step, micro_batches=micro, grad_accum=run_ga)
        if args.steps_per_epoch is not None and not any(st.line_formats.get(pydict.NAME) for st in res.logs):
            raise UsageError("--steps-per-epoch places Hugging Face console records (dicts with an epoch); the logs "
                             "have none: drop it")
        if micro > 1 and index is not None:
            # a count of micro-batches across epochs whose last step holds fewer: the epoch's length
            if args.ledger is not None:
                counts = ledger_epoch_micro_batches(args.ledger, micro)
            else:  # every epoch of the plan has as many (datacheck.model.order)
                m0 = plan_epoch_micro_batches(index)
                counts = None if m0 is None else (m0,)
            if counts is not None and len(counts) == 1:
                m = counts[0]
                conv = replace(conv, epoch_micro_batches=m, source=f"{conv.source}; each epoch is {m} micro-batches "
                               f"({'the ledger' if args.ledger else 'the [batch] plan'}), its last optimizer step "
                               f"{m % micro} of them")
            elif counts is not None:
                conv = replace(conv, epoch_counts=counts, source=f"{conv.source}; epochs 0..{len(counts) - 1} are "
                               f"{', '.join(map(str, counts))} micro-batches (the ledger; later ones as the last), "
                               "each epoch's last optimizer step holding the remainder")
        res.join(conv)
        res.apply_fail_on(cfg, args.fail_on)
        tick.stage("auditing the rows of the steps")
        with tempfile.TemporaryDirectory(prefix="datacheck-replay-") as tmp:
            export = args.export or (str(Path(tmp) / "rows.parquet") if args.replay is not None else None)
            data = None if args.data is None else trace_data(
                res, args.data, cfg, conv, ledger=args.ledger, step=args.step, window=args.window, export=export,
                allow_data_mismatch=args.allow_data_mismatch, fail_on=args.fail_on, index=index,
                world_size=args.world_size)
            step = args.step if args.step is not None else (res.first_bad or {}).get("step")
            # the batch to replay: the step whose batch holds the failing rows (the update before a
            # Lightning log's first non-finite loss may), else the anomaly's own
            at = (data or {}).get("replay_step", step) if step is not None else None
            if args.replay is not None and export is not None and data is not None and data.get("rows") \
                    and at is not None:
                tick.stage("replaying the rows of the step")
                # the export's _datacheck_step is the 0-based optimizer step; the verdict speaks in log steps
                replay = {**run_replay(args.replay, args.checkpoint, export, cfg, conv.optimizer_step(at),
                                       args.replay_dtype), "step": at, "anomaly_step": step}
            if data is not None and args.export is None:
                data["export"] = None
    ckpts = resume_checkpoints(res.events, res.findings, args.checkpoints) if args.checkpoints else None
    if data is not None and data.get("audited_steps") and res.first_bad is not None:
        res.first_bad["audited_window"] = data["audited_steps"]
    verdict = build_verdict(res, data, replay)
    failed = any(f.fails_policy for f in res.findings) or any(
        f["fails_policy"] for f in ((data or {}).get("rows") or {}).get("findings", [])) or any(
        Severity(f["severity"]).rank >= Severity(args.fail_on).rank for f in (ckpts or {}).get("findings", [])
        if args.fail_on != "never")
    if args.format == "json":
        result = {**res.to_dict(), "data": data, "verdict": jsonable(verdict), "passed": not failed}
        if ckpts is not None:  # only with --checkpoints: the default result keeps its keys
            result["checkpoints"] = ckpts
        write_envelope("datacheck.trace", result, _Target(args.output))
    else:
        text = render_html(res, data, verdict) if args.format == "html" else render_text(res, data, verdict)
        if ckpts is not None and args.format == "text":
            text += "\n".join(checkpoint_lines(ckpts)) + "\n"
        if args.output:
            write_atomic(args.output, text)
        else:
            sys.stdout.write(text)
    return EXIT_POLICY_FAILED if failed else EXIT_OK


class _Target:
    """stdout, or a buffer written atomically to ``path`` when closed (``write_envelope`` writes once)."""

    def __init__(self, path: str | None):
        self.path = path

    def write(self, text: str) -> int:
        if self.path is None:
            return sys.stdout.write(text)
        write_atomic(self.path, text)
        return len(text)
