"""Peer benchmark (issue 14): the same row checks on one generated token shard, done by datacheck
and by the tools ML teams would otherwise write them in, with the per-check failing-row counts of
every peer asserted equal to datacheck's.

The shard (seeded, parquet, one file; default 20,000 rows x 128 tokens; written once under
benchmarks/_work, or ``--out``): ``input_ids`` list<int32> (vocab 50257, right-padded with id
50256), ``attention_mask`` list<int8> (1 = real token, 0 = padding), ``labels`` list<int64>
(``-100`` over a 1-5 token prompt and over padding, else the id), ``quality`` float64 and ``text``
string (nullable). Planted defects, each on its own disjoint set of rows (``--defect-rate``, default
0.5% of the rows per check), one per check below, so every count is known in advance:

==============================  =======================================================================
check (CHECKS.md)               what makes a row fail (the definition every peer implements)
==============================  =======================================================================
finite.nan                      ``quality`` is NaN (no nulls are planted: pandas cannot tell them apart)
empty.text                      ``text`` is null, ``""`` or only ASCII whitespace (planted: the three)
tokens.out_of_vocab             an ``input_ids`` element < 0 or >= vocab_size (planted: 50264, -3)
mask.non_binary                 an ``attention_mask`` element not in {0, 1} (planted: 2)
empty.all_padding               a non-empty ``attention_mask`` that is all 0
labels.out_of_range             a ``labels`` element >= vocab_size and != -100 (planted: 50357)
labels.unexpected_sentinel      a ``labels`` element < 0 and != -100 (planted: -1)
empty.no_supervised_tokens      every ``labels`` element is -100
length.mismatch                 ``input_ids``, ``attention_mask`` and ``labels`` differ in length
                                (planted: the last label dropped)
==============================  =======================================================================

The peers, each run in a fresh subprocess (timed: wall and CPU seconds of the work, i.e. reading
the shard and computing the counts, after the imports; the whole process's wall time; peak RSS):

- ``pandas``: ``pd.read_parquet`` (NumPy-backed: list cells are NumPy arrays), then idiomatic
  vectorized pandas: ``Series.explode`` of each list column, element predicates,
  ``groupby(level=0).any()`` back to rows, ``Series.map(len)`` for lengths;
- ``pandera-pandas``: a ``pandera.pandas.DataFrameSchema`` whose custom ``Check`` s (vectorized, named
  by the check ID, ``ignore_na=False``) compute the same per-row verdicts; ``validate(lazy=True)``;
  the counts are the distinct failing row indices per check in ``SchemaErrors.failure_cases``;
- ``pandera-polars``: the same schema on the polars backend (``pandera.polars``): each custom check
  returns a per-row boolean column of the lazy frame (polars list kernels);
- ``polars``: a hand-written polars query: ``pl.scan_parquet`` and one ``select`` of the nine per-row
  verdicts (list kernels: ``list.min``/``list.max``/``list.len``, ``list.eval(...).list.any()``) summed;
- ``duckdb``: one DuckDB SQL query over ``read_parquet`` (list lambdas ``list_bool_or(list_transform(...))``,
  ``len``), the nine verdicts summed; DuckDB is not one of datacheck's dependencies: it is imported
  from the environment, or from ``--duckdb-path DIR`` (e.g. ``pip install --target DIR duckdb``), and
  left out with a note when absent;
- ``datasets``: Hugging Face ``Dataset.from_parquet`` (arrow cache in a temporary folder, deleted)
  then ``Dataset.map(batched=True, batch_size=1000)`` computing one boolean flag column per check
  in Python over the batch's lists (the default python format; one process), summed;
- ``datacheck``: the library call ``datacheck.audit(path, CONFIG)`` (every check that applies, not
  only these nine; default workers: one shard, so one process), counts = ``Finding.count``.

Repeats are interleaved (each round runs every tool once) and the medians are printed as a
markdown table. The planted counts are checked too. Exit status 1 when any peer's counts differ
from datacheck's (or datacheck's from the planted ones); the differing counts are printed.

Usage: python benchmarks/bench_peers.py [--rows 20000] [--seq-len 128] [--repeat 3]
       [--tools datacheck,pandas,...] [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

WORK = Path(__file__).resolve().parent / "_work"
VOCAB = 50257
PAD = 50256
IGNORE = -100
CONFIG = {"tokens": {"vocab_size": VOCAB, "pad_token_id": PAD}, "labels": {"ignore_index": IGNORE}}
CHECKS = ("finite.nan", "empty.text", "tokens.out_of_vocab", "mask.non_binary", "empty.all_padding",
          "labels.out_of_range", "labels.unexpected_sentinel", "empty.no_supervised_tokens", "length.mismatch")
TOOLS = ("datacheck", "polars", "duckdb", "pandas", "pandera-pandas", "pandera-polars", "datasets")


# --------------------------------------------------------------------------------------------- data

def make_shard(rows: int, seq_len: int, out_dir: Path = WORK, rate: float = 0.005,
               seed: int = 0) -> tuple[Path, dict[str, int]]:
    """Write the seeded shard (once; reused when present) and return (path, planted counts).

    Args:
        rows: number of rows (>= 9 * 4 so every check gets defective rows at the smallest rate).
        seq_len: tokens a row (>= 8).
        out_dir: folder of the parquet file (created; the file is written atomically).
        rate: fraction of the rows planted per check (at least 2 rows per check).
    Returns:
        the file path and ``{check ID: rows planted}``: the failing-row count each tool must find.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    if seq_len < 8 or rows < 4 * len(CHECKS):
        raise SystemExit(f"--rows must be >= {4 * len(CHECKS)} and --seq-len >= 8")
    k = max(2, int(rows * rate))
    if k * len(CHECKS) > rows:
        raise SystemExit(f"--defect-rate {rate} plants more rows than the shard has")
    planted = {c: k for c in CHECKS}
    path = out_dir / f"peers_{rows}x{seq_len}_{k}.parquet"
    if path.exists():
        return path, planted
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, PAD, size=(rows, seq_len), dtype=np.int32)
    lengths = rng.integers(4, seq_len + 1, size=rows)
    pos = np.arange(seq_len)[None, :]
    real = pos < lengths[:, None]
    ids[~real] = PAD
    mask = real.astype(np.int8)
    labels = ids.astype(np.int64)
    labels[pos < rng.integers(1, 4, size=rows)[:, None]] = IGNORE  # the prompt (1-3 tokens; >= 1 kept)
    labels[~real] = IGNORE
    quality = rng.random(rows)
    words = np.array(["the", "cat", "sat", "on", "a", "mat", "token", "data"])
    text = [" ".join(words[rng.integers(0, len(words), size=3)]) for _ in range(rows)]
    sets = rng.permutation(rows)[: k * len(CHECKS)].reshape(len(CHECKS), k)
    bad = dict(zip(CHECKS, sets))
    quality[bad["finite.nan"]] = np.nan
    for i, r in enumerate(bad["empty.text"]):
        text[r] = (None, "", " \t ")[i % 3]
    half = k // 2
    ids[bad["tokens.out_of_vocab"][:half], 0] = VOCAB + 7
    ids[bad["tokens.out_of_vocab"][half:], 1] = -3
    mask[bad["mask.non_binary"], 0] = 2
    mask[bad["empty.all_padding"]] = 0
    labels[bad["labels.out_of_range"], seq_len - 1] = VOCAB + 100
    labels[bad["labels.unexpected_sentinel"], seq_len - 1] = -1
    labels[bad["empty.no_supervised_tokens"]] = IGNORE
    lab_len = np.full(rows, seq_len)
    lab_len[bad["length.mismatch"]] = seq_len - 1  # the last label dropped

    def full(a: Any) -> pa.Array:
        return pa.ListArray.from_arrays(pa.array(np.arange(0, rows * seq_len + 1, seq_len, dtype=np.int32)),
                                        pa.array(a.ravel()))

    keep = (pos < lab_len[:, None]).ravel()
    lab_off = np.concatenate([[0], np.cumsum(lab_len)]).astype(np.int32)
    table = pa.table({
        "input_ids": full(ids), "attention_mask": full(mask),
        "labels": pa.ListArray.from_arrays(pa.array(lab_off), pa.array(labels.ravel()[keep])),
        "quality": pa.array(quality), "text": pa.array(text, type=pa.string()),
    })
    tmp = path.with_suffix(".tmp")
    pq.write_table(table, tmp)
    tmp.replace(path)
    return path, planted


