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
- ``changed``: any byte of the input files changed, or a file appeared among them;
- the peak resident memory of the children (``peak_rss_bytes``, and per target) and the inputs run
  per target (``per_target``). Each child runs with stdin from ``/dev/null`` and its address space
  limited to :data:`CHILD_LIMIT_AS`.

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

from hostilegen import (
    litdata_chunk,
    litdata_index,
    mds_bytes,
    mds_cfg,
    mds_index,
    megatron_pair,
    tar_bytes,
    write_tokenizer,
)

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
    # the binary layouts (seeds written from the writers' layouts by hostilegen)
    ("mds", "mds2/shard.00000.mds"),
    ("mds_zstd", "mdz/shard.00000.mds.zstd"),
    ("mds_config", "mdc/config.json"),
    ("wds_tar", "wds/s.tar"),
    ("wds_targz", "wdz/s.tar.gz"),
    ("litdata_chunk", "lit/chunk-0-0.bin"),
    ("litdata_index", "lit/index.json"),
    ("megatron_bin", "meg/x.bin"),
    ("megatron_idx", "meg/x.idx"),
    # trace logs, ledgers, chat templates, config values
    ("trace_jsonl", "logs/log.jsonl"),
    ("trace_hf_state", "logs/trainer_state.json"),
    ("trace_text", "logs/train.log"),
    ("ledger_gz", "led/data-indices/rank0.tsv.gz"),
    ("ledger_tsv", "led2/data-indices/rank0.tsv"),
    ("chat_template", "tok/tokenizer_config.json"),
    ("dataset_card", "card/README.md"),
    ("config_toml", "cfg/datacheck.toml"),
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
    _new_format_seeds(root)
    out = root / ".." / "seed-out"
    if main(["index", "build", str(d), "-o", str(user / "index.json")]) != 0:
        raise RuntimeError("seed index build failed")
    if main(["audit", str(d), "--report-dir", str(out), "--output", str(user / "report.json"), "--no-cache",
             "--fail-on", "never"]) != 0:
        raise RuntimeError("seed audit failed")


def build_mds_config(case: Path) -> None:
    """``mdc/shard.00000.mds`` assembled around the (mutated) ``mdc/config.json``, which is removed:
    the MDS reader's config JSON as a text input of its own."""
    cfg = (case / "mdc" / "config.json").read_bytes()
    (case / "mdc" / "shard.00000.mds").write_bytes(mds_bytes(cfg, _MDS_SAMPLES))
    (case / "mdc" / "config.json").unlink()


#: the samples of the MDS seeds (text, int64, json, dynamic-shape uint8 ndarray)
_MDS_SAMPLES: list[list[bytes]] = []


def struct_i64(i: int) -> bytes:
    import struct

    return struct.pack("<q", i)


