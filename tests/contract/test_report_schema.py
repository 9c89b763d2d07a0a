"""The report contract (DESIGN.md "Report contract", ``schemas/report.schema.json``).

- every report (of sample_data/ and of each case in ../shared/cases) validates against the schema;
- the schema's check-ID enum equals the catalog (datacheck/catalog.py);
- the exact keys of the top level, summary, shards, findings, examples and skipped entries are pinned;
- ``datacheck.read_report`` refuses a newer ``report_version`` and round-trips a report;
- a golden report of sample_data/ (``tests/golden/sample_data_report.json``, with ``created_at`` and
  ``datacheck_version`` dropped, everything else exact) guards against silent changes.

After an intended change of the report or the catalog, regenerate the golden file and the schema's
check-ID enum with::

    DATACHECK_UPDATE_GOLDEN=1 python -m pytest tests/contract/test_report_schema.py

and review the diff of ``tests/golden/`` and ``schemas/`` before committing. A change to the keys
also needs the pinned key sets below, the schema, and (if old readers would misread it) a new
``report_version``.
"""
from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import jsonschema
import pytest
from conftest import CASES, ROOT, run_cli

import datacheck
from datacheck.model.catalog import CATALOG
from datacheck.model.constants import REPORT_VERSION
from datacheck.model.errors import ReportVersionError, UsageError

SCHEMA_PATH = ROOT / "schemas" / "report.schema.json"
GOLDEN = ROOT / "tests" / "golden" / "sample_data_report.json"
UPDATE = os.environ.get("DATACHECK_UPDATE_GOLDEN") == "1"
#: Keys that change from run to run (or release to release) and are left out of the golden report.
VOLATILE = ("created_at", "datacheck_version")

TOP_KEYS = {"report_version", "datacheck_version", "created_at", "index_hash", "config_hash", "fail_on", "roles",
            "summary", "shards", "findings", "skipped", "stats", "row_content", "config_path", "ignored"}
#: Only in the report of one part of a split audit (``audit --num-parts N --part k``); only when
#: ``[tokens] tokenizer`` filled facts the config left unset; only when the data declares classes
#: (a Hugging Face ClassLabel / Sequence(ClassLabel)).
TOP_OPTIONAL_KEYS = {"part", "tokenizer_facts", "label_facts"}
PART_KEYS = {"num_parts", "part", "results_file", "results_digest"}
SUMMARY_KEYS = {"status", "shards", "rows", "errors", "warnings", "policy_failures"}
SHARD_KEYS = {"path", "content_hash", "bytes", "rows", "status", "format", "findings", "stats", "columns", "layout",
              "layout_source", "layout_why", "not_applicable"}
#: only when the shards' row contents are made of different columns (report row_content.columns is null)
SHARD_OPTIONAL_KEYS = {"row_content"}
FINDING_KEYS = {"check", "severity", "message", "column", "count", "ratio", "rows", "lines", "examples", "details",
                "fails_policy"}
DATASET_FINDING_KEYS = FINDING_KEYS | {"shards"}
#: Only when more rows fail than the finding lists (``rows``/``lines``/``examples`` hold the first max_examples).
FINDING_OPTIONAL_KEYS = {"rows_truncated"}
EXAMPLE_KEYS = {"row", "value"}
EXAMPLE_OPTIONAL_KEYS = {"line", "byte_offset"}
SKIPPED_KEYS = {"check", "reason", "shards"}
ROW_CONTENT_KEYS = {"columns", "encoding", "normalization"}
IGNORED_KEYS = {"path", "reason"}


def _case_dirs() -> list[Path]:
    if not CASES.is_dir():
        return []
    return sorted(c for c in CASES.iterdir() if (c / "expect.json").is_file())


def _audit(tmp: Path, *args: str) -> tuple[int, str]:
    out = tmp / "report.json"
    p = run_cli("audit", *args, "--output", str(out), "--report-dir", str(tmp / "reports"), "--no-progress")
    assert "Traceback" not in p.stderr, p.stderr
    assert out.is_file(), p.stdout + p.stderr
    return p.returncode, out.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def schema() -> dict:
    s = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(s)
    return s


@pytest.fixture(scope="module")
def validator(schema):
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> tuple[int, str]:
    """(exit code, report text) of ``datacheck audit sample_data --config sample_data/datacheck.toml``."""
    return _audit(tmp_path_factory.mktemp("contract"), "sample_data", "--config", "sample_data/datacheck.toml")


def _errors(validator, doc: dict) -> list[str]:
    return [f"{e.json_path}: {e.message[:200]}" for e in validator.iter_errors(doc)]


# ------------------------------------------------------------------------------------ the schema


def test_sample_data_report_validates(validator, sample):
    _, text = sample
    assert _errors(validator, json.loads(text)) == []


