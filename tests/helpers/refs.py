"""Shared pieces of the check property and inline-frame tests: the two ways a test audits a small
frame (written as a parquet shard, or in memory with ``audit_frame``), their hypothesis settings,
the random-column strategies several check families draw from, the fine-tuning token ids, and the
accessors of an in-memory audit's failing rows and skipped reasons.

Kept as a plain module (not a conftest) so that test files import it by name: pyproject's pytest
``pythonpath`` puts tests/helpers/ on ``sys.path``.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import polars as pl
from checkhelp import shard_result
from conftest import examples
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from datacheck.engine.shard import audit_frame
from datacheck.model.config import config_from_dict
from datacheck.model.results import ShardResult

# ---------------------------------------------------------------- audited as a parquet shard
#: settings of the property tests that audit a frame written as one parquet shard
SHARD_SETTINGS = settings(max_examples=examples(int(os.environ.get("DATACHECK_HYPOTHESIS_EXAMPLES", "40"))), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def shard_failing(df: pl.DataFrame, config: dict) -> dict[str, set[int]]:
    """{"check:column": failing rows} of ``df`` audited as one parquet shard."""
    with tempfile.TemporaryDirectory() as tmp:
        res = shard_result(Path(tmp), df, config)
    assert res.readable, res.findings
    assert not [s for s in res.skipped if "could not run" in s.reason], res.skipped
    return {k: set(v) for k, v in res.failing_rows.items()}


def rows_where(values: list, pred) -> set[int]:
    return {i for i, v in enumerate(values) if pred(v)}


floats = st.one_of(st.none(), st.just(float("nan")), st.just(float("inf")), st.just(float("-inf")),
                   st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6),
                   st.sampled_from([65504.0, 65505.0, -70000.0, 32752.0, 32753.0, 1e300]))
small_ints = st.one_of(st.none(), st.integers(-3, 12), st.sampled_from([-100, -1, 255, 1000]))
int_lists = st.one_of(st.none(), st.lists(small_ints, max_size=6))
texts = st.one_of(st.none(), st.text(alphabet=" \t\n\u00a0\u3000\u200b\ufeffab\u00e9\u4e2d", max_size=5))
masks = st.one_of(st.none(), st.lists(st.one_of(st.sampled_from([0, 0, 1, 1, 2, -1, None])), max_size=6))


def n_rows(n_min: int = 1, n_max: int = 12):
    """The number of rows of a drawn frame."""
    return st.integers(n_min, n_max)


def ref_length(ids, mask) -> int | None:
    """Attended tokens (the sum of the mask's non-null values) when the row has a mask, else the
    list length; None when the row has no input_ids."""
    if ids is None:
        return None
    if mask is not None:
        return sum(m for m in mask if m is not None)
    return len(ids)


# ---------------------------------------------------------------- audited in memory (fine-tuning rules)
#: settings of the fine-tuning property tests, which audit a frame in memory
FRAME_SETTINGS = settings(max_examples=examples(int(os.environ.get("DATACHECK_HYPOTHESIS_EXAMPLES", "25"))), deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
IGN = -100
BOS, EOT, EOS, PAD = 1, 2, 3, 0
STOP = {EOT, EOS}


def frame_failing(df: pl.DataFrame, config: dict) -> dict[str, set[int]]:
    """{"check:column": failing rows} of ``df`` audited in memory; no check may fail with an error."""
    res = audit_frame(df, config_from_dict(config))
    assert res.readable, res.findings
    assert not [s for s in res.skipped if s.error], res.skipped
    return {k: set(v) for k, v in res.failing_rows.items()}


def run(df: dict | pl.DataFrame, cfg: dict | None = None) -> ShardResult:
    """``df`` audited in memory with the config ``cfg``."""
    return audit_frame(pl.DataFrame(df) if isinstance(df, dict) else df, config_from_dict(cfg or {}))


def rows(res: ShardResult, key: str) -> list[int]:
    """The failing rows of ``key`` ("check:column" or "check") in ``res``."""
    return res.failing_rows.get(key, [])


def skip(res: ShardResult, cid: str) -> str | None:
    """The reason check ``cid`` was skipped in ``res``, or None when it was not skipped."""
    return next((s.reason for s in res.skipped if s.check == cid), None)


# ---------------------------------------------------------------- sft rows (sft and the flat-buffer pass)
@st.composite
def ragged_sft_rows(draw):
    """Packed-looking rows (several EOT-closed turns) with null elements, null rows, rows whose
    lists differ in length and attention masks that are not binary (both left out of the position
    rules), padding on either side."""
    n = draw(st.integers(1, 8))
    side = draw(st.sampled_from(["right", "left"]))
    cols: dict[str, list] = {"input_ids": [], "labels": [], "assistant_mask": [], "attention_mask": []}
    for _ in range(n):
        if draw(st.integers(0, 9)) == 0:
            for c in cols:
                cols[c].append(None)
            continue
        real = draw(st.integers(0, 12))
        ids = draw(st.lists(st.sampled_from([BOS, EOT, EOS, 5, 6, 7, None]), min_size=real, max_size=real))
        lab = [draw(st.sampled_from([IGN, IGN, 6, None])) if x is None else draw(st.sampled_from([IGN, x, 6, None]))
               for x in ids]
        am = draw(st.lists(st.sampled_from([0, 1, 1, None]), min_size=real, max_size=real))
        att = [draw(st.sampled_from([1, 1, 1, 1, 2, None])) for _ in ids]
        pad = draw(st.integers(0, 3))
        if side == "right":
            ids, lab, am, att = ids + [PAD] * pad, lab + [IGN] * pad, am + [0] * pad, att + [0] * pad
        else:
            ids, lab, am, att = [PAD] * pad + ids, [IGN] * pad + lab, [0] * pad + am, [0] * pad + att
        if ids and draw(st.integers(0, 9)) == 0:
            lab = lab[:-1]  # lengths differ: length.mismatch, not a position rule
        for c, v in zip(cols, (ids, lab, am, att)):
            cols[c].append(v)
    return cols


def ref_flat_rules(cols: dict, i: int, shifted: bool, with_am: bool, with_att: bool) -> tuple[int, int]:
    """(prompt_supervised positions, eot_unsupervised positions) of row ``i``, plain Python."""
    ids, lab, am, att = (cols[c][i] for c in ("input_ids", "labels", "assistant_mask", "attention_mask"))
    if ids is None or len(lab) != len(ids):
        return 0, 0
    if with_att and any(x not in (0, 1) for x in att):
        return 0, 0

    def sup(k):
        j = k - 1 if shifted else k
        return j >= 0 and lab[j] is not None and lab[j] != IGN

    def asst(k):
        return k >= 0 and am[k] == 1

    prompt = eot = 0
    for k in range(len(ids)):
        real = att[k] == 1 if with_att else True
        stop = ids[k] in STOP
        if with_am and sup(k) and real and not asst(k) and not (stop and asst(k - 1)):
            prompt += 1
        closing = stop and ((asst(k) or asst(k - 1)) if with_am else (k >= 1 and sup(k - 1)))
        if closing and real and not sup(k):
            eot += 1
    return prompt, eot
