"""The data leg under token-budget batching (``[batch] max_tokens``) with a log that counts
micro-batches across epochs (``--step-unit micro-batch``): the join takes one epoch's micro-batch
count for every epoch. That holds because TokenBudgetBatchSampler fills its batches once (rows
sorted by length, ties by the ``seed`` permutation) and only permutes their order per epoch
(``seed + epoch``), and DistributedSampler deals ``ceil(n_batches / world_size)`` of them to each
rank (``floor`` with ``drop_last``) whatever the order. Shown here against the sampler itself in a
real DataLoader per rank over several shuffled epochs, and against the fill arithmetic; then the
rows trace names for a log step in a later epoch are those that DataLoader yielded.

A ledger records each epoch's micro-batches (``#state`` ``batches``): a loader whose length changes
per epoch is joined epoch by epoch, and refused (exit 2) when an epoch before the last is missing."""
from __future__ import annotations

import gzip
import json
import math

import numpy as np
import polars as pl
import pytest
from batchhelp import IdRows
from conftest import run_cli

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

from datacheck.model.errors import UsageError  # noqa: E402
from datacheck.torch import TokenBudgetBatchSampler, record_batches  # noqa: E402
from datacheck.trace.data import ledger_epoch_micro_batches  # noqa: E402

N, WS, GA, BUDGET, SEED, EPOCHS = 41, 2, 2, 40, 3, 3


def _lengths() -> list[int]:
    return [int(x) for x in np.random.default_rng(7).integers(1, 30, N)]


def _fill_count(lengths: list[int], budget: int) -> int:
    """Batches of fairseq's batch_by_size over the rows sorted by length (the count does not depend on
    how ties are ordered: equal lengths are interchangeable)."""
    n, cur, longest = 0, 0, 0
    for x in sorted(lengths):
        m = max(longest, x)
        if cur and (cur + 1) * m > budget:
            n, cur, m = n + 1, 0, x
        cur, longest = cur + 1, m
    return n + (1 if cur else 0)


def _trainer(lengths: list[int], drop_last: bool = False) -> dict[int, list[list[list[int]]]]:
    """rank -> epoch -> its micro-batches (global rows), from the sampler in a DataLoader."""
    out: dict[int, list[list[list[int]]]] = {}
    for rank in range(WS):
        sampler = TokenBudgetBatchSampler(lengths, BUDGET, num_replicas=WS, rank=rank, shuffle=True, seed=SEED,
                                          drop_last=drop_last)
        loader = DataLoader(IdRows(N), batch_sampler=sampler)
        for epoch in range(EPOCHS):
            sampler.set_epoch(epoch)
            out.setdefault(rank, []).append([b.tolist() for b in loader])
    return out


@pytest.mark.parametrize("drop_last", [False, True])
def test_every_shuffled_epoch_has_as_many_micro_batches(drop_last):
    lengths = _lengths()
    n_batches = _fill_count(lengths, BUDGET)
    per_rank = n_batches // WS if drop_last else math.ceil(n_batches / WS)
    seen = _trainer(lengths, drop_last)
    for rank, epochs in seen.items():
        assert [len(e) for e in epochs] == [per_rank] * EPOCHS, rank
    assert seen[0][0] != seen[0][1]  # the epochs are shuffled: the order differs, the count does not


def test_a_log_step_in_a_later_epoch_names_the_rows_the_loader_gave(tmp_path):
    lengths = _lengths()
    per_rank = math.ceil(_fill_count(lengths, BUDGET) / WS)
    assert per_rank % GA  # each epoch's last optimizer step holds fewer micro-batches: the join must know the epoch
    seen = _trainer(lengths)
    data = tmp_path / "data"
    data.mkdir()
    pl.DataFrame({"gid": list(range(N)), "input_ids": [[7] * n for n in lengths],
                  "labels": [[7] * n for n in lengths]}).write_parquet(data / "train-00000.parquet")
    (tmp_path / "dc.toml").write_text(f"[batch]\nmax_tokens = {BUDGET}\nworld_size = {WS}\ngrad_accum = {GA}\n"
                                      f"shuffle = true\nseed = {SEED}\nepochs = {EPOCHS}\n")
    epoch, mb = EPOCHS - 1, per_rank - 2  # a micro-batch of the last epoch: log step = its count from 0
    bad = epoch * per_rank + mb
    (tmp_path / "log.jsonl").write_text("".join(
        json.dumps({"step": k, "loss": float("nan") if k == bad else 2.0}) + "\n" for k in range(EPOCHS * per_rank)))
    r = run_cli("trace", str(tmp_path / "log.jsonl"), "--data", str(data), "--config", str(tmp_path / "dc.toml"),
                "--step-unit", "micro-batch", "--first-step", "0", "--format", "json", "--no-progress")
    assert r.returncode == 1, r.stdout + r.stderr
    res = json.loads(r.stdout)["result"]
    steps_per_epoch = math.ceil(per_rank / GA)
    assert res["data"]["audited_optimizer_steps"] == [epoch * steps_per_epoch + mb // GA] * 2
    got = res["data"]["rows"]["steps"][str(bad)]
    assert {int(k): sorted(v) for k, v in got.items()} == {rank: sorted(seen[rank][epoch][mb]) for rank in range(WS)}


V_ROWS, V_GA, V_ROWS_PER_BATCH = 30, 2, 3
V_LENS = (5, 3, 4)  # micro-batches of epochs 0, 1, 2 (5 and 3 are not multiples of V_GA)


class _VarLength:
    """A batch sampler whose length changes per epoch (a curriculum, a re-bucketing loader)."""

    def __init__(self):
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return V_LENS[self.epoch]

    def __iter__(self):
        for b in range(V_LENS[self.epoch]):
            yield [(self.epoch * 7 + b * V_ROWS_PER_BATCH + i) % V_ROWS for i in range(V_ROWS_PER_BATCH)]


def _var_run(tmp_path, epochs):
    """The ledger of the sampler over ``epochs``, what it yielded per epoch, the data and a log that
    counts micro-batches from 0 across the epochs (NaN at ``bad``)."""
    sampler = _VarLength()
    rec = record_batches(sampler, tmp_path / "run", rank=0, grad_accum=V_GA)
    seen = []
    for e in epochs:
        sampler.set_epoch(e)
        rec.set_epoch(e)
        seen.append([list(b) for b in rec])
    del rec
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "part.jsonl").write_text(
        "".join(json.dumps({"x1": float(i), "x2": 1.0, "label": i % 2}) + "\n" for i in range(V_ROWS)))
    (tmp_path / "dc.toml").write_text('[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n')
    return seen


