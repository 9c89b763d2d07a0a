"""Writing a contract from the data (``datacheck schema infer``).

For every column of the shards (one aggregate query per shard, merged exactly):

- ``dtype`` (when every shard agrees) and ``nullable`` (true when any value is null; NaN is not
  null, it is ``finite.nan``'s);
- the label column (role ``label``, see :mod:`datacheck.model.roles`): ``isin`` of the observed classes
  (at most :data:`MAX_CLASSES`, else a range for numbers);
- other numeric scalars: ``in_range`` of the observed finite minimum and maximum;
- list columns: in the ``datacheck:`` section, the observed length bounds and, for numeric
  elements, the finite element minimum and maximum, EXCEPT for role columns whose values are ids
  or flags (:func:`element_bounds`): their bounds come from the model's facts (``input_ids`` in
  ``[0, vocab_size)`` from ``[tokens] vocab_size`` or the tokenizer, masks in ``[0, 1]``, ...) or
  are left out with a note, never from the observed range: a shard whose rarest token id was
  never seen before would fail a contract bounded by what one sample happened to hold.

The output is Pandera's polars YAML form (``pandera.io.polars_io.serialize_schema``) plus the
``datacheck:`` section, so auditing the same data against it passes.
"""
from __future__ import annotations

import datetime as _dt
from typing import Any

import polars as pl

from datacheck.contracts.load import CONTRACT_FORMAT_VERSION, contract_from_dict
from datacheck.io.discover import discover
from datacheck.io.read import open_for_checks
from datacheck.io.readers import Unreadable
from datacheck.model.config import Config
from datacheck.model.errors import UsageError
from datacheck.model.roles import inner_dtype, is_list

__all__ = ["infer_contract", "infer_yaml", "element_bounds", "MAX_CLASSES"]

#: A label column with more distinct values than this gets a range, not a class list.
MAX_CLASSES = 1000


#: roles whose list elements are token ids of the vocabulary (chosen/rejected when tokenized)
_VOCAB_ROLES = ("input_ids", "chosen", "rejected")
#: roles whose list elements are 0/1 flags
_FLAG_ROLES = ("attention_mask", "assistant_mask")
#: roles whose list elements are ids with no bound datacheck knows (document numbers, lengths)
_UNBOUNDED_ROLES = ("document_ids", "seq_lens", "cu_seqlens")


def element_bounds(role: str, cfg: Config, vocab_size: int | None) -> tuple[int, int] | str | None:
    """The inclusive element bounds a contract gets for a list column of ``role``.

    Returns:
        ``(lo, hi)`` from the facts: ids of the vocabulary (``input_ids``, tokenized ``chosen`` /
        ``rejected``) ``(0, vocab_size - 1)``; token ``labels`` the same with ``lo`` lowered to
        ``[labels] ignore_index`` (-100 by default); ``token_type_ids`` ``(0, type_vocab_size - 1)``;
        ``position_ids`` ``(0, max_position_embeddings - 1)``; masks ``(0, 1)``. A string (the
        note to print) when the role has such bounds but the fact is unset: the bounds are left
        out. None for a column of no such role: the observed range is used.
    """
    if role in _FLAG_ROLES:
        return (0, 1)
    if role in _VOCAB_ROLES or role == "labels":
        if vocab_size is None:
            return ("token ids: element bounds left out; set [tokens] vocab_size or pass --tokenizer to bound "
                    "them by [0, vocab_size) (the observed range would fail the next shard with a rarer token)")
        ignore = cfg.labels.ignore if role == "labels" else None
        return (min(0, ignore) if ignore is not None else 0, vocab_size - 1)
    if role == "token_type_ids":
        n = cfg.tokens.type_vocab_size
        return (0, n - 1) if n else "element bounds left out; set [tokens] type_vocab_size to bound them"
    if role == "position_ids":
        n = cfg.tokens.max_position_embeddings
        return (0, n - 1) if n else "element bounds left out; set [tokens] max_position_embeddings to bound them"
    if role in _UNBOUNDED_ROLES:
        return "element bounds left out (they depend on how the rows are packed)"
    return None