# --------------------------------------------------------------------------------------------- peers

def counts_datacheck(path: str) -> dict[str, int]:
    """``datacheck.audit`` (library call, no cache): the findings' failing-row counts."""
    import datacheck

    rep = datacheck.audit(path, CONFIG)
    got = {f.check: f.count for f in rep.findings}
    return {c: got.get(c, 0) for c in CHECKS}


def _any_per_row(s: Any, pred: Callable[[Any], Any]) -> Any:
    """Per row of a NumPy-backed list column ``s``: does any element satisfy ``pred``? (explode:
    one row per element, index = the row's index; ``groupby(level=0).any()`` back to rows)."""
    import pandas as pd

    flat = pd.to_numeric(s.explode())
    return pred(flat).groupby(level=0).any().reindex(s.index, fill_value=False)


# The nine verdicts (True = the row fails) in pandas, each from one column (a Series) or, for
# the two that read several columns, the frame. Used per check by pandera-pandas.
PANDAS_COLUMN_RULES: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "finite.nan": ("quality", lambda s: s.isna()),
    "empty.text": ("text", lambda s: s.isna() | (s.str.strip() == "")),
    "tokens.out_of_vocab": ("input_ids", lambda s: _any_per_row(s, lambda x: (x < 0) | (x >= VOCAB))),
    "mask.non_binary": ("attention_mask", lambda s: _any_per_row(s, lambda x: ~x.isin([0, 1]))),
    "labels.out_of_range": ("labels", lambda s: _any_per_row(s, lambda x: (x >= VOCAB) & (x != IGNORE))),
    "labels.unexpected_sentinel": ("labels", lambda s: _any_per_row(s, lambda x: (x < 0) & (x != IGNORE))),
    "empty.no_supervised_tokens": ("labels", lambda s: ~_any_per_row(s, lambda x: x != IGNORE)),
}
PANDAS_FRAME_RULES: dict[str, Callable[[Any], Any]] = {
    "empty.all_padding": lambda d: ((d["input_ids"].map(len) > 0) & (d["attention_mask"].map(len) > 0)
                                    & ~_any_per_row(d["attention_mask"], lambda x: x != 0)),
    "length.mismatch": lambda d: ((d["input_ids"].map(len) != d["attention_mask"].map(len))
                                  | (d["input_ids"].map(len) != d["labels"].map(len))),
}


