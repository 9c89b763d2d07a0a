"""Hostile lines in a text log: counts of thousands of digits (CPython's int() refuses more than 4,300
and converts fewer in quadratic time) and lines on which a pattern retried from every position took
quadratic or cubic time. Each such line is read in linear time and is an unparsed line or no record,
never a traceback; the lines around it are read as before."""
from __future__ import annotations

import time

import pytest
from conftest import run_cli

from datacheck.trace import open_log
from datacheck.trace.readers import coqui, deepspeed, keyvalue, pydict, stated
from datacheck.trace.readers.fields import MAX_COUNT_DIGITS, BadValue, count_text
from datacheck.trace.readers.files import _non_finite_literals

#: digits past CPython's int() limit (sys.get_int_max_str_digits(): 4,300)
HUGE = "9" * 5000
#: characters of a pathological line: a quadratic pattern takes minutes here (measured before the
#: fix: 10,000 digits before a "<" 3.2 s, 20,000 10.4 s in deepspeed.TQDM; 2,000 blanks 5.8 s in
#: Coqui's item pattern), a linear one milliseconds
LONG = 200_000
#: seconds a linear read of a LONG line stays far below, on a loaded machine too
BOUND_S = 2.0


def _timed(fn, *args):
    t = time.perf_counter()
    try:
        out = fn(*args)
    except BadValue as exc:  # a line refused is an answer too
        out = exc
    return out, time.perf_counter() - t


def test_count_text_bounds_digits_before_int():
    assert count_text("0" * 5000 + "42", "step") == 42
    assert count_text(str(2**63 - 1), "step") == 2**63 - 1
    assert len(str(2**63 - 1)) == MAX_COUNT_DIGITS
    for bad in (HUGE, str(2**63)):
        with pytest.raises(BadValue, match="beyond a 64-bit integer"):
            count_text(bad, "step")


@pytest.mark.parametrize("line", [
    f" iteration {HUGE}/ 100 | consumed samples: 5 | lm loss: 1.0E+00 |",
    f" iteration -{HUGE}/ 100 | lm loss: 1.0E+00 |",
    f" validation loss at iteration {HUGE} | lm loss value: 1.0 |",
    f"s:{HUGE} trl:2.5",
    f"Epoch(train) [{HUGE}][1/10] loss: 1.0",
    f"[Rank {HUGE}] bad loss detected (loss=nan)",
    f"OVERFLOW! Rank {HUGE} Skipping step. Attempted loss scale: 65536.0, reducing to 32768.0",
])
def test_huge_counts_are_unparsed_lines(tmp_path, line):
    log = tmp_path / "train.log"
    log.write_text("step 1 loss 2.0\n" + line + "\nstep 2 loss 1.5\n")
    lf = open_log(str(log))
    recs = list(lf.records())
    assert [(r.step, r.loss) for r in recs if r.split == "train" and r.loss is not None and r.loss == r.loss][:2] \
        == [(1, 2.0), (2, 1.5)]
    assert lf.stats.bad_lines == 1 and "99999... is beyond" in lf.stats.bad_examples[0][1]


def test_huge_counts_where_no_line_is_judged(tmp_path):
    """A Coqui head, a Trainer header and a tqdm bar of a huge count are no head, header or bar."""
    log = tmp_path / "train.log"
    log.write_text(f" --> TIME: 2023-04-11 -- STEP: 1/2 -- GLOBAL_STEP: {HUGE}\n | > loss: 1.0\n\n"
                   f"  Num Epochs = {HUGE}\n"
                   f" {HUGE}/313 [00:03<00:17] {{'loss': 1.0, 'epoch': 0.1}}\n"
                   "step 1 loss 2.0\n")
    lf = open_log(str(log))
    assert [(r.step, r.loss) for r in lf.records()][-1] == (1, 2.0)
    r = run_cli("trace", str(log), "--format", "json")
    assert r.returncode in (0, 1, 2) and "Traceback" not in r.stderr


def test_megatron_consumed_samples_beyond_a_float(tmp_path):
    """``consumed samples`` of 5,000 digits is inf as a float: the line is unparsed (it was kept and
    int(inf) raised OverflowError in trace)."""
    log = tmp_path / "train.log"
    good = " iteration        {0}/     100 | consumed samples:          {1} | lm loss: 2.0E+00 |\n"
    log.write_text(good.format(1, 4) + good.format(2, HUGE) + good.format(3, 12))
    lf = open_log(str(log))
    assert [(r.step, r.tokens) for r in lf.records()] == [(1, 4.0), (3, 12.0)]
    assert lf.stats.bad_lines == 1 and "not a sample" in lf.stats.bad_examples[0][1]
    r = run_cli("trace", str(log), "--format", "json")
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stderr[-500:]


@pytest.mark.parametrize("name,fn,unit", [
    ("deepspeed tqdm", deepspeed.TQDM.search, "1"),
    ("hf_console tqdm", pydict._TQDM.search, "1"),
    ("coqui head", coqui._head_step, "--> TIME: "),
    ("coqui item", coqui._item, "| > " + " " * 10),
    ("stated megatron", stated.parse_line, "unexpected result nan found"),
    ("jsonl bare nan", _non_finite_literals, '\\"'),
    ("key_value", keyvalue.parse_line, "step=1 loss:"),
])
def test_pathological_lines_in_linear_time(name, fn, unit):
    line = (unit * (LONG // len(unit) + 1))[:LONG] + ("<" if "tqdm" in name else "")
    if "jsonl" in name:  # a string left open, holding escaped quotes
        line = '{"a": "' + line + " nan"
    _, s = _timed(fn, line)
    assert s < BOUND_S, f"{name}: {s:.1f} s on a line of {LONG} characters"


def test_rewritten_patterns_read_what_they_read():
    assert coqui._item("     | > loss: 0.52837  (0.61020)") == ("loss", "0.52837")
    assert coqui._item("| > : x") == ("", "x")
    assert coqui._item("| >: x") is None and coqui._item("| > loss:   ") is None and coqui._item("| > loss") is None
    assert coqui._head_step(" --> TIME: 2023-04-11 10:21:54 -- STEP: 24/406 -- GLOBAL_STEP: 25") == 25
    assert coqui._head_step(" --> TIME: x --> TIME: y") is None
    got = stated.parse_line("Rank 3: unexpected result nan (message=found NaN in local grad norm for bucket #0)")
    assert got is not None and got["grad_norm"] != got["grad_norm"] and got["rank"] == 3
    got = stated.parse_line("unexpected result inf found nan in loss, found inf in grad norm")
    assert got is not None and "grad_norm" in got  # the last mention, as the greedy pattern took
    assert deepspeed.TQDM.search("x 123/313 [00:03<00:17]").group(1) == "123"
    assert deepspeed.TQDM.search("9" * 19 + "/313 [00:03<") is None
    assert _non_finite_literals('{"loss": nan, "s": "nan \\" inf", "x": -inf}') \
        == '{"loss": NaN, "s": "nan \\" inf", "x": -Infinity}'
    assert _non_finite_literals('{"a": "x nan') is None  # an open string: no JSON whatever follows
    assert _non_finite_literals('{"a": nan, "b": "x\\') == '{"a": NaN, "b": "x\\'
    assert pydict.parse_header(f"  Num Epochs = {HUGE}") is None
    with pytest.raises(BadValue, match="beyond a 64-bit integer"):
        stated.parse_line(f"iteration {HUGE}: loss is nan")
    assert stated.parse_line("iteration 7: loss is nan")["step"] == 7
    assert pydict.parse_header("  Num Epochs = 3") == ("epochs", 3)
