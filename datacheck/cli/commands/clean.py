"""``datacheck clean PATH... --out DIR``: cleaned shards, a quarantine of the dropped rows, a data index.

Exit codes: 0 the cleaned copy was written; 1 written, but some shard could not be read (it was
not copied; the message says why); 2 usage or config error (unknown ``--drop`` ID, or one clean
cannot drop, ``--out`` inside/containing an input folder or file, or not empty); 3 internal error (e.g. the
written rows did not equal the input: nothing was put in place).
"""
from __future__ import annotations

import argparse
import sys

from datacheck.cli.commands.inspect import resolve_shard_config
from datacheck.cli.defaults import config_help
from datacheck.cli.envelope import write_envelope
from datacheck.cli.progress import activity
from datacheck.execute.setup import check_contract
from datacheck.model.config import load_config
from datacheck.model.constants import EXIT_OK, EXIT_POLICY_FAILED
from datacheck.model.findings import clip_message
from datacheck.render.text import terminal_lines
from datacheck.tools.clean import DATASET_DROPS, CleanResult, ShardClean, clean

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    a = sub.add_parser(
        "clean", help="write cleaned shards without failing rows, plus a quarantine and a data index",
        description="Write a cleaned copy of the shards into --out (same formats), without the rows that fail "
                    "the chosen checks; the dropped rows go to OUT/.quarantine/ (same layout, with their row "
                    "index, shard and reasons), and OUT/index.json is the data index of the cleaned shards. "
                    "The originals are never modified. Kept + quarantined rows equal the input rows, verified by "
                    "per-row content hashes before the output is renamed into place. JSONL lines and CSV records "
                    "that do not parse are not rows: they are counted apart and quarantined when decode.bad_record "
                    "is dropped (the default), else copied as they are.")
    a.add_argument("paths", nargs="+", metavar="PATH", help="shard file, folder (recursive) or glob")
    a.add_argument("--out", required=True, metavar="DIR",
                   help="new (or empty) folder outside the input folders (beside an input file is fine)")
    a.add_argument("--drop", action="append", metavar="CHECK_IDS",
                   help="comma-separated check IDs whose rows are dropped (repeatable): row-level checks, and "
                        "dup.split_overlap (the eval copies; the train row stays), dup.exact_across_shards "
                        "(every copy after the first), dup.shard (the duplicate shards); default: every "
                        "row-level check of severity error")
    a.add_argument("--allow-python-schema", action="store_true",
                    help="let a datacheck.toml found by itself (next to the data) name a Python schema "
                         "file (file.py:Class); Python schema files EXECUTE CODE, so by default only one named "
                         "with --schema or in a --config file runs")
    a.add_argument("--config", help=config_help())
    a.add_argument("--format", choices=["text", "json"], default="text", help="what to print (default text)")
    a.add_argument("--no-progress", action="store_true",
                   help="never show the progress bar (drawn on stderr when stderr is a terminal)")
    return a


#: characters of a left-in-place finding's message shown on its line (a longer one is cut by
#: :func:`~datacheck.model.findings.clip_message`: marked with an ellipsis, its last sentence, the advice, kept)
_MESSAGE_CHARS = 200


def _left_lines(res: CleanResult) -> list[str]:
    """The dataset-level findings left in place, one line each (a message over :data:`_MESSAGE_CHARS`
    characters cut by :func:`~datacheck.model.findings.clip_message`, never mid-word without a mark), and
    whether the copy still fails the gate."""
    if not res.left_in_place:
        return []
    out = ["", "left in place (findings clean did not remove):"]
    for x in res.left_in_place:
        if x.left is None:
            state = "the copy may still have it: audit it to see"
        elif x.check == "dup.shard":
            state = f"{x.left} duplicate shard(s) copied"
        else:
            state = f"{x.left} left in the copy"
        # not when it was dropped already (a shard in both splits keeps its dup.split_overlap rows)
        fix = (f"; --drop {x.check} removes it" if (x.check in DATASET_DROPS or x.check == "decode.bad_record")
               and x.check not in res.drop else "")
        out.append(f"  {x.check} [{x.severity}]: {clip_message(x.message, _MESSAGE_CHARS)} ({state}{fix})")
    fails = list(dict.fromkeys(x.check for x in res.left_in_place if x.still_fails))
    maybe = [c for c in dict.fromkeys(x.check for x in res.left_in_place if x.still_fails is None) if c not in fails]
    if fails:
        out.append(f"the cleaned copy still FAILS the gate (--fail-on error) on: {', '.join(fails)}"
                   + (f"; it may also fail on: {', '.join(maybe)}" if maybe else ""))
    elif maybe:
        out.append(f"the cleaned copy may still fail the gate on: {', '.join(maybe)} (datacheck audit {res.out})")
    return out


