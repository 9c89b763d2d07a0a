"""Benchmark: ``datacheck trace`` streams a large generated log in bounded memory.

Writes a Megatron-style log of N iteration lines (default 4,000,000, about 1 GB) with one NaN near the
end, traces it, and prints lines/s and the peak RSS growth; then the same for a log 4x smaller, so the
ratio shows memory does not grow with the log. Run::

    PYTHONPATH=. python benchmarks/trace_large_log.py [N]
"""
from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

from datacheck.trace import TraceOptions, open_log, parse_spike_rule, trace_logs

LINE = (" iteration {i:>8d}/ 9999999 | consumed samples: {s:>12d} | elapsed time per iteration (ms): 1376.1 | "
        "learning rate: 1.500E-04 | global batch size:     4 | lm loss: {loss} | loss scale: 16384.0 | "
        "grad norm: 1.999 | number of skipped iterations:   0 | number of nan iterations:   0 |\n")


def write(path: Path, n: int) -> None:
    with open(path, "w") as f:
        for i in range(1, n + 1):
            f.write(LINE.format(i=i, s=4 * i, loss="nan" if i == n - 10 else f"{2 + 1 / i:.6E}"))


def one(n: int) -> tuple[float, float, int]:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "train.log"
        write(p, n)
        size = p.stat().st_size
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t = time.perf_counter()
        res = trace_logs([open_log(str(p))], TraceOptions(spike=parse_spike_rule("olmo")))
        dt = time.perf_counter() - t
        assert res.first_bad is not None and res.first_bad["step"] == n - 10
        grow = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
        print(f"{n} lines, {size / 1e6:.0f} MB: {dt:.1f} s, {n / dt:,.0f} lines/s, peak RSS growth {grow:.1f} MB")
        return dt, grow, size


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 4_000_000
    small = one(n // 4)
    big = one(n)
    print(f"time ratio big/small {big[0] / small[0]:.2f} (lines ratio 4)")