@pytest.mark.parametrize("case", _case_dirs(), ids=lambda c: c.name)
def test_shared_case_reports_validate(validator, case, case_audits):
    got = case_audits[case.name]
    assert "Traceback" not in got.stderr, got.stderr
    assert got.report, got.stdout + got.stderr
    assert _errors(validator, json.loads(got.report)) == []


def test_part_and_merged_reports_validate(validator, tmp_path):
    parts = []
    for k in range(2):
        out = tmp_path / f"part{k}.json"
        p = run_cli("audit", "sample_data", "--config", "sample_data/datacheck.toml", "--num-parts", "2", "--part",
                    str(k), "--output", str(out), "--report-dir", str(tmp_path / "reports"), "--no-progress")
        assert "Traceback" not in p.stderr, p.stderr
        doc = json.loads(out.read_text(encoding="utf-8"))
        assert set(doc) == TOP_KEYS | {"part"} and set(doc["part"]) == PART_KEYS
        assert doc["part"]["part"] == k and doc["part"]["num_parts"] == 2
        assert _errors(validator, doc) == []
        parts.append(out)
    merged = tmp_path / "merged.json"
    p = run_cli("merge", *map(str, parts), "--output", str(merged), "--report-dir", str(tmp_path / "reports"))
    assert "Traceback" not in p.stderr, p.stderr
    doc = json.loads(merged.read_text(encoding="utf-8"))
    assert set(doc) == TOP_KEYS
    assert _errors(validator, doc) == []


def test_reports_with_label_facts_validate(validator, tmp_path):
    """Reports of data whose Hugging Face features declare classes carry label_facts (a ClassLabel
    label; CoNLL-style tags beside a tokenized 'labels': tag_classes and tag_notes only; shards that
    disagree: a note): each validates (the key was missing from the schema, so they did not)."""
    hf = pytest.importorskip("datasets")
    cls = tmp_path / "cls" / "train.parquet"
    cls.parent.mkdir()
    hf.Dataset.from_dict({"text": ["a", "b"], "label": [0, 1]},
                         features=hf.Features({"text": hf.Value("string"),
                                               "label": hf.ClassLabel(names=["neg", "pos"])})).to_parquet(str(cls))
    tags = tmp_path / "tags" / "train.parquet"
    tags.parent.mkdir()
    feats = hf.Features({"tokens": hf.List(hf.Value("string")), "ner_tags": hf.List(hf.ClassLabel(names=["O", "B"])),
                         "pos_tags": hf.List(hf.ClassLabel(names=["NN", "VB", "JJ"])),
                         "labels": hf.List(hf.Value("int64"))})
    hf.Dataset.from_dict({"tokens": [["a", "b"]], "ner_tags": [[0, 1]], "pos_tags": [[2, 0]], "labels": [[0, 1]]},
                         features=feats).to_parquet(str(tags))
    reports = [datacheck.audit(str(cls.parent)), datacheck.audit(str(tags.parent)),
               datacheck.audit(str(cls.parent), config={"labels": {"num_classes": 3}})]
    assert [sorted(r.label_facts) for r in reports] == [
        ["column", "filled", "names", "num_classes", "source"], ["tag_classes", "tag_notes"],
        ["column", "filled", "names", "note", "num_classes", "source"]]
    for rep in reports:
        errors = sorted(validator.iter_errors(json.loads(rep.to_json())), key=lambda e: list(e.path))
        assert errors == [], [e.message for e in errors]


