"""``datacheck trace LOG...``: the training log's timeline (first anomaly, resumes, loss-scale events)
and, with ``--data``, the rows of the first bad step audited with every check. The rows come from
``--ledger DIR`` (the recorded order) or, without it, from the simulated batch plan of the data under
the config's ``[batch]`` facts (:func:`datacheck.trace.data.plan_rows`); the output names the source."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from datacheck.cli.envelope import write_envelope
from datacheck.execute.setup import config_and_source
from datacheck.io.outputs import check_outputs, write_atomic
from datacheck.model.config import MAX_WORLD_SIZE
from datacheck.model.constants import EXIT_OK, EXIT_POLICY_FAILED, FAIL_ON
from datacheck.model.errors import UsageError
from datacheck.model.findings import Severity
from datacheck.model.identity import compare_identity
from datacheck.trace.data import DatasetIndex, audit_step_rows, export_rows, ledger_rows, plan_rows
from datacheck.trace.readers import FORMATS, open_log
from datacheck.trace.render import render_html, render_text
from datacheck.trace.rules import TraceOptions
from datacheck.trace.run import TraceResult, trace_logs
from datacheck.trace.spikes import PRESETS, parse_spike_rule

__all__ = ["add_parser", "run"]

_MAX_AUDITED_STEPS = 1000


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    a = sub.add_parser(
        "trace", help="training-log triage: the first bad step, its rows and their findings",
        description="Read training logs (Hugging Face trainer_state.json, JSONL, CSV, TensorBoard, Megatron, "
                    "DeepSpeed, nanoGPT-style text; sniffed), run the log.* checks and print the timeline. With "
                    "--data, audit exactly the rows of the first bad step (and --window K steps before it): "
                    "from --ledger DIR when given, else from the batch plan simulated under the config's [batch] "
                    "facts (torch's samplers; needs torch). Exit 0 pass, 1 findings at or above --fail-on, "
                    "2 usage, 3 internal.")
    a.add_argument("logs", nargs="+", metavar="LOG", help="log files (per-rank logs: several files, or a rank field)")
    a.add_argument("--log-format", choices=FORMATS, default="auto", help="force the log format (default: sniff)")
    a.add_argument("--regex", default=None, metavar="PATTERN",
                   help="parse text lines with this regex: named groups step (required), loss, lr, grad_norm, ...")
    a.add_argument("--spike", default="olmo", metavar="RULE",
                   help=f"spike rule: {', '.join(PRESETS)} or ratio:F:W (default olmo)")
    a.add_argument("--world-size", type=int, default=None, metavar="N", help="ranks the run had (finds unseen ranks)")
    a.add_argument("--data", nargs="+", default=None, metavar="PATH", help="the dataset the run trained on")
    a.add_argument("--config", default=None, help="datacheck.toml for the data (default: looked up as for audit)")
    a.add_argument("--ledger", default=None, metavar="DIR",
                   help="per-rank step -> row indices (rank<R>.tsv.gz: OLMo data-indices / record_batches)")
    a.add_argument("--first-step", type=int, default=1, metavar="K",
                   help="without --ledger: the log's number of the first optimizer step (default 1: Hugging Face, "
                        "Megatron and OLMo log the step count after the update; 0 for loops that log from 0); log "
                        "step N is step N-K of the simulated plan")
    a.add_argument("--step", type=int, default=None, metavar="N", help="the step to look at (default: the first anomaly)")
    a.add_argument("--window", type=int, default=0, metavar="K", help="also the K steps before it (default 0)")
    a.add_argument("--export", default=None, metavar="FILE", help="write those rows (.parquet or .jsonl) for a replay")
    a.add_argument("--allow-data-mismatch", action="store_true",
                   help="warn, instead of refusing, when the data's index_hash differs from the one the log records")
    a.add_argument("--format", choices=["text", "json", "html"], default="text", help="output (default text)")
    a.add_argument("--output", default=None, metavar="FILE", help="write the output to FILE instead of stdout")
    a.add_argument("--fail-on", choices=FAIL_ON, default="error", help="severity that fails (default error)")
    return a


def _data(args: argparse.Namespace, res: TraceResult) -> dict[str, Any] | None:
    if args.data is None:
        if args.ledger or args.export:
            raise UsageError("--ledger/--export need --data PATH (the dataset the run trained on)")
        return None
    if args.window < 0:
        raise UsageError(f"--window must be >= 0, got {args.window}")
    cfg, _ = config_and_source(args.config, args.data)
    ds = DatasetIndex.build(args.data, cfg)
    idents = {st.identity for st in res.logs if st.identity is not None}
    mismatch, config_warning = compare_identity(idents, ds.index_hash(), cfg.hash()) if idents else (None, None)
    if mismatch and not args.allow_data_mismatch:
        raise UsageError(mismatch + "; give the training data, or --allow-data-mismatch to trace anyway")
    mismatch = "; ".join(w for w in (mismatch, config_warning) if w) or None  # the output's "warning"
    if args.step is not None:
        lo, hi = args.step, args.step
    elif res.first_bad is not None:
        lo, hi = res.first_bad["window"]
    else:
        return {"message": "no anomaly and no --step: no rows to audit", "rows": None, "warning": mismatch,
                "source": None}
    steps = list(range(max(0, lo - args.window), hi + 1))
    if len(steps) > _MAX_AUDITED_STEPS:
        raise UsageError(f"{len(steps)} steps to audit (window {lo}..{hi} + {args.window} before); give --step N")
    if args.ledger is not None:
        rows, source = ledger_rows(args.ledger, steps)
        if not rows:
            raise UsageError(f"the ledger {args.ledger} has no rows for steps {steps[0]}..{steps[-1]}")
    else:
        rows, source = plan_rows(args.data, cfg, steps, args.first_step)
    ra = audit_step_rows(ds, rows)
    exported = export_rows(ra, args.export) if args.export else None
    bad = sorted(ra.row_checks)
    msg = (f"steps {steps[0]}..{steps[-1]}: {sum(len(v) for rr in rows.values() for v in rr.values())} row(s) "
           f"audited, {len(bad)} failing a check" + (f" (rows {bad[:20]})" if bad else ""))
    return {"message": msg, "rows": ra.to_dict(), "audited_steps": [steps[0], steps[-1]], "warning": mismatch,
            "source": source,
            "export": None if exported is None else {"path": args.export, "rows": exported}}


def run(args: argparse.Namespace) -> int:
    logs = [open_log(p, args.log_format, args.regex) for p in args.logs]
    outputs = {"--export": args.export, "--output": args.output}
    check_outputs(outputs, args.data or [])  # never among the audited data
    logs_given = {Path(p).resolve() for p in args.logs}
    for flag, out in outputs.items():  # a log is an input, not data: only the file itself is off limits
        if out is not None and Path(out).resolve() in logs_given:
            raise UsageError(f"{flag} {out} is one of the logs being read; write the output to another file")
    if args.world_size is not None and not 1 <= args.world_size <= MAX_WORLD_SIZE:
        raise UsageError(f"--world-size must be 1 .. {MAX_WORLD_SIZE}, got {str(args.world_size)[:40]}")
    res = trace_logs(logs, TraceOptions(spike=parse_spike_rule(args.spike), world_size=args.world_size))
    data = _data(args, res)
    sev = [f.severity for f in res.findings] + [f["severity"] for f in ((data or {}).get("rows") or {}).get("findings", [])]
    failed = args.fail_on != "never" and any(Severity(s).rank >= Severity(args.fail_on).rank for s in sev)
    if args.format == "json":
        result = {**res.to_dict(), "data": data, "passed": not failed}
        write_envelope("datacheck.trace", result, _Target(args.output))
    else:
        text = render_html(res, data) if args.format == "html" else render_text(res, data)
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
