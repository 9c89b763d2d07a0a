"""The step join's convention (datacheck.trace.steps.resolve_convention): a log whose step key names
no trainer is assumed to count from 1, unless it logs step 0, which a count from 1 would put at
optimizer step -1: then from 0. ``--first-step`` and a recognised trainer always win."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest
from conftest import SHARED, run_cli
from tracehelp import trace, write_jsonl

from datacheck.model.errors import UsageError
from datacheck.trace.record import ReadStats
from datacheck.trace.steps import DEFAULT_FIRST_STEP, resolve_convention


def _rows(first: int, n: int = 40, bad: int | None = None) -> list[dict]:
    return [{"step": s, "loss": float("nan") if s == bad else 3.0 - 0.01 * s} for s in range(first, first + n)]


def test_bare_step_log_from_0_counts_from_0(tmp_path):
    res = trace(write_jsonl(tmp_path / "m.jsonl", _rows(0)))
    conv = resolve_convention(res.logs, None)
    assert (conv.first_step, conv.assumed) == (0, True)
    assert "logs step 0, so it counts from 0" in conv.source
    assert conv.optimizer_step(0) == 0


def test_bare_step_log_from_1_or_later_keeps_the_assumed_1(tmp_path):
    for first in (1, 10):
        res = trace(write_jsonl(tmp_path / f"m{first}.jsonl", _rows(first)))
        conv = resolve_convention(res.logs, None)
        assert (conv.first_step, conv.assumed) == (DEFAULT_FIRST_STEP, True)


def test_first_step_flag_and_known_trainer_win_over_step_0():
    st = ReadStats(source="m.jsonl", format="jsonl", min_step=0)
    conv = resolve_convention([st], 1)
    assert (conv.first_step, conv.assumed, conv.source) == (1, False, "--first-step")
    known = ReadStats(source="trainer_state.json", format="hf_state", min_step=0)
    known.knows(1, "Hugging Face global_step")
    assert resolve_convention([known], None).first_step == 1
    other = ReadStats(source="nano.log", format="text", min_step=3)
    other.knows(0, "nanoGPT iter")
    with pytest.raises(UsageError):
        resolve_convention([known, other], None)


def test_unplaced_log_s_ordinals_are_no_step_0():
    st = ReadStats(source="console.log", format="text", min_step=0, unplaced="no step number")
    assert resolve_convention([st], None).first_step == DEFAULT_FIRST_STEP


def test_cli_names_the_rows_of_the_logged_step_of_a_log_from_0(tmp_path):
    """A bare-step JSONL log from step 0 with a NaN at step 5: the rows audited are optimizer step 5's."""
    log = write_jsonl(tmp_path / "m.jsonl", _rows(0, bad=5))
    r = run_cli("trace", str(log))
    assert "log step 5 = optimizer step 5 (assumed)" in r.stdout, r.stdout
    assert "note: step join assumed: the log names no trainer whose count is known, but" in r.stdout


