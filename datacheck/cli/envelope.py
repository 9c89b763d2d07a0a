"""The one JSON envelope of every ``--format json`` output except the audit report's.

``datacheck audit``, ``merge`` and ``report`` print the versioned report itself (its own
``report_version`` and JSON Schema); every other verb's JSON (``diff``, ``inspect``, ``clean``,
``index verify``, ``checks``, ...) goes out as::

    {"kind": "datacheck.<verb>", "format_version": 1, "datacheck_version": "<x.y.z>", "result": {...}}

with sorted keys and two-space indentation. ``kind`` names what ``result`` holds; ``format_version``
changes when a verb's ``result`` changes incompatibly (a reader refuses a newer one);
``schemas/envelope.schema.json`` is its JSON Schema.
"""
from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from datacheck._version import __version__

__all__ = ["ENVELOPE_FORMAT_VERSION", "KINDS", "envelope", "write_envelope"]

#: Version of the envelope and of the ``result`` layouts of the verbs below.
ENVELOPE_FORMAT_VERSION = 1
#: Every ``kind`` the CLI emits (one per verb with an enveloped ``--format json``).
KINDS = ("datacheck.diff", "datacheck.inspect", "datacheck.clean", "datacheck.index.verify", "datacheck.plan",
         "datacheck.trace", "datacheck.checks", "datacheck.checkpoint", "datacheck.order.verify")


def envelope(kind: str, result: dict[str, Any]) -> dict[str, Any]:
    """Wrap a verb's JSON ``result`` (a dict) in the versioned envelope.

    Raises:
        ValueError: ``kind`` is not one of :data:`KINDS` (a bug: a new verb must be listed there), or
            ``result`` is not a dict.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown envelope kind {kind!r}; expected one of {KINDS}")
    if not isinstance(result, dict):
        raise ValueError(f"the {kind} result must be a JSON object, got {type(result).__name__}")
    return {"kind": kind, "format_version": ENVELOPE_FORMAT_VERSION, "datacheck_version": __version__,
            "result": result}


def write_envelope(kind: str, result: dict[str, Any], stream: TextIO | None = None) -> None:
    """Write :func:`envelope` as JSON (sorted keys, indent 2, UTF-8 text as is; values JSON cannot
    hold, e.g. dates, as their ``str``) and a newline to ``stream`` (default ``sys.stdout``)."""
    out = sys.stdout if stream is None else stream
    out.write(json.dumps(envelope(kind, result), sort_keys=True, indent=2, ensure_ascii=False, default=str) + "\n")
