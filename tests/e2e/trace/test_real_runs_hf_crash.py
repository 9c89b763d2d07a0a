"""A real Hugging Face Trainer run (CPU, ``DatacheckCallback``) that crashes: the model's embedding
raises ``IndexError`` on a token id equal to the vocabulary size, so ``Trainer.train()`` ends with an
exception, the process exits through it, and the log ends at the last checkpoint's ``trainer_state.json``.

The callback records a micro-batch only once the Trainer trained it, so the crashing micro-batch is in
no step of the ledger: it once was nowhere at all, and ``trace OUT/ --data`` audited only the trained
steps after the log's end, saying the run "stopped in one of them", and never named the row. The
recorder's finalizer (the interpreter's exit) now writes an ``#in_flight`` line naming the micro-batches
the Trainer held when the process stopped without ending the training; trace audits them at their step.

Data: 96 rows of 8 token ids below 50, one row holding the id 50, placed in the batch of 0-based optimizer
step 5 (the Trainer's step 6) from the Trainer's order (accelerate's SeedableRandomSampler:
``torch.randperm(96)`` from a generator seeded ``seed + epoch``); the rows the model's forward saw
confirm it. The run is a subprocess, so its exit is a real one. Expected values computed here.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from realruns import place, trace_json, write_shards

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")
pytestmark = pytest.mark.slow  # a Trainer run in a fresh process

import datacheck  # noqa: E402

ROOT = Path(datacheck.__file__).resolve().parents[1]  # the datacheck this test runs, for the subprocess
N, SIZES, L, V, B, SEED, STEP, POS = 96, (40, 56), 8, 50, 8, 42, 5, 2

SCRIPT = r'''
import json, sys, torch, transformers
from datacheck.torch.hf import DatacheckCallback
root = sys.argv[1]
rows = json.load(open(root + "/rows.json"))
seen = open(root + "/seen.jsonl", "w")

class Rows(torch.utils.data.Dataset):
    def __len__(self):
        return len(rows)
    def __getitem__(self, i):
        return {"input_ids": torch.tensor(rows[i]["input_ids"]), "labels": torch.tensor(rows[i]["labels"]),
                "idx": torch.tensor(i)}

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(%(V)d, 8)
        self.head = torch.nn.Linear(8, %(V)d)
    def forward(self, input_ids, labels, idx):
        seen.write(json.dumps(idx.tolist()) + "\n"); seen.flush()
        logits = self.head(self.emb(input_ids))
        return {"loss": torch.nn.functional.cross_entropy(logits.transpose(1, 2), labels), "logits": logits}

torch.manual_seed(0)
args = transformers.TrainingArguments(root + "/out", use_cpu=True, per_device_train_batch_size=%(B)d,
    num_train_epochs=1, logging_steps=1, save_strategy="steps", save_steps=2, seed=%(SEED)d, report_to=[],
    disable_tqdm=True, remove_unused_columns=False)
transformers.Trainer(model=Model(), args=args, train_dataset=Rows(), callbacks=[DatacheckCallback()]).train()
''' % {"V": V, "B": B, "SEED": SEED}


def _perm() -> list[int]:
    g = torch.Generator()
    g.manual_seed(SEED + 0)
    return torch.randperm(N, generator=g).tolist()


def test_the_crashing_micro_batch_is_named(tmp_path):
    bad = _perm()[STEP * B + POS]
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, V, (N, L), generator=g).tolist()
    ids[bad][3] = V  # the embedding's IndexError
    rows = [{"input_ids": r, "labels": r} for r in ids]
    write_shards(tmp_path / "data", rows, SIZES)
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    (tmp_path / "run.py").write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run([sys.executable, str(tmp_path / "run.py"), str(tmp_path)], env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode != 0 and "IndexError" in p.stderr, p.stderr[-2000:]
    seen = [json.loads(x) for x in (tmp_path / "seen.jsonl").read_text().splitlines()]
    assert bad in seen[-1] and len(seen) == STEP + 1  # the crash: in the forward of step 5's batch
    from datacheck.io.ledger import read_ledger
    led = read_ledger(tmp_path / "out")
    assert STEP not in led.steps and max(led.steps) == STEP - 1  # trained steps only
    # the micro-batch being trained first, then what accelerate had fetched ahead
    assert min(led.in_flight[0]) == STEP and list(led.in_flight[0][STEP][0].indices) == seen[-1]
    (tmp_path / "datacheck.toml").write_text(f"[tokens]\nvocab_size = {V}\n")
    rc, res, err = trace_json(str(tmp_path / "out"), "--data", str(tmp_path / "data"), "--config",
                              str(tmp_path / "datacheck.toml"))
    assert rc == 1, err
    d = res["data"]
    hf_step = STEP + 1  # the Trainer's count
    assert d["audited_steps"][0] <= hf_step <= d["audited_steps"][1] and d["unlogged_tail"] is True
    assert d["rows"]["steps"][str(hf_step)]["0"] == seen[-1]
    assert d["rows"]["row_checks"] == {str(bad): ["tokens.out_of_vocab:input_ids", "labels.out_of_range:labels"]}
    shard, row = place(bad, SIZES)
    failing = d["rows"]["failing_rows"]
    assert [(f["shard"], f["shard_row"]) for f in failing] == [(shard, row)]
    assert "in flight when the process stopped without ending the training (its #in_flight line: received by the " \
           "training loop, not trained to the end; a crash, an interrupt) at optimizer step" in d["message"]
    assert failing[0]["at"] == [{"step": hf_step, "rank": 0, "micro_batch": 0}]
