"""``datacheck inspect --format json`` lists, per shard, the checks that do not apply to its rows
(``not_applicable``: check IDs, not run and not skipped), as its text output says of each ``--check``
and as the audit report counts them (its shard's ``not_applicable``): the same checks, by one decision
(the registry's plan of the shard). It was missing from the JSON.

Material: real shards of ../shared (realdata/PROVENANCE.md, chat/PROVENANCE.md): SST-2 (Vietnamese)
validation parquet (text and a class label), HH-RLHF harmless-base pairs (preference text)."""
from __future__ import annotations

import json

import pytest
from conftest import REALDATA, SHARED, run_cli

import datacheck.checks.all  # noqa: F401 - registers every family
from datacheck.checks.registry import CHECKS

SST2 = REALDATA / "sst2_vi_glue_parquet" / "validation-00000-of-00001.parquet"
HH = SHARED / "chat" / "hh_rlhf" / "harmless-base_test.jsonl.gz"


def _audit_count(path, cfg, tmp_path) -> tuple[str, int]:
    out = tmp_path / "report.json"
    r = run_cli("audit", str(path), "--config", str(cfg), "--no-cache", "--no-progress", "--fail-on", "never",
                "--report-dir", str(tmp_path / "reports"), "--output", str(out))
    assert r.returncode == 0, r.stderr
    (shard,) = json.loads(out.read_text(encoding="utf-8"))["shards"]
    return shard["layout"], shard["not_applicable"]


def _inspect(path, cfg, *extra) -> dict:
    r = run_cli("inspect", str(path), "--config", str(cfg), "--format", "json", *extra)
    assert r.returncode in (0, 1), r.stderr
    (shard,) = json.loads(r.stdout)["result"]["shards"]
    return shard


@pytest.mark.realdata
@pytest.mark.parametrize("path, never", [(SST2, "tokens.out_of_vocab"), (HH, "labels.out_of_range")],
                         ids=["text_classification", "dpo"])
def test_inspect_json_lists_the_checks_that_do_not_apply(path, never, tmp_path):
    if not path.is_file():
        pytest.skip(f"{path} is not present")
    cfg = tmp_path / "empty.toml"
    cfg.write_text("", encoding="utf-8")
    layout, count = _audit_count(path, cfg, tmp_path)
    shard = _inspect(path, cfg)
    na = shard["not_applicable"]
    assert shard["layout"]["name"] == layout and count > 0
    assert len(na) == len(set(na)) == count  # the audit's count, of distinct checks
    assert all(CHECKS[c].shard is not None for c in na)  # shard-stage checks, as the audit counts them
    # these rows hold text, no token ids (text classification) and no label (preference pairs)
    assert never in na
    assert not set(na) & {s["check"] for s in shard["skipped"]}  # not applicable is not skipped


@pytest.mark.realdata
def test_with_check_the_json_names_what_the_text_says(tmp_path):
    if not SST2.is_file():
        pytest.skip(f"{SST2} is not present")
    cfg = tmp_path / "empty.toml"
    cfg.write_text("", encoding="utf-8")
    asked = "empty.text,tokens.out_of_vocab,content.periodic_tokens"
    text = run_cli("inspect", str(SST2), "--config", str(cfg), "--check", asked)
    said = {ln.split()[0] for ln in text.stdout.splitlines() if "does not apply to this shard's rows" in ln}
    assert said == {"tokens.out_of_vocab", "content.periodic_tokens"}
    assert set(_inspect(SST2, cfg, "--check", asked)["not_applicable"]) == said
