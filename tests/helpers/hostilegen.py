"""Hostile inputs for the readers added after the first fuzz rounds (MDS, WebDataset, litdata,
trace logs, ledgers, chat templates, config values), each built from scratch in a folder: a
function ``build(root: Path) -> argv`` lays out the data under ``root/data`` (and, where the case
needs one, a config or log beside it) and returns the CLI arguments that read it.

Used by tests/e2e/robustness/test_hostile_round3.py (each case a regression test run in a
memory-limited subprocess) and by :mod:`fuzzlib` (valid seeds of these formats to mutate).

Byte layouts written here (from the writers' sources, not from datacheck's readers):

- MDS (``streaming/base/format/mds/writer.py``): ``uint32 N``, ``uint32[N+1]`` sample offsets from
  the start of the file, the config JSON, then per sample a ``uint32`` size per variable-size column
  followed by the columns' bytes;
- litdata chunk (``litdata/streaming/writer.py``): ``uint32 N``, ``uint32[N+1]`` item offsets,
  then per item a ``uint32`` size per field followed by the fields' bytes;
- tar members (POSIX ustar / GNU / pax, as ``tarfile`` writes them, patched where a case needs a
  header ``tarfile`` would not write).
"""
from __future__ import annotations

import gzip
import io
import json
import os
import struct
import tarfile
import zlib
from pathlib import Path
from typing import Any, Callable

import numpy as np

__all__ = ["CASES", "mds_bytes", "litdata_chunk", "tar_bytes", "write_tokenizer"]


# ----------------------------------------------------------------------------------------- writers
def mds_bytes(cfg: Any, samples: list[list[bytes]], sizes: list[int | None] | None = None) -> bytes:
    """An MDS shard: ``cfg`` (a dict, dumped as JSON, or raw bytes) and ``samples`` (the column bytes of
    each sample); ``sizes`` (the config's ``column_sizes``, None = all variable) says which columns get
    a size prefix."""
    raw = cfg if isinstance(cfg, bytes) else json.dumps(cfg).encode()
    n = len(samples)
    bodies = []
    for s in samples:
        szs = sizes if sizes is not None else [None] * len(s)
        head = b"".join(struct.pack("<I", len(v)) for v, sz in zip(s, szs) if sz is None)
        bodies.append(head + b"".join(s))
    start = 4 * (n + 2) + len(raw)
    offs = [start]
    for b in bodies:
        offs.append(offs[-1] + len(b))
    return struct.pack("<I", n) + struct.pack(f"<{n + 1}I", *offs) + raw + b"".join(bodies)


def mds_cfg(names: list[Any], encs: list[Any], sizes: list[Any] | None = None) -> dict[str, Any]:
    return {"column_names": names, "column_encodings": encs, "column_sizes": sizes or [None] * len(names),
            "compression": None, "format": "mds", "hashes": [], "size_limit": 1 << 26, "version": 2}


def mds_index(shards: list[tuple[str, int, int]]) -> bytes:
    """A MosaicML ``index.json`` naming ``(basename, samples, bytes)`` shards (no hashes)."""
    return json.dumps({"version": 2, "shards": [
        {"column_names": ["text"], "column_encodings": ["str"], "column_sizes": [None], "compression": None,
         "format": "mds", "hashes": [], "raw_data": {"basename": b, "bytes": nb, "hashes": {}}, "samples": ns,
         "size_limit": 1 << 26, "version": 2, "zip_data": None} for b, ns, nb in shards]}).encode()


def litdata_chunk(items: list[list[bytes]]) -> bytes:
    n = len(items)
    bodies = [b"".join(struct.pack("<I", len(f)) for f in it) + b"".join(it) for it in items]
    offs = [4 * (n + 2)]
    for b in bodies:
        offs.append(offs[-1] + len(b))
    return struct.pack("<I", n) + struct.pack(f"<{n + 1}I", *offs) + b"".join(bodies)


def litdata_index(chunks: list[tuple[str, int, int]], data_format: list[str]) -> bytes:
    return json.dumps({"chunks": [{"chunk_bytes": nb, "chunk_size": n, "filename": f, "dim": None}
                                  for f, n, nb in chunks],
                       "config": {"compression": None, "chunk_size": 2, "chunk_bytes": None,
                                  "data_format": data_format, "data_spec": None}}).encode()


def tar_bytes(members: list[tuple[str, bytes]], fmt: int = tarfile.USTAR_FORMAT) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        for name, data in members:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def _checksum(block: bytearray) -> None:
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)


def gnu_sparse_tar(real_size: int) -> bytes:
    """A tar of one GNU sparse member (``typeflag 'S'``) whose header declares ``real_size`` bytes
    made of one 512-byte data block at the end and a hole before it: 3 blocks on disk."""
    head = bytearray(tarfile.TarInfo("0.txt").tobuf(tarfile.GNU_FORMAT))[:512]
    head[156:157] = b"S"
    head[124:136] = b"%011o\0" % 512  # the stored bytes
    head[386:398] = b"%011o\0" % (real_size - 512)  # sparse map entry 0: offset
    head[398:410] = b"%011o\0" % 512  # numbytes
    head[482:483] = b"\0"  # isextended
    head[483:495] = b"%011o\0" % real_size if real_size < 8 ** 11 else _base256(real_size, 12)
    _checksum(head)
    return bytes(head) + b"x" * 512 + b"\0" * 1024


