"""Token-budget batching ([batch] max_tokens): TokenBudgetBatchSampler in a real DataLoader per rank,
the plan's step -> rows and a record_batches ledger of that iteration agree; the fill rule against a
plain-Python reference of fairseq's batch_by_size; the batch.* checks on small datasets."""
from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import polars as pl
import pytest
from batchhelp import IdRows  # noqa: E402
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

import datacheck  # noqa: E402
from datacheck.cli.main import main  # noqa: E402
from datacheck.execute.plan import build_plan, rows_of_step  # noqa: E402
from datacheck.model.budget import length_order, token_budget_batches  # noqa: E402
from datacheck.model.config import config_from_dict  # noqa: E402
from datacheck.torch import TokenBudgetBatchSampler, read_ledger, record_batches  # noqa: E402

# (rows per shard, world_size, max_tokens, batch_size cap, grad_accum, drop_last, shuffle, seed)
SETUPS = [
    ((15, 12), 2, 40, None, 2, False, True, 5),
    ((9,), 1, 25, 3, 1, False, False, 0),
    ((20, 7, 6), 4, 32, None, 1, True, True, 11),
    ((30,), 3, 60, 4, 3, False, True, 1234),
]


def _lengths(n: int, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    return [int(x) for x in rng.integers(1, 30, n)]


def _dataset(tmp_path, sizes, seed=0):
    d = tmp_path / "data"
    d.mkdir()
    lens = _lengths(sum(sizes), seed)
    g = 0
    for i, n in enumerate(sizes):
        pl.DataFrame({"gid": list(range(g, g + n)),
                      "input_ids": [[7] * lens[g + j] for j in range(n)],
                      "labels": [[7] * lens[g + j] for j in range(n)]}).write_parquet(d / f"train-{i:05d}.parquet")
        g += n
    return d, lens



@pytest.mark.parametrize("sizes,ws,max_tokens,cap,ga,drop_last,shuffle,seed", SETUPS)
def test_plan_matches_token_budget_sampler_in_dataloader_and_ledger(tmp_path, sizes, ws, max_tokens, cap, ga,
                                                                   drop_last, shuffle, seed):
    data, lens = _dataset(tmp_path, sizes, seed)
    n = len(lens)
    cfg = config_from_dict({"batch": {"max_tokens": max_tokens, "batch_size": cap, "world_size": ws,
                                      "grad_accum": ga, "drop_last": drop_last, "shuffle": shuffle, "seed": seed,
                                      "epochs": 2}})
    plan = build_plan([str(data)], cfg)
    assert plan.lengths.tolist() == lens
    ledger_dir = tmp_path / "ledger"
    seen: dict[int, list[tuple[int, int, list[int]]]] = {}
    for rank in range(ws):  # what each rank's trainer loads: the sampler in a real DataLoader, recorded
        sampler = TokenBudgetBatchSampler(lens, max_tokens, max_rows=cap, num_replicas=ws, rank=rank,
                                          shuffle=shuffle, seed=seed, drop_last=drop_last)
        loader = record_batches(DataLoader(IdRows(n), batch_sampler=sampler), ledger_dir, rank=rank, grad_accum=ga)
        k = 0
        for epoch in range(2):
            sampler.set_epoch(epoch)
            mb = 0
            for batch in loader:
                ids = batch.tolist()
                # the budget holds (a row longer than max_tokens alone in its batch)
                assert len(ids) * max(lens[i] for i in ids) <= max_tokens or len(ids) == 1
                assert cap is None or len(ids) <= cap
                seen.setdefault(k, []).append((rank, mb, ids))
                mb += 1
                if mb == ga:
                    k, mb = k + 1, 0
            if mb:
                k, mb = k + 1, 0
    led = read_ledger(ledger_dir)
    assert plan.steps_per_epoch * 2 == len(seen) == len(led.steps)
    assert {s["epoch"] for s in led.states[0]} == {0, 1} and led.states[0][0]["max_tokens"] == max_tokens
    for step in sorted(seen):
        want = [(r, m, g) for r, m, ids in sorted(seen[step]) for g in ids]
        got = [(x.rank, x.micro_batch, x.global_index) for x in rows_of_step(plan, step)]
        assert got == want, step
        assert [tuple(x) for x in rows_of_step(led, step, space=plan.space)] == [tuple(x) for x in rows_of_step(plan, step)]
    frames = {p.name: pl.read_parquet(p) for p in data.iterdir()}
    for x in rows_of_step(plan, 0):
        assert frames[x.shard]["gid"][x.row] == x.global_index
    # every row is loaded once per epoch without drop_last (plus whole repeated batches)
    epoch0 = [g for s in range(plan.steps_per_epoch) for _, _, ids in seen[s] for g in ids]
    if not drop_last:
        assert set(epoch0) == set(range(n)) and len(epoch0) - n == plan.order(0).repeats


def _reference_fill(lengths, order, max_tokens, max_rows):
    """fairseq batch_by_size (max_tokens, max_sentences), written plainly."""
    batches, cur, longest = [], [], 0
    for i in order:
        m = max(longest, lengths[i])
        if cur and ((len(cur) + 1) * m > max_tokens or (max_rows is not None and len(cur) == max_rows)):
            batches.append(cur)
            cur, m = [], lengths[i]
        cur.append(i)
        longest = m
    if cur:
        batches.append(cur)
    return batches


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.integers(0, 50), max_size=60), st.integers(1, 80), st.one_of(st.none(), st.integers(1, 6)),
       st.booleans(), st.integers(0, 3))
