"""``datacheck clean`` and the dataset-level duplicate checks: ``--drop dup.split_overlap`` drops the
eval copies (the train row stays), ``--drop dup.exact_across_shards`` keeps the first copy,
``--drop dup.shard`` drops the duplicate shard; a plain clean names every dataset-level finding it
left in place and says when the copy still fails the gate; the report's dataset-level findings list
their rows."""
from __future__ import annotations

import json
import shutil

import polars as pl
import pytest
from conftest import run_cli

import datacheck
from datacheck.model.config import config_from_dict
from datacheck.model.errors import UsageError
from datacheck.tools.clean import QUARANTINE_DIR, clean

SPLITS = {"splits": {"train": "train*", "eval": "eval*"}, "labels": {"num_classes": 3}}


def _texts(n: int, tag: str) -> list[str]:
    return [f"{tag} sample {i}" for i in range(n)]


@pytest.fixture
def leak(tmp_path):
    """train (10 rows) and eval (6 rows); eval rows 1, 3 and 4 repeat train rows 2, 7 and 9."""
    d = tmp_path / "data"
    d.mkdir()
    train = _texts(10, "train")
    ev = _texts(6, "eval")
    for e, t in ((1, 2), (3, 7), (4, 9)):
        ev[e] = train[t]
    for name, texts in (("train", train), ("eval", ev)):  # a copy carries its train row's label
        pl.DataFrame({"text": texts, "label": [int(t.split()[-1]) % 3 for t in texts]}).write_parquet(d / f"{name}.parquet")
    return d, train, ev


def _quarantined_rows(out, rel):
    q = out / QUARANTINE_DIR / rel
    return pl.read_parquet(q)["_datacheck_row"].to_list() if q.exists() else []


def test_drop_split_overlap_drops_the_eval_copies_and_keeps_the_train_rows(tmp_path, leak):
    data, train, ev = leak
    cfg = config_from_dict(SPLITS)
    leaked = [i for i, t in enumerate(ev) if t in set(train)]
    res = clean([str(data)], tmp_path / "out", cfg, drop=["dup.split_overlap"])
    by = {s.path: s for s in res.shards}
    assert (by["eval.parquet"].kept, by["eval.parquet"].quarantined) == (len(ev) - len(leaked), len(leaked))
    assert by["eval.parquet"].dropped == {"dup.split_overlap": len(leaked)}
    assert (by["train.parquet"].kept, by["train.parquet"].quarantined) == (len(train), 0)
    assert _quarantined_rows(res.out, "eval.parquet") == leaked
    assert pl.read_parquet(res.out / "eval.parquet")["text"].to_list() == [t for i, t in enumerate(ev) if i not in leaked]
    again = datacheck.audit([str(res.out)], cfg, workers=1)
    assert [f.check for f in again.dataset_findings if f.check.startswith("dup.")] == []
    assert res.left_in_place == ()


def test_drop_split_overlap_takes_the_splits_the_file_names_give(tmp_path, leak):
    """No [splits]: train.parquet and eval.parquet name the splits train and test as the Hugging Face
    Hub does, and clean drops the same eval rows as with [splits] written by hand."""
    data, train, ev = leak
    leaked = [i for i, t in enumerate(ev) if t in set(train)]
    res = clean([str(data)], tmp_path / "out", config_from_dict({}), drop=["dup.split_overlap"])
    by = {s.path: s for s in res.shards}
    assert by["eval.parquet"].dropped == {"dup.split_overlap": len(leaked)}
    assert (by["train.parquet"].kept, by["train.parquet"].quarantined) == (len(train), 0)
    assert _quarantined_rows(res.out, "eval.parquet") == leaked


def test_a_leak_whose_train_row_is_dropped_anyway_keeps_its_eval_row(tmp_path, leak):
    data, train, ev = leak
    df = pl.read_parquet(data / "train.parquet")
    df = df.with_columns(pl.Series("label", [7 if i == 7 else v for i, v in enumerate(df["label"].to_list())]))
    df.write_parquet(data / "train.parquet")  # train row 7 (= eval row 3): labels.out_of_range
    res = clean([str(data)], tmp_path / "out", config_from_dict(SPLITS),
                drop=["labels.out_of_range", "dup.split_overlap"])
    assert _quarantined_rows(res.out, "train.parquet") == [7]
    assert _quarantined_rows(res.out, "eval.parquet") == [1, 4]  # row 3 no longer leaks: it stays


