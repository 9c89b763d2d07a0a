"""``datacheck trace``: from a training log to the first bad step, its rows and their findings.

- :mod:`~datacheck.trace.readers`: one module per log format, all into :class:`~datacheck.trace.record.StepRecord`;
- :mod:`~datacheck.trace.rules`: one rule per ``log.*`` check ID (CHECKS.md), run in one streaming pass
  (:mod:`~datacheck.trace.run`): the numeric and resume rules there, the training-dynamics rules in
  :mod:`~datacheck.trace.dynamics`, the metric rules in :mod:`~datacheck.trace.metricrules` (imported
  here, so their IDs are registered whenever the package is);
- :mod:`~datacheck.trace.verdict`: each anomaly's class, evidence and next experiment, and the four
  answers the text output starts with;
- :mod:`~datacheck.trace.steps`: how a log numbers its steps (each reader names its trainer's count),
  and the join of a log step to the 0-based optimizer step of the plan and the ledger;
- :mod:`~datacheck.trace.data`: step -> rows (a ledger, read by :func:`datacheck.io.ledger.read_ledger`,
  the one ledger reader, which needs no torch, or the batch plan of :mod:`datacheck.execute.plan`),
  those rows audited with every check, exported; :func:`~datacheck.trace.data.trace_data` is the
  whole data leg over one dataset index (each shard discovered, hashed and opened once);
- the data identity a launch script logs is :mod:`datacheck.model.identity` (``log_data_identity``).

This package sits at the ``tools`` layer beside ``tools``, ``render`` and ``torch`` and imports none
of them: model, io, checks, engine and execute only.
"""
from __future__ import annotations

from datacheck.trace import dynamics, metricrules  # noqa: F401  (registers their log.* rules)
from datacheck.trace.readers import open_log
from datacheck.trace.rules import TraceOptions
from datacheck.trace.run import trace_logs
from datacheck.trace.spikes import parse_spike_rule

__all__ = ["TraceOptions", "open_log", "parse_spike_rule", "trace_logs"]
