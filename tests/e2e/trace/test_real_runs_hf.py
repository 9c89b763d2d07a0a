"""The Hugging Face Trainer on a tiny GPT-2 config (CPU, ``use_cpu=True``), with ``DatacheckCallback``
and ``BatchGuard`` as the data collator, traced back to its rows.

96 token rows in 3 JSONL shards, batch 4, one epoch (24 optimizer steps), ``seed`` 42, logging every
step and every 10 steps. Planted: the micro-batch of optimizer step 5 (0-based; the Trainer logs it as
step 6) has every label ``ignore_index``. The Trainer's sampler is accelerate's
``SeedableRandomSampler``: ``torch.randperm(96)`` from a generator seeded ``seed + epoch``, so step
``s`` holds positions ``4s .. 4s+3`` of that permutation: the expected rows are computed here from it.
Transformers 5 divides the summed token loss by the step's supervised-token count and guards 0/0, so
the step logs ``loss 0.0`` and ``grad_norm 0.0`` (no NaN): a hidden non-finite step.
"""
from __future__ import annotations

import contextlib
import io
import json
import logging
import warnings

import pytest
from realruns import cli, place, trace_json, write_shards

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # the Trainer needs it

from datacheck import api  # noqa: E402
from datacheck.io.ledger import read_ledger  # noqa: E402
from datacheck.torch import BatchGuard  # noqa: E402
from datacheck.torch.hf import DatacheckCallback  # noqa: E402

N, SIZES, L, V, B, SEED, BAD_STEP = 96, (30, 40, 26), 8, 50, 4, 42, 5
STEPS = N // B
CONFIG = f"[labels]\nignore_index = -100\n[tokens]\nvocab_size = {V}\n[batch]\nbatch_size = {B}\nseed = {SEED}\n"


def _perm() -> list[int]:
    g = torch.Generator()
    g.manual_seed(SEED + 0)
    return torch.randperm(N, generator=g).tolist()


def _bad_rows() -> list[int]:
    return sorted(_perm()[BAD_STEP * B:(BAD_STEP + 1) * B])


def _train(root, logging_steps: int, on_guard_error: str = "warn"):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, V, (N, L), generator=g).tolist()
    bad = set(_bad_rows())
    rows = [{"input_ids": ids[i], "attention_mask": [1] * L, "labels": [-100] * L if i in bad else ids[i]}
            for i in range(N)]
    write_shards(root / "data", rows, SIZES)
    (root / "datacheck.toml").write_text(CONFIG)
    report = api.audit([str(root / "data")], config=str(root / "datacheck.toml"))

    class Rows(torch.utils.data.Dataset):
        def __len__(self):
            return N

        def __getitem__(self, i):
            return {k: torch.tensor(v) for k, v in rows[i].items()}

    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=V, n_positions=L, n_embd=16, n_layer=1,
                                                                 n_head=2, bos_token_id=0, eos_token_id=0))
    guard = BatchGuard(transformers.default_data_collator, facts={"labels": {"ignore_index": -100}}, on_error="warn")
    args = transformers.TrainingArguments(str(root / "out"), use_cpu=True, per_device_train_batch_size=B,
                                          num_train_epochs=1, logging_steps=logging_steps, seed=SEED, report_to=[],
                                          save_strategy="no", disable_tqdm=True, learning_rate=1e-3)
    cb = DatacheckCallback(report, guard=guard, on_guard_error=on_guard_error)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Rows(), data_collator=guard, callbacks=[cb])
    out, header = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(header)
    tlog = logging.getLogger("transformers")
    old = tlog.level
    tlog.addHandler(handler)
    tlog.setLevel(logging.INFO)
    try:
        with contextlib.redirect_stdout(out), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            trainer.train()
    finally:
        tlog.removeHandler(handler)
        tlog.setLevel(old)
    # the console log a user keeps: the Trainer's header (logged before the first step), then its printed dicts
    head = "".join(line + "\n" for line in header.getvalue().splitlines() if line.startswith(("*****", "  ")))
    (root / "console.log").write_text(head + out.getvalue())
    return trainer, cb, [str(w.message) for w in caught if str(w.message).startswith("datacheck:")]


