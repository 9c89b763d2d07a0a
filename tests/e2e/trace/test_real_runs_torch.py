"""Real CPU runs in plain torch loops, traced back to their rows: every expected step, rank, global row,
shard and shard row is computed here from the data and the sampler arithmetic (torch's
DistributedSampler replayed from its seeding rule, the batches the loop itself took), never read back
from datacheck.

- ``plain``: an MLP over 2,000 rows in 3 JSONL shards, ``DistributedSampler(shuffle, seed 42)``, batch
  16, ``grad_accum`` 2, ``record_batches``; one NaN feature at global row 1234; the loop logs its
  optimizer step 0-based (``metrics0.jsonl``) and 1-based (``metrics1.jsonl``, as Hugging Face and
  Megatron count);
- ``clean``: the same run without the NaN (the control: no anomaly, no rows);
- ``resume``: a run that stops mid-epoch (its process exits with the loader's iterator still referenced)
  and is resumed from an earlier checkpoint without the LR scheduler's state (the warmup starts again),
  re-reading the epoch and skipping the trained batches; an inf target after the resume;
- ``budget``: token rows batched by ``TokenBudgetBatchSampler`` (token budget 64); one micro-batch whose
  labels are all ``ignore_index`` (its mean cross-entropy is 0/0 = NaN).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from realruns import SHARD_NAMES, cli, distributed_order, place, step_of, trace_json, write_shards

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, DistributedSampler  # noqa: E402

from datacheck.io.ledger import read_ledger  # noqa: E402
from datacheck.torch import TokenBudgetBatchSampler, record_batches  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
N, SIZES, BATCH, GA, SEED, BAD = 2000, (700, 600, 700), 16, 2, 42, 1234
FEATURES = '[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n'
BATCH_FACTS = f"[batch]\nbatch_size = {BATCH}\nworld_size = 1\ngrad_accum = {GA}\nseed = {SEED}\n"


def _rows(bad: bool) -> list[dict]:
    g = torch.Generator().manual_seed(3)
    x = torch.randn(N, 2, generator=g)
    rows = [{"x1": float(a), "x2": float(b), "label": int(a + b > 0)} for a, b in x.tolist()]
    if bad:
        rows[BAD]["x1"] = float("nan")
    return rows


def _plain_run(root: Path, bad: bool) -> Path:
    rows = _rows(bad)
    write_shards(root / "data", rows, SIZES)
    (root / "run").mkdir()
    (root / "datacheck.toml").write_text(FEATURES + BATCH_FACTS)
    x = torch.tensor([[r["x1"], r["x2"]] for r in rows])
    y = torch.tensor([r["label"] for r in rows])
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    sampler = DistributedSampler(list(range(N)), num_replicas=1, rank=0, shuffle=True, seed=SEED)
    loader = record_batches(DataLoader(list(range(N)), batch_size=BATCH, sampler=sampler), root / "run", grad_accum=GA)
    sampler.set_epoch(0)
    step, acc = 0, 0.0
    with open(root / "run" / "metrics0.jsonl", "w") as log0, open(root / "run" / "metrics1.jsonl", "w") as log1:
        for k, idx in enumerate(loader):
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx]) / GA
            loss.backward()
            acc += loss.item()
            if (k + 1) % GA == 0 or k + 1 == len(loader):
                gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9).item()
                opt.step()
                opt.zero_grad()
                log0.write(json.dumps({"step": step, "loss": acc, "grad_norm": gn, "lr": 0.05}) + "\n")
                log1.write(json.dumps({"step": step + 1, "loss": acc, "grad_norm": gn, "lr": 0.05}) + "\n")
                step, acc = step + 1, 0.0
    return root


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    root = _plain_run(tmp_path_factory.mktemp("plain"), bad=True)
    order = distributed_order(torch, N, 1, 0, SEED)
    s, mb = step_of(order, BAD, BATCH, GA)
    return root, s, mb


def _args(root: Path, *extra: str) -> list[str]:
    return ["--data", str(root / "data"), "--config", str(root / "datacheck.toml"), *extra]


@pytest.mark.slow  # the run takes 5 s or more
def test_plain_run_went_bad_where_the_sampler_put_the_row(plain):
    root, s, mb = plain
    log = [json.loads(line) for line in (root / "run" / "metrics0.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if r["loss"] != r["loss"]][:1] == [s]  # NaN first at the step of row 1234
    led = read_ledger(root / "run")  # the whole epoch recorded, the row where the arithmetic puts it
    assert led.steps == list(range(63)) and led.partial == {} and led.truncated == []
    assert [b.micro_batch for b in led.batches[0][s] if BAD in b.indices] == [mb]


def _names_the_row(res: dict, step: int, rank: int = 0, bad: int = BAD, check: str = "finite.nan:x1") -> None:
    rows = res["data"]["rows"]
    assert bad in rows["steps"][str(step)][str(rank)]
    assert rows["row_checks"] == {str(bad): [check]}
    f = [x for x in rows["findings"] if x["check"] == check.split(":")[0]]
    assert f and f[0]["rows"] == [bad]


#: the text output naming a failing row's shard and its row in that shard ("part-00001.jsonl row 534")


@pytest.mark.slow  # the run takes 5 s or more
def test_zero_based_log_with_the_ledger(plain):
    root, s, _ = plain
    rc, res, err = trace_json(str(root / "run" / "metrics0.jsonl"), *_args(root, "--ledger", str(root / "run"),
                                                                              "--first-step", "0"))
    assert rc == 1, err
    assert res["first_bad"]["check"] == "log.non_finite" and res["first_bad"]["step"] == s
    assert res["data"]["source"]["kind"] == "ledger" and res["data"]["source"]["gaps"] == []
    _names_the_row(res, s)


@pytest.mark.slow  # the run takes 5 s or more
def test_one_based_log_with_the_simulated_plan(plain):
    root, s, _ = plain
    rc, res, err = trace_json(str(root / "run" / "metrics1.jsonl"), *_args(root))
    assert rc == 1, err
    assert res["first_bad"]["step"] == s + 1 and res["data"]["source"]["kind"] == "plan"
    _names_the_row(res, s + 1)


@pytest.mark.slow
def test_one_based_log_with_the_ledger(plain):
    root, s, _ = plain
    rc, res, err = trace_json(str(root / "run" / "metrics1.jsonl"), *_args(root, "--ledger", str(root / "run")))
    assert rc == 1, err
    assert res["first_bad"]["step"] == s + 1
    rows = res["data"]["rows"]  # the audited step (keyed by log or optimizer step) holds the row
    assert [g for ranks in rows["steps"].values() for r in ranks.values() for g in r].count(BAD) == 1
    assert rows["row_checks"] == {str(BAD): ["finite.nan:x1"]}


@pytest.mark.slow
def test_text_names_shard_and_shard_row(plain):
    root, s, _ = plain
    shard, row = place(BAD, SIZES)
    rc, out, _ = cli("trace", str(root / "run" / "metrics0.jsonl"), *_args(root, "--ledger", str(root / "run"),
                                                                          "--first-step", "0"))
    assert rc == 1 and f"{shard} row {row}" in out


@pytest.mark.slow  # the run takes 5 s or more
def test_clean_control_names_nothing(tmp_path):
    root = _plain_run(tmp_path, bad=False)
    for log, extra in (("metrics1.jsonl", ()), ("metrics0.jsonl", ("--ledger", str(root / "run"), "--first-step", "0"))):
        rc, res, err = trace_json(str(root / "run" / log), *_args(root, *extra))
        assert rc == 0, err
        assert res["first_bad"] is None and [f["check"] for f in res["findings"] if f["severity"] == "error"] == []
        assert res["data"]["rows"] is None and res["data"]["message"].startswith("no anomaly")


# -- resume: a run stopped mid-epoch, resumed from a checkpoint without its scheduler state -----------------
R_N, R_SIZES, R_BATCH, R_SEED, R_STOP, R_CKPT, R_BAD_POS = 600, (200, 250, 150), 8, 5, 30, 20, 50 * 8 + 3
_RESUME = textwrap.dedent('''
    import json, sys, torch
    from pathlib import Path
    from torch.utils.data import DataLoader, DistributedSampler
    from datacheck.torch import record_batches
    root, phase = Path(sys.argv[1]), sys.argv[2]
    rows = json.loads((root / "rows.json").read_text())
    x = torch.tensor([[r["x1"], r["x2"]] for r in rows]); y = torch.tensor([r["y"] for r in rows])
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 10))  # 10 warmup steps
    start = 0
    if phase == "resume":  # model and optimizer restored; the scheduler's state was not saved: warmup again
        ck = torch.load(root / "ckpt.pt", weights_only=True)
        model.load_state_dict(ck["model"]); opt.load_state_dict(ck["opt"]); start = ck["step"]
    sampler = DistributedSampler(list(range(len(rows))), num_replicas=1, rank=0, shuffle=True, seed={seed})
    loader = record_batches(DataLoader(list(range(len(rows))), batch_size={batch}, sampler=sampler), root / "run",
                            start_step=0)  # the epoch is read again from its start; trained batches skipped
    sampler.set_epoch(0)
    it = iter(loader)
    with open(root / "run" / "metrics.jsonl", "a") as log:
        for step, idx in enumerate(it):
            if step < start:
                continue
            if phase == "first" and step == {stop}:
                break  # the process ends here, mid-epoch, with the iterator still referenced
            if phase == "first" and step == {ckpt}:
                torch.save({{"model": model.state_dict(), "opt": opt.state_dict(), "step": step}}, root / "ckpt.pt")
            loss = torch.nn.functional.mse_loss(model(x[idx]).squeeze(1), y[idx])
            opt.zero_grad(); loss.backward()
            gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9).item()
            lr = opt.param_groups[0]["lr"]
            opt.step(); sched.step()
            log.write(json.dumps({{"step": step, "loss": loss.item(), "grad_norm": gn, "lr": lr}}) + "\\n")
''').format(seed=R_SEED, batch=R_BATCH, stop=R_STOP, ckpt=R_CKPT)


@pytest.fixture(scope="module")
def resumed(tmp_path_factory):
    root = tmp_path_factory.mktemp("resume")
    order = distributed_order(torch, R_N, 1, 0, R_SEED)
    bad = order[R_BAD_POS]  # the row at batch 50, position 3: after the resume (steps 20.. re-run from the checkpoint)
    g = torch.Generator().manual_seed(5)
    x = torch.randn(R_N, 2, generator=g)
    rows = [{"x1": float(a), "x2": float(b), "y": float(a - b)} for a, b in x.tolist()]
    rows[bad]["y"] = float("inf")
    write_shards(root / "data", rows, R_SIZES)
    (root / "rows.json").write_text(json.dumps(rows))
    (root / "run").mkdir()
    (root / "datacheck.toml").write_text('[columns]\nfeatures = ["x1", "x2"]\ntarget = "y"\n')
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    first = subprocess.run([sys.executable, "-c", _RESUME, str(root), "first"], env=env, capture_output=True,
                           text=True, timeout=300)
    assert first.returncode == 0 and "Exception ignored" not in first.stderr, first.stderr
    after_first = read_ledger(root / "run")
    again = subprocess.run([sys.executable, "-c", _RESUME, str(root), "resume"], env=env, capture_output=True,
                           text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    return root, bad, R_BAD_POS // R_BATCH, after_first, order


@pytest.mark.slow
def test_the_stopped_run_kept_every_batch_it_took(resumed):
    _, _, _, after_first, order = resumed
    # the loop took R_STOP + 1 batches (the last one fetched, then the loop broke) and exited: all on disk
    got = [(b.step, list(b.indices)) for s in sorted(after_first.batches[0]) for b in after_first.batches[0][s]]
    assert got == [(k, order[k * R_BATCH:(k + 1) * R_BATCH]) for k in range(R_STOP + 1)]


@pytest.mark.slow
def test_resume_without_scheduler_state_names_step_and_row(resumed):
    root, bad, step, _, _ = resumed
    rc, res, err = trace_json(str(root / "run" / "metrics.jsonl"), "--data", str(root / "data"), "--config",
                              str(root / "datacheck.toml"), "--ledger", str(root / "run"), "--first-step", "0")
    assert rc == 1, err
    assert res["first_bad"]["check"] == "log.non_finite" and res["first_bad"]["step"] == step
    assert [(e["from_step"], e["step"]) for e in res["events"] if e["kind"] == "resume"] == [(R_STOP - 1, R_CKPT)]
    rows = res["data"]["rows"]
    assert bad in rows["steps"][str(step)]["0"] and rows["row_checks"] == {str(bad): ["finite.inf:y"]}
    f = [x for x in rows["findings"] if x["check"] == "finite.inf"]
    assert f[0]["rows"] == [bad]


@pytest.mark.slow
def test_resume_text_names_shard_and_shard_row(resumed):
    root, bad, _, _, _ = resumed
    shard, row = place(bad, R_SIZES)
    rc, out, _ = cli("trace", str(root / "run" / "metrics.jsonl"), "--data", str(root / "data"), "--config",
                     str(root / "datacheck.toml"), "--ledger", str(root / "run"), "--first-step", "0")
    assert rc == 1 and f"{shard} row {row}" in out


# -- token-budget batching: a micro-batch whose labels are all ignore_index ---------------------------------
T_N, T_SIZES, T_BUDGET, T_SEED, T_VOCAB, T_BAD_BATCH = 240, (80, 90, 70), 64, 11, 30, 9


@pytest.fixture(scope="module")
def budget(tmp_path_factory):
    root = tmp_path_factory.mktemp("budget")
    g = torch.Generator().manual_seed(9)
    lengths = torch.randint(3, 17, (T_N,), generator=g).tolist()
    ids = [torch.randint(1, T_VOCAB, (n,), generator=g).tolist() for n in lengths]
    sampler = TokenBudgetBatchSampler(lengths, T_BUDGET, num_replicas=1, rank=0, seed=T_SEED)
    sampler.set_epoch(0)
    batches = [list(b) for b in sampler]  # the order the loop below trains in (the sampler it uses)
    bad_rows = sorted(batches[T_BAD_BATCH])
    rows = [{"input_ids": ids[i], "labels": [-100] * len(ids[i]) if i in bad_rows else ids[i]} for i in range(T_N)]
    write_shards(root / "data", rows, T_SIZES)
    (root / "run").mkdir()
    (root / "datacheck.toml").write_text(f"[labels]\nignore_index = -100\n[tokens]\nvocab_size = {T_VOCAB}\n"
                                         f"[batch]\nmax_tokens = {T_BUDGET}\nseed = {T_SEED}\n")
    torch.manual_seed(0)
    emb, head = torch.nn.Embedding(T_VOCAB, 8), torch.nn.Linear(8, T_VOCAB)
    opt = torch.optim.SGD([*emb.parameters(), *head.parameters()], lr=0.1)
    rec = record_batches(TokenBudgetBatchSampler(lengths, T_BUDGET, num_replicas=1, rank=0, seed=T_SEED), root / "run")
    rec.set_epoch(0)
    seen = []
    with open(root / "run" / "log0.jsonl", "w") as log0, open(root / "run" / "log1.jsonl", "w") as log1:
        for step, b in enumerate(rec):
            seen.append(sorted(b))
            width = max(len(ids[i]) for i in b)
            inp = torch.tensor([ids[i] + [0] * (width - len(ids[i])) for i in b])
            lab = torch.tensor([rows[i]["labels"] + [-100] * (width - len(ids[i])) for i in b])
            loss = torch.nn.functional.cross_entropy(head(emb(inp)).reshape(-1, T_VOCAB), lab.reshape(-1),
                                                     ignore_index=-100)  # mean over 0 tokens: NaN
            opt.zero_grad()
            loss.backward()
            opt.step()
            log0.write(json.dumps({"step": step, "loss": loss.item()}) + "\n")
            log1.write(json.dumps({"step": step + 1, "loss": loss.item()}) + "\n")
    assert seen == [sorted(b) for b in batches]
    return root, bad_rows


def _names_unsupervised(res: dict, step: int, bad_rows: list[int]) -> None:
    rows = res["data"]["rows"]
    assert sorted(rows["steps"][str(step)]["0"]) == bad_rows
    assert rows["supervised_tokens"][str(step)] == {"0": 0}
    assert {int(k) for k, v in rows["row_checks"].items() if "empty.no_supervised_tokens:labels" in v} == set(bad_rows)
    f = [x for x in rows["findings"] if x["check"] == "empty.no_supervised_tokens"]
    assert sorted(r for x in f for r in x["rows"]) == bad_rows


def test_token_budget_zero_based_log_with_the_ledger(budget):
    root, bad_rows = budget
    rc, res, err = trace_json(str(root / "run" / "log0.jsonl"), "--data", str(root / "data"), "--config",
                              str(root / "datacheck.toml"), "--ledger", str(root / "run"), "--first-step", "0")
    assert rc == 1, err
    assert res["first_bad"]["step"] == T_BAD_BATCH
    _names_unsupervised(res, T_BAD_BATCH, bad_rows)


def test_token_budget_one_based_log_with_the_simulated_plan(budget):
    root, bad_rows = budget
    rc, res, err = trace_json(str(root / "run" / "log1.jsonl"), "--data", str(root / "data"), "--config",
                              str(root / "datacheck.toml"))
    assert rc == 1, err
    assert res["first_bad"]["step"] == T_BAD_BATCH + 1 and res["data"]["source"]["kind"] == "plan"
    _names_unsupervised(res, T_BAD_BATCH + 1, bad_rows)


def test_token_budget_text_names_shard_and_shard_row(budget):
    root, bad_rows = budget
    assert sorted(p.name for p in (root / "data").iterdir()) == list(SHARD_NAMES)
    rc, out, _ = cli("trace", str(root / "run" / "log0.jsonl"), "--data", str(root / "data"), "--config",
                     str(root / "datacheck.toml"), "--ledger", str(root / "run"), "--first-step", "0")
    assert rc == 1
    for g in bad_rows:
        shard, row = place(g, T_SIZES)
        assert f"{shard} row {row}" in out
