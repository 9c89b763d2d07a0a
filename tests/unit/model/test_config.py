"""Config: validated before any shard is read; unknown keys, wrong types, bad TOML and a missing
file are a usage error (exit 2) whose message names the key."""
from __future__ import annotations

import hashlib
import json

import polars as pl
import pytest
from conftest import run_cli

from datacheck.cli.main import main
from datacheck.model.config import config_from_dict, load_config
from datacheck.model.errors import ConfigError


@pytest.fixture
def shard(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    pl.DataFrame({"text": ["a"], "label": [0]}).write_parquet(d / "s.parquet")
    return d


@pytest.mark.parametrize(
    "toml, key, words",
    [
        ("[tokens]\nvocab_sise = 5\n", "tokens.vocab_sise", ["unknown key", "[tokens]"]),
        ("[tokenz]\nvocab_size = 5\n", "tokenz", ["unknown key", "top level"]),
        ("[tokens]\nvocab_size = \"50257\"\n", "tokens.vocab_size", ["'50257'"]),
        ("[tokens]\nvocab_size = 0\n", "tokens.vocab_size", ["greater than 0"]),
        ("[tokens]\npadding_side = \"middle\"\n", "tokens.padding_side", ["'middle'"]),
        ("[labels]\nnum_classes = 2.5\n", "labels.num_classes", ["2.5"]),
        ("[labels]\nignore_index = \"x\"\n", "labels.ignore_index", ["'x'"]),
        ("[columns]\ntext = 5\n", "columns.text", ["5"]),
        ("[dataset]\nseparator = \";;\"\n", "dataset.separator", ["one character"]),
        ("[dataset]\nheader = \"yes\"\n", "dataset.header", ["'yes'"]),
        ("[dataset]\nformat = \"xlsx\"\n", "dataset.format", ["'xlsx'"]),
        ("[numeric]\ncompute_dtype = \"fp8\"\n", "numeric.compute_dtype", ["'fp8'"]),
        ("[policy]\n\"dup.exact_in_shrad\" = { severity = \"warn\" }\n", "policy", ["'dup.exact_in_shrad'", "did you mean"]),
        ("[policy]\n\"dup.exact_in_shard\" = { max_ratio = 2 }\n", "policy.dup.exact_in_shard.max_ratio", []),
        ("[policy]\n\"dup.exact_in_shard\" = { severty = \"warn\" }\n", "policy.dup.exact_in_shard.severty",
         ["unknown key"]),
        ("[columns]\naligned = [\"tokens\", \"ner_tags\"]\n", "columns.aligned.0", ["valid list"]),
        ("splits = \"train/*\"\n", "splits", ["valid dictionary"]),
    ],
)
def test_bad_key_exits_2_naming_it_before_reading_shards(tmp_path, shard, capsys, toml, key, words):
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(toml)
    reports = tmp_path / "reports"
    # the PATH does not exist: the config error must come first (in-process CLI, for speed)
    rc = main(["audit", str(tmp_path / "no-such-folder"), "--config", str(cfg), "--report-dir", str(reports)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert f"'{key}'" in err
    assert "no-such-folder" not in err
    for w in words:
        assert w in err
    # with a real shard folder nothing is read or written either
    rc = main(["audit", str(shard), "--config", str(cfg), "--report-dir", str(reports)])
    assert rc == 2 and not reports.exists()


def test_bad_key_subprocess_exit_code_and_no_traceback(tmp_path, shard):
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text("[tokens]\nvocab_sise = 5\n")
    p = run_cli("audit", str(shard), "--config", str(cfg), "--report-dir", str(tmp_path / "r"))
    assert p.returncode == 2
    assert "unknown key 'tokens.vocab_sise' in [tokens]: remove it or fix its spelling" in p.stderr
    assert "Traceback" not in p.stderr and p.stdout == ""


def test_bad_toml_exits_2(tmp_path, shard):
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text("[tokens\nvocab_size = 5\n")
    p = run_cli("audit", str(shard), "--config", str(cfg), "--report-dir", str(tmp_path / "r"))
    assert p.returncode == 2
    assert "not valid TOML" in p.stderr and str(cfg) in p.stderr


def test_an_integer_past_pythons_digit_limit_exits_2(tmp_path, shard):
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text("[tokens]\nvocab_size = " + "9" * 5000 + "\n")  # tomllib's int() refuses > 4,300 digits
    p = run_cli("audit", str(shard), "--config", str(cfg), "--report-dir", str(tmp_path / "r"))
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "not a usable TOML file" in p.stderr and "4300 digits" in p.stderr and str(cfg) in p.stderr
    assert "Traceback" not in p.stderr


def test_missing_config_file_exits_2(tmp_path, shard):
    p = run_cli("audit", str(shard), "--config", str(tmp_path / "nope.toml"), "--report-dir", str(tmp_path / "r"))
    assert p.returncode == 2
    assert "config file not found" in p.stderr and "nope.toml" in p.stderr
    assert "Traceback" not in p.stderr


def test_default_config_is_read_from_cwd(tmp_path, shard, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "datacheck.toml").write_text("[labels]\nnum_classes = 1\n")
    assert main(["audit", str(shard), "--format", "json", "--report-dir", str(tmp_path / "r")]) == 0
    assert '"labels.unseen_class"' not in capsys.readouterr().out
    (tmp_path / "datacheck.toml").write_text("[labels]\nnum_classes = 3\n")
    main(["audit", str(shard), "--format", "json", "--report-dir", str(tmp_path / "r")])
    assert '"labels.unseen_class"' in capsys.readouterr().out


def test_full_design_config_loads(tmp_path):
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text('''
[dataset]
format = "auto"
index = "index.json"
separator = ","
header = true
names = ["label", "text"]
quote_char = '"'
[columns]
text = ["text"]
label = "label"
target = ["y"]
features = ["x1", "x2"]
input_ids = "input_ids"
attention_mask = "attention_mask"
labels = "labels"
aligned = [["tokens", "ner_tags"]]
[tokens]
vocab_size = 50257
pad_token_id = 50256
eos_token_id = 50256
max_seq_len = 1024
padding_side = "right"
truncation_side = "right"
[labels]
num_classes = 2
ignore_index = -100
[numeric]
compute_dtype = "fp32"
[splits]
train = "train/*"
test = "test/*"
[policy]
"dup.exact_in_shard" = { severity = "error", max_ratio = 0.01 }
''')
    c = load_config(cfg)
    assert c.tokens.vocab_size == 50257 and c.labels.ignore == -100
    assert c.policy["dup.exact_in_shard"].max_ratio == 0.01
    assert c.hash() == load_config(cfg).hash()


def test_classes_and_ignore_index_false():
    c = config_from_dict({"labels": {"classes": ["NOT", "OFF"], "ignore_index": False}})
    assert c.labels.classes == ["NOT", "OFF"] and c.labels.ignore is None
    with pytest.raises(ConfigError, match="distinct"):
        config_from_dict({"labels": {"classes": ["a", "a"]}})


def test_api_config_error_names_key():
    with pytest.raises(ConfigError) as e:
        config_from_dict({"tokens": {"vocab_size": "x"}})
    assert e.value.key == "tokens.vocab_size"


def test_config_hash_changes_with_a_value():
    assert config_from_dict({}).hash() != config_from_dict({"tokens": {"vocab_size": 5}}).hash()


def test_padding_side_unset_is_not_the_same_audit_as_right():
    """Unset, each shard's padding side is recognized from its rows; "right" holds every shard to the
    right: two audits that can disagree on a left-padded shard must not share a config_hash (the
    per-shard cache is keyed by it). A config that writes "right" keeps the hash it had."""
    unset, right, left = (config_from_dict(d).hash() for d in
                          ({}, {"tokens": {"padding_side": "right"}}, {"tokens": {"padding_side": "left"}}))
    assert len({unset, right, left}) == 3
    doc = config_from_dict({"tokens": {"padding_side": "right"}}).model_dump(mode="json", by_alias=True,
                                                                          exclude={"trace", "megatron", "pref"})
    for key in ("loader", "even_batches", "split_batches", "sampler", "persistent_workers"):
        del doc["batch"][key]
    for key in ("max_member_bytes", "max_record_bytes", "max_file_bytes", "max_row_bytes", "infer_splits", "sample_by"):
        del doc["dataset"][key]
    del doc["labels"]["tag_classes"]  # added later: out of the hash while unset
    assert right == "sha256:" + hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def test_sample_by_is_hf_s_option_and_enters_the_hash_when_set():
    """[dataset] sample_by: datasets' text builder's option (line, paragraph, document; default line);
    unset and "line" are one audit (one config_hash), the others change the rows of a .txt shard."""
    assert config_from_dict({}).dataset.sample_by == "line"
    hashes = {config_from_dict({"dataset": {"sample_by": m}} if m else {}).hash()
              for m in (None, "line", "paragraph", "document")}
    assert len(hashes) == 3  # unset and "line" are one audit
    with pytest.raises(ConfigError, match="sample_by"):
        config_from_dict({"dataset": {"sample_by": "sentence"}})


def test_pref_section_mirrors_the_trainers_and_keeps_the_hash_at_its_default():
    """[pref] (added later): at its default a config keeps the hash it had (the doc without the
    section); a key set changes it (the rendered pairs are cut otherwise); TRL's prompt and
    completion cuts are refused beside LLaMA-Factory's infer_seqlen, naming the keys."""
    base = config_from_dict({"tokens": {"max_seq_len": 1024}})
    doc = base.model_dump(mode="json", by_alias=True, exclude={"trace", "megatron", "pref"})
    for key in ("loader", "even_batches", "split_batches", "sampler", "persistent_workers"):
        del doc["batch"][key]
    for key in ("max_member_bytes", "max_record_bytes", "max_file_bytes", "max_row_bytes", "infer_splits", "sample_by"):
        del doc["dataset"][key]
    del doc["tokens"]["padding_side"]
    del doc["labels"]["tag_classes"]  # added later: out of the hash while unset
    assert base.hash() == "sha256:" + hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert config_from_dict({"tokens": {"max_seq_len": 1024}, "pref": {"trainer": "trl"}}).hash() == base.hash()
    for pref in ({"trainer": "llamafactory"}, {"max_prompt_length": 512}, {"max_completion_length": 256}):
        assert config_from_dict({"tokens": {"max_seq_len": 1024}, "pref": pref}).hash() != base.hash()
    with pytest.raises(ConfigError, match="max_prompt_length: TRL's DPOConfig keys"):
        config_from_dict({"pref": {"trainer": "llamafactory", "max_prompt_length": 512}})
    with pytest.raises(ConfigError):
        config_from_dict({"pref": {"trainer": "axolotl"}})


def test_tag_classes_enter_the_hash_only_when_set():
    """[labels] tag_classes (added later): unset, a config keeps the hash it had; set, the hash
    changes with the names (they bound the tag columns: another audit)."""
    base = config_from_dict({})
    assert "tag_classes" in base.model_dump(mode="json")["labels"]
    one = config_from_dict({"labels": {"tag_classes": {"pos_tags": ["NN", "VB"]}}})
    two = config_from_dict({"labels": {"tag_classes": {"pos_tags": ["NN", "VB", "JJ"]}}})
    assert len({base.hash(), one.hash(), two.hash()}) == 3
    assert config_from_dict({"labels": {"tag_classes": None}}).hash() == base.hash()
