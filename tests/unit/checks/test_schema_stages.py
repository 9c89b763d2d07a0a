"""A folder holding raw (text / chat) shards next to tokenized shards of the same data.

Before: ``schema.inconsistent`` said "2 shard(s) differ from the other 2 shard(s) of the dataset:
missing ['messages']; extra ['attention_mask', 'input_ids', 'labels']. Mixed preprocessing;
re-export these shards" (the majority picked by a tie, a wrong diagnosis and a wrong remedy). Now:
one finding that groups the shards by stage and column set and gives the commands that audit
each stage as its own dataset (those commands are run here)."""
from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import polars as pl
import pytest
from conftest import SHARED, run_cli
from dshelp import by_check, one, run, write

CHAT = SHARED / "chat"
TEXTS = [f"sample number {i} about cats" for i in range(6)]


def _messages(texts: list[str]) -> list[list[dict]]:
    return [[{"role": "user", "content": "say something"}, {"role": "assistant", "content": t}] for t in texts]


def _tokenized(texts: list[str]) -> pl.DataFrame:
    ids = [[1] + [3 + len(w) for w in t.split()] + [2] for t in texts]
    return pl.DataFrame({"input_ids": ids, "attention_mask": [[1] * len(x) for x in ids], "labels": ids})


def _layout(root: Path) -> Path:
    write(root, "raw/train-0.jsonl", pl.DataFrame({"messages": _messages(TEXTS[:3])}))
    write(root, "raw/train-1.jsonl", pl.DataFrame({"messages": _messages(TEXTS[3:])}))
    write(root, "tokenized/train-0.parquet", _tokenized(TEXTS[:3]))
    write(root, "tokenized/train-1.parquet", _tokenized(TEXTS[3:]))
    write(root, "tokenized/train-2.parquet", _tokenized(TEXTS[:2]))
    return root


def test_raw_and_tokenized_one_grouped_finding(tmp_path):
    root = _layout(tmp_path / "ds")
    rep = run(root)
    f = one(rep, "schema.inconsistent")
    assert f.severity == "error"
    assert f.count == 2  # the raw shards: the tokenized stage has more shards (the reference)
    assert f.shards == ("raw/train-0.jsonl", "raw/train-1.jsonl", "tokenized/train-0.parquet",
                        "tokenized/train-1.parquet", "tokenized/train-2.parquet")
    assert f.details["layouts"] == [
        {"stage": "raw", "columns": ["messages"], "shards": ["raw/train-0.jsonl", "raw/train-1.jsonl"]},
        {"stage": "tokenized", "columns": ["attention_mask", "input_ids", "labels"],
         "shards": ["tokenized/train-0.parquet", "tokenized/train-1.parquet", "tokenized/train-2.parquet"]}]
    assert f.details["reference_stage"] == "tokenized"
    assert f.details["commands"] == [f"datacheck audit {root}/raw", f"datacheck audit {root}/tokenized"]
    assert f.message.startswith(f"raw and tokenized data in one audit: audit each as its own dataset "
                                f"(`datacheck audit {root}/raw`; `datacheck audit {root}/tokenized`). The shards "
                                "of the dataset: raw: columns messages in 2 shard(s) (raw/train-0.jsonl, "
                                "raw/train-1.jsonl); tokenized: columns attention_mask, input_ids, labels in 3 shard(s)")
    assert "re-export" not in f.message


def test_same_folder_layouts_get_globs_by_extension(tmp_path):
    root = tmp_path / "ds"
    write(root, "chat.jsonl", pl.DataFrame({"messages": _messages(TEXTS)}))
    write(root, "chat_tok.parquet", _tokenized(TEXTS))
    f = one(run(root), "schema.inconsistent")
    assert f.details["commands"] == [f"datacheck audit '{root}/**/*.jsonl'", f"datacheck audit '{root}/**/*.parquet'"]


