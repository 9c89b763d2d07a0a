"""The check catalog as users see it (``datacheck checks [ID]``): every check ID with its level,
default severity and one-line summary, and for one ID what it needs to run (roles, config facts)
and whether this version builds it, read from the registry that runs the checks, so the listing
cannot disagree with an audit; the ``log.*`` IDs of ``datacheck trace`` are read from its rule
registry (:data:`datacheck.trace.rules.LOG_RULES`), the ``ckpt.*`` and ``order.*`` IDs from
:data:`datacheck.resume.RESUME_IDS`. It spans the audit's checks and trace's log rules,
so it sits at the ``api`` layer, above both.

The catalog itself is :mod:`datacheck.model.catalog` (mirrored from CHECKS.md, the project's
written contract that users of an installed package do not have).
"""
from __future__ import annotations

import difflib
import inspect
import re
from dataclasses import dataclass
from typing import Any

from datacheck.checks import all as _families  # noqa: F401 - every family registers its checks
from datacheck.checks.registry import CHECKS, READER_IDS, UNREADABLE
from datacheck.model import catalog
from datacheck.model.errors import UsageError
from datacheck.model.layouts import LAYOUT_NAMES
from datacheck.resume import RESUME_IDS, RESUME_NOTES
from datacheck.trace.rules import LOG_RULES

__all__ = ["CheckEntry", "list_checks", "describe_check", "select_checks"]


@dataclass(frozen=True)
class CheckEntry:
    """One check ID as ``datacheck checks`` shows it.

    Attributes:
        id: the check ID (``family.name``).
        family: the part before the first dot (``tokens``).
        level: ``row`` | ``shard`` | ``dataset`` (data checks) or ``step`` | ``run`` (``datacheck trace``).
        severity: the default severity (``error`` | ``warn`` | ``info``); ``[policy]`` can change it.
        summary: one line: what fails.
        built: whether this version produces it (False: listed in the catalog, not yet built).
        producer: the module that produces it (``datacheck.checks.tokens``), or None when not built.
        roles: the column roles it needs, e.g. ``("input_ids",)``; ``"a|b"`` means a or b.
        facts: the config facts it needs, as ``section.key`` (``tokens.vocab_size``); an unset fact
            skips the check with the reason in the report.
        note: how it runs when it is not a registered data check (reader, trace, not built), or "".
        description: the producer's documentation (what makes a row fail, thresholds and their
            source, when it is skipped), or "".
        layouts: the layouts (:data:`datacheck.model.layouts.LAYOUTS`) a registered data check
            applies to, in that table's order; empty for an ID that is no registered data check.
    """

    id: str
    family: str
    level: str
    severity: str
    summary: str
    built: bool
    producer: str | None
    roles: tuple[str, ...]
    facts: tuple[str, ...]
    note: str
    description: str
    layouts: tuple[str, ...] = ()

    def applies(self, layout: str) -> bool:
        """Whether the check runs on a shard of ``layout`` (an ID that is no registered data check,
        such as a reader's ``decode.*`` or trace's ``log.*``, is not judged by layout: True)."""
        return not self.layouts or layout in self.layouts

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "family": self.family, "level": self.level, "severity": self.severity,
                "summary": self.summary, "built": self.built, "producer": self.producer,
                "roles": list(self.roles), "facts": list(self.facts), "note": self.note,
                "description": self.description, "layouts": list(self.layouts)}


def _doc(obj: Any) -> str:
    """A docstring as plain text: reST roles and double backticks reduced to single backticks."""
    text = inspect.getdoc(obj) or ""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`").strip()


def _strip_id(cid: str, doc: str) -> str:
    """``doc`` without a leading "`cid`." or "`cid`: " (the listing already names the check)."""
    for head in (f"`{cid}`.", f"`{cid}`:"):
        if doc.startswith(head):
            return doc[len(head):].lstrip()
    return doc


def _entry(cid: str) -> CheckEntry:
    info = catalog.info(cid)
    roles: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()
    producer: str | None = None
    note = ""
    docs: list[str] = []
    layouts: tuple[str, ...] = ()
    spec = CHECKS.get(cid)
    if spec is not None:
        layouts = tuple(n for n in LAYOUT_NAMES if n in spec.layouts)
        producer = spec.module
        roles = spec.roles
        facts = tuple(dict.fromkeys(spec.facts + spec.dataset_facts))
        docs = [d for d in (_doc(spec.shard) if spec.shard else "", _doc(spec.dataset) if spec.dataset else "") if d]
    elif cid in UNREADABLE:
        producer = UNREADABLE[cid].__module__
        note = "reported for a shard that cannot be opened or parsed"
        docs = [_doc(UNREADABLE[cid])]
    elif cid in READER_IDS:
        producer = READER_IDS[cid]
        note = "reported by the shard reader while it reads JSONL/CSV records"
    elif cid in LOG_RULES:
        producer = LOG_RULES[cid].__module__
        note = "a training-log check: run by `datacheck trace LOG...`, not by audit"
        docs = [_doc(LOG_RULES[cid])]
    elif cid in RESUME_IDS:
        producer = RESUME_IDS[cid]
        note = RESUME_NOTES[info.family]
    return CheckEntry(id=cid, family=info.family, level=info.level, severity=info.severity, summary=info.summary,
                      built=producer is not None, producer=producer, roles=tuple(roles), facts=facts, note=note,
                      description="\n\n".join(_strip_id(cid, d) for d in docs if d).strip(), layouts=layouts)


def list_checks() -> list[CheckEntry]:
    """Every check ID of the catalog, in catalog order (families together)."""
    return [_entry(cid) for cid in catalog.CATALOG]


def describe_check(check_id: str) -> CheckEntry:
    """The entry of one check ID.

    Raises:
        UsageError: ``check_id`` is not in the catalog (the message suggests the closest ID).
    """
    return select_checks(check_id)[0]


def select_checks(query: str | None) -> list[CheckEntry]:
    """The entries ``datacheck checks [QUERY]`` shows: all for None, one for a check ID, a family's
    for a family name (``tokens``, ``dup``).

    Raises:
        UsageError: ``query`` is neither a check ID nor a family (with "did you mean" when one is close).
    """
    entries = list_checks()
    if query is None:
        return entries
    one = [e for e in entries if e.id == query]
    if one:
        return one
    family = [e for e in entries if e.family == query]
    if family:
        return family
    names = [e.id for e in entries] + sorted({e.family for e in entries})
    close = ([e.id for e in entries if e.id.split(".")[-1] == query.split(".")[-1]]
             or difflib.get_close_matches(query, names, n=1, cutoff=0.75))
    hint = f"; did you mean {close[0]!r}?" if close else "; run `datacheck checks` for the list"
    raise UsageError(f"unknown check ID or family {query!r}{hint}")
