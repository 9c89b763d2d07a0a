"""The text reader's line formats and step conventions: Hugging Face console dicts placed by the
Trainer's header or a tqdm count, wrapped dicts, llm.c, stated bad values (warning lines), and the
trainer's count of its first step."""
from __future__ import annotations

import json

from conftest import run_cli

from datacheck.trace import TraceOptions, open_log, parse_spike_rule, trace_logs

HEADER = ("***** Running training *****\n  Num examples = 10,000\n  Num Epochs = 1\n"
          "  Instantaneous batch size per device = 16\n  Gradient Accumulation steps = 2\n"
          "  Total optimization steps = 313\n")


def _dict(loss, epoch):
    return "{'loss': %s, 'grad_norm': %s, 'learning_rate': 4.2e-05, 'epoch': %s}\n" % (loss, loss, epoch)


def _trace(path):
    return trace_logs([open_log(str(path))], TraceOptions(spike=parse_spike_rule("olmo")))


def test_hf_console_steps_from_the_header(tmp_path):
    # the Trainer logs every 10 steps; epoch = (micro-batch + 1) / 626 micro-batches, 313 update steps
    lines = [_dict("nan" if s == 50 else 1.0, round(2 * s / 626, 4)) for s in range(10, 101, 10)]
    log = tmp_path / "console.log"
    log.write_text(HEADER + "".join(lines))
    lf = open_log(str(log))
    assert [r.step for r in lf.records()] == list(range(10, 101, 10))
    assert lf.stats.first_step == 1 and lf.stats.unplaced is None
    r = run_cli("trace", str(log))
    assert r.returncode == 1
    assert "first anomaly: log.non_finite at log step 50 = optimizer step 49 (" in r.stdout and "window 41..50" in r.stdout


def test_tqdm_prefixed_dict_on_one_line(tmp_path):
    log = tmp_path / "bar.log"
    log.write_text(" 16%|#6        | 50/313 [00:03<00:17, 15.2it/s]" + _dict("nan", 0.1597)
                   + " 19%|#9        | 60/313 [00:04<00:17, 15.2it/s]" + _dict(0.5, 0.1917))
    for fmt in ("auto", "hf_console"):
        lf = open_log(str(log), fmt)
        assert [r.step for r in lf.records()] == [50, 60] and lf.stats.bad_lines == 0


def test_a_dict_wrapped_onto_two_lines(tmp_path):
    log = tmp_path / "wrapped.log"
    log.write_text(HEADER + "{'loss': 0.7, 'grad_norm': 1.5,\n 'learning_rate': 4e-05, 'epoch': 0.0319}\n"
                   + "{'loss': inf, 'grad_norm': 1.5, 'learning_rate': 4e-05,\n 'epoch': 0.0639}\n")
    recs = list(open_log(str(log)).records())
    assert [(r.step, r.loss, r.lr) for r in recs] == [(10, 0.7, 4e-05), (20, float("inf"), 4e-05)]


def test_llmc_main_log(tmp_path):
    log = tmp_path / "main.log"
    with open(log, "w") as f:
        for s in range(19560):
            f.write(f"s:{s} trl:{3.0 - s * 1e-4:.6f} lr:0.000600 norm:{0.5:.4f}\n")
            if s % 250 == 0:
                f.write(f"s:{s} tel:{3.1 - s * 1e-4:.6f}\n")
                f.write(f"s:{s} eval:0.2950\n")  # HellaSwag accuracy: not a loss
    res = _trace(log)
    assert res.streams == {str(log): 19560} and res.first_bad is None
    assert sum(1 for e in res.events if e["kind"] == "eval") == 79
    assert res.logs[0].first_step == 0 and res.logs[0].bad_lines == 0
    rec = next(iter(open_log(str(log)).records()))
    assert (rec.step, rec.loss, rec.lr, rec.grad_norm) == (0, 3.0, 0.0006, 0.5)


def test_loss_is_infinity_line(tmp_path):
    log = tmp_path / "bigdl.log"
    log.write_text("iteration 1: loss 2.1\niteration 2: loss 2.0\nLoss is Infinity\niteration 3: loss 2.2\n")
    f = {x.check: x for x in _trace(log).findings}["log.non_finite"]
    assert f.details["step"] == 3 and f.details["reason"] == "loss inf"


