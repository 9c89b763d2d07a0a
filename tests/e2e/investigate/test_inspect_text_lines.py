"""``inspect``'s text lines: the ``tokens:`` line of ``--tokenizer`` stays one line (a token whose text
holds a newline, tab or carriage return, GPT-2's ``Ċ`` = "\\n" id 198, is shown escaped, as the
supervision view shows it), and a row asked with ``--rows`` that fails no check says so in words."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import ROOT, run_cli

GPT2 = ROOT.parent / "shared" / "realdata" / "gpt2_tokenizer"

pytestmark = pytest.mark.skipif(not (GPT2 / "vocab.json").is_file(), reason="../shared/realdata is not present")


def test_tokens_line_escapes_newlines_and_tabs(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.ByteLevelBPETokenizer(str(GPT2 / "vocab.json"), str(GPT2 / "merges.txt"))
    ids = tok.encode("First Citizen:\nBefore we\tproceed").ids
    assert 198 in ids and any("\t" in tok.decode([i]) for i in ids)
    eos = 50256
    labels = [ids[0] + 10**6] + ids[1:]                         # out of range: the row is shown
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"input_ids": [ids + [eos]], "labels": [labels + [eos]]}), path)
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text("[tokens]\nvocab_size = 50257\n")
    r = run_cli("inspect", str(path), "--config", str(cfg), "--rows", "0", "--tokenizer", str(GPT2))
    assert r.returncode in (0, 1), r.stderr
    tok_lines = [ln for ln in r.stdout.splitlines() if ln.startswith("      tokens: ")]
    assert len(tok_lines) == 1
    want = " ".join(tok.decode([i]).replace("\n", "\\n").replace("\t", "\\t") for i in ids)
    assert tok_lines[0].startswith("      tokens: " + want), tok_lines[0]
    # the line after it is the next part of the row's view, not the rest of a broken token line
    nxt = r.stdout.splitlines()[r.stdout.splitlines().index(tok_lines[0]) + 1]
    assert nxt.startswith("      ") and not nxt.startswith("      Before")


def test_a_row_without_finding_says_so(tmp_path):
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"input_ids": [[1, 2, 3], [4, 5, 99]]}), path)
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text("[tokens]\nvocab_size = 50\n")
    r = run_cli("inspect", str(path), "--config", str(cfg), "--rows", "0,1")
    assert r.returncode == 1, r.stderr
    lines = r.stdout.splitlines()
    assert "  row 0  no finding (asked with --rows)" in lines
    assert "  row 1  tokens.out_of_vocab column input_ids" in lines
    assert "(none)" not in r.stdout


def test_check_that_finds_nothing_or_cannot_run_says_which(tmp_path):
    """inspect --check X on a shard where X finds no row, or cannot run, says that of X alone (not the
    skip reasons of every other check)."""
    path = tmp_path / "cls.parquet"
    pq.write_table(pa.table({"text": ["one", "two", "three"], "label": [0, 1, 0]}), path)
    r = run_cli("inspect", str(path), "--check", "empty.text,tokens.out_of_vocab")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "  no row fails empty.text" in lines
    # text-only classification rows hold no token ids: the check does not apply (not a missing column)
    assert "  tokens.out_of_vocab does not apply to this shard's rows (layout text_classification): not run" in lines
    assert "mask.non_binary" not in r.stdout and "check(s) skipped" not in r.stdout
    # a check that applies but lacks a fact says so
    r = run_cli("inspect", str(path), "--check", "labels.out_of_range")
    assert "  labels.out_of_range did not run: no [labels] num_classes or classes for label column 'label'" \
        in r.stdout.splitlines()


def test_a_decode_finding_of_a_binary_layout_names_its_row(tmp_path):
    """A WebDataset sample's text that is not UTF-8 (``decode.invalid_utf8``, a row, no line): the
    line says ``row 1``, never ``line None``."""
    import io
    import tarfile

    path = tmp_path / "shard-000000.tar"
    with tarfile.open(path, "w") as t:
        for name, data in (("a.txt", b"fine"), ("b.txt", b"caf\xe9")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    r = run_cli("inspect", str(path))
    assert r.returncode in (0, 1), r.stderr
    assert "      row 1: member 'b.txt': byte 0xe9 at offset 3 of the value" in r.stdout
    assert "line None" not in r.stdout
