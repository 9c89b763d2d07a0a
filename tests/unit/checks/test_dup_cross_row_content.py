"""The report's ``row_content.columns`` tells the truth for every shard, and row hashes
over different column sets are never compared with each other (no silent miss, no false alarm)."""
from __future__ import annotations

import json

import jsonschema
import pytest
from checkhelp import CHAT
from conftest import ROOT, run_cli
from dshelp import by_check, one, run, write

SCHEMA = json.loads((ROOT / "schemas" / "report.schema.json").read_text())
IDS = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]


def _skips(rep, check: str) -> list[str]:
    return [s["reason"] for s in rep.skipped if s["check"] == check]


def _mixed(tmp_path):
    """a.parquet: input_ids, attention_mask, labels; b.parquet: the same rows without labels."""
    root = tmp_path / "ds"
    write(root, "a.parquet", {"input_ids": IDS, "attention_mask": [[1, 1, 1]] * 3, "labels": IDS})
    write(root, "b.parquet", {"input_ids": IDS, "attention_mask": [[1, 1, 1]] * 3})
    return root


def test_row_content_per_shard_when_shards_differ(tmp_path):
    rep = run(_mixed(tmp_path))
    d = rep.to_dict()
    # before: ["input_ids", "attention_mask", "labels"] for both shards (the first shard's columns)
    assert d["row_content"]["columns"] is None
    assert {s["path"]: s["row_content"]["columns"] for s in d["shards"]} == {
        "a.parquet": ["input_ids", "attention_mask", "labels"], "b.parquet": ["input_ids", "attention_mask"]}
    jsonschema.validate(d, SCHEMA)
    # the columns the shards' row hashes were really computed over (the cross-shard payload)
    assert rep.row_content["encoding"] == "datacheck-row-v5"


def test_row_content_one_list_when_shards_agree(tmp_path):
    root = tmp_path / "ds"
    write(root, "a.parquet", {"text": ["x", "y"], "label": [0, 1], "idx": [0, 1]})
    write(root, "b.parquet", {"text": ["z", "x"], "label": [1, 0], "idx": [2, 3]})
    d = run(root).to_dict()
    assert d["row_content"]["columns"] == ["text", "label"]  # idx has no role: never content
    assert all("row_content" not in s for s in d["shards"])
    jsonschema.validate(d, SCHEMA)


def test_no_roles_content_is_every_column(tmp_path):
    root = tmp_path / "ds"
    write(root, "a.parquet", {"u": [1, 2], "v": [3, 4]})
    write(root, "b.parquet", {"u": [1, 2], "v": [3, 4]})
    rep = run(root)
    assert rep.row_content["columns"] == ["u", "v"]
    assert one(rep, "dup.exact_across_shards").count == 2


def test_hashes_over_different_columns_are_not_compared(tmp_path):
    rep = run(_mixed(tmp_path))
    assert by_check(rep, "dup.exact_across_shards") == []
    (reason,) = _skips(rep, "dup.exact_across_shards")
    assert reason.startswith("the shards' row contents are made of different columns, so rows are compared only "
                             "among shards of the same columns")
    assert "input_ids, attention_mask, labels (a.parquet); input_ids, attention_mask (b.parquet)" in reason


def test_no_false_alarm_from_equal_values_in_other_columns(tmp_path):
    """No roles: a.parquet's content is (p, q), b.parquet's (p, r) with equal values. The hash covers
    values, not names: before, 2 rows were reported as repeats across shards."""
    root = tmp_path / "ds"
    write(root, "a.parquet", {"p": [1, 2], "q": [5, 6]})
    write(root, "b.parquet", {"p": [1, 2], "r": [5, 6]})
    rep = run(root)
    assert by_check(rep, "dup.exact_across_shards") == []
    assert "p, q (a.parquet); p, r (b.parquet)" in _skips(rep, "dup.exact_across_shards")[0]


def test_repeats_found_within_each_column_group(tmp_path):
    root = _mixed(tmp_path)
    write(root, "c.parquet", {"input_ids": [IDS[2], [0]], "attention_mask": [[1, 1, 1], [1]]})
    rep = run(root)
    f = one(rep, "dup.exact_across_shards")
    assert f.count == 1  # c row 0 = b row 2; never a.parquet (labels are part of its content)
    assert [e.value for e in f.examples] == ["c.parquet row 0 = b.parquet row 2"]
    assert rep.to_dict()["shards"][2]["row_content"] == {"columns": ["input_ids", "attention_mask"]}


