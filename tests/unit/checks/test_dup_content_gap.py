"""A row content that cannot tell samples apart (a declared content column the shard lacks, e.g. a
mistyped ``[columns] input_ids``) is never compared: the dup.* checks are skipped, naming the column
and the fix, where they reported every row equal in what was left (a mask, a label) as a repeat."""
from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import REALDATA
from dshelp import by_check, one, run, write

DUP = ("dup.exact_in_shard", "dup.exact_across_shards", "dup.conflicting_labels", "dup.split_overlap")


def _dup_findings(rep) -> list:
    return [f for f in rep.findings if f.check.startswith("dup.")] + [
        f for s in rep.shards for f in s.findings if f.check.startswith("dup.")]


def _skips(rep, check: str) -> list[str]:
    return [s["reason"] for s in rep.skipped if s["check"] == check]


def _repeats(keys: list) -> int:
    """Rows whose key equals an earlier row's (what dup.exact_in_shard counts)."""
    return len(keys) - len(set(keys))


def test_mistyped_input_ids_compares_no_rows(tmp_path):
    """Distinct token ids under a name no rule reads (``tok``), one mask: before, every row but the
    first was a repeat of the mask."""
    root = tmp_path / "ds"
    ids = [[101, 7, 102], [101, 8, 102], [101, 9, 102], [101, 7, 102]]
    mask = [[1, 1, 1]] * len(ids)
    write(root, "a.parquet", {"tok": ids, "attention_mask": mask, "label": [0, 1, 0, 0]})
    write(root, "b.parquet", {"tok": [[101, 5, 102]], "attention_mask": [[1, 1, 1]], "label": [1]})
    rep = run(root, {"columns": {"input_ids": "ids"}})
    assert _repeats(list(zip(map(tuple, mask), [0, 1, 0, 0]))) == 2  # what was reported before
    assert [f.check for s in rep.shards for f in s.findings] == ["schema.missing_column"] * 2
    assert _dup_findings(rep) == []
    for cid in DUP[:3]:
        reasons = _skips(rep, cid)
        assert len(reasons) == 1, (cid, reasons)
        assert "[columns] input_ids names 'ids', which this shard lacks" in reasons[0]
        assert "set [columns] input_ids to the shard's column" in reasons[0]
    # the merge does not add that the shards' "check could not run": their own entry says why
    assert not any("have no row hashes" in r for r in _skips(rep, "dup.exact_across_shards"))
    # the right config finds the real repeat (row 3 = row 0: ids, mask and label)
    good = run(root, {"columns": {"input_ids": "tok"}})
    keys = list(zip(map(tuple, ids), [0, 1, 0, 0]))
    f = one(good, "dup.exact_in_shard")
    assert f.count == _repeats(keys) == 1 and list(f.rows) == [3]


def test_mistyped_input_ids_beside_the_standard_column_compares_the_ids(tmp_path):
    """The ids in ``input_ids`` and ``[columns] input_ids = "ids"``: the standard column is read in
    the key's place (schema.missing_column says so once), so the rows are compared on their ids
    as the right config compares them: the real repeat, no skip."""
    root = tmp_path / "ds"
    ids = [[101, 7, 102], [101, 8, 102], [101, 9, 102], [101, 7, 102]]
    write(root, "a.parquet", {"input_ids": ids, "attention_mask": [[1, 1, 1]] * 4, "label": [0, 1, 0, 0]})
    rep = run(root, {"columns": {"input_ids": "ids"}})
    f = one(rep, "dup.exact_in_shard")
    assert f.count == _repeats(list(zip(map(tuple, ids), [0, 1, 0, 0]))) == 1 and list(f.rows) == [3]
    assert _skips(rep, "dup.exact_in_shard") == []
    (m,) = [g for s in rep.shards for g in s.findings if g.check == "schema.missing_column"]
    assert m.column == "ids" and "'input_ids' was read in its place" in m.message


def test_one_shard_without_label_is_skipped_too(tmp_path):
    """No merge payload (one shard, no class label): the in-shard check decides from its own key."""
    root = tmp_path / "ds"
    write(root, "a.parquet", {"tok": [[1, 2], [3, 4], [5, 6]], "attention_mask": [[1, 1]] * 3})
    rep = run(root, {"columns": {"input_ids": "ids"}})
    assert _dup_findings(rep) == []
    (reason,) = _skips(rep, "dup.exact_in_shard")
    assert "row content is only attention_mask" in reason


def test_no_column_of_own_content_without_any_declaration(tmp_path):
    """Masks and token labels with no ids (the ids under a name no rule infers): not a sample."""
    root = tmp_path / "ds"
    write(root, "a.parquet", {"tok": [[1, 2], [3, 4]], "attention_mask": [[1, 1]] * 2, "labels": [[-100, 5]] * 2})
    rep = run(root)
    assert _dup_findings(rep) == []
    (reason,) = _skips(rep, "dup.exact_in_shard")
    assert reason.startswith("the row content is only attention_mask, labels: it holds none of a row's own content")