def test_a_log_counting_micro_batches_joins_each_to_its_optimizer_step_and_micro_batch():
    """``--step-unit micro-batch`` with grad_accum 2: log step N (from 0) is micro-batch N % 2 of
    optimizer step N // 2; from 1, log step N is (N - 1) // 2 and (N - 1) % 2."""
    st = ReadStats(source="m.jsonl", format="jsonl", min_step=0)
    conv = resolve_convention([st], None, micro_batches=2, grad_accum=2)
    assert [(conv.optimizer_step(n), conv.micro_batch(n)) for n in range(5)] == [(n // 2, n % 2) for n in range(5)]
    assert conv.log_step(5) == 10 and conv.describe(11) == "log step 11 = optimizer step 5, micro-batch 1 of 2"
    assert "counts micro-batches, 2 per optimizer step" in conv.source
    one = resolve_convention([st], 1, micro_batches=3)
    assert [(one.optimizer_step(n), one.micro_batch(n)) for n in (1, 3, 4, 7)] == [(0, 0), (0, 2), (1, 0), (2, 0)]


def test_an_assumed_count_with_grad_accum_says_each_log_step_is_an_optimizer_step():
    st = ReadStats(source="m.jsonl", format="jsonl", min_step=0)
    conv = resolve_convention([st], None, grad_accum=4)
    assert conv.assumed and conv.micro_batches == 1 and conv.micro_batch(7) is None
    assert "each log step is taken as one optimizer step of [batch] grad_accum 4 micro-batches" in conv.source
    assert "--step-unit micro-batch" in conv.source
    for quiet in (resolve_convention([st], None), resolve_convention([st], 0, grad_accum=4)):
        assert "--step-unit" not in quiet.source  # no accumulation, or the count given: nothing assumed


def test_cli_step_unit_micro_batch_needs_grad_accum(tmp_path):
    log = write_jsonl(tmp_path / "m.jsonl", _rows(0, bad=5))
    (tmp_path / "datacheck.toml").write_text("[batch]\nbatch_size = 4\n")
    r = run_cli("trace", str(log), "--config", str(tmp_path / "datacheck.toml"), "--step-unit", "micro-batch")
    assert r.returncode == 2 and "--step-unit micro-batch needs" in r.stderr and "grad_accum" in r.stderr


def test_a_micro_batch_count_across_ragged_epochs():
    """3 micro-batches an epoch, 2 per optimizer step: the epoch's steps are {0, 1}, {2}; the count runs
    on, so log step 3 (from 1: 4) is epoch 1's micro-batch 0, optimizer step 2; log_step inverts it."""
    m, ga = 3, 2
    for first in (0, 1):
        conv = replace(resolve_convention([], first, micro_batches=ga), epoch_micro_batches=m)
        want = [(e * 2 + j // ga, j % ga) for e in range(3) for j in range(m)]  # per micro-batch of the run
        got = [(conv.optimizer_step(n + first), conv.micro_batch(n + first)) for n in range(3 * m)]
        assert got == want
        assert [conv.log_step(k) for k in range(6)] == [first + x for x in (0, 2, 3, 5, 6, 8)]
        assert conv.to_dict()["epoch_micro_batches"] == m and "epoch n // 3" in conv.formula()


def test_a_micro_batch_count_across_epochs_of_different_lengths():
    """Epochs of 5, 3, 4 micro-batches (later ones as the last), 2 per optimizer step: each epoch's steps
    are ceil(m / 2) with the last holding the remainder; log_step inverts optimizer_step."""
    counts, ga = (5, 3, 4), 2
    for first in (0, 1):
        conv = replace(resolve_convention([], first, micro_batches=ga), epoch_counts=counts)
        lens = [*counts, counts[-1]]  # a fourth epoch, as long as the last listed
        want, base = [], 0
        for m in lens:
            want += [(base + j // ga, j % ga) for j in range(m)]
            base += -(-m // ga)
        got = [(conv.optimizer_step(n + first), conv.micro_batch(n + first)) for n in range(sum(lens))]
        assert got == want
        starts = [n for n in range(sum(lens)) if want[n][1] == 0]  # each optimizer step's first micro-batch
        assert [conv.log_step(k) for k in range(base)] == [first + n for n in starts]
        assert conv.to_dict()["epoch_counts"] == list(counts) and "epochs of 5, 3, 4" in conv.formula()


def test_a_log_numbered_by_epochs_says_each_epoch_is_taken_as_one_step():
    # PROVENANCE.md: gradnorm_tf#17 'epoch: N loss: X' lines, no step key
    logs = SHARED / "logs"
    if not logs.is_dir():
        pytest.skip("shared logs not present")
    src = logs / "issues/gradnorm_tf_17_epoch_loss_nan.txt"
    assert all(ln.startswith("epoch: ") for ln in src.read_text().splitlines() if "loss" in ln)
    js = json.loads(run_cli("trace", str(src), "--format", "json", "--no-progress").stdout)["result"]
    assert "step_is_epoch" in js["logs"][0]["notes"]
    assert "step number is the epoch it logs" in js["convention"]["source"]
    assert "each epoch is taken as one optimizer step" in run_cli("trace", str(src), "--no-progress").stdout
    stepped = json.loads(run_cli("trace", str(logs / "issues/mlx_examples_620_lora_loss_spike.txt"), "--format",
                                 "json", "--no-progress").stdout)["result"]
    assert "step_is_epoch" not in stepped["logs"][0]["notes"] and "epoch" not in stepped["convention"]["source"]
