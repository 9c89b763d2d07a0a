"""Benchmark: MinHash signatures for ``dup.near_duplicate``, datacheck's vectorized numpy
implementation (:func:`datacheck.checks.dup.near.signatures`) against ``datasketch`` (issue 14 item 5).

Generates (seeded) ROWS documents of about 400 characters (``--dupes`` of them near-copies of
others with a few character edits) and computes, in one run:

1. ``datasketch``: one ``MinHash(num_perm=128, seed=1, scheme="affine32")`` per document, fed the
   same 32-bit shingle hashes (character 5-grams) with ``update_batch`` (the shingle hashing itself
   is datacheck's, vectorized, and not timed here, so only the MinHash step is compared);
2. ``numpy``: datacheck's vectorized signatures of all documents at once (shingle hashing included).

It checks that both give identical signatures for every document (exit 1 otherwise), then times
the dataset-stage LSH clustering on the signatures. ``datasketch`` is optional (``pip install
datasketch``; in the dev extra).

Usage: python benchmarks/bench_neardup.py [--rows 20000] [--dupes 0.05]
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from datacheck.checks.dup.near import NUM_PERM, clusters, shingle_hashes, signatures  # noqa: E402


def documents(rows: int, dupes: float, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(5000)]
    docs = []
    for i in range(rows):
        if docs and rng.random() < dupes:
            v = list(rng.choice(docs))
            for _ in range(rng.randint(1, 6)):
                v[rng.randrange(len(v))] = rng.choice("abcdefghijklmnopqrstuvwxyz ")
            docs.append("".join(v))
        else:
            text = []
            while sum(len(w) + 1 for w in text) < 400:
                text.append(rng.choice(words))
            docs.append(" ".join(text))
    return docs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--dupes", type=float, default=0.05)
    args = ap.parse_args()
    docs = documents(args.rows, args.dupes)
    values = np.frombuffer("".join(docs).encode("utf-32-le"), dtype=np.uint32)
    lengths = np.array([len(d) for d in docs], dtype=np.int64)
    print(f"{args.rows} documents, {values.size / 1e6:.1f}M characters; load average {os.getloadavg()[0]:.1f} "
          f"on {len(os.sched_getaffinity(0))} cores")

    t0 = time.perf_counter()
    sig, _ = signatures(values, lengths)
    t_np = time.perf_counter() - t0
    print(f"numpy (datacheck, shingles included): {t_np:7.2f} s  ({args.rows / t_np:,.0f} docs/s)")

    try:
        from datasketch import MinHash
    except ImportError:
        print("datasketch is not installed: pip install datasketch (only numpy timed)")
        return 0
    hv, counts = shingle_hashes(values, lengths)
    bounds = np.concatenate([[0], np.cumsum(counts)])
    per_doc = [hv[bounds[i]:bounds[i + 1]].tolist() for i in range(len(docs))]
    proto = MinHash(num_perm=NUM_PERM, seed=1, scheme="affine32", hashfunc=lambda h: h)
    t0 = time.perf_counter()
    out = np.empty_like(sig)
    for i, hs in enumerate(per_doc):
        m = MinHash(num_perm=NUM_PERM, seed=1, scheme="affine32", hashfunc=lambda h: h,
                    permutations=proto.permutations)
        m.update_batch(hs)
        out[i] = m.hashvalues
    t_ds = time.perf_counter() - t0
    print(f"datasketch (MinHash step only):       {t_ds:7.2f} s  ({args.rows / t_ds:,.0f} docs/s)")
    same = bool(np.array_equal(out, sig))
    print(f"signatures identical: {same}; numpy is {t_ds / t_np:.1f}x faster")

    t0 = time.perf_counter()
    rows, lab, _ = clusters(sig, np.ones(len(docs), dtype=bool), 0.8)
    t_lsh = time.perf_counter() - t0
    print(f"LSH clustering at 0.8 (14 x 9 bands): {t_lsh:7.2f} s; {rows.size} rows in "
          f"{np.unique(lab).size} clusters")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
