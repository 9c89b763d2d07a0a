"""Replay of an exported step (``datacheck.torch.replay_batch``): train / eval / fp32 on a fixed batch,
the rows with a non-finite per-row loss named, the model left as it was."""
from __future__ import annotations

import contextlib
import io
import json
import math

import polars as pl
import pytest

from datacheck.cli.main import main
from datacheck.model.errors import UsageError

torch = pytest.importorskip("torch")
from datacheck.torch import batch_from_export, replay_batch  # noqa: E402

NAN_ROW, BIG_ROW = 9, 10  # both in step 3 (4 rows a step); 1e5 is over float16's largest finite 65504


@pytest.fixture
def export(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    x1 = [0.1 * i for i in range(24)]
    x1[NAN_ROW], x1[BIG_ROW] = float("nan"), 1e5
    pl.DataFrame({"x1": x1, "x2": [1.0] * 24, "label": [i % 2 for i in range(24)]}).write_parquet(data / "t.parquet")
    (tmp_path / "datacheck.toml").write_text('[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n')
    log = tmp_path / "train.log"
    log.write_text("".join(f"step={s} loss={'nan' if s == 3 else 1.0} lr=0.1\n" for s in range(1, 7)))
    (tmp_path / "ledger").mkdir()
    (tmp_path / "ledger" / "rank0.tsv").write_text("".join(
        f"{s}\t" + "\t".join(str(r) for r in range(4 * (s - 1), 4 * s)) + "\n" for s in range(1, 7)))
    out = tmp_path / "replay.parquet"
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = main(["trace", str(log), "--data", str(data), "--config", str(tmp_path / "datacheck.toml"),
                   "--ledger", str(tmp_path / "ledger"), "--export", str(out)])
    assert rc == 1, err.getvalue()
    return out


def _model():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.BatchNorm1d(8), torch.nn.Dropout(0.1), torch.nn.Linear(8, 2))
    with torch.no_grad():
        m[0].weight.fill_(0.5)
    return m


def test_replay_names_the_nan_row_and_the_fp16_overflow_row(export):
    batch = batch_from_export(export, ["x1", "x2"], "label")
    assert batch.rows == [8, 9, 10, 11] and tuple(batch.inputs.shape) == (4, 2)
    assert batch.targets.tolist() == [0, 1, 0, 1]
    model = _model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rng = torch.get_rng_state()
    res = replay_batch(model, batch, torch.nn.CrossEntropyLoss(reduction="none"), dtype=torch.float16)
    tr, ev, fp = res.modes["train"], res.modes["eval"], res.modes["fp32"]
    assert (tr.dtype, ev.dtype, fp.dtype) == ("float16", "float16", "float32")
    assert not tr.finite and not ev.finite and not fp.finite  # the NaN row makes every batch loss NaN
    assert tr.grad_finite is False and ev.grad_norm is None
    assert ev.bad_rows == [NAN_ROW, BIG_ROW]  # eval: batch-norm running stats, no batch mixing
    assert fp.bad_rows == [NAN_ROW]  # the 1e5 row is finite in fp32: a float16 overflow
    assert math.isfinite(fp.row_loss[2]) and not math.isfinite(ev.row_loss[2])
    assert NAN_ROW in tr.bad_rows
    # the model is as it was: parameters, batch-norm buffers, no grads, train flag, RNG state
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(q.grad is None for q in model.parameters()) and model.training
    assert torch.equal(torch.get_rng_state(), rng)
    d = json.loads(json.dumps(res.to_dict()))
    assert d["modes"]["fp32"]["bad_rows"] == [NAN_ROW] and d["modes"]["eval"]["loss"] == "nan"


def test_replay_clean_rows_are_finite_in_every_mode(export):
    batch = batch_from_export(export, ["x1", "x2"], "label")
    keep = [0, 3]  # rows 8 and 11
    from datacheck.torch.replay import ReplayBatch
    clean = ReplayBatch(batch.inputs[keep], batch.targets[keep], [batch.rows[i] for i in keep])
    res = replay_batch(_model(), clean, torch.nn.CrossEntropyLoss(reduction="none"), dtype=torch.float16)
    for mode in ("train", "eval", "fp32"):
        r = res.modes[mode]
        assert r.finite and r.bad_rows == [], mode
    assert res.modes["train"].grad_finite is True and res.modes["train"].grad_norm > 0
    # eval in float16 and fp32 agree to float16 precision on finite rows
    assert abs(res.modes["eval"].loss - res.modes["fp32"].loss) < 1e-2


def test_bad_export_and_loss_inputs_are_usage_errors(export, tmp_path):
    with pytest.raises(UsageError, match="no column 'x3'; its data columns are"):
        batch_from_export(export, ["x3"], "label")
    with pytest.raises(UsageError, match="no row of step 7"):
        batch_from_export(export, ["x1"], "label", step=7)
    (tmp_path / "x.csv").write_text("a\n1\n")
    with pytest.raises(UsageError, match="an export is .parquet or .jsonl"):
        batch_from_export(tmp_path / "x.csv", ["a"])
    batch = batch_from_export(export, ["x1", "x2"], "label", step=2)  # log step 3 = optimizer step 2
    with pytest.raises(UsageError, match="one loss per row"):
        replay_batch(_model(), batch, torch.nn.CrossEntropyLoss())
    with pytest.raises(UsageError, match="unknown"):
        replay_batch(_model(), batch, torch.nn.CrossEntropyLoss(reduction="none"), modes=("fp16",))


@pytest.mark.parametrize("name", ["step[12].parquet", "step[12].jsonl"])
def test_an_export_named_with_brackets_is_read(export, tmp_path, name):
    # `trace --export 'step[12].parquet'`: a file name, not a glob (polars expands paths as globs)
    import polars as pl
    df = pl.read_parquet(export)
    path = tmp_path / name
    if name.endswith(".parquet"):
        df.write_parquet(path)
    else:  # JSON has no NaN: the finite rows only
        df = df.filter(pl.col("x1").is_finite() & pl.col("x2").is_finite())
        df.write_ndjson(path)
    assert df.height >= 2
    batch = batch_from_export(path, ["x1", "x2"], "label")
    assert batch.targets.tolist() == df["label"].to_list() and len(batch.rows) == df.height