def _base256(v: int, width: int) -> bytes:
    return bytes([0x80]) + v.to_bytes(width - 1, "big")


def pax_size_tar(size: int) -> bytes:
    """A tar whose member ``0.txt`` carries a pax ``size`` record of ``size`` bytes but holds 5."""
    rec = f"size={size}\n"
    rec = f"{len(rec) + len(str(len(rec) + 3)) + 1} {rec}"
    rec_len = len(rec)
    while True:  # the record's length counts its own digits
        line = f"{rec_len} size={size}\n"
        if len(line) == rec_len:
            break
        rec_len = len(line)
    pax = tarfile.TarInfo("././@PaxHeader")
    pax.type = tarfile.XHDTYPE
    pax.size = len(line)
    out = pax.tobuf(tarfile.USTAR_FORMAT) + line.encode().ljust(512, b"\0")
    ti = tarfile.TarInfo("0.txt")
    ti.size = 5
    return out + ti.tobuf(tarfile.USTAR_FORMAT) + b"hello".ljust(512, b"\0") + b"\0" * 1024


def zero_member_targz(path: Path, size: int, name: str = "0.bin") -> None:
    """A .tar.gz of one member of ``size`` zero bytes, gzip-streamed (never held whole)."""
    ti = tarfile.TarInfo(name)
    ti.size = size
    head = ti.tobuf(tarfile.GNU_FORMAT)
    co = zlib.compressobj(1, zlib.DEFLATED, 31)
    zeros = bytes(1 << 24)
    with open(path, "wb") as f:
        f.write(co.compress(head))
        left = size
        while left:
            k = min(left, len(zeros))
            f.write(co.compress(zeros[:k]))
            left -= k
        f.write(co.compress(b"\0" * ((-size) % 512 + 1024)))
        f.write(co.flush())


def zstd_zero_stream(path: Path, size: int, prefix: bytes = b"") -> None:
    import zstandard

    cctx = zstandard.ZstdCompressor(level=1)
    zeros = bytes(1 << 24)
    with open(path, "wb") as f, cctx.stream_writer(f, closefd=False) as w:
        w.write(prefix)
        left = size
        while left:
            k = min(left, len(zeros))
            w.write(zeros[:k])
            left -= k