def counts_pandas(path: str) -> dict[str, int]:
    """A plain pandas script: read, explode each list column once, vectorized predicates, count."""
    import pandas as pd

    df = pd.read_parquet(path)
    flat = {c: pd.to_numeric(df[c].explode()) for c in ("input_ids", "attention_mask", "labels")}

    def per_row(flags: Any) -> Any:
        return flags.groupby(level=0).any().reindex(df.index, fill_value=False)

    ids, mask, lab = flat["input_ids"], flat["attention_mask"], flat["labels"]
    n_ids, n_mask, n_lab = (df[c].map(len) for c in ("input_ids", "attention_mask", "labels"))
    text = df["text"]
    rows = {
        "finite.nan": df["quality"].isna(),
        "empty.text": text.isna() | (text.str.strip() == ""),
        "tokens.out_of_vocab": per_row((ids < 0) | (ids >= VOCAB)),
        "mask.non_binary": per_row(~mask.isin([0, 1])),
        "empty.all_padding": (n_ids > 0) & (n_mask > 0) & ~per_row(mask != 0),
        "labels.out_of_range": per_row((lab >= VOCAB) & (lab != IGNORE)),
        "labels.unexpected_sentinel": per_row((lab < 0) & (lab != IGNORE)),
        "empty.no_supervised_tokens": ~per_row(lab != IGNORE),
        "length.mismatch": (n_ids != n_mask) | (n_ids != n_lab),
    }
    return {c: int(v.sum()) for c, v in rows.items()}


