"""Line numbers of text logs are the lines editors and ``grep -n`` count (a line ends at ``\\n``;
``\\r\\n`` is one end), while the records tqdm's ``\\r`` redraws share a line with are still read: the
evidence ``file:line``, the bad-line examples, the "N line(s)" count and "run 2 (restarted at
file:line)" all cite those lines. A tqdm bar redraws itself with ``\\r`` many times on one line, so
counting each ``\\r`` as a line end (universal newlines) put the first NaN of a 29-line console at
line 94 (the new user's trial, tests/data/trace/trial22)."""
from __future__ import annotations

import io

import pytest
from conftest import ROOT
from tqdm import tqdm
from tracehelp import trace

from datacheck.trace import open_log
from datacheck.trace.readers.files import MAX_LINE_CHARS
from datacheck.trace.render import render_text

TRIAL = ROOT / "tests" / "data" / "trace" / "trial22"
NL = b"\n"


def grep_n(data: bytes, needle: bytes) -> int:
    """The line ``grep -n`` gives the first line holding ``needle``: the newlines before it, plus 1."""
    return data[:data.index(needle)].count(b"\n") + 1


def wc_lines(data: bytes) -> int:
    """The lines an editor shows: ``wc -l``'s newlines, plus a last line without one."""
    return data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)


def _hf_console(losses: list[float], every: int = 2) -> str:
    """A Trainer console as the Trainer writes one: its banner, then a real tqdm bar (redrawn with ``\\r``
    on every update) and each logged dict written through ``tqdm.write`` (the ProgressCallback's way)."""
    f = io.StringIO()
    f.write("***** Running training *****\n  Num examples = 80\n  Num Epochs = 1\n"
            f"  Total optimization steps = {len(losses)}\n")
    bar = tqdm(total=len(losses), file=f, mininterval=0, miniters=1, ascii=True, ncols=70)
    for s, x in enumerate(losses, 1):
        bar.update(1)
        bar.refresh()  # a second redraw of the same count: tqdm redraws on a timer too
        if s % every == 0:
            bar.write(str({"loss": x, "grad_norm": 1.0, "learning_rate": 5e-05, "epoch": round(s / len(losses), 4)}),
                      file=f)
    bar.close()
    return f.getvalue()


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_real_tqdm_console_cites_the_lines_grep_counts(tmp_path, newline):
    losses = [2.0 - 0.02 * s for s in range(1, 31)]
    losses[21] = float("nan")  # step 22, logged at step 22
    text = _hf_console(losses).replace("\n", newline)
    data = text.encode()
    assert data.count(b"\r") > 2 * data.count(b"\n")  # the bar's redraws: more \r than lines
    p = tmp_path / "console.log"
    p.write_bytes(data)
    lf = open_log(str(p))
    recs = [r for r in lf.records() if r.split == "train"]
    # every dict the Trainer wrote is read, each at the line grep -n finds it on
    want = [(s, grep_n(data, f"{{'loss': {losses[s - 1]}, ".encode())) for s in range(2, 31, 2)]
    assert [(r.step, r.line) for r in recs] == want
    assert lf.stats.lines == wc_lines(data)
    res = trace(p)
    nan_line = grep_n(data, b"'loss': nan")
    assert res.first_bad is not None and res.first_bad["check"] == "log.non_finite"
    assert res.first_bad["where"] == f"{p}:{nan_line}" and res.first_bad["step"] == 22
    assert f"{lf.stats.lines} line(s)" in render_text(res, None)


def test_the_trials_consoles_cite_grep_lines():
    """The trial's inputs: a 29-line console of tqdm redraws with the first NaN loss on line 22
    (``grep -n``), and a real Hugging Face Trainer console (transformers 5.2, a 'Generating train split'
    bar on line 1) whose first NaN grad norm is on line 3."""
    con = (TRIAL / "tqdm_console.log").read_bytes()
    lf = open_log(str(TRIAL / "tqdm_console.log"))
    recs = list(lf.records())
    assert lf.stats.lines == wc_lines(con) == 29
    assert len(recs) == con.count(b"{'loss'") == 25
    first_nan = next(r for r in recs if r.loss != r.loss)
    assert first_nan.line == grep_n(con, b"'loss': nan") == 22
    assert trace(TRIAL / "tqdm_console.log").first_bad["where"].endswith(f"tqdm_console.log:{first_nan.line}")

    hf = (TRIAL / "hf_train_console.log").read_bytes()
    lf = open_log(str(TRIAL / "hf_train_console.log"))
    recs = list(lf.records())
    assert lf.stats.lines == wc_lines(hf)
    assert [r.line for r in recs] == [i for i, ln in enumerate(hf.split(b"\n"), 1) if b"{'loss'" in ln]
    g = next(r for r in recs if r.grad_norm is not None and r.grad_norm != r.grad_norm)
    assert g.line == grep_n(hf, b"'grad_norm': 'nan'") == 3


