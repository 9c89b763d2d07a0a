"""A rerun of ``datacheck audit`` over unchanged inputs is answered by the whole-audit memo
(datacheck/execute/rerun.py, datacheck/cli/rerun.py): the same report file, ``--output``, stdout and
exit code as the audit (``created_at`` apart), without auditing; any changed input audits again."""
from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import sys
import time
import types
from pathlib import Path

import polars as pl
import pytest
from checkhelp import TOKENIZER, tokenizer_copy
from conftest import ROOT, run_cli
from gatehelp import write_dataset

import datacheck.cli.commands.audit as audit_verb
import datacheck.cli.rerun as rerun_cli
import datacheck.execute.rerun as memo
from datacheck.io import reportcopies

OLD = time.time() - 3600  # files last modified an hour ago: settled (memo.SETTLE_NS)


def age(*paths: Path) -> None:
    """Set the modification time of every file under ``paths`` an hour back (a record needs settled files)."""
    for p in paths:
        for f in [p] if p.is_file() else [x for x in p.rglob("*") if x.is_file()]:
            os.utime(f, (OLD, OLD))


@pytest.fixture
def audits(monkeypatch):
    """Counts the audits that ran (``run_audit`` of the verb); a hit of the memo runs none."""
    calls: list[int] = []
    real = audit_verb.run_audit

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(audit_verb, "run_audit", counted)
    return calls


def files_under(root: Path) -> dict[str, str]:
    """Relative path -> text of every file under ``root``, ``created_at`` blanked."""
    return {p.relative_to(root).as_posix(): blank(p.read_text()) for p in sorted(root.rglob("*")) if p.is_file()}


def blank(text: str) -> str:
    return re.sub(r'"created_at": "[^"]*"', '"created_at": ""', text)


def memo_records(cache: Path) -> list[Path]:
    return sorted(cache.rglob("*.dcm"))


def _setup(tmp_path: Path) -> tuple[Path, list[str]]:
    d = write_dataset(tmp_path / "data")
    age(d)
    return d, ["--cache-dir", str(tmp_path / "cache"), "--report-dir", str(tmp_path / "r"), "--no-progress"]


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_rerun_gives_the_audits_outputs(tmp_path, audits, fmt):
    d, flags = _setup(tmp_path)
    plain = run_cli("audit", str(d), "--no-cache", "--format", fmt, "--report-dir", str(tmp_path / "p"),
                    "-o", str(tmp_path / "plain.json"))
    first = run_cli("audit", str(d), *flags, "--format", fmt, "-o", str(tmp_path / "first.json"))
    assert len(audits) == 2 and first.returncode == plain.returncode == 1  # a finding fails the policy
    assert len(memo_records(tmp_path / "cache")) == 1
    reports_after_first = files_under(tmp_path / "r")
    before = time.time()
    again = run_cli("audit", str(d), *flags, "--format", fmt, "-o", str(tmp_path / "again.json"), "--workers", "1")
    assert len(audits) == 2  # answered by the memo: no audit ran
    assert again.returncode == first.returncode and again.stderr == first.stderr == ""
    assert files_under(tmp_path / "r") == reports_after_first
    for name in ("first.json", "again.json"):
        assert blank((tmp_path / name).read_text()) == blank((tmp_path / "plain.json").read_text())
    if fmt == "json":
        assert blank(again.stdout) == blank(first.stdout) == blank(plain.stdout)
        assert again.stdout == (tmp_path / "again.json").read_text()
    else:  # the text but its line saying what was read (the audit read every shard, the replay none)
        n = len(json.loads((tmp_path / "plain.json").read_text())["shards"])
        read, replayed = f"{n} shard(s): {n} read, 0 from the cache\n", \
            f"{n} shard(s): 0 read, the whole audit answered from the memo of an audit of the same files\n"
        assert read in first.stdout and replayed in again.stdout
        assert again.stdout.replace(replayed, "") == first.stdout.replace(read, "")
        assert first.stdout.replace(read, "").replace(str(tmp_path / "r"), "R") == \
            plain.stdout.replace(str(tmp_path / "p"), "R")
    created = json.loads((tmp_path / "again.json").read_text())["created_at"]
    stamp = datetime.datetime.fromisoformat(created).timestamp()  # an aware UTC time: no local zone, no DST
    assert stamp >= int(before) - 1  # made anew
    stored = sorted((tmp_path / "r").rglob("report.json"))
    assert len(stored) == 2  # <index_hash>/report.json and its config copy, both written by the replay
    for p in stored:
        assert p.read_text() == (tmp_path / "again.json").read_text()


