"""Benchmark: ``datacheck trace`` streams a large generated log in bounded memory.

Writes a Megatron-style log of N iteration lines (default 4,000,000, about 1.2 GB) with one NaN near
the end (or, with ``--jsonl``, the same metrics as JSONL lines), traces it, and prints lines/s (wall
and CPU time) and the peak RSS growth; first for a log 4x smaller, so the ratio shows that time grows
with the log and memory does not. Run::

    PYTHONPATH=. python benchmarks/trace_large_log.py [N] [--jsonl]
"""
from __future__ import annotations

import json
import resource
import sys
import tempfile
import time
from pathlib import Path

from datacheck.trace import TraceOptions, open_log, parse_spike_rule, trace_logs

LINE = (" iteration {i:>8d}/ 9999999 | consumed samples: {s:>12d} | elapsed time per iteration (ms): 1376.1 | "
        "learning rate: 1.500E-04 | global batch size:     4 | lm loss: {loss} | loss scale: 16384.0 | "
        "grad norm: 1.999 | number of skipped iterations:   0 | number of nan iterations:   0 |\n")


def write(path: Path, n: int, jsonl: bool = False) -> None:
    with open(path, "w") as f:
        for i in range(1, n + 1):
            if jsonl:
                loss = float("nan") if i == n - 10 else 2 + 1 / i
                f.write(json.dumps({"step": i, "loss": loss, "grad_norm": 1.999, "lr": 1.5e-4, "loss_scale": 16384.0,
                                    "consumed_samples": 4 * i, "_timestamp": 1.7e9 + i}) + "\n")
            else:
                f.write(LINE.format(i=i, s=4 * i, loss="nan" if i == n - 10 else f"{2 + 1 / i:.6E}"))


def one(n: int, jsonl: bool) -> tuple[float, float, int]:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / ("train.jsonl" if jsonl else "train.log")
        write(p, n, jsonl)
        size = p.stat().st_size
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t, c = time.perf_counter(), time.process_time()
        res = trace_logs([open_log(str(p))], TraceOptions(spike=parse_spike_rule("olmo")))
        dt, dc = time.perf_counter() - t, time.process_time() - c
        assert res.first_bad is not None and res.first_bad["step"] == n - 10
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(f"{n} {'JSONL' if jsonl else 'Megatron'} lines, {size / 1e6:.0f} MB: {dt:.1f} s wall "
              f"({n / dt:,.0f} lines/s), {dc:.1f} s CPU ({n / dc:,.0f} lines/s), peak RSS {peak / 1024:.0f} MB "
              f"(growth {(peak - rss0) / 1024:.1f} MB)", flush=True)
        return dt, (peak - rss0) / 1024, size


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    jsonl = "--jsonl" in sys.argv
    n = int(args[0]) if args else 4_000_000
    small = one(n // 4, jsonl)
    big = one(n, jsonl)
    print(f"time ratio big/small {big[0] / small[0]:.2f} (lines ratio 4)")