def write_tokenizer(folder: Path, template: str | None, auto_map_marker: Path | None = None) -> None:
    """A word-level tokenizer folder (``tokenizers`` builds ``tokenizer.json``) with ``template`` as its
    chat template; with ``auto_map_marker``, ``tokenizer_config.json`` maps AutoTokenizer to a Python
    file of the folder that writes that marker when imported."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder.mkdir(parents=True, exist_ok=True)
    vocab = {w: i for i, w in enumerate(["[UNK]", "[PAD]", "<s>", "</s>", "a", "b", "hi", "user", "assistant",
                                         "system", "x", ":"])}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.save(str(folder / "tokenizer.json"))
    cfg: dict[str, Any] = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "pad_token": "[PAD]",
                           "eos_token": "</s>", "bos_token": "<s>"}
    if template is not None:
        cfg["chat_template"] = template
    if auto_map_marker is not None:
        (folder / "evil_tok.py").write_text(
            "from pathlib import Path\n"
            f"Path({str(auto_map_marker)!r}).write_text('ran')\n"
            "from transformers import PreTrainedTokenizerFast\n"
            "class EvilTokenizer(PreTrainedTokenizerFast):\n    pass\n")
        cfg["auto_map"] = {"AutoTokenizer": [None, "evil_tok.EvilTokenizer"]}
        cfg["tokenizer_class"] = "EvilTokenizer"
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))


# ------------------------------------------------------------------------------------------- cases
def _audit(root: Path, *extra: str) -> list[str]:
    return ["audit", str(root / "data"), "--report-dir", str(root / "reports"), "--no-cache", "--no-progress",
            "--format", "json", *extra]


def _data(root: Path) -> Path:
    d = root / "data"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _mds_case(cfg: Any, samples: list[list[bytes]], sizes: list[int | None] | None = None) -> Callable[[Path], list[str]]:
    def build(root: Path) -> list[str]:
        d = _data(root)
        raw = mds_bytes(cfg, samples, sizes)
        (d / "shard.00000.mds").write_bytes(raw)
        (d / "index.json").write_bytes(mds_index([("shard.00000.mds", len(samples), len(raw))]))
        return _audit(root)
    return build


def _mds_nested(root: Path) -> list[str]:
    d = _data(root)
    cfg = b'{"column_names": ["a"], "column_encodings": ["str"], "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    (d / "shard.00000.mds").write_bytes(mds_bytes(cfg, [[b"hi"]]))
    return _audit(root)


def _mds_zstd_bomb(root: Path) -> list[str]:
    d = _data(root)
    zstd_zero_stream(d / "shard.00000.mds.zstd", 3_000_000_000)
    return _audit(root)


def _wds(name: str, raw_or_fn: Any) -> Callable[[Path], list[str]]:
    def build(root: Path) -> list[str]:
        d = _data(root)
        if callable(raw_or_fn):
            raw_or_fn(d / name)
        else:
            (d / name).write_bytes(raw_or_fn)
        return _audit(root)
    return build


def _wds_ff_name() -> bytes:
    raw = bytearray(tar_bytes([("sample0.txt", b"hello"), ("sample1.txt", b"world")]))
    raw[6] = 0xFF  # the first name "sample0.txt" becomes "sample\xff.txt"
    head = raw[:512]
    _checksum(head)
    raw[:512] = head
    return bytes(raw)


def _litdata_nested(root: Path) -> list[str]:
    d = _data(root)
    (d / "chunk-0-0.bin").write_bytes(litdata_chunk([[b"a"], [b"b"]]))
    (d / "index.json").write_bytes(b'{"chunks": [], "config": {"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}")
    (d / "a.jsonl").write_text('{"text": "ok"}\n')
    return _audit(root)


def _fifo(name: str, extra: Callable[[Path], None] | None = None) -> Callable[[Path], list[str]]:
    def build(root: Path) -> list[str]:
        d = _data(root)
        (d / "ok.jsonl").write_text('{"text": "a"}\n{"text": "b"}\n')
        if extra is not None:
            extra(d)
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(d / name)
        return _audit(root)
    return build


def _litdata_beside(d: Path) -> None:
    (d / "lit").mkdir()
    (d / "lit" / "chunk-0-0.bin").write_bytes(litdata_chunk([[b"a"]]))


def _config_case(toml: str, verb: str = "audit") -> Callable[[Path], list[str]]:
    def build(root: Path) -> list[str]:
        d = _data(root)
        (d / "a.jsonl").write_text("".join(json.dumps({"text": f"row {i}", "input_ids": [1, 2, 3, i],
                                                       "labels": [1, 2, 3, i]}) + "\n" for i in range(8)))
        (root / "datacheck.toml").write_text(toml)
        if verb == "plan":
            return ["plan", str(d), "--config", str(root / "datacheck.toml"), "--format", "json"]
        return _audit(root, "--config", str(root / "datacheck.toml"))
    return build


def _rows_case(lines: list[str], toml: str = "") -> Callable[[Path], list[str]]:
    def build(root: Path) -> list[str]:
        d = _data(root)
        (d / "a.jsonl").write_text("".join(x + "\n" for x in lines))
        (root / "datacheck.toml").write_text(toml)
        return _audit(root, "--config", str(root / "datacheck.toml"))
    return build


def _trace(name: str, body: bytes | Callable[[Path], None], *extra: str) -> Callable[[Path], list[str]]:
    def build(root: Path) -> list[str]:
        d = _data(root)
        p = d / name
        if callable(body):
            body(p)
        else:
            p.write_bytes(body)
        return ["trace", str(p), "--format", "json", *extra]
    return build


def _jsonl_log(extra_line: str) -> bytes:
    lines = [json.dumps({"step": s, "loss": 2.0 - s / 100, "rank": 0}) for s in range(20)]
    return ("\n".join(lines[:10] + [extra_line] + lines[10:]) + "\n").encode()


def _hf_state(entry_extra: bytes) -> bytes:
    hist = b",".join(b'{"step": %d, "loss": %f}' % (s, 2.0 - s / 100) for s in range(1, 10))
    return b'{"global_step": 9, "log_history": [' + hist + b", " + entry_extra + b"]}"


def _huge_string_state(p: Path) -> None:
    with open(p, "wb") as f:
        f.write(b'{"global_step": 1, "log_history": [{"step": 1, "loss": 1.0}], "note": "')
        chunk = b"a" * (1 << 24)
        for _ in range(16):  # 256 MiB
            f.write(chunk)
        f.write(b'"}')


def _ledger(body: bytes | Callable[[Path], None], name: str = "rank0.tsv.gz") -> Callable[[Path], list[str]]:
    def build(root: Path) -> list[str]:
        d = _data(root)
        (d / "a.jsonl").write_text("".join(json.dumps({"text": f"r{i}"}) + "\n" for i in range(8)))
        led = root / "ledger" / "data-indices"
        led.mkdir(parents=True)
        p = led / name
        if callable(body):
            body(p)
        else:
            p.write_bytes(body)
        (root / "datacheck.toml").write_text("[batch]\nbatch_size = 2\n")
        return ["plan", str(d), "--config", str(root / "datacheck.toml"), "--ledger", str(root / "ledger"),
                "--step", "0", "--format", "json"]
    return build


def _state_ledger(state: bytes) -> bytes:
    return gzip.compress(b"#datacheck-ledger\t1\n#state\t" + state + b"\n0\t0\t0\t0\t1\t2\n")


def _newline_bomb(p: Path) -> None:
    co = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"\n" * (1 << 24)
    with open(p, "wb") as f:
        for _ in range(60):  # ~1e9 newlines
            f.write(co.compress(block))
        f.write(co.flush())


def _chat_case(template: str) -> Callable[[Path], list[str]]:
    def build(root: Path) -> list[str]:
        d = _data(root)
        conv = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "a b"}]
        (d / "a.jsonl").write_text("".join(json.dumps({"messages": conv}) + "\n" for _ in range(3)))
        write_tokenizer(root / "tok", template)
        (root / "datacheck.toml").write_text(f'[tokens]\ntokenizer = "{root / "tok"}"\n')
        return _audit(root, "--config", str(root / "datacheck.toml"))
    return build


def _found_config_tokenizer(root: Path) -> list[str]:
    """A datacheck.toml shipped inside the data names a tokenizer of the data whose config maps
    AutoTokenizer to a Python file (it writes ``root/ran`` when imported)."""
    d = _data(root)
    conv = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "a b"}]
    (d / "a.jsonl").write_text(json.dumps({"messages": conv}) + "\n")
    write_tokenizer(d / "tok", "{% for m in messages %}{{ m.content }}{% endfor %}", auto_map_marker=root / "ran")
    (d / "datacheck.toml").write_text('[tokens]\ntokenizer = "tok"\n')
    return ["audit", str(d), "--report-dir", str(root / "reports"), "--no-cache", "--no-progress", "--format", "json"]


def _found_config_outside(root: Path) -> list[str]:
    """A datacheck.toml shipped inside the data names a tokenizer outside its own folder."""
    d = _data(root)
    conv = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "a b"}]
    (d / "a.jsonl").write_text(json.dumps({"messages": conv}) + "\n")
    write_tokenizer(root / "tok", "{% for m in messages %}{{ m.content }}{% endfor %}")
    (d / "datacheck.toml").write_text('[tokens]\ntokenizer = "../tok"\n')
    return ["audit", str(d), "--report-dir", str(root / "reports"), "--no-cache", "--no-progress", "--format", "json"]


def _named_config_remote_code(root: Path) -> list[str]:
    """The same tokenizer named by a config the user passes: loaded, but never its code."""
    argv = _found_config_tokenizer(root)
    return [*argv, "--config", str(root / "data" / "datacheck.toml")]


def _schema_case(yaml_text: str, suffix: str = ".yaml") -> Callable[[Path], list[str]]:
    def build(root: Path) -> list[str]:
        d = _data(root)
        (d / "a.jsonl").write_text('{"text": "a", "label": 1}\n{"text": "b", "label": 0}\n')
        (root / f"schema{suffix}").write_text(yaml_text)
        return _audit(root, "--schema", str(root / f"schema{suffix}"))
    return build


def _fifo_user_file(kind: str) -> Callable[[Path], list[str]]:
    """A FIFO where the user names a file: ``--schema``, ``--config``, or the tokenizer.json of the
    config's tokenizer folder."""
    def build(root: Path) -> list[str]:
        d = _data(root)
        conv = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "a b"}]
        (d / "a.jsonl").write_text(json.dumps({"text": "a", "messages": conv}) + "\n")
        if kind == "schema":
            os.mkfifo(root / "schema.yaml")
            return _audit(root, "--schema", str(root / "schema.yaml"))
        if kind == "config":
            os.mkfifo(root / "datacheck.toml")
            return _audit(root, "--config", str(root / "datacheck.toml"))
        write_tokenizer(root / "tok", "{% for m in messages %}{{ m.content }}{% endfor %}")
        (root / "tok" / "tokenizer.json").unlink()
        os.mkfifo(root / "tok" / "tokenizer.json")
        (root / "datacheck.toml").write_text(f'[tokens]\ntokenizer = "{root / "tok"}"\n')
        return _audit(root, "--config", str(root / "datacheck.toml"))
    return build