def test_bad_lines_and_a_restart_are_numbered_as_grep_does(tmp_path):
    """A dict with no number among its metrics (a bad line) and a run restarted into the same console
    (a second Trainer banner) are cited at their grep -n lines, after lines of tqdm redraws."""
    first = _hf_console([2.0 - 0.05 * s for s in range(1, 11)])
    bad = "\r 50%|#####     | 5/10 [00:00<00:01]{'loss': 'abc', 'grad_norm': 1.0, 'learning_rate': 5e-05, 'epoch': 0.5}\n"
    second = _hf_console([2.1 - 0.05 * s for s in range(1, 11)])
    data = (first + bad + second).encode()
    p = tmp_path / "console.log"
    p.write_bytes(data)
    lf = open_log(str(p))
    list(lf.records())
    assert lf.stats.bad_examples[0][0] == grep_n(data, b"'loss': 'abc'")
    res = trace(p)
    restart = next(e for e in res.events if e["kind"] == "restart")
    at = len(first.encode() + bad.encode()) + second.encode().index(b"{'loss'")  # the second run's first dict
    assert restart["where"] == f"{p}:{data[:at].count(NL) + 1}"
    assert any(s.endswith(f"(restarted at {restart['where']})") for s in res.streams)


def test_other_line_separators_of_str_splitlines_end_no_line(tmp_path):
    """Vertical tab, form feed, \\x1c-\\x1e, \\x85, \\u2028, \\u2029 end a line for str.splitlines, not for
    grep or an editor: a log holding them keeps grep's numbering."""
    seps = ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
    lines = [f"iter {i}: loss {3.0 - 0.1 * i:.3f}, time 10.0ms{seps[i % len(seps)]} note" for i in range(1, 21)]
    data = ("\n".join(lines) + "\n").encode()
    p = tmp_path / "train.log"
    p.write_bytes(data)
    lf = open_log(str(p))
    recs = list(lf.records())
    assert [r.line for r in recs] == [grep_n(data, f"iter {i}:".encode()) for i in range(1, 21)]
    assert lf.stats.lines == wc_lines(data) == 20


def test_a_line_of_many_redraws_longer_than_the_line_bound_is_read(tmp_path):
    """A bar redrawn for a long stretch without a newline makes one line past MAX_LINE_CHARS of short
    redraws: each redraw is bounded, not the line, so the dict after them is still read."""
    redraw = "\r 50%|#####     | 5/10 [00:00<00:01,  2.0it/s]"
    n = MAX_LINE_CHARS // len(redraw) + 10
    text = "***** Running training *****\n" + redraw * n + \
        "{'loss': 1.5, 'grad_norm': 1.0, 'learning_rate': 5e-05, 'epoch': 0.5}\n" + \
        "{'loss': 1.4, 'grad_norm': 1.0, 'learning_rate': 5e-05, 'epoch': 0.6}\n"
    assert text.index("{'loss'") - text.index("\n") > MAX_LINE_CHARS
    p = tmp_path / "console.log"
    p.write_text(text)
    lf = open_log(str(p))
    recs = list(lf.records())
    assert [(r.line, r.loss) for r in recs] == [(2, 1.5), (3, 1.4)]
    assert lf.stats.bad_lines == 0 and lf.stats.lines == 3


@pytest.mark.parametrize("end", ["\n", "\r\n"])
def test_csv_rows_are_numbered_as_grep_does(tmp_path, end):
    """A metrics CSV with \\n or \\r\\n line ends, a row with a cell too many: the rows and the bad one
    cited at their grep -n lines; a lone \\r (an old Mac file) ends a row for csv but no line for grep."""
    rows = ["step,loss,lr"] + [f"{s},{2.0 - 0.01 * s},0.001" for s in range(1, 9)]
    rows[5] += ",extra"
    data = (end.join(rows) + end).encode()
    p = tmp_path / "metrics.csv"
    p.write_bytes(data)
    lf = open_log(str(p))
    recs = list(lf.records())
    assert [(r.step, r.line) for r in recs] == [(s, grep_n(data, f"{s},{2.0 - 0.01 * s}".encode()))
                                               for s in range(1, 9) if s != 5]
    assert lf.stats.bad_examples[0][0] == grep_n(data, b",extra")
    assert lf.stats.lines == wc_lines(data)
    mac = ("\r".join(rows[:4]) + "\n" + "\n".join(rows[4:]) + "\n").encode()
    q = tmp_path / "mac.csv"
    q.write_bytes(mac)
    lf = open_log(str(q))
    assert [(r.step, r.line) for r in lf.records()][:4] == [(1, 1), (2, 1), (3, 1), (4, grep_n(mac, b"4,1.96"))]


def test_jsonl_with_crlf_and_a_redraw_is_numbered_as_grep_does(tmp_path):
    rows = [f'{{"step": {s}, "loss": {2.0 - 0.01 * s}}}' for s in range(1, 11)]
    rows[4] = "\r 50%|#####  | 5/10" + "\r" + rows[4]  # a bar drawn on the line before the record
    data = ("\r\n".join(rows) + "\r\n").encode()
    p = tmp_path / "m.jsonl"
    p.write_bytes(data)
    lf = open_log(str(p))
    recs = list(lf.records())
    assert [(r.step, r.line) for r in recs] == [(s, grep_n(data, f'"step": {s},'.encode())) for s in range(1, 11)]
    assert lf.stats.lines == 10 and lf.stats.bad_lines == 1  # the bar segment is no JSON
