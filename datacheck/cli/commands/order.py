"""``datacheck order verify RUN/``: which rows a run trained on, across resumes and ranks (``order.*``).

Reads the recorded ledger under RUN/ (``data-indices/rank<r>.tsv.gz``: ``datacheck.torch.record_batches``
or OLMo's) and compares it with the plan of ``[batch]`` (or the sampler settings the ledger recorded):
rows trained on more often than planned within an epoch, rows of a completed epoch never trained on,
the first step leaving the plan and what the resumed order is (:mod:`datacheck.resume.order`).

Exit codes: 0 no finding at or above ``--fail-on``; 1 some (a row trained on twice, or never in a
completed epoch, or ranks skewed after a resume); 2 usage (no ledger, no plan, torch missing); 3 internal.
"""
from __future__ import annotations

import argparse
import sys

from datacheck.cli.envelope import write_envelope
from datacheck.execute.plan import row_space
from datacheck.execute.setup import resolve_config_path
from datacheck.io.ledger import read_ledger
from datacheck.model.config import Config, load_config
from datacheck.model.constants import EXIT_OK, EXIT_POLICY_FAILED, FAIL_ON
from datacheck.model.errors import UsageError
from datacheck.model.findings import Severity
from datacheck.resume.order import summary_lines, verify_order

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    a = sub.add_parser("order", help="verify which rows a run trained on across resumes and ranks (recorded ledger)")
    verbs = a.add_subparsers(dest="order_command", metavar="{verify}")
    v = verbs.add_parser(
        "verify", help="compare a recorded ledger with the plan: rows seen twice or never, the first divergent step",
        description="Compare the recorded order of RUN/ (data-indices/rank<r>.tsv.gz written by datacheck.torch."
                    "record_batches, or OLMo's) with the plan of [batch] (torch's DistributedSampler and "
                    "BatchSampler; without [batch] batch_size, the sampler settings the ledger recorded): visits "
                    "per row and epoch against the plan, the first optimizer step leaving it, how each resume "
                    "continued (continuation, restart of the epoch, another epoch's permutation, a changed world "
                    "size) and ranks at different positions after a resume. Needs torch.")
    v.add_argument("run_dir", metavar="RUN", help="the run's folder (holding data-indices/) or the ledger folder")
    v.add_argument("--config", help="datacheck.toml with [batch] (default: as for audit, looked up from RUN)")
    v.add_argument("--rows", type=int, default=None, metavar="N", help="rows in the dataset the run trained on")
    v.add_argument("--data", nargs="+", default=None, metavar="PATH",
                   help="the dataset (its rows are counted; alternative to --rows)")
    v.add_argument("--first-step", type=int, default=None, metavar="K",
                   help="the ledger's number of the run's first step (default 0; OLMo ledgers 1)")
    v.add_argument("--format", choices=["text", "json"], default="text", help="output (default text)")
    v.add_argument("--fail-on", choices=FAIL_ON, default="error", help="severity that fails (default error)")
    return a


def run(args: argparse.Namespace) -> int:
    if args.order_command is None:
        raise UsageError("datacheck order needs a verb: verify (see datacheck order --help)")
    if args.rows is not None and args.data:
        raise UsageError("give --rows N or --data PATH, not both")
    if args.rows is not None and args.rows < 1:
        raise UsageError(f"--rows must be >= 1, got {args.rows}")
    cfg_path = resolve_config_path(args.config, args.data or [args.run_dir])
    cfg: Config = load_config(cfg_path) if cfg_path else Config()
    led = read_ledger(args.run_dir, what="RUN")
    n_rows = args.rows
    if args.data:
        n_rows = row_space(list(args.data), cfg)[0].n_rows
    batch = cfg.batch if cfg.batch.batch_size is not None else None
    v = verify_order(led, batch, n_rows, first_step=args.first_step,
                     plan_source=f"config {cfg_path}" if batch is not None else "ledger")
    failed = args.fail_on != "never" and any(Severity(f.severity).rank >= Severity(args.fail_on).rank
                                             for f in v.findings)
    if args.format == "json":
        write_envelope("datacheck.order.verify", {**v.to_dict(), "passed": not failed})
    else:
        sys.stdout.write("\n".join(summary_lines(v)) + "\n")
    return EXIT_POLICY_FAILED if failed else EXIT_OK
