"""Auditing a shard batch by batch gives the report of the one-batch path.

``$DATACHECK_BATCH_ROWS`` forces tiny batches (7 rows here), so every shard of the shared defect
cases and of sample_data/ is split into many batches, each checked alone and merged
(:mod:`datacheck.formats.batches`, ``datacheck.engine.shard._run_batches``). The JSON reports must be
identical but for ``created_at``: findings, counts, rows, lines, examples, details, stats, skipped.
The one float stat that is not merged bit for bit, ``targets.<col>`` (mean/std pooled with Chan's
formula), is compared within a relative 1e-9 in the property test and to 9 significant digits in the
reports (sample_data's regression shard has one); the reports are otherwise identical.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from batchhelp import _same_result, batch_rows
from conftest import CASES, ROOT, SHARED, examples, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from datacheck.engine import shard as engine
from datacheck.engine.shard import audit_frame, audit_shard
from datacheck.formats import batches
from datacheck.formats import parquet as engine_parquet
from datacheck.formats.batches import forced_batch_rows
from datacheck.io.discover import DiscoveredShard
from datacheck.io.hashing import hash_file
from datacheck.model.config import config_from_dict
from datacheck.model.constants import ENV_BATCH_ROWS

SAMPLE = ROOT / "sample_data"


def _cli_report(tmp: Path, data: Path, config: Path, rows: int | None, tag: str) -> dict:
    out = tmp / f"{tag}.json"
    p = run_cli("audit", str(data), "--config", str(config), "--output", str(out), "--report-dir", str(tmp / "reports"),
                "--no-cache", "--no-progress", "--format", "json", env={ENV_BATCH_ROWS: None if rows is None else str(rows)})
    assert p.returncode in (0, 1), p.stderr
    rep = json.loads(out.read_text())
    rep.pop("created_at")
    return rep


def _case_report(case_audits, name: str) -> dict:
    """The session's one-batch audit of a shared case (conftest ``case_audits``), as ``_cli_report`` gives it."""
    got = case_audits[name]
    assert got.returncode in (0, 1), got.stderr
    rep = json.loads(got.report)
    rep.pop("created_at")
    return rep


def _targets() -> list[tuple[str, Path, Path]]:
    out = [("sample_data", SAMPLE, SAMPLE / "datacheck.toml")]
    if CASES.is_dir():
        out += [(c.name, c / "data", c / "datacheck.toml") for c in sorted(CASES.iterdir())
                if (c / "expect.json").exists()]
    return out


@pytest.mark.parametrize("name,data,config", _targets(), ids=[t[0] for t in _targets()])
def test_report_in_batches_of_7_rows_equals_one_batch(tmp_path, name, data, config, request):
    whole = _cli_report(tmp_path, data, config, None, "whole") if name == "sample_data" \
        else _case_report(request.getfixturevalue("case_audits"), name)
    batched = _cli_report(tmp_path, data, config, 7, "batched")
    assert _pooled_floats(batched) == _pooled_floats(whole)


def _pooled_floats(report: dict) -> dict:
    """``report`` with the values of ``targets.<col>`` stats and of ``dist.target_scale`` details (mean
    and std pooled across batches with Chan's formula: equal within a relative 1e-9, not bit for bit)
    rounded to 9 significant digits; everything else as it is."""
    def r9(v):
        return float(f"{v:.9g}") if isinstance(v, float) else v

    out = json.loads(json.dumps(report))
    for sh in out["shards"]:
        for k, v in sh["stats"].items():
            if k.startswith("targets.") and isinstance(v, dict):
                sh["stats"][k] = {kk: r9(vv) for kk, vv in v.items()}
    for f in out["findings"]:
        if f["check"] == "dist.target_scale":
            f["details"] = {k: r9(v) for k, v in f["details"].items()}
    return out


# ------------------------------------------------------------------ property: random frames, random cuts

CONFIG = {
    "tokens": {"vocab_size": 50, "pad_token_id": 0, "eos_token_id": 2, "max_seq_len": 5},
    "labels": {"num_classes": 3, "ignore_index": -100},
    "numeric": {"compute_dtype": "fp16"},
    "dup": {"near": True},
}

ids = st.lists(st.integers(-2, 60), max_size=8)
rows_st = st.fixed_dictionaries({
    "text": st.sampled_from(["a", "b", "", "hello world again", "hello world agaim", None]),
    "input_ids": st.one_of(st.none(), ids),
    "label": st.one_of(st.none(), st.integers(-1, 4)),
    "target": st.one_of(st.none(), st.just(float("nan")), st.floats(-1e5, 1e5)),
})


