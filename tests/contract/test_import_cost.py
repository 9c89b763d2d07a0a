"""Start-up cost: what ``import datacheck`` and ``datacheck audit`` load.

Each case runs a fresh interpreter (``sys.modules`` of the test process already holds everything)
and asserts on the modules it ended with; ``benchmarks/bench_cli_startup.py`` measures the times.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import polars as pl
import pytest
from conftest import ROOT

#: third-party packages that ``import datacheck`` must not load (each costs 20-400 ms, or seconds
#: for torch/transformers); datacheck's own heavy layers likewise
HEAVY = ("polars", "numpy", "pyarrow", "pyarrow.parquet", "pydantic", "pandera", "torch", "transformers",
         "tokenizers", "xxhash", "yaml", "jsonschema", "datacheck.execute.audit", "datacheck.checks.all")

#: what ``datacheck audit`` needs no part of: the other verbs' libraries and the optional stacks
NOT_FOR_AUDIT = ("pandera", "torch", "transformers", "tokenizers", "tensorboard", "jinja2",
                 "datacheck.tools.inspect", "datacheck.tools.clean", "datacheck.tools.diff",
                 "datacheck.tools.infer", "datacheck.execute.plan", "datacheck.torch.guard",
                 "datacheck.torch.replay", "datacheck.trace.run", "datacheck.cli.commands.inspect",
                 "datacheck.cli.commands.plan", "datacheck.cli.commands.trace")


def _py(code: str, env: dict[str, str] | None = None) -> dict:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=300,
                       cwd=ROOT)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_import_datacheck_loads_no_heavy_package():
    out = _py("import sys, json, datacheck; print(json.dumps(sorted(m for m in "
              f"{HEAVY!r} if m in sys.modules)))")
    assert out == []


@pytest.mark.slow
def test_public_names_load_on_first_use():
    out = _py("import sys, json, datacheck\n"
              "before = 'datacheck.execute.audit' in sys.modules\n"
              "from datacheck.api import audit\n"
              "import datacheck.execute.audit as ex\n"
              "same = datacheck.audit is audit is ex.audit and datacheck.Report.__name__ == 'Report'\n"
              "missing = ''\n"
              "try:\n    datacheck.no_such_name\nexcept AttributeError as e:\n    missing = str(e)\n"
              "print(json.dumps([before, same, sorted(set(datacheck.__all__) - set(dir(datacheck))), missing]))")
    assert out == [False, True, [], "module 'datacheck' has no attribute 'no_such_name'"]


@pytest.mark.slow
def test_datacheck_torch_names_load_on_first_use():
    out = _py("import sys, json, datacheck.torch as t\n"
              "before = [m for m in ('datacheck.torch.guard', 'datacheck.model.identity', 'torch') if m in sys.modules]\n"
              "g = t.BatchGuard.__module__\n"
              "print(json.dumps([before, g, 'torch' in sys.modules]))")
    assert out == [[], "datacheck.torch.guard", False]


@pytest.mark.slow
def test_the_training_loops_guard_loads_no_dataframe_library():
    """BatchGuard runs in the training loop (and its DataLoader workers): importing it, the tokenizer's
    facts included, loads neither polars nor pyarrow."""
    out = _py("import sys, json, datacheck.torch.guard, datacheck.derive.tokenizer\n"
              "print(json.dumps(sorted(m for m in ('polars', 'pyarrow') if m in sys.modules)))")
    assert out == []


@pytest.mark.slow
def test_audit_verb_loads_only_what_audit_needs(tmp_path):
    shard = tmp_path / "data" / "a.parquet"
    shard.parent.mkdir()
    pl.DataFrame({"input_ids": [[1, 2, 3], [4, 5, 6]], "labels": [[1, 2, 3], [4, 5, 6]]}).write_parquet(shard)
    code = ("import sys, json, contextlib, io\n"
            "from datacheck.cli.main import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    rc = main(['audit', {str(shard)!r}, '--no-cache', '--report-dir', {str(tmp_path / 'r')!r}])\n"
            f"print(json.dumps([rc, sorted(m for m in {NOT_FOR_AUDIT!r} if m in sys.modules), "
            "'datacheck.cli.commands.audit' in sys.modules]))")
    assert _py(code) == [0, [], True]


@pytest.mark.slow
def test_help_still_lists_every_verb():
    p = subprocess.run([sys.executable, "-m", "datacheck", "--help"], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300, cwd=ROOT)
    verbs = sorted(f.stem for f in (ROOT / "datacheck" / "cli" / "commands").glob("*.py")
                   if not f.stem.startswith("_"))
    assert p.returncode == 0 and len(verbs) >= 10
    listed = [ln.split()[0] for ln in p.stdout.splitlines() if ln.startswith("    ") and not ln.startswith("     ")]
    assert sorted(listed) == verbs


@pytest.mark.slow
def test_unknown_verb_is_a_usage_error_naming_the_choices():
    p = subprocess.run([sys.executable, "-m", "datacheck", "audti", "x"], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300, cwd=ROOT)
    assert p.returncode == 2
    assert "invalid choice: 'audti'" in p.stderr and "'audit'" in p.stderr


_THREADS = ("import os, sys, json\n"
            "from datacheck.cli.main import limit_blas_threads\n"
            "limit_blas_threads()\n"
            "n0 = len(os.listdir('/proc/self/task'))\n"
            "import numpy\n"
            "n1 = len(os.listdir('/proc/self/task'))\n"
            "print(json.dumps([os.environ.get('OPENBLAS_NUM_THREADS'), n1 - n0]))")


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc/self/task (Linux)")
def test_cli_starts_no_blas_threads_unless_the_user_asks():
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    full = {**env, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", _THREADS], capture_output=True, text=True, env=full, timeout=300)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == ["1", 0]  # numpy's import added no OpenBLAS worker thread
    # the user's own setting is kept: OpenBLAS then starts its pool, of at most the cores this process may
    # run on (its affinity, which OpenBLAS reads: none beside the caller's thread under `taskset -c 0`)
    p = subprocess.run([sys.executable, "-c", _THREADS], capture_output=True, text=True,
                       env={**full, "OPENBLAS_NUM_THREADS": "2"}, timeout=300)
    assert json.loads(p.stdout) == ["2", min(2, len(os.sched_getaffinity(0))) - 1]


@pytest.mark.slow
def test_blas_limit_leaves_a_process_with_numpy_loaded_alone():
    out = _py("import os, json, numpy\n"
              "os.environ.pop('OPENBLAS_NUM_THREADS', None)\n"
              "from datacheck.cli.main import limit_blas_threads\n"
              "limit_blas_threads()\n"
              "print(json.dumps(os.environ.get('OPENBLAS_NUM_THREADS')))")
    assert out is None


_POOL = ("import os, sys, json\n"
         "from datacheck.cli.main import choose_arrow_pool\n"
         "choose_arrow_pool()\n"
         "import pyarrow as pa\n"
         "pa.allocate_buffer(1 << 20)\n"  # the pool's first allocation: jemalloc reads its conf
         "print(json.dumps([os.environ.get('ARROW_DEFAULT_MEMORY_POOL'), pa.default_memory_pool().backend_name,\n"
         "                  os.environ.get('JE_ARROW_MALLOC_CONF')]))")


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the CLI chooses the pool on Linux only")
def test_cli_decodes_with_jemalloc_unless_the_user_chose_a_pool():
    env = {k: v for k, v in os.environ.items() if k not in ("ARROW_DEFAULT_MEMORY_POOL", "JE_ARROW_MALLOC_CONF")}
    full = {**env, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", _POOL], capture_output=True, text=True, env=full, timeout=300)
    assert p.returncode == 0, p.stderr
    decay = "dirty_decay_ms:10000,muzzy_decay_ms:10000"
    assert json.loads(p.stdout) == ["jemalloc", "jemalloc", decay]
    # pyarrow warns on stderr when the named pool is not built in, jemalloc on a conf pair it does not take
    assert p.stderr == ""
    p = subprocess.run([sys.executable, "-c", _POOL], capture_output=True, text=True,
                       env={**full, "ARROW_DEFAULT_MEMORY_POOL": "system", "JE_ARROW_MALLOC_CONF": "narenas:2"},
                       timeout=300)
    assert json.loads(p.stdout) == ["system", "system", "narenas:2"]  # the user's own choices are kept


@pytest.mark.slow
def test_arrow_pool_choice_leaves_a_process_with_pyarrow_loaded_alone():
    out = _py("import os, json, pyarrow\n"
              "os.environ.pop('ARROW_DEFAULT_MEMORY_POOL', None)\n"
              "from datacheck.cli.main import choose_arrow_pool\n"
              "choose_arrow_pool()\n"
              "print(json.dumps(os.environ.get('ARROW_DEFAULT_MEMORY_POOL')))")
    assert out is None


@pytest.mark.slow
def test_version_loads_no_verb():
    out = _py("import sys, json, contextlib, io\n"
              "from datacheck.cli.main import main\n"
              "buf = io.StringIO()\n"
              "with contextlib.redirect_stdout(buf):\n"
              "    try:\n        main(['--version'])\n    except SystemExit as e:\n        rc = e.code\n"
              "print(json.dumps([rc, buf.getvalue().split()[0], "
              "sorted(m for m in sys.modules if m.startswith('datacheck.cli.commands.'))]))")
    assert out == [0, "datacheck", []]


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                    reason="mallopt is glibc's")
def test_cli_keeps_freed_memory_for_reuse(monkeypatch):
    """The CLI sets glibc's mmap and trim thresholds before any verb runs (keep_freed_memory), so a
    batch's large numpy arrays reuse the memory the last batch freed instead of new pages."""
    import datacheck.cli.main as cli_main

    assert cli_main.keep_freed_memory() is True
    calls: list[str] = []
    monkeypatch.setattr(cli_main, "keep_freed_memory", lambda: calls.append("set") or True)
    with pytest.raises(SystemExit) as e:
        cli_main.main(["--version"])
    assert e.value.code == 0 and calls == ["set"]
