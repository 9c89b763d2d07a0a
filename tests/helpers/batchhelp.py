"""What the batched-audit tests share: ``batch_rows`` (``$DATACHECK_BATCH_ROWS`` set for a block) and
``_same_result`` (two ShardResults equal: findings, skipped, failing rows, stats, payloads; the pooled
``targets.*`` mean/std within a relative 1e-9)."""
from __future__ import annotations

import math
import os
from contextlib import contextmanager

import numpy as np
import polars as pl

from datacheck.model.constants import ENV_BATCH_ROWS


@contextmanager
def batch_rows(n: int | None):
    old = os.environ.get(ENV_BATCH_ROWS)
    if n is None:
        os.environ.pop(ENV_BATCH_ROWS, None)
    else:
        os.environ[ENV_BATCH_ROWS] = str(n)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(ENV_BATCH_ROWS, None)
        else:
            os.environ[ENV_BATCH_ROWS] = old


def _same_payload(a: object, b: object) -> None:
    if isinstance(a, pl.DataFrame):
        assert isinstance(b, pl.DataFrame) and a.equals(b)
    elif isinstance(a, pl.Series):
        assert isinstance(b, pl.Series) and a.equals(b)
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys()
        for k in a:
            _same_payload(a[k], b[k])
    elif isinstance(a, np.ndarray):
        assert np.array_equal(a, b)  # type: ignore[arg-type]
    else:
        assert a == b


def _same_result(one, many) -> None:
    assert many.rows == one.rows
    assert [f.to_dict() for f in many.findings] == [f.to_dict() for f in one.findings]
    assert many.skipped == one.skipped
    assert many.failing_rows == one.failing_rows
    s1, s2 = dict(one.stats), dict(many.stats)
    for k in [k for k in s1 if k.startswith("targets.")]:  # pooled mean/std: floating point, rel 1e-9
        a, b = s1.pop(k), s2.pop(k)
        assert a["count"] == b["count"]
        for f in ("mean", "std"):
            assert (a[f] is None) == (b[f] is None)
            if a[f] is not None:
                assert math.isclose(a[f], b[f], rel_tol=1e-9, abs_tol=1e-9), (k, f, a[f], b[f])
    assert s2 == s1
    assert one.payload.keys() == many.payload.keys()
    for k in one.payload:
        _same_payload(one.payload[k], many.payload[k])


class IdRows:
    """A map-style dataset of ``n`` rows for a torch ``DataLoader``: row ``g`` is its global id
    (the trainer's ConcatDataset of the shards, reduced to what a sampler test compares)."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return i
