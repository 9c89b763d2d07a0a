"""Seeded fuzzing of every input datacheck reads: each shard format the readers accept
(parquet, Arrow IPC file and stream, JSONL plain/.gz/.zst, CSV, TSV) and each metadata or user file
(Hugging Face ``state.json`` / ``dataset_info.json``, MosaicML ``index.json``, a data index for
``index verify``, a YAML schema for ``--schema``, a report for ``datacheck report``).

Every input runs in its own process, forked from a server that has imported datacheck but never run a
polars query (so no engine thread is copied into a child): a native crash, a hang or a leaked file of
one input cannot hide the others. Per input it records:

- ``traceback``: an exit code outside {0, 1, 2}, or "Traceback"/"internal error" on stderr;
- ``crash``: a child killed by a signal (SIGSEGV, SIGBUS, SIGABRT, the OOM killer);
- ``hang``: no exit within the timeout (the child is killed);
- ``changed``: any byte of the input files changed, or a file appeared among them.

Run as a script: ``python tests/helpers/fuzzlib.py N SEED OUT.json [TIMEOUT_S] [JOBS]`` writes the counts
and the failing inputs (kept under ``OUT.json``'s folder as ``fail-*``).
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

#: (target name, the file mutated, relative to the case folder)
TARGETS = [
    ("parquet", "d/train-00000-of-00001.parquet"),
    ("arrow_file", "d/shard.arrow"),
    ("arrow_stream", "hf/data-00000-of-00001.arrow"),
    ("hf_state", "hf/state.json"),
    ("hf_info", "hf/dataset_info.json"),
    ("jsonl", "d/a.jsonl"),
    ("jsonl_gz", "d/b.jsonl.gz"),
    ("jsonl_zst", "d/c.jsonl.zst"),
    ("csv", "d/e.csv"),
    ("tsv", "d/f.tsv"),
    ("mosaic_index", "mds/index.json"),
    ("data_index", "user/index.json"),
    ("schema_yaml", "user/schema.yaml"),
    ("report", "user/report.json"),
]


def make_seeds(root: Path) -> None:
    """Write the valid seed case under ``root`` (polars/pyarrow run here: call it in a child)."""
    import polars as pl
    import pyarrow as pa
    import zstandard

    from datacheck.cli.main import main

    d, hf, mds, user = (root / n for n in ("d", "hf", "mds", "user"))
    for p in (d, hf, mds, user):
        p.mkdir(parents=True)
    df = pl.DataFrame({"text": ["a b", "c", "d e f", ""], "label": [0, 1, 1, 0],
                       "input_ids": [[1, 2], [3], [4, 5, 6], []]})
    df.write_parquet(d / "train-00000-of-00001.parquet")
    t = pa.table({"ids": pa.array([[[1, 2], [3]], [[4]], [[5, 6, 7]], []], pa.list_(pa.list_(pa.int64()))),
                  "text": ["x", "yy", "zzz", "w"], "label": [0, 1, 0, 1]})
    with pa.OSFile(str(d / "shard.arrow"), "wb") as f, pa.ipc.new_file(f, t.schema) as w:
        w.write_table(t)
    with pa.OSFile(str(hf / "data-00000-of-00001.arrow"), "wb") as f, pa.ipc.new_stream(f, t.schema) as w:
        w.write_table(t)
    (hf / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}],
                                               "_split": "train", "_fingerprint": "f0"}, indent=2))
    (hf / "dataset_info.json").write_text(json.dumps({"splits": {"train": {"name": "train", "num_examples": 4}},
                                                      "features": {"text": {"dtype": "string"}}}, indent=2))
    lines = "".join(json.dumps({"text": f"row {i}", "label": i % 2, "ids": [i, [i + 1, {"k": [i]}]]}) + "\n"
                    for i in range(6))
    (d / "a.jsonl").write_text(lines)
    (d / "b.jsonl.gz").write_bytes(gzip.compress(lines.encode()))
    (d / "c.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(lines.encode()))
    (d / "e.csv").write_text('text,label\n"a, quoted",0\nplain,1\n"multi\nline",0\n')
    (d / "f.tsv").write_text("text\tlabel\nx\t0\ny\t1\n")
    (mds / "shard.00000.jsonl").write_text(lines)
    (mds / "index.json").write_text(json.dumps({"version": 2, "shards": [
        {"raw_data": {"basename": "shard.00000.jsonl", "bytes": len(lines), "hashes": {}}, "samples": 6,
         "format": "json", "column_names": ["text"], "column_encodings": ["str"]}]}))
    (user / "schema.yaml").write_text(
        "schema_type: polars_dataframe\napi: polars\nname: fz\ncolumns:\n  text: {dtype: String, nullable: true}\n"
        "  label: &lab {nullable: false}\ndatacheck:\n  version: 1\n  columns:\n    label: {kind: [integer]}\n")
    out = root / ".." / "seed-out"
    if main(["index", "build", str(d), "-o", str(user / "index.json")]) != 0:
        raise RuntimeError("seed index build failed")
    if main(["audit", str(d), "--report-dir", str(out), "--output", str(user / "report.json"), "--no-cache",
             "--fail-on", "never"]) != 0:
        raise RuntimeError("seed audit failed")


# ------------------------------------------------------------------------------------------ mutations
def _digits(rng: random.Random) -> bytes:
    return str(rng.choice([9, 1])).encode() * rng.choice([400, 4301, 5000, 20000])


def mutate(data: bytes, rng: random.Random, text_like: bool) -> bytes:
    """One seeded mutant of ``data``: byte flips, truncation, inserted/duplicated/zeroed runs, and for
    text formats deep nesting, huge integers, very long fields, stray quotes and invalid UTF-8."""
    b = bytearray(data)
    kinds = ["flip", "flip", "flip", "truncate", "insert", "dup", "zero", "ff"]
    if text_like:
        kinds += ["nest", "nest_obj", "digits", "long", "quote", "utf8", "brackets"]
    for _ in range(rng.randint(1, 3)):
        k = rng.choice(kinds)
        n = len(b)
        i = rng.randrange(n + 1) if n else 0
        if k == "flip" and n:
            for _ in range(rng.randint(1, 8)):
                j = rng.randrange(n)
                b[j] = rng.randrange(256)
        elif k == "truncate":
            del b[i:]
        elif k == "insert":
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
        elif k == "dup" and n:
            j = rng.randrange(n)
            b[i:i] = b[j:j + rng.randint(1, 512)]
        elif k in ("zero", "ff") and n:
            b[i:i + rng.randint(1, 64)] = (b"\x00" if k == "zero" else b"\xff") * rng.randint(1, 64)
        elif k == "nest":
            d = rng.choice([63, 65, 600, 1000, 5000])
            b[i:i] = b"[" * d + b"]" * d
        elif k == "nest_obj":
            d = rng.choice([65, 400, 600])
            b[i:i] = b'{"a":' * d + b"1" + b"}" * d
        elif k == "digits":
            b[i:i] = _digits(rng)
        elif k == "long":
            b[i:i] = b"x" * rng.choice([131_073, 300_000])
        elif k == "quote":
            b[i:i] = rng.choice([b'"', b"\\", b'\\"', b"\n", b"\r", b"\t", b","])
        elif k == "utf8":
            b[i:i] = rng.choice([b"\xc3", b"\xff\xfe", b"\xed\xa0\x80", b"\xef\xbb\xbf"])
        elif k == "brackets":
            b[i:i] = rng.choice([b"[", b"]", b"{", b"}", b"]]]]", b"[[[["])
    return bytes(b)


# ------------------------------------------------------------------------------------------ running
def _snapshot(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[p.relative_to(root).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _child(fn, out_path: Path, err_path: Path) -> None:
    """In a forked child: stdout/stderr to files, run ``fn() -> int``, exit with it (never returns)."""
    rc = 98
    try:
        fo = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        fe = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fo, 1)
        os.dup2(fe, 2)
        rc = fn()
    except BaseException:  # noqa: BLE001 - the child reports everything as a traceback
        import traceback

        traceback.print_exc()
        rc = 97
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(rc if isinstance(rc, int) else 96)


def run_forked(fn, timeout: float, out_path: Path, err_path: Path) -> tuple[int | None, bool]:
    """Run ``fn() -> int`` in a forked child (stdout/stderr to files). (exit code, negative for a
    signal, None when it hung; hung)."""
    pid = os.fork()
    if pid == 0:
        _child(fn, out_path, err_path)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), False
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None, True
        time.sleep(0.005)


def _command(target: str, rel: str, case: Path, work: Path) -> list[str]:
    rd = ["--report-dir", str(work / "reports"), "--no-cache", "--format", "json"]
    if target == "data_index":
        return ["index", "verify", str(case / "d"), "--index", str(case / "user" / "index.json"), "--format", "json"]
    if target == "schema_yaml":
        return ["audit", str(case / "d" / "e.csv"), "--schema", str(case / "user" / "schema.yaml"), *rd]
    if target == "report":
        return ["report", str(case / "user" / "report.json"), "--format", "json"]
    if rel.startswith(("hf/", "mds/")):
        return ["audit", str(case / rel.split("/")[0]), *rd]
    return ["audit", str(case / rel), *rd]


def _lay_out(seeds: Path, case: Path, work: Path, target: str, rel: str, data: bytes) -> tuple[dict[str, str], list[str]]:
    """A fresh copy of the seed data in ``case`` with the mutant written at ``rel``, an empty ``work``
    folder for outputs; the snapshot of ``case`` before the run and the command to run on it."""
    shutil.rmtree(case, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(seeds, case, symlinks=True)
    work.mkdir()
    (case / rel).write_bytes(data)
    return _snapshot(case), _command(target, rel, case, work)


def mutants(n: int, seed: int, seeds: Path):
    """The fixed corpus: ``n`` seeded mutants cycling over :data:`TARGETS`, as (index, target, relative
    path, mutated bytes of that file of ``seeds``). They depend only on ``seed``, ``n`` and the seed files."""
    rng = random.Random(seed)
    for k in range(n):
        target, rel = TARGETS[k % len(TARGETS)]
        data = (seeds / rel).read_bytes()
        yield k, target, rel, mutate(data, rng, not rel.endswith((".parquet", ".arrow", ".gz", ".zst")))


def _kind(rc: int | None, err: str, changed: bool) -> str | None:
    """What went wrong with one input (None: nothing): hang, crash, traceback or changed."""
    if rc is None:
        return "hang"
    if rc < 0:
        return "crash"
    if rc not in (0, 1, 2) or "Traceback" in err or "internal error" in err:
        return "traceback"
    return "changed" if changed else None


def fuzz_in_process(n: int, seed: int, workdir: Path, run) -> dict:
    """The corpus of :func:`mutants` run in this process: ``run(argv) -> (exit code, stderr)`` runs the
    CLI (a native crash or a hang would stop the caller: those are :func:`fuzz`'s to catch). Returns
    the counts and failures of :func:`fuzz` (``crash`` and ``hang`` are then always 0)."""
    workdir = Path(workdir)
    seeds = workdir / "seed"
    make_seeds(seeds)
    counts: dict = {"inputs": 0, "traceback": 0, "crash": 0, "hang": 0, "changed": 0, "exit": {}}
    failures = []
    started = time.monotonic()
    for k, target, rel, data in mutants(n, seed, seeds):
        case, work = workdir / "case", workdir / "work"
        before, argv = _lay_out(seeds, case, work, target, rel, data)
        rc, err = run(argv)
        kind = _kind(rc, err, _snapshot(case) != before)
        counts["inputs"] += 1
        counts["exit"][str(rc)] = counts["exit"].get(str(rc), 0) + 1
        if kind:
            counts[kind] += 1
            failures.append({"index": k, "target": target, "kind": kind, "rc": rc, "argv": argv, "stderr": err[-1500:]})
    counts["seconds"] = round(time.monotonic() - started, 1)
    return {"counts": counts, "failures": failures}


def fuzz(n: int, seed: int, workdir: Path, timeout: float = 60.0, jobs: int = 2, keep_failures: bool = True,
         max_seconds: float | None = None) -> dict:
    """Run ``n`` seeded mutants (cycling over :data:`TARGETS`), ``jobs`` children at a time, and return
    the counts and the failures. The mutants are :func:`mutants`'s. With ``max_seconds`` no input starts
    after that many seconds (``counts["inputs"]`` says how many ran)."""
    from datacheck.cli.main import main  # imported once in the server; no polars query runs here

    workdir = Path(workdir)
    seeds = workdir / "seed"
    rc, hung = run_forked(lambda: (make_seeds(seeds), 0)[1], 300, workdir / "seed.out", workdir / "seed.err")
    if rc != 0:
        raise RuntimeError(f"seed case failed (rc {rc}): {(workdir / 'seed.err').read_text()[-3000:]}")
    corpus = mutants(n, seed, seeds)
    counts: dict = {"inputs": 0, "traceback": 0, "crash": 0, "hang": 0, "changed": 0, "exit": {}}
    failures = []
    started = time.monotonic()
    active: dict[int, tuple] = {}  # pid -> (k, target, slot, case, work, before, argv, deadline)
    free = list(range(jobs))

    def finish(pid: int, status: int | None) -> None:
        k, target, slot, case, work, before, argv, _ = active.pop(pid)
        hung = status is None
        rc = None if hung else os.waitstatus_to_exitcode(status)
        err = (work / "err").read_text(errors="replace")
        kind = _kind(rc, err, not hung and _snapshot(case) != before)
        counts["inputs"] += 1
        counts["exit"][str(rc)] = counts["exit"].get(str(rc), 0) + 1
        if kind:
            counts[kind] += 1
            item = {"index": k, "target": target, "kind": kind, "rc": rc, "argv": argv, "stderr": err[-1500:]}
            if keep_failures:
                keep = workdir / f"fail-{k:05d}-{target}"
                shutil.rmtree(keep, ignore_errors=True)
                shutil.copytree(case, keep, symlinks=True)
                item["kept"] = str(keep)
            failures.append(item)
        free.append(slot)

    pending = True
    while pending or active:
        while pending and free:
            if max_seconds is not None and time.monotonic() - started > max_seconds:
                pending = False
                break
            item = next(corpus, None)
            if item is None:
                pending = False
                break
            k, target, rel, data = item
            slot = free.pop()
            case, work = workdir / f"case{slot}", workdir / f"work{slot}"
            before, argv = _lay_out(seeds, case, work, target, rel, data)
            pid = os.fork()
            if pid == 0:
                _child(lambda argv=argv: main(argv), work / "out", work / "err")
            active[pid] = (k, target, slot, case, work, before, argv, time.monotonic() + timeout)
        for pid in list(active):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                finish(pid, status)
            elif time.monotonic() > active[pid][7]:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                finish(pid, None)
        time.sleep(0.005)
    counts["seconds"] = round(time.monotonic() - started, 1)
    return {"counts": counts, "failures": failures}


if __name__ == "__main__":
    n, seed, out = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
    timeout = float(sys.argv[4]) if len(sys.argv) > 4 else 60.0
    jobs = int(sys.argv[5]) if len(sys.argv) > 5 else 2
    wd = Path(tempfile.mkdtemp(prefix="datacheck-fuzz-", dir=out.parent))
    res = fuzz(n, seed, wd, timeout, jobs)
    res["workdir"] = str(wd)
    out.write_text(json.dumps(res, indent=2))
    print(json.dumps(res["counts"]))
