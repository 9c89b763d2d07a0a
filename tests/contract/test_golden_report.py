"""sample_data/: the seeded generator is deterministic and matches the committed files, and the audit
of the folder reports exactly the planted defects of ``sample_data/generate.py``'s ``PLANTED`` (the
list that ``sample_data/README.md`` is rendered from), exits 1, and finds nothing in the clean sets."""
from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import ROOT, run_cli

SAMPLE = ROOT / "sample_data"
CONFIG = SAMPLE / "datacheck.toml"
#: Files under sample_data/ that the generator does not write.
NOT_GENERATED = {"generate.py"}


def _load_generator():
    """Import sample_data/generate.py without writing a __pycache__ into sample_data/."""
    spec = importlib.util.spec_from_file_location("sample_data_generate", SAMPLE / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    before, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.dont_write_bytecode = before
    return mod


gen = _load_generator()


def _tree(root: Path) -> dict[str, bytes]:
    """Every generated file under ``root``: {relative POSIX path: bytes}."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and p.name not in NOT_GENERATED}


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _writer_tag() -> str:
    """The ``created_by`` this pyarrow writes into a parquet footer."""
    buf = io.BytesIO()
    pq.write_table(pa.table({"x": [1]}), buf)
    return pq.ParquetFile(io.BytesIO(buf.getvalue())).metadata.created_by


# ------------------------------------------------------------------------------------ generator


@pytest.mark.slow
def test_generator_twice_gives_identical_bytes(tmp_path):
    for out in ("a", "b"):
        p = subprocess.run([sys.executable, str(SAMPLE / "generate.py"), "--out", str(tmp_path / out)],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        assert p.stdout.startswith(f"wrote {len(gen.build())} files")
    a, b = _tree(tmp_path / "a"), _tree(tmp_path / "b")
    assert sorted(a) == sorted(b)
    assert {k: _sha(v) for k, v in a.items()} == {k: _sha(v) for k, v in b.items()}
    # a rerun into a folder that is already right leaves every file in place (idempotent)
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "a").rglob("*") if p.is_file()}
    subprocess.run([sys.executable, str(SAMPLE / "generate.py"), "--out", str(tmp_path / "a")], check=True,
                   capture_output=True, timeout=120)
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "a").rglob("*") if p.is_file()} == before


def test_committed_files_are_the_generator_output():
    built = gen.build()
    committed = _tree(SAMPLE)
    assert sorted(committed) == sorted(built), "stray or missing files: rerun python sample_data/generate.py"
    tag = _writer_tag()
    for rel, data in built.items():
        have = committed[rel]
        if have == data:
            continue
        # Parquet footers name the writer's version: with another pyarrow, compare the tables instead.
        assert rel.endswith(".parquet") and len(data) > 8 and data[:4] == b"PAR1", f"{rel} differs from the generator"
        assert pq.ParquetFile(io.BytesIO(have)).metadata.created_by != tag, f"{rel} differs from the generator"
        assert pq.read_table(io.BytesIO(have)).equals(pq.read_table(io.BytesIO(data))), f"{rel}: rows differ"


def test_sample_data_is_small():
    total = sum(p.stat().st_size for p in SAMPLE.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    assert total < 200_000


def test_readme_table_lists_every_planted_defect():
    text = (SAMPLE / "README.md").read_text(encoding="utf-8")
    for p in gen.PLANTED:
        assert f"`{p.check}`" in text
        if p.path:
            assert f"`{p.path}`" in text
    assert "python sample_data/generate.py" in text


# ---------------------------------------------------------------------------------------- audit


@pytest.fixture(scope="module")
def audit(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sample_audit")
    p = run_cli("audit", "sample_data", "--config", str(CONFIG), "--output", str(tmp / "report.json"),
                "--report-dir", str(tmp / "reports"), "--format", "json", "--no-progress")
    assert p.stderr == "" or "Traceback" not in p.stderr, p.stderr
    return p.returncode, json.loads((tmp / "report.json").read_text())


def _key(path: str | None, f: dict) -> tuple:
    return (path, f["check"], f["severity"], f["column"])


def _findings(report: dict) -> dict[tuple, dict]:
    out: dict[tuple, dict] = {}
    for s in report["shards"]:
        for f in s["findings"]:
            k = _key(s["path"], f)
            assert k not in out, f"two findings with the same key {k}"
            out[k] = f
    for f in report["findings"]:
        k = _key(None, f)
        assert k not in out, f"two findings with the same key {k}"
        out[k] = f
    return out


def test_audit_exits_1(audit):
    rc, report = audit
    assert rc == 1
    assert report["summary"]["status"] == "fail"


def test_every_shard_is_audited(audit):
    _, report = audit
    data = {rel for rel in _tree(SAMPLE) if rel not in ("README.md", "datacheck.toml") and not rel.endswith(".tmp")}
    assert {s["path"] for s in report["shards"]} == data
    unreadable = {s["path"] for s in report["shards"] if s["rows"] is None}
    assert unreadable == {p.path for p in gen.PLANTED if p.check == "decode.unreadable"}


@pytest.mark.parametrize("planted", gen.PLANTED, ids=lambda p: f"{p.path or 'dataset'}:{p.check}:{p.column}:{p.severity}")
def test_planted_defect_is_reported(audit, planted):
    _, report = audit
    found = _findings(report)
    key = (planted.path, planted.check, planted.severity, planted.column)
    assert key in found, f"not reported: {key}; reported there: {[k for k in found if k[0] == planted.path]}"
    f = found[key]
    if planted.path is not None:
        assert f["rows"] == list(planted.rows[:20])
    assert f["lines"] == list(planted.lines[:20])
    assert f["count"] == planted.expected_count
    if planted.path is None and planted.shards:
        assert f["shards"] == list(planted.shards)
    if planted.lines:
        assert [e["line"] for e in f["examples"]] == list(planted.lines[:20])
    if planted.rows:
        assert [e["row"] for e in f["examples"]] == list(planted.rows[:20])


def test_nothing_but_the_planted_defects(audit):
    _, report = audit
    expected = {(p.path, p.check, p.severity, p.column) for p in gen.PLANTED}
    got = set(_findings(report))
    assert got - expected == set(), "reported but not planted (update PLANTED and the README if intended)"
    assert expected - got == set()
    s = report["summary"]
    assert s["errors"] == sum(1 for p in gen.PLANTED if p.severity == "error")
    assert s["warnings"] == sum(1 for p in gen.PLANTED if p.severity == "warn")


def test_clean_sets_have_no_finding(audit):
    _, report = audit
    by_path = {s["path"]: s for s in report["shards"]}
    for rel in gen.CLEAN_SHARDS:
        assert by_path[rel]["findings"] == [], rel
        assert by_path[rel]["status"] == "pass"
    assert by_path["lm_clean/train-00000-of-00002.parquet"]["rows"] == 16
    assert by_path["cls_clean/train.jsonl"]["rows"] == 24
    assert by_path["cls_clean/test.parquet"]["rows"] == 9
    assert by_path["cls_clean/validation.csv"]["rows"] == 6
    assert by_path["cls_clean/validation.csv"]["format"] == "csv"


def test_clean_sets_alone_pass(tmp_path):
    p = run_cli("audit", "sample_data/lm_clean", "sample_data/cls_clean", "--config", str(CONFIG),
                "--output", str(tmp_path / "r.json"), "--report-dir", str(tmp_path / "reports"), "--no-progress")
    assert p.returncode == 0, p.stdout + p.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["summary"]["status"] == "pass"
    assert [f for s in report["shards"] for f in s["findings"]] == []
    assert report["findings"] == []
    # the eos that ends each sample is supervised (pad == eos in GPT-2)
    eos = [s["stats"]["eos"] for s in report["shards"] if "eos" in s["stats"]]
    assert [e["supervised"] for e in eos] == [16, 16]
    labels = report["stats"]["labels"]["counts"]
    assert [v for v, _ in labels] == [0, 1, 2]


def test_audit_does_not_write_into_sample_data(audit):
    assert sorted(_tree(SAMPLE)) == sorted(gen.build())


def test_audit_finds_sample_data_config_without_flag(audit, tmp_path):
    """``datacheck audit sample_data/`` (the README's first command) picks up sample_data/datacheck.toml
    when the working folder has no datacheck.toml and no --config is given: the same report."""
    _, with_flag = audit
    p = run_cli("audit", str(SAMPLE), "--output", str(tmp_path / "r.json"), "--report-dir", str(tmp_path / "reports"),
                "--no-progress", cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    without = json.loads((tmp_path / "r.json").read_text())
    for d in (without, dict(with_flag)):
        d.pop("created_at", None)
    assert without["config_hash"] == with_flag["config_hash"]
    assert without["shards"] == with_flag["shards"] and without["findings"] == with_flag["findings"]