@pytest.fixture(scope="module", params=[1, 10], ids=["logging_steps=1", "logging_steps=10"])
def hf_run(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"hf{request.param}")
    trainer, cb, warned = _train(root, request.param)
    return root, request.param, trainer, cb, warned


@pytest.mark.slow
def test_callback_records_the_trainers_order_and_the_guard_failure(hf_run):
    root, _, trainer, cb, warned = hf_run
    perm = _perm()
    led = read_ledger(root / "out")  # written in the Trainer's output folder, steps 0-based
    assert led.steps == list(range(STEPS)) and led.partial == {} and led.truncated == []
    assert [[list(b.indices) for b in led.batches[0][s]] for s in range(STEPS)] == \
        [[perm[s * B:(s + 1) * B]] for s in range(STEPS)]
    assert led.states[0][0]["grad_accum"] == 1 and led.states[0][0]["batches"] == STEPS
    first = cb.guard_failures[0]
    assert first["tag"] == {"rank": 0, "epoch": 0, "step": BAD_STEP, "micro_batch": 0, "position": BAD_STEP}
    assert set(first["checks"]) == {"batch.no_supervised_tokens", "empty.no_supervised_tokens"}
    assert warned[0].startswith(f"datacheck: step {BAD_STEP} micro-batch 0 (rank 0, epoch 0")
    assert trainer.state.global_step == STEPS  # "warn": training went on
    hist = trainer.state.log_history
    ident = [h for h in hist if "datacheck_index_hash" in h]
    assert len(ident) == 1 and ident[0]["step"] == 0
    state = json.loads((root / "out" / "trainer_state.json").read_text())
    assert state["global_step"] == STEPS and state["log_history"][0] == ident[0]


@pytest.mark.slow
def test_trace_output_dir_finds_the_state_and_its_identity(hf_run):
    root, ls, _, _, _ = hf_run
    rc, res, err = trace_json(str(root / "out"))
    assert rc in (0, 1), err
    log = res["logs"][0]
    assert log["format"] == "hf_state" and log["source"].endswith("trainer_state.json")
    assert log["identity"] is not None and f"logging_steps={ls}" in " ".join(res["notes"] + [json.dumps(res)])


@pytest.mark.slow
def test_trace_the_logged_step_through_the_simulated_plan(hf_run):
    # the Trainer logs optimizer step 5 as global_step 6: --step 6 (with logging every 10 steps, the
    # record of step 10 covers steps 1..10: --window 9) audits the rows of 0-based step 5
    root, ls, _, _, _ = hf_run
    step, window = (BAD_STEP + 1, 0) if ls == 1 else (10, 9)
    rc, res, err = trace_json(str(root / "out" / "trainer_state.json"), "--data", str(root / "data"), "--config",
                              str(root / "datacheck.toml"), "--step", str(step), "--window", str(window))
    assert rc == 1, err
    rows = res["data"]["rows"]
    assert res["data"]["source"]["kind"] == "plan" and res["data"]["warning"] is None  # the identity matches
    assert sorted(rows["steps"][str(BAD_STEP + 1)]["0"]) == _bad_rows()
    assert rows["supervised_tokens"][str(BAD_STEP + 1)] == {"0": 0}
    assert {int(k) for k, v in rows["row_checks"].items() if "empty.no_supervised_tokens:labels" in v} == set(_bad_rows())


@pytest.mark.slow
def test_trace_output_dir_with_its_ledger(hf_run):
    root, ls, _, _, _ = hf_run
    step, window = (BAD_STEP + 1, 0) if ls == 1 else (10, 9)
    rc, res, err = trace_json(str(root / "out"), "--data", str(root / "data"), "--config", str(root / "datacheck.toml"),
                              "--step", str(step), "--window", str(window))
    assert rc == 1, err
    assert res["data"]["source"]["kind"] == "ledger"
    rows = res["data"]["rows"]  # log steps step-window .. step are 0-based steps step-window-1 .. step-1
    audited = sorted(g for ranks in rows["steps"].values() for r in ranks.values() for g in r)
    assert audited == sorted(_perm()[(step - 1 - window) * B:step * B])
    assert {int(k) for k, v in rows["row_checks"].items() if "empty.no_supervised_tokens:labels" in v} == set(_bad_rows())