def test_a_hit_writes_the_contract_report_and_its_config_copy(tmp_path, audits):
    """A replay stores the report where the audit did: ``<report-dir>/<index_hash>/report.json`` (DESIGN.md
    CLI contract) and ``<index_hash>/<config hash hex>/report.json``, both written anew (deleted first
    here), with the bytes of ``--output``; its text names both as the audit's did."""
    d, flags = _setup(tmp_path)
    first = run_cli("audit", str(d), *flags, "-o", str(tmp_path / "first.json"))
    assert len(audits) == 1 and first.returncode == 1
    rep = json.loads((tmp_path / "first.json").read_text())
    contract = tmp_path / "r" / rep["index_hash"] / "report.json"
    copy = tmp_path / "r" / rep["index_hash"] / rep["config_hash"].split(":", 1)[1] / "report.json"
    assert contract.read_text() == copy.read_text() == (tmp_path / "first.json").read_text()
    contract.unlink()
    copy.unlink()
    copy.parent.rmdir()
    again = run_cli("audit", str(d), *flags, "-o", str(tmp_path / "again.json"))
    assert len(audits) == 1 and again.returncode == 1  # answered by the memo
    assert contract.read_text() == copy.read_text() == (tmp_path / "again.json").read_text()
    assert f"report: {contract}\nconfig copy: {copy}\n" in again.stdout
    assert sorted(p.relative_to(tmp_path / "r") for p in (tmp_path / "r").rglob("*") if p.is_file()) == sorted(
        p.relative_to(tmp_path / "r") for p in (contract, copy))


def _change_shard(d: Path, root: Path) -> None:
    """Same size, same modification time, other bytes: only the content hash tells."""
    p = d / "extra.jsonl"
    st = p.stat()
    text = p.read_text()
    p.write_text(text.replace('"a"', '"z"'))
    assert p.stat().st_size == st.st_size
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))


def _change_config(d: Path, root: Path) -> None:
    p = root / "datacheck.toml"
    p.write_text(p.read_text().replace("num_classes = 3", "num_classes = 2"))
    age(p)


def _add_file(d: Path, root: Path) -> None:
    pl.DataFrame({"text": ["new"], "label": [0]}).write_parquet(d / "copy" / "late.parquet")
    age(d)


def _change_schema(d: Path, root: Path) -> None:
    p = root / "schema.yaml"
    p.write_text(p.read_text().replace("min_value: 0", "min_value: 1"))
    age(p)


@pytest.mark.parametrize("change", [_change_shard, _change_config, _add_file, _change_schema])
@pytest.mark.parametrize("trust", [False, True])
def test_a_changed_input_audits_again(tmp_path, audits, change, trust):
    d, flags = _setup(tmp_path)
    schema = tmp_path / "schema.yaml"  # outside the data: a file the config names
    schema.write_text("columns:\n  label:\n    dtype: Int64\n    in_range: {min_value: 0, max_value: 2}\n")
    age(schema)
    cfg = tmp_path / "datacheck.toml"  # named with --config: it may name a file outside its folder
    cfg.write_text(f'[labels]\nnum_classes = 3\n[dataset]\nschema = "{schema}"\n')
    age(cfg)
    extra = ["--config", str(cfg), *(["--trust-mtime"] if trust else [])]
    run_cli("audit", str(d), *flags, "--format", "json", *extra)
    run_cli("audit", str(d), *flags, "--format", "json", *extra)
    assert len(audits) == 1
    change(d, tmp_path)
    after = run_cli("audit", str(d), *flags, "--format", "json", *extra)
    assert len(audits) == 2 and after.returncode in (0, 1), after.stderr  # audited again
    fresh = run_cli("audit", str(d), "--no-cache", "--format", "json", "--report-dir", str(tmp_path / "p"),
                    "--config", str(cfg))
    assert blank(after.stdout) == blank(fresh.stdout) and after.returncode == fresh.returncode
    again = run_cli("audit", str(d), *flags, "--format", "json", *extra)
    assert len(audits) == 3  # the audit after the change recorded what it gave (its inputs are settled)
    assert blank(again.stdout) == blank(fresh.stdout)