def _frame(rows: list[dict]) -> pl.DataFrame:
    masks, labels = [], []
    for r in rows:
        x = r["input_ids"]
        masks.append(None if x is None else [1 if (i + len(x)) % 4 else 0 for i in range(len(x))])
        labels.append(None if x is None else [(-100 if i % 3 == 0 else v) for i, v in enumerate(x)])
    return pl.DataFrame({
        "text": [r["text"] for r in rows],
        "input_ids": pl.Series([r["input_ids"] for r in rows], dtype=pl.List(pl.Int64)),
        "attention_mask": pl.Series(masks, dtype=pl.List(pl.Int64)),
        "labels": pl.Series(labels, dtype=pl.List(pl.Int64)),
        "label": pl.Series([r["label"] for r in rows], dtype=pl.Int64),
        "target": pl.Series([r["target"] for r in rows], dtype=pl.Float64),
    })


def shard_result(path: Path, config: dict):
    """Audit the parquet file ``path`` as written (its row groups kept), every failing row kept."""
    chash, size = hash_file(path)
    return audit_shard(DiscoveredShard(path=path, rel=path.name, format="parquet"), config_from_dict(config),
                       chash, size, keep_rows=True)


@pytest.mark.slow
@settings(max_examples=examples(int(os.environ.get("DATACHECK_HYPOTHESIS_EXAMPLES", "25"))), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(rows_st, min_size=1, max_size=30), cut=st.integers(1, 9), group=st.integers(1, 12),
       cross=st.booleans())
def test_random_frames_cut_at_random_batches_equal_whole(rows, cut, group, cross):
    df = _frame(rows)
    cfg = config_from_dict(CONFIG)
    with batch_rows(None):
        one = audit_frame(df, cfg, keep_rows=True, cross_shard=cross)
    with batch_rows(cut):
        many = audit_frame(df, cfg, keep_rows=True, cross_shard=cross)
    _same_result(one, many)
    # the parquet path (pyarrow record batches across row groups of `group` rows)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "shard.parquet"
        pq.write_table(df.to_arrow(), path, row_group_size=group)
        with batch_rows(None):
            one_f = shard_result(path, CONFIG)
        with batch_rows(cut):
            many_f = shard_result(path, CONFIG)
    _same_result(one_f, many_f)


def test_batches_are_really_used(monkeypatch):
    calls: list[int] = []
    real = engine._run_batch

    def spy(lf, *a, **k):
        out = real(lf, *a, **k)
        calls.append(out.n)
        return out

    monkeypatch.setattr(engine, "_run_batch", spy)
    df = _frame([{"text": "a", "input_ids": [1, 2, 3], "label": 1, "target": 1.0}] * 20)
    cfg = config_from_dict(CONFIG)
    with batch_rows(7):
        res = audit_frame(df, cfg, keep_rows=True)
    assert calls == [7, 7, 6]
    dup = next(f for f in res.findings if f.check == "dup.exact_in_shard")
    assert dup.count == 19 and list(dup.rows[:3]) == [1, 2, 3]
    calls.clear()
    with batch_rows(None):
        audit_frame(df, cfg)
    assert calls == [20]


def test_parquet_batches_keep_the_dtypes_of_the_one_read(tmp_path):
    """Fixed-size lists, dictionary-encoded text and an all-null role column come out of the pyarrow
    batches with the dtypes of the one-batch read (List, String, the role's dtype)."""
    n = 23
    table = pa.table({
        "input_ids": pa.array([[i % 50, 1, 2, 3] for i in range(n)], type=pa.list_(pa.int64(), 4)),
        "text": pa.array(["x" if i % 5 else "y" for i in range(n)]).dictionary_encode(),
        "labels": pa.array([None] * n, type=pa.null()),
    })
    pq.write_table(table, tmp_path / "shard.parquet", row_group_size=5)
    with batch_rows(None):
        one = shard_result(tmp_path / "shard.parquet", CONFIG)
    with batch_rows(4):
        many = shard_result(tmp_path / "shard.parquet", CONFIG)
    assert one.readable and one.rows == n
    assert many.columns == one.columns
    _same_result(one, many)


def test_bad_batch_rows_variable_is_an_error_naming_it():
    with batch_rows(0), pytest.raises(ValueError, match=ENV_BATCH_ROWS):
        forced_batch_rows()


