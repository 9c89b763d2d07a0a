"""``datacheck schema infer PATH... [-o FILE]``: write a data contract from the data.

The output is the YAML form ``--schema FILE`` / ``[dataset] schema`` read (Pandera's polars
schema plus datacheck's list rules); auditing the same data against it passes.
"""
from __future__ import annotations

import argparse
import sys

from datacheck.cli.commands.audit import resolve_config_path
from datacheck.cli.defaults import config_help
from datacheck.cli.progress import activity
from datacheck.io.outputs import check_outputs, write_json_atomic
from datacheck.model.config import Config, describe_config, load_config
from datacheck.model.constants import EXIT_OK, EXIT_USAGE
from datacheck.tools.infer import infer_config, infer_contract, infer_yaml, propose_layout

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    a = sub.add_parser("schema", help="data contracts: infer a schema from data")
    verbs = a.add_subparsers(dest="schema_command", metavar="SUBCOMMAND")
    inf = verbs.add_parser("infer", help="write a schema (Pandera YAML) from the shards under PATH")
    inf.add_argument("paths", nargs="+", metavar="PATH", help="shard file, folder (recursive) or glob")
    inf.add_argument("-o", "--output", metavar="FILE", help="write the schema here (default: print it)")
    inf.add_argument("--config", help=config_help(" for the format and [columns] roles"))
    inf.add_argument("--name", default="inferred", help="the schema's name (default: inferred)")
    inf.add_argument("--tokenizer", metavar="PATH",
                     help="tokenizer.json / vocab.json / vocab.txt or a folder (default: [tokens] tokenizer): its vocab size "
                          "and the pad/eos/bos ids its files declare fill the [tokens] keys the config leaves unset, as the "
                          "audit fills them: token-id columns are bounded by [0, vocab size), and ids of the pad id are "
                          "padding to the layout's evidence (needs the tokenizers package); without either, id bounds are "
                          "left out, never the observed range")
    inf.add_argument("--no-progress", action="store_true",
                     help="never show the progress bar (drawn on stderr when stderr is a terminal)")
    return a


def run(args: argparse.Namespace) -> int:
    if getattr(args, "schema_command", None) != "infer":
        print("datacheck: error: schema needs a subcommand: datacheck schema infer PATH... [-o FILE]", file=sys.stderr)
        return EXIT_USAGE

    check_outputs({"--output": args.output}, args.paths)  # before any shard is read

    config_path = resolve_config_path(args.config, args.paths)
    print(f"datacheck: {describe_config(config_path)}", file=sys.stderr)
    cfg = (load_config(config_path, allow_python_schema=args.config is not None)
           if config_path is not None else Config())
    # the flag's tokenizer, else [tokens] tokenizer (from the config's folder): its vocabulary size and
    # pad/eos/bos ids fill the [tokens] keys the config leaves unset, as the audit fills them
    cfg = infer_config(cfg, args.tokenizer)
    with activity("inferring", no_progress=args.no_progress) as tick:
        data, notes = infer_contract(args.paths, cfg, name=args.name, progress=tick)
        tick.stage("recognizing the layout")
        proposal = propose_layout(args.paths, cfg)
    text = infer_yaml(data, [str(p) for p in args.paths], proposal)
    print(f"datacheck: layout: {proposal.layout or 'none'} ({proposal.why})", file=sys.stderr)
    rows = proposal.rows
    if rows is not None:  # what the audit will take the rows for (the checks outside it do not apply)
        if rows.name is None:
            said = f"unknown ({rows.why})"
        elif proposal.gives_rows():  # the proposed [dataset] schema already gives it
            said = f"{rows.name} ({rows.why}), as the proposed [dataset] schema = \"{proposal.layout}\" gives it"
        else:
            said = f"{rows.name} ({rows.why}); state it with [dataset] layout = \"{rows.name}\""
        print(f"datacheck: the audit recognizes the rows as {said}", file=sys.stderr)
    for n in notes:
        print(f"datacheck: note: {n}", file=sys.stderr)
    if args.output:
        path = write_json_atomic(args.output, text)
        print(f"schema: {path}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return EXIT_OK