def _chat_audit(tmp_path: Path, tokenizer: str | None = None) -> tuple[Path, Path, list[str]]:
    """(the tokenizer folder copied under ``tmp_path``, a data folder of one 6-conversation chat
    shard, the audit flags: a config naming ``tokenizer`` (default: the copied folder), a cache and a
    report folder, JSON output); every file aged past the memo's settling time."""
    tok = tokenizer_copy(TOKENIZER, tmp_path / "tok")
    d = tmp_path / "data"
    d.mkdir()
    conv = [[{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
            for i in range(6)]
    pl.DataFrame({"messages": conv}).write_parquet(d / "train.parquet")
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(f'[tokens]\ntokenizer = "{tokenizer or tok}"\nmax_seq_len = 64\n')
    age(tok, d, cfg)
    return tok, d, ["--config", str(cfg), "--cache-dir", str(tmp_path / "cache"), "--report-dir",
                    str(tmp_path / "r"), "--format", "json"]


@pytest.mark.slow
def test_a_changed_tokenizer_file_audits_again(tmp_path, audits):
    tok, d, flags = _chat_audit(tmp_path)
    run_cli("audit", str(d), *flags)
    run_cli("audit", str(d), *flags)
    assert len(audits) == 1
    tokcfg = tok / "tokenizer_config.json"
    data = json.loads(tokcfg.read_text())
    data["chat_template"] = "{{ raise_exception('this template renders no conversation') }}"
    tokcfg.write_text(json.dumps(data))
    age(tok)
    after = run_cli("audit", str(d), *flags)
    assert len(audits) == 2  # a file of the tokenizer folder the config names changed: audited again
    fresh = run_cli("audit", str(d), "--no-cache", *flags[:2], "--report-dir", str(tmp_path / "p"), "--format", "json")
    assert blank(after.stdout) == blank(fresh.stdout)


def test_unsettled_files_record_nothing(tmp_path, audits, monkeypatch):
    d = write_dataset(tmp_path / "data")
    now = time.time_ns()
    for f in [x for x in d.rglob("*") if x.is_file()]:
        os.utime(f, ns=(now, now - memo.SETTLE_NS // 2))  # modified a second ago
    # the memo's clock held at `now`: the files stay a second old however long the audits take to start
    # (on a loaded machine over 2 s passed between writing them and the snapshot: they looked settled)
    monkeypatch.setattr(memo, "time", types.SimpleNamespace(time_ns=lambda: now, time=time.time, gmtime=time.gmtime))
    flags = ["--cache-dir", str(tmp_path / "cache"), "--report-dir", str(tmp_path / "r"), "--format", "json"]
    run_cli("audit", str(d), *flags)
    assert memo_records(tmp_path / "cache") == []
    run_cli("audit", str(d), *flags)
    assert len(audits) == 2 and memo_records(tmp_path / "cache") == []


@pytest.mark.parametrize("flag", [["--junit", "j.xml"], ["--html", "h.html"], ["--format", "markdown"],
                                  ["--cache-prune"], ["--no-cache"]])
def test_outputs_the_memo_does_not_hold_always_audit(tmp_path, audits, flag):
    d, flags = _setup(tmp_path)
    flag = [str(tmp_path / f) if f.endswith((".xml", ".html")) else f for f in flag]
    run_cli("audit", str(d), *flags, "--format", "json")
    assert len(memo_records(tmp_path / "cache")) == 1
    for _ in range(2):
        run_cli("audit", str(d), *flags, *flag)
    assert len(audits) == 3
    if flag == ["--cache-prune"]:
        assert memo_records(tmp_path / "cache") == []  # pruned with the unused entries


def test_a_link_in_the_folder_means_no_memo(tmp_path, audits):
    d, flags = _setup(tmp_path)
    (d / "copy" / "link.parquet").symlink_to(d / "copy" / "again.parquet")
    run_cli("audit", str(d), *flags, "--format", "json")
    run_cli("audit", str(d), *flags, "--format", "json")
    assert len(audits) == 2 and memo_records(tmp_path / "cache") == []


def test_a_corrupt_record_is_a_miss(tmp_path, audits):
    d, flags = _setup(tmp_path)
    first = run_cli("audit", str(d), *flags, "--format", "json")
    (rec,) = memo_records(tmp_path / "cache")
    data = bytearray(rec.read_bytes())
    data[len(data) // 2] ^= 0xFF
    rec.write_bytes(bytes(data))
    again = run_cli("audit", str(d), *flags, "--format", "json")
    assert len(audits) == 2 and blank(again.stdout) == blank(first.stdout)
    run_cli("audit", str(d), *flags, "--format", "json")
    assert len(audits) == 2  # the rewritten record answers


def _truncate(rec: Path) -> None:
    rec.write_bytes(rec.read_bytes()[: rec.stat().st_size // 2])


def _garbage(rec: Path) -> None:
    rec.write_bytes(os.urandom(rec.stat().st_size))


def _empty(rec: Path) -> None:
    rec.write_bytes(b"")


def _folder(rec: Path) -> None:
    rec.unlink()
    rec.mkdir()


def _wrong_shape(rec: Path) -> None:
    """A record that checks out (magic, lengths, digest) whose entries are of the wrong types: a hostile
    or buggy writer, not a torn write."""
    header, blobs = memo._decode(rec.read_bytes())
    header["externals"] = [[5, "x"]]  # a file descriptor's number where a path belongs
    rec.write_bytes(memo._encode({k: v for k, v in header.items() if k != "blobs"}, blobs))


@pytest.mark.parametrize("spoil", [_truncate, _garbage, _empty, _folder, _wrong_shape])
def test_a_spoiled_record_is_a_miss_said_on_stderr(tmp_path, audits, spoil):
    d, flags = _setup(tmp_path)
    first = run_cli("audit", str(d), *flags, "--format", "json")
    (rec,) = memo_records(tmp_path / "cache")
    spoil(rec)
    again = run_cli("audit", str(d), *flags, "--format", "json")
    assert again.returncode == first.returncode and len(audits) == 2 and blank(again.stdout) == blank(first.stdout)
    if spoil is not _folder:  # a folder is no record: a plain miss
        assert again.stderr == f"datacheck: note: whole-audit memo record {rec} (" + again.stderr.split(" (", 1)[1]
        assert again.stderr.endswith(") is not trusted; auditing again\n")
    assert "Traceback" not in again.stderr
    if spoil is not _folder:
        third = run_cli("audit", str(d), *flags, "--format", "json")
        assert len(audits) == 2 and third.stderr == ""  # the record written anew answers


def test_a_read_only_cache_folder_is_refused_whatever_the_memo_holds(tmp_path, audits):
    """A memo record made while the cache folder was writable: once the folder is read-only, the rerun
    is the verb's clear refusal (exit 2, as on a miss), not an answer from a folder it cannot keep;
    ``--no-cache`` audits cleanly."""
    d, flags = _setup(tmp_path)
    first = run_cli("audit", str(d), *flags, "--format", "json")
    assert len(memo_records(tmp_path / "cache")) == 1
    cache = tmp_path / "cache"
    mode = cache.stat().st_mode
    cache.chmod(0o555)
    try:
        r = run_cli("audit", str(d), *flags, "--format", "json")
        assert r.returncode == 2 and "is read-only" in r.stderr and "--no-cache" in r.stderr
        assert "Traceback" not in r.stderr and r.stdout == ""
        r = run_cli("audit", str(d), *flags, "--format", "json", "--no-cache")
        assert r.returncode == first.returncode and blank(r.stdout) == blank(first.stdout)
    finally:
        cache.chmod(mode)
    assert len(audits) == 3  # not answered from the memo: the refused run's audit stopped at the cache


def test_a_hit_bounds_the_config_copies_as_the_audit_does(tmp_path, audits, monkeypatch):
    """At most MAX_COPIES (1 here) config copies per index hash: the audit under config b pruned a's
    copy; the rerun under a, answered from the memo, writes a's copy again and prunes b's."""
    monkeypatch.setattr(reportcopies, "MAX_COPIES", 1)
    d, flags = _setup(tmp_path)
    for name, text in (("a", "[dup]\nnear_threshold = 0.81\n"), ("b", "[dup]\nnear_threshold = 0.82\n")):
        (tmp_path / f"{name}.toml").write_text(text)
        age(tmp_path / f"{name}.toml")
    first = run_cli("audit", str(d), *flags, "--config", str(tmp_path / "a.toml"), "--format", "json")
    h, a_digits = json.loads(first.stdout)["index_hash"], json.loads(first.stdout)["config_hash"].split(":")[1]
    second = run_cli("audit", str(d), *flags, "--config", str(tmp_path / "b.toml"), "--format", "json")
    b_digits = json.loads(second.stdout)["config_hash"].split(":")[1]
    assert a_digits != b_digits
    folder = tmp_path / "r" / h
    assert sorted(p.name for p in folder.iterdir()) == sorted([b_digits, "report.json"])
    again = run_cli("audit", str(d), *flags, "--config", str(tmp_path / "a.toml"), "--format", "json")
    assert len(audits) == 2 and blank(again.stdout) == blank(first.stdout)  # answered from the memo
    assert sorted(p.name for p in folder.iterdir()) == sorted([a_digits, "report.json"])
    assert blank((folder / a_digits / "report.json").read_text()) == blank(first.stdout)


def test_trust_mtime_hashes_no_listed_file(tmp_path, audits, monkeypatch):
    d, flags = _setup(tmp_path)
    run_cli("audit", str(d), *flags, "--format", "json")
    hashed: list[str] = []
    real = memo.iter_file_hashes
    monkeypatch.setattr(memo, "iter_file_hashes", lambda paths: hashed.extend(paths) or real(paths))
    run_cli("audit", str(d), *flags, "--format", "json", "--trust-mtime")
    assert len(audits) == 1
    assert hashed == []  # no data file read (the config's bytes are in the key)
    run_cli("audit", str(d), *flags, "--format", "json")
    assert len(audits) == 1
    assert sorted(hashed) == sorted(str(p) for p in d.rglob("*") if p.is_file())  # every file, once


def _hit_loads(tmp_path, modules: tuple[str, ...]) -> tuple[int, list[str], int]:
    """A memo hit in a fresh process: (exit code, which of ``modules`` it loaded beyond what the
    interpreter had loaded before, characters printed)."""
    d, flags = _setup(tmp_path)
    run_cli("audit", str(d), *flags, "--format", "json")
    code = ("import sys, json, contextlib, io\n"
            "before = set(sys.modules)\n"
            "from datacheck.cli.main import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            f"    rc = main(['audit', {str(d)!r}, *{flags!r}, '--format', 'json'])\n"
            f"print(json.dumps([rc, sorted(m for m in {modules!r} if m in sys.modules and m not in before), "
            "len(out.getvalue())]))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr
    rc, loaded, printed = json.loads(p.stdout.strip().splitlines()[-1])
    return rc, loaded, printed


def test_a_hit_imports_nothing_heavy(tmp_path):
    """The rerun's process loads none of polars, numpy, pyarrow, pydantic nor the checks."""
    heavy = ("polars", "numpy", "pyarrow", "pydantic", "datacheck.checks.all", "datacheck.execute.audit",
             "datacheck.cli.commands.audit")
    rc, loaded, printed = _hit_loads(tmp_path, heavy)
    assert (rc, loaded) == (1, []) and printed > 0


def test_a_hit_imports_only_what_it_uses(tmp_path):
    """The rerun's process loads none of the standard modules the hit path does not use (each costs
    1-6 ms of a rerun: ``dataclasses`` with ``inspect``, ``datetime``, ``traceback``;
    ``concurrent.futures``; ``ctypes`` for the allocator settings of a verb that decodes, ``pkgutil`` to
    list the verbs, the one-shard prefetch with its parquet decoder: 4-5 ms together; ``socket`` for an
    unreachable store's error, 4 ms; ``html`` for markdown escapes, 1.2 ms; ``typing``, 3 ms: the
    modules of the hit path name its types under ``TYPE_CHECKING = False`` only; ``glob`` for a glob
    PATH and ``base64`` (with ``binascii``) for a store's checksum, 0.5-1 ms together), beyond what the
    interpreter had loaded before. ``tempfile`` (with ``shutil``
    and ``random``, 3 ms) is loaded: the output writer makes its temporary files with it."""
    rc, loaded, _ = _hit_loads(tmp_path, ("dataclasses", "inspect", "datetime", "traceback", "concurrent.futures",
                                          "ctypes", "pkgutil", "datacheck.formats.parquetdecode",
                                          "datacheck.cli.prefetch", "socket", "html", "typing", "glob", "base64"))
    assert (rc, loaded) == (1, [])


def test_every_audit_flag_is_placed():
    """A new ``audit`` flag is decided for the memo (in its key, or making an audit ineligible)."""
    args = rerun_cli.parse_audit(["x"])
    assert set(vars(args)) == rerun_cli.KNOWN_FLAGS
    assert set(rerun_cli.RUN_ONLY) <= rerun_cli.KNOWN_FLAGS


def test_the_record_reads_no_shard_the_audit_hashed(tmp_path, monkeypatch):
    """The first audit's record takes each shard's content hash from the per-shard cache's probe: it
    reads only the files that are no shards (the temporary file, the config)."""
    d, flags = _setup(tmp_path)
    hashed: list[str] = []
    real = memo._hash
    monkeypatch.setattr(memo, "_hash", lambda p: hashed.append(p) or real(p))
    run_cli("audit", str(d), *flags, "--format", "json")
    assert len(memo_records(tmp_path / "cache")) == 1
    assert sorted(hashed) == sorted([str(d / "half.parquet.tmp"), str(d / "datacheck.toml")])


def test_annotations_under_github_actions_are_replayed(tmp_path, audits, monkeypatch):
    d, flags = _setup(tmp_path)
    monkeypatch.chdir(tmp_path)
    first = run_cli("audit", str(d), *flags, "--format", "json", env={"GITHUB_ACTIONS": "true"})
    assert "::error" in first.stderr or "::warning" in first.stderr
    again = run_cli("audit", str(d), *flags, "--format", "json", env={"GITHUB_ACTIONS": "true"})
    assert len(audits) == 1 and again.stderr == first.stderr and again.returncode == first.returncode
    plain = run_cli("audit", str(d), *flags, "--format", "json", env={"GITHUB_ACTIONS": None})
    assert len(audits) == 2 and plain.stderr == ""  # another environment: another key


def test_a_named_file_in_a_hidden_folder_of_the_data_is_an_input(tmp_path, audits):
    """The listing leaves hidden folders out (discovery never reads them), but a file the config names
    there is read by the audit: a change to it audits again."""
    d, flags = _setup(tmp_path)
    (d / ".contracts").mkdir()
    schema = d / ".contracts" / "schema.yaml"
    schema.write_text("columns:\n  label:\n    dtype: Int64\n    in_range: {min_value: 0, max_value: 2}\n")
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(f'[labels]\nnum_classes = 3\n[dataset]\nschema = "{schema}"\n')
    age(d, cfg)
    run_cli("audit", str(d), *flags, "--config", str(cfg), "--format", "json")
    run_cli("audit", str(d), *flags, "--config", str(cfg), "--format", "json")
    assert len(audits) == 1
    schema.write_text(schema.read_text().replace("min_value: 0", "min_value: 1"))
    age(schema)
    run_cli("audit", str(d), *flags, "--config", str(cfg), "--format", "json")
    assert len(audits) == 2


@pytest.mark.slow
def test_a_tokenizer_named_by_its_file_fingerprints_its_folder(tmp_path, audits):
    """``[tokens] tokenizer`` naming a file inside the tokenizer's folder loads the whole folder (its
    ``tokenizer_config.json`` holds the chat template): a change to another file there audits again."""
    tok, d, flags = _chat_audit(tmp_path, "tok/tokenizer.json")
    flags.append("--no-progress")
    first = run_cli("audit", str(d), *flags)
    run_cli("audit", str(d), *flags)
    assert len(audits) == 1 and first.returncode == 0, first.stderr
    tokcfg = tok / "tokenizer_config.json"
    data = json.loads(tokcfg.read_text())
    data["chat_template"] = "{{ raise_exception('this template renders no conversation') }}"
    tokcfg.write_text(json.dumps(data))
    for f in tok.iterdir():  # settled, and another time than before (the loader keeps a tokenizer per time)
        os.utime(f, (OLD - 60, OLD - 60))
    after = run_cli("audit", str(d), *flags)
    assert len(audits) == 2  # the folder's config changed: audited again
    fresh = run_cli("audit", str(d), "--no-cache", *flags[:2], "--report-dir", str(tmp_path / "p"), "--format", "json")
    assert after.returncode == fresh.returncode == 1
    assert blank(after.stdout) == blank(fresh.stdout)


@pytest.mark.parametrize("written", ["s.yaml", "~/s.yaml"])
def test_a_schema_relative_to_the_config_folder_changed_audits_anew(tmp_path, audits, monkeypatch, written):
    """``[dataset] schema`` written relative to the config's folder (as the audit reads it, never
    ``~``-expanded), the audit run from another folder: after the schema changes, a rerun with the
    caches gives what a fresh audit gives (neither the memo nor the per-shard cache answers)."""
    d = tmp_path / "data"
    d.mkdir()
    pl.DataFrame({"text": ["a", "bb", "ccc"], "label": [0, 1, 2]}).write_parquet(d / "s.parquet")
    conf = tmp_path / "conf"
    schema = conf / written
    schema.parent.mkdir(parents=True)
    schema.write_text("columns:\n  label:\n    dtype: Int64\n    in_range: {min_value: 0, max_value: 2}\n")
    cfg = conf / "datacheck.toml"
    cfg.write_text(f'[dataset]\nschema = "{written}"\n')
    age(d, conf)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    flags = ["--config", str(cfg), "--cache-dir", str(tmp_path / "cache"), "--report-dir", str(tmp_path / "r"),
             "--format", "json", "--no-progress"]
    assert run_cli("audit", str(d), *flags).returncode == 0  # every label is in [0, 2]
    schema.write_text(schema.read_text().replace("min_value: 0", "min_value: 1"))  # label 0 now fails
    os.utime(schema, (OLD - 60, OLD - 60))  # settled, at another time than before
    after = run_cli("audit", str(d), *flags)
    assert len(audits) == 2  # the memo did not answer
    fresh = run_cli("audit", str(d), "--no-cache", *flags[:2], "--report-dir", str(tmp_path / "p"), "--format", "json")
    assert after.returncode == fresh.returncode == 1
    assert blank(after.stdout) == blank(fresh.stdout)


def test_a_removed_decoder_package_meets_no_cached_result(tmp_path, audits, monkeypatch):
    """A ``.jsonl.zst`` shard audited while zstandard is installed, then zstandard gone (shadowed
    by a package that cannot be imported, as after an uninstall): a rerun with the caches gives what
    a fresh audit gives, never the cached pass (neither the memo nor a per-shard entry answers)."""
    zstandard = pytest.importorskip("zstandard")
    d = tmp_path / "data"
    d.mkdir()
    rows = "".join(json.dumps({"text": f"t{i}", "label": i % 3}) + "\n" for i in range(5)).encode()
    (d / "a.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(rows))
    age(d)
    flags = ["--cache-dir", str(tmp_path / "cache"), "--report-dir", str(tmp_path / "r"), "--format", "json",
             "--no-progress"]
    assert run_cli("audit", str(d), *flags).returncode == 0
    shadow = tmp_path / "shadow" / "zstandard"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError('No module named zstandard', name='zstandard')\n")
    monkeypatch.syspath_prepend(str(shadow.parent))
    monkeypatch.delitem(sys.modules, "zstandard")
    memo.runtime_fingerprint.cache_clear()
    try:
        after = run_cli("audit", str(d), *flags)
        fresh = run_cli("audit", str(d), "--no-cache", "--report-dir", str(tmp_path / "p"), "--format", "json")
    finally:
        memo.runtime_fingerprint.cache_clear()
    assert len(audits) == 3  # neither rerun was answered by the memo
    assert fresh.returncode != 0 and after.returncode == fresh.returncode


@pytest.mark.slow
def test_a_file_added_to_the_tokenizer_folder_audits_again(tmp_path, audits):
    """A ``chat_template.jinja`` added to the ``[tokens] tokenizer`` folder overrides the template of
    its ``tokenizer_config.json``: the rerun audits and gives what a fresh audit gives."""
    tok, d, flags = _chat_audit(tmp_path)
    flags.append("--no-progress")
    assert run_cli("audit", str(d), *flags).returncode == 0
    run_cli("audit", str(d), *flags)
    assert len(audits) == 1
    (tok / "chat_template.jinja").write_text("{{ raise_exception('this template renders no conversation') }}")
    for f in tok.iterdir():  # settled, and another time than before (the loader keeps a tokenizer per time)
        os.utime(f, (OLD - 60, OLD - 60))
    after = run_cli("audit", str(d), *flags)
    assert len(audits) == 2  # a new file in the named folder: audited again
    fresh = run_cli("audit", str(d), "--no-cache", *flags[:2], "--report-dir", str(tmp_path / "p"), "--format", "json")
    assert after.returncode == fresh.returncode == 1
    assert blank(after.stdout) == blank(fresh.stdout)


def test_a_python_schema_importing_a_helper_is_never_answered_from_a_cache(tmp_path, audits, monkeypatch):
    """``[dataset] schema = "schema.py:M"`` whose module imports a helper module: a change of the
    helper alone (the schema file unchanged) is seen by a rerun with the caches, which neither the
    memo nor the per-shard cache answers (no hash covers a module's imports); the cache being off is
    said on stderr."""
    d = tmp_path / "data"
    d.mkdir()
    pl.DataFrame({"text": ["a", "bb", "ccc"], "label": [0, 1, 2]}).write_parquet(d / "s.parquet")
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "helper.py").write_text("MAXLABEL = 5\n")
    (conf / "schema.py").write_text(
        "import sys, os\nsys.path.insert(0, os.path.dirname(__file__))\n"
        "import pandera.polars as pa\nfrom helper import MAXLABEL\n\n"
        "class M(pa.DataFrameModel):\n    label: int = pa.Field(le=MAXLABEL)\n")
    cfg = conf / "datacheck.toml"
    cfg.write_text('[dataset]\nschema = "schema.py:M"\n')
    age(d, conf)
    flags = ["--config", str(cfg), "--cache-dir", str(tmp_path / "cache"), "--report-dir", str(tmp_path / "r"),
             "--format", "json", "--no-progress"]
    first = subprocess.run([sys.executable, "-m", "datacheck", "audit", str(d), *flags], cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr  # every label <= 5
    assert "the result cache is off for this audit: the Python schema" in first.stderr
    assert memo_records(tmp_path / "cache") == []
    (conf / "helper.py").write_text("MAXLABEL = 1\n")  # label 2 now fails; schema.py is unchanged
    os.utime(conf / "helper.py", (OLD - 60, OLD - 60))
    after = subprocess.run([sys.executable, "-m", "datacheck", "audit", str(d), *flags], cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
    fresh = subprocess.run([sys.executable, "-m", "datacheck", "audit", str(d), "--no-cache", *flags[:2],
                            "--report-dir", str(tmp_path / "p"), "--format", "json"], cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
    assert after.returncode == fresh.returncode == 1, (after.stderr, fresh.stderr)
    assert blank(after.stdout) == blank(fresh.stdout)


_ENTRY = ("import atexit, sys\n"
          "atexit.register(lambda: open({mark!r}, 'w').close())\n"
          "from datacheck.cli.main import entry\n"
          "sys.argv = ['datacheck', *{args!r}]\n"
          "entry()\n")


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_hit_exits_without_the_interpreters_teardown(tmp_path, fmt):
    """``python -m datacheck`` / the console command (:func:`datacheck.cli.main.entry`): an audit the
    memo answers ends with ``os._exit`` (no atexit handler runs: the process's teardown is skipped)
    with its output complete, through a pipe, and the same exit code; a real audit exits normally."""
    d, flags = _setup(tmp_path)
    args = ["audit", str(d), *flags, "--format", fmt, "-o", str(tmp_path / "out.json")]

    def run(mark: Path) -> subprocess.CompletedProcess:
        code = _ENTRY.format(mark=str(mark), args=args)
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})

    first = run(tmp_path / "first.mark")
    assert first.returncode == 1, first.stderr  # the dataset's planted finding fails the policy
    assert (tmp_path / "first.mark").exists()  # a real audit: the normal exit ran the handler
    again = run(tmp_path / "again.mark")
    assert again.returncode == first.returncode and again.stderr == first.stderr == ""
    assert not (tmp_path / "again.mark").exists()  # answered by the memo: os._exit, no teardown
    if fmt == "json":  # the whole report reached the pipe before the process ended
        assert again.stdout == (tmp_path / "out.json").read_text()
        assert blank(again.stdout) == blank(first.stdout)
    else:
        assert again.stdout.splitlines()[0] == first.stdout.splitlines()[0]
        assert len(again.stdout.splitlines()) == len(first.stdout.splitlines())
        assert again.stdout.endswith("\n")


def test_a_dataset_card_above_the_audited_folder_is_an_input(tmp_path, audits):
    """The card of a Hub repository (README.md above the shards' folder, datacheck/io/cardpath.py)
    declares the label's classes: made, changed or removed there, the rerun audits again."""
    d, flags = _setup(tmp_path)
    card = tmp_path / "README.md"  # the repository's root, one folder above the audited one

    def declare(*names: str) -> None:
        lines = "".join(f"          '{i}': {n}\n" for i, n in enumerate(names))
        card.write_text("---\ndataset_info:\n  features:\n  - name: text\n    dtype: string\n  - name: label\n"
                        f"    dtype:\n      class_label:\n        names:\n{lines}---\n")
        age(card)

    def audit_json() -> str:
        return blank(run_cli("audit", str(d), *flags, "--format", "json").stdout)

    def fresh() -> str:
        return blank(run_cli("audit", str(d), "--no-cache", "--format", "json", "--report-dir",
                             str(tmp_path / "p")).stdout)

    audit_json()
    audit_json()
    assert len(audits) == 1
    before = len(audits)
    for change in (lambda: declare("a", "b"), lambda: declare("a", "b", "c", "d")):
        change()
        got = audit_json()
        assert len(audits) == before + 1  # audited again
        assert got == fresh() and "README.md" in json.loads(got)["label_facts"]["source"]
        before = len(audits)
    card.unlink()  # the inputs of the first audit again: its record answers, with its output
    got = audit_json()
    assert len(audits) == before and got == fresh() and "README.md" not in got
