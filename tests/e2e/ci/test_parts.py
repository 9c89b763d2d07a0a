"""Split audits: deterministic, stable part assignment; part reports merge into a report
byte-identical (created_at aside) to the single-job audit, cross-shard checks included; bad parts."""
from __future__ import annotations

import json

import polars as pl
import pytest
from gatehelp import cli, load, normalized, write_dataset

from datacheck.execute.parts import part_of, sidecar_path


def test_assignment_is_deterministic_and_stable_when_shards_are_added():
    paths = [f"train/shard-{i:05d}.parquet" for i in range(200)]
    before = {p: part_of(p, 4) for p in paths}
    assert before == {p: part_of(p, 4) for p in reversed(paths)}
    more = paths + [f"train/new-{i}.parquet" for i in range(50)]
    assert all(part_of(p, 4) == before[p] for p in paths)  # adding shards moves no existing shard
    counts = [sum(1 for p in more if part_of(p, 4) == k) for k in range(4)]
    assert sum(counts) == 250 and min(counts) > 40  # every part gets a fair share
    # xxh3-64 of the path alone, mod N: pinned, so it is the same on every machine and Python run
    assert [part_of(f"s{i}.parquet", 3) for i in range(8)] == [2, 1, 0, 1, 2, 1, 0, 2]


@pytest.mark.parametrize("n_parts", [1, 2, 3, 5])
def test_merge_is_byte_identical_to_a_single_job(tmp_path, monkeypatch, n_parts):
    d = write_dataset(tmp_path / "data")
    single = cli("audit", str(d), "--no-cache", "-o", str(tmp_path / "single.json"), "--format", "json",
                 "--report-dir", str(tmp_path / "r"), monkeypatch=monkeypatch)
    assert single.returncode == 1
    part_files = []
    for k in range(n_parts):
        out = tmp_path / "parts" / f"part-{k}.json"
        r = cli("audit", str(d), "--num-parts", str(n_parts), "--part", str(k), "-o", str(out),
                "--cache-dir", str(tmp_path / "cache"), "--report-dir", str(tmp_path / "r"), "--format", "json",
                monkeypatch=monkeypatch)
        assert r.returncode in (0, 1), r.stderr
        assert sidecar_path(out).is_file()
        rep = load(out)
        assert rep["part"]["num_parts"] == n_parts and rep["part"]["part"] == k
        assert rep["findings"] == []  # dataset-level checks run in the merge
        part_files.append(out)
    m = cli("merge", *map(str, reversed(part_files)), "-o", str(tmp_path / "merged.json"),
            "--report-dir", str(tmp_path / "r"), monkeypatch=monkeypatch)
    assert m.returncode == 1, m.stderr
    merged = (tmp_path / "merged.json").read_text()
    assert normalized(merged) == normalized((tmp_path / "single.json").read_text())
    checks = {f["check"] for f in json.loads(merged)["findings"]}
    # cross-shard checks, incl. those decided from the row-hash payloads carried in the sidecars
    assert {"dup.shard", "dup.exact_across_shards", "index.numbering_gap", "index.temp_file"} <= checks


def test_merge_takes_a_folder_of_downloaded_artifacts(tmp_path, monkeypatch):
    d = write_dataset(tmp_path / "data")
    for k in range(3):  # as actions/download-artifact lays them out: one folder per artifact
        out = tmp_path / "dl" / f"datacheck-part-{k}" / f"part-{k}.json"
        assert cli("audit", str(d), "--num-parts", "3", "--part", str(k), "-o", str(out), "--no-cache",
                   "--fail-on", "never", "--report-dir", str(tmp_path / "r"), monkeypatch=monkeypatch).returncode == 0
    m = cli("merge", str(tmp_path / "dl"), "--fail-on", "error", "--format", "json", "--report-dir",
            str(tmp_path / "r"), monkeypatch=monkeypatch)
    assert m.returncode == 1
    single = cli("audit", str(d), "--no-cache", "--format", "json", "--report-dir", str(tmp_path / "r"),
                 monkeypatch=monkeypatch)
    assert normalized(m.stdout) == normalized(single.stdout)


