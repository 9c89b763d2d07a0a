"""Benchmark: `datacheck.audit` with the sft and packing rules on a packed SFT shard vs
`polars.read_parquet` of it (issue 13: goal audit/read <= 1.3).

Generates (once, seeded) a packed chat-SFT shard of ROWS x SEQ_LEN tokens (default 1,000 x 4,096 =
4.1M tokens, about a minute in all; the issue's figure is ``--rows 12207``, 50.0M tokens). Each row
packs whole ChatML conversations back to back, as TRL/axolotl packing does:

    <|im_start|>(1) user \\n (198) USER... <|im_end|>(2) \\n <|im_start|> assistant \\n RESPONSE... <|im_end|> \\n

(SmolLM ids: 1, 2, 198, ``assistant`` = 520 9531), each document between 13 and 1,024 tokens, the
last one ending exactly at SEQ_LEN. Columns: ``input_ids`` list<int32>, ``labels`` list<int64>
(unshifted, Hugging Face convention: the response tokens and the closing ``<|im_end|>`` supervised,
everything else -100), ``assistant_mask`` list<int8> (1 on the same tokens), ``position_ids``
list<int32> (0 at each document start) and ``seq_lens`` list<int32> (the document lengths). The data
is clean: the audit is expected to report no finding from these rules.

Measured in the same run, each task in a fresh subprocess (peak RSS per task), medians of --repeat:

- read:  ``polars.read_parquet(path)`` (all columns);
- audit: ``datacheck.audit(path, config)`` with the facts that switch on every ``sft.*`` and
  ``packing.*`` rule (and the token rules that apply: vocab, positions, label shift, periodic runs).

With ``--baseline-src DIR`` (a checkout of an earlier datacheck, e.g. ``git worktree add /tmp/base
<commit>``), the audit is also run from that source tree, interleaved in the same run, and the
ratio new/old is printed ("before and after, same run"); the load average is printed with it.

Usage: python benchmarks/bench_sft.py [--rows 1000] [--seq-len 4096] [--repeat 3] [--baseline-src DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

WORK = Path(__file__).resolve().parent / "_work"
BOS, EOT, NL = 1, 2, 198
USER = [BOS, 4093, NL]                 # <|im_start|>user\n
ASSISTANT = [BOS, 520, 9531, NL]       # <|im_start|>assistant\n
VOCAB = 49152


def config(seq_len: int) -> dict:
    return {
        "tokens": {"vocab_size": VOCAB, "eos_token_id": 0, "bos_token_id": BOS, "eot_token_ids": [EOT],
                   "max_seq_len": seq_len, "max_position_embeddings": 8192},
        "labels": {"ignore_index": -100, "shifted": False},
        "sft": {"response_template_ids": ASSISTANT},
    }


def _doc(rng, length: int):
    """One conversation of exactly ``length`` (>= 13) tokens: ids, labels, assistant mask."""
    import numpy as np

    body = length - len(USER) - 2 - len(ASSISTANT) - 2
    u = int(rng.integers(1, body))  # user tokens; the rest is the response
    r = body - u
    user = rng.integers(3, VOCAB, size=u, dtype=np.int32)
    resp = rng.integers(3, VOCAB, size=r, dtype=np.int32)
    ids = np.concatenate([USER, user, [EOT, NL], ASSISTANT, resp, [EOT, NL]]).astype(np.int32)
    sup = np.zeros(length, dtype=bool)
    start = len(USER) + u + 2 + len(ASSISTANT)
    sup[start:start + r + 1] = True  # the response and its closing <|im_end|>
    labels = np.where(sup, ids, -100).astype(np.int64)
    return ids, labels, sup.astype(np.int8)


def make_shard(rows: int, seq_len: int, seed: int = 0) -> Path:
    import numpy as np
    import polars as pl

    path = WORK / f"packed_sft_{rows}x{seq_len}.parquet"
    if path.exists():
        return path
    WORK.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    ids = np.empty((rows, seq_len), dtype=np.int32)
    labels = np.empty((rows, seq_len), dtype=np.int64)
    amask = np.empty((rows, seq_len), dtype=np.int8)
    pos = np.empty((rows, seq_len), dtype=np.int32)
    seq_lens: list[list[int]] = []
    for i in range(rows):
        lens: list[int] = []
        left = seq_len
        while left:
            n = int(rng.integers(13, 1025))
            if left - n < 13:  # the last document fills the row exactly
                n = left
            lens.append(n)
            left -= n
        at = 0
        for n in lens:
            a, b, c = _doc(rng, n)
            ids[i, at:at + n], labels[i, at:at + n], amask[i, at:at + n] = a, b, c
            pos[i, at:at + n] = np.arange(n, dtype=np.int32)
            at += n
        seq_lens.append(lens)

    def lst(a, dt):
        return pl.Series(a.ravel()).reshape((rows, seq_len)).cast(pl.List(dt))

    df = pl.DataFrame({"input_ids": lst(ids, pl.Int32), "labels": lst(labels, pl.Int64),
                       "assistant_mask": lst(amask, pl.Int8), "position_ids": lst(pos, pl.Int32),
                       "seq_lens": pl.Series(seq_lens, dtype=pl.List(pl.Int32))})
    tmp = path.with_suffix(".tmp")
    df.write_parquet(tmp)
    tmp.replace(path)
    return path


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child(task: str, path: str, seq_len: int) -> None:
    import polars as pl

    if task == "read":
        c0, t0 = _cpu(), time.perf_counter()
        df = pl.read_parquet(path)
        dt, cpu = time.perf_counter() - t0, _cpu() - c0
        extra: dict = {"rows": df.height}
    else:
        try:  # the process settings of the CLI (pyarrow's pool, glibc's reuse of freed memory), where they exist
            from datacheck.cli.main import choose_arrow_pool, keep_freed_memory
            choose_arrow_pool()
            keep_freed_memory()
        except ImportError:
            pass
        import datacheck
        import datacheck.checks.all  # noqa: F401 - importing the check modules is not audit work
        c0, t0 = _cpu(), time.perf_counter()
        rep = datacheck.audit(path, config(seq_len), workers=1)
        dt, cpu = time.perf_counter() - t0, _cpu() - c0
        ran = {f.check for f in rep.findings}
        skipped = sorted({s["check"] if isinstance(s, dict) else s.check for s in rep.skipped
                          if str(s["check"] if isinstance(s, dict) else s.check).startswith(("sft.", "packing."))})
        extra = {"rows": rep.summary["rows"], "findings": sorted(ran), "skipped_sft_packing": skipped}
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB on Linux
    print(json.dumps({"seconds": dt, "cpu_seconds": cpu, "peak_rss_mib": rss, **extra}))


def run(task: str, path: Path, seq_len: int, src: str | None = None) -> dict:
    env = None
    if src is not None:  # the audit of another source tree (PYTHONPATH first on sys.path)
        env = {**os.environ, "PYTHONPATH": src}
    out = subprocess.run([sys.executable, __file__, "--child", task, str(path), str(seq_len)],
                         capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--seq-len", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline-src", default=None, help="also audit with this source tree (before/after, same run)")
    ap.add_argument("--child", nargs=3, metavar=("TASK", "PATH", "SEQ_LEN"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child[0], a.child[1], int(a.child[2]))
        return
    path = make_shard(a.rows, a.seq_len)
    tokens = a.rows * a.seq_len
    print(f"shard {path.name}: {a.rows} rows, {tokens / 1e6:.1f}M tokens, {path.stat().st_size / 2**20:.0f} MiB")
    reads, audits, base = [], [], []
    load0 = os.getloadavg()[0]
    for _ in range(a.repeat):  # interleaved so that both see the same machine state
        reads.append(run("read", path, a.seq_len))
        audits.append(run("audit", path, a.seq_len))
        if a.baseline_src:
            base.append(run("audit", path, a.seq_len, a.baseline_src))
    r = statistics.median(x["seconds"] for x in reads)
    au = statistics.median(x["seconds"] for x in audits)
    rc = statistics.median(x["cpu_seconds"] for x in reads)
    ac = statistics.median(x["cpu_seconds"] for x in audits)
    print(f"polars.read_parquet: {r:.2f} s (runs {[round(x['seconds'], 2) for x in reads]}), "
          f"peak RSS {max(x['peak_rss_mib'] for x in reads):.0f} MiB")
    print(f"datacheck.audit:     {au:.2f} s (runs {[round(x['seconds'], 2) for x in audits]}), "
          f"peak RSS {max(x['peak_rss_mib'] for x in audits):.0f} MiB; findings {audits[0]['findings']}; "
          f"sft/packing skipped {audits[0]['skipped_sft_packing']}")
    print(f"ratio audit/read: {au / r:.2f} wall (goal <= 1.3); CPU seconds {ac:.2f} / {rc:.2f} = {ac / rc:.2f}")
    if base:
        b = statistics.median(x["seconds"] for x in base)
        bc = statistics.median(x["cpu_seconds"] for x in base)
        print(f"baseline audit ({a.baseline_src}): {b:.2f} s (runs {[round(x['seconds'], 2) for x in base]}), "
              f"CPU {bc:.2f} s, peak RSS {max(x['peak_rss_mib'] for x in base):.0f} MiB; findings {base[0]['findings']}")
        print(f"baseline audit/read: {b / r:.2f} wall, {bc / rc:.2f} CPU; after/before: {au / b:.2f} wall, {ac / bc:.2f} CPU")
    print(f"load average (1 min) at the start / end: {load0:.1f} / {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