def _failing_rows(failure_cases: Any, index_col: str = "index") -> dict[str, int]:
    """Distinct failing row indices per check name in a pandera ``failure_cases`` frame (pandas)."""
    fc = failure_cases[failure_cases["check"].isin(CHECKS)]
    got = fc.groupby("check")[index_col].nunique().to_dict()
    return {c: int(got.get(c, 0)) for c in CHECKS}


def counts_pandera_pandas(path: str) -> dict[str, int]:
    """pandera (pandas backend): one DataFrameSchema; the seven one-column verdicts as named custom
    column checks, the two that read several columns as frame-wide checks; each returns a per-row
    boolean Series (True = valid) so that the failure cases carry the row index; ``ignore_na=False``
    so that a null text is checked."""
    import pandas as pd
    import pandera.pandas as pa
    from pandera.errors import SchemaErrors

    col_checks: dict[str, list] = {c: [] for c in ("input_ids", "attention_mask", "labels", "quality", "text")}
    for cid, (col, fn) in PANDAS_COLUMN_RULES.items():
        col_checks[col].append(pa.Check(lambda s, fn=fn: ~fn(s), name=cid, ignore_na=False))
    schema = pa.DataFrameSchema(
        {"input_ids": pa.Column(object, checks=col_checks["input_ids"]),
         "attention_mask": pa.Column(object, checks=col_checks["attention_mask"]),
         "labels": pa.Column(object, checks=col_checks["labels"]),
         "quality": pa.Column(float, nullable=True, checks=col_checks["quality"]),
         "text": pa.Column(object, nullable=True, checks=col_checks["text"])},
        checks=[pa.Check(lambda d, fn=fn: ~fn(d), name=cid, ignore_na=False) for cid, fn in PANDAS_FRAME_RULES.items()],
    )
    df = pd.read_parquet(path)
    try:
        schema.validate(df, lazy=True)
    except SchemaErrors as err:
        return _failing_rows(err.failure_cases)
    return {c: 0 for c in CHECKS}


def _polars_rules() -> dict[str, tuple[str | None, Any]]:
    """The nine verdicts (True = the row fails) as polars expressions (list kernels), each with its
    one column (None: it reads several columns)."""
    import polars as pl

    ids, mask, lab = pl.col("input_ids"), pl.col("attention_mask"), pl.col("labels")
    text = pl.col("text")
    return {
        "finite.nan": ("quality", pl.col("quality").is_nan().fill_null(False)),
        "empty.text": ("text", text.is_null() | (text.str.strip_chars(" \t\n\r\f\v") == "")),
        "tokens.out_of_vocab": ("input_ids", (ids.list.min() < 0) | (ids.list.max() >= VOCAB)),
        "mask.non_binary": ("attention_mask", mask.list.eval((pl.element() != 0) & (pl.element() != 1)).list.any()),
        "empty.all_padding": (None, (ids.list.len() > 0) & (mask.list.len() > 0) & (mask.list.max() == 0)),
        "labels.out_of_range": ("labels", lab.list.eval((pl.element() >= VOCAB) & (pl.element() != IGNORE)).list.any()),
        "labels.unexpected_sentinel": ("labels", lab.list.eval((pl.element() < 0) & (pl.element() != IGNORE)).list.any()),
        "empty.no_supervised_tokens": ("labels", lab.list.eval(pl.element() != IGNORE).list.any().not_()),
        "length.mismatch": (None, (ids.list.len() != mask.list.len()) | (ids.list.len() != lab.list.len())),
    }