@pytest.mark.parametrize("num_parts, part, msg", [
    ("3", "3", "--part 3 is out of range for --num-parts 3: parts are numbered 0..2"),
    ("3", "-1", "--part -1 is out of range"),
    ("0", "0", "--num-parts must be at least 1"),
    (None, "1", "--num-parts and --part go together"),
])
def test_part_out_of_range_is_exit_2(tmp_path, monkeypatch, num_parts, part, msg):
    d = write_dataset(tmp_path / "data")
    args = ["audit", str(d), "--report-dir", str(tmp_path / "r"), "--cache-dir", str(tmp_path / "c"), "--part", part]
    if num_parts is not None:
        args += ["--num-parts", num_parts]
    r = cli(*args, monkeypatch=monkeypatch)
    assert r.returncode == 2
    assert msg in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "r").exists()


def _parts(tmp_path, monkeypatch, d, n=3):
    files = []
    for k in range(n):
        out = tmp_path / "p" / f"part-{k}.json"
        cli("audit", str(d), "--num-parts", str(n), "--part", str(k), "-o", str(out), "--no-cache",
            "--report-dir", str(tmp_path / "r"), monkeypatch=monkeypatch)
        files.append(out)
    return files


def test_merge_refuses_incomplete_or_mismatched_parts(tmp_path, monkeypatch):
    d = write_dataset(tmp_path / "data")
    files = _parts(tmp_path, monkeypatch, d)
    r = cli("merge", str(files[0]), str(files[2]), monkeypatch=monkeypatch)
    assert r.returncode == 2 and "parts [1] of 3 are missing" in r.stderr
    r = cli("merge", str(files[0]), str(files[0]), str(files[1]), str(files[2]), monkeypatch=monkeypatch)
    assert r.returncode == 2 and "part 0 given twice" in r.stderr
    # a part of another data version (a shard added): the shard lists differ
    pl.DataFrame({"text": ["new"], "label": [1]}).write_parquet(d / "zz-new.parquet")
    other = tmp_path / "q" / "part-1.json"
    cli("audit", str(d), "--num-parts", "3", "--part", "1", "-o", str(other), "--no-cache",
        "--report-dir", str(tmp_path / "r"), monkeypatch=monkeypatch)
    r = cli("merge", str(files[0]), str(other), str(files[2]), monkeypatch=monkeypatch)
    assert r.returncode == 2 and "different audits" in r.stderr and "shard list" in r.stderr


def test_merge_refuses_a_missing_or_foreign_sidecar(tmp_path, monkeypatch):
    d = write_dataset(tmp_path / "data")
    files = _parts(tmp_path, monkeypatch, d)
    side = sidecar_path(files[1])
    keep = side.read_bytes()
    side.unlink()
    r = cli("merge", *map(str, files), monkeypatch=monkeypatch)
    assert r.returncode == 2 and "results file" in r.stderr and "is missing" in r.stderr
    side.write_bytes(sidecar_path(files[0]).read_bytes())
    r = cli("merge", *map(str, files), monkeypatch=monkeypatch)
    assert r.returncode == 2 and "does not belong to" in r.stderr
    side.write_bytes(keep)
    assert cli("merge", *map(str, files), "--report-dir", str(tmp_path / "r"), monkeypatch=monkeypatch).returncode == 1
    plain = tmp_path / "plain.json"
    cli("audit", str(d), "--no-cache", "-o", str(plain), "--report-dir", str(tmp_path / "r"), monkeypatch=monkeypatch)
    r = cli("merge", str(plain), monkeypatch=monkeypatch)
    assert r.returncode == 2 and "not a part report" in r.stderr


