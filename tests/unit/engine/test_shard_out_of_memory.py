"""Memory running out while a shard is decoded is not a data defect: the audit stops with
:class:`~datacheck.model.errors.OutOfMemory` naming the shard and what to do (fewer workers, smaller
batches), the CLI exits 3 with one "out of memory" line, and no ``decode.unreadable`` is reported."""
from __future__ import annotations

import pyarrow as pa
import pytest
from batchhelp import batch_rows
from conftest import run_cli

from datacheck.engine.shard import audit_shard
from datacheck.formats import csv as csv_stream
from datacheck.io.discover import DiscoveredShard
from datacheck.io.hashing import hash_file
from datacheck.model.config import config_from_dict
from datacheck.model.constants import EXIT_INTERNAL
from datacheck.model.errors import OutOfMemory


def _csv(tmp_path):
    path = tmp_path / "data" / "shard.csv"
    path.parent.mkdir()
    path.write_text("text,label\n" + "".join(f"row {i},{i % 3}\n" for i in range(20)))
    return path


@pytest.fixture(params=[MemoryError, pa.lib.ArrowMemoryError], ids=["MemoryError", "ArrowMemoryError"])
def no_memory(request, monkeypatch):
    """Parsing a CSV piece runs out of memory (Python's MemoryError, or pyarrow's subclass of it)."""
    def parse(self, records, columns):
        raise request.param("cannot allocate 64 MiB")

    monkeypatch.setattr(csv_stream.CsvStream, "_parse", parse)


# None: the one-batch read (polars collects the reader's IO source, a failure there is caught as an
# engine error); 3: the batches (the reader's own error)
@pytest.mark.parametrize("rows", [None, 3])
def test_memory_running_out_while_decoding_is_out_of_memory_not_unreadable(tmp_path, no_memory, rows):
    path = _csv(tmp_path)
    chash, size = hash_file(path)
    with batch_rows(rows), pytest.raises(OutOfMemory) as err:
        audit_shard(DiscoveredShard(path=path, rel="shard.csv", format="csv"), config_from_dict({}), chash, size)
    msg = str(err.value)
    assert "memory ran out while decoding shard.csv" in msg
    assert "--workers" in msg and "DATACHECK_BATCH_ROWS" in msg


def test_cli_out_of_memory_is_exit_3_with_one_line_and_no_report(tmp_path, no_memory):
    path = _csv(tmp_path)
    out = tmp_path / "report.json"
    p = run_cli("audit", str(path.parent), "--no-cache", "--no-progress", "--workers", "1", "--output", str(out),
                "--report-dir", str(tmp_path / "reports"))
    assert p.returncode == EXIT_INTERNAL, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert lines[-1].startswith("datacheck: out of memory: memory ran out while decoding shard.csv"), p.stderr
    assert "unreadable" not in p.stdout + p.stderr and "Traceback" not in p.stderr
    assert not out.exists() and not (tmp_path / "reports").exists()


def test_memory_running_out_in_a_check_query_is_out_of_memory_not_a_check_error(tmp_path, monkeypatch):
    """The fused query runs out of memory, and so does each check run alone: OutOfMemory, not a
    check error listed under ``skipped`` (the check is not at fault)."""
    import datacheck.engine.shard as engine

    def collect(queries):
        raise MemoryError("cannot allocate")

    monkeypatch.setattr(engine, "_collect", collect)
    path = _csv(tmp_path)
    chash, size = hash_file(path)
    with pytest.raises(OutOfMemory, match="memory ran out while decoding shard.csv"):
        audit_shard(DiscoveredShard(path=path, rel="shard.csv", format="csv"), config_from_dict({}), chash, size)


@pytest.mark.parametrize("verb", ["inspect", "schema infer", "clean"])
def test_other_verbs_say_out_of_memory_too(tmp_path, no_memory, verb):
    """inspect, schema infer and clean read shards through the same path: the same one line, exit 3."""
    path = _csv(tmp_path)
    target = str(path) if verb == "inspect" else str(path.parent)
    extra = ["--out", str(tmp_path / "cleaned")] if verb == "clean" else []
    p = run_cli(*verb.split(), target, *extra, "--no-progress")
    assert p.returncode == EXIT_INTERNAL, (p.stdout, p.stderr)
    assert p.stderr.strip().splitlines()[-1].startswith(
        "datacheck: out of memory: memory ran out while decoding shard.csv"), p.stderr
    assert "Traceback" not in p.stderr and not (tmp_path / "cleaned").exists()


def test_a_memory_error_anywhere_in_a_verb_is_the_out_of_memory_line(tmp_path, monkeypatch):
    """A MemoryError outside any shard's decoding (here: listing the shards) is not a bug report."""
    import datacheck.cli.commands.checks as checks_verb

    def no_memory(args):
        raise MemoryError

    monkeypatch.setattr(checks_verb, "run", no_memory)
    p = run_cli("checks")
    assert p.returncode == EXIT_INTERNAL
    assert p.stderr.strip().splitlines() == [
        "datacheck: out of memory: memory ran out; run again with fewer --workers, smaller batches "
        "(DATACHECK_BATCH_ROWS=N rows a batch), or on a machine with more memory"], p.stderr


def test_out_of_memory_crosses_a_worker_process_as_it_is():
    """A worker's OutOfMemory reaches the caller through the pool (pickled) with its message."""
    import pickle

    err = OutOfMemory.decoding("shard.csv", 1024)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is OutOfMemory and str(back) == str(err) and "shard.csv (1,024 bytes)" in str(back)


def test_memory_running_out_in_a_check_function_is_out_of_memory_not_a_check_error(tmp_path, monkeypatch):
    """A check function (planning its items) that runs out of memory: OutOfMemory, not a check
    error listed under ``skipped``."""
    import dataclasses

    from datacheck.checks import registry

    def raising(ctx):
        raise MemoryError

    spec = registry.CHECKS["empty.text"]
    assert spec.shard is not None
    monkeypatch.setitem(registry.CHECKS, "empty.text", dataclasses.replace(spec, shard=raising))
    path = _csv(tmp_path)
    chash, size = hash_file(path)
    with pytest.raises(OutOfMemory, match="memory ran out while decoding shard.csv"):
        audit_shard(DiscoveredShard(path=path, rel="shard.csv", format="csv"), config_from_dict({}), chash, size)
