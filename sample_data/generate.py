#!/usr/bin/env python3
"""Write datacheck's sample data: clean sets and one folder of planted defects per check family.

Run from anywhere::

    python sample_data/generate.py            # rewrites the files beside this script
    python sample_data/generate.py --out DIR  # writes the same bytes under DIR

The output is deterministic: every random draw comes from ``numpy.random.default_rng((SEED, k))``
with a fixed ``SEED`` and one stream ``k`` per file, and parquet files are written with fixed
writer options, so two runs give byte-identical files (with the same pyarrow version; pyarrow
records its version in each parquet footer's ``created_by``). Each file is written atomically
(temporary file in the same folder, then ``os.replace``).

What is planted where is listed once, in :data:`PLANTED`; ``sample_data/README.md`` is rendered from
it and ``tests/contract/test_golden_report.py`` asserts the audit against it.

Facts (``sample_data/datacheck.toml``, one config for every folder): GPT-2's tokenizer
(``vocab_size`` 50257, no pad token so ``pad_token_id == eos_token_id == 50256``), ``max_seq_len``
64, right padding and truncation, 3 classes, ``ignore_index`` -100, ``compute_dtype`` fp16
(IEEE 754 binary16, max finite 65504).
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["SEED", "PLANTED", "Planted", "build", "write", "main"]

#: Seed of every random stream (each file uses ``default_rng((SEED, stream))``).
SEED = 20_251_130
#: GPT-2 tokenizer facts (Hugging Face ``gpt2``: 50257 tokens, eos ``<|endoftext|>`` = 50256, no pad).
VOCAB_SIZE = 50_257
EOS_ID = 50_256
PAD_ID = EOS_ID
MAX_SEQ_LEN = 64
NUM_CLASSES = 3
IGNORE_INDEX = -100
#: Largest finite IEEE 754 binary16 value; ``[numeric] compute_dtype = "fp16"``.
FP16_MAX = 65_504.0

LM_SCHEMA = pa.schema([
    ("input_ids", pa.list_(pa.int32())),
    ("attention_mask", pa.list_(pa.int8())),
    ("labels", pa.list_(pa.int64())),
])
CLS_SCHEMA = pa.schema([("text", pa.string()), ("label", pa.int64())])

CONFIG_TOML = f"""\
# datacheck config for sample_data/ (written by sample_data/generate.py; edit that script, not this file).
# One config serves every folder: roles are inferred from the Hugging Face column names
# (text, label, input_ids, attention_mask, labels).

[tokens]
vocab_size = {VOCAB_SIZE}      # GPT-2
pad_token_id = {PAD_ID}    # GPT-2 has no pad token: pad = eos
eos_token_id = {EOS_ID}
max_seq_len = {MAX_SEQ_LEN}
padding_side = "right"
truncation_side = "right"

[labels]
num_classes = {NUM_CLASSES}
ignore_index = {IGNORE_INDEX}

[numeric]
compute_dtype = "fp16"      # finite.fp16_overflow: |value| > 65504 (IEEE 754 binary16)

[splits]                     # globs relative to the audited root (sample_data/)
train = "defects/split/train*"
eval = "defects/split/eval*"