def test_megatron_bad_grad_norm_warning_and_skipped_iteration(tmp_path):
    it = (" iteration {n:8d}/    1000 | consumed samples: {c:12d} | learning rate: 1.500E-04 | global batch size:"
          "     4 |{loss} loss scale: 1.0 | number of skipped iterations: {sk:3d} | number of nan iterations:   0 |\n")
    log = tmp_path / "megatron.out"
    log.write_text(it.format(n=1, c=4, loss=" lm loss: 2.247505E+00 |", sk=0)
                   + it.format(n=2, c=8, loss=" lm loss: 2.201E+00 |", sk=0)
                   + "WARNING: Bad grad_norm detected (grad_norm=nan)\n"
                   + it.format(n=3, c=12, loss="", sk=1))
    res = _trace(log)
    f = {x.check: x for x in res.findings}["log.non_finite"]
    assert f.details["step"] == 3 and f.details["reason"] == "grad_norm nan"
    assert res.first_bad["step"] == 3 and res.logs[0].first_step == 1


def test_conventions_of_the_readers(tmp_path):
    nano = tmp_path / "nano.log"
    nano.write_text("iter 0: loss 4.2, time 50.0ms, mfu -100.00%\niter 10: loss 3.9, time 50.0ms, mfu 7.0%\n")
    mlx = tmp_path / "mlx.log"
    mlx.write_text("Iter 1: Train loss 1.5, Learning Rate 1.0e-05, It/sec 0.9\n")
    plain = tmp_path / "m.jsonl"
    plain.write_text(json.dumps({"step": 1, "loss": 1.0}) + "\n")
    lightning = tmp_path / "metrics.csv"
    lightning.write_text("epoch,lr-AdamW/pg1,step,train_loss_step\n0,0.001,0,2.0\n0,0.001,1,1.9\n")
    hf = tmp_path / "hf.jsonl"
    hf.write_text(json.dumps({"train/global_step": 1, "train/loss": 1.0}) + "\n")
    got = {}
    for p in (nano, mlx, plain, lightning, hf):
        lf = open_log(str(p))
        recs = list(lf.records())
        got[p.name] = (lf.stats.first_step, recs[0].lr)
    assert got == {"nano.log": (0, None), "mlx.log": (1, 1e-05), "m.jsonl": (None, None),
                   "metrics.csv": (0, 0.001), "hf.jsonl": (1, None)}
    r = run_cli("trace", str(nano), str(mlx))
    assert r.returncode == 2 and "count steps differently" in r.stderr and "--first-step" in r.stderr


def test_coqui_console_blocks(tmp_path):
    """The trainer log trainproof reads: one block per step, eval blocks at the last step."""
    def block(step, loss):
        return (f" --> TIME: 2023-04-11 10:21:{step:02d} -- STEP: {step - 1}/406 -- GLOBAL_STEP: {step}\n"
                f"     | > loss: {loss}  (0.61020)\n     | > current_lr: 0.0001 \n     | > grad_norm: 1.2  (1.3)\n"
                "     | > step_time: 0.35  (0.34)\n\n")
    log = tmp_path / "trainer_0_log.txt"
    log.write_text(block(25, 0.52) + block(50, 0.48) + " --> EVAL PERFORMANCE\n     | > loader_time: 0.01\n"
                   "     | > avg_loss: 0.55  (+0.01)\n\n" + block(75, "nan"))
    lf = open_log(str(log))
    recs = list(lf.records())
    assert [(r.step, r.split, r.loss) for r in recs[:3]] == [(25, "train", 0.52), (50, "train", 0.48), (50, "eval", 0.55)]
    assert recs[0].lr == 0.0001 and recs[0].grad_norm == 1.2 and lf.stats.line_formats == {"coqui": 4}
    f = {x.check: x for x in _trace(log).findings}["log.non_finite"]
    assert f.details["step"] == 75 and f.details["window"] == [51, 75]


def test_jsonl_without_steps_names_no_rows(tmp_path):
    log = tmp_path / "m.jsonl"
    log.write_text("".join(json.dumps({"loss": 1.0 if i != 3 else float("nan")}) + "\n" for i in range(6)))
    data = tmp_path / "d.jsonl"
    data.write_text('{"x": 1.0}\n')
    r = run_cli("trace", str(log))
    assert r.returncode == 1 and "at record 4 (the log gives no step number)" in r.stdout
    r = run_cli("trace", str(log), "--data", str(data))
    assert r.returncode == 2 and "carry no step key" in r.stderr