def test_partly_missing_text_is_not_compared_on_the_rest(tmp_path):
    """``text = ["title", "body"]`` on a shard without ``body``: equal titles are not equal samples."""
    root = tmp_path / "ds"
    titles = ["News", "News", "Sports"]
    write(root, "a.parquet", {"title": titles, "content_body": ["one", "two", "three"], "label": [0, 0, 1]})
    rep = run(root, {"columns": {"text": ["title", "body"]}})
    assert _repeats(list(zip(titles, [0, 0, 1]))) == 1  # what was reported before
    assert _dup_findings(rep) == []
    (reason,) = _skips(rep, "dup.exact_in_shard")
    assert "[columns] text names 'body', which this shard lacks" in reason and "(title)" in reason


def test_preference_pair_without_chosen_is_not_compared_on_rejected(tmp_path):
    root = tmp_path / "ds"
    prompt = ["Say hi", "Say hi"]
    rejected = ["No.", "No."]
    write(root, "a.parquet", {"prompt": prompt, "chosen_text": ["Hi!", "Hello there!"], "rejected": rejected})
    rep = run(root, {"columns": {"chosen": "chosen_response", "rejected": "rejected"}})
    assert _repeats(list(zip(prompt, rejected))) == 1  # what was reported before
    assert _dup_findings(rep) == []
    (reason,) = _skips(rep, "dup.exact_in_shard")
    assert "[columns] chosen names 'chosen_response'" in reason and "chosen/rejected content (rejected)" in reason


def test_tabular_features_partly_missing(tmp_path):
    root = tmp_path / "ds"
    x1 = [0.5, 0.5, 1.5]
    write(root, "a.parquet", {"x1": x1, "x_2": [1.0, 2.0, 3.0], "label": [0, 0, 1]})
    rep = run(root, {"columns": {"features": ["x1", "x2"]}})
    assert _repeats(list(zip(x1, [0, 0, 1]))) == 1  # what was reported before
    assert _dup_findings(rep) == []
    assert "[columns] features names 'x2'" in _skips(rep, "dup.exact_in_shard")[0]


def test_declared_kind_wholly_absent_beside_another_kind_still_compares(tmp_path):
    """``[columns] features`` on a shard of text: the text is the row; repeats are still found."""
    root = tmp_path / "ds"
    text = ["a", "b", "a"]
    write(root, "a.parquet", {"text": text, "label": [0, 1, 0]})
    rep = run(root, {"columns": {"features": ["f"]}})
    f = one(rep, "dup.exact_in_shard")
    assert f.count == _repeats(list(zip(text, [0, 1, 0]))) == 1
    assert _skips(rep, "dup.exact_in_shard") == []


def test_mistyped_messages_still_compares_whole_rows(tmp_path):
    """A conversation under a mistyped ``messages`` leaves no role column: rows are compared on all
    their columns (the conversation included), so different conversations are never repeats."""
    root = tmp_path / "ds"
    conv = [[{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}] for i in (0, 1, 0)]
    write(root, "a.parquet", {"messages": conv, "tools": ["[]"] * 3})
    rep = run(root, {"columns": {"messages": "msgs"}})
    keys = [json.dumps(c) for c in conv]
    f = one(rep, "dup.exact_in_shard")
    assert f.count == _repeats(keys) == 1 and list(f.rows) == [2]


def test_speech_rows_are_compared_on_their_audio(tmp_path):
    """CTC rows of one transcript and one length but different audio are different samples (the
    transcript alone made them repeats); the same audio and transcript twice is a repeat."""
    root = tmp_path / "ds"
    audio = [[0.1, 0.2, 0.3], [0.3, 0.2, 0.1], [0.1, 0.2, 0.3]]
    labels = [[5, 6]] * 3
    write(root, "a.parquet", {"input_values": audio, "labels": labels})
    rep = run(root)
    f = one(rep, "dup.exact_in_shard")
    assert f.count == _repeats([(tuple(a), tuple(b)) for a, b in zip(audio, labels)]) == 1
    assert list(f.rows) == [2]
    assert "input_values" in f.message


# ------------------------------------------------------------------------------------------ real data

