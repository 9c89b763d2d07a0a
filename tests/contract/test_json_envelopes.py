"""Every ``--format json`` output except the report itself (audit, merge, report) is ONE versioned
envelope built by :func:`datacheck.cli.envelope.envelope`: the keys of the envelope and of each
verb's ``result`` are pinned here, and each output validates against ``schemas/envelope.schema.json``."""
from __future__ import annotations

import contextlib
import gzip
import io
import json
from types import SimpleNamespace

import jsonschema
import polars as pl
import pytest
from conftest import ROOT

from datacheck import __version__
from datacheck.cli.envelope import ENVELOPE_FORMAT_VERSION, KINDS, envelope
from datacheck.cli.main import main
from datacheck.io.ledger import LEDGER_HEADER

SCHEMA = json.loads((ROOT / "schemas" / "envelope.schema.json").read_text(encoding="utf-8"))
ENVELOPE_KEYS = {"kind", "format_version", "datacheck_version", "result"}
RESULT_KEYS = {
    "datacheck.diff": {"config_changed", "findings", "new_index_hash", "new_policy_failures", "old_index_hash",
                       "shards", "stats_moved"},
    "datacheck.inspect": {"shards", "tokenizer", "export"},
    "datacheck.clean": {"bad_records", "bad_records_quarantined", "drop", "index", "index_hash", "input_rows", "kept",
                        "left_in_place", "metadata", "notes", "out", "quarantine", "quarantined", "shards"},
    "datacheck.index.verify": {"index", "passed", "config_path", "rows_not_compared", "rows_from", "findings"},
    "datacheck.plan": {"config", "plan", "ledger", "step"},
    "datacheck.trace": {"convention", "curves", "data", "events", "findings", "first_bad", "logs", "not_run", "notes",
                        "passed", "streams", "verdict"},
    "datacheck.checks": {"checks"},
    "datacheck.checkpoint": {"files", "findings", "layout", "notes", "passed", "path", "pieces", "ranks", "root",
                             "step", "steps", "world_size"},
    "datacheck.order.verify": {"divergence", "findings", "first_divergent_step", "ledger", "never_seen", "notes",
                               "passed", "plan", "rank_skew", "seen_twice", "segments"},
}
#: the keys of each entry of ``datacheck checks --format json`` (``result.checks[*]``)
CHECK_ENTRY_KEYS = {"id", "family", "level", "severity", "summary", "built", "producer", "roles", "facts", "note",
                    "description", "layouts"}