_SCHEMA_HEAD = "schema_type: dataframe\nversion: 0.0.0\ncolumns:\n  text:\n    dtype: str\n"
CASES: dict[str, Callable[[Path], list[str]]] = {
    # MDS
    "mds_ndarray_O_fixed": _mds_case(mds_cfg(["x"], ["ndarray:O:2"], [16]), [[bytes(16)]], [16]),
    "mds_ndarray_O_dynamic": _mds_case(mds_cfg(["x"], ["ndarray:O"]), [[bytes([1 << 2 | 0, 2]) + bytes(16)]]),
    "mds_ndarray_xyz": _mds_case(mds_cfg(["x"], ["ndarray:xyz"]), [[b"\x05" + bytes(8)]]),
    "mds_encoding_int": _mds_case(mds_cfg(["x"], [5]), [[b"abc"]]),
    "mds_names_int": _mds_case(mds_cfg([5], ["str"]), [[b"abc"]]),
    "mds_sizes_abc": _mds_case(mds_cfg(["x"], ["str"], ["abc"]), [[b"abc"]], [None]),
    "mds_config_list": _mds_case(b"[1, 2]", [[b"abc"]]),
    "mds_config_nested": _mds_nested,
    "mds_zstd_bomb": _mds_zstd_bomb,
    # WebDataset
    "wds_gnu_sparse_3e9": _wds("s.tar", gnu_sparse_tar(3_000_000_000)),
    "wds_pax_size_1e12": _wds("s.tar", pax_size_tar(10 ** 12)),
    "wds_targz_zero_3e9": _wds("s.tar.gz", lambda p: zero_member_targz(p, 3_000_000_000, "0.txt")),
    "wds_name_0xff": _wds("s.tar", _wds_ff_name()),
    # litdata
    "litdata_index_nested": _litdata_nested,
    # FIFOs
    **{f"fifo_{n.replace('.', '_').replace('/', '_')}": _fifo(n) for n in
       ("x.jsonl", "x.parquet", "x.arrow", "x.csv", "shard.00000.mds", "x.tar")},
    "fifo_litdata_index": _fifo("lit/index.json", _litdata_beside),
    # config values
    "cfg_epochs_2p63": _config_case("[batch]\nbatch_size = 2\nepochs = 9223372036854775807\n"),
    "cfg_template_ids_100k": _config_case("[sft]\nresponse_template_ids = [" + ", ".join(["5"] * 100_000) + "]\n"),
    "cfg_batch_size_2p63": _config_case("[batch]\nbatch_size = 9223372036854775807\n", "plan"),
    "cfg_world_size_2p63": _config_case("[batch]\nbatch_size = 2\nworld_size = 9223372036854775807\n", "plan"),
    "cfg_index_nul": _config_case('[dataset]\nindex = "\\u0000"\n'),
    # values beyond int64
    "rows_input_ids_2p64": _rows_case(['{"input_ids": [1, 18446744073709551616], "labels": [1, 2]}',
                                       '{"input_ids": [1, 2, 1, 2, 1, 2], "labels": [1, 2, 1, 2, 1, 2]}'],
                                      "[tokens]\nvocab_size = 100\n"),
    "rows_attention_mask_1e400": _rows_case(['{"input_ids": [1, 2], "attention_mask": [1, 1e400]}',
                                             '{"input_ids": [1, 2], "attention_mask": [1, 1]}']),
    # trace logs
    "trace_rank_1e30": _trace("log.jsonl", _jsonl_log('{"step": 10, "loss": 1.5, "rank": 1' + "0" * 30 + "}")),
    "trace_jsonl_nested": _trace("log.jsonl", _jsonl_log('{"step": 10, "loss": ' + "[" * 100_000 + "]" * 100_000 + "}")),
    "trace_loss_400_digits": _trace("log.jsonl", _jsonl_log('{"step": 10, "loss": 1' + "0" * 400 + "}")),
    "trace_state_nested": _trace("trainer_state.json", _hf_state(b'{"step": 10, "x": ' + b"[" * 100_000
                                                                 + b"]" * 100_000 + b"}")),
    "trace_state_huge_string": _trace("trainer_state.json", _huge_string_state),
    "trace_fifo": _trace("log.jsonl", lambda p: os.mkfifo(p)),
    # ledgers
    "ledger_state_list": _ledger(_state_ledger(b"[1, 2]")),
    "ledger_state_string": _ledger(_state_ledger(b'"x"')),
    "ledger_state_nested": _ledger(_state_ledger(b"[" * 100_000 + b"]" * 100_000)),
    "ledger_state_start_step_5000": _ledger(_state_ledger(b'{"epoch": 0, "start_step": 1' + b"0" * 5000 + b"}")),
    "ledger_newline_bomb": _ledger(_newline_bomb),
    "ledger_dev_zero": _ledger(lambda p: os.symlink("/dev/zero", p), "rank0.tsv"),
    "ledger_fifo": _ledger(lambda p: os.mkfifo(p)),
    # chat templates and tokenizers
    "chat_range_nested": _chat_case("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}"
                                    "{% endfor %}"),
    "chat_string_3e9": _chat_case("{{ 'a' * 3000000000 }}"),
    "found_config_tokenizer": _found_config_tokenizer,
    "found_config_tokenizer_outside": _found_config_outside,
    "named_config_remote_code": _named_config_remote_code,
    "user_fifo_schema": _fifo_user_file("schema"),
    "user_fifo_config": _fifo_user_file("config"),
    "user_fifo_tokenizer": _fifo_user_file("tokenizer"),
    # user schemas of wrong types
    "schema_strict_yes_please": _schema_case(_SCHEMA_HEAD + "strict: yes_please\n"),
    "schema_kind_5": _schema_case(_SCHEMA_HEAD + "datacheck:\n  version: 1\n  columns:\n    label: {kind: 5}\n"),
    "schema_str_matches_bracket": _schema_case(_SCHEMA_HEAD + "    checks:\n      str_matches: '['\n"),
    "schema_json_kind_5": _schema_case(json.dumps({"schema_type": "dataframe", "columns": {"text": {"dtype": "str"}},
                                                   "datacheck": {"version": 1, "columns": {"label": {"kind": 5}}}}),
                                       ".json"),
}