[policy]
# sample_data/ holds several independent example sets (LM, classification, regression) side by side,
# so its shards differ in columns by design; in a real dataset keep this check on.
"schema.inconsistent" = {{ ignore = true }}
"""

_WORDS = (
    "the a model data loss train shard token batch layer quick slow bright dark river stone green "
    "paper window garden music winter summer coffee market city field signal noise answer question "
    "story letter engine forest planet simple careful honest strange gentle silver"
).split()


@dataclass(frozen=True)
class Planted:
    """One expected finding of ``datacheck audit sample_data/ --config sample_data/datacheck.toml``.

    Attributes:
        path: shard path relative to ``sample_data/`` (POSIX), or None for a dataset-level finding.
        check: check ID (CHECKS.md).
        severity: severity in the report (the catalog default unless the check says otherwise).
        what: the planted defect, in words (README table).
        column: the finding's ``column`` (None when several columns or none).
        rows: 0-based rows as read (every failing row; the report keeps at most 20). For a
            dataset-level finding: the rows of its examples (in the last shard it names).
        lines: 1-based lines (JSONL): of the rows, or of the records that did not parse (decode).
        count: the finding's ``count``; None means ``len(rows)`` or else ``len(lines)``.
        shards: for dataset-level findings, the shards it names (relative paths, sorted).
    """

    path: str | None
    check: str
    severity: str
    what: str
    column: str | None = None
    rows: tuple[int, ...] = ()
    lines: tuple[int, ...] = ()
    count: int | None = None
    shards: tuple[str, ...] = ()

    @property
    def expected_count(self) -> int:
        if self.count is not None:
            return self.count
        return len(self.rows) or len(self.lines)


D = "defects/"
#: Every finding the audit of sample_data/ must report, and nothing else (the clean sets have none).
PLANTED: tuple[Planted, ...] = (
    # decode
    Planted(D + "decode/records.jsonl", "decode.bad_record", "error",
            "line 2: truncated object; line 4: two objects glued on one line", lines=(2, 4)),
    Planted(D + "decode/records.jsonl", "decode.bad_record", "info", "line 5: blank line (counted, not an error)",
            lines=(5,)),
    Planted(D + "decode/records.jsonl", "decode.invalid_utf8", "error",
            "line 6: Latin-1 byte 0xe9 ('é') inside a UTF-8 file", lines=(6,)),
    Planted(D + "decode/rows_vs_lines.jsonl", "decode.bad_record", "error", "line 2 is not JSON", lines=(2,)),
    Planted(D + "decode/rows_vs_lines.jsonl", "decode.bad_record", "info", "line 3 is blank", lines=(3,)),
    Planted(D + "decode/rows_vs_lines.jsonl", "labels.out_of_range", "error",
            "label 7 on line 4, which is row 1: rows count the records that parse", column="label",
            rows=(1,), lines=(4,)),
    Planted(D + "decode/not_parquet.parquet", "decode.unreadable", "error", "CSV text saved as .parquet (bad magic)"),
    Planted(D + "decode/truncated.parquet", "decode.unreadable", "error",
            "a valid parquet file cut in half (no footer)"),
    Planted(D + "decode/zero_bytes.parquet", "decode.unreadable", "error", "zero-byte file"),
    # finite
    Planted(D + "finite/regression.parquet", "finite.nan", "error", "target is NaN", column="target", rows=(1,)),
    Planted(D + "finite/regression.parquet", "finite.nan", "error", "NaN inside the features list",
            column="features", rows=(2,)),
    Planted(D + "finite/regression.parquet", "finite.inf", "error", "target is +inf", column="target", rows=(3,)),
    Planted(D + "finite/regression.parquet", "finite.inf", "error", "-inf inside the features list",
            column="features", rows=(4,)),
    Planted(D + "finite/regression.parquet", "finite.fp16_overflow", "error",
            "target 70000 > fp16 max 65504", column="target", rows=(5,)),
    Planted(D + "finite/regression.parquet", "finite.fp16_overflow", "error",
            "features holds 1e5 > fp16 max 65504", column="features", rows=(6,)),
    Planted(D + "finite/regression.parquet", "finite.fp16_overflow", "warn",
            "target 40000: above half the fp16 max (sums overflow)", column="target", rows=(7,)),
    Planted(None, "dist.target_scale", "warn",
            "the float column named target is the regression target: its 8 finite values (70000 and 40000 among "
            "them) have mean 1.375e4 and std 2.669e4, above target_scale_warn 1000", column="target",
            shards=(D + "finite/regression.parquet",)),
    # empty
    Planted(D + "empty/text.jsonl", "empty.text", "error", "row 1 empty, row 3 whitespace-only, row 5 null text",
            column="text", rows=(1, 3, 5), lines=(2, 4, 6)),
    Planted(D + "empty/tokens.parquet", "empty.sequence", "error", "input_ids is []", column="input_ids",
            rows=(1,)),
    Planted(D + "empty/tokens.parquet", "empty.all_padding", "error", "attention_mask all 0 (ids all pad)",
            column="attention_mask", rows=(3,)),
    Planted(D + "empty/tokens.parquet", "empty.no_supervised_tokens", "error",
            "row 5: 70-token prompt, the supervised answer lies past max_seq_len 64; rows 1 and 3 (empty, "
            "all padding) have no supervised token either", column="labels", rows=(1, 3, 5)),
    Planted(D + "empty/tokens.parquet", "length.over_max", "warn", "row 5 is 80 tokens (> 64)",
            column="input_ids", rows=(5,)),
    # labels
    Planted(D + "labels/classes.parquet", "labels.out_of_range", "error",
            "row 1: label 3 == num_classes (off by one); row 3: label 255 (void label)", column="label",
            rows=(1, 3)),
    Planted(D + "labels/classes.parquet", "labels.unexpected_sentinel", "error", "label -1 (loss ignores -100)",
            column="label", rows=(5,)),
    Planted(D + "labels/classes.parquet", "labels.null", "error", "label is null", column="label", rows=(7,)),
    Planted(D + "labels/token_labels.parquet", "labels.out_of_range", "error",
            "row 2: a token label 50257 == vocab_size; row 4: a token label 70000", column="labels", rows=(2, 4)),
    Planted(D + "labels/token_labels.parquet", "labels.unexpected_sentinel", "error",
            "token label -1 inside the prompt (loss ignores -100)", column="labels", rows=(5,)),
    # tokens
    Planted(D + "tokens/ids.parquet", "tokens.out_of_vocab", "error",
            "row 1: id 50257 == vocab_size; row 3: id 65000; row 4: id -1", column="input_ids", rows=(1, 3, 4)),
    Planted(D + "tokens/ids_int16.parquet", "tokens.dtype_overflow", "error",
            "input_ids stored as int16 (max 32767) with vocab_size 50257", column="input_ids"),
    Planted(D + "tokens/ids_int16.parquet", "tokens.out_of_vocab", "error",
            "GPT-2 id 50000 wrapped to -15536 by the int16 storage", column="input_ids", rows=(2,)),
    # length
    Planted(D + "length/seqs.parquet", "length.over_max", "warn", "80 tokens > max_seq_len 64",
            column="input_ids", rows=(1,)),
    Planted(D + "length/seqs.parquet", "length.mismatch", "error",
            "row 3: attention_mask one shorter than input_ids; row 4: labels two longer", rows=(3, 4)),
    # mask and padding
    Planted(D + "mask/batch.parquet", "mask.non_binary", "error", "attention_mask holds a 2",
            column="attention_mask", rows=(1,)),
    Planted(D + "mask/batch.parquet", "mask.not_contiguous", "error", "a 0 inside the block of 1s (a hole)",
            column="attention_mask", rows=(3,)),
    Planted(D + "mask/batch.parquet", "padding.token_not_pad", "warn",
            "padded positions hold id 0 instead of pad 50256", column="input_ids", rows=(5,)),
    Planted(D + "mask/batch.parquet", "padding.label_not_ignored", "error",
            "padded positions labelled 50256 instead of -100 (loss trains on padding)", column="labels",
            rows=(7,)),
    # dup
    Planted(D + "dup/train.parquet", "dup.exact_in_shard", "warn",
            "row 4 repeats row 0; rows 6 and 7 repeat row 2", rows=(4, 6, 7)),
    Planted(None, "dup.conflicting_labels", "warn", "row 8 has the text of row 1 with another label",
            column="label", rows=(1, 8), count=1, shards=(D + "dup/train.parquet",)),
    Planted(None, "dup.split_overlap", "error", "eval rows 1 and 3 are train rows 2 and 5 (leakage; [splits])",
            rows=(1, 3), shards=(D + "split/eval.parquet",)),
    # index (shard set)
    Planted(D + "index/shards/part-00003-of-00004.parquet", "index.empty_shard", "warn",
            "a readable shard with 0 rows"),
    Planted(None, "dup.shard", "error", "part-00001 is a byte-identical copy of part-00000", count=1,
            shards=(D + "index/shards/part-00000-of-00004.parquet", D + "index/shards/part-00001-of-00004.parquet")),
    Planted(None, "dup.exact_across_shards", "warn", "rows 0-5 of part-00001 repeat part-00000 (the copied shard)",
            rows=(0, 1, 2, 3, 4, 5), shards=(D + "index/shards/part-00000-of-00004.parquet",
                                             D + "index/shards/part-00001-of-00004.parquet")),
    Planted(None, "index.numbering_gap", "error", "part-00002-of-00004.parquet is missing", count=1),
    Planted(None, "index.temp_file", "warn", "part-00002-of-00004.parquet.tmp: an unfinished download", count=1,
            shards=(D + "index/shards/part-00002-of-00004.parquet.tmp",)),
)

#: Shards that must have no finding at all.
CLEAN_SHARDS = (
    "cls_clean/test.parquet",
    "cls_clean/train.jsonl",
    "cls_clean/validation.csv",
    "lm_clean/train-00000-of-00002.parquet",
    "lm_clean/train-00001-of-00002.parquet",
)


# ---------------------------------------------------------------------------------------------- rows


def _rng(stream: int) -> np.random.Generator:
    return np.random.default_rng((SEED, stream))


def _content_ids(rng: np.random.Generator, n: int, high: int = EOS_ID) -> list[int]:
    """``n`` random GPT-2 ids in ``[0, high)`` (never the eos/pad id 50256)."""
    return [int(x) for x in rng.integers(0, high, size=n)]


def lm_row(rng: np.random.Generator, prompt: int, answer: int, padded_to: int) -> dict[str, list[int]]:
    """One causal-LM sample: ``prompt`` ids (label -100), ``answer`` ids and the eos (supervised),
    then right padding with ``PAD_ID`` (mask 0, label -100) up to ``padded_to`` positions."""
    ids = _content_ids(rng, prompt + answer) + [EOS_ID]
    n = len(ids)
    pad = max(0, padded_to - n)
    labels = [IGNORE_INDEX] * prompt + ids[prompt:] + [IGNORE_INDEX] * pad
    return {"input_ids": ids + [PAD_ID] * pad, "attention_mask": [1] * n + [0] * pad, "labels": labels}


def _sentence(rng: np.random.Generator) -> str:
    k = int(rng.integers(4, 11))
    return " ".join(_WORDS[int(i)] for i in rng.integers(0, len(_WORDS), size=k))


def _unique_sentences(rng: np.random.Generator, n: int) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        s = _sentence(rng)
        if s not in out:
            out.append(s)
    return out


def cls_rows(rng: np.random.Generator, n: int) -> list[dict[str, Any]]:
    """``n`` distinct (text, label) rows; labels cycle through every class in a shuffled order."""
    labels = [k % NUM_CLASSES for k in range(n)]
    rng.shuffle(labels)
    return [{"text": t, "label": int(y)} for t, y in zip(_unique_sentences(rng, n), labels)]


# --------------------------------------------------------------------------------------- encodings


def parquet_bytes(rows: list[dict[str, Any]], schema: pa.Schema) -> bytes:
    """Parquet bytes of ``rows`` with ``schema`` (zstd, statistics on, one row group)."""
    table = pa.Table.from_pylist(rows, schema=schema)
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd", row_group_size=max(1, len(rows)), write_statistics=True)
    return buf.getvalue()


def jsonl_bytes(rows: list[dict[str, Any]]) -> bytes:
    """One JSON object per line (UTF-8, non-ASCII kept), each line ending in ``\\n``."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


