"""A real Hugging Face ``Trainer`` CPU run (tiny GPT-2 config) with ``train_sampling_strategy=
"group_by_length"`` (transformers 5's ``group_by_length``): its ``LengthGroupedSampler`` orders rows by
length in megabatches, an order no ``[batch]`` plan simulates. Planted: one row whose labels are all
``-100`` (transformers 5 logs its step as loss 0.0 and grad norm 0.0, a hidden non-finite step).

- with ``DatacheckCallback``'s ledger, trace names that row at the step the Trainer loaded it;
- from the simulated plan (no ledger) the step's rows are another row, and the fourth answer no longer
  says the rows "look sound" as a verdict: it says that rests on the run loading the plan's rows and
  names what to give (it once said "(the rows look sound)" and nothing else).

Data: the first 160 non-blank lines of tinyshakespeare (/work/shared/realdata/tinyshakespeare/input.txt,
PROVENANCE: 40,000 lines), character ids (1 + the index in the lines' sorted characters; 0 pads).
Expected values from the batches the run's collator saw, never read back from datacheck.
"""
from __future__ import annotations

import contextlib
import io
import json
import warnings

import pytest
from conftest import REALDATA
from realruns import trace_json

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")
pytestmark = pytest.mark.slow  # a Trainer run

TEXT = REALDATA / "tinyshakespeare" / "input.txt"
if not TEXT.is_file():
    pytest.skip("../shared/realdata is not present", allow_module_level=True)
N, BAD, SEED = 160, 37, 5


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from datacheck.torch.hf import DatacheckCallback

    root = tmp_path_factory.mktemp("hf_length_grouped")
    text = TEXT.read_text()
    assert text.count("\n") == 40_000  # PROVENANCE
    lines = [ln for ln in text.splitlines() if ln.strip()][:N]
    chars = sorted(set("".join(lines)))
    rows = [{"input_ids": [chars.index(c) + 1 for c in ln], "labels": [chars.index(c) + 1 for c in ln]} for ln in lines]
    rows[BAD]["labels"] = [-100] * len(rows[BAD]["labels"])
    (root / "data").mkdir()
    with open(root / "data" / "part-00000.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    (root / "datacheck.toml").write_text(f"[batch]\nbatch_size = 1\nseed = {SEED}\n[labels]\nignore_index = -100\n")
    seen: list[list[int]] = []

    class Rows(torch.utils.data.Dataset):
        def __len__(self):
            return N

        def __getitem__(self, i):
            return {"input_ids": rows[i]["input_ids"], "labels": rows[i]["labels"], "idx": i}

    def collate(batch):
        seen.append([b["idx"] for b in batch])
        width = max(len(b["input_ids"]) for b in batch)
        ids = torch.tensor([b["input_ids"] + [0] * (width - len(b["input_ids"])) for b in batch])
        labels = torch.tensor([b["labels"] + [-100] * (width - len(b["labels"])) for b in batch])
        return {"input_ids": ids, "labels": labels, "attention_mask": (ids != 0).long()}

    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=len(chars) + 1, n_positions=128, n_embd=16,
                                                                 n_layer=1, n_head=2))
    args = transformers.TrainingArguments(str(root / "out"), use_cpu=True, per_device_train_batch_size=1,
                                          num_train_epochs=1, logging_steps=1, seed=SEED, report_to=[],
                                          save_strategy="no", disable_tqdm=True, remove_unused_columns=False,
                                          train_sampling_strategy="group_by_length")
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Rows(), data_collator=collate,
                                   callbacks=[DatacheckCallback()])
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    step = [k for k, b in enumerate(seen) if BAD in b]
    assert len(step) == 1 and len(seen) == N
    return root, step[0], seen


def test_the_ledger_names_the_row_at_the_step_it_was_loaded(run):
    root, step, _ = run
    rc, res, err = trace_json(str(root / "out"), "--data", str(root / "data"), "--config", str(root / "datacheck.toml"))
    assert rc == 1, err
    assert res["first_bad"]["step"] == step + 1  # the Trainer logs 0-based step k as k + 1
    d = res["data"]
    assert d["source"]["kind"] == "ledger"
    assert d["rows"]["steps"] == {str(step + 1): {"0": [BAD]}}
    assert d["rows"]["row_checks"] == {str(BAD): ["empty.no_supervised_tokens:labels"]}


def test_the_plans_clean_rows_are_not_said_to_clear_the_step(run):
    root, step, seen = run
    rc, res, err = trace_json(str(root / "out" / "trainer_state.json"), "--data", str(root / "data"), "--config",
                              str(root / "datacheck.toml"))
    d = res["data"]
    assert d["source"]["kind"] == "plan" and res["first_bad"]["step"] == step + 1
    planned = d["rows"]["steps"][str(step + 1)]["0"]
    assert planned != seen[step] and not d["rows"]["row_checks"]  # not the run's row: the plan cannot know
    answer = res["verdict"]["answers"]["rows"]["answer"]
    assert "(the rows look sound" in answer and "), if the run loaded the rows the simulated plan gives" in answer
    assert "length grouping" in answer and "--ledger" in answer
