"""``datacheck checkpoint PATH``: what a training checkpoint holds for a lossless resume (``ckpt.*``).

Reads a Hugging Face ``checkpoint-N/``, an accelerate ``save_state`` folder, a Lightning ``.ckpt``, a
DeepSpeed ``global_stepN/`` (with ``latest``), a ``torch.distributed.checkpoint`` folder or a plain
``torch.save`` file (:mod:`datacheck.resume.checkpoint`) without running any code from it.

Exit codes: 0 no finding at or above ``--fail-on``; 1 some; 2 usage (no such path, not a checkpoint,
one piece of a checkpoint given alone, torch missing) or a checkpoint without model weights (the
report is written, then "no model weights found: not a resumable checkpoint"); 3 internal error.
"""
from __future__ import annotations

import argparse
import sys

from datacheck.cli.envelope import write_envelope
from datacheck.model.constants import EXIT_OK, EXIT_POLICY_FAILED, EXIT_USAGE, FAIL_ON
from datacheck.model.findings import Severity
from datacheck.resume.checkpoint import LAYOUTS, inspect_checkpoint, resumable, summary_lines

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    a = sub.add_parser(
        "checkpoint", help="what a checkpoint holds for a lossless resume (weights, optimizer, scheduler, scaler, "
                           "RNG, sampler, step)",
        description="Which pieces of a lossless resume a checkpoint holds (model weights, optimizer moments per "
                    "param group, lr scheduler, fp16 loss scaler, RNG per rank, sampler position, step) and "
                    "whether their step counts agree; each missing piece is a ckpt.* finding saying what it does "
                    "to the resumed run. No code from the checkpoint runs: pickles are scanned for the globals "
                    "they need, and only files needing tensors and plain containers are loaded "
                    "(torch.load(weights_only=True), memory-mapped). Needs torch.")
    a.add_argument("path", metavar="PATH", help="a checkpoint folder or file")
    a.add_argument("--fp16", action="store_true", default=None,
                   help="the run trained in fp16 with a loss scaler (then a missing scaler state is a finding)")
    a.add_argument("--world-size", type=int, default=None, metavar="N",
                   help="data-parallel ranks of the run (per-rank files of ranks 0..N-1 must be there)")
    a.add_argument("--layout", choices=LAYOUTS, default=None, help="force the layout (default: detected)")
    a.add_argument("--format", choices=["text", "json"], default="text", help="output (default text)")
    a.add_argument("--fail-on", choices=FAIL_ON, default="error", help="severity that fails (default error)")
    return a


def run(args: argparse.Namespace) -> int:
    info = inspect_checkpoint(args.path, fp16=args.fp16, world_size=args.world_size, layout=args.layout)
    failed = args.fail_on != "never" and any(Severity(f.severity).rank >= Severity(args.fail_on).rank
                                             for f in info.findings)
    ok = resumable(info)
    if args.format == "json":
        write_envelope("datacheck.checkpoint", {**info.to_dict(), "passed": ok and not failed})
    else:
        sys.stdout.write("\n".join(summary_lines(info)) + "\n")
    if not ok:
        sys.stderr.write(f"error: {args.path}: no model weights found: not a resumable checkpoint\n")
        return EXIT_USAGE
    return EXIT_POLICY_FAILED if failed else EXIT_OK