def test_fill_matches_reference_and_keeps_the_budget(lengths, max_tokens, max_rows, shuffle, seed):
    arr = np.asarray(lengths, dtype=np.int64)
    order = length_order(arr, shuffle, seed)
    assert [int(lengths[i]) for i in order] == sorted(lengths)  # bucketing: by length
    batches, over = token_budget_batches(arr, order, max_tokens, max_rows)
    assert [b.tolist() for b in batches] == _reference_fill(lengths, order.tolist(), max_tokens, max_rows)
    assert sorted(g for b in batches for g in b.tolist()) == list(range(len(lengths)))
    assert over == [i for i in order.tolist() if lengths[i] > max_tokens]
    for b in batches:
        padded = len(b) * max(lengths[i] for i in b)
        assert padded <= max_tokens or (len(b) == 1 and lengths[b[0]] > max_tokens)


def test_row_longer_than_max_tokens_is_its_own_batch_and_reported(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    lens = [4, 4, 4, 50, 4, 4]
    pl.DataFrame({"input_ids": [[1] * k for k in lens], "labels": [[1] * k for k in lens]}).write_parquet(d / "a.parquet")
    cfg = tmp_path / "dc.toml"
    cfg.write_text("[batch]\nmax_tokens = 16\nshuffle = false\n")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["plan", str(d), "--config", str(cfg), "--format", "json"]) == 0
    p = json.loads(out.getvalue())["result"]["plan"]
    tb = p["token_budget"]
    assert (tb["over_budget_rows"], tb["over_budget_examples"], tb["batches_per_epoch"]) == (1, [3], 3)
    assert tb["padded_tokens"] == {"min": 4, "median": 16.0, "max": 50}  # [4 rows x 4], [1 x 4], [1 x 50]
    assert p["micro_batches_per_rank"] == 3 and p["global_batch"] is None and tb["global_batch_tokens"] == 16
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["plan", str(d), "--config", str(cfg), "--step", "2"]) == 0
    text = out.getvalue()
    assert "1 row(s) are longer than max_tokens 16; each is a micro-batch of its own (global indices [3])" in text
    assert "step 2 (epoch 0, step 2 of the epoch): 1 row(s)" in text and "a.parquet row 3" in text


def _audit(tmp_path, lens, batch, name, sup=None):
    d = tmp_path / name
    d.mkdir()
    sup = sup or [True] * len(lens)
    pl.DataFrame({"input_ids": [[5] * k for k in lens],
                  "labels": [[5] * k if s else [-100] * k for k, s in zip(lens, sup)]}).write_parquet(d / "a.parquet")
    rep = datacheck.audit([str(d)], config={"batch": batch})
    return ({f.check: f for f in rep.findings if f.check.startswith("batch.")},
            {s["check"]: s["reason"] for s in rep.skipped if s["check"].startswith("batch.")})


NS = {"shuffle": False}


@pytest.mark.parametrize("lens,batch,expect", [
    ([4] * 10, {"max_tokens": 12, **NS}, {"batch.singleton_tail": 1}),                    # batches 3,3,3,1
    ([2] * 13, {"max_tokens": 20, **NS}, {"batch.small_tail": 1}),                        # tail 3 rows x 2 < 10
    ([4] * 7, {"max_tokens": 12, "world_size": 4, "drop_last": True, **NS}, {"batch.no_batches": 7}),  # 3 < 4 ranks
    ([4] * 9, {"max_tokens": 12, "world_size": 2, **NS}, {"batch.wraparound": 3}),        # batch 0 repeated
    ([4] * 8, {"max_tokens": 16, **NS}, {}),                                              # clean: 2 full batches
    ([4] * 8, {"max_tokens": 16, "world_size": 2, "seed": 3}, {}),                        # clean, shuffled
])
def test_batch_checks_under_token_budget(tmp_path, lens, batch, expect):
    found, skipped = _audit(tmp_path, lens, batch, "ds")
    assert {k: f.count for k, f in found.items()} == expect
    assert skipped == {}
    if "batch.small_tail" in expect:
        assert found["batch.small_tail"].details["last_batch_padded_tokens"] == [6]
    if "batch.wraparound" in expect:
        assert found["batch.wraparound"].details["repeated_batches"] == 1


def test_token_budget_micro_batch_without_supervised_tokens(tmp_path):
    # 4 short supervised rows and 4 longer all-ignored rows: bucketing by length puts the latter together
    found, _ = _audit(tmp_path, [2] * 4 + [4] * 4, {"max_tokens": 16, **NS}, "ds", sup=[True] * 4 + [False] * 4)
    f = found["batch.no_supervised_tokens"]
    assert f.count == 1 and f.details["micro_batches"] == [[0, 1, 0, 0]]
    found, _ = _audit(tmp_path, [2] * 4 + [4] * 4, {"max_tokens": 16, **NS}, "clean")
    assert "batch.no_supervised_tokens" not in found


def test_token_budget_needs_input_ids(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    pl.DataFrame({"labels": [[1, 2]] * 3}).write_parquet(d / "a.parquet")
    rep = datacheck.audit([str(d)], config={"batch": {"max_tokens": 100}})
    reasons = {s["check"]: s["reason"] for s in rep.skipped if s["check"].startswith("batch.")}
    assert len(reasons) == 5 and all("no input_ids list column" in r for r in reasons.values())
    with pytest.raises(datacheck.UsageError, match="no input_ids list column"):
        build_plan([str(d)], config_from_dict({"batch": {"max_tokens": 100}}))
