"""Column roles: given in ``[columns]`` or inferred from Hugging Face column names.

Inference (CHECKS.md "Roles and facts"): string columns ``text``/``sentence``/``content`` (and the
GLUE pair columns ``sentence1``/``sentence2``) are text; a scalar ``label`` of integer, string,
categorical or boolean dtype is the class label (a float ``label`` is a regression ``target``); a
list-typed ``labels`` is token labels (a scalar ``labels`` is a class label); ``input_ids``,
``attention_mask`` and ``token_type_ids`` as named (list-typed). Roles given in the config are
never replaced by inference; a role column the config names but the shard lacks is reported as
``schema.missing_column``; a role column whose dtype cannot serve the role (:func:`role_dtype_problems`)
is reported as ``schema.dtype`` by :mod:`datacheck.checks.roledtype`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from datacheck.model.config import ColumnsSection

__all__ = ["Roles", "resolve_roles", "null_role_casts", "text_column_names", "is_list", "inner_dtype", "ROLE_NAMES",
           "TEXT_NAMES", "RoleDtypeProblem", "role_dtype_problems", "role_problem", "list_depth"]

ROLE_NAMES = ("text", "label", "target", "features", "input_ids", "attention_mask", "labels",
              "token_type_ids", "aligned")
_TEXT_NAMES = ("text", "sentence", "content", "sentence1", "sentence2")
#: column names inferred as text (Hugging Face conventions)
TEXT_NAMES = _TEXT_NAMES


def _all_null(dtype: pl.DataType) -> bool:
    """A column whose every value is null in this shard: polars infers dtype ``Null`` for it from
    JSON or CSV. It keeps its role (its rows are null, which the role's checks report)."""
    return dtype == pl.Null


def _null_elements(dtype: pl.DataType) -> bool:
    """A list column whose every element is null or every list empty in this shard (JSON ``[]`` or
    ``[null]`` rows only): polars infers ``List(Null)``."""
    return isinstance(dtype, pl.List) and dtype.inner == pl.Null


#: dtype a role column of dtype ``Null`` is read as, so that the role's checks run on it.
_NULL_AS: dict[str, pl.DataType] = {
    "text": pl.String(), "label": pl.Int64(), "target": pl.Float64(), "features": pl.Float64(),
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

    def to_dict(self) -> dict[str, dict[str, Any]]:
        out = {}
        for name in ROLE_NAMES:
            v = getattr(self, name)
            if v in (None, ()):
                continue
            cols = [list(g) for g in v] if name == "aligned" else (list(v) if isinstance(v, tuple) else v)
            out[name] = {"columns": cols, "inferred": name in self.inferred}
        return out


def _class_label_dtype(dtype: pl.DataType) -> bool:
    """Dtypes inferred as a class label: integer, string, categorical/enum, boolean (or all-null).
    A float column is not (its values may be regression scores; see :func:`resolve_roles`)."""
    return (dtype.is_integer() or dtype in (pl.String, pl.Boolean) or isinstance(dtype, (pl.Categorical, pl.Enum))
            or _all_null(dtype))


def resolve_roles(cfg: ColumnsSection, schema: dict[str, pl.DataType]) -> Roles:
    """Resolve roles against one shard's schema (``{column: dtype}``).

    Inference of the class label: a scalar ``label`` (else ``labels``) column of integer, string,
    categorical or boolean dtype. A float ``label`` column (e.g. STS-B similarity scores in
    ``[0, 5]``) is a regression target: it is inferred as ``target`` (when ``[columns] target`` is
    not given), so the ``finite.*`` checks apply and the label checks do not. A column the config
    gives as ``target`` or ``features`` is never inferred as the label. A float column the config
    names as ``label`` stays the label (integer classes stored as floats, e.g. with NaN for missing).
    """
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
    # columns the config gives a numeric role are never inferred as anything else
    numeric_given = set(_as_tuple(cfg.target)) | set(_as_tuple(cfg.features))
    # an all-null ``labels`` beside input_ids is token labels, elsewhere a class label
    token_shaped = "labels" in schema and (is_list(schema["labels"])
                                           or (_all_null(schema["labels"]) and "input_ids" in schema))
    inferred_target: list[str] = []
    if cfg.label is None:
        for cand in ("label", "labels"):
            if (cand not in schema or is_list(schema[cand]) or cand == labels or cand in numeric_given
                    or (cand == "labels" and token_shaped)):
                continue
            if _class_label_dtype(schema[cand]):
                label = cand
                inferred.add("label")
                break
            if schema[cand].is_float() and cfg.target is None:
                # a float ``label`` (e.g. STS-B similarity scores) is a regression target, not a class
                inferred_target.append(cand)
                inferred.add("target")
                break
    if cfg.labels is None and token_shaped and label != "labels" and "labels" not in numeric_given:
        labels = "labels"
        inferred.add("labels")
    named = {}
    for role in ("input_ids", "attention_mask", "token_type_ids"):
        given = getattr(cfg, role)
        if given is not None:
            named[role] = one(role, given)
        elif role in schema and role not in numeric_given and role not in text:
            # named as Hugging Face names it: the role, whatever its dtype (a dtype that cannot
            # serve it, e.g. a CSV cell holding "[1, 2]", is reported as schema.dtype)
            named[role] = role
            inferred.add(role)
        else:
            named[role] = None
    aligned = tuple(keep("aligned", tuple(g)) for g in (cfg.aligned or ()))
    return Roles(
        text=text,
        label=label,
        target=keep("target", _as_tuple(cfg.target)) if cfg.target is not None else tuple(inferred_target),
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
    columns List(Int64); and for token columns of dtype ``List(Null)`` (every list empty or all its
    elements null): List(Int64). The runner casts them so that the role's checks run and report
    the nulls (e.g. a null id is ``tokens.out_of_vocab``)."""
    out: dict[str, pl.DataType] = {}
    for role, dtype in _NULL_AS.items():
        v = getattr(roles, role)
        for c in (v if isinstance(v, tuple) else (v,)):
            if c is None or c not in schema:
                continue
            if _all_null(schema[c]) or (_null_elements(schema[c]) and isinstance(dtype, pl.List)):
                out.setdefault(c, dtype)
    return out


def text_column_names(cfg: ColumnsSection) -> tuple[str, ...]:
    """Columns that hold text: the configured ``[columns] text`` plus the names inferred as text.
    CSV/TSV readers keep them as strings even when every value looks like a number."""
    return tuple(dict.fromkeys((*_as_tuple(cfg.text), *_TEXT_NAMES)))


def list_depth(dtype: pl.DataType) -> int:
    """How many list/array levels ``dtype`` has (0 for a scalar, 2 for ``List(List(Int64))``)."""
    depth = 0
    while isinstance(dtype, (pl.List, pl.Array)):
        dtype = dtype.inner  # type: ignore[assignment]
        depth += 1
    return depth


@dataclass(frozen=True)
class RoleDtypeProblem:
    """A role column whose dtype cannot serve the role (reported as ``schema.dtype``).

    Attributes:
        role: the role (``input_ids``, ``label``, ...).
        column: the column.
        found: the column's dtype, as polars prints it.
        expected: what the role needs, in words.
        cause: the likely cause and remedy, in words.
    """

    role: str
    column: str
    found: str
    expected: str
    cause: str

    @property
    def message(self) -> str:
        """The ``schema.dtype`` finding's message."""
        return (f"column {self.column!r} (role {self.role}) has dtype {self.found}, expected {self.expected}: "
                f"{self.cause}. The {self.role} checks did not run on this shard")

    @property
    def skip_reason(self) -> str:
        """What a check that needs this role says when it cannot run."""
        return (f"{self.role} column {self.column!r} has dtype {self.found}, not {self.expected} "
                "(reported as schema.dtype)")


_INT_LIST = "a list of integers"
_EXPECTED = {
    "input_ids": _INT_LIST,
    "labels": _INT_LIST,
    "token_type_ids": _INT_LIST,
    "attention_mask": "a list of 0/1 integers or booleans",
    "text": "a string (or a list of strings)",
    "target": "numbers (or lists of numbers)",
    "features": "numbers (or lists of numbers)",
}


def _line_format(shard: str) -> str | None:
    name = shard.lower()
    for suffix in (".gz", ".zst", ".zstd", ".bz2", ".xz"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    if name.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    if name.endswith((".csv", ".tsv")):
        return "csv"
    return None


def _cause(role: str, col: str, dtype: pl.DataType, fmt: str | None, want_list: bool) -> str:
    """The likely cause of a role column of the wrong dtype, in words (by dtype and file format)."""
    inner = inner_dtype(dtype)
    depth = list_depth(dtype)
    if want_list and depth >= 2:
        return ("each row holds a list of lists (e.g. a multiple-choice or pre-batched layout), not one sequence; "
                "flatten it to one sequence per row")
    if want_list and depth == 0:
        if dtype == pl.String and fmt == "csv":
            return f"CSV/TSV cells hold {col!r} as text (e.g. \"[1, 2, 3]\"); store token columns in parquet, Arrow or JSONL"
        return f"each row holds a single {dtype} value where {role} needs a sequence; check [columns] {role}"
    if inner == pl.String:
        if fmt == "jsonl":
            return (f"JSONL lines disagree on the type of {col!r}: some hold strings (e.g. \"1\"), so the reader "
                    "read every value as a string; write numbers as JSON numbers")
        return (f"the values of {col!r} are strings; write them as numbers, or check [columns] {role}"
                if role != "label" else
                f"the labels are strings: give [labels] classes (the class names) instead of num_classes, "
                "or write the labels as integers")
    if inner.is_float():
        return (f"the values of {col!r} are floats: some are not integers (e.g. 2.5), or integers were written as "
                "floats (1.0); a float id cannot index an embedding. Write integers")
    return f"check [columns] {role} (it names a column of dtype {dtype})"


def role_dtype_problems(roles: Roles, schema: dict[str, pl.DataType], num_classes: int | None = None,
                        classes: tuple[Any, ...] | list[Any] | None = None, shard: str = "") -> list[RoleDtypeProblem]:
    """Role columns whose dtype cannot serve their role, decided from the shard's schema alone.

    Rules (the dtype each role needs):

    - ``input_ids``, ``token_type_ids``, token ``labels``: one list level of integers
      (``List``/``Array`` of Int*/UInt*). A string, a float list (e.g. ``[1, 2.5]`` in JSONL) or a
      list of lists fails.
    - ``attention_mask``: one list level of integers, booleans or floats (float values other than
      0/1 are ``mask.non_binary``). A string list or a list of lists fails.
    - ``label`` (class label): a scalar. With ``num_classes`` (and no ``classes``) it must be
      integer, float (integral values) or boolean; with numeric ``classes``, likewise; with string
      ``classes``, integer (Hugging Face ``ClassLabel`` index) or string.
    - ``text``: String, or a list of String. ``target``/``features``: numeric or list of numeric.

    Args:
        roles: the shard's resolved roles.
        schema: ``{column: polars dtype}`` of the shard (all-null role columns already cast).
        num_classes: ``[labels] num_classes``.
        classes: ``[labels] classes``.
        shard: the shard's path (its extension names the likely cause, e.g. JSONL type mixing).

    Returns:
        One :class:`RoleDtypeProblem` per (role, column), in role order.
    """
    fmt = _line_format(shard)
    out: list[RoleDtypeProblem] = []

    def add(role: str, col: str, expected: str, want_list: bool) -> None:
        t = schema[col]
        out.append(RoleDtypeProblem(role, col, str(t), expected, _cause(role, col, t, fmt, want_list)))

    for role in ("input_ids", "token_type_ids", "labels", "attention_mask"):
        col = getattr(roles, role)
        if col is None or col not in schema:
            continue
        t = schema[col]
        inner = inner_dtype(t)
        ok_inner = inner.is_integer() or (role == "attention_mask" and (inner == pl.Boolean or inner.is_float()))
        if list_depth(t) != 1 or not ok_inner:
            add(role, col, _EXPECTED[role], True)
    col = roles.label
    if col is not None and col in schema:
        t = schema[col]
        string_classes = classes is not None and any(isinstance(x, str) for x in classes)
        numeric_ok = t.is_integer() or t.is_float() or t == pl.Boolean
        if is_list(t):
            add("label", col, "a scalar class label (token labels belong in [columns] labels)", False)
        elif string_classes:
            if not (t.is_integer() or t in (pl.String,) or isinstance(t, (pl.Categorical, pl.Enum))):
                add("label", col, "an integer class index or a class name (string)", False)
        elif classes is not None or num_classes is not None:
            if not numeric_ok:
                add("label", col, "an integer class index (num_classes is set)" if classes is None
                    else "an integer class index (classes are numbers)", False)
    for c in roles.text:
        ct = schema.get(c)
        if ct is not None and not (ct == pl.String or (list_depth(ct) == 1 and inner_dtype(ct) == pl.String)):
            add("text", c, _EXPECTED["text"], False)
    for role in ("target", "features"):
        for c in getattr(roles, role):
            ct = schema.get(c)
            if ct is not None and not (inner_dtype(ct).is_numeric() or inner_dtype(ct) == pl.Boolean):
                add(role, c, _EXPECTED[role], False)
    return out


def role_problem(problems: list[RoleDtypeProblem], role: str, column: str | None = None) -> RoleDtypeProblem | None:
    """The problem of ``role`` (optionally of one ``column`` of it), or None when its dtype serves the role."""
    for p in problems:
        if p.role == role and (column is None or p.column == column):
            return p
    return None