def counts_pandera_polars(path: str) -> dict[str, int]:
    """pandera (polars backend): the same schema; each custom check selects a per-row boolean
    column of the lazy frame (True = valid); failure cases carry the row index."""
    import pandera.polars as pa
    import polars as pl
    from pandera.errors import SchemaErrors

    col_checks: dict[str | None, list] = {c: [] for c in (None, "input_ids", "attention_mask", "labels", "quality", "text")}
    for cid, (col, e) in _polars_rules().items():
        col_checks[col].append(pa.Check(lambda d, e=e: d.lazyframe.select(e.not_()), name=cid, ignore_na=False))
    schema = pa.DataFrameSchema(
        {"input_ids": pa.Column(pl.List(pl.Int32), checks=col_checks["input_ids"]),
         "attention_mask": pa.Column(pl.List(pl.Int8), checks=col_checks["attention_mask"]),
         "labels": pa.Column(pl.List(pl.Int64), checks=col_checks["labels"]),
         "quality": pa.Column(pl.Float64, nullable=True, checks=col_checks["quality"]),
         "text": pa.Column(pl.String, nullable=True, checks=col_checks["text"])},
        checks=col_checks[None],
    )
    df = pl.read_parquet(path)
    try:
        schema.validate(df, lazy=True)
    except SchemaErrors as err:
        return _failing_rows(err.failure_cases.to_pandas())
    return {c: 0 for c in CHECKS}


def counts_polars(path: str) -> dict[str, int]:
    """A hand-written polars query: the nine verdicts of :func:`_polars_rules`, summed in one select."""
    import polars as pl

    exprs = [e.fill_null(False).sum().alias(cid) for cid, (_, e) in _polars_rules().items()]
    got = pl.scan_parquet(path).select(exprs).collect().row(0, named=True)
    return {c: int(got[c]) for c in CHECKS}


#: the nine verdicts in DuckDB SQL (True = the row fails)
DUCKDB_RULES = {
    "finite.nan": "isnan(quality)",
    "empty.text": "text IS NULL OR trim(text, ' \t\n\r\f\v') = ''",
    "tokens.out_of_vocab": f"list_min(input_ids) < 0 OR list_max(input_ids) >= {VOCAB}",
    "mask.non_binary": "list_bool_or(list_transform(attention_mask, lambda x: x <> 0 AND x <> 1))",
    "empty.all_padding": "len(input_ids) > 0 AND len(attention_mask) > 0 AND list_max(attention_mask) = 0",
    "labels.out_of_range": f"list_bool_or(list_transform(labels, lambda x: x >= {VOCAB} AND x <> {IGNORE}))",
    "labels.unexpected_sentinel": f"list_bool_or(list_transform(labels, lambda x: x < 0 AND x <> {IGNORE}))",
    "empty.no_supervised_tokens": f"NOT list_bool_or(list_transform(labels, lambda x: x <> {IGNORE}))",
    "length.mismatch": "len(input_ids) <> len(attention_mask) OR len(input_ids) <> len(labels)",
}


def counts_duckdb(path: str) -> dict[str, int]:
    """DuckDB SQL: one query over ``read_parquet`` summing the nine verdicts (its default threads)."""
    import duckdb

    cols = ", ".join(f"count(*) FILTER (WHERE coalesce({sql}, false)) AS \"{cid}\"" for cid, sql in DUCKDB_RULES.items())
    con = duckdb.connect()
    row = con.execute(f"SELECT {cols} FROM read_parquet(?)", [path]).fetchone()
    con.close()
    assert row is not None
    return {c: int(v) for c, v in zip(DUCKDB_RULES, row)}


def _flags(batch: dict[str, list]) -> dict[str, list[bool]]:
    """``Dataset.map`` function: the nine flags of each row of a batch (python lists)."""
    out: dict[str, list[bool]] = {c: [] for c in CHECKS}
    for ids, mask, lab, q, t in zip(batch["input_ids"], batch["attention_mask"], batch["labels"],
                                    batch["quality"], batch["text"]):
        out["finite.nan"].append(q is not None and q != q)
        out["empty.text"].append(t is None or t.strip(" \t\n\r\f\v") == "")
        out["tokens.out_of_vocab"].append(any(x < 0 or x >= VOCAB for x in ids))
        out["mask.non_binary"].append(any(x not in (0, 1) for x in mask))
        out["empty.all_padding"].append(len(ids) > 0 and len(mask) > 0 and not any(mask))
        out["labels.out_of_range"].append(any(x >= VOCAB and x != IGNORE for x in lab))
        out["labels.unexpected_sentinel"].append(any(x < 0 and x != IGNORE for x in lab))
        out["empty.no_supervised_tokens"].append(all(x == IGNORE for x in lab))
        out["length.mismatch"].append(not (len(ids) == len(mask) == len(lab)))
    return out


