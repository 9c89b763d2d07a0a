"""A run restarted from scratch into the same log, in the formats whose restarts are told without a
Megatron arguments block: nanoGPT's console (../shared/logs PROVENANCE.md, nanogpt/output.log: iterations
0..5000 every 10, evals every 250, the val loss lowest at 1750, overfitting after), the same run's values as a
JSONL metrics log, and a real Hugging Face Trainer console (its ``***** Running training *****`` banner).
Appended to itself, each log's second run is judged on its own and says what the single log says; a
resume (the step back to a checkpoint's step, after the run's first) stays one run."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest
from conftest import SHARED
from tracehelp import trace

NANO = SHARED / "logs" / "nanogpt" / "output.log"
_ITER = re.compile(r"iter (\d+): loss ([\d.]+) BPC")
_EVAL = re.compile(r"step (\d+): train loss ([\d.]+) BPC, val loss ([\d.]+) BPC")


def _loud(res, name):
    """The warn/error findings of stream ``name`` as (check, message after the stream's name)."""
    return sorted((f.check, f.message.split(": ", 1)[1]) for f in res.findings
                  if f.severity in ("warn", "error") and f.details.get("rank") == name)


def _restarts(res):
    return [(e["from_step"], e["step"], e["where"]) for e in res.events if e["kind"] == "restart"]


def _nano():
    if not NANO.is_file():
        pytest.skip("shared logs not present")
    text = NANO.read_text()
    lines = text.splitlines()
    iters = [int(m.group(1)) for t in lines if (m := _ITER.match(t))]
    evals = [int(m.group(1)) for t in lines if (m := _EVAL.match(t))]
    # PROVENANCE.md's facts: iterations 0..5000 every 10, an eval every 250, the val loss lowest at 1750
    assert iters == list(range(0, 5001, 10)) and evals == list(range(0, 5001, 250))
    vals = {int(m.group(1)): float(m.group(3)) for t in lines if (m := _EVAL.match(t))}
    assert min(vals, key=vals.__getitem__) == 1750
    return text.rstrip("\n") + "\n", lines  # the file has no final newline: appended, a line of its own


def _same_findings_per_run(one, two, single, double, restart_line):
    """Each run of ``two`` (the log appended to itself) says what ``one`` (the single log) says."""
    run2 = f"{double}, run 2 (restarted at {double}:{restart_line})"
    assert set(two.streams) == {str(double), run2}
    want = _loud(one, str(single))
    assert want  # the single log's overfitting onset (PROVENANCE.md)
    assert _loud(two, str(double)) == want and _loud(two, run2) == want
    assert not [e for e in two.events if e["kind"] == "resume"]
    assert "log.step_regression" not in {f.check for f in two.findings}  # a restart, not a resume
    return run2


def test_nanogpt_console_restarted_into_the_same_file_is_judged_run_by_run(tmp_path):
    text, lines = _nano()
    p = tmp_path / "output.log"
    p.write_text(text + text)
    one, two = trace(NANO), trace(p)
    # the second launch prints its step-0 eval and then iter 0: the run restarts at that eval line
    first = next(i for i, t in enumerate(lines, 1) if _EVAL.match(t))
    assert _EVAL.match(lines[first - 1]).group(1) == "0"
    _same_findings_per_run(one, two, NANO, p, len(lines) + first)
    assert _restarts(two) == [(5000, 0, f"{p}:{len(lines) + first}")]
    assert two.first_bad["check"] == one.first_bad["check"] and two.first_bad["step"] == one.first_bad["step"]


def test_nanogpt_console_resumed_from_a_checkpoint_stays_one_run(tmp_path):
    """nanoGPT resumed from its checkpoint of iteration 2500 logs the eval of 2500 and then iter 2500 on."""
    text, lines = _nano()
    at = next(i for i, t in enumerate(lines) if t.startswith("step 2500:"))
    p = tmp_path / "resumed.log"
    p.write_text(text + "\n".join(lines[at:]) + "\n")
    res = trace(p)
    assert not _restarts(res) and set(res.streams) == {str(p)}
    reg = {f.check: f for f in res.findings}["log.step_regression"]
    assert [(r["from_step"], r["to_step"]) for r in reg.details["resumes"]] == [(5000, 2500)]


def _nano_jsonl() -> str:
    """The nanoGPT run's logged values as a metrics logger writes them: one JSON object per line."""
    _, lines = _nano()
    out = []
    for t in lines:
        if (m := _ITER.match(t)):
            out.append({"step": int(m.group(1)), "loss": float(m.group(2))})
        elif (m := _EVAL.match(t)):
            out.append({"step": int(m.group(1)), "eval_loss": float(m.group(3))})
    return "".join(json.dumps(o) + "\n" for o in out)


def test_a_jsonl_metrics_log_restarted_into_the_same_file_is_judged_run_by_run(tmp_path):
    text = _nano_jsonl()
    single, double = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    single.write_text(text)
    double.write_text(text + text)
    one, two = trace(single), trace(double)
    n = len(text.splitlines())
    assert json.loads(text.splitlines()[0]) == {"step": 0, "eval_loss": 6.178}  # the step-0 eval comes first
    _same_findings_per_run(one, two, single, double, n + 1)
    assert _restarts(two) == [(5000, 0, f"{double}:{n + 1}")]


def test_a_jsonl_metrics_log_resumed_from_a_checkpoint_stays_one_run(tmp_path):
    text = _nano_jsonl()
    lines = text.splitlines()
    at = lines.index(json.dumps({"step": 2500, "eval_loss": json.loads(next(
        t for t in lines if json.loads(t).get("step") == 2500 and "eval_loss" in json.loads(t)))["eval_loss"]}))
    p = tmp_path / "resumed.jsonl"
    p.write_text(text + "\n".join(lines[at:]) + "\n")
    res = trace(p)
    assert not _restarts(res) and set(res.streams) == {str(p)}
    reg = {f.check: f for f in res.findings}["log.step_regression"]
    assert [(r["from_step"], r["to_step"]) for r in reg.details["resumes"]] == [(5000, 2500)]


HF_SCRIPT = textwrap.dedent('''
    import sys, torch, transformers
    from transformers import Trainer, TrainingArguments
    VERBOSE = sys.argv[2] == "banner"
    if VERBOSE:  # the banner and header are logged at INFO; by default the console shows tqdm bars and dicts
        transformers.logging.set_verbosity_info()
    ROWS = 1200
    g = torch.Generator().manual_seed(0)
    x = torch.randn(ROWS, 2, generator=g)
    y = (x[:, 0] > 0).long()

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

    args = TrainingArguments(output_dir=sys.argv[1], per_device_train_batch_size=16, num_train_epochs=2,
                             logging_steps=5, save_strategy="steps", save_steps=60, report_to=[],
                             disable_tqdm=sys.argv[2] != "tqdm", use_cpu=True, seed=42, learning_rate=0.05)
    torch.manual_seed(0)
    trainer = Trainer(model=M(), args=args, train_dataset=DS())
    trainer.train(resume_from_checkpoint=sys.argv[3] if len(sys.argv) > 3 else None)
''')
HF_BANNER = "***** Running training *****"


@pytest.fixture(scope="module", params=["banner", "tqdm", "dicts"])
def hf_consoles(request, tmp_path_factory):
    """A real Trainer run's console (2 epochs of 75 steps, logging every 5, checkpoints every 60), and
    the console of a second launch resuming it from checkpoint-60, each as ``python train.py > log 2>&1``:
    ``banner``: logging at INFO (the banner, the header) without bars; ``tqdm``: the default verbosity
    (no banner, no header), the dicts placed by the progress bar; ``dicts``: the default verbosity without
    bars (``disable_tqdm``): dicts alone, their steps unknown (records by position), their epochs logged."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    root = tmp_path_factory.mktemp("hfrestart")
    (root / "train.py").write_text(HF_SCRIPT)
    texts = []
    for extra in ([], [str(root / "out" / "checkpoint-60")]):
        with open(root / "console.log", "w") as out:  # stdout and stderr in one file, unbuffered: in order
            p = subprocess.run([sys.executable, str(root / "train.py"), str(root / "out"), request.param, *extra],
                               stdout=out, stderr=subprocess.STDOUT, timeout=300,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
        texts.append((root / "console.log").read_bytes().decode())  # tqdm's \r kept
        assert p.returncode == 0, texts[-1][-2000:]
    assert all(t.count(HF_BANNER) == (request.param == "banner") for t in texts)
    return request.param, texts


def _hf_epochs(text: str) -> list[float]:
    """The training dicts' epochs, by the test's own pattern."""
    return [float(m.group(1)) for m in re.finditer(r"\{'loss': '?[\d.e-]+'?,.*?'epoch': '?([\d.]+)'?\}", text)]


@pytest.mark.slow
def test_a_hf_trainer_console_restarted_into_the_same_file_is_judged_run_by_run(hf_consoles, tmp_path):
    mode, (text, _) = hf_consoles
    epochs = _hf_epochs(text)
    assert len(epochs) == 150 // 5 and epochs == sorted(epochs)  # one dict every 5 of 150 steps
    single, double = tmp_path / "one.log", tmp_path / "two.log"
    body = text.rstrip("\n") + "\n"
    single.write_bytes(body.encode())
    double.write_bytes((body + body).encode())
    one, two = trace(single), trace(double)
    lines = body.split("\n")[:-1]  # lines as grep -n numbers them: tqdm's \r redraws stay within their line
    first = next(i for i, t in enumerate(lines, 1) if "{'loss'" in t)  # the first training dict
    run2 = f"{double}, run 2 (restarted at {double}:{len(lines) + first})"
    assert set(two.streams) == {str(double), run2}
    # the step back from 150 to 5; a console of dicts alone: records by position, the epoch back to 5/75
    assert _restarts(two) == [(30, 31, f"{double}:{len(lines) + first}")] if mode == "dicts" else \
        [(150, 5, f"{double}:{len(lines) + first}")]
    # the single log has no warning; appended, the second run's first losses were spikes against the first's
    assert _loud(two, str(double)) == _loud(one, str(single)) and _loud(two, run2) == _loud(one, str(single))
    assert not [e for e in two.events if e["kind"] == "resume"]
    assert "log.step_regression" not in {f.check for f in two.findings}
    assert (two.first_bad is None) == (one.first_bad is None)
    # every record placed on its step, or none (dicts alone)
    assert two.step_less == (set(two.streams) if mode == "dicts" else set())


@pytest.mark.slow
def test_a_hf_trainer_console_resumed_from_a_checkpoint_stays_one_run(hf_consoles, tmp_path):
    """The second launch resumes from checkpoint-60: its dicts from step 65 on."""
    mode, (text, resumed) = hf_consoles
    if HF_BANNER in resumed:  # transformers' resume line ("Continuing training from checkpoint" before 4.x)
        assert re.search(r"(Resuming|Continuing) training from checkpoint.*global.step 60", resumed)
    assert len(_hf_epochs(resumed)) == (150 - 60) // 5
    p = tmp_path / "resumed.log"
    p.write_bytes((text.rstrip("\n") + "\n" + resumed).encode())
    res = trace(p)
    assert not _restarts(res) and set(res.streams) == {str(p)}
    if mode == "dicts":  # records by position: the resume (its epoch back to 0.8667, after the first) is not seen
        return
    reg = {f.check: f for f in res.findings}["log.step_regression"]
    assert [(r["from_step"], r["to_step"]) for r in reg.details["resumes"]] == [(150, 65)]