# ------------------------------------------------------------------------------------------- sets


def lm_clean() -> dict[str, bytes]:
    """Two shards of 16 GPT-2 samples each, right-padded to 64 tokens, eos supervised."""
    out = {}
    for shard in range(2):
        rng = _rng(100 + shard)
        rows = []
        for _ in range(16):
            prompt = int(rng.integers(4, 24))
            answer = int(rng.integers(4, MAX_SEQ_LEN - prompt))  # prompt + answer + eos <= 64
            rows.append(lm_row(rng, prompt, answer, MAX_SEQ_LEN))
        out[f"lm_clean/train-{shard:05d}-of-00002.parquet"] = parquet_bytes(rows, LM_SCHEMA)
    return out


def csv_bytes(rows: list[dict[str, Any]]) -> bytes:
    """``text,label`` CSV with a header; fields holding a comma or a quote are quoted (RFC 4180)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["text", "label"])
    w.writerows([[r["text"], r["label"]] for r in rows])
    return buf.getvalue().encode("utf-8")


def cls_clean() -> dict[str, bytes]:
    """39 distinct (text, label) rows: 24 in ``train.jsonl``, 9 in ``test.parquet``, 6 in
    ``validation.csv`` (two texts hold a comma, one a quote); every class in each."""
    rng = _rng(200)
    rows = cls_rows(rng, 39)
    val = rows[33:]
    val[1]["text"] = val[1]["text"].replace(" ", ", ", 1)
    val[4]["text"] = 'she said "' + val[4]["text"] + '", twice'
    return {"cls_clean/train.jsonl": jsonl_bytes(rows[:24]),
            "cls_clean/test.parquet": parquet_bytes(rows[24:33], CLS_SCHEMA),
            "cls_clean/validation.csv": csv_bytes(val)}


def decode_defects() -> dict[str, bytes]:
    """A JSONL with broken lines (see :data:`PLANTED`), and three .parquet files that cannot be read."""
    rng = _rng(300)
    good = [json.dumps(r, ensure_ascii=False).encode() for r in cls_rows(rng, 4)]
    lines = [
        good[0],
        b'{"text": "the quick brown fox", "lab',                       # line 2: truncated object
        good[1],
        b'{"text": "glued one", "label": 0}{"text": "glued two", "label": 1}',  # line 4: two objects
        b"",                                                           # line 5: blank
        b'{"text": "caf\xe9 au lait", "label": 1}',                    # line 6: Latin-1 byte
        good[2],
        good[3],
    ]
    whole = parquet_bytes(cls_rows(_rng(301), 40), CLS_SCHEMA)
    # rows are numbered over the records that parse, lines over the file: line 4 holds row 1
    mapped = cls_rows(_rng(302), 2)
    mapped[1]["label"] = 7
    mapped_lines = [json.dumps(mapped[0]).encode(), b"not json at all", b"", json.dumps(mapped[1]).encode()]
    return {
        D + "decode/records.jsonl": b"\n".join(lines) + b"\n",
        D + "decode/rows_vs_lines.jsonl": b"\n".join(mapped_lines) + b"\n",
        D + "decode/not_parquet.parquet": b"text,label\nthis is a CSV file,0\nsaved with the wrong name,1\n",
        D + "decode/truncated.parquet": whole[: len(whole) // 2],
        D + "decode/zero_bytes.parquet": b"",
    }


def finite_defects() -> dict[str, bytes]:
    """Regression rows: ``target`` float64 and ``features`` list<float32> (4 values) with NaN, inf and
    values beyond the fp16 range at the rows of :data:`PLANTED`."""
    rng = _rng(400)
    n = 10
    target = [float(x) for x in rng.normal(0.0, 1.0, size=n)]
    features = [[float(x) for x in rng.normal(0.0, 1.0, size=4).astype(np.float32)] for _ in range(n)]
    target[1] = float("nan")
    features[2][1] = float("nan")
    target[3] = float("inf")
    features[4][3] = float("-inf")
    target[5] = 70_000.0           # > FP16_MAX
    features[6][0] = 1.0e5         # > FP16_MAX
    target[7] = 40_000.0           # > FP16_MAX / 2 (warn), <= FP16_MAX
    schema = pa.schema([("target", pa.float64()), ("features", pa.list_(pa.float32()))])
    rows = [{"target": t, "features": f} for t, f in zip(target, features)]
    return {D + "finite/regression.parquet": parquet_bytes(rows, schema)}


def empty_defects() -> dict[str, bytes]:
    """Text rows with empty/whitespace/null text, and LM rows that are empty, all padding, or lose
    every supervised token to truncation."""
    rng = _rng(500)
    rows = cls_rows(rng, 7)
    rows[1]["text"] = ""
    rows[3]["text"] = "   \t "
    rows[5]["text"] = None
    rng = _rng(501)
    lm = [lm_row(rng, 4, 6, 16) for _ in range(6)]
    lm[1] = {"input_ids": [], "attention_mask": [], "labels": []}
    lm[3] = {"input_ids": [PAD_ID] * 16, "attention_mask": [0] * 16, "labels": [IGNORE_INDEX] * 16}
    lm[5] = lm_row(rng, 70, 9, 80)  # 80 tokens: the answer (positions 70..79) lies past max_seq_len 64
    return {D + "empty/text.jsonl": jsonl_bytes(rows), D + "empty/tokens.parquet": parquet_bytes(lm, LM_SCHEMA)}


def labels_defects() -> dict[str, bytes]:
    """Class labels out of range (3, 255), a -1 sentinel and a null; token labels >= vocab_size and -1."""
    rows = cls_rows(_rng(600), 9)
    rows[1]["label"] = NUM_CLASSES
    rows[3]["label"] = 255
    rows[5]["label"] = -1
    rows[7]["label"] = None
    rng = _rng(601)
    lm = [lm_row(rng, 4, 8, 16) for _ in range(7)]
    lm[2]["labels"][6] = VOCAB_SIZE
    lm[4]["labels"][7] = 70_000
    lm[5]["labels"][1] = -1
    return {D + "labels/classes.parquet": parquet_bytes(rows, CLS_SCHEMA),
            D + "labels/token_labels.parquet": parquet_bytes(lm, LM_SCHEMA)}


def tokens_defects() -> dict[str, bytes]:
    """Ids outside ``[0, vocab_size)``; an int16 id column that cannot hold GPT-2's ids (wrapped)."""
    rng = _rng(700)
    rows = []
    for _ in range(6):
        r = lm_row(rng, 0, 10, 16)
        rows.append({"input_ids": r["input_ids"], "attention_mask": r["attention_mask"]})
    rows[1]["input_ids"][2] = VOCAB_SIZE
    rows[3]["input_ids"][5] = 65_000
    rows[4]["input_ids"][0] = -1
    ids_schema = pa.schema([("input_ids", pa.list_(pa.int32())), ("attention_mask", pa.list_(pa.int8()))])
    # int16 storage: packed pre-training chunks (no eos, no padding); GPT-2 id 50000 wraps to -15536
    rng = _rng(701)
    packed = [{"input_ids": _content_ids(rng, 32, high=32_000), "attention_mask": [1] * 32} for _ in range(4)]
    packed[2]["input_ids"][9] = int(np.array([50_000]).astype(np.int16)[0])
    i16_schema = pa.schema([("input_ids", pa.list_(pa.int16())), ("attention_mask", pa.list_(pa.int8()))])
    return {D + "tokens/ids.parquet": parquet_bytes(rows, ids_schema),
            D + "tokens/ids_int16.parquet": parquet_bytes(packed, i16_schema)}