def test_plain_clean_names_the_leak_it_left_and_that_the_copy_still_fails(tmp_path, leak):
    data, _train, _ev = leak
    (data.parent / "datacheck.toml").write_text('[splits]\ntrain = "train*"\neval = "eval*"\n[labels]\nnum_classes = 3\n')
    p = run_cli("clean", str(data), "--out", str(tmp_path / "out"), "--config", str(data.parent / "datacheck.toml"))
    assert p.returncode == 0, p.stderr
    assert "left in place (findings clean did not remove):" in p.stdout
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("  dup.split_overlap [error]"))
    assert "3 left in the copy; --drop dup.split_overlap removes it" in line
    assert "the cleaned copy still FAILS the gate (--fail-on error) on: dup.split_overlap" in p.stdout
    j = run_cli("clean", str(data), "--out", str(tmp_path / "out2"), "--config", str(data.parent / "datacheck.toml"),
                "--format", "json")
    left = json.loads(j.stdout)["result"]["left_in_place"]
    assert [(x["check"], x["count"], x["left"], x["still_fails"]) for x in left] == [("dup.split_overlap", 3, 3, True)]
    # the gate on the copy agrees
    a = run_cli("audit", str(tmp_path / "out"), "--config", str(data.parent / "datacheck.toml"), "--no-cache",
                "--report-dir", str(tmp_path / "rep"))
    assert a.returncode == 1 and "dup.split_overlap" in a.stdout


@pytest.mark.parametrize("spill", [None, "2"])
def test_drop_exact_across_shards_keeps_the_first_copy(tmp_path, monkeypatch, spill):
    if spill is not None:  # row hashes past 2 rows go to disk (in the staging folder, gone afterwards)
        monkeypatch.setenv("DATACHECK_SPILL_ROWS", spill)
    d = tmp_path / "data"
    d.mkdir()
    a = _texts(8, "a")
    a[6] = a[5]  # a repeat within one shard: dup.exact_in_shard, not this check
    b = _texts(6, "b")
    b[0], b[3] = a[0], a[2]
    c = _texts(5, "c")
    c[1], c[2], c[4] = a[1], b[4], b[0]  # b[0] is a[0]: its first copy is in a
    shards = {"a.parquet": a, "b.parquet": b, "c.parquet": c}
    for name, texts in shards.items():
        pl.DataFrame({"text": texts}).write_parquet(d / name)
    seen, want = set(), {}
    for name in sorted(shards):  # plain reference: a row is dropped when an earlier shard has its text
        want[name] = [i for i, t in enumerate(shards[name]) if t in seen]
        seen |= set(shards[name])
    assert want == {"a.parquet": [], "b.parquet": [0, 3], "c.parquet": [1, 2, 4]}
    res = clean([str(d)], tmp_path / "out", config_from_dict({}), drop=["dup.exact_across_shards"])
    for name, rows in want.items():
        assert _quarantined_rows(res.out, name) == rows, name
        assert pl.read_parquet(res.out / name)["text"].to_list() == [t for i, t in enumerate(shards[name]) if i not in rows]
    assert pl.read_parquet(res.out / "a.parquet").height == 8  # the in-shard repeat stays
    assert sorted(p.name for p in res.out.iterdir()) == [".quarantine", "a.parquet", "b.parquet", "c.parquet",
                                                         "index.json"]
    again = datacheck.audit([str(res.out)], config_from_dict({}), workers=1)
    assert not [f for f in again.dataset_findings if f.check == "dup.exact_across_shards"]