def _py(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def _shard_stats(lf: pl.LazyFrame, schema: dict[str, pl.DataType], label: str | None) -> dict[str, dict[str, Any]]:
    exprs: list[pl.Expr] = [pl.len().alias("__n")]
    for i, (c, t) in enumerate(schema.items()):
        col = pl.col(c)
        exprs.append(col.null_count().alias(f"n{i}"))
        inner = inner_dtype(t)
        if is_list(t):
            depth = 0
            tt = t
            while isinstance(tt, (pl.List, pl.Array)):
                depth += 1
                tt = tt.inner  # type: ignore[assignment]
            L = col.list.len() if not isinstance(t, pl.Array) else col.arr.len()
            exprs += [L.min().alias(f"lmin{i}"), L.max().alias(f"lmax{i}")]
            if inner.is_numeric():
                el = col
                for _ in range(depth):  # every element, at any nesting depth
                    el = el.explode()
                if inner.is_float():
                    el = el.filter(el.is_finite())
                exprs += [el.min().alias(f"emin{i}"), el.max().alias(f"emax{i}")]
        elif c == label and (t.is_integer() or t == pl.String or isinstance(t, (pl.Categorical, pl.Enum))):
            exprs.append(col.drop_nulls().cast(pl.String if not t.is_integer() else t).unique().head(MAX_CLASSES + 1)
                         .implode().alias(f"cls{i}"))
            if t.is_integer():
                exprs += [col.min().alias(f"min{i}"), col.max().alias(f"max{i}")]
        elif t.is_numeric():
            v = col.filter(col.is_finite()) if t.is_float() else col
            exprs += [v.min().alias(f"min{i}"), v.max().alias(f"max{i}")]
    row = lf.select(exprs).collect().row(0, named=True)
    out: dict[str, dict[str, Any]] = {"__rows": {"n": row["__n"]}}
    names = list(schema)
    for c in names:
        out[c] = {}
    for k, v in row.items():
        if k == "__n":
            continue
        stat = k.rstrip("0123456789")
        out[names[int(k[len(stat):])]][stat] = _py(v)
    return out


def _merge(a: Any, b: Any, how: str) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b) if how == "min" else max(a, b)


