"""A plain-text corpus through the CLI: ``datacheck audit input.txt`` reads tinyshakespeare (a clean
real text: PROVENANCE.md, 1,115,394 B, 40,000 lines) as Hugging Face datasets' text builder reads it,
layout raw_text, and passes ``--fail-on warn`` with no finding by line, paragraph and document; a .gz
copy beside it is another shard of the same rows; a corrupted copy is named by line and byte."""
from __future__ import annotations

import gzip
import json
import shutil

import pytest
from conftest import REALDATA, run_cli

SHAKESPEARE = REALDATA / "tinyshakespeare" / "input.txt"


@pytest.fixture
def corpus(tmp_path):
    if not SHAKESPEARE.exists():
        pytest.skip("../shared/realdata is not present")
    root = tmp_path / "corpus"
    root.mkdir()
    shutil.copy(SHAKESPEARE, root / "input.txt")
    return root


def _audit(*args: str, cwd=None):
    r = run_cli("audit", *args, "--no-cache", "--no-progress", "--workers", "1", "--format", "json", cwd=cwd)
    return r, (json.loads(r.stdout) if r.stdout.strip().startswith("{") else None)


@pytest.mark.parametrize("sample_by, rows", [
    ("line", lambda t: sum(1 for ln in t.split("\n") if ln.strip())),
    ("paragraph", lambda t: sum(1 for p in t.split("\n\n") if p.strip())),
    ("document", lambda t: 1),
])
def test_clean_real_text_passes_the_warn_gate(corpus, tmp_path, sample_by, rows):
    raw = SHAKESPEARE.read_bytes()
    assert len(raw) == 1_115_394 and raw.count(b"\n") == 40_000  # PROVENANCE.md
    (tmp_path / "datacheck.toml").write_text(f'[dataset]\nsample_by = "{sample_by}"\n')
    r, rep = _audit(str(corpus / "input.txt"), "--config", str(tmp_path / "datacheck.toml"), "--fail-on", "warn",
                    "--report-dir", str(tmp_path / "reports"))
    assert r.returncode == 0, r.stdout + r.stderr
    (shard,) = rep["shards"]
    assert shard["rows"] == rows(raw.decode("utf-8")) and shard["findings"] == [] and rep["findings"] == []
    assert (shard["layout"], shard["format"]) == ("raw_text", "text")


def test_a_compressed_copy_is_the_same_rows_and_a_bad_byte_is_named(corpus, tmp_path):
    raw = SHAKESPEARE.read_bytes()
    (corpus / "copy.txt.gz").write_bytes(gzip.compress(raw))
    at = raw.index(b"\n", 500_000) + 1  # the start of a line
    (corpus / "latin1.txt").write_bytes(raw[:at] + b"\xe9" + raw[at:])
    r, rep = _audit(str(corpus), "--report-dir", str(tmp_path / "reports"))
    assert r.returncode == 1, r.stdout + r.stderr
    by = {s["path"]: s for s in rep["shards"]}
    assert by["copy.txt.gz"]["rows"] == by["input.txt"]["rows"] == by["latin1.txt"]["rows"]
    (f,) = by["latin1.txt"]["findings"]
    assert f["check"] == "decode.invalid_utf8"
    assert f["lines"] == [raw[:at].count(b"\n") + 1] and f["examples"][0]["byte_offset"] == at