def test_a_megatron_line_wrapped_by_the_terminal(tmp_path):
    line = (" iteration       30/    1000 | consumed samples:          120 | elapsed time per iteration (ms): 1376.1 |"
            " learning rate: 1.500E-04 | global batch size:     4 | lm loss: 2.247505E+01 | loss scale: 16384.0 |"
            " grad norm: 16.999 | number of skipped iterations:   1 | number of nan iterations:   0 |\n")
    cut = line.index("2.2475") + 4  # a hard wrap in the middle of the loss value
    log = tmp_path / "wrapped.out"
    log.write_text(line.replace("30/", "20/") + line[:cut] + "\n" + line[cut:] + line.replace("30/", "40/")[:60] + "\n")
    lf = open_log(str(log))
    recs = list(lf.records())
    assert [(r.step, r.loss, r.grad_norm) for r in recs] == [(20, 22.47505, 16.999), (30, 22.47505, 16.999),
                                                             (40, None, None)]
    assert lf.stats.bad_lines == 0  # the last line, cut mid-write, keeps the fields before the cut


def test_jsonl_bare_non_finite_spellings_are_read_as_values(tmp_path):
    """A logger that formats its floats itself writes ``"loss": nan`` or ``-inf`` (no JSON literal):
    the line is read with that value, so the NaN is found, never dropped as an unparsed line while
    the log passes. Strings holding those words stay strings."""
    spellings = {"nan": "nan", "NAN": "nan", "-nan": "nan", "inf": "inf", "-inf": "-inf", "+Infinity": "inf",
                 "INF": "inf"}
    for spelled, want in spellings.items():
        log = tmp_path / "m.jsonl"
        log.write_text("".join('{"step": %d, "loss": %s, "run": "nan inf"}\n' % (s, spelled if s == 5 else "2.0")
                               for s in range(1, 9)))
        lf = open_log(str(log))
        recs = list(lf.records())
        assert [r.step for r in recs] == list(range(1, 9)) and lf.stats.bad_lines == 0, spelled
        assert str(recs[4].loss) == want, spelled
        r = run_cli("trace", str(log))
        assert r.returncode == 1, (spelled, r.stdout)
        assert "first anomaly: log.non_finite at log step 5" in r.stdout, spelled
    log.write_text('{"step": 1, "loss": nanx}\n{"step": 2, "loss": 1.0}\n')  # not a spelling of NaN
    lf = open_log(str(log))
    assert [r.step for r in lf.records()] == [2] and lf.stats.bad_lines == 1


def test_launcher_rank_prefixes_give_each_line_its_rank(tmp_path):
    """torchrun's ``[rank1]:`` / ``[default1]:`` and OpenMPI's ``[1,1]<stdout>:`` prefix every line of
    an interleaved multi-rank console log: the lines are read (they were "no training step found")
    and each record carries its rank, so rank 1 going NaN alone is a one-rank NaN, not a re-counted step."""
    it = (" iteration {s:8d}/     100 | consumed samples: {c:8d} | learning rate: 1.000E-04 | lm loss: {loss} |"
          " loss scale: 1.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n")
    for prefix in ("[rank{r}]: ", "[default{r}]:", "[1,{r}]<stdout>: "):
        log = tmp_path / "all_ranks.log"
        log.write_text("".join(prefix.format(r=r) + it.format(s=s, c=8 * s, loss="nan" if r == 1 and s >= 6 else "2.5E+00")
                               for s in range(1, 11) for r in range(2)))
        lf = open_log(str(log))
        recs = list(lf.records())
        assert [(x.step, x.rank) for x in recs] == [(s, r) for s in range(1, 11) for r in range(2)], prefix
        assert lf.stats.bad_lines == 0
        res = _trace(log)
        f = {x.check: x for x in res.findings}
        assert f["log.non_finite"].details["step"] == 6 and "log.duplicate_steps" not in f, prefix
        assert "log.rank_divergence" in f
    log.write_text("[INFO]: iteration 1/ 10 | lm loss: 2.0 |\n")  # a bracket that is no rank prefix
    assert open_log(str(log)).stats.bad_lines == 0 and [x.rank for x in open_log(str(log)).records()] == []