def test_columns_the_read_path_makes_are_batched_from_the_opened_frame(tmp_path):
    """An Alpaca parquet shard: the read path derives `messages` (not in the file), so batches come
    from the opened frame, not from pyarrow over the file: same findings as one batch."""
    n = 11
    pq.write_table(pa.table({
        "instruction": [f"q{i}" for i in range(n)],
        "input": ["" if i % 2 else "ctx" for i in range(n)],
        "output": ["" if i == 4 else f"a{i}" for i in range(n)],
    }), tmp_path / "alpaca.parquet", row_group_size=3)
    with batch_rows(None):
        one = shard_result(tmp_path / "alpaca.parquet", {})
    with batch_rows(2):
        many = shard_result(tmp_path / "alpaca.parquet", {})
    assert one.readable and one.rows == n
    assert "sft.empty_turn" in {f.check for f in one.findings}
    _same_result(one, many)


# ------------------------------------------------------------------ JSONL: the streamed source

def _jsonl_files() -> list[tuple[Path, Path | None]]:
    """Every JSONL file of the shared cases, sample_data and the shared chat/realdata material, with
    the config that goes with it (None: defaults)."""
    out: list[tuple[Path, Path | None]] = []
    if CASES.is_dir():
        out += [(f, c / "datacheck.toml") for c in sorted(CASES.iterdir()) if (c / "expect.json").exists()
                for f in sorted((c / "data").rglob("*.jsonl*"))]
    out += [(f, SAMPLE / "datacheck.toml") for f in sorted(SAMPLE.rglob("*.jsonl*"))]
    shared = SHARED
    for sub in ("chat", "realdata"):
        out += [(f, None) for f in sorted((shared / sub).rglob("*.jsonl*")) if f.stat().st_size < 5 * 2**20]
    return out


def _jsonl_result(path: Path, config: dict, chunk: int | None, rows: int | None, monkeypatch=None):
    from datacheck.formats import jsonl as jsonl_stream
    from datacheck.formats import jsonvalues as readers

    old, old_keep = readers.JSONL_CHUNK_BYTES, jsonl_stream.KEEP_BYTES
    if chunk is not None:  # pass 2 streams the file again, as for a file over KEEP_BYTES
        readers.JSONL_CHUNK_BYTES, jsonl_stream.KEEP_BYTES = chunk, 0
    try:
        with batch_rows(rows):
            chash, size = hash_file(path)
            return audit_shard(DiscoveredShard(path=path, rel=path.name, format="jsonl"), config_from_dict(config),
                               chash, size, keep_rows=True, cross_shard=True)
    finally:
        readers.JSONL_CHUNK_BYTES, jsonl_stream.KEEP_BYTES = old, old_keep


def _toml(path: Path | None) -> dict:
    import tomllib

    return tomllib.loads(path.read_text()) if path is not None and path.exists() else {}


