"""The whole-audit memo's parts (datacheck/execute/rerun.py): the walk of the audited folders, the
external files a config names, and a record's round trip, each refusal of a record and of a hit."""
from __future__ import annotations

import ast
import datetime as _dt
import json
import os
import sys
import time
import types
from pathlib import Path

import pytest
import xxhash

from datacheck.execute import rerun as memo

OLD_NS = time.time_ns() - 3600 * 10**9

REPORT = '{\n  "config_hash": "x",\n  "created_at": "2026-01-02T03:04:05+00:00",\n  "index_hash": "abc"\n}\n'
CREATED = "2026-01-02T03:04:05+00:00"


def tree(root: Path) -> Path:
    """A folder of data files (two levels, a hidden folder, a ``.~`` folder), modified an hour ago."""
    (root / "sub").mkdir(parents=True)
    (root / ".hidden").mkdir()
    (root / ".~partial").mkdir()
    for rel, data in {"a.parquet": b"A" * 100, "sub/b.jsonl": b'{"x": 1}\n', ".hidden/c.bin": b"C",
                      ".~partial/d.bin": b"D", ".top.tmp": b"T"}.items():
        (root / rel).write_bytes(data)
        os.utime(root / rel, ns=(OLD_NS, OLD_NS))
    return root


def snap_of(root: Path, **static) -> memo.Snapshot:
    got = memo.snapshot([str(root)], {"cwd": "/", **static})
    assert got is not None
    return got


def test_walk_lists_what_discovery_walks(tmp_path):
    root = tree(tmp_path / "d")
    s = snap_of(root)
    assert s.folders == [["", ".~partial", "sub"]]  # the hidden folder left out, as discovery leaves it
    names = [n for n, _ in s.files[0]]
    assert names == [".top.tmp", "a.parquet", ".~partial/d.bin", "sub/b.jsonl"]
    st = (root / "a.parquet").stat()
    assert dict(s.files[0])["a.parquet"] == (100, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


@pytest.mark.parametrize("kind", ["file_link", "dir_link", "fifo"])
def test_a_link_or_special_file_means_no_snapshot(tmp_path, kind):
    root = tree(tmp_path / "d")
    if kind == "file_link":
        (root / "sub" / "l.parquet").symlink_to(root / "a.parquet")
    elif kind == "dir_link":
        (root / "more").symlink_to(root / "sub")
    else:
        os.mkfifo(root / "sub" / "pipe")
    assert memo.snapshot([str(root)], {}) is None


def test_a_linked_root_is_walked(tmp_path):
    root = tree(tmp_path / "d")
    (tmp_path / "link").symlink_to(root)
    assert snap_of(tmp_path / "link").files[0] == snap_of(root).files[0]


def test_external_files(tmp_path, monkeypatch):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "schema.yaml").write_text("x")
    (tmp_path / "conf" / "model.py").write_text("x")
    tok = tmp_path / "tok"
    (tok / "deep").mkdir(parents=True)
    for n in ("tokenizer.json", "deep/vocab.txt"):
        (tok / n).write_text(n)
    got = memo.external_files(["schema.yaml", "model.py:Contract", str(tok), "input_ids", "", "missing.json"],
                              [tmp_path / "conf"])
    assert got == sorted([str(tmp_path / "conf" / "schema.yaml"), str(tmp_path / "conf" / "model.py"),
                          str(tok / "tokenizer.json"), str(tok / "deep" / "vocab.txt")])
    monkeypatch.setattr(memo, "MAX_EXTERNAL_FILES", 1)
    assert memo.external_files([str(tok)], []) is None  # too many files to fingerprint: no memo


