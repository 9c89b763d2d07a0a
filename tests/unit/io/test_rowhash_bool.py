"""Row content hashes of booleans: a mask stored as booleans hashes as the same 0/1 integers (any
width), on the fast path (lists without nulls), the distinct-row path (masks of two runs) and the
general path (nulls, scalars, nested lists, struct fields); every other dtype's pinned hash is
unchanged (tests/unit/checks/test_dup_cross.py GOLDEN)."""
from __future__ import annotations

import struct

import polars as pl
import pytest
import xxhash

from datacheck.io.rowhash import row_hash_series, value_dtype

MASKS = [[True, True, False], [True] * 300, None, [True, None], [], [False, True, False]]


def _fast_reference(row: list[int]) -> int:
    """The documented fast-path encoding of one int64 list column: tag 0x14, XXH3-128 of the
    little-endian int64 values, then XXH3-128 of the part."""
    part = bytes([0x14]) + xxhash.xxh3_128_digest(struct.pack(f"<{len(row)}q", *row))
    return xxhash.xxh3_128_intdigest(part)


@pytest.mark.parametrize("ints", [pl.Int8, pl.UInt8, pl.Int32, pl.Int64])
def test_a_bool_mask_hashes_as_the_same_0_1_integers(ints):
    b = pl.Series(MASKS, dtype=pl.List(pl.Boolean))
    i = pl.Series([None if m is None else [None if v is None else int(v) for v in m] for m in MASKS],
                  dtype=pl.List(ints))
    assert row_hash_series([b]).to_list() == row_hash_series([i]).to_list()
    # the rows without a null take the fast path: their values' int64 bytes
    got = row_hash_series([b]).to_list()
    for k, m in enumerate(MASKS):
        if m is not None and None not in m:
            assert got[k] == _fast_reference([int(v) for v in m])


def test_padded_bool_masks_of_a_batch_hash_as_int8_masks():
    """5,000 right-padded rows of 256 (the distinct-row path of masks of two runs)."""
    lens = [1 + (7 * r) % 256 for r in range(5000)]
    b = pl.Series([[True] * n + [False] * (256 - n) for n in lens], dtype=pl.List(pl.Boolean))
    i = pl.Series([[1] * n + [0] * (256 - n) for n in lens], dtype=pl.List(pl.Int8))
    assert row_hash_series([b]).to_list() == row_hash_series([i]).to_list()
    assert row_hash_series([b]).n_unique() == len(set(lens))


@pytest.mark.parametrize("b, i", [
    (pl.Series([True, False, None]), pl.Series([1, 0, None], dtype=pl.Int8)),
    (pl.Series([[[True], [False, True]]], dtype=pl.List(pl.List(pl.Boolean))),
     pl.Series([[[1], [0, 1]]], dtype=pl.List(pl.List(pl.Int64)))),
    (pl.Series([{"m": True, "x": 1}]), pl.Series([{"m": 1, "x": 1}])),
    (pl.Series([[True, False]], dtype=pl.Array(pl.Boolean, 2)), pl.Series([[1, 0]], dtype=pl.List(pl.Int16))),
])
def test_booleans_hash_as_0_1_at_any_depth(b, i):
    assert row_hash_series([b]).to_list() == row_hash_series([i]).to_list()


def test_booleans_differ_from_other_integers_and_value_dtype_says_int64():
    assert row_hash_series([pl.Series([True])]).to_list() != row_hash_series([pl.Series([2])]).to_list()
    assert value_dtype(pl.List(pl.Boolean)) == pl.List(pl.Int64)