@pytest.mark.parametrize("path,config", _jsonl_files(), ids=[str(p.relative_to(p.parents[2])) for p, _ in _jsonl_files()])
def test_jsonl_streamed_in_tiny_chunks_and_batches_equals_the_one_frame_path(path, config):
    """Every JSONL file of the shared material: the result (findings with rows, lines and examples,
    stats, skipped, failing rows, row hashes and every cross-shard payload) through the streamed
    source, cut in chunks of about a seventh of the file (64 bytes for small files) and checked in
    batches of 7 rows, equals the one-frame path's (a file of one chunk)."""
    cfg = _toml(config)
    one = _jsonl_result(path, cfg, None, None)
    size = len(path.read_bytes()) if not path.name.endswith((".gz", ".zst")) else 10**6
    for chunk, rows in ((max(64, size // 7), 7), (64 if size < 50_000 else size // 3, None)):
        many = _jsonl_result(path, cfg, chunk, rows)
        _same_result(one, many)


_WIDE = 99999999999999999999  # beyond Int64


@pytest.mark.parametrize("column,values", [
    ("input_ids", [[1, 2], [-_WIDE, 2], [_WIDE, 2]]),       # a token id beyond Int64: a null id
    ("input_ids", [None, [-_WIDE, 2], [1.5, 2]]),           # a float beside it: List(Float64)
    ("input_ids", [[1, 2], [2**64 - 1, 2], "x"]),           # mixed JSON types beside it
    ("label", [None, _WIDE, 1]),
    ("label", [1, 2**64 - 1, None]),
    ("extra", [1, 2**64 - 1, "x"]),                          # no role: read as Int128
])
@pytest.mark.parametrize("chunk,rows", [(1, 1), (1, None), (None, 1)])
def test_jsonl_wide_integers_decode_alike_in_any_chunks_and_batches(tmp_path, column, values, chunk, rows):
    """Integers beyond Int64 in JSONL, one line a chunk and/or one row a batch: the dtypes, findings
    and failing rows of the one-frame read, never an unreadable shard."""
    path = tmp_path / "shard.jsonl"
    path.write_text("".join(json.dumps({"text": f"t{i}", column: v}) + "\n" for i, v in enumerate(values)))
    one = _jsonl_result(path, CONFIG, None, None)
    many = _jsonl_result(path, CONFIG, chunk, rows)
    assert one.readable and many.readable, [f.message for f in many.findings if f.check == "decode.unreadable"]
    assert many.columns == one.columns
    _same_result(one, many)


@pytest.mark.parametrize("values,one_column", [
    ([{"a": 1}, {"a": "x"}], False),             # a field number then string: was the string "1" when chunked
    ([{"a": True}, {"a": 1}], False),            # boolean then number
    ([{"a": [1]}, {"a": 1}], False),             # list then number: the chunked shard was unreadable
    ([{"a": [2, -2.5]}, None], True),            # ints and a float in a field's list: Float64
    ([{"a": "x"}, None, {"b": None}], True),     # a field seen only null is kept (Null)
    ([[{"a": 1}], [{"a": 2.5}]], True),          # a list of objects whose field widens
    ([[1.5, False], []], False),                 # array items of two types: not read as [null, null]
])
@pytest.mark.parametrize("chunk,rows", [(1, 1), (1, None), (None, 1)])
def test_jsonl_object_fields_decode_alike_in_any_chunks_and_batches(tmp_path, values, one_column, chunk, rows):
    """Objects whose fields change JSON type between lines: one line a chunk and/or one row a batch
    give the one-frame read's dtypes and findings; a field that is a number in one line and a
    string (or a list) in another is never converted: the column is read as null with a
    schema.dtype finding, whatever the chunking."""
    path = tmp_path / "shard.jsonl"
    path.write_text("".join(json.dumps({"text": f"t{i}", "extra": v}) + "\n" for i, v in enumerate(values)))
    one = _jsonl_result(path, CONFIG, None, None)
    many = _jsonl_result(path, CONFIG, chunk, rows)
    assert one.readable and many.readable, [f.message for f in many.findings if f.check == "decode.unreadable"]
    assert many.columns == one.columns
    _same_result(one, many)
    broken = [f for f in many.findings if f.check == "schema.dtype" and f.column == "extra"]
    assert (not broken) == one_column, [f.message for f in broken]
    if not one_column:
        assert "do not form one column" in broken[0].message and many.columns["extra"] == "Null"


_JSON_LINE = st.one_of(
    rows_st.map(lambda r: json.dumps({k: v for k, v in r.items() if not (isinstance(v, float) and math.isnan(v))})),
    st.sampled_from(["", "{", "[1]", '{"label": "x"}', '{"target": NaN}', '{"input_ids": [1, "a"]}', "{}",
                     '{"text": 5}', '{"input_ids": []}', '{"extra": {"a": 1}}', '{"extra": {"b": "t"}}',
                     '{"extra": {"a": "x"}}', '{"extra": {"a": [2.5]}}', '{"extra": [1.5, false]}',
                     '{"label": 99999999999999999999}', '{"input_ids": [1, 18446744073709551615]}']),
)


@settings(max_examples=examples(int(os.environ.get("DATACHECK_HYPOTHESIS_EXAMPLES", "25"))), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(_JSON_LINE, min_size=1, max_size=30), chunk=st.integers(1, 400), cut=st.integers(1, 9))
def test_random_jsonl_streamed_at_random_chunks_and_batches_equals_one_frame(lines, chunk, cut):
    """Property: random records (mixed JSON types, bad, blank lines, NaN, struct fields that change,
    empty lists) in random chunk and batch sizes give the one-frame path's result, line numbers of
    findings after bad and blank lines included."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "shard.jsonl"
        path.write_text("\n".join(lines) + "\n")
        one = _jsonl_result(path, CONFIG, None, None)
        many = _jsonl_result(path, CONFIG, chunk, cut)
    _same_result(one, many)


def test_jsonl_whole_frame_is_never_built(tmp_path, monkeypatch):
    """A JSONL file of many chunks: the chunks are never joined into one frame (no call of the
    one-frame join), every frame the source decodes holds one chunk's rows, and every frame the
    engine checks one batch's rows; the result equals the one-frame path's."""
    from datacheck.formats import jsonl as jsonl_stream
    from datacheck.formats import jsonvalues as readers

    rows = [{"text": f"row {i % 50}", "label": i % 3, "input_ids": list(range(i % 6 + 1))} for i in range(3000)]
    path = tmp_path / "big.jsonl.gz"
    import gzip

    path.write_bytes(gzip.compress(b"".join(json.dumps(r).encode() + b"\n" for r in rows[:1500])
                                   + b"{broken\n\n" + b"".join(json.dumps(r).encode() + b"\n" for r in rows[1500:])))
    one = _jsonl_result(path, CONFIG, None, None)

    joins: list[int] = []
    real_join = readers._join_pieces
    monkeypatch.setattr(readers, "_join_pieces", lambda pieces, m: joins.append(len(pieces)) or real_join(pieces, m))
    decoded: list[int] = []
    real_frames = jsonl_stream.JsonlSource.frames

    def frames(self, columns=None):
        for df in real_frames(self, columns):
            decoded.append(df.height)
            yield df

    monkeypatch.setattr(jsonl_stream.JsonlSource, "frames", frames)
    checked: list[int] = []
    real_batch = engine._run_batch

    def run_batch(lf, *a, **k):
        out = real_batch(lf, *a, **k)
        checked.append(out.n)
        return out

    monkeypatch.setattr(engine, "_run_batch", run_batch)
    many = _jsonl_result(path, CONFIG, 8192, 100)
    _same_result(one, many)
    assert joins == []
    assert sum(decoded) >= 3000 and max(decoded) < 400  # 8 KiB chunks: ~200 rows each, never the 3,000
    assert checked[:3] == [100, 100, 100] and max(checked) == 100 and sum(checked) == 3000
    bad = next(f for f in many.findings if f.check == "decode.bad_record" and f.severity == "error")
    assert list(bad.lines) == [1501]


def test_ramped_parquet_batches_give_the_one_batch_result(tmp_path, monkeypatch):
    """Without ``$DATACHECK_BATCH_ROWS`` a parquet shard above the batch target is read with a
    short first batch (``RAMP_DIVISOR``, so the checks start early), full batches, and a final batch
    of at most per // 8 rows (so little is left to check after the decode's end): the heights are
    [per // 8, per - per // 8, per, ..., per, shortened, <= per // 8] (pyarrow's record batches as
    decoded, the first and the last one cut by zero-copy slices), and the result equals the
    one-batch read's."""
    n = 230
    rows = [{"text": "a" if i % 9 else "b", "input_ids": [(i * 7 + j) % 61 - 1 for j in range(i % 7)],
             "label": i % 5 - 1, "target": float(i % 13)} for i in range(n)]
    rows[17] = dict(rows[3])  # an exact duplicate across batches
    path = tmp_path / "shard.parquet"
    _frame(rows).write_parquet(path, row_group_size=50)
    with batch_rows(None):
        one = shard_result(path, CONFIG)
    monkeypatch.setattr(batches, "BATCH_TARGET_BYTES", 2000)  # a few dozen rows a batch
    calls: list[int] = []
    real = engine._run_batch

    def spy(lf, *a, **k):
        out = real(lf, *a, **k)
        calls.append(out.n)
        return out

    monkeypatch.setattr(engine, "_run_batch", spy)
    with batch_rows(None):
        many = shard_result(path, CONFIG)
    per = calls[2]
    ramp = max(1, per // batches.RAMP_DIVISOR)
    assert len(calls) > 4 and calls[0] == ramp < per and calls[1] == per - ramp
    assert all(c == per for c in calls[2:-2]) and 0 < calls[-2] <= per and sum(calls) == n
    assert 0 < calls[-1] <= ramp
    _same_result(one, many)
    assert any(f.check == "dup.exact_in_shard" for f in one.findings)


def test_a_candidate_view_is_built_only_for_a_batch_holding_candidates(monkeypatch):
    """``FlatView.drop_others`` views (the candidates of content.periodic_tokens) are built only in
    a batch whose probe found a candidate row: on clean batches never; the finding is the one-batch
    read's whatever the batch size (the run planted in row 7 is found with its run's details)."""
    from datacheck.checks.registry import FlatView

    ids = [[(i * 31 + j * 7) % 97 + 1 for j in range(50)] for i in range(12)]
    ids[7] = [5] * 45 + [1, 2, 3, 4, 6]  # period 1, repeated 45 times
    df = pl.DataFrame({"input_ids": ids, "attention_mask": [[1] * 50] * 12})
    cfg = config_from_dict({"tokens": {"vocab_size": 100}})
    built: list[str] = []
    real = FlatView.frame

    def spy(self, lf):
        built.append(self.key)
        return real(self, lf)

    monkeypatch.setattr(FlatView, "frame", spy)
    with batch_rows(None):
        one = audit_frame(df, cfg, keep_rows=True)
    with batch_rows(4):
        built.clear()
        many = audit_frame(df, cfg, keep_rows=True)
    _same_result(one, many)
    (f,) = [f for f in many.findings if f.check == "content.periodic_tokens"]
    assert f.rows == (7,) and f.details["runs"][0]["row"] == 7 and f.details["runs"][0]["run"]["period"] == 1
    # batches of rows 0-3, 4-7, 8-11: the view is built for the second batch's query (and for the
    # details of its failing row), never for the clean first and third
    assert sum(k.endswith("|periodic-candidates") for k in built) == 2


def test_a_check_failing_the_batch_before_gathers_its_rows_in_the_first_query(monkeypatch):
    """A check that failed on the batch before gathers its failing rows in the batch's first query:
    with a defect in every batch, only the first batch runs a second query; the result is the
    one-batch read's."""
    n, per = 24, 4
    ids = [[5, 6, 7, 8] for _ in range(n)]
    for r in range(1, n, per):  # one row out of vocabulary in every batch
        ids[r] = [5, 200, 7, 8]
    df = pl.DataFrame({"input_ids": ids, "attention_mask": [[1, 1, 1, 1]] * n})
    cfg = config_from_dict({"tokens": {"vocab_size": 100}})
    queries: list[int] = []
    real = engine._collect

    def spy(qs):
        queries.append(len(qs))
        return real(qs)

    monkeypatch.setattr(engine, "_collect", spy)
    with batch_rows(None):
        one = audit_frame(df, cfg, keep_rows=True)
    with batch_rows(per):
        queries.clear()
        many = audit_frame(df, cfg, keep_rows=True)
    _same_result(one, many)
    (f,) = [f for f in many.findings if f.check == "tokens.out_of_vocab"]
    assert f.count == n // per and list(f.rows) == list(range(1, n, per))[:len(f.rows)]
    assert len(queries) == n // per + 1  # one query a batch, plus the first batch's second query


def test_duplicate_candidates_are_read_again_once(tmp_path, monkeypatch):
    """A multi-batch parquet shard with duplicate rows: the candidate rows are read again once (for
    the refinement), and the examples of the verified duplicates come from those rows in memory."""
    n = 40
    ids = [[3 + i, 5, 2] for i in range(n)]
    ids[33] = ids[2]
    ids[38] = ids[5]
    table = pa.table({"input_ids": pa.array(ids, type=pa.list_(pa.int32())),
                      "attention_mask": pa.array([[1, 1, 1]] * n, type=pa.list_(pa.int8())),
                      "labels": pa.array(ids, type=pa.list_(pa.int64()))})
    pq.write_table(table, tmp_path / "shard.parquet", row_group_size=10)
    reads: list[list[int]] = []
    real = engine_parquet.read_parquet_rows

    def spy(path, columns, rows, schema, footer=None):
        reads.append(sorted(rows))
        return real(path, columns, rows, schema, footer)

    monkeypatch.setattr(engine_parquet, "read_parquet_rows", spy)
    path = tmp_path / "shard.parquet"
    chash, size = hash_file(path)
    ds = DiscoveredShard(path=path, rel=path.name, format="parquet")

    def one_shard():  # a one-shard audit: the in-shard duplicates are keys verified by `refine`
        return audit_shard(ds, config_from_dict(CONFIG), chash, size, keep_rows=True, cross_shard=False)

    with batch_rows(None):
        one = one_shard()
    assert reads == []  # one batch: from memory
    with batch_rows(7):
        many = one_shard()
    assert reads == [[2, 5, 33, 38]]  # the candidates once; their examples from memory
    dup = next(f for f in many.findings if f.check == "dup.exact_in_shard")
    assert dup.count == 2 and list(dup.rows) == [33, 38]
    _same_result(one, many)