def test_megatron_lines_interleaved_mid_line_keep_the_non_finite_value(tmp_path):
    """Two ranks writing one stdout without line buffering: rank 1's line lands inside rank 0's, so
    the line holds ``lm loss`` twice. The NaN of either is kept (the last value won: the NaN was lost
    and the log passed)."""
    a = " iteration {s:4d}/ 100 | lm loss: 2.5E+00 | loss scale: 1.0 |"
    b = " iteration {s:4d}/ 100 | lm loss: {v} | loss scale: 1.0 |"
    log = tmp_path / "interleaved.log"
    def line(s):
        first = a.format(s=s)
        cut = first.index("|") + 1  # rank 1's line lands after rank 0's first field separator
        return first[:cut] + b.format(s=s, v="nan" if s == 7 else "2.6E+00") + first[cut:] + "\n"

    log.write_text("".join(line(s) for s in range(1, 11)))
    recs = list(open_log(str(log)).records())
    assert [r.step for r in recs] == list(range(1, 11))
    assert [str(r.loss) for r in recs] == ["2.5"] * 6 + ["nan"] + ["2.5"] * 3
    assert {f.check: f for f in _trace(log).findings}["log.non_finite"].details["step"] == 7


def test_other_runtimes_non_finite_spellings_and_printed_tensors_are_values(tmp_path):
    """MSVC's ``1.#QNAN``/``-1.#IND``/``1.#INF``, C99's ``nan(0x7ff8)`` and a loss printed as a PyTorch
    tensor are read as the values they spell, in key=value and Megatron lines; a loss that is no
    number makes its line unparsed, never a record without its loss (the NaN was dropped and the
    log passed)."""
    kv = "step {s}: loss {v}, lr 0.001\n"
    meg = (" iteration {s:8d}/ 100 | learning rate: 1.0E-04 | lm loss: {v} | loss scale: 1.0 |"
           " number of skipped iterations:   0 | number of nan iterations:   0 |\n")
    for spelled, want in {"1.#QNAN": "nan", "-1.#IND": "nan", "1.#INF": "inf", "-1.#INF": "-inf", "nan(0x7ff8)": "nan",
                          "NaN(0x7ff8)": "nan", "tensor(nan, device='cuda:0', grad_fn=<NllLossBackward0>)": "nan",
                          "tensor([inf])": "inf"}.items():
        for tpl in (kv, meg):
            if tpl is meg and spelled.startswith("tensor"):
                continue
            log = tmp_path / "l.log"
            log.write_text("".join(tpl.format(s=s, v=spelled if s == 5 else "2.0") for s in range(1, 9)))
            lf = open_log(str(log))
            recs = list(lf.records())
            assert lf.stats.bad_lines == 0 and [r.step for r in recs] == list(range(1, 9)), spelled
            assert str(recs[4].loss) == want, (spelled, tpl)
            assert {f.check: f for f in _trace(log).findings}["log.non_finite"].details["step"] == 5
    log = tmp_path / "l.log"
    log.write_text("step 1: loss 2.0, lr 0.001\nstep 2: loss ???, lr 0.001\nstep 3: loss 1.9, lr 0.001\n")
    lf = open_log(str(log))
    assert [r.step for r in lf.records()] == [1, 3] and lf.stats.bad_lines == 1


def test_the_rank_answer_names_ranks_of_the_world_size_that_never_logged(tmp_path):
    """Both logged ranks go NaN, but --world-size 4: "all ranks" claimed ranks 2 and 3, which logged
    nothing; the answer now says all logged ranks and names the unseen ones."""
    it = " iteration {s:8d}/     100 | learning rate: 1.000E-04 | lm loss: {loss} | loss scale: 1.0 |\n"
    logs = []
    for r in range(2):
        p = tmp_path / f"rank{r}.log"
        p.write_text("".join(it.format(s=s, loss="nan" if s >= 6 else "2.5E+00") for s in range(1, 11)))
        logs.append(str(p))
    r = run_cli("trace", *logs, "--world-size", "4")
    assert "2. all ranks or one: all 2 logged ranks; ranks [2, 3] are not in the logs" in r.stdout, r.stdout
    r = run_cli("trace", *logs)
    assert "2. all ranks or one: all ranks\n" in r.stdout, r.stdout


SUMMARY = ("{'train_runtime': 12.3, 'train_samples_per_second': 5.0, 'train_steps_per_second': 1.0, "
           "'train_loss': 2.4, 'epoch': 1.0}\n")


