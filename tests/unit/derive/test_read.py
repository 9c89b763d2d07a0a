"""The read path's derivations (``datacheck.derive.read``): a caller names the ones it needs, the
registry computes them from the families' declarations, and a derivation not asked for leaves the
shard as read."""
from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from datacheck.checks import all as _families  # noqa: F401 - every family registers its checks
from datacheck.checks.registry import DERIVES, MEASURES, derives, needed_derivations
from datacheck.derive.read import ALPACA, CHAT, DERIVATIONS, PAIRS, count_rows, open_for_checks
from datacheck.model.config import config_from_dict
from datacheck.model.errors import InternalError

ALPACA_ROWS = pl.DataFrame({"instruction": ["Say hi", "Add 1 2"], "input": ["", "1 2"], "output": ["hi", "3"]})


def test_alpaca_messages_are_derived_only_when_asked_for():
    cfg = config_from_dict({})
    got = open_for_checks(ALPACA_ROWS, cfg)  # the default: every derivation
    assert "messages" in got.schema and got.roles.messages == "messages" and got.roles.derived == ("messages",)
    assert got.lf.collect()["messages"].to_list()[1] == [{"role": "user", "content": "Add 1 2\n1 2"},
                                                         {"role": "assistant", "content": "3"}]
    plain = open_for_checks(ALPACA_ROWS, cfg, derive=frozenset({CHAT, PAIRS}))
    assert "messages" not in plain.schema and plain.roles.messages is None and plain.roles.derived == ()
    assert plain.lf.collect().equals(ALPACA_ROWS)


def test_the_families_declare_every_derivation_and_the_registry_computes_the_union():
    assert needed_derivations() == DERIVATIONS
    assert DERIVES["datacheck.checks.sft"] == {ALPACA, CHAT}
    assert DERIVES["datacheck.checks.pref"] == {PAIRS}
    # only the preference checks: the pairs (and what the measurements' families read)
    only_pref = needed_derivations({"pref.identical_pair", "pref.empty_response"})
    assert PAIRS in only_pref
    # no check: what the measurements' families read (the row hashes read every role column)
    measured = frozenset().union(*(DERIVES.get(fn.__module__, frozenset()) for fn in MEASURES.values()))
    assert needed_derivations(set()) == measured


def test_an_unknown_derivation_is_refused_at_declaration():
    with pytest.raises(InternalError, match="unknown derivations"):
        derives("tests.unit.derive.nowhere", "tokenize")
    assert "tests.unit.derive.nowhere" not in DERIVES


def test_count_rows_reads_without_deriving(tmp_path: Path):
    p = tmp_path / "a.parquet"
    ALPACA_ROWS.write_parquet(p)
    assert count_rows(p, "parquet", config_from_dict({})) == 2
    bad = tmp_path / "b.parquet"
    bad.write_bytes(b"not parquet")
    assert count_rows(bad, "parquet", config_from_dict({})) is None
