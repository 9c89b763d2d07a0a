"""One config lookup for every verb and entry point, climbing from the data's
folder to the first folder holding ``datacheck.toml`` (bounded: 8 folders, a repository root, never
the user's home); relative paths in the config resolve against the config file's folder; outputs
(``inspect --export``, ``--report-dir``, ``--cache-dir``) are refused inside the audited data."""
from __future__ import annotations

import json
import os

import polars as pl
import pytest
from conftest import run_cli

import datacheck
from datacheck.execute.setup import MAX_CONFIG_LEVELS, resolve_config_path
from datacheck.model.config import load_config

CFG = "[labels]\nnum_classes = 2\n"


@pytest.fixture
def proj(tmp_path, monkeypatch):
    """tmp/work: the working folder (no config); tmp/proj/datacheck.toml above tmp/proj/data/{train,test}."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    work = tmp_path / "work"
    work.mkdir()
    p = tmp_path / "proj"
    for split in ("train", "test"):
        (p / "data" / split).mkdir(parents=True)
    pl.DataFrame({"text": ["a", "b", "c"], "label": [0, 1, 5]}).write_parquet(p / "data" / "train" / "s.parquet")
    pl.DataFrame({"text": ["d"], "label": [0]}).write_parquet(p / "data" / "test" / "s.parquet")
    (p / "datacheck.toml").write_text(CFG)
    return work, p


def test_lookup_climbs_to_the_first_config(proj, monkeypatch):
    work, p = proj
    monkeypatch.chdir(work)
    want = str(p / "datacheck.toml")
    train = p / "data" / "train"
    assert resolve_config_path(None, [str(train / "s.parquet")]) == want  # a file two levels below
    assert resolve_config_path(None, [str(train)]) == want  # a folder
    assert resolve_config_path(None, [str(train / "*.parquet")]) == want  # a glob
    assert resolve_config_path(None, [str(train), str(p / "data" / "test")]) == want  # sibling folders
    (p / "data" / "datacheck.toml").write_text("")
    assert resolve_config_path(None, [str(train)]) == str(p / "data" / "datacheck.toml")  # the nearest wins
    monkeypatch.chdir(p / "data")
    assert resolve_config_path(None, ["train/s.parquet"]) == "datacheck.toml"  # ./datacheck.toml first


def test_lookup_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    # a repository root is checked, then the climb stops
    (tmp_path / "outer" / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "outer" / "repo" / "d").mkdir()
    (tmp_path / "outer" / "datacheck.toml").write_text(CFG)
    assert resolve_config_path(None, [str(tmp_path / "outer" / "repo" / "d")]) is None
    (tmp_path / "outer" / "repo" / "datacheck.toml").write_text(CFG)
    assert resolve_config_path(None, [str(tmp_path / "outer" / "repo" / "d")]) == str(
        tmp_path / "outer" / "repo" / "datacheck.toml")
    # never the user's home (a ~/datacheck.toml would apply to every dataset of the user)
    (tmp_path / "home" / "ds").mkdir(parents=True)
    (tmp_path / "home" / "datacheck.toml").write_text(CFG)
    assert resolve_config_path(None, [str(tmp_path / "home" / "ds")]) is None
    # at most MAX_CONFIG_LEVELS folders
    deep = tmp_path / "deep"
    (deep / "datacheck.toml").parent.mkdir()
    (deep / "datacheck.toml").write_text(CFG)
    below = deep.joinpath(*["x"] * (MAX_CONFIG_LEVELS - 1))
    below.mkdir(parents=True)
    assert resolve_config_path(None, [str(below)]) == str(deep / "datacheck.toml")
    (below / "y").mkdir()
    assert resolve_config_path(None, [str(below / "y")]) is None


def _json(p) -> dict:
    assert p.returncode in (0, 1), p.stderr
    return json.loads(p.stdout)


def test_every_verb_uses_the_config_above_the_shard(proj, tmp_path):
    work, p = proj
    shard = str(p / "data" / "train" / "s.parquet")
    want = str(p / "datacheck.toml")
    # audit: a file, a folder, a glob
    for path in (shard, str(p / "data" / "train"), str(p / "data" / "train" / "*.parquet")):
        doc = _json(run_cli("audit", path, "--format", "json", "--no-cache", "--no-progress",
                            "--report-dir", str(tmp_path / "r"), cwd=work))
        assert doc["config_path"] == want
        assert "labels.out_of_range" in {f["check"] for s in doc["shards"] for f in s["findings"]}
    # inspect: before the fix "no failing rows"
    r = run_cli("inspect", shard, cwd=work)
    assert f"config: {want}" in r.stderr and "labels.out_of_range:label: 1 row(s); first: 2" in r.stdout
    assert r.returncode == 1
    # clean drops the row only the config makes bad
    doc = _json(run_cli("clean", shard, "--out", str(tmp_path / "clean"), "--drop", "labels.out_of_range",
                        "--format", "json", cwd=work))
    assert doc["result"]["shards"][0]["dropped"] == {"labels.out_of_range": 1}
    # index build and schema infer say which config they used
    r = run_cli("index", "build", shard, "-o", str(tmp_path / "idx.json"), cwd=work)
    assert f"config: {want}" in r.stdout + r.stderr, r.stderr
    r = run_cli("schema", "infer", shard, cwd=work)
    assert f"config: {want}" in r.stderr, r.stderr
    # plan reads the config too (its [batch] section is what it needs)
    r = run_cli("plan", shard, cwd=work)
    assert r.returncode == 2 and "[batch] batch_size is not set" in r.stderr
    (p / "datacheck.toml").write_text(CFG + "[batch]\nbatch_size = 2\n")
    r = run_cli("plan", shard, "--format", "json", cwd=work)
    assert r.returncode == 0, r.stderr
    # the Python API
    cwd = os.getcwd()
    try:
        os.chdir(work)
        rep = datacheck.audit(shard, fail_on="never")
    finally:
        os.chdir(cwd)
    assert rep.config_path == str(p / "datacheck.toml")
    assert "labels.out_of_range" in {f.check for f in rep.findings}


def test_relative_paths_resolve_against_the_config_folder(proj, tmp_path):
    work, p = proj
    train = str(p / "data" / "train")
    assert run_cli("index", "build", train, "-o", str(p / "meta" / "idx.json"), cwd=work).returncode == 0
    r = run_cli("schema", "infer", train, "-o", str(p / "meta" / "contract.yaml"), cwd=work)
    assert r.returncode == 0, r.stderr
    (p / "datacheck.toml").write_text(CFG + '[dataset]\nindex = "meta/idx.json"\nschema = "meta/contract.yaml"\n')
    doc = _json(run_cli("audit", train, "--format", "json", "--no-cache", "--no-progress",
                        "--report-dir", str(tmp_path / "r"), cwd=work))
    skipped = {s["check"]: s["reason"] for s in doc["skipped"]}
    assert "schema.dtype" not in skipped  # the contract was loaded from proj/meta/, not the working folder
    assert not [f for f in doc["findings"] if f["check"].startswith("index.")]  # the index was read
    cfg = load_config(p / "datacheck.toml")
    assert cfg.index_file() == str(p / "meta" / "idx.json")
    assert cfg.schema_spec() == str(p / "meta" / "contract.yaml")
    assert cfg.with_schema("seq2seq").schema_spec() == "seq2seq"  # a layout name is not a path
    assert load_config(p / "datacheck.toml").hash() == cfg.hash()  # the folder is not part of the hash


def test_found_config_still_may_not_run_python(proj, tmp_path):
    work, p = proj
    (p / "m.py").write_text("raise SystemExit('must not run')\n")
    (p / "datacheck.toml").write_text('[dataset]\nschema = "m.py:Model"\n')
    r = run_cli("audit", str(p / "data" / "train" / "s.parquet"), "--no-cache", "--no-progress",
                "--report-dir", str(tmp_path / "r"), cwd=work)
    assert r.returncode == 2 and "Python schema files execute code" in r.stderr


def test_outputs_inside_the_data_are_refused(proj, tmp_path):
    work, p = proj
    train = p / "data" / "train"
    shard = str(train / "s.parquet")
    for args in (("inspect", shard, "--export", str(train / "rows.jsonl")),
                 ("inspect", str(train), "--export", str(train / "rows.jsonl")),
                 ("audit", shard, "--no-cache", "--report-dir", str(train / "reports")),
                 ("audit", str(train), "--no-cache", "--report-dir", str(train / "reports")),
                 ("audit", shard, "--cache-dir", str(train / "cache"), "--report-dir", str(tmp_path / "r"))):
        r = run_cli(*args, "--no-progress", cwd=work)
        assert r.returncode == 2, (args, r.stderr)
        assert "datacheck does not write among the data it audits" in r.stderr
    assert sorted(x.name for x in train.iterdir()) == ["s.parquet"]
    # below a hidden folder there is fine (discovery never reads it)
    r = run_cli("audit", shard, "--no-cache", "--no-progress", "--report-dir", str(train / ".datacheck"), cwd=work)
    assert r.returncode == 1, r.stderr


def test_tokenizer_path_resolves_against_the_config_folder(tmp_path, monkeypatch):
    """`[tokens] tokenizer` is a path written in the config: relative to the config file's folder."""
    from datacheck.model.config import load_config

    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "datacheck.toml").write_text('[tokens]\ntokenizer = "tok"\n')
    monkeypatch.chdir(tmp_path)
    cfg = load_config(tmp_path / "proj" / "datacheck.toml")
    assert cfg.tokenizer_path() == str((tmp_path / "proj" / "tok").absolute())
    (tmp_path / "proj" / "datacheck.toml").write_text(f'[tokens]\ntokenizer = "{tmp_path / "abs"}"\n')
    assert load_config(tmp_path / "proj" / "datacheck.toml").tokenizer_path() == str(tmp_path / "abs")


@pytest.mark.parametrize("verb", [("audit",), ("inspect",), ("clean",), ("index", "build"), ("schema", "infer")])
def test_every_verbs_help_states_the_lookup_it_runs(verb):
    """Each verb above finds a config two folders up (the test before); its --help says so, with the
    bound of the climb, and none says the config must sit in PATH itself (``clean`` said
    "PATH/datacheck.toml when PATH is one folder")."""
    r = run_cli(*verb, "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    assert f"or in one of its parents: at most {MAX_CONFIG_LEVELS} folders" in text, text
    assert "PATH/datacheck.toml" not in text and "else in its parent)" not in text
