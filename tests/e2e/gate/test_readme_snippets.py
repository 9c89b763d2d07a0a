"""The README's Python snippets, as pasted at the top level of a script (no ``if __name__ ==
"__main__":`` guard, as launch scripts are written), run in a real Python process.

The snippets are read from README.md itself (the fenced ``python`` blocks that call
``datacheck.audit`` and ``BatchGuard``), so the README and this test cannot drift apart. Only the
names a snippet leaves to the reader (``data/train``, ``datacheck.toml``; ``ds``, ``sampler``,
``collator``, ``rank``) are supplied around it.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow  # each test starts Python (and worker processes) of its own

_FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def readme_snippet(marker: str) -> str:
    """The one fenced ``python`` block of README.md that contains ``marker``."""
    blocks = [b for b in _FENCE.findall((ROOT / "README.md").read_text(encoding="utf-8")) if marker in b]
    assert len(blocks) == 1, f"README.md: expected one python block with {marker!r}, found {len(blocks)}"
    return blocks[0]


def run_script(tmp_path: Path, code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``code`` as ``tmp_path/launch.py``, run by ``python launch.py`` in ``tmp_path`` (the checkout's
    datacheck first on the path, as an installed one would be)."""
    script = tmp_path / "launch.py"
    script.write_text(code, encoding="utf-8")
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": path, **(env or {})})


def _shards(folder: Path, n: int, empty_row: int | None = None) -> None:
    folder.mkdir(parents=True)
    for k in range(n):
        texts = [f"shard {k} row {i}" for i in range(6)]
        if empty_row is not None and k == 0:
            texts[empty_row] = ""
        pl.DataFrame({"text": texts}).write_parquet(folder / f"part-{k}.parquet")


def test_the_api_gate_runs_at_the_top_level_of_a_script_with_worker_processes(tmp_path):
    snippet = readme_snippet("datacheck.audit(")
    assert "__main__" not in snippet
    _shards(tmp_path / "data" / "train", 3)
    (tmp_path / "datacheck.toml").write_text("")
    # three shards and three workers: the audit runs in a spawned process pool
    done = run_script(tmp_path, snippet + "print('GATE PASSED')\n", env={"DATACHECK_WORKERS": "3"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "'status': 'pass'" in done.stdout and "'shards': 3" in done.stdout
    assert done.stdout.rstrip().endswith("GATE PASSED")
    assert "bootstrapping phase" not in done.stderr and "Traceback" not in done.stderr


def test_the_api_gate_at_the_top_level_fails_with_the_policy_not_a_worker_crash(tmp_path):
    snippet = readme_snippet("datacheck.audit(")
    _shards(tmp_path / "data" / "train", 3, empty_row=2)  # one empty text: empty.text, an error
    (tmp_path / "datacheck.toml").write_text("")
    done = run_script(tmp_path, snippet, env={"DATACHECK_WORKERS": "3"})
    assert done.returncode == 1
    assert "datacheck.model.errors.PolicyFailed" in done.stderr, done.stderr[-3000:]
    assert "InternalError" not in done.stderr and "bootstrapping phase" not in done.stderr
    assert "empty.text" in done.stdout  # the loop over report.findings printed the finding


_LOOP_PREAMBLE = """\
import torch
from torch.utils.data import DataLoader, SequentialSampler

ds = [{"input_ids": torch.tensor([i % 7 + 1, 2, 3]), "attention_mask": torch.ones(3, dtype=torch.long),
       "labels": torch.tensor([-100, 2, 3])} for i in range(40)]
sampler = SequentialSampler(ds)
collator = None   # torch's default_collate
rank = 0
"""

_LOOP_AFTER = """
steps = sum(1 for _ in loader)
print("BATCHES", steps)
"""


@pytest.mark.parametrize("workers", [0, 2])
def test_the_training_loop_snippet_runs_at_the_top_level_of_a_script(tmp_path, workers):
    pytest.importorskip("torch")
    snippet = readme_snippet("BatchGuard(")
    assert "__main__" not in snippet
    (tmp_path / "datacheck.toml").write_text("[tokens]\nvocab_size = 16\n[labels]\nignore_index = -100\n")
    preamble = _LOOP_PREAMBLE
    if workers:  # the loader's own worker processes (Linux: fork), each calling the guard
        preamble += f"_DataLoader = DataLoader\nDataLoader = lambda *a, **k: _DataLoader(*a, num_workers={workers}, **k)\n"
    done = run_script(tmp_path, preamble + snippet + _LOOP_AFTER)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "BATCHES 5" in done.stdout  # 40 rows, batch_size=8
    ledger = tmp_path / "run" / "data-indices" / "rank0.tsv.gz"
    import gzip
    lines = [ln for ln in gzip.decompress(ledger.read_bytes()).decode().splitlines() if ln and not ln.startswith("#")]
    assert [ln.split("\t")[:3] for ln in lines] == [[str(k // 4), "0", str(k % 4)] for k in range(5)]
    assert [list(map(int, ln.split("\t")[4:])) for ln in lines] == [list(range(8 * k, 8 * k + 8)) for k in range(5)]
