"""Column roles: given in ``[columns]`` or inferred from Hugging Face column names.

Inference (CHECKS.md "Roles and facts"): string columns ``text``/``sentence``/``content`` (and the
GLUE pair columns ``sentence1``/``sentence2``) are text; a scalar ``label`` is the class label; a
list-typed ``labels`` is token labels (a scalar ``labels`` is a class label); ``input_ids``,
``attention_mask`` and ``token_type_ids`` as named (list-typed). Roles given in the config are
never replaced by inference; a role column the config names but the shard lacks is reported as
``schema.missing_column``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from datacheck.config import ColumnsSection

__all__ = ["Roles", "resolve_roles", "null_role_casts", "text_column_names", "is_list", "inner_dtype", "ROLE_NAMES",
           "TEXT_NAMES"]

ROLE_NAMES = ("text", "label", "target", "features", "input_ids", "attention_mask", "labels",
              "token_type_ids", "aligned")
_TEXT_NAMES = ("text", "sentence", "content", "sentence1", "sentence2")
#: column names inferred as text (Hugging Face conventions)
TEXT_NAMES = _TEXT_NAMES


def _all_null(dtype: pl.DataType) -> bool:
    """A column whose every value is null in this shard: polars infers dtype ``Null`` for it from
    JSON or CSV. It keeps its role (its rows are null, which the role's checks report)."""
    return dtype == pl.Null


#: dtype a role column of dtype ``Null`` is read as, so that the role's checks run on it.
_NULL_AS: dict[str, pl.DataType] = {
    "text": pl.String, "label": pl.Int64, "target": pl.Float64, "features": pl.Float64,
    "input_ids": pl.List(pl.Int64), "attention_mask": pl.List(pl.Int64), "labels": pl.List(pl.Int64),
    "token_type_ids": pl.List(pl.Int64),
}


def is_list(dtype: pl.DataType) -> bool:
    return isinstance(dtype, (pl.List, pl.Array))


def inner_dtype(dtype: pl.DataType) -> pl.DataType:
    """The element dtype of a (nested) list/array dtype; the dtype itself for scalars."""
    while isinstance(dtype, (pl.List, pl.Array)):
        dtype = dtype.inner  # type: ignore[assignment]
    return dtype


def _as_tuple(v: str | list[str] | None) -> tuple[str, ...]:
    if v is None:
        return ()
    return (v,) if isinstance(v, str) else tuple(v)


@dataclass(frozen=True)
class Roles:
    """Resolved roles of one shard (only columns the shard has)."""

    text: tuple[str, ...] = ()
    label: str | None = None
    target: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    input_ids: str | None = None
    attention_mask: str | None = None
    labels: str | None = None
    token_type_ids: str | None = None
    aligned: tuple[tuple[str, ...], ...] = ()
    inferred: frozenset[str] = field(default_factory=frozenset)
    missing: tuple[tuple[str, str], ...] = ()  # (role, column) named in the config but absent

    def columns(self) -> list[str]:
        """All role columns, in a stable order, without repeats (the row content of ``dup.*``)."""
        out: list[str] = []
        for c in (*self.text, self.label, *self.target, *self.features, self.input_ids,
                  self.attention_mask, self.labels, self.token_type_ids,
                  *(c for g in self.aligned for c in g)):
            if c is not None and c not in out:
                out.append(c)
        return out

    def to_dict(self) -> dict[str, dict]:
        out = {}
        for name in ROLE_NAMES:
            v = getattr(self, name)
            if v in (None, ()):
                continue
            cols = [list(g) for g in v] if name == "aligned" else (list(v) if isinstance(v, tuple) else v)
            out[name] = {"columns": cols, "inferred": name in self.inferred}
        return out


def resolve_roles(cfg: ColumnsSection, schema: dict[str, pl.DataType]) -> Roles:
    """Resolve roles against one shard's schema (``{column: dtype}``)."""
    inferred: set[str] = set()
    missing: list[tuple[str, str]] = []

    def keep(role: str, cols: tuple[str, ...]) -> tuple[str, ...]:
        present = []
        for c in cols:
            if c in schema:
                present.append(c)
            else:
                missing.append((role, c))
        return tuple(present)

    def one(role: str, col: str | None) -> str | None:
        if col is None:
            return None
        got = keep(role, (col,))
        return got[0] if got else None

    text = keep("text", _as_tuple(cfg.text))
    if cfg.text is None:
        text = tuple(c for c in _TEXT_NAMES if c in schema and (schema[c] == pl.String or _all_null(schema[c])))
        if text:
            inferred.add("text")
    label = one("label", cfg.label)
    labels = one("labels", cfg.labels)
    # an all-null ``labels`` beside input_ids is token labels, elsewhere a class label
    token_shaped = "labels" in schema and (is_list(schema["labels"])
                                           or (_all_null(schema["labels"]) and "input_ids" in schema))
    if cfg.label is None:
        for cand in ("label", "labels"):
            if cand in schema and not is_list(schema[cand]) and cand != labels and not (cand == "labels" and token_shaped):
                label = cand
                inferred.add("label")
                break
    if cfg.labels is None and token_shaped and label != "labels":
        labels = "labels"
        inferred.add("labels")
    named = {}
    for role in ("input_ids", "attention_mask", "token_type_ids"):
        given = getattr(cfg, role)
        if given is not None:
            named[role] = one(role, given)
        elif role in schema and (is_list(schema[role]) or _all_null(schema[role])):
            named[role] = role
            inferred.add(role)
        else:
            named[role] = None
    aligned = tuple(keep("aligned", tuple(g)) for g in (cfg.aligned or ()))
    return Roles(
        text=text,
        label=label,
        target=keep("target", _as_tuple(cfg.target)),
        features=keep("features", _as_tuple(cfg.features)),
        input_ids=named["input_ids"],
        attention_mask=named["attention_mask"],
        labels=labels,
        token_type_ids=named["token_type_ids"],
        aligned=tuple(g for g in aligned if len(g) >= 2),
        inferred=frozenset(inferred),
        missing=tuple(missing),
    )


def null_role_casts(roles: Roles, schema: dict[str, pl.DataType]) -> dict[str, pl.DataType]:
    """``{column: dtype}`` for the role columns of dtype ``Null`` (every value null in this shard, as
    polars infers from JSON/CSV): text as String, class label Int64, target/features Float64, token
    columns List(Int64). The runner casts them so that the role's checks run and report the nulls."""
    out: dict[str, pl.DataType] = {}
    for role, dtype in _NULL_AS.items():
        v = getattr(roles, role)
        for c in (v if isinstance(v, tuple) else (v,)):
            if c is not None and c in schema and _all_null(schema[c]):
                out.setdefault(c, dtype)
    return out


def text_column_names(cfg: ColumnsSection) -> tuple[str, ...]:
    """Columns that hold text: the configured ``[columns] text`` plus the names inferred as text.
    CSV/TSV readers keep them as strings even when every value looks like a number."""
    return tuple(dict.fromkeys((*_as_tuple(cfg.text), *_TEXT_NAMES)))