@pytest.mark.slow
def test_trace_names_the_hidden_step(hf_run):
    root, ls, _, _, _ = hf_run
    if ls != 1:
        pytest.xfail("every 10 steps the Trainer logs the mean loss and the last grad norm: the step is not in the log")
    rc, res, err = trace_json(str(root / "out" / "trainer_state.json"), "--data", str(root / "data"), "--config",
                              str(root / "datacheck.toml"))
    assert rc == 1, err
    assert res["first_bad"]["step"] == BAD_STEP + 1
    audited = {g for ranks in res["data"]["rows"]["steps"].values() for r in ranks.values() for g in r}
    assert sorted(audited) == _bad_rows()


@pytest.mark.slow
def test_trace_console_log_steps(hf_run):
    root, ls, _, _, _ = hf_run
    text = (root / "console.log").read_text()
    assert f"Total optimization steps = {STEPS}" in text and "{'loss': " in text
    rc, res, err = trace_json(str(root / "console.log"))
    assert rc in (0, 1), err
    (curves,) = res["curves"].values()
    assert [p[0] for p in curves["loss"]["points"]] == list(range(ls, STEPS + 1, ls))


@pytest.mark.slow
def test_on_guard_error_stop_ends_training_before_the_bad_step(tmp_path):
    trainer, cb, warned = _train(tmp_path, 1, on_guard_error="stop")
    # accelerate's DataLoaderShard collates one batch ahead: the bad micro-batch is checked while step 4
    # trains, the callback stops at that step's end, and the bad step is never taken: the ledger holds
    # the trained steps only (the bad batch was fetched, never trained)
    assert trainer.state.global_step == BAD_STEP
    assert cb.guard_failures[0]["tag"]["step"] == BAD_STEP and "stopping training at global step" in warned[0]
    led = read_ledger(tmp_path / "out")
    perm = _perm()
    assert led.steps == list(range(BAD_STEP)) and led.partial == {}
    assert [[list(b.indices) for b in led.batches[0][s]] for s in led.steps] == \
        [[perm[s * B:(s + 1) * B]] for s in range(BAD_STEP)]
    assert place(_bad_rows()[0], SIZES)[0].startswith("part-")


