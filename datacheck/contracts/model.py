"""The in-memory data contract: a Pandera polars ``DataFrameSchema`` plus datacheck's list rules.

Pandera's polars schema says what Pandera can say (columns, dtypes, nullability, required,
regex-named columns, built-in and user checks). What it cannot say about list columns (sequence
length bounds, element ranges, allowed element values) and about dtype *families* (a layout that
accepts any integer list, whatever its width) lives in :class:`ColumnRule`, read from the
``datacheck:`` section of the schema file (Pandera ignores that section, so the file stays loadable
by ``pandera.io.polars_io.from_yaml``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from datacheck.model.roles import inner_dtype, is_list

__all__ = ["KINDS", "ColumnRule", "Contract", "dtype_kind"]

#: dtype families a :class:`ColumnRule` may require (``kind``), as polars dtypes classify them.
KINDS = ("integer", "float", "numeric", "string", "boolean", "categorical", "struct",
         "list<integer>", "list<float>", "list<numeric>", "list<string>", "list<boolean>", "list<struct>")


def _scalar_kinds(dtype: pl.DataType) -> set[str]:
    if dtype.is_integer():
        return {"integer", "numeric"}
    if dtype.is_float():
        return {"float", "numeric"}
    if dtype == pl.String:
        return {"string"}
    if dtype == pl.Boolean:
        return {"boolean"}
    if isinstance(dtype, (pl.Categorical, pl.Enum)):
        return {"categorical"}
    if isinstance(dtype, pl.Struct):
        return {"struct"}
    return set()


def dtype_kind(dtype: pl.DataType) -> set[str]:
    """Every :data:`KINDS` entry that ``dtype`` belongs to.

    Args:
        dtype: a polars dtype; lists and arrays (any nesting) are classified by their element type.

    Returns:
        e.g. ``{"list<integer>", "list<numeric>"}`` for ``List(Int32)``, ``{"list<struct>"}`` for a chat
        ``messages`` column ``List(Struct({"role": String, "content": String}))``; empty for other types.
    """
    if is_list(dtype):
        return {f"list<{k}>" for k in _scalar_kinds(inner_dtype(dtype))}
    return _scalar_kinds(dtype)


@dataclass(frozen=True)
class ColumnRule:
    """datacheck's rules for one column (or every column matching a regex), beyond Pandera's.

    Attributes:
        kind: allowed dtype families (any of them); empty = any dtype. Checked per shard at
            structure level: a mismatch is ``schema.dtype``.
        min_length, max_length: inclusive bounds on the number of elements of a list value.
        min_value, max_value: inclusive bounds on every element of a list value (non-finite float
            elements are left to ``finite.*``).
        values: the allowed element values of a list value (e.g. ``[0, 1]`` for a mask).
    """

    kind: tuple[str, ...] = ()
    min_length: int | None = None
    max_length: int | None = None
    min_value: float | int | None = None
    max_value: float | int | None = None
    values: tuple[Any, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The rule as written in the ``datacheck.columns`` section (keys with values only)."""
        out: dict[str, Any] = {}
        if self.kind:
            out["kind"] = self.kind[0] if len(self.kind) == 1 else list(self.kind)
        for k in ("min_length", "max_length", "min_value", "max_value"):
            v = getattr(self, k)
            if v is not None:
                out[k] = v
        if self.values is not None:
            out["values"] = list(self.values)
        return out


@dataclass(frozen=True)
class Contract:
    """A loaded data contract.

    Attributes:
        name: the built-in layout name or the file the contract came from (shown in findings).
        schema: the Pandera polars ``DataFrameSchema`` (columns, dtypes, nullability, checks).
        rules: column name (or regex, see ``regex_rules``) -> :class:`ColumnRule`.
        regex_rules: names in ``rules`` that are regular expressions over column names.
        require_any: groups of columns (names or regexes) of which at least one must be present.
        aligned: groups of list columns (names or regexes) whose lengths must be equal per row.
    """

    name: str
    schema: Any
    rules: dict[str, ColumnRule] = field(default_factory=dict)
    regex_rules: frozenset[str] = frozenset()
    require_any: tuple[tuple[str, ...], ...] = ()
    aligned: tuple[tuple[str, ...], ...] = ()
