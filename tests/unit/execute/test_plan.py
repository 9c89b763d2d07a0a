"""datacheck plan and rows_of_step against torch itself; the ledger of record_batches; the batch.* checks."""
from __future__ import annotations

import contextlib
import gzip
import io
import json
import zlib

import polars as pl
import pytest

torch = pytest.importorskip("torch")
from batchhelp import IdRows  # noqa: E402
from conftest import REALDATA  # noqa: E402
from torch.utils.data import DataLoader, DistributedSampler  # noqa: E402

import datacheck  # noqa: E402
from datacheck.cli.main import main  # noqa: E402
from datacheck.execute.plan import build_plan, rows_of_step  # noqa: E402
from datacheck.model.config import config_from_dict  # noqa: E402
from datacheck.torch import read_ledger, record_batches  # noqa: E402

# (rows per shard, world_size, batch_size, grad_accum, drop_last, shuffle, seed)
SETUPS = [
    ((10, 13), 2, 3, 2, False, True, 5),
    ((7,), 1, 2, 1, False, False, 0),
    ((20, 5, 6), 4, 2, 3, True, True, 11),
    ((9, 9), 3, 4, 1, True, False, 0),
    ((50,), 8, 1, 4, False, True, 1234),
]


def _dataset(tmp_path, sizes):
    d = tmp_path / "data"
    d.mkdir()
    g = 0
    for i, n in enumerate(sizes):
        pl.DataFrame({"gid": list(range(g, g + n)),
                      "labels": [[g + j, -100] for j in range(n)]}).write_parquet(d / f"train-{i:05d}-of-{len(sizes):05d}.parquet")
        g += n
    return d, g



@pytest.mark.parametrize("sizes,ws,bs,ga,drop_last,shuffle,seed", SETUPS)
def test_plan_matches_torch_dataloader_and_recorded_ledger(tmp_path, sizes, ws, bs, ga, drop_last, shuffle, seed):
    data, n = _dataset(tmp_path, sizes)
    cfg = config_from_dict({"batch": {"batch_size": bs, "world_size": ws, "grad_accum": ga, "drop_last": drop_last,
                                      "shuffle": shuffle, "seed": seed, "epochs": 2}})
    plan = build_plan([str(data)], cfg)
    ledger_dir = tmp_path / "ledger"
    seen: dict[int, list[tuple[int, int, list[int]]]] = {}  # step -> (rank, micro-batch, ids) from torch
    for rank in range(ws):
        sampler = DistributedSampler(IdRows(n), num_replicas=ws, rank=rank, shuffle=shuffle, seed=seed)
        loader = record_batches(DataLoader(IdRows(n), batch_size=bs, sampler=sampler, drop_last=drop_last),
                                ledger_dir, rank=rank, grad_accum=ga)
        k = 0
        for epoch in range(2):
            sampler.set_epoch(epoch)
            mb = 0
            for batch in loader:
                seen.setdefault(k, []).append((rank, mb, batch.tolist()))
                mb += 1
                if mb == ga:
                    k, mb = k + 1, 0
            if mb:
                k, mb = k + 1, 0
    led = read_ledger(ledger_dir)
    assert plan.steps_per_epoch * 2 == len(seen) == len(led.steps)
    for step in sorted(seen):
        want = [(r, m, g) for r, m, ids in sorted(seen[step]) for g in ids]
        got = [(x.rank, x.micro_batch, x.global_index) for x in rows_of_step(plan, step)]
        assert got == want, step
        from_ledger = rows_of_step(led, step, space=plan.space)
        assert [tuple(x) for x in from_ledger] == [tuple(x) for x in rows_of_step(plan, step)]
    # each global index is the row whose gid column holds it
    frames = {p.name: pl.read_parquet(p) for p in data.iterdir()}
    for x in rows_of_step(plan, 0):
        assert frames[x.shard]["gid"][x.row] == x.global_index


def test_plan_cli_step_export_and_ledger(tmp_path):
    data, n = _dataset(tmp_path, (10, 13))
    cfg = tmp_path / "dc.toml"
    cfg.write_text("[batch]\nbatch_size = 3\nworld_size = 2\ngrad_accum = 2\nseed = 5\n")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["plan", str(data), "--config", str(cfg), "--step", "1", "--export", str(tmp_path / "s1.parquet"),
                   "--format", "json"])
    assert rc == 0
    res = json.loads(out.getvalue())["result"]
    p = res["plan"]
    assert (p["rows"], p["global_batch"], p["rows_per_rank"], p["micro_batches_per_rank"], p["steps_per_epoch"],
            p["last_batch_rows"], p["wraparound_repeats"]) == (23, 12, 12, 4, 2, [3, 3], 1)
    assert p["supervised"]["zero"] == 0 and p["supervised"]["min"] == 3  # 3 rows x 1 supervised label
    rows = res["step"]["rows"]
    assert len(rows) == 12 and {(r["rank"], r["micro_batch"]) for r in rows} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    ex = pl.read_parquet(tmp_path / "s1.parquet")
    assert ex.height == 12
    assert ex["gid"].to_list() == [r["global_index"] for r in rows] == ex["_datacheck_global_index"].to_list()
    assert ex["_datacheck_shard_hash"].str.starts_with("xxh3-128:").all()
    plan = build_plan([str(data)], config_from_dict({"batch": {"batch_size": 3, "world_size": 2, "grad_accum": 2}}))
    with pytest.raises(datacheck.UsageError, match=r"steps 0\.\.1"):
        rows_of_step(plan, 2)


