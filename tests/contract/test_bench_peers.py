"""The peer benchmark stays honest: ``benchmarks/bench_peers.py``'s peers (a polars query, DuckDB SQL
where DuckDB is installed, pandas, pandera on pandas and on polars, Hugging Face ``datasets.map``) find the same failing-row counts as
datacheck on a tiny generated shard (500 rows x 16 tokens, 5 rows planted per check), and
datacheck's counts are the planted ones."""
from __future__ import annotations

import importlib.util
import sys

import pytest
from conftest import ROOT

pytest.importorskip("datasets", reason="the peer benchmark's Hugging Face peer needs `datasets` (dev extra)")

_spec = importlib.util.spec_from_file_location("bench_peers", ROOT / "benchmarks" / "bench_peers.py")
assert _spec is not None and _spec.loader is not None
bench_peers = importlib.util.module_from_spec(_spec)
sys.modules["bench_peers"] = bench_peers
_spec.loader.exec_module(bench_peers)


@pytest.fixture(scope="module")
def shard(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, int]]:
    path, planted = bench_peers.make_shard(500, 16, tmp_path_factory.mktemp("peers"), rate=0.01)
    return str(path), planted


@pytest.fixture(scope="module")
def datacheck_counts(shard: tuple[str, dict[str, int]]) -> dict[str, int]:
    return bench_peers.counts_datacheck(shard[0])


def test_datacheck_finds_the_planted_rows(shard: tuple[str, dict[str, int]], datacheck_counts: dict[str, int]) -> None:
    _, planted = shard
    assert planted == {c: 5 for c in bench_peers.CHECKS}
    assert datacheck_counts == planted


@pytest.mark.parametrize("tool", ["polars", "duckdb", "pandas", "pandera-pandas", "pandera-polars", "datasets"])
def test_peer_counts_equal_datacheck(tool: str, shard: tuple[str, dict[str, int]],
                                     datacheck_counts: dict[str, int]) -> None:
    if tool == "duckdb":
        pytest.importorskip("duckdb", reason="DuckDB is no dependency of datacheck: its peer runs where it is installed")
    got = bench_peers.PEERS[tool](shard[0])
    assert got == datacheck_counts, bench_peers.compare({"datacheck": datacheck_counts, tool: got}, shard[1])


def test_a_differing_count_is_reported() -> None:
    planted = {c: 5 for c in bench_peers.CHECKS}
    wrong = {**planted, "empty.text": 4}
    assert bench_peers.compare({"datacheck": planted, "pandas": wrong}, planted) == [
        "pandas empty.text: 4 != datacheck 5"]
    assert bench_peers.compare({"datacheck": wrong}, planted) == ["datacheck empty.text: 4 != planted 5"]


@pytest.mark.slow
def test_script_run_exits_zero_and_prints_the_table(shard: tuple[str, dict[str, int]], tmp_path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The driver itself: a fresh process per tool, the table, exit 0 when the counts agree."""
    rc = bench_peers.main(["--rows", "500", "--seq-len", "16", "--defect-rate", "0.01", "--repeat", "1",
                           "--tools", "datacheck,pandas", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "| datacheck |" in out and "| pandas |" in out and "COUNTS DIFFER" not in out
