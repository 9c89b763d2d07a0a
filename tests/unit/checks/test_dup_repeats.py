"""``dup.exact_in_shard`` from the row-hash payload: the rows whose (hash, label) repeats an earlier
row, each with the earlier row it repeats, against a plain-Python reference (the candidate pre-filter on the hash alone keeps it exact)."""
from __future__ import annotations

from functools import reduce

import numpy as np
import polars as pl
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from datacheck.checks.dup.in_shard import ROWS_KEY, _fingerprint, _repeats_from_hashes, _row_key


def _reference(hashes: list[int], labels: list[int | None] | None) -> list[tuple[int, int]]:
    """(row, the first row with its (hash, label)) of every row that repeats an earlier one."""
    first: dict = {}
    out = []
    for i, h in enumerate(hashes):
        k = (h, labels[i]) if labels is not None else h
        if k in first:
            out.append((i, first[k]))
        first.setdefault(k, i)
    return out


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.one_of(st.none(), st.integers(0, 2))), max_size=60),
       st.booleans())
def test_repeats_match_reference(rows, with_label):
    hashes = [h * (1 << 100) + 7 for h, _ in rows]  # UInt128 values beyond 64 bits
    labels = [lab for _, lab in rows] if with_label else None
    cols = {"hash": pl.Series(hashes, dtype=pl.UInt128)}
    if with_label:
        cols["label"] = pl.Series(labels, dtype=pl.Int64)
    got = _repeats_from_hashes({ROWS_KEY: pl.DataFrame(cols)})
    assert list(zip(got.rows.tolist(), got.earlier.tolist())) == _reference(hashes, labels)


def test_the_row_key_over_many_columns_has_the_chains_values():
    """The in-shard candidate key XORs each column's fingerprint hash: as a balanced tree (depth
    log2(columns); a chain of one XOR a column made polars' planning super-linear), with the same
    values as the left-to-right chain (XOR is associative)."""
    rng = np.random.default_rng(0)
    cols = [f"c{i}" for i in range(37)]
    df = pl.DataFrame({c: rng.integers(0, 3, 50) for c in cols})
    chain = reduce(lambda a, b: a ^ b, [_fingerprint(c, None).hash(seed=i + 1) for i, c in enumerate(cols)])
    assert df.select(_row_key(cols).alias("k"))["k"].to_list() == df.select(chain.alias("k"))["k"].to_list()
    depth = len(_row_key(cols).meta.tree_format(return_as_string=True).split("binary: ^")) - 1
    assert depth == len(cols) - 1  # every XOR there, once