def _var_trace(tmp_path, bad, total):
    (tmp_path / "log.jsonl").write_text("".join(
        json.dumps({"step": k, "loss": float("nan") if k == bad else 2.0}) + "\n" for k in range(total)))
    return run_cli("trace", str(tmp_path / "log.jsonl"), "--data", str(tmp_path / "data"), "--config",
                   str(tmp_path / "dc.toml"), "--ledger", str(tmp_path / "run"), "--step-unit", "micro-batch",
                   "--first-step", "0", "--format", "json", "--no-progress")


def test_a_ledger_of_epochs_of_different_lengths_is_joined_epoch_by_epoch(tmp_path):
    seen = _var_run(tmp_path, range(len(V_LENS)))
    assert [len(e) for e in seen] == list(V_LENS)
    epoch, mb = 2, 2  # log step = the micro-batches of epochs 0 and 1, then mb
    bad = sum(V_LENS[:epoch]) + mb
    steps_before = sum(math.ceil(m / V_GA) for m in V_LENS[:epoch])  # each epoch's last step takes the remainder
    r = _var_trace(tmp_path, bad, sum(V_LENS))
    assert r.returncode == 1, r.stdout + r.stderr
    res = json.loads(r.stdout)["result"]
    assert res["data"]["audited_optimizer_steps"] == [steps_before + mb // V_GA] * 2
    assert res["data"]["rows"]["steps"][str(bad)] == {"0": seen[epoch][mb]}
    assert res["data"]["convention"]["epoch_counts"] == list(V_LENS)


def test_a_ledger_missing_an_epoch_between_different_lengths_is_refused(tmp_path):
    _var_run(tmp_path, (0, 2))  # epoch 1 not recorded: where epoch 2 starts in the count is unknown
    r = _var_trace(tmp_path, V_LENS[0] + 1, V_LENS[0] + V_LENS[2])
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"epoch 0: {V_LENS[0]}, epoch 2: {V_LENS[2]}) and epoch(s) [1] are not recorded" in r.stderr


def _ledger_of(folder, shares: dict[int, list[int]], ga: int) -> None:
    """A ledger whose rank r holds ``shares[r][e]`` micro-batches in epoch e (one row each)."""
    folder.mkdir()
    for rank, counts in shares.items():
        lines, step = ["#datacheck-ledger\t1\n"], 0
        for e, m in enumerate(counts):
            st = {"epoch": e, "batches": m, "grad_accum": ga, "rank": rank, "start_step": step}
            lines.append("#state\t" + json.dumps(st, sort_keys=True) + "\n")
            lines += [f"{step + k // ga}\t{rank}\t{k % ga}\t{e}\t{k}\n" for k in range(m)]
            step += -(-m // ga)  # each rank counts its own steps over its own epochs
        with gzip.open(folder / f"rank{rank}.tsv.gz", "wt") as f:
            f.write("".join(lines))


def test_ranks_counts_differing_take_the_main_process_s(tmp_path):
    """accelerate's even_batches=False: process 0 gets 5 micro-batches an epoch, process 1 gets 4; the log
    (the main process's) counts 5 an epoch. Before, the differing counts gave None (the plain count)."""
    _ledger_of(tmp_path / "both", {0: [5, 5], 1: [4, 4]}, 2)
    assert ledger_epoch_micro_batches(tmp_path / "both", 2) == (5,)
    _ledger_of(tmp_path / "changing", {0: [5, 3], 1: [4, 3]}, 2)
    assert ledger_epoch_micro_batches(tmp_path / "changing", 2) == (5, 3)
    _ledger_of(tmp_path / "no_main", {1: [5, 5], 2: [4, 4]}, 2)  # rank 0's ledger left out: refused, not guessed
    with pytest.raises(UsageError, match="rank 0's, the main process"):
        ledger_epoch_micro_batches(tmp_path / "no_main", 2)