def test_hf_run_summary_dict_is_a_known_record_not_an_unparsed_line(tmp_path):
    """The Trainer prints its run summary once after training; its train_loss is the run's mean, not a
    step's: never a step record, and no longer counted as a line "not parsed (no metric)"."""
    p = tmp_path / "console.log"
    p.write_text(HEADER + "  Num update steps per epoch = 313\n" + _dict(2.5, 0.5) + _dict(2.3, 1.0) + SUMMARY)
    lf = open_log(str(p))
    assert [r.loss for r in lf.records()] == [2.5, 2.3]
    assert lf.stats.bad_lines == 0 and lf.stats.bad_examples == []
    assert lf.stats.line_formats == {"hf_console": 2, "hf_summary": 1} and "hf_summary_entry" in lf.stats.notes
    r = run_cli("trace", str(p))
    assert "not parsed" not in r.stdout and "(hf_console 2, hf_summary 1)" in r.stdout


def test_lines_without_steps_are_numbered_from_1_the_same_everywhere(tmp_path):
    """apex overflow lines carry no step: record N is the N-th line, as Hugging Face console records
    and JSONL records without steps are numbered; the first anomaly, the finding, the evidence (file:line)
    and the verdict name the same number. The collapse starts at the second line (the first back-off,
    65536 -> 32768, is the initial scale search)."""
    scales = [32768.0, 16384.0, 8192.0, 4096.0, 0.5]
    p = tmp_path / "apex.log"
    p.write_text("".join(f"Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to {s}\n"
                         for s in scales))
    assert [r.step for r in open_log(str(p)).records()] == list(range(1, len(scales) + 1))
    line = 2
    r = run_cli("trace", str(p))
    out = r.stdout
    assert f"first anomaly: log.loss_scale_collapse at record {line} (the log gives no step number)" in out
    assert f"from record {line} to {len(scales)}" in out  # the finding
    assert f"evidence: {p}:{line}, record {line}:" in out  # the evidence: its line is its record number
    assert f"[numeric] log.loss_scale_collapse at record {line} " in out  # the verdict
    assert f"1. from which step: record {line} " in out and "last good record none" in out


def test_megatron_iteration_past_int64_is_an_unparsed_line(tmp_path):
    """An iteration (or validation iteration) past a 64-bit integer is an unparsed line, named, as a
    step of any other reader is (it was a record at step 10**30)."""
    it = (" iteration {s}/      20 | consumed samples: {c:12d} | learning rate: 1.000E-04 | lm loss: 2.0E+00 |"
          " loss scale: 1.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n")
    log = tmp_path / "run.log"
    log.write_text(it.format(s=1, c=2) + it.format(s=10**30, c=4) + it.format(s=2, c=4)
                   + f" validation loss at iteration {2**63} | lm loss value: 7.9 | lm loss PPL: 2.7E+03 |\n")
    lf = open_log(str(log))
    assert [r.step for r in lf.records()] == [1, 2]
    assert lf.stats.bad_lines == 2 and all("beyond a 64-bit integer" in why for _n, why in lf.stats.bad_examples)


def test_megatron_negative_or_malformed_iteration_is_an_unparsed_line(tmp_path):
    """``iteration -5/ 20 |`` (and a count that is no integer, in an iteration or validation line) is
    an unparsed line, named, as a negative step is in every keyed reader; it was read as no line at
    all (neither a record nor counted)."""
    it = (" iteration {s}/ {t} | consumed samples: 8 | learning rate: 1.000E-04 | lm loss: 2.0E+00 |"
          " loss scale: 1.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n")
    bad = [it.format(s=-5, t=20), it.format(s="abc", t=20), it.format(s=3, t="-20"), it.format(s="4.5", t=20),
           " validation loss at iteration -1 | lm loss value: 7.9 | lm loss PPL: 2.7E+03 |\n"]
    log = tmp_path / "run.log"
    log.write_text(it.format(s=1, t=20) + "".join(bad) + it.format(s=2, t=20)
                   + " validation loss at iteration 2 | lm loss value: 7.9 | lm loss PPL: 2.7E+03 |\n")
    lf = open_log(str(log))
    recs = list(lf.records())
    assert [(r.step, r.split) for r in recs] == [(1, "train"), (2, "train"), (2, "eval")]
    assert lf.stats.bad_lines == len(bad)
    whys = [why for _n, why in lf.stats.bad_examples]
    assert sum("-5 is negative, not a training step" in w for w in whys) == 1
    assert sum("'abc' is not an integer" in w for w in whys) == 1
    assert sum("iterations: -20 is negative" in w for w in whys) == 1
    assert sum("'4.5' is not an integer" in w for w in whys) == 1
    assert sum("iteration: -1 is negative" in w for w in whys) == 1