def cli(*args: str, monkeypatch=None) -> SimpleNamespace:
    """``datacheck ARGS`` in this process: exit code and captured stdout/stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    return SimpleNamespace(returncode=rc, stdout=out.getvalue(), stderr=err.getvalue())


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    pl.DataFrame({"text": ["a", "", "c"], "label": [0, 1, 1]}).write_parquet(d / "s0.parquet")
    pl.DataFrame({"text": ["d", "e"], "label": [1, 0]}).write_parquet(d / "s1.parquet")
    return d


def _run(monkeypatch, *args):
    r = cli(*args, monkeypatch=monkeypatch)
    assert "Traceback" not in r.stderr, r.stderr
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert set(doc) == ENVELOPE_KEYS
    assert doc["format_version"] == ENVELOPE_FORMAT_VERSION == 1
    assert doc["datacheck_version"] == __version__
    return r.returncode, doc


def _outputs(data, tmp_path, monkeypatch):
    """(kind, exit code, envelope) of each enveloped verb over ``data``."""
    rep = tmp_path / "rep"
    a = cli("audit", str(data), "--no-cache", "--report-dir", str(rep), "-o", str(tmp_path / "a.json"),
            monkeypatch=monkeypatch)
    assert a.returncode == 1, a.stderr
    out = [("datacheck.diff", *_run(monkeypatch, "diff", str(tmp_path / "a.json"), str(tmp_path / "a.json"),
                                    "--format", "json"))]
    out.append(("datacheck.inspect", *_run(monkeypatch, "inspect", str(data / "s0.parquet"), "--format", "json")))
    out.append(("datacheck.clean", *_run(monkeypatch, "clean", str(data), "--out", str(tmp_path / "clean"),
                                         "--format", "json")))
    b = cli("index", "build", str(data), "-o", str(tmp_path / "idx.json"), monkeypatch=monkeypatch)
    assert b.returncode == 0, b.stderr
    out.append(("datacheck.index.verify", *_run(monkeypatch, "index", "verify", str(data), "--index",
                                                str(tmp_path / "idx.json"), "--format", "json")))
    pytest.importorskip("torch")
    (tmp_path / "batch.toml").write_text("[batch]\nbatch_size = 2\nshuffle = false\n")
    out.append(("datacheck.plan", *_run(monkeypatch, "plan", str(data), "--config", str(tmp_path / "batch.toml"),
                                        "--step", "0", "--format", "json")))
    log = tmp_path / "train.log"
    log.write_text("step=1 loss=2.0\nstep=2 loss=nan\n", encoding="utf-8")
    out.append(("datacheck.trace", *_run(monkeypatch, "trace", str(log), "--format", "json")))
    out.append(("datacheck.checks", *_run(monkeypatch, "checks", "tokens.out_of_vocab", "--format", "json")))
    import torch

    torch.save({"model": torch.nn.Linear(2, 1).state_dict(), "step": 0}, tmp_path / "ck.pt")
    out.append(("datacheck.checkpoint", *_run(monkeypatch, "checkpoint", str(tmp_path / "ck.pt"), "--format", "json")))
    ledger = tmp_path / "run" / "data-indices" / "rank0.tsv.gz"
    ledger.parent.mkdir(parents=True)
    lines = [LEDGER_HEADER, '#state\t{"epoch": 0, "start_step": 0}', "0\t0\t0\t0\t0\t1", "1\t0\t0\t0\t2\t3",
             "2\t0\t0\t0\t4"]  # the plan of batch_size 2 without shuffling over the 5 rows
    ledger.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    out.append(("datacheck.order.verify", *_run(monkeypatch, "order", "verify", str(tmp_path / "run"), "--data",
                                                str(data), "--config", str(tmp_path / "batch.toml"), "--format",
                                                "json")))
    return out


def test_every_enveloped_verb(data, tmp_path, monkeypatch):
    outs = _outputs(data, tmp_path, monkeypatch)
    assert [k for k, _, _ in outs] == list(KINDS)
    for kind, rc, doc in outs:
        assert doc["kind"] == kind
        assert set(doc["result"]) == RESULT_KEYS[kind], kind
    by = {k: (rc, doc["result"]) for k, rc, doc in outs}
    rc, diff = by["datacheck.diff"]
    assert rc == 0 and diff["new_policy_failures"] == [] and diff["config_changed"] is False
    rc, ins = by["datacheck.inspect"]
    assert rc == 1 and [s["path"] for s in ins["shards"]] == ["s0.parquet"]
    rc, cl = by["datacheck.clean"]
    assert rc == 0 and (cl["input_rows"], cl["kept"], cl["quarantined"]) == (5, 4, 1)
    rc, ver = by["datacheck.index.verify"]
    assert rc == 0 and ver["passed"] is True and ver["findings"] == [] and ver["rows_not_compared"] == []
    rc, plan = by["datacheck.plan"]
    assert rc == 0 and plan["plan"]["rows"] == 5 and plan["plan"]["steps_per_epoch"] == 3
    assert [(r["shard"], r["row"]) for r in plan["step"]["rows"]] == [("s0.parquet", 0), ("s0.parquet", 1)]
    rc, tr = by["datacheck.trace"]
    assert rc == 1 and tr["first_bad"]["step"] == 2 and tr["passed"] is False
    rc, ch = by["datacheck.checks"]
    assert rc == 0 and [set(e) for e in ch["checks"]] == [CHECK_ENTRY_KEYS]
    assert ch["checks"][0]["roles"] == ["input_ids"] and ch["checks"][0]["facts"] == ["tokens.vocab_size"]
    rc, ck = by["datacheck.checkpoint"]
    assert rc == 1 and ck["layout"] == "torch_save" and ck["passed"] is False
    assert "ckpt.missing_optimizer" in [f["check"] for f in ck["findings"]]
    rc, od = by["datacheck.order.verify"]
    assert rc == 0 and od["first_divergent_step"] is None and od["plan"]["n_rows"] == 5
    assert od["seen_twice"]["count"] == 0 and od["never_seen"]["count"] == 0


def test_report_verbs_print_the_report_not_an_envelope(data, tmp_path, monkeypatch):
    r = cli("audit", str(data), "--no-cache", "--report-dir", str(tmp_path / "rep"), "--format", "json",
            "-o", str(tmp_path / "a.json"), monkeypatch=monkeypatch)
    doc = json.loads(r.stdout)
    assert "report_version" in doc and "kind" not in doc
    r = cli("report", str(tmp_path / "a.json"), "--format", "json", monkeypatch=monkeypatch)
    assert json.loads(r.stdout) == doc


def test_envelope_refuses_unknown_kinds_and_non_objects():
    assert set(envelope("datacheck.diff", {})) == ENVELOPE_KEYS
    with pytest.raises(ValueError, match="unknown envelope kind 'datacheck.nope'"):
        envelope("datacheck.nope", {})
    with pytest.raises(ValueError, match="must be a JSON object, got list"):
        envelope("datacheck.diff", [])  # type: ignore[arg-type]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**envelope("datacheck.diff", {}), "format_version": 2}, SCHEMA)
