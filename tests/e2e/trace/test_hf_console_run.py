"""A real Hugging Face Trainer run (a linear model, 1,200 rows, batch 16, gradient accumulation 2,
logging_steps 5, one NaN feature) with its console captured as a user captures it
(``python train.py > console.log 2>&1``): transformers prints the log dicts with 4 significant digits
as strings, after the header; with ``disable_tqdm=False`` a progress bar shares the stream. trace places
every dict on the step the Trainer's own ``log_history`` records for it."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from conftest import run_cli

pytest.importorskip("torch")
pytest.importorskip("transformers")

SCRIPT = textwrap.dedent('''
    import sys, torch, transformers
    from transformers import Trainer, TrainingArguments
    transformers.logging.set_verbosity_info()
    ROWS, POISON = 1200, 500
    g = torch.Generator().manual_seed(0)
    x = torch.randn(ROWS, 2, generator=g)
    y = (x[:, 0] > 0).long()
    x[POISON, 0] = float("nan")

    class DS(torch.utils.data.Dataset):
        def __len__(self):
            return ROWS

        def __getitem__(self, i):
            return {"x": x[i], "labels": y[i]}

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = torch.nn.Linear(2, 2)

        def forward(self, x, labels=None):
            out = self.l(x)
            return {"loss": torch.nn.functional.cross_entropy(out, labels), "logits": out}

    args = TrainingArguments(output_dir=sys.argv[1], per_device_train_batch_size=16, gradient_accumulation_steps=2,
                             num_train_epochs=1, logging_steps=5, save_strategy="no", report_to=[],
                             disable_tqdm=sys.argv[2] == "1", use_cpu=True, seed=42, learning_rate=0.05)
    torch.manual_seed(0)  # the model's initial weights (the Trainer seeds only after the model is built)
    trainer = Trainer(model=M(), args=args, train_dataset=DS())
    trainer.train()
    trainer.state.save_to_json(f"{sys.argv[1]}/state/trainer_state.json")
''')


@pytest.fixture(scope="module", params=["1", "0"], ids=["disable_tqdm", "tqdm"])
def hf_run(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    (root / "state").mkdir()
    (root / "train.py").write_text(SCRIPT)
    with open(root / "console.log", "w") as out:
        p = subprocess.run([sys.executable, str(root / "train.py"), str(root), request.param], stdout=out,
                           stderr=subprocess.STDOUT, timeout=300)
    assert p.returncode == 0, (root / "console.log").read_text()[-2000:]
    hist = json.loads((root / "state" / "trainer_state.json").read_text())["log_history"]
    bad = next(e["step"] for e in hist if "grad_norm" in e and e["grad_norm"] != e["grad_norm"])
    return root, hist, bad


@pytest.mark.slow
def test_the_console_is_placed_on_the_trainers_own_steps(hf_run):
    root, hist, bad = hf_run
    text = (root / "console.log").read_text()
    assert "'epoch': '0.1333'" in text  # transformers' 4-significant-digit strings
    r = run_cli("trace", str(root / "console.log"), "--format", "json")
    assert r.returncode == 1, r.stderr
    res = json.loads(r.stdout)["result"]
    assert res["first_bad"]["step"] == bad and res["first_bad"]["window"] == [bad - 4, bad]
    assert res["convention"]["first_step"] == 1 and res["convention"]["unplaced"] == []
    assert "logging_nan_inf_filter" in res["findings"][0]["message"]


@pytest.mark.slow
def test_without_the_header_the_console_is_not_placed(hf_run, tmp_path):
    root, _, bad = hf_run
    bare = tmp_path / "console.log"
    bare.write_text("".join(line for line in (root / "console.log").read_text().splitlines(keepends=True)
                            if " = " not in line and "it/s]" not in line and "s/it]" not in line))
    data = tmp_path / "d.jsonl"
    data.write_text('{"x": 1.0}\n')
    r = run_cli("trace", str(bare), "--data", str(data))
    assert r.returncode == 2 and "--steps-per-epoch N" in r.stderr
    # the run's trainer_state.json beside the console places it
    (tmp_path / "trainer_state.json").write_text((root / "state" / "trainer_state.json").read_text())
    r = run_cli("trace", str(bare), "--format", "json")
    assert json.loads(r.stdout)["result"]["first_bad"]["step"] == bad


@pytest.mark.slow
def test_without_the_header_the_progress_bar_places_the_console(hf_run, request, tmp_path):
    root, _, bad = hf_run
    bars = "it/s]" in (root / "console.log").read_text()
    log = tmp_path / "console.log"
    log.write_text("".join(line for line in (root / "console.log").read_text().splitlines(keepends=True)
                           if " = " not in line))
    r = run_cli("trace", str(log), "--format", "json")
    res = json.loads(r.stdout)["result"]
    if bars:  # the bar tqdm redraws after each dict holds the step the dict was logged at
        assert res["first_bad"]["step"] == bad and res["convention"]["unplaced"] == []
    else:
        assert res["first_bad"]["unplaced"] is True and res["convention"]["unplaced"]