def test_olmo_ledger_is_read(tmp_path):
    d = tmp_path / "run" / "data-indices"
    d.mkdir(parents=True)
    with gzip.open(d / "rank0.tsv.gz", "wt") as f:
        f.write("1\t4\t0\t7\n2\t1\t2\t3\n")
    with gzip.open(d / "rank1.tsv.gz", "wt") as f:
        f.write("1\t5\t6\t8\n2\t9\t10\t11\n")
    led = read_ledger(tmp_path / "run")
    assert led.format == "olmo" and led.steps == [1, 2]
    assert [(x.rank, x.micro_batch, x.global_index) for x in rows_of_step(led, 1)] == [
        (0, None, 4), (0, None, 0), (0, None, 7), (1, None, 5), (1, None, 6), (1, None, 8)]


def test_ledger_resume_continues_and_replaces(tmp_path):
    bs = torch.utils.data.BatchSampler(torch.utils.data.SequentialSampler(range(10)), batch_size=2, drop_last=False)
    rec = record_batches(bs, tmp_path, rank=0, grad_accum=2)
    it = iter(rec)
    for _ in range(3):  # steps 0 (2 micro-batches) and 1 (1 of 2): the run dies mid-step
        next(it)
    it.close()
    led = read_ledger(tmp_path)
    assert [(b.step, b.micro_batch) for s in led.steps for b in led.step(s)] == [(0, 0), (0, 1), (1, 0)]
    rec2 = record_batches(bs, tmp_path, rank=0, grad_accum=2)  # resumed: continues at the unfinished step 1
    assert rec2.next_step == 1
    list(rec2)
    led = read_ledger(tmp_path)
    assert led.steps == [0, 1, 2, 3]  # 5 micro-batches from step 1: steps 1, 2 and a last partial 3
    assert [b.indices for b in led.step(1)] == [(0, 1), (2, 3)]  # re-recorded from the resume point
    assert [b.indices for b in led.step(0)] == [(0, 1), (2, 3)]
    assert [st["start_step"] for st in led.states[0]] == [0, 1]
    # a torn tail (a run killed mid-write) is not an error: a member cut in its 8-byte trailer (CRC and
    # size) still inflates to its whole line, which is read; a member cut inside its line drops that line
    f = tmp_path / "data-indices" / "rank0.tsv.gz"
    whole = f.read_bytes()
    f.write_bytes(whole + gzip.compress(b"9\t0\t0\t0\t1\t2\n")[:-6])
    led = read_ledger(tmp_path)
    assert led.truncated and 9 in led.steps
    m = gzip.compress(b"9\t0\t0\t0\t1\t2\n")
    k = max(k for k in range(len(m)) if b"\n" not in zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(m[:k]))
    f.write_bytes(whole + m[:k])
    led = read_ledger(tmp_path)
    assert led.truncated and 9 not in led.steps and led.steps == [0, 1, 2, 3]


def _audit(tmp_path, frames, batch, name="ds"):
    d = tmp_path / name
    d.mkdir()
    for i, df in enumerate(frames):
        pl.DataFrame(df).write_parquet(d / f"part-{i}.parquet")
    rep = datacheck.audit([str(d)], config={"batch": batch})
    return {f.check: f for f in rep.findings if f.check.startswith("batch.")}, \
        {s["check"]: s["reason"] for s in rep.skipped if s["check"].startswith("batch.")}


def _lab(n, sup=True):
    return {"labels": [[1, 2] if sup else [-100, -100] for _ in range(n)]}


@pytest.mark.parametrize("rows,batch,expect", [
    (9, {"batch_size": 4}, {"batch.singleton_tail": 1}),                                   # 1-sample tail
    (17, {"batch_size": 8, "world_size": 2}, {"batch.wraparound": 1, "batch.singleton_tail": 2}),
    (10, {"batch_size": 8}, {"batch.small_tail": 1}),                                       # tail 2 < 4
    (5, {"batch_size": 8, "drop_last": True}, {"batch.no_batches": 5}),                     # fewer rows than a batch
    (11, {"batch_size": 4, "world_size": 4, "drop_last": True}, {"batch.no_batches": 11, "batch.wraparound": 1}),
    (16, {"batch_size": 8, "world_size": 2}, {}),                                           # clean
])
def test_batch_checks_on_small_datasets(tmp_path, rows, batch, expect):
    found, skipped = _audit(tmp_path, [_lab(rows)], batch)
    assert {k: f.count for k, f in found.items()} == expect
    assert skipped == {}


