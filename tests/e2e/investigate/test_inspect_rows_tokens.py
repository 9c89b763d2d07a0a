"""``datacheck inspect``: --rows shows the chosen rows' values, dataset-level --check is refused,
--no-progress is accepted, and --tokenizer shows byte-level tokens readably and notes a vocab size
that differs from [tokens] vocab_size."""
from __future__ import annotations

import polars as pl
import pytest
from conftest import ROOT

from datacheck.model.config import config_from_dict, load_config
from datacheck.model.errors import UsageError
from datacheck.tools.inspect import inspect_shards, load_tokenizer

SAMPLE = ROOT / "sample_data"
SAMPLE_CFG = SAMPLE / "datacheck.toml"
REAL = ROOT.parent / "shared" / "realdata"
GPT2 = REAL / "gpt2_tokenizer"
TINY = REAL / "megatron_gpt2_openwebtext" / "gpt2-tiny-vocab.json"
MINILM = REAL / "minilm_bert_tokenizer"

from conftest import run_cli  # noqa: E402


def test_rows_shows_every_column_of_a_passing_row(tmp_path):
    shard = tmp_path / "s.parquet"
    pl.DataFrame({"text": ["first text", "second", "", "fourth"], "label": [0, 1, 1, 0]}).write_parquet(shard)
    cfg = config_from_dict({"labels": {"num_classes": 2}})
    ins = inspect_shards([str(shard)], cfg, rows=[0, 2])[0]
    assert [(r.row, r.check, r.column, r.value) for r in ins.shown] == [
        (0, "(none)", None, "text='first text', label=0"),
        (2, "empty.text", "text", "''"),
    ]
    p = run_cli("inspect", str(shard), "--rows", "0,3", "--no-progress", cwd=tmp_path)
    assert p.returncode == 0, p.stderr  # the chosen rows pass
    assert "value: text='first text', label=0" in p.stdout and "value: text='fourth', label=0" in p.stdout


def test_rows_past_the_end_are_a_usage_error_naming_the_file_and_its_rows(tmp_path):
    """--rows past the end of the file is a usage error (exit 2) naming the rows the file has."""
    shard = tmp_path / "s.parquet"
    pl.DataFrame({"text": ["a", "b", "c", "d"]}).write_parquet(shard)
    p = run_cli("inspect", str(shard), "--rows", "99999", "--no-progress", cwd=tmp_path)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "--rows 99999: past the end: s.parquet has 4 row(s) (0..3)" in p.stderr
    with pytest.raises(UsageError, match=r"--rows 4: past the end: s\.parquet has 4 row\(s\)"):
        inspect_shards([str(shard)], config_from_dict({}), rows=[1, 4])
    # a row only the longer of two shards has is shown there and noted on the other
    pl.DataFrame({"text": ["a", "b"]}).write_parquet(tmp_path / "t.parquet")
    ins = inspect_shards([str(tmp_path)], config_from_dict({}), rows=[3])
    assert [(i.shard.rel, [r.row for r in i.shown]) for i in ins] == [("s.parquet", [3]), ("t.parquet", [])]
    assert "rows 3 are past the last row (1)" in ins[1].notes


def test_rows_of_sample_classes_match_the_readme():
    # sample_data/README.md: classes.parquet row 5 holds label -1 (labels.unexpected_sentinel)
    ins = inspect_shards([str(SAMPLE / "defects/labels/classes.parquet")], load_config(SAMPLE_CFG), rows=[0, 5])[0]
    by = {r.row: r for r in ins.shown}
    assert by[0].check == "(none)" and by[0].value.startswith("text='") and by[0].value.endswith(", label=0")
    assert (by[5].check, by[5].value) == ("labels.unexpected_sentinel", "-1")


@pytest.mark.parametrize("check", ["dup.split_overlap", "schema.inconsistent", "index.numbering_gap"])
def test_dataset_level_check_is_a_usage_error(check):
    with pytest.raises(UsageError, match=f"{check} is a dataset-level check; run datacheck audit"):
        inspect_shards([str(SAMPLE / "defects/split/eval.parquet")], load_config(SAMPLE_CFG), checks=[check])
    p = run_cli("inspect", str(SAMPLE / "defects/split/eval.parquet"), "--config", str(SAMPLE_CFG), "--check", check)
    assert p.returncode == 2 and f"{check} is a dataset-level check; run datacheck audit" in p.stderr


def test_merge_accepts_no_progress():
    p = run_cli("merge", "--help")
    assert p.returncode == 0 and "--no-progress" in p.stdout