def test_differences_within_a_stage_still_found(tmp_path):
    """A tokenized shard without labels among tokenized shards is mixed preprocessing of that stage."""
    root = _layout(tmp_path / "ds")
    write(root, "tokenized/train-3.parquet", _tokenized(TEXTS).drop("labels"))
    got = by_check(run(root), "schema.inconsistent")
    assert len(got) == 2
    assert got[1].shards == ("tokenized/train-3.parquet",)
    assert got[1].details["missing"] == ["labels"] and got[1].details["reference_shards"] == 3


def test_text_and_tokens_kept_together_is_one_stage(tmp_path):
    """Tokenized shards that keep their text column are tokenized; text-only shards are raw."""
    root = tmp_path / "ds"
    write(root, "a.parquet", _tokenized(TEXTS).with_columns(pl.Series("text", TEXTS)))
    write(root, "b.parquet", pl.DataFrame({"text": TEXTS}))
    f = one(run(root), "schema.inconsistent")
    assert [x["stage"] for x in f.details["layouts"]] == ["tokenized", "raw"]


def test_same_stage_layouts_keep_the_old_message(tmp_path):
    root = tmp_path / "ds"
    write(root, "a.parquet", _tokenized(TEXTS))
    write(root, "b.parquet", _tokenized(TEXTS))
    write(root, "c.parquet", _tokenized(TEXTS).drop("labels"))
    f = one(run(root), "schema.inconsistent")
    assert f.message == ("1 shard(s) differ from the other 2 shard(s) of the dataset: missing ['labels']. "
                         "Mixed preprocessing; re-export these shards")


@pytest.mark.skipif(not (CHAT / "fastchat").is_dir(), reason="../shared/chat is not present")
def test_cli_real_chat_next_to_its_tokenization(tmp_path):
    """FastChat's dummy_conversation.json (500 ShareGPT rows, PROVENANCE.md) next to its ChatML
    tokenization by the real SmolLM-135M tokenizer; then the two commands the finding gives."""
    tokenizers = pytest.importorskip("tokenizers")
    root = tmp_path / "ds"
    (root / "raw").mkdir(parents=True)
    shutil.copy(CHAT / "fastchat" / "dummy_conversation.json", root / "raw" / "conversations.json")
    rows = json.loads((CHAT / "fastchat" / "dummy_conversation.json").read_text())
    assert len(rows) == 500
    tok = tokenizers.Tokenizer.from_file(str(CHAT / "tokenizers" / "smollm_135m" / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    role = {"human": "user", "gpt": "assistant"}
    texts = ["".join(f"<|im_start|>{role.get(m['from'], m['from'])}\n{m['value']}<|im_end|>\n"
                     for m in r["conversations"]) for r in rows]
    ids = [e.ids for e in tok.encode_batch(texts)]
    assert all(x[0] == 1 for x in ids)  # <|im_start|> = 1 (PROVENANCE.md)
    df = pl.DataFrame({"input_ids": ids, "attention_mask": [[1] * len(x) for x in ids], "labels": ids})
    write(root, "tokenized/part-0.parquet", df[:250])
    write(root, "tokenized/part-1.parquet", df[250:])
    out = tmp_path / "r.json"
    p = run_cli("audit", str(root), "--report-dir", str(tmp_path / "reports"), "--output", str(out))
    assert p.returncode == 1, p.stderr
    d = json.loads(out.read_text())
    (f,) = [f for f in d["findings"] if f["check"] == "schema.inconsistent"]
    assert [(x["stage"], x["columns"], len(x["shards"])) for x in f["details"]["layouts"]] == [
        ("raw", ["conversations", "id"], 1), ("tokenized", ["attention_mask", "input_ids", "labels"], 2)]
    assert f["count"] == 1 and f["details"]["reference_stage"] == "tokenized"
    assert "audit each as its own dataset" in p.stdout
    for cmd in f["details"]["commands"]:  # the remedy works: each stage alone is consistent
        args = shlex.split(cmd)[1:]
        q = run_cli(*args, "--report-dir", str(tmp_path / "reports"), "--format", "json", "--fail-on", "error")
        rep = json.loads(q.stdout)
        assert [x["check"] for x in rep["findings"] if x["check"] == "schema.inconsistent"] == [], cmd
        assert rep["summary"]["shards"] == (1 if "raw" in cmd else 2)
