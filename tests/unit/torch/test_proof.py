"""Proof: each check that predicts a numeric failure, on the offending rows, breaks one real training
step of a tiny torch model (NaN/inf loss or the index error); on the cleaned copy the loss is finite.
The audit (``audit_frame``) flags exactly the offending frame, and BatchGuard catches the batch."""
from __future__ import annotations

import math

import polars as pl
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import datacheck  # noqa: E402
from datacheck.engine.shard import audit_frame  # noqa: E402
from datacheck.execute.plan import build_plan, rows_of_step  # noqa: E402
from datacheck.model.config import config_from_dict  # noqa: E402
from datacheck.torch import BatchGuard  # noqa: E402

VOCAB, IGNORE = 32, -100


class Tiny(nn.Module):
    """Embedding + a float-feature projection + linear head (the smallest LM-shaped model)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(VOCAB, 16)
        self.feat = nn.Linear(1, 16)
        self.head = nn.Linear(16, VOCAB)

    def forward(self, ids, feats):
        return self.head(self.emb(ids) + self.feat(feats.unsqueeze(-1)))


def step(df: pl.DataFrame, fp16: bool = False) -> float:
    """One optimizer step on the rows of ``df`` (input_ids, labels, feats); returns the loss."""
    model = Tiny()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ids = torch.tensor(df["input_ids"].to_list())
    labels = torch.tensor(df["labels"].to_list())
    feats = torch.tensor(df["feats"].to_list(), dtype=torch.float32)
    loss_fn = nn.CrossEntropyLoss(ignore_index=IGNORE)
    if fp16:
        with torch.autocast("cpu", dtype=torch.float16):
            logits = model(ids, feats.half())
    else:
        logits = model(ids, feats)
    loss = loss_fn(logits.float().reshape(-1, VOCAB), labels.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return float(loss.detach())


def clean_rows(n: int = 4) -> dict:
    return {"input_ids": [[1, 2, 3, 4]] * n, "labels": [[2, 3, 4, 5]] * n, "feats": [[0.5, 0.1, 0.2, 0.3]] * n}


def frame(bad: dict, n_clean: int = 3) -> pl.DataFrame:
    rows = clean_rows(n_clean)
    return pl.DataFrame({k: rows[k] + [bad.get(k, rows[k][0])] for k in rows})


CFG = {"tokens": {"vocab_size": VOCAB}, "labels": {"ignore_index": IGNORE}, "columns": {"features": "feats"}}

# check ID, the offending row, config, how the step fails
CASES = [
    ("empty.no_supervised_tokens", {"labels": [IGNORE] * 4}, CFG, "nan"),
    ("labels.out_of_range", {"labels": [2, 3, VOCAB, 5]}, CFG, IndexError),
    ("labels.unexpected_sentinel", {"labels": [2, -1, 4, 5]}, CFG, IndexError),
    ("tokens.out_of_vocab", {"input_ids": [1, 2, VOCAB + 7, 4]}, CFG, IndexError),
    ("finite.nan", {"feats": [0.5, float("nan"), 0.2, 0.3]}, CFG, "nan"),
    ("finite.fp16_overflow", {"feats": [0.5, 70000.0, 0.2, 0.3]},
     {**CFG, "numeric": {"compute_dtype": "fp16"}}, "nonfinite-fp16"),
]


@pytest.mark.slow
@pytest.mark.parametrize("cid,bad,cfg,failure", CASES, ids=[c[0] for c in CASES])
def test_check_predicts_the_failure_of_a_real_step(cid, bad, cfg, failure):
    cfg = config_from_dict(cfg)
    if cid == "empty.no_supervised_tokens":
        df = pl.DataFrame({k: [v] for k, v in {**{k: v[0] for k, v in clean_rows(1).items()}, **bad}.items()})
    else:
        df = frame(bad)
    res = audit_frame(df, cfg)
    flagged = {f.check for f in res.findings}
    assert cid in flagged, flagged
    fp16 = failure == "nonfinite-fp16"
    if isinstance(failure, type):
        with pytest.raises(failure):
            step(df)
    else:
        loss = step(df, fp16=fp16)
        assert not math.isfinite(loss), loss
    # BatchGuard catches the same batch with the same ID
    guard = BatchGuard(lambda rows: {k: torch.tensor([r[k] for r in rows]) for k in ("input_ids", "labels")}
                       | {"feats": torch.tensor([r["feats"] for r in rows], dtype=torch.float32)}, facts=cfg)
    with pytest.raises(datacheck.DatacheckError, match=cid.replace(".", r"\.")):
        guard(df.to_dicts())
    # the cleaned copy: rows without the finding train with a finite loss
    fail_rows = set(res.failing_rows.get(cid, [])) | {r for f in res.findings if f.check == cid for r in f.rows}
    kept = df.with_row_index("_r").filter(~pl.col("_r").is_in(sorted(fail_rows))).drop("_r")
    if kept.height == 0:
        kept = pl.DataFrame(clean_rows(1))
    assert cid not in {f.check for f in audit_frame(kept, cfg).findings}
    assert math.isfinite(step(kept, fp16=fp16))


def test_batch_no_supervised_tokens_breaks_the_planned_micro_batch(tmp_path):
    """A dataset whose rows are fine one by one on average, but whose planned micro-batch 1 holds only
    unsupervised rows: that micro-batch's step gives a NaN loss; after dropping those rows, finite."""
    good = clean_rows(4)
    unsup = {**clean_rows(4), "labels": [[IGNORE] * 4] * 4}
    d = tmp_path / "ds"
    d.mkdir()
    pl.DataFrame(good).write_parquet(d / "part-0.parquet")
    pl.DataFrame(unsup).write_parquet(d / "part-1.parquet")
    batch = {"batch_size": 4, "shuffle": False}
    rep = datacheck.audit([str(d)], config={**CFG, "batch": batch})
    f = next(f for f in rep.findings if f.check == "batch.no_supervised_tokens")
    epoch, s, rank, mb = f.details["micro_batches"][0]
    plan = build_plan([str(d)], config_from_dict({**CFG, "batch": batch}))
    rows = rows_of_step(plan, epoch * plan.steps_per_epoch + s, rank=rank, micro_batch=mb)
    frames = {p.name: pl.read_parquet(p) for p in d.iterdir()}
    micro = pl.concat([frames[r.shard][r.row] for r in rows])
    assert not math.isfinite(step(micro))
    pl.DataFrame(good).write_parquet(d / "part-1.parquet")  # the cleaned copy: supervised rows only
    rep = datacheck.audit([str(d)], config={**CFG, "batch": batch})
    assert "batch.no_supervised_tokens" not in {f.check for f in rep.findings}
    plan = build_plan([str(d)], config_from_dict({**CFG, "batch": batch}))
    for st in range(plan.steps_per_epoch):
        rs = rows_of_step(plan, st)
        assert math.isfinite(step(pl.concat([pl.read_parquet(d / r.shard)[r.row] for r in rs])))