def test_part_with_no_shard(tmp_path, monkeypatch):
    d = tmp_path / "one"
    d.mkdir()
    pl.DataFrame({"text": ["a", "b"]}).write_parquet(d / "only.parquet")
    n = 7
    empty_k = next(k for k in range(n) if part_of("only.parquet", n) != k)
    out = tmp_path / "e.json"
    r = cli("audit", str(d), "--num-parts", str(n), "--part", str(empty_k), "-o", str(out), "--no-cache",
            "--report-dir", str(tmp_path / "r"), monkeypatch=monkeypatch)
    assert r.returncode == 0
    assert load(out)["summary"]["shards"] == 0


def test_merge_identical_with_a_committed_index(tmp_path, monkeypatch):
    """``[dataset] index``: the index.* findings of the merge equal the single job's (the parts carry
    the index file's content to the merge)."""
    d = write_dataset(tmp_path / "data")
    assert cli("index", "build", str(d), "-o", str(d / "index.json"), monkeypatch=monkeypatch).returncode == 0
    (d / "datacheck.toml").write_text('[dataset]\nindex = "index.json"\n[labels]\nnum_classes = 3\n')
    pl.DataFrame({"text": ["changed"], "label": [1]}).write_parquet(d / "shard-00001-of-00007.parquet")
    (d / "shard-00003-of-00007.parquet").unlink()
    single = cli("audit", str(d), "--no-cache", "--format", "json", "--report-dir", str(tmp_path / "r"),
                 monkeypatch=monkeypatch)
    checks = {f["check"] for f in json.loads(single.stdout)["findings"]}
    assert {"index.changed_shard", "index.missing_shard"} <= checks
    files = _parts(tmp_path, monkeypatch, d, n=2)
    m = cli("merge", *map(str, files), "--format", "json", "--report-dir", str(tmp_path / "r"), monkeypatch=monkeypatch)
    assert m.returncode == single.returncode == 1
    assert normalized(m.stdout) == normalized(single.stdout)


def test_parts_and_the_merge_store_the_contract_report_and_its_config_copy(tmp_path, monkeypatch):
    """A part's report and the merged one are stored as ``<report-dir>/<index_hash>/report.json`` (DESIGN.md
    CLI contract) and as the config copy ``<index_hash>/<config hash hex>[.fail-on-X].part-K-of-N/report.json``
    (the merged one without the part), the same bytes, each part report with its sidecar beside it (either
    file merges); the merge's ``--fail-on warn`` names its copy's folder."""
    d = write_dataset(tmp_path / "data")
    rep = tmp_path / "r"
    stored_parts = []
    for k in range(2):
        out = tmp_path / "parts" / f"part-{k}.json"
        r = cli("audit", str(d), "--num-parts", "2", "--part", str(k), "-o", str(out), "--no-cache",
                "--report-dir", str(rep), monkeypatch=monkeypatch)
        assert r.returncode in (0, 1), r.stderr
        part = load(out)
        contract = rep / part["index_hash"] / "report.json"
        copy = rep / part["index_hash"] / f"{part['config_hash'].split(':', 1)[1]}.part-{k}-of-2" / "report.json"
        assert contract.read_bytes() == copy.read_bytes()
        assert json.loads(contract.read_text()) == {**part, "part": {**part["part"], "results_file": sidecar_path(contract).name}}
        assert sidecar_path(contract).read_bytes() == sidecar_path(copy).read_bytes() == sidecar_path(out).read_bytes()
        stored_parts.append((contract, copy))
    m = cli("merge", str(stored_parts[0][0]), str(stored_parts[1][1]), "--fail-on", "warn", "-o",
            str(tmp_path / "merged.json"), "--report-dir", str(tmp_path / "m"), monkeypatch=monkeypatch)
    assert m.returncode == 1, m.stderr
    merged = load(tmp_path / "merged.json")
    h, cfg = merged["index_hash"], merged["config_hash"].split(":", 1)[1]
    assert merged["fail_on"] == "warn"
    contract, copy = tmp_path / "m" / h / "report.json", tmp_path / "m" / h / f"{cfg}.fail-on-warn" / "report.json"
    assert contract.read_bytes() == copy.read_bytes() == (tmp_path / "merged.json").read_bytes()
    assert f"report: {contract}\nconfig copy: {copy}\n" in m.stdout