def test_a_tilde_value_is_found_as_written_too(tmp_path, monkeypatch):
    """A config path is never ``~``-expanded by the audit (:meth:`datacheck.model.config.Config.anchored`
    joins ``~/s.yaml`` to the config's folder): that file is an input, as is the expanded one."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "s.yaml").write_text("h")
    monkeypatch.setenv("HOME", str(home))
    (tmp_path / "conf" / "~").mkdir(parents=True)
    (tmp_path / "conf" / "~" / "s.yaml").write_text("x")
    got = memo.external_files(["~/s.yaml"], [tmp_path / "conf"])
    assert got == sorted([str(tmp_path / "conf" / "~" / "s.yaml"), str(home / "s.yaml")])


#: Third-party packages the audit's layers import that never change what an audit gives: ray (where
#: the work runs) and torch (model/torchdep.py: the torch verbs only).
NOT_OUTPUT = {"ray", "torch"}


def test_every_package_the_audit_imports_is_in_the_runtime_fingerprint():
    """A package the audit's layers import (model .. execute) is in :data:`memo.RUNTIME_PACKAGES`:
    installing, upgrading or removing it (e.g. zstandard: a ``.zst`` shard becomes unreadable) is
    another key."""
    pkg = Path(memo.__file__).resolve().parent.parent
    layers = ("model", "io", "formats", "derive", "checks", "contracts", "engine", "report", "execute")
    found: set[str] = set()
    for layer in layers:
        for f in (pkg / layer).rglob("*.py"):
            for node in ast.walk(ast.parse(f.read_text())):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
                found.update(n.split(".")[0] for n in names)
    third = found - set(sys.stdlib_module_names) - {"datacheck"}
    assert "zstandard" in third and "polars" in third  # the scan sees real imports
    assert third - NOT_OUTPUT <= set(memo.RUNTIME_PACKAGES)


def test_a_shadowed_package_is_another_key(tmp_path, monkeypatch):
    """A package found elsewhere (another install, ``PYTHONPATH``) gives another runtime fingerprint."""
    before = memo.runtime_fingerprint.__wrapped__()
    (tmp_path / "zstandard").mkdir()
    (tmp_path / "zstandard" / "__init__.py").write_text("raise ImportError('not here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    # find_spec answers from sys.modules for a package imported already (by another test here)
    monkeypatch.delitem(sys.modules, "zstandard", raising=False)
    after = memo.runtime_fingerprint.__wrapped__()
    assert before != after
    assert [e for e in after if e[0] == "zstandard"][0][1] == str(tmp_path / "zstandard" / "__init__.py")


def _record(cache: Path, s: memo.Snapshot, **kw) -> bool:
    args = {"report_text": REPORT, "created_at": CREATED, "stdout": REPORT, "stored": "r/abc/report.json",
            "exit_code": 1, **kw}
    return memo.record(cache, s, **args)


def test_record_and_lookup_round_trip(tmp_path):
    root = tree(tmp_path / "d")
    ext = tmp_path / "datacheck.toml"
    ext.write_text("[labels]\n")
    os.utime(ext, ns=(OLD_NS, OLD_NS))
    s = snap_of(root)
    assert s.add_externals([str(ext)])
    assert _record(tmp_path / "c", s)
    for trust in (False, True):
        hit = memo.lookup(tmp_path / "c", snap_of(root), trust_states=trust)
        assert hit is not None and hit.exit_code == 1 and hit.stored == "r/abc/report.json"
        new = json.loads(hit.report_text)["created_at"]
        assert new != CREATED and hit.report_text == REPORT.replace(CREATED, new) and hit.stdout == hit.report_text
    text_hit = None
    assert _record(tmp_path / "c2", snap_of(root), stdout="summary\nreport: r/abc/report.json\n")
    text_hit = memo.lookup(tmp_path / "c2", snap_of(root))
    assert text_hit is not None and text_hit.stdout == "summary\nreport: r/abc/report.json\n"
    # the external file's bytes change: a miss
    ext.write_text("[labels]\nnum_classes = 2\n")
    assert memo.lookup(tmp_path / "c", snap_of(root)) is None


def test_a_file_added_to_or_removed_from_a_named_folder_is_a_miss(tmp_path):
    """A folder the config names (a tokenizer folder) is an input by its listing too: a new file
    there (``chat_template.jinja`` overrides the template of ``tokenizer_config.json``) is a miss."""
    root = tree(tmp_path / "d")
    tok = tmp_path / "tok"
    tok.mkdir()
    (tok / "tokenizer_config.json").write_text("{}")
    os.utime(tok / "tokenizer_config.json", ns=(OLD_NS, OLD_NS))
    folders: list[str] = []
    found = memo.external_files([str(tok)], [], folders)
    assert folders == [str(tok)] and found == [str(tok / "tokenizer_config.json")]

    def snap() -> memo.Snapshot:
        s = snap_of(root)
        assert s.add_external_folders(folders) and s.add_externals(found)
        return s

    assert _record(tmp_path / "c", snap())
    assert memo.lookup(tmp_path / "c", snap()) is not None
    (tok / "chat_template.jinja").write_text("{{ x }}")
    assert memo.lookup(tmp_path / "c", snap_of(root)) is None  # the record's listing, not the caller's
    (tok / "chat_template.jinja").unlink()
    assert memo.lookup(tmp_path / "c", snap_of(root)) is not None
    (tok / "tokenizer_config.json").rename(tok / "other.json")
    assert memo.lookup(tmp_path / "c", snap_of(root)) is None


def test_other_static_parts_are_another_key(tmp_path):
    root = tree(tmp_path / "d")
    assert _record(tmp_path / "c", snap_of(root, flags={"format": "json"}))
    assert memo.lookup(tmp_path / "c", snap_of(root, flags={"format": "json"})) is not None
    assert memo.lookup(tmp_path / "c", snap_of(root, flags={"format": "text"})) is None


@pytest.mark.parametrize("trust", [False, True])
def test_same_size_same_mtime_other_bytes_is_a_miss(tmp_path, trust):
    root = tree(tmp_path / "d")
    assert _record(tmp_path / "c", snap_of(root))
    p = root / "a.parquet"
    p.write_bytes(b"B" * 100)
    os.utime(p, ns=(OLD_NS, OLD_NS))  # size and mtime as recorded; the status-change time is new
    assert memo.lookup(tmp_path / "c", snap_of(root), trust_states=trust) is None


def test_trusted_states_read_no_bytes(tmp_path, monkeypatch):
    root = tree(tmp_path / "d")
    assert _record(tmp_path / "c", snap_of(root))
    hashed: list[str] = []
    real = memo.iter_file_hashes
    monkeypatch.setattr(memo, "iter_file_hashes", lambda paths: hashed.extend(paths) or real(paths))
    assert memo.lookup(tmp_path / "c", snap_of(root), trust_states=True) is not None
    assert hashed == []
    assert memo.lookup(tmp_path / "c", snap_of(root)) is not None
    assert len(hashed) == 4


def test_no_record_for_unsettled_or_changed_files(tmp_path, monkeypatch):
    root = tree(tmp_path / "d")
    s = snap_of(root)
    (root / "sub" / "b.jsonl").write_bytes(b'{"x": 2}\n')  # changed after the snapshot
    assert not _record(tmp_path / "c", s)
    root2 = tree(tmp_path / "e")
    (root2 / "fresh.parquet").write_bytes(b"new")
    now = time.time_ns()
    os.utime(root2 / "fresh.parquet", ns=(now, now - memo.SETTLE_NS // 2))  # modified a second ago: not settled
    # the memo's clock held at `now` (the file stays a second old however late the snapshot comes)
    monkeypatch.setattr(memo, "time", types.SimpleNamespace(time_ns=lambda: now, time=time.time, gmtime=time.gmtime))
    assert not _record(tmp_path / "c", snap_of(root2))
    assert list((tmp_path / "c").rglob("*.dcm")) == []


def test_created_at_must_occur_once_in_the_report(tmp_path):
    root = tree(tmp_path / "d")
    assert not _record(tmp_path / "c", snap_of(root), report_text=REPORT.replace('"created_at"', '"made"'))
    assert not _record(tmp_path / "c", snap_of(root), stdout=f"created {CREATED}\n")  # printed: would go stale


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "folder"])
def test_a_damaged_record_is_a_miss(tmp_path, damage):
    root = tree(tmp_path / "d")
    s = snap_of(root)
    assert _record(tmp_path / "c", s)
    p = memo.memo_path(tmp_path / "c", s.key())
    data = bytearray(p.read_bytes())
    if damage == "flip":
        data[len(data) // 3] ^= 0x01
        p.write_bytes(bytes(data))
    elif damage == "truncate":
        p.write_bytes(bytes(data[:-5]))
    elif damage == "empty":
        p.write_bytes(b"")
    else:
        p.unlink()
        p.mkdir()
    assert memo.lookup(tmp_path / "c", snap_of(root)) is None


def test_no_record_is_written_through_a_link_in_the_cache(tmp_path):
    root = tree(tmp_path / "d")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "memo").symlink_to(elsewhere)
    assert not _record(tmp_path / "c", snap_of(root))
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("seconds", [0.0, 59.25, 951_782_400.5, 1_764_979_199.999, 4_102_444_799.0])
def test_created_at_is_written_as_the_report_writes_it(seconds):
    """The memo's ``created_at`` has the report's format (``datetime``'s ISO form, whole seconds, UTC)."""
    want = _dt.datetime.fromtimestamp(int(seconds), _dt.timezone.utc).replace(microsecond=0).isoformat()
    assert memo.created_at_of(seconds) == want
    now = memo.now_created_at()
    assert _dt.datetime.fromisoformat(now).isoformat() == now and now.endswith("+00:00")


def test_code_fingerprint_is_of_every_source_file_by_sorted_path():
    """xxh3-128 over (relative path, NUL, bytes, NUL) of every ``.py``/``.json``/``.yaml`` file of the
    package in sorted path order, as ``os.walk(followlinks=True)`` lists them (``__pycache__`` not walked; a
    checkout's ``builtin_schemas`` link to ``schemas/`` walked: the built-in schemas are part of the code)."""
    pkg = Path(memo.__file__).resolve().parent.parent
    files = []
    for root, dirs, names in os.walk(pkg, followlinks=True):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel = Path(root).relative_to(pkg).parts
        files += [([*rel, n], os.path.join(root, n)) for n in names
                  if n.endswith((".py", ".json", ".yaml")) and os.path.isfile(os.path.join(root, n))]
    h = xxhash.xxh3_128()
    for parts, full in sorted(files):
        h.update("/".join(parts).encode() + b"\0" + Path(full).read_bytes() + b"\0")
    assert len(files) > 100 and memo.code_fingerprint.__wrapped__() == h.hexdigest()
    assert any(parts[0] == "builtin_schemas" and parts[-1].endswith(".yaml") for parts, _ in files)


def test_tree_fingerprint_follows_folder_links_once(tmp_path):
    """A linked folder's files count under the link's path (a change there changes the fingerprint);
    a link back to the root is not walked again."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    (tmp_path / "data" / "s.yaml").write_text("k: 1\n")
    (tmp_path / "pkg" / "schemas").symlink_to(tmp_path / "data", target_is_directory=True)
    (tmp_path / "pkg" / "loop").symlink_to(tmp_path / "pkg", target_is_directory=True)
    want = xxhash.xxh3_128(b"a.py\0x = 1\n\0schemas/s.yaml\0k: 1\n\0").hexdigest()
    assert memo.tree_fingerprint(str(tmp_path / "pkg")) == want
    (tmp_path / "data" / "s.yaml").write_text("k: 2\n")
    assert memo.tree_fingerprint(str(tmp_path / "pkg")) != want


@pytest.mark.parametrize("how", ["removed", "folder", "external removed"])
def test_a_file_gone_between_the_listing_and_its_hash_is_a_miss(tmp_path, how, monkeypatch):
    """A listed (or external) file removed, or replaced by a folder, after the snapshot listed it and
    before its bytes are hashed: a miss (the audit then runs and reports what it finds), never an error.
    Several files, so the threaded reader has others in flight."""
    monkeypatch.setattr("datacheck.io.hashing._threads_available", lambda: 2)
    root = tree(tmp_path / "d")
    for i in range(6):
        (root / f"s{i}.bin").write_bytes(bytes([i]) * (3 << 20))
        os.utime(root / f"s{i}.bin", ns=(OLD_NS, OLD_NS))
    ext = tmp_path / "datacheck.toml"
    ext.write_text("[labels]\n")
    os.utime(ext, ns=(OLD_NS, OLD_NS))

    def snap() -> memo.Snapshot:
        s = snap_of(root)
        assert s.add_externals([str(ext)])
        return s

    assert _record(tmp_path / "c", snap())
    assert memo.lookup(tmp_path / "c", snap()) is not None
    s = snap()  # the listing holds every file
    if how == "removed":
        (root / "s3.bin").unlink()
    elif how == "folder":
        (root / "s3.bin").unlink()
        (root / "s3.bin").mkdir()
    else:
        ext.unlink()
    assert memo.lookup(tmp_path / "c", s) is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a mode-000 file")
def test_an_unreadable_file_is_a_miss(tmp_path):
    root = tree(tmp_path / "d")
    assert _record(tmp_path / "c", snap_of(root))
    (root / "a.parquet").chmod(0)
    assert memo.lookup(tmp_path / "c", snap_of(root)) is None


def _settled_tree(tmp_path: Path) -> Path:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text("x = 1\n")
    (pkg / "sub" / "s.yaml").write_text("k: 1\n")
    old = time.time() - 10 * memo.SETTLE_NS / 1e9
    for f in pkg.rglob("*"):
        os.utime(f, (old, old))
    time.sleep(memo.SETTLE_NS / 1e9 + 0.05)  # status-change times settled as well (utime sets them now)
    return pkg



def test_tree_fingerprint_remembered_while_no_file_changes(tmp_path):
    """A remembered value is the same; it is taken from the memo while every file's state is unchanged
    (a planted value is returned: no file was read) and computed again when one changes."""
    pkg = _settled_tree(tmp_path)
    want = xxhash.xxh3_128(b"a.py\0x = 1\n\0sub/s.yaml\0k: 1\n\0").hexdigest()
    memo_dir = tmp_path / "code"
    memo_dir.mkdir()
    assert memo.tree_fingerprint(str(pkg), memo_dir=str(memo_dir)) == want  # nothing remembered yet
    assert list(memo_dir.iterdir()) == []  # a lookup writes nothing
    assert memo.remember_tree_fingerprint(str(pkg), str(memo_dir), want)
    (entry,) = list(memo_dir.iterdir())
    assert want.encode() in entry.read_bytes()
    assert memo.remember_tree_fingerprint(str(pkg), str(memo_dir), "0" * 32)  # planted, with its digest
    assert memo.tree_fingerprint(str(pkg), memo_dir=str(memo_dir)) == "0" * 32  # what a lookup returns
    (pkg / "a.py").write_text("x = 2\n")  # same size: the status-change time changes
    changed = xxhash.xxh3_128(b"a.py\0x = 2\n\0sub/s.yaml\0k: 1\n\0").hexdigest()
    assert memo.tree_fingerprint(str(pkg), memo_dir=str(memo_dir)) == changed == memo.tree_fingerprint(str(pkg))
    assert not memo.remember_tree_fingerprint(str(pkg), str(memo_dir), changed)  # a.py changed just now
    assert len(list(memo_dir.iterdir())) == 1


@pytest.mark.parametrize("content", [b"", b"xyz", b"G" * 32, b"0" * 31 + b"\n"])
def test_a_memo_entry_that_is_no_fingerprint_is_not_trusted(tmp_path, content):
    pkg = _settled_tree(tmp_path)
    want = memo.tree_fingerprint(str(pkg))
    assert memo.remember_tree_fingerprint(str(pkg), str(tmp_path), want)
    (entry,) = [p for p in tmp_path.iterdir() if p.is_file()]
    entry.write_bytes(content)
    assert memo.tree_fingerprint(str(pkg), memo_dir=str(tmp_path)) == want


def _remembered(tmp_path: Path, value: str) -> tuple[Path, Path, str]:
    """(the tree, its remembered entry holding ``value``, the tree's real fingerprint)."""
    pkg = _settled_tree(tmp_path)
    want = xxhash.xxh3_128(b"a.py\0x = 1\n\0sub/s.yaml\0k: 1\n\0").hexdigest()
    code = tmp_path / "code"
    code.mkdir()
    assert memo.remember_tree_fingerprint(str(pkg), str(code), value)
    (entry,) = list(code.iterdir())
    return pkg, entry, want


@pytest.mark.slow
def test_a_truncated_code_fingerprint_entry_is_recomputed(tmp_path):
    """An entry cut short anywhere (a torn write, a full disk) is never trusted: the fingerprint is
    computed from the files. The remembered value is a stale one here, so trusting any part of it would show."""
    stale = "0123456789abcdef" * 2
    pkg, entry, want = _remembered(tmp_path, stale)
    assert memo.tree_fingerprint(str(pkg), memo_dir=str(entry.parent)) == stale  # whole: taken as remembered
    good = entry.read_bytes()
    for cut in range(1, len(good) + 1):
        entry.write_bytes(good[:-cut])
        assert memo.tree_fingerprint(str(pkg), memo_dir=str(entry.parent)) == want, cut


@pytest.mark.slow
def test_a_bit_flipped_code_fingerprint_entry_is_recomputed(tmp_path):
    """Every single bit flipped anywhere in a remembered entry (its digits too: ``0`` and ``1`` differ by
    one bit, both hex) makes it untrusted: the fingerprint read from the files is returned."""
    pkg, entry, want = _remembered(tmp_path, "0" * 32)
    good = entry.read_bytes()
    for i in range(len(good)):
        for bit in range(8):
            flipped = bytearray(good)
            flipped[i] ^= 1 << bit
            entry.write_bytes(bytes(flipped))
            assert memo.tree_fingerprint(str(pkg), memo_dir=str(entry.parent)) == want, (i, bit)
    entry.write_bytes(good)
    assert memo.tree_fingerprint(str(pkg), memo_dir=str(entry.parent)) == "0" * 32


@pytest.mark.slow
def test_a_code_fingerprint_entry_under_another_name_or_of_an_earlier_layout_is_recomputed(tmp_path):
    """An entry copied under another entry's name (restored from another tree's states) and the bare 32
    digits an earlier datacheck wrote carry no digest of this name: neither is trusted."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.py").write_text("y = 1\n")
    old = time.time() - 10 * memo.SETTLE_NS / 1e9
    os.utime(other / "x.py", (old, old))
    pkg, entry, want = _remembered(tmp_path, "0" * 32)  # its wait settles the other tree too
    assert memo.remember_tree_fingerprint(str(other), str(entry.parent), "1" * 32)
    (moved,) = [p for p in entry.parent.iterdir() if p != entry]
    entry.write_bytes(moved.read_bytes())  # a valid entry of another name
    assert memo.tree_fingerprint(str(pkg), memo_dir=str(entry.parent)) == want
    entry.write_bytes(b"0" * 32)  # the earlier layout: bare digits
    assert memo.tree_fingerprint(str(pkg), memo_dir=str(entry.parent)) == want


def test_an_unwritable_memo_folder_only_costs_the_reading(tmp_path):
    pkg = _settled_tree(tmp_path)
    (tmp_path / "file").write_text("not a folder")
    want = memo.tree_fingerprint(str(pkg))
    assert not memo.remember_tree_fingerprint(str(pkg), str(tmp_path / "file"), want)
    assert memo.tree_fingerprint(str(pkg), memo_dir=str(tmp_path / "file")) == want


def test_a_record_remembers_the_code_fingerprint_for_the_next_lookup(tmp_path, monkeypatch):
    """The memo record's writer remembers :func:`code_fingerprint` beside the records (``memo/code``);
    the rerun's lookup takes it from there: its key is the same and no source file is read."""
    pkg = _settled_tree(tmp_path)
    monkeypatch.setattr(memo, "_package_root", lambda: str(pkg))
    memo.code_fingerprint.cache_clear()
    root = tmp_path / "data"
    root.mkdir()
    (root / "a.txt").write_text("x")
    old = time.time() - 10
    os.utime(root / "a.txt", (old, old))
    cache = tmp_path / "c"
    try:
        assert _record(cache, snap_of(root))
        (entry,) = list(Path(memo.code_memo_dir(cache)).iterdir())
        want = memo.tree_fingerprint(str(pkg))
        assert want.encode() in entry.read_bytes()
        memo.code_fingerprint.cache_clear()
        read: list[str] = []
        real_open = os.open
        monkeypatch.setattr(os, "open", lambda p, *a, **k: read.append(str(p)) or real_open(p, *a, **k))
        assert memo.lookup(cache, snap_of(root)) is not None
        assert not [p for p in read if p.startswith(str(pkg))]  # the code's files were not read
    finally:
        memo.code_fingerprint.cache_clear()