def test_schema_check_ids_equal_the_catalog(schema):
    ids = sorted(CATALOG)
    if UPDATE and schema["$defs"]["checkId"]["enum"] != ids:
        fresh = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
        fresh["$defs"]["checkId"]["enum"] = ids
        SCHEMA_PATH.write_text(json.dumps(fresh, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        schema["$defs"]["checkId"]["enum"] = ids
    assert schema["$defs"]["checkId"]["enum"] == ids, (
        "schemas/report.schema.json $defs.checkId.enum differs from datacheck/catalog.py: "
        "run DATACHECK_UPDATE_GOLDEN=1 python -m pytest tests/contract/test_report_schema.py")


def test_schema_pins_the_keys(schema):
    d = schema["$defs"]
    assert set(schema["required"]) == TOP_KEYS
    assert set(schema["properties"]) == TOP_KEYS | TOP_OPTIONAL_KEYS
    assert set(schema["properties"]["part"]["required"]) == set(schema["properties"]["part"]["properties"]) == PART_KEYS
    assert set(schema["properties"]["summary"]["required"]) == SUMMARY_KEYS
    assert set(d["shard"]["required"]) == SHARD_KEYS
    assert set(d["shard"]["properties"]) == SHARD_KEYS | SHARD_OPTIONAL_KEYS
    assert d["shard"]["properties"]["row_content"]["required"] == ["columns"]
    assert set(d["shardFinding"]["required"]) == FINDING_KEYS
    assert set(d["shardFinding"]["properties"]) == FINDING_KEYS | FINDING_OPTIONAL_KEYS
    assert set(d["datasetFinding"]["required"]) == DATASET_FINDING_KEYS
    assert set(d["datasetFinding"]["properties"]) == DATASET_FINDING_KEYS | FINDING_OPTIONAL_KEYS
    assert set(d["example"]["required"]) == EXAMPLE_KEYS
    assert set(d["example"]["properties"]) == EXAMPLE_KEYS | EXAMPLE_OPTIONAL_KEYS
    assert set(d["skipped"]["required"]) == SKIPPED_KEYS
    ignored = schema["properties"]["ignored"]["items"]
    assert set(ignored["required"]) == set(ignored["properties"]) == IGNORED_KEYS
    pinned = [schema, schema["properties"]["summary"], schema["properties"]["roles"],
              schema["properties"]["row_content"], schema["properties"]["part"],
              schema["properties"]["tokenizer_facts"], schema["properties"]["tokenizer_facts"]["properties"]["facts"],
              schema["properties"]["label_facts"],
              schema["properties"]["label_facts"]["properties"]["tag_classes"]["additionalProperties"],
              schema["properties"]["ignored"]["items"], d["shard"], d["shardFinding"], d["datasetFinding"],
              d["example"], d["skipped"], d["role"]]
    assert all(p["additionalProperties"] is False for p in pinned)


def _first_finding(report: dict) -> tuple[int, int]:
    for i, s in enumerate(report["shards"]):
        for j, f in enumerate(s["findings"]):
            if f["examples"]:
                return i, j
    raise AssertionError("no shard finding with examples")


@pytest.mark.parametrize("mutation", [
    "top_extra", "top_missing", "summary_extra", "shard_extra", "shard_renamed", "finding_extra",
    "finding_unknown_check", "example_extra", "dataset_finding_without_shards", "shard_finding_with_shards",
    "bad_content_hash", "bad_status", "report_version_2", "skipped_extra",
])
def test_schema_rejects_silent_changes(validator, sample, mutation):
    report = json.loads(sample[1])
    r = copy.deepcopy(report)
    i, j = _first_finding(r)
    shard, finding = r["shards"][i], r["shards"][i]["findings"][j]
    if mutation == "top_extra":
        r["warnings"] = []
    elif mutation == "top_missing":
        del r["index_hash"]
    elif mutation == "summary_extra":
        r["summary"]["infos"] = 0
    elif mutation == "shard_extra":
        shard["sha256"] = "x"
    elif mutation == "shard_renamed":
        shard["hash"] = shard.pop("content_hash")
    elif mutation == "finding_extra":
        finding["row_indices"] = finding["rows"]
    elif mutation == "finding_unknown_check":
        finding["check"] = "tokens.out_of_vocabulary"
    elif mutation == "example_extra":
        finding["examples"][0]["column"] = "x"
    elif mutation == "dataset_finding_without_shards":
        del r["findings"][0]["shards"]
    elif mutation == "shard_finding_with_shards":
        finding["shards"] = [shard["path"]]
    elif mutation == "bad_content_hash":
        shard["content_hash"] = "sha1:" + "0" * 40  # md5:/sha256: are store hashes (datacheck.io.stores); sha1 is none
    elif mutation == "bad_status":
        r["summary"]["status"] = "failed"
    elif mutation == "report_version_2":
        r["report_version"] = 2
    elif mutation == "skipped_extra":
        r["skipped"][0]["count"] = 1
    assert _errors(validator, report) == []
    assert _errors(validator, r) != []


# ------------------------------------------------------------------------------------- the keys


def test_report_keys_are_pinned(sample):
    report = json.loads(sample[1])
    assert set(report) == TOP_KEYS
    assert set(report["summary"]) == SUMMARY_KEYS
    assert set(report["row_content"]) == ROW_CONTENT_KEYS
    assert report["shards"] and report["findings"] and report["skipped"]
    # sample_data mixes layouts (text, token ids, features): each shard states its row content
    assert report["row_content"]["columns"] is None
    for s in report["shards"]:
        assert set(s) == SHARD_KEYS | ({"row_content"} if s["rows"] is not None else set())
        for f in s["findings"]:
            assert FINDING_KEYS <= set(f) <= FINDING_KEYS | FINDING_OPTIONAL_KEYS
            for e in f["examples"]:
                assert EXAMPLE_KEYS <= set(e) <= EXAMPLE_KEYS | EXAMPLE_OPTIONAL_KEYS
    for f in report["findings"]:
        assert DATASET_FINDING_KEYS <= set(f) <= DATASET_FINDING_KEYS | FINDING_OPTIONAL_KEYS
    for k in report["skipped"]:
        assert set(k) == SKIPPED_KEYS
    for i in report["ignored"]:
        assert set(i) == IGNORED_KEYS
    assert report["config_path"] == "sample_data/datacheck.toml"  # as given on the command line
    # examples of decode findings carry the 1-based line and the byte offset
    records = next(s for s in report["shards"] if s["path"] == "defects/decode/records.jsonl")
    bad = next(f for f in records["findings"] if f["check"] == "decode.bad_record" and f["severity"] == "error")
    assert [(e["row"], e["line"]) for e in bad["examples"]] == [(None, 2), (None, 4)]
    assert all(isinstance(e["byte_offset"], int) for e in bad["examples"])


def test_report_is_written_with_sorted_keys(sample):
    text = sample[1]
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=2, ensure_ascii=False) + "\n"


# ----------------------------------------------------------------------------------- the reader


def test_reader_refuses_a_newer_report_version(sample, tmp_path):
    d = json.loads(sample[1])
    d["report_version"] = REPORT_VERSION + 1
    path = tmp_path / "report.json"
    path.write_text(json.dumps(d), encoding="utf-8")
    with pytest.raises(ReportVersionError) as exc:
        datacheck.read_report(path)
    msg = str(exc.value)
    assert str(path) in msg
    assert f"report_version {REPORT_VERSION + 1} is newer" in msg
    assert "upgrade datacheck" in msg


@pytest.mark.parametrize("content, error", [
    ('{"summary": {}}', ReportVersionError),
    ('{"report_version": "1"}', ReportVersionError),
    ("[1, 2]", UsageError),
    ("{not json", UsageError),
])
def test_reader_refuses_what_is_not_a_report(tmp_path, content, error):
    path = tmp_path / "report.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(error, match="report.json"):
        datacheck.read_report(path)


def test_reader_missing_file_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="no such report file"):
        datacheck.read_report(tmp_path / "absent.json")


