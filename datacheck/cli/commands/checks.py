"""``datacheck checks [ID|FAMILY] [--format text|json]``: the check catalog.

Without an argument: every check ID with its level, default severity and summary. ``--layout``
without a name: the layouts and what their rows hold (JSON: ``result.layouts``). With ``--layout
NAME``: the checks that apply to that layout, then the IDs of those that do not (not run on its
shards); with ``--format json``, the applicable entries (each entry lists its ``layouts``). With a check ID:
that check in full (the roles and config facts it needs, whether this version builds it, what makes
a row fail). With a family (``tokens``, ``dup``): that family's IDs. ``--format json`` prints the
versioned envelope (kind ``datacheck.checks``; ``result.checks`` is a list of entries).

Exit codes: 0 listed; 2 unknown ID or family (with "did you mean").
"""
from __future__ import annotations

import argparse
import difflib
import sys
import textwrap

from datacheck.cli.envelope import write_envelope
from datacheck.listing import CheckEntry, select_checks
from datacheck.model.constants import EXIT_OK
from datacheck.model.errors import UsageError
from datacheck.model.layouts import LAYOUT_NAMES, LAYOUTS

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    a = sub.add_parser(
        "checks", help="list the check IDs (level, default severity, summary), or show one in full",
        description="The check catalog. With a check ID: the roles and config facts it needs, whether this "
                    "version builds it, and what makes a row fail. With a family (e.g. tokens): its IDs.",
        epilog="exit codes:\n  0  listed\n  2  unknown check ID or family",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument("check", nargs="?", metavar="ID|FAMILY", help="a check ID (tokens.out_of_vocab) or a family (tokens)")
    a.add_argument("--layout", nargs="?", const="", metavar="LAYOUT",
                   help="the checks that apply to this layout, then those that do not (" + ", ".join(LAYOUT_NAMES)
                        + "); without a name: the layouts and what their rows hold")
    a.add_argument("--format", choices=["text", "json"], default="text", help="output (default text)")
    return a


def _fact(fact: str) -> str:
    section, _, key = fact.partition(".")
    return f"[{section}] {key}"


def _table(entries: list[CheckEntry]) -> str:
    rows = [(e.id, e.level, e.severity, e.summary + ("" if e.built else " (not built in this version)"))
            for e in entries]
    w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(("check", "level", "severity"))]
    head = f"{'check'.ljust(w[0])}  {'level'.ljust(w[1])}  {'severity'.ljust(w[2])}  summary"
    lines = [head, "  ".join("-" * n for n in w) + "  " + "-" * 7]
    lines += [f"{r[0].ljust(w[0])}  {r[1].ljust(w[1])}  {r[2].ljust(w[2])}  {r[3]}" for r in rows]
    lines += ["", f"{len(entries)} check(s). `datacheck checks ID` shows what one needs and what makes a row fail."]
    return "\n".join(lines) + "\n"


def _one(e: CheckEntry) -> str:
    roles = ", ".join(r.replace("|", " or ") for r in e.roles) or "none"
    facts = ", ".join(_fact(f) for f in e.facts) or "none"
    built = f"yes ({e.producer})" if e.built else "no"
    lines = [f"{e.id}: {e.summary}", "",
             f"  level             {e.level}",
             f"  default severity  {e.severity} (change it with [policy] \"{e.id}\" = "
             f"{{ severity = \"{'warn' if e.severity == 'error' else 'error'}\" }})",
             f"  needs roles       {roles}",
             f"  needs facts       {facts}",
             f"  built             {built}"]
    if e.layouts:
        every = len(e.layouts) == len(LAYOUT_NAMES)
        lines.append(f"  layouts           {'every layout' if every else ', '.join(e.layouts)}"
                     + ("" if every else " (on a shard of another layout it does not apply)"))
    if e.note:
        lines.append(f"  note              {e.note}")
    if e.roles or e.facts:
        lines.append("  a missing role or an unset fact skips it, with the reason in the report's 'skipped'")
    if e.description:
        lines.append("")
        for para in e.description.split("\n\n"):
            lines += textwrap.wrap(" ".join(para.split()), width=100, initial_indent="  ", subsequent_indent="  ")
            lines.append("")
        lines.pop()
    return "\n".join(lines) + "\n"


def _by_layout(entries: list[CheckEntry], layout: str) -> str:
    """The entries that apply to ``layout`` as a table, then the IDs of those that do not."""
    apply = [e for e in entries if e.applies(layout)]
    other = [e for e in entries if not e.applies(layout)]
    out = f"layout {layout}: {LAYOUTS[layout]}\n\n" + _table(apply).replace(
        f"{len(apply)} check(s).", f"{len(apply)} check(s) apply to {layout}.")
    if other:
        out += f"\n{len(other)} check(s) do not apply to {layout} (not run on its shards, not listed as skipped):\n"
        out += "\n".join(textwrap.wrap(", ".join(e.id for e in other), width=100, initial_indent="  ",
                                        subsequent_indent="  ")) + "\n"
    return out


def _layouts() -> str:
    """Every layout name with what its rows hold (``--layout`` without a name)."""
    w = max(map(len, LAYOUT_NAMES))
    return ("\n".join(f"{name.ljust(w)}  {LAYOUTS[name]}" for name in LAYOUT_NAMES)
            + f"\n\n{len(LAYOUT_NAMES)} layout(s). `datacheck checks --layout NAME` lists the checks that apply to one; "
            "[dataset] layout = \"NAME\" states a dataset's.\n")


def run(args: argparse.Namespace) -> int:
    layout = getattr(args, "layout", None)
    if layout == "":  # --layout without a name: the layouts themselves
        if args.format == "json":
            write_envelope("datacheck.checks", {"layouts": [{"name": n, "rows": LAYOUTS[n]} for n in LAYOUT_NAMES]})
        else:
            sys.stdout.write(_layouts())
        return EXIT_OK
    if layout is not None and layout not in LAYOUTS:
        close = difflib.get_close_matches(layout, LAYOUT_NAMES, n=1)
        raise UsageError(f"--layout {layout!r}: unknown layout" + (f" (did you mean {close[0]!r}?)" if close else "")
                         + "; the layouts: " + ", ".join(LAYOUT_NAMES))
    entries = select_checks(args.check)
    if layout is not None:
        if args.format == "json":  # the checks that apply; each entry lists its layouts
            write_envelope("datacheck.checks", {"checks": [e.to_dict() for e in entries if e.applies(layout)]})
        else:
            sys.stdout.write(_by_layout(entries, layout))
        return EXIT_OK
    if args.format == "json":
        write_envelope("datacheck.checks", {"checks": [e.to_dict() for e in entries]})
    elif args.check is not None and len(entries) == 1 and entries[0].id == args.check:
        sys.stdout.write(_one(entries[0]))
    else:
        sys.stdout.write(_table(entries))
    return EXIT_OK