def test_drop_dup_shard_drops_the_duplicate_shard(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    for k in (0, 2):
        pl.DataFrame({"text": _texts(4, f"s{k}")}).write_parquet(d / f"train-0000{k}-of-00003.parquet")
    shutil.copyfile(d / "train-00000-of-00003.parquet", d / "train-00001-of-00003.parquet")
    plain = clean([str(d)], tmp_path / "plain", config_from_dict({}))
    assert [(x.check, x.left, x.still_fails) for x in plain.left_in_place] == [
        ("dup.exact_across_shards", 4, False), ("dup.shard", 1, True)]
    res = clean([str(d)], tmp_path / "out", config_from_dict({}), drop=["dup.shard"])
    by = {s.path: s for s in res.shards}
    dup = by["train-00001-of-00003.parquet"]
    assert dup.duplicate_of == "train-00000-of-00003.parquet"
    assert (dup.input_rows, dup.kept, dup.quarantined, dup.dropped) == (4, 0, 4, {"dup.shard": 4})
    assert not (res.out / "train-00001-of-00003.parquet").exists()
    assert _quarantined_rows(res.out, "train-00001-of-00003.parquet") == [0, 1, 2, 3]
    # the kept shards of the complete set 0..2 of 3, in number order, renumbered 0..1 of 2: no gap left
    kept = [p for p in sorted(by) if by[p].duplicate_of is None]
    names = [f"train-{j:05d}-of-{len(kept):05d}.parquet" for j in range(len(kept))]
    assert [by[p].written_as for p in kept] == names
    assert sorted(e["path"] for e in json.loads((res.out / "index.json").read_text())["shards"]) == names
    assert sorted(p.name for p in res.out.glob("*.parquet")) == names
    for p, new in zip(kept, names):  # each kept shard's rows under its new name
        assert pl.read_parquet(res.out / new)["text"].to_list() == pl.read_parquet(d / p)["text"].to_list()
    assert (by["train-00000-of-00003.parquet"].kept, by["train-00002-of-00003.parquet"].kept) == (4, 4)
    assert any("renumbered" in n and "train-00002-of-00003.parquet -> train-00001-of-00002.parquet" in n
               for n in res.notes)
    # the copy has no duplicate shard and no numbering gap: it passes the gate on both
    again = datacheck.audit([str(res.out)], config_from_dict({}), workers=1)
    assert [f.check for f in again.dataset_findings if f.check.startswith("dup.") or f.check.startswith("index.")] == []
    assert [x.check for x in res.left_in_place] == []


def test_a_set_with_an_unreadable_shard_is_not_renumbered(tmp_path):
    """Shard 2 of 0..2 cannot be read (not copied) and 1 repeats 0: renumbering 0 and 2's absence into a
    set of 1 would hide the lost shard; the names stay and the copy's gap is said."""
    d = tmp_path / "data"
    d.mkdir()
    pl.DataFrame({"text": _texts(3, "a")}).write_parquet(d / "train-00000-of-00003.parquet")
    shutil.copyfile(d / "train-00000-of-00003.parquet", d / "train-00001-of-00003.parquet")
    (d / "train-00002-of-00003.parquet").write_bytes(b"PAR1 not a parquet file PAR1")
    res = clean([str(d)], tmp_path / "out", config_from_dict({}), drop=["dup.shard"])
    assert all(s.written_as is None for s in res.shards)
    assert sorted(p.name for p in res.out.glob("*.parquet")) == ["train-00000-of-00003.parquet"]
    (gap,) = [x for x in res.left_in_place if x.check == "index.numbering_gap"]
    assert gap.left == 2 and gap.still_fails


def test_renumbering_keeps_each_set_and_its_digits(tmp_path):
    """Two numbered sets in two folders (train 0..3 of 4 with 1 and 3 copies of 0; eval 0..1 of 2, no
    copy) and an unnumbered shard: only train is renumbered, 0..1 of 2 with the input's 5 digits; the
    CLI's exit is 0 and its JSON names each new path."""
    d = tmp_path / "data"
    (d / "train").mkdir(parents=True)
    (d / "eval").mkdir()
    for k in (0, 2):
        pl.DataFrame({"text": _texts(3, f"t{k}")}).write_parquet(d / "train" / f"train-0000{k}-of-00004.parquet")
    for k in (1, 3):
        shutil.copyfile(d / "train" / "train-00000-of-00004.parquet", d / "train" / f"train-0000{k}-of-00004.parquet")
    for k in (0, 1):
        pl.DataFrame({"text": _texts(3, f"e{k}")}).write_parquet(d / "eval" / f"eval-0000{k}-of-00002.parquet")
    pl.DataFrame({"text": _texts(3, "x")}).write_parquet(d / "extra.parquet")
    p = run_cli("clean", str(d), "--out", str(tmp_path / "out"), "--drop", "dup.shard", "--format", "json")
    assert p.returncode == 0, p.stderr
    shards = {s["path"]: s for s in json.loads(p.stdout)["result"]["shards"]}
    kept_train = ["train/train-00000-of-00004.parquet", "train/train-00002-of-00004.parquet"]
    assert [shards[k]["written_as"] for k in kept_train] == [
        f"train/train-{j:05d}-of-{len(kept_train):05d}.parquet" for j in range(len(kept_train))]
    assert all(s["written_as"] is None for k, s in shards.items() if k not in kept_train)
    out = tmp_path / "out"
    assert sorted(q.relative_to(out).as_posix() for q in out.rglob("*.parquet") if ".quarantine" not in q.parts) == \
        sorted(["eval/eval-00000-of-00002.parquet", "eval/eval-00001-of-00002.parquet", "extra.parquet",
                "train/train-00000-of-00002.parquet", "train/train-00001-of-00002.parquet"])
    gate = run_cli("audit", str(out), "--no-cache", "--no-progress", "--format", "json")
    assert not [f for f in json.loads(gate.stdout)["findings"] if f["check"] == "index.numbering_gap"]


def test_dataset_level_findings_list_their_rows_in_the_report(tmp_path, leak):
    data, train, ev = leak
    rep = datacheck.audit([str(data)], config_from_dict(SPLITS), workers=1)
    f = next(f for f in rep.dataset_findings if f.check == "dup.split_overlap")
    leaked = [i for i, t in enumerate(ev) if t in set(train)]
    assert f.count == len(leaked) and list(f.rows) == leaked
    doc = json.loads(rep.to_json())
    assert next(x for x in doc["findings"] if x["check"] == "dup.split_overlap")["rows"] == leaked
    assert [e["train_row"] for e in f.details["examples"]] == [train.index(ev[i]) for i in leaked]


def test_progress_names_each_shard_as_it_is_audited_then_written(tmp_path, leak):
    data, _train, _ev = leak
    calls: list[tuple[str, int, int]] = []
    clean([str(data)], tmp_path / "out", config_from_dict(SPLITS), progress=lambda *a: calls.append(a))
    assert calls == [("auditing eval.parquet", 0, 4), ("auditing train.parquet", 1, 4),
                     ("writing eval.parquet", 2, 4), ("writing train.parquet", 3, 4),
                     ("writing the data index", 4, 4)]


def test_drop_split_overlap_without_splits_is_refused_and_a_glob_matching_nothing_is_said(tmp_path, leak):
    data, _train, _ev = leak
    # train.parquet and eval.parquet name their splits as the Hub does: [dataset] infer_splits = false
    # leaves the folder without splits
    with pytest.raises(UsageError, match=r"--drop dup.split_overlap .* needs \[splits\]"):
        clean([str(data)], tmp_path / "out", config_from_dict({"dataset": {"infer_splits": False}}),
              drop=["dup.split_overlap"])
    assert not (tmp_path / "out").exists()
    cfg = config_from_dict({"splits": {"train": "train*", "eval": "ev/*"}})  # the eval glob matches nothing
    res = clean([str(data)], tmp_path / "out", cfg, drop=["dup.split_overlap"])
    assert res.quarantined == 0
    assert len(res.notes) == 2
    typo, outside = sorted(res.notes, key=lambda n: "in no [splits] entry" in n)
    assert typo.startswith("dup.split_overlap: [splits] eval = 'ev/*' matches no shard")
    # and the shard no glob matches is named: its rows were compared with no split
    assert outside.startswith("dup.split_overlap: 1 shard(s) are in no [splits] entry") and "eval.parquet" in outside


def test_the_numbering_gap_left_in_place_is_the_copy_s(tmp_path):
    """Shards 0, 1 and 3 of 4 (2 is missing), 1 a byte copy of 0: the input's gap is 1 shard; the copy,
    without the duplicate, misses shards 1 and 2, and the summary quotes the copy's gap."""
    d = tmp_path / "data"
    d.mkdir()
    for k in (0, 3):
        pl.DataFrame({"text": _texts(4, f"s{k}")}).write_parquet(d / f"train-0000{k}-of-00004.parquet")
    shutil.copyfile(d / "train-00000-of-00004.parquet", d / "train-00001-of-00004.parquet")
    res = clean([str(d)], tmp_path / "out", config_from_dict({}), drop=["dup.shard"])
    copied = sorted(p.name for p in res.out.glob("*.parquet"))
    missing = sorted(set(range(4)) - {int(n.split("-")[1]) for n in copied})
    assert missing == [1, 2]
    (gap,) = [x for x in res.left_in_place if x.check == "index.numbering_gap"]
    assert gap.count == 1 and gap.left == len(missing)
    assert f"{len(missing)} of 4 shard(s) missing" in gap.message
    assert all(f"train-0000{k}-of-00004.parquet" in gap.message for k in missing)
    again = datacheck.audit([str(res.out)], config_from_dict({}), workers=1)
    assert [f.count for f in again.dataset_findings if f.check == "index.numbering_gap"] == [len(missing)]


def test_a_shard_emptied_by_the_drop_is_said(tmp_path):
    """b.parquet's 2 rows both repeat a.parquet's rows: --drop dup.exact_across_shards leaves it with 0 rows,
    which the copy's audit flags as index.empty_shard; the summary says so."""
    d = tmp_path / "data"
    d.mkdir()
    a = _texts(3, "a")
    pl.DataFrame({"text": a}).write_parquet(d / "a.parquet")
    pl.DataFrame({"text": [a[2], a[0]]}).write_parquet(d / "b.parquet")
    res = clean([str(d)], tmp_path / "out", config_from_dict({}), drop=["dup.exact_across_shards"])
    assert {s.path: s.kept for s in res.shards} == {"a.parquet": 3, "b.parquet": 0}
    (empty,) = [x for x in res.left_in_place if x.check == "index.empty_shard"]
    assert empty.left == 1 and "b.parquet" in empty.message
    again = datacheck.audit([str(res.out)], config_from_dict({}), workers=1)
    assert [f.check for s in again.shards for f in s.findings if f.check == "index.empty_shard"] == ["index.empty_shard"]
    r = run_cli("clean", str(d), "--out", str(tmp_path / "out2"), "--drop", "dup.exact_across_shards")
    assert "index.empty_shard" in r.stdout and "b.parquet" in r.stdout


def test_a_dropped_check_that_cannot_run_is_said(tmp_path):
    """tokens.out_of_vocab needs [tokens] vocab_size: without it nothing can be dropped for it, and the
    summary says so instead of a silent clean copy."""
    d = tmp_path / "data"
    d.mkdir()
    pl.DataFrame({"input_ids": [[1, 2, 3], [4, 5, 999]]}).write_parquet(d / "a.parquet")
    res = clean([str(d)], tmp_path / "out", config_from_dict({}), drop=["tokens.out_of_vocab"])
    assert res.quarantined == 0
    (note,) = [n for n in res.notes if n.startswith("tokens.out_of_vocab could not run:")]
    assert "vocab_size" in note and note.endswith("nothing dropped for it")
    r = run_cli("clean", str(d), "--out", str(tmp_path / "out2"), "--drop", "tokens.out_of_vocab")
    assert "note: tokens.out_of_vocab could not run:" in r.stdout


def test_each_eval_splits_leak_left_in_place_counts_its_own_rows(tmp_path):
    """Two eval splits leak into train: each dup.split_overlap finding is one split's, so each says how
    many of ITS rows the copy keeps (before: both said the two splits' total), and the gate line names
    the check once."""
    d = tmp_path / "data"
    d.mkdir()
    train = _texts(10, "train")
    dev, test = _texts(5, "dev"), _texts(4, "test")
    dev[0], dev[2] = train[1], train[3]
    test[1] = train[8]
    for name, texts in (("train", train), ("dev", dev), ("test", test)):
        pl.DataFrame({"text": texts}).write_parquet(d / f"{name}.parquet")
    cfg = {"splits": {"train": "train*", "dev": "dev*", "test": "test*"}}
    want = {f"{n}.parquet": sum(t in train for t in texts) for n, texts in (("dev", dev), ("test", test))}
    assert want == {"dev.parquet": 2, "test.parquet": 1}
    res = clean([str(d)], tmp_path / "out", config_from_dict(cfg), drop=["empty.text"])
    got = {x.message.split(" row(s)")[0]: x.left for x in res.left_in_place if x.check == "dup.split_overlap"}
    assert got == {str(n): n for n in want.values()}
    (tmp_path / "datacheck.toml").write_text('[splits]\ntrain = "train*"\ndev = "dev*"\ntest = "test*"\n')
    p = run_cli("clean", str(d), "--out", str(tmp_path / "out2"), "--config", str(tmp_path / "datacheck.toml"))
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("  dup.split_overlap [error]")]
    assert sorted(int(ln.split("(")[-1].split(" left")[0]) for ln in lines) == sorted(want.values())
    assert "the cleaned copy still FAILS the gate (--fail-on error) on: dup.split_overlap\n" in p.stdout


def test_the_default_drop_names_the_checks_it_could_not_run_in_one_note(tmp_path):
    """A text dataset has no token columns: the default drop's token, mask and padding checks do not
    apply to its rows (text-only text_classification) and are not named; the checks that apply but
    cannot run (no num_classes, no schema) are named in one note; no per-check hint to set [columns]."""
    d = tmp_path / "data"
    d.mkdir()
    pl.DataFrame({"text": ["a", "b", "a"], "label": [0, 1, 0]}).write_parquet(d / "a.parquet")
    res = clean([str(d)], tmp_path / "out", config_from_dict({}))
    (note,) = res.notes
    assert "of the default checks could not run on this data" in note
    for cid in ("tokens.out_of_vocab", "mask.non_binary", "padding.pad_attended"):  # need input_ids / a mask
        assert cid not in note
    assert "labels.out_of_range" in note  # applies; [labels] num_classes is unset
    assert "set [columns]" not in note
    r = run_cli("clean", str(d), "--out", str(tmp_path / "out2"))
    assert r.returncode == 0 and [ln for ln in r.stdout.splitlines() if ln.startswith("note:")] == [f"note: {note}"]