needs_tok = pytest.mark.skipif(not GPT2.is_dir() or not TINY.is_file() or not MINILM.is_dir(),
                               reason="../shared/realdata tokenizers absent")


@needs_tok
def test_byte_level_tokens_are_decoded():
    tok = load_tokenizer(GPT2)
    assert tok.byte_level
    # PROVENANCE.md: "Hello"=15496, " world"=995; 447 is the first two bytes of U+2019 (e2 80 99)
    assert tok.tokens([15496, 995, 447, None]) == ["Hello", " world", "<0xE2><0x80>", "<null>"]
    assert tok.encode("Hello world") == ["Hello", " world"]
    wp = load_tokenizer(MINILM / "vocab.txt")
    assert not wp.byte_level and wp.encode("unaffable") == ["[CLS]", "una", "##ffa", "##ble", "[SEP]"]


@needs_tok
def test_prefixed_vocab_merges_pair():
    tok = load_tokenizer(TINY)  # gpt2-tiny-vocab.json + gpt2-tiny-merges.txt (PROVENANCE.md: 5,000 tokens)
    assert tok.vocab_size == 5000 and tok.source.endswith("gpt2-tiny-vocab.json + gpt2-tiny-merges.txt")


@needs_tok
def test_note_when_tokenizer_size_differs_from_vocab_size():
    # sample_data's config says GPT-2 (50257); the MiniLM tokenizer has 30522 tokens
    ins = inspect_shards([str(SAMPLE / "defects/tokens/ids.parquet")], load_config(SAMPLE_CFG),
                         tokenizer=load_tokenizer(MINILM))[0]
    assert any(n.startswith("the tokenizer has 30522 tokens but [tokens] vocab_size is 50257: rows are checked "
                            "against 50257; ids 30522..50256 pass the check but show as <oov:ID>") for n in ins.notes)
    same = inspect_shards([str(SAMPLE / "defects/tokens/ids.parquet")], load_config(SAMPLE_CFG),
                          tokenizer=load_tokenizer(GPT2))[0]
    assert not [n for n in same.notes if "tokenizer" in n]


@needs_tok
def test_a_vocabulary_with_a_gap_bounds_ids_by_its_largest_id(tmp_path):
    """A tokenizer whose pad token sits past its token count (WordLevel ids 0-3 and [PAD] = 50:
    5 tokens): ids up to 50 are its vocabulary, so a row padded with 50 is no out-of-vocabulary
    row, and id 50 shows as [PAD], not <oov:50>."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"a": 0, "b": 1, "c": 2, "[UNK]": 3, "[PAD]": 50}
    t = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    t.save(str(tmp_path / "tokenizer.json"))
    tok = load_tokenizer(tmp_path / "tokenizer.json")
    assert t.get_vocab_size() == len(vocab) and tok.vocab_size == max(vocab.values()) + 1
    assert tok.tokens([0, 50, 51]) == ["a", "[PAD]", "<oov:51>"]
    shard = tmp_path / "s.parquet"
    pl.DataFrame({"input_ids": [[0, 1, 2, 50, 50], [0, 1, 2, 2, 51]],
                  "attention_mask": [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]}).write_parquet(shard)
    ins = inspect_shards([str(shard)], config_from_dict({}), tokenizer=tok)[0]
    assert [(r.row, r.check) for r in ins.shown] == [(1, "tokens.out_of_vocab")]


@needs_tok
def test_a_token_holding_part_of_a_character_is_shown_without_doubled_backslashes(tmp_path):
    """The ``tokens:`` line of ``inspect --tokenizer``: GPT-2 token 447 holds bytes e2 80 of U+2019.
    It was printed ``\\\\xe2\\\\x80`` (the partial bytes written as backslash escapes, then every
    backslash of a token doubled by the renderer), which reads as a token holding backslashes."""
    ids = [15496, 447, 247, 995]  # "Hello", e2 80, 99, " world": "Hello’ world"
    shard = tmp_path / "s.parquet"
    pl.DataFrame({"input_ids": [ids]}).write_parquet(shard)
    p = run_cli("inspect", str(shard), "--rows", "0", "--tokenizer", str(GPT2), "--color", "never", "--no-progress",
                cwd=tmp_path)
    (line,) = [ln for ln in p.stdout.splitlines() if ln.strip().startswith("tokens:")]
    want = "".join(f"<0x{b:02X}>" for b in "’".encode()[:2])
    assert want in line and "\\" not in line, line