def length_defects() -> dict[str, bytes]:
    """A sequence longer than ``max_seq_len``; rows whose mask or labels differ in length from the ids."""
    rng = _rng(800)
    rows = [lm_row(rng, 6, 12, 24) for _ in range(6)]
    rows[1] = lm_row(rng, 10, 69, 80)  # 80 tokens, supervised from position 10: some survive truncation
    rows[3]["attention_mask"] = rows[3]["attention_mask"][:-1]
    rows[4]["labels"] = rows[4]["labels"] + [IGNORE_INDEX, IGNORE_INDEX]
    return {D + "length/seqs.parquet": parquet_bytes(rows, LM_SCHEMA)}


def mask_defects() -> dict[str, bytes]:
    """16-position rows (12 real tokens, 4 padding) with a non-binary mask, a hole, non-pad ids under
    the padding, and supervised padding."""
    rng = _rng(900)
    rows = [lm_row(rng, 4, 7, 16) for _ in range(8)]  # 12 real tokens, 4 padding
    rows[1]["attention_mask"][5] = 2
    # a hole: position 6 masked out (holding the pad id, label ignored) inside the real tokens
    rows[3]["attention_mask"][6] = 0
    rows[3]["input_ids"][6] = PAD_ID
    rows[3]["labels"][6] = IGNORE_INDEX
    rows[5]["input_ids"][12:] = [0, 0, 0, 0]  # padding with id 0 (a pad id from another tokenizer)
    rows[7]["labels"][12:] = [PAD_ID] * 4  # labels copied from input_ids, padding not masked
    return {D + "mask/batch.parquet": parquet_bytes(rows, LM_SCHEMA)}


