"""Hugging Face ``trainer_state.json`` is streamed (ijson): a cut file keeps the entries before the cut and
says where it stopped; NaN/Infinity tokens are read back; the safejson bounds hold per entry."""
from __future__ import annotations

import contextlib
import io
import json
import math

import pytest
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as hs

from datacheck.cli.main import main
from datacheck.io.safejson import MAX_JSON_DEPTH
from datacheck.model.errors import UsageError
from datacheck.trace import TraceOptions, open_log, parse_spike_rule, trace_logs
from datacheck.trace.readers import hfstate


def _state(n: int, nan_at: int | None = None, **more) -> str:
    """A trainer_state.json as TrainerState.save_to_json writes it (indent=2, sort_keys=True)."""
    hist = [{"epoch": round(0.01 * (i + 1), 4), "grad_norm": float("nan") if i + 1 == nan_at else 1.5,
             "learning_rate": 1e-4, "loss": 2.0 - 0.001 * i, "step": i + 1} for i in range(n)]
    doc = {"best_model_checkpoint": "out/NaN-sweep \"Infinity\" \\", "global_step": n, "log_history": hist,
           "logging_steps": 1, "max_steps": 1000, **more}
    return json.dumps(doc, indent=2, sort_keys=True)


def _trace(path):
    return trace_logs([open_log(str(path))], TraceOptions(spike=parse_spike_rule("olmo")))


def test_non_finite_grad_norm_is_read_from_bare_nan_tokens(tmp_path):
    p = tmp_path / "trainer_state.json"
    p.write_text(_state(40, nan_at=31))
    res = _trace(p)
    st = res.logs[0]
    assert (st.format, st.lines, st.records, st.bad_lines, st.stopped) == ("hf_state", 40, 40, 0, None)
    assert st.notes == {"hf_nan_filter", "logging_steps=1"}
    assert res.first_bad["check"] == "log.non_finite" and res.first_bad["step"] == 31
    assert res.first_bad["last_good_step"] == 30


def test_truncated_trainer_state_keeps_the_steps_read_and_says_where_it_stopped(tmp_path):
    text = _state(40, nan_at=31)
    cut = text.index('"step": 36') + 5  # inside log_history[35]
    p = tmp_path / "trainer_state.json"
    p.write_text(text[:cut])
    res = _trace(p)
    st = res.logs[0]
    assert st.records == 35 and st.lines == 36
    assert st.stopped.startswith("read stopped in log_history[35] (file bytes read: ")
    assert "the file ends mid-document (cut mid-write?); the 35 complete entries before it are traced" in st.stopped
    assert st.bad_lines == 1 and st.bad_examples[0][0] == 36
    assert res.first_bad["step"] == 31  # the NaN before the cut is still found
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["trace", str(p)])
    assert rc == 1 and "Traceback" not in err.getvalue()
    assert f"warning: {p}: read stopped in log_history[35]" in out.getvalue()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["trace", str(p), "--format", "json"])
    assert json.loads(out.getvalue())["result"]["logs"][0]["stopped"] == st.stopped


def test_cut_between_entries_and_before_log_history(tmp_path):
    text = _state(10)
    p = tmp_path / "trainer_state.json"
    p.write_text(text[:text.index("},", text.index('"step": 4')) + 2])  # after log_history[3]
    st = _trace(p).logs[0]
    assert st.records == 4 and st.stopped.startswith("read stopped after log_history[3] (file bytes read: ")
    p.write_text(text[:20])  # too short to sniff: the format is forced
    with pytest.raises(UsageError, match="not a readable trainer_state.json .*cut mid-write"):
        list(open_log(str(p), fmt="hf_state").records())


def test_nesting_and_huge_integers_stop_the_read_with_the_entries_before(tmp_path):
    text = _state(5)
    deep = "[" * (MAX_JSON_DEPTH + 5) + "]" * (MAX_JSON_DEPTH + 5)
    p = tmp_path / "trainer_state.json"
    p.write_text(text.replace('"step": 4', f'"step": 4, "extra": {deep}'))
    st = _trace(p).logs[0]
    assert st.records == 3 and f"nested more than {MAX_JSON_DEPTH} levels" in st.stopped
    assert "log_history[3]" in st.stopped
    p.write_text(text.replace('"step": 3', '"step": 3, "total_flos": ' + "9" * 5000))
    st = _trace(p).logs[0]
    assert st.records == 2 and "log_history[2]" in st.stopped and "integer overflow" in st.stopped


def test_entries_that_are_not_metric_objects_are_counted(tmp_path):
    hist = [{"step": 1, "loss": 2.0}, [1, 2], 7, {"step": 2, "loss": {"a": 1}}, {"step": 3, "loss": 1.9},
            {"train_runtime": 12.0, "step": 3}]
    p = tmp_path / "trainer_state.json"
    p.write_text(json.dumps({"log_history": hist, "logging_steps": 5}))
    st = _trace(p).logs[0]
    assert (st.lines, st.records, st.bad_lines, st.stopped) == (6, 2, 3, None)
    assert [n for n, _ in st.bad_examples] == [2, 3, 4]
    assert "logging_steps=5" in st.notes


@pytest.mark.parametrize("doc,match", [('[{"log_history": []}]', "a JSON array, not an object"),
                                       ('{"log_history": 3}', "'log_history' is a number, not a list"),
                                       ('{"global_step": 3}', "no 'log_history' list")])
def test_not_a_trainer_state_is_a_usage_error(tmp_path, doc, match):
    p = tmp_path / "s.json"
    p.write_text(doc)
    with pytest.raises(UsageError, match=match):
        list(open_log(str(p), fmt="hf_state").records())


_scalars = hs.one_of(hs.floats(allow_nan=True, allow_infinity=True), hs.integers(-10**6, 10**6),
                     hs.text(alphabet='NaIfinty"\\-x {}[],:\n\u00e9', max_size=12), hs.booleans(), hs.none())
_docs = hs.recursive(_scalars, lambda inner: hs.one_of(hs.lists(inner, max_size=4),
                                                       hs.dictionaries(hs.text(max_size=6), inner, max_size=4)),
                     max_leaves=20)


def _expected(v):
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    if isinstance(v, dict):
        return {k: _expected(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_expected(x) for x in v]
    return v


@settings(max_examples=examples(200), deadline=None)
@given(doc=_docs, read=hs.integers(1, 40), indent=hs.sampled_from([None, 2]))
def test_nan_quoting_reader_against_json(doc, read, indent):
    """Reference: Python's json reads the original text; the reader's output, read by json with NaN
    refused, equals it with every non-finite float as its token string, for any read size."""
    text = json.dumps(doc, indent=indent).encode()
    rd = hfstate.NanQuotingReader(io.BytesIO(text), chunk=read)
    got = b""
    while chunk := rd.read(7):
        got += chunk
    def refuse(tok):
        raise AssertionError(f"bare {tok} left in the output")
    assert json.loads(got, parse_constant=refuse) == _expected(json.loads(text))
    assert rd.consumed == len(text)