@pytest.mark.slow
@pytest.mark.parametrize("ignore_data_skip", [False, True], ids=["skip", "ignore_data_skip"])
def test_resumed_trainer_records_its_order_in_its_numbering(tmp_path, ignore_data_skip):
    # 2 epochs of 24 micro-batches, gradient_accumulation_steps 2 (12 steps per epoch); the first train()
    # stops at max_steps 15 (checkpoint-10 saved), the second resumes from checkpoint-10: accelerate skips
    # the trained batches of the re-read epoch, and the ledger ends as one run's order, epoch e's step s
    # holding positions 8s .. 8s+7 of randperm(96) seeded 42 + e. With ignore_data_skip the resumed Trainer
    # trains epoch 0 again from its first batch at global step 10 (steps 10..21), then epoch 1 until
    # max_steps 24 (steps 22, 23): the ledger says so (epoch 0's first 80 rows are in it twice, as trained)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, V, (N, L), generator=g).tolist()

    class Rows(torch.utils.data.Dataset):
        def __len__(self):
            return N

        def __getitem__(self, i):
            return {"input_ids": torch.tensor(ids[i]), "labels": torch.tensor(ids[i])}

    def trainer(max_steps):
        torch.manual_seed(0)
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=V, n_positions=L, n_embd=16, n_layer=1,
                                                                     n_head=2, bos_token_id=0, eos_token_id=0))
        args = transformers.TrainingArguments(str(tmp_path / "out"), use_cpu=True, per_device_train_batch_size=B,
                                              gradient_accumulation_steps=2, num_train_epochs=2, max_steps=max_steps,
                                              logging_steps=1, seed=SEED, report_to=[], save_strategy="steps",
                                              save_steps=10, disable_tqdm=True, ignore_data_skip=ignore_data_skip)
        return transformers.Trainer(model=model, args=args, train_dataset=Rows(), callbacks=[DatacheckCallback()])

    with contextlib.redirect_stdout(io.StringIO()):
        trainer(15).train()
        first = read_ledger(tmp_path / "out")
        resumed = trainer(-1)
        resumed.train(resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-10"))
    # the loader ran ahead of max_steps (a micro-batch of step 15 was fetched): only trained steps are recorded
    assert first.steps == list(range(15)) and first.partial == {}
    assert resumed.state.global_step == 24
    perms = {}
    for e in (0, 1):
        gen = torch.Generator()
        gen.manual_seed(SEED + e)
        perms[e] = torch.randperm(N, generator=gen).tolist()
    led = read_ledger(tmp_path / "out")
    got = {s: [list(b.indices) for b in led.batches[0][s]] for s in led.steps}
    if ignore_data_skip:  # steps 0..9 of the first run, then epoch 0 from its start, then epoch 1's first 2 steps
        pos = [(0, k) for k in range(20)] + [(0, k) for k in range(24)] + [(1, k) for k in range(4)]
        assert got == {s: [perms[e][k * B:(k + 1) * B] for e, k in pos[2 * s:2 * s + 2]] for s in range(24)}
        assert [(st["epoch"], st["start_step"]) for st in led.states[0]][-2:] == [(0, 10), (1, 22)]
        twice = [i for s in range(10) for b in led.batches[0][s] for i in b.indices]  # epoch 0's first 10 steps
        assert sorted(twice) == sorted(perms[0][:20 * B])
        rc, out, err = cli("order", "verify", str(tmp_path / "out"), "--rows", str(N), "--format", "json")
        res = json.loads(out)["result"]
        assert rc == 1 and res["seen_twice"]["count"] == 20 * B and res["never_seen"]["count"] == 0, out + err
        return
    assert got == \
        {12 * e + s: [perms[e][(2 * s + m) * B:(2 * s + m + 1) * B] for m in range(2)] for e in (0, 1) for s in range(12)}
    # the resume's #state starts at the restored step 10 (the 20 = (10 % 12) x 2 batches the Trainer skips are not
    # recorded again: the first run's records of steps 0..9 stay), then epoch 1 at 12
    assert led.partial == {} and [(st["epoch"], st["start_step"], st.get("skipped")) for st in led.states[0]][-2:] \
        == [(0, 10, (10 % 12) * 2), (1, 12, None)]
    # the #state records the Trainer's SeedableRandomSampler (seed 42, shuffled): order verify plans it and passes
    rc, out, err = cli("order", "verify", str(tmp_path / "out"), "--rows", str(N), "--format", "json")
    res = json.loads(out)["result"]
    assert rc == 0 and res["first_divergent_step"] is None and not res["findings"], out + err
    assert (res["plan"]["seed"], res["plan"]["shuffle"]) == (SEED, True)


class _Ids(torch.utils.data.Dataset):
    """N rows of L token ids (seeded), as the Trainer reads them."""

    def __init__(self):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, V, (N, L), generator=g)

    def __len__(self):
        return N

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


@pytest.mark.slow
def test_batches_prefetched_by_dataloader_workers_are_not_recorded(tmp_path):
    # 2 DataLoader workers prefetch 2 batches each ahead of the loop; the Trainer stops at max_steps 6
    # (grad_accum 2: 12 micro-batches trained of the epoch's 24): the ledger holds those 12, step by step
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=V, n_positions=L, n_embd=16, n_layer=1,
                                                                 n_head=2, bos_token_id=0, eos_token_id=0))
    args = transformers.TrainingArguments(str(tmp_path / "out"), use_cpu=True, per_device_train_batch_size=B,
                                          gradient_accumulation_steps=2, max_steps=6, logging_steps=1, seed=SEED,
                                          report_to=[], save_strategy="no", disable_tqdm=True,
                                          dataloader_num_workers=2, dataloader_prefetch_factor=2)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=_Ids(), callbacks=[DatacheckCallback()])
    with contextlib.redirect_stdout(io.StringIO()):
        trainer.train()
    assert trainer.state.global_step == 6
    perm = _perm()
    led = read_ledger(tmp_path / "out")
    assert led.partial == {} and led.steps == list(range(6))
    assert {s: [list(b.indices) for b in led.batches[0][s]] for s in led.steps} == \
        {s: [perm[(2 * s + m) * B:(2 * s + m + 1) * B] for m in range(2)] for s in range(6)}
