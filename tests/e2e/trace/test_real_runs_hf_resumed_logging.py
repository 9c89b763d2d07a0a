"""A real Hugging Face Trainer run with ``logging_steps`` > 1 that crashed and was resumed from a
checkpoint, its two launches in one default console (progress bars and dicts; ``python train.py >>
console.log 2>&1`` twice; tests/helpers/hfresume.py): the report says there were two launches (one
``log.step_regression`` resume point, a ``resume`` event) though the step never goes back in the log.

240 rows, batch 8: 30 steps an epoch, 2 epochs, a checkpoint every 10 steps. The Trainer logs at every
global step that is a multiple of ``logging_steps`` ``L``; a crash raised at the end of step ``c`` comes
before that step's dict, so the first launch logs ``L, 2L, ..`` up to ``L * ((c - 1) // L)``. Resumed from
checkpoint-10 it restores global step 10 and logs next at ``L * (10 // L + 1)``: with ``L`` 4 and a crash at
14 the last logged step 12 again (12, then 12), with a crash at 11 past it (8, then 12): the step alone
cannot tell that from one launch, the resumed launch's new bar (``0/60``, counting from below the last
step) does. Every expected step is computed here from that arithmetic and checked against the dicts'
printed epochs (step / 30), never read back from datacheck."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from realruns import trace_json

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # the Trainer needs it
pytestmark = pytest.mark.slow  # two launches of the Trainer, each in a fresh process

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "tests" / "helpers" / "hfresume.py"
N, B, SPE, CKPT, LOG_EVERY = 240, 8, 30, 10, 4


def _launch(root: Path, crash: int, ckpt: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    with open(root / "launch.log", "w") as out:
        p = subprocess.run([sys.executable, str(SCRIPT), str(root), "tqdm", str(crash), ckpt, str(LOG_EVERY)],
                           stdout=out, stderr=subprocess.STDOUT, env=env, cwd=root, timeout=300)
    text = (root / "launch.log").read_bytes().decode()
    assert p.returncode == (3 if crash else 0), text[-3000:]
    return text


def _epoch_steps(text: str) -> list[int]:
    """The steps of the training dicts, from their printed epochs (step / SPE, 4 significant digits)."""
    return [round(float(e) * SPE) for e in re.findall(r"\{'loss': [^}]*'epoch': '?([0-9.]+)'?\}", text)]


@pytest.mark.parametrize("crash", [14, 11], ids=["logs_the_last_step_again", "logs_past_the_last_step"])
def test_a_resume_that_never_steps_back_is_reported_as_two_launches(crash, tmp_path):
    x = torch.randn(N, 2, generator=torch.Generator().manual_seed(3)).tolist()
    (tmp_path / "rows.json").write_text(json.dumps([{"x1": a, "x2": b, "label": int(a + b > 0)} for a, b in x]))
    first = _launch(tmp_path, crash, "-")
    second = _launch(tmp_path, 0, str(tmp_path / "out" / f"checkpoint-{CKPT}"))
    last = LOG_EVERY * ((crash - 1) // LOG_EVERY)  # the first launch's last dict
    resumed = LOG_EVERY * (CKPT // LOG_EVERY + 1)  # the resumed launch's first
    assert _epoch_steps(first) == list(range(LOG_EVERY, last + 1, LOG_EVERY))
    assert _epoch_steps(second) == list(range(resumed, 2 * SPE + 1, LOG_EVERY))
    assert resumed >= last  # the step never goes back in the log
    (tmp_path / "console.log").write_bytes((first + second).encode())
    rc, res, err = trace_json(str(tmp_path / "console.log"))
    assert rc == 0, err
    reg = [f for f in res["findings"] if f["check"] == "log.step_regression"]
    assert len(reg) == 1 and reg[0]["severity"] == "info"
    assert [(r["from_step"], r["to_step"], r.get("launch")) for r in reg[0]["details"]["resumes"]] == \
        [(last, resumed, True)]
    assert [(e["from_step"], e["step"]) for e in res["events"] if e["kind"] == "resume"] == [(last, resumed)]
    assert not [e for e in res["events"] if e["kind"] == "restart"]  # a resume, not a run from scratch
    for one in (first, second):  # each launch alone: one launch, no resume said
        (tmp_path / "one.log").write_bytes(one.encode())
        rc, alone, err = trace_json(str(tmp_path / "one.log"))
        assert rc == 0, err
        assert not [f for f in alone["findings"] if f["check"] == "log.step_regression"]
        assert not [e for e in alone["events"] if e["kind"] in ("resume", "restart")]
    # the steps themselves are right: every logged step once per launch
    assert res["streams"] == {str(tmp_path / "console.log"): len(_epoch_steps(first + second))}
