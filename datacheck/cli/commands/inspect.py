"""``datacheck inspect SHARD``: the offending rows with their values, and ``--export`` for replay.

Exit codes (the same meaning as ``datacheck audit``): 0 no offending row (among the ``--check``
IDs asked for); 1 offending rows were found, or a shard cannot be read at all (an unreadable
shard is a data problem, ``decode.unreadable``, as in the audit: the message says why and
where); 2 usage or config error (bad flag, unknown check ID, missing path, tokenizer package
missing); 3 internal error.
"""
from __future__ import annotations

import argparse
import os
import sys

from datacheck.cli.defaults import config_help
from datacheck.cli.envelope import write_envelope
from datacheck.execute.setup import check_contract, resolve_config_path
from datacheck.io.outputs import check_outputs, write_json_atomic
from datacheck.model.config import Config, describe_config, load_config
from datacheck.model.constants import EXIT_OK, EXIT_POLICY_FAILED
from datacheck.model.errors import UsageError
from datacheck.model.roles import INT64_MAX, INT64_MIN
from datacheck.model.shown import one_line, terminal_safe
from datacheck.render.supervision import LEGEND, MARK, render_ansi, render_plain, render_rows_html, shown_token
from datacheck.tools.inspect import export_rows, inspect_shards, load_tokenizer, parse_row_list

__all__ = ["add_parser", "run", "resolve_shard_config"]


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    a = sub.add_parser(
        "inspect", help="show a shard's offending rows with their values; export them for replay",
        description="Show the rows of SHARD that fail checks: row index (and line for JSONL/CSV), failing "
                    "column and value, the first bad position in list columns, and the sequence as tokens "
                    "with --tokenizer. Exit 0: no offending row; 1: offending rows or an unreadable shard; "
                    "2: usage or config error.")
    a.add_argument("paths", nargs="+", metavar="SHARD", help="shard file, folder (e.g. a save_to_disk split) or glob")
    a.add_argument("--allow-python-schema", action="store_true",
                    help="let a datacheck.toml found by itself (next to the data) name a Python schema "
                         "file (file.py:Class); Python schema files EXECUTE CODE, so by default only one named "
                         "with --schema or in a --config file runs")
    a.add_argument("--config", help=config_help(paths="SHARD"))
    a.add_argument("--check", action="append", metavar="ID",
                   help="only this check ID (repeatable or comma-separated), e.g. tokens.out_of_vocab")
    a.add_argument("--rows", metavar="LIST",
                   help="show (and export) these 0-based rows instead of the failing ones, e.g. 17,42 or 100-110")
    a.add_argument("--limit", type=int, default=20, metavar="N",
                   help="at most N rows shown per check (default 20); --export writes every failing row")
    a.add_argument("--tokenizer", metavar="FILE",
                   help="tokenizer.json, a GPT-2 vocab.json (merges.txt beside it), vocab.txt, or a folder "
                        'holding them; needs the tokenizers package: pip install "tokenizers>=0.15"')
    a.add_argument("--color", choices=["auto", "always", "never"], default="auto",
                   help="with --tokenizer, colour the tokens by supervision (green supervised, grey ignored, blue "
                        "padding, red padding trained on): auto = only when stdout is a terminal (and NO_COLOR is "
                        "unset); otherwise runs are marked [S: ...] [I: ...] [P: ...] [X: ...] with a legend")
    a.add_argument("--html", metavar="FILE",
                   help="with --tokenizer, also write the shown rows' tokens coloured by supervision to FILE "
                        "(a self-contained HTML page)")
    a.add_argument("--export", metavar="FILE", help="write the offending rows (or --rows) to FILE.parquet or "
                                                   "FILE.jsonl with row index, shard path and shard content hash; "
                                                   "a duplicate goes with the row it repeats, and a .parquet keeps "
                                                   "the shard's column types and schema metadata (Hugging Face "
                                                   "features), so the file audited alone shows the same findings")
    a.add_argument("--format", choices=["text", "json"], default="text", help="what to print (default text)")
    a.add_argument("--no-progress", action="store_true",
                   help="accepted for symmetry with audit (scripts pass it to every command); "
                        "inspect shows no progress bar")
    return a


