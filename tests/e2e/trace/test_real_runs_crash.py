"""A real CPU run that crashes: the loop's embedding raises ``IndexError`` on an out-of-vocabulary token
id, so the log ends at the last step that trained and holds no anomaly at all. ``record_batches`` wrote
the crashing step's batches as the loop received them, before training them: ``trace --data --ledger``
with no anomaly and no ``--step`` audits the steps the ledger recorded past the log's end, says why, and
names the row (it once said "no anomaly and no --step: no rows to audit" and exited 0).

Data: tinyshakespeare (/work/shared/realdata/tinyshakespeare/input.txt, PROVENANCE: 1,115,394 bytes,
40,000 lines) cut into 240 rows of 16 character ids (vocabulary: the text's own characters); one id set
to the vocabulary size in a row the ``DistributedSampler`` (seed 11) puts in micro-batch 0 or 1 of
optimizer step 10 (batch 8, ``grad_accum`` 2). The loop logs each optimizer step after its update, from
1; the crash ends the process (``flush_ledgers`` stands for the interpreter's exit). Expected values
computed here from the sampler order and checked against the batches the loop took, never read back
from datacheck.
"""
from __future__ import annotations

import json

import pytest
from conftest import REALDATA
from realruns import distributed_order, trace_json

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # a training loop

TEXT = REALDATA / "tinyshakespeare" / "input.txt"
if not TEXT.is_file():
    pytest.skip("../shared/realdata is not present", allow_module_level=True)
N, L, B, GA, SEED, STEP = 240, 16, 8, 2, 11, 10


def _run(root, micro_batch: int | None):
    """Train until the crash (``micro_batch`` of step STEP holds the bad row; None: no bad row, the run
    ends); returns (the bad row, the micro-batches the loop took, whether it crashed)."""
    from datacheck.torch import flush_ledgers, record_batches

    raw = TEXT.read_bytes()
    assert len(raw) == 1_115_394 and raw.count(b"\n") == 40_000  # PROVENANCE
    text = raw.decode()
    chars = sorted(set(text))
    ids = [[chars.index(c) for c in text[i * L:(i + 1) * L]] for i in range(N)]
    order = distributed_order(torch, N, 1, 0, SEED)
    bad = None if micro_batch is None else order[(STEP * GA + micro_batch) * B + 3]
    if bad is not None:
        ids[bad][5] = len(chars)  # one past the vocabulary
    (root / "data").mkdir()
    with open(root / "data" / "part-00000.jsonl", "w") as f:
        for r in ids:
            f.write(json.dumps({"input_ids": r, "labels": r}) + "\n")
    (root / "datacheck.toml").write_text(f"[tokens]\nvocab_size = {len(chars)}\n")
    sampler = torch.utils.data.DistributedSampler(list(range(N)), num_replicas=1, rank=0, shuffle=True, seed=SEED)
    loader = record_batches(torch.utils.data.DataLoader(list(range(N)), batch_size=B, sampler=sampler),
                            root / "run", grad_accum=GA)
    torch.manual_seed(0)
    emb, head = torch.nn.Embedding(len(chars), 16), torch.nn.Linear(16, len(chars))
    opt = torch.optim.AdamW([*emb.parameters(), *head.parameters()], lr=1e-3)
    taken, crashed = [], False
    with open(root / "metrics.jsonl", "w") as log:
        try:
            for k, idx in enumerate(loader):
                taken.append(idx.tolist())
                x = torch.tensor([ids[i] for i in idx.tolist()])
                logits = head(emb(x[:, :-1]))  # IndexError: index out of range in self, on the bad id
                loss = torch.nn.functional.cross_entropy(logits.reshape(-1, len(chars)), x[:, 1:].reshape(-1)) / GA
                loss.backward()
                if k % GA == GA - 1:
                    opt.step()
                    opt.zero_grad()
                    log.write(json.dumps({"step": k // GA + 1, "loss": loss.item() * GA}) + "\n")
        except IndexError:
            crashed = True
    flush_ledgers()
    return bad, taken, crashed


@pytest.mark.parametrize("micro_batch", [0, 1])
def test_the_crashing_step_and_its_row_are_named(tmp_path, micro_batch):
    bad, taken, crashed = _run(tmp_path, micro_batch)
    assert crashed and len(taken) == STEP * GA + micro_batch + 1 and bad in taken[-1]  # it crashed on that batch
    rc, res, err = trace_json(str(tmp_path / "metrics.jsonl"), "--data", str(tmp_path / "data"), "--config",
                              str(tmp_path / "datacheck.toml"), "--ledger", str(tmp_path / "run"))
    assert rc == 1, err  # the row fails the policy
    assert res["first_bad"] is None  # the log itself holds no anomaly: it just ends
    d = res["data"]
    assert d["audited_optimizer_steps"] == [STEP, STEP] and d["audited_steps"] == [STEP + 1, STEP + 1]
    assert f"ends at log step {STEP} (optimizer step {STEP - 1})" in d["message"]
    assert sorted(d["rows"]["steps"][str(STEP + 1)]["0"]) == sorted(g for b in taken[STEP * GA:] for g in b)
    assert sorted(d["rows"]["row_checks"][str(bad)]) == ["labels.out_of_range:labels", "tokens.out_of_vocab:input_ids"]
    rows_answer = res["verdict"]["answers"]["rows"]["answer"]
    assert "after the log's end" in rows_answer and f"row {bad} (global {bad})" in rows_answer
    if micro_batch == 0:  # the step's second micro-batch was never received: the source says the step is short
        assert "1 of 2 micro-batches of step 10 (the run stopped mid-step)" in d["source"]["description"]


def test_a_run_that_ended_logging_every_step_audits_nothing(tmp_path):
    bad, taken, crashed = _run(tmp_path, None)
    assert not crashed and len(taken) == N // B
    rc, res, err = trace_json(str(tmp_path / "metrics.jsonl"), "--data", str(tmp_path / "data"), "--config",
                              str(tmp_path / "datacheck.toml"), "--ledger", str(tmp_path / "run"))
    assert rc == 0, err
    assert res["data"]["rows"] is None and res["data"]["message"] == "no anomaly and no --step: no rows to audit"