def counts_datasets(path: str) -> dict[str, int]:
    """Hugging Face datasets: ``from_parquet`` (arrow cache in a temporary folder) + batched ``map``."""
    from datasets import Dataset, disable_progress_bars

    disable_progress_bars()
    cache = tempfile.mkdtemp(prefix="bench_peers_hf_")
    try:
        ds = Dataset.from_parquet(path, cache_dir=cache)
        flags = ds.map(_flags, batched=True, batch_size=1000, remove_columns=ds.column_names, keep_in_memory=True)
        table = flags.data.table
        return {c: int(sum(table.column(c).to_pylist())) for c in CHECKS}
    finally:
        shutil.rmtree(cache, ignore_errors=True)


PEERS: dict[str, Callable[[str], dict[str, int]]] = {
    "datacheck": counts_datacheck, "polars": counts_polars, "duckdb": counts_duckdb, "pandas": counts_pandas, "pandera-pandas": counts_pandera_pandas,
    "pandera-polars": counts_pandera_polars, "datasets": counts_datasets,
}
IMPORTS = {
    "datacheck": ("datacheck", "datacheck.checks.all"), "polars": ("polars",), "duckdb": ("duckdb",),
    "pandas": ("pandas", "pyarrow"),
    "pandera-pandas": ("pandas", "pandera.pandas", "pyarrow"), "pandera-polars": ("polars", "pandera.polars"),
    "datasets": ("datasets",),
}


# --------------------------------------------------------------------------------------------- driver

def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child(tool: str, path: str) -> None:
    """One tool in this (fresh) process: imports first (not timed as work), then the work."""
    import importlib

    for mod in IMPORTS[tool]:
        importlib.import_module(mod)
    c0, t0 = _cpu(), time.perf_counter()
    counts = PEERS[tool](path)
    dt, cpu = time.perf_counter() - t0, _cpu() - c0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB on Linux
    print(json.dumps({"seconds": dt, "cpu_seconds": cpu, "peak_rss_mib": rss, "counts": counts}))


def has_duckdb(extra_path: str | None) -> bool:
    """Whether ``import duckdb`` works in a child process (with ``extra_path`` on its PYTHONPATH)."""
    env = _env(extra_path)
    return subprocess.run([sys.executable, "-c", "import duckdb"], capture_output=True, env=env).returncode == 0


def _env(extra_path: str | None) -> dict[str, str]:
    """The child's environment: this checkout's datacheck first on the path (not an installed copy),
    ``extra_path`` last (the environment's own packages win)."""
    env = dict(os.environ)
    repo = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([p for p in (repo, env.get("PYTHONPATH"), extra_path) if p])
    return env


def run(tool: str, path: Path, extra_path: str | None = None) -> dict:
    """Run ``tool`` on ``path`` in a fresh process; adds ``process_seconds`` (start to exit)."""
    env = _env(extra_path if tool == "duckdb" else None)
    env.setdefault("HF_DATASETS_CACHE", tempfile.gettempdir())  # nothing under ~/.cache from the datasets peer
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", tool, str(path)],
                         capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"{tool} failed (exit {out.returncode}):\n{out.stderr[-4000:]}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["process_seconds"] = wall
    return res