def dup_defects() -> dict[str, bytes]:
    """Exact repeats within the shard, and one text that occurs with two labels."""
    rows = cls_rows(_rng(1000), 9)
    rows[4] = dict(rows[0])
    rows[6] = dict(rows[2])
    rows[7] = dict(rows[2])
    rows[8] = {"text": rows[1]["text"], "label": (rows[1]["label"] + 1) % NUM_CLASSES}  # same text, other label
    return {D + "dup/train.parquet": parquet_bytes(rows, CLS_SCHEMA)}


def split_defects() -> dict[str, bytes]:
    """``[splits]`` train / eval, where eval rows 1 and 3 are train rows 2 and 5 (leakage)."""
    rows = cls_rows(_rng(1200), 13)
    train, ev = rows[:8], rows[8:]
    ev[1] = dict(train[2])
    ev[3] = dict(train[5])
    return {D + "split/train.parquet": parquet_bytes(train, CLS_SCHEMA),
            D + "split/eval.parquet": parquet_bytes(ev, CLS_SCHEMA)}


def index_defects() -> dict[str, bytes]:
    """``part-0000k-of-00004``: 0 and 1 byte-identical, 2 missing (only a partial ``.tmp``), 3 empty."""
    base = D + "index/shards/part-{:05d}-of-00004.parquet"
    first = parquet_bytes(cls_rows(_rng(1100), 6), CLS_SCHEMA)
    third = parquet_bytes(cls_rows(_rng(1101), 6), CLS_SCHEMA)
    return {
        base.format(0): first,
        base.format(1): first,  # byte-identical copy: dup.shard
        base.format(2) + ".tmp": third[: len(third) // 3],  # the download of part 2 never finished
        base.format(3): parquet_bytes([], CLS_SCHEMA),  # 0 rows
    }


# ----------------------------------------------------------------------------------------- README


README_HEAD = """\
# sample_data

Small shards for trying datacheck and for its tests, written by a seeded script. **Do not edit the
files by hand**: change `generate.py` and rerun it.

```bash
python sample_data/generate.py          # rewrite every file here (byte-identical on rerun)
datacheck audit sample_data/ --config sample_data/datacheck.toml   # exits 1: the defects below
```

The whole folder is audited with one config, `datacheck.toml` (GPT-2 tokenizer facts: vocab_size
50257, pad = eos = 50256; max_seq_len 64; right padding and truncation; 3 classes; ignore_index -100;
compute_dtype fp16). Roles are inferred from the Hugging Face column names. The folder holds several
independent sets side by side, so their shards differ in columns by design: the config's `[policy]`
ignores `schema.inconsistent` here (keep it on for a real dataset).

## Clean sets (no finding)

| folder | what |
|---|---|
| `lm_clean/` | tokenized causal-LM set, 2 shards `train-0000k-of-00002.parquet` x 16 rows: `input_ids` list<int32>, `attention_mask` list<int8>, `labels` list<int64> (-100 on the prompt and the padding; the answer and the eos are supervised), right-padded to 64 with 50256 |
| `cls_clean/` | text classification, `train.jsonl` (24 rows), `test.parquet` (9 rows) and `validation.csv` (6 rows, quoted fields): `text`, `label` in {0, 1, 2}, every class in each |

## Planted defects

Rows are 0-based positions in the shard as read; lines are 1-based (JSONL). Dataset-level findings
(decided across shards) name their shards; their rows are those of the examples, in the last shard
named. `defects/split/` is the `[splits]` pair of the config (`train`, `eval`). Every finding the
audit reports is in this table, and every entry of the table is reported (`tests/contract/test_golden_report.py`).

| file | rows / lines | defect | check ID | severity |
|---|---|---|---|---|
"""

README_TAIL = """
`padding.eos_unsupervised` is decided across the whole dataset: `lm_clean/` supervises its eos, so
it does not fire here. The int16 id column stands in for the classic uint16 / vocab > 65535 case:
one config (GPT-2's vocab_size 50257) serves every folder, and int16 (max 32767) cannot hold
50256 either.

## Tests that use this folder

- `tests/contract/test_golden_report.py`: the generator is deterministic and matches these files; the audit
  reports exactly the table above, exits 1, and finds nothing in the clean sets.
- `tests/contract/test_report_schema.py`: the report validates against `schemas/report.schema.json`;
  `tests/golden/sample_data_report.json` pins it (regenerate with
  `DATACHECK_UPDATE_GOLDEN=1 python -m pytest tests/contract/test_report_schema.py`).
"""


def _numbers(word: str, values: tuple[int, ...]) -> str:
    return f"{word}{'s' if len(values) > 1 else ''} {', '.join(map(str, values))}"


def _where(p: Planted) -> str:
    if p.rows:
        return _numbers("row", p.rows) + (f" ({_numbers('line', p.lines)})" if p.lines else "")
    if p.lines:
        return _numbers("line", p.lines)
    return "shard" if p.path else "dataset"


def readme() -> bytes:
    """``README.md``: the fixed text around a table rendered from :data:`PLANTED`."""
    lines = []
    for p in PLANTED:
        where = p.path if p.path else ", ".join(f"`{s}`" for s in p.shards) or "`defects/index/shards/`"
        file_cell = f"`{where}`" if p.path else where
        lines.append(f"| {file_cell} | {_where(p)} | {p.what} | `{p.check}` | {p.severity} |")
    return (README_HEAD + "\n".join(lines) + "\n" + README_TAIL).encode("utf-8")


# ------------------------------------------------------------------------------------------ write


def build() -> dict[str, bytes]:
    """Every output file: ``{relative POSIX path: bytes}`` (data, ``datacheck.toml``, ``README.md``)."""
    files: dict[str, bytes] = {}
    for part in (lm_clean, cls_clean, decode_defects, finite_defects, empty_defects, labels_defects,
                 tokens_defects, length_defects, mask_defects, dup_defects, split_defects, index_defects):
        files.update(part())
    files["datacheck.toml"] = CONFIG_TOML.encode("utf-8")
    files["README.md"] = readme()
    return dict(sorted(files.items()))


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".writing", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write(out: Path) -> list[Path]:
    """Write :func:`build`'s files under ``out``; a file whose bytes are already right is left untouched.

    Returns the paths written or confirmed, sorted.
    """
    done = []
    for rel, data in build().items():
        path = out / rel
        if not (path.is_file() and path.read_bytes() == data):
            _write_atomic(path, data)
        done.append(path)
    return done


def main(argv: list[str] | None = None) -> int:
    """Command line: write the files (``--out DIR``, default this script's folder); returns 0."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent,
                    help="output folder (default: the folder of this script)")
    args = ap.parse_args(argv)
    paths = write(args.out)
    total = sum(p.stat().st_size for p in paths)
    print(f"wrote {len(paths)} files, {total} bytes, under {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