def test_conflicting_labels_only_within_a_column_group(tmp_path):
    root = tmp_path / "ds"
    write(root, "a.parquet", {"text": ["x", "y"], "label": [0, 1]})
    write(root, "b.parquet", {"text": ["x", "y"], "label": [1, 1], "features": [0.5, 0.5]})
    cfg = {"columns": {"features": ["features"]}}
    write(root, "c.parquet", {"text": ["x"], "label": [1]})
    rep = run(root, cfg)
    f = one(rep, "dup.conflicting_labels")
    assert f.count == 1 and f.shards == ("a.parquet", "c.parquet")  # "x": 0 in a, 1 in c; b hashes text+features
    assert any("text (a.parquet, c.parquet)" in r for r in _skips(rep, "dup.conflicting_labels"))


def test_split_overlap_names_shards_with_no_counterpart(tmp_path):
    root = tmp_path / "ds"
    write(root, "train/a.parquet", {"input_ids": IDS, "attention_mask": [[1, 1, 1]] * 3})
    write(root, "test/b.parquet", {"input_ids": IDS[:1], "attention_mask": [[1, 1, 1]]})
    write(root, "test/c.parquet", {"input_ids": IDS[1:2], "attention_mask": [[1, 1, 1]], "labels": IDS[1:2]})
    rep = run(root, {"splits": {"train": "train/*", "test": "test/*"}})
    f = one(rep, "dup.split_overlap")
    assert f.count == 1 and f.shards == ("test/b.parquet",)
    (reason,) = _skips(rep, "dup.split_overlap")
    assert reason.startswith("1 shard(s) of split 'test' hash rows over columns no shard of split 'train' has")
    assert "input_ids, attention_mask, labels (test/c.parquet)" in reason


def test_cli_report_states_each_shards_row_content(tmp_path):
    root = _mixed(tmp_path)
    out = tmp_path / "r.json"
    p = run_cli("audit", str(root), "--report-dir", str(tmp_path / "reports"), "--output", str(out),
                "--fail-on", "warn")
    assert p.returncode == 1, p.stderr  # schema.inconsistent (error): b.parquet lacks labels
    d = json.loads(out.read_text())
    jsonschema.validate(d, SCHEMA)
    assert d["row_content"]["columns"] is None
    assert [s["row_content"]["columns"] for s in d["shards"]] == [["input_ids", "attention_mask", "labels"],
                                                                  ["input_ids", "attention_mask"]]
    assert [s["check"] for s in d["skipped"] if "made of different columns" in s["reason"]] == ["dup.exact_across_shards"]


def test_context_columns_make_rows_distinct(tmp_path):
    """TRL's explicit-prompt preference format: two different prompts answered by the same refusal
    pair are two samples; the same prompt and pair twice is a repeat."""
    root = tmp_path / "ds"
    prompts = ["How do I pick a lock?", "How do I hack my neighbour's wifi?", "How do I pick a lock?"]
    write(root, "train.parquet", {"prompt": prompts, "chosen": ["I cannot help with that."] * 3,
                                  "rejected": ["Sure, here is how."] * 3})
    rep = run(root)
    f = one(rep, "dup.exact_in_shard")
    assert f.count == len(prompts) - len(set(prompts)) == 1
    assert [e.row for e in f.examples] == [2]
    assert "chosen, rejected, prompt" in f.message


def test_tools_and_images_are_content_an_idx_is_not(tmp_path):
    root = tmp_path / "ds"
    conv = [[{"role": "user", "content": "What is the weather in Paris?"},
             {"role": "assistant", "content": "Let me check."}]] * 4
    tools = ['[{"name": "get_weather"}]', '[{"name": "search_web"}]', '[{"name": "get_weather"}]',
             '[{"name": "search_web"}]']
    images = [["a.png"], ["a.png"], ["b.png"], ["a.png"]]
    write(root, "chat.parquet", {"messages": conv, "tools": tools, "images": images, "idx": [0, 1, 2, 3]})
    rep = run(root)
    keys = list(zip(tools, map(tuple, images)))
    f = one(rep, "dup.exact_in_shard")
    assert f.count == len(keys) - len(set(keys)) == 1  # row 3 repeats row 1 (tools and image equal)
    assert [e.row for e in f.examples] == [3]
    assert "messages, tools, images" in f.message