def _bad_records_text(s: ShardClean) -> str:
    """``; N line(s) that do not parse as JSON (decode.bad_record: line 2, 4): what clean did with them``
    ("" when every record parsed)."""
    if not s.bad_records:
        return ""
    what = "line(s) that do not parse as JSON" if s.format == "jsonl" else "record(s) that do not parse"
    where = (f": line {', '.join(map(str, s.bad_record_lines[:10]))}{' ...' if s.bad_records > 10 else ''}"
             if s.bad_record_lines else "")
    if not s.bad_records_kept:
        done = "quarantined"
    elif not s.bad_records_quarantined:
        done = "copied as they are (--drop decode.bad_record quarantines them)"
    else:
        done = f"{s.bad_records_quarantined} quarantined, {s.bad_records_kept} copied as they are"
    return f"; {s.bad_records} {what} (decode.bad_record{where}): {done}"


def run(args: argparse.Namespace) -> int:
    found = resolve_shard_config(args.config, args.paths)
    cfg = load_config(found, allow_python_schema=args.config is not None or args.allow_python_schema)
    check_contract(cfg, found)
    drop = [c.strip() for arg in (args.drop or []) for c in arg.split(",") if c.strip()] or None
    with activity("cleaning", no_progress=args.no_progress) as tick:
        res = clean(args.paths, args.out, cfg, drop=drop, progress=tick)
    if args.format == "json":
        write_envelope("datacheck.clean", res.to_dict())
    else:
        lines = [f"dropping rows that fail: {', '.join(res.drop)}"]
        for s in res.shards:
            if s.unreadable is not None:
                lines.append(f"  {s.path}: UNREADABLE, not copied: {s.unreadable}")
                continue
            # the rows' reasons (records that do not parse are said apart: they are not rows)
            why = ", ".join(f"{k} {v}" for k, v in sorted(s.dropped.items())
                            if k != "decode.bad_record" or not s.bad_records) or "nothing dropped"
            blank = f"; {s.blank_lines} blank line(s) not copied" if s.blank_lines else ""
            bad = _bad_records_text(s)
            if s.duplicate_of is not None:
                lines.append(f"  {s.path}: {s.input_rows} in, all quarantined: same bytes as {s.duplicate_of} "
                             f"(dup.shard), not copied{bad}")
                continue
            renamed = f"; written as {s.written_as}" if s.written_as is not None else ""
            lines.append(f"  {s.path}: {s.input_rows} in, {s.kept} kept, {s.quarantined} quarantined "
                         f"({why}){bad}{blank}{renamed}")
        bad_total = ""
        if res.bad_records:
            bad_total = (f"; {res.bad_records} record(s) that do not parse, not rows: "
                         f"{res.bad_records - res.bad_records_quarantined} copied as they are, "
                         f"{res.bad_records_quarantined} quarantined")
        lines += [
            f"total: {res.input_rows} in = {res.kept} kept + {res.quarantined} quarantined "
            f"(verified by per-row content hashes){bad_total}",
            f"cleaned shards: {res.out}",
            f"quarantine:     {res.quarantine}",
            f"data index:     {res.index_path} (index_hash {res.index['index_hash']})",
        ]
        lines += [f"note: {n}" for n in res.notes]
        lines += _left_lines(res)
        sys.stdout.write(terminal_lines(lines))  # shard names and messages from the data: one line each
    return EXIT_POLICY_FAILED if any(s.unreadable for s in res.shards) else EXIT_OK
