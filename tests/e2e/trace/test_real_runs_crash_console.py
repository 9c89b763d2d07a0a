"""A real CPU run that crashes, traced from its console alone (no ledger): a plain torch loop (a
``DataLoader`` over ``DistributedSampler(num_replicas=1, shuffle=True, seed)``, the plan's default
loader) prints ``step N loss X`` every K optimizer steps and dies on an ``IndexError`` from
``nn.Embedding`` on a token id planted one past the vocabulary. Its console (stdout and stderr in one
file) ends in the Python traceback. ``trace console.log --data`` once said "no anomaly and no --step:
no rows to audit"; it now names the crash (the exception's line and its number) and audits the steps
after the last logged one up to the next it would have logged, from the plan, naming the planted row.

Data: 160 rows of 12 token ids below V from generator seed 0 (no real text needed: the row's content
is not what is traced), one id set to V in the row the sampler (seed 7) puts at position 3 of the batch
of 0-based optimizer step CRASH. The run is a subprocess, so its traceback is Python's own. Expected
values computed here from the sampler arithmetic and checked against the batches the loop took.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from realruns import distributed_order, place, trace_json, write_shards

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # a training loop in a fresh process

N, SIZES, L, V, B, SEED, K, CRASH, POS = 160, (70, 90), 12, 30, 8, 7, 5, 12, 3

SCRIPT = r'''
import json, sys, torch, traceback
root, tqdm_bar, caught = sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1"
rows = json.load(open(root + "/rows.json"))
sampler = torch.utils.data.DistributedSampler(list(range(len(rows))), num_replicas=1, rank=0, shuffle=True,
                                              seed=%(SEED)d)
loader = torch.utils.data.DataLoader(list(range(len(rows))), batch_size=%(B)d, sampler=sampler)
torch.manual_seed(0)
emb, head = torch.nn.Embedding(%(V)d, 8), torch.nn.Linear(8, %(V)d)
opt = torch.optim.SGD([*emb.parameters(), *head.parameters()], lr=0.1)
taken = open(root + "/taken.jsonl", "w")
for k, idx in enumerate(loader):
    taken.write(json.dumps(idx.tolist()) + "\n"); taken.flush()
    x = torch.tensor([rows[i]["input_ids"] for i in idx.tolist()])
    logits = head(emb(x[:, :-1]))  # IndexError: index out of range in self, on the planted id
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, %(V)d), x[:, 1:].reshape(-1))
    opt.zero_grad(); loss.backward(); opt.step()
    if tqdm_bar:  # a progress bar redrawn with \r on the same console, as tqdm writes it
        sys.stderr.write(f"\r{k + 1}/{len(loader)} [00:00<00:01, 9.00it/s]"); sys.stderr.flush()
    if caught and k == 7:  # a healthy run that logs an exception it caught, and the word in a message
        try:
            emb(torch.tensor([%(V)d]))
        except IndexError:
            print("probe failed, carrying on:", flush=True)
            traceback.print_exc(); sys.stderr.flush()
        print("note: a Traceback (most recent call last): line in a message is no crash", flush=True)
    if (k + 1) %% %(K)d == 0:
        print(f"step {k + 1} loss {loss.item():.4f}", flush=True)
''' % {"SEED": SEED, "B": B, "V": V, "K": K}


def _run(root: Path, tqdm_bar: bool, caught: bool = False) -> tuple[int, list[list[int]], Path]:
    """Write the data and run the loop until it crashes (``caught``: no planted row, a healthy run that
    logs a traceback it caught); (the planted row, the batches the loop took, the console log)."""
    order = distributed_order(torch, N, 1, 0, SEED)
    bad = order[CRASH * B + POS]
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, V, (N, L), generator=g).tolist()
    if not caught:
        ids[bad][4] = V  # one past the vocabulary
    rows = [{"input_ids": r} for r in ids]
    write_shards(root / "data", rows, SIZES)
    (root / "rows.json").write_text(json.dumps(rows))
    (root / "run.py").write_text(SCRIPT)
    (root / "datacheck.toml").write_text(f"[tokens]\nvocab_size = {V}\n\n[batch]\nbatch_size = {B}\nseed = {SEED}\n")
    console = root / "console.log"
    with open(console, "w") as f:
        p = subprocess.run([sys.executable, str(root / "run.py"), str(root), "1" if tqdm_bar else "0",
                            "1" if caught else "0"],
                           stdout=f, stderr=subprocess.STDOUT, timeout=300, env={**os.environ})
    assert (p.returncode == 0) == caught
    taken = [json.loads(x) for x in (root / "taken.jsonl").read_text().splitlines()]
    return bad, taken, console


@pytest.mark.parametrize("tqdm_bar", [False, True])
def test_the_crash_and_the_planted_row_are_named_from_the_console(tmp_path, tqdm_bar):
    bad, taken, console = _run(tmp_path, tqdm_bar)
    order = distributed_order(torch, N, 1, 0, SEED)
    assert len(taken) == CRASH + 1 and bad in taken[-1]  # it crashed in 0-based step CRASH's forward
    assert taken == [order[i * B:(i + 1) * B] for i in range(CRASH + 1)]  # the plan's arithmetic, as run
    lines = console.read_bytes().decode().split("\n")  # numbered as grep -n does: tqdm's \r ends no line
    exc_line = next(i + 1 for i, t in enumerate(lines) if t.startswith("IndexError"))
    tb_line = next(i + 1 for i, t in enumerate(lines) if t.endswith("Traceback (most recent call last):"))
    last_logged = (CRASH // K) * K  # 1-based steps logged every K: the last before the crash's step CRASH + 1
    lo, hi = last_logged + 1, last_logged + K
    assert lo <= CRASH + 1 <= hi
    rc, res, err = trace_json(str(console), "--data", str(tmp_path / "data"), "--config",
                              str(tmp_path / "datacheck.toml"))
    assert rc == 1, err  # the planted row fails the policy
    assert res["first_bad"] is None  # the log's values hold no anomaly: it just ends in a traceback
    crash = res["logs"][0]["crash"]
    assert (crash["line"], crash["traceback_line"], crash["exception"], crash["rank"]) == \
        (exc_line, tb_line, "IndexError", None)
    assert crash["message"] == "index out of range in self"
    d = res["data"]
    assert d["audited_steps"] == [lo, hi] and d["audited_optimizer_steps"] == [lo - 1, hi - 1]
    assert d["crash_tail"] is True and d["unlogged_tail"] is False
    for s in range(lo, hi + 1):
        assert d["rows"]["steps"][str(s)]["0"] == order[(s - 1) * B:s * B]
    shard, row = place(bad, SIZES)
    failing = d["rows"]["failing_rows"]
    assert [(f["shard"], f["shard_row"], f["row"]) for f in failing] == [(shard, row, bad)]
    assert d["rows"]["row_checks"] == {str(bad): ["tokens.out_of_vocab:input_ids"]}
    assert failing[0]["at"] == [{"step": CRASH + 1, "rank": 0, "micro_batch": 0}]
    assert f"IndexError: index out of range in self (a Python traceback from line {tb_line})" in d["message"]
    assert f"log step {last_logged} (optimizer step {last_logged - 1}), logged every {K} step(s)" in d["message"]
    assert f"one of log steps {lo}..{hi}" in d["message"]
    answer = res["verdict"]["answers"]["rows"]["answer"]
    assert f"row {row} (global {bad})" in answer and "the run crashed" in answer
    rc, out, _ = _text(console, tmp_path)
    assert f"console.log line {exc_line}: IndexError: index out of range in self" in out
    assert "1. from which step: no anomaly at warn or above; the run crashed:" in out


def _text(console: Path, root: Path) -> tuple[int, str, str]:
    from realruns import cli
    return cli("trace", str(console), "--data", str(root / "data"), "--config", str(root / "datacheck.toml"))


def test_a_healthy_run_that_logged_a_caught_traceback_did_not_crash(tmp_path):
    _, taken, console = _run(tmp_path, True, caught=True)
    text = console.read_bytes().decode()
    assert len(taken) == N // B and text.count("Traceback (most recent call last):") == 2  # printed, caught
    assert "IndexError: index out of range in self" in text and f"step {N // B} loss" in text
    rc, res, err = trace_json(str(console), "--data", str(tmp_path / "data"), "--config",
                              str(tmp_path / "datacheck.toml"))
    assert rc == 0, err
    assert res["logs"][0]["crash"] is None and res["first_bad"] is None
    assert res["data"]["rows"] is None and res["data"]["message"] == "no anomaly and no --step: no rows to audit"


HF_SCRIPT = r'''
import json, sys, torch, transformers
root = sys.argv[1]
rows = json.load(open(root + "/rows.json"))
seen = open(root + "/seen.jsonl", "w")

class Rows(torch.utils.data.Dataset):
    def __len__(self):
        return len(rows)
    def __getitem__(self, i):
        return {"input_ids": torch.tensor(rows[i]["input_ids"]), "idx": torch.tensor(i)}

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(%(V)d, 8)
        self.head = torch.nn.Linear(8, %(V)d)
    def forward(self, input_ids, idx):
        seen.write(json.dumps(idx.tolist()) + "\n"); seen.flush()
        logits = self.head(self.emb(input_ids[:, :-1]))
        return {"loss": torch.nn.functional.cross_entropy(logits.transpose(1, 2), input_ids[:, 1:]), "logits": logits}

torch.manual_seed(0)
args = transformers.TrainingArguments(root + "/out", use_cpu=True, per_device_train_batch_size=%(B)d,
    num_train_epochs=1, logging_steps=%(K)d, save_strategy="no", seed=%(SEED)d, report_to=[],
    remove_unused_columns=False)
transformers.Trainer(model=Model(), args=args, train_dataset=Rows()).train()
'''
HF_K, HF_CRASH = 3, 7  # the Trainer logs every 3 steps (its count, from 1); the row in 0-based step 7's batch


def test_a_trainer_console_that_crashed_names_the_crash_and_the_row(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    import datacheck
    src = Path(datacheck.__file__).resolve().parents[1]
    g = torch.Generator()
    g.manual_seed(SEED + 0)
    perm = torch.randperm(N, generator=g).tolist()  # the Trainer's order: accelerate's seedable sampler, epoch 0
    bad = perm[HF_CRASH * B + POS]
    ids = torch.randint(0, V, (N, L), generator=torch.Generator().manual_seed(0)).tolist()
    ids[bad][4] = V
    rows = [{"input_ids": r} for r in ids]
    write_shards(tmp_path / "data", rows, SIZES)
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    (tmp_path / "run.py").write_text(HF_SCRIPT % {"V": V, "B": B, "SEED": SEED, "K": HF_K})
    (tmp_path / "datacheck.toml").write_text(f"[tokens]\nvocab_size = {V}\n\n[batch]\nbatch_size = {B}\nseed = {SEED}\n")
    console = tmp_path / "console.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")])}
    with open(console, "w") as f:
        p = subprocess.run([sys.executable, str(tmp_path / "run.py"), str(tmp_path)], stdout=f,
                           stderr=subprocess.STDOUT, timeout=300, env=env)
    text = console.read_bytes().decode()
    assert p.returncode != 0 and "IndexError: index out of range in self" in text, text[-2000:]
    seen = [json.loads(x) for x in (tmp_path / "seen.jsonl").read_text().splitlines()]
    assert len(seen) == HF_CRASH + 1 and seen[-1] == perm[HF_CRASH * B:(HF_CRASH + 1) * B] and bad in seen[-1]
    last_logged = (HF_CRASH // HF_K) * HF_K  # the Trainer's steps 3, 6: its step HF_CRASH + 1 = 8 unlogged
    lo, hi = last_logged + 1, last_logged + HF_K
    rc, res, err = trace_json(str(console), "--data", str(tmp_path / "data"), "--config",
                              str(tmp_path / "datacheck.toml"))
    assert rc == 1, err
    crash = res["logs"][0]["crash"]
    lines = text.split("\n")
    assert crash["exception"] == "IndexError" and crash["line"] == next(
        i + 1 for i, t in enumerate(lines) if t.startswith("IndexError: index out of range in self"))
    d = res["data"]
    assert d["audited_steps"] == [lo, hi] and d["crash_tail"] is True
    assert d["rows"]["steps"][str(HF_CRASH + 1)]["0"] == seen[-1]
    shard, row = place(bad, SIZES)
    assert [(f["shard"], f["shard_row"], f["row"]) for f in d["rows"]["failing_rows"]] == [(shard, row, bad)]


DDP_CRASH = 7  # 0-based; logged steps 5 (and 10, never reached)

DDP_SCRIPT = r'''
import json, sys, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
root = sys.argv[1]
rows = json.load(open(root + "/rows.json"))
sampler = torch.utils.data.DistributedSampler(list(range(len(rows))), num_replicas=world, rank=rank, shuffle=True,
                                              seed=%(SEED)d)
loader = torch.utils.data.DataLoader(list(range(len(rows))), batch_size=%(B)d, sampler=sampler)
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(torch.nn.Embedding(%(V)d, 8),
                                                                      torch.nn.Linear(8, %(V)d)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for k, idx in enumerate(loader):
    x = torch.tensor([rows[i]["input_ids"] for i in idx.tolist()])
    logits = model(x[:, :-1])  # IndexError on the planted id, on the rank that holds it
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, %(V)d), x[:, 1:].reshape(-1))
    opt.zero_grad(); loss.backward(); opt.step()
    if (k + 1) %% %(K)d == 0:
        print(f"step {k + 1} loss {loss.item():.4f}", flush=True)
'''


def test_a_torchrun_console_names_the_crashed_rank_and_the_row(tmp_path):
    """Two gloo ranks under ``torchrun --tee 3`` (each line prefixed ``[defaultN]:``; torch prints a rank's
    traceback with its own ``[rankN]:`` too): rank 1 dies on the planted id, rank 0 then on the closed
    connection, torchrun last with ``ChildFailedError`` (unprefixed)."""
    world = 2  # 80 rows a rank: 10 steps
    order1 = distributed_order(torch, N, world, 1, SEED)
    bad = order1[DDP_CRASH * B + POS]
    ids = torch.randint(0, V, (N, L), generator=torch.Generator().manual_seed(0)).tolist()
    ids[bad][4] = V
    rows = [{"input_ids": r} for r in ids]
    write_shards(tmp_path / "data", rows, SIZES)
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    (tmp_path / "run.py").write_text(DDP_SCRIPT % {"V": V, "B": B, "SEED": SEED, "K": K})
    (tmp_path / "datacheck.toml").write_text(f"[tokens]\nvocab_size = {V}\n\n[batch]\nbatch_size = {B}\n"
                                             f"world_size = {world}\nseed = {SEED}\n")
    console = tmp_path / "console.log"
    with open(console, "w") as f:
        p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                            str(world), "--tee", "3", str(tmp_path / "run.py"), str(tmp_path)], stdout=f,
                           stderr=subprocess.STDOUT, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    text = console.read_bytes().decode()
    assert p.returncode != 0 and "[rank1]: IndexError: index out of range in self" in text, text[-3000:]
    lines = text.split("\n")
    # the first exception line of a rank's traceback in the file (torchrun's tee may write either rank first)
    first = next(i + 1 for i, t in enumerate(lines) if re.match(r"\[default\d\]:\[rank\d\]: [\w.]+Error", t))
    who = int(re.match(r"\[default\d\]:\[rank(\d)\]", lines[first - 1]).group(1))
    last_logged = (DDP_CRASH // K) * K
    lo, hi = last_logged + 1, last_logged + K
    rc, res, err = trace_json(str(console), "--data", str(tmp_path / "data"), "--config",
                              str(tmp_path / "datacheck.toml"))
    assert rc == 1, err
    crash = res["logs"][0]["crash"]
    assert (crash["line"], crash["rank"]) == (first, who)
    if who == 1:
        assert crash["exception"] == "IndexError"
    assert f"console.log line {first} (rank {who}): " in res["data"]["message"]
    assert f"log step {last_logged} (optimizer step {last_logged - 1}), logged every {K} step(s) (its only logged " \
        "step, counted from the first step, 1)" in res["data"]["message"]
    d = res["data"]
    assert d["audited_steps"] == [lo, hi] and d["crash_tail"] is True
    for r in range(world):
        o = distributed_order(torch, N, world, r, SEED)
        assert d["rows"]["steps"][str(DDP_CRASH + 1)][str(r)] == o[DDP_CRASH * B:(DDP_CRASH + 1) * B]
    shard, row = place(bad, SIZES)
    failing = d["rows"]["failing_rows"]
    assert [(f["shard"], f["shard_row"], f["row"]) for f in failing] == [(shard, row, bad)]
    assert failing[0]["at"] == [{"step": DDP_CRASH + 1, "rank": 1, "micro_batch": 0}]
