"""The one read path: a shard opened exactly as the checks see it, for every verb.

``audit``, ``inspect`` (values and ``--export``), ``clean``, ``index build|verify`` (row counts),
``schema infer`` and ``audit --against`` all call :func:`open_for_checks`, so they read the same
columns with the same dtypes:

1. the format's reader (:func:`datacheck.io.readers.open_shard`): CSV/TSV text columns
   (:func:`datacheck.model.roles.text_column_names`: ``[columns] text`` plus the inferred text
   names) are kept as strings even when every value looks like a number; fixed-size lists become
   lists;
2. the roles are resolved against the read schema (:func:`datacheck.model.roles.resolve_roles`);
3. role columns whose values are all null (dtype ``Null`` / ``List(Null)``) are cast to the role's
   dtype (:func:`datacheck.model.roles.null_role_casts`), and dictionary-encoded text columns
   (``Categorical``/``Enum``: Arrow ``dictionary<string>``, pandas ``category``) to ``String``
   (:func:`datacheck.model.roles.text_casts`), lazily.

No other module calls ``open_shard`` (a test walks the package's syntax trees for it).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from datacheck.io.discover import DiscoveredShard
from datacheck.io.readers import ShardData, Unreadable, normalize_frame, open_shard
from datacheck.model.config import Config
from datacheck.model.findings import Finding
from datacheck.model.roles import Roles, null_role_casts, resolve_roles, text_casts, text_column_names

__all__ = ["CheckInput", "open_for_checks"]


@dataclass
class CheckInput:
    """A shard (or an in-memory frame) as the checks read it.

    Attributes:
        lf: the rows, casts applied (0-based row index = position in this frame).
        schema: ``{column: dtype}`` of ``lf`` (after the casts).
        roles: the resolved roles (``[columns]`` plus inference over ``schema``).
        casts: ``{column: dtype}`` of the all-null role columns and dictionary-encoded text columns
            that were cast (empty when none).
        decode_findings: ``decode.*`` findings found while opening (line formats).
        line_format: True for JSONL/CSV (rows then also have 1-based line numbers).
        line_of_row: ``(rows,)`` int64, the 1-based line of each row, or None when it is ``row + line_base``.
        line_base: the line of row 0 when ``line_of_row`` is None.
    """

    lf: pl.LazyFrame
    schema: dict[str, pl.DataType]
    roles: Roles
    casts: dict[str, pl.DataType] = field(default_factory=dict)
    decode_findings: list[Finding] = field(default_factory=list)
    line_format: bool = False
    line_of_row: np.ndarray | None = None
    line_base: int = 1

    def lines_of(self, rows: list[int]) -> list[int]:
        """1-based line numbers of the 0-based ``rows`` (line formats), else ``[]``."""
        return ShardData(lf=self.lf, line_format=self.line_format, line_of_row=self.line_of_row,
                         line_base=self.line_base).lines_of(rows)


def open_for_checks(source: DiscoveredShard | pl.DataFrame | pl.LazyFrame, cfg: Config) -> CheckInput:
    """Open ``source`` as every verb reads it (see the module docstring).

    Args:
        source: a discovered shard (path, format), or an in-memory polars frame (tests, the Python
            API: no decode findings, no line numbers).
        cfg: the validated config: ``[dataset]`` (CSV options), ``[columns]`` (roles, text columns),
            ``[report] max_examples`` (examples of decode findings).

    Returns:
        The :class:`CheckInput`; nothing is collected except the schema (parquet/Arrow stay lazy scans).

    Raises:
        Unreadable: the shard cannot be opened or parsed, or its schema cannot be read (the reason
            says why and where; the audit turns it into ``decode.unreadable``).
        TypeError: ``source`` is none of the accepted types.
    """
    if isinstance(source, (pl.DataFrame, pl.LazyFrame)):
        data = normalize_frame(source.lazy())
    elif isinstance(source, DiscoveredShard):
        data = open_shard(source.source, source.format, cfg.dataset, cfg.report.max_examples,
                          string_columns=text_column_names(cfg.columns))
    else:
        raise TypeError(f"open_for_checks reads a DiscoveredShard or a polars DataFrame/LazyFrame, "
                        f"not {type(source).__name__}")
    try:
        schema = dict(data.lf.collect_schema())
    except Exception as exc:  # noqa: BLE001 - any reader failure on the schema is an unreadable shard
        raise Unreadable(f"cannot read the schema: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    roles = resolve_roles(cfg.columns, schema,
                          class_domain=cfg.labels.num_classes is not None or cfg.labels.classes is not None)
    casts = {**null_role_casts(roles, schema), **text_casts(roles, schema)}
    lf = data.lf
    if casts:
        lf = lf.with_columns([pl.col(c).cast(t) for c, t in casts.items()])
        schema.update(casts)
    return CheckInput(lf=lf, schema=schema, roles=roles, casts=casts, decode_findings=list(data.decode_findings),
                      line_format=data.line_format, line_of_row=data.line_of_row, line_base=data.line_base)