def resolve_shard_config(given: str | None, paths: list[str]) -> str | None:
    """The config to use: the one rule of every entry point (:func:`datacheck.api.resolve_config_path`:
    ``--config``; else ``./datacheck.toml``; else ``datacheck.toml`` in the one folder holding every
    PATH, or in that folder's parent)."""
    return resolve_config_path(given, paths)


def use_color(choice: str, stream=None) -> bool:
    """Whether to write ANSI colours: ``always``; ``never``; ``auto``: ``stream`` (stdout) is a
    terminal and ``NO_COLOR`` (no-color.org) is unset."""
    if choice != "auto":
        return choice == "always"
    stream = stream if stream is not None else sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)()) and not os.environ.get("NO_COLOR")


#: a value shown at Int64's bound may stand for an integer beyond 64 bits in the file (the read path
#: reads such an integer at the bound: :func:`datacheck.model.roles.cast_expr`)
_BOUNDS = (str(INT64_MAX), str(INT64_MIN))
_BOUND_NOTE = " (Int64's bound: the file may hold an integer beyond 64 bits here, read at the bound)"


def _text(inspections, exported, tok_source: str | None, color: bool = False, checks: list[str] | None = None) -> str:
    out: list[str] = []
    coloured: set[int] = set()  # indices of the lines rich coloured
    supervised_rows = 0
    for ins in inspections:
        head = f"{ins.shard.rel} ({ins.shard.format}, {ins.bytes} bytes, {ins.content_hash})"
        if ins.unreadable is not None:
            out += [head, f"  UNREADABLE: {ins.unreadable}", ""]
            continue
        out.append(f"{head}: {ins.rows} rows")
        if ins.layout is not None:
            out.append(f"  layout: {ins.layout.describe()}")
        out += [f"  note: {n}" for n in ins.notes]
        for f in ins.decode:
            out.append(f"  {f.check} [{f.severity}] {f.message}")
            for e in f.examples[:10]:
                # a line format names the line; a binary layout (WebDataset, MDS, litdata) the row
                where = (f"line {e.line}" if e.line is not None or e.row is None else f"row {e.row}") + (
                    f", byte offset {e.byte_offset}" if e.byte_offset is not None else "")
                out.append(f"      {where}: {e.value}")
        if not ins.failing and not ins.shown and checks:  # only what was asked: each check ran clean or not at all
            not_run = {s.check: s.reason for s in ins.skipped}
            apart = [c for c in checks if c in ins.not_applicable]
            ran = [c for c in checks if c not in not_run and c.split(".", 1)[0] not in not_run and c not in apart]
            if ran:
                out.append(f"  no row fails {', '.join(ran)}")
            out += [f"  {c} did not run: {why}" for c, why in not_run.items()]
            where = ins.layout.name if ins.layout is not None and ins.layout.name else "unknown"
            out += [f"  {c} does not apply to this shard's rows (layout {where}): not run" for c in apart]
        elif not ins.failing and not ins.shown:
            out.append("  no failing rows in the row checks" + ("" if not ins.skipped else
                                              f" ({len(ins.skipped)} check(s) skipped: "
                                              + "; ".join(f"{s.check}: {s.reason}" for s in ins.skipped[:4]) + ")"))
        for key, rows in sorted(ins.failing.items()):
            out.append(f"  {key}: {len(rows)} row(s); first: {', '.join(map(str, rows[:10]))}"
                       + (" …" if len(rows) > 10 else ""))
        if ins.shown:
            out.append("")
        for r in ins.shown:
            where = f"row {r.row}" + (f" (line {r.line})" if r.line is not None else "")
            col = f" column {r.column}" if r.column else ""
            out.append(f"  {where}  " + ("no finding (asked with --rows)" if r.check == "(none)" else f"{r.check}{col}"))
            if r.repeats is not None:
                out.append(f"      repeats row {r.repeats} (the first row with this content)")
            if r.value:
                out.append(f"      value: {r.value}" + (_BOUND_NOTE if r.value in _BOUNDS else ""))
            if r.position is not None:
                out.append(f"      first bad element: position {r.position} of {r.length}: {r.bad_value}"
                           + (_BOUND_NOTE if r.bad_value in _BOUNDS else ""))
            elif r.detail is not None and r.detail != r.value:
                out.append(f"      detail: {r.detail}")
            if r.tokens is not None:
                out.append(f"      tokens: {' '.join(shown_token(t) for t in r.tokens)}")
            if r.supervision is not None:
                supervised_rows += 1
                view = (render_ansi(r.supervision, legend=False, run_text=r.supervision_runs) if color
                        else render_plain(r.supervision, legend=False, run_text=r.supervision_runs))
                out.append("      supervision:")
                if color:
                    coloured.update(range(len(out), len(out) + len(view.splitlines())))
                out += [f"        {line}" for line in view.splitlines()]
            elif r.supervision_note is not None:
                out.append(f"      supervision: {r.supervision_note}")
                if r.decoded is not None:
                    out.append(f"        {r.decoded}")
        out.append("")
    if supervised_rows:
        if color:
            coloured.add(len(out))
            out.append(render_ansi([], legend=True).splitlines()[-1])
        else:
            out.append("supervision: " + "; ".join(f"[{MARK[c]}: ...] = {LEGEND[c]}" for c in LEGEND))
    if tok_source:
        out.append(f"tokenizer: {tok_source}")
    if exported is not None:
        path, n = exported
        out.append(f"exported {n} row(s) to {path}" if path is not None else "nothing to export: no rows selected")
    # names and values from the data are shown escaped (never a control sequence the terminal runs);
    # only the coloured supervision lines keep the escape codes rich wrote
    # a name with a line break (a shard file "a\nb.parquet") stays on its line
    return "\n".join(ln if i in coloured else terminal_safe(one_line(ln))
                     for i, ln in enumerate(out)).rstrip("\n") + "\n"