def _new_format_seeds(root: Path) -> None:
    """Valid seeds of MDS, WebDataset, litdata, Megatron, trace logs, ledgers, a chat template and a
    config (the formats the readers added after the first fuzz rounds)."""
    import zstandard

    global _MDS_SAMPLES
    _MDS_SAMPLES = [[b"row %d" % i, struct_i64(i), b'{"k": [%d]}' % i, bytes([1 << 2 | 0, 3, 9, 1, 2, 3])]
                    for i in range(4)]
    names, encs = ["text", "n", "meta", "ids"], ["str", "int64", "json", "ndarray"]
    cfg = mds_cfg(names, encs, [None, 8, None, None])
    shard = mds_bytes(cfg, _MDS_SAMPLES, [None, 8, None, None])
    for folder, name, data in (("mds2", "shard.00000.mds", shard),
                               ("mdz", "shard.00000.mds.zstd", zstandard.ZstdCompressor().compress(shard))):
        (root / folder).mkdir()
        (root / folder / name).write_bytes(data)
        (root / folder / "index.json").write_bytes(mds_index([(name, 4, len(data))]))
    (root / "mdc").mkdir()
    (root / "mdc" / "config.json").write_text(json.dumps(cfg))
    (root / "wds").mkdir()
    members = [(f"s{i:03d}.{ext}", val) for i in range(4) for ext, val in
               (("txt", f"text {i}".encode()), ("json", json.dumps({"a": i, "b": [i, i]}).encode()),
                ("cls", str(i % 2).encode()), ("json.gz", gzip.compress(b'{"z": 1}')))]
    (root / "wds" / "s.tar").write_bytes(tar_bytes(members))
    (root / "wdz").mkdir()
    (root / "wdz" / "s.tar.gz").write_bytes(gzip.compress(tar_bytes(members)))
    (root / "lit").mkdir()
    chunk = litdata_chunk([[struct_i64(i), f"item {i}".encode()] for i in range(3)])
    (root / "lit" / "chunk-0-0.bin").write_bytes(chunk)
    (root / "lit" / "index.json").write_bytes(litdata_index([("chunk-0-0.bin", 3, len(chunk))], ["int", "str"]))
    (root / "meg").mkdir()
    megatron_pair(root / "meg", [[1, 2, 3], [4, 5], [6, 7, 8, 9]])
    (root / "logs").mkdir()
    (root / "logs" / "log.jsonl").write_text("".join(
        json.dumps({"step": s, "loss": 2.0 - s / 50 + (3.0 if s == 30 else 0.0), "grad_norm": 1.0, "lr": 1e-4,
                    "rank": s % 2}) + "\n" for s in range(40)))
    (root / "logs" / "trainer_state.json").write_text(json.dumps({
        "global_step": 20, "logging_steps": 1, "log_history": [
            {"step": s, "loss": 2.0 - s / 50, "grad_norm": float("nan") if s == 12 else 1.0, "learning_rate": 1e-4,
             "epoch": s / 20} for s in range(1, 21)] + [{"step": 20, "eval_loss": 1.5}]}, indent=2))
    (root / "logs" / "train.log").write_text("".join(
        f"step {s}: loss {2.0 - s / 50:.4f} lr 0.0001 grad_norm 1.0\n" for s in range(30))
        + " iteration       31/    100 | lm loss: 1.500000E+00 | grad norm: 1.000 | number of skipped iterations:   0 |\n"
        # a line of each other line format, so a mutation lands in their patterns too
        + " --> TIME: 2023-04-11 10:21:54 -- STEP: 31/406 -- GLOBAL_STEP: 32\n     | > loss: 0.52  (0.61)\n\n"
        + " 16%|#6   | 33/313 [00:03<00:17, 15.2it/s]{'loss': 1.2, 'grad_norm': 1.0, 'epoch': 0.1}\n"
        + "[2024-01-01 10:00:00,123] [INFO] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536.0, "
          "reducing to 32768.0\n"
        + "Rank 0: unexpected result nan (message=found NaN in local grad norm) iteration 34:\n")
    rows = "".join(json.dumps({"text": f"r{i}", "input_ids": [i, i + 1], "labels": [i, i + 1]}) + "\n"
                   for i in range(8))
    for led, compress in (("led", True), ("led2", False)):
        (root / led / "data").mkdir(parents=True)
        (root / led / "data" / "a.jsonl").write_text(rows)
        (root / led / "datacheck.toml").write_text("[batch]\nbatch_size = 2\nworld_size = 1\nshuffle = false\n")
        body = ("#datacheck-ledger\t1\n#state\t" + json.dumps({"epoch": 0, "start_step": 0, "seed": 0,
                                                                 "sampler": "DistributedSampler"}) + "\n"
                + "".join(f"{s}\t0\t0\t0\t{2 * s}\t{2 * s + 1}\n" for s in range(4)))
        (root / led / "data-indices").mkdir()
        f = root / led / "data-indices" / ("rank0.tsv.gz" if compress else "rank0.tsv")
        f.write_bytes(gzip.compress(body.encode()) if compress else body.encode())
    (root / "chat").mkdir()
    conv = [{"role": "system", "content": "x"}, {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "a b"}]
    (root / "chat" / "a.jsonl").write_text("".join(json.dumps({"messages": conv}) + "\n" for _ in range(3)))
    write_tokenizer(root / "tok", "{% for m in messages %}{{ m.role }}: {% if m.role == 'assistant' %}"
                                  "{% generation %}{{ m.content }}</s>{% endgeneration %}{% else %}{{ m.content }}"
                                  "{% endif %}\n{% endfor %}")
    (root / "chat" / "datacheck.toml").write_text(f'[tokens]\ntokenizer = "{root / "tok"}"\n')
    (root / "cfg").mkdir()
    (root / "cfg" / "datacheck.toml").write_text(
        '[dataset]\nformat = "auto"\n\n[columns]\ntext = "text"\ninput_ids = "input_ids"\nlabels = "labels"\n\n'
        "[tokens]\nvocab_size = 100\npad_token_id = 0\neos_token_id = 1\nmax_seq_len = 16\n\n"
        "[batch]\nbatch_size = 2\nworld_size = 2\ngrad_accum = 2\nepochs = 2\nseed = 3\n\n"
        "[sft]\nresponse_template_ids = [5, 6]\n\n[labels]\nignore_index = -100\n\n[report]\nmax_examples = 5\n")
    (root / "cfg" / "data").mkdir()
    (root / "cfg" / "data" / "a.jsonl").write_text(rows)
    # a dataset card whose configs name the splits (datacheck/io/cardsplits.py), two of them by a glob
    for split, part in (("train", "sft/a.jsonl"), ("test", "holdout/b.jsonl"), ("train", "sft/deep/c.jsonl")):
        (root / "card" / part).parent.mkdir(parents=True, exist_ok=True)
        (root / "card" / part).write_text(rows if split == "train" else rows.replace('"r1"', '"held"'))
    (root / "card" / "README.md").write_text(
        "---\nlicense: mit\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n    path:\n"
        "    - sft/*.jsonl\n    - sft/**/c.jsonl\n  - split: test\n    path: holdout/[ab].jsonl\n  default: true\n"
        "- config_name: other\n  data_dir: sft\n  data_files: '*.jsonl'\n---\n# a card\n")


