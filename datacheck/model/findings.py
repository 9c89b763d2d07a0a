"""Findings: what an audit found, as frozen values (never exceptions)."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import Any

from datacheck.model.constants import EXAMPLE_VALUE_MAX_CHARS

__all__ = ["Severity", "Example", "Finding", "Skipped", "show_value", "clip_message", "EXAMPLE_TEXT",
           "EXAMPLE_POSITION", "EXAMPLE_LENGTH"]

class Severity(str, enum.Enum):
    """Severity of a finding. ``error`` fails the gate by default, ``warn`` is reported, ``info`` is statistics."""

    INFO = "info"
    WARN = "warn"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return {"info": 0, "warn": 1, "error": 2}[self.value]


def show_value(value: Any, limit: int = EXAMPLE_VALUE_MAX_CHARS) -> str:
    """Render ``value`` for a report: ``repr`` for strings, JSON-like for lists, truncated to ``limit`` chars."""
    text = repr(value) if isinstance(value, (str, bytes)) else str(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


#: Field names of the struct a list check's example expression gives
#: (:func:`datacheck.checks._expr.first_bad`): the example text, the 0-based position of the first bad
#: element in the (flattened) list and the list length. The engine turns it into an :class:`Example`.
EXAMPLE_TEXT, EXAMPLE_POSITION, EXAMPLE_LENGTH = "__example", "__position", "__length"


@dataclass(frozen=True)
class Example:
    """One offending row: its 0-based ``row``, the ``value`` shown (truncated), and for line formats
    the 1-based ``line``; ``byte_offset`` (0-based, of the line's first byte) for decode findings.

    For list checks the engine also fills ``position`` (0-based index of the first bad element in
    the row's list, nested lists flattened in row order) and ``length`` (that list's length), so
    ``datacheck inspect`` need not parse ``value``. They are not part of the report JSON
    (:meth:`to_dict` leaves them out; a report read back has None) and do not take part in equality.
    """

    row: int | None
    value: str
    line: int | None = None
    byte_offset: int | None = None
    position: int | None = field(default=None, compare=False)
    length: int | None = field(default=None, compare=False)

    @classmethod
    def of(cls, row: int | None, shown: Any, line: int | None = None) -> "Example":
        """The example of ``row`` from its evaluated example expression: a plain value (shown with
        :func:`show_value`), or the :data:`EXAMPLE_TEXT` struct of a list check (its text shown,
        ``position`` and ``length`` kept as ints)."""
        if isinstance(shown, dict) and EXAMPLE_TEXT in shown:
            pos, n = shown.get(EXAMPLE_POSITION), shown.get(EXAMPLE_LENGTH)
            return cls(row=row, value=show_value(shown[EXAMPLE_TEXT]), line=line,
                       position=int(pos) if pos is not None else None, length=int(n) if n is not None else None)
        return cls(row=row, value=show_value(shown), line=line)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"row": self.row, "value": self.value}
        if self.line is not None:
            d["line"] = self.line
        if self.byte_offset is not None:
            d["byte_offset"] = self.byte_offset
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Example":
        return cls(row=d.get("row"), value=d["value"], line=d.get("line"), byte_offset=d.get("byte_offset"))


@dataclass(frozen=True)
class Finding:
    """A check that failed somewhere.

    Attributes:
        check: check ID from CHECKS.md, e.g. ``"tokens.out_of_vocab"``.
        severity: ``error`` | ``warn`` | ``info`` after the policy's severity override.
        message: one human sentence with the numbers that matter.
        column: the column concerned, or None.
        count: rows (or items, as the check's message says) that fail.
        ratio: ``count / rows`` of the shard (or dataset), or None when not row-based.
        rows: 0-based example row indices (at most ``max_examples``).
        lines: 1-based line numbers of those rows, for line formats (JSONL, CSV).
        examples: offending values of the example rows.
        shards: for dataset-level findings, the shards concerned (relative paths).
        details: check-specific facts (e.g. distinct sentinel values and their counts).
        fails_policy: whether this finding fails the gate under the configured policy.
        rows_truncated: True when more rows (or lines) fail than ``rows``/``lines``/``examples``
            list: they hold the first ``[report] max_examples`` only. Written to JSON only when
            True (an absent key means the lists are complete).
    """

    check: str
    severity: str
    message: str
    column: str | None = None
    count: int = 0
    ratio: float | None = None
    rows: tuple[int, ...] = ()
    lines: tuple[int, ...] = ()
    examples: tuple[Example, ...] = ()
    shards: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    fails_policy: bool = False
    rows_truncated: bool = False

    def with_(self, **kw: Any) -> "Finding":
        return replace(self, **kw)

    def to_dict(self, dataset_level: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {
            "check": self.check,
            "severity": self.severity,
            "message": self.message,
            "column": self.column,
            "count": self.count,
            "ratio": self.ratio,
            "rows": list(self.rows),
            "lines": list(self.lines),
            "examples": [e.to_dict() for e in self.examples],
            "details": self.details,
            "fails_policy": self.fails_policy,
        }
        if dataset_level:
            d["shards"] = list(self.shards)
        if self.rows_truncated:  # written only when set: complete lists keep their reports' bytes
            d["rows_truncated"] = True
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Finding":
        return cls(
            check=d["check"],
            severity=d["severity"],
            message=d["message"],
            column=d.get("column"),
            count=d.get("count", 0),
            ratio=d.get("ratio"),
            rows=tuple(d.get("rows") or ()),
            lines=tuple(d.get("lines") or ()),
            examples=tuple(Example.from_dict(e) for e in d.get("examples") or ()),
            shards=tuple(d.get("shards") or ()),
            details=d.get("details") or {},
            fails_policy=bool(d.get("fails_policy", False)),
            rows_truncated=bool(d.get("rows_truncated", False)),
        )


@dataclass(frozen=True)
class Skipped:
    """A check that could not run, and why (e.g. ``[tokens] vocab_size`` not set).

    Attributes:
        check: check ID (or, when a whole check function raised, its family name).
        reason: one sentence: the missing fact, or the exception's type and first line.
        error: True when datacheck itself failed (the check's query or function raised), as opposed
            to a fact the data or config lacks. A check error fails the report (status ``fail``,
            CLI exit 3) unless the user allows check errors.
    """

    check: str
    reason: str
    error: bool = False

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"check": self.check, "reason": self.reason}
        if self.error:  # written only when set: reports without check errors keep their bytes
            d["error"] = True
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Skipped":
        return cls(check=d["check"], reason=d["reason"], error=bool(d.get("error", False)))


def clip_message(msg: str, limit: int) -> str:
    """``msg`` when it has at most ``limit`` characters; else cut to about ``limit``, marked ``…``. A
    message ends with what to do about the finding, so its last sentence (after the last ". ") is kept
    whole after the cut when it is at most half of ``limit`` (``head … last sentence``); a longer last
    sentence is cut with the rest. The one cut of a finding's message wherever a line shows part of
    it (the text report, ``clean``'s left-in-place lines, ``diff``'s new policy failures)."""
    if len(msg) <= limit:
        return msg
    k = msg.rfind(". ")
    tail = msg[k + 2:] if k >= 0 else ""
    if tail and len(tail) <= limit // 2:
        head = msg[: max(0, limit - len(tail) - 3)].rstrip()
        if len(head) < k:
            return f"{head} … {tail}"
    return msg[:limit] + "…"