def run(args: argparse.Namespace) -> int:
    check_outputs({"--export": args.export, "--html": args.html}, args.paths)  # before any shard is read
    if args.html and not args.tokenizer:
        raise UsageError("--html shows the tokens by supervision: give --tokenizer DIR too")

    config_path = resolve_shard_config(args.config, args.paths)
    print(f"datacheck: {describe_config(config_path)}", file=sys.stderr)
    cfg = (load_config(config_path, allow_python_schema=args.config is not None or args.allow_python_schema)
           if config_path is not None else Config())
    check_contract(cfg, config_path)
    checks = [c.strip() for arg in (args.check or []) for c in arg.split(",") if c.strip()] or None
    rows = parse_row_list(args.rows) if args.rows is not None else None
    tok = load_tokenizer(args.tokenizer) if args.tokenizer else None
    inspections = inspect_shards(args.paths, cfg, checks=checks, rows=rows, limit=args.limit, tokenizer=tok,
                                 export=bool(args.export))
    html_path = None
    if args.html:
        html_rows = [{"shard": i.shard.rel, "row": r.row, "pairs": r.supervision, "runs": r.supervision_runs,
                      "check": r.check + (f" column {r.column}" if r.column else "")}
                     for i in inspections for r in i.shown if r.supervision is not None]
        html_path = write_json_atomic(args.html, render_rows_html(html_rows, tokenizer=tok.source if tok else None))
        print(f"datacheck: {len(html_rows)} row(s) by supervision: {html_path}", file=sys.stderr)
    exported = None
    if args.export:
        exported = export_rows(inspections, args.export, cfg, rows=rows)
    if args.format == "json":
        doc = {"shards": [i.to_dict() for i in inspections],
               "tokenizer": tok.source if tok else None,
               "export": None if exported is None else {"path": str(exported[0]) if exported[0] else None,
                                                        "rows": exported[1]}}
        write_envelope("datacheck.inspect", doc)
    else:
        sys.stdout.write(_text(inspections, exported, tok.source if tok else None, use_color(args.color), checks))
    if rows is not None:
        bad = any(i.unreadable is not None or any(r.check != "(none)" for r in i.shown) for i in inspections)
    else:
        bad = any(i.has_failures for i in inspections)
    return EXIT_POLICY_FAILED if bad else EXIT_OK