def megatron_pair(folder: Path, docs: list[list[int]]) -> None:
    """A Megatron ``MMIDIDX`` pair ``folder/x.idx`` + ``x.bin``, written from Megatron-LM's documented
    ``.idx`` layout: uint16 tokens (dtype code 8), one sequence per document. Creates ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    lens = np.array([len(d) for d in docs], dtype=np.int32)
    ptrs = np.concatenate([[0], np.cumsum(lens[:-1].astype(np.int64) * 2)]).astype(np.int64)
    doc = np.arange(len(docs) + 1, dtype=np.int64)
    (folder / "x.idx").write_bytes(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(docs), len(doc))
                                   + lens.tobytes() + ptrs.tobytes() + doc.tobytes())
    (folder / "x.bin").write_bytes(np.array([t for d in docs for t in d], dtype=np.uint16).tobytes())


# ------------------------------------------------------------------- round 4: today's additions
_MEG_BATCH = "[batch]\nbatch_size = 2\n"


def _meg_case(megatron: str, *, step: str = "0", docs: list[list[int]] | None = None,
              idx: Callable[[Path], None] | None = None, log: str | None = None) -> Callable[[Path], list[str]]:
    """A Megatron pair under ``root/data`` (``docs``, or the ``.idx`` that ``idx`` writes beside a
    small ``.bin``) planned at ``--step step`` with ``[megatron]`` ``megatron``; with ``log``, traced
    from that Megatron log instead (``trace LOG --data``)."""
    def build(root: Path) -> list[str]:
        d = _data(root)
        megatron_pair(d, docs or [[1 + (i * 7 + j) % 50 for j in range(5 + i % 9)] for i in range(40)])
        if idx is not None:
            idx(d / "x.idx")
        (root / "datacheck.toml").write_text(_MEG_BATCH + "[megatron]\n" + megatron)
        if log is not None:
            (root / "run.log").write_text(log)
            return ["trace", str(root / "run.log"), "--data", str(d / "x.bin"), "--config",
                    str(root / "datacheck.toml"), "--step", step, "--format", "json"]
        return ["plan", str(d / "x.bin"), "--config", str(root / "datacheck.toml"), "--step", step,
                "--format", "json"]
    return build


def _idx_header(p: Path, n_seq: int, n_doc: int, lens: bytes, ptrs: bytes, doc: bytes) -> None:
    p.write_bytes(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, n_seq, n_doc) + lens + ptrs + doc)


def _idx_lengths_past_int64(p: Path) -> None:
    """Every sequence 2**31 - 1 tokens long (5 of them: their sum passes int32, the .bin holds 10 bytes)."""
    n = 5
    _idx_header(p, n, n + 1, np.full(n, 2**31 - 1, dtype="<i4").tobytes(),
                (np.arange(n, dtype="<i8") * 2).tobytes(), np.arange(n + 1, dtype="<i8").tobytes())


def _idx_count_huge(p: Path) -> None:
    """A header declaring 2**40 sequences over a few bytes of arrays."""
    _idx_header(p, 2**40, 2**40 + 1, b"\x05\0\0\0" * 4, b"\0" * 16, b"\0" * 16)


def _megatron_log(consumed: list[int]) -> str:
    return "".join(f" iteration {i + 1:8d}/      20 | consumed samples: {c:12d} | elapsed time per iteration (ms): "
                   f"1.0 | learning rate: 1.000E-04 | global batch size:     2 | lm loss: {2.0 - i / 100:.6E} |"
                   " loss scale: 1.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
                   for i, c in enumerate(consumed))


def _lightning_csv(root: Path, body: bytes | Callable[[Path], None], extra: list[str] | None = None,
                   toml: str = "") -> list[str]:
    d = _data(root)
    v = d / "lightning_logs" / "version_0"
    v.mkdir(parents=True)
    (v / "hparams.yaml").write_text("lr: 0.001\n")
    if callable(body):
        body(v / "metrics.csv")
    else:
        (v / "metrics.csv").write_bytes(body)
    argv = ["trace", str(v / "metrics.csv"), "--format", "json", *(extra or [])]
    if toml:
        (root / "datacheck.toml").write_text(toml)
        argv += ["--config", str(root / "datacheck.toml")]
    return argv


def _lt(body: bytes | Callable[[Path], None], extra: list[str] | None = None,
        toml: str = "") -> Callable[[Path], list[str]]:
    return lambda root: _lightning_csv(root, body, extra, toml)


def _lt_rows(steps: list[str]) -> bytes:
    return ("epoch,step,train_loss\n" + "".join(f"0,{s},{2.0 - i / 100}\n" for i, s in enumerate(steps))).encode()


def _lt_yaml_bomb(root: Path) -> list[str]:
    argv = _lightning_csv(root, _lt_rows([str(s) for s in range(10)]))
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    (root / "data" / "lightning_logs" / "version_0" / "hparams.yaml").write_text("\n".join(lines) + "\n")
    return argv


def _lt_long_line(p: Path) -> None:
    with open(p, "wb") as f:
        f.write(b"epoch,step,train_loss\n0,0,1.0\n0,1,")
        chunk = b"9" * (1 << 24)
        for _ in range(64):  # 1 GiB
            f.write(chunk)
        f.write(b"\n0,2,1.0\n")


def _gz_bomb_member(p: Path) -> None:
    """A ledger whose first member holds its header and one row, then a member of 3e9 newline-free zeros."""
    head = gzip.compress(b"#datacheck-ledger\t1\n0\t0\t0\t0\t1\t2\n")
    co = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(p, "wb") as f:
        f.write(head)
        block = b"0" * (1 << 24)
        for _ in range(180):  # ~3e9 bytes, no newline
            f.write(co.compress(block))
        f.write(co.flush())


def _gz_garbage_between(p: Path) -> None:
    p.write_bytes(gzip.compress(b"#datacheck-ledger\t1\n0\t0\t0\t0\t1\t2\n") + b"garbage\xff\x00 not gzip"
                  + gzip.compress(b"0\t0\t1\t0\t3\t4\n"))


def _raw_text(rows: Callable[[Path], None], verb: str = "audit", name: str = "a.parquet") -> Callable[[Path], list[str]]:
    def build(root: Path) -> list[str]:
        d = _data(root)
        rows(d / name)
        if verb == "infer":
            return ["schema", "infer", str(d), "--out", str(root / "out.yaml")]
        return _audit(root, "--schema", "raw_text")
    return build


def _empty_strings(p: Path) -> None:
    import polars as pl

    pl.DataFrame({"text": [""] * 10**6}).write_parquet(p)


def _one_huge_string(p: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": pa.array(["x" * (500 << 20), "ok"], type=pa.large_string())}), p)


def _huge_between(p: Path, head: bytes, tail: bytes) -> None:
    """``head``, then 500 MiB of ``x`` (written 1 MiB at a time), then ``tail``, into ``p``."""
    with open(p, "wb") as f:
        f.write(head)
        for _ in range(500):
            f.write(b"x" * (1 << 20))
        f.write(tail)


def _one_huge_line(p: Path) -> None:
    """A JSONL file whose first line holds a 500 MiB string, then a short one."""
    _huge_between(p, b'{"text": "', b'"}\n{"text": "ok"}\n')


def _one_huge_csv_line(p: Path) -> None:
    """A CSV file whose second line (after the header) is a 500 MiB field, then a short record."""
    _huge_between(p, b"text\n", b"\nok\n")


def _wide_tsv(root: Path) -> list[str]:
    """A TSV whose header has 8,334 fields and whose two records one each (the shape of a fuzz input:
    a short piece repeated across one line): one XOR per column in the in-shard duplicate key made an
    expression 8,333 deep, whose planning did not end in 8 minutes (2,000 columns: 5.7 s, 1.4 GB)."""
    (_data(root) / "f.tsv").write_text("\t".join(["t"] + [f"1H0 {i}" for i in range(8333)]) + "\nlab\n1\n")
    return _audit(root)


CASES4: dict[str, Callable[[Path], list[str]]] = {
    # a header of 8,334 columns
    "csv_wide_header_8334": _wide_tsv,
    # [megatron] values and Megatron pairs
    "meg_train_iters_2p40": _meg_case("seq_length = 8\ntrain_iters = 1099511627776\n"),
    "meg_train_samples_2p50": _meg_case("seq_length = 8\ntrain_samples = 1125899906842624\n"),
    "meg_train_iters_1e12": _meg_case("seq_length = 8\ntrain_iters = 1000000000000\n"),
    "meg_seq_length_0": _meg_case("seq_length = 0\ntrain_iters = 10\n"),
    "meg_seq_length_neg": _meg_case("seq_length = -5\ntrain_iters = 10\n"),
    "meg_seq_length_1e12": _meg_case("seq_length = 1000000000000\ntrain_iters = 10\n"),
    "meg_seq_length_2p31": _meg_case("seq_length = 2147483647\ntrain_iters = 10\n"),
    "meg_split_000": _meg_case('seq_length = 8\ntrain_iters = 10\nsplit = "0,0,0"\n'),
    "meg_split_abc": _meg_case('seq_length = 8\ntrain_iters = 10\nsplit = "abc"\n'),
    "meg_split_dots": _meg_case('seq_length = 8\ntrain_iters = 10\nsplit = "1..2,3"\n'),
    "meg_split_0_1": _meg_case('seq_length = 8\ntrain_iters = 10\nsplit = "0,1"\n'),
    "meg_split_1e400": _meg_case('seq_length = 8\ntrain_iters = 10\nsplit = "' + "9" * 190 + '"\n'),
    "meg_data_path_neg": _meg_case('seq_length = 8\ntrain_iters = 10\ndata_path = ["-0.5", "x"]\n'),
    "meg_data_path_nan": _meg_case('seq_length = 8\ntrain_iters = 10\ndata_path = ["nan", "x", "1", "y"]\n'),
    "meg_data_path_inf": _meg_case('seq_length = 8\ntrain_iters = 10\ndata_path = ["inf", "x", "1", "x"]\n'),
    "meg_data_path_1e308": _meg_case('seq_length = 8\ntrain_iters = 10\ndata_path = ["1e308", "x", "1e308", "x"]\n'),
    "meg_data_path_tiny": _meg_case('seq_length = 8\ntrain_iters = 10\ndata_path = ["1e-308", "x", "1", "x"]\n'),
    "meg_data_path_nomatch": _meg_case('seq_length = 8\ntrain_iters = 10\ndata_path = ["0.5", "nothing", "0.5", "x"]\n'),
    "meg_surplus_neg": _meg_case('seq_length = 8\ntrain_iters = 10\ndata_path = ["0.5", "x", "0.5", "x"]\n'
                                 "mid_level_dataset_surplus = -1.0\n"),
    "meg_surplus_huge": _meg_case('seq_length = 8\ntrain_iters = 100000\ndata_path = ["0.5", "x", "0.5", "x"]\n'
                                  "mid_level_dataset_surplus = 1000.0\n"),
    "meg_surplus_1e300": _meg_case('seq_length = 8\ntrain_iters = 10\ndata_path = ["0.5", "x", "0.5", "x"]\n'
                                   "mid_level_dataset_surplus = 1e300\n"),
    "meg_idx_lengths_past_int32": _meg_case("seq_length = 8\ntrain_iters = 10\n", idx=_idx_lengths_past_int64),
    "meg_idx_count_2p40": _meg_case("seq_length = 8\ntrain_iters = 10\n", idx=_idx_count_huge),
    "meg_step_1e15": _meg_case("seq_length = 8\ntrain_iters = 10\n", step=str(10**15)),
    "meg_step_neg": _meg_case("seq_length = 8\ntrain_iters = 10\n", step="-3"),
    "meg_cyclic_iters_2p40": _meg_case('seq_length = 8\ntrain_iters = 1099511627776\ndataloader_type = "cyclic"\n'),
    "meg_log_consumed_backwards": _meg_case("seq_length = 8\ntrain_iters = 20\n", step="3",
                                            log=_megatron_log([2, 4, 2, 0, 10, 12])),
    "meg_log_consumed_1e30": _meg_case("seq_length = 8\ntrain_iters = 20\n", step="3",
                                       log=_megatron_log([2, 4, 10**30, 10**30 + 2])),
    "meg_log_consumed_1e15": _meg_case("seq_length = 8\ntrain_iters = 20\n", step="3",
                                       log=_megatron_log([10**15, 10**15 + 2, 10**15 + 4])),
    "meg_log_iteration_1e30": _meg_case("seq_length = 8\ntrain_iters = 20\n", step="2",
                                        log=_megatron_log([2, 4, 6]).replace("iteration        3/",
                                                                             f"iteration {10**30}/")),
    # Lightning logs
    "lt_hparams_yaml_bomb": _lt_yaml_bomb,
    "lt_metrics_line_1g": _lt(_lt_long_line),
    "lt_metrics_field_200k": _lt(b"epoch,step,train_loss\n0,0,1.0\n0,1," + b"9" * 200_000 + b"\n0,2,1.0\n"),
    "lt_step_1e30": _lt(_lt_rows(["0", "1", "1e30", "3"])),
    "lt_step_int_1e30": _lt(_lt_rows(["0", "1", "1" + "0" * 30, "3"])),
    "lt_step_neg": _lt(_lt_rows(["0", "1", "-5", "3"])),
    "lt_step_nan": _lt(_lt_rows(["0", "1", "nan", "3"])),
    "lt_micro_batch_grad_accum_2p40": _lt(_lt_rows([str(s) for s in range(10)]), ["--step-unit", "micro-batch"],
                                          "[batch]\nbatch_size = 2\ngrad_accum = 1099511627776\n"),
    "lt_micro_batch_grad_accum_0": _lt(_lt_rows([str(s) for s in range(10)]), ["--step-unit", "micro-batch"],
                                       "[batch]\nbatch_size = 2\ngrad_accum = 0\n"),
    # gzip ledgers
    "gzl_bomb_member": _ledger(_gz_bomb_member),
    "gzl_garbage_between": _ledger(_gz_garbage_between),
    "gzl_state_grad_accum_1e9": _ledger(_state_ledger(b'{"epoch": 0, "start_step": 0, "grad_accum": 1000000000, '
                                                      b'"batches": 3000000000}')),
    # raw_text
    "rawtext_1e6_empty": _raw_text(_empty_strings),
    "rawtext_1e6_empty_infer": _raw_text(_empty_strings, "infer"),
    "rawtext_500mb_string": _raw_text(_one_huge_string),
    "rawtext_500mb_string_infer": _raw_text(_one_huge_string, "infer"),
    "rawtext_500mb_jsonl_line": _raw_text(_one_huge_line, name="a.jsonl"),
    "rawtext_500mb_jsonl_line_infer": _raw_text(_one_huge_line, "infer", name="a.jsonl"),
    "rawtext_500mb_csv_line": _raw_text(_one_huge_csv_line, name="a.csv"),
}
