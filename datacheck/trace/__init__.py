"""``datacheck trace``: from a training log to the first bad step, its rows and their findings.

- :mod:`~datacheck.trace.readers`: one module per log format, all into :class:`~datacheck.trace.record.StepRecord`;
- :mod:`~datacheck.trace.rules`: one rule per ``log.*`` check ID (CHECKS.md), run in one streaming pass
  (:mod:`~datacheck.trace.run`);
- :mod:`~datacheck.trace.data`: step -> rows (a ledger, read by :func:`datacheck.io.ledger.read_ledger`,
  the one ledger reader, which needs no torch), those rows audited with every check, exported;
- :mod:`~datacheck.model.identity`: the data identity a launch script logs (``log_data_identity``).

This package sits at the ``tools`` layer: it imports model, io, engine and ``datacheck.torch``'s
ledger (no torch at import).
"""
from __future__ import annotations

from datacheck.model.identity import log_data_identity
from datacheck.trace.readers import open_log
from datacheck.trace.rules import LOG_RULES, TraceOptions
from datacheck.trace.run import TraceResult, trace_logs
from datacheck.trace.spikes import parse_spike_rule

__all__ = ["LOG_RULES", "TraceOptions", "TraceResult", "log_data_identity", "open_log", "parse_spike_rule",
           "trace_logs"]