def compare(results: dict[str, dict[str, int]], planted: dict[str, int]) -> list[str]:
    """The differences: every tool's counts against datacheck's, and datacheck's against the planted."""
    ref = results["datacheck"] if "datacheck" in results else planted
    diffs = [f"datacheck {c}: {ref[c]} != planted {planted[c]}" for c in CHECKS
             if "datacheck" in results and ref[c] != planted[c]]
    for tool, got in results.items():
        diffs += [f"{tool} {c}: {got[c]} != datacheck {ref[c]}" for c in CHECKS if got[c] != ref[c]]
    return diffs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--defect-rate", type=float, default=0.005)
    ap.add_argument("--tools", default=",".join(TOOLS), help=f"comma-separated, of {', '.join(TOOLS)}")
    ap.add_argument("--out", default=str(WORK), help="folder of the generated shard")
    ap.add_argument("--duckdb-path", default=None, help="a folder holding the duckdb package (pip install --target)")
    ap.add_argument("--child", nargs=2, metavar=("TOOL", "PATH"), help=argparse.SUPPRESS)
    ap.add_argument("--gen", nargs=4, metavar=("ROWS", "SEQ_LEN", "OUT", "RATE"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        child(*a.child)
        return 0
    if a.gen:
        make_shard(int(a.gen[0]), int(a.gen[1]), Path(a.gen[2]), float(a.gen[3]))
        return 0
    tools = [t for t in a.tools.split(",") if t]
    unknown = sorted(set(tools) - set(TOOLS))
    if unknown:
        ap.error(f"unknown tool(s) {unknown}; choose among {', '.join(TOOLS)}")
    if "duckdb" in tools and not has_duckdb(a.duckdb_path):
        print("duckdb is not importable (pip install --target DIR duckdb, then --duckdb-path DIR): left out")
        tools.remove("duckdb")
    # generated in a child process: a child's peak RSS as the kernel reports it starts from that of the
    # process that forked it, so this one must not have held the shard
    subprocess.run([sys.executable, __file__, "--gen", str(a.rows), str(a.seq_len), a.out, str(a.defect_rate)],
                   check=True)
    path, planted = make_shard(a.rows, a.seq_len, Path(a.out), a.defect_rate)
    print(f"shard {path} ({a.rows} rows x {a.seq_len} tokens, {path.stat().st_size / 2**20:.1f} MiB); "
          f"{planted[CHECKS[0]]} rows planted per check; load average {os.getloadavg()[0]:.2f} on "
          f"{os.cpu_count()} cores", flush=True)
    runs: dict[str, list[dict]] = {t: [] for t in tools}
    for _ in range(a.repeat):  # interleaved: every round runs every tool once
        for t in tools:
            runs[t].append(run(t, path, a.duckdb_path))
    results = {t: runs[t][0]["counts"] for t in tools}
    for t in tools:
        if any(r["counts"] != results[t] for r in runs[t]):
            print(f"{t}: counts differ between repeats: {[r['counts'] for r in runs[t]]}")
            return 1
    diffs = compare(results, planted)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print("| tool | work wall s | work CPU s | process wall s | peak RSS MiB | counts equal to datacheck |")
    print("|---|---|---|---|---|---|")
    for t in tools:
        med = {k: statistics.median(r[k] for r in runs[t]) for k in ("seconds", "cpu_seconds", "process_seconds")}
        rss = max(r["peak_rss_mib"] for r in runs[t])
        same = "yes" if not any(d.startswith(f"{t} ") for d in diffs) else "NO"
        print(f"| {t} | {med['seconds']:.2f} | {med['cpu_seconds']:.2f} | {med['process_seconds']:.2f} | "
              f"{rss:.0f} | {same} |")
    print("counts per check: " + json.dumps(results.get("datacheck", planted)))
    if "datacheck" in runs:
        dc = statistics.median(r["seconds"] for r in runs["datacheck"])
        peers = {t: statistics.median(r["seconds"] for r in runs[t]) for t in tools if t != "datacheck"}
        if peers:
            best = min(peers, key=lambda t: peers[t])
            print(f"fastest peer: {best} {peers[best]:.2f} s work wall; it / datacheck = {peers[best] / dc:.2f}x "
                  f"(goal >= 1.5); datacheck runs every check that applies, the peers only these nine")
    if diffs:
        print("COUNTS DIFFER:\n  " + "\n  ".join(diffs))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