def test_a_repeat_is_shown_by_its_conversation_not_by_its_tools(tmp_path):
    """The example of a repeated chat row is its conversation (the role column), not the string column
    that only conditions it (``tools``), which most rows leave as ``'[]'``."""
    root = tmp_path / "ds"
    conv = [[{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
            for i in (0, 1, 0)]
    tools = ["[]"] * 3
    write(root, "chat.parquet", {"messages": conv, "tools": tools})
    f = one(run(root), "dup.exact_in_shard")
    keys = [(json.dumps(c), t) for c, t in zip(conv, tools)]
    repeats = [i for i, k in enumerate(keys) if k in keys[:i]]
    assert [e.row for e in f.examples] == repeats == [2]
    assert "question 0" in f.examples[0].value and "answer 0" in f.examples[0].value


def test_real_tool_calling_conversations_differ_by_their_tools():
    """LLaMA-Factory's glaive tool-calling demo (../shared/chat, 300 rows): some conversations occur
    with different ``tools``; only a repeat of both is a duplicate."""
    path = CHAT / "llamafactory" / "glaive_toolcall_en_demo.json"
    if not path.is_file():
        pytest.skip("../shared/chat is not present")
    rows = json.loads(path.read_text())
    both = {(json.dumps(r["conversations"], sort_keys=True), r.get("tools")) for r in rows}
    conv_only = {json.dumps(r["conversations"], sort_keys=True) for r in rows}
    assert len(conv_only) < len(both)  # the fact this test is about: a conversation with two tool sets
    f = one(run(path), "dup.exact_in_shard")
    assert f.count == len(rows) - len(both)
    # each example shows the repeated row's conversation: its first message's text is in it
    for e in f.examples:
        assert rows[e.row]["conversations"][0]["value"][:40] in e.value


def _tar(path, samples: list[tuple[str, str]]) -> None:
    """A WebDataset shard: one ``KEY.txt`` member per sample."""
    import io
    import tarfile

    with tarfile.open(path, "w") as t:
        for key, text in samples:
            b = text.encode()
            info = tarfile.TarInfo(f"{key}.txt")
            info.size = len(b)
            t.addfile(info, io.BytesIO(b))


def test_webdataset_samples_are_compared_on_their_members_not_their_keys(tmp_path):
    """Every WebDataset sample has its own ``__key__``: as content, it made every sample distinct, so a
    repeated text was never a duplicate, in a shard or across shards."""
    root = tmp_path / "wds"
    root.mkdir()
    a = [("s0", "hello world"), ("s1", "hello world"), ("s2", "other")]
    b = [("t0", "other"), ("t1", "new")]
    _tar(root / "a.tar", a)
    _tar(root / "b.tar", b)
    rep = run(root)
    texts_a = [t for _, t in a]
    in_a = [i for i, t in enumerate(texts_a) if t in texts_a[:i]]
    f = one(rep, "dup.exact_in_shard")
    assert list(f.rows) == in_a == [1] and f.shards == ("a.tar",)
    across = [i for i, (_, t) in enumerate(b) if t in texts_a]
    g = one(rep, "dup.exact_across_shards")
    assert g.count == len(across) == 1
    d = rep.to_dict()
    assert d["row_content"]["columns"] == ["txt"]


def test_webdataset_text_members_are_the_text_role(tmp_path):
    """A WebDataset sample's ``txt`` member (gzipped: ``txt.gz``) is its text, as Hugging Face's
    webdataset loader names the column: an empty one is ``empty.text``, never skipped for want of a
    text column."""
    import gzip
    import io
    import tarfile

    samples = [("s0", "hello world"), ("s1", ""), ("s2", "   "), ("s3", "more text")]
    for ext in ("txt", "txt.gz"):
        root = tmp_path / ext
        root.mkdir()
        with tarfile.open(root / "a.tar", "w") as t:
            for key, text in samples:
                b = gzip.compress(text.encode()) if ext.endswith(".gz") else text.encode()
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(b)
                t.addfile(info, io.BytesIO(b))
        rep = run(root)
        f = one(rep, "empty.text")
        assert list(f.rows) == [i for i, (_, text) in enumerate(samples) if not text.strip()] == [1, 2]
        assert f.column == ext
        assert _skips(rep, "empty.text") == []