def test_reader_round_trips_the_report(sample, tmp_path):
    path = tmp_path / "report.json"
    path.write_text(sample[1], encoding="utf-8")
    report = datacheck.read_report(path)
    assert isinstance(report, datacheck.Report)
    assert report.to_json() == sample[1]
    assert datacheck.Report.from_dict(report.to_dict()) == report
    assert report.status == "fail" and not report.passed
    assert [s.path for s in report.shards] == [s["path"] for s in json.loads(sample[1])["shards"]]
    assert {f.check for f in report.findings} >= {"dup.shard", "decode.unreadable", "tokens.out_of_vocab"}
    # report.findings lists shard findings first, each naming its shard, then the dataset-level ones
    per_shard = [(s.path,) for s in report.shards for _ in s.findings]
    assert [f.shards for f in report.findings[:len(per_shard)]] == per_shard
    assert report.findings[len(per_shard):] == list(report.dataset_findings)
    with pytest.raises(datacheck.PolicyFailed, match="data gate failed"):
        report.raise_for_policy()


def test_api_report_equals_the_cli_report(sample):
    report = datacheck.audit(str(ROOT / "sample_data"), config=str(ROOT / "sample_data" / "datacheck.toml"))
    api = report.to_dict()
    cli = json.loads(sample[1])
    for k in VOLATILE:
        api.pop(k), cli.pop(k)
    # the config path is recorded as given: absolute here, relative on the command line
    assert Path(api.pop("config_path")) == ROOT / cli.pop("config_path")
    assert api == cli


# ------------------------------------------------------------------------------------ the golden


def _normalized(text: str) -> dict:
    d = json.loads(text)
    for k in VOLATILE:
        d.pop(k, None)
    return d


def _diff(a, b, path: str = "$", out: list[str] | None = None, limit: int = 15) -> list[str]:
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a:
                out.append(f"{path}.{k}: new key")
            elif k not in b:
                out.append(f"{path}.{k}: key gone")
            else:
                _diff(a[k], b[k], f"{path}.{k}", out, limit)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{path}[{i}]", out, limit)
    elif a != b:
        out.append(f"{path}: golden {json.dumps(a)[:150]} != now {json.dumps(b)[:150]}")
    return out


def test_golden_sample_data_report(sample):
    rc, text = sample
    assert rc == 1
    now = _normalized(text)
    if UPDATE:
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(now, sort_keys=True, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    assert GOLDEN.is_file(), "no golden report: run DATACHECK_UPDATE_GOLDEN=1 python -m pytest tests/contract/test_report_schema.py"
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    differences = _diff(golden, now)
    assert golden == now, ("the sample_data report changed (if intended, regenerate with "
                           "DATACHECK_UPDATE_GOLDEN=1 python -m pytest tests/contract/test_report_schema.py):\n  "
                           + "\n  ".join(differences))
