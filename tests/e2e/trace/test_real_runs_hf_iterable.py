"""A real Hugging Face ``Trainer`` CPU run over an ``IterableDataset`` with ``DatacheckCallback``: the
Trainer's DataLoader has a batch sampler over ``_InfiniteConstantSampler`` (``None`` for every row), so
there is no row index to record. The callback once recorded it anyway and raised ``TypeError`` inside
``trainer.train()`` at the first batch, ending a run it only watches; it now warns once, writes no
ledger, and the run trains to its end (its ``trainer_state.json`` still written for ``trace``).

Data: the first 64 rows of dair-ai emotion's ``train.txt`` (/work/shared/realdata/emotion, PROVENANCE:
header ``text;label_name``), text length / 100 and vowel fraction as features, the class index as label."""
from __future__ import annotations

import contextlib
import io
import json
import warnings

import pytest
from conftest import REALDATA
from hftiny import linear_model
from realruns import trace_json

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")
pytestmark = pytest.mark.slow  # a Trainer run

EMOTION = REALDATA / "emotion" / "train.txt"
if not EMOTION.is_file():
    pytest.skip("../shared/realdata is not present", allow_module_level=True)
N, B, STEPS = 64, 4, 6


def test_the_trainer_runs_to_its_end_unrecorded_with_a_warning(tmp_path):
    from datacheck.torch.hf import DatacheckCallback

    lines = EMOTION.read_text().splitlines()
    assert lines[0] == "text;label_name"  # PROVENANCE: the header
    recs = [ln.rsplit(";", 1) for ln in lines[1:N + 1]]
    names = sorted({lab for _, lab in recs})
    x = torch.tensor([[len(t) / 100, sum(c in "aeiou" for c in t) / len(t)] for t, _ in recs])
    y = torch.tensor([names.index(lab) for _, lab in recs])
    seen: list[list[int]] = []

    class Rows(torch.utils.data.IterableDataset):
        def __iter__(self):
            for i in range(N):
                yield {"x": x[i], "labels": y[i], "idx": torch.tensor(i)}

    torch.manual_seed(0)
    args = transformers.TrainingArguments(str(tmp_path / "out"), use_cpu=True, per_device_train_batch_size=B,
                                          max_steps=STEPS, logging_steps=1, report_to=[], save_strategy="no",
                                          disable_tqdm=True, remove_unused_columns=False)
    trainer = transformers.Trainer(model=linear_model(torch, seen.append, len(names)), args=args, train_dataset=Rows(),
                                   callbacks=[DatacheckCallback()])
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train()
    assert seen == [list(range(k * B, (k + 1) * B)) for k in range(STEPS)]  # the iterator's order, every step
    said = [str(w.message) for w in caught if str(w.message).startswith("DatacheckCallback")]
    assert len(said) == 1 and "iterates an IterableDataset (Rows)" in said[0] and "not written" in said[0]
    assert not (tmp_path / "out" / "data-indices").exists()
    state = json.loads((tmp_path / "out" / "trainer_state.json").read_text())
    assert state["global_step"] == STEPS
    rc, res, err = trace_json(str(tmp_path / "out"))
    assert rc == 0, err
    assert res["logs"][0]["format"] == "hf_state" and res["first_bad"] is None