def test_batch_no_supervised_micro_batch(tmp_path):
    frames = [_lab(4), _lab(4, sup=False)]  # unshuffled, batch 4: micro-batch 1 is all unsupervised
    found, _ = _audit(tmp_path, frames, {"batch_size": 4, "shuffle": False, "epochs": 2})
    f = found["batch.no_supervised_tokens"]
    assert f.count == 2 and f.details["micro_batches"] == [[0, 1, 0, 0], [1, 1, 0, 0]]
    found, _ = _audit(tmp_path, [_lab(8)], {"batch_size": 4, "shuffle": False}, name="clean")
    assert "batch.no_supervised_tokens" not in found


def test_batch_checks_skipped_without_batch_facts(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    pl.DataFrame(_lab(3)).write_parquet(d / "a.parquet")
    rep = datacheck.audit([str(d)], config={"batch": {"seed": 3}})  # neither batch_size nor max_tokens
    reasons = {s["check"]: s["reason"] for s in rep.skipped if s["check"].startswith("batch.")}
    assert set(reasons) == {"batch.small_tail", "batch.singleton_tail", "batch.no_batches", "batch.wraparound",
                            "batch.no_supervised_tokens"}
    assert all("batch_size is not set" in r for r in reasons.values())


MBERT = REALDATA / "dkhate_danish_offensive/dkhate_mbert"  # DatasetDict: train 2,960 + test 329 (PROVENANCE.md)


def _plan_cli(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["plan", *argv])
    return rc, out.getvalue()


@pytest.mark.skipif(not MBERT.is_dir(), reason="shared realdata not present")
def test_plan_of_a_dataset_dict_plans_the_train_split_and_says_so(tmp_path):
    """The test split is not in the batches a trainer iterates."""
    cfg = tmp_path / "dc.toml"
    cfg.write_text("[batch]\nbatch_size = 8\n")
    rc, out = _plan_cli(str(MBERT), "--config", str(cfg), "--format", "json")
    p = json.loads(out)["result"]["plan"]
    assert rc == 0 and (p["rows"], p["split"], p["other_splits"], p["steps_per_epoch"]) == (2960, "train", {"test": 1}, 370)
    plan = build_plan([str(MBERT)], config_from_dict({"batch": {"batch_size": 8}}))
    assert {s.path for s in plan.space.shards} == {"train/data-00000-of-00001.arrow"}
    assert {r.shard for st in range(plan.steps_per_epoch) for r in rows_of_step(plan, st)} == {"train/data-00000-of-00001.arrow"}
    rc, out = _plan_cli(str(MBERT), "--config", str(cfg))
    assert rc == 0 and "rows 2960 in 1 shard(s) of split 'train' (not planned: test (1 shard(s))" in out
    rc, out = _plan_cli(str(MBERT), "--config", str(cfg), "--split", "test", "--format", "json")
    p = json.loads(out)["result"]["plan"]
    assert (p["rows"], p["split"], p["other_splits"]) == (329, "test", {"train": 1})


@pytest.mark.skipif(not MBERT.is_dir(), reason="shared realdata not present")
def test_plan_split_errors_name_the_splits(tmp_path, capsys):
    cfg = tmp_path / "dc.toml"
    cfg.write_text("[batch]\nbatch_size = 8\n")
    assert main(["plan", str(MBERT), "--config", str(cfg), "--split", "dev"]) == 2
    assert "--split dev: the splits are train, test" in capsys.readouterr().err
    data, _ = _dataset(tmp_path, (4,))
    assert main(["plan", str(data), "--config", str(cfg), "--split", "train"]) == 2
    assert "--split train: the data has no splits" in capsys.readouterr().err
    # [splits] in the config without a train split: the plan refuses to guess
    cfg.write_text('[batch]\nbatch_size = 8\n[splits]\nfit = "train/*"\nheld = "test/*"\n')
    assert main(["plan", str(MBERT), "--config", str(cfg)]) == 2
    assert "none named 'train': the splits are fit, held" in capsys.readouterr().err
    rc, out = _plan_cli(str(MBERT), "--config", str(cfg), "--split", "fit", "--format", "json")
    assert rc == 0 and json.loads(out)["result"]["plan"]["rows"] == 2960


def test_a_plan_without_a_step_says_why(tmp_path):
    """3 rows, micro-batches of 4, drop_last: no step at all; --step names the cause, never "0..-1"."""
    data, _ = _dataset(tmp_path, [3])
    plan = build_plan([str(data)], config_from_dict({"batch": {"batch_size": 4, "drop_last": True}}))
    assert plan.steps_per_epoch == 3 // 4 == 0
    with pytest.raises(datacheck.UsageError, match=r"0 steps per epoch") as e:
        rows_of_step(plan, 0)
    assert "0..-1" not in str(e.value)
