"""Helpers of the trace tests: write a JSONL metrics log, trace it, pick findings."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from datacheck.model.config import TraceSection
from datacheck.trace import TraceOptions, open_log, parse_spike_rule, trace_logs
from datacheck.trace.run import TraceResult
from datacheck.trace.verdict import build_verdict


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    """One JSON object per row; non-finite floats written as the strings "nan"/"inf"."""
    def enc(v: Any) -> Any:
        return str(v) if isinstance(v, float) and not math.isfinite(v) else v
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({k: enc(v) for k, v in r.items()}) + "\n" for r in rows))
    return path


def trace(*paths: Path | str, spike: str = "robust", limits: TraceSection | None = None,
          grad_accum: int | None = None, world_size: int | None = None) -> TraceResult:
    opts = TraceOptions(spike=parse_spike_rule(spike), world_size=world_size, limits=limits or TraceSection(),
                        grad_accum=grad_accum)
    return trace_logs([open_log(str(p)) for p in paths], opts)


def by_check(res: TraceResult) -> dict[str, Any]:
    return {f.check: f for f in res.findings}


def loud(res: TraceResult) -> list[tuple[str, str, Any]]:
    """(check, severity, step) of every finding at warn or above."""
    return [(f.check, f.severity, f.details.get("step")) for f in res.findings if f.severity in ("warn", "error")]


def verdict(res: TraceResult, data: dict[str, Any] | None = None) -> dict[str, Any]:
    return build_verdict(res, data)