def infer_contract(paths: list[str], cfg: Config | None = None, name: str = "inferred",
                   vocab_size: int | None = None) -> tuple[dict[str, Any], list[str]]:
    """Infer a contract from the shards under ``paths``.

    Args:
        paths: shard files, folders or globs (as ``datacheck audit`` takes them).
        cfg: the config (format, csv options, ``[columns]`` roles, ``[tokens]``/``[labels]``
            facts for the bounds of id columns); defaults when None.
        name: the schema's ``name``.
        vocab_size: the vocabulary size when ``[tokens] vocab_size`` is unset (e.g. a tokenizer's
            ``get_vocab_size(with_added_tokens=True)``); ``[tokens] vocab_size`` wins when set.

    Returns:
        (the contract as a mapping in Pandera's polars form plus ``datacheck:``, notes for the user:
        shards that could not be read, columns whose dtype differs between shards).

    Raises:
        UsageError: no shard found, or none readable.
    """
    import pandera.io.polars_io as pio
    import pandera.polars as pa


    cfg = cfg or Config()
    disc = discover([str(p) for p in paths], cfg.dataset.format)
    notes: list[str] = []
    dtypes: dict[str, list[pl.DataType]] = {}
    stats: dict[str, dict[str, Any]] = {}
    present: dict[str, int] = {}
    role_of: dict[str, str] = {}  # list column -> the role whose element bounds it gets
    vocab = cfg.tokens.vocab_size if cfg.tokens.vocab_size is not None else vocab_size
    label: str | None = None
    rows = shards = 0
    for ds in disc.shards:
        try:
            data = open_for_checks(ds, cfg)  # as the audit reads it: a contract it writes must fit the audit
            schema, roles = data.schema, data.roles
            label = label or roles.label
            for role in (*_VOCAB_ROLES, "labels", *_FLAG_ROLES, "token_type_ids", "position_ids", *_UNBOUNDED_ROLES):
                for c in roles.of(role):
                    role_of.setdefault(c, role)
            st = _shard_stats(data.lf, schema, roles.label)
        except Unreadable as exc:
            notes.append(f"{ds.rel}: not read ({exc.reason})")
            continue
        except pl.exceptions.PolarsError as exc:
            notes.append(f"{ds.rel}: not read ({str(exc).splitlines()[0]})")
            continue
        shards += 1
        rows += st.pop("__rows")["n"]
        for c, t in schema.items():
            dtypes.setdefault(c, [])
            if t not in dtypes[c]:
                dtypes[c].append(t)
            present[c] = present.get(c, 0) + 1
            cur = stats.setdefault(c, {"n": 0})
            s = st[c]
            cur["n"] += s.get("n", 0)
            for k in ("lmin", "emin", "min"):
                if k in s:
                    cur[k] = _merge(cur.get(k), s[k], "min")
            for k in ("lmax", "emax", "max"):
                if k in s:
                    cur[k] = _merge(cur.get(k), s[k], "max")
            if "cls" in s:
                cur["cls"] = sorted(set(cur.get("cls", [])) | set(s["cls"] or []), key=lambda v: (str(type(v)), v))
    if shards == 0:
        raise UsageError("no readable shard to infer a schema from: " + "; ".join(notes or [str(p) for p in paths]))
    columns: dict[str, Any] = {}
    rules: dict[str, dict[str, Any]] = {}
    for c, ts in dtypes.items():
        s = stats[c]
        t = ts[0] if len(ts) == 1 else None
        if t is None:
            notes.append(f"column {c!r} has different dtypes across shards ({', '.join(map(str, ts))}): dtype left out")
        checks = []
        if "cls" in s and s["cls"] and len(s["cls"]) <= MAX_CLASSES:
            checks.append(pa.Check.isin(list(s["cls"])))
        elif s.get("min") is not None and s.get("max") is not None:
            checks.append(pa.Check.in_range(s["min"], s["max"]))
        columns[c] = pa.Column(t, nullable=s["n"] > 0, required=present[c] == shards, checks=checks or None)
        if any(k in s for k in ("lmin", "emin")):
            r: dict[str, Any] = {}
            for src, dst in (("lmin", "min_length"), ("lmax", "max_length"), ("emin", "min_value"), ("emax", "max_value")):
                if s.get(src) is not None:
                    r[dst] = s[src]
            bounds = element_bounds(role_of[c], cfg, vocab) if c in role_of and "emin" in s else None
            if bounds is not None:
                r.pop("min_value", None)
                r.pop("max_value", None)
                if isinstance(bounds, tuple):
                    r["min_value"], r["max_value"] = bounds
                else:
                    notes.append(f"column {c!r} ({role_of[c]}): {bounds}")
            if r:
                rules[c] = r
    schema = pa.DataFrameSchema(columns, name=name, description=(
        f"inferred by datacheck schema infer from {shards} shard(s), {rows} row(s); edit and commit"))
    out = pio.serialize_schema(schema)
    out.pop("version", None)  # the pandera version that wrote it; not part of the contract
    if rules:
        out["datacheck"] = {"version": CONTRACT_FORMAT_VERSION, "columns": rules}
    contract_from_dict(out, "inferred schema")  # it must load back (raises ConfigError otherwise)
    return out, notes


def infer_yaml(data: dict[str, Any], sources: list[str]) -> str:
    """The inferred contract as commented YAML text (what ``datacheck schema infer`` writes)."""
    import yaml

    head = (f"# datacheck data contract, inferred {_dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()}\n"
            f"# from: {', '.join(sources)}\n"
            "# Pandera polars schema form (pandera.io.polars_io), plus datacheck's list rules under `datacheck:`.\n"
            "# Ranges and classes are what was observed (id and mask columns: from the vocabulary and the\n"
            "# [tokens] facts, or left out): widen them where new data may legitimately differ.\n")
    return head + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