def _agnews_tokenized(tmp_path, ids_name: str = "input_ids"):
    """The 100 prompted AG News rows (realdata/agnews_prompts_jsonl) tokenized by the real MiniLM BERT
    WordPiece tokenizer as it is saved (padding and truncation to 128): the ids (in ``ids_name``),
    ``token_type_ids``, ``attention_mask``, and the class ``label`` (``targets``)."""
    tokenizers = pytest.importorskip("tokenizers")
    src = REALDATA / "agnews_prompts_jsonl" / "ag_news_classify_question_first.jsonl"
    tok_file = REALDATA / "minilm_bert_tokenizer" / "tokenizer.json"
    if not src.is_file() or not tok_file.is_file():
        pytest.skip("../shared/realdata is not present")
    rows = [json.loads(line) for line in src.read_text().splitlines() if line.strip()]
    tok = tokenizers.Tokenizer.from_file(str(tok_file))
    enc = tok.encode_batch([r["inputs"] for r in rows])
    data = {ids_name: [e.ids for e in enc], "token_type_ids": [e.type_ids for e in enc],
            "attention_mask": [e.attention_mask for e in enc], "label": [r["targets"] for r in rows]}
    root = tmp_path / f"agnews_{ids_name}"
    write(root, "train.parquet", pl.DataFrame(data))
    return root, rows, data


def test_real_tokenized_news_with_a_mistyped_role(tmp_path):
    """The ids under ``tok`` (a name no rule reads) and ``[columns] input_ids = "ids"``: what is left
    (mask, token types, label) is no sample, so nothing is compared."""
    root, rows, data = _agnews_tokenized(tmp_path, "tok")
    # PROVENANCE facts: 100 rows, targets Business 78 / Science and technology 22
    assert len(rows) == 100
    assert sorted(pl.Series(data["label"]).value_counts(sort=True).rows()) == [("Business", 78),
                                                                               ("Science and technology", 22)]
    ids = [tuple(x) for x in data["tok"]]
    assert len(set(ids)) == len(ids)  # clean: no two rows are the same sample
    assert all(len(x) == 128 for x in ids)  # padded to 128, as the saved tokenizer does
    rest = list(zip(map(tuple, data["attention_mask"]), map(tuple, data["token_type_ids"]), data["label"]))
    assert _repeats(rest) > 0  # rows equal in what a mistyped input_ids leaves: false repeats before
    bad = run(root, {"columns": {"input_ids": "ids"}})
    (missing,) = by_check(bad, "schema.missing_column") or [f for s in bad.shards for f in s.findings
                                                          if f.check == "schema.missing_column"]
    assert missing.column == "ids" and missing.severity == "error"
    assert _dup_findings(bad) == []
    assert any("[columns] input_ids names 'ids'" in r for r in _skips(bad, "dup.exact_in_shard"))
    good = run(root, {"columns": {"input_ids": "tok"}})
    assert [f.check for s in good.shards for f in s.findings] + [f.check for f in good.findings] == []
    assert _skips(good, "dup.exact_in_shard") == []
    # the same rows with the ids in input_ids: the mistyped key reads them (clean: only the key's finding)
    std, _rows, _data = _agnews_tokenized(tmp_path)
    read = run(std, {"columns": {"input_ids": "ids"}})
    assert [f.check for f in read.findings] == ["schema.missing_column"]
    assert _skips(read, "dup.exact_in_shard") == []


def test_real_mbert_shards_with_a_mistyped_role():
    """realdata dkhate_mbert (label, input_ids, token_type_ids, attention_mask; padded to 128): a
    mistyped ``input_ids`` reported thousands of repeats of the mask and label (2,762 in train);
    now the shard's ``input_ids`` is read in the key's place: the dup.* results are the right
    config's, and the only other finding is the key's."""
    root = REALDATA / "dkhate_danish_offensive" / "dkhate_mbert"
    if not root.is_dir():
        pytest.skip("../shared/realdata is not present")
    bad = run(root, {"columns": {"input_ids": "ids"}})
    good = run(root)
    assert sorted(s.rows for s in bad.shards) == [329, 2960]  # PROVENANCE: test 329, train 2,960
    assert {f.check for s in bad.shards for f in s.findings} - {f.check for s in good.shards for f in s.findings} == {
        "schema.missing_column"}

    def dups(rep):
        return sorted((f.check, f.count) for f in _dup_findings(rep))

    assert dups(bad) == dups(good)
    for cid in DUP:
        assert _skips(bad, cid) == _skips(good, cid), cid


def test_near_duplicates_not_searched_in_part_of_a_text(tmp_path):
    """``[dup] near``: documents of a declared text whose ``body`` is missing are not the titles alone
    (two long equal titles over different bodies were a near-duplicate cluster)."""
    root = tmp_path / "ds"
    title = "Stocks rally as central bank holds rates steady for the third month in a row"
    write(root, "a.parquet", {"title": [title, title + "!"], "content_body": ["one story", "another story"]})
    cfg = {"dup": {"near": True}, "columns": {"text": ["title", "body"]}}
    rep = run(root, cfg)
    assert _dup_findings(rep) == []
    (reason,) = _skips(rep, "dup.near_duplicate")
    assert "[columns] text names 'body', which this shard lacks" in reason
    # the whole text declared: nothing is skipped
    good = run(root, {"dup": {"near": True}, "columns": {"text": ["title", "content_body"]}})
    assert _skips(good, "dup.near_duplicate") == []