# ------------------------------------------------------------------------------------------ mutations
def _digits(rng: random.Random) -> bytes:
    return str(rng.choice([9, 1])).encode() * rng.choice([400, 4301, 5000, 20000])


def mutate(data: bytes, rng: random.Random, text_like: bool) -> bytes:
    """One seeded mutant of ``data``: byte flips, truncation, inserted/duplicated/zeroed runs, and for
    text formats deep nesting, huge integers, very long fields, stray quotes, invalid UTF-8 and a short
    run of the input repeated over a long line."""
    b = bytearray(data)
    kinds = ["flip", "flip", "flip", "truncate", "insert", "dup", "zero", "ff"]
    if text_like:
        kinds += ["nest", "nest_obj", "digits", "long", "quote", "utf8", "brackets", "repeat"]
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
        elif k == "repeat" and n:  # a short run of the input repeated over a long line: a pattern
            # retried from every position takes quadratic time there
            j = rng.randrange(n)
            run = bytes(b[j:j + rng.randint(1, 24)]).replace(b"\n", b" ")
            b[i:i] = run * (rng.choice([50_000, 200_000]) // len(run))
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


#: address space of each fuzzed child (bytes): a memory bomb fails there (a traceback or a signal,
#: both counted) instead of taking the machine
CHILD_LIMIT_AS = 4 << 30


def _child(fn, out_path: Path, err_path: Path, limit_as: int | None = None) -> None:
    """In a forked child: stdout/stderr to files, stdin from /dev/null (a prompt reads EOF), the
    address space limited to ``limit_as`` bytes, run ``fn() -> int``, exit with it (never returns)."""
    rc = 98
    try:
        if limit_as:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))
        fi = os.open(os.devnull, os.O_RDONLY)
        os.dup2(fi, 0)
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
    if target.startswith("trace_"):
        return ["trace", str(case / rel), "--format", "json"]
    if target.startswith("ledger_"):
        led = case / rel.split("/")[0]
        return ["plan", str(led / "data"), "--config", str(led / "datacheck.toml"), "--ledger", str(led), "--step", "1",
                "--format", "json"]
    if target == "chat_template":
        return ["audit", str(case / "chat"), "--config", str(case / "chat" / "datacheck.toml"), *rd]
    if target == "config_toml":
        return ["audit", str(case / "cfg" / "data"), "--config", str(case / "cfg" / "datacheck.toml"), *rd]
    if rel.startswith(("hf/", "mds/", "mds2/", "mdz/", "mdc/", "wds/", "wdz/", "lit/", "meg/", "card/")):
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
    if target == "mds_config":
        build_mds_config(case)
    return _snapshot(case), _command(target, rel, case, work)


#: files mutated as bytes only (no text mutations: nesting, digits, quotes)
_BINARY_SUFFIXES = (".parquet", ".arrow", ".gz", ".zst", ".zstd", ".mds", ".tar", ".bin", ".idx")


def mutants(n: int, seed: int, seeds: Path, targets: list[tuple[str, str]] | None = None):
    """The fixed corpus: ``n`` seeded mutants cycling over ``targets`` (:data:`TARGETS`), as (index,
    target, relative path, mutated bytes of that file of ``seeds``). They depend only on ``seed``,
    ``n``, the targets and the seed files (a target added changes every mutant after its first one:
    an earlier campaign's inputs are made again with the targets it had)."""
    targets = TARGETS if targets is None else targets
    rng = random.Random(seed)
    for k in range(n):
        target, rel = targets[k % len(targets)]
        data = (seeds / rel).read_bytes()
        yield k, target, rel, mutate(data, rng, not rel.endswith(_BINARY_SUFFIXES))


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


#: the modules every child would import again (seconds each: the audit verb and its checks, pandera)
PRELOAD = ("datacheck.cli.commands.audit", "datacheck.cli.commands.plan", "datacheck.cli.commands.trace",
           "datacheck.cli.commands.index", "datacheck.cli.commands.report", "pandera.polars")


def preload() -> None:
    """Import :data:`PRELOAD` in the server (imports only: no polars query runs, so no engine thread
    exists to be copied into a child), so that each forked child starts with them."""
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional extra not installed: its children import (and report) it
            pass


def fuzz(n: int, seed: int, workdir: Path, timeout: float = 60.0, jobs: int = 2, keep_failures: bool = True,
         max_seconds: float | None = None) -> dict:
    """Run ``n`` seeded mutants (cycling over :data:`TARGETS`), ``jobs`` children at a time, and return
    the counts and the failures. The mutants are :func:`mutants`'s. With ``max_seconds`` no input starts
    after that many seconds (``counts["inputs"]`` says how many ran)."""
    from datacheck.cli.main import main  # imported once in the server; no polars query runs here

    preload()

    workdir = Path(workdir)
    seeds = workdir / "seed"
    rc, hung = run_forked(lambda: (make_seeds(seeds), 0)[1], 300, workdir / "seed.out", workdir / "seed.err")
    if rc != 0:
        raise RuntimeError(f"seed case failed (rc {rc}): {(workdir / 'seed.err').read_text()[-3000:]}")
    corpus = mutants(n, seed, seeds)
    counts: dict = {"inputs": 0, "traceback": 0, "crash": 0, "hang": 0, "changed": 0, "exit": {},
                    "peak_rss_bytes": 0, "per_target": {}, "peak_rss_by_target": {}}
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
                _child(lambda argv=argv: main(argv), work / "out", work / "err", CHILD_LIMIT_AS)
            active[pid] = (k, target, slot, case, work, before, argv, time.monotonic() + timeout)
        for pid in list(active):
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                rss = usage.ru_maxrss * 1024  # Linux: KiB
                counts["peak_rss_bytes"] = max(counts["peak_rss_bytes"], rss)
                tgt = active[pid][1]
                counts["per_target"][tgt] = counts["per_target"].get(tgt, 0) + 1
                counts["peak_rss_by_target"][tgt] = max(counts["peak_rss_by_target"].get(tgt, 0), rss)
                finish(pid, status)
            elif time.monotonic() > active[pid][7]:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                tgt = active[pid][1]
                counts["per_target"][tgt] = counts["per_target"].get(tgt, 0) + 1
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
